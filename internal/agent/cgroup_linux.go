//go:build linux

package agent

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
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
			root, rootErr = cgroup2Mount()
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

// cgroup2Mount finds where the cgroup2 hierarchy's root is mounted
// (/sys/fs/cgroup on most systems, /sys/fs/cgroup/unified on hybrid ones).
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("no cgroup2 hierarchy: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(fs) > 0 && fs[0] == "cgroup2" && fields[3] == "/" {
			return unescapeMount(fields[4]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("no cgroup2 hierarchy: %w", err)
	}
	return "", errors.New("no cgroup2 hierarchy is mounted on this host")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, ok := octal(s[i+1 : i+4]); ok {
				b.WriteByte(n)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		n = n*8 + int(c-'0')
	}
	return byte(n), n < 256
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
