//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// makeResumeTree fills dir with a tree that takes a few seconds at 20 Mbit/s:
// files of several blocks in two directories, small ones, and a relative link.
func makeResumeTree(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	for i := range 24 {
		sub := []string{"a", "b/c"}[i%2]
		size := int64(200<<10 + i*1000)
		writeRandom(t, filepath.Join(dir, sub, fmt.Sprintf("f%02d.bin", i)), size, uint64(100+i))
		total += size
	}
	writeFile(t, filepath.Join(dir, "small.txt"), "small\n", 0o644)
	total += 6
	if err := os.Symlink("a/f00.bin", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	return total
}

// TestTreeInterruptedResume is a new user's Ctrl-C in the middle of cp -r
// and the same command again: the first exits 130 saying how to resume and
// the controller records the transfer as interrupted; the second finishes
// the tree, sends only what is missing (files an earlier run completed are
// already present, not "destination exists") and says verified.
func TestTreeInterruptedResume(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	userTok := filepath.Join(c.dir, "alice.token")
	c.ok(c.adminTok, "user", "add", "alice", "--role", "user")
	c.ok(c.adminTok, "user", "token", "create", "alice", "--out", userTok)

	for _, push := range []bool{true, false} {
		name := map[bool]string{true: "push", false: "pull"}[push]
		t.Run(name, func(t *testing.T) {
			dir := scratchDir(t)
			root := mkdir(t, dir, "root")
			local := mkdir(t, dir, "local")
			srv := startServer(t, root)
			var src, dst string
			var args []string
			if push {
				src, dst = filepath.Join(local, "tree"), filepath.Join(root, "tree")
				args = []string{filepath.Join(local, "tree"), srv.URL("")}
			} else {
				src, dst = filepath.Join(root, "tree"), filepath.Join(local, "tree")
				args = []string{srv.URL("tree"), local + "/"}
			}
			total := makeResumeTree(t, src)
			args = append([]string{"cp", "-r", "--json", "-P", "2", "--block-size", "64KiB", "--rate", "20M",
				"--controller", c.url, "--controller-token-file", userTok}, args...)

			p := startLP(t, runOpts{}, args...)
			// Interrupt once some files have arrived whole.
			if !waitFor(2*time.Minute, func() bool { return strings.Count(p.out.String(), `"status":"ok"`) >= 3 || p.Exited() }) {
				t.Fatalf("no file arrived in 2 min:\n%s", p.err.String())
			}
			if p.Exited() {
				t.Fatalf("cp finished before it could be interrupted: %+v", p.Wait())
			}
			p.Signal(syscall.SIGINT)
			r := p.Wait()
			if r.code != 130 {
				t.Errorf("interrupted cp: exit status %d, want 130\nstderr:\n%s", r.code, r.stderr)
			}
			checkFailure(t, "interrupted cp", r, "interrupted", "run the same command again to resume")

			var list struct {
				Transfers []struct {
					State  string `json:"state"`
					Source string `json:"source"`
					Error  string `json:"error"`
				} `json:"transfers"`
			}
			if err := c.getJSON(userTok, "/api/v1/transfers", &list); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, tr := range list.Transfers {
				if tr.Source == args[len(args)-2] {
					found = true
					if tr.State != "interrupted" || strings.Contains(tr.Error, "context canceled") {
						t.Errorf("the transfer is recorded %q (error %q), want interrupted", tr.State, tr.Error)
					}
				}
			}
			if !found {
				t.Errorf("the transfer is not recorded: %+v", list)
			}

			r = runLP(t, runOpts{}, args...)
			mustSucceed(t, "the same cp -r again", r)
			s := parseSummary(t, r.stdout)
			if !s.Verified || s.FilesFailed != 0 {
				t.Errorf("resumed copy: verified %v, files_failed %d, errors %q", s.Verified, s.FilesFailed, s.Errors)
			}
			if s.BytesSent >= total || s.FilesSkipped == 0 {
				t.Errorf("resumed copy sent %d of %d bytes, skipped %d files: want only what was missing", s.BytesSent, total, s.FilesSkipped)
			}
			compareTrees(t, src, dst)

			// Once more: everything is present, nothing is sent.
			r = runLP(t, runOpts{}, args...)
			mustSucceed(t, "the same cp -r a third time", r)
			if s := parseSummary(t, r.stdout); s.BytesSent != 0 || !s.Verified {
				t.Errorf("copy of a complete tree: bytes_sent %d, verified %v; want 0, true", s.BytesSent, s.Verified)
			}

			// A destination file that differs is still refused.
			victim := filepath.Join(dst, "a", "f00.bin")
			writeRandom(t, victim, 200<<10, 999)
			r = runLP(t, runOpts{}, args...)
			checkFailure(t, "cp -r onto a tree with a different file", r, "f00.bin", "--overwrite")
		})
	}
}
