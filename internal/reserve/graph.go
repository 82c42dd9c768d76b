package reserve

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Roles of nodes and links, spelled as in the testbed's topology file.
const (
	NodeHost   = "host"   // a node that sends and receives but never forwards
	NodeRouter = "router" // a node that forwards

	LinkRouted    = "routed"    // a link of the ordinary routed network (the default)
	LinkDedicated = "dedicated" // a link set aside for reserved traffic
)

// Errors of the graph and of paths, for errors.Is.
var (
	ErrUnknownNode = errors.New("unknown node")
	ErrUnknownLink = errors.New("unknown link")
	ErrInvalidPath = errors.New("invalid path")
)

// Link is one link of the topology as plain values, so that the scheduler
// does not depend on the testbed package. Each link is two directions, A to
// B and B to A, each with Capacity bits per second of which the fraction
// Reservable may be booked.
type Link struct {
	Name       string
	A, B       string        // the nodes at its ends
	Capacity   uint64        // bits per second, in each direction
	Reservable float64       // the fraction of Capacity that may be booked, in (0, 1]
	Delay      time.Duration // one-way delay
	Role       string        // LinkRouted (or empty) or LinkDedicated
	// Prefer, when set, overrides the role for path choice alone (the
	// topology file's prefer): true counts the link as a circuit that
	// reservations take first, false as the routed network's. Routing and
	// everything else still follow Role.
	Prefer *bool
}

// Hop is one directed step of a path: over link Link from node From to
// node To, which must be the link's two ends in either order.
type Hop struct {
	Link     string
	From, To string
}

// String formats a hop as "link (from > to)".
func (h Hop) String() string { return h.Link + " (" + h.From + " > " + h.To + ")" }

// Graph is the topology as the scheduler sees it: nodes, and links as pairs
// of directions with their reservable capacities. It is immutable once built
// and safe for concurrent use.
type Graph struct {
	names  []string       // node names, sorted: a node's index is its rank
	index  map[string]int // node name → index
	router []bool         // per node: does it forward?

	links     []Link         // sorted by name: a link's index is its rank
	linkIndex map[string]int // link name → index
	dirs      []dir          // 2·i is links[i] from A to B, 2·i+1 from B to A
	adj       [][]int32      // per node, its outgoing directions in link-name order
}

// dir is one direction of a link.
type dir struct {
	link      int32
	from, to  int32
	capacity  uint64 // reservable bits per second: Capacity × Reservable, rounded down
	delay     time.Duration
	dedicated bool // for path choice: the role, or the link's Prefer
}

// NewGraph builds a Graph from nodes (each node's name and role, NodeHost
// or NodeRouter) and links. Every link must join two distinct known nodes,
// have a unique name, a positive capacity and a reservable fraction in
// (0, 1]; two links may join the same two nodes.
func NewGraph(nodes map[string]string, links []Link) (*Graph, error) {
	g := &Graph{
		names:     make([]string, 0, len(nodes)),
		index:     make(map[string]int, len(nodes)),
		linkIndex: make(map[string]int, len(links)),
	}
	for name, role := range nodes {
		if name == "" {
			return nil, errors.New("a node has an empty name")
		}
		if role != NodeHost && role != NodeRouter {
			return nil, fmt.Errorf("node %s: unknown role %q (want %s or %s)", name, role, NodeHost, NodeRouter)
		}
		g.names = append(g.names, name)
	}
	slices.Sort(g.names)
	g.router = make([]bool, len(g.names))
	for i, name := range g.names {
		g.index[name] = i
		g.router[i] = nodes[name] == NodeRouter
	}
	g.links = slices.Clone(links)
	for i := range g.links {
		if p := g.links[i].Prefer; p != nil { // not shared with the caller's
			v := *p
			g.links[i].Prefer = &v
		}
	}
	slices.SortFunc(g.links, func(a, b Link) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	g.adj = make([][]int32, len(g.names))
	g.dirs = make([]dir, 0, 2*len(g.links))
	for i := range g.links {
		l := &g.links[i]
		if l.Role == "" {
			l.Role = LinkRouted
		}
		if err := checkLink(l); err != nil {
			return nil, err
		}
		if _, dup := g.linkIndex[l.Name]; dup {
			return nil, fmt.Errorf("link %s: the name is used twice", l.Name)
		}
		g.linkIndex[l.Name] = i
		a, aok := g.index[l.A]
		b, bok := g.index[l.B]
		switch {
		case !aok:
			return nil, fmt.Errorf("link %s: %w %q", l.Name, ErrUnknownNode, l.A)
		case !bok:
			return nil, fmt.Errorf("link %s: %w %q", l.Name, ErrUnknownNode, l.B)
		case a == b:
			return nil, fmt.Errorf("link %s: both ends are %s", l.Name, l.A)
		}
		// Rounded down, so that admission never promises a bit more than the
		// htb tree (rate × reservable fraction) guarantees.
		c := uint64(math.Floor(float64(l.Capacity) * l.Reservable))
		c = min(c, l.Capacity)
		ded := l.Role == LinkDedicated
		if l.Prefer != nil {
			ded = *l.Prefer
		}
		g.adj[a] = append(g.adj[a], int32(len(g.dirs)))
		g.dirs = append(g.dirs, dir{link: int32(i), from: int32(a), to: int32(b), capacity: c, delay: l.Delay, dedicated: ded})
		g.adj[b] = append(g.adj[b], int32(len(g.dirs)))
		g.dirs = append(g.dirs, dir{link: int32(i), from: int32(b), to: int32(a), capacity: c, delay: l.Delay, dedicated: ded})
	}
	return g, nil
}

func checkLink(l *Link) error {
	switch {
	case l.Name == "":
		return fmt.Errorf("a link between %s and %s has an empty name", l.A, l.B)
	case l.Capacity == 0:
		return fmt.Errorf("link %s: the capacity must be above zero", l.Name)
	case !(l.Reservable > 0 && l.Reservable <= 1): // also refuses NaN
		return fmt.Errorf("link %s: reservable fraction %g: want above 0 and at most 1", l.Name, l.Reservable)
	case l.Delay < 0:
		return fmt.Errorf("link %s: negative delay %s", l.Name, l.Delay)
	case l.Role != LinkRouted && l.Role != LinkDedicated:
		return fmt.Errorf("link %s: unknown role %q (want %s or %s)", l.Name, l.Role, LinkRouted, LinkDedicated)
	}
	return nil
}

// Nodes returns the names of the nodes, sorted.
func (g *Graph) Nodes() []string { return slices.Clone(g.names) }

// Role returns a node's role (NodeHost or NodeRouter) and whether the node
// exists.
func (g *Graph) Role(node string) (string, bool) {
	i, ok := g.index[node]
	if !ok {
		return "", false
	}
	if g.router[i] {
		return NodeRouter, true
	}
	return NodeHost, true
}

// Links returns the links, sorted by name, with an empty role filled in as
// LinkRouted.
func (g *Graph) Links() []Link { return slices.Clone(g.links) }

// Link returns the link of that name and whether it exists.
func (g *Graph) Link(name string) (Link, bool) {
	i, ok := g.linkIndex[name]
	if !ok {
		return Link{}, false
	}
	return g.links[i], true
}

// ReservableCapacity returns the bits per second that may be booked in the
// direction h of its link: the capacity times the reservable fraction,
// rounded down.
func (g *Graph) ReservableCapacity(h Hop) (uint64, error) {
	d, err := g.dirOf(h)
	if err != nil {
		return 0, err
	}
	return g.dirs[d].capacity, nil
}

// dirOf returns the index of the direction h names.
func (g *Graph) dirOf(h Hop) (int, error) {
	i, ok := g.linkIndex[h.Link]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownLink, h.Link)
	}
	l := &g.links[i]
	switch {
	case h.From == l.A && h.To == l.B:
		return 2 * i, nil
	case h.From == l.B && h.To == l.A:
		return 2*i + 1, nil
	}
	return 0, fmt.Errorf("%w: link %s joins %s and %s, not %s and %s", ErrInvalidPath, h.Link, l.A, l.B, h.From, h.To)
}

