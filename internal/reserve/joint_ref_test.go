package reserve

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// The reference for the joint planner (issue 29): R*(W) as a linear
// program over path variables, solved by gonum's simplex, and T* by brute
// force over every booking's start and end. It knows nothing of the
// planner's max-flow nor of the timelines: capacities come from the
// bookings (bruteResidual), paths from a depth-first enumeration.

// refPath is a path a job may use: its source, destination and hops.
type refPath struct {
	from, to string
	hops     []Hop
}

// refPaths enumerates every simple path from a source to a destination
// whose inner nodes are routers.
func refPaths(g *Graph, sources, destinations []Endpoint) []refPath {
	dst := map[string]bool{}
	for _, d := range destinations {
		dst[d.Node] = true
	}
	var out []refPath
	var walk func(from, at string, seen map[string]bool, hops []Hop)
	walk = func(from, at string, seen map[string]bool, hops []Hop) {
		for _, l := range g.Links() {
			var next string
			switch at {
			case l.A:
				next = l.B
			case l.B:
				next = l.A
			default:
				continue
			}
			if seen[next] {
				continue
			}
			h := append(slices.Clip(hops), Hop{Link: l.Name, From: at, To: next})
			if dst[next] {
				out = append(out, refPath{from, next, h})
			}
			if role, _ := g.Role(next); role == NodeRouter {
				seen[next] = true
				walk(from, next, seen, h)
				delete(seen, next)
			}
		}
	}
	for _, s := range sources {
		walk(s.Node, s.Node, map[string]bool{s.Node: true}, nil)
	}
	return out
}

// refRate solves max Σ r_p subject to Σ_{p∋e} r_p ≤ c(e) for every
// direction e a path uses, Σ of a node's paths ≤ its max rate, r ≥ 0, in
// standard form with a slack per row (the slacks are a feasible first
// basis, capacities being ≥ 0). Rates are in Gbit/s inside the LP, for
// its tolerances.
func refRate(paths []refPath, sources, destinations []Endpoint, c func(Hop) uint64) (float64, error) {
	if len(paths) == 0 {
		return 0, nil
	}
	type row struct {
		cols []int
		cap  float64
	}
	var rows []row
	dirRow := map[Hop]int{}
	for j, p := range paths {
		for _, h := range p.hops {
			i, ok := dirRow[h]
			if !ok {
				i = len(rows)
				dirRow[h] = i
				rows = append(rows, row{cap: float64(c(h)) / 1e9})
			}
			rows[i].cols = append(rows[i].cols, j)
		}
	}
	for _, set := range [][]Endpoint{sources, destinations} {
		for _, ep := range set {
			if ep.MaxRate == 0 {
				continue
			}
			r := row{cap: float64(ep.MaxRate) / 1e9}
			for j, p := range paths {
				if p.from == ep.Node || p.to == ep.Node {
					r.cols = append(r.cols, j)
				}
			}
			if len(r.cols) > 0 {
				rows = append(rows, r)
			}
		}
	}
	n, m := len(paths), len(rows)
	a := mat.NewDense(m, n+m, nil)
	b := make([]float64, m)
	obj := make([]float64, n+m)
	basis := make([]int, m)
	for i, r := range rows {
		for _, j := range r.cols {
			a.Set(i, j, 1)
		}
		a.Set(i, n+i, 1)
		b[i] = r.cap
		basis[i] = n + i
	}
	for j := range n {
		obj[j] = -1
	}
	opt, _, err := lp.Simplex(obj, a, b, 1e-12, basis)
	if err != nil {
		return 0, err
	}
	return -opt * 1e9, nil
}

// refCase is one random case: a two-site topology, bookings, and a job.
type refCase struct {
	g            *Graph
	s            *Schedule
	books        []Booking
	sources      []Endpoint
	destinations []Endpoint
	size         uint64
	eta          float64
	t0           time.Time
	sigma        time.Duration
	desc         string
}

