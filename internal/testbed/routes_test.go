package testbed

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// links lists the link names of a path.
func links(hops []Hop) string {
	var s []string
	for _, h := range hops {
		s = append(s, h.Link)
	}
	return strings.Join(s, " ")
}

func TestPaths(t *testing.T) {
	onlyDedicated := `sites: [{name: a}, {name: b}]
nodes:
  - {name: h1, site: a}
  - {name: r1, site: a, role: router}
  - {name: r2, site: b, role: router}
  - {name: h2, site: b}
links:
  - {name: h1-r1, ends: [h1, r1]}
  - {name: lambda, ends: [r1, r2], role: dedicated, delay: 10ms}
  - {name: r2-h2, ends: [r2, h2]}
`
	// Equal cost both ways round a square: the first link in the file wins.
	square := `sites: [{name: a}]
nodes:
  - {name: n, site: a, role: router}
  - {name: e, site: a, role: router}
  - {name: s, site: a, role: router}
  - {name: w, site: a, role: router}
links:
  - {name: n-e, ends: [n, e]}
  - {name: e-s, ends: [e, s]}
  - {name: n-w, ends: [n, w]}
  - {name: w-s, ends: [w, s]}
`
	for _, tc := range []struct {
		name, file, in string
		from, to       string
		want           string // link names
		widest         string
	}{
		{"two-site routed", "two-site.yaml", "", "a1", "b1", "a1-ra wan b1-rb", "a1-ra dedicated b1-rb"},
		{"two-site back", "two-site.yaml", "", "b2", "a1", "b2-rb wan a1-ra", "b2-rb dedicated a1-ra"},
		{"two-site same site", "two-site.yaml", "", "a1", "a2", "a1-ra a2-ra", "a1-ra a2-ra"},
		{"two-site neighbour", "two-site.yaml", "", "ra", "rb", "wan", "dedicated"},
		{"two-site self", "two-site.yaml", "", "a1", "a1", "", ""},
		// Fewest hops: straight over gva-chi (50 ms), not round by
		// Amsterdam (53 ms, but one hop more either way).
		{"triangle direct", "triangle.yaml", "", "gva1", "chi1", "gva1-gva gva-chi chi1-chi", "gva1-gva gva-ams ams-chi chi1-chi"},
		{"triangle ams", "triangle.yaml", "", "ams1", "gva2", "ams1-ams gva-ams gva2-gva", "ams1-ams gva-ams gva2-gva"},
		{"triangle chi-ams", "triangle.yaml", "", "chi2", "ams1", "chi2-chi ams-chi ams1-ams", "chi2-chi ams-chi ams1-ams"},
		{"only dedicated", "", onlyDedicated, "h1", "h2", "h1-r1 lambda r2-h2", "h1-r1 lambda r2-h2"},
		{"tie by file order", "", square, "n", "s", "n-e e-s", "n-e e-s"},
		{"tie by file order back", "", square, "s", "n", "e-s n-e", "e-s n-e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := parseOrLoad(t, tc.file, tc.in)
			hops, err := topo.Path(tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if got := links(hops); got != tc.want {
				t.Errorf("Path(%s, %s) = %q, want %q", tc.from, tc.to, got, tc.want)
			}
			if len(hops) > 0 && (hops[0].From != tc.from || hops[len(hops)-1].To != tc.to) {
				t.Errorf("Path(%s, %s) runs %+v", tc.from, tc.to, hops)
			}
			for i := 1; i < len(hops); i++ {
				if hops[i].From != hops[i-1].To {
					t.Errorf("Path(%s, %s) is not connected: %+v", tc.from, tc.to, hops)
				}
			}
			hops, err = topo.WidestPath(tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if got := links(hops); got != tc.widest {
				t.Errorf("WidestPath(%s, %s) = %q, want %q", tc.from, tc.to, got, tc.widest)
			}
		})
	}
}

func parseOrLoad(t *testing.T, file, in string) *Topology {
	t.Helper()
	if file != "" {
		return loadExample(t, file)
	}
	topo, err := Parse("t.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestPathErrors(t *testing.T) {
	topo := loadExample(t, "two-site.yaml")
	if _, err := topo.Path("a1", "zz"); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("Path to an unknown node: %v", err)
	}
	if _, err := topo.WidestPath("zz", "a1"); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("WidestPath from an unknown node: %v", err)
	}
	// A hand-built topology may be disconnected; Path says so.
	cut := *topo
	cut.Links = cut.Links[:4] // the LANs only
	if _, err := cut.Path("a1", "b1"); !errors.Is(err, ErrNoPath) {
		t.Errorf("Path across a cut: %v", err)
	}
	if _, err := cut.WidestPath("a1", "b1"); !errors.Is(err, ErrNoPath) {
		t.Errorf("WidestPath across a cut: %v", err)
	}
}

