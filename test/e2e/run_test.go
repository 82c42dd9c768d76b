//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/agent"
	"github.com/lightpath/lightpath/internal/testbed"
)

// lightpath run (issue 18): any command run in a cgroup of its own with
// its flows booked and steered. TestRun builds the setup of
// TestAgentsSteerReservation once for its subtests: a controller on
// examples/two-site.yaml and the testbed with an agent in every node (a1
// is 198.18.1.1, b1 198.18.2.1; the routed path is wan, the reserved one
// dedicated).

// cgroup2Root is where this machine mounts the cgroup2 hierarchy (the
// tests only look there; run finds it in /proc/self/mountinfo).
const cgroup2Root = "/sys/fs/cgroup/unified"

// runSummaryLine is run --json's last line on stderr.
type runSummaryLine struct {
	Type             string `json:"type"`
	ExitStatus       int    `json:"exit_status"`
	Cgroup           string `json:"cgroup"`
	CgroupRemoved    bool   `json:"cgroup_removed"`
	Reservation      string `json:"reservation"`
	ReservationState string `json:"reservation_state"`
	DSCP             int    `json:"dscp"`
	Mark             uint32 `json:"mark"`
	FlowSpec         string `json:"flow_spec"`
	FlowsAdded       int    `json:"flows_added"`
}

// runEvents reads run --json's lines from its stderr: every line that is
// JSON (the command's own stderr may be mixed in), the summary last.
func runEvents(t *testing.T, stderr string) (runSummaryLine, []map[string]any) {
	t.Helper()
	var sum runSummaryLine
	var evs []map[string]any
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		evs = append(evs, m)
		if m["type"] == "summary" {
			json.Unmarshal([]byte(l), &sum)
		}
	}
	if sum.Type != "summary" {
		t.Fatalf("run --json printed no summary on stderr:\n%s", stderr)
	}
	return sum, evs
}

// runEventsSoFar is what run --json has said on stderr so far.
func runEventsSoFar(stderr string) []map[string]any {
	var evs []map[string]any
	for _, l := range strings.Split(stderr, "\n") {
		var m map[string]any
		if strings.HasPrefix(l, "{") && json.Unmarshal([]byte(l), &m) == nil {
			evs = append(evs, m)
		}
	}
	return evs
}

// gated is cmd that waits, inside run's cgroup, until goFile exists: run
// starts it at once, and the test lets it go once the steering is in
// place, so that every byte it moves is steered (a command let loose at
// once sends on the routed path until the agents are ready).
func gated(goFile string, cmd ...string) []string {
	return append([]string{"sh", "-c", `until [ -e "$0" ]; do sleep 0.05; done; exec "$@"`, goFile}, cmd...)
}

// release creates goFile: what gated waits for.
func release(t *testing.T, goFile string) {
	t.Helper()
	writeFile(t, goFile, "", 0o644)
}

// waitRunActive waits until run p says its reservation is ACTIVE (every
// managed node on its path has its part in place: a push's sockets,
// marked from their creation, are steered from their first packet) and
// returns the reservation's id.
func (a *agentBed) waitRunActive(p *proc) string {
	a.t.Helper()
	id := ""
	if !waitFor(time.Minute, func() bool {
		for _, e := range runEventsSoFar(p.err.String()) {
			if e["type"] == "reservation" && e["state"] == "ACTIVE" {
				id, _ = e["id"].(string)
			}
		}
		return id != "" || p.Exited()
	}) || id == "" {
		a.t.Fatalf("run's reservation did not become ACTIVE:\n%s", p.err.String())
	}
	return id
}

