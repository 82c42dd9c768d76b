package reserve

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Brute-force references for the property tests: they know nothing of
// timelines or labels, only the bookings and every simple path.

// bruteUsed returns the bandwidth booked on direction h at instant x.
func bruteUsed(books []Booking, h Hop, x time.Time) uint64 {
	var u uint64
	for _, b := range books {
		if x.Before(b.Start) || !x.Before(b.End) {
			continue
		}
		for _, p := range b.Path {
			if p == h {
				u += b.Bandwidth
			}
		}
	}
	return u
}

// bruteResidual returns the least free on h over [s, e), sampling s and
// every booking's start and end inside the interval: the step function only
// changes there.
func bruteResidual(g *Graph, books []Booking, h Hop, s, e time.Time) uint64 {
	c, err := g.ReservableCapacity(h)
	if err != nil {
		panic(err)
	}
	worst := bruteUsed(books, h, s)
	for _, b := range books {
		for _, x := range []time.Time{b.Start, b.End} {
			if x.After(s) && x.Before(e) {
				worst = max(worst, bruteUsed(books, h, x))
			}
		}
	}
	return c - min(c, worst)
}

// bruteAdmit is Admit by brute force.
func bruteAdmit(g *Graph, books []Booking, path []Hop, bw uint64, s, e time.Time) bool {
	for _, h := range path {
		if bruteResidual(g, books, h, s, e) < bw {
			return false
		}
	}
	return true
}

// bruteKey ranks paths as FixedSlot does under a preference.
type bruteKey struct {
	pref      PathPreference
	hops      int
	delay     time.Duration
	dedicated int
	names     []string
}

func bruteKeyOf(g *Graph, p []Hop, pref PathPreference) bruteKey {
	k := bruteKey{pref: pref, hops: len(p)}
	for _, h := range p {
		l, _ := g.Link(h.Link)
		k.delay += l.Delay
		if l.Role == LinkDedicated {
			k.dedicated++
		}
		k.names = append(k.names, h.Link)
	}
	return k
}

// compare orders paths: under dedicated by routed hops, hops, delay; under
// routed by hops, delay, dedicated hops; under shortest by hops, delay;
// then by link names in sequence.
func (a bruteKey) compare(b bruteKey) int {
	var ka, kb []int64
	switch a.pref {
	case PreferRouted:
		ka = []int64{int64(a.hops), int64(a.delay), int64(a.dedicated)}
		kb = []int64{int64(b.hops), int64(b.delay), int64(b.dedicated)}
	case PreferShortest:
		ka = []int64{int64(a.hops), int64(a.delay)}
		kb = []int64{int64(b.hops), int64(b.delay)}
	default:
		ka = []int64{int64(a.hops - a.dedicated), int64(a.hops), int64(a.delay)}
		kb = []int64{int64(b.hops - b.dedicated), int64(b.hops), int64(b.delay)}
	}
	if c := slices.Compare(ka, kb); c != 0 {
		return c
	}
	return slices.Compare(a.names, b.names)
}

// allPaths returns every simple path from src to dst with only routers in
// between.
func allPaths(g *Graph, src, dst string) [][]Hop {
	var out [][]Hop
	var walk func(at string, p []Hop, seen map[string]bool)
	walk = func(at string, p []Hop, seen map[string]bool) {
		if at == dst {
			out = append(out, slices.Clone(p))
			return
		}
		if at != src {
			if r, _ := g.Role(at); r != NodeRouter {
				return
			}
		}
		for _, l := range g.Links() {
			var to string
			switch at {
			case l.A:
				to = l.B
			case l.B:
				to = l.A
			default:
				continue
			}
			if seen[to] {
				continue
			}
			seen[to] = true
			walk(to, append(p, Hop{l.Name, at, to}), seen)
			delete(seen, to)
		}
	}
	walk(src, nil, map[string]bool{src: true})
	return out
}

// pathFits reports whether bw is free on every hop of p over [s, e).
func pathFits(g *Graph, books []Booking, p []Hop, bw uint64, s, e time.Time) bool {
	return bruteAdmit(g, books, p, bw, s, e)
}

// pathWidth returns the least residual along p over [s, e).
func pathWidth(g *Graph, books []Booking, p []Hop, s, e time.Time) uint64 {
	w := uint64(1<<64 - 1)
	for _, h := range p {
		w = min(w, bruteResidual(g, books, h, s, e))
	}
	return w
}

// randomGraph returns a small random topology: routers r1..r4 (or more),
// hosts h1..h3 with one or two uplinks, sometimes a host x between two
// routers (which must never be passed through), parallel links, a mix of
// routed and dedicated. Capacities are small integers (reservable 1) so
// that equalities are frequent.
func randomGraph(rng *rand.Rand) (*Graph, []string) {
	nodes := map[string]string{}
	routers := 3 + rng.IntN(3)
	for i := range routers {
		nodes[fmt.Sprintf("r%d", i+1)] = NodeRouter
	}
	hosts := []string{"h1", "h2", "h3"}
	for _, h := range hosts {
		nodes[h] = NodeHost
	}
	var links []Link
	add := func(a, b string) {
		l := Link{Name: fmt.Sprintf("l%02d", len(links)+1), A: a, B: b, Capacity: uint64(4 + rng.IntN(8)), Reservable: 1,
			Delay: time.Duration(1+rng.IntN(3)) * time.Millisecond, Role: LinkRouted}
		if rng.IntN(3) == 0 {
			l.Role = LinkDedicated
		}
		links = append(links, l)
	}
	router := func() string { return fmt.Sprintf("r%d", 1+rng.IntN(routers)) }
	for i := 1; i < routers; i++ {
		add(fmt.Sprintf("r%d", i+1), fmt.Sprintf("r%d", 1+rng.IntN(i)))
	}
	for range rng.IntN(5) {
		a, b := router(), router()
		if a != b {
			add(a, b)
		}
	}
	for _, h := range hosts {
		add(h, router())
		if rng.IntN(3) == 0 {
			add(router(), h)
		}
	}
	if rng.IntN(2) == 0 {
		nodes["x"] = NodeHost
		add("x", router())
		add(router(), "x")
	}
	g, err := NewGraph(nodes, links)
	if err != nil {
		panic(err)
	}
	return g, hosts
}

// randomBookings books up to n random bookings on random paths of g at
// random whole minutes in [0, 60), and returns those admitted.
func randomBookings(t *testing.T, rng *rand.Rand, s *Schedule, hosts []string, n int) []Booking {
	t.Helper()
	g := s.Graph()
	var books []Booking
	ends := slices.Clone(hosts)
	for _, name := range g.Nodes() {
		if r, _ := g.Role(name); r == NodeRouter {
			ends = append(ends, name)
		}
	}
	for i := range n {
		a, b := ends[rng.IntN(len(ends))], ends[rng.IntN(len(ends))]
		if a == b {
			continue
		}
		paths := allPaths(g, a, b)
		if len(paths) == 0 {
			continue
		}
		m := rng.IntN(60)
		bk := Booking{ID: fmt.Sprintf("b%d", i), Path: paths[rng.IntN(len(paths))], Bandwidth: uint64(1 + rng.IntN(5)),
			Start: at(m), End: at(m + 1 + rng.IntN(20))}
		want := bruteAdmit(g, books, bk.Path, bk.Bandwidth, bk.Start, bk.End)
		err := s.Add(bk)
		if (err == nil) != want {
			t.Fatalf("Add(%+v) = %v, brute force admits: %v", bk, err, want)
		}
		if err == nil {
			books = append(books, bk)
		}
	}
	return books
}
