//go:build linux

package e2e

import (
	"encoding/json"
	"os/exec"
	"testing"
	"time"
)

// TestAgentUnreservedFits: spare capacity goes first to traffic that holds
// no reservation, then to reservations beyond their rate. That is the
// htb tree the agents build beside the testbed's: the default class 1:2
// (unreserved traffic) at htb priority 0, the reservation's class at its
// rate and at priority 1 (at the testbed's ceiling, the link's rate).
// With 300 Mbit/s of the dedicated link reserved for a1 > b1 (a bench
// paced at 100 Mbit/s), unreserved UDP from ra to rb over the same link
// (iperf3 -u -w 16M, 50 Mbit/s) goes through 1:2 and the reserved flow
// through its own class. The load stays well below the link's 2 Gbit/s
// so that the emulator keeps up on a busy machine (see
// TestAgentMoreCrossTraffic). Before the priorities, htb lent the spare by
// quantum, in proportion to the rates, and the UDP lost a third of its
// datagrams at 25% (docs/steering-bench.md). The loss and the flow's rate
// under such load are measured by bench/steering.sh (cross, rows 25, 50
// and 75% of what is left: "UDP lost with" and "with after 1s").
func TestAgentUnreservedFits(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 is not installed (Debian package iperf3)")
	}
	a := upAgentBed(t)
	rbDed := a.st.endAddr("dedicated", "rb")
	a.serveIn("b1", "198.18.2.1:7070", t.TempDir())
	r := a.reserveActive(a.c.adminTok, "a1", "b1", "300M", "tcp 198.18.1.1 > 198.18.2.1:7070", "a1-ra,dedicated,b1-rb")
	k := resvClass(r.DSCP)
	t.Logf("reservation %s: 300M, DSCP %d, class %s", r.ID, r.DSCP, k)

	c0 := a.htbClasses("ra", "dedicated")
	if c, ok := c0[k]; !ok || c.rate != 300e6 || c.prio != 1 {
		t.Errorf("ra dedicated: the reservation's class %s %+v (present %v): want rate 300 Mbit/s, prio 1", k, c, ok)
	}
	if c := c0["1:2"]; c.prio != 0 || c.ceil != 2e9 {
		t.Errorf("ra dedicated: the unreserved class 1:2 %+v: want prio 0 (before the reservations' 1), ceil the link's 2 Gbit/s", c)
	}

	const load = 50e6
	a.iperfServer("rb", "5301")
	udp := startLP(t, runOpts{timeout: time.Minute}, "testbed", "exec", "--name", a.name, "ra", "--",
		"iperf3", "-c", rbDed, "-p", "5301", "-u", "-b", "50M", "-l", "8000", "-w", "16M", "-t", "5", "-J")
	// The bench starts once the UDP goes through 1:2.
	if !waitFor(30*time.Second, func() bool {
		return a.htbClasses("ra", "dedicated")["1:2"].bytes > c0["1:2"].bytes+1<<20 || udp.Exited()
	}) || udp.Exited() {
		t.Fatalf("the UDP did not get under way in class 1:2: %s", udp.err.String())
	}
	m := parseBench(t, "bench a1 -> b1 beside the UDP", a.exec("a1", append([]string{lpBin, "bench", "lp://198.18.2.1:7070", "--json", "--rate", "100M"}, fixedBench(t)...)...))
	res := udp.Wait()
	mustSucceed(t, "iperf3 -u", res)
	c1 := a.htbClasses("ra", "dedicated")
	var ip struct {
		End struct {
			Sum struct {
				LostPercent float64 `json:"lost_percent"`
				Packets     int64   `json:"packets"`
			} `json:"sum"`
			Received struct {
				Bytes uint64 `json:"bytes"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &ip); err != nil || ip.End.Sum.Packets == 0 {
		t.Fatalf("no iperf3 result (%v):\n%s", err, res.stdout)
	}
	gotK, got2 := c1[k].bytes-c0[k].bytes, c1["1:2"].bytes-c0["1:2"].bytes
	t.Logf("UDP offered %s: received %d bytes, lost %.2f%% of %d datagrams; reserved flow %d bytes, %s (after its first second %s); class %s carried %d bytes, 1:2 %d",
		mbps(load), ip.End.Received.Bytes, ip.End.Sum.LostPercent, ip.End.Sum.Packets, m.bytes, mbps(m.summary), mbps(m.steady), k, gotK, got2)
	if m.bytes <= 0 || gotK < uint64(m.bytes) {
		t.Errorf("the reserved flow delivered %d bytes, its class %s carried %d: want all of it in its class", m.bytes, k, gotK)
	}
	if ip.End.Received.Bytes == 0 || got2 < ip.End.Received.Bytes {
		t.Errorf("the UDP delivered %d bytes, class 1:2 carried %d: want all of it in the unreserved class", ip.End.Received.Bytes, got2)
	}
}