// waitPullSteered waits until run p has learnt the connections enough
// asks for (run's "flows" events) and a1's agent, which sends the pull,
// has put in place the flow spec that lists them: a1's kernel holds, for
// each, the nftables rule that gives its packets the reservation's DSCP
// (added after the ip rules and routes it needs, agent.Apply). The agents
// report a reservation provisioned once per path, not again when its
// flows change, so the test reads a1's kernel.
func (a *agentBed) waitPullSteered(p *proc, enough func(learnt []string) bool) {
	a.t.Helper()
	var learnt []string
	if !waitFor(time.Minute, func() bool {
		learnt = learnt[:0]
		for _, e := range runEventsSoFar(p.err.String()) {
			if e["type"] == "flows" {
				for _, f := range e["flows"].([]any) {
					learnt = append(learnt, f.(string))
				}
			}
		}
		return len(learnt) > 0 && enough(learnt) || p.Exited()
	}) || p.Exited() {
		a.t.Fatalf("run did not learn the pull's connections (learnt %q):\n%s", learnt, p.err.String())
	}
	ns, err := os.Open(testbed.NamespacePath(a.name, "a1"))
	if err != nil {
		a.t.Fatal(err)
	}
	defer ns.Close()
	var missing []string
	if !waitFor(time.Minute, func() bool {
		held, err := agent.Fetch(int(ns.Fd()), nil)
		if err != nil {
			a.t.Fatalf("read a1's kernel: %v", err)
		}
		missing = missing[:0]
		for _, f := range learnt {
			if !slices.ContainsFunc(held.Nft, func(r agent.NftRule) bool { return r.Flow.String() == f }) {
				missing = append(missing, f)
			}
		}
		return len(missing) == 0
	}) {
		held, _ := agent.Fetch(int(ns.Fd()), nil)
		a.t.Fatalf("a1's agent did not put in place the learnt flows %q: a1's nftables rules: %+v", missing, held.Nft)
	}
}

// pidOf is the first process whose arguments satisfy match, or 0.
func pidOf(match func(args []string) bool) int {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue
		}
		if match(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			return pid
		}
	}
	return 0
}

// in is a's view for subtest t, which does not stop or restart the
// controller: what fails there fails t, and what t starts ends with it.
func (a *agentBed) in(t *testing.T) *agentBed {
	b := *a.tb
	b.t = t
	c := a.c
	return &agentBed{tb: &b, agentTok: a.agentTok, st: a.st,
		c: &cliCtl{t: t, url: c.url, sock: c.sock, dir: c.dir, adminTok: c.adminTok, extra: c.extra, stopFn: c.stopFn}}
}

// TestRun runs its subtests on one controller and testbed, one after
// another: each counts what the links carried while it ran, and each run
// releases its reservation and removes its cgroup before the next.
func TestRun(t *testing.T) {
	t.Parallel()
	a := upAgentBed(t)
	t.Run("iperf3 steered", func(t *testing.T) { runIperf3Steered(t, a.in(t)) })
	t.Run("exit status", func(t *testing.T) { runExitStatus(t, a.in(t)) })
	t.Run("pull", func(t *testing.T) { runPull(t, a.in(t)) })
	t.Run("apps", func(t *testing.T) { runApps(t, a.in(t)) })
}

// runIn starts lightpath run --json in node, booking from → to at bw
// over dedicated, with cmd as its command.
func (a *agentBed) runIn(node, from, to, bw string, cmd ...string) *proc {
	a.t.Helper()
	path := "a1-ra,dedicated,b1-rb"
	if from == "b1" {
		path = "b1-rb,dedicated,a1-ra"
	}
	args := []string{"testbed", "exec", "--name", a.name, node, "--", lpBin, "run", "--reserve", bw, "--from", from, "--to", to, "--reserve-path", path,
		"--controller", a.c.sock, "--controller-token-file", a.c.adminTok, "--json", "--"}
	return startLP(a.t, runOpts{timeout: 2 * time.Minute}, append(args, cmd...)...)
}

// runResv is what the controller stores of a run's reservation beyond
// liveResv: its flow spec and the idempotency key it was booked with.
type runResv struct {
	FlowSpec       string `json:"flow_spec"`
	IdempotencyKey string `json:"idempotency_key"`
}

func (a *agentBed) runResv(id string) runResv {
	a.t.Helper()
	var got struct {
		Reservation runResv `json:"reservation"`
	}
	if err := a.c.getJSON(a.c.adminTok, "/api/v1/reservations/"+id, &got); err != nil {
		a.t.Fatalf("read reservation %s: %v", id, err)
	}
	return got.Reservation
}

