package repo

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/chunk"
)

// Limits on one query, so that a dashboard cannot ask for gigabytes.
const (
	MaxPoints = 11000 // per series
	MaxSeries = 10000 // matched by one query
	MinStep   = time.Second
)

// Query selects series by name and exact label values over a time range.
type Query struct {
	Name  string            // required metric name
	Match map[string]string // exact label matches ("" matches series without the label)
	Start time.Time         // inclusive
	End   time.Time         // inclusive
	// Step > 0: one point per step at t = multiples of Step in the range,
	// the average of the samples in (t-Step, t], from the finest tier that
	// covers the range and whose step is <= Step. 0: the samples of the
	// finest tier that covers the range.
	Step time.Duration
	Tier int // -1 = automatic; otherwise that tier (note: 0 forces raw)
}

// Series is one series' points in a query's answer.
type Series struct {
	Name   string
	Labels monitor.Labels
	Points []PointTV
}

// PointTV is one point: milliseconds since the epoch and a value.
type PointTV struct {
	T int64
	V float64
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", monitor.ErrInvalid, fmt.Sprintf(format, a...))
}

// pickTier chooses the tier for a query: the finest that covers the range
// (its retention reaches back to Start) and whose step is at most Step;
// failing that the finest that covers it; failing that the one that keeps
// the longest.
func (r *Repo) pickTier(start time.Time, step time.Duration) int {
	now := r.o.Now()
	covering := -1
	for i, t := range r.tiers {
		if start.Before(now.Add(-t.Retention)) {
			continue
		}
		if covering < 0 {
			covering = i
		}
		if step == 0 || t.Step <= step {
			return i // tiers go from fine to coarse: the first is the finest
		}
	}
	if covering >= 0 {
		return covering
	}
	best := 0
	for i, t := range r.tiers {
		if t.Retention > r.tiers[best].Retention {
			best = i
		}
	}
	return best
}

// Query answers q. Absurd queries are errors wrapping monitor.ErrInvalid;
// an unknown name is an empty answer.
func (r *Repo) Query(ctx context.Context, q Query) ([]Series, error) {
	switch {
	case q.Name == "":
		return nil, invalid("a query needs a metric name")
	case q.Start.IsZero() || q.End.IsZero():
		return nil, invalid("a query needs a start and an end")
	case q.End.Before(q.Start):
		return nil, invalid("end %s is before start %s", q.End.Format(time.RFC3339), q.Start.Format(time.RFC3339))
	case q.Step < 0:
		return nil, invalid("step %v is negative", q.Step)
	case q.Step != 0 && q.Step < MinStep:
		return nil, invalid("step %v is under %v", q.Step, MinStep)
	case q.Tier < -1 || q.Tier >= len(r.tiers):
		return nil, invalid("tier %d: the repository has tiers 0 to %d (-1 = automatic)", q.Tier, len(r.tiers)-1)
	}
	startMs, endMs := q.Start.UnixMilli(), q.End.UnixMilli()
	var stepMs, first int64
	if q.Step > 0 {
		stepMs = q.Step.Milliseconds()
		first = ceilDiv(startMs, stepMs) * stepMs
		if n := (endMs-first)/stepMs + 1; n > MaxPoints {
			return nil, invalid("%d points per series (range %v at step %v); at most %d: widen the step", n, q.End.Sub(q.Start), q.Step, MaxPoints)
		}
	}
	tier := q.Tier
	if tier < 0 {
		tier = r.pickTier(q.Start, q.Step)
	}
	ss, err := r.match(q.Name, q.Match)
	if err != nil {
		return nil, err
	}
	if len(ss) == 0 {
		return nil, nil
	}
	data, err := r.read(ctx, ss, tier, startMs, endMs, stepMs == 0)
	if err != nil {
		return nil, err
	}
	out := make([]Series, 0, len(ss))
	for i, s := range ss {
		pts := data[i]
		if len(pts) == 0 {
			continue
		}
		if stepMs > 0 {
			pts = average(pts, first, stepMs)
		} else if len(pts) > MaxPoints {
			return nil, invalid("%s has %d samples in the range; at most %d: give a step or a shorter range", monitor.Key(s.name, s.labels), len(pts), MaxPoints)
		}
		out = append(out, Series{Name: s.name, Labels: s.labels, Points: pts})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Labels.String() < out[j].Labels.String() })
	return out, nil
}

