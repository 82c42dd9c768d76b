package reserve

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/lightpath/lightpath/internal/heapq"
	"github.com/lightpath/lightpath/internal/units"
)

// The scheduling algorithms, after the UltraScience Net line of work (Rao,
// Wu et al.). Notation: V nodes, E link directions, K breakpoints per
// direction (k of them inside the queried interval), H hops of a path.
//
// Every algorithm obeys the same path rules: a path is simple, it starts and
// ends at any nodes, and every node in between is a router (hosts do not
// forward). A link direction can carry bw over [s, e) when the bookings
// plus bw stay within its reservable capacity at every instant of [s, e),
// the same exact test as Admit, so whatever a query returns, Add accepts.
//
// Variable-bandwidth and variable-path variants are NP-complete in general
// (Lin & Wu 2013); everything here keeps one path and one bandwidth for the
// whole reservation, which is polynomial, and each Result says which
// algorithm answered.

// Names of the algorithms, as Result.Algorithm gives them.
const (
	AlgFixedSlot              = "fixed-slot-bfs"
	AlgWidestPath             = "widest-path-maxmin-dijkstra"
	AlgEarliestStartPath      = "earliest-start-path-intersection"
	AlgEarliestStart          = "earliest-start-bellman-ford-intervals"
	AlgAllStartsPath          = "all-starts-path-intersection"
	AlgAllStarts              = "all-starts-bellman-ford-intervals"
	AlgEarliestCompletionPath = "earliest-completion-path-slot-extension"
	AlgEarliestCompletion     = "earliest-completion-slot-extension"
)

// Errors of the scheduling queries, for errors.Is.
var (
	// ErrNoPath: no path can carry the bandwidth over the slot.
	ErrNoPath = errors.New("no path")
	// ErrNoSlot: no start time before the horizon works.
	ErrNoSlot = errors.New("no slot")
)

// Request asks for Bandwidth bits per second from node From to node To
// over [Start, End).
type Request struct {
	From, To   string
	Bandwidth  uint64
	Start, End time.Time
}

// StartQuery asks when Bandwidth bits per second can be had for Duration,
// from node From to node To: along Path if it is given (From and To may
// then be left empty), along any path otherwise. The reservation must start
// at or after NotBefore and end by Horizon (the zero time: no horizon).
type StartQuery struct {
	From, To  string
	Path      []Hop
	Bandwidth uint64
	Duration  time.Duration
	NotBefore time.Time
	Horizon   time.Time
}

// CompletionQuery asks when Size bytes can have been moved from node From
// to node To at one constant bandwidth of at most MaxRate bits per second
// (zero: no limit but the network's), along Path if it is given, along any
// path otherwise, starting at or after NotBefore and ending by Horizon (the
// zero time: no horizon).
type CompletionQuery struct {
	From, To  string
	Path      []Hop
	Size      uint64
	MaxRate   uint64
	NotBefore time.Time
	Horizon   time.Time
}

// Window is a set of start times, from First to Last inclusive. A window
// that never closes ends at Forever minus the duration.
type Window struct {
	First, Last time.Time
}

// Result is a scheduler's answer. Algorithm names the algorithm that
// produced it (one of the Alg constants). Path, Bandwidth and [Start, End)
// are a booking that Admit accepts (for WidestPath, Bandwidth is the
// path's width). AllStarts fills Windows instead, and Path only when the
// query gave one.
type Result struct {
	Algorithm  string
	Path       []Hop
	Bandwidth  uint64
	Start, End time.Time
	Windows    []Window
}

// Alternatives are what the scheduler offers instead of a refused request:
// Earliest, the earliest slot of the request's bandwidth and duration that
// starts at or after its start (on any path), and Widest, the widest path
// over the request's own slot. Either is nil where there is none.
type Alternatives struct {
	Earliest *Result
	Widest   *Result
}

