//go:build linux

package mover

import "golang.org/x/sys/unix"

func setRcvLowat(fd, n int) { unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, n) }
