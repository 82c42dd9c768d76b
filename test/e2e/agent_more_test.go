//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"github.com/lightpath/lightpath/internal/testbed"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// More of the agents on a real testbed (issue 5's tests): concurrent
// reservations on one link, cross traffic, an agent killed and restarted,
// the dedicated link cut under a transfer, and requests that must change
// nothing. Each builds the setup of TestAgentsSteerReservation: a
// controller on examples/two-site.yaml and the testbed with an agent in
// every node. a1 is 198.18.1.1, a2 198.18.1.2, ra 198.18.1.3; b1
// 198.18.2.1, b2 198.18.2.2, rb 198.18.2.3.

// agentBed is a controller and a two-site testbed whose six agents are
// alive.
type agentBed struct {
	*tb
	c        *cliCtl
	agentTok string // the agents' token file
	st       testbedStatus
}

func upAgentBed(t *testing.T) *agentBed {
	t.Helper()
	c, b := agentTestbed(t)
	a := &agentBed{tb: b, c: c, agentTok: filepath.Join(c.dir, "agent.token")}
	a.st = a.status()
	return a
}

// liveResv is what the tests read of a reservation from the controller.
type liveResv struct {
	ID             string   `json:"id"`
	Owner          string   `json:"owner"`
	State          string   `json:"state"`
	Version        uint64   `json:"version"`
	DSCP           int      `json:"dscp"`
	Degraded       bool     `json:"degraded"`
	DegradedReason string   `json:"degraded_reason"`
	ManagedNodes   []string `json:"managed_nodes"`
	Provisioned    []string `json:"provisioned"`
	Path           []struct {
		Link string `json:"link"`
	} `json:"path"`
}

func (a *agentBed) resv(id string) liveResv {
	a.t.Helper()
	var got struct {
		Reservation liveResv `json:"reservation"`
	}
	if err := a.c.getJSON(a.c.adminTok, "/api/v1/reservations/"+id, &got); err != nil {
		a.t.Fatalf("read reservation %s: %v", id, err)
	}
	return got.Reservation
}

// reserveActive books from→to at bw over path for flow as the holder of
// tok and waits until the agents have made it ACTIVE.
func (a *agentBed) reserveActive(tok, from, to, bw, flow, path string) liveResv {
	a.t.Helper()
	res := oneJSON[cliResv](a.t, a.c.ok(tok, "reserve", "create", "--from", from, "--to", to, "--bandwidth", bw,
		"--duration", "10m", "--flow", flow, "--path", path, "--json").stdout)
	var got liveResv
	if !waitFor(time.Minute, func() bool {
		got = a.resv(res.ID)
		return got.State == "ACTIVE"
	}) {
		a.t.Fatalf("reservation %s %s>%s not ACTIVE after a minute: %+v\n%s", res.ID, from, to, got, a.c.Log())
	}
	return got
}

// devsOf lists the node's link-end devices.
func (s testbedStatus) devsOf(node string) []string {
	var out []string
	for _, l := range s.Links {
		for _, e := range l.Ends {
			if e.Node == node {
				out = append(out, e.Device)
			}
		}
	}
	return out
}

// sh runs a shell script in a node and returns its standard output.
func (a *agentBed) sh(node, script string) string {
	a.t.Helper()
	r := a.exec(node, "sh", "-c", script)
	mustSucceed(a.t, node+": "+script, r)
	return r.stdout
}

var (
	ruleRE  = regexp.MustCompile(`^(\d+):`)
	classRE = regexp.MustCompile(`^class htb 1:([0-9a-f]+) `)
	tableRE = regexp.MustCompile(`\btable (\d+)\b`)
	countRE = regexp.MustCompile(`counter packets \d+ bytes \d+`)
)

