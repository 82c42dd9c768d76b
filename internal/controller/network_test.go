package controller_test

import (
	"slices"
	"testing"

	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/service"
)

// accessSites is two sites of two hosts behind a router each, joined by a
// 10 Gbit/s WAN; 90% of each link may be booked.
const accessSites = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: a1, site: s1}
  - {name: a2, site: s1}
  - {name: ra, site: s1, role: router}
  - {name: rb, site: s2, role: router}
  - {name: b1, site: s2}
links:
  - {name: la1, ends: [a1, ra], rate: 1G}
  - {name: la2, ends: [a2, ra], rate: 1G}
  - {name: wan, ends: [ra, rb], rate: 10G, delay: 10ms}
  - {name: lb1, ends: [rb, b1], rate: 1G}
`

// TestTopoNetwork: a Topo answers the transfer service's questions
// (service.Network) as its graph, sites and addresses say; a node's
// access capacity is what may be booked on every link that ends at it.
func TestTopoNetwork(t *testing.T) {
	tp := parseTopo(t, "access.yaml", accessSites)
	var n service.Network = tp
	for _, c := range []struct {
		node   string
		role   string
		known  bool
		site   string
		access uint64
	}{
		{"a1", reserve.NodeHost, true, "s1", 900_000_000},
		{"b1", reserve.NodeHost, true, "s2", 900_000_000},
		{"ra", reserve.NodeRouter, true, "s1", 2*900_000_000 + 9_000_000_000},
		{"rb", reserve.NodeRouter, true, "s2", 900_000_000 + 9_000_000_000},
		{"zz", "", false, "", 0},
	} {
		role, known := n.NodeRole(c.node)
		if role != c.role || known != c.known || n.NodeSite(c.node) != c.site || n.AccessBps(c.node) != c.access {
			t.Errorf("%s: role %q %v, site %q, access %d; want %q %v, %q, %d", c.node, role, known, n.NodeSite(c.node), n.AccessBps(c.node), c.role, c.known, c.site, c.access)
		}
		if !slices.Equal(n.NodeAddrs(c.node), tp.Addrs[c.node]) {
			t.Errorf("%s: addresses %v, the topology's %v", c.node, n.NodeAddrs(c.node), tp.Addrs[c.node])
		}
	}
	if len(n.NodeAddrs("a1")) == 0 {
		t.Error("a1 has no address")
	}
	if got := n.SiteNames(); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Errorf("sites %v", got)
	}
	// A graph built elsewhere has no sites, and its access capacities
	// still come from its links.
	g := controller.NewTopo("bare", tp.Graph)
	if g.AccessBps("a1") != 900_000_000 || g.NodeSite("a1") != "" {
		t.Errorf("bare topology: a1's access %d, site %q", g.AccessBps("a1"), g.NodeSite("a1"))
	}
}
