//go:build linux

package e2e

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// lightpath ticket against a real lightpath controller on loopback
// (startCLICtl: examples/two-site.yaml, no agents, so a ticket is ACTIVE
// at its start with nothing to wait for). a1 is 198.18.1.1, b1 198.18.2.1.

// cliTicket is what the tests read of a ticket's JSON line.
type cliTicket struct {
	cliResv
	FlowSpec   string   `json:"flow_spec"`
	DSCP       int      `json:"dscp"`
	DSCPName   string   `json:"dscp_name"`
	Ready      bool     `json:"ready"`
	WaitingFor []string `json:"waiting_for"`
}

var openedRE = regexp.MustCompile(`^opened ticket (r-[0-9a-f]+): `)

// TestTicketCLI opens a ticket (ACTIVE at once), looks at it, extends and
// closes it, and checks what must change nothing: a malformed flow spec,
// flows of other nodes, another user's ticket, a --wait that runs out.
func TestTicketCLI(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	adm := c.adminTok
	alice, bob := filepath.Join(c.dir, "alice.token"), filepath.Join(c.dir, "bob.token")
	c.ok(adm, "user", "add", "alice", "--role", "user")
	c.ok(adm, "user", "add", "bob", "--role", "user")
	c.ok(adm, "user", "token", "create", "alice", "--out", alice)
	c.ok(adm, "user", "token", "create", "bob", "--out", bob)
	const flows = "tcp 198.18.1.1 > 198.18.2.1:7070"

	// open, start now: ACTIVE within the wait (a generous one: it bounds
	// a hang, how soon is bench material), and what was set up.
	r := c.ok(alice, "ticket", "open", "--from", "a1", "--to", "b1", "--flows", flows, "--bandwidth", "500M", "--duration", "1h", "--wait", "2m")
	m := openedRE.FindStringSubmatch(r.stdout)
	if m == nil || !strings.HasPrefix(r.stdout, "opened ticket "+m[1]+": ACTIVE after ") {
		t.Fatalf("ticket open said:\n%s", r.stdout)
	}
	id := m[1]
	for _, want := range []string{
		`(?m)^state +ACTIVE$`,
		`(?m)^from → to +a1 → b1 at 500 Mbit/s$`,
		`(?m)^window +\S+ → \S+ \(1h00m\)$`,
		`(?m)^path +a1 -a1-ra-> ra -dedicated-> rb -b1-rb-> b1$`, // no path named: the circuit first
		`(?m)^dscp +[a-z]+[0-9]* \([0-9]+\)$`,
		`(?m)^flows +tcp 198\.18\.1\.1 > 198\.18\.2\.1:7070$`,
		`(?m)^managed nodes +none: no agent runs on its path`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("ticket open lacks %s:\n%s", want, r.stdout)
		}
	}

	// status: the same view, with the history.
	r = c.ok(alice, "ticket", "status", id)
	for _, want := range []string{`(?m)^state +ACTIVE$`, `(?m)^owner +alice$`, `(?m)^history:$`,
		`(?m)^  \S+ +create +RESERVED +alice +1 `, `(?m)^  \S+ +start-reached +RESERVED → ACTIVE +controller `} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("ticket status lacks %s:\n%s", want, r.stdout)
		}
	}
	before := oneJSON[cliTicket](t, c.ok(alice, "ticket", "status", id, "--json").stdout)
	if before.ID != id || before.State != "ACTIVE" || !before.Ready || before.FlowSpec != flows || before.DSCP == 0 || before.DSCPName == "" ||
		before.Owner != "alice" || before.End.Sub(before.Start) != time.Hour {
		t.Fatalf("ticket status --json: %+v", before)
	}

	// extend: the end moves, the version the command read is the one sent.
	r = c.ok(alice, "ticket", "extend", id, "--by", "30m")
	if want := "extended ticket " + id + " to " + before.End.Add(30*time.Minute).UTC().Format(time.RFC3339) + " (was " + before.End.UTC().Format(time.RFC3339) + ")"; !strings.HasPrefix(r.stdout, want) {
		t.Errorf("ticket extend said:\n%s\nwant it to start with %s", r.stdout, want)
	}
	newEnd := before.End.Add(45 * time.Minute).UTC().Format(time.RFC3339)
	ext := oneJSON[cliTicket](t, c.ok(alice, "ticket", "extend", id, "--end", newEnd, "--json").stdout)
	if ext.End.UTC().Format(time.RFC3339) != newEnd || ext.State != "ACTIVE" || ext.Version != before.Version+2 || !ext.Start.Equal(before.Start) {
		t.Errorf("ticket extend --end --json: %+v", ext)
	}
	checkFailure(t, "extend to an earlier end", c.lp(alice, "ticket", "extend", id, "--end", before.End.UTC().Format(time.RFC3339)), "ticket extend", "not after")

	// Someone else's ticket does not exist for bob, and stays as it was.
	for _, args := range [][]string{
		{"ticket", "status", id},
		{"ticket", "extend", id, "--by", "1h"},
		{"ticket", "close", id},
	} {
		checkFailure(t, "bob: "+strings.Join(args, " "), c.lp(bob, args...), args[0]+" "+args[1], id, "not found")
	}
	if r := c.ok(bob, "ticket", "list"); strings.TrimSpace(r.stdout) != "no tickets" {
		t.Errorf("bob's ticket list:\n%s", r.stdout)
	}
	same := oneJSON[cliTicket](t, c.ok(alice, "ticket", "status", id, "--json").stdout)
	if same.Version != ext.Version || same.State != "ACTIVE" || !same.End.Equal(ext.End) {
		t.Errorf("after bob's tries: %+v, want it as %+v", same, ext)
	}

	// Flow specs the controller refuses: one error line naming --flows,
	// nothing booked.
	count := len(c.listOf(adm))
	checkFailure(t, "a malformed flow spec", c.lp(alice, "ticket", "open", "--from", "a1", "--to", "b1", "--flows", "tcp 198.18.1.1 to 198.18.2.1",
		"--bandwidth", "100M", "--duration", "1h"), "ticket open", "--flows", "invalid flow spec", "column")
	checkFailure(t, "flows of another node", c.lp(alice, "ticket", "open", "--from", "a1", "--to", "b1", "--flows", "tcp 198.18.1.2 > 198.18.2.1:7070",
		"--bandwidth", "100M", "--duration", "1h"), "ticket open", "--flows", "198.18.1.2", "from node")
	checkFailure(t, "no flows", c.lp(alice, "ticket", "open", "--from", "a1", "--to", "b1", "--bandwidth", "100M", "--duration", "1h"), "ticket open", "--flows")
	if n := len(c.listOf(adm)); n != count {
		t.Errorf("refused opens stored %d reservations", n-count)
	}

	// A start an hour ahead, with the default no-agent controller: --wait
	// runs out, the command says it waits for the start and fails, and the
	// ticket stays open. It cannot return before its 2 s are up (load can
	// only make it later), so the lower bound holds on any machine.
	began := time.Now()
	r = c.lp(alice, "ticket", "open", "--from", "a1", "--to", "b1", "--flows", flows, "--bandwidth", "100M", "--start", "+1h", "--duration", "1h", "--wait", "2s")
	if took := time.Since(began); took < 2*time.Second {
		t.Errorf("--wait 2s returned after %s", took)
	}
	checkFailure(t, "--wait running out", r, "ticket open", "still RESERVED after 2s", "waiting for its start at", "stays open")
	m = openedRE.FindStringSubmatch(r.stdout)
	if m == nil || !strings.Contains(r.stdout, "still RESERVED after") {
		t.Fatalf("ticket open that timed out printed:\n%s", r.stdout)
	}
	later := m[1]
	if !strings.Contains(r.stderr, later) {
		t.Errorf("the error does not name the ticket %s: %s", later, r.stderr)
	}
	if s := oneJSON[cliTicket](t, c.ok(alice, "ticket", "status", later, "--json").stdout); s.State != "RESERVED" || s.Ready {
		t.Errorf("the ticket that timed out: %+v", s)
	}
	// --no-wait returns at once with the ticket as booked.
	nw := oneJSON[cliTicket](t, c.ok(alice, "ticket", "open", "--from", "a2", "--to", "b2", "--flows", "udp 198.18.1.2 > 198.18.2.2:9000-9010",
		"--bandwidth", "100M", "--start", "+2h", "--duration", "1h", "--no-wait", "--json").stdout)
	if nw.State != "RESERVED" || nw.Ready || nw.DSCP == 0 {
		t.Errorf("open --no-wait --json: %+v", nw)
	}

	// list: alice's tickets, not her plain reservations.
	plain := oneJSON[cliResv](t, c.ok(alice, "reserve", "create", "--from", "a1", "--to", "b2", "--bandwidth", "10M", "--start", "+3h", "--duration", "1h", "--json").stdout)
	ls := jsonLines[cliTicket](t, c.ok(alice, "ticket", "list", "--json").stdout)
	if len(ls) != 4 || ls[3].ID != "" {
		t.Fatalf("ticket list --json: %+v", ls)
	}
	ids := map[string]bool{}
	for _, l := range ls[:3] {
		ids[l.ID] = true
	}
	if !ids[id] || !ids[later] || !ids[nw.ID] || ids[plain.ID] {
		t.Errorf("ticket list has %v; want %s, %s, %s and not %s", ids, id, later, nw.ID, plain.ID)
	}
	checkFailure(t, "status of a plain reservation", c.lp(alice, "ticket", "status", plain.ID), "ticket status", plain.ID, "not a ticket")

	// close: CANCELLED, the reason kept; closing again is harmless.
	r = c.ok(alice, "ticket", "close", id, "--reason", "transfer done")
	if !strings.HasPrefix(r.stdout, "closed ticket "+id+" CANCELLED") {
		t.Errorf("ticket close said:\n%s", r.stdout)
	}
	closed := oneJSON[cliTicket](t, c.ok(alice, "ticket", "status", id, "--json").stdout)
	if closed.State != "CANCELLED" || closed.Ready || closed.History[len(closed.History)-1].Why != "transfer done" {
		t.Errorf("after close: %+v", closed)
	}
	r = c.ok(alice, "ticket", "close", id)
	if !strings.Contains(r.stdout, "closed already") {
		t.Errorf("ticket close again said:\n%s", r.stdout)
	}
	// Usage mistakes, each one error line; --help has examples.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"ticket", "book"}, []string{"ticket", "book"}},
		{[]string{"ticket", "open", "--frobnicate"}, []string{"ticket open", "--frobnicate"}},
		{[]string{"ticket", "extend"}, []string{"ticket extend", "ID"}},
		{[]string{"ticket", "extend", id}, []string{"ticket extend", "--by", "--end"}},
		{[]string{"ticket", "open", "--from", "a1", "--to", "b1", "--flows", flows, "--bandwidth", "1G", "--duration", "1h", "--wait", "1m", "--no-wait"}, []string{"--wait", "--no-wait"}},
	} {
		checkFailure(t, "lightpath "+strings.Join(tc.args, " "), c.lp(alice, tc.args...), tc.want...)
	}
	for _, verb := range []string{"open", "status", "extend", "close", "list"} {
		if r := c.ok(alice, "ticket", verb, "--help"); !strings.Contains(r.stdout, "Examples:\n  lightpath ticket "+verb) {
			t.Errorf("ticket %s --help has no examples:\n%s", verb, r.stdout)
		}
	}

	c.ok(alice, "ticket", "close", later)
	c.ok(alice, "ticket", "close", nw.ID)
	if ls := jsonLines[cliTicket](t, c.ok(alice, "ticket", "list", "--state", "ACTIVE,RESERVED", "--json").stdout); len(ls) != 1 || ls[0].ID != "" {
		t.Errorf("live tickets after closing them all: %+v", ls)
	}
}