// endpoints validates a query's ends and optional fixed path.
func (s *Schedule) endpoints(from, to string, path []Hop) (src, dst int, dirs []int32, err error) {
	g := s.g
	if path != nil {
		if dirs, err = g.pathDirs(from, to, path); err != nil {
			return 0, 0, nil, err
		}
		return int(g.dirs[dirs[0]].from), int(g.dirs[dirs[len(dirs)-1]].to), dirs, nil
	}
	if src, err = g.node(from, "source"); err != nil {
		return 0, 0, nil, err
	}
	if dst, err = g.node(to, "destination"); err != nil {
		return 0, 0, nil, err
	}
	if src == dst {
		return 0, 0, nil, fmt.Errorf("%w: the source and the destination are both %s", ErrInvalidQuery, from)
	}
	return src, dst, nil, nil
}

// FixedSlot finds a path that carries req.Bandwidth from req.From to req.To
// throughout [req.Start, req.End).
//
// Formulation: drop every link direction whose minimum residual over the
// slot is below the bandwidth, then search from the source for the best
// path under the schedule's PathPreference: by default (dedicated) the
// fewest routed hops, then the fewest hops, then the least delay, so
// reserved flows ride the circuits and the routed network carries only
// what they cannot; under routed, the fewest hops, the least delay, then
// the fewest dedicated links (the order before issue 29); under shortest,
// hops and delay alone. Ties go to the first path by the sequence of its
// link names. The search is best-first on the part of that order which
// every hop increases (hops, or routed hops and hops), so a node's label
// is final when it leaves the frontier; the rest of the order decides
// between ways into a node as they are found.
//
// Cost: O(E·(log K + k + log V)), plus the length of the two paths compared
// on a tie of everything but names. A bandwidth above every capacity finds
// no path (ErrNoPath), it is not an error of the query.
func (s *Schedule) FixedSlot(req Request) (Result, error) {
	return s.FixedSlotAvoiding(req, nil)
}

// FixedSlotAvoiding is FixedSlot on the graph without the links named in
// avoid (links known to be down), so a reservation can be moved off a
// broken path.
func (s *Schedule) FixedSlotAvoiding(req Request, avoid []string) (Result, error) {
	src, dst, _, err := s.endpoints(req.From, req.To, nil)
	if err != nil {
		return Result{}, err
	}
	if req.Bandwidth == 0 {
		return Result{}, fmt.Errorf("%w: the bandwidth is zero", ErrInvalidQuery)
	}
	st, en, err := span(req.Start, req.End)
	if err != nil {
		return Result{}, err
	}
	var skip []bool
	for _, name := range avoid {
		i, ok := s.g.linkIndex[name]
		if !ok {
			return Result{}, fmt.Errorf("%w: avoid: %q", ErrUnknownLink, name)
		}
		if skip == nil {
			skip = make([]bool, len(s.g.links))
		}
		skip[i] = true
	}
	p := s.bfs(src, dst, req.Bandwidth, st, en, skip)
	if p == nil {
		return Result{}, fmt.Errorf("%w from %s to %s with %s free throughout [%s, %s)", ErrNoPath, req.From, req.To,
			units.FormatRate(float64(req.Bandwidth)), req.Start.Format(time.RFC3339), req.End.Format(time.RFC3339))
	}
	return Result{Algorithm: AlgFixedSlot, Path: s.g.hops(p), Bandwidth: req.Bandwidth, Start: timeOf(st), End: timeOf(en)}, nil
}