// agentObjects lists what node's kernel holds of the agents': ip rules
// in 10000-10063 (both families), htb classes from 1:100 and the filters
// of root 1: on its devices, routes in tables 100-163, and the nftables
// table lightpath (when nft is installed). The lines are sorted and free
// of counters, so two calls compare equal when nothing changed.
func (a *agentBed) agentObjects(node string) []string {
	a.t.Helper()
	var script strings.Builder
	script.WriteString("echo '#rules ip'; ip -4 rule show; echo '#rules ip6'; ip -6 rule show\n")
	script.WriteString("echo '#routes ip'; ip -4 route show table all; echo '#routes ip6'; ip -6 route show table all\n")
	for _, d := range a.st.devsOf(node) {
		fmt.Fprintf(&script, "echo '#classes %[1]s'; tc class show dev %[1]s; echo '#filters %[1]s'; tc filter show dev %[1]s parent 1:\n", d)
	}
	script.WriteString("echo '#nft'; if command -v nft >/dev/null; then nft list table inet lightpath 2>/dev/null || true; fi\n")
	var out []string
	section, dev := "", ""
	for _, line := range strings.Split(a.sh(node, script.String()), "\n") {
		if s, ok := strings.CutPrefix(line, "#"); ok {
			// "#section" or "#section DEVICE" (or family)
			section, dev, _ = strings.Cut(s, " ")
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		switch section {
		case "rules":
			if m := ruleRE.FindStringSubmatch(line); m != nil {
				if p, _ := strconv.Atoi(m[1]); p >= 10000 && p <= 10063 {
					out = append(out, "rule "+line+" ("+dev+")")
				}
			}
		case "routes":
			if m := tableRE.FindStringSubmatch(line); m != nil {
				if n, _ := strconv.Atoi(m[1]); n >= 100 && n <= 163 {
					out = append(out, "route "+strings.TrimSpace(line))
				}
			}
		case "classes":
			if m := classRE.FindStringSubmatch(line); m != nil {
				if minor, _ := strconv.ParseUint(m[1], 16, 32); minor >= 0x100 {
					out = append(out, "class "+dev+" "+line)
				}
			}
		case "filters":
			out = append(out, "filter "+dev+" "+strings.TrimSpace(line))
		case "nft":
			out = append(out, "nft "+countRE.ReplaceAllString(strings.TrimSpace(line), "counter"))
		}
	}
	slices.Sort(out)
	return out
}

// kernels snapshots agentObjects on every node.
func (a *agentBed) kernels() map[string][]string {
	m := map[string][]string{}
	for _, n := range a.st.Nodes {
		m[n.Name] = a.agentObjects(n.Name)
	}
	return m
}

// kernelDiff says how two snapshots differ ("" when they do not).
func kernelDiff(before, after map[string][]string) string {
	var b strings.Builder
	for node, was := range before {
		now := after[node]
		for _, l := range was {
			if !slices.Contains(now, l) {
				fmt.Fprintf(&b, "%s: gone: %s\n", node, l)
			}
		}
		for _, l := range now {
			if !slices.Contains(was, l) {
				fmt.Fprintf(&b, "%s: new:  %s\n", node, l)
			}
		}
	}
	return b.String()
}

// benchRate is what a lightpath bench --json run measured: the bytes serve
// counted, and for the log its summary's throughput (ramp-up included)
// and the rate between its first and last interval events (counted by
// the sender as it writes, so a little above what arrives). The rates go
// to the log only: what load cannot change is asserted (the bytes went
// through the flow's class); bench/steering.sh measures the rates.
type benchRate struct {
	bytes           int64
	summary, steady float64
}

func parseBench(t *testing.T, what string, r result) benchRate {
	t.Helper()
	mustSucceed(t, what, r)
	sum, lines := parseNDJSON(t, r.stdout)
	var first, last map[string]any
	for _, l := range lines {
		if l["type"] == "interval" {
			if first == nil {
				first = l
			}
			last = l
		}
	}
	br := benchRate{bytes: sum.Bytes, summary: sum.ThroughputBps, steady: sum.ThroughputBps}
	if first != nil && last != nil {
		dt := last["seconds"].(float64) - first["seconds"].(float64)
		if dt > 0.5 {
			br.steady = (last["bytes"].(float64) - first["bytes"].(float64)) * 8 / dt
		}
	}
	return br
}

// fixedBench is the arguments that make a bench move a fixed amount of
// data, a 24 MiB file (written for each call in a world-readable
// directory, so that a bench run as another user reads it too), however
// long a busy machine takes: its -t only bounds a hang. A bench of a
// fixed duration moves nothing at all when the machine stalls that long
// (test-stress saw a 2 s bench deliver 0 bytes), and the tests count
// where a flow's bytes went.
func fixedBench(t *testing.T) []string {
	t.Helper()
	f := filepath.Join(scratchDir(t), "bench.bin")
	writeRandom(t, f, 24<<20, uint64(len(t.Name())))
	if err := os.Chmod(f, 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--file", f, "-t", "2m"}
}

// benchIn starts lightpath bench --json in a node.
func (a *agentBed) benchIn(node, url string, args ...string) *proc {
	a.t.Helper()
	return startLP(a.t, runOpts{timeout: 60 * time.Second}, append([]string{"testbed", "exec", "--name", a.name, node, "--",
		lpBin, "bench", url, "--json"}, args...)...)
}

// post sends a JSON body to a controller route as the holder of tokenFile
// and returns the status and body.
func (a *agentBed) post(tokenFile, path string, body any) (int, string) {
	a.t.Helper()
	return postJSON(a.t, a.c.url, tokenFile, path, body)
}

func mbps(bps float64) string { return fmt.Sprintf("%.0f Mbit/s", bps/1e6) }

// htbClass is one htb class of a device as tc -s class show prints it:
// what is configured (the share given) and what went through it.
type htbClass struct {
	prio       int    // -1: none printed (an inner class)
	rate, ceil uint64 // bits/s
	bytes      uint64 // sent through the class since it was made
}

var (
	htbLineRE = regexp.MustCompile(`^class htb (1:[0-9a-f]+) .*?(?:prio (\d+) )?rate (\S+) ceil (\S+) `)
	htbSentRE = regexp.MustCompile(`^\s*Sent (\d+) bytes `)
)

// tcRate parses a rate as tc prints it (400Mbit, 1Gbit: SI units).
func tcRate(s string) (uint64, error) {
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"Tbit", 1e12}, {"Gbit", 1e9}, {"Mbit", 1e6}, {"Kbit", 1e3}, {"bit", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(n, 64)
			return uint64(f*u.mult + 0.5), err
		}
	}
	return 0, fmt.Errorf("rate %q: no unit", s)
}

// htbClasses reads the htb classes on node's device dev, by class id
// ("1:2", "1:12c").
func (a *agentBed) htbClasses(node, dev string) map[string]htbClass {
	a.t.Helper()
	out := a.sh(node, "tc -s class show dev "+dev)
	m := map[string]htbClass{}
	cur := ""
	for _, line := range strings.Split(out, "\n") {
		if x := htbLineRE.FindStringSubmatch(line); x != nil {
			c := htbClass{prio: -1}
			if x[2] != "" {
				c.prio, _ = strconv.Atoi(x[2])
			}
			var err1, err2 error
			c.rate, err1 = tcRate(x[3])
			c.ceil, err2 = tcRate(x[4])
			if err := errors.Join(err1, err2); err != nil {
				a.t.Fatalf("%s %s: %v in %q", node, dev, err, line)
			}
			cur = x[1]
			m[cur] = c
			continue
		}
		if x := htbSentRE.FindStringSubmatch(line); x != nil && cur != "" {
			c := m[cur]
			c.bytes, _ = strconv.ParseUint(x[1], 10, 64)
			m[cur] = c
			cur = ""
		}
	}
	if _, ok := m["1:2"]; !ok {
		a.t.Fatalf("%s %s: no htb class 1:2 in\n%s", node, dev, out)
	}
	return m
}