// genRefCase draws a case from seed, in the manner of GenerateWorkload:
// two sites, each with 1 to 4 data nodes of the job (and one other host
// that books too) on access links of 1, 4 or 10 Gbit/s, some behind a
// second site router; between the sites a routed path (direct, or through
// a core router), and maybe a dedicated circuit (direct, through the core
// so that it shares a link with the routed path, or between the second
// routers: a separate path), and maybe a second routed path; node max
// rates on some data nodes; 0 to 8 bookings of other traffic around the
// submission.
func genRefCase(seed uint64) (*refCase, error) {
	rng := rand.New(rand.NewPCG(seed, 0x6a6f696e74)) // "joint"
	pick := func(xs ...uint64) uint64 { return xs[rng.IntN(len(xs))] }
	nodes := map[string]string{"ra": NodeRouter, "rb": NodeRouter}
	var links []Link
	var desc []string
	link := func(name, a, b string, c uint64, dedicated bool) {
		l := Link{Name: name, A: a, B: b, Capacity: c, Reservable: 0.9, Delay: time.Millisecond}
		if dedicated {
			l.Role, l.Reservable = LinkDedicated, 1
		}
		links = append(links, l)
	}
	second := rng.IntN(2) == 0 // second routers ra2 and rb2
	if second {
		nodes["ra2"], nodes["rb2"] = NodeRouter, NodeRouter
		link("ra-ra2", "ra", "ra2", pick(10e9, 40e9), false)
		link("rb-rb2", "rb", "rb2", pick(10e9, 40e9), false)
	}
	core := rng.IntN(2) == 0
	if core {
		nodes["rc"] = NodeRouter
		link("ra-rc", "ra", "rc", pick(500e6, 1e9, 2e9), false)
		link("rc-rb", "rc", "rb", pick(500e6, 1e9, 2e9, 10e9), false)
		desc = append(desc, "routed via core")
	} else {
		link("wan", "ra", "rb", pick(500e6, 1e9, 2e9), false)
		desc = append(desc, "routed direct")
	}
	switch k := rng.IntN(4); {
	case k == 0:
		desc = append(desc, "no circuit")
	case k == 1 && core:
		link("circ", "ra", "rc", pick(1e9, 2e9), true) // shares rc-rb with the routed path
		desc = append(desc, "circuit sharing a link")
	case k == 2 && second:
		link("circ", "ra2", "rb2", pick(1e9, 2e9, 10e9), true) // a path of its own
		desc = append(desc, "separate circuit")
	default:
		link("circ", "ra", "rb", pick(1e9, 2e9, 10e9), true)
		desc = append(desc, "direct circuit")
	}
	if rng.IntN(4) == 0 {
		nodes["rd"] = NodeRouter
		link("ra-rd", "ra", "rd", pick(300e6, 1e9), false)
		link("rd-rb", "rd", "rb", pick(300e6, 1e9), false)
		desc = append(desc, "second routed path")
	}
	site := func(prefix string, n int) []Endpoint {
		var eps []Endpoint
		for i := range n + 1 {
			name := fmt.Sprintf("%s%d", prefix, i+1)
			if i == n {
				name = prefix + "x" // another user's host
			}
			nodes[name] = NodeHost
			r := "r" + prefix
			if second && rng.IntN(2) == 0 {
				r += "2"
			}
			link(name+"-"+r, name, r, pick(1e9, 4e9, 10e9), false)
			if i < n {
				ep := Endpoint{Node: name}
				if rng.IntN(4) == 0 {
					ep.MaxRate = pick(200e6, 500e6, 1e9, 3e9)
				}
				eps = append(eps, ep)
			}
		}
		return eps
	}
	na, nb := 1+rng.IntN(4), 1+rng.IntN(4)
	c := &refCase{sources: site("a", na), destinations: site("b", nb)}
	desc = append(desc, fmt.Sprintf("%d→%d nodes", na, nb))
	// Now and then a router sends or receives too: it forwards the
	// others' flows besides its own.
	if second && rng.IntN(6) == 0 {
		c.sources = append(c.sources, Endpoint{Node: "ra2", MaxRate: pick(0, 1e9)})
		desc = append(desc, "a router source")
	}
	if second && rng.IntN(6) == 0 {
		c.destinations = append(c.destinations, Endpoint{Node: "rb2", MaxRate: pick(0, 1e9)})
		desc = append(desc, "a router destination")
	}
	var err error
	if c.g, err = NewGraph(nodes, links); err != nil {
		return nil, err
	}
	c.s = NewSchedule(c.g)
	// Submission at a whole second, or not.
	c.t0 = WorkloadEpoch.Add(time.Duration(rng.IntN(3600)) * time.Second)
	if rng.IntN(2) == 0 {
		c.t0 = c.t0.Add(time.Duration(rng.Int64N(int64(time.Second))))
	}
	hosts := c.g.Nodes()
	hosts = slices.DeleteFunc(hosts, func(n string) bool { r, _ := c.g.Role(n); return r != NodeHost })
	// Other users' transfers that fill the widest path between the sites
	// from before the submission for a while: waiting for their end may
	// be worth it.
	for range rng.IntN(3) {
		start := c.t0.Add(-time.Minute)
		end := c.t0.Add(time.Duration(1+rng.IntN(120)) * time.Second)
		r, err := c.s.WidestPath("ax", "bx", start, end)
		if err != nil {
			break
		}
		b := Booking{ID: fmt.Sprintf("b%d", len(c.books)+1), Path: r.Path, Bandwidth: r.Bandwidth, Start: start, End: end}
		if err := c.s.Add(b); err != nil {
			return nil, err
		}
		c.books = append(c.books, b)
	}
	nb2 := len(c.books) + rng.IntN(9)
	for tries := 0; len(c.books) < nb2 && tries < 100; tries++ {
		from, to := hosts[rng.IntN(len(hosts))], hosts[rng.IntN(len(hosts))]
		if from == to {
			continue
		}
		start := c.t0.Add(time.Duration(rng.IntN(240)-60) * time.Second)
		if rng.IntN(3) == 0 {
			start = start.Add(time.Duration(rng.Int64N(int64(time.Second))))
		}
		end := start.Add(time.Duration(5+rng.IntN(180)) * time.Second)
		bw := pick(100e6, 300e6, 450e6, 1e9, 2e9)
		r, err := c.s.FixedSlot(Request{From: from, To: to, Bandwidth: bw, Start: start, End: end})
		if err != nil {
			continue
		}
		b := Booking{ID: fmt.Sprintf("b%d", len(c.books)+1), Path: r.Path, Bandwidth: bw, Start: start, End: end}
		if err := c.s.Add(b); err != nil {
			return nil, err
		}
		c.books = append(c.books, b)
	}
	desc = append(desc, fmt.Sprintf("%d bookings", len(c.books)))
	c.size = uint64(100e6 + rng.Int64N(20e9))
	c.eta = []float64{1, 0.9, 0.75, 0.5 + rng.Float64()/2}[rng.IntN(4)]
	c.sigma = []time.Duration{0, 5 * time.Second, 30 * time.Second, time.Duration(rng.Int64N(int64(time.Minute)))}[rng.IntN(4)]
	c.desc = strings.Join(desc, ", ")
	return c, nil
}