// AutoStep is the step a query without one is given when its range may
// hold more than MaxPoints samples of a series in the tier it reads (one
// per tier step, or one per MinStep in the raw tier): the smallest whole
// multiple of that resolution that keeps the points per series within
// MaxPoints. It is 0 when the query has a step or needs none.
func (r *Repo) AutoStep(q Query) time.Duration {
	if q.Step != 0 || q.End.Before(q.Start) || q.Tier >= len(r.tiers) {
		return 0
	}
	tier := q.Tier
	if tier < 0 {
		tier = r.pickTier(q.Start, 0)
	}
	res := max(r.tiers[tier].Step, MinStep).Milliseconds()
	span := q.End.UnixMilli() - q.Start.UnixMilli() // a Duration saturates at 292 years
	if span/res < MaxPoints-1 {
		return 0
	}
	n := (span/(MaxPoints-2) + res - 1) / res // steps of res, rounded up
	return time.Duration(n*res) * time.Millisecond
}

// average buckets sorted points into (t-step, t] for t = first, first+step...
func average(pts []PointTV, first, step int64) []PointTV {
	var out []PointTV
	var sum float64
	var n int
	cur := int64(0)
	for _, p := range pts {
		end := ceilDiv(p.T, step) * step
		if n > 0 && end != cur {
			out = append(out, PointTV{cur, sum / float64(n)})
			sum, n = 0, 0
		}
		cur = end
		sum += p.V
		n++
	}
	if n > 0 {
		out = append(out, PointTV{cur, sum / float64(n)})
	}
	return out
}

// match finds the series of name whose labels equal m.
func (r *Repo) match(name string, m map[string]string) ([]*series, error) {
	r.idx.RLock()
	defer r.idx.RUnlock()
	ni := r.byName[name]
	if ni == nil {
		return nil, nil
	}
	cand := ni.all
	for k, v := range m {
		if v == "" {
			continue
		}
		p := ni.postings[k][v]
		if len(p) < len(cand) {
			cand = p
		}
	}
	var out []*series
	for _, s := range cand {
		ok := true
		for k, v := range m {
			if s.labels.Get(k) != v {
				ok = false
				break
			}
		}
		if ok {
			if len(out) == MaxSeries {
				return nil, invalid("more than %d series match %s%s: narrow the match", MaxSeries, name, matchString(m))
			}
			out = append(out, s)
		}
	}
	return out, nil
}

func matchString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	b.WriteByte('}')
	return b.String()
}

type rawChunk struct {
	start int64
	data  []byte
}

// read returns the points of each series in [start, end] in one tier:
// memory first (the open chunks, which only memory and the heads file
// hold, and chunks not yet checkpointed), then SQLite, so a chunk moving
// from one to the other is seen in at least one.
func (r *Repo) read(ctx context.Context, ss []*series, tier int, start, end int64, limit bool) ([][]PointTV, error) {
	mem := make([][]rawChunk, len(ss))
	pos := make(map[int64]int, len(ss))
	for i, s := range ss {
		pos[s.id] = i
		s.mu.Lock()
		ts := &s.tiers[tier]
		for _, sc := range ts.sealed {
			if sc.end >= start && sc.start <= end {
				mem[i] = append(mem[i], rawChunk{sc.start, sc.data})
			}
		}
		if ts.head != nil && ts.headEnd >= start && ts.headStart <= end {
			mem[i] = append(mem[i], rawChunk{ts.headStart, slices.Clone(ts.head.Bytes())})
		}
		if ts.stored != nil && ts.headEnd >= start && ts.headStart <= end {
			mem[i] = append(mem[i], rawChunk{ts.headStart, ts.stored}) // never changed
		}
		s.mu.Unlock()
	}
	disk := make([][]rawChunk, len(ss))
	t := r.tiers[tier]
	wins, err := r.windows(ctx, tier, floorDiv(start, t.window), floorDiv(end, t.window))
	if err != nil {
		return nil, err
	}
	// Chunks never cross a window: one seek per window and group of series.
	const group = 500
	for _, w := range wins {
		for g := 0; g < len(ss); g += group {
			part := ss[g:min(g+group, len(ss))]
			var sb strings.Builder
			args := make([]any, 0, len(part)+4)
			args = append(args, tier, w, end, start)
			sb.WriteString(`SELECT series_id, start_ms, data FROM chunks WHERE tier = ? AND win = ? AND start_ms <= ? AND end_ms >= ? AND series_id IN (`)
			for i, s := range part {
				if i > 0 {
					sb.WriteByte(',')
				}
				sb.WriteByte('?')
				args = append(args, s.id)
			}
			sb.WriteByte(')')
			if err := r.readRows(ctx, sb.String(), args, pos, disk); err != nil {
				return nil, err
			}
		}
	}
	out := make([][]PointTV, len(ss))
	for i := range ss {
		cs := mem[i]
		for _, d := range disk[i] {
			// Memory is newer than SQLite's copy of the same chunk.
			if !slices.ContainsFunc(mem[i], func(m rawChunk) bool { return m.start == d.start }) {
				cs = append(cs, d)
			}
		}
		slices.SortFunc(cs, func(a, b rawChunk) int { return cmp64(a.start, b.start) })
		var pts []PointTV
		for _, c := range cs {
			ch, err := chunk.FromBytes(c.data)
			if err != nil {
				return nil, fmt.Errorf("query: series %d chunk at %d: %w", ss[i].id, c.start, err)
			}
			it := ch.Iterator()
			for it.Next() {
				t, v := it.At()
				if t < start || t > end {
					continue
				}
				pts = append(pts, PointTV{t, v})
				if limit && len(pts) > MaxPoints+len(cs) {
					return nil, invalid("%s has more than %d samples in the range; at most %d: give a step or a shorter range", monitor.Key(ss[i].name, ss[i].labels), MaxPoints, MaxPoints)
				}
			}
			if err := it.Err(); err != nil {
				return nil, fmt.Errorf("query: series %d chunk at %d: %w", ss[i].id, c.start, err)
			}
		}
		if !isSortedPts(pts) {
			slices.SortStableFunc(pts, func(a, b PointTV) int { return cmp64(a.T, b.T) })
			pts = slices.CompactFunc(pts, func(a, b PointTV) bool { return a.T == b.T })
		}
		out[i] = pts
	}
	return out, nil
}

