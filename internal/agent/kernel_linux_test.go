//go:build linux

package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/roottest"
	"github.com/lightpath/lightpath/internal/testbed"
	"github.com/lightpath/lightpath/internal/topology"
)

// TestMain lets this test binary be the testbed's emulator daemon, which
// testbed.Up starts as `<its own binary> testbed emulator --name N`.
func TestMain(m *testing.M) {
	if spec := os.Getenv("LP_AGENT_TEST_UDP"); spec != "" {
		// A child that sends UDP datagrams from a namespace: "NS ADDR N".
		os.Exit(sendUDP(spec))
	}
	if len(os.Args) == 5 && os.Args[1] == "testbed" && os.Args[2] == "emulator" && os.Args[3] == "--name" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := testbed.RunEmulator(ctx, os.Args[4], slog.New(slog.NewTextHandler(os.Stderr, nil)))
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// kbed is a testbed brought up for one test, with every node's namespace
// open.
type kbed struct {
	name string
	topo *topology.Topology
	fd   map[string]int
}

func upTestbed(t *testing.T, file string) *kbed {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b := &kbed{name: fmt.Sprintf("ag%04x", rand.IntN(1<<16)), fd: map[string]int{}}
	if b.topo, err = topology.Parse(filepath.Base(file), data); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if _, err := testbed.Down(b.name, nil); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})
	if _, err := testbed.Up(ctx, testbed.UpOptions{Name: b.name, File: file, Data: data}); err != nil {
		t.Fatalf("testbed up: %v", err)
	}
	for _, n := range b.topo.Nodes {
		f, err := os.Open(testbed.NamespacePath(b.name, n.Name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		b.fd[n.Name] = int(f.Fd())
	}
	return b
}

func (b *kbed) ns(node string) string { return testbed.NamespacePath(b.name, node) }

func (b *kbed) devs(node string) []string {
	var out []string
	for _, l := range b.topo.Links {
		for _, e := range []topology.End{l.A, l.B} {
			if e.Node == node {
				out = append(out, e.Dev)
			}
		}
	}
	return out
}

// reconcile makes every node hold its part of rs, as an agent would, and
// checks that a second round finds nothing to do.
func (b *kbed) reconcile(t *testing.T, rs []reserve.Reservation, now time.Time) map[string]Plan {
	t.Helper()
	want := map[string]Plan{}
	for _, n := range b.topo.Nodes {
		p, err := Desired(b.topo, n.Name, rs, now)
		if err != nil {
			t.Fatalf("%s: desired: %v", n.Name, err)
		}
		p, cgErrs := WithCgroups(p)
		for dscp, err := range cgErrs {
			t.Fatalf("%s: DSCP %d: %v", n.Name, dscp, err)
		}
		want[n.Name] = p
		have := b.fetch(t, n.Name)
		if err := Apply(b.fd[n.Name], Diff(have, p)); err != nil {
			t.Fatalf("%s: apply: %v", n.Name, err)
		}
		if c := Diff(b.fetch(t, n.Name), p); !c.Empty() {
			t.Fatalf("%s: after apply still to do: %s\nadd %+v\nremove %+v\nhave %+v", n.Name, c, c.Add, c.Remove, b.fetch(t, n.Name))
		}
	}
	return want
}

func (b *kbed) fetch(t *testing.T, node string) Plan {
	t.Helper()
	p, err := Fetch(b.fd[node], b.devs(node))
	if err != nil {
		t.Fatalf("%s: fetch: %v", node, err)
	}
	return p
}

// bytes is what the emulator delivered over link in the direction leaving
// from.
func (b *kbed) bytes(t *testing.T, link, from string) uint64 {
	t.Helper()
	st, err := testbed.Status(b.name)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range st.Links {
		for _, d := range l.Directions {
			if l.Name == link && d.From == from {
				return d.Bytes
			}
		}
	}
	t.Fatalf("no link %s from %s", link, from)
	return 0
}

type counters map[string]uint64

func (b *kbed) counters(t *testing.T) counters {
	return counters{
		"dedicated ra>rb": b.bytes(t, "dedicated", "ra"), "dedicated rb>ra": b.bytes(t, "dedicated", "rb"),
		"wan ra>rb": b.bytes(t, "wan", "ra"), "wan rb>ra": b.bytes(t, "wan", "rb"),
	}
}

func (c counters) since(before counters) counters {
	d := counters{}
	for k, v := range c {
		d[k] = v - before[k]
	}
	return d
}

// listen accepts connections in node's namespace on addr and reads each to
// the end, reporting the MSS the kernel uses on it.
func listen(t *testing.T, nsPath, network, addr string) (mss <-chan int) {
	t.Helper()
	var ln net.Listener
	if err := netns.Do(nsPath, func() (err error) { ln, err = net.Listen(network, addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan int, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ch <- tcpMSS(c)
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	return ch
}

func tcpMSS(c net.Conn) int {
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return -1
	}
	mss := -1
	raw.Control(func(fd uintptr) { mss, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG) })
	return mss
}

// send connects from node's namespace to addr, writes n bytes and waits
// for the peer to have read them all; it returns the MSS of both ends.
func send(t *testing.T, nsPath, network, addr string, n int, peerMSS <-chan int) (int, int) {
	t.Helper()
	var c net.Conn
	if err := netns.Do(nsPath, func() (err error) {
		c, err = net.DialTimeout(network, addr, 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatalf("write to %s: %v", addr, err)
	}
	c.(*net.TCPConn).CloseWrite()
	if _, err := c.Read(make([]byte, 1)); err != io.EOF { // the peer closes once it has read all
		t.Fatalf("from %s: want EOF, got %v", addr, err)
	}
	return tcpMSS(c), <-peerMSS
}

func TestKernelApply(t *testing.T) {
	roottest.Require(t, "builds a testbed of network namespaces and changes their kernels")
	b := upTestbed(t, "../../examples/two-site.yaml")
	a1, b1 := b.topo.Nodes[0], b.topo.Nodes[3]
	if a1.Name != "a1" || b1.Name != "b1" || a1.IPv4.String() != "198.18.1.1" || b1.IPv4.String() != "198.18.2.1" {
		t.Fatalf("two-site.yaml changed: nodes %+v, %+v", a1, b1)
	}
	fs, err := reserve.ParseFlowSpec("tcp 198.18.1.1 > 198.18.2.1:7070, tcp [2001:2:0:1::1] > [2001:2:0:2::1]:7070")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	r := reserve.Reservation{ID: "r1", From: "a1", To: "b1", Bandwidth: 500_000_000, DSCP: 10, FlowSpec: fs,
		State: reserve.StateActive, Start: now.Add(-time.Minute), End: now.Add(time.Hour),
		Path: []reserve.PathHop{{Link: "a1-ra", From: "a1", To: "ra"}, {Link: "dedicated", From: "ra", To: "rb"}, {Link: "b1-rb", From: "rb", To: "b1"}}}

	// The hosts' routes to the other site carry the routed path's MTU
	// (wan: 1500), as the testbed gives them: a connection steered off
	// the reserved path falls back to it with no ICMP.
	for node, addrs := range map[string][]string{"a1": {"198.18.2.1", "2001:2:0:2::1"}, "b1": {"198.18.1.1", "2001:2:0:1::1"}} {
		for _, a := range addrs {
			if got := b.routeMTU(t, node, a); got != 1500 {
				t.Fatalf("%s: the testbed's route to %s has MTU %d, want the routed path's 1500", node, a, got)
			}
		}
	}

	mss4 := listen(t, b.ns("b1"), "tcp4", "198.18.2.1:7070")
	mss6 := listen(t, b.ns("b1"), "tcp6", "[2001:2:0:2::1]:7070")
	other := listen(t, b.ns("b1"), "tcp4", "198.18.2.1:7071")
	const size = 4 << 20

	// crosses sends size bytes and says which way they went.
	crosses := func(t *testing.T, network, addr string, peer <-chan int) (counters, int, int) {
		t.Helper()
		before := b.counters(t)
		m1, m2 := send(t, b.ns("a1"), network, addr, size, peer)
		d := b.counters(t).since(before)
		t.Logf("%s to %s: MSS %d at a1, %d at b1; bytes delivered %v", network, addr, m1, m2, d)
		return d, m1, m2
	}
	onDedicated := func(t *testing.T, what string, d counters) {
		t.Helper()
		if d["dedicated ra>rb"] < size || d["dedicated rb>ra"] == 0 || d["wan ra>rb"] > size/100 || d["wan rb>ra"] > size/100 {
			t.Errorf("%s: want it on the dedicated link both ways and not on wan, got %v", what, d)
		}
	}
	onWan := func(t *testing.T, what string, d counters) {
		t.Helper()
		if d["wan ra>rb"] < size || d["wan rb>ra"] == 0 || d["dedicated ra>rb"] > size/100 || d["dedicated rb>ra"] > size/100 {
			t.Errorf("%s: want it on wan both ways and not on the dedicated link, got %v", what, d)
		}
	}

	want := b.reconcile(t, []reserve.Reservation{r}, now)
	for _, c := range b.fetch(t, "ra").Classes {
		if c.Minor == topology.ProbeMinor {
			if c.Prio != 0 || c.Rate != ProbeRate {
				t.Errorf("ra: the probes' class %+v reads back at htb priority %d, rate %d, want 0 and %d", c, c.Prio, c.Rate, ProbeRate)
			}
		} else if c.Prio != ClassPrio {
			t.Errorf("ra: class %+v reads back at htb priority %d, want %d", c, c.Prio, ClassPrio)
		}
	}
	t.Run("applying again changes nothing", func(t *testing.T) {
		for _, n := range []string{"a1", "ra", "rb", "b1"} {
			if err := Apply(b.fd[n], Diff(Plan{}, want[n])); err != nil {
				t.Errorf("%s: applying the whole plan again: %v", n, err)
			}
			if c := Diff(b.fetch(t, n), want[n]); !c.Empty() {
				t.Errorf("%s: after applying the whole plan twice: %s", n, c)
			}
		}
	})

	t.Run("steered", func(t *testing.T) {
		classBefore := classBytes(t, b.fd["ra"], "dedicated", topology.ClassBase+10)
		d, m1, m2 := crosses(t, "tcp4", "198.18.2.1:7070", mss4)
		onDedicated(t, "IPv4 flow", d)
		// Jumbo both ways: a1's SYN from its route in table 110 (MTU
		// 9000), b1's SYN-ACK from its own (less 12 bytes of timestamps).
		if m1 < 9000-40-12 || m2 < 9000-40-12 {
			t.Errorf("IPv4 MSS at a1 %d, at b1 %d: want both jumbo (the reserved path's 9000 MTU)", m1, m2)
		}
		if got := classBytes(t, b.fd["ra"], "dedicated", topology.ClassBase+10) - classBefore; got < size {
			t.Errorf("IPv4: ra's class 1:10a on dedicated sent %d bytes, want at least %d", got, size)
		}
		classBefore = classBytes(t, b.fd["ra"], "dedicated", topology.ClassBase+10)
		d, m1, m2 = crosses(t, "tcp6", "[2001:2:0:2::1]:7070", mss6)
		onDedicated(t, "IPv6 flow", d)
		if m1 < 9000-60-12 || m2 < 9000-60-12 {
			t.Errorf("IPv6 MSS at a1 %d, at b1 %d: want both jumbo (the reserved path's 9000 MTU)", m1, m2)
		}
		if got := classBytes(t, b.fd["ra"], "dedicated", topology.ClassBase+10) - classBefore; got < size {
			t.Errorf("IPv6: ra's class 1:10a on dedicated sent %d bytes, want at least %d", got, size)
		}
		d, m1, m2 = crosses(t, "tcp4", "198.18.2.1:7071", other)
		onWan(t, "a flow outside the spec", d)
		if m1 > 1460 || m2 > 1460 {
			t.Errorf("a flow outside the spec: MSS at a1 %d, at b1 %d: want the routed path's (at most 1460)", m1, m2)
		}
		if _, err := exec.LookPath("ping"); err == nil {
			before := b.counters(t)
			out, err := exec.Command("ip", "netns", "exec", testbed.NamespaceName(b.name, "a1"),
				"ping", "-n", "-q", "-c", "3", "-i", "0.2", "-W", "2", "198.18.2.1").CombinedOutput()
			if err != nil {
				t.Fatalf("ping: %v\n%s", err, out)
			}
			if d := b.counters(t).since(before); d["wan ra>rb"] < 3*84 || d["dedicated ra>rb"] != 0 {
				t.Errorf("untagged ping: want it on wan, got %v", d)
			}
		} else {
			t.Log("ping is not installed (iputils-ping): the untagged TCP flow above stands for it")
		}
	})

	// One connection, open across the reservation's end and its return:
	// the sender's MSS (ss -ti) follows the route the socket looks up,
	// with no ICMP from the path (its routers send none) and no path-MTU
	// exception learned.
	t.Run("the MSS follows the route", func(t *testing.T) {
		for _, tc := range []struct {
			network, addr, far string
			peer               <-chan int
			jumbo, routed      int // the MSS of a 9000 and a 1500 MTU, less timestamps
		}{
			{"tcp4", "198.18.2.1:7070", "198.18.2.1", mss4, 9000 - 40 - 12, 1500 - 40 - 12},
			{"tcp6", "[2001:2:0:2::1]:7070", "2001:2:0:2::1", mss6, 9000 - 60 - 12, 1500 - 60 - 12},
		} {
			icmpBefore := b.icmpSent(t, "ra") + b.icmpSent(t, "rb")
			var c net.Conn
			if err := netns.Do(b.ns("a1"), func() (err error) {
				c, err = net.DialTimeout(tc.network, tc.addr, 5*time.Second)
				return err
			}); err != nil {
				t.Fatalf("dial %s: %v", tc.addr, err)
			}
			c.SetDeadline(time.Now().Add(time.Minute))
			write := func(what string) (int, int) {
				t.Helper()
				before := b.counters(t)
				if _, err := c.Write(make([]byte, size)); err != nil {
					t.Fatalf("%s: write: %v", what, err)
				}
				// What was written has been acknowledged (ss's unacked) before
				// the counters are read.
				mss, pmtu := b.ssMSS(t, "a1", tc.far, true)
				t.Logf("%s %s: ss -ti at a1: mss %d pmtu %d; bytes %v", tc.network, what, mss, pmtu, b.counters(t).since(before))
				return mss, pmtu
			}
			if mss, pmtu := write("steered"); mss != tc.jumbo || pmtu != 9000 {
				t.Errorf("%s steered: mss %d, pmtu %d; want %d and 9000", tc.network, mss, pmtu, tc.jumbo)
			}
			if peer := <-tc.peer; peer != tc.jumbo {
				t.Errorf("%s steered: b1's MSS %d, want %d (its SYN-ACK's from its own route)", tc.network, peer, tc.jumbo)
			}
			b.reconcile(t, nil, now) // the reservation ends
			if mss, pmtu := write("after the end"); mss != tc.routed || pmtu != 1500 {
				t.Errorf("%s after the end: mss %d, pmtu %d; want %d and 1500", tc.network, mss, pmtu, tc.routed)
			}
			b.reconcile(t, []reserve.Reservation{r}, now) // and comes back
			if mss, pmtu := write("steered again"); mss != tc.jumbo || pmtu != 9000 {
				t.Errorf("%s steered again: mss %d, pmtu %d; want %d and 9000", tc.network, mss, pmtu, tc.jumbo)
			}
			c.(*net.TCPConn).CloseWrite()
			if _, err := c.Read(make([]byte, 1)); err != io.EOF {
				t.Errorf("%s: want EOF, got %v", tc.network, err)
			}
			c.Close()
			if got := b.icmpSent(t, "ra") + b.icmpSent(t, "rb"); got != icmpBefore {
				t.Errorf("%s: the routers sent %d ICMP destination-unreachable or packet-too-big messages: the path told the sender its MTU", tc.network, got-icmpBefore)
			}
			// The segments a1 had built for the old route when it changed
			// are too large for the new one: a1's own kernel refuses them
			// and tells the socket (an ICMP to itself, no packet leaves),
			// which leaves an exception of the new route's MTU on it, and
			// never a smaller one.
			if out := b.exec(t, "a1", "ip", "route", "get", tc.far); strings.Contains(out, " mtu ") {
				if m := regexp.MustCompile(` mtu (\d+)`).FindStringSubmatch(out); m == nil || m[1] != "1500" {
					t.Errorf("%s: a1 learned a path MTU smaller than the routed path's: %s", tc.network, out)
				} else {
					t.Logf("%s: a1's route to b1: %s", tc.network, strings.Join(strings.Fields(out), " "))
				}
			}
		}
	})

	t.Run("drift is mended", func(t *testing.T) {
		h := handle(t, b.fd["ra"])
		if err := h.RuleDel(nlRule(want["ra"].Rules[0])); err != nil {
			t.Fatal(err)
		}
		link, _ := h.LinkByName("dedicated")
		if err := h.FilterDel(&netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: topology.HTBRoot,
			Priority: topology.FilterPrio4 + 10, Protocol: unix.ETH_P_IP}}); err != nil {
			t.Fatal(err)
		}
		nc := nft(t, b.fd["a1"])
		have := b.fetch(t, "a1")
		if err := nc.DelRule(&nftables.Rule{Table: nftTable, Chain: nftChains[have.Nft[0].Chain], Handle: have.Nft[0].Handle}); err != nil {
			t.Fatal(err)
		}
		// A rule slipped into the agent's chain by hand is not the agent's,
		// even with the comment of one of its rules.
		nc.AddRule(&nftables.Rule{Table: nftTable, Chain: nftChains[ChainMark], Exprs: []expr.Any{&expr.Counter{}},
			UserData: userdata.AppendString(nil, userdata.TypeComment, have.Nft[len(have.Nft)-1].tag())})
		// An older agent's MSS clamp: its chain and a rule with its comment.
		clamp := nc.AddChain(&nftables.Chain{Name: "clamp", Table: nftTable, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityRef(-130)})
		nc.AddRule(&nftables.Rule{Table: nftTable, Chain: clamp, Exprs: []expr.Any{&expr.Counter{}},
			UserData: userdata.AppendString(nil, userdata.TypeComment, `lightpath {"c":"clamp","f":"tcp 198.18.1.1 > 198.18.2.1:7070","syn":true,"mss":1460}`)})
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for node, n := range map[string]int{"ra": 2, "a1": 3} {
			c := Diff(b.fetch(t, node), want[node])
			if got := len(c.Add.Rules) + len(c.Add.Filters) + len(c.Add.Nft) + len(c.Remove.Nft); got != n {
				t.Errorf("%s: want %d changes to mend, got %s", node, n, c)
			}
		}
		b.reconcile(t, []reserve.Reservation{r}, now)
		if ch, err := nft(t, b.fd["a1"]).ListChain(nftTable, "clamp"); err == nil {
			t.Errorf("a1: the old clamp chain is left: %+v", ch)
		}
		d, _, _ := crosses(t, "tcp4", "198.18.2.1:7070", mss4)
		onDedicated(t, "after mending", d)
	})

	// Objects of others: a table, a class, a filter, a rule and a route
	// outside the agent's ranges.
	foreign := func(t *testing.T, node string) {
		t.Helper()
		h := handle(t, b.fd[node])
		link, _ := h.LinkByName("dedicated")
		cls := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: link.Attrs().Index, Parent: topology.HTBLink, Handle: netlink.MakeHandle(1, 3)},
			netlink.HtbClassAttrs{Rate: 1e6, Ceil: 1e9, Buffer: 1 << 17, Cbuffer: 1 << 17})
		if err := h.ClassAdd(cls); err != nil {
			t.Fatal(err)
		}
		f := &netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: topology.HTBRoot, Priority: 5, Protocol: unix.ETH_P_IP},
			ClassId: netlink.MakeHandle(1, 3), Sel: &netlink.TcU32Sel{Flags: netlink.TC_U32_TERMINAL, Keys: []netlink.TcU32Key{{Val: 0x00200000, Mask: 0x00fc0000}}}}
		if err := h.FilterAdd(f); err != nil {
			t.Fatal(err)
		}
		rule := netlink.NewRule()
		rule.Priority, rule.Mark, rule.Table = 500, 0x7, 50
		if err := h.RuleAdd(rule); err != nil {
			t.Fatal(err)
		}
		_, dst, _ := net.ParseCIDR("198.18.9.0/24")
		if err := h.RouteAdd(&netlink.Route{Table: 50, Dst: dst, LinkIndex: link.Attrs().Index}); err != nil {
			t.Fatal(err)
		}
		nc := nft(t, b.fd[node])
		ft := nc.AddTable(&nftables.Table{Name: "foreign", Family: nftables.TableFamilyINet})
		ch := nc.AddChain(&nftables.Chain{Name: "out", Table: ft, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter})
		nc.AddRule(&nftables.Rule{Table: ft, Chain: ch, Exprs: []expr.Any{&expr.Counter{}}})
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	foreignThere := func(t *testing.T, node string) {
		t.Helper()
		h := handle(t, b.fd[node])
		link, _ := h.LinkByName("dedicated")
		cs, _ := h.ClassList(link, 0)
		found := 0
		for _, c := range cs {
			if c.Attrs().Handle == netlink.MakeHandle(1, 3) {
				found++
			}
		}
		fs, _ := h.FilterList(link, topology.HTBRoot)
		for _, f := range fs {
			if f.Attrs().Priority == 5 {
				found++
			}
		}
		rules, _ := h.RuleList(netlink.FAMILY_V4)
		for _, r := range rules {
			if r.Priority == 500 && r.Table == 50 {
				found++
			}
		}
		routes, _ := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 50}, netlink.RT_FILTER_TABLE)
		found += len(routes)
		if tb, err := nft(t, b.fd[node]).ListTableOfFamily("foreign", nftables.TableFamilyINet); err == nil && tb != nil {
			found++
		}
		if found != 5 {
			t.Errorf("%s: %d of the 5 foreign objects are left", node, found)
		}
	}
	if p, err := Fetch(b.fd["a2"], []string{"no-such-dev"}); err != nil || !reflect.DeepEqual(p, Plan{}) {
		t.Errorf("fetch on a missing device: %+v, %v; want nothing and no error", p, err)
	}
	foreign(t, "ra")
	b.reconcile(t, []reserve.Reservation{r}, now)
	foreignThere(t, "ra")

	t.Run("removed", func(t *testing.T) {
		for _, rs := range [][]reserve.Reservation{nil, {withState(r, reserve.StateHeld)}, {withState(r, reserve.StateFinished)}} {
			b.reconcile(t, rs, now)
			for _, n := range b.topo.Nodes {
				if p := b.fetch(t, n.Name); !reflect.DeepEqual(p, Plan{}) {
					t.Errorf("%s: the agent's objects left after the reservation ended: %+v", n.Name, p)
				}
			}
		}
		d, m1, m2 := crosses(t, "tcp4", "198.18.2.1:7070", mss4)
		onWan(t, "after the reservation", d)
		if m1 > 1460 || m2 > 1460 {
			t.Errorf("after the reservation: MSS at a1 %d, at b1 %d: want the routed path's (at most 1460)", m1, m2)
		}
		foreignThere(t, "ra")
	})
}