// refCaps returns c_e(W) for every direction, from the bookings.
func (c *refCase) refCaps(start, end time.Time) func(Hop) uint64 {
	memo := map[Hop]uint64{}
	return func(h Hop) uint64 {
		if v, ok := memo[h]; ok {
			return v
		}
		v := bruteResidual(c.g, c.books, h, start, end)
		memo[h] = v
		return v
	}
}

// refT returns T* − t0 in nanoseconds (real-valued): for every start s in
// {t0+σ} ∪ the bookings' starts and ends after it, and every segment of
// ends (b_k, b_k+1] between consecutive such instants, R* of the segment
// is the LP over [s, b_k] (the window's capacities do not change inside a
// segment) and the end s + 8·Size/(η·R*) counts if it falls in the
// segment. Also returns R* at the optimum.
func (c *refCase) refT(paths []refPath) (float64, float64, error) {
	lo := c.t0.Add(c.sigma)
	var marks []time.Time
	for _, b := range c.books {
		for _, x := range []time.Time{b.Start, b.End} {
			if x.After(lo) {
				marks = append(marks, x)
			}
		}
	}
	slices.SortFunc(marks, func(a, b time.Time) int { return a.Compare(b) })
	marks = slices.CompactFunc(marks, func(a, b time.Time) bool { return a.Equal(b) })
	memo := map[string]float64{}
	rate := func(start, end time.Time) (float64, error) {
		caps := c.refCaps(start, end)
		var key strings.Builder
		for _, p := range paths {
			for _, h := range p.hops {
				fmt.Fprintf(&key, "%d,", caps(h))
			}
		}
		if r, ok := memo[key.String()]; ok {
			return r, nil
		}
		r, err := refRate(paths, c.sources, c.destinations, caps)
		memo[key.String()] = r
		return r, err
	}
	bits := 8 * float64(c.size) / c.eta
	best, bestR := math.Inf(1), 0.0
	for i := -1; i < len(marks); i++ {
		s := lo
		if i >= 0 {
			s = marks[i]
		}
		bk := s // the segment's start: ends in (bk, next]
		for k := i + 1; ; k++ {
			r, err := rate(s, bk.Add(1))
			if err != nil {
				return 0, 0, err
			}
			if r <= 0 {
				break // less free only as the window grows
			}
			end := float64(s.Sub(c.t0)) + bits/r*1e9
			if k >= len(marks) || end <= float64(marks[k].Sub(c.t0)) {
				if end < best {
					best, bestR = end, r
				}
				break
			}
			bk = marks[k]
		}
	}
	return best, bestR, nil
}

