//go:build linux

package e2e

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestControllerBounds runs the controller binary with --max-conns 2: with
// two connections held open, a third is answered 503 saying why; and the
// files the controller created (its database, the monitoring repository,
// their WAL and shared-memory files, the admin token) are private to its
// user.
func TestControllerBounds(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t, "--max-conns", "2", "--unauth-timeout", "1h")
	c.ok(c.adminTok, "user", "add", "alice", "--role", "user")
	files, err := filepath.Glob(filepath.Join(c.dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		fi, err := os.Lstat(f)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		seen[filepath.Base(f)] = true
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: readable by other users", filepath.Base(f), fi.Mode().Perm())
		}
	}
	for _, want := range []string{"db", "db-wal", "db-shm", "db-metrics.db", "db-metrics.db.heads", "admin.token"} {
		if !seen[want] {
			t.Errorf("the controller made no %s (made %v)", want, seen)
		}
	}

	addr := strings.TrimPrefix(c.url, "http://")
	for range 2 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
	}
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Get(c.url + "/api/v1/health")
	if err != nil {
		t.Fatalf("the connection over the cap got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "--max-conns") {
		t.Errorf("over the cap: %d %s", resp.StatusCode, body)
	}
}

// TestControllerRevokeEndsWatch: `reserve watch` following the event
// stream with a token ends when that token is revoked (by revoking every
// token of its user), saying why, instead of watching on.
func TestControllerRevokeEndsWatch(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	c.ok(c.adminTok, "user", "add", "alice", "--role", "user")
	aliceTok := filepath.Join(c.dir, "alice.token")
	c.ok(c.adminTok, "user", "token", "create", "alice", "--out", aliceTok)
	w := startLP(t, runOpts{timeout: 5 * time.Minute}, "reserve", "watch", "--controller", c.url, "--controller-token-file", aliceTok)
	// Once alice's stream is open, a booking of hers shows on it.
	subscribed(t, w, func() string {
		return oneJSON[cliResv](t, c.ok(aliceTok, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "10M",
			"--start", "+1h", "--duration", "1h", "--json").stdout).ID
	})
	r := c.ok(c.adminTok, "user", "token", "revoke", "--user", "alice")
	if !strings.Contains(r.stdout, "revoked 1 token(s) of alice: t-") {
		t.Errorf("revoke --user said %q", r.stdout)
	}
	checkFailure(t, "watch with a revoked token", w.Wait(), "reserve watch", "was revoked")
}
