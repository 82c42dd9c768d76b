package reserve

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"time"

	"github.com/lightpath/lightpath/internal/units"
)

// Names of the joint planner's algorithms, as JointPlan.Algorithm gives
// them.
const (
	AlgJointFixedSlot          = "joint-maxflow-fixed-slot"
	AlgJointEarliestCompletion = "joint-maxflow-earliest-completion"
)

// ErrInfeasible matches an *InfeasibleError.
var ErrInfeasible = errors.New("the deadline cannot be met")

// InfeasibleError says a joint plan's deadline cannot be met, and when the
// dataset could be done at the earliest.
type InfeasibleError struct {
	Deadline  time.Time
	Earliest  time.Time // the earliest completion there is
	Algorithm string
}

func (e *InfeasibleError) Error() string {
	return fmt.Sprintf("deadline %s cannot be met: the earliest completion is %s (algorithm %s)",
		e.Deadline.UTC().Format(time.RFC3339Nano), e.Earliest.UTC().Format(time.RFC3339Nano), e.Algorithm)
}

// Is makes errors.Is(err, ErrInfeasible) true.
func (e *InfeasibleError) Is(target error) bool { return target == ErrInfeasible }

// Endpoint is a node that sends or receives a dataset, and the most it may
// send or receive in all, in bits per second (MaxRate zero: no limit but
// the network's, as for CompletionQuery.MaxRate).
type Endpoint struct {
	Node    string
	MaxRate uint64
}

// JointQuery asks when Size bytes can have been moved from a set of source
// nodes to a set of destination nodes, over every path between them at
// once, against what is already booked.
//
// Goodput (η, in (0, 1]) is the fraction of a booked rate that carries
// the dataset's bytes. The window must start at or after Submitted +
// StartUp (σ). Deadline (the zero time: none) is only a bound: the plan is
// the earliest completion whatever it is, refused when it is after the
// deadline.
type JointQuery struct {
	Sources, Destinations []Endpoint
	Size                  uint64 // bytes
	Goodput               float64
	Submitted             time.Time
	StartUp               time.Duration
	Deadline              time.Time
	// MinDuration, when set, is the shortest window the plan may have: a
	// window that booking itself outlasts (holds made and committed, the
	// agents putting their part in place) would end before it is used.
	MinDuration time.Duration
}

// PathFlow is one path of a joint plan: Rate bits per second from node
// From to node To along Path, held throughout the plan's window. (Flow is
// a flow spec's.)
type PathFlow struct {
	From, To string
	Path     []Hop
	Rate     uint64
}

// JointPlan is the joint planner's answer: every flow held over the one
// window [Start, End), Rate being their sum. Algorithm names the
// algorithm that produced it (one of the AlgJoint constants). Each flow
// is a booking that Admit accepts, and all of them together fit too: in
// every link direction their sum stays within what was free throughout
// the window.
type JointPlan struct {
	Algorithm  string
	Start, End time.Time
	Rate       uint64
	Flows      []PathFlow
}

