//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cp --reserve for real: a controller, the two-site testbed with an agent
// in every node, a server in b1 and copies from a1 that book their own
// flows, start on the routed path, are steered onto the dedicated link
// once the reservation is ACTIVE, and release it at the end.

// reserveSummary is what these tests read of cp's summary.
type reserveSummary struct {
	summary
	Reservation      string           `json:"reservation"`
	ReservedBps      uint64           `json:"reserved_bps"`
	ReservationPath  string           `json:"reservation_path"`
	ReservationState string           `json:"reservation_state"`
	ReservedSeconds  float64          `json:"reserved_seconds"`
	ReservationError string           `json:"reservation_error"`
	BytesByPath      map[string]int64 `json:"bytes_by_path"`
}

func parseReserveSummary(t *testing.T, stdout string) reserveSummary {
	t.Helper()
	parseSummary(t, stdout) // checks the NDJSON and the contract's fields
	var s reserveSummary
	if err := json.Unmarshal([]byte(lastLine(stdout)), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout)
	}
	if s.BytesByPath == nil {
		t.Fatalf("summary without bytes_by_path: %s", lastLine(stdout))
	}
	return s
}

// cpEvent is a {"type":"reservation"} or {"type":"progress"} line of cp
// --json.
type cpEvent struct {
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	State     string  `json:"state"`
	Seconds   float64 `json:"seconds"`
	BytesSent int64   `json:"bytes_sent"`
}

