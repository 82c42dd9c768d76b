//go:build !unix

package store

import (
	"fmt"

	"github.com/lightpath/lightpath/internal/platform"
)

// tryFileLock: the SQLite leader lock is a flock, which this system lacks.
func tryFileLock(path string) (heldLock, error) {
	return nil, fmt.Errorf("lock %s: %w", path, platform.ErrUnsupported)
}
