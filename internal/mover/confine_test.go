package mover

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/transfer/grant"
)

// outsideOf lists what lies under root but outside the directories keep
// (relative to root), other than what was there before (pre): a write
// that escaped a grant shows up here.
func outsideOf(t *testing.T, root string, keep []string, pre map[string]bool) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		for _, k := range keep {
			if rel == k || strings.HasPrefix(rel, k+"/") {
				return nil
			}
			if strings.HasPrefix(k, rel+"/") || rel == "." {
				return nil // on the way to what is kept
			}
		}
		if !pre[rel] {
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestLinkSwap is issue 28's first finding, as its attacker ran it: with
// a write grant for in3, session 1 pushes private/ with the dirs b/c, the
// link a -> b/c and the link l -> a/../../private (inside in3 when made);
// session 2 pushes a -> . over a (overwrite); session 3 pushes
// private/l/pwned.txt, which would land in the root's own private/. The
// second session is refused (a push never retargets a link); the link is
// then swapped behind the server's back (as the node's owner, another
// program or an older release could have), and the third session cannot
// write through l out of in3. Nothing outside in3 is written. The same
// sessions against a server with no grants (serve --root DIR, pushing into
// DIR itself) write nothing outside DIR.
func TestLinkSwap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		granted bool
	}{{"grant", true}, {"root", false}} {
		t.Run(tc.name, func(t *testing.T) {
			// outer holds the server's root or the grant's directory
			// (mine), and private/ beside it, which must stay empty.
			var outer, mine, remote, want string
			cfg := ClientConfig{Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}}
			if tc.granted {
				gs := serveGranted(t, nil)
				outer, mine, remote, want = gs.root, "in3", "in3/", "grant: path not covered: it leads outside in3"
				cfg.Addr = gs.addr
				cfg.Grant = gs.sign(t, func(g *grant.Grant) { g.Paths = []string{"in3"} })
			} else {
				outer, mine, remote, want = t.TempDir(), "srv", "/", "path leads outside the served directory"
				os.Mkdir(filepath.Join(outer, mine), 0o755)
				cfg.Addr = serveConfig(t, ServerConfig{Root: filepath.Join(outer, mine)})
			}
			if err := os.MkdirAll(filepath.Join(outer, "private"), 0o755); err != nil {
				t.Fatal(err)
			}
			pre := map[string]bool{"private": true}
			push := func(local string, pol Policy) (Summary, error) {
				src := sourceOf(t, local, true)
				return Copy(context.Background(), Job{Config: cfg, Options: Options{Recursive: true, Policy: pol, Symlinks: LinksCopy},
					Direction: Push, Source: src, Remote: remote, Retries: 1})
			}
			at := filepath.Join(outer, mine, "private")

			s1 := filepath.Join(t.TempDir(), "private")
			os.MkdirAll(filepath.Join(s1, "b", "c"), 0o755)
			os.Symlink("b/c", filepath.Join(s1, "a"))
			os.Symlink("a/../../private", filepath.Join(s1, "l"))
			if sum, err := push(s1, Overwrite); err != nil {
				t.Fatalf("session 1: %v (%q)", err, sum.Failures)
			}
			if got, err := os.Readlink(filepath.Join(at, "l")); err != nil || got != "a/../../private" {
				t.Fatalf("session 1 did not make the link l: %q, %v", got, err)
			}

			s2 := filepath.Join(t.TempDir(), "private")
			os.MkdirAll(s2, 0o755)
			os.Symlink(".", filepath.Join(s2, "a"))
			sum, err := push(s2, Overwrite)
			var ff *FilesFailedError
			if !errors.As(err, &ff) || !strings.Contains(strings.Join(sum.Failures, "\n"), "private/a: destination "+strings.TrimPrefix(remote, "/")+"private/a is a symbolic link: a copy does not replace links") {
				t.Errorf("session 2: %v, failures %q: want the link a kept, refused", err, sum.Failures)
			}
			if got, _ := os.Readlink(filepath.Join(at, "a")); got != "b/c" {
				t.Errorf("session 2 retargeted a: now -> %q", got)
			}
			os.Remove(filepath.Join(at, "a"))
			os.Symlink(".", filepath.Join(at, "a"))

			s3 := filepath.Join(t.TempDir(), "private")
			os.MkdirAll(filepath.Join(s3, "l"), 0o755)
			os.WriteFile(filepath.Join(s3, "l", "pwned.txt"), []byte("pwned"), 0o644)
			sum, err = push(s3, Overwrite)
			if err == nil || !strings.Contains(strings.Join(sum.Failures, "\n"), "private/l/pwned.txt: create directory "+strings.TrimPrefix(remote, "/")+"private/l: "+want) {
				t.Errorf("session 3: %v, failures %q: want %q", err, sum.Failures, want)
			}
			// Session 4 names a destination through l: the session is
			// refused before anything is made.
			f4 := filepath.Join(t.TempDir(), "pwned4.txt")
			os.WriteFile(f4, []byte("pwned"), 0o644)
			_, err = Copy(context.Background(), Job{Config: cfg, Direction: Push, Source: sourceOf(t, f4, false),
				Remote: remote + "private/l/x/", Retries: 1})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("session 4: %v, want %q", err, want)
			}
			if out := outsideOf(t, outer, []string{mine}, pre); len(out) > 0 {
				t.Errorf("written outside %s: %v", mine, out)
			}
		})
	}
}

