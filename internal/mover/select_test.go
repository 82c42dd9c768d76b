package mover

import (
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/wire"
)

func TestExcluded(t *testing.T) {
	inc := func(p string) wire.Rule { return wire.Rule{Include: true, Pattern: p} }
	exc := func(p string) wire.Rule { return wire.Rule{Pattern: p} }
	for _, tc := range []struct {
		name  string
		rules []wire.Rule
		rel   string
		dir   bool
		want  bool
	}{
		{"no rules", nil, "t/a.txt", false, false},
		{"name pattern", []wire.Rule{exc("*.tmp")}, "t/a/b.tmp", false, true},
		{"name pattern, other name", []wire.Rule{exc("*.tmp")}, "t/a/b.dat", false, false},
		{"path pattern", []wire.Rule{exc("t/a/*")}, "t/a/b.dat", false, true},
		{"path pattern, deeper", []wire.Rule{exc("t/a/*")}, "t/a/b/c.dat", false, false},
		{"star does not cross slashes", []wire.Rule{exc("t/*.dat")}, "t/a/c.dat", false, false},
		{"top-level source by name", []wire.Rule{exc("t")}, "t", true, true},
		{"dir pattern matches a directory", []wire.Rule{exc("cache/")}, "t/cache", true, true},
		{"dir pattern skips a file", []wire.Rule{exc("cache/")}, "t/cache", false, false},
		{"first match wins: include", []wire.Rule{inc("*.h5"), exc("*")}, "t/x.h5", false, false},
		{"first match wins: exclude", []wire.Rule{inc("*.h5"), exc("*")}, "t/x.txt", false, true},
		{"include directories first", []wire.Rule{inc("*/"), inc("*.h5"), exc("*")}, "t/sub", true, false},
		{"order given", []wire.Rule{exc("*"), inc("*.h5")}, "t/x.h5", false, true},
		{"bracket class", []wire.Rule{exc("run[0-9].log")}, "t/run7.log", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Excluded(tc.rules, tc.rel, tc.dir); got != tc.want {
				t.Errorf("Excluded(%v, %q, dir %v) = %v, want %v", tc.rules, tc.rel, tc.dir, got, tc.want)
			}
		})
	}
}

func TestCheckRule(t *testing.T) {
	for _, p := range []string{"", "[", "a[", strings.Repeat("x", wire.MaxRulePattern+1)} {
		if CheckRule(p) == nil {
			t.Errorf("CheckRule(%q) accepted", p)
		}
	}
	for _, p := range []string{"*.tmp", "t/a/*", "cache/", "run[0-9].log"} {
		if err := CheckRule(p); err != nil {
			t.Errorf("CheckRule(%q): %v", p, err)
		}
	}
}

func TestLinkOutside(t *testing.T) {
	for _, tc := range []struct {
		path, target string
		outside      bool
	}{
		{"t/rel", "a/x", false},
		{"t/a/up", "../b", false},
		{"t/a/b/up", "../../c", false},
		{"t/abs", "/etc/hostname", true},
		{"t/empty", "", true},
		{"t/a/out", "../../outside", true},
		{"t/dotdot", "..", true},
		{"t/sibling", "../u/x", true},
		{"t/x", "L/../../outside/secret.txt", true},
	} {
		got := linkOutside(wire.Entry{Kind: wire.EntrySymlink, Path: tc.path, Target: tc.target}, wire.LinksCopy)
		if (got != "") != tc.outside || got != "" && !IsLinkSkip(got) {
			t.Errorf("%s -> %s: %q, want outside %v", tc.path, tc.target, got, tc.outside)
		}
	}
}
