//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLinkSwapServe is issue 28's first finding against `serve --root DIR`
// with the real client: session 1 pushes private/ with the dirs b/c, the
// link a -> b/c and the link l -> a/../../private; session 2's a -> . under
// --overwrite is refused (a copy never replaces a link); with the link
// swapped behind the server's back, session 3's private/l/pwned.txt cannot
// go out of DIR through l. Nothing outside DIR is written.
func TestLinkSwapServe(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	root := mkdir(t, top, "srv")
	mkdir(t, top, "private")
	srv := startServer(t, root)
	local := t.TempDir()

	s1 := mkdir(t, local, "1", "private")
	mkdir(t, s1, "b", "c")
	os.Symlink("b/c", filepath.Join(s1, "a"))
	os.Symlink("a/../../private", filepath.Join(s1, "l"))
	cpOK(t, "-r", s1, srv.URL(""))
	if got, err := os.Readlink(filepath.Join(root, "private", "l")); err != nil || got != "a/../../private" {
		t.Fatalf("session 1 did not make l: %q, %v", got, err)
	}

	s2 := mkdir(t, local, "2", "private")
	os.Symlink(".", filepath.Join(s2, "a"))
	r := runLP(t, runOpts{}, "cp", "-r", "--overwrite", s2, srv.URL(""))
	checkFailure(t, "session 2", r, "1 of 1 files failed", "private/a: destination private/a is a symbolic link: a copy does not replace links")
	if got, _ := os.Readlink(filepath.Join(root, "private", "a")); got != "b/c" {
		t.Errorf("session 2 retargeted a: -> %q", got)
	}
	os.Remove(filepath.Join(root, "private", "a"))
	os.Symlink(".", filepath.Join(root, "private", "a"))

	s3 := mkdir(t, local, "3", "private")
	writeFile(t, filepath.Join(s3, "l", "pwned.txt"), "pwned\n", 0o644)
	r = runLP(t, runOpts{}, "cp", "-r", "--overwrite", s3, srv.URL(""))
	checkFailure(t, "session 3", r, "private/l/pwned.txt: create directory private/l: path leads outside the served directory")
	if es, _ := os.ReadDir(filepath.Join(top, "private")); len(es) != 0 {
		t.Errorf("written outside DIR: %v", es)
	}
}
