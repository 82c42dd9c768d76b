package cli

import (
	"io"
	"strings"
	"testing"
)

// TestLinkSetStates checks that a link is set to one state at a time: up,
// down or blackhole.
func TestLinkSetStates(t *testing.T) {
	for _, args := range [][]string{
		{"--down", "--blackhole"},
		{"--up", "--blackhole"},
		{"--up", "--down"},
		{"--up", "--down", "--blackhole"},
	} {
		root := newRoot(io.Discard, io.Discard)
		root.SetArgs(append([]string{"testbed", "link", "set", "--name", "nosuchbed", "wan"}, args...))
		err := root.Execute()
		if want := "testbed link set: --up, --down and --blackhole exclude each other"; err == nil || err.Error() != want {
			t.Errorf("link set %s: error %v, want %q", strings.Join(args, " "), err, want)
		}
	}
	root := newRoot(io.Discard, io.Discard)
	root.SetArgs([]string{"testbed", "link", "set", "--name", "nosuchbed", "wan", "--blackhole"})
	if err := root.Execute(); err == nil || strings.Contains(err.Error(), "exclude") {
		t.Errorf("link set --blackhole on a testbed that is not up: error %v, want one about the testbed", err)
	}
}
