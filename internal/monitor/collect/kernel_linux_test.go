//go:build linux

package collect

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/roottest"
	"github.com/lightpath/lightpath/internal/topology"
)

// newTestNS creates a named network namespace for the test (removed by
// t.Cleanup) with lo up, and returns its path.
func newTestNS(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("lpcol-%06x", rand.IntN(1<<24))
	if err := netns.Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(name); err != nil {
			t.Error(err)
		}
	})
	path := netns.Path(name)
	h := handle(t, path)
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	return path
}

func handle(t *testing.T, path string) *netlink.Handle {
	t.Helper()
	h, err := netns.Handle(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// veth joins namespaces a and b with a veth pair devA–devB, addressed
// with prefixes pa and pb, both up.
func veth(t *testing.T, a, b, devA, devB string, pa, pb netip.Prefix) {
	t.Helper()
	ha, hb := handle(t, a), handle(t, b)
	nsb, err := vnetns.GetFromPath(b)
	if err != nil {
		t.Fatal(err)
	}
	defer nsb.Close()
	la := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: devA, MTU: 1500}, PeerName: devB, PeerNamespace: netlink.NsFd(nsb)}
	if err := ha.LinkAdd(la); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	for _, x := range []struct {
		h   *netlink.Handle
		dev string
		p   netip.Prefix
	}{{ha, devA, pa}, {hb, devB, pb}} {
		l, err := x.h.LinkByName(x.dev)
		if err != nil {
			t.Fatal(err)
		}
		addr, _ := netlink.ParseAddr(x.p.String())
		if err := x.h.AddrAdd(l, addr); err != nil {
			t.Fatal(err)
		}
		if err := x.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
}

// pair is two namespaces a and b joined by link "wan" (a0 – b0).
type pair struct {
	a, b   string
	pa, pb netip.Prefix
	topo   *topology.Topology
}

func newPair(t *testing.T) *pair {
	t.Helper()
	p := &pair{a: newTestNS(t), b: newTestNS(t), pa: netip.MustParsePrefix("198.19.7.1/30"), pb: netip.MustParsePrefix("198.19.7.2/30")}
	veth(t, p.a, p.b, "a0", "b0", p.pa, p.pb)
	p.topo = &topology.Topology{Links: []topology.Link{{Name: "wan",
		A: topology.End{Node: "a", Dev: "a0", IPv4: p.pa},
		B: topology.End{Node: "b", Dev: "b0", IPv4: p.pb}}}}
	return p
}

// waitCarrier waits until the veth pair's ends are both operationally
// up: before, the kernel holds or drops what is sent on them.
func (p *pair) waitCarrier(t *testing.T) {
	t.Helper()
	for _, x := range []struct{ ns, dev string }{{p.a, "a0"}, {p.b, "b0"}} {
		h := handle(t, x.ns)
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
			l, err := h.LinkByName(x.dev)
			if err != nil {
				t.Fatal(err)
			}
			if l.Attrs().OperState == netlink.OperUp {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: operstate %v, not up", x.dev, l.Attrs().OperState)
			}
		}
	}
}

