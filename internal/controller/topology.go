package controller

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/topology"
)

// Topo is the topology the controller schedules on: the testbed file it was
// read from (kept as text, so it can be stored and shown), the scheduler's
// graph, and what the graph does not say: sites, and which addresses each
// node owns (its loopback addresses and its link ends), so a flow spec can
// be checked against the reservation's ends.
type Topo struct {
	Name  string
	YAML  string
	Graph *reserve.Graph
	Sites map[string][]string // site → its nodes, sorted
	Site  map[string]string   // node → site
	Addrs map[string][]netip.Prefix
	tb    *topology.Topology
	hash  atomic.Pointer[topoHash] // TopologyHash's, kept
	// access is AccessBps's, computed once: the graph never changes (a
	// new topology is a new Topo).
	access accessOnce
}

// ParseTopology reads a testbed topology file's text into a Topo.
func ParseTopology(name string, yaml []byte) (*Topo, error) {
	t, err := topology.Parse(name, yaml)
	if err != nil {
		return nil, err
	}
	nodes := make(map[string]string, len(t.Nodes))
	tp := &Topo{
		Name:  name,
		YAML:  string(yaml),
		Sites: map[string][]string{},
		Site:  map[string]string{},
		Addrs: map[string][]netip.Prefix{},
		tb:    t,
	}
	for _, n := range t.Nodes {
		role := reserve.NodeHost
		if n.Role == topology.RoleRouter {
			role = reserve.NodeRouter
		}
		nodes[n.Name] = role
		tp.Sites[n.Site] = append(tp.Sites[n.Site], n.Name)
		tp.Site[n.Name] = n.Site
		for _, a := range []netip.Addr{n.IPv4, n.IPv6} {
			if a.IsValid() {
				tp.Addrs[n.Name] = append(tp.Addrs[n.Name], netip.PrefixFrom(a, a.BitLen()))
			}
		}
	}
	for _, s := range t.Sites {
		if _, ok := tp.Sites[s.Name]; !ok {
			tp.Sites[s.Name] = nil
		}
	}
	links := make([]reserve.Link, 0, len(t.Links))
	for _, l := range t.Links {
		role := reserve.LinkRouted
		if l.Role == topology.LinkDedicated {
			role = reserve.LinkDedicated
		}
		links = append(links, reserve.Link{
			Name: l.Name, A: l.A.Node, B: l.B.Node,
			Capacity: l.Params.Rate, Reservable: l.Reservable,
			Delay: l.Params.Delay, Role: role, Prefer: l.Prefer,
		})
		for _, e := range []topology.End{l.A, l.B} {
			for _, p := range []netip.Prefix{e.IPv4, e.IPv6} {
				if p.IsValid() {
					tp.Addrs[e.Node] = append(tp.Addrs[e.Node], netip.PrefixFrom(p.Addr(), p.Addr().BitLen()))
				}
			}
		}
	}
	for _, ns := range tp.Sites {
		sort.Strings(ns)
	}
	g, err := reserve.NewGraph(nodes, links)
	if err != nil {
		return nil, fmt.Errorf("topology %s: %w", name, err)
	}
	tp.Graph = g
	return tp, nil
}

// Owner returns the node that owns an address, if any: the controller
// uses it to tell which node a flow's end belongs to.
func (t *Topo) Owner(a netip.Addr) (string, bool) {
	for n, ps := range t.Addrs {
		for _, p := range ps {
			if p.Addr() == a {
				return n, true
			}
		}
	}
	return "", false
}

// hops turns a path given as link names, walked from node from, into
// directed hops.
func (t *Topo) hops(from string, links []string) ([]reserve.Hop, error) {
	at := from
	out := make([]reserve.Hop, 0, len(links))
	for i, name := range links {
		l, ok := t.Graph.Link(name)
		if !ok {
			return nil, &reserve.RequestError{Field: "path", Message: fmt.Sprintf("path: link %q (hop %d) is not in the topology", name, i+1)}
		}
		var next string
		switch at {
		case l.A:
			next = l.B
		case l.B:
			next = l.A
		default:
			return nil, &reserve.RequestError{Field: "path", Message: fmt.Sprintf("path: link %q (hop %d) joins %s and %s, not %s, where the path is", name, i+1, l.A, l.B, at)}
		}
		out = append(out, reserve.Hop{Link: name, From: at, To: next})
		at = next
	}
	return out, nil
}

// nodeSet resolves a node or a site into the sorted nodes it covers.
func (t *Topo) nodeSet(node, site string) ([]string, error) {
	switch {
	case node != "" && site != "":
		return nil, &reserve.RequestError{Field: "site", Message: "give a node or a site, not both"}
	case node != "":
		if _, ok := t.Graph.Role(node); !ok {
			return nil, &reserve.RequestError{Field: "node", Message: fmt.Sprintf("node %q is not in the topology (nodes: %s)", node, t.nodeList())}
		}
		return []string{node}, nil
	case site != "":
		ns, ok := t.Sites[site]
		if !ok || len(ns) == 0 {
			return nil, &reserve.RequestError{Field: "site", Message: fmt.Sprintf("site %q is not in the topology (sites: %s)", site, strings.Join(t.SiteNames(), ", "))}
		}
		return slices.Clone(ns), nil
	}
	return nil, &reserve.RequestError{Field: "node", Message: "give the node or the site to hold"}
}

// SiteNames returns the sites, sorted.
func (t *Topo) SiteNames() []string {
	out := make([]string, 0, len(t.Sites))
	for s := range t.Sites {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// nodeList names the nodes for an error message, shortened on big graphs.
func (t *Topo) nodeList() string {
	ns := t.Graph.Nodes()
	if len(ns) > 12 {
		return strings.Join(ns[:12], ", ") + fmt.Sprintf(" and %d more", len(ns)-12)
	}
	return strings.Join(ns, ", ")
}

// checkNode says which request field names an unknown node.
func (t *Topo) checkNode(field, node string) error {
	if node == "" {
		return &reserve.RequestError{Field: field, Message: fmt.Sprintf("%s: a node name is required", field)}
	}
	if _, ok := t.Graph.Role(node); !ok {
		return &reserve.RequestError{Field: field, Message: fmt.Sprintf("%s: node %q is not in the topology (nodes: %s)", field, node, t.nodeList())}
	}
	return nil
}

// toPathHops and toHops convert between the scheduler's hops and the
// reservation's.
func toPathHops(hs []reserve.Hop) []reserve.PathHop {
	out := make([]reserve.PathHop, len(hs))
	for i, h := range hs {
		out[i] = reserve.PathHop(h)
	}
	return out
}

func toHops(ps []reserve.PathHop) []reserve.Hop {
	out := make([]reserve.Hop, len(ps))
	for i, p := range ps {
		out[i] = reserve.Hop(p)
	}
	return out
}

// booking is what the scheduler counts for a live reservation.
func booking(r reserve.Reservation) reserve.Booking {
	return reserve.Booking{ID: r.ID, Path: toHops(r.Path), Bandwidth: r.Bandwidth, Start: r.Start, End: r.End}
}

// NewTopo wraps a graph built elsewhere (a generated benchmark topology)
// as a Topo: with no sites and no addresses, so flow specs cannot be
// checked against it and holds of sites are unavailable.
func NewTopo(name string, g *reserve.Graph) *Topo {
	return &Topo{Name: name, Graph: g, Sites: map[string][]string{}, Site: map[string]string{}, Addrs: map[string][]netip.Prefix{}}
}
