//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/roottest"
)

// The testbed's tests build real namespaces, TUN devices and htb trees, so
// they need root; each uses a testbed name of its own and removes it.

func skipUnlessNetRoot(t *testing.T) {
	t.Helper()
	roottest.Require(t, "builds network namespaces, TUN devices and htb trees")
	if _, err := exec.LookPath("ping"); err != nil {
		t.Fatal("ping is needed (Debian package iputils-ping; make test installs it)")
	}
}

// repoFile is a path in the repository (tests run in test/e2e); an
// absolute path is itself.
func repoFile(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join("..", "..", p)
}

type testbedStatus struct {
	Testbed  string `json:"testbed"`
	Emulator struct {
		Running bool `json:"running"`
	} `json:"emulator"`
	Nodes []struct {
		Name, Site, Role, Namespace, IPv4, IPv6 string
	} `json:"nodes"`
	Links []struct {
		Name string `json:"name"`
		Role string `json:"role"`
		MTU  int    `json:"mtu"`
		Ends []struct {
			Node, Device, IPv4, IPv6 string
		} `json:"ends"`
		Directions []struct {
			From       string  `json:"from"`
			To         string  `json:"to"`
			Device     string  `json:"device"`
			RateBPS    uint64  `json:"rate_bps"`
			DelayNS    int64   `json:"delay_ns"`
			Loss       float64 `json:"loss"`
			Down       bool    `json:"down"`
			Packets    uint64  `json:"packets"`
			Bytes      uint64  `json:"bytes"`
			DropsLoss  uint64  `json:"drops_loss"`
			DropsDown  uint64  `json:"drops_down"`
			DropsQueue uint64  `json:"drops_queue"`
		} `json:"directions"`
	} `json:"links"`
}

type tb struct {
	t    *testing.T
	name string
}

// upTestbed brings a topology up under a fresh name and takes it down when
// the test ends, checking that nothing is left behind. file is a path in the
// repository, or an absolute path (a topology the test wrote).
func upTestbed(t *testing.T, file string) *tb {
	t.Helper()
	if !filepath.IsAbs(file) {
		file = repoFile(file)
	}
	b := &tb{t: t, name: fmt.Sprintf("e2e%04x", rand.IntN(1<<16))}
	r := runLP(t, runOpts{timeout: 60 * time.Second}, "testbed", "up", file, "--name", b.name)
	t.Cleanup(func() { b.down() })
	mustSucceed(t, "testbed up "+file, r)
	return b
}

func (b *tb) down() {
	t := b.t
	t.Helper()
	r := runLP(t, runOpts{timeout: 60 * time.Second}, "testbed", "down", "--name", b.name)
	mustSucceed(t, "testbed down", r)
	b.checkGone()
}

// checkGone asserts that no namespace, state directory or emulator of the
// testbed is left.
func (b *tb) checkGone() {
	t := b.t
	t.Helper()
	if m, _ := filepath.Glob("/run/netns/lp-" + b.name + "-*"); len(m) > 0 {
		t.Errorf("namespaces left after down: %v", m)
	}
	if _, err := os.Stat("/run/lightpath/" + b.name); err == nil {
		t.Errorf("state directory /run/lightpath/%s left after down", b.name)
	}
	out, _ := exec.Command("pgrep", "-f", "testbed emulator --name "+b.name+"$").Output()
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("emulator still running after down: pids %s", out)
	}
}

func (b *tb) status() testbedStatus {
	t := b.t
	t.Helper()
	r := runLP(t, runOpts{}, "testbed", "status", "--name", b.name, "--json")
	mustSucceed(t, "testbed status", r)
	var s testbedStatus
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	return s
}

// exec runs a command in a node and returns the result.
func (b *tb) exec(node string, args ...string) result {
	b.t.Helper()
	return runLP(b.t, runOpts{timeout: 60 * time.Second},
		append([]string{"testbed", "exec", "--name", b.name, node, "--"}, args...)...)
}

func (b *tb) linkSet(args ...string) {
	b.t.Helper()
	r := runLP(b.t, runOpts{}, append([]string{"testbed", "link", "set", "--name", b.name}, args...)...)
	mustSucceed(b.t, "testbed link set "+strings.Join(args, " "), r)
}

