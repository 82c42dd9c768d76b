package topology

// Route computation. One rule decides every path the file does not give,
// so that the static routes installed in the namespaces, Path, and the
// connectivity check always agree:
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
//
// Routes given in the file (see checkRoutes) replace the next hop of one
// node towards some destinations. Everything that follows paths (the
// installed routes, Path, TCPBufferMax, and the check that every node
// still reaches every other) goes through forwarding, which applies them,
// so these agree with each other and with the kernels there too.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/heapq"
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

// key orders costs as less does, for heapq: the three counts big-endian,
// fixed width (none is negative).
func (c cost) key() string {
	b := make([]byte, 0, 24)
	b = binary.BigEndian.AppendUint64(b, uint64(c.dedicated))
	b = binary.BigEndian.AppendUint64(b, uint64(c.hops))
	b = binary.BigEndian.AppendUint64(b, uint64(c.delay))
	return string(b)
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
	var q heapq.Heap[string, int]
	q.Push(cost{}.key(), dst)
	for q.Len() > 0 {
		_, u := q.Pop()
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
				q.Push(c.key(), a.peer)
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
// under the topology's routes, following them from node to node as the
// kernels do: at each node, the route in t.Routes to the destination's
// IPv4 address (else its IPv6 address), including the routes the file
// gives; where t.Routes has none (a Topology built by hand), the computed
// next hop. The path from a node to itself is empty. Routes that loop, or
// that would have a host forward, give an error wrapping ErrNoPath.
func (t *Topology) Path(from, to string) ([]Hop, error) {
	g := newGraph(t)
	src, dst, err := g.ends(from, to)
	if err != nil {
		return nil, err
	}
	w := newForwarding(g, routesGiven(g)).toNode(src, dst)
	if w.end != arrived {
		return nil, fmt.Errorf("from %q to %q: %s: %w", from, to, w.explain(t), ErrNoPath)
	}
	return w.hops, nil
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
// Both the path the routes take (as Path follows them, routes given in the
// file included) and the widest path count, since a reservation may later
// steer traffic onto a dedicated link. An unknown node gets the minimum.
func (t *Topology) TCPBufferMax(node string) int64 {
	g := newGraph(t)
	src, ok := g.index[node]
	if !ok {
		return minTCPBuffer
	}
	f := newForwarding(g, routesGiven(g))
	var most float64
	for d := range t.Nodes {
		if d == src {
			continue
		}
		if w := f.toNode(src, d); w.end == arrived {
			most = max(most, t.bdp(w.hops))
		}
		widest, _ := t.WidestPath(node, t.Nodes[d].Name)
		most = max(most, t.bdp(widest))
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
// /30 and /64 of a link the node is not on. Each leaves by the next hop
// given (the routes in the file, see checkRoutes) or else the computed
// one. A link's subnets are routed towards whichever end is nearer (end A
// on a tie); the rule is the same at every node, so forwarding towards
// them is consistent too. Each route's MTU is the smallest along the way
// its traffic goes (pathMTU).
func computeRoutes(t *Topology, given givenHops) []Route {
	f := newForwarding(newGraph(t), given)
	mtus := make(map[string]int, len(t.Links))
	for _, l := range t.Links {
		mtus[l.Name] = l.MTU
	}
	var routes []Route
	add := func(x int, a arc, dst4, dst6 netip.Prefix, mtu int) {
		if a.link < 0 {
			return
		}
		n, l := &t.Nodes[x], &t.Links[a.link]
		mine, _ := l.End(n.Name)
		peer, _ := l.Peer(n.Name)
		routes = append(routes,
			Route{Node: n.Name, Dst: dst4, Link: l.Name, Dev: mine.Dev, Via: peer.IPv4.Addr(), Src: n.IPv4, MTU: mtu},
			Route{Node: n.Name, Dst: dst6, Link: l.Name, Dev: mine.Dev, Via: peer.IPv6.Addr(), Src: n.IPv6, MTU: mtu})
	}
	for x := range t.Nodes {
		for d := range t.Nodes {
			if d != x {
				a, _ := f.nextToNode(x, d)
				add(x, a, netip.PrefixFrom(t.Nodes[d].IPv4, 32), netip.PrefixFrom(t.Nodes[d].IPv6, 128), pathMTU(mtus, f.toNode(x, d), 0))
			}
		}
		for k, l := range t.Links {
			if l.A.Node == t.Nodes[x].Name || l.B.Node == t.Nodes[x].Name {
				continue // on the link: the kernel's connected route covers it
			}
			a, _ := f.nextToLink(x, k)
			add(x, a, l.A.IPv4.Masked(), l.A.IPv6.Masked(), pathMTU(mtus, f.toLink(x, k), l.MTU))
		}
	}
	return routes
}

// pathMTU is the smallest MTU (mtus, by link name) of the links of w and
// dst (the MTU of the link whose subnet the route leads to, 0 for a
// node): the largest packet that crosses them all. A walk that does not
// arrive (routes given in the file that loop, which the parser refuses)
// still gives the smallest along what it crossed.
func pathMTU(mtus map[string]int, w walk, dst int) int {
	mtu := dst
	for _, h := range w.hops {
		if m := mtus[h.Link]; m > 0 && (mtu == 0 || m < mtu) {
			mtu = m
		}
	}
	return mtu
}

// Routes given in the file.
//
// A given route replaces one node's next hop towards some destinations
// and nothing else: the other nodes keep theirs, so the path from the
// node's next hop on is whatever that node does. That can loop, or hand
// traffic to a host, which does not forward; forward refuses such files.

// givenRoute is one route of the file, resolved (checkRoutes): at node,
// traffic to the nodes to and to the subnets of the links subnets leaves
// by link.
type givenRoute struct {
	node, link int
	to         []int
	subnets    []int
	line       int
}

// givenHops are next hops that replace computed ones.
type givenHops struct {
	toNode map[[2]int]givenHop // {node, destination node}
	toLink map[[2]int]givenHop // {node, link whose subnets are the destination}
}

// givenHop is a link to leave by, and the line of the route in the file
// that gives it (0 when it does not come from the file).
type givenHop struct{ link, line int }

// add records g, replacing what it covers.
func (h *givenHops) add(g givenRoute) {
	if h.toNode == nil {
		h.toNode, h.toLink = map[[2]int]givenHop{}, map[[2]int]givenHop{}
	}
	for _, d := range g.to {
		h.toNode[[2]int{g.node, d}] = givenHop{g.link, g.line}
	}
	for _, k := range g.subnets {
		h.toLink[[2]int{g.node, k}] = givenHop{g.link, g.line}
	}
}

// routesGiven reads t.Routes back into next hops towards nodes: a route
// to a node's /32 (else its /128) by a link of the node. Routes that do
// not fit the topology (a Topology changed by hand) are left out.
func routesGiven(g *graph) givenHops {
	t := g.t
	owner := make(map[netip.Prefix]int, 2*len(t.Nodes))
	for i, n := range t.Nodes {
		owner[netip.PrefixFrom(n.IPv4, 32)] = i
		owner[netip.PrefixFrom(n.IPv6, 128)] = i
	}
	index := make(map[string]int, len(t.Links))
	for k, l := range t.Links {
		if _, dup := index[l.Name]; !dup {
			index[l.Name] = k
		}
	}
	h := givenHops{toNode: map[[2]int]givenHop{}}
	for _, r := range t.Routes {
		d, dok := owner[r.Dst]
		x, xok := g.index[r.Node]
		k, kok := index[r.Link]
		if !dok || !xok || !kok || x == d {
			continue
		}
		if l := &t.Links[k]; l.A.Node != r.Node && l.B.Node != r.Node {
			continue
		}
		key := [2]int{x, d}
		if _, set := h.toNode[key]; set && !r.Dst.Addr().Is4() {
			continue // the IPv4 route decides
		}
		h.toNode[key] = givenHop{link: k}
	}
	return h
}

// forwarding is every node's next hop towards every destination: the
// given one where there is one, else the computed one.
type forwarding struct {
	g     *graph
	given givenHops
	trees []*tree // by destination node, computed when first needed
}

func newForwarding(g *graph, given givenHops) *forwarding {
	return &forwarding{g: g, given: given, trees: make([]*tree, len(g.t.Nodes))}
}

func (f *forwarding) tree(d int) *tree {
	if f.trees[d] == nil {
		tr := f.g.toward(d, nil, false)
		f.trees[d] = &tr
	}
	return f.trees[d]
}

// leave returns the arc by which node x leaves on link k.
func (f *forwarding) leave(x, k int) arc {
	l := &f.g.t.Links[k]
	peer := l.B.Node
	if l.B.Node == f.g.t.Nodes[x].Name {
		peer = l.A.Node
	}
	return arc{k, f.g.index[peer]}
}

// nextToNode returns x's next hop towards node d, and the line of the
// route in the file that gives it when that differs from the computed
// one (else 0: only such routes can make traffic loop or stray).
func (f *forwarding) nextToNode(x, d int) (arc, int) {
	h, ok := f.given.toNode[[2]int{x, d}]
	if !ok {
		return f.tree(d).next[x], 0
	}
	return f.pick(x, h, func() arc { return f.tree(d).next[x] })
}

// nextToLink returns x's next hop towards the subnets of link k, as
// nextToNode does. The computed one leads towards the nearer end of the
// link (end A on a tie).
func (f *forwarding) nextToLink(x, k int) (arc, int) {
	computed := func() arc {
		l := &f.g.t.Links[k]
		ta, tb := f.tree(f.g.index[l.A.Node]), f.tree(f.g.index[l.B.Node])
		if !ta.reached[x] || (tb.reached[x] && tb.dist[x].less(ta.dist[x])) {
			return tb.next[x]
		}
		return ta.next[x]
	}
	h, ok := f.given.toLink[[2]int{x, k}]
	if !ok {
		return computed(), 0
	}
	return f.pick(x, h, computed)
}

// pick returns the given next hop h of node x and its line, the line
// only when h differs from the computed next hop.
func (f *forwarding) pick(x int, h givenHop, computed func() arc) (arc, int) {
	a := f.leave(x, h.link)
	if h.line == 0 || a == computed() {
		return a, 0
	}
	return a, h.line
}

// How a walk along next hops ends.
type walkEnd int

const (
	arrived walkEnd = iota
	looped          // back at a node it passed
	stuck           // at a node with no next hop
	hostHop         // at a host that would have to forward
)

// walk is the way traffic goes from one node, hop by hop.
type walk struct {
	nodes []int // from the source to where it ended (a loop repeats a node)
	hops  []Hop
	lines []int // the lines of the given routes it used, in order, once each
	end   walkEnd
}

// follow walks from src along next until arrive says it is there.
func (f *forwarding) follow(src int, arrive func(int) bool, next func(int) (arc, int)) walk {
	t := f.g.t
	w := walk{nodes: []int{src}}
	seen := map[int]bool{src: true}
	for x := src; ; {
		if arrive(x) {
			w.end = arrived
			return w
		}
		if x != src && !f.g.forwards(x) {
			w.end = hostHop
			return w
		}
		a, line := next(x)
		if a.link < 0 {
			w.end = stuck
			return w
		}
		if line > 0 && !slices.Contains(w.lines, line) {
			w.lines = append(w.lines, line)
		}
		w.hops = append(w.hops, Hop{Link: t.Links[a.link].Name, From: t.Nodes[x].Name, To: t.Nodes[a.peer].Name})
		w.nodes = append(w.nodes, a.peer)
		if seen[a.peer] {
			w.end = looped
			return w
		}
		seen[a.peer] = true
		x = a.peer
	}
}

// toNode walks from node src towards node d.
func (f *forwarding) toNode(src, d int) walk {
	return f.follow(src, func(x int) bool { return x == d }, func(x int) (arc, int) { return f.nextToNode(x, d) })
}

// toLink walks from node src towards the subnets of link k, until it
// reaches a node on the link.
func (f *forwarding) toLink(src, k int) walk {
	l := &f.g.t.Links[k]
	a, b := f.g.index[l.A.Node], f.g.index[l.B.Node]
	return f.follow(src, func(x int) bool { return x == a || x == b }, func(x int) (arc, int) { return f.nextToLink(x, k) })
}

// explain says why a walk did not arrive: "the routes loop: a1 -> ra ->
// a1".
func (w walk) explain(t *Topology) string {
	names := make([]string, len(w.nodes))
	for i, x := range w.nodes {
		names[i] = t.Nodes[x].Name
	}
	way := strings.Join(names, " -> ")
	last := names[len(names)-1]
	switch w.end {
	case looped:
		return "the routes loop: " + way
	case hostHop:
		return fmt.Sprintf("the routes pass through host %q, which does not forward: %s", last, way)
	case stuck:
		return fmt.Sprintf("the routes end at node %q, which has no route there: %s", last, way)
	}
	return "the routes arrive: " + way
}

// forward checks, when the file gives routes, that following the next
// hops from node to node, as the kernels will, still takes every node to
// every other node and to the subnets of every link: without a loop, and
// forwarding only through routers. Problems that the same routes cause
// are reported once, at the first of those routes, with the first pair
// of nodes they fail.
func (p *parser) forward() {
	if len(p.given.toNode) == 0 && len(p.given.toLink) == 0 {
		return
	}
	t := p.t
	f := newForwarding(newGraph(t), p.given)
	type problem struct {
		line int
		msg  string
		more int
	}
	var problems []*problem
	byLines := map[string]*problem{}
	check := func(w walk, from int, to string) {
		if w.end == arrived {
			return
		}
		key := fmt.Sprint(slices.Sorted(slices.Values(w.lines)))
		if pr := byLines[key]; pr != nil {
			pr.more++
			return
		}
		// Computed next hops always arrive, so some given route is to
		// blame; the guard only keeps a mistake here from panicking.
		line, which := p.routes[0].line, "the routes given"
		if len(w.lines) > 0 {
			lines := make([]string, len(w.lines))
			for i, l := range w.lines {
				lines[i] = strconv.Itoa(l)
			}
			line, which = w.lines[0], "the route at line "+lines[0]
			if len(lines) > 1 {
				which = "the routes at lines " + strings.Join(lines, ", ")
			}
		}
		pr := &problem{
			line: line,
			msg:  fmt.Sprintf("from node %q to %s %s (%s", t.Nodes[from].Name, to, w.explain(t), which),
		}
		byLines[key] = pr
		problems = append(problems, pr)
	}
	for s := range t.Nodes {
		for d := range t.Nodes {
			if d != s {
				check(f.toNode(s, d), s, fmt.Sprintf("node %q", t.Nodes[d].Name))
			}
		}
		for k, l := range t.Links {
			if l.A.Node != t.Nodes[s].Name && l.B.Node != t.Nodes[s].Name {
				check(f.toLink(s, k), s, fmt.Sprintf("the subnets of link %q", l.Name))
			}
		}
	}
	for _, pr := range problems {
		switch pr.more {
		case 0:
		case 1:
			pr.msg += "; so does 1 more pair of source and destination"
		default:
			pr.msg += fmt.Sprintf("; so do %d more pairs of source and destination", pr.more)
		}
		p.errorf(pr.line, "%s)", pr.msg)
	}
}
