//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// fileLock is an exclusive flock on a file of its own. flock locks belong
// to the open file, not the process, so they are neither dropped when
// another descriptor of the file closes (as POSIX record locks are) nor
// shared by two opens in one process; the kernel drops it when the
// holder exits, however it dies.
type fileLock struct {
	f *os.File
}

// tryFileLock takes the lock on path (created, mode 0600, when missing);
// nil when another holds it.
func tryFileLock(path string) (heldLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	switch {
	case errors.Is(err, unix.EWOULDBLOCK):
		f.Close()
		return nil, nil
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &fileLock{f: f}, nil
}

func (l *fileLock) lost() <-chan struct{} { return nil }

func (l *fileLock) release() error {
	// Closing the only descriptor of this open file drops the lock.
	return l.f.Close()
}
