package reserve

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// The benchmarks run on one generated workload: 1,000 nodes, 3,000 links
// and 100,000 bookings over a week (GenerateWorkload), built once. Each
// reports, besides ns/op, the p50 and p99 latency of its queries and the
// share that found nothing (or, for starts, that could not start at once).
// Targets for the controller: fixed slot p99 < 10 ms, earliest start p99 <
// 100 ms.

var bench struct {
	once sync.Once
	w    *Workload
	err  error
}

func benchWorkload(b *testing.B) *Workload {
	b.Helper()
	bench.once.Do(func() { bench.w, bench.err = GenerateWorkload(1, 1000, 3000, 100_000) })
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.w
}

// benchQuery is one query's inputs: two hosts, a start within the week,
// and a fixed path (that of a random existing booking).
type benchQuery struct {
	from, to string
	start    time.Time
	path     []Hop
}

func benchQueries(w *Workload, n int) []benchQuery {
	rng := rand.New(rand.NewPCG(42, 43))
	var hosts []string
	for _, name := range w.Graph.Nodes() {
		if r, _ := w.Graph.Role(name); r == NodeHost {
			hosts = append(hosts, name)
		}
	}
	qs := make([]benchQuery, n)
	span := int64(w.End.Sub(w.Start))
	for i := range qs {
		q := &qs[i]
		for q.from == q.to {
			q.from, q.to = hosts[rng.IntN(len(hosts))], hosts[rng.IntN(len(hosts))]
		}
		q.start = w.Start.Add(time.Duration(rng.Int64N(span)))
		q.path = w.Bookings[rng.IntN(len(w.Bookings))].Path
	}
	return qs
}

// run times f over the queries and reports percentiles, and the share of
// queries for which f reports a miss.
func run(b *testing.B, f func(q benchQuery) (miss bool, err error)) {
	w := benchWorkload(b)
	qs := benchQueries(w, 1000)
	var lat []time.Duration
	misses, i := 0, 0
	b.ResetTimer()
	for b.Loop() {
		q := qs[i%len(qs)]
		i++
		t := time.Now()
		miss, err := f(q)
		lat = append(lat, time.Since(t))
		if err != nil {
			b.Fatal(err)
		}
		if miss {
			misses++
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
	b.ReportMetric(100*float64(misses)/float64(len(lat)), "miss-%")
}

// missed turns "nothing found" into a miss rather than an error.
func missed(err error) (bool, error) {
	if errors.Is(err, ErrNoPath) || errors.Is(err, ErrNoSlot) {
		return true, nil
	}
	return false, err
}

func BenchmarkAdmit(b *testing.B) {
	run(b, func(q benchQuery) (bool, error) {
		err := benchWorkload(b).Schedule.Admit(q.path, gbps, q.start, q.start.Add(time.Hour))
		if errors.Is(err, ErrCapacity) {
			return true, nil
		}
		return false, err
	})
}

func BenchmarkAddRemove(b *testing.B) {
	s := benchWorkload(b).Schedule
	run(b, func(q benchQuery) (bool, error) {
		err := s.Add(Booking{ID: "bench", Path: q.path, Bandwidth: 100 * mbps, Start: q.start, End: q.start.Add(time.Hour)})
		if errors.Is(err, ErrCapacity) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		_, err = s.Remove("bench")
		return false, err
	})
}

func BenchmarkFixedSlot(b *testing.B) {
	s := benchWorkload(b).Schedule
	run(b, func(q benchQuery) (bool, error) {
		_, err := s.FixedSlot(Request{q.from, q.to, 2 * gbps, q.start, q.start.Add(4 * time.Hour)})
		return missed(err)
	})
}

func BenchmarkWidestPath(b *testing.B) {
	s := benchWorkload(b).Schedule
	run(b, func(q benchQuery) (bool, error) {
		_, err := s.WidestPath(q.from, q.to, q.start, q.start.Add(4*time.Hour))
		return missed(err)
	})
}

// startQuery asks for 5 Gbit/s for 4 hours within a month: host uplinks
// carry 9 Gbit/s reservable, so a good share must wait.
func startQuery(q benchQuery, fixed bool) StartQuery {
	sq := StartQuery{From: q.from, To: q.to, Bandwidth: 5 * gbps, Duration: 4 * time.Hour, NotBefore: q.start, Horizon: q.start.Add(30 * 24 * time.Hour)}
	if fixed {
		sq.From, sq.To, sq.Path = "", "", q.path
	}
	return sq
}

// later counts a start later than asked as a miss, to show how many had to
// wait.
func later(r Result, err error, q benchQuery) (bool, error) {
	if miss, err := missed(err); miss || err != nil {
		return miss, err
	}
	return r.Start.After(q.start), nil
}

func BenchmarkEarliestStartPath(b *testing.B) {
	s := benchWorkload(b).Schedule
	run(b, func(q benchQuery) (bool, error) {
		r, err := s.EarliestStart(startQuery(q, true))
		return later(r, err, q)
	})
}

func BenchmarkEarliestStart(b *testing.B) {
	s := benchWorkload(b).Schedule
	run(b, func(q benchQuery) (bool, error) {
		r, err := s.EarliestStart(startQuery(q, false))
		return later(r, err, q)
	})
}

func BenchmarkAllStartsPath(b *testing.B) {
	s := benchWorkload(b).Schedule
	run(b, func(q benchQuery) (bool, error) {
		_, err := s.AllStarts(startQuery(q, true))
		return missed(err)
	})
}

func BenchmarkAllStarts(b *testing.B) {
	s := benchWorkload(b).Schedule
	run(b, func(q benchQuery) (bool, error) {
		_, err := s.AllStarts(startQuery(q, false))
		return missed(err)
	})
}

// completionQuery moves 2 TB at up to 10 Gbit/s (at least 27 minutes).
func completionQuery(q benchQuery, fixed bool) CompletionQuery {
	cq := CompletionQuery{From: q.from, To: q.to, Size: 2_000_000_000_000, MaxRate: 10 * gbps, NotBefore: q.start, Horizon: q.start.Add(30 * 24 * time.Hour)}
	if fixed {
		cq.From, cq.To, cq.Path = "", "", q.path
	}
	return cq
}

func BenchmarkEarliestCompletionPath(b *testing.B) {
	s := benchWorkload(b).Schedule
	run(b, func(q benchQuery) (bool, error) {
		r, err := s.EarliestCompletion(completionQuery(q, true))
		return later(r, err, q)
	})
}

func BenchmarkEarliestCompletion(b *testing.B) {
	s := benchWorkload(b).Schedule
	run(b, func(q benchQuery) (bool, error) {
		r, err := s.EarliestCompletion(completionQuery(q, false))
		return later(r, err, q)
	})
}

func BenchmarkAlternatives(b *testing.B) {
	s := benchWorkload(b).Schedule
	run(b, func(q benchQuery) (bool, error) {
		alt, err := s.Alternatives(Request{q.from, q.to, 5 * gbps, q.start, q.start.Add(4 * time.Hour)}, q.start.Add(30*24*time.Hour))
		return alt.Earliest == nil, err
	})
}