// checkRunCleanedUp checks that run left nothing: the reservation
// released, the cgroup gone; and that it booked with a key of its own.
func (a *agentBed) checkRunCleanedUp(sum runSummaryLine) {
	a.t.Helper()
	if got := a.resv(sum.Reservation); got.State != "CANCELLED" || sum.ReservationState != "CANCELLED" {
		a.t.Errorf("reservation %s after run: %s (summary says %s), want CANCELLED", sum.Reservation, got.State, sum.ReservationState)
	}
	if k := a.runResv(sum.Reservation).IdempotencyKey; !strings.HasPrefix(k, "run-") {
		a.t.Errorf("reservation %s was booked with idempotency key %q: want run's own, run-…", sum.Reservation, k)
	}
	if !strings.HasPrefix(sum.Cgroup, "lightpath/run-") || !sum.CgroupRemoved {
		a.t.Errorf("cgroup %q, removed %v: want lightpath/run-… removed", sum.Cgroup, sum.CgroupRemoved)
	}
	if _, err := os.Stat(filepath.Join(cgroup2Root, sum.Cgroup)); !os.IsNotExist(err) {
		a.t.Errorf("cgroup %s still there after run: %v", sum.Cgroup, err)
	}
}

// checkSteeredApart checks that what (a command) moved runBytes (and
// sent at most runMax) under lightpath run across the dedicated link (all
// but routed of them,
// routed being what the command could send on the routed path before its
// steering was in place) and that the same command beside it moved
// besideBytes over wan. The links count a byte as it crosses, which may
// be after the command that wrote it ended: it waits until they have
// counted that much (or a minute passed: a hang). Dedicated carries
// nothing else, so it never carries more than the run's bytes and their
// headers: the one beside stayed on wan.
func (a *agentBed) checkSteeredApart(t *testing.T, what string, s0 testbedStatus, runBytes, runMax, routed, besideBytes uint64) {
	t.Helper()
	var ded, wan uint64
	waitFor(time.Minute, func() bool {
		s1 := a.status()
		ded, wan = s1.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"), s1.bytesOn("wan", "ra")-s0.bytesOn("wan", "ra")
		return ded+routed >= runBytes && wan >= besideBytes
	})
	t.Logf("%s: %d bytes under run (at most %d before the steering), %d beside; dedicated ra>rb carried %d, wan %d", what, runBytes, routed, besideBytes, ded, wan)
	if ded+routed < runBytes {
		t.Errorf("dedicated carried %d of the %d bytes of %s under run (at most %d may have gone before the steering was in place): want it steered",
			ded, runBytes, what, routed)
	}
	if ded > runMax+runMax/10+1<<20 {
		t.Errorf("dedicated carried %d bytes, more than the %d of %s under run: the one beside it was steered too", ded, runMax, what)
	}
	if wan < besideBytes {
		t.Errorf("wan carried %d bytes, less than the %d of %s beside: it left the routed path", wan, besideBytes, what)
	}
}

