//go:build !linux

package collect

import "syscall"

func freebind(string, string, syscall.RawConn) error { return nil }
