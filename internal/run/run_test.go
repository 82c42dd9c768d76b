package run

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
)

var topo = apiv1.Topology{Name: "two-site", Nodes: []apiv1.TopoNode{
	{Name: "a1", Addresses: []string{"198.18.1.1", "2001:2:0:1::1", "198.19.0.1", "2001:2:0:8001::1"}},
	{Name: "b1", Addresses: []string{"198.18.2.1", "2001:2:0:2::1"}},
	{Name: "v4", Addresses: []string{"198.18.3.1"}},
	{Name: "v6", Addresses: []string{"2001:2:0:4::1"}},
	{Name: "none"},
}}

func TestPlanRun(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, want, err string
	}{
		{name: "both families", from: "a1", to: "b1",
			want: "any 198.18.1.1 > 198.18.2.1 cgroup lightpath/run-1, any 2001:2:0:1::1 > 2001:2:0:2::1 cgroup lightpath/run-1, " +
				"any 198.19.0.1 > 198.18.2.1 cgroup lightpath/run-1, any 2001:2:0:8001::1 > 2001:2:0:2::1 cgroup lightpath/run-1"},
		{name: "reverse", from: "b1", to: "v4", want: "any 198.18.2.1 > 198.18.3.1 cgroup lightpath/run-1"},
		{name: "no common family", from: "v4", to: "v6", err: "no addresses of one family"},
		{name: "unknown", from: "a1", to: "zz", err: `no node "zz"`},
		{name: "no address", from: "none", to: "a1", err: "node none has no address"},
		{name: "same", from: "a1", to: "a1", err: "both a1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanRun(topo, tc.from, tc.to, "lightpath/run-1")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Flow.String(); got != tc.want || p.From != tc.from || p.To != tc.to {
				t.Errorf("%s > %s: %q, want %q", p.From, p.To, got, tc.want)
			}
			back, err := reserve.ParseFlowSpec(p.Flow.String())
			if err != nil || !back.Equal(p.Flow) {
				t.Errorf("the flow spec does not parse back: %v", err)
			}
		})
	}
}

func TestOwns(t *testing.T) {
	local := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("2001:2:0:2::1")}
	if !Owns(topo, "b1", local) || Owns(topo, "a1", local) || Owns(topo, "zz", local) {
		t.Errorf("Owns: b1 %v, a1 %v, zz %v; want only b1", Owns(topo, "b1", local), Owns(topo, "a1", local), Owns(topo, "zz", local))
	}
}