func withState(r reserve.Reservation, s reserve.State) reserve.Reservation {
	r.State = s
	return r
}

func handle(t *testing.T, fd int) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(vnetns.NsHandle(fd))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func nft(t *testing.T, fd int) *nftables.Conn {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(fd))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// classBytes is what an htb class has sent.
func classBytes(t *testing.T, fd int, dev string, minor uint16) uint64 {
	t.Helper()
	h := handle(t, fd)
	link, err := h.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := h.ClassList(link, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Attrs().Handle == netlink.MakeHandle(1, minor) && c.Attrs().Statistics != nil && c.Attrs().Statistics.Basic != nil {
			return c.Attrs().Statistics.Basic.Bytes
		}
	}
	t.Fatalf("no class 1:%x on %s", minor, dev)
	return 0
}

// routeMTU is the MTU of node's route (main table) to addr.
func (b *kbed) routeMTU(t *testing.T, node, addr string) int {
	t.Helper()
	a := netip.MustParseAddr(addr)
	fam := netlink.FAMILY_V4
	if a.Is6() {
		fam = netlink.FAMILY_V6
	}
	dst := &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
	rs, err := handle(t, b.fd[node]).RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_MAIN, Dst: dst}, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_DST)
	if err != nil || len(rs) != 1 {
		t.Fatalf("%s: route to %s: %v, %v", node, addr, rs, err)
	}
	return rs[0].MTU
}

