package topology

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestTwoSiteAddresses(t *testing.T) {
	topo := loadExample(t, "two-site.yaml")
	for _, tc := range []struct {
		node       string
		site       string
		index      int
		ipv4, ipv6 string
	}{
		{"a1", "site-a", 1, "198.18.1.1", "2001:2:0:1::1"},
		{"a2", "site-a", 2, "198.18.1.2", "2001:2:0:1::2"},
		{"ra", "site-a", 3, "198.18.1.3", "2001:2:0:1::3"},
		{"b1", "site-b", 1, "198.18.2.1", "2001:2:0:2::1"},
		{"rb", "site-b", 3, "198.18.2.3", "2001:2:0:2::3"},
	} {
		n, ok := topo.Node(tc.node)
		if !ok {
			t.Fatalf("no node %s", tc.node)
		}
		if n.Site != tc.site || n.Index != tc.index || n.IPv4.String() != tc.ipv4 || n.IPv6.String() != tc.ipv6 {
			t.Errorf("node %s: site %s index %d %s %s; want %s %d %s %s", tc.node, n.Site, n.Index, n.IPv4, n.IPv6,
				tc.site, tc.index, tc.ipv4, tc.ipv6)
		}
	}
	if s, ok := topo.Site("site-b"); !ok || s.Index != 2 {
		t.Errorf("site-b: %+v, %v", s, ok)
	}
	for _, tc := range []struct {
		link           string
		a, b           string // nodes
		a4, b4, a6, b6 string
		dev            string
	}{
		{"a1-ra", "a1", "ra", "198.19.0.1/30", "198.19.0.2/30", "2001:2:0:8001::1/64", "2001:2:0:8001::2/64", "a1-ra"},
		{"wan", "ra", "rb", "198.19.0.17/30", "198.19.0.18/30", "2001:2:0:8005::1/64", "2001:2:0:8005::2/64", "wan"},
		{"dedicated", "ra", "rb", "198.19.0.21/30", "198.19.0.22/30", "2001:2:0:8006::1/64", "2001:2:0:8006::2/64", "dedicated"},
	} {
		l, ok := topo.Link(tc.link)
		if !ok {
			t.Fatalf("no link %s", tc.link)
		}
		got := fmt.Sprintln(l.A.Node, l.B.Node, l.A.IPv4, l.B.IPv4, l.A.IPv6, l.B.IPv6, l.A.Dev, l.B.Dev)
		want := fmt.Sprintln(tc.a, tc.b, tc.a4, tc.b4, tc.a6, tc.b6, tc.dev, tc.dev)
		if got != want {
			t.Errorf("link %s:\n got %s\nwant %s", tc.link, got, want)
		}
	}
}

func TestLinkAddressing(t *testing.T) {
	for _, tc := range []struct {
		k              int
		a4, b4, a6, b6 string
	}{
		{1, "198.19.0.1/30", "198.19.0.2/30", "2001:2:0:8001::1/64", "2001:2:0:8001::2/64"},
		{64, "198.19.0.253/30", "198.19.0.254/30", "2001:2:0:8040::1/64", "2001:2:0:8040::2/64"},
		{65, "198.19.1.1/30", "198.19.1.2/30", "2001:2:0:8041::1/64", "2001:2:0:8041::2/64"},
		{maxLinks, "198.19.255.253/30", "198.19.255.254/30", "2001:2:0:c000::1/64", "2001:2:0:c000::2/64"},
	} {
		a4, b4 := LinkIPv4(tc.k)
		a6, b6 := LinkIPv6(tc.k)
		if got, want := fmt.Sprintln(a4, b4, a6, b6), fmt.Sprintln(tc.a4, tc.b4, tc.a6, tc.b6); got != want {
			t.Errorf("link %d: got %s, want %s", tc.k, got, want)
		}
	}
	if got := NodeIPv6(10, 12).String(); got != "2001:2:0:a::c" {
		t.Errorf("NodeIPv6(10, 12) = %s", got)
	}
	if got := NodeIPv4(254, 254).String(); got != "198.18.254.254" {
		t.Errorf("NodeIPv4(254, 254) = %s", got)
	}
}

