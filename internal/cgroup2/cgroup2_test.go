package cgroup2

import (
	"strings"
	"testing"
)

func TestParseMount(t *testing.T) {
	for _, tc := range []struct{ name, in, want, err string }{
		{name: "hybrid", in: `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`, want: "/sys/fs/cgroup/unified"},
		{name: "unified with optional fields", in: "29 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", want: "/sys/fs/cgroup"},
		{name: "root mount preferred", in: "1 0 0:1 /sub /a rw - cgroup2 cgroup2 rw\n2 0 0:1 / /b\\040c rw - cgroup2 cgroup2 rw\n", want: "/b c"},
		{name: "only a subtree", in: "1 0 0:1 /sub /a rw - cgroup2 cgroup2 rw\n", want: "/a"},
		{name: "none", in: "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw\n", err: "no cgroup2"},
		{name: "garbage", in: "- cgroup2\n\n x y z\n", err: "no cgroup2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMount(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		"/sys/fs/cgroup/unified": "/sys/fs/cgroup/unified",
		`/mnt/a\040b`:            "/mnt/a b",
		`/mnt/tab\011x\134`:      "/mnt/tab\tx\\",
		`/mnt/bad\9`:             `/mnt/bad\9`,
		`/mnt/end\04`:            `/mnt/end\04`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