// iperfBytes is what an iperf3 -J test's receiver got (all of which
// crossed the links; the test ends with bytes still on the way, which are
// lost) and what its sender sent.
func iperfBytes(t *testing.T, what, stdout string) (got, sent uint64) {
	t.Helper()
	var r struct {
		End struct {
			SumSent struct {
				Bytes uint64 `json:"bytes"`
			} `json:"sum_sent"`
			SumReceived struct {
				Bytes uint64 `json:"bytes"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.End.SumSent.Bytes == 0 || r.End.SumReceived.Bytes == 0 {
		t.Fatalf("%s: no iperf3 result (%v):\n%s", what, err, stdout)
	}
	return r.End.SumReceived.Bytes, r.End.SumSent.Bytes
}

// iperfServer starts iperf3 -s on port in node (with args), for one
// test, and waits until it listens.
func (a *agentBed) iperfServer(node, port string, args ...string) {
	a.t.Helper()
	startLP(a.t, runOpts{timeout: 2 * time.Minute}, append([]string{"testbed", "exec", "--name", a.name, node, "--", "iperf3", "-s", "-1", "-p", port}, args...)...)
	if !waitFor(10*time.Second, func() bool {
		return a.exec(node, "sh", "-c", "ss -Hltn 'sport = :"+port+"' | grep -q LISTEN").code == 0
	}) {
		a.t.Fatalf("iperf3 -s in %s did not listen on %s", node, port)
	}
}

// runIperf3Steered: iperf3 under lightpath run --reserve is steered
// onto the dedicated link by its cgroup, while the same iperf3 started
// beside it without run stays on wan; run passes on the exit status,
// releases the reservation and removes its cgroup.
func runIperf3Steered(t *testing.T, a *agentBed) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 is not installed (Debian package iperf3)")
	}
	a.iperfServer("b1", "5201")
	a.iperfServer("b1", "5202")

	s0 := a.status()
	goFile := filepath.Join(t.TempDir(), "go")
	defer os.WriteFile(goFile, nil, 0o644) // a test that failed lets the command go
	ran := a.runIn("a1", "a1", "b1", "300M", gated(goFile, "iperf3", "-c", "198.18.2.1", "-p", "5201", "-n", "32M", "-J")...)
	a.waitRunActive(ran)
	release(t, goFile)
	beside := startLP(t, runOpts{timeout: 2 * time.Minute}, "testbed", "exec", "--name", a.name, "a1", "--",
		"iperf3", "-c", "198.18.2.1", "-p", "5202", "-n", "32M", "-J")
	rr, br := ran.Wait(), beside.Wait()
	mustSucceed(t, "run iperf3", rr)
	mustSucceed(t, "iperf3 beside", br)
	sum, evs := runEvents(t, rr.stderr)
	t.Logf("run's events: %v", evs)
	if sum.ExitStatus != 0 || sum.DSCP == 0 || sum.Mark != uint32(0x100+sum.DSCP) {
		t.Errorf("summary %+v: want exit 0, a DSCP and mark 0x100+DSCP", sum)
	}
	if want := "cgroup " + sum.Cgroup; !strings.Contains(sum.FlowSpec, "any 198.18.1.1 > 198.18.2.1 "+want) {
		t.Errorf("flow spec %q: want any 198.18.1.1 > 198.18.2.1 %s", sum.FlowSpec, want)
	}
	active := false
	for _, e := range evs {
		active = active || e["type"] == "reservation" && e["state"] == "ACTIVE"
	}
	if !active {
		t.Errorf("run never saw its reservation ACTIVE: %v", evs)
	}
	// Let go once ACTIVE: every byte on dedicated.
	runGot, runSent := iperfBytes(t, "run iperf3", rr.stdout)
	besideGot, _ := iperfBytes(t, "iperf3 beside", br.stdout)
	a.checkSteeredApart(t, "iperf3", s0, runGot, runSent, 0, besideGot)
	a.checkRunCleanedUp(sum)
}

// runExitStatus: the command's status is run's, 128+N when signal N
// ended it, also when run itself is interrupted (the signal is passed on);
// every time the reservation is released and the cgroup removed.
func runExitStatus(t *testing.T, a *agentBed) {
	for _, tc := range []struct {
		name string
		cmd  []string
		want int
	}{
		{"exit 3", []string{"sh", "-c", "exit 3"}, 3},
		{"killed", []string{"sh", "-c", "kill -TERM $$"}, 128 + int(syscall.SIGTERM)},
		{"in the cgroup", []string{"sh", "-c", "grep -q '^0::/lightpath/run-' /proc/self/cgroup"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := a.in(t)
			r := a.runIn("a1", "a1", "b1", "100M", tc.cmd...).Wait()
			sum, _ := runEvents(t, r.stderr)
			if r.code != tc.want || sum.ExitStatus != tc.want {
				t.Errorf("exit status %d, summary %d: want %d\n%s", r.code, sum.ExitStatus, tc.want, r.stderr)
			}
			a.checkRunCleanedUp(sum)
		})
	}

	// run interrupted: the command gets the SIGINT, run waits for it and
	// ends with its status after releasing. Interrupted once the command
	// runs in run's cgroup.
	p := a.runIn("a1", "a1", "b1", "100M", "sleep", "3600")
	if !waitFor(time.Minute, func() bool { return inRunCgroup("sleep", "3600") || p.Exited() }) || p.Exited() {
		t.Fatalf("the command did not start in run's cgroup:\n%s", p.err.String())
	}
	p.Signal(syscall.SIGINT)
	r := p.Wait()
	sum, _ := runEvents(t, r.stderr)
	if want := 128 + int(syscall.SIGINT); r.code != want || sum.ExitStatus != want {
		t.Errorf("interrupted: exit status %d, summary %d; want %d\n%s", r.code, sum.ExitStatus, want, r.stderr)
	}
	a.checkRunCleanedUp(sum)

	// A command that cannot be started: 127, nothing left behind.
	r = a.runIn("a1", "a1", "b1", "100M", "/nonexistent/cmd").Wait()
	if r.code != 127 || !strings.Contains(r.stderr, "lightpath: run: start /nonexistent/cmd:") {
		t.Errorf("missing command: exit %d\n%s", r.code, r.stderr)
	}
	sum, _ = runEvents(t, r.stderr)
	a.checkRunCleanedUp(sum)

	// Run on a node that is neither end (a2 for a1 → b1): the flows would
	// be sent, and the cgroup named, on another host. Refused, nothing
	// booked.
	before := len(a.c.listOf(a.c.adminTok))
	r = a.runIn("a2", "a1", "b1", "100M", "true").Wait()
	if r.code != 1 || !strings.Contains(r.stderr, "lightpath: run: this host is neither --from a1 nor --to b1") {
		t.Errorf("run in a2 for a1 → b1: exit %d\n%s", r.code, r.stderr)
	}
	if after := len(a.c.listOf(a.c.adminTok)); after != before {
		t.Errorf("run in a2 for a1 → b1 booked: %d reservations, %d before", after, before)
	}
}

// inRunCgroup says whether a process with command line argv runs in a
// cgroup lightpath run made.
func inRunCgroup(argv ...string) bool {
	want := strings.Join(argv, "\x00") + "\x00"
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		if b, err := os.ReadFile(f); err != nil || string(b) != want {
			continue
		}
		cg, err := os.ReadFile(filepath.Join(filepath.Dir(f), "cgroup"))
		if err == nil && runCgroupRE.Match(cg) {
			return true
		}
	}
	return false
}

var runCgroupRE = regexp.MustCompile(`(?m)^0::/lightpath/run-`)

// runPull: data flowing to the node run runs on (iperf3 -R: the
// server in a1 sends to the client in b1) comes from sockets run cannot
// mark, on a node that has no such cgroup on a real deployment: run books
// a placeholder flow naming no cgroup (udp to a port it holds), learns
// the command's connections (sock_diag) and puts them in the flow spec in
// its place; a1's agent then steers them onto dedicated, while the same
// pull started beside it stays on wan.
func runPull(t *testing.T, a *agentBed) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 is not installed (Debian package iperf3)")
	}
	// The server under run's pull sends what it reads from a FIFO the
	// test holds open: nothing until the connections are learnt and
	// steered, then 32 MiB, all of it on dedicated.
	const size = 32 << 20
	fifo := filepath.Join(t.TempDir(), "data")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	feed, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Close()
	a.iperfServer("a1", "5201", "-F", fifo)
	a.iperfServer("a1", "5202")

	s0 := a.status()
	ran := a.runIn("b1", "a1", "b1", "300M", "iperf3", "-c", "198.18.1.1", "-p", "5201", "-R", "-n", "32M", "-J")
	// iperf3's control connection and its data stream's.
	a.waitPullSteered(ran, func(learnt []string) bool { return len(learnt) >= 2 })
	go func() {
		feed.Write(make([]byte, size))
		feed.Close()
	}()
	beside := startLP(t, runOpts{timeout: 2 * time.Minute}, "testbed", "exec", "--name", a.name, "b1", "--",
		"iperf3", "-c", "198.18.1.1", "-p", "5202", "-R", "-n", "32M", "-J")
	rr, br := ran.Wait(), beside.Wait()
	mustSucceed(t, "run iperf3 -R", rr)
	mustSucceed(t, "iperf3 -R beside", br)
	sum, evs := runEvents(t, rr.stderr)
	var learnt []any
	var specs []string // every flow spec the reservation had, as booked first
	for _, e := range evs {
		if fs, ok := e["flow_spec"].(string); ok && fs != "" {
			specs = append(specs, fs)
		}
		if e["type"] == "flows" {
			learnt = append(learnt, e["flows"].([]any)...)
		}
	}
	t.Logf("flow specs: %q; flows learnt: %v", specs, learnt)
	// Booked for the placeholder alone: the sending node, a1, is never
	// asked to find b1's cgroup.
	if len(specs) == 0 || !regexp.MustCompile(`^udp 198\.18\.1\.1 > 198\.18\.2\.1:\d+$`).MatchString(specs[0]) {
		t.Errorf("booked flow spec %q: want the placeholder udp 198.18.1.1 > 198.18.2.1:PORT", specs)
	}
	for _, fs := range append(specs, sum.FlowSpec, a.runResv(sum.Reservation).FlowSpec) {
		if strings.Contains(fs, "cgroup") {
			t.Errorf("flow spec %q names a cgroup: the far node sends this pull and has no such cgroup", fs)
		}
	}
	if sum.FlowsAdded == 0 || len(learnt) != sum.FlowsAdded || !strings.Contains(sum.FlowSpec, "tcp 198.18.1.1:5201 > 198.18.2.1:") {
		t.Errorf("flows added %d (events %v), flow spec %q: want the connections to 198.18.1.1:5201 added", sum.FlowsAdded, learnt, sum.FlowSpec)
	}
	// The learnt connections replaced the placeholder: they are all it
	// lists.
	if n := strings.Count(sum.FlowSpec, ",") + 1; n != sum.FlowsAdded || strings.Contains(sum.FlowSpec, "udp") {
		t.Errorf("final flow spec %q: want the %d connections learnt and nothing else", sum.FlowSpec, sum.FlowsAdded)
	}
	if strings.Contains(sum.FlowSpec, ":5202") {
		t.Errorf("flow spec %q has the iperf3 beside run's connection", sum.FlowSpec)
	}
	runGot, runSent := iperfBytes(t, "run iperf3 -R", rr.stdout)
	if runSent != size {
		t.Errorf("a1 sent iperf3 -R under run %d bytes, want the %d fed to its server", runSent, size)
	}
	besideGot, _ := iperfBytes(t, "iperf3 -R beside", br.stdout)
	a.checkSteeredApart(t, "the pull", s0, runGot, runSent, 0, besideGot)
	a.checkRunCleanedUp(sum)
}

// listenIn starts a server in node (argv) and waits until port listens.
func (a *agentBed) listenIn(node, port string, argv ...string) {
	a.t.Helper()
	startLP(a.t, runOpts{timeout: 5 * time.Minute}, append([]string{"testbed", "exec", "--name", a.name, node, "--"}, argv...)...)
	if !waitFor(15*time.Second, func() bool {
		return a.exec(node, "sh", "-c", "ss -Hltn 'sport = :"+port+"' | grep -q LISTEN").code == 0
	}) {
		a.t.Fatalf("%s in %s did not listen on %s", argv[0], node, port)
	}
}

// runApps: xrdcp and globus-url-copy (GridFTP, its data channel on
// ports of the server's choosing) run under lightpath run, pushing from
// a1 to b1 and pulling from a1 into b1: each copy arrives whole and its
// bytes cross dedicated, while the same copy started beside it without
// run stays on wan. The servers (xrootd, globus-gridftp-server) run
// as nobody, as they refuse root or serve anonymous users as nobody.
//
// Each copy moves only once its steering is in place, so that what
// crossed dedicated is known: a push once its reservation is ACTIVE; the
// xrdcp pull (one connection) with a1's xrootd stopped until that
// connection is learnt and a1's agent steers it; the GridFTP pull (whose
// data connection opens only once the server answers) with its output
// held in a pipe until the data connection is learnt and steered, which
// lets at most a receive buffer (b1's capped at 1 MiB for it), the pipe
// and the client's buffers cross wan before.
func runApps(t *testing.T, a *agentBed) {
	for _, tool := range []string{"xrdcp", "xrootd", "globus-url-copy", "globus-gridftp-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (scripts/deps.sh installs xrootd-client, xrootd-server, globus-gass-copy-progs and globus-gridftp-server-progs)", tool)
		}
	}
	// A directory the servers (as nobody) may write in and its parents
	// traverse; the test's own.
	dir := t.TempDir()
	for d := dir; d != filepath.Dir(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		if d == os.TempDir() {
			break
		}
		os.Chmod(d, 0o777)
	}
	// 32 MiB: the size says nothing about the steering; it is enough to
	// tell the copy's bytes from the other traffic on the links.
	const size = 32 << 20
	src := filepath.Join(dir, "src.bin")
	writeRandom(t, src, size, 18)
	os.Chmod(src, 0o644)
	xcfg := filepath.Join(dir, "xrootd.cfg")
	writeFile(t, xcfg, "all.export "+dir+"\nxrd.port 1094\nall.adminpath "+dir+"\nall.pidpath "+dir+"\n", 0o644)
	for _, n := range []struct{ node, addr string }{{"a1", "198.18.1.1"}, {"b1", "198.18.2.1"}} {
		a.listenIn(n.node, "1094", "xrootd", "-R", "nobody", "-c", xcfg, "-l", filepath.Join(dir, "xrootd-"+n.node+".log"), "-n", "lp-"+n.node)
		a.listenIn(n.node, "2811", "globus-gridftp-server", "-p", "2811", "-aa", "-anonymous-user", "nobody",
			"-data-interface", n.addr, "-log-level", "ERROR", "-logfile", filepath.Join(dir, "gridftp-"+n.node+".log"))
	}
	xrootdA1 := pidOf(func(args []string) bool {
		return filepath.Base(args[0]) == "xrootd" && slices.Contains(args, "lp-a1") && slices.Contains(args, xcfg)
	})
	if xrootdA1 == 0 {
		t.Fatal("no process of a1's xrootd")
	}
	const farData = "198.18.1.1:" // a learnt flow from a1, the far end of a pull
	for _, tc := range []struct {
		name, node string                    // where run runs
		cmd        func(dst string) []string // the copy, landing in dir/dst
		// how it is held until steered: "active" (gated until ACTIVE),
		// "server" (a1's xrootd stopped), "pipe" (output held)
		hold string
	}{
		{"xrdcp push", "a1", func(dst string) []string {
			return []string{"xrdcp", "-f", "-s", src, "root://198.18.2.1:1094/" + dir + "/" + dst}
		}, "active"},
		{"xrdcp pull", "b1", func(dst string) []string {
			return []string{"xrdcp", "-f", "-s", "root://198.18.1.1:1094/" + src, dir + "/" + dst}
		}, "server"},
		{"globus-url-copy push", "a1", func(dst string) []string {
			return []string{"globus-url-copy", "file://" + src, "ftp://198.18.2.1:2811" + dir + "/" + dst}
		}, "active"},
		{"globus-url-copy pull", "b1", func(dst string) []string {
			return []string{"globus-url-copy", "-tcp-bs", "1048576", "ftp://198.18.1.1:2811" + src, "file://" + dir + "/" + dst}
		}, "pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := a.in(t)
			dst := strings.ReplaceAll(tc.name, " ", "-")
			goFile := filepath.Join(t.TempDir(), "go")
			defer os.WriteFile(goFile, nil, 0o644) // a test that failed lets the command go
			cmd := tc.cmd(dst + ".bin")
			routed := uint64(0) // what may cross wan before the steering
			s0 := a.status()
			var ran *proc
			switch tc.hold {
			case "active":
				ran = a.runIn(tc.node, "a1", "b1", "500M", gated(goFile, cmd...)...)
				a.waitRunActive(ran)
				release(t, goFile)
			case "server":
				syscall.Kill(xrootdA1, syscall.SIGSTOP)
				defer syscall.Kill(xrootdA1, syscall.SIGCONT)
				ran = a.runIn(tc.node, "a1", "b1", "500M", cmd...)
				a.waitPullSteered(ran, func(learnt []string) bool {
					return slices.ContainsFunc(learnt, func(f string) bool { return strings.Contains(f, farData+"1094 ") })
				})
				syscall.Kill(xrootdA1, syscall.SIGCONT)
			case "pipe":
				// b1's receive buffers capped at 1 MiB while this runs.
				was := strings.TrimSpace(a.sh("b1", "sysctl -n net.ipv4.tcp_rmem"))
				a.sh("b1", "sysctl -qw net.ipv4.tcp_rmem='4096 131072 1048576'")
				defer a.sh("b1", "sysctl -qw net.ipv4.tcp_rmem='"+was+"'")
				cmd[len(cmd)-1] = "file:///dev/stdout"
				ran = a.runIn(tc.node, "a1", "b1", "500M", append([]string{"sh", "-c",
					`out=$1; shift; "$@" | { until [ -e "$0" ]; do sleep 0.05; done; exec cat > "$out"; }`, goFile, filepath.Join(dir, dst+".bin")}, cmd...)...)
				// The data connection: from a1, not its control port.
				a.waitPullSteered(ran, func(learnt []string) bool {
					return slices.ContainsFunc(learnt, func(f string) bool {
						return strings.Contains(f, farData) && !strings.Contains(f, farData+"2811 ")
					})
				})
				release(t, goFile)
				routed = 8 << 20
			}
			// The same copy beside it, without run: it stays routed.
			beside := startLP(t, runOpts{timeout: 2 * time.Minute}, append([]string{"testbed", "exec", "--name", a.name, tc.node, "--"},
				tc.cmd(dst+"-beside.bin")...)...)
			r, br := ran.Wait(), beside.Wait()
			mustSucceed(t, tc.name, r)
			mustSucceed(t, tc.name+" beside", br)
			sum, _ := runEvents(t, r.stderr)
			for _, f := range []string{dst + ".bin", dst + "-beside.bin"} {
				if !sameContent(t, src, filepath.Join(dir, f)) {
					t.Errorf("%s: %s differs from the source", tc.name, f)
				}
			}
			t.Logf("%s: flows added %d", tc.name, sum.FlowsAdded)
			a.checkSteeredApart(t, tc.name, s0, size, size, routed, size)
			if tc.node == "b1" && (sum.FlowsAdded == 0 || strings.Contains(sum.FlowSpec, "cgroup")) {
				t.Errorf("%s: flow spec %q, %d connections added: want the connections learnt, and no cgroup on the sending node a1", tc.name, sum.FlowSpec, sum.FlowsAdded)
			}
			a.checkRunCleanedUp(sum)
		})
	}
}

// TestRunNoCgroup2: a host whose cgroup2 hierarchy is read-only, or not
// mounted, gets one clear line and nothing is booked (the controller
// named does not exist: run stops before asking it). Each case runs in a
// mount namespace of its own, so the host's hierarchy is untouched.
func TestRunNoCgroup2(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	if _, err := os.Stat(cgroup2Root); err != nil {
		t.Skipf("no cgroup2 hierarchy at %s: %v", cgroup2Root, err)
	}
	for _, tc := range []struct{ name, prep, want string }{
		{"read-only", "mount -o remount,bind,ro " + cgroup2Root, "read-only file system"},
		{"not mounted", "umount -l " + cgroup2Root, "no cgroup2 file system is mounted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
				tc.prep+` && exec "$0" run --reserve 1M --from a1 --to b1 --controller unix:/nonexistent.sock -- true`, lpBin)
			cmd.Env = cleanEnv()
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.HasPrefix(string(out), "lightpath: run: no writable cgroup2 hierarchy: ") || !strings.Contains(string(out), tc.want) ||
				strings.Count(string(out), "\n") != 1 {
				t.Errorf("%v:\n%s\nwant one line: lightpath: run: no writable cgroup2 hierarchy: ...%s", err, out, tc.want)
			}
		})
	}
}
