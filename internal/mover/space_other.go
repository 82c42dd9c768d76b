//go:build !linux

package mover

import (
	"errors"
	"io/fs"
	"os"
)

func freeSpace(root *os.Root, dir string) (int64, error) { return 0, errors.ErrUnsupported }

func allocated(fi fs.FileInfo) int64 { return fi.Size() }