// JointFixedSlot returns the most that can be moved from the sources to
// the destinations throughout [start, end), at a constant rate per path:
// R(W), the maximum flow from a super-source (an edge to each source, of
// its MaxRate) to a super-sink (an edge from each destination, of its
// MaxRate) over the link directions, each of the capacity free throughout
// the window. Paths obey the scheduler's rules (simple, and only routers
// forward), so a host is entered only if it is a destination and left only
// if it is a source.
//
// Cost: one Dinic max-flow, O(V²·E), after O(E·(log K + k)) for the
// capacities. The flow is decomposed into at most E paths (cycles are
// dropped: they carry nothing from a source to a destination), in a
// deterministic order. If nothing can be carried, the error is ErrNoPath.
func (s *Schedule) JointFixedSlot(sources, destinations []Endpoint, start, end time.Time) (JointPlan, error) {
	st, en, err := span(start, end)
	if err != nil {
		return JointPlan{}, err
	}
	j, err := s.jointNet(sources, destinations)
	if err != nil {
		return JointPlan{}, err
	}
	r := j.rate(st, en)
	if r == 0 {
		return JointPlan{}, fmt.Errorf("%w from %s to %s with any bandwidth free throughout [%s, %s)", ErrNoPath,
			nodeList(sources), nodeList(destinations), start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	flows, err := j.split(st, en, r)
	if err != nil {
		return JointPlan{}, err
	}
	return JointPlan{Algorithm: AlgJointFixedSlot, Start: timeOf(st), End: timeOf(en), Rate: r, Flows: flows}, nil
}

// JointEarliestCompletion plans q: the earliest completion T of q.Size
// bytes from q.Sources to q.Destinations over every path between them,
// each path at a constant rate throughout one window [S, T) with
// S ≥ q.Submitted + q.StartUp.
//
// Formulation: for a window W, R(W) is JointFixedSlot's maximum flow, and
// the bytes fit when η·R(W)·(T − S) ≥ 8·Size. The starts worth trying are
// Submitted + StartUp and the instants after it where some link direction
// that a path can use has less booked than just before (as for
// EarliestCompletion: a window starting anywhere else can slide earlier
// over steps with as much free, and end earlier). For a start S, R([S, T))
// only shrinks as T grows and changes only where T crosses a breakpoint,
// so the end is found by extension: from x = S + 1 ns, while
// S + 8·Size/(η·R([S, x))) > x, x jumps there (no end before it can work,
// R being at most R([S, x)) beyond x); each jump that does not finish
// crosses a breakpoint. Starts stop once S plus the time at the network's
// full rate can no longer beat the best end found. Worst case O(K²)
// max-flows, K the breakpoints of the usable directions.
//
// The rates are integers (an integer max-flow) and the end is rounded up
// to the nanosecond, so Rate·η·(End − Start) ≥ 8·Size exactly: End is
// the least such instant, at most a nanosecond after the real optimum.
//
// A Size of zero needs no flow: the plan is the empty window at
// Submitted + StartUp. With a non-zero q.Deadline before the completion,
// the plan comes with an *InfeasibleError (matching ErrInfeasible) that
// carries the earliest completion. If no path carries anything even with
// nothing booked, the error is ErrNoPath; ErrNoSlot if the completion is
// beyond what this package can count.
func (s *Schedule) JointEarliestCompletion(q JointQuery) (JointPlan, error) {
	t0, err := nanos(q.Submitted, "submission time")
	if err != nil {
		return JointPlan{}, err
	}
	if q.StartUp < 0 {
		return JointPlan{}, fmt.Errorf("%w: the start-up time %s is negative", ErrInvalidQuery, q.StartUp)
	}
	if !(q.Goodput > 0 && q.Goodput <= 1) { // also refuses NaN
		return JointPlan{}, fmt.Errorf("%w: goodput %g: want above 0 and at most 1", ErrInvalidQuery, q.Goodput)
	}
	var deadline int64 = forever
	if !q.Deadline.IsZero() {
		if deadline, err = nanos(q.Deadline, "deadline"); err != nil {
			return JointPlan{}, err
		}
	}
	lo := addSat(t0, int64(q.StartUp))
	if lo >= forever {
		return JointPlan{}, fmt.Errorf("%w: the start-up time %s from %s is beyond %s", ErrNoSlot, q.StartUp,
			q.Submitted.Format(time.RFC3339), Forever.Format(time.RFC3339))
	}
	j, err := s.jointNet(q.Sources, q.Destinations)
	if err != nil {
		return JointPlan{}, err
	}
	finish := func(p JointPlan, end int64) (JointPlan, error) {
		if end > deadline {
			return p, &InfeasibleError{Deadline: q.Deadline, Earliest: timeOf(end), Algorithm: p.Algorithm}
		}
		return p, nil
	}
	if q.Size == 0 {
		return finish(JointPlan{Algorithm: AlgJointEarliestCompletion, Start: timeOf(lo), End: timeOf(lo)}, lo)
	}
	if q.MinDuration < 0 {
		return JointPlan{}, fmt.Errorf("%w: the shortest window %s is negative", ErrInvalidQuery, q.MinDuration)
	}
	exact := durationFor(q.Size, q.Goodput)
	// A floor on the window keeps the time non-increasing in the rate,
	// which the search below needs.
	dur := func(r uint64) (int64, bool) {
		d, ok := exact(r)
		return max(d, int64(q.MinDuration)), ok
	}
	full := j.rateOf(func(d int32) uint64 { return s.g.dirs[d].capacity })
	if full == 0 {
		return JointPlan{}, fmt.Errorf("%w from %s to %s: no path carries anything even with nothing booked", ErrNoPath,
			nodeList(q.Sources), nodeList(q.Destinations))
	}
	fastest, ok := dur(full)
	if !ok {
		return JointPlan{}, jointNoSlot(&q, full)
	}
	var bestStart int64
	bestEnd := int64(forever)
	starts := s.releases(lo, j.dirs)
	for t := lo; t < forever; t = starts.next() {
		if addSat(t, fastest) >= bestEnd {
			break // later starts end later still
		}
		for x := t + 1; x < bestEnd; {
			d, ok := dur(j.rate(t, x))
			if !ok {
				break // nothing, or too little, free from t on: longer windows only have less
			}
			end := addSat(t, d)
			if end <= x {
				bestStart, bestEnd = t, end
				break
			}
			x = end
		}
	}
	if bestEnd >= forever {
		return JointPlan{}, jointNoSlot(&q, full)
	}
	r := j.rate(bestStart, bestEnd)
	flows, err := j.split(bestStart, bestEnd, r)
	if err != nil {
		return JointPlan{}, err
	}
	p := JointPlan{Algorithm: AlgJointEarliestCompletion, Start: timeOf(bestStart), End: timeOf(bestEnd), Rate: r, Flows: flows}
	return finish(p, bestEnd)
}

func jointNoSlot(q *JointQuery, full uint64) error {
	return fmt.Errorf("%w from %s to %s to move %s at up to %s, starting at or after %s: it ends beyond %s", ErrNoSlot,
		nodeList(q.Sources), nodeList(q.Destinations), units.FormatSize(int64(min(q.Size, math.MaxInt64))),
		units.FormatRate(float64(full)), q.Submitted.Add(q.StartUp).Format(time.RFC3339), Forever.Format(time.RFC3339))
}

// durationFor returns a function giving the nanoseconds needed to move
// size bytes at rate r with goodput eta: ⌈8·size·10⁹ / (eta·r)⌉, computed
// exactly (eta as the binary fraction it is), and false for a zero rate or
// a time longer than an int64 holds.
func durationFor(size uint64, eta float64) func(r uint64) (int64, bool) {
	num := new(big.Int).Mul(new(big.Int).SetUint64(size), big.NewInt(8*int64(time.Second)))
	e := new(big.Rat).SetFloat64(eta) // exact for any finite float64
	num.Mul(num, e.Denom())
	etaNum := e.Num()
	limit := big.NewInt(math.MaxInt64)
	var den, q, m big.Int
	return func(r uint64) (int64, bool) {
		if r == 0 {
			return 0, false
		}
		den.Mul(etaNum, den.SetUint64(r))
		q.QuoRem(num, &den, &m)
		if m.Sign() > 0 {
			q.Add(&q, big.NewInt(1))
		}
		if q.Cmp(limit) > 0 {
			return 0, false
		}
		return q.Int64(), true
	}
}

// jointNet is the flow network of a joint query: the graph's nodes, a
// super-source and a super-sink, and the link directions some path from a
// source to a destination may use.
type jointNet struct {
	s         *Schedule
	net       *flowNet
	src, sink int32
	// ends are the super edges, into each source and out of each
	// destination, with the capacity each was given (endCap).
	ends      []int32
	endCap    []uint64
	endSource []bool
	dirs      []int32 // the usable directions, in order
	edge      []int32 // per usable direction, its edge in net
	dirOfEdge map[int32]int32
}

// jointNet validates the endpoints and builds their flow network.
func (s *Schedule) jointNet(sources, destinations []Endpoint) (*jointNet, error) {
	g := s.g
	n := len(g.names)
	if len(sources) == 0 {
		return nil, fmt.Errorf("%w: no source node", ErrInvalidQuery)
	}
	if len(destinations) == 0 {
		return nil, fmt.Errorf("%w: no destination node", ErrInvalidQuery)
	}
	role := make([]int8, n)      // 1 source, 2 destination
	maxRate := make([]uint64, n) // 0: none
	for _, set := range []struct {
		eps  []Endpoint
		what string
		mark int8
	}{{sources, "source", 1}, {destinations, "destination", 2}} {
		for _, ep := range set.eps {
			i, err := g.node(ep.Node, set.what)
			if err != nil {
				return nil, err
			}
			switch role[i] {
			case set.mark:
				return nil, fmt.Errorf("%w: %s is named twice as a %s", ErrInvalidQuery, ep.Node, set.what)
			case 0:
			default:
				return nil, fmt.Errorf("%w: %s is both a source and a destination", ErrInvalidQuery, ep.Node)
			}
			role[i], maxRate[i] = set.mark, ep.MaxRate
		}
	}
	// A direction can be on a path if it leaves a router or a source and
	// enters a router or a destination (hosts do not forward), and it lies
	// between a source and a destination.
	usable := func(d int32) bool {
		x := &g.dirs[d]
		return (g.router[x.from] || role[x.from] == 1) && (g.router[x.to] || role[x.to] == 2)
	}
	fwd := make([]bool, n) // reachable from a source
	var stack []int32
	for i := range n {
		if role[i] == 1 {
			fwd[i] = true
			stack = append(stack, int32(i))
		}
	}
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range g.adj[u] {
			if v := g.dirs[d].to; usable(d) && !fwd[v] {
				fwd[v] = true
				stack = append(stack, v)
			}
		}
	}
	bwd := make([]bool, n) // a destination is reachable from it
	for i := range n {
		if role[i] == 2 {
			bwd[i] = true
			stack = append(stack, int32(i))
		}
	}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range g.adj[v] {
			d := e ^ 1 // the direction into v
			if u := g.dirs[d].from; usable(d) && !bwd[u] {
				bwd[u] = true
				stack = append(stack, u)
			}
		}
	}
	j := &jointNet{s: s, net: newFlowNet(n + 2), src: int32(n), sink: int32(n + 1), dirOfEdge: make(map[int32]int32)}
	outCap := make([]uint64, n) // what a node's usable directions can carry out, saturated
	inCap := make([]uint64, n)
	for d := range g.dirs {
		x := &g.dirs[d]
		if !usable(int32(d)) || !fwd[x.from] || !bwd[x.to] {
			continue
		}
		j.dirs = append(j.dirs, int32(d))
		e := j.net.addEdge(x.from, x.to)
		j.edge = append(j.edge, e)
		j.dirOfEdge[e] = int32(d)
		outCap[x.from] = satAdd(outCap[x.from], x.capacity)
		inCap[x.to] = satAdd(inCap[x.to], x.capacity)
	}
	// The super edges: a node's MaxRate, or (none) all its links can carry,
	// which bounds the flow the same way and keeps every sum finite.
	var total uint64
	for i := range n {
		if role[i] != 1 {
			continue
		}
		c := outCap[i]
		if maxRate[i] > 0 {
			c = min(c, maxRate[i])
		}
		var carry uint64
		if total, carry = bits.Add64(total, c, 0); carry != 0 {
			return nil, fmt.Errorf("%w: the sources' links together carry more than %d bit/s", ErrInvalidQuery, uint64(math.MaxUint64))
		}
		e := j.net.addEdge(j.src, int32(i))
		j.net.setCap(e, c)
		j.ends, j.endCap, j.endSource = append(j.ends, e), append(j.endCap, c), append(j.endSource, true)
	}
	for i := range n {
		if role[i] != 2 {
			continue
		}
		c := inCap[i]
		if maxRate[i] > 0 {
			c = min(c, maxRate[i])
		}
		e := j.net.addEdge(int32(i), j.sink)
		j.net.setCap(e, c)
		j.ends, j.endCap, j.endSource = append(j.ends, e), append(j.endCap, c), append(j.endSource, false)
	}
	return j, nil
}

