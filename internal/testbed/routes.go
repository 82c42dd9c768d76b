package testbed

// Route computation. One rule decides every path, so that the static
// routes installed in the namespaces, Path, and the connectivity check
// always agree:
//
//   - only routers forward: a path passes through routers, and starts or
//     ends at any node;
//   - paths are ranked by (dedicated links used, hops, total one-way
//     delay), compared in that order, so dedicated links carry ordinary
//     traffic only where no routed path exists;
//   - ties go to the link that comes first in the file.
//
// Routes are computed per destination as a shortest-path tree (Dijkstra
// run outwards from the destination). Choosing each node's next hop from
// a tree, rather than running Dijkstra per source, keeps hop-by-hop
// forwarding consistent under ties: the path from a node's next hop is
// exactly the rest of the node's own path.

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"
)

// Errors from Path and WidestPath, for errors.Is.
var (
	ErrUnknownNode = errors.New("unknown node")
	ErrNoPath      = errors.New("no path")
)

// cost ranks paths; see the comment at the top of the file.
type cost struct {
	dedicated int
	hops      int
	delay     time.Duration
}

func (c cost) less(d cost) bool {
	if c.dedicated != d.dedicated {
		return c.dedicated < d.dedicated
	}
	if c.hops != d.hops {
		return c.hops < d.hops
	}
	return c.delay < d.delay
}

func (c cost) plus(l *Link) cost {
	c.hops++
	c.delay += l.Params.Delay
	if l.Role == LinkDedicated {
		c.dedicated++
	}
	return c
}

// graph is the adjacency view of a topology.
type graph struct {
	t     *Topology
	index map[string]int // node name → index in t.Nodes
	adj   [][]arc        // per node, in link file order (the tie-break)
}

type arc struct{ link, peer int }

func newGraph(t *Topology) *graph {
	g := &graph{t: t, index: make(map[string]int, len(t.Nodes)), adj: make([][]arc, len(t.Nodes))}
	for i, n := range t.Nodes {
		g.index[n.Name] = i
	}
	for k, l := range t.Links {
		a, aok := g.index[l.A.Node]
		b, bok := g.index[l.B.Node]
		if !aok || !bok || a == b {
			continue // Parse rejects these; a hand-built Topology may not
		}
		g.adj[a] = append(g.adj[a], arc{k, b})
		g.adj[b] = append(g.adj[b], arc{k, a})
	}
	return g
}

// forwards reports whether node i may carry traffic between two others.
func (g *graph) forwards(i int) bool { return g.t.Nodes[i].Role == RoleRouter }

// tree is every node's way towards one destination.
type tree struct {
	next    []arc  // the first hop from each node; link −1 for none
	dist    []cost // the cost of the rest of the path
	reached []bool
}

// toward computes the shortest-path tree towards dst over the links keep
// accepts (nil: all of them); anyForward lets hosts forward too (only to
// explain a disconnected graph).
func (g *graph) toward(dst int, keep func(*Link) bool, anyForward bool) tree {
	n := len(g.t.Nodes)
	tr := tree{next: make([]arc, n), dist: make([]cost, n), reached: make([]bool, n)}
	for i := range tr.next {
		tr.next[i] = arc{-1, -1}
	}
	usable := func(a arc) bool { return keep == nil || keep(&g.t.Links[a.link]) }
	done := make([]bool, n)
	tr.reached[dst] = true
	q := &costHeap{{dst, cost{}}}
	for q.Len() > 0 {
		it := heap.Pop(q).(costItem)
		u := it.node
		if done[u] {
			continue
		}
		done[u] = true
		// A node other than the destination extends paths only if it
		// forwards: hosts are reached, but nothing is reached through them.
		if u != dst && !anyForward && !g.forwards(u) {
			continue
		}
		for _, a := range g.adj[u] {
			if !usable(a) {
				continue
			}
			c := tr.dist[u].plus(&g.t.Links[a.link])
			if !tr.reached[a.peer] || c.less(tr.dist[a.peer]) {
				tr.reached[a.peer], tr.dist[a.peer] = true, c
				heap.Push(q, costItem{a.peer, c})
			}
		}
	}
	// Next hops: the first link (in file order) on some best path. The
	// choice is made per node from the distances, so it does not depend on
	// the order Dijkstra happened to settle nodes in.
	for x := range n {
		if x == dst || !tr.reached[x] {
			continue
		}
		var best cost
		for _, a := range g.adj[x] {
			if !usable(a) || !tr.reached[a.peer] || (a.peer != dst && !anyForward && !g.forwards(a.peer)) {
				continue
			}
			c := tr.dist[a.peer].plus(&g.t.Links[a.link])
			if tr.next[x].link < 0 || c.less(best) {
				tr.next[x], best = arc{a.link, a.peer}, c
			}
		}
	}
	return tr
}