// TestTicketCLIWaitsForAgents registers node agents for ra and rb through
// the API, as lightpath agent does, and reports their parts in place by
// hand: open waits for both, and says which ones it still waits for.
func TestTicketCLIWaitsForAgents(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	adm := c.adminTok
	// Each node's agent has a token bound to its node (the controller
	// takes an agent's word for its own node alone).
	c.ok(adm, "user", "add", "agent", "--role", "agent")
	for _, n := range []string{"ra", "rb"} {
		c.ok(adm, "user", "token", "create", "agent", "--node", n, "--out", filepath.Join(c.dir, n+".token"))
	}
	agent := func(path, body string) {
		t.Helper()
		node := "ra"
		if strings.Contains(path, "/rb/") || strings.HasSuffix(path, "/rb") {
			node = "rb"
		}
		req, _ := http.NewRequest(http.MethodPost, c.url+"/api/v1"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+readTok(t, filepath.Join(c.dir, node+".token")))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	agent("/agents/ra/heartbeat", `{"lease":"5m"}`)
	agent("/agents/rb/heartbeat", `{"lease":"5m"}`)

	// Nobody reports: --wait runs out, naming the nodes it waits for.
	r := c.lp(adm, "ticket", "open", "--from", "a1", "--to", "b1", "--flows", "tcp 198.18.1.1 > 198.18.2.1:7070", "--bandwidth", "100M", "--duration", "1h", "--wait", "1s")
	checkFailure(t, "open with silent agents", r, "ticket open", "still RESERVED after 1s", "waiting for ra, rb to put their part in place", "stays open")
	m := openedRE.FindStringSubmatch(r.stdout)
	if m == nil || !regexp.MustCompile(`(?m)^managed nodes +waiting for ra, rb$`).MatchString(r.stdout) {
		t.Fatalf("open with silent agents printed:\n%s", r.stdout)
	}
	agent("/reservations/"+m[1]+"/nodes/ra", `{"status":"provisioned"}`)
	if s := oneJSON[cliTicket](t, c.ok(adm, "ticket", "status", m[1], "--json").stdout); s.State != "RESERVED" || strings.Join(s.WaitingFor, ",") != "rb" {
		t.Errorf("after ra reported: %+v", s)
	}
	r = c.ok(adm, "ticket", "status", m[1])
	if !regexp.MustCompile(`(?m)^managed nodes +in place: ra; waiting for rb$`).MatchString(r.stdout) {
		t.Errorf("ticket status after ra reported:\n%s", r.stdout)
	}

	// The agents report while open waits: ACTIVE once both have.
	p := startLP(t, runOpts{env: []string{"TZ=UTC"}, timeout: 5 * time.Minute}, "ticket", "open", "--from", "a1", "--to", "b1",
		"--flows", "tcp 198.18.1.1 > 198.18.2.1:7071", "--bandwidth", "100M", "--duration", "1h", "--json", "--wait", "4m",
		"--controller", c.url, "--controller-token-file", adm)
	var id string
	if !waitFor(2*time.Minute, func() bool {
		for _, l := range jsonLines[cliTicket](t, c.ok(adm, "ticket", "list", "--json").stdout) {
			if strings.HasSuffix(l.FlowSpec, ":7071") {
				id = l.ID
			}
		}
		return id != ""
	}) {
		t.Fatal("the ticket open booked did not show in ticket list")
	}
	// rb alone: the controller still waits for ra, so open cannot end on
	// it. Whether open has read that event yet no output tells; what it
	// prints at the end is the reservation as of the event it ended on, so
	// an open that ended on rb's report would print it RESERVED, waiting
	// for ra, which the check of its line below refuses.
	agent("/reservations/"+id+"/nodes/rb", `{"status":"provisioned"}`)
	if s := oneJSON[cliTicket](t, c.ok(adm, "ticket", "status", id, "--json").stdout); s.State != "RESERVED" || strings.Join(s.WaitingFor, ",") != "ra" {
		t.Errorf("after rb reported: %+v", s)
	}
	if p.Exited() {
		t.Errorf("ticket open returned with rb alone in place:\n%s", p.out.String())
	}
	agent("/reservations/"+id+"/nodes/ra", `{"status":"provisioned"}`)
	r = p.Wait()
	mustSucceed(t, "ticket open while the agents report", r)
	l := oneJSON[cliTicket](t, r.stdout)
	if l.ID != id || l.State != "ACTIVE" || !l.Ready || len(l.WaitingFor) != 0 {
		t.Errorf("ticket open --json once both reported: %+v", l)
	}
}