// resvClass is the htb class id of the reservation of DSCP dscp
// (topology.ClassBase + DSCP, in hex as tc prints it).
func resvClass(dscp int) string { return "1:" + strconv.FormatInt(int64(0x100+dscp), 16) }

// TestAgentMoreConcurrentReservations: two reservations on the dedicated
// link (400 + 200 Mbit/s of its 1.8 Gbit/s reservable), each steering its
// own flow, run at once beside an unreserved bulk flow on the same link
// (ra to rb's end of it, 2 streams): each reservation has
// its own htb class on ra's egress onto dedicated, at its rate and at a
// lower priority than the unreserved class 1:2 (so spare capacity goes to
// unreserved traffic first); every byte of each reserved flow went
// through its own class, the unreserved flow's through 1:2, and nothing
// of them over wan. The rates these shares give under load are
// bench/steering.sh's (cross). The flows are paced (--rate 100M), well
// below the link, so that the emulator keeps up on a busy machine (see
// TestAgentMoreCrossTraffic).
func TestAgentMoreConcurrentReservations(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	a := upAgentBed(t)
	rbDed := a.st.endAddr("dedicated", "rb")
	a.serveIn("b1", "198.18.2.1:7070", t.TempDir())
	a.serveIn("b2", "198.18.2.2:7070", t.TempDir())
	a.serveIn("rb", rbDed+":7071", t.TempDir())

	r1 := a.reserveActive(a.c.adminTok, "a1", "b1", "400M", "tcp 198.18.1.1 > 198.18.2.1:7070", "a1-ra,dedicated,b1-rb")
	r2 := a.reserveActive(a.c.adminTok, "a2", "b2", "200M", "tcp 198.18.1.2 > 198.18.2.2:7070", "a2-ra,dedicated,b2-rb")
	t.Logf("%s a1>b1 400M DSCP %d, %s a2>b2 200M DSCP %d: both ACTIVE", r1.ID, r1.DSCP, r2.ID, r2.DSCP)
	if r1.DSCP == r2.DSCP || r1.DSCP == 0 {
		t.Fatalf("DSCPs %d and %d: want two distinct ones", r1.DSCP, r2.DSCP)
	}
	k1, k2 := resvClass(r1.DSCP), resvClass(r2.DSCP)
	c0 := a.htbClasses("ra", "dedicated")
	for _, x := range []struct {
		id   string
		rate uint64
	}{{k1, 400e6}, {k2, 200e6}} {
		if c, ok := c0[x.id]; !ok || c.rate != x.rate || c.prio != 1 {
			t.Errorf("ra dedicated: class %s %+v (present %v): want rate %d bit/s, prio 1", x.id, c, ok, x.rate)
		}
	}
	if c := c0["1:2"]; c.prio != 0 {
		t.Errorf("ra dedicated: the unreserved class 1:2 %+v: want prio 0, before the reservations' 1", c)
	}

	s0 := a.status()
	// The unreserved flow first: the reserved ones start once its bytes
	// are going through class 1:2, so all three share the link.
	other := a.benchIn("ra", "lp://"+rbDed+":7071", append(fixedBench(t), "-P", "2", "--rate", "100M")...)
	if !waitFor(30*time.Second, func() bool {
		return a.htbClasses("ra", "dedicated")["1:2"].bytes > c0["1:2"].bytes+4<<20 || other.Exited()
	}) || other.Exited() {
		t.Fatalf("the unreserved flow did not get under way in class 1:2: %s", other.err.String())
	}
	p1 := a.benchIn("a1", "lp://198.18.2.1:7070", append(fixedBench(t), "--rate", "100M")...)
	p2 := a.benchIn("a2", "lp://198.18.2.2:7070", append(fixedBench(t), "--rate", "100M")...)
	m1 := parseBench(t, "bench a1 -> b1", p1.Wait())
	m2 := parseBench(t, "bench a2 -> b2", p2.Wait())
	mo := parseBench(t, "bench ra -> rb (unreserved)", other.Wait())
	// Read after every flow ended: whatever the flows delivered went
	// through the classes before.
	c1 := a.htbClasses("ra", "dedicated")
	s1 := a.status()
	ded := s1.bytesOn("dedicated", "ra") - s0.bytesOn("dedicated", "ra")
	wan := s1.bytesOn("wan", "ra") - s0.bytesOn("wan", "ra")
	t.Logf("a1>b1 reserved 400M: %d bytes, %s (intervals %s); a2>b2 reserved 200M: %d bytes, %s (intervals %s); unreserved ra>rb x2: %d bytes, %s (intervals %s)",
		m1.bytes, mbps(m1.summary), mbps(m1.steady), m2.bytes, mbps(m2.summary), mbps(m2.steady), mo.bytes, mbps(mo.summary), mbps(mo.steady))
	t.Logf("dedicated ra>rb carried %d MB, wan ra>rb %d MB; through ra's classes on dedicated: %s %d MB, %s %d MB, 1:2 %d MB",
		ded/1e6, wan/1e6, k1, (c1[k1].bytes-c0[k1].bytes)/1e6, k2, (c1[k2].bytes-c0[k2].bytes)/1e6, (c1["1:2"].bytes-c0["1:2"].bytes)/1e6)
	if wan > 4<<20 {
		t.Errorf("wan carried %d bytes: the reserved flows should all be on dedicated", wan)
	}
	// A class counts packets, headers included: a flow all of whose
	// bytes went through it leaves at least its payload there.
	for _, x := range []struct {
		what, id string
		bytes    int64
	}{{"a1>b1", k1, m1.bytes}, {"a2>b2", k2, m2.bytes}, {"the unreserved ra>rb", "1:2", mo.bytes}} {
		if x.bytes <= 0 {
			t.Errorf("%s delivered nothing", x.what)
		}
		if got := c1[x.id].bytes - c0[x.id].bytes; got < uint64(x.bytes) {
			t.Errorf("%s delivered %d bytes but its class %s carried %d: the flow is not (all) in its class", x.what, x.bytes, x.id, got)
		}
	}
}