// TestDestFSBase: which directory a path under a grant is written beneath.
func TestDestFSBase(t *testing.T) {
	for _, tc := range []struct {
		paths    []string
		p        string
		dir, rel string
		ok       bool
	}{
		{[]string{"in3"}, "in3/a/b.txt", "in3", "a/b.txt", true},
		{[]string{"in3"}, "in3/.b.txt" + partSuffix, "in3", ".b.txt" + partSuffix, true},
		{[]string{"in3"}, "in3", ".", "in3", true}, // the entry at the grant's path: its parent
		{[]string{"in3"}, "in30/x", "", "", false},
		{[]string{"in3"}, "private/x", "", "", false},
		{[]string{"."}, "any/x", ".", "any/x", true},
		{[]string{"in", "in/run/a.bin"}, "in/run/a.bin/x", "in/run/a.bin", "x", true},
		{[]string{"in", "in/run"}, "in/run/x", "in/run", "x", true}, // the tightest
		{[]string{"in/run/a.bin"}, "in/run/a.bin", "in/run", "a.bin", true},
		{[]string{"in/run/a.bin"}, "in/run/.a.bin" + partSuffix, "in/run", ".a.bin" + partSuffix, true},
		{[]string{"in/run/a.bin"}, "in/run/.a.bin" + journalSuffix, "in/run", ".a.bin" + journalSuffix, true},
		{[]string{"in/run/a.bin"}, "in/run/b.bin", "", "", false},
	} {
		d := newDestFS(nil, &grant.Grant{Paths: tc.paths})
		dir, rel, ok := d.base(tc.p)
		if dir != tc.dir || rel != tc.rel || ok != tc.ok {
			t.Errorf("%v: base(%q) = %q, %q, %v; want %q, %q, %v", tc.paths, tc.p, dir, rel, ok, tc.dir, tc.rel, tc.ok)
		}
	}
}

