package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// runDirect times the scheduler's queries on the workload's schedule and,
// with a store, the load of the existing bookings and creates as store
// transactions: the layers under the controller, without it.
func runDirect(w *reserve.Workload, cfg config, sum *summary) ([]row, error) {
	var rows []row
	b := newBench(w, cfg.seed)
	if cfg.queries > 0 {
		for _, k := range b.kinds() {
			logf("query %s: %d runs", k.name, cfg.queries)
			r := b.time(k, cfg.queries)
			rows = append(rows, r)
			switch k.name {
			case "fixed-slot":
				sum.FixedSlotP99ms = r.P99ms
			case "earliest-start-path":
				sum.EarliestStartPathP99ms = r.P99ms
			case "earliest-start-any":
				sum.EarliestStartAnyP99ms = r.P99ms
			}
		}
	}
	if cfg.dbURL == "" {
		return rows, nil
	}
	kind := storeKind(cfg.dbURL)
	sum.DB = kind
	ctx := context.Background()
	st, err := store.Open(ctx, cfg.dbURL)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	nl := cfg.load
	logf("%s: loading %d of the %d existing bookings, %d per transaction", kind, nl, len(w.Bookings), loadBatch)
	t0 := time.Now()
	if err := load(ctx, st, w.Bookings[:nl]); err != nil {
		return nil, err
	}
	secs := time.Since(t0).Seconds()
	sum.LoadSeconds = ptr(secs)
	rows = append(rows, row{Row: "load", DB: kind, N: nl, Seconds: ptr(secs), PerSecond: ptr(float64(nl) / secs)})
	logf("%s: loaded in %.1f s", kind, secs)
	if cfg.creates > 0 {
		logf("%s: %d creates from %d goroutines", kind, cfg.creates, cfg.workers)
		r, err := b.creates(ctx, st, cfg.creates, cfg.workers)
		if err != nil {
			return nil, err
		}
		r.DB = kind
		rows = append(rows, r)
		sum.CreatesPerSecond, sum.CreateP50ms, sum.CreateP99ms = r.PerSecond, r.P50ms, r.P99ms
	}
	return rows, nil
}

// bench holds the workload and what the queries are drawn from.
type bench struct {
	w     *reserve.Workload
	s     *reserve.Schedule
	mu    sync.RWMutex // guards s: creates take it to change s
	hosts []string
	rng   *rand.Rand
	seed  int64
}

func newBench(w *reserve.Workload, seed int64) *bench {
	b := &bench{w: w, s: w.Schedule, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 0x7363686564))} // "sched"
	for _, n := range w.Graph.Nodes() {
		if r, _ := w.Graph.Role(n); r == reserve.NodeHost {
			b.hosts = append(b.hosts, n)
		}
	}
	return b
}

// query is one random query's inputs.
type query struct {
	from, to string
	start    time.Time
	path     []reserve.Hop // the path of a random existing booking
}

func (b *bench) draw() query {
	var q query
	for q.from == q.to {
		q.from, q.to = b.hosts[b.rng.IntN(len(b.hosts))], b.hosts[b.rng.IntN(len(b.hosts))]
	}
	q.start = b.w.Start.Add(time.Duration(b.rng.Int64N(int64(b.w.End.Sub(b.w.Start)))))
	q.path = b.w.Bookings[b.rng.IntN(len(b.w.Bookings))].Path
	return q
}

// kind is one query kind: prep draws a query (untimed), do runs it (timed)
// and says whether it found nothing and which algorithm answered.
type kind struct {
	name string
	prep func() query
	do   func(q query) (none bool, alg string, err error)
}

// nothing turns "found nothing" into a miss rather than an error.
func nothing(err error) (bool, error) {
	if errors.Is(err, reserve.ErrNoPath) || errors.Is(err, reserve.ErrNoSlot) {
		return true, nil
	}
	return false, err
}

const month = 30 * 24 * time.Hour

// startQuery asks for 5 Gbit/s for 4 hours within 30 days, as the
// package's own benchmarks do: host uplinks have 9 Gbit/s reservable, so
// many must wait.
func startQuery(q query, fixed bool) reserve.StartQuery {
	sq := reserve.StartQuery{From: q.from, To: q.to, Bandwidth: 5 * gbps, Duration: 4 * time.Hour, NotBefore: q.start, Horizon: q.start.Add(month)}
	if fixed {
		sq.From, sq.To, sq.Path = "", "", q.path
	}
	return sq
}

// completionQuery moves 2 TB at up to 10 Gbit/s within 30 days.
func completionQuery(q query, fixed bool) reserve.CompletionQuery {
	cq := reserve.CompletionQuery{From: q.from, To: q.to, Size: 2_000_000_000_000, MaxRate: 10 * gbps, NotBefore: q.start, Horizon: q.start.Add(month)}
	if fixed {
		cq.From, cq.To, cq.Path = "", "", q.path
	}
	return cq
}