func cpEvents(stdout, typ string) []cpEvent {
	var out []cpEvent
	for _, l := range strings.Split(stdout, "\n") {
		var ev cpEvent
		if json.Unmarshal([]byte(l), &ev) == nil && ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// reservationEvents describes the reservation's changes cp reported.
func reservationEvents(stdout string) []string {
	var out []string
	for _, ev := range cpEvents(stdout, "reservation") {
		out = append(out, fmt.Sprintf("%s at %.2fs after %d bytes", ev.State, ev.Seconds, ev.BytesSent))
	}
	return out
}

// reservation reads a reservation from the controller.
func (c *cliCtl) reservation(tokenFile, id string) cliResv {
	c.t.Helper()
	return readReservation(c.t, c.url, tokenFile, id)
}

// readReservation reads a reservation from the controller at url.
func readReservation(t *testing.T, url, tokenFile, id string) cliResv {
	t.Helper()
	var got struct {
		Reservation cliResv `json:"reservation"`
	}
	if err := getJSON(t, url, tokenFile, "/api/v1/reservations/"+id, &got); err != nil {
		t.Fatalf("read reservation %s: %v", id, err)
	}
	return got.Reservation
}

// activeFirst runs lightpath args in a1 with the server srv stopped
// (SIGSTOP) until cp reports its reservation ACTIVE. cp books as it starts
// and never waits for the reservation, so on a busy machine a copy could
// be done before the agents steer it; with the server stopped it moves
// next to no data until then. It returns cp's result and the bytes cp had
// counted when it saw the reservation ACTIVE. The push is paced (--rate)
// below the link: a full link on a machine too busy for
// the testbed's emulator delays the agents' probes past their deadline
// (see TestAgentMoreCrossTraffic).
func activeFirst(t *testing.T, b *tb, srv *proc, args ...string) (result, int64) {
	t.Helper()
	srv.Signal(syscall.SIGSTOP)
	resumed := false
	resume := func() {
		if !resumed {
			srv.Signal(syscall.SIGCONT)
			resumed = true
		}
	}
	defer resume()
	p := startLP(t, runOpts{timeout: 3 * time.Minute}, append([]string{"testbed", "exec", "--name", b.name, "a1", "--", lpBin}, args...)...)
	n0 := int64(-1)
	if !waitFor(2*time.Minute, func() bool {
		for _, ev := range cpEvents(p.out.String(), "reservation") {
			if ev.State == "ACTIVE" {
				n0 = ev.BytesSent
				return true
			}
		}
		return p.Exited()
	}) || n0 < 0 {
		resume()
		r := p.Wait()
		t.Fatalf("cp did not report its reservation ACTIVE while the server was stopped:\n%s%s", r.stdout, r.stderr)
	}
	resume()
	return p.Wait(), n0
}

// checkSteered checks a copy that saw its reservation ACTIVE after n0
// bytes and ded and wan, the bytes the links carried in the data's
// direction meanwhile: cp counted the rest of its bytes as reserved, and
// those crossed dedicated (a link counts headers and resent bytes as well,
// so at least as many); wan carried no more than what went before, and
// the connections' handshakes.
func checkSteered(t *testing.T, sum reserveSummary, n0 int64, ded, wan uint64) {
	t.Helper()
	if sum.BytesByPath["routed"] != n0 || sum.BytesByPath["reserved"] != sum.BytesSent-n0 {
		t.Errorf("bytes by path %v of %d: want %d routed (the bytes when cp saw the reservation ACTIVE), the rest reserved", sum.BytesByPath, sum.BytesSent, n0)
	}
	if ded < uint64(sum.BytesByPath["reserved"]) {
		t.Errorf("dedicated carried %d bytes, less than the %d cp counted as reserved", ded, sum.BytesByPath["reserved"])
	}
	if wan > uint64(n0)+1<<20 {
		t.Errorf("wan carried %d bytes: more than the %d sent before the reservation was ACTIVE", wan, n0)
	}
}

func TestCpReserve(t *testing.T) {
	t.Parallel()
	c, b := agentTestbed(t)
	userTok := filepath.Join(c.dir, "alice.token")
	c.ok(c.adminTok, "user", "add", "alice", "--role", "user")
	c.ok(c.adminTok, "user", "token", "create", "alice", "--out", userTok)

	srcDir, dstDir := scratchDir(t), scratchDir(t)
	const size = 200 << 20
	src := filepath.Join(srcDir, "data.bin")
	writeRandom(t, src, size, 31)
	srv := b.serveIn("b1", "198.18.2.1:7070", dstDir)

	// No path is named and the wan has room for 300 Mbit/s too: the
	// controller (default --path-preference dedicated) books the copy on
	// the dedicated link, whose bytes then cross it instead of the wan.

	t.Run("push", func(t *testing.T) {
		s0 := b.status()
		r, n0 := activeFirst(t, b, srv, "cp", "--json", "--rate", "400M", "--reserve", "300M", "--controller", c.sock, "--controller-token-file", userTok,
			src, "lp://198.18.2.1:7070/data.bin")
		s1 := b.status()
		mustSucceed(t, "cp --reserve 300M (push)", r)
		sum := parseReserveSummary(t, r.stdout)
		sameFile(t, src, filepath.Join(dstDir, "data.bin"))
		ded, wan := s1.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"), s1.bytesOn("wan", "ra")-s0.bytesOn("wan", "ra")
		t.Logf("push: %.0f Mbit/s; reservation %s at %d bit/s via %s, %s after; bytes by path %v (reserved for %.2f s); events %v",
			sum.ThroughputBps/1e6, sum.Reservation, sum.ReservedBps, sum.ReservationPath, sum.ReservationState, sum.BytesByPath,
			sum.ReservedSeconds, reservationEvents(r.stdout))
		t.Logf("push: link counters ra>rb: dedicated %d bytes, wan %d bytes", ded, wan)
		if !sum.Verified || sum.Bytes != size {
			t.Errorf("summary not verified: %+v", sum.summary)
		}
		if sum.Reservation == "" || sum.ReservedBps != 300e6 || sum.ReservationPath != "a1-ra,dedicated,b1-rb" || sum.ReservationState != "CANCELLED" {
			t.Errorf("summary's reservation: %s", lastLine(r.stdout))
		}
		if got := sum.BytesByPath["reserved"] + sum.BytesByPath["routed"]; got != sum.BytesSent {
			t.Errorf("bytes by path %v do not add up to bytes_sent %d", sum.BytesByPath, sum.BytesSent)
		}
		checkSteered(t, sum, n0, ded, wan)
		got := c.reservation(c.adminTok, sum.Reservation)
		if got.State != "CANCELLED" || got.From != "a1" || got.To != "b1" || got.Owner != "alice" {
			t.Errorf("after the copy the reservation is %+v: want alice's a1 → b1, CANCELLED", got)
		}
	})

	t.Run("pull", func(t *testing.T) {
		pullDir := scratchDir(t)
		s0 := b.status()
		// Not paced: --rate would cap what auto books.
		r, n0 := activeFirst(t, b, srv, "cp", "--json", "--reserve", "auto", "--reserve-path", "b1-rb,dedicated,a1-ra",
			"--controller", c.sock, "--controller-token-file", userTok, "lp://198.18.2.1:7070/data.bin", pullDir+"/")
		s1 := b.status()
		mustSucceed(t, "cp --reserve auto (pull)", r)
		sum := parseReserveSummary(t, r.stdout)
		sameFile(t, src, filepath.Join(pullDir, "data.bin"))
		ded, wan := s1.bytesOn("dedicated", "rb")-s0.bytesOn("dedicated", "rb"), s1.bytesOn("wan", "rb")-s0.bytesOn("wan", "rb")
		t.Logf("pull: %.0f Mbit/s; reservation %s at %d bit/s via %s, %s after; bytes by path %v (reserved for %.2f s); events %v",
			sum.ThroughputBps/1e6, sum.Reservation, sum.ReservedBps, sum.ReservationPath, sum.ReservationState, sum.BytesByPath,
			sum.ReservedSeconds, reservationEvents(r.stdout))
		t.Logf("pull: link counters rb>ra: dedicated %d bytes, wan %d bytes", ded, wan)
		// auto: the widest free on that path, the dedicated link's 90%.
		if sum.Reservation == "" || sum.ReservedBps != 1.8e9 || sum.ReservationPath != "b1-rb,dedicated,a1-ra" || sum.ReservationState != "CANCELLED" {
			t.Errorf("summary's reservation: %s", lastLine(r.stdout))
		}
		checkSteered(t, sum, n0, ded, wan)
		got := c.reservation(c.adminTok, sum.Reservation)
		if got.State != "CANCELLED" || got.From != "b1" || got.To != "a1" {
			t.Errorf("after the pull the reservation is %+v: want b1 → a1 (the data's direction), CANCELLED", got)
		}
	})

	// The graceful cutover and the fallback, mid-copy: with a1's agent
	// paused (it marks the copy's packets), the reservation cannot be
	// ACTIVE and the copy starts on the wan; resumed, the agent puts its
	// part in place and the copy's connections move onto the dedicated
	// link; cancelled by an operator, the reservation ends and they move
	// back to the wan, where the copy finishes. The copy itself is
	// stopped (SIGSTOP) while the agent comes back and while the cancel is
	// made, so that neither depends on how long the copy lasts; --rate
	// 200M keeps its bytes per second modest.
	t.Run("cutover and fallback", func(t *testing.T) {
		agent := agentPIDs(t, b, c.sock, "a1")
		for _, pid := range agent {
			syscall.Kill(pid, syscall.SIGSTOP)
		}
		resumed := false
		resume := func() {
			if !resumed {
				for _, pid := range agent {
					syscall.Kill(pid, syscall.SIGCONT)
				}
				resumed = true
			}
		}
		t.Cleanup(resume)
		s0 := b.status()
		p := startLP(t, runOpts{timeout: 2 * time.Minute}, "testbed", "exec", "--name", b.name, "a1", "--",
			lpBin, "cp", "--json", "--rate", "200M", "--reserve", "300M", "--controller", c.sock, "--controller-token-file", userTok,
			src, "lp://198.18.2.1:7070/data2.bin")
		sent := func() int64 {
			evs := cpEvents(p.out.String(), "progress")
			if len(evs) == 0 {
				return 0
			}
			return evs[len(evs)-1].BytesSent
		}
		state := func() (string, string) {
			evs := cpEvents(p.out.String(), "reservation")
			if len(evs) == 0 {
				return "", ""
			}
			return evs[len(evs)-1].ID, evs[len(evs)-1].State
		}
		if !waitFor(time.Minute, func() bool { return sent() >= size/5 || p.Exited() }) || p.Exited() {
			t.Fatalf("the copy did not get a fifth of the way:\n%s%s", p.out.String(), p.err.String())
		}
		if id, st := state(); id == "" || st != "RESERVED" {
			t.Fatalf("with a1's agent paused, the reservation is %q %q: want RESERVED\n%s", id, st, p.out.String())
		}
		id, _ := state()
		p.Signal(syscall.SIGSTOP)
		t.Cleanup(func() { p.cmd.Process.Signal(syscall.SIGCONT) })
		resume()
		if !waitFor(time.Minute, func() bool { return c.reservation(c.adminTok, id).State == "ACTIVE" }) {
			t.Fatalf("reservation %s not ACTIVE a minute after a1's agent came back: %+v", id, c.reservation(c.adminTok, id))
		}
		p.Signal(syscall.SIGCONT)
		if !waitFor(time.Minute, func() bool { _, st := state(); return st == "ACTIVE" || p.Exited() }) || p.Exited() {
			t.Fatalf("cp did not see its reservation ACTIVE:\n%s%s", p.out.String(), p.err.String())
		}
		at := sent()
		if !waitFor(time.Minute, func() bool { return sent() >= at+size/4 || p.Exited() }) || p.Exited() {
			t.Fatalf("the copy ended before a quarter more was sent:\n%s%s", p.out.String(), p.err.String())
		}
		p.Signal(syscall.SIGSTOP)
		c.ok(c.adminTok, "reserve", "cancel", id, "--reason", "the test ends it mid-copy")
		p.Signal(syscall.SIGCONT)
		r := p.Wait()
		s1 := b.status()
		mustSucceed(t, "cp --reserve with a cutover and a fallback", r)
		sum := parseReserveSummary(t, r.stdout)
		sameFile(t, src, filepath.Join(dstDir, "data2.bin"))
		ded, wan := s1.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"), s1.bytesOn("wan", "ra")-s0.bytesOn("wan", "ra")
		t.Logf("cutover: %.0f Mbit/s; bytes by path %v (reserved for %.2f s); events %v", sum.ThroughputBps/1e6, sum.BytesByPath,
			sum.ReservedSeconds, reservationEvents(r.stdout))
		t.Logf("cutover: link counters ra>rb: dedicated %d bytes, wan %d bytes", ded, wan)
		evs := strings.Join(func() []string {
			var out []string
			for _, ev := range cpEvents(r.stdout, "reservation") {
				out = append(out, ev.State)
			}
			return out
		}(), ",")
		if evs != "RESERVED,ACTIVE,CANCELLED" {
			t.Errorf("reservation events %s: want RESERVED,ACTIVE,CANCELLED", evs)
		}
		if !sum.Verified || sum.ReservationState != "CANCELLED" || sum.ReservationError != "" {
			t.Errorf("summary: %s", lastLine(r.stdout))
		}
		// Both paths carried their share, as cp's accounting says: the
		// test let a fifth or more go on the wan before the cutover and a
		// quarter or more on the dedicated link before the cancel (events,
		// not times). The links agree, give or take what was written
		// just before a change and sent after it (unsent and in flight: a
		// few MB).
		routed, reserved := sum.BytesByPath["routed"], sum.BytesByPath["reserved"]
		if routed < size/5 || reserved < size/4 {
			t.Errorf("bytes by path %v: want at least %d routed and %d reserved", sum.BytesByPath, size/5, size/4)
		}
		if wan < uint64(routed/2) || ded < uint64(reserved/2) {
			t.Errorf("wan carried %d bytes and dedicated %d for %d routed and %d reserved: want at least half of each", wan, ded, routed, reserved)
		}
	})

	for _, n := range []string{"a1", "ra", "rb", "b1"} {
		if log := b.exec(n, "sh", "-c", "cat /run/lightpath/"+b.name+"/agent-"+n+".log"); strings.Contains(log.stdout, "level=ERROR") {
			t.Errorf("agent %s logged errors:\n%s", n, log.stdout)
		}
	}
}

// TestCpReserveUnknownAddress copies on loopback, whose addresses no node
// of the controller's topology owns: cp warns and copies on the routed
// path, or with --reserve-required fails and copies nothing. Needs no root.
func TestCpReserveUnknownAddress(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	userTok := filepath.Join(c.dir, "alice.token")
	c.ok(c.adminTok, "user", "add", "alice", "--role", "user")
	c.ok(c.adminTok, "user", "token", "create", "alice", "--out", userTok)
	srcDir, dstDir := t.TempDir(), t.TempDir()
	src := filepath.Join(srcDir, "f")
	writeRandom(t, src, 3<<20, 32)
	s := startServer(t, dstDir)
	ctl := []string{"--controller", c.url, "--controller-token-file", userTok}

	r := runLP(t, runOpts{}, append([]string{"cp", "--reserve", "300M", "--reserve-required", src, "lp://" + s.addr + "/f"}, ctl...)...)
	checkFailure(t, "--reserve-required from an address no node owns", r, "--reserve-required", "neither this host's address 127.0.0.1 nor the server's 127.0.0.1 belongs to a node of topology two-site")
	if _, err := os.Stat(filepath.Join(dstDir, "f")); err == nil {
		t.Error("--reserve-required copied all the same")
	}

	r = runLP(t, runOpts{}, append([]string{"cp", "--json", "--reserve", "300M", src, "lp://" + s.addr + "/f"}, ctl...)...)
	mustSucceed(t, "cp --reserve from an address no node owns", r)
	sum := parseReserveSummary(t, r.stdout)
	sameFile(t, src, filepath.Join(dstDir, "f"))
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 ||
		!strings.HasPrefix(lines[0], "lightpath: cp: no reservation: neither this host's address 127.0.0.1 nor the server's 127.0.0.1 belongs to a node of topology two-site") ||
		!strings.HasSuffix(lines[0], "; copying on the routed path") {
		t.Errorf("want one warning line, got:\n%s", r.stderr)
	}
	t.Logf("warning: %s", strings.TrimSpace(r.stderr))
	if sum.Reservation != "" || sum.ReservationError == "" || sum.BytesByPath["routed"] != sum.BytesSent || sum.BytesByPath["reserved"] != 0 {
		t.Errorf("summary: %s", lastLine(r.stdout))
	}
	if got := c.listOf(c.adminTok); len(got) != 0 {
		t.Errorf("reservations booked: %+v", got)
	}
}

// agentPIDs are the processes of the agent of node that testbed up
// --agents started for this test's controller (its socket is the test's
// own, so no other test's agent matches).
func agentPIDs(t *testing.T, b *tb, sock, node string) []int {
	t.Helper()
	out, err := exec.Command("pgrep", "-f", "^"+regexp.QuoteMeta(lpBin+" agent --node "+node+" --controller "+sock)).Output()
	if err != nil {
		t.Fatalf("find the agent of %s in testbed %s: %v", node, b.name, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		t.Fatalf("no agent of %s running", node)
	}
	return pids
}
