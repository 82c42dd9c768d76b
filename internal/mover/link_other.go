//go:build !linux

package mover

import (
	"os"

	"github.com/lightpath/lightpath/internal/platform"
)

func punchHole(f *os.File, off, n int64) error { return platform.ErrUnsupported }

func memFile(name string) (*os.File, error) { return nil, platform.ErrUnsupported }