func TestDeviceNames(t *testing.T) {
	long := "transatlantic-lambda-1"  // 22 bytes
	long2 := "transatlantic-lambda-2" // same first 10 bytes
	shortLit := devName(long, 0)      // a link literally named like long's device
	in := fmt.Sprintf(`sites: [{name: s}]
nodes:
  - {name: r1, site: s, role: router}
  - {name: r2, site: s, role: router}
links:
  - {name: %s, ends: [r1, r2]}
  - {name: %s, ends: [r1, r2]}
  - {name: %s, ends: [r2, r1]}
  - {name: lo, ends: [r1, r2]}
  - {name: exactly-15-byte, ends: [r1, r2]}
`, long, long2, shortLit)
	topo, err := Parse("t.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, l := range topo.Links {
		if l.A.Dev != l.B.Dev {
			t.Errorf("link %s: ends named %s and %s", l.Name, l.A.Dev, l.B.Dev)
		}
		if len(l.A.Dev) > 15 {
			t.Errorf("link %s: device %s is longer than 15 bytes", l.Name, l.A.Dev)
		}
		if other, dup := seen[l.A.Dev]; dup {
			t.Errorf("links %s and %s share device %s", other, l.Name, l.A.Dev)
		}
		seen[l.A.Dev] = l.Name
	}
	for _, tc := range []struct{ link, want string }{
		{long, shortLit},
		{"exactly-15-byte", "exactly-15-byte"},
	} {
		if l, _ := topo.Link(tc.link); l.A.Dev != tc.want {
			t.Errorf("link %s: device %s, want %s", tc.link, l.A.Dev, tc.want)
		}
	}
	if !strings.HasPrefix(shortLit, "transatlan-") || len(shortLit) != 15 {
		t.Errorf("devName(%s) = %s, want transatlan-XXXX", long, shortLit)
	}
	// The later of two clashing links is renamed, the same way every time.
	if l, _ := topo.Link(shortLit); l.A.Dev == shortLit || l.A.Dev != devName(shortLit, 1) {
		t.Errorf("link %s: device %s, want %s", shortLit, l.A.Dev, devName(shortLit, 1))
	}
	if l, _ := topo.Link("lo"); l.A.Dev == "lo" {
		t.Errorf("link lo kept the loopback's name")
	}
}

func TestGivenAddresses(t *testing.T) {
	in := `sites: [{name: s}]
nodes:
  - {name: r1, site: s, role: router, ipv4: 198.18.0.10, ipv6: "2001:2:0:0::10"}
  - {name: r2, site: s, role: router}
links:
  - {name: l, ends: [r1, r2]}
`
	topo, err := Parse("t.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := topo.Node("r1")
	r2, _ := topo.Node("r2")
	if r1.IPv4.String() != "198.18.0.10" || r1.IPv6.String() != "2001:2::10" || r2.IPv4.String() != "198.18.1.2" {
		t.Errorf("r1 %s %s, r2 %s", r1.IPv4, r1.IPv6, r2.IPv4)
	}
}

func TestLookups(t *testing.T) {
	topo := loadExample(t, "two-site.yaml")
	for _, tc := range []struct {
		addr, node string
	}{
		{"198.18.1.1", "a1"},
		{"2001:2:0:2::3", "rb"},
		{"::ffff:198.18.2.1", "b1"}, // as a dual-stack socket reports it
		{"198.19.0.17", "ra"},       // wan, end A
		{"2001:2:0:8005::2", "rb"},  // wan, end B
		{"198.19.0.19", ""},         // wan's broadcast address: nobody's
		{"10.0.0.1", ""},
	} {
		n, ok := topo.NodeByAddr(netip.MustParseAddr(tc.addr))
		got := ""
		if ok {
			got = n.Name
		}
		if got != tc.node {
			t.Errorf("NodeByAddr(%s) = %q, want %q", tc.addr, got, tc.node)
		}
	}
	wan, _ := topo.Link("wan")
	if e, ok := wan.End("rb"); !ok || e != &wan.B {
		t.Errorf("wan.End(rb) = %v, %v", e, ok)
	}
	if e, ok := wan.Peer("rb"); !ok || e != &wan.A {
		t.Errorf("wan.Peer(rb) = %v, %v", e, ok)
	}
	if _, ok := wan.End("a1"); ok {
		t.Error("wan.End(a1) found an end")
	}
	if _, ok := wan.Peer("a1"); ok {
		t.Error("wan.Peer(a1) found an end")
	}
	if _, ok := topo.Node("zz"); ok {
		t.Error("Node(zz) found a node")
	}
	if _, ok := topo.Link("zz"); ok {
		t.Error("Link(zz) found a link")
	}
}

func TestLimits(t *testing.T) {
	// 255 nodes in one site overflow the octet of the address.
	var b strings.Builder
	b.WriteString("sites: [{name: s}]\nnodes:\n  - {name: r, site: s, role: router}\n")
	for i := range 254 {
		fmt.Fprintf(&b, "  - {name: h%d, site: s}\n", i)
	}
	b.WriteString("links:\n")
	for i := range 254 {
		fmt.Fprintf(&b, "  - {name: l%d, ends: [h%d, r]}\n", i, i)
	}
	_, err := Parse("t.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "t.yaml:257:") || !strings.Contains(err.Error(), "more than 254 nodes") {
		t.Errorf("255 nodes in a site: %v", err)
	}
}
