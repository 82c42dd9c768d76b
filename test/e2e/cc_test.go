//go:build linux

package e2e

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/cc"
	"github.com/lightpath/lightpath/internal/cc/cctest"
	"github.com/lightpath/lightpath/internal/cc/fast"
	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/roottest"
)

// TestCCCommands: cc install, list, a second install, a retune and remove
// through the binary, leaving the host as they found it.
func TestCCCommands(t *testing.T) {
	roottest.Require(t, "loads a BPF congestion control")
	cctest.Hold(t, "fast", false, nil)
	allowedBefore, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")

	note := func(args ...string) map[string]any {
		t.Helper()
		r := runLP(t, runOpts{}, append([]string{"cc"}, args...)...)
		mustSucceed(t, "cc "+strings.Join(args, " "), r)
		var m map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &m); err != nil {
			t.Fatalf("cc %s --json: %v\n%s", strings.Join(args, " "), err, r.stdout)
		}
		return m
	}
	if m := note("install", "fast", "--json"); m["action"] != "installed" || m["pinned"] != "/sys/fs/bpf/lightpath/cc-fast" || m["allowed"] != true {
		t.Fatalf("install: %v", m)
	}
	if m := note("install", "fast", "--json"); m["action"] != "unchanged" {
		t.Fatalf("second install: %v", m)
	}
	m := note("install", "fast", "--alpha", "40", "--gamma", "0.25", "--json")
	if p, _ := m["params"].(map[string]any); m["action"] != "retuned" || p["alpha"] != 40.0 || p["gamma"] != 0.25 {
		t.Fatalf("retune: %v", m)
	}
	r := runLP(t, runOpts{}, "cc", "list")
	mustSucceed(t, "cc list", r)
	if !strings.Contains(r.stdout, "alpha=40 gamma=0.25 (/sys/fs/bpf/lightpath/cc-fast)") || !strings.Contains(r.stdout, "cubic") {
		t.Fatalf("cc list:\n%s", r.stdout)
	}
	checkFailure(t, "install an unknown name", runLP(t, runOpts{}, "cc", "install", "vegas"), "lightpath can install fast")
	checkFailure(t, "a bad gamma", runLP(t, runOpts{}, "cc", "install", "fast", "--gamma", "1.5"), "want a fraction in (0, 1]")
	if m := note("remove", "fast", "--json"); m["action"] != "removed" {
		t.Fatalf("remove: %v", m)
	}
	if m := note("remove", "fast", "--json"); m["action"] != "absent" {
		t.Fatalf("second remove: %v", m)
	}
	if left, _ := filepath.Glob("/sys/fs/bpf/lightpath/cc-fast*"); len(left) > 0 {
		t.Fatalf("pinned after remove: %v", left)
	}
	if after, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control"); string(after) != string(allowedBefore) {
		t.Fatalf("allowed list %q after remove, %q before install", after, allowedBefore)
	}
}

// tcpSample is one TCP_INFO reading of the sender, between two monotonic
// clock readings.
type tcpSample struct {
	t0, t1  uint64
	cwnd    uint32
	minRTT  uint32
	rtt     uint32
	caState uint8
	retrans uint32
}