func (b *kbed) exec(t *testing.T, node string, argv ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", testbed.NamespaceName(b.name, node)}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %s: %v\n%s", node, strings.Join(argv, " "), err, out)
	}
	return string(out)
}

var ssMSSRe, ssPMTURe, ssUnackedRe = regexp.MustCompile(`(?:^|\s)mss:(\d+)`), regexp.MustCompile(`(?:^|\s)pmtu:(\d+)`), regexp.MustCompile(`(?:^|\s)unacked:(\d+)`)

// ssMSS is what `ss -ti` says of node's one established connection to
// far: its MSS and path MTU. With settled, it waits until all that was
// sent is acknowledged.
func (b *kbed) ssMSS(t *testing.T, node, far string, settled bool) (mss, pmtu int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		dst := far
		if strings.Contains(far, ":") {
			dst = "[" + far + "]"
		}
		out := b.exec(t, node, "ss", "-Htin", "state", "established", "dst", dst)
		m, p, u := ssMSSRe.FindStringSubmatch(out), ssPMTURe.FindStringSubmatch(out), ssUnackedRe.FindStringSubmatch(out)
		if m == nil || p == nil {
			t.Fatalf("%s: ss -ti shows no connection to %s with an MSS:\n%s", node, far, out)
		}
		// Recv-Q Send-Q LOCAL PEER: nothing left to send, nothing unacknowledged.
		if f := strings.Fields(out); !settled || len(f) > 1 && f[1] == "0" && u == nil || time.Now().After(deadline) {
			mss, _ = strconv.Atoi(m[1])
			pmtu, _ = strconv.Atoi(p[1])
			return mss, pmtu
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// icmpSent counts the ICMP messages node sent that tell a sender its
// path's MTU: IPv4 destination unreachable, IPv6 packet too big.
func (b *kbed) icmpSent(t *testing.T, node string) int {
	t.Helper()
	var n int
	if err := netns.Do(b.ns(node), func() error {
		// /proc/thread-self: this thread is the one in the namespace.
		snmp, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		var head []string
		for _, l := range strings.Split(string(snmp), "\n") {
			f := strings.Fields(l)
			if len(f) == 0 || f[0] != "Icmp:" {
				continue
			}
			if head == nil {
				head = f
				continue
			}
			for i, k := range head {
				if k == "OutDestUnreachs" && i < len(f) {
					v, _ := strconv.Atoi(f[i])
					n += v
				}
			}
		}
		snmp6, err := os.ReadFile("/proc/thread-self/net/snmp6")
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(snmp6), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "Icmp6OutPktTooBigs" {
				v, _ := strconv.Atoi(f[1])
				n += v
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: ICMP counters: %v", node, err)
	}
	return n
}

// sendUDP is the child LP_AGENT_TEST_UDP starts: it sends n datagrams of
// 1000 bytes to addr from namespace ns, each from a socket of its own.
func sendUDP(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 3 {
		fmt.Fprintln(os.Stderr, "LP_AGENT_TEST_UDP: want NS ADDR N")
		return 2
	}
	n, _ := strconv.Atoi(f[2])
	err := netns.Do(f[0], func() error {
		for range n {
			c, err := net.Dial("udp", f[1])
			if err != nil {
				return err
			}
			_, err = c.Write(make([]byte, 1000))
			c.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
