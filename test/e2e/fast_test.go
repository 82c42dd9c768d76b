//go:build linux

package e2e

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
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
)

// Issue 16's path for FAST TCP on the testbed: 100 Mbit/s with a 50 ms
// round trip and a queue of two bandwidth-delay products.
//
// The path is h1 - r - h2 with the bottleneck (wan) leaving the router r,
// not the sender: when the bottleneck's htb queue is on the sending host
// itself, TCP small queues (a socket may have only about a millisecond of
// its pacing rate in the host's qdiscs) keeps every sender's backlog there
// short whatever the congestion control. Behind a router, as on a real
// path, the queue is the path's.
//
// What FAST does with that path is checked decision by decision: every
// window its BPF program sets, on a round or on a loss, is the one the
// model (internal/cc/fast) computes from what the program saw. What that
// comes to in figures (the queue FAST keeps against CUBIC's, its
// throughput under random loss against Reno's) depends on how busy the
// host is, so bench/fast.sh reports it, with medians over runs.
const (
	fastOneWay = 25 * time.Millisecond // each direction
	fastQueue  = 1_250_000             // bytes: two BDPs, 2 × 100 Mbit/s × 50 ms / 8
	fastPort   = "5201"
	// fastHang bounds a traced connection that never shows what a
	// subtest waits for: a hang, not a slow host.
	fastHang = 2 * time.Minute
)

const fastTopology = `sites:
  - name: s
nodes:
  - {name: h1, site: s}
  - {name: r, site: s, role: router}
  - {name: h2, site: s}
links:
  - {name: lan, ends: [h1, r]}
  - {name: wan, ends: [r, h2], rate: 100M, delay: %s, queue: %dB}
`

// fastBed is the testbed of these tests with an iperf3 server on h2.
type fastBed struct {
	b     *tb
	dst   string // h2's address
	nodes []string
}

