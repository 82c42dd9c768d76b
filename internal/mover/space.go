package mover

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"sync"
	"syscall"

	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/units"
)

// DefaultMaxFileSize bounds the size of one file a receiver accepts when its
// Dest names no limit: 16 TiB, the largest file ext4 holds with 4 KiB blocks.
const DefaultMaxFileSize int64 = 16 << 40

// maxBlocks is how many blocks the protocol can index (a uint32).
const maxBlocks = math.MaxUint32 + 1

// checkSize refuses a size no receiver should act on: larger than the
// configured maximum, or cut into more blocks than the protocol indexes.
func (d Dest) checkSize(size, blockSize int64) error {
	limit := d.MaxFileSize
	if limit <= 0 {
		limit = DefaultMaxFileSize
	}
	if size > limit {
		return retry.WithFault(fmt.Errorf("announced size %s exceeds the receiver's limit of %s per file%s", units.FormatSize(size), units.FormatSize(limit), d.LimitHint), retry.FaultNoSpace)
	}
	if blockSize <= 0 || (size+blockSize-1)/blockSize > maxBlocks {
		return fmt.Errorf("announced size %s is more than %d blocks of %s", units.FormatSize(size), int64(maxBlocks), units.FormatSize(blockSize))
	}
	return nil
}

// Space is a ledger of the room promised to files being received into one
// destination: a file is accepted only if the filesystem's free space, less
// what earlier accepted files have yet to write, holds it. A server shares
// one among all its sessions.
type Space struct {
	mu       sync.Mutex
	reserved int64
}

// NewSpace returns an empty ledger.
func NewSpace() *Space { return &Space{} }

// errNoSpace is wrapped by refusals for lack of room.
var errNoSpace = retry.WithFault(errors.New("not enough space at the destination"), retry.FaultNoSpace)

// reserve sets need bytes aside for a file about to be received in dir, or
// says how much is missing. It returns what it set aside (0 where the
// filesystem cannot say how much is free).
func (d Dest) reserve(fsys opener, s *Space, dir, name string, need int64) (int64, error) {
	if need <= 0 {
		return 0, nil
	}
	free, err := freeSpace(fsys, dir)
	if err != nil {
		return 0, nil // no statfs here: ENOSPC is caught as it comes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	avail := max(free-s.reserved, 0)
	if need > avail {
		return 0, fmt.Errorf("%w: %s free, %s needs %s: free space there or choose another destination", errNoSpace,
			units.FormatSize(avail), path.Base(name), units.FormatSize(need))
	}
	s.reserved += need
	return need, nil
}

// release gives back n reserved bytes.
func (s *Space) release(n int64) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.reserved = max(s.reserved-n, 0)
	s.mu.Unlock()
}

// isNoSpace says whether err is the filesystem running out of room.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// FreeSpace is the free space, in bytes, of the filesystem holding dir
// under root, as an unprivileged writer may use it (statfs's available
// blocks); an error where the system cannot say.
func FreeSpace(root *os.Root, dir string) (int64, error) { return freeSpace(root, dir) }