func TestTwoSiteRoutes(t *testing.T) {
	topo := loadExample(t, "two-site.yaml")
	find := func(node, dst string) *Route {
		for i, r := range topo.Routes {
			if r.Node == node && r.Dst == netip.MustParsePrefix(dst) {
				return &topo.Routes[i]
			}
		}
		return nil
	}
	for _, tc := range []struct {
		node, dst           string
		link, dev, via, src string
	}{
		{"a1", "198.18.2.1/32", "a1-ra", "a1-ra", "198.19.0.2", "198.18.1.1"},
		{"a1", "2001:2:0:2::1/128", "a1-ra", "a1-ra", "2001:2:0:8001::2", "2001:2:0:1::1"},
		{"ra", "198.18.2.1/32", "wan", "wan", "198.19.0.18", "198.18.1.3"},
		{"rb", "198.18.1.2/32", "wan", "wan", "198.19.0.17", "198.18.2.3"},
		{"ra", "198.18.2.3/32", "wan", "wan", "198.19.0.18", "198.18.1.3"},
		{"ra", "198.18.1.1/32", "a1-ra", "a1-ra", "198.19.0.1", "198.18.1.3"},
		// Link subnets: the dedicated link's /30 is reached from a1 via ra,
		// and from b1 via rb; wan's /64 likewise.
		{"a1", "198.19.0.20/30", "a1-ra", "a1-ra", "198.19.0.2", "198.18.1.1"},
		{"b1", "2001:2:0:8005::/64", "b1-rb", "b1-rb", "2001:2:0:8003::2", "2001:2:0:2::1"},
		// b1-rb's subnet from site a: across the wan.
		{"ra", "198.19.0.8/30", "wan", "wan", "198.19.0.18", "198.18.1.3"},
	} {
		r := find(tc.node, tc.dst)
		if r == nil {
			t.Errorf("no route in %s to %s", tc.node, tc.dst)
			continue
		}
		if r.Link != tc.link || r.Dev != tc.dev || r.Via.String() != tc.via || r.Src.String() != tc.src {
			t.Errorf("route in %s to %s: %+v; want link %s dev %s via %s src %s", tc.node, tc.dst, *r, tc.link, tc.dev, tc.via, tc.src)
		}
	}
	// A node has no route to a subnet it is on (the kernel's connected
	// route covers it), and no route to itself.
	for _, tc := range []struct{ node, dst string }{
		{"ra", "198.19.0.16/30"},
		{"a1", "198.19.0.0/30"},
		{"a1", "198.18.1.1/32"},
	} {
		if r := find(tc.node, tc.dst); r != nil {
			t.Errorf("unexpected route %+v", *r)
		}
	}
	// Every node: 5 other nodes and the links it is not on, both families.
	want := map[string]int{"a1": 2 * (5 + 5), "ra": 2 * (5 + 2)}
	got := map[string]int{}
	for _, r := range topo.Routes {
		got[r.Node]++
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s has %d routes, want %d", n, got[n], w)
		}
	}
}