// windows lists the windows of tier from w0 to w1 to read: all of them
// for a short range, else only those that hold chunks (one scan of the
// index), so that a range of centuries costs what its data costs, not a
// seek per window.
func (r *Repo) windows(ctx context.Context, tier int, w0, w1 int64) ([]int64, error) {
	const few = 64
	if w1-w0 < few {
		out := make([]int64, 0, w1-w0+1)
		for w := w0; w <= w1; w++ {
			out = append(out, w)
		}
		return out, nil
	}
	rows, err := r.db.QueryContext(ctx, `SELECT DISTINCT win FROM chunks WHERE tier = ? AND win BETWEEN ? AND ? ORDER BY win`, tier, w0, w1)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var w int64
		if err := rows.Scan(&w); err != nil {
			return nil, fmt.Errorf("query: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	return out, nil
}

// readRows adds the (series_id, start_ms, data) rows of q to disk.
func (r *Repo) readRows(ctx context.Context, q string, args []any, pos map[int64]int, disk [][]rawChunk) error {
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, st int64
		var data []byte
		if err := rows.Scan(&id, &st, &data); err != nil {
			return fmt.Errorf("query: %w", err)
		}
		i := pos[id]
		disk[i] = append(disk[i], rawChunk{st, data})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("query: %w", err)
	}
	return nil
}

func isSortedPts(p []PointTV) bool {
	for i := 1; i < len(p); i++ {
		if p[i].T <= p[i-1].T {
			return false
		}
	}
	return true
}

// Latest calls fn with the last sample of every series updated in the
// last five minutes (by the repository's clock), for /metrics.
func (r *Repo) Latest(fn func(name string, ls monitor.Labels, meta monitor.Meta, t int64, v float64)) {
	since := r.o.Now().Add(-latestSpan).UnixMilli()
	r.idx.RLock()
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	type lv struct {
		s *series
		t int64
		v float64
	}
	var out []lv
	for _, n := range names {
		for _, s := range r.byName[n].all {
			s.mu.Lock()
			if s.lastT != none && s.lastT >= since {
				out = append(out, lv{s, s.lastT, s.lastV})
			}
			s.mu.Unlock()
		}
	}
	r.idx.RUnlock()
	for _, x := range out {
		m, _ := r.Meta(x.s.name)
		fn(x.s.name, x.s.labels, m, x.t, x.v)
	}
}

// Names lists the metric names, sorted.
func (r *Repo) Names() []string {
	r.idx.RLock()
	defer r.idx.RUnlock()
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Meta is a name's type and help, as its agents last declared them.
func (r *Repo) Meta(name string) (monitor.Meta, bool) {
	r.metaMu.RLock()
	defer r.metaMu.RUnlock()
	m, ok := r.meta[name]
	return m, ok
}
