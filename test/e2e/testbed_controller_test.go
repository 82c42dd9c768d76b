//go:build linux

package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTestbedBesideController follows the documented order: a controller
// with its socket in the testbed's state directory first, then testbed up
// --agents. up works beside the socket and returns once the six agents
// have registered; down removes what up made and leaves the running
// controller's socket, which still answers; up works beside it again.
func TestTestbedBesideController(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	name := fmt.Sprintf("e2s%04x", rand.IntN(1<<16))
	dir := filepath.Join("/run/lightpath", name)
	t.Cleanup(func() { os.RemoveAll(dir) }) // runs last: after the controller stopped
	sock := filepath.Join(dir, "controller.sock")
	c := startCLICtl(t, "--listen", "unix:"+sock)
	agentTok := filepath.Join(c.dir, "agent.token")
	c.ok(c.adminTok, "user", "add", "agents", "--role", "agent")
	c.ok(c.adminTok, "user", "token", "create", "agents", "--out", agentTok)

	b := &tb{t: t, name: name}
	up := func(args ...string) result {
		t.Helper()
		return runLP(t, runOpts{timeout: 3 * time.Minute}, append([]string{"testbed", "up", repoFile("examples/two-site.yaml"), "--name", name}, args...)...)
	}
	down := func() result {
		t.Helper()
		r := runLP(t, runOpts{timeout: 60 * time.Second}, "testbed", "down", "--name", name)
		mustSucceed(t, "testbed down", r)
		return r
	}
	t.Cleanup(func() { runLP(t, runOpts{timeout: 60 * time.Second}, "testbed", "down", "--name", name) })

	// --agents-wait only bounds a hang (the default is 30 s).
	r := up("--agents", "--controller", "unix:"+sock, "--controller-token-file", agentTok, "--agents-wait", "2m")
	mustSucceed(t, "testbed up --agents beside the controller's socket", r)
	if !strings.Contains(r.stderr, "agents registered on 6 nodes") {
		t.Errorf("testbed up --agents did not say the agents registered:\n%s", r.stderr)
	}
	// Registered when up returned: no waiting here.
	if out := c.ok(c.adminTok, "agent", "list").stdout; strings.Count(out, " alive ") != 6 {
		t.Errorf("agent list right after up does not show six agents alive:\n%s", out)
	}

	r = down()
	if !strings.Contains(r.stdout, "controller.sock") {
		t.Errorf("testbed down does not say it left the controller's socket:\n%s", r.stdout)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("testbed down removed the running controller's socket: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("testbed down left %d entries in %s, want the socket alone", len(ents), dir)
	}
	if m, _ := filepath.Glob("/run/netns/lp-" + name + "-*"); len(m) > 0 {
		t.Errorf("namespaces left after down: %v", m)
	}
	rr := runLP(t, runOpts{timeout: 30 * time.Second}, "agent", "list", "--controller", "unix:"+sock, "--controller-token-file", c.adminTok)
	mustSucceed(t, "agent list over the socket after testbed down", rr)

	// And again, without agents, beside the socket; a second down says
	// there is nothing left to remove.
	mustSucceed(t, "testbed up again beside the socket", up())
	down()
	if r := down(); !strings.Contains(r.stdout, "nothing to remove") {
		t.Errorf("a second down said:\n%s", r.stdout)
	}
	_ = b
}

// TestTestbedAgentsFailClearly checks testbed up --agents refuses, before
// building anything, a controller the namespaces cannot reach (this host's
// loopback), one that is not there, and a token that is not an agent's;
// and that agents which cannot register make up fail, naming the nodes and
// what their logs say, instead of saying "agents started".
func TestTestbedAgentsFailClearly(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	c := startCLICtl(t)
	agentTok := filepath.Join(c.dir, "agent.token")
	c.ok(c.adminTok, "user", "add", "agents", "--role", "agent")
	c.ok(c.adminTok, "user", "token", "create", "agents", "--out", agentTok)
	c.ok(c.adminTok, "user", "add", "alice", "--role", "user")
	aliceTok := filepath.Join(c.dir, "alice.token")
	c.ok(c.adminTok, "user", "token", "create", "alice", "--out", aliceTok)

	name := fmt.Sprintf("e2f%04x", rand.IntN(1<<16))
	b := &tb{t: t, name: name}
	up := func(args ...string) result {
		t.Helper()
		return runLP(t, runOpts{timeout: 90 * time.Second}, append([]string{"testbed", "up", repoFile("examples/two-site.yaml"), "--name", name, "--agents"}, args...)...)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"the host's loopback over TCP", []string{"--controller", c.url, "--controller-token-file", agentTok},
			[]string{"node's own loopback", "--listen unix:/run/lightpath/" + name + "/controller.sock", "nothing was built"}},
		{"no controller on the socket", []string{"--controller", "unix:/run/lightpath/" + name + "/controller.sock", "--controller-token-file", agentTok},
			[]string{"start the controller first", "nothing was built"}},
		{"a token of role user", []string{"--controller", c.sock, "--controller-token-file", aliceTok},
			[]string{"alice", "role user", "role agent", "nothing was built"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := up(tc.args...)
			checkFailure(t, "testbed up --agents with "+tc.name, r, tc.want...)
			if m, _ := filepath.Glob("/run/netns/lp-" + name + "-*"); len(m) > 0 {
				t.Errorf("namespaces made although up refused: %v", m)
			}
		})
	}

	// A controller on another topology: the agents reach it, but it
	// knows none of their nodes, so none registers.
	other := startCLICtl(t, "--topology", repoFile("examples/triangle.yaml"))
	otherTok := filepath.Join(other.dir, "agent.token")
	other.ok(other.adminTok, "user", "add", "agents", "--role", "agent")
	other.ok(other.adminTok, "user", "token", "create", "agents", "--out", otherTok)
	t.Cleanup(func() { b.down() })
	r := up("--controller", other.sock, "--controller-token-file", otherTok, "--agents-wait", "5s")
	last := lastLine(r.stderr)
	if r.code == 0 || !errLine.MatchString(last) {
		t.Fatalf("testbed up --agents that cannot register: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"did not register with the controller within 5s", "a1 not registered", "b2 not registered",
		`node "a1" is not in the topology`, "the testbed is up"} {
		if !strings.Contains(last, want) {
			t.Errorf("the error line does not say %q:\n%s", want, last)
		}
	}
	if strings.Contains(r.stderr, "agents registered") {
		t.Errorf("up said the agents registered:\n%s", r.stderr)
	}
}
