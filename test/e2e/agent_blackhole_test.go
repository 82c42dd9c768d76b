//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAgentBlackhole blackholes the dedicated link under a reserved copy
// (issue 18, part 4): the carrier stays up, so only the agents' path
// probes can tell. a1 and b1 probe each other every 200 ms over the
// reserved path; after five probes lost in a row each withdraws its
// steering of the reservation (its ip rule at priority 10000+DSCP goes)
// and then reports the link down (its log says so in that order). wan has
// no room for the reservation (a filler holds it), so the controller
// degrades it for dedicated; the copy finishes, verified, on the routed
// path. With the link restored the probes are answered again: the link is
// reported up, the reservation recovers and the steering comes back. Then
// the same with the agents of a1 and b1 restarted while the link comes
// back: they report it up too.
func TestAgentBlackhole(t *testing.T) {
	t.Parallel()
	blackholeUnderCopy(t, false)
}

// TestAgentBlackholeMoved is TestAgentBlackhole with room on wan: the
// controller moves the reservation there and the copy finishes on it.
//
// How long the withdrawal takes (the detector's bound: five probes of 200
// ms and the reaction, under 2 s) is measured by bench/steering.sh
// (blackhole, rows withdrawn and reservation); the tests log it.
func TestAgentBlackholeMoved(t *testing.T) {
	t.Parallel()
	blackholeUnderCopy(t, true)
}