// The planner against the reference on seeded random cases (issue 29,
// item 1): (a) no direction over c_e(W), node max rates kept; (b) R equal
// to the LP's R*; (c) T_p − t0 ≤ 1.02·(T* − t0); (d) a deadline at or
// after T* admitted, one before it refused with a completion no later
// than T*.
func TestJointAgainstLP(t *testing.T) {
	const cases = 240
	worst, admitted, refused, waited, multi := 0.0, 0, 0, 0, 0
	kinds := map[string]int{}
	for seed := range uint64(cases) {
		c, err := genRefCase(seed)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, k := range strings.Split(c.desc, ", ") {
			if !strings.Contains(k, "nodes") && !strings.Contains(k, "bookings") {
				kinds[k]++
			}
		}
		paths := refPaths(c.g, c.sources, c.destinations)
		tstar, rstar, err := c.refT(paths)
		if err != nil {
			t.Fatalf("seed %d (%s): the reference: %v", seed, c.desc, err)
		}
		q := JointQuery{Sources: c.sources, Destinations: c.destinations, Size: c.size, Goodput: c.eta,
			Submitted: c.t0, StartUp: c.sigma}
		p, err := c.s.JointEarliestCompletion(q)
		if math.IsInf(tstar, 1) {
			if !errors.Is(err, ErrNoPath) {
				t.Errorf("seed %d (%s): no completion in the reference, the planner: %+v, %v", seed, c.desc, p, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("seed %d (%s): %v", seed, c.desc, err)
		}
		// (a), and the plan is bookable: every flow as a booking, all
		// admitted together.
		checkPlan(t, c.s, q, p)
		caps := c.refCaps(p.Start, p.End)
		perDir := map[Hop]uint64{}
		for _, f := range p.Flows {
			for _, h := range f.Path {
				perDir[h] += f.Rate
			}
		}
		for h, r := range perDir {
			if r > caps(h) {
				t.Errorf("seed %d (%s): %s: %d bit/s planned, %d free by the bookings", seed, c.desc, h, r, caps(h))
			}
		}
		s2 := NewSchedule(c.g)
		for _, b := range c.books {
			if err := s2.Add(b); err != nil {
				t.Fatal(err)
			}
		}
		for i, f := range p.Flows {
			if err := s2.Add(Booking{ID: fmt.Sprintf("p%d", i), Path: f.Path, Bandwidth: f.Rate, Start: p.Start, End: p.End}); err != nil {
				t.Errorf("seed %d (%s): flow %d of the plan is not admitted: %v", seed, c.desc, i, err)
			}
		}
		// (b) on the plan's window, and on a random window.
		rlp, err := refRate(paths, c.sources, c.destinations, caps)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(p.Rate)-rlp) > 1+1e-9*rlp {
			t.Errorf("seed %d (%s): the planner's R %d, the LP's %.3f over [%s, %s)", seed, c.desc, p.Rate, rlp, p.Start, p.End)
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		ws := c.t0.Add(time.Duration(rng.Int64N(int64(4 * time.Minute))))
		we := ws.Add(1 + time.Duration(rng.Int64N(int64(3*time.Minute))))
		rw, err := refRate(paths, c.sources, c.destinations, c.refCaps(ws, we))
		if err != nil {
			t.Fatal(err)
		}
		fp, err := c.s.JointFixedSlot(c.sources, c.destinations, ws, we)
		if err != nil && !errors.Is(err, ErrNoPath) {
			t.Fatal(err)
		}
		if math.Abs(float64(fp.Rate)-rw) > 1+1e-9*rw {
			t.Errorf("seed %d (%s): over [%s, %s) the planner's R %d, the LP's %.3f", seed, c.desc, ws, we, fp.Rate, rw)
		}
		// (c), and never better than the optimum (that would be a
		// reference or a plan that does not fit).
		if p.Start.After(c.t0.Add(c.sigma)) {
			waited++
		}
		wan := map[string]bool{}
		for _, f := range p.Flows {
			for _, h := range f.Path {
				if !strings.Contains(h.Link, "-") || strings.HasPrefix(h.Link, "ra-r") || strings.HasPrefix(h.Link, "rc-") || strings.HasPrefix(h.Link, "rd-") {
					wan[h.Link] = true
				}
			}
		}
		if len(wan) > 1 {
			multi++
		}
		tp := float64(p.End.Sub(c.t0))
		ratio := tp / tstar
		worst = max(worst, ratio)
		if tp > 1.02*tstar {
			t.Errorf("seed %d (%s): T_p − t0 = %s, T* − t0 = %.0f ns: ratio %.4f", seed, c.desc, p.End.Sub(c.t0), tstar, ratio)
		}
		if tp < tstar*(1-1e-9)-1 {
			t.Errorf("seed %d (%s): T_p − t0 = %s beats T* − t0 = %.0f ns (R* %.0f)", seed, c.desc, p.End.Sub(c.t0), tstar, rstar)
		}
		// (d): a deadline drawn around T* (at least a microsecond away
		// from it, the reference being floating point).
		off := (rng.Float64() - 0.5) * 0.4 * tstar
		if math.Abs(off) < 1e3 {
			off = math.Copysign(1e3, off)
		}
		q.Deadline = c.t0.Add(time.Duration(tstar + off))
		p2, err := c.s.JointEarliestCompletion(q)
		if off > 0 {
			admitted++
			if err != nil || p2.End.After(q.Deadline) {
				t.Errorf("seed %d (%s): T* − t0 = %.0f ns, deadline − t0 = %s: refused: %v", seed, c.desc, tstar, q.Deadline.Sub(c.t0), err)
			}
		} else {
			refused++
			var ie *InfeasibleError
			if !errors.As(err, &ie) {
				t.Errorf("seed %d (%s): T* − t0 = %.0f ns, deadline − t0 = %s: err = %v, want an *InfeasibleError", seed, c.desc, tstar, q.Deadline.Sub(c.t0), err)
			} else if float64(ie.Earliest.Sub(c.t0)) > tstar+1 { // + the rounding up to the ns
				t.Errorf("seed %d (%s): refused with the earliest completion at t0 + %s, T* at t0 + %.0f ns", seed, c.desc, ie.Earliest.Sub(c.t0), tstar)
			}
		}
	}
	t.Logf("%d cases (%v): worst (T_p − t0)/(T* − t0) = %.12f; %d plans start after t0+σ, %d use several inter-site links; %d deadlines after T* admitted, %d before it refused",
		cases, kinds, worst, waited, multi, admitted, refused)
}
