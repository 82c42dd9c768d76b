package reserve

import (
	"errors"
	"math"
	"math/big"
	"slices"
	"testing"
	"time"
)

// sharedWAN is the layout of issue 29: three data nodes per site on
// 4 Gbit/s access links behind one routed 500 Mbit/s path (450 Mbit/s
// reservable) and one dedicated 1 Gbit/s circuit.
func sharedWAN(t *testing.T) *Graph {
	t.Helper()
	nodes := map[string]string{"er": NodeRouter, "wr": NodeRouter, "iso": NodeHost, "isor": NodeRouter}
	links := []Link{{Name: "iso-isor", A: "iso", B: "isor", Capacity: 1e9, Reservable: 1}} // an island
	for _, n := range []string{"1", "2", "3"} {
		nodes["e"+n], nodes["w"+n] = NodeHost, NodeHost
		links = append(links,
			Link{Name: "e" + n + "-er", A: "e" + n, B: "er", Capacity: 4e9, Reservable: 0.9},
			Link{Name: "w" + n + "-wr", A: "w" + n, B: "wr", Capacity: 4e9, Reservable: 0.9})
	}
	links = append(links,
		Link{Name: "wan", A: "er", B: "wr", Capacity: 500e6, Reservable: 0.9, Delay: 25 * time.Millisecond},
		Link{Name: "circuit", A: "er", B: "wr", Capacity: 1e9, Reservable: 1, Delay: 25 * time.Millisecond, Role: LinkDedicated})
	g, err := NewGraph(nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func eps(names ...string) []Endpoint {
	out := make([]Endpoint, len(names))
	for i, n := range names {
		out[i] = Endpoint{Node: n}
	}
	return out
}

var jt0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// checkPlan checks what every plan must be: valid paths, each rate above
// zero, their sum the plan's rate, within what is free over the window in
// every direction and within every node's max rate, and enough for the
// bytes.
func checkPlan(t *testing.T, s *Schedule, q JointQuery, p JointPlan) {
	t.Helper()
	g := s.Graph()
	var sum uint64
	perDir := map[Hop]uint64{}
	perNode := map[string]uint64{}
	for _, f := range p.Flows {
		if f.Rate == 0 {
			t.Errorf("flow %+v has a zero rate", f)
		}
		if err := g.ValidatePath(f.From, f.To, f.Path); err != nil {
			t.Errorf("flow %+v: %v", f, err)
		}
		sum += f.Rate
		perNode[f.From] += f.Rate
		perNode[f.To] += f.Rate
		for _, h := range f.Path {
			perDir[h] += f.Rate
		}
	}
	if sum != p.Rate {
		t.Errorf("the flows sum to %d bit/s, the plan says %d", sum, p.Rate)
	}
	if len(p.Flows) > 0 {
		for h, r := range perDir {
			c, err := s.MinResidual(h, p.Start, p.End)
			if err != nil {
				t.Fatal(err)
			}
			if r > c {
				t.Errorf("%s: %d bit/s planned, %d free over the window", h, r, c)
			}
		}
	}
	for _, ep := range append(append([]Endpoint(nil), q.Sources...), q.Destinations...) {
		if ep.MaxRate > 0 && perNode[ep.Node] > ep.MaxRate {
			t.Errorf("%s: %d bit/s planned, at most %d", ep.Node, perNode[ep.Node], ep.MaxRate)
		}
	}
	if p.Start.Before(q.Submitted.Add(q.StartUp)) {
		t.Errorf("the window starts at %s, before submission + start-up %s", p.Start, q.Submitted.Add(q.StartUp))
	}
	// Rate·η·(End − Start) ≥ 8·Size, exactly.
	got := new(big.Rat).SetFloat64(q.Goodput)
	got.Mul(got, new(big.Rat).SetInt64(int64(p.End.Sub(p.Start))))
	got.Mul(got, new(big.Rat).SetUint64(p.Rate))
	want := new(big.Rat).SetFrac(new(big.Int).Mul(new(big.Int).SetUint64(q.Size), big.NewInt(8e9)), big.NewInt(1))
	if got.Cmp(want) < 0 {
		t.Errorf("%d bit/s × %g over %s carries less than %d bytes", p.Rate, q.Goodput, p.End.Sub(p.Start), q.Size)
	}
}

func TestJointEarliestCompletion(t *testing.T) {
	g := sharedWAN(t)
	east, west := eps("e1", "e2", "e3"), eps("w1", "w2", "w3")
	circuit := []Hop{{"e1-er", "e1", "er"}, {"circuit", "er", "wr"}, {"w1-wr", "wr", "w1"}}
	wan := []Hop{{"e2-er", "e2", "er"}, {"wan", "er", "wr"}, {"w2-wr", "wr", "w2"}}
	const gb = 1_000_000_000
	type tc struct {
		name     string
		books    []Booking
		q        JointQuery
		err      error // errors.Is
		rate     uint64
		start    time.Time
		end      time.Time // zero: not checked
		links    []string  // links the plan must use (and no others on the WAN)
		earliest time.Time // for an *InfeasibleError
	}
	// 2.4 GB at 1.45 Gbit/s: 19.2e9/1.45e9 s, rounded up to the ns.
	ex := time.Duration(math.Ceil(19.2e9 / 1.45e9 * 1e9))
	cases := []tc{
		{
			name: "issue 29's example: admitted, on both paths",
			q: JointQuery{Sources: east, Destinations: west, Size: 2.4 * gb, Goodput: 1, Submitted: jt0,
				StartUp: 10 * time.Second, Deadline: jt0.Add(8 * time.Minute)},
			rate: 1_450_000_000, start: jt0.Add(10 * time.Second), end: jt0.Add(10*time.Second + ex),
			links: []string{"circuit", "wan"},
		},
		{
			name: "the example with a goodput of 0.8 takes 1/0.8 as long",
			q: JointQuery{Sources: east, Destinations: west, Size: 2.4 * gb, Goodput: 0.8, Submitted: jt0,
				StartUp: 10 * time.Second, Deadline: jt0.Add(8 * time.Minute)},
			rate: 1_450_000_000, start: jt0.Add(10 * time.Second),
			end:   jt0.Add(10*time.Second + time.Duration(math.Ceil(19.2e9/0.8/1.45e9*1e9))),
			links: []string{"circuit", "wan"},
		},
		{
			name: "no path: the destinations are not reachable",
			q:    JointQuery{Sources: east, Destinations: eps("iso"), Size: gb, Goodput: 1, Submitted: jt0},
			err:  ErrNoPath,
		},
		{
			name:  "zero size: the empty window at submission + start-up",
			q:     JointQuery{Sources: east, Destinations: west, Goodput: 1, Submitted: jt0, StartUp: time.Second},
			start: jt0.Add(time.Second), end: jt0.Add(time.Second),
		},
		{
			name: "zero size past its deadline is refused",
			q: JointQuery{Sources: east, Destinations: west, Goodput: 1, Submitted: jt0, StartUp: time.Minute,
				Deadline: jt0.Add(time.Second)},
			err: ErrInfeasible, earliest: jt0.Add(time.Minute), start: jt0.Add(time.Minute),
		},
		{
			name: "a max rate of 0 is no limit",
			q: JointQuery{Sources: []Endpoint{{Node: "e1", MaxRate: 0}}, Destinations: eps("w1"), Size: gb, Goodput: 1,
				Submitted: jt0},
			rate: 1_450_000_000, start: jt0, links: []string{"circuit", "wan"},
		},
		{
			name: "node max rates bound the sum",
			q: JointQuery{Sources: []Endpoint{{"e1", 300e6}, {"e2", 200e6}}, Destinations: []Endpoint{{"w1", 400e6}, {"w2", 0}},
				Size: gb, Goodput: 1, Submitted: jt0},
			rate: 500e6, start: jt0,
		},
		{
			name:  "a fully booked circuit leaves the routed path",
			books: []Booking{{ID: "c", Path: circuit, Bandwidth: gb, Start: jt0.Add(-time.Hour), End: jt0.Add(time.Hour)}},
			q:     JointQuery{Sources: east, Destinations: west, Size: 2.4 * gb, Goodput: 1, Submitted: jt0},
			rate:  450e6, start: jt0, end: jt0.Add(time.Duration(math.Ceil(19.2e9 / 450e6 * 1e9))),
			links: []string{"wan"},
		},
		{
			name: "waiting for the circuit is earlier than starting without it",
			// At 450 Mbit/s from t0, 14.5 Gbit take 32.2 s; at 1.45 Gbit/s
			// from t0+10s, 20 s.
			books: []Booking{{ID: "c", Path: circuit, Bandwidth: gb, Start: jt0.Add(-time.Hour), End: jt0.Add(10 * time.Second)}},
			q:     JointQuery{Sources: east, Destinations: west, Size: 14.5e9 / 8, Goodput: 1, Submitted: jt0},
			rate:  1_450_000_000, start: jt0.Add(10 * time.Second), end: jt0.Add(20 * time.Second),
			links: []string{"circuit", "wan"},
		},
		{
			name:  "a short job finishes before the circuit is taken",
			books: []Booking{{ID: "c", Path: circuit, Bandwidth: gb, Start: jt0.Add(10 * time.Second), End: jt0.Add(time.Hour)}},
			q:     JointQuery{Sources: east, Destinations: west, Size: 1.45e9 / 8, Goodput: 1, Submitted: jt0},
			rate:  1_450_000_000, start: jt0, end: jt0.Add(time.Second),
		},
		{
			name: "the window starts at submission + start-up, after bookings that ended",
			books: []Booking{
				{ID: "c", Path: circuit, Bandwidth: gb, Start: jt0.Add(-time.Hour), End: jt0.Add(5 * time.Second)},
				{ID: "w", Path: wan, Bandwidth: 450e6, Start: jt0.Add(-time.Hour), End: jt0.Add(7 * time.Second)},
			},
			q: JointQuery{Sources: east, Destinations: west, Size: 1.45e9 / 8, Goodput: 1, Submitted: jt0,
				StartUp: 30 * time.Second},
			rate: 1_450_000_000, start: jt0.Add(30 * time.Second), end: jt0.Add(31 * time.Second),
		},
		{
			name: "refused: the earliest completion comes with the error",
			q: JointQuery{Sources: east, Destinations: west, Size: 2.4 * gb, Goodput: 1, Submitted: jt0,
				Deadline: jt0.Add(10 * time.Second)},
			err: ErrInfeasible, earliest: jt0.Add(ex), rate: 1_450_000_000, start: jt0,
		},
		{
			name: "a deadline met exactly is admitted",
			q: JointQuery{Sources: east, Destinations: west, Size: 1.45e9 / 8, Goodput: 1, Submitted: jt0,
				Deadline: jt0.Add(time.Second)},
			rate: 1_450_000_000, start: jt0, end: jt0.Add(time.Second),
		},
		{
			name: "everything booked: the plan starts at the release",
			books: []Booking{
				{ID: "c", Path: circuit, Bandwidth: gb, Start: jt0.Add(-time.Hour), End: jt0.Add(time.Minute)},
				{ID: "w", Path: wan, Bandwidth: 450e6, Start: jt0.Add(-time.Hour), End: jt0.Add(2 * time.Minute)},
			},
			q:    JointQuery{Sources: east, Destinations: west, Size: 1.45e9 / 8, Goodput: 1, Submitted: jt0},
			rate: gb, start: jt0.Add(time.Minute), end: jt0.Add(time.Minute + 1450*time.Millisecond), links: []string{"circuit"},
		},
		{name: "goodput zero", q: JointQuery{Sources: east, Destinations: west, Size: gb, Submitted: jt0}, err: ErrInvalidQuery},
		{name: "goodput above one", q: JointQuery{Sources: east, Destinations: west, Size: gb, Goodput: 1.5, Submitted: jt0}, err: ErrInvalidQuery},
		{name: "goodput NaN", q: JointQuery{Sources: east, Destinations: west, Size: gb, Goodput: math.NaN(), Submitted: jt0}, err: ErrInvalidQuery},
		{name: "no submission time", q: JointQuery{Sources: east, Destinations: west, Size: gb, Goodput: 1}, err: ErrInvalidQuery},
		{name: "negative start-up", q: JointQuery{Sources: east, Destinations: west, Size: gb, Goodput: 1, Submitted: jt0, StartUp: -1}, err: ErrInvalidQuery},
		{name: "no source", q: JointQuery{Destinations: west, Size: gb, Goodput: 1, Submitted: jt0}, err: ErrInvalidQuery},
		{name: "no destination", q: JointQuery{Sources: east, Size: gb, Goodput: 1, Submitted: jt0}, err: ErrInvalidQuery},
		{name: "a node twice", q: JointQuery{Sources: eps("e1", "e1"), Destinations: west, Size: gb, Goodput: 1, Submitted: jt0}, err: ErrInvalidQuery},
		{name: "a node on both ends", q: JointQuery{Sources: eps("e1"), Destinations: eps("e1", "w1"), Size: gb, Goodput: 1, Submitted: jt0}, err: ErrInvalidQuery},
		{name: "an unknown node", q: JointQuery{Sources: eps("x"), Destinations: west, Size: gb, Goodput: 1, Submitted: jt0}, err: ErrUnknownNode},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewSchedule(g)
			for _, b := range c.books {
				if err := s.Add(b); err != nil {
					t.Fatal(err)
				}
			}
			p, err := s.JointEarliestCompletion(c.q)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				if c.err != ErrInfeasible {
					return
				}
				var ie *InfeasibleError
				if !errors.As(err, &ie) || !ie.Earliest.Equal(c.earliest) || !p.End.Equal(c.earliest) || ie.Algorithm != AlgJointEarliestCompletion {
					t.Fatalf("err = %#v with a plan ending %s, want the earliest completion %s", err, p.End, c.earliest)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if p.Algorithm != AlgJointEarliestCompletion {
				t.Errorf("algorithm %q", p.Algorithm)
			}
			checkPlan(t, s, c.q, p)
			if p.Rate != c.rate || !p.Start.Equal(c.start) || !c.end.IsZero() && !p.End.Equal(c.end) {
				t.Errorf("plan %s at %d bit/s over [%s, %s), want %d bit/s over [%s, %s)", c.name, p.Rate, p.Start, p.End, c.rate, c.start, c.end)
			}
			if c.links != nil {
				used := map[string]bool{}
				for _, f := range p.Flows {
					for _, h := range f.Path {
						if h.Link == "wan" || h.Link == "circuit" {
							used[h.Link] = true
						}
					}
				}
				if len(used) != len(c.links) {
					t.Errorf("the plan uses %v, want %v: %+v", used, c.links, p.Flows)
				}
				for _, l := range c.links {
					if !used[l] {
						t.Errorf("the plan does not use %s: %+v", l, p.Flows)
					}
				}
			}
			// Deterministic: the same query gives the same plan.
			again, _ := s.JointEarliestCompletion(c.q)
			if !samePlan(p, again) {
				t.Errorf("two runs differ: %+v and %+v", p, again)
			}
		})
	}
}

func samePlan(a, b JointPlan) bool {
	if a.Algorithm != b.Algorithm || !a.Start.Equal(b.Start) || !a.End.Equal(b.End) || a.Rate != b.Rate || len(a.Flows) != len(b.Flows) {
		return false
	}
	for i, f := range a.Flows {
		g := b.Flows[i]
		if f.From != g.From || f.To != g.To || f.Rate != g.Rate || len(f.Path) != len(g.Path) {
			return false
		}
		for k := range f.Path {
			if f.Path[k] != g.Path[k] {
				return false
			}
		}
	}
	return true
}

// Hosts do not forward: a path through one is no path.
func TestJointHostsDoNotForward(t *testing.T) {
	g, err := NewGraph(map[string]string{"a": NodeHost, "h": NodeHost, "b": NodeHost, "r": NodeRouter},
		[]Link{{Name: "a-h", A: "a", B: "h", Capacity: 1e9, Reservable: 1}, {Name: "h-r", A: "h", B: "r", Capacity: 1e9, Reservable: 1},
			{Name: "r-b", A: "r", B: "b", Capacity: 1e9, Reservable: 1}})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSchedule(g)
	_, err = s.JointEarliestCompletion(JointQuery{Sources: eps("a"), Destinations: eps("b"), Size: 1e6, Goodput: 1, Submitted: jt0})
	if !errors.Is(err, ErrNoPath) {
		t.Fatalf("err = %v, want ErrNoPath", err)
	}
	// h itself may send: it is a source.
	p, err := s.JointEarliestCompletion(JointQuery{Sources: eps("a", "h"), Destinations: eps("b"), Size: 1e6, Goodput: 1, Submitted: jt0})
	if err != nil || p.Rate != 1e9 || len(p.Flows) != 1 || p.Flows[0].From != "h" {
		t.Fatalf("plan %+v, err %v: want 1 Gbit/s from h", p, err)
	}
}

func TestJointFixedSlot(t *testing.T) {
	g := sharedWAN(t)
	s := NewSchedule(g)
	circuit := []Hop{{"e1-er", "e1", "er"}, {"circuit", "er", "wr"}, {"w1-wr", "wr", "w1"}}
	if err := s.Add(Booking{ID: "c", Path: circuit, Bandwidth: 600e6, Start: jt0, End: jt0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	east, west := eps("e1", "e2", "e3"), eps("w1", "w2", "w3")
	for _, c := range []struct {
		start, end time.Time
		rate       uint64
	}{
		{jt0.Add(-time.Minute), jt0, 1_450_000_000},
		{jt0.Add(-time.Minute), jt0.Add(1), 850_000_000},
		{jt0.Add(30 * time.Second), jt0.Add(2 * time.Minute), 850_000_000},
		{jt0.Add(time.Minute), jt0.Add(2 * time.Minute), 1_450_000_000},
	} {
		p, err := s.JointFixedSlot(east, west, c.start, c.end)
		if err != nil {
			t.Fatal(err)
		}
		if p.Rate != c.rate || p.Algorithm != AlgJointFixedSlot || !p.Start.Equal(c.start) || !p.End.Equal(c.end) {
			t.Errorf("[%s, %s): %+v, want %d bit/s", c.start, c.end, p, c.rate)
		}
		checkPlan(t, s, JointQuery{Sources: east, Destinations: west, Goodput: 1, Submitted: c.start}, p)
	}
	if _, err := s.JointFixedSlot(east, west, jt0, jt0); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("an empty window: err = %v, want ErrInvalidQuery", err)
	}
	if _, err := s.JointFixedSlot(eps("e1"), eps("iso"), jt0, jt0.Add(time.Second)); !errors.Is(err, ErrNoPath) {
		t.Errorf("no path: err = %v, want ErrNoPath", err)
	}
}

// The joint planner on the benchmark workload: three source hosts to three
// destination hosts, 100 GB, submitted at a random instant of the week.
func BenchmarkJointEarliestCompletion(b *testing.B) {
	w := benchWorkload(b)
	qs := benchQueries(w, 3000)
	i := 0
	run(b, func(benchQuery) (bool, error) {
		var src, dst []Endpoint
		seen := map[string]bool{}
		for len(src) < 3 || len(dst) < 3 {
			q := qs[i%len(qs)]
			i++
			if !seen[q.from] && !seen[q.to] && q.from != q.to {
				seen[q.from], seen[q.to] = true, true
				src, dst = append(src, Endpoint{Node: q.from}), append(dst, Endpoint{Node: q.to})
			}
		}
		p, err := w.Schedule.JointEarliestCompletion(JointQuery{Sources: src, Destinations: dst, Size: 100e9, Goodput: 0.9,
			Submitted: qs[i%len(qs)].start, StartUp: 10 * time.Second})
		return len(p.Flows) == 0, err
	})
}

// A flow with a cycle in it (here r1 → r2 over one link and back over the
// other) decomposes into the path alone: the cycle carries nothing from
// a source to a destination.
func TestJointFlowsDropCycles(t *testing.T) {
	g, err := NewGraph(map[string]string{"a": NodeHost, "b": NodeHost, "r1": NodeRouter, "r2": NodeRouter},
		[]Link{{Name: "a-r1", A: "a", B: "r1", Capacity: 10, Reservable: 1}, {Name: "l1", A: "r1", B: "r2", Capacity: 10, Reservable: 1},
			{Name: "l2", A: "r1", B: "r2", Capacity: 10, Reservable: 1}, {Name: "r2-b", A: "r2", B: "b", Capacity: 10, Reservable: 1}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewSchedule(g).jointNet(eps("a"), eps("b"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[Hop]uint64{{"a-r1", "a", "r1"}: 5, {"l1", "r1", "r2"}: 8, {"l2", "r2", "r1"}: 3, {"r2-b", "r2", "b"}: 5}
	f := j.net
	for i := range f.orig {
		f.orig[i], f.res[2*i], f.res[2*i+1] = 10, 10, 0
	}
	for e, d := range j.dirOfEdge {
		if w := want[g.hop(d)]; w > 0 {
			f.res[e], f.res[e+1] = 10-w, w
		}
	}
	for _, e := range f.head[j.src] { // the super edges carry 5
		if e%2 == 0 {
			f.res[e], f.res[e+1] = 5, 5
		}
	}
	for _, e := range f.head[j.sink] {
		if e%2 == 1 {
			f.res[e-1], f.res[e] = 5, 5
		}
	}
	got := j.flows()
	path := []Hop{{"a-r1", "a", "r1"}, {"l1", "r1", "r2"}, {"r2-b", "r2", "b"}}
	if len(got) != 1 || got[0].Rate != 5 || got[0].From != "a" || got[0].To != "b" || !slices.Equal(got[0].Path, path) {
		t.Fatalf("flows %+v, want a → b at 5 over %v", got, path)
	}
}

// TestJointSpreadsOverPairs: on the shared WAN, the plan runs on every
// node pair, each pair on one path, the circuit full before the routed
// path, and the rate is still the maximum.
func TestJointSpreadsOverPairs(t *testing.T) {
	s := NewSchedule(sharedWAN(t))
	q := JointQuery{Sources: eps("e1", "e2", "e3"), Destinations: eps("w1", "w2", "w3"),
		Size: 2_400_000_000, Goodput: 1, Submitted: jt0}
	p, err := s.JointEarliestCompletion(q)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, s, q, p)
	if p.Rate != 1_450_000_000 {
		t.Fatalf("rate %d, want 1.45 Gbit/s", p.Rate)
	}
	srcs, dsts, pairs := map[string]bool{}, map[string]bool{}, map[[2]string]int{}
	onCircuit := uint64(0)
	for _, f := range p.Flows {
		srcs[f.From], dsts[f.To] = true, true
		pairs[[2]string{f.From, f.To}]++
		for _, h := range f.Path {
			if h.Link == "circuit" {
				onCircuit += f.Rate
			}
		}
	}
	if len(srcs) != 3 || len(dsts) != 3 {
		t.Errorf("the plan uses sources %v and destinations %v, want all three of each: %+v", srcs, dsts, p.Flows)
	}
	for pr, n := range pairs {
		if n > 1 {
			t.Errorf("pair %v has %d paths: %+v", pr, n, p.Flows)
		}
	}
	if onCircuit != 1e9 {
		t.Errorf("%d bit/s on the circuit, want all of it (1 Gbit/s)", onCircuit)
	}
}

// TestJointMinDuration: a tiny dataset's window is never shorter than the
// floor asked for, and still fits what is free.
func TestJointMinDuration(t *testing.T) {
	s := NewSchedule(sharedWAN(t))
	q := JointQuery{Sources: eps("e1"), Destinations: eps("w1"), Size: 1000, Goodput: 0.9,
		Submitted: jt0, StartUp: 2 * time.Second, MinDuration: 10 * time.Second}
	p, err := s.JointEarliestCompletion(q)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, s, q, p)
	if got := p.End.Sub(p.Start); got != 10*time.Second {
		t.Errorf("window %s, want the 10 s floor", got)
	}
	if !p.Start.Equal(jt0.Add(2 * time.Second)) {
		t.Errorf("start %s, want submission + start-up", p.Start)
	}
	q.MinDuration = -time.Second
	if _, err := s.JointEarliestCompletion(q); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("a negative floor: %v, want ErrInvalidQuery", err)
	}
}
