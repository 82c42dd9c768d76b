//go:build linux

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestCpMisleadingErrors: the errors a new user met when pointing cp at the
// wrong thing say what is wrong and are the last thing printed.
func TestCpMisleadingErrors(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	src := filepath.Join(dir, "f.txt")
	writeFile(t, src, "data\n", 0o644)

	t.Run("an HTTP port", func(t *testing.T) {
		// A plain HTTP server without a header timeout: before, cp waited
		// for a frame that never came.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: http.NotFoundHandler()}
		go hs.Serve(ln)
		t.Cleanup(func() { hs.Close() })
		addr := ln.Addr().String()
		for _, args := range [][]string{{src, "lp://" + addr + "/f.txt"}, {"lp://" + addr + "/f.txt", dir + "/"}} {
			r := runLP(t, runOpts{}, append([]string{"cp"}, args...)...)
			checkFailure(t, "cp "+strings.Join(args, " "), r,
				"lp://"+addr+" speaks HTTP, not the Lightpath mover protocol: is it the controller's port? the mover listens where `lightpath serve --listen` says")
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t, "127.0.0.1"))
		r := runLP(t, runOpts{}, "cp", src, "lp://"+addr+"/f.txt")
		checkFailure(t, "cp to a closed port", r, "connect to "+addr, "connection refused: is `lightpath serve` running there?")
	})
	t.Run("a failed pull", func(t *testing.T) {
		root := mkdir(t, dir, "root")
		writeFile(t, filepath.Join(root, "here.txt"), "present\n", 0o644)
		srv := startServer(t, root)
		into := mkdir(t, dir, "into")
		r := runLP(t, runOpts{}, "cp", srv.URL("here.txt"), srv.URL("gone.txt"), into)
		checkFailure(t, "pull of a present and a missing file", r, "1 of 2 files failed", "gone.txt")
		if strings.Contains(r.stdout, "bottleneck") {
			t.Errorf("a failed pull judges a bottleneck:\n%s", r.stdout)
		}
	})
}

// TestCpSanitisesPeerStrings: names and messages from the server reach the
// terminal with their control characters spelled out, never obeyed.
func TestCpSanitisesPeerStrings(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	evil := "evil\x1b[2J\x1b]0;pwned\x07.txt"
	writeFile(t, filepath.Join(root, evil), "x\n", 0o644)
	srv := startServer(t, root)
	into := mkdir(t, dir, "into")
	writeFile(t, filepath.Join(into, evil), "other\n", 0o644) // refused: destination exists and differs

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a file's verdict", []string{srv.URL(evil), into + "/"}, `evil\x1b[2J\x1b]0;pwned\x07.txt`},
		{"the server's error", []string{srv.URL("gone\x1b[2J"), into + "/"}, `gone\x1b[2J`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runLP(t, runOpts{}, append([]string{"cp"}, tc.args...)...)
			checkFailure(t, "cp "+tc.name, r, tc.want)
			for _, out := range []string{r.stdout, r.stderr} {
				if strings.ContainsAny(out, "\x1b\x07") {
					t.Errorf("cp printed a control character: %q", out)
				}
			}
		})
	}
}
