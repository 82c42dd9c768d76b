//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
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

// checkSteeredApart checks that what (a command) moved runBytes under
// lightpath run across the dedicated link (ded bytes) and the same command
// beside it moved besideBytes over wan (wan bytes). The one under run
// starts on wan until the agents make its reservation ACTIVE, then moves:
// most of its bytes cross dedicated. Dedicated carries nothing else, so it
// never carries more than the run's bytes and their headers: the one
// beside stayed on wan.
func checkSteeredApart(t *testing.T, what string, runBytes, besideBytes, ded, wan uint64) {
	t.Helper()
	if ded < runBytes/2 {
		t.Errorf("dedicated carried %d of the %d bytes of %s under run: want it steered", ded, runBytes, what)
	}
	if ded > runBytes+runBytes/10+1<<20 {
		t.Errorf("dedicated carried %d bytes, more than the %d of %s under run: the one beside it was steered too", ded, runBytes, what)
	}
	if wan < besideBytes*9/10 {
		t.Errorf("wan carried %d bytes, less than the %d of %s beside: it left the routed path", wan, besideBytes, what)
	}
}

// iperfSent is the bytes an iperf3 -J client sent.
func iperfSent(t *testing.T, what, stdout string) uint64 {
	t.Helper()
	var r struct {
		End struct {
			SumSent struct {
				Bytes uint64 `json:"bytes"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.End.SumSent.Bytes == 0 {
		t.Fatalf("%s: no iperf3 result (%v):\n%s", what, err, stdout)
	}
	return r.End.SumSent.Bytes
}

// iperfServer starts iperf3 -s on port in node, for one test, and waits
// until it listens.
func (a *agentBed) iperfServer(node, port string) {
	a.t.Helper()
	startLP(a.t, runOpts{timeout: 2 * time.Minute}, "testbed", "exec", "--name", a.name, node, "--", "iperf3", "-s", "-1", "-p", port)
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
	ran := a.runIn("a1", "a1", "b1", "300M", "iperf3", "-c", "198.18.2.1", "-p", "5201", "-t", "5", "-J")
	beside := startLP(t, runOpts{timeout: 2 * time.Minute}, "testbed", "exec", "--name", a.name, "a1", "--",
		"iperf3", "-c", "198.18.2.1", "-p", "5202", "-t", "5", "-J")
	rr, br := ran.Wait(), beside.Wait()
	s1 := a.status()
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
	runBytes, besideBytes := iperfSent(t, "run iperf3", rr.stdout), iperfSent(t, "iperf3 beside", br.stdout)
	ded, wan := s1.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"), s1.bytesOn("wan", "ra")-s0.bytesOn("wan", "ra")
	t.Logf("iperf3 under run sent %d bytes, beside it %d; dedicated ra>rb carried %d, wan %d", runBytes, besideBytes, ded, wan)
	checkSteeredApart(t, "iperf3", runBytes, besideBytes, ded, wan)
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
	a.iperfServer("a1", "5201")
	a.iperfServer("a1", "5202")

	s0 := a.status()
	ran := a.runIn("b1", "a1", "b1", "300M", "iperf3", "-c", "198.18.1.1", "-p", "5201", "-R", "-t", "5", "-J")
	beside := startLP(t, runOpts{timeout: 2 * time.Minute}, "testbed", "exec", "--name", a.name, "b1", "--",
		"iperf3", "-c", "198.18.1.1", "-p", "5202", "-R", "-t", "5", "-J")
	rr, br := ran.Wait(), beside.Wait()
	s1 := a.status()
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
	runBytes, besideBytes := iperfSent(t, "run iperf3 -R", rr.stdout), iperfSent(t, "iperf3 -R beside", br.stdout)
	ded, wan := s1.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"), s1.bytesOn("wan", "ra")-s0.bytesOn("wan", "ra")
	t.Logf("a1 sent %d bytes to iperf3 -R under run, %d to the one beside; dedicated ra>rb carried %d, wan %d", runBytes, besideBytes, ded, wan)
	checkSteeredApart(t, "the pull", runBytes, besideBytes, ded, wan)
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
	src := filepath.Join(dir, "src.bin")
	writeRandom(t, src, 200<<20, 18)
	os.Chmod(src, 0o644)
	xcfg := filepath.Join(dir, "xrootd.cfg")
	writeFile(t, xcfg, "all.export "+dir+"\nxrd.port 1094\nall.adminpath "+dir+"\nall.pidpath "+dir+"\n", 0o644)
	for _, n := range []struct{ node, addr string }{{"a1", "198.18.1.1"}, {"b1", "198.18.2.1"}} {
		a.listenIn(n.node, "1094", "xrootd", "-R", "nobody", "-c", xcfg, "-l", filepath.Join(dir, "xrootd-"+n.node+".log"), "-n", "lp-"+n.node)
		a.listenIn(n.node, "2811", "globus-gridftp-server", "-p", "2811", "-aa", "-anonymous-user", "nobody",
			"-data-interface", n.addr, "-log-level", "ERROR", "-logfile", filepath.Join(dir, "gridftp-"+n.node+".log"))
	}
	for _, tc := range []struct {
		name, node string                    // where run runs
		cmd        func(dst string) []string // the copy, landing in dir/dst
	}{
		{"xrdcp push", "a1", func(dst string) []string {
			return []string{"xrdcp", "-f", "-s", src, "root://198.18.2.1:1094/" + dir + "/" + dst}
		}},
		{"xrdcp pull", "b1", func(dst string) []string {
			return []string{"xrdcp", "-f", "-s", "root://198.18.1.1:1094/" + src, dir + "/" + dst}
		}},
		{"globus-url-copy push", "a1", func(dst string) []string {
			return []string{"globus-url-copy", "file://" + src, "ftp://198.18.2.1:2811" + dir + "/" + dst}
		}},
		{"globus-url-copy pull", "b1", func(dst string) []string {
			return []string{"globus-url-copy", "ftp://198.18.1.1:2811" + src, "file://" + dir + "/" + dst}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := a.in(t)
			const size = 200 << 20
			dst := strings.ReplaceAll(tc.name, " ", "-")
			s0 := a.status()
			ran := a.runIn(tc.node, "a1", "b1", "500M", tc.cmd(dst+".bin")...)
			// The same copy beside it, without run: it stays routed.
			beside := startLP(t, runOpts{timeout: 2 * time.Minute}, append([]string{"testbed", "exec", "--name", a.name, tc.node, "--"},
				tc.cmd(dst+"-beside.bin")...)...)
			r, br := ran.Wait(), beside.Wait()
			s1 := a.status()
			mustSucceed(t, tc.name, r)
			mustSucceed(t, tc.name+" beside", br)
			sum, _ := runEvents(t, r.stderr)
			for _, f := range []string{dst + ".bin", dst + "-beside.bin"} {
				if !sameContent(t, src, filepath.Join(dir, f)) {
					t.Errorf("%s: %s differs from the source", tc.name, f)
				}
			}
			ded, wan := s1.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"), s1.bytesOn("wan", "ra")-s0.bytesOn("wan", "ra")
			t.Logf("%s: dedicated ra>rb carried %d bytes, wan %d; flows added %d", tc.name, ded, wan, sum.FlowsAdded)
			// A push is steered from its first packets on; a pull once
			// run has learnt its connections (within a poll or two).
			// Dedicated carries nothing but the copy under run.
			if ded < size/2 {
				t.Errorf("%s: dedicated carried %d of the %d bytes copied under run: want the copy steered", tc.name, ded, size)
			}
			if ded > size+size/10+1<<20 {
				t.Errorf("%s: dedicated carried %d bytes, more than the %d copied under run: the copy beside it was steered too", tc.name, ded, size)
			}
			if wan < size*9/10 {
				t.Errorf("%s: wan carried %d bytes, less than the %d the copy beside moved: it left the routed path", tc.name, wan, size)
			}
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