// walk returns the hops from src along tr to its destination.
func (g *graph) walk(tr tree, src int) []Hop {
	var hops []Hop
	for x := src; tr.next[x].link >= 0 && len(hops) <= len(g.t.Nodes); x = tr.next[x].peer {
		hops = append(hops, Hop{Link: g.t.Links[tr.next[x].link].Name, From: g.t.Nodes[x].Name, To: g.t.Nodes[tr.next[x].peer].Name})
	}
	return hops
}

type costItem struct {
	node int
	c    cost
}

type costHeap []costItem

func (h costHeap) Len() int           { return len(h) }
func (h costHeap) Less(i, j int) bool { return h[i].c.less(h[j].c) }
func (h costHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *costHeap) Push(x any)        { *h = append(*h, x.(costItem)) }
func (h *costHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// ends looks up two node names.
func (g *graph) ends(from, to string) (int, int, error) {
	src, ok := g.index[from]
	if !ok {
		return 0, 0, fmt.Errorf("path from %q: %w", from, ErrUnknownNode)
	}
	dst, ok := g.index[to]
	if !ok {
		return 0, 0, fmt.Errorf("path to %q: %w", to, ErrUnknownNode)
	}
	return src, dst, nil
}

// Path returns the hops that traffic from node from to node to takes
// under the topology's routes. The path from a node to itself is empty.
func (t *Topology) Path(from, to string) ([]Hop, error) {
	g := newGraph(t)
	src, dst, err := g.ends(from, to)
	if err != nil {
		return nil, err
	}
	tr := g.toward(dst, nil, false)
	if !tr.reached[src] {
		return nil, fmt.Errorf("from %q to %q: %w", from, to, ErrNoPath)
	}
	return g.walk(tr, src), nil
}

// WidestPath returns the path from node from to node to with the highest
// bottleneck rate, over routed and dedicated links alike; among equally
// wide paths it follows the usual ranking (fewest dedicated links, then
// hops, then delay). It is the path a reservation of the most bandwidth
// would take.
func (t *Topology) WidestPath(from, to string) ([]Hop, error) {
	g := newGraph(t)
	src, dst, err := g.ends(from, to)
	if err != nil {
		return nil, err
	}
	if src == dst {
		return nil, nil
	}
	// The widest bottleneck is the highest rate r such that links of at
	// least r join the two nodes; try the rates from the top. Doing it in
	// two steps keeps the tie-break exact, which a single Dijkstra on
	// (bottleneck, hops) cannot: that order is not preserved when paths
	// are extended.
	var rates []uint64
	for _, l := range t.Links {
		rates = append(rates, l.Params.Rate)
	}
	slices.Sort(rates)
	rates = slices.Compact(rates)
	for i := len(rates) - 1; i >= 0; i-- {
		r := rates[i]
		tr := g.toward(dst, func(l *Link) bool { return l.Params.Rate >= r }, false)
		if tr.reached[src] {
			return g.walk(tr, src), nil
		}
	}
	return nil, fmt.Errorf("from %q to %q: %w", from, to, ErrNoPath)
}

// Socket buffer bounds for TCPBufferMax.
const (
	// minTCPBuffer is Linux's default tcp_rmem maximum; never go below it.
	minTCPBuffer = 6 << 20
	// maxTCPBuffer is the largest whole number of MiB that fits the
	// kernel's int-typed tcp_rmem and tcp_wmem.
	maxTCPBuffer = 2047 << 20
)

// TCPBufferMax returns the socket buffer maximum (bytes) for node's
// namespace, the third field of net.ipv4.tcp_rmem and tcp_wmem: twice the
// largest bandwidth-delay product of a path from node to any other node
// (bottleneck rate × round trip, the round trip being twice the sum of the
// one-way delays), rounded up to a MiB, at least 6 MiB (Linux's default)
// and at most 2047 MiB. Twice, because Linux counts its bookkeeping
// against the buffer and by default offers only half of it as window.
// Both the routed path and the widest path count, since a reservation may
// later steer traffic onto a dedicated link. An unknown node gets the
// minimum.
func (t *Topology) TCPBufferMax(node string) int64 {
	g := newGraph(t)
	src, ok := g.index[node]
	if !ok {
		return minTCPBuffer
	}
	var most float64
	for d := range t.Nodes {
		if d == src {
			continue
		}
		routed := g.walk(g.toward(d, nil, false), src)
		widest, _ := t.WidestPath(node, t.Nodes[d].Name)
		most = max(most, t.bdp(routed), t.bdp(widest))
	}
	const mib = 1 << 20
	b := math.Ceil(2*most/mib) * mib
	return int64(min(max(b, minTCPBuffer), maxTCPBuffer))
}

// bdp is the bandwidth-delay product of a path in bytes.
func (t *Topology) bdp(hops []Hop) float64 {
	if len(hops) == 0 {
		return 0
	}
	rate := uint64(math.MaxUint64)
	var delay time.Duration
	for _, h := range hops {
		l, ok := t.Link(h.Link)
		if !ok {
			return 0
		}
		rate = min(rate, l.Params.Rate)
		delay += l.Params.Delay
	}
	return float64(rate) / 8 * 2 * delay.Seconds()
}

// connect checks that every node can reach every other.
func (p *parser) connect() {
	t := p.t
	if len(t.Nodes) < 2 {
		return
	}
	g := newGraph(t)
	for i, n := range t.Nodes {
		if len(g.adj[i]) == 0 {
			p.errorf(n.Line, "node %q has no links: every node must reach every other", n.Name)
		}
	}
	if len(p.errs) > 0 {
		return
	}
	var first [2]int
	pairs := 0
	for d := range t.Nodes {
		tr := g.toward(d, nil, false)
		for s := range t.Nodes {
			if s < d && !tr.reached[s] {
				if pairs == 0 {
					first = [2]int{s, d}
				}
				pairs++
			}
		}
	}
	if pairs == 0 {
		return
	}
	s, d := first[0], first[1]
	msg := fmt.Sprintf("node %q cannot reach node %q: no path joins them", t.Nodes[s].Name, t.Nodes[d].Name)
	if g.toward(d, nil, true).reached[s] {
		msg = fmt.Sprintf("node %q cannot reach node %q: every path between them passes through a host, and only routers forward (role: router)",
			t.Nodes[s].Name, t.Nodes[d].Name)
	}
	if pairs > 1 {
		msg += fmt.Sprintf(" (%d pairs of nodes cannot reach each other)", pairs)
	}
	p.errorf(t.Nodes[s].Line, "%s", msg)
}

// computeRoutes returns the static routes of every node: in node file
// order, one route to each other node's /32 and /128, then one to each
// /30 and /64 of a link the node is not on. A link's subnets are routed
// towards whichever end is nearer (end A on a tie); the rule is the same
// at every node, so forwarding towards them is consistent too.
func computeRoutes(t *Topology) []Route {
	g := newGraph(t)
	trees := make([]tree, len(t.Nodes))
	for d := range t.Nodes {
		trees[d] = g.toward(d, nil, false)
	}
	var routes []Route
	add := func(x int, tr tree, dst4, dst6 netip.Prefix) {
		a := tr.next[x]
		if a.link < 0 {
			return
		}
		n, l := &t.Nodes[x], &t.Links[a.link]
		mine, _ := l.End(n.Name)
		peer, _ := l.Peer(n.Name)
		routes = append(routes,
			Route{Node: n.Name, Dst: dst4, Link: l.Name, Dev: mine.Dev, Via: peer.IPv4.Addr(), Src: n.IPv4},
			Route{Node: n.Name, Dst: dst6, Link: l.Name, Dev: mine.Dev, Via: peer.IPv6.Addr(), Src: n.IPv6})
	}
	for x := range t.Nodes {
		for d := range t.Nodes {
			if d != x {
				add(x, trees[d], netip.PrefixFrom(t.Nodes[d].IPv4, 32), netip.PrefixFrom(t.Nodes[d].IPv6, 128))
			}
		}
		for _, l := range t.Links {
			if l.A.Node == t.Nodes[x].Name || l.B.Node == t.Nodes[x].Name {
				continue // on the link: the kernel's connected route covers it
			}
			a, b := g.index[l.A.Node], g.index[l.B.Node]
			ta, tb := trees[a], trees[b]
			tr := ta
			if !ta.reached[x] || (tb.reached[x] && tb.dist[x].less(ta.dist[x])) {
				tr = tb
			}
			add(x, tr, l.A.IPv4.Masked(), l.A.IPv6.Masked())
		}
	}
	return routes
}
