//go:build !linux

package mover

func setRcvLowat(fd, n int) {}