// inNetns runs f on a thread moved into the network namespace ns (a path
// such as /run/netns/NAME), so sockets f makes belong to ns, and moves the
// thread back before handing it to the scheduler again. A thread that
// cannot move back stays locked and ends with its goroutine.
//
// Never let such a thread end otherwise: children started with Pdeathsig
// from it (the controller, servers) would be killed with it.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open(ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err)) // the thread stays locked
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// udpBlast sends UDP datagrams of size bytes from inside namespace ns to
// dst at rate bits/s until stop is closed and returns the bytes sent.
// Datagrams the kernel's queues refuse are not retried: it is load, not
// data.
func udpBlast(ns, dst string, rate float64, size int, stop <-chan struct{}) (int64, error) {
	var c net.Conn
	if err := inNetns(ns, func() (err error) { c, err = net.Dial("udp", dst); return err }); err != nil {
		return 0, err
	}
	defer c.Close()
	c.(*net.UDPConn).SetWriteBuffer(4 << 20)
	buf := make([]byte, size)
	start := time.Now()
	var sent int64
	for {
		select {
		case <-stop:
			return sent, nil
		default:
		}
		due := int64(time.Since(start).Seconds() * rate / 8)
		// Never catch up more than 2 ms of lag in one burst.
		sent = max(sent, due-int64(0.002*rate/8))
		for sent < due {
			c.Write(buf) // refusals (ENOBUFS, ECONNREFUSED after an ICMP error) are load shed
			sent += int64(size)
		}
		// Pacing, not waiting for anything: the next burst is due in
		// 200 µs.
		time.Sleep(200 * time.Microsecond)
	}
}

// udpSink receives UDP on addr inside namespace ns until stop is called,
// counting bytes (so the blast meets a socket, not ICMP errors).
func udpSink(t *testing.T, ns, addr string) (got *atomic.Int64, stop func()) {
	t.Helper()
	got = new(atomic.Int64)
	var conn net.PacketConn
	if err := inNetns(ns, func() (err error) { conn, err = net.ListenPacket("udp", addr); return err }); err != nil {
		t.Fatalf("UDP sink in %s on %s: %v", ns, addr, err)
	}
	conn.(*net.UDPConn).SetReadBuffer(16 << 20)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			got.Add(int64(n))
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { conn.Close(); wg.Wait() }) }
	t.Cleanup(stop)
	return got, stop
}