// TestRoutesConsistent follows the routes hop by hop, as the kernels will,
// between every pair of nodes and towards every link address, and checks
// that they arrive and agree with Path.
func TestRoutesConsistent(t *testing.T) {
	for _, file := range []string{"two-site.yaml", "triangle.yaml"} {
		topo := loadExample(t, file)
		table := map[string]map[netip.Prefix]Route{}
		for _, r := range topo.Routes {
			if table[r.Node] == nil {
				table[r.Node] = map[netip.Prefix]Route{}
			}
			if _, dup := table[r.Node][r.Dst]; dup {
				t.Errorf("%s: two routes in %s to %s", file, r.Node, r.Dst)
			}
			table[r.Node][r.Dst] = r
		}
		lookup := func(node string, a netip.Addr) (Route, bool) {
			for dst, r := range table[node] {
				if dst.Contains(a) {
					return r, true
				}
			}
			return Route{}, false
		}
		var targets []netip.Addr
		for _, n := range topo.Nodes {
			targets = append(targets, n.IPv4, n.IPv6)
		}
		for _, l := range topo.Links {
			targets = append(targets, l.A.IPv4.Addr(), l.B.IPv4.Addr(), l.A.IPv6.Addr(), l.B.IPv6.Addr())
		}
		for _, from := range topo.Nodes {
			for _, dst := range targets {
				owner, _ := topo.NodeByAddr(dst)
				var hops []Hop
				at := from.Name
				for steps := 0; at != owner.Name; steps++ {
					if on := onLinkTo(topo, at, dst); on != "" {
						hops = append(hops, Hop{Link: on, From: at, To: owner.Name})
						at = owner.Name
						break
					}
					r, ok := lookup(at, dst)
					if !ok || steps > len(topo.Nodes) {
						t.Fatalf("%s: from %s to %s: stuck at %s", file, from.Name, dst, at)
					}
					peer, _ := topo.NodeByAddr(r.Via)
					if (r.Src != from.IPv4 && r.Src != from.IPv6) && at == from.Name {
						t.Errorf("%s: route %+v has a foreign source", file, r)
					}
					hops = append(hops, Hop{Link: r.Link, From: at, To: peer.Name})
					at = peer.Name
				}
				if n, _ := topo.Node(owner.Name); n.IPv4 == dst || n.IPv6 == dst {
					want, err := topo.Path(from.Name, owner.Name)
					if err != nil {
						t.Fatal(err)
					}
					if links(hops) != links(want) {
						t.Errorf("%s: from %s to %s the routes go %q, Path says %q", file, from.Name, dst, links(hops), links(want))
					}
				}
			}
		}
	}
}

// onLinkTo returns the link on which node at has dst as a neighbour's
// address, or "".
func onLinkTo(topo *Topology, at string, dst netip.Addr) string {
	for _, l := range topo.Links {
		if p, ok := l.Peer(at); ok && (p.IPv4.Addr() == dst || p.IPv6.Addr() == dst) {
			return l.Name
		}
	}
	return ""
}

func TestTCPBufferMax(t *testing.T) {
	topo := loadExample(t, "two-site.yaml")
	const mib = 1 << 20
	for _, tc := range []struct {
		node string
		want int64
	}{
		// The dedicated path's BDP counts: 2 Gbit/s × 50 ms = 12.5 MB,
		// twice that is 25 MB, rounded up to 24 MiB.
		{"a1", 24 * mib},
		{"rb", 24 * mib},
		{"nobody", 6 * mib},
	} {
		if got := topo.TCPBufferMax(tc.node); got != tc.want {
			t.Errorf("TCPBufferMax(%s) = %d (%.2f MiB), want %d", tc.node, got, float64(got)/mib, tc.want)
		}
	}
	// Without the dedicated link, the wan's 1 Gbit/s × 50 ms decides:
	// 2 × 6.25 MB rounded up to 12 MiB.
	routedOnly := *topo
	routedOnly.Links = topo.Links[:5]
	if got := routedOnly.TCPBufferMax("a1"); got != 12*mib {
		t.Errorf("TCPBufferMax(a1) without the dedicated link = %d, want %d", got, 12*mib)
	}
	// A LAN-only topology stays at Linux's default.
	lan, err := Parse("t.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if got := lan.TCPBufferMax("r1"); got != 6*mib {
		t.Errorf("TCPBufferMax on a LAN = %d, want 6 MiB", got)
	}
	// Triangle: the widest gva→chi paths run at 2.5 Gbit/s, round by
	// Amsterdam or over the lambda; the routed one wins the tie, with a
	// 106 ms round trip: 2 × 2.5e9/8 × 0.106 = 66.25 MB → 64 MiB.
	tri := loadExample(t, "triangle.yaml")
	if got := tri.TCPBufferMax("gva"); got != 64*mib {
		t.Errorf("TCPBufferMax(gva) = %d (%.2f MiB), want 64 MiB", got, float64(got)/mib)
	}
}