func satAdd(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

// rate returns R([st, en)): the maximum flow with each usable direction at
// what is free throughout the window.
func (j *jointNet) rate(st, en int64) uint64 {
	return j.rateOf(func(d int32) uint64 { return j.s.tl[d].residual(st, en) })
}

// rateOf returns the maximum flow with direction d's capacity c(d).
func (j *jointNet) rateOf(c func(d int32) uint64) uint64 {
	for i, d := range j.dirs {
		j.net.setCap(j.edge[i], c(d))
	}
	return j.net.maxFlow(j.src, j.sink)
}

// split returns how a maximum flow over [st, en), of value r, goes over
// paths under the schedule's preference: of all the maximum flows, one
// that puts the least on the directions the preference costs (routed ones
// under dedicated, dedicated ones under routed, every one under
// shortest), so the value is R(W) whatever the preference and only the
// split changes. Only the final window pays for the costed flow; the
// search for the window needs the value alone.
func (j *jointNet) split(st, en int64, r uint64) ([]PathFlow, error) {
	cost := make([]int64, len(j.net.orig)) // the super edges cost nothing
	for i, d := range j.dirs {
		j.net.setCap(j.edge[i], j.s.tl[d].residual(st, en))
		cost[j.edge[i]/2] = j.s.flowCost(&j.s.g.dirs[d])
	}
	if got := j.net.maxFlowCheapest(j.src, j.sink, cost); got != r { // cannot happen: both are maximum flows
		return nil, fmt.Errorf("internal error: the cheapest maximum flow carries %d bit/s, the maximum flow %d", got, r)
	}
	j.spread(r, cost)
	return j.flows(), nil
}

// spread evens the flow over the sources and over the destinations when
// that costs neither rate nor preference: each side's nodes capped at the
// least common level that still carries r (a binary search, one maximum
// flow a step), then the cheapest maximum flow again, kept only if it is
// as cheap as the one found without the caps. A plan then runs on as many
// node pairs as the network lets it (their disks, processors and sessions
// share the work) rather than on the first pair the flow found, and each
// pair usually has a path of its own. The last flow computed is left in
// the network for flows.
func (j *jointNet) spread(r uint64, cost []int64) {
	if r == 0 {
		return
	}
	base := j.flowCost(cost)
	for _, side := range []bool{true, false} {
		var n uint64
		hi := uint64(0)
		for i, e := range j.ends {
			if j.endSource[i] == side {
				n++
				hi = max(hi, j.net.orig[e/2])
			}
		}
		if n < 2 {
			continue
		}
		level := func(l uint64) {
			for i, e := range j.ends {
				if j.endSource[i] == side {
					j.net.setCap(e, min(l, j.endCap[i]))
				}
			}
		}
		lo := r / n // below it the side cannot carry r
		for lo < hi {
			mid := lo + (hi-lo)/2
			level(mid)
			if j.net.maxFlow(j.src, j.sink) == r {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		level(hi)
	}
	if j.net.maxFlowCheapest(j.src, j.sink, cost) == r && j.flowCost(cost).Cmp(base) <= 0 {
		return
	}
	for i, e := range j.ends { // the caps cost preference: the plain cheapest flow
		j.net.setCap(e, j.endCap[i])
	}
	j.net.maxFlowCheapest(j.src, j.sink, cost)
}

// flowCost is the total cost of the last flow (exact: rates times costs
// can pass 2⁶⁴).
func (j *jointNet) flowCost(cost []int64) *big.Int {
	sum, term := new(big.Int), new(big.Int)
	for i, c := range cost {
		if c != 0 {
			sum.Add(sum, term.Mul(big.NewInt(c), new(big.Int).SetUint64(j.net.flow(int32(2*i)))))
		}
	}
	return sum
}

// flows decomposes the last maximum flow into paths from a source to a
// destination: walk from the super-source along edges that carry flow
// (the first in the graph's order), cancel any cycle met on the way, and
// take the least flow along each path found off all its edges. Every path
// found zeroes an edge, so there are at most as many paths as edges, and
// the same path never comes twice.
func (j *jointNet) flows() []PathFlow {
	f := j.net
	left := make([]uint64, len(f.orig)) // per edge pair, flow not yet assigned
	for i := range left {
		left[i] = f.flow(int32(2 * i))
	}
	next := func(u int32) (int32, bool) {
		for _, e := range f.head[u] {
			if e%2 == 0 && left[e/2] > 0 {
				return e, true
			}
		}
		return 0, false
	}
	g := j.s.g
	var out []PathFlow
	pos := make(map[int32]int) // node → its place on the walk
	var walk []int32           // the edges walked from the super-source
	for {
		first, ok := next(j.src)
		if !ok {
			break
		}
		clear(pos)
		walk = append(walk[:0], first)
		pos[j.src] = 0
		for u := f.to[first]; u != j.sink; {
			pos[u] = len(walk)
			e, ok := next(u)
			if !ok { // cannot happen: flow is conserved at every node
				panic(fmt.Sprintf("reserve: flow decomposition stuck at node %d", u))
			}
			v := f.to[e]
			if k, seen := pos[v]; seen {
				// A cycle, walk[k:] plus e: it carries nothing from a
				// source to a destination, drop it.
				cyc := append(walk[k:len(walk):len(walk)], e)
				m := uint64(math.MaxUint64)
				for _, c := range cyc {
					m = min(m, left[c/2])
				}
				for _, c := range cyc {
					left[c/2] -= m
				}
				for _, c := range walk[k:] {
					delete(pos, f.to[c])
				}
				walk = walk[:k]
				u = v
				continue
			}
			walk = append(walk, e)
			u = v
		}
		m := uint64(math.MaxUint64)
		for _, c := range walk {
			m = min(m, left[c/2])
		}
		for _, c := range walk {
			left[c/2] -= m
		}
		// walk[0] enters the source, the last edge leaves the
		// destination; the rest are link directions.
		ds := make([]int32, 0, len(walk)-2)
		for _, c := range walk[1 : len(walk)-1] {
			ds = append(ds, j.dirOfEdge[c])
		}
		out = append(out, PathFlow{From: g.names[f.to[walk[0]]], To: g.names[f.to[walk[len(walk)-1]^1]], Path: g.hops(ds), Rate: m})
	}
	out = uncross(out)
	slices.SortFunc(out, func(a, b PathFlow) int {
		if c := cmp.Compare(a.From, b.From); c != 0 {
			return c
		}
		if c := cmp.Compare(a.To, b.To); c != 0 {
			return c
		}
		return slices.CompareFunc(a.Path, b.Path, func(x, y Hop) int {
			if c := cmp.Compare(x.Link, y.Link); c != 0 {
				return c
			}
			return cmp.Compare(x.From, y.From)
		})
	})
	return out
}

// nodeList names the endpoints' nodes, for errors.
func nodeList(eps []Endpoint) string {
	var b []byte
	for i, ep := range eps {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, ep.Node...)
	}
	return string(b)
}