// hop returns the Hop of direction d.
func (g *Graph) hop(d int32) Hop {
	x := &g.dirs[d]
	return Hop{Link: g.links[x.link].Name, From: g.names[x.from], To: g.names[x.to]}
}

// hops returns the Hops of directions ds.
func (g *Graph) hops(ds []int32) []Hop {
	p := make([]Hop, len(ds))
	for i, d := range ds {
		p[i] = g.hop(d)
	}
	return p
}

// node returns the index of a node, or an error naming what it is.
func (g *Graph) node(name, what string) (int, error) {
	if name == "" {
		return 0, fmt.Errorf("%w: the %s node is not given", ErrInvalidQuery, what)
	}
	i, ok := g.index[name]
	if !ok {
		return 0, fmt.Errorf("%w %q (the %s)", ErrUnknownNode, name, what)
	}
	return i, nil
}

// ValidatePath checks that path is a usable directed path: at least one
// hop, each over a known link between its two ends, each starting where the
// previous one ended, no node visited twice, and only routers in between
// (hosts do not forward). From and to, when not empty, must be its ends.
func (g *Graph) ValidatePath(from, to string, path []Hop) error {
	_, err := g.pathDirs(from, to, path)
	return err
}

// pathDirs validates path (see ValidatePath) and returns its directions.
func (g *Graph) pathDirs(from, to string, path []Hop) ([]int32, error) {
	if len(path) == 0 {
		return nil, fmt.Errorf("%w: no hops", ErrInvalidPath)
	}
	if from != "" && path[0].From != from {
		return nil, fmt.Errorf("%w: it starts at %s, not at %s", ErrInvalidPath, path[0].From, from)
	}
	if to != "" && path[len(path)-1].To != to {
		return nil, fmt.Errorf("%w: it ends at %s, not at %s", ErrInvalidPath, path[len(path)-1].To, to)
	}
	ds := make([]int32, len(path))
	seen := make(map[int32]bool, len(path)+1)
	for i, h := range path {
		d, err := g.dirOf(h)
		if err != nil {
			return nil, fmt.Errorf("hop %d: %w", i+1, err)
		}
		x := &g.dirs[d]
		if i > 0 && h.From != path[i-1].To {
			return nil, fmt.Errorf("%w: hop %d starts at %s but hop %d ended at %s", ErrInvalidPath, i+1, h.From, i, path[i-1].To)
		}
		if i == 0 {
			seen[x.from] = true
		} else if !g.router[x.from] {
			return nil, fmt.Errorf("%w: it passes through %s, a host (only routers forward)", ErrInvalidPath, h.From)
		}
		if seen[x.to] {
			return nil, fmt.Errorf("%w: it visits %s twice", ErrInvalidPath, h.To)
		}
		seen[x.to] = true
		ds[i] = int32(d)
	}
	return ds, nil
}
