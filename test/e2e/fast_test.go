//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/cc/cctest"
	"github.com/lightpath/lightpath/internal/cc/fast"
)

// Issue 16's criteria for FAST TCP on the testbed: a 100 Mbit/s path with a
// 50 ms round trip and a queue of two bandwidth-delay products.
//
// The path is h1 - r - h2 with the bottleneck (wan) leaving the router r,
// not the sender: when the bottleneck's htb queue is on the sending host
// itself, TCP small queues (a socket may have only about a millisecond of
// its pacing rate in the host's qdiscs) keeps every sender's backlog there
// at some 64-75 KB, CUBIC's as well as FAST's (measured: 5.5 ms and 4.8 ms
// of queue), so nothing could fill the queue. Behind a router, as on a real
// path, the queue is the path's.
const (
	fastRate    = 100_000_000           // bits per second
	fastOneWay  = 25 * time.Millisecond // each direction
	fastQueue   = 1_250_000             // bytes: two BDPs, 2 × 100 Mbit/s × 50 ms / 8
	fastFlow    = 15 * time.Second      // each measured flow
	fastSettled = 5 * time.Second       // queue samples before this are slow start
	fastPort    = "5201"
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

// iperf3Result is what the tests read of iperf3 -J.
type iperf3Result struct {
	Start struct {
		MSS int `json:"tcp_mss_default"`
	} `json:"start"`
	End struct {
		Streams []struct {
			Sender struct {
				Retransmits int `json:"retransmits"`
			} `json:"sender"`
		} `json:"streams"`
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
	} `json:"end"`
	Intervals []struct {
		Streams []struct {
			End float64 `json:"end"` // seconds since the start
			RTT float64 `json:"rtt"` // the smoothed RTT, microseconds
		} `json:"streams"`
	} `json:"intervals"`
	Error string `json:"error"`
}

// backlogSample is the bottleneck queue's backlog at a time since the flow
// started.
type backlogSample struct {
	at    time.Duration
	bytes uint64
}

// fastFlowResult is one measured flow.
type fastFlowResult struct {
	cc      string
	iperf   iperf3Result
	samples []backlogSample
	ss      string // ss -tin on the sender, taken two seconds in
}

// queueDelay is the mean queueing delay at the bottleneck from `from` on:
// the mean backlog divided by the link rate.
func (f fastFlowResult) queueDelay(from time.Duration) time.Duration {
	var sum, n uint64
	for _, s := range f.samples {
		if s.at >= from {
			sum += s.bytes
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return time.Duration(float64(sum) / float64(n) * 8 / fastRate * float64(time.Second))
}

// rttExcess is the sender's view of the queueing delay from `from` on: the
// mean of iperf3's per-second smoothed RTTs less the connection's minimum
// RTT (ss's minrtt, taken two seconds in), and that minimum.
func (f fastFlowResult) rttExcess(from time.Duration) (excess, minRTT float64, ok bool) {
	m := ssMinRTT(f.ss, f.cc)
	var sum float64
	var n int
	for _, iv := range f.iperf.Intervals {
		if len(iv.Streams) == 1 && iv.Streams[0].End > from.Seconds() {
			sum += iv.Streams[0].RTT / 1000
			n++
		}
	}
	if m <= 0 || n == 0 {
		return 0, 0, false
	}
	return sum/float64(n) - m, m, true
}

// ssMinRTT is the minrtt (ms) ss -tin printed for the connection running
// congestion control name, or 0.
func ssMinRTT(out, name string) float64 {
	for _, l := range strings.Split(out, "\n") {
		fs := strings.Fields(l)
		if len(fs) == 0 || fs[0] != name {
			continue
		}
		for _, f := range fs {
			if v, ok := strings.CutPrefix(f, "minrtt:"); ok {
				x, _ := strconv.ParseFloat(v, 64)
				return x
			}
		}
	}
	return 0
}

func (f fastFlowResult) log(t *testing.T) {
	t.Helper()
	rtt := "sender RTT: not measured (no minrtt from ss, or the flow ended before " + fastSettled.String() + ")"
	if ex, m, ok := f.rttExcess(fastSettled); ok {
		rtt = fmt.Sprintf("sender RTT (iperf3's smoothed RTT after %s - ss minrtt %.1f ms) %.1f ms", fastSettled, m, ex)
	}
	var per []string // the backlog once a second, in kB
	for i, s := range f.samples {
		if i%10 == 0 {
			per = append(per, strconv.FormatUint(s.bytes/1000, 10))
		}
	}
	s := f.iperf.End.Streams[0].Sender
	t.Logf("%s: %.1f Mbit/s, %d retransmits; bottleneck queue (backlog/rate) mean %.1f ms after %s, %d samples;"+
		" %s; backlog kB each second: %s",
		f.cc, f.iperf.End.SumReceived.BitsPerSecond/1e6, s.Retransmits, ms(f.queueDelay(fastSettled)), fastSettled,
		len(f.samples), rtt, strings.Join(per, " "))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fastBed is the testbed of these tests with an iperf3 server on h2.
type fastBed struct {
	b        *tb
	dst      string // h2's address
	routerNS string // the namespace the bottleneck direction leaves
	dev      string // its egress device
	nodes    []string
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
		if n.Name == "r" {
			f.routerNS = n.Namespace
		}
	}
	for _, l := range s.Links {
		for _, d := range l.Directions {
			if l.Name == "wan" && d.From == "r" {
				f.dev = d.Device
			}
		}
	}
	if f.dst == "" || f.routerNS == "" || f.dev == "" {
		t.Fatalf("testbed status lacks h2's address, r's namespace or wan's device r>h2: %+v", s)
	}
	startLP(t, runOpts{timeout: 10 * time.Minute}, "testbed", "exec", "--name", b.name, "h2", "--",
		"iperf3", "-s", "-B", f.dst, "-p", fastPort)
	if !waitFor(15*time.Second, func() bool {
		r := b.exec("h2", "ss", "-Hltn", "sport = :"+fastPort)
		return r.code == 0 && strings.TrimSpace(r.stdout) != ""
	}) {
		t.Fatalf("iperf3 -s did not listen on h2 port %s within 15s", fastPort)
	}
	return f
}

// backlog reads the bytes queued in the bottleneck direction's htb tree.
func (f *fastBed) backlog() (uint64, error) {
	out, err := exec.Command("tc", "-n", f.routerNS, "-s", "-j", "qdisc", "show", "dev", f.dev).Output()
	if err != nil {
		return 0, fmt.Errorf("tc qdisc show dev %s in %s: %v", f.dev, f.routerNS, err)
	}
	var qs []struct {
		Root    bool   `json:"root"`
		Backlog uint64 `json:"backlog"`
	}
	if err := json.Unmarshal(out, &qs); err != nil {
		return 0, fmt.Errorf("tc -j: %v: %s", err, out)
	}
	for _, q := range qs {
		if q.Root {
			return q.Backlog, nil
		}
	}
	return 0, fmt.Errorf("no root qdisc on %s: %s", f.dev, out)
}

// flow runs one iperf3 flow h1 -> h2 with congestion control name for d,
// sampling the bottleneck's backlog every 100 ms while it runs.
func (f *fastBed) flow(t *testing.T, name string, d time.Duration) fastFlowResult {
	t.Helper()
	res := fastFlowResult{cc: name}
	p := startLP(t, runOpts{timeout: d + time.Minute}, "testbed", "exec", "--name", f.b.name, "h1", "--",
		"iperf3", "-c", f.dst, "-p", fastPort, "-C", name, "-t", strconv.Itoa(int(d/time.Second)), "-J")
	start := time.Now()
	var wg sync.WaitGroup
	var ssErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(2 * time.Second)
		out, err := exec.Command("ip", "netns", "exec", "lp-"+f.b.name+"-h1", "ss", "-tin", "dst", f.dst).CombinedOutput()
		res.ss, ssErr = string(out), err
	}()
	var sampleErr error
	tick := time.NewTicker(100 * time.Millisecond)
	for !p.Exited() {
		<-tick.C
		n, err := f.backlog()
		if err != nil {
			sampleErr = err
			break
		}
		res.samples = append(res.samples, backlogSample{at: time.Since(start), bytes: n})
	}
	tick.Stop()
	r := p.Wait()
	wg.Wait()
	if sampleErr != nil {
		t.Fatal(sampleErr)
	}
	if ssErr != nil {
		t.Fatalf("ss -tin in h1: %v\n%s", ssErr, res.ss)
	}
	if err := json.Unmarshal([]byte(r.stdout), &res.iperf); err != nil || r.code != 0 || res.iperf.Error != "" ||
		len(res.iperf.End.Streams) != 1 {
		t.Fatalf("iperf3 -C %s: exit %d, %v %s\nstdout:\n%s\nstderr:\n%s", name, r.code, err, res.iperf.Error, r.stdout, r.stderr)
	}
	res.log(t)
	return res
}

// ssCongestion lists the congestion control of each connection ss -tin
// printed (the first word of each connection's info line).
func ssCongestion(out string) []string {
	var ccs []string
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "ESTAB") && i+1 < len(lines) {
			if fs := strings.Fields(lines[i+1]); len(fs) > 0 {
				ccs = append(ccs, fs[0])
			}
		}
	}
	return ccs
}

