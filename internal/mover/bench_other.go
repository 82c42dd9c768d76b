//go:build !linux

package mover

import (
	"fmt"

	"github.com/lightpath/lightpath/internal/platform"
)

func directFlag() (int, error) {
	return 0, fmt.Errorf("reading around the page cache (O_DIRECT): %w", platform.ErrUnsupported)
}
