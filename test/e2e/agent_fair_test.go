//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestAgentUnreservedFits: spare capacity goes first to traffic that holds
// no reservation (the testbed's default class 1:2 at htb priority 0, the
// agents' reservation classes at 1), then to reservations beyond their
// rate. With the dedicated link at 500 Mbit/s and 300 Mbit/s of it
// reserved for a1 > b1 (a BBR bench, which takes whatever it may),
// unreserved UDP from ra to rb over the same link (iperf3 -u -w 16M) at
// 25, 50 and 75% of the 200 Mbit/s left loses under 1%, and the reserved
// flow keeps its rate. Before the priorities, htb lent the spare by
// quantum, in proportion to the rates, and the UDP lost a third of its
// datagrams at 25% (docs/steering-bench.md).
func TestAgentUnreservedFits(t *testing.T) {
	skipUnlessNetRoot(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 is not installed (Debian package iperf3)")
	}
	a := upAgentBed(t)
	const linkRate, reserved = 500e6, 300e6
	a.linkSet("dedicated", "--rate", "500M")
	rbDed := a.st.endAddr("dedicated", "rb")
	a.serveIn("b1", "198.18.2.1:7070", t.TempDir())
	r := a.reserveActive(a.c.adminTok, "a1", "b1", "300M", "tcp 198.18.1.1 > 198.18.2.1:7070", "a1-ra,dedicated,b1-rb")
	t.Logf("reservation %s: 300M, DSCP %d", r.ID, r.DSCP)

	for i, pct := range []int{25, 50, 75} {
		load := (linkRate - reserved) * float64(pct) / 100
		port := strconv.Itoa(5301 + i)
		a.iperfServer("rb", port)
		// The UDP starts first and outlasts the bench.
		udp := startLP(t, runOpts{timeout: time.Minute}, "testbed", "exec", "--name", a.name, "ra", "--",
			"iperf3", "-c", rbDed, "-p", port, "-u", "-b", strconv.FormatFloat(load, 'f', 0, 64), "-l", "8000",
			"-w", "16M", "-t", "8", "-J")
		time.Sleep(time.Second)
		m := parseBench(t, fmt.Sprintf("bench a1 -> b1 beside %d%%", pct), a.exec("a1", lpBin, "bench", "lp://198.18.2.1:7070", "--json", "-t", "5s"))
		res := udp.Wait()
		mustSucceed(t, "iperf3 -u", res)
		var ip struct {
			End struct {
				Sum struct {
					BitsPerSecond float64 `json:"bits_per_second"`
					LostPercent   float64 `json:"lost_percent"`
					Packets       int64   `json:"packets"`
				} `json:"sum"`
			} `json:"end"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &ip); err != nil || ip.End.Sum.Packets == 0 {
			t.Fatalf("%d%%: no iperf3 result (%v):\n%s", pct, err, res.stdout)
		}
		t.Logf("%d%% of what is left: UDP offered %s, lost %.2f%% of %d datagrams; reserved flow %s (after its first second %s)",
			pct, mbps(load), ip.End.Sum.LostPercent, ip.End.Sum.Packets, mbps(m.summary), mbps(m.steady))
		if ip.End.Sum.LostPercent >= 1 {
			t.Errorf("%d%%: unreserved UDP at %s lost %.2f%% beside the reservation, want under 1%%", pct, mbps(load), ip.End.Sum.LostPercent)
		}
		if m.steady < 0.9*reserved {
			t.Errorf("%d%%: the reserved flow got %s, want at least 90%% of 300 Mbit/s", pct, mbps(m.steady))
		}
	}
}