// TestAgentMoreCrossTraffic: with UDP blasted across the dedicated link at
// 50 Mbit/s (ra to rb's end of the link), the flow
// a1>b1 put on the link by a plain route, without a reservation, shares
// the unreserved class 1:2 with the blast; steered onto it by a 100
// Mbit/s reservation it goes through a class of its own at that rate and
// at htb priority 1 (spare capacity goes to 1:2, at 0, first), while the
// blast stays in 1:2. What that gives under load (the flow keeps 90% of
// its reservation; much less without one) is bench/steering.sh's cross
// scenario (500 Mbit/s, 300 reserved; row "over": UDP at the whole link
// rate). The rates here are low (the flow paced at 100 Mbit/s) so that
// the emulator keeps up on a busy machine: starved of CPU beside a load
// that fills the link, it leaves packets in its TUN devices' rings, the
// agents' probes miss their deadline (the period and the round trip: 250
// ms) behind them, and the agents take the path for a blackhole.
func TestAgentMoreCrossTraffic(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	a := upAgentBed(t)
	const blastRate = 50e6
	rbDed := a.st.endAddr("dedicated", "rb")
	a.serveIn("b1", "198.18.2.1:7070", t.TempDir())
	nsRA, nsRB := "/run/netns/lp-"+a.name+"-ra", "/run/netns/lp-"+a.name+"-rb"
	got, stop := udpSink(t, nsRB, rbDed+":9999")
	defer stop()

	// One run: the blast gets under way (the sink receives it), the bench
	// runs beside it, then the blast stops. It returns the bench and the
	// bytes the sink received, and the classes of ra's egress onto
	// dedicated before and after.
	run := func(label string) (m benchRate, udp uint64, c0, c1 map[string]htbClass) {
		t.Helper()
		s0 := a.status()
		c0 = a.htbClasses("ra", "dedicated")
		got0 := got.Load()
		type blastRes struct {
			n   int64
			err error
		}
		blast, quit := make(chan blastRes, 1), make(chan struct{})
		start := time.Now()
		go func() {
			n, err := udpBlast(nsRA, rbDed+":9999", blastRate, 8900, quit)
			blast <- blastRes{n, err}
		}()
		if !waitFor(30*time.Second, func() bool { return got.Load() > got0+1<<20 }) {
			close(quit)
			br := <-blast
			t.Fatalf("%s: the sink received %d bytes of the blast (%d sent, %v)", label, got.Load()-got0, br.n, br.err)
		}
		m = parseBench(t, "bench a1 -> b1 "+label, a.exec("a1", append([]string{lpBin, "bench", "lp://198.18.2.1:7070", "--json", "--rate", "100M"}, fixedBench(t)...)...))
		close(quit)
		br := <-blast
		secs := time.Since(start).Seconds()
		if br.err != nil {
			t.Fatalf("UDP blast: %v", br.err)
		}
		// The sink first, the classes after: what the sink counted had
		// gone through them.
		udp = uint64(got.Load() - got0)
		c1 = a.htbClasses("ra", "dedicated")
		s1 := a.status()
		ded := s1.bytesOn("dedicated", "ra") - s0.bytesOn("dedicated", "ra")
		wan := s1.bytesOn("wan", "ra") - s0.bytesOn("wan", "ra")
		t.Logf("%s: a1>b1 TCP %d bytes, %s (intervals %s); UDP offered %s, received %s over the %.1f s blast; dedicated ra>rb %d MB, wan ra>rb %d MB",
			label, m.bytes, mbps(m.summary), mbps(m.steady), mbps(float64(br.n)*8/secs), mbps(float64(udp)*8/secs), secs, ded/1e6, wan/1e6)
		if wan > 4<<20 {
			t.Errorf("%s: wan carried %d bytes: the flow should be on dedicated", label, wan)
		}
		if m.bytes <= 0 || udp == 0 {
			t.Fatalf("%s: the flow delivered %d bytes, the blast %d", label, m.bytes, udp)
		}
		return m, udp, c0, c1
	}
	grew := func(c0, c1 map[string]htbClass, id string) uint64 { return c1[id].bytes - c0[id].bytes }

	// Without a reservation: ra routes b1 over the dedicated link by a
	// plain route (the reverse path stays on wan), so the flow shares the
	// unreserved class with the blast.
	route := strings.TrimSpace(a.sh("ra", "ip route show 198.18.2.1/32"))
	if route == "" {
		t.Fatal("ra has no route to b1")
	}
	a.sh("ra", "ip route replace 198.18.2.1/32 via "+rbDed+" dev dedicated src 198.18.1.3")
	m, udp, c0, c1 := run("without a reservation")
	a.sh("ra", "ip route replace "+route)
	for id := range c1 {
		if minor, _ := strconv.ParseUint(strings.TrimPrefix(id, "1:"), 16, 32); minor >= 0x100 {
			t.Errorf("without a reservation ra has a reservation class %s on dedicated", id)
		}
	}
	if g := grew(c0, c1, "1:2"); g < uint64(m.bytes)+udp {
		t.Errorf("without a reservation the class 1:2 carried %d bytes, less than the flow's %d and the blast's %d together", g, m.bytes, udp)
	}

	r := a.reserveActive(a.c.adminTok, "a1", "b1", "100M", "tcp 198.18.1.1 > 198.18.2.1:7070", "a1-ra,dedicated,b1-rb")
	k := resvClass(r.DSCP)
	m, udp, c0, c1 = run(fmt.Sprintf("with reservation %s (100M, DSCP %d)", r.ID, r.DSCP))
	if got := a.resv(r.ID); got.State != "ACTIVE" || got.Degraded {
		t.Errorf("the reservation after the run: %s, degraded %v %q", got.State, got.Degraded, got.DegradedReason)
	}
	if c, ok := c1[k]; !ok || c.rate != 100e6 || c.prio != 1 || c1["1:2"].prio != 0 {
		t.Errorf("ra dedicated with the reservation: class %s %+v (present %v), 1:2 %+v: want %s at 100 Mbit/s prio 1, 1:2 at prio 0",
			k, c, ok, c1["1:2"], k)
	}
	t.Logf("with the reservation: class %s carried %d MB, 1:2 %d MB", k, grew(c0, c1, k)/1e6, grew(c0, c1, "1:2")/1e6)
	if g := grew(c0, c1, k); g < uint64(m.bytes) {
		t.Errorf("with the reservation the flow delivered %d bytes, its class %s carried %d: the flow is not (all) in its class", m.bytes, k, g)
	}
	if g := grew(c0, c1, "1:2"); g < udp {
		t.Errorf("with the reservation the blast delivered %d bytes, the class 1:2 carried %d: the blast is not (all) in the unreserved class", udp, g)
	}
}

// agentsRound waits until every agent of the bed has run a whole
// reconcile round that began after the call. A round starts with a
// heartbeat, which renews the agent's lease (lease_expires in
// /api/v1/agents, to the nanosecond): the second renewal seen after the
// call ends a round that began after it. Renewals closer together than a
// poll are seen as one, which only makes the wait longer.
func (a *agentBed) agentsRound() {
	a.t.Helper()
	type agents struct {
		Agents []struct {
			Node         string    `json:"node"`
			LeaseExpires time.Time `json:"lease_expires"`
		} `json:"agents"`
	}
	last, seen := map[string]time.Time{}, map[string]int{}
	read := func() bool {
		var got agents
		if err := a.c.getJSON(a.c.adminTok, "/api/v1/agents", &got); err != nil {
			return false
		}
		done := 0
		for _, ag := range got.Agents {
			if was, ok := last[ag.Node]; ok && !ag.LeaseExpires.Equal(was) {
				seen[ag.Node]++
			}
			last[ag.Node] = ag.LeaseExpires
			if seen[ag.Node] >= 2 {
				done++
			}
		}
		return done == len(a.st.Nodes)
	}
	read()
	if !waitFor(time.Minute, read) {
		a.t.Fatalf("not every agent renewed its lease twice in a minute: renewals seen %v", seen)
	}
}