func monoNow() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// TestFASTTraceOnTestbed: over a 100 Mbit/s, 50 ms testbed path, every
// window decision FAST's BPF program traces is the model's, and the
// connection's own TCP_INFO (cwnd, min RTT) agrees with the trace.
func TestFASTTraceOnTestbed(t *testing.T) {
	roottest.Require(t, "brings up a testbed and loads a BPF congestion control")
	cctest.Hold(t, "fast", true, nil)
	name := fmt.Sprintf("e2e%04x", rand.IntN(1<<16))
	topo := filepath.Join(t.TempDir(), "fast.yaml")
	// The bottleneck is a router's egress, as in a real path: on the
	// sender's own device, TCP small queues would keep the queue short
	// whatever the congestion control. Its queue: two bandwidth-delay
	// products (100 Mbit/s x 50 ms = 625 kB).
	os.WriteFile(topo, []byte(`sites:
  - name: a
  - name: b
nodes:
  - {name: h1, site: a}
  - {name: r1, site: a, role: router}
  - {name: r2, site: b, role: router}
  - {name: h2, site: b}
links:
  - {name: h1-r1, ends: [h1, r1]}
  - {name: wan, ends: [r1, r2], rate: 100M, delay: 25ms, queue: 1250kB}
  - {name: r2-h2, ends: [r2, h2]}
`), 0o644)
	r := runLP(t, runOpts{timeout: 60 * time.Second}, "testbed", "up", topo, "--name", name)
	b := &tb{t: t, name: name}
	t.Cleanup(b.down)
	mustSucceed(t, "testbed up", r)
	var dst string
	for _, n := range b.status().Nodes {
		if n.Name == "h2" {
			dst = n.IPv4
		}
	}

	tr, err := cc.OpenTrace("fast")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	var ln net.Listener
	if err := netns.Do(netns.Path("lp-"+name+"-h2"), func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(dst, "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cctest.Sink(ln)
	var conn *net.TCPConn
	if err := netns.Do(netns.Path("lp-"+name+"-h1"), func() (err error) {
		conn, err = cctest.Dial(ln.Addr().String(), "fast")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	port := uint16(conn.LocalAddr().(*net.TCPAddr).Port)
	raw, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}

	const traffic = 8 * time.Second
	var (
		wg      sync.WaitGroup
		samples []tcpSample
	)
	wg.Add(2)
	go func() { // the bulk sender
		defer wg.Done()
		buf := make([]byte, 256<<10)
		conn.SetWriteDeadline(time.Now().Add(traffic))
		for {
			if _, err := conn.Write(buf); err != nil {
				return
			}
		}
	}()
	go func() { // TCP_INFO every 2 ms
		defer wg.Done()
		for end := time.Now().Add(traffic); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			var s tcpSample
			raw.Control(func(fd uintptr) {
				s.t0 = monoNow()
				info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
				s.t1 = monoNow()
				if err == nil {
					s.cwnd, s.minRTT, s.rtt, s.caState, s.retrans = info.Snd_cwnd, info.Min_rtt, info.Rtt, info.Ca_state, info.Total_retrans
				}
			})
			if s.cwnd > 0 {
				samples = append(samples, s)
			}
		}
	}()

	var rounds []fast.Round
	readEnd := time.Now().Add(traffic + time.Second)
	for {
		r, err := tr.Read(readEnd)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.LocalPort != port {
			continue
		}
		rounds = append(rounds, r)
		if err := r.Check(); err != nil {
			t.Errorf("the program and the model differ: %v", err)
		}
	}
	wg.Wait()

	// Slow start ended once, then FAST decided every round, but for the
	// decisions on a loss (each checked against the model above): the
	// path loses nothing of its own, but an emulator starved of CPU by
	// tests beside it may drop from its queue.
	end := slices.IndexFunc(rounds, func(r fast.Round) bool { return r.Phase == fast.PhaseSlowStartEnds })
	if end < 0 || len(rounds)-end < 20 {
		t.Fatalf("%d rounds traced, slow start ended at round %d: want it to end and 20 FAST rounds after", len(rounds), end)
	}
	losses := 0
	for _, r := range rounds[end+1:] {
		switch r.Phase {
		case fast.PhaseFAST:
		case fast.PhaseLossRandom, fast.PhaseLossCongestion, fast.PhaseLossAgain:
			losses++
		default:
			t.Fatalf("round in phase %s after slow start ended", r.Phase)
		}
	}
	if fastRounds := len(rounds) - end - 1 - losses; fastRounds < 20 {
		t.Fatalf("%d FAST rounds after slow start ended (and %d on a loss): want 20", fastRounds, losses)
	}
	if losses > 0 {
		t.Logf("%d decisions on a loss after slow start ended", losses)
	}

	// TCP_INFO between two rounds shows the window the last one set.
	matched, compared := 0, 0
	var mismatches []string
	for _, s := range samples {
		if s.t0 < rounds[end].TimeNs || s.caState != 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(rounds, s.t0, func(r fast.Round, t uint64) int { return cmp.Compare(r.TimeNs, t) })
		if i == 0 || (i < len(rounds) && rounds[i].TimeNs <= s.t1) {
			continue // a round during the reading: ambiguous
		}
		compared++
		if s.cwnd == rounds[i-1].NextCwnd {
			matched++
		} else if len(mismatches) < 5 {
			mismatches = append(mismatches, fmt.Sprintf("cwnd %d, the last round set %d", s.cwnd, rounds[i-1].NextCwnd))
		}
	}
	if compared < 100 || matched < compared*95/100 {
		t.Fatalf("TCP_INFO's cwnd matched the traced decision in %d of %d readings: %v", matched, compared, mismatches)
	}
	// Both take the minimum of the same ACK samples.
	last := samples[len(samples)-1]
	base := rounds[len(rounds)-1].BaseRTT
	if d := int64(last.minRTT) - int64(base); d < -int64(base)/20 || d > int64(base)/20 {
		t.Errorf("TCP_INFO's min RTT %d us, the trace's base RTT %d us", last.minRTT, base)
	}
	var avg, srtt float64
	for _, r := range rounds[end+1:] {
		avg += float64(r.AvgRTT)
	}
	for _, s := range samples {
		srtt += float64(s.rtt)
	}
	t.Logf("%d rounds (slow start ended at %d, cwnd %d); TCP_INFO cwnd matched in %d of %d readings; base RTT %d us, TCP_INFO min %d us; mean round RTT %.0f us, mean srtt %.0f us; final cwnd %d, retransmits %d",
		len(rounds), end, rounds[end].NextCwnd, matched, compared, base, last.minRTT, avg/float64(len(rounds)-end-1), srtt/float64(len(samples)), last.cwnd, last.retrans)
}
