//go:build !linux

package collect

import (
	"fmt"
	"syscall"

	"github.com/lightpath/lightpath/internal/platform"
)

// inNetNS runs fn; another namespace than the caller's needs Linux.
func inNetNS(path string, fn func() error) error {
	if path != "" {
		return fmt.Errorf("network namespace %s: %w", path, platform.ErrUnsupported)
	}
	return fn()
}

func freebind(string, string, syscall.RawConn) error { return nil }