// agentPid finds the pid of the agent of node among the testbed's
// processes (in the node's namespace, talking to this controller).
func (a *agentBed) agentPid(node string) int {
	a.t.Helper()
	out, _ := exec.Command("pgrep", "-f", "agent --node "+node+" --controller "+a.c.sock).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, _ := strconv.Atoi(f)
		ns, err := exec.Command("ip", "netns", "identify", f).Output()
		if err == nil && strings.TrimSpace(string(ns)) == "lp-"+a.name+"-"+node {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		a.t.Fatalf("agents of %s in lp-%s-%s: pids %v, want one", node, a.name, node, pids)
	}
	return pids[0]
}

// killAgent SIGKILLs the agent of node and waits until it is gone.
func (a *agentBed) killAgent(node string) {
	a.t.Helper()
	pid := a.agentPid(node)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		a.t.Fatalf("kill agent %d: %v", pid, err)
	}
	if !waitFor(time.Minute, func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// Gone, or a zombie waiting for its parent.
		return err != nil || strings.Contains(string(st), ") Z ")
	}) {
		a.t.Fatalf("agent %d still running after SIGKILL", pid)
	}
	a.t.Logf("killed the agent of %s (pid %d)", node, pid)
}

// startAgent starts an agent for node as testbed up --agents does, in the
// background (the test's cleanup and testbed down both end it).
func (a *agentBed) startAgent(node string) *proc {
	a.t.Helper()
	// The spool testbed up gave the node's first agent: the token it
	// enrolled is kept there, and enrolling the node again while that
	// token lives needs an admin (docs/security.md, Enrolment).
	return startLP(a.t, runOpts{timeout: 5 * time.Minute}, "testbed", "exec", "--name", a.name, node, "--",
		lpBin, "agent", "--node", node, "--controller", a.c.sock, "--controller-token-file", a.agentTok,
		"--testbed", a.name, "--spool", testbed.SpoolDir(a.name, node))
}

// TestAgentMoreRestart kills ra's agent (SIGKILL) with a reservation
// ACTIVE, removes some of its objects by hand, and restarts it: with the
// reservation still live the objects come back; with the reservation
// cancelled while the agent was down, nothing of the agent's is left.
func TestAgentMoreRestart(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	a := upAgentBed(t)
	a.serveIn("b1", "198.18.2.1:7070", t.TempDir())
	_, hasNft := exec.LookPath("nft")

	r := a.reserveActive(a.c.adminTok, "a1", "b1", "300M", "tcp 198.18.1.1 > 198.18.2.1:7070", "a1-ra,dedicated,b1-rb")
	rule := strconv.Itoa(10000 + r.DSCP)
	table := strconv.Itoa(100 + r.DSCP)
	want := a.agentObjects("ra")
	t.Logf("%s ACTIVE, DSCP %d; ra holds %d objects of the agent's:\n%s", r.ID, r.DSCP, len(want), strings.Join(want, "\n"))
	for _, w := range []string{"rule " + rule + ":", "class dedicated class htb 1:" + strconv.FormatInt(int64(0x100+r.DSCP), 16) + " "} {
		if !slices.ContainsFunc(want, func(l string) bool { return strings.HasPrefix(l, w) }) {
			t.Fatalf("ra lacks %q with the reservation ACTIVE", w)
		}
	}

	// With the reservation live: what was deleted comes back.
	{
		a.killAgent("ra")
		script := "ip rule del priority " + rule + " && ip route flush table " + table
		if hasNft == nil {
			script += " && nft delete table inet lightpath"
		}
		a.sh("ra", script)
		if now := a.agentObjects("ra"); slices.Equal(now, want) {
			t.Fatalf("deleting by hand changed nothing: %v", now)
		}
		start := time.Now()
		a.startAgent("ra")
		var now []string
		if !waitFor(time.Minute, func() bool { now = a.agentObjects("ra"); return slices.Equal(now, want) }) {
			t.Fatalf("a minute after the restart ra holds\n%s\nwant\n%s", strings.Join(now, "\n"), strings.Join(want, "\n"))
		}
		t.Logf("repaired %.2f s after the restart (%s)", time.Since(start).Seconds(), script)
		if got := a.resv(r.ID); got.State != "ACTIVE" {
			t.Errorf("reservation after the restart: %+v", got)
		}
		benchWhere(t, a.tb, "after the repair", "dedicated", append([]string{lpBin, "bench", "lp://198.18.2.1:7070", "--json", "--rate", "200M"}, fixedBench(t)...)...)
	}

	// Cancelled while the agent is down: nothing is left once it is back.
	{
		a.killAgent("ra")
		a.sh("ra", "ip rule del priority "+rule)
		a.c.ok(a.c.adminTok, "reserve", "cancel", r.ID)
		// The other agents clean up at once; ra's objects stay until its
		// agent is back.
		if !waitFor(time.Minute, func() bool { return len(a.agentObjects("a1")) == 0 && len(a.agentObjects("rb")) == 0 }) {
			t.Errorf("a1 or rb still hold the cancelled reservation: %v %v", a.agentObjects("a1"), a.agentObjects("rb"))
		}
		left := a.agentObjects("ra")
		if len(left) == 0 {
			t.Fatal("ra holds nothing with its agent down: the test removes nothing")
		}
		start := time.Now()
		a.startAgent("ra")
		if !waitFor(time.Minute, func() bool { left = a.agentObjects("ra"); return len(left) == 0 }) {
			t.Fatalf("a minute after the restart ra still holds:\n%s", strings.Join(left, "\n"))
		}
		t.Logf("ra clean %.2f s after the restart", time.Since(start).Seconds())
		if hasNft != nil {
			t.Log("nft is not installed: the nftables table was not checked")
		}
	}
}

