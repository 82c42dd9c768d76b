//go:build !linux

package collect

import (
	"fmt"
	"syscall"
)

// inNetNS runs fn; another namespace than the caller's needs Linux.
func inNetNS(path string, fn func() error) error {
	if path != "" {
		return fmt.Errorf("network namespace %s: %w", path, ErrNotImplemented)
	}
	return fn()
}

func freebind(string, string, syscall.RawConn) error { return nil }