// rejectedBandwidth is the bandwidth of the requests whose alternatives are
// asked for: 8 of the 9 Gbit/s a host uplink can carry, so that many are
// refused.
const rejectedBandwidth = 8 * gbps

func (b *bench) rejected() query {
	var q query
	for range 1000 {
		q = b.draw()
		_, err := b.s.FixedSlot(reserve.Request{From: q.from, To: q.to, Bandwidth: rejectedBandwidth, Start: q.start, End: q.start.Add(4 * time.Hour)})
		if errors.Is(err, reserve.ErrNoPath) {
			return q
		}
	}
	return q // rarely refused: time an accepted one rather than loop forever
}

func (b *bench) kinds() []kind {
	res := func(r reserve.Result, err error) (bool, string, error) {
		none, err := nothing(err)
		return none, r.Algorithm, err
	}
	return []kind{
		{"fixed-slot", b.draw, func(q query) (bool, string, error) {
			return res(b.s.FixedSlot(reserve.Request{From: q.from, To: q.to, Bandwidth: 2 * gbps, Start: q.start, End: q.start.Add(4 * time.Hour)}))
		}},
		{"widest-path", b.draw, func(q query) (bool, string, error) {
			return res(b.s.WidestPath(q.from, q.to, q.start, q.start.Add(4*time.Hour)))
		}},
		{"earliest-start-path", b.draw, func(q query) (bool, string, error) { return res(b.s.EarliestStart(startQuery(q, true))) }},
		{"earliest-start-any", b.draw, func(q query) (bool, string, error) { return res(b.s.EarliestStart(startQuery(q, false))) }},
		{"all-starts-path", b.draw, func(q query) (bool, string, error) { return res(b.s.AllStarts(startQuery(q, true))) }},
		{"all-starts-any", b.draw, func(q query) (bool, string, error) { return res(b.s.AllStarts(startQuery(q, false))) }},
		{"earliest-completion-path", b.draw, func(q query) (bool, string, error) {
			return res(b.s.EarliestCompletion(completionQuery(q, true)))
		}},
		{"earliest-completion-any", b.draw, func(q query) (bool, string, error) {
			return res(b.s.EarliestCompletion(completionQuery(q, false)))
		}},
		{"alternatives", b.rejected, func(q query) (bool, string, error) {
			alt, err := b.s.Alternatives(reserve.Request{From: q.from, To: q.to, Bandwidth: rejectedBandwidth, Start: q.start, End: q.start.Add(4 * time.Hour)}, q.start.Add(month))
			return alt.Earliest == nil && alt.Widest == nil, "earliest-start + widest-path", err
		}},
	}
}

// time runs k n times, each on a freshly drawn query, and summarises.
func (b *bench) time(k kind, n int) row {
	lat := make([]time.Duration, 0, n)
	none := 0
	algs := map[string]bool{}
	for range n {
		q := k.prep()
		t := time.Now()
		miss, alg, err := k.do(q)
		lat = append(lat, time.Since(t))
		if err != nil {
			// A query the scheduler refuses as invalid is a bug in the
			// benchmark or the scheduler: say so loudly.
			logf("%s: %v", k.name, err)
			os.Exit(1)
		}
		if miss {
			none++
		}
		if alg != "" {
			algs[alg] = true
		}
	}
	slices.Sort(lat)
	names := make([]string, 0, len(algs))
	for a := range algs {
		names = append(names, a)
	}
	slices.Sort(names)
	return row{Row: "query", Kind: k.name, Algorithm: strings.Join(names, ","), N: n,
		P50ms: ptr(ms(pct(lat, 0.50))), P99ms: ptr(ms(pct(lat, 0.99))), Maxms: ptr(ms(lat[len(lat)-1])),
		NonePct: ptr(100 * float64(none) / float64(n))}
}

// reservation makes the RESERVED reservation a create of bk stores, through
// the state machine as the controller will.
func reservation(bk reserve.Booking, now time.Time) (reserve.Reservation, error) {
	path := make([]reserve.PathHop, len(bk.Path))
	for i, h := range bk.Path {
		path[i] = reserve.PathHop(h)
	}
	r := reserve.Reservation{ID: bk.ID, Owner: "bench", Project: "bench", From: path[0].From, To: path[len(path)-1].To,
		Bandwidth: bk.Bandwidth, Start: bk.Start, End: bk.End, Path: path}
	r, _, err := reserve.Next(r, reserve.Event{Kind: reserve.EventCreate, By: "bench"}, now)
	return r, err
}

