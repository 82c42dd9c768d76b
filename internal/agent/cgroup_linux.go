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

// maxTag is the longest rule comment the kernel keeps (NFT_USERDATA_MAXLEN
// is 256 bytes, with its type and length).
const maxTag = 250

// WithCgroups resolves the cgroups that want's marking rules name: each
// gets its cgroup's id (CgroupID), which the kernel matches. A rule whose
// cgroup does not exist (or cannot be matched) is left out, and the reason
// is returned under the DSCP it sets, so the agent can report it against
// that reservation.
func WithCgroups(want Plan) (Plan, map[uint8]error) {
	var errs map[uint8]error
	fail := func(dscp uint8, err error) {
		if errs == nil {
			errs = map[uint8]error{}
		}
		errs[dscp] = errors.Join(errs[dscp], err)
	}
	var root string
	var rootErr error
	out := want
	out.Nft = nil
	for _, r := range want.Nft {
		if r.Flow.Cgroup == "" {
			out.Nft = append(out.Nft, r)
			continue
		}
		if len(r.tag()) > maxTag {
			fail(r.SetDSCP, fmt.Errorf("flow %q is too long for a rule's comment (%d bytes of %d): use a shorter cgroup path", r.Flow, len(r.tag()), maxTag))
			continue
		}
		if root == "" && rootErr == nil {
			root, rootErr = cgroup2.Mount()
		}
		if rootErr != nil {
			fail(r.SetDSCP, fmt.Errorf("flow %q: %w", r.Flow, rootErr))
			continue
		}
		id, err := cgroupID(filepath.Join(root, r.Flow.Cgroup))
		if err != nil {
			fail(r.SetDSCP, fmt.Errorf("flow %q: cgroup %s: %w", r.Flow, r.Flow.Cgroup, err))
			continue
		}
		r.CgroupID = id
		out.Nft = append(out.Nft, r)
	}
	out.NftTable = len(out.Nft) > 0
	return out, errs
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