// bfs returns the directions of the best path (see FixedSlot) from src to
// dst with bw free throughout [st, en), or nil.
//
// It is a best-first search whose frontier is ordered by the part of the
// key that every hop increases (s.order): whoever can still improve a
// node's label comes off the frontier before it, so a label is final when
// its node leaves. The rest of the key, and the link names, only decide
// between ways into a node, when it is relaxed. With hops as the order
// (routed, shortest) this is the layered BFS of before issue 29.
func (s *Schedule) bfs(src, dst int, bw uint64, st, en int64, avoid []bool) []int32 {
	g := s.g
	n := len(g.names)
	key := make([]pathKey, n)
	hops := make([]int32, n)
	reached := make([]bool, n)
	done := make([]bool, n)
	pred := make([]int32, n) // the direction a node is reached by
	reached[src] = true
	var h heapq.Heap[uint64, int32]
	h.AnyTies = true // equal orders cannot improve each other
	h.Push(0, int32(src))
	var pa, pb []int32
	for h.Len() > 0 {
		o, u := h.Pop()
		if done[u] || o != s.order(key[u]) {
			continue
		}
		done[u] = true
		if int(u) == dst {
			return s.walkBack(pred, src, dst, int(hops[dst]))
		}
		if int(u) != src && !g.router[u] {
			continue
		}
		for _, e := range g.adj[u] {
			x := &g.dirs[e]
			v := x.to
			if done[v] || int(v) != dst && !g.router[v] {
				continue
			}
			if avoid != nil && avoid[x.link] || !s.tl[e].fits(st, en, bw) {
				continue
			}
			k := s.step(key[u], x)
			if reached[v] {
				switch {
				case k.less(key[v]):
				case key[v].less(k):
					continue
				default:
					// As good a key: the first by link names, walked
					// from the source (both paths are as long, since
					// hops are part of every key).
					pa = s.walkBackInto(pa, pred, src, int(u), int(hops[u]))
					pa = append(pa, e)
					pb = s.walkBackInto(pb, pred, src, int(v), int(hops[v]))
					if slices.CompareFunc(pa, pb, func(a, b int32) int { return int(g.dirs[a].link) - int(g.dirs[b].link) }) >= 0 {
						continue
					}
				}
			}
			reached[v], key[v], hops[v], pred[v] = true, k, hops[u]+1, e
			h.Push(s.order(k), v)
		}
	}
	return nil
}

// walkBackInto is walkBack into buf.
func (s *Schedule) walkBackInto(buf, pred []int32, src, dst, h int) []int32 {
	buf = slices.Grow(buf[:0], h)[:h]
	for v := dst; v != src; {
		h--
		buf[h] = pred[v]
		v = int(s.g.dirs[pred[v]].from)
	}
	return buf
}

// walkBack returns the path to dst that pred records, h hops long.
func (s *Schedule) walkBack(pred []int32, src, dst, h int) []int32 {
	return s.walkBackInto(nil, pred, src, dst, h)
}