// load stores the existing bookings, loadBatch per transaction.
func load(ctx context.Context, st store.Store, bks []reserve.Booking) error {
	now := time.Now()
	for i := 0; i < len(bks); i += loadBatch {
		batch := bks[i:min(i+loadBatch, len(bks))]
		err := st.Tx(ctx, func(tx store.Store) error {
			for _, bk := range batch {
				r, err := reservation(bk, now)
				if err != nil {
					return err
				}
				if err := tx.CreateReservation(ctx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("load bookings: %w", err)
		}
		if done := i + len(batch); done%10000 == 0 {
			logf("loaded %d in %.1f s", done, time.Since(now).Seconds())
		}
	}
	return nil
}

// createReq is one create request: on any path (FixedSlot picks it) or, if
// path is set, on that path (Admit).
type createReq struct {
	id       string
	from, to string
	path     []reserve.Hop
	bw       uint64
	start    time.Time
	end      time.Time
}

// createReqs draws n create requests: 100 Mbit/s to 2 Gbit/s for 30
// minutes to 4 hours at a random start in the workload's week, the even
// ones on any path, the odd ones on the path of a random existing booking.
func (b *bench) createReqs(n int) []createReq {
	bws := []uint64{100 * mbps, 500 * mbps, gbps, 2 * gbps}
	durs := []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour}
	reqs := make([]createReq, n)
	for i := range reqs {
		q := b.draw()
		r := createReq{id: fmt.Sprintf("c%06d", i+1), from: q.from, to: q.to, bw: bws[b.rng.IntN(len(bws))], start: q.start}
		r.end = r.start.Add(durs[b.rng.IntN(len(durs))])
		if i%2 == 1 {
			r.path, r.from, r.to = q.path, q.path[0].From, q.path[len(q.path)-1].To
		}
		reqs[i] = r
	}
	return reqs
}

var errNoCapacity = errors.New("no capacity")

// creates runs n creates from workers goroutines. Each is one store.Tx
// that takes the schedule's lock, runs admission (FixedSlot for even
// requests, Admit on an existing booking's path for odd ones), inserts
// the reservation and adds it to the schedule; a refusal rolls back.
func (b *bench) creates(ctx context.Context, st store.Store, n, workers int) (row, error) {
	reqs := b.createReqs(n)
	var (
		next               atomic.Int64
		accepted, rejected atomic.Int64
		lat                = make([]time.Duration, n)
		wg                 sync.WaitGroup
		errMu              sync.Mutex
		firstErr           error
	)
	t0 := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t := time.Now()
				err := b.create(ctx, st, reqs[i])
				lat[i] = time.Since(t)
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, errNoCapacity):
					rejected.Add(1)
				default:
					errMu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("create %s: %w", reqs[i].id, err)
					}
					errMu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	if firstErr != nil {
		return row{}, firstErr
	}
	slices.Sort(lat)
	acc, rej := int(accepted.Load()), int(rejected.Load())
	return row{Row: "creates", N: n, Accepted: &acc, Rejected: &rej, Workers: workers,
		PerSecond: ptr(float64(acc+rej) / wall.Seconds()), Seconds: ptr(wall.Seconds()),
		P50ms: ptr(ms(pct(lat, 0.50))), P99ms: ptr(ms(pct(lat, 0.99))), Maxms: ptr(ms(lat[len(lat)-1]))}, nil
}

func (b *bench) create(ctx context.Context, st store.Store, req createReq) error {
	var added bool
	err := st.Tx(ctx, func(tx store.Store) error {
		// The Tx holds the database's write lock; the mutex keeps
		// concurrent readers of the schedule off it while it changes.
		b.mu.Lock()
		defer b.mu.Unlock()
		path := req.path
		if path == nil {
			r, err := b.s.FixedSlot(reserve.Request{From: req.from, To: req.to, Bandwidth: req.bw, Start: req.start, End: req.end})
			if errors.Is(err, reserve.ErrNoPath) {
				return errNoCapacity
			}
			if err != nil {
				return err
			}
			path = r.Path
		} else if err := b.s.Admit(path, req.bw, req.start, req.end); errors.Is(err, reserve.ErrCapacity) {
			return errNoCapacity
		} else if err != nil {
			return err
		}
		bk := reserve.Booking{ID: req.id, Path: path, Bandwidth: req.bw, Start: req.start, End: req.end}
		r, err := reservation(bk, time.Now())
		if err != nil {
			return err
		}
		if err := tx.CreateReservation(ctx, r); err != nil {
			return err
		}
		if err := b.s.Add(bk); err != nil {
			return err
		}
		added = true
		return nil
	})
	if err != nil && added {
		// The commit failed after the booking went into the schedule.
		b.mu.Lock()
		_, _ = b.s.Remove(req.id)
		b.mu.Unlock()
	}
	return err
}
