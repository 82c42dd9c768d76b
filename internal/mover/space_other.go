//go:build !linux

package mover

import (
	"io/fs"

	"github.com/lightpath/lightpath/internal/platform"
)

func freeSpace(root opener, dir string) (int64, error) { return 0, platform.ErrUnsupported }

func allocated(fi fs.FileInfo) int64 { return fi.Size() }