// collectUntil collects from c until ok holds of what it reports (what
// was sent is counted once the kernel has dealt with it) or a minute has
// passed, and returns the last round's points.
func collectUntil(t *testing.T, c Collector, ok func(map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := collectOne(t, c)
		if ok(got) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sendUDP sends n datagrams of size bytes from namespace ns to to.
func sendUDP(t *testing.T, ns string, to netip.AddrPort, n, size int) {
	t.Helper()
	// Unconnected, so the peer's port unreachable does not fail the
	// next write.
	var c net.PacketConn
	if err := netns.Do(ns, func() (err error) { c, err = net.ListenPacket("udp", ":0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, size)
	for range n {
		if _, err := c.WriteTo(buf, net.UDPAddrFromAddrPort(to)); err != nil {
			t.Fatal(err)
		}
	}
}

func collectOne(t *testing.T, c Collector) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[string]float64{}
	err := c.Collect(ctx, func(p monitor.Point) {
		if err := monitor.CheckSeries(p.Name, p.Labels); err != nil {
			t.Error(err)
		}
		k := monitor.Key(p.Name, p.Labels)
		if _, dup := got[k]; dup {
			t.Errorf("%s twice", k)
		}
		got[k] = p.V
	})
	if err != nil {
		t.Fatalf("%s: %v", c.Name(), err)
	}
	return got
}

func TestInterfacesRoot(t *testing.T) {
	roottest.Require(t, "creates network namespaces, veth pairs and htb classes")
	p := newPair(t)
	p.waitCarrier(t)
	sendUDP(t, p.a, netip.AddrPortFrom(p.pb.Addr(), 9), 20, 1000)
	ls := `{device="a0",link="wan"}`
	got := collectUntil(t, &interfacesCollector{Env{Node: "a", NetNS: p.a, Topo: p.topo}}, func(got map[string]float64) bool {
		return got["lightpath_interface_transmit_packets_total"+ls] >= 20
	})
	if got["lightpath_interface_transmit_packets_total"+ls] < 20 || got["lightpath_interface_transmit_bytes_total"+ls] < 20000 {
		t.Errorf("transmit counters: %v", got)
	}
	if got["lightpath_interface_up"+ls] != 1 || got["lightpath_interface_carrier"+ls] != 1 || got["lightpath_interface_mtu_bytes"+ls] != 1500 {
		t.Errorf("state: %v", got)
	}
	for k := range got {
		if strings.Contains(k, `device="lo"`) {
			t.Errorf("lo reported: %s", k)
		}
	}
}

func TestHTBRoot(t *testing.T) {
	roottest.Require(t, "creates network namespaces, veth pairs and htb classes")
	p := newPair(t)
	h := handle(t, p.a)
	l, err := h.LinkByName("a0")
	if err != nil {
		t.Fatal(err)
	}
	idx := l.Attrs().Index
	q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
	q.Defcls = 0x105 // unfiltered traffic goes to the reservation's class
	if err := h.QdiscAdd(q); err != nil {
		t.Fatalf("htb qdisc: %v", err)
	}
	for _, c := range []struct {
		parent, handle uint32
		rate, ceil     uint64 // bits/s
	}{
		{netlink.MakeHandle(1, 0), netlink.MakeHandle(1, 1), 100e6, 100e6},
		{netlink.MakeHandle(1, 1), netlink.MakeHandle(1, 0x105), 10e6, 100e6},
	} {
		cl := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: c.parent, Handle: c.handle},
			netlink.HtbClassAttrs{Rate: c.rate, Ceil: c.ceil, Buffer: 1600, Cbuffer: 1600})
		if err := h.ClassAdd(cl); err != nil {
			t.Fatalf("htb class %x: %v", c.handle, err)
		}
	}
	p.waitCarrier(t)
	sendUDP(t, p.a, netip.AddrPortFrom(p.pb.Addr(), 9), 30, 1000)
	res := `{class="1:105",device="a0",dscp="5",kind="reservation",link="wan"}`
	link := `{class="1:1",device="a0",kind="link",link="wan"}`
	// 30 kB at 10 Mbit/s drain in 24 ms; the counters follow.
	got := collectUntil(t, &htbCollector{Env{Node: "a", NetNS: p.a, Topo: p.topo}}, func(got map[string]float64) bool {
		return got["lightpath_htb_sent_packets_total"+res] >= 30 && got["lightpath_htb_sent_packets_total"+link] >= 30
	})
	if got["lightpath_htb_sent_packets_total"+res] < 30 || got["lightpath_htb_sent_bytes_total"+res] < 30000 {
		t.Errorf("class 1:105 counters: %v", got)
	}
	if got["lightpath_htb_rate_bytes_per_second"+res] != 10e6/8 || got["lightpath_htb_ceil_bytes_per_second"+res] != 100e6/8 {
		t.Errorf("class 1:105 rates: rate %v ceil %v", got["lightpath_htb_rate_bytes_per_second"+res], got["lightpath_htb_ceil_bytes_per_second"+res])
	}
	if got["lightpath_htb_rate_bytes_per_second"+link] != 100e6/8 || got["lightpath_htb_sent_packets_total"+link] < 30 {
		t.Errorf("class 1:1: %v", got)
	}
}

func TestTCPRoot(t *testing.T) {
	roottest.Require(t, "creates network namespaces, veth pairs and htb classes")
	p := newPair(t)
	srv := netip.AddrPortFrom(p.pb.Addr(), 7070)
	var l net.Listener
	if err := netns.Do(p.b, func() (err error) { l, err = net.Listen("tcp", srv.String()); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c)
	}()
	var c net.Conn
	if err := netns.Do(p.a, func() (err error) { c, err = net.Dial("tcp", srv.String()); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64<<10)
	for range 64 {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	flows := []FlowMatch{{Reservation: "r1", DSCP: 5, Spec: "tcp 198.19.7.1 > 198.19.7.2:7070", Ports: []int{7070}}}
	// No flows: nothing, and no error.
	if got := collectOne(t, &tcpCollector{Env{Node: "a", NetNS: p.a}}); len(got) != 0 {
		t.Errorf("no flows, yet %v", got)
	}
	ls := monitor.L("dscp", "5", "flow", c.LocalAddr().String()+">"+srv.String(), "side", "client").String()
	// The writes returned once the bytes were queued: wait for them to be
	// acknowledged.
	got := collectUntil(t, &tcpCollector{Env{Node: "a", NetNS: p.a, Flows: func() []FlowMatch { return flows }}}, func(got map[string]float64) bool {
		return got["lightpath_tcp_acked_bytes_total"+ls] >= 64*64<<10
	})
	if got["lightpath_tcp_rtt_seconds"+ls] <= 0 || got["lightpath_tcp_cwnd_segments"+ls] <= 0 || got["lightpath_tcp_acked_bytes_total"+ls] < 64*64<<10 {
		t.Errorf("client socket: %v", got)
	}
	if len(got) != 8 {
		t.Errorf("%d series in a's namespace, want the client socket's 8: %v", len(got), got)
	}
	gotB := collectOne(t, &tcpCollector{Env{Node: "b", NetNS: p.b, Flows: func() []FlowMatch { return flows }}})
	lsB := monitor.L("dscp", "5", "flow", c.LocalAddr().String()+">"+srv.String(), "side", "server").String()
	if gotB["lightpath_tcp_received_bytes_total"+lsB] < 64*64<<10 {
		t.Errorf("server socket: %v", gotB)
	}
}

func TestProbeRoot(t *testing.T) {
	roottest.Require(t, "creates network namespaces, veth pairs and htb classes")
	p := newPair(t)
	p.waitCarrier(t)
	ra := NewRegistry(Env{Node: "a", NetNS: p.a, Topo: p.topo})
	rb := NewRegistry(Env{Node: "b", NetNS: p.b, Topo: p.topo})
	t.Cleanup(func() { ra.Close(); rb.Close() })
	probeOf := func(r *Registry) Collector {
		for _, e := range r.entries {
			if e.c.Name() == "probe" {
				return e.c
			}
		}
		t.Fatal("no probe collector")
		return nil
	}
	pa, pb := probeOf(ra), probeOf(rb)
	// Every answer is expected: a late one is not loss.
	pa.(*probeCollector).wait, pb.(*probeCollector).wait = time.Minute, time.Minute
	// The first round of each only starts its responder and probes
	// nothing (a neighbour started at the same time may not answer yet).
	if got := collectOne(t, pb); len(got) != 0 {
		t.Errorf("b's first round: %v, want nothing", got)
	}
	collectOne(t, pa)
	got := collectOne(t, pa)
	ls := `{link="wan",peer="b"}`
	if got["lightpath_probe_loss_ratio"+ls] != 0 || got["lightpath_probe_rtt_seconds"+ls] <= 0 {
		t.Fatalf("a → b: %v", got)
	}
	got = collectOne(t, pb)
	if got[`lightpath_probe_loss_ratio{link="wan",peer="a"}`] != 0 {
		t.Errorf("b → a once a answers: %v", got)
	}

	// Throughput from a to b's sink.
	var bps float64
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := netns.Do(p.a, func() (err error) {
		bps, err = Throughput(ctx, p.pb.Addr().String(), 300*time.Millisecond)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if bps <= 0 {
		t.Errorf("throughput %v", bps)
	}
	t.Logf("veth throughput %.3g bit/s", bps)

	// b's end down: a's probes go unanswered.
	hb := handle(t, p.b)
	lb, err := hb.LinkByName("b0")
	if err != nil {
		t.Fatal(err)
	}
	if err := hb.LinkSetDown(lb); err != nil {
		t.Fatal(err)
	}
	pa.(*probeCollector).wait = 0 // nothing can answer: the round's usual wait
	got = collectOne(t, pa)
	if got["lightpath_probe_loss_ratio"+ls] != 1 {
		t.Errorf("peer down: %v", got)
	}
	if _, ok := got["lightpath_probe_rtt_seconds"+ls]; ok {
		t.Errorf("peer down, yet an rtt: %v", got)
	}
	// The whole registry still reports in a's namespace.
	g := ra.Collect(context.Background(), time.Now())
	checkGroup(t, ra, g)
}
