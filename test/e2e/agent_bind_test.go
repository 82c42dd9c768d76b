//go:build linux

package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAgentsEnrolPerNode: testbed up --agents hands one agent token,
// bound to no node, to every node's agent; each agent creates a token
// bound to its own node with it, keeps it in its spool (mode 0600), and
// that token speaks for its node alone (issue 12, attacker 2).
func TestAgentsEnrolPerNode(t *testing.T) {
	t.Parallel()
	c, b := agentTestbed(t)
	var toks struct {
		Tokens []struct {
			ID   string `json:"id"`
			Node string `json:"node"`
		} `json:"tokens"`
	}
	if err := c.getJSON(c.adminTok, "/api/v1/users/agents/tokens", &toks); err != nil {
		t.Fatal(err)
	}
	bound := map[string]bool{}
	for _, tk := range toks.Tokens {
		if tk.Node != "" {
			bound[tk.Node] = true
		}
	}
	for _, n := range []string{"a1", "a2", "ra", "b1", "b2", "rb"} {
		if !bound[n] {
			t.Errorf("no token bound to %s among %+v", n, toks.Tokens)
		}
	}
	file := filepath.Join("/run/lightpath", b.name, "spool", "a1", "controller.token")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", file, fi.Mode().Perm())
	}
	tok := readTok(t, file)
	post := func(path, body string) (int, string) {
		req, _ := http.NewRequest("POST", c.url+"/api/v1"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	if st, raw := post("/agents/rb/heartbeat", `{}`); st != 403 || !strings.Contains(raw, "bound to node a1: it cannot act for node rb") {
		t.Errorf("a1's token heartbeating as rb: %d %s", st, raw)
	}
	if st, raw := post("/agents/a1/links/wan", `{"status":"down","reason":"forged"}`); st != 403 || !strings.Contains(raw, "node a1 does not end it") {
		t.Errorf("a1's token reporting wan down: %d %s", st, raw)
	}
	// The shared token itself reports nothing.
	tok = readTok(t, filepath.Join(c.dir, "agent.token"))
	if st, raw := post("/agents/a1/heartbeat", `{}`); st != 403 || !strings.Contains(raw, "bound to no node") {
		t.Errorf("the unbound token's heartbeat: %d %s", st, raw)
	}
}