// WidestPath finds the path from one node to another with the most
// bandwidth free throughout [start, end): its width, the least residual
// over the slot of any of its hops, is Result.Bandwidth.
//
// Formulation: the per-direction minima of FixedSlot as weights, then a
// max-min (bottleneck) Dijkstra for the largest width W; the path is then
// FixedSlot's for bandwidth W (the preferred among the paths that wide).
// The second pass is needed for the tie-break: a
// bottleneck label keeps the widest prefix to each node, which may have
// more hops than a narrower prefix that is still wide enough, so "widest,
// then fewest hops" has no optimal substructure. Cost:
// O(E·(log K + k) + E log V). If nothing is free, the error is ErrNoPath.
func (s *Schedule) WidestPath(from, to string, start, end time.Time) (Result, error) {
	src, dst, _, err := s.endpoints(from, to, nil)
	if err != nil {
		return Result{}, err
	}
	st, en, err := span(start, end)
	if err != nil {
		return Result{}, err
	}
	w := s.maxWidth(src, dst, st, en)
	var p []int32
	if w > 0 {
		p = s.bfs(src, dst, w, st, en, nil)
	}
	if p == nil {
		return Result{}, fmt.Errorf("%w from %s to %s with any bandwidth free throughout [%s, %s)", ErrNoPath, from, to,
			start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	return Result{Algorithm: AlgWidestPath, Path: s.g.hops(p), Bandwidth: w, Start: timeOf(st), End: timeOf(en)}, nil
}

// maxWidth returns the width of the widest path from src to dst over
// [st, en): 0 if there is none or nothing is free on it.
func (s *Schedule) maxWidth(src, dst int, st, en int64) uint64 {
	g := s.g
	n := len(g.names)
	width := make([]uint64, n)
	done := make([]bool, n)
	width[src] = math.MaxUint64
	// A max-heap of nodes by the width of a path to them (keyed ^width);
	// which of equally wide nodes comes first does not matter.
	h := heapq.Heap[uint64, int32]{AnyTies: true}
	h.Push(^width[src], int32(src))
	for h.Len() > 0 {
		nw, u := h.Pop()
		uw := ^nw
		if done[u] || uw != width[u] {
			continue
		}
		done[u] = true
		if int(u) == dst {
			return width[u]
		}
		if int(u) != src && !g.router[u] {
			continue
		}
		for _, e := range g.adj[u] {
			x := &g.dirs[e]
			v := x.to
			if done[v] || int(v) != dst && !g.router[v] || x.capacity <= width[v] {
				continue // x.capacity bounds what e can add
			}
			if w := min(uw, s.tl[e].residual(st, en)); w > width[v] {
				width[v] = w
				h.Push(^w, v)
			}
		}
	}
	return 0
}

// startBounds validates the bandwidth, duration and times of a StartQuery
// and returns the range of start times [lo, hi].
func startBounds(q *StartQuery) (d, lo, hi int64, err error) {
	if q.Bandwidth == 0 {
		return 0, 0, 0, fmt.Errorf("%w: the bandwidth is zero", ErrInvalidQuery)
	}
	if q.Duration <= 0 {
		return 0, 0, 0, fmt.Errorf("%w: the duration %s is not positive", ErrInvalidQuery, q.Duration)
	}
	d = int64(q.Duration)
	if lo, err = nanos(q.NotBefore, "not-before time"); err != nil {
		return 0, 0, 0, err
	}
	hz := int64(forever)
	if !q.Horizon.IsZero() {
		if hz, err = nanos(q.Horizon, "horizon"); err != nil {
			return 0, 0, 0, err
		}
	}
	hi = hz - d // no overflow: hz ≥ 0 or both small
	if hz < math.MinInt64+d || hi < lo {
		return 0, 0, 0, fmt.Errorf("%w: %s from %s does not end by the horizon %s", ErrNoSlot, q.Duration,
			q.NotBefore.Format(time.RFC3339), q.Horizon.Format(time.RFC3339))
	}
	return d, lo, hi, nil
}

// EarliestStart finds the earliest start at or after q.NotBefore at which
// q.Bandwidth is free for q.Duration, on q.Path or on any path.
//
// Formulation: for each link direction e, S(e) is the set of start times x
// with the bandwidth free throughout [x, x+D): a sorted list of disjoint
// intervals computed in one walk over e's steps (a step [a, b) with too
// little free rules out the starts (a−D, b)). On a fixed path the feasible
// starts are the intersection of S(e) along it (AlgEarliestStartPath,
// O(H·K)). On any path, labels L(v), the starts at which v can be reached,
// propagate Bellman-Ford style from L(src) = [NotBefore, Horizon−D]:
// L(v) ← L(v) ∪ (L(u) ∩ S(u,v)) until nothing changes, only routers passing
// labels on (AlgEarliestStart, O(V·E·K)); at a fixed start every edge set
// is fixed, so reachability through walks is reachability through simple
// paths, and min L(dst) is the earliest start. The path is then FixedSlot's
// for that slot.
//
// Two refinements keep it fast without changing the answer: only the part
// of a label that is new is propagated (semi-naive evaluation), and the
// search runs on a window of start times that grows eightfold until it
// finds a start (the labels restricted to a window are exactly the labels
// of the window), stopping early once NotBefore itself is reachable. Past
// the last breakpoint of the whole schedule nothing changes, so the search
// ends there. ErrNoSlot says no start works.
func (s *Schedule) EarliestStart(q StartQuery) (Result, error) {
	src, dst, dirs, err := s.endpoints(q.From, q.To, q.Path)
	if err != nil {
		return Result{}, err
	}
	d, lo, hi, err := startBounds(&q)
	if err != nil {
		return Result{}, err
	}
	if dirs != nil {
		l := s.pathStarts(dirs, q.Bandwidth, d, lo, hi)
		if len(l) == 0 {
			return Result{}, s.noSlot(&q)
		}
		return Result{Algorithm: AlgEarliestStartPath, Path: s.g.hops(dirs), Bandwidth: q.Bandwidth, Start: timeOf(l[0].lo), End: timeOf(l[0].lo + d)}, nil
	}
	top := min(hi, max(lo, s.lastBreak()))
	w := max(d, int64(time.Hour))
	for {
		wh := min(top, addSat(lo, w))
		l := s.reach(src, dst, q.Bandwidth, d, lo, wh, true)
		if len(l) > 0 {
			x := l[0].lo
			p := s.bfs(src, dst, q.Bandwidth, x, x+d, nil)
			if p == nil { // cannot happen: the labels and the BFS apply the same test
				return Result{}, fmt.Errorf("internal error: a start at %s was found but no path", timeOf(x).Format(time.RFC3339Nano))
			}
			return Result{Algorithm: AlgEarliestStart, Path: s.g.hops(p), Bandwidth: q.Bandwidth, Start: timeOf(x), End: timeOf(x + d)}, nil
		}
		if wh >= top {
			return Result{}, s.noSlot(&q)
		}
		w = addSat(w, 7*w)
	}
}

func (s *Schedule) noSlot(q *StartQuery) error {
	by := "with no horizon"
	if !q.Horizon.IsZero() {
		by = "ending by " + q.Horizon.Format(time.RFC3339)
	}
	where := "from " + q.From + " to " + q.To
	if q.Path != nil {
		where = "on the path given"
	}
	return fmt.Errorf("%w %s with %s free for %s, starting at or after %s %s", ErrNoSlot, where,
		units.FormatRate(float64(q.Bandwidth)), q.Duration, q.NotBefore.Format(time.RFC3339), by)
}

// AllStarts returns every start time at or after q.NotBefore at which
// q.Bandwidth is free for q.Duration, on q.Path or on any path, as windows
// (Result.Windows); the same labels as EarliestStart, run to the end over
// the whole range of starts: O(H·K) on a fixed path, O(V·E·K) on any. A
// start in a window may need a different path from another start in it:
// ask FixedSlot for the path of the slot chosen. ErrNoSlot says there is
// none.
func (s *Schedule) AllStarts(q StartQuery) (Result, error) {
	src, dst, dirs, err := s.endpoints(q.From, q.To, q.Path)
	if err != nil {
		return Result{}, err
	}
	d, lo, hi, err := startBounds(&q)
	if err != nil {
		return Result{}, err
	}
	var l []ival
	r := Result{Algorithm: AlgAllStarts, Bandwidth: q.Bandwidth}
	if dirs != nil {
		l = s.pathStarts(dirs, q.Bandwidth, d, lo, hi)
		r.Algorithm, r.Path = AlgAllStartsPath, s.g.hops(dirs)
	} else {
		// Past the last breakpoint feasibility no longer changes: compute up
		// to there and extend the last window if it reaches it.
		top := min(hi, max(lo, s.lastBreak()))
		l = s.reach(src, dst, q.Bandwidth, d, lo, top, false)
		if len(l) > 0 && l[len(l)-1].hi == top {
			l[len(l)-1].hi = hi
		}
	}
	if len(l) == 0 {
		return Result{}, s.noSlot(&q)
	}
	r.Windows = make([]Window, len(l))
	for i, x := range l {
		r.Windows[i] = Window{First: timeOf(x.lo), Last: timeOf(x.hi)}
	}
	return r, nil
}

// pathStarts intersects the feasible starts in [lo, hi] along a path.
func (s *Schedule) pathStarts(dirs []int32, bw uint64, d, lo, hi int64) []ival {
	l := []ival{{lo, hi}}
	var set, tmp []ival
	for _, e := range dirs {
		set = s.tl[e].starts(set[:0], bw, d, lo, hi)
		tmp = intersect(tmp[:0], l, set)
		l, tmp = tmp, l
		if len(l) == 0 {
			return nil
		}
	}
	return slices.Clone(l)
}

// reach returns L(dst) ∩ [lo, hi] (see EarliestStart): the starts x for
// which some path from src to dst has bw free throughout [x, x+d). With
// stopAtLo it may return early, once lo is in L(dst).
func (s *Schedule) reach(src, dst int, bw uint64, d, lo, hi int64, stopAtLo bool) []ival {
	g := s.g
	n := len(g.names)
	label := make([][]ival, n)   // L(v)
	pending := make([][]ival, n) // what L(v) gained since v was last expanded
	queued := make([]bool, n)
	sets := make([][]ival, len(g.dirs)) // S(e), computed when first needed
	have := make([]bool, len(g.dirs))
	label[src] = []ival{{lo, hi}}
	pending[src] = label[src]
	queue := []int32{int32(src)}
	var meet, gain []ival
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		queued[u] = false
		delta := pending[u]
		pending[u] = nil
		for _, e := range g.adj[u] {
			x := &g.dirs[e]
			v := x.to
			if int(v) == src || int(v) != dst && !g.router[v] || x.capacity < bw {
				continue
			}
			if !have[e] {
				sets[e] = s.tl[e].starts(nil, bw, d, lo, hi)
				have[e] = true
			}
			meet = intersect(meet[:0], delta, sets[e])
			if len(meet) == 0 {
				continue
			}
			gain = minus(gain[:0], meet, label[v])
			if len(gain) == 0 {
				continue
			}
			label[v] = union(nil, label[v], gain)
			if int(v) == dst {
				if stopAtLo && label[v][0].lo == lo {
					return label[v]
				}
				continue // paths do not go on from their destination
			}
			pending[v] = union(nil, pending[v], gain)
			if !queued[v] {
				queued[v] = true
				queue = append(queue, v)
			}
		}
	}
	return label[dst]
}

// transferTime returns the nanoseconds needed to move size bytes at bw bits
// per second, rounded up, and false if that is longer than an int64 holds.
func transferTime(size, bw uint64) (int64, bool) {
	if bw == 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(size, 8*uint64(time.Second))
	if hi >= bw {
		return 0, false
	}
	q, r := bits.Div64(hi, lo, bw)
	if r > 0 {
		q++
	}
	if q > math.MaxInt64 || q == 0 { // q == 0: q++ wrapped around
		return 0, false
	}
	return int64(q), true
}

// EarliestCompletion finds when q.Size bytes can have been moved at the
// earliest, at one bandwidth of at most q.MaxRate held from a start to an
// end on one path: q.Path, or any path.
//
// Formulation (slot extension): for a start t and an end x, the most one
// path can hold throughout [t, x) is W(t, x), the widest path over the span
// (the least residual along q.Path on a fixed path), and the transfer needs
// b = min(MaxRate, W(t, x)) to end by t + Size/b. For each start t in
// order, the end is extended from x = t + Size/MaxRate: if t + Size/b ≤ x,
// the transfer ends there (W(t, t + Size/b) ≥ W(t, x) ≥ b); otherwise no
// end before t + Size/b can work (W only shrinks as the span grows), so x
// jumps there. W changes only at breakpoints, so every jump that does not
// finish crosses one: at most K+1 widest-path runs per start. Starts stop
// once t + Size/MaxRate can no longer beat the best end found. Worst case
// O(K²) widest-path runs, O(K²·E log V) on any path
// (AlgEarliestCompletion), O(K²·H·K) on a fixed one
// (AlgEarliestCompletionPath); K here counts the breakpoints of the whole
// schedule, or of the path's directions.
//
// The starts worth trying are q.NotBefore and the breakpoints where some
// booking ends (where some direction has more free than just before): a
// reservation starting anywhere else can slide earlier, to the previous
// breakpoint or to q.NotBefore, over steps with as much free, and end
// earlier. On any path, a bound prunes most widest-path runs: every path
// leaves the source by one of its links and reaches the destination by one
// of its links, so the widest path is no wider than the widest of those
// over the span, which costs O(degree) to compute.
//
// Result.Bandwidth is the rate to hold over [Start, End), which moves at
// least Size bytes; on any path, Result.Path is FixedSlot's path for that
// bandwidth and slot. ErrNoSlot says no start works before the horizon.
func (s *Schedule) EarliestCompletion(q CompletionQuery) (Result, error) {
	src, dst, dirs, err := s.endpoints(q.From, q.To, q.Path)
	if err != nil {
		return Result{}, err
	}
	if q.Size == 0 {
		return Result{}, fmt.Errorf("%w: the size is zero", ErrInvalidQuery)
	}
	rate := q.MaxRate
	if rate == 0 {
		rate = math.MaxUint64
	}
	lo, err := nanos(q.NotBefore, "not-before time")
	if err != nil {
		return Result{}, err
	}
	hz := int64(forever)
	if !q.Horizon.IsZero() {
		if hz, err = nanos(q.Horizon, "horizon"); err != nil {
			return Result{}, err
		}
	}
	need, ok := transferTime(q.Size, rate)
	if !ok {
		return Result{}, fmt.Errorf("%w: moving %s at %s takes longer than this package can count", ErrNoSlot,
			units.FormatSize(int64(min(q.Size, math.MaxInt64))), units.FormatRate(float64(rate)))
	}
	// width returns the width of the widest path over [t, T).
	width := func(t, T int64) uint64 {
		if dirs == nil {
			return s.maxWidth(src, dst, t, T)
		}
		w := uint64(math.MaxUint64)
		for _, e := range dirs {
			w = min(w, s.tl[e].residual(t, T))
		}
		return w
	}
	// finish returns when the transfer ends if it starts at t at b.
	finish := func(t int64, b uint64) (int64, bool) {
		dur, ok := transferTime(q.Size, b)
		return addSat(t, dur), ok
	}

	var bestStart int64
	var bestBW uint64
	bestEnd := int64(forever)
	starts := s.releases(lo, dirs)
	for t := lo; t < hz; t = starts.next() {
		minEnd := addSat(t, need)
		if minEnd >= bestEnd || minEnd > hz {
			break // later starts end later still, or after the horizon
		}
		// x never passes the earliest end from t: stop once it reaches
		// the best end so far, or the horizon.
		for x := minEnd; x < bestEnd && x <= hz; {
			if dirs == nil {
				// The bound first: no wider than the ends' links.
				xb, ok := finish(t, min(rate, s.endsWidth(src, dst, t, x)))
				if !ok {
					break
				}
				if xb > x {
					x = xb
					continue
				}
			}
			b := min(rate, width(t, x))
			end, ok := finish(t, b)
			if !ok {
				break // nothing, or too little, free from t on: longer spans only have less
			}
			if end <= x {
				bestStart, bestEnd, bestBW = t, end, b
				break
			}
			x = end
		}
	}
	if bestEnd == forever {
		where := "from " + q.From + " to " + q.To
		if q.Path != nil {
			where = "on the path given"
		}
		upTo := units.FormatRate(float64(rate))
		if q.MaxRate == 0 {
			// No rate was asked for: say the most the path has free at
			// any time before the horizon, not the unbounded rate tried.
			var most uint64
			rs := s.releases(lo, dirs)
			for t := lo; t < hz && t < forever; t = rs.next() {
				most = max(most, width(t, t+1))
			}
			upTo = units.FormatRate(float64(most)) + " (the most it has free)"
		}
		by := ""
		if !q.Horizon.IsZero() {
			by = " and ending by " + q.Horizon.Format(time.RFC3339)
		}
		return Result{}, fmt.Errorf("%w %s to move %s at up to %s, starting at or after %s%s", ErrNoSlot, where,
			units.FormatSize(int64(min(q.Size, math.MaxInt64))), upTo, q.NotBefore.Format(time.RFC3339), by)
	}
	t := bestStart
	best := Result{Algorithm: AlgEarliestCompletionPath, Bandwidth: bestBW, Start: timeOf(t), End: timeOf(bestEnd)}
	if dirs == nil {
		// FixedSlot's path for that bandwidth: the widest path may be
		// longer than needed when MaxRate is the limit.
		p := s.bfs(src, dst, bestBW, t, bestEnd, nil)
		if p == nil { // cannot happen: the widest path over the span carries bestBW
			return Result{}, fmt.Errorf("internal error: a completion at %s was found but no path", timeOf(bestEnd).Format(time.RFC3339Nano))
		}
		best.Algorithm, best.Path = AlgEarliestCompletion, s.g.hops(p)
	} else {
		best.Path = s.g.hops(dirs)
	}
	return best, nil
}

// endsWidth bounds the width of any path from src to dst over [t, T): the
// widest link direction out of src, or into dst, whichever is narrower.
func (s *Schedule) endsWidth(src, dst int, t, T int64) uint64 {
	var out, in uint64
	for _, e := range s.g.adj[src] {
		out = max(out, s.tl[e].residual(t, T))
	}
	for _, e := range s.g.adj[dst] {
		in = max(in, s.tl[e^1].residual(t, T)) // e^1: the reverse direction, into dst
	}
	return min(out, in)
}

// releaseIter yields, in order, the instants after a time at which some of
// a set of directions has less booked than just before: a k-way merge over
// their timelines, one heap entry per direction.
type releaseIter struct {
	s *Schedule
	h heapq.Heap[int64, relItem] // by the release instant
}

// relItem is a direction and the index of its next release instant in its
// breakpoints.
type relItem struct {
	dir int32
	k   int32
}

// releases returns the release instants after lo in dirs (every direction
// if dirs is nil).
func (s *Schedule) releases(lo int64, dirs []int32) *releaseIter {
	it := &releaseIter{s: s}
	it.h.AnyTies = true // the releases at one instant are taken together
	add := func(d int32) {
		t := &s.tl[d]
		k, found := slices.BinarySearch(t.at, lo)
		if found {
			k++
		}
		if at, r, ok := it.release(d, k); ok {
			it.h.Add(at, r)
		}
	}
	if dirs == nil {
		for d := range s.tl {
			add(int32(d))
		}
	} else {
		for _, d := range dirs {
			add(d)
		}
	}
	it.h.Heapify()
	return it
}

// release returns direction d's first release at index k or later, if any.
func (it *releaseIter) release(d int32, k int) (int64, relItem, bool) {
	t := &it.s.tl[d]
	for ; k < len(t.at); k++ {
		if t.used[k] < t.usedAt(k-1) {
			return t.at[k], relItem{d, int32(k)}, true
		}
	}
	return 0, relItem{}, false
}

// next returns the next release instant, or forever when there are no more.
func (it *releaseIter) next() int64 {
	if it.h.Len() == 0 {
		return forever
	}
	x, _ := it.h.Top()
	for it.h.Len() > 0 {
		if at, _ := it.h.Top(); at != x {
			break
		}
		_, top := it.h.Top()
		if at, r, ok := it.release(top.dir, int(top.k)+1); ok {
			it.h.ReplaceTop(at, r)
		} else {
			it.h.Pop()
		}
	}
	return x
}

// Alternatives returns the nearest alternatives to a request that was
// refused (or that the caller wants to compare): the earliest slot of the
// same bandwidth and duration that starts at or after req.Start and ends by
// horizon (the zero time: no horizon), on any path (EarliestStart); and the
// widest path over req's own slot (WidestPath). Only an invalid request is
// an error; where there is no alternative of a kind, its field is nil.
func (s *Schedule) Alternatives(req Request, horizon time.Time) (Alternatives, error) {
	var alt Alternatives
	if _, _, _, err := s.endpoints(req.From, req.To, nil); err != nil {
		return alt, err
	}
	if req.Bandwidth == 0 {
		return alt, fmt.Errorf("%w: the bandwidth is zero", ErrInvalidQuery)
	}
	if _, _, err := span(req.Start, req.End); err != nil {
		return alt, err
	}
	r, err := s.EarliestStart(StartQuery{From: req.From, To: req.To, Bandwidth: req.Bandwidth,
		Duration: req.End.Sub(req.Start), NotBefore: req.Start, Horizon: horizon})
	switch {
	case err == nil:
		alt.Earliest = &r
	case !errors.Is(err, ErrNoSlot):
		return Alternatives{}, err
	}
	w, err := s.WidestPath(req.From, req.To, req.Start, req.End)
	switch {
	case err == nil:
		alt.Widest = &w
	case !errors.Is(err, ErrNoPath):
		return Alternatives{}, err
	}
	return alt, nil
}