// ping sends count pings from node to addr and says whether all came back.
func (b *tb) ping(node, addr string, extra ...string) (bool, string) {
	args := append([]string{"ping", "-n", "-q", "-c", "1", "-W", "2"}, extra...)
	r := b.exec(node, append(args, addr)...)
	return r.code == 0, r.stdout + r.stderr
}

// rttRE takes ping's minimum RTT: a loaded host (other tests, benchmarks)
// can only add to a packet's time, so the minimum is what the emulator was
// told to do.
var rttRE = regexp.MustCompile(`= ([\d.]+)/[\d.]+/`)

// pingRTT returns the least RTT in milliseconds of count pings.
func (b *tb) pingRTT(node, addr string, count int) float64 {
	b.t.Helper()
	r := b.exec(node, "ping", "-n", "-q", "-c", strconv.Itoa(count), "-i", "0.05", "-W", "2", addr)
	m := rttRE.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		b.t.Fatalf("ping %s from %s: exit %d\n%s%s", addr, node, r.code, r.stdout, r.stderr)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func (s testbedStatus) node(name string) (ipv4, ipv6 string) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n.IPv4, n.IPv6
		}
	}
	return "", ""
}

// endAddr is the IPv4 address of a link's end at node.
func (s testbedStatus) endAddr(link, node string) string {
	for _, l := range s.Links {
		if l.Name == link {
			for _, e := range l.Ends {
				if e.Node == node {
					return strings.Split(e.IPv4, "/")[0]
				}
			}
		}
	}
	return ""
}

// packets sums what a link delivered in both directions.
func (s testbedStatus) packets(link string) uint64 {
	var n uint64
	for _, l := range s.Links {
		if l.Name == link {
			for _, d := range l.Directions {
				n += d.Packets
			}
		}
	}
	return n
}

// checkAllPairs pings every node from every other over IPv4 and IPv6.
func checkAllPairs(t *testing.T, b *tb, s testbedStatus) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var mu sync.Mutex
	var failed []string
	for _, from := range s.Nodes {
		for _, to := range s.Nodes {
			if from.Name == to.Name {
				continue
			}
			for _, addr := range []string{to.IPv4, to.IPv6} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem <- struct{}{}
					defer func() { <-sem }()
					ok, out := b.ping(from.Name, addr)
					if !ok {
						// One lost echo is not a broken route: ask again.
						ok, out = b.ping(from.Name, addr)
					}
					if !ok {
						mu.Lock()
						failed = append(failed, fmt.Sprintf("%s -> %s (%s): %s", from.Name, to.Name, addr, lastLine(out)))
						mu.Unlock()
					}
				}()
			}
		}
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of %d pings failed:\n%s", len(failed), len(s.Nodes)*(len(s.Nodes)-1)*2, strings.Join(failed, "\n"))
	}
}

