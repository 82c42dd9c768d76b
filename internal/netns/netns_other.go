//go:build !linux

package netns

import (
	"fmt"

	"github.com/lightpath/lightpath/internal/platform"
)

// Do runs fn; another namespace than the caller's needs Linux.
func Do(path string, fn func() error) error {
	if path != "" {
		return fmt.Errorf("network namespace %s: %w", path, platform.ErrUnsupported)
	}
	return fn()
}

// Create needs Linux.
func Create(name string) error {
	return fmt.Errorf("create network namespace %s: %w", name, platform.ErrUnsupported)
}

// Delete needs Linux.
func Delete(name string) error {
	return fmt.Errorf("delete network namespace %s: %w", name, platform.ErrUnsupported)
}