func upFastBed(t *testing.T) *fastBed {
	t.Helper()
	file := filepath.Join(t.TempDir(), "fast.yaml")
	writeFile(t, file, fmt.Sprintf(fastTopology, fastOneWay, fastQueue), 0o644)
	b := upTestbed(t, file)
	s := b.status()
	f := &fastBed{b: b}
	f.dst, _ = s.node("h2")
	for _, n := range s.Nodes {
		f.nodes = append(f.nodes, n.Name)
	}
	if f.dst == "" {
		t.Fatalf("testbed status lacks h2's address: %+v", s)
	}
	startLP(t, runOpts{timeout: 10 * time.Minute}, "testbed", "exec", "--name", b.name, "h2", "--",
		"iperf3", "-s", "-B", f.dst, "-p", fastPort)
	if !waitFor(60*time.Second, func() bool {
		r := b.exec("h2", "ss", "-Hltn", "sport = :"+fastPort)
		return r.code == 0 && strings.TrimSpace(r.stdout) != ""
	}) {
		t.Fatalf("iperf3 -s did not listen on h2 port %s", fastPort)
	}
	return f
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

// fastTrace is what one connection under FAST showed: every decision its
// BPF program traced (each checked against the model as it came), its
// TCP_INFO read every 2 ms, and the congestion control its socket ran.
type fastTrace struct {
	rounds  []fast.Round
	samples []tcpSample
	cc      string
}

// afterSlowStart is the index of the round that ended slow start, or -1.
func (tr fastTrace) afterSlowStart() int {
	return slices.IndexFunc(tr.rounds, func(r fast.Round) bool { return r.Phase == fast.PhaseSlowStartEnds })
}

// phases counts the traced decisions by phase.
func (tr fastTrace) phases() map[fast.Phase]int {
	n := map[fast.Phase]int{}
	for _, r := range tr.rounds {
		n[r.Phase]++
	}
	return n
}

// cwndMatches compares each TCP_INFO reading taken after round `from`, out
// of loss recovery and slow start (where the kernel grows the window on
// each ACK) and between two traced decisions, with the window the last
// decision before it set.
func (tr fastTrace) cwndMatches(from int) (matched, compared int, mismatches []string) {
	for _, s := range tr.samples {
		if s.t0 < tr.rounds[from].TimeNs || s.caState != 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(tr.rounds, s.t0, func(r fast.Round, t uint64) int { return cmp.Compare(r.TimeNs, t) })
		if i == 0 || i == len(tr.rounds) || tr.rounds[i].TimeNs <= s.t1 {
			continue // after the last decision read, or one during the reading: ambiguous
		}
		if tr.rounds[i-1].Phase == fast.PhaseSlowStart {
			continue
		}
		compared++
		if s.cwnd == tr.rounds[i-1].NextCwnd {
			matched++
		} else if len(mismatches) < 5 {
			mismatches = append(mismatches, fmt.Sprintf("cwnd %d, the last decision set %d", s.cwnd, tr.rounds[i-1].NextCwnd))
		}
	}
	return matched, compared, mismatches
}

// trace opens a connection h1 → h2 under fast and sends on it until
// enough says what was traced is enough (asked after each decision read
// and every 200 ms), or fastHang passes. A decision the model does not
// make is an error of the test.
func (f *fastBed) trace(t *testing.T, enough func(fastTrace) bool) fastTrace {
	t.Helper()
	tr, err := cc.OpenTrace("fast")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	var ln net.Listener
	if err := netns.Do(netns.Path("lp-"+f.b.name+"-h2"), func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(f.dst, "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cctest.Sink(ln)
	var conn *net.TCPConn
	if err := netns.Do(netns.Path("lp-"+f.b.name+"-h1"), func() (err error) {
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
	var got fastTrace
	raw.Control(func(fd uintptr) { got.cc, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // samples
		stop = make(chan struct{})
	)
	wg.Add(2)
	go func() { // the bulk sender, until the write deadline set at the end
		defer wg.Done()
		buf := make([]byte, 256<<10)
		for {
			if _, err := conn.Write(buf); err != nil {
				return
			}
		}
	}()
	go func() { // TCP_INFO every 2 ms
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
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
				mu.Lock()
				got.samples = append(got.samples, s)
				mu.Unlock()
			}
		}
	}()
	hang := time.Now().Add(fastHang)
	for {
		r, err := tr.Read(time.Now().Add(200 * time.Millisecond))
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Error(err)
			break
		}
		if err == nil && r.LocalPort == port {
			got.rounds = append(got.rounds, r)
			if err := r.Check(); err != nil {
				t.Errorf("the program and the model differ: %v", err)
			}
		}
		mu.Lock()
		done := enough(got)
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(hang) {
			t.Errorf("what the test waits for was not traced within %v (a hang bound)", fastHang)
			break
		}
	}
	close(stop)
	conn.SetWriteDeadline(time.Now())
	wg.Wait()
	return got
}

func TestFASTOnTestbed(t *testing.T) {
	skipUnlessNetRoot(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Fatalf("iperf3 is needed (scripts/deps.sh installs it)")
	}
	cctest.Hold(t, "fast", true, nil)
	f := upFastBed(t)

	// Every node offers fast, and an application asking for it by name
	// (iperf3 -C) runs over it.
	t.Run("offered", func(t *testing.T) {
		for _, n := range f.nodes {
			r := f.b.exec(n, "cat", "/proc/sys/net/ipv4/tcp_available_congestion_control")
			if r.code != 0 || !slices.Contains(strings.Fields(r.stdout), "fast") {
				t.Errorf("node %s: tcp_available_congestion_control = %q (exit %d), want fast in it", n, strings.TrimSpace(r.stdout), r.code)
			}
		}
		r := f.b.exec("h1", "iperf3", "-c", f.dst, "-p", fastPort, "-C", "fast", "-t", "1", "-J")
		var res struct {
			End struct {
				SenderCC string `json:"sender_tcp_congestion"`
			} `json:"end"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || res.Error != "" {
			t.Fatalf("iperf3 -C fast: exit %d, %v %s\nstdout:\n%s\nstderr:\n%s", r.code, err, res.Error, r.stdout, r.stderr)
		}
		if res.End.SenderCC != "fast" {
			t.Errorf("iperf3 -C fast: its socket ran %q", res.End.SenderCC)
		}
	})

	// After slow start, FAST decides every round (or on a loss: an
	// emulator starved of CPU by tests beside it may drop from its queue,
	// and a retransmission timeout sends the connection back to slow
	// start), each decision the model's, and the connection's own TCP_INFO
	// (cwnd, min RTT) agrees with the trace.
	t.Run("trace", func(t *testing.T) {
		fastRounds := func(tr fastTrace, from int) int {
			n := 0
			for _, r := range tr.rounds[from+1:] {
				if r.Phase == fast.PhaseFAST {
					n++
				}
			}
			return n
		}
		tr := f.trace(t, func(tr fastTrace) bool {
			end := tr.afterSlowStart()
			if end < 0 || fastRounds(tr, end) < 20 {
				return false
			}
			_, compared, _ := tr.cwndMatches(end)
			return compared >= 100
		})
		if tr.cc != "fast" {
			t.Errorf("the socket's congestion control is %q, want fast", tr.cc)
		}
		end := tr.afterSlowStart()
		if end < 0 {
			t.Fatalf("%d decisions traced, none ending slow start", len(tr.rounds))
		}
		losses := 0
		for _, r := range tr.rounds[end+1:] {
			switch r.Phase {
			case fast.PhaseFAST:
			case fast.PhaseLossRandom, fast.PhaseLossCongestion, fast.PhaseLossAgain:
				losses++
			default:
				if losses == 0 {
					t.Fatalf("round in phase %s after slow start ended, with no loss between", r.Phase)
				}
			}
		}
		if n := fastRounds(tr, end); n < 20 {
			t.Fatalf("%d FAST rounds after slow start ended (and %d on a loss): want 20", n, losses)
		}
		if losses > 0 {
			t.Logf("%d decisions on a loss after slow start ended", losses)
		}
		// TCP_INFO between two decisions shows the window the first set.
		matched, compared, mismatches := tr.cwndMatches(end)
		if compared < 100 || matched < compared*95/100 {
			t.Fatalf("TCP_INFO's cwnd matched the traced decision in %d of %d readings: %v", matched, compared, mismatches)
		}
		// Both take the minimum of the same ACK samples.
		last := tr.samples[len(tr.samples)-1]
		base := tr.rounds[len(tr.rounds)-1].BaseRTT
		if d := int64(last.minRTT) - int64(base); d < -int64(base)/20 || d > int64(base)/20 {
			t.Errorf("TCP_INFO's min RTT %d us, the trace's base RTT %d us", last.minRTT, base)
		}
		t.Logf("%d decisions (slow start ended at %d, cwnd %d); TCP_INFO cwnd matched in %d of %d readings; base RTT %d us, TCP_INFO min %d us; final cwnd %d, retransmits %d",
			len(tr.rounds), end, tr.rounds[end].NextCwnd, matched, compared, base, last.minRTT, last.cwnd, last.retrans)
	})

	// Under random loss FAST tells a loss with its queue short (random:
	// the window kept, where Reno would halve it) from one with its queue
	// built up (congestion: halved once per episode), each decision the
	// model's. The subtest runs until it has seen both kinds.
	t.Run("loss", func(t *testing.T) {
		f.b.linkSet("wan", "--loss", "0.1%")
		defer f.b.linkSet("wan", "--loss", "0")
		tr := f.trace(t, func(tr fastTrace) bool {
			n := tr.phases()
			return n[fast.PhaseLossRandom] > 0 && n[fast.PhaseLossCongestion] > 0 && n[fast.PhaseFAST] > 0
		})
		if tr.cc != "fast" {
			t.Errorf("the socket's congestion control is %q, want fast", tr.cc)
		}
		n := tr.phases()
		if n[fast.PhaseLossRandom] == 0 || n[fast.PhaseLossCongestion] == 0 {
			t.Fatalf("decisions by phase %v: want a loss taken for random and one taken for congestion", n)
		}
		for _, r := range tr.rounds {
			switch {
			case r.Phase == fast.PhaseLossRandom && r.Cwnd >= r.Ssthresh && r.NextCwnd != r.Cwnd:
				t.Errorf("a random loss at cwnd %d (backlog %d, alpha %d) set %d: want the window kept", r.Cwnd, r.Backlog, r.Alpha, r.NextCwnd)
			case r.Phase == fast.PhaseLossCongestion && r.NextCwnd != max(r.Cwnd/2, fast.MinCwnd):
				t.Errorf("a congestion loss at cwnd %d (backlog %d, alpha %d) set %d: want it halved", r.Cwnd, r.Backlog, r.Alpha, r.NextCwnd)
			}
		}
		t.Logf("0.1%% loss: %d decisions by phase %v", len(tr.rounds), n)
	})
}
