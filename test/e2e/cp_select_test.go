//go:build linux

package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// makeSelectTree makes a tree with what --include, --exclude and
// --symlinks act on; outside is a file next to the tree.
func makeSelectTree(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "tree", "a", "x.h5"), "x\n", 0o644)
	writeFile(t, filepath.Join(dir, "tree", "a", "b", "y.tmp"), "y\n", 0o644)
	writeFile(t, filepath.Join(dir, "tree", "a", "b", "w.h5"), "w\n", 0o644)
	writeFile(t, filepath.Join(dir, "tree", "cache", "z.h5"), "z\n", 0o644)
	writeFile(t, filepath.Join(dir, "tree", "top.txt"), "top\n", 0o644)
	writeFile(t, filepath.Join(dir, "outside.txt"), "outside\n", 0o644)
	for link, target := range map[string]string{
		"tree/rel":     "a/x.h5",
		"tree/dirlink": "a/b",
		"tree/abs":     filepath.Join(dir, "outside.txt"),
		"tree/a/out":   "../../outside.txt",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
}

// listTree lists dir's entries as "path type" (f, d or l -> target).
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			tg, _ := os.Readlink(p)
			out = append(out, rel+" -> "+tg)
		case d.IsDir():
			out = append(out, rel+"/")
		default:
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// TestCpSelect copies a tree with --include/--exclude, each --symlinks
// treatment and --dry-run, pushing and pulling: the server walks a pull,
// so the options travel in the request.
func TestCpSelect(t *testing.T) {
	t.Parallel()
	for _, push := range []bool{true, false} {
		t.Run(map[bool]string{true: "push", false: "pull"}[push], func(t *testing.T) {
			dir := scratchDir(t)
			root := mkdir(t, dir, "root")
			local := mkdir(t, dir, "local")
			srcDir := local
			if !push {
				srcDir = root
			}
			makeSelectTree(t, srcDir)
			srv := startServer(t, root)
			n := 0
			// run copies the tree into a fresh destination directory with
			// flags and returns the run and the destination's listing.
			run := func(flags ...string) (result, string) {
				n++
				name := "d" + string(rune('0'+n))
				var args []string
				var dst string
				if push {
					args = []string{filepath.Join(local, "tree"), srv.URL(name + "/")}
					dst = filepath.Join(root, name)
				} else {
					dst = filepath.Join(local, name)
					args = []string{srv.URL("tree"), dst + "/"}
				}
				return runLP(t, runOpts{}, append(append([]string{"cp", "-r"}, flags...), args...)...), dst
			}
			check := func(what string, dst string, want ...string) {
				t.Helper()
				got := listTree(t, dst)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("%s: the copy holds\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
				}
			}

			t.Run("links leading outside are skipped with a warning", func(t *testing.T) {
				r, dst := run()
				mustSucceed(t, "cp -r", r)
				check("cp -r", dst, "tree/", "tree/a/", "tree/a/b/", "tree/a/b/w.h5", "tree/a/b/y.tmp", "tree/a/x.h5",
					"tree/cache/", "tree/cache/z.h5", "tree/dirlink -> a/b", "tree/rel -> a/x.h5", "tree/top.txt")
				for _, w := range []string{"tree/abs -> ", "tree/a/out -> ../../outside.txt"} {
					if !strings.Contains(r.stderr, "lightpath: cp: warning: symlink leads outside the tree, skipped: "+w) {
						t.Errorf("no warning about %s on stderr:\n%s", w, r.stderr)
					}
				}
				if !strings.Contains(r.stdout, "verified") || strings.Contains(r.stdout, "NOT verified") {
					t.Errorf("not verified:\n%s", r.stdout)
				}
			})
			t.Run("exclude", func(t *testing.T) {
				r, dst := run("--exclude", "*.tmp", "--exclude", "cache/", "--symlinks", "skip")
				mustSucceed(t, "cp -r --exclude", r)
				check("--exclude *.tmp --exclude cache/ --symlinks skip", dst,
					"tree/", "tree/a/", "tree/a/b/", "tree/a/b/w.h5", "tree/a/x.h5", "tree/top.txt")
			})
			t.Run("include before exclude", func(t *testing.T) {
				r, dst := run("--include", "*/", "--include", "*.h5", "--exclude", "*", "--exclude", "tree/cache/")
				mustSucceed(t, "cp -r --include", r)
				check("--include */ --include *.h5 --exclude *", dst,
					"tree/", "tree/a/", "tree/a/b/", "tree/a/b/w.h5", "tree/a/x.h5", "tree/cache/", "tree/cache/z.h5")
			})
			t.Run("path pattern", func(t *testing.T) {
				r, dst := run("--exclude", "tree/a/*", "--symlinks", "skip")
				mustSucceed(t, "cp -r --exclude tree/a/*", r)
				check("--exclude tree/a/*", dst, "tree/", "tree/a/", "tree/cache/", "tree/cache/z.h5", "tree/top.txt")
			})
			t.Run("follow", func(t *testing.T) {
				r, dst := run("--symlinks", "follow", "--exclude", "*.tmp")
				mustSucceed(t, "cp -r --symlinks follow", r)
				want := []string{"tree/", "tree/a/", "tree/a/b/", "tree/a/b/w.h5", "tree/a/out", "tree/a/x.h5",
					"tree/cache/", "tree/cache/z.h5", "tree/dirlink/", "tree/dirlink/w.h5", "tree/rel", "tree/top.txt"}
				// The sender reads only within its root (a push: the
				// directory holding the tree; a pull: the server's root),
				// where a/out reaches outside.txt; the absolute link is not
				// followed and is skipped with a warning.
				check("--symlinks follow", dst, want...)
				sameFile(t, filepath.Join(srcDir, "tree", "a", "x.h5"), filepath.Join(dst, "tree", "rel"))
				sameFile(t, filepath.Join(srcDir, "outside.txt"), filepath.Join(dst, "tree", "a", "out"))
				if !strings.Contains(r.stderr, "warning: symlink leads outside the tree, skipped: tree/abs -> ") {
					t.Errorf("no warning about the absolute link:\n%s", r.stderr)
				}
			})
			t.Run("bad values", func(t *testing.T) {
				r, _ := run("--symlinks", "maybe")
				checkFailure(t, "--symlinks maybe", r, "--symlinks", "copy, skip or follow")
				r, _ = run("--exclude", "[")
				checkFailure(t, "--exclude [", r, "--exclude", "syntax error in pattern")
			})
			t.Run("dry run", func(t *testing.T) {
				r, dst := run("--dry-run", "--json", "--exclude", "*.tmp")
				mustSucceed(t, "cp -r --dry-run", r)
				if _, err := os.Lstat(dst); err == nil {
					t.Errorf("--dry-run created %s", dst)
				}
				s, lines := parseNDJSON(t, r.stdout, "dry_run")
				if s.Verified || s.BytesSent != 0 || s.Files != 6 {
					t.Errorf("dry-run summary: verified %v bytes_sent %d files %d; want false, 0, 6", s.Verified, s.BytesSent, s.Files)
				}
				status := map[string]string{}
				for _, l := range lines {
					if l["type"] == "file" {
						status[l["path"].(string)] = l["status"].(string)
					}
				}
				for p, want := range map[string]string{"tree/a/x.h5": "would-send", "tree/top.txt": "would-send",
					"tree/rel": "would-send", "tree/abs": "skipped"} {
					if status[p] != want {
						t.Errorf("dry run: %s is %q, want %q (all: %v)", p, status[p], want, status)
					}
				}
				if _, ok := status["tree/a/b/y.tmp"]; ok {
					t.Errorf("dry run lists an excluded file")
				}

				// Against a destination that holds part of the tree.
				r, dst = run("--symlinks", "skip")
				mustSucceed(t, "cp -r", r)
				os.Remove(filepath.Join(dst, "tree", "top.txt"))
				before := listTree(t, dst)
				var args []string
				if push {
					args = []string{"cp", "-r", "--dry-run", "--symlinks", "skip", filepath.Join(local, "tree"), srv.URL(filepath.Base(dst) + "/")}
				} else {
					args = []string{"cp", "-r", "--dry-run", "--symlinks", "skip", srv.URL("tree"), dst + "/"}
				}
				r = runLP(t, runOpts{}, args...)
				mustSucceed(t, "cp -r --dry-run onto a partial copy", r)
				for _, want := range []string{"would-send  tree/top.txt", "would-check tree/a/x.h5"} {
					if !strings.Contains(r.stdout, want) {
						t.Errorf("dry run does not say %q:\n%s", want, r.stdout)
					}
				}
				if after := listTree(t, dst); strings.Join(after, " ") != strings.Join(before, " ") {
					t.Errorf("--dry-run changed the destination: %v -> %v", before, after)
				}
			})
		})
	}
}
