//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// getJSON reads a controller route with a token file's token.
func (c *cliCtl) getJSON(tokenFile, path string, out any) error {
	return getJSON(c.t, c.url, tokenFile, path, out)
}

// getJSON reads route path of the controller at url with a token file's
// token.
func getJSON(t *testing.T, url, tokenFile, path string, out any) error {
	req, _ := http.NewRequest("GET", url+path, nil)
	req.Header.Set("Authorization", "Bearer "+readTok(t, tokenFile))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// postJSON sends a JSON body to route path of the controller at url as
// the holder of tokenFile and returns the status and body.
func postJSON(t *testing.T, url, tokenFile, path string, body any) (int, string) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", url+path, bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+readTok(t, tokenFile))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// bytesOn sums what one direction of a link delivered.
func (s testbedStatus) bytesOn(link, from string) uint64 {
	for _, l := range s.Links {
		if l.Name == link {
			for _, d := range l.Directions {
				if d.From == from {
					return d.Bytes
				}
			}
		}
	}
	return 0
}

// agentTestbed starts a controller (with the extra flags given) and the
// two-site testbed with an agent in every node, and waits until all six
// are alive.
func agentTestbed(t *testing.T, ctlFlags ...string) (*cliCtl, *tb) {
	skipUnlessNetRoot(t)
	c := startCLICtl(t, ctlFlags...)
	return c, agentsUp(t, "examples/two-site.yaml", 6, c.dir, c.url, c.sock, c.adminTok)
}

// agentsUp brings the topology file up as a testbed with an agent in
// every one of its n nodes, enrolled (as a user "agents" it makes, its
// token in dir) at the controller on the unix socket sock, and waits until
// the controller at url, asked with the admin token in adminTok, has all
// of them alive.
func agentsUp(t *testing.T, file string, n int, dir, url, sock, adminTok string) *tb {
	t.Helper()
	agentTok := filepath.Join(dir, "agent.token")
	admin := func(args ...string) result {
		t.Helper()
		r := runLP(t, runOpts{timeout: 60 * time.Second}, append(args, "--controller", url, "--controller-token-file", adminTok)...)
		mustSucceed(t, "lightpath "+strings.Join(args, " "), r)
		return r
	}
	admin("user", "add", "agents", "--role", "agent")
	admin("user", "token", "create", "agents", "--out", agentTok)

	b := &tb{t: t, name: fmt.Sprintf("e2a%04x", rand.IntN(1<<16))}
	// --agents-wait only bounds a hang: on a busy machine six agents
	// can take longer than the default 30 s to start and register.
	r := runLP(t, runOpts{timeout: 3 * time.Minute}, "testbed", "up", repoFile(file), "--name", b.name,
		"--agents", "--controller", sock, "--controller-token-file", agentTok, "--agents-wait", "2m")
	t.Cleanup(func() { b.down() })
	mustSucceed(t, "testbed up --agents", r)

	var agents struct {
		Agents []struct {
			Node  string `json:"node"`
			Alive bool   `json:"alive"`
		} `json:"agents"`
	}
	if !waitFor(time.Minute, func() bool {
		if err := getJSON(t, url, adminTok, "/api/v1/agents", &agents); err != nil {
			return false
		}
		alive := 0
		for _, a := range agents.Agents {
			if a.Alive {
				alive++
			}
		}
		return alive == n
	}) {
		t.Fatalf("agents alive: %+v", agents)
	}
	if out := admin("agent", "list").stdout; strings.Count(out, " alive ") != n {
		t.Errorf("agent list does not show %d agents alive:\n%s", n, out)
	}
	return b
}

// benchWhere runs argv (a lightpath bench --json to b1's server) in a1
// and checks which link, dedicated or wan, carried its bytes from ra to
// rb, in terms load cannot change: every byte of the payload it delivered
// crossed link on (a link counts headers too, so at least as many), and
// the other link carried next to nothing (under 1 MB: with a reservation
// ACTIVE, its path's probes cross dedicated). The callers pace their
// benches (--rate 200M), far below the links: no figure depends on the
// rate, and a full link on a machine too busy for the testbed's emulator
// delays the agents' probes past their deadline (see
// TestAgentMoreCrossTraffic).
func benchWhere(t *testing.T, b *tb, what, on string, argv ...string) {
	t.Helper()
	s0 := b.status()
	m := parseBench(t, "bench "+what, b.exec("a1", argv...))
	s1 := b.status()
	ded, wan := s1.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"), s1.bytesOn("wan", "ra")-s0.bytesOn("wan", "ra")
	t.Logf("%s: the bench delivered %d bytes (%s); dedicated ra>rb carried %d bytes, wan ra>rb %d", what, m.bytes, mbps(m.summary), ded, wan)
	onBytes, off := ded, wan
	if on == "wan" {
		onBytes, off = wan, ded
	}
	if m.bytes <= 0 || onBytes < uint64(m.bytes) || off > 1<<20 {
		t.Errorf("%s: the bench delivered %d bytes; dedicated carried %d and wan %d: want them all on %s", what, m.bytes, ded, wan, on)
	}
}

// TestAgentsSteerReservation runs the whole control loop for real: a
// controller, the two-site testbed with an agent in every node, and a
// reservation with a flow spec over the dedicated link. The agents make it
// ACTIVE at once; the flow's bytes then cross the dedicated link and not
// wan; cancelled, it is removed and the flow is back on wan.
func TestAgentsSteerReservation(t *testing.T) {
	t.Parallel()
	c, b := agentTestbed(t)
	b.serveIn("b1", "198.18.2.1:7070", t.TempDir())
	bench := append([]string{lpBin, "bench", "lp://198.18.2.1:7070", "--json", "--rate", "200M"}, fixedBench(t)...)

	start := time.Now()
	res := oneJSON[cliResv](t, c.ok(c.adminTok, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "300M",
		"--duration", "10m", "--flow", "tcp 198.18.1.1 > 198.18.2.1:7070", "--path", "a1-ra,dedicated,b1-rb", "--json").stdout)
	var got struct {
		Reservation struct {
			State        string   `json:"state"`
			ManagedNodes []string `json:"managed_nodes"`
			Provisioned  []string `json:"provisioned"`
			DSCP         int      `json:"dscp"`
		} `json:"reservation"`
	}
	if !waitFor(time.Minute, func() bool {
		return c.getJSON(c.adminTok, "/api/v1/reservations/"+res.ID, &got) == nil && got.Reservation.State == "ACTIVE"
	}) {
		t.Fatalf("not ACTIVE after a minute: %+v\n%s", got, c.Log())
	}
	t.Logf("ACTIVE %.2f s after the create; managed %v, provisioned %v, DSCP %d", time.Since(start).Seconds(),
		got.Reservation.ManagedNodes, got.Reservation.Provisioned, got.Reservation.DSCP)
	if len(got.Reservation.ManagedNodes) != 4 {
		t.Errorf("managed nodes %v: want a1, ra, rb, b1", got.Reservation.ManagedNodes)
	}

	// The end hosts' tables: a route to the far end with the reserved
	// path's MTU (9000 all along), which their sockets' route lookups
	// find by the flow's selectors.
	table := fmt.Sprint(100 + got.Reservation.DSCP)
	routeMTU := func(node, far string) string {
		t.Helper()
		port := "dport" // a1 sends to port 7070, b1 from it
		if node == "b1" {
			port = "sport"
		}
		r := b.exec(node, "ip", "route", "get", far, "ipproto", "tcp", port, "7070")
		mustSucceed(t, node+": ip route get", r)
		if m := regexp.MustCompile(` mtu (\d+)`).FindStringSubmatch(r.stdout); m != nil && strings.Contains(r.stdout, "table "+table) {
			return m[1]
		}
		return "none: " + strings.Join(strings.Fields(r.stdout), " ")
	}
	for node, far := range map[string]string{"a1": "198.18.2.1", "b1": "198.18.1.1"} {
		if got := routeMTU(node, far); got != "9000" {
			t.Errorf("%s's route to %s for the flow: MTU %s, want 9000 from table %s", node, far, got, table)
		}
	}

	benchWhere(t, b, "with the reservation ACTIVE", "dedicated", bench...)

	// The dedicated link dies: the agents withdraw their steering from the
	// dead hop and report it; the controller moves the reservation to wan,
	// where it fits, and the flow goes on there.
	cut := time.Now()
	b.linkSet("dedicated", "--down")
	var moved struct {
		Reservation struct {
			State string `json:"state"`
			Path  []struct {
				Link string `json:"link"`
			} `json:"path"`
			Degraded     bool     `json:"degraded"`
			ManagedNodes []string `json:"managed_nodes"`
			Provisioned  []string `json:"provisioned"`
		} `json:"reservation"`
	}
	// Moved, and every node's agent has put its part of the new path in
	// place (a move clears provisioned until each reports again): until
	// then ra may still steer the flow onto the dead link.
	if !waitFor(time.Minute, func() bool {
		if c.getJSON(c.adminTok, "/api/v1/reservations/"+res.ID, &moved) != nil {
			return false
		}
		r := moved.Reservation
		return len(r.Path) == 3 && r.Path[1].Link == "wan" && len(r.ManagedNodes) > 0 && len(r.Provisioned) == len(r.ManagedNodes)
	}) {
		t.Fatalf("not moved to wan and provisioned a minute after dedicated went down: %+v", moved)
	}
	t.Logf("moved to wan and provisioned %.2f s after the link went down (state %s, degraded %v)", time.Since(cut).Seconds(), moved.Reservation.State, moved.Reservation.Degraded)
	// On wan, the path's MTU is 1500: the end hosts' routes follow.
	if !waitFor(time.Minute, func() bool { return routeMTU("a1", "198.18.2.1") == "1500" && routeMTU("b1", "198.18.1.1") == "1500" }) {
		t.Errorf("moved to wan: a1's route MTU %s, b1's %s; want 1500", routeMTU("a1", "198.18.2.1"), routeMTU("b1", "198.18.1.1"))
	}
	benchWhere(t, b, "with dedicated down", "wan", bench...)
	b.linkSet("dedicated", "--up")

	rule := fmt.Sprintf("%d:", 10000+got.Reservation.DSCP)
	if !strings.Contains(b.exec("ra", "ip", "rule").stdout, rule) {
		t.Fatalf("ra has no ip rule %s for the live reservation", rule)
	}
	cancelled := time.Now()
	c.ok(c.adminTok, "reserve", "cancel", res.ID)
	// The agents act on the cancel's event at once: time how long until
	// ra's policy rule for the reservation is gone (the figure goes to the
	// log; the tests assert behaviour, not speed).
	if !waitFor(time.Minute, func() bool { return !strings.Contains(b.exec("ra", "ip", "rule").stdout, rule) }) {
		t.Fatalf("ra still has ip rule %s a minute after the cancel", rule)
	}
	t.Logf("ra's policy rule gone %.2f s after the cancel was sent", time.Since(cancelled).Seconds())
	benchWhere(t, b, "after the cancel", "wan", bench...)
	for _, n := range []string{"a1", "ra", "rb", "b1"} {
		if log := b.exec(n, "sh", "-c", "cat /run/lightpath/"+b.name+"/agent-"+n+".log"); strings.Contains(log.stdout, "level=ERROR") {
			t.Errorf("agent %s logged errors:\n%s", n, log.stdout)
		}
	}
}

// TestAgentsMarkByUser steers only the connections of one local user:
// the same flow sent by another user stays on the routed path.
func TestAgentsMarkByUser(t *testing.T) {
	t.Parallel()
	c, b := agentTestbed(t)
	b.serveIn("b1", "198.18.2.1:7070", t.TempDir())
	res := oneJSON[cliResv](t, c.ok(c.adminTok, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "300M",
		"--duration", "10m", "--flow", "tcp 198.18.1.1 > 198.18.2.1:7070 uid 65534", "--path", "a1-ra,dedicated,b1-rb", "--json").stdout)
	var got struct {
		Reservation struct {
			State string `json:"state"`
		} `json:"reservation"`
	}
	if !waitFor(time.Minute, func() bool {
		return c.getJSON(c.adminTok, "/api/v1/reservations/"+res.ID, &got) == nil && got.Reservation.State == "ACTIVE"
	}) {
		t.Fatalf("not ACTIVE: %+v", got)
	}
	for _, tc := range []struct {
		who    string
		prefix []string
		on     string
	}{
		{"root", nil, "wan"},
		{"nobody (uid 65534)", []string{"setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"}, "dedicated"},
	} {
		benchWhere(t, b, "as "+tc.who, tc.on, append(tc.prefix, append([]string{lpBin, "bench", "lp://198.18.2.1:7070", "--json", "--rate", "200M"}, fixedBench(t)...)...)...)
	}
}

// TestAgentsMarkByCgroup steers only the connections of one cgroup's
// processes: the same flow sent from outside it stays on the routed path.
// A reservation naming a cgroup that does not exist on its from node
// fails, and says why.
func TestAgentsMarkByCgroup(t *testing.T) {
	t.Parallel()
	c, b := agentTestbed(t)
	const root = "/sys/fs/cgroup/unified"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		t.Skipf("no cgroup2 hierarchy at %s: %v", root, err)
	}
	cg := fmt.Sprintf("lightpath-e2e-%04x", rand.IntN(1<<16))
	if err := os.MkdirAll(filepath.Join(root, cg, "job"), 0o755); err != nil {
		t.Skipf("cannot create a cgroup: %v", err)
	}
	t.Cleanup(func() {
		for _, d := range []string{cg + "/job", cg} {
			if err := os.Remove(filepath.Join(root, d)); err != nil {
				t.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})
	b.serveIn("b1", "198.18.2.1:7070", t.TempDir())

	type live struct {
		Reservation struct {
			State         string `json:"state"`
			FailureReason string `json:"failure_reason"`
		} `json:"reservation"`
	}
	missing := oneJSON[cliResv](t, c.ok(c.adminTok, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "300M",
		"--duration", "10m", "--flow", "tcp 198.18.1.1 > 198.18.2.1:7070 cgroup "+cg+"/nope", "--path", "a1-ra,dedicated,b1-rb", "--json").stdout)
	var got live
	if !waitFor(time.Minute, func() bool {
		return c.getJSON(c.adminTok, "/api/v1/reservations/"+missing.ID, &got) == nil && got.Reservation.State == "FAILED"
	}) {
		t.Fatalf("a reservation naming a missing cgroup: %+v, want FAILED", got)
	}
	if !strings.Contains(got.Reservation.FailureReason, "cgroup "+cg+"/nope: does not exist") {
		t.Errorf("failure reason %q: want it to say the cgroup does not exist", got.Reservation.FailureReason)
	}

	res := oneJSON[cliResv](t, c.ok(c.adminTok, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "300M",
		"--duration", "10m", "--flow", "tcp 198.18.1.1 > 198.18.2.1:7070 cgroup "+cg, "--path", "a1-ra,dedicated,b1-rb", "--json").stdout)
	if !waitFor(time.Minute, func() bool {
		return c.getJSON(c.adminTok, "/api/v1/reservations/"+res.ID, &got) == nil && got.Reservation.State == "ACTIVE"
	}) {
		t.Fatalf("not ACTIVE: %+v", got)
	}
	fixed := fixedBench(t)
	for _, tc := range []struct {
		where string
		argv  []string
		on    string
	}{
		{"outside the cgroup", append([]string{lpBin, "bench", "lp://198.18.2.1:7070", "--json", "--rate", "200M"}, fixed...), "wan"},
		// A process moved into a cgroup below the flow's: its sockets
		// are the cgroup's.
		{"in " + cg + "/job", []string{"sh", "-c", "echo $$ > " + filepath.Join(root, cg, "job", "cgroup.procs") +
			" && exec " + lpBin + " bench lp://198.18.2.1:7070 --json --rate 200M " + strings.Join(fixed, " ")}, "dedicated"},
	} {
		benchWhere(t, b, tc.where, tc.on, tc.argv...)
	}
}