func blackholeUnderCopy(t *testing.T, movable bool) {
	skipUnlessNetRoot(t)
	a := upAgentBed(t)
	src, dstDir := a.copyBed(t, 43)
	if !movable {
		// wan (900 Mbit/s reservable) keeps 100 Mbit/s free: the
		// reservation cannot move there.
		a.reserveActive(a.c.adminTok, "a2", "b2", "800M", "tcp 198.18.1.2 > 198.18.2.2:7070", "a2-ra,wan,b2-rb")
	}
	r := a.reserveActive(a.c.adminTok, "a1", "b1", "400M", "tcp 198.18.1.1 > 198.18.2.1:7070", "a1-ra,dedicated,b1-rb")
	prio := strconv.Itoa(10000 + r.DSCP)
	probePrio := strconv.Itoa(10000 - 64 + r.DSCP)

	// steered says whether node holds the reservation's steering rule.
	ns := func(node string) string { return "lp-" + a.name + "-" + node }
	steered := func(node string) bool {
		out, err := exec.Command("ip", "netns", "exec", ns(node), "ip", "-4", "rule", "show", "pref", prio).Output()
		if err != nil {
			t.Fatalf("ip rule in %s: %v", node, err)
		}
		return strings.TrimSpace(string(out)) != ""
	}
	for _, n := range []string{"a1", "b1"} {
		if !steered(n) {
			t.Fatalf("%s holds no rule at priority %s with the reservation ACTIVE", n, prio)
		}
		if out := a.sh(n, "ip -4 rule show pref "+probePrio); !strings.Contains(out, "dport 7471") || !strings.Contains(out, "sport 7471") {
			t.Fatalf("%s: the probes' rules at priority %s: %q", n, probePrio, out)
		}
		if out := a.sh(n, "tc class show dev "+map[string]string{"a1": "a1-ra", "b1": "b1-rb"}[n]); !strings.Contains(out, "class htb 1:ff ") {
			t.Fatalf("%s: no probe class 1:ff:\n%s", n, out)
		}
	}

	cp, s0, s1 := a.copyOnDedicated(t, src)

	// The blackhole. Its moment is somewhere while the command runs:
	// the time to withdrawal (logged) is measured from the command's
	// start (an upper bound) and from its end (a lower bound).
	logAt := map[string]int{}
	for _, n := range []string{"a1", "b1"} {
		logAt[n] = len(agentLog(a, n))
	}
	start := time.Now()
	a.linkSet("dedicated", "--blackhole")
	set := time.Now()
	t.Logf("blackholed dedicated after %d MB crossed it (the command took %d ms)",
		(s1.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"))/1e6, set.Sub(start).Milliseconds())
	// Withdrawn: the node's steering rule is gone; or, when the
	// reservation can move, it may be back already (on the new path) by
	// the next poll, so its leaving dedicated counts too.
	onDedicated := func() bool {
		for _, h := range a.resv(r.ID).Path {
			if h.Link == "dedicated" {
				return true
			}
		}
		return false
	}
	withdrawn, how := map[string]time.Time{}, map[string]string{}
	// Polled every 20 ms for the log's figure; the deadline only bounds a
	// hang.
	deadline := start.Add(time.Minute)
	for len(withdrawn) < 2 && time.Now().Before(deadline) {
		moved := movable && !onDedicated()
		for _, n := range []string{"a1", "b1"} {
			if _, done := withdrawn[n]; done {
				continue
			}
			switch {
			case !steered(n):
				withdrawn[n], how[n] = time.Now(), "withdrew its steering"
			case moved:
				withdrawn[n], how[n] = time.Now(), "saw the reservation moved off dedicated"
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	logs := func() string {
		var b strings.Builder
		for _, n := range []string{"a1", "b1"} {
			b.WriteString("--- agent " + n + ":\n" + tail(agentLog(a, n), 15))
		}
		return b.String()
	}
	for _, n := range []string{"a1", "b1"} {
		at, ok := withdrawn[n]
		if !ok {
			t.Fatalf("%s still steers the reservation a minute after the blackhole\n%s", n, logs())
		}
		t.Logf("%s %s %d ms after the blackhole (%d ms after the command returned; polled every 20 ms)",
			n, how[n], at.Sub(start).Milliseconds(), at.Sub(set).Milliseconds())
	}

	var got liveResv
	if movable {
		// The controller heard: the reservation is on wan now, moved off
		// dedicated for a blackhole.
		if !waitFor(time.Minute, func() bool { return !onDedicated() }) {
			t.Fatalf("reservation still on dedicated a minute after the blackhole\n%s", logs())
		}
		probesFirst(t, a, logAt)
		show := a.c.ok(a.c.adminTok, "reserve", "show", r.ID, "--json").stdout
		for _, want := range []string{"moved off: link dedicated down at ", "blackhole: 5 probes lost on path a1-ra,dedicated,b1-rb"} {
			if !strings.Contains(show, want) {
				t.Errorf("reserve show --json lacks %q:\n%s", want, show)
			}
		}
		got = a.resv(r.ID)
		t.Logf("reservation %s: %s on %v, degraded %v", r.ID, got.State, got.Path, got.Degraded)
		if !waitFor(60*time.Second, cp.Exited) {
			t.Fatalf("60 s after the blackhole the copy has not finished: %s\n%s", lastLine(cp.err.String()), logs())
		}
		mustSucceed(t, "cp across the blackhole", cp.Wait())
		sameFile(t, src, filepath.Join(dstDir, "data.bin"))
		s2 := a.status()
		t.Logf("finished %.1f s after the blackhole; wan ra>rb carried %d MB since", time.Since(start).Seconds(), (s2.bytesOn("wan", "ra")-s1.bytesOn("wan", "ra"))/1e6)
		return
	}
	// The controller heard: the reservation is degraded for dedicated,
	// for a blackhole.
	if !waitFor(time.Minute, func() bool { got = a.resv(r.ID); return got.Degraded }) {
		t.Fatalf("reservation not degraded a minute after the blackhole: %+v\n%s", got, logs())
	}
	probesFirst(t, a, logAt)
	for _, want := range []string{"link dedicated down at ", "blackhole: 5 probes lost on path a1-ra,dedicated,b1-rb"} {
		if !strings.Contains(got.DegradedReason, want) {
			t.Errorf("degraded reason %q lacks %q", got.DegradedReason, want)
		}
	}
	if strings.Contains(got.DegradedReason, "no carrier") {
		t.Errorf("degraded reason %q speaks of the carrier", got.DegradedReason)
	}
	t.Logf("reservation %s: %s, degraded: %s", r.ID, got.State, got.DegradedReason)
	show := a.c.ok(a.c.adminTok, "reserve", "show", r.ID, "--json").stdout
	if !strings.Contains(show, `"degraded": true`) && !strings.Contains(show, `"degraded":true`) {
		t.Errorf("reserve show --json does not say degraded:\n%s", show)
	}

	if !waitFor(60*time.Second, cp.Exited) {
		t.Fatalf("60 s after the blackhole the copy has not finished: %s\n%s", lastLine(cp.err.String()), logs())
	}
	res := cp.Wait()
	mustSucceed(t, "cp across the blackhole", res)
	sum := parseSummary(t, res.stdout)
	if !sum.Verified {
		t.Errorf("summary not verified: %+v", sum)
	}
	sameFile(t, src, filepath.Join(dstDir, "data.bin"))
	if sum.Attempts > 1 {
		// A connection that stalled for the copy's --stall-timeout over
		// the blackhole and its detection is retried: say why.
		t.Logf("cp retried:\n%s%s", tail(res.stderr, 6), tail(res.stdout, 6))
	}
	s2 := a.status()
	wan := s2.bytesOn("wan", "ra") - s1.bytesOn("wan", "ra")
	t.Logf("finished %.1f s after the blackhole in %d attempts, %s overall; wan ra>rb carried %d MB since the blackhole",
		time.Since(start).Seconds(), sum.Attempts, mbps(sum.ThroughputBps), wan/1e6)
	// What crossed dedicated before the blackhole (dedicated delivers
	// nothing after it) and wan: the whole file, once at least, and some
	// of it on wan since the blackhole.
	if ded, all := s2.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"), s2.bytesOn("wan", "ra")-s0.bytesOn("wan", "ra"); ded+all < 300<<20 || wan == 0 {
		t.Errorf("of the 300 MiB copy dedicated carried %d bytes and wan %d (%d since the blackhole): the rest should have gone over the routed path", ded, all, wan)
	}

	// Restored: the probes are answered, the link is reported up, the
	// reservation recovers and both ends steer again.
	back := time.Now()
	a.linkSet("dedicated", "--up")
	if !waitFor(time.Minute, func() bool { got = a.resv(r.ID); return !got.Degraded && steered("a1") && steered("b1") }) {
		t.Fatalf("a minute after the link came back: degraded %v %q, a1 steers %v, b1 %v\n%s", got.Degraded, got.DegradedReason, steered("a1"), steered("b1"), logs())
	}
	t.Logf("link reported up, reservation recovered and steered again %d ms after the link came back", time.Since(back).Milliseconds())
	// What a1's agent said of it.
	for _, line := range strings.Split(agentLog(a, "a1"), "\n") {
		if strings.Contains(line, "probes") {
			t.Logf("a1: %s", line)
		}
	}

	// Blackholed again, and the link comes back while both agents are
	// down: restarted, they find the reservation degraded for a
	// blackhole over a path their probes answer, and report the link up.
	a.linkSet("dedicated", "--blackhole")
	if !waitFor(time.Minute, func() bool { got = a.resv(r.ID); return got.Degraded }) {
		t.Fatalf("not degraded a minute after the second blackhole: %+v\n%s", got, logs())
	}
	a.killAgent("a1")
	a.killAgent("b1")
	a.linkSet("dedicated", "--up")
	restart := time.Now()
	a.startAgent("a1")
	a.startAgent("b1")
	if !waitFor(time.Minute, func() bool { got = a.resv(r.ID); return !got.Degraded && steered("a1") && steered("b1") }) {
		t.Fatalf("a minute after restarting the agents with the link back: degraded %v %q, a1 steers %v, b1 %v",
			got.Degraded, got.DegradedReason, steered("a1"), steered("b1"))
	}
	t.Logf("restarted, the agents reported the link up: recovered and steered %d ms after the restart", time.Since(restart).Milliseconds())
}

// agentLog is what node's agent logged so far.
func agentLog(a *agentBed, node string) string {
	l, _ := os.ReadFile(filepath.Join("/run/lightpath", a.name, "agent-"+node+".log"))
	return string(l)
}

// withdrawRE matches an agent's mend that takes the steering off the
// path: its ip rules removed (withdrawn), or its table's routes (the
// reservation moved to another path, with the same rules).
var withdrawRE = regexp.MustCompile(`; remove \d+ classes, \d+ filters, (\d+ routes, [1-9]\d* rules|[1-9]\d* routes, \d+ rules)`)

// probesFirst checks the order of the withdrawal in the agents' logs from
// the offsets in from (where each log ended before the blackhole): an
// agent whose probes found the blackhole took its steering off the path
// (withdrawRE) before it reported the link down, and at least one of them
// reported it.
func probesFirst(t *testing.T, a *agentBed, from map[string]int) {
	t.Helper()
	reported := 0
	for node, off := range from {
		lines := strings.Split(agentLog(a, node)[off:], "\n")
		// The withdrawal, not a mend that only puts something back.
		mend := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "msg=mend ") && withdrawRE.MatchString(l) })
		report := slices.IndexFunc(lines, func(l string) bool {
			return strings.Contains(l, "msg=link ") && strings.Contains(l, "down=true") && strings.Contains(l, "blackhole: ")
		})
		if report < 0 {
			continue
		}
		reported++
		if mend < 0 || mend > report {
			t.Errorf("%s reported the blackhole before it withdrew its steering:\n%s", node, strings.Join(lines[:report+1], "\n"))
			continue
		}
		t.Logf("%s withdrew, then reported:\n%s\n%s", node, lines[mend], lines[report])
	}
	if reported == 0 {
		t.Errorf("neither a1 nor b1 logged a report of the blackhole:\n%s%s", tail(agentLog(a, "a1"), 10), tail(agentLog(a, "b1"), 10))
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n") + "\n"
}
