//go:build linux

package agent

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/cgroup2"
)

// WithCgroups resolves the cgroups that want's marking rules name (see
// withCgroups): each gets its cgroup's id (CgroupID), which the kernel
// matches.
func WithCgroups(want Plan) (Plan, map[uint8]error) {
	var root string
	var rootErr error
	return withCgroups(want, func(path string) (uint64, error) {
		if root == "" && rootErr == nil {
			root, rootErr = cgroup2.Mount()
		}
		if rootErr != nil {
			return 0, rootErr
		}
		id, err := cgroupID(filepath.Join(root, path))
		if err != nil {
			return 0, fmt.Errorf("cgroup %s: %w", path, err)
		}
		return id, nil
	})
}

// cgroupID is the id of the cgroup at dir: on cgroup2, its inode number.
func cgroupID(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, errors.New("does not exist on this host")
		}
		return 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, errors.New("is not a cgroup (not a directory)")
	}
	return st.Ino, nil
}

// cgroupIDOf is the cgroup id a rule's expressions compare the socket's
// cgroup with (0 if none): the 8-byte comparison, the only one of that size
// a rule of the agent's makes (the socket expression before it is not
// read back by google/nftables: see readable).
func cgroupIDOf(es []expr.Any) uint64 {
	for _, e := range es {
		if c, ok := e.(*expr.Cmp); ok && len(c.Data) == 8 {
			return binaryutil.NativeEndian.Uint64(c.Data)
		}
	}
	return 0
}
