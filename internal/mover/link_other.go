//go:build !linux

package mover

import (
	"errors"
	"os"
)

func punchHole(f *os.File, off, n int64) error { return errors.ErrUnsupported }

func memFile(name string) (*os.File, error) { return nil, errors.ErrUnsupported }