func TestFASTOnTestbed(t *testing.T) {
	skipUnlessNetRoot(t)
	for _, c := range []string{"iperf3", "tc"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s is needed (scripts/deps.sh installs it)", c)
		}
	}
	cctest.Hold(t, "fast", true, nil)
	f := upFastBed(t)
	alpha := fast.DefaultParams.Alpha

	t.Run("offered", func(t *testing.T) {
		for _, n := range f.nodes {
			r := f.b.exec(n, "cat", "/proc/sys/net/ipv4/tcp_available_congestion_control")
			if r.code != 0 || !slices.Contains(strings.Fields(r.stdout), "fast") {
				t.Errorf("node %s: tcp_available_congestion_control = %q (exit %d), want fast in it", n, strings.TrimSpace(r.stdout), r.code)
			}
		}
		fast := f.flow(t, "fast", 4*time.Second)
		if ccs := ssCongestion(fast.ss); !slices.Contains(ccs, "fast") {
			t.Errorf("ss -tin on h1 during iperf3 -C fast shows congestion controls %v, want fast:\n%s", ccs, fast.ss)
		} else {
			t.Logf("ss -tin on h1: congestion controls %v", ccs)
		}
	})

	t.Run("queue", func(t *testing.T) {
		fast := f.flow(t, "fast", fastFlow)
		cubic := f.flow(t, "cubic", fastFlow)
		mss := fast.iperf.Start.MSS
		if mss <= 0 {
			t.Fatalf("iperf3 reported no MSS")
		}
		want := time.Duration(float64(alpha) * float64(mss) * 8 / fastRate * float64(time.Second))
		drain := time.Duration(float64(fastQueue) * 8 / fastRate * float64(time.Second))
		got, cub := fast.queueDelay(fastSettled), cubic.queueDelay(fastSettled)
		t.Logf("FAST's target alpha·MSS/rate = %d × %d B / 100 Mbit/s = %.1f ms; FAST %.1f ms (%.2f of it); CUBIC %.1f ms; the queue drains in %.0f ms",
			alpha, mss, ms(want), ms(got), float64(got)/float64(want), ms(cub), ms(drain))
		if got < want/2 || got > want*3/2 {
			t.Errorf("FAST's mean queueing delay after %s is %.1f ms, want %.1f ms ± 50%%", fastSettled, ms(got), ms(want))
		}
		if cub <= got || cub < drain/2 {
			t.Errorf("CUBIC's mean queueing delay after %s is %.1f ms, want above FAST's %.1f ms and above half the queue's drain time (%.0f ms)",
				fastSettled, ms(cub), ms(got), ms(drain/2))
		}
	})

	t.Run("loss", func(t *testing.T) {
		f.b.linkSet("wan", "--loss", "0.1%")
		defer f.b.linkSet("wan", "--loss", "0")
		fast := f.flow(t, "fast", fastFlow)
		reno := f.flow(t, "reno", fastFlow)
		fb, rb := fast.iperf.End.SumReceived.BitsPerSecond, reno.iperf.End.SumReceived.BitsPerSecond
		t.Logf("0.1%% loss: FAST %.1f Mbit/s, Reno %.1f Mbit/s, ratio %.2f", fb/1e6, rb/1e6, fb/rb)
		if fb < 2*rb {
			t.Errorf("under 0.1%% loss FAST carried %.1f Mbit/s, Reno %.1f: want FAST at least twice Reno", fb/1e6, rb/1e6)
		}
	})
}