func TestTestbedTwoSite(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	b := upTestbed(t, "examples/two-site.yaml")
	s := b.status()
	if !s.Emulator.Running {
		t.Fatalf("emulator not running: %+v", s)
	}
	if len(s.Nodes) != 6 || len(s.Links) != 6 {
		t.Fatalf("two-site: %d nodes and %d links, want 6 and 6", len(s.Nodes), len(s.Links))
	}
	for _, l := range s.Links {
		if len(l.Directions) != 2 || l.Directions[0].Device == "" || l.Directions[1].Device == "" {
			t.Errorf("link %s: directions %+v, want two with their egress devices", l.Name, l.Directions)
		}
		for _, d := range l.Directions {
			if d.RateBPS == 0 {
				t.Errorf("link %s %s>%s: no htb rate reported", l.Name, d.From, d.To)
			}
		}
	}
	for _, n := range s.Nodes {
		if n.Namespace != "lp-"+b.name+"-"+n.Name {
			t.Errorf("node %s in namespace %q", n.Name, n.Namespace)
		}
		if !strings.HasPrefix(n.IPv4, "198.18.") || !strings.HasPrefix(n.IPv6, "2001:2:") {
			t.Errorf("node %s addresses %s %s outside the benchmark ranges", n.Name, n.IPv4, n.IPv6)
		}
	}
	t.Run("all pairs", func(t *testing.T) { checkAllPairs(t, b, s) })

	t.Run("jumbo frames", func(t *testing.T) {
		// 8972 bytes of ICMP payload make a 9000-byte packet, which must
		// not be fragmented: it passes the 9000-byte dedicated path and is
		// refused by the 1500-byte routed one.
		if ok, out := b.ping("ra", s.endAddr("dedicated", "rb"), "-M", "do", "-s", "8972"); !ok {
			t.Errorf("9000-byte DF ping over the dedicated path failed:\n%s", out)
		}
		if ok, out := b.ping("ra", s.endAddr("wan", "rb"), "-M", "do", "-s", "8972"); ok {
			t.Errorf("9000-byte DF ping over the 1500-byte routed path passed:\n%s", out)
		}
	})

	t.Run("untagged traffic takes the routed path", func(t *testing.T) {
		before := b.status()
		b1, _ := before.node("b1")
		b.pingRTT("a1", b1, 20)
		// The emulator counts a packet once its write returns, which may
		// be just after ping has its reply: wait until the 40 packets of
		// the pings are counted on one link or the other.
		var wan, ded uint64
		waitFor(time.Minute, func() bool {
			after := b.status()
			wan = after.packets("wan") - before.packets("wan")
			ded = after.packets("dedicated") - before.packets("dedicated")
			return wan+ded >= 40
		})
		if wan < 38 || ded > 2 {
			t.Errorf("20 pings a1->b1: %d packets on wan, %d on dedicated; want them all on wan", wan, ded)
		}
	})

	t.Run("link set", func(t *testing.T) {
		// A loaded host only adds to a packet's time: the least RTT of
		// a few pings is at least what the emulator was told, and one
		// below the old delay's round trip shows the new delay at work.
		b1, _ := s.node("b1")
		if rtt := b.pingRTT("a1", b1, 5); rtt < 49 {
			t.Errorf("a1->b1 RTT %.1f ms over a 25 ms one-way path: want at least 50", rtt)
		}
		b.linkSet("wan", "--delay", "5ms")
		for _, l := range b.status().Links {
			for _, d := range l.Directions {
				if l.Name == "wan" && d.DelayNS != int64(5*time.Millisecond) {
					t.Errorf("wan %s→%s: delay %v after setting 5 ms", d.From, d.To, time.Duration(d.DelayNS))
				}
			}
		}
		// Load can hold a ping up for any time, so the new delay shows
		// in the first round of pings whose least RTT is below the old
		// delay's (a round is a few pings; a minute bounds a hang); none
		// may come back faster than the new delay allows.
		var rtt float64
		waitFor(time.Minute, func() bool {
			if rtt = b.pingRTT("a1", b1, 5); rtt < 9.8 {
				t.Errorf("a1->b1 least RTT %.1f ms after setting 5 ms one way: want at least 10", rtt)
			}
			return rtt < 49
		})
		if rtt >= 49 {
			t.Errorf("a1->b1 least RTT still %.1f ms a minute after setting 5 ms one way (it was 25 ms)", rtt)
		}
		// A reservation's class, as an agent will add it: a new rate must
		// leave it alone.
		ns := "lp-" + b.name + "-ra"
		if out, err := exec.Command("tc", "-n", ns, "class", "add", "dev", "wan", "parent", "1:1",
			"classid", "1:100", "htb", "rate", "100mbit", "ceil", "1gbit").CombinedOutput(); err != nil {
			t.Fatalf("tc class add: %v: %s", err, out)
		}
		b.linkSet("wan", "--delay", "25ms", "--rate", "500M")
		out, _ := exec.Command("tc", "-n", ns, "class", "show", "dev", "wan", "classid", "1:100").CombinedOutput()
		if !strings.Contains(string(out), "rate 100Mbit") {
			t.Errorf("class 1:100 after link set --rate: %q", out)
		}
		for _, l := range b.status().Links {
			if l.Name == "wan" {
				for _, d := range l.Directions {
					if d.RateBPS != 500e6 || d.DelayNS != int64(25*time.Millisecond) {
						t.Errorf("wan %s>%s: rate %d delay %d after link set", d.From, d.To, d.RateBPS, d.DelayNS)
					}
				}
			}
		}
		b.linkSet("wan", "--down")
		if ok, _ := b.ping("a1", b1); ok {
			t.Error("ping crossed the routed path while it was down")
		}
		st := b.status()
		for _, l := range st.Links {
			// With the carrier off the kernel drops before the emulator
			// sees a packet, so only the state is checked here.
			if l.Name == "wan" && !l.Directions[0].Down {
				t.Errorf("wan after --down: %+v", l.Directions[0])
			}
		}
		b.linkSet("wan", "--up")
		if ok, out := b.ping("a1", b1); !ok {
			t.Errorf("ping after --up failed: %s", out)
		}
	})

	t.Run("errors", func(t *testing.T) {
		r := runLP(t, runOpts{}, "testbed", "link", "set", "--name", b.name, "nosuch", "--delay", "1ms")
		checkFailure(t, "link set on an unknown link", r, "no link", "nosuch", "wan")
		r = runLP(t, runOpts{}, "testbed", "exec", "--name", b.name, "nosuch", "--", "true")
		checkFailure(t, "exec on an unknown node", r, "no node", "nosuch")
		r = runLP(t, runOpts{}, "testbed", "up", repoFile("examples/two-site.yaml"), "--name", b.name)
		checkFailure(t, "up twice", r, "exists")
	})
}