// copyBed readies a copy to break in the middle: dedicated at 500 Mbit/s
// (so that 300 MiB lasts long enough), a 300 MiB file of random bytes
// (seed) and a server in b1 (--stall-timeout 3s) writing into dstDir.
func (a *agentBed) copyBed(t *testing.T, seed uint64) (src, dstDir string) {
	t.Helper()
	a.linkSet("dedicated", "--rate", "500M")
	dstDir = scratchDir(t)
	src = filepath.Join(scratchDir(t), "data.bin")
	writeRandom(t, src, 300<<20, seed)
	a.serveIn("b1", "198.18.2.1:7070", dstDir, "--stall-timeout", "3s")
	return src, dstDir
}

// copyOnDedicated starts a reserved copy of src from a1 to b1's server
// (--retries 5, --stall-timeout 3s) and waits until 60 MB of it crossed
// dedicated: the moment to break the link under it. It returns the copy
// and the testbed's counters before it and then.
func (a *agentBed) copyOnDedicated(t *testing.T, src string) (cp *proc, s0, s1 testbedStatus) {
	t.Helper()
	s0 = a.status()
	cp = startLP(t, runOpts{timeout: 2 * time.Minute}, "testbed", "exec", "--name", a.name, "a1", "--",
		lpBin, "cp", "--json", "--retries", "5", "--stall-timeout", "3s", src, "lp://198.18.2.1:7070/data.bin")
	if !waitFor(time.Minute, func() bool {
		s1 = a.status()
		return s1.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra") > 60<<20 || cp.Exited()
	}) || cp.Exited() {
		t.Fatalf("the copy did not get under way on dedicated: %s", cp.err.String())
	}
	return cp, s0, s1
}

