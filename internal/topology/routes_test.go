package topology

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
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
// The topologies include routes given in the file.
func TestRoutesConsistent(t *testing.T) {
	detoured, err := Parse("detour.yaml", []byte(detour+"routes:\n  - {node: r1, to: r2, via: r1-r3}\n  - {node: r2, to: r3, via: r1-r2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, topo := range []*Topology{
		loadExample(t, "two-site.yaml"),
		loadExample(t, "triangle.yaml"),
		parseWithRoutes(t, "two-site.yaml", dedicatedBetweenSites...),
		parseWithRoutes(t, "two-site.yaml", append(slices.Clone(dedicatedBetweenSites), "{node: ra, to: b2, via: wan}", "{node: b1, to: a2, via: b1-rb}")...),
		// Chicago's traffic to Geneva round by Amsterdam, and Geneva's to
		// chi2 over the lambda.
		parseWithRoutes(t, "triangle.yaml", "{node: chi, to: geneva, via: ams-chi}", "{node: gva, to: chi2, via: gva-chi-lambda}"),
		detoured,
	} {
		file := topo.File
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
						break
					}
					r, ok := lookup(at, dst)
					if !ok || steps > len(topo.Nodes) {
						t.Fatalf("%s: from %s to %s: stuck at %s", file, from.Name, dst, at)
					}
					if n, _ := topo.Node(at); at != from.Name && n.Role != RoleRouter {
						t.Errorf("%s: from %s to %s: host %s forwards", file, from.Name, dst, at)
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

// withRoutes returns examples/name with a routes list of entries appended
// (each one line), and the line of the first entry.
func withRoutes(t *testing.T, name string, entries ...string) (string, int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	in := string(data)
	if !strings.HasSuffix(in, "\n") {
		in += "\n"
	}
	first := strings.Count(in, "\n") + 2
	in += "routes:\n"
	for _, e := range entries {
		in += "  - " + e + "\n"
	}
	return in, first
}

// parseWithRoutes parses examples/name with routes appended.
func parseWithRoutes(t *testing.T, name string, entries ...string) *Topology {
	t.Helper()
	in, _ := withRoutes(t, name, entries...)
	topo, err := Parse(name, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// dedicatedBetweenSites steers all traffic between the two sites of
// examples/two-site.yaml onto the dedicated link.
var dedicatedBetweenSites = []string{
	"{node: ra, to: site-b, via: dedicated}",
	"{node: rb, to: site-a, via: dedicated}",
}

func TestGivenRouteErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []string
		line    int // of the problem, counting entries from 0; −1: valid
		phrase  string
	}{
		{"node route", []string{"{node: a1, to: b2, via: a1-ra}"}, -1, ""},
		{"site route", dedicatedBetweenSites[:1], -1, ""},
		{"node route beats site route", []string{"{node: ra, to: site-b, via: dedicated}", "{node: ra, to: b2, via: wan}"}, -1, ""},
		{"same as computed", []string{"{node: ra, to: b1, via: wan}"}, -1, ""},
		{"own site", []string{"{node: ra, to: site-a, via: a1-ra}"}, 0, `from node "a1" to node "a2" the routes loop: a1 -> ra -> a1`},
		{"missing via", []string{"{node: ra, to: b1}"}, 0, `route #1: missing key "via"`},
		{"unknown key", []string{"{node: ra, to: b1, via: wan, dev: wan}"}, 0, `route #1: unknown key "dev" (allowed: node, to, via)`},
		{"to a list", []string{"{node: ra, to: [b1, b2], via: wan}"}, 0, "route #1: to: want a single value, not a list"},
		{"unknown node", []string{"{node: rz, to: b1, via: wan}"}, 0, `route #1: unknown node "rz" (did you mean "ra"?)`},
		{"unknown destination", []string{"{node: ra, to: site-c, via: wan}"}, 0, `route #1: unknown node or site "site-c" (did you mean "site-a"?)`},
		{"unknown link", []string{"{node: ra, to: b1, via: wam}"}, 0, `route #1: unknown link "wam" (did you mean "wan"?)`},
		{"link not at node", []string{"{node: a1, to: b1, via: wan}"}, 0, `route #1: link "wan" does not touch node "a1" (it joins "ra" and "rb"; "a1"'s links: a1-ra)`},
		{"to itself", []string{"{node: a1, to: a1, via: a1-ra}"}, 0, `route #1: a route from node "a1" to itself`},
		{"duplicate", []string{"{node: ra, to: site-b, via: wan}", "{node: a1, to: b1, via: a1-ra}", "{node: ra, to: site-b, via: wan}"}, 2,
			`route #3: duplicate route at node "ra" to "site-b" (first at line +0)`},
		{"conflict", []string{"{node: ra, to: b1, via: wan}", "{node: ra, to: b1, via: dedicated}"}, 1,
			`route #2: node "ra" already has a route to "b1", via "wan" at line +0: give one`},
		// From a1, a2 and ra to b1, b2, rb and the subnets of b1-rb and
		// b2-rb: 15 pairs, reported once.
		{"loop", []string{"{node: ra, to: site-b, via: a1-ra}"}, 0,
			`from node "a1" to node "b1" the routes loop: a1 -> ra -> a1 (the route at line +0; so do 14 more pairs of source and destination)`},
		// a1's route is the computed one: it causes nothing, and is not
		// named. The two others send b1's traffic to and fro.
		{"loop of two routes", []string{"{node: a1, to: b1, via: a1-ra}", "{node: ra, to: b1, via: dedicated}", "{node: rb, to: b1, via: dedicated}"}, 1,
			`from node "a1" to node "b1" the routes loop: a1 -> ra -> rb -> ra (the routes at lines +1, +2; so do 4 more pairs of source and destination)`},
		{"through a host", []string{"{node: ra, to: b1, via: a2-ra}"}, 0,
			`from node "a1" to node "b1" the routes pass through host "a2", which does not forward: a1 -> ra -> a2 (the route at line +0; so do 2 more pairs of source and destination)`},
		{"only node of its site", []string{"{node: a1, to: b1, via: a1-ra}"}, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, first := withRoutes(t, "two-site.yaml", tc.entries...)
			_, err := Parse("t.yaml", []byte(in))
			if tc.line < 0 {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error with %q, got none", tc.phrase)
			}
			// "+N" in a phrase is the line of entry N.
			phrase := tc.phrase
			for i := range tc.entries {
				phrase = strings.ReplaceAll(phrase, fmt.Sprintf("+%d", i), fmt.Sprint(first+i))
			}
			line := fmt.Sprintf("t.yaml:%d: ", first+tc.line)
			if msg := err.Error(); !strings.Contains(msg, line+phrase) {
				t.Errorf("error %q\nwant %s%s", msg, line, phrase)
			} else if strings.Contains(msg, "\n") {
				t.Errorf("more than one problem reported: %q", msg)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Errorf("error %T is not an *Error", err)
			}
		})
	}
}

func TestGivenRouteAmbiguous(t *testing.T) {
	in := `sites: [{name: a}, {name: b}]
nodes:
  - {name: r1, site: a, role: router}
  - {name: b, site: b, role: router}
links:
  - {name: l1, ends: [r1, b]}
routes:
  - {node: r1, to: b, via: l1}
`
	_, err := Parse("t.yaml", []byte(in))
	if err == nil || !strings.Contains(err.Error(), `t.yaml:8: route #1: to: "b" is both a node and a site`) {
		t.Errorf("a name both a node and a site: %v", err)
	}
	in = strings.Replace(in, "name: b, site: b", "name: r2, site: b", 1)
	in = strings.Replace(in, "[r1, b]", "[r1, r2]", 1)
	in = strings.Replace(in, "{node: r1, to: b", "{node: r2, to: b", 1)
	_, err = Parse("t.yaml", []byte(in))
	if err == nil || !strings.Contains(err.Error(), `t.yaml:8: route #1: node "r2" is the only node of site "b"`) {
		t.Errorf("a route to the node's own one-node site: %v", err)
	}
}

// TestGivenRoutesTwoSite steers the traffic between the sites of the
// two-site example onto the dedicated link at the two routers only.
func TestGivenRoutesTwoSite(t *testing.T) {
	plain := loadExample(t, "two-site.yaml")
	topo := parseWithRoutes(t, "two-site.yaml", dedicatedBetweenSites...)
	for _, tc := range []struct{ from, to, want string }{
		{"a1", "b1", "a1-ra dedicated b1-rb"},
		{"b2", "a2", "b2-rb dedicated a2-ra"},
		{"ra", "rb", "dedicated"},
		{"a1", "rb", "a1-ra dedicated"},
		{"a1", "a2", "a1-ra a2-ra"}, // within the site: as computed
	} {
		hops, err := topo.Path(tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if got := links(hops); got != tc.want {
			t.Errorf("Path(%s, %s) = %q, want %q", tc.from, tc.to, got, tc.want)
		}
		// WidestPath does not depend on routes.
		got, _ := topo.WidestPath(tc.from, tc.to)
		want, _ := plain.WidestPath(tc.from, tc.to)
		if links(got) != links(want) {
			t.Errorf("WidestPath(%s, %s) = %q, want %q as without routes", tc.from, tc.to, links(got), links(want))
		}
	}
	// Only the routers' routes change: the hosts' are those computed,
	// but for their MTUs, which follow the path the routers now take.
	byNode := func(topo *Topology, node string) []Route {
		var rs []Route
		for _, r := range topo.Routes {
			if r.Node == node {
				r.MTU = 0
				rs = append(rs, r)
			}
		}
		return rs
	}
	for _, n := range []string{"a1", "a2", "b1", "b2"} {
		if got, want := byNode(topo, n), byNode(plain, n); !slices.Equal(got, want) {
			t.Errorf("%s's routes changed:\n got %+v\nwant %+v", n, got, want)
		}
	}
	for _, tc := range []struct {
		topo      *Topology
		node, dst string
		mtu       int
	}{
		{plain, "a1", "198.18.2.1/32", 1500}, // over wan
		{topo, "a1", "198.18.2.1/32", 9000},  // over dedicated
		{topo, "b2", "2001:2:0:1::2/128", 9000},
		{topo, "a1", "198.18.1.2/32", 9000},
		{topo, "a1", "198.19.0.16/30", 1500}, // wan's subnet, whatever the way there
	} {
		for _, r := range tc.topo.Routes {
			if r.Node == tc.node && r.Dst == netip.MustParsePrefix(tc.dst) && r.MTU != tc.mtu {
				t.Errorf("route in %s to %s: MTU %d, want %d", tc.node, tc.dst, r.MTU, tc.mtu)
			}
		}
	}
	if len(topo.Routes) != len(plain.Routes) {
		t.Errorf("%d routes, want %d as without given routes", len(topo.Routes), len(plain.Routes))
	}
	// ra: site-b's nodes and the subnets of the links inside site-b go by
	// the dedicated link (rb's end is 198.19.0.22, 2001:2:0:8006::2); the
	// rest is as computed.
	for _, tc := range []struct{ node, dst, link, via string }{
		{"ra", "198.18.2.1/32", "dedicated", "198.19.0.22"},
		{"ra", "2001:2:0:2::2/128", "dedicated", "2001:2:0:8006::2"},
		{"ra", "198.18.2.3/32", "dedicated", "198.19.0.22"},
		{"ra", "198.19.0.8/30", "dedicated", "198.19.0.22"}, // b1-rb
		{"ra", "2001:2:0:8004::/64", "dedicated", "2001:2:0:8006::2"},
		{"ra", "198.18.1.1/32", "a1-ra", "198.19.0.1"},
		{"rb", "198.18.1.3/32", "dedicated", "198.19.0.21"},
		{"rb", "198.19.0.4/30", "dedicated", "198.19.0.21"}, // a2-ra
		{"a1", "198.19.0.8/30", "a1-ra", "198.19.0.2"},
	} {
		var r *Route
		for i := range topo.Routes {
			if topo.Routes[i].Node == tc.node && topo.Routes[i].Dst == netip.MustParsePrefix(tc.dst) {
				r = &topo.Routes[i]
			}
		}
		if r == nil {
			t.Errorf("no route in %s to %s", tc.node, tc.dst)
			continue
		}
		if r.Link != tc.link || r.Dev != tc.link || r.Via.String() != tc.via {
			t.Errorf("route in %s to %s: %+v; want link %s via %s", tc.node, tc.dst, *r, tc.link, tc.via)
		}
	}
	// A route to a node wins over its site's.
	topo = parseWithRoutes(t, "two-site.yaml", append(slices.Clone(dedicatedBetweenSites), "{node: ra, to: b2, via: wan}")...)
	for _, tc := range []struct{ from, to, want string }{
		{"a1", "b1", "a1-ra dedicated b1-rb"},
		{"a1", "b2", "a1-ra wan b2-rb"},
		{"b2", "a1", "b2-rb dedicated a1-ra"},
	} {
		hops, err := topo.Path(tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if got := links(hops); got != tc.want {
			t.Errorf("Path(%s, %s) = %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
}

// detour is a triangle of routers whose direct link is short; a route
// round the long way makes the path, and so the socket buffers, longer.
const detour = `sites: [{name: a}]
nodes:
  - {name: r1, site: a, role: router}
  - {name: r2, site: a, role: router}
  - {name: r3, site: a, role: router}
links:
  - {name: r1-r2, ends: [r1, r2], rate: 1G, delay: 10ms}
  - {name: r1-r3, ends: [r1, r3], rate: 1G, delay: 100ms}
  - {name: r3-r2, ends: [r3, r2], rate: 1G, delay: 100ms}
`

func TestGivenRoutesTCPBuffer(t *testing.T) {
	const mib = 1 << 20
	plain, err := Parse("t.yaml", []byte(detour))
	if err != nil {
		t.Fatal(err)
	}
	// r1→r3, 1 Gbit/s × 200 ms: 2 × 25 MB → 48 MiB.
	if got := plain.TCPBufferMax("r1"); got != 48*mib {
		t.Errorf("TCPBufferMax(r1) = %.2f MiB, want 48", float64(got)/mib)
	}
	topo, err := Parse("t.yaml", []byte(detour+"routes:\n  - {node: r1, to: r2, via: r1-r3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if hops, _ := topo.Path("r1", "r2"); links(hops) != "r1-r3 r3-r2" {
		t.Errorf("Path(r1, r2) = %q", links(hops))
	}
	if hops, _ := topo.Path("r2", "r1"); links(hops) != "r1-r2" {
		t.Errorf("Path(r2, r1) = %q", links(hops))
	}
	// r1→r3→r2, 1 Gbit/s × 400 ms: 2 × 50 MB → 96 MiB.
	if got := topo.TCPBufferMax("r1"); got != 96*mib {
		t.Errorf("TCPBufferMax(r1) with the detour = %.2f MiB, want 96", float64(got)/mib)
	}
}

func TestPathFollowsRoutes(t *testing.T) {
	// Path follows t.Routes, as the kernels do, even when they are changed
	// by hand; a loop is no path.
	topo := loadExample(t, "two-site.yaml")
	looped := *topo
	looped.Routes = slices.Clone(topo.Routes)
	wan, _ := topo.Link("wan")
	for i, r := range looped.Routes {
		if r.Node == "rb" && r.Dst == netip.MustParsePrefix("198.18.2.1/32") {
			looped.Routes[i].Link, looped.Routes[i].Dev, looped.Routes[i].Via = "wan", "wan", wan.A.IPv4.Addr()
		}
	}
	if _, err := looped.Path("a1", "b1"); !errors.Is(err, ErrNoPath) || !strings.Contains(err.Error(), "loop: a1 -> ra -> rb -> ra") {
		t.Errorf("Path over looping routes: %v", err)
	}
	if hops, err := looped.Path("a1", "b2"); err != nil || links(hops) != "a1-ra wan b2-rb" {
		t.Errorf("Path(a1, b2) = %q, %v", links(hops), err)
	}
	// Without routes, the computed ones.
	bare := *topo
	bare.Routes = nil
	if hops, err := bare.Path("a1", "b1"); err != nil || links(hops) != "a1-ra wan b1-rb" {
		t.Errorf("Path(a1, b1) without routes = %q, %v", links(hops), err)
	}
}

// TestRouteMTU checks that each route carries the smallest MTU of the links
// its traffic crosses: along the path to a node, and to a link's subnet
// the link itself as well.
func TestRouteMTU(t *testing.T) {
	// A 9000-byte LAN at each site, a 1500-byte WAN between routers, and a
	// 4000-byte tail to a far router.
	chain := `sites: [{name: a}, {name: b}]
nodes:
  - {name: h1, site: a}
  - {name: r1, site: a, role: router}
  - {name: r2, site: b, role: router}
  - {name: h2, site: b}
  - {name: r3, site: b, role: router}
links:
  - {name: h1-r1, ends: [h1, r1], mtu: 9000}
  - {name: wan, ends: [r1, r2], mtu: 1500}
  - {name: r2-h2, ends: [r2, h2], mtu: 9000}
  - {name: tail, ends: [r2, r3], mtu: 4000}
`
	for _, tc := range []struct {
		name, file, in string
		node, dst      string
		mtu            int
	}{
		{"to a host across the wan", "", chain, "h1", "198.18.2.2/32", 1500},
		{"back, IPv6", "", chain, "h2", "2001:2:0:1::1/128", 1500},
		{"to the near router", "", chain, "h1", "198.18.1.2/32", 9000},
		{"within site b", "", chain, "h2", "198.18.2.3/32", 4000},
		{"router to router", "", chain, "r1", "198.18.2.1/32", 1500},
		{"router to the far host", "", chain, "r2", "198.18.1.1/32", 1500},
		{"a link subnet beyond the wan", "", chain, "h1", "198.19.0.12/30", 1500},
		{"a smaller link subnet next door", "", chain, "h2", "198.19.0.12/30", 4000},
		{"a larger link subnet next door", "", chain, "r3", "2001:2:0:8003::/64", 4000},
		{"a link subnet across the wan", "", chain, "r3", "2001:2:0:8001::/64", 1500},
		{"two-site: a host to the far site", "two-site.yaml", "", "a1", "198.18.2.1/32", 1500},
		{"two-site: a host to its router", "two-site.yaml", "", "a1", "198.18.1.3/32", 9000},
		{"two-site: a host to its site", "two-site.yaml", "", "a1", "2001:2:0:1::2/128", 9000},
		{"two-site: the dedicated link's subnet", "two-site.yaml", "", "a1", "198.19.0.20/30", 9000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := parseOrLoad(t, tc.file, tc.in)
			var r *Route
			for i := range topo.Routes {
				if topo.Routes[i].Node == tc.node && topo.Routes[i].Dst == netip.MustParsePrefix(tc.dst) {
					r = &topo.Routes[i]
				}
			}
			if r == nil {
				t.Fatalf("no route in %s to %s", tc.node, tc.dst)
			}
			if r.MTU != tc.mtu {
				t.Errorf("route in %s to %s: %+v; want MTU %d", tc.node, tc.dst, *r, tc.mtu)
			}
		})
	}
	// Every route of every example has an MTU, no larger than its first
	// link's.
	for _, f := range []string{"two-site.yaml", "triangle.yaml"} {
		topo := loadExample(t, f)
		for _, r := range topo.Routes {
			l, _ := topo.Link(r.Link)
			if r.MTU < 1280 || r.MTU > l.MTU {
				t.Errorf("%s: route %+v: MTU out of [1280, %d]", f, r, l.MTU)
			}
		}
	}
}
