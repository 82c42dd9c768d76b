package mover

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// freeSpace is what an unprivileged writer may still put in dir's
// filesystem.
func freeSpace(root opener, dir string) (int64, error) {
	f, err := root.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// allocated is the space a file's data takes on disk (its size less its
// holes, rounded to the filesystem's blocks), at most its size.
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return min(st.Blocks*512, fi.Size())
	}
	return fi.Size()
}
