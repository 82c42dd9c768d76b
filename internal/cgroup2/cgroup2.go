// Package cgroup2 finds the cgroup2 hierarchy: where it is mounted, from
// /proc/self/mountinfo (/sys/fs/cgroup on most systems, a subdirectory
// such as /sys/fs/cgroup/unified on hybrid ones). The agent resolves a flow
// spec's cgroup under it, and `lightpath run` makes its cgroups there.
package cgroup2

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Mount finds where this host's cgroup2 hierarchy is mounted.
func Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("no cgroup2 hierarchy: %w", err)
	}
	defer f.Close()
	return ParseMount(f)
}

// ParseMount finds the cgroup2 hierarchy's mount point in mountinfo's
// text: the first cgroup2 mount of the hierarchy's root, else the first
// cgroup2 mount.
func ParseMount(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var first string
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" {
			continue
		}
		mnt := unescape(fields[4])
		if fields[3] == "/" {
			return mnt, nil
		}
		if first == "" {
			first = mnt
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("no cgroup2 hierarchy: %w", err)
	}
	if first == "" {
		return "", errors.New("no cgroup2 file system is mounted (/proc/self/mountinfo)")
	}
	return first, nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