// TestDestFSConfined: every operation of a receiver under a grant stays
// beneath the grant's directory, through whatever links are there; the
// grant's own directory is reached through directories only.
func TestDestFSConfined(t *testing.T) {
	top := t.TempDir()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(top, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		if err := os.Symlink(target, filepath.Join(top, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("in3/d")
	mk("private")
	mk("real")
	link("../private", "in3/out") // leads out of in3, within the root
	link("d", "in3/in")           // stays in in3
	link("../../private", "in3/d/up")
	link("real", "via")            // a grant's directory through a link
	link("../private", "in3/job7") // a later grant's directory, a link
	os.WriteFile(filepath.Join(top, "private", "secret"), []byte("s"), 0o644)
	root, err := os.OpenRoot(top)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	const outside = "grant: path not covered: it leads outside in3"
	for _, tc := range []struct {
		name  string
		paths []string
		op    func(d *destFS) error
		want  string // "" for success
	}{
		{"create through a link out", []string{"in3"}, func(d *destFS) error {
			f, err := d.OpenFile("in3/out/x", os.O_WRONLY|os.O_CREATE, 0o600)
			if err == nil {
				f.Close()
			}
			return err
		}, outside},
		{"create through a link in", []string{"in3"}, func(d *destFS) error {
			f, err := d.OpenFile("in3/in/x", os.O_WRONLY|os.O_CREATE, 0o600)
			if err == nil {
				f.Close()
			}
			return err
		}, ""},
		{"mkdir through a link out", []string{"in3"}, func(d *destFS) error { return d.MkdirAll("in3/d/up/new", 0o755) }, outside},
		{"read through a link out", []string{"in3"}, func(d *destFS) error {
			f, err := d.Open("in3/out/secret")
			if err == nil {
				f.Close()
			}
			return err
		}, outside},
		{"rename through a link out", []string{"in3"}, func(d *destFS) error {
			f, err := d.OpenFile("in3/.x"+partSuffix, os.O_WRONLY|os.O_CREATE, 0o600)
			if err != nil {
				return err
			}
			f.Close()
			return d.Rename("in3/.x"+partSuffix, "in3/out/x")
		}, outside},
		{"chmod through a link out", []string{"in3"}, func(d *destFS) error { return d.Chmod("in3/out/secret", 0o777) }, outside},
		{"symlink through a link out", []string{"in3"}, func(d *destFS) error { return d.Symlink("x", "in3/out/l") }, outside},
		{"remove through a link out", []string{"in3"}, func(d *destFS) error { return d.Remove("in3/out/secret") }, outside},
		{"outside the grant", []string{"in3"}, func(d *destFS) error { return d.MkdirAll("private/x", 0o755) }, `grant: path not covered: "private/x" is outside in3`},
		{"grant's directory a link", []string{"in3/job7"}, func(d *destFS) error { return d.MkdirAll("in3/job7/x", 0o755) }, "grant: path not covered: in3/job7 is a symbolic link, and a grant's directory is reached through directories only"},
		{"link on the way to the grant's directory", []string{"via/in"}, func(d *destFS) error { return d.MkdirAll("via/in/x", 0o755) }, "via is a symbolic link"},
		{"grant's directory made", []string{"new/job"}, func(d *destFS) error { return d.MkdirAll("new/job/x/y", 0o755) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDestFS(root, &grant.Grant{Mode: grant.Write, Paths: tc.paths})
			defer d.close()
			err := tc.op(d)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%v, want success", err)
			case tc.want != "" && (err == nil || !strings.Contains(cleanPathError(err).Error(), tc.want)):
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
	if out := outsideOf(t, top, []string{"in3", "new"}, map[string]bool{"private": true, "private/secret": true, "real": true, "via": true}); len(out) > 0 {
		t.Errorf("written outside the grants: %v", out)
	}
	if fi, _ := os.Stat(filepath.Join(top, "private", "secret")); fi == nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("private/secret changed: %v", fi)
	}
}

// TestLinkKept: a copy never replaces a link at its destination, whatever
// comes in its place, under --overwrite and --update; the same link again
// is there already, and --skip-existing skips.
func TestLinkKept(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "d"), 0o755)
	os.Symlink("x", filepath.Join(root, "d", "l"))
	addr := serveConfig(t, ServerConfig{Root: root})
	cfg := ClientConfig{Addr: addr, Streams: 1, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}}
	const kept = "d/l: destination d/l is a symbolic link: a copy does not replace links (remove it at the destination first)"
	for _, tc := range []struct {
		name string
		make func(dir string)
		pol  Policy
		want string // "" for success
	}{
		{"file, overwrite", func(d string) { os.WriteFile(filepath.Join(d, "l"), []byte("f"), 0o644) }, Overwrite, kept},
		{"file, update", func(d string) { os.WriteFile(filepath.Join(d, "l"), []byte("f"), 0o644) }, Update, kept},
		{"other link, overwrite", func(d string) { os.Symlink("y", filepath.Join(d, "l")) }, Overwrite, kept},
		{"same link, overwrite", func(d string) { os.Symlink("x", filepath.Join(d, "l")) }, Overwrite, ""},
		{"same link, refuse", func(d string) { os.Symlink("x", filepath.Join(d, "l")) }, Refuse, ""},
		{"other link, skip", func(d string) { os.Symlink("y", filepath.Join(d, "l")) }, Skip, ""},
		{"file, skip", func(d string) { os.WriteFile(filepath.Join(d, "l"), []byte("f"), 0o644) }, Skip, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := filepath.Join(t.TempDir(), "d")
			os.MkdirAll(local, 0o755)
			tc.make(local)
			src := sourceOf(t, local, true)
			sum, err := Copy(context.Background(), Job{Config: cfg, Options: Options{Recursive: true, Policy: tc.pol, Symlinks: LinksCopy},
				Direction: Push, Source: src, Remote: "/", Retries: 1})
			if tc.want == "" && err != nil {
				t.Fatalf("%v (%q)", err, sum.Failures)
			}
			if tc.want != "" && !strings.Contains(strings.Join(sum.Failures, "\n"), tc.want) {
				t.Fatalf("%v, failures %q: want %q", err, sum.Failures, tc.want)
			}
			if got, err := os.Readlink(filepath.Join(root, "d", "l")); err != nil || got != "x" {
				t.Errorf("the link changed: -> %q, %v", got, err)
			}
		})
	}
}
