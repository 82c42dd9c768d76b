//go:build linux

package mover

import (
	"os"

	"golang.org/x/sys/unix"
)

// punchHole deallocates a range of a file, keeping its size.
func punchHole(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}

// memFile makes an anonymous in-memory file.
func memFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