// TestAgentMoreLinkCut cuts the dedicated link under a reserved copy of
// 300 MiB (a1 to b1, --retries 5): the agents withdraw the steering from
// the dead hop (the controller moves the reservation to wan) and the copy
// finishes, verified, on the routed path. With the link back, the
// reservation goes back to dedicated and ra steers onto it again.
func TestAgentMoreLinkCut(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	a := upAgentBed(t)
	src, dstDir := a.copyBed(t, 41)
	r := a.reserveActive(a.c.adminTok, "a1", "b1", "400M", "tcp 198.18.1.1 > 198.18.2.1:7070", "a1-ra,dedicated,b1-rb")

	cp, s0, s1 := a.copyOnDedicated(t, src)
	cut := time.Now()
	a.linkSet("dedicated", "--down")
	t.Logf("cut dedicated after %d MB crossed it", (s1.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"))/1e6)

	if !waitFor(90*time.Second, cp.Exited) {
		// What the kernels say: is the flow still steered onto the dead
		// link?
		ra, rb := a.agentObjects("ra"), a.agentObjects("rb")
		onDead := func(l string) bool { return strings.HasPrefix(l, "route ") && strings.Contains(l, " dev dedicated ") }
		steered := slices.ContainsFunc(ra, onDead) || slices.ContainsFunc(rb, onDead)
		got := a.resv(r.ID)
		s2 := a.status()
		var path []string
		for _, h := range got.Path {
			path = append(path, h.Link)
		}
		msg := fmt.Sprintf("90 s after the cut the copy has not finished; the reservation is %s on %v (degraded %v %q); "+
			"ra or rb still route its flows onto dedicated: %v; wan ra>rb carried %d bytes since the start; cp says: %s",
			got.State, path, got.Degraded, got.DegradedReason, steered,
			s2.bytesOn("wan", "ra")-s0.bytesOn("wan", "ra"), lastLine(cp.err.String()))
		if steered {
			msg = "the agents' path liveness did not withdraw the policy routing from the dead link: " + msg
		}
		t.Fatal(msg)
	}
	res := cp.Wait()
	mustSucceed(t, "cp across the cut of the dedicated link", res)
	sum := parseSummary(t, res.stdout)
	if !sum.Verified {
		t.Errorf("summary not verified: %+v", sum)
	}
	sameFile(t, src, filepath.Join(dstDir, "data.bin"))
	s2 := a.status()
	got := a.resv(r.ID)
	var path []string
	for _, h := range got.Path {
		path = append(path, h.Link)
	}
	t.Logf("finished %.1f s after the cut in %d attempts, %s overall; dedicated ra>rb carried %d MB, wan ra>rb %d MB; reservation %s on %v, degraded %v %q",
		time.Since(cut).Seconds(), sum.Attempts, mbps(sum.ThroughputBps), (s2.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"))/1e6,
		(s2.bytesOn("wan", "ra")-s0.bytesOn("wan", "ra"))/1e6, got.State, path, got.Degraded, got.DegradedReason)
	// Every byte of the file crossed ra>rb once at least, on dedicated
	// before the cut or on wan after it.
	if ded, wan := s2.bytesOn("dedicated", "ra")-s0.bytesOn("dedicated", "ra"), s2.bytesOn("wan", "ra")-s0.bytesOn("wan", "ra"); ded+wan < 300<<20 || wan == 0 {
		t.Errorf("dedicated carried %d bytes and wan %d of the 300 MiB copy: the rest should have gone over the routed path", ded, wan)
	}

	// The link back: the controller moves the reservation back to
	// dedicated, the preferred path, and ra steers its flows there again
	// (issue 29).
	a.linkSet("dedicated", "--up")
	onDedicated := func() bool {
		for _, l := range a.agentObjects("ra") {
			if strings.HasPrefix(l, "route ") && strings.Contains(l, " dev dedicated ") {
				return true
			}
		}
		return false
	}
	if !waitFor(time.Minute, func() bool {
		got = a.resv(r.ID)
		return len(got.Path) == 3 && got.Path[1].Link == "dedicated" && got.State == "ACTIVE" && !got.Degraded && onDedicated()
	}) {
		t.Fatalf("a minute after dedicated came back: reservation %s on %v, degraded %v %q; ra routes onto dedicated: %v",
			got.State, got.Path, got.Degraded, got.DegradedReason, onDedicated())
	}
	if show := a.c.ok(a.c.adminTok, "reserve", "show", r.ID).stdout; !strings.Contains(show, "moved back: link dedicated up again") {
		t.Errorf("reserve show does not say it moved back:\n%s", show)
	}
}

// TestAgentMoreRefusals: malformed flow specs, flows that are not the
// reservation's nodes', and another user's requests on a live reservation
// (cancel, modify, booking on its owner's behalf) each get a clear error
// and change nothing: not the reservation, not the agents' kernels.
func TestAgentMoreRefusals(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	a := upAgentBed(t)
	c := a.c
	alice, bob := filepath.Join(c.dir, "alice.token"), filepath.Join(c.dir, "bob.token")
	c.ok(c.adminTok, "user", "add", "alice", "--role", "user")
	c.ok(c.adminTok, "user", "add", "bob", "--role", "user")
	c.ok(c.adminTok, "user", "token", "create", "alice", "--out", alice)
	c.ok(c.adminTok, "user", "token", "create", "bob", "--out", bob)

	r := a.reserveActive(alice, "a1", "b1", "200M", "tcp 198.18.1.1 > 198.18.2.1:7070", "a1-ra,dedicated,b1-rb")
	before := a.kernels()
	if len(before["ra"]) == 0 || len(before["a1"]) == 0 {
		t.Fatalf("the ACTIVE reservation left nothing in ra or a1: %v", before)
	}
	count := len(c.listOf(c.adminTok))

	create := func(tok, flow string, extra ...string) result {
		return c.lp(tok, append([]string{"reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "100M",
			"--duration", "10m", "--path", "a1-ra,dedicated,b1-rb", "--flow", flow}, extra...)...)
	}
	for _, tc := range []struct{ flow, why string }{
		{"tcp 198.18.1.1 >", "no destination"},
		{"tcp 198.18.1.1 198.18.2.1:7070", "no >"},
		{"icmp 198.18.1.1 > 198.18.2.1", "unknown protocol"},
		{"tcp 198.18.1.1 > 198.18.2.1:99999", "port out of range"},
		{"tcp 198.18.1.1:7070-7060 > 198.18.2.1", "backward port range"},
		{"tcp 198.18.1.999 > 198.18.2.1:7070", "bad address"},
		{"tcp 198.18.1.1 > 198.18.2.1:7070,", "empty flow after a comma"},
		{"tcp 198.18.1.2 > 198.18.2.1:7070", "a source that is a2's, not a1's"},
		{"tcp 198.18.1.1 > 198.18.2.2:7070", "a destination that is b2's, not b1's"},
	} {
		res := create(alice, tc.flow)
		checkFailure(t, "flow "+strconv.Quote(tc.flow)+" ("+tc.why+")", res, "flow")
		t.Logf("%-40q %s", tc.flow, lastLine(res.stderr))
	}

	// The controller itself refuses them too, not only the client.
	for _, flow := range []string{"tcp 198.18.1.1 >", "tcp 198.18.1.2 > 198.18.2.1:7070"} {
		code, body := a.post(alice, "/api/v1/reservations", map[string]any{"from": "a1", "to": "b1", "bandwidth_bps": 100e6,
			"duration": "10m", "path": []string{"a1-ra", "dedicated", "b1-rb"}, "flow_spec": flow})
		if code != http.StatusBadRequest || !strings.Contains(strings.ToLower(body), "flow") {
			t.Errorf("POST a reservation with flow spec %q: %d %s, want 400 naming the flow", flow, code, body)
		}
		t.Logf("POST flow_spec %q: %d %s", flow, code, strings.TrimSpace(body))
	}

	// Bob on alice's reservation.
	for _, tc := range []struct {
		what string
		res  result
	}{
		{"bob cancels alice's reservation", c.lp(bob, "reserve", "cancel", r.ID)},
		{"bob modifies alice's reservation", c.lp(bob, "reserve", "modify", r.ID, "--bandwidth", "100M")},
		{"bob books on alice's behalf", create(bob, "tcp 198.18.1.1 > 198.18.2.1:7070", "--owner", "alice")},
	} {
		checkFailure(t, tc.what, tc.res)
		t.Logf("%s: %s", tc.what, lastLine(tc.res.stderr))
	}
	// lightpath ticket, where it exists, on alice's ticket.
	if runLP(t, runOpts{}, "ticket", "--help").code == 0 {
		for _, args := range [][]string{{"ticket", "close", r.ID}, {"ticket", "extend", r.ID, "--by", "10m"}} {
			res := c.lp(bob, args...)
			checkFailure(t, "bob: "+strings.Join(args, " "), res)
			t.Logf("bob: %s: %s", strings.Join(args, " "), lastLine(res.stderr))
		}
	}

	got := a.resv(r.ID)
	if got.State != "ACTIVE" || got.Version != r.Version || got.Owner != "alice" {
		t.Errorf("alice's reservation after the refusals: %+v, was %+v", got, r)
	}
	if n := len(c.listOf(c.adminTok)); n != count {
		t.Errorf("%d reservations after the refusals, %d before", n, count)
	}
	// The agents act on events at once and reconcile every 2 s: let each
	// run a whole round after the refusals before looking.
	a.agentsRound()
	if d := kernelDiff(before, a.kernels()); d != "" {
		t.Errorf("the refusals changed the agents' kernels:\n%s", d)
	}
}