func TestPullFlows(t *testing.T) {
	far := []netip.Addr{netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("2001:2:0:1::1")}
	conn := func(proto reserve.Protocol, local, remote string) Conn {
		return Conn{Proto: proto, Local: netip.MustParseAddrPort(local), Remote: netip.MustParseAddrPort(remote)}
	}
	spec, _ := reserve.ParseFlowSpec("any 198.18.1.1 > 198.18.2.1 cgroup lightpath/run-1, tcp 198.18.1.1:5201 > 198.18.2.1:40000")
	for _, tc := range []struct {
		name  string
		conns []Conn
		want  string
	}{
		{name: "none"},
		{name: "new tcp", conns: []Conn{conn(reserve.ProtoTCP, "198.18.2.1:40001", "198.18.1.1:5201")},
			want: "tcp 198.18.1.1:5201 > 198.18.2.1:40001"},
		{name: "known", conns: []Conn{conn(reserve.ProtoTCP, "198.18.2.1:40000", "198.18.1.1:5201")}},
		{name: "twice", conns: []Conn{conn(reserve.ProtoUDP, "198.18.2.1:5000", "198.18.1.1:6000"), conn(reserve.ProtoUDP, "198.18.2.1:5000", "198.18.1.1:6000")},
			want: "udp 198.18.1.1:6000 > 198.18.2.1:5000"},
		{name: "not the far node", conns: []Conn{conn(reserve.ProtoTCP, "127.0.0.1:40001", "127.0.0.1:53")}},
		{name: "mapped v4 and v6", conns: []Conn{conn(reserve.ProtoTCP, "[::ffff:198.18.2.1]:2", "[::ffff:198.18.1.1]:1"), conn(reserve.ProtoTCP, "[2001:2:0:2::1]:4", "[2001:2:0:1::1]:3")},
			want: "tcp 198.18.1.1:1 > 198.18.2.1:2, tcp [2001:2:0:1::1]:3 > [2001:2:0:2::1]:4"},
		{name: "unconnected", conns: []Conn{conn(reserve.ProtoUDP, "198.18.2.1:5000", "198.18.1.1:0")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := reserve.FlowSpec{Flows: PullFlows(spec, tc.conns, far)}.String()
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	// Never past MaxFlows.
	var many []Conn
	for p := range 100 {
		many = append(many, Conn{Proto: reserve.ProtoTCP, Local: netip.AddrPortFrom(netip.MustParseAddr("198.18.2.1"), uint16(1000+p)),
			Remote: netip.MustParseAddrPort("198.18.1.1:5201")})
	}
	if n := len(PullFlows(spec, many, far)); n != reserve.MaxFlows-len(spec.Flows) {
		t.Errorf("%d flows added to %d: want up to %d in all", n, len(spec.Flows), reserve.MaxFlows)
	}
}

func TestPullEnds(t *testing.T) {
	ip := netip.MustParseAddr
	for _, tc := range []struct {
		name, from, to string
		local          []netip.Addr
		far, near, err string
	}{
		{name: "v4", from: "a1", to: "b1", local: []netip.Addr{ip("127.0.0.1"), ip("198.18.2.1"), ip("2001:2:0:2::1")}, far: "198.18.1.1", near: "198.18.2.1"},
		{name: "v6 only here", from: "a1", to: "b1", local: []netip.Addr{ip("2001:2:0:2::1")}, far: "2001:2:0:1::1", near: "2001:2:0:2::1"},
		{name: "reverse", from: "b1", to: "a1", local: []netip.Addr{ip("198.19.0.1")}, far: "198.18.2.1", near: "198.19.0.1"},
		{name: "no common family", from: "v6", to: "v4", local: []netip.Addr{ip("198.18.3.1")}, err: "no address of the family"},
		{name: "not this host", from: "a1", to: "b1", local: []netip.Addr{ip("127.0.0.1")}, err: "no address of the family"},
		{name: "same", from: "b1", to: "b1", local: []netip.Addr{ip("198.18.2.1")}, err: "both b1"},
		{name: "unknown", from: "zz", to: "b1", local: []netip.Addr{ip("198.18.2.1")}, err: `no node "zz"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			far, near, err := PullEnds(topo, tc.from, tc.to, tc.local)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || far.String() != tc.far || near.String() != tc.near {
				t.Errorf("far %s, near %s, %v; want %s, %s", far, near, err, tc.far, tc.near)
			}
		})
	}
}

// TestPlaceholder: a pull's placeholder is one udp flow to the port run
// holds, naming no cgroup, that the controller accepts (it parses back and
// runs between the two nodes' addresses), and the first connections learnt
// replace it.
func TestPlaceholder(t *testing.T) {
	for _, tc := range []struct{ far, near, want string }{
		{"198.18.1.1", "198.18.2.1:40123", "udp 198.18.1.1 > 198.18.2.1:40123"},
		{"2001:2:0:1::1", "[2001:2:0:2::1]:9", "udp 2001:2:0:1::1 > [2001:2:0:2::1]:9"},
		{"198.18.1.1", "[::ffff:198.18.2.1]:7", "udp 198.18.1.1 > 198.18.2.1:7"},
	} {
		f := Placeholder(netip.MustParseAddr(tc.far), netip.MustParseAddrPort(tc.near))
		spec := reserve.FlowSpec{Flows: []reserve.Flow{f}}
		if spec.String() != tc.want || f.Cgroup != "" {
			t.Errorf("placeholder %q, want %q", spec, tc.want)
		}
		back, err := reserve.ParseFlowSpec(spec.String())
		if err != nil || !back.Equal(spec) {
			t.Errorf("%q does not parse back: %v", spec, err)
		}
		fa, _ := addrsOf(topo, "a1")
		ba, _ := addrsOf(topo, "b1")
		var src, dst []netip.Prefix
		for _, a := range fa {
			src = append(src, netip.PrefixFrom(a, a.BitLen()))
		}
		for _, a := range ba {
			dst = append(dst, netip.PrefixFrom(a, a.BitLen()))
		}
		if err := spec.Within(src, dst); err != nil {
			t.Errorf("the controller would refuse %q: %v", spec, err)
		}
	}

	ph := Placeholder(netip.MustParseAddr("198.18.1.1"), netip.MustParseAddrPort("198.18.2.1:40123"))
	booked := reserve.FlowSpec{Flows: []reserve.Flow{ph}}
	conns := []Conn{{Proto: reserve.ProtoTCP, Local: netip.MustParseAddrPort("198.18.2.1:50000"), Remote: netip.MustParseAddrPort("198.18.1.1:5201")}}
	spec := Without(booked, []reserve.Flow{ph})
	spec.Flows = append(spec.Flows, PullFlows(spec, conns, []netip.Addr{netip.MustParseAddr("198.18.1.1")})...)
	if got := spec.String(); got != "tcp 198.18.1.1:5201 > 198.18.2.1:50000" {
		t.Errorf("after the first connection: %q", got)
	}
	if got := Without(spec, []reserve.Flow{ph}); !got.Equal(spec) {
		t.Errorf("Without dropped a learnt flow: %q", got)
	}
}