func TestTestbedTriangle(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	b := upTestbed(t, "examples/triangle.yaml")
	// A second testbed at the same time, with the same addresses in
	// namespaces of its own: each works, neither sees the other.
	other := upTestbed(t, "examples/two-site.yaml")
	checkAllPairs(t, b, b.status())
	s := other.status()
	b1, _ := s.node("b1")
	if ok, out := other.ping("a1", b1); !ok {
		t.Errorf("two-site beside triangle: a1 cannot reach b1: %s", out)
	}
	r := runLP(t, runOpts{}, "testbed", "status")
	checkFailure(t, "status with two testbeds up and no --name", r, "several testbeds", b.name, other.name)
}

func TestTestbedMalformed(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	dir := scratchDir(t)
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, `sites:
  - name: a
nodes:
  - {name: h1, site: a}
  - {name: h2, site: a}
links:
  - name: l1
    ends: [h1, h3]
`, 0o644)
	name := fmt.Sprintf("e2e%04x", rand.IntN(1<<16))
	r := runLP(t, runOpts{}, "testbed", "up", bad, "--name", name)
	checkFailure(t, "up of a malformed file", r, "bad.yaml:8:", "h3")
	b := &tb{t: t, name: name}
	b.checkGone()
}

func TestTestbedDownAfterCrashedUp(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	// What an up that died half-way leaves: the state directory with the
	// topology, and some of the namespaces.
	name := fmt.Sprintf("e2e%04x", rand.IntN(1<<16))
	dir := "/run/lightpath/" + name
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(repoFile("examples/two-site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "topology.yaml"), string(data), 0o644)
	writeFile(t, filepath.Join(dir, "state.json"), `{"name":"`+name+`","phase":"building"}`, 0o644)
	for _, n := range []string{"a1", "ra"} {
		if out, err := exec.Command("ip", "netns", "add", "lp-"+name+"-"+n).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add: %v: %s", err, out)
		}
	}
	b := &tb{t: t, name: name}
	r := runLP(t, runOpts{}, "testbed", "down", "--name", name, "--json")
	mustSucceed(t, "down after a crashed up", r)
	if !strings.Contains(r.stdout, `"namespaces":2`) {
		t.Errorf("down after a crashed up: %s", r.stdout)
	}
	b.checkGone()
	r = runLP(t, runOpts{}, "testbed", "down", "--name", name)
	mustSucceed(t, "down twice", r)
	if !strings.Contains(r.stdout, "nothing to remove") {
		t.Errorf("second down: %q", r.stdout)
	}
}

// serveIn starts a mover server inside a node of a testbed.
func (b *tb) serveIn(node, addr, root string, args ...string) *proc {
	b.t.Helper()
	p := startLP(b.t, runOpts{timeout: 5 * time.Minute}, append([]string{"testbed", "exec", "--name", b.name, node, "--",
		lpBin, "serve", "--listen", addr, "--root", root}, args...)...)
	if !waitFor(10*time.Second, func() bool {
		r := b.exec(node, "sh", "-c", "ss -Hltn 'sport = :"+strings.Split(addr, ":")[1]+"' | grep -q LISTEN")
		return r.code == 0
	}) {
		b.t.Fatalf("server in %s did not start listening on %s", node, addr)
	}
	return p
}

func TestMoverOverLossyWAN(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	b := upTestbed(t, "examples/two-site.yaml")
	s := b.status()
	b.linkSet("wan", "--loss", "0.1%") // 50 ms RTT, 0.1% loss each way
	srcDir, dstDir := scratchDir(t), scratchDir(t)
	src := filepath.Join(srcDir, "data.bin")
	writeRandom(t, src, 48<<20, 11)
	b1, _ := s.node("b1")
	b.serveIn("b1", b1+":7070", dstDir)
	r := b.exec("a1", lpBin, "cp", "--json", src, "lp://"+b1+":7070/data.bin")
	mustSucceed(t, "cp over a lossy 50 ms path", r)
	sum := parseSummary(t, r.stdout)
	if !sum.Verified {
		t.Errorf("summary not verified: %+v", sum)
	}
	sameFile(t, src, filepath.Join(dstDir, "data.bin"))
	var lost uint64
	for _, l := range b.status().Links {
		if l.Name == "wan" {
			for _, d := range l.Directions {
				lost += d.DropsLoss
			}
		}
	}
	if lost == 0 {
		t.Error("the loss model dropped nothing on wan during the copy")
	}
	t.Logf("48 MiB over 50 ms RTT with 0.1%% loss: %.0f Mbit/s, %d packets lost on wan", sum.ThroughputBps/1e6, lost)
}

func TestMoverLinkDownAndUp(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	b := upTestbed(t, "examples/two-site.yaml")
	s := b.status()
	srcDir, dstDir := scratchDir(t), scratchDir(t)
	src := filepath.Join(srcDir, "data.bin")
	writeRandom(t, src, 160<<20, 12)
	b1, _ := s.node("b1")
	srv := b.serveIn("b1", b1+":7070", dstDir, "--stall-timeout", "3s")
	cp := startLP(t, runOpts{timeout: 3 * time.Minute}, "testbed", "exec", "--name", b.name, "a1", "--",
		lpBin, "cp", "--json", "--retries", "10", "--stall-timeout", "3s", src, "lp://"+b1+":7070/data.bin")
	// Cut the path once the copy is under way, until both ends have
	// given up on their connections (the stall timeouts), so that the
	// client must reconnect.
	if !waitFor(time.Minute, func() bool {
		m, _ := filepath.Glob(filepath.Join(dstDir, ".data.bin.lightpath-part"))
		if len(m) == 0 {
			return false
		}
		fi, err := os.Stat(m[0])
		return err == nil && fi.Size() > 0 && cp.Exited() == false
	}) {
		t.Fatalf("the copy did not start: %s", cp.err.String())
	}
	b.linkSet("wan", "--down")
	if !waitFor(time.Minute, func() bool {
		if !strings.Contains(cp.out.String(), `"type":"retry"`) { // cp --json's "attempt failed"
			return false
		}
		for _, l := range strings.Split(srv.out.String(), "\n") {
			if strings.Contains(l, `"kind":"session"`) && strings.Contains(l, `"status":"failed"`) {
				return true
			}
		}
		return false
	}) {
		b.linkSet("wan", "--up")
		t.Fatalf("with wan down, the client and the server did not both give up the session:\nclient:\n%s%s\nserver:\n%s%s",
			cp.out.String(), cp.err.String(), srv.out.String(), srv.err.String())
	}
	b.linkSet("wan", "--up")
	r := cp.Wait()
	mustSucceed(t, "cp across a link cut", r)
	sum := parseSummary(t, r.stdout)
	if !sum.Verified {
		t.Errorf("summary not verified: %+v", sum)
	}
	if sum.Attempts < 2 {
		t.Errorf("the copy finished in %d attempt(s); the cut should have forced a reconnection", sum.Attempts)
	}
	sameFile(t, src, filepath.Join(dstDir, "data.bin"))
}
