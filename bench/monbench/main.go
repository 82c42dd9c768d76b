// Command monbench measures the monitoring repository (internal/monitor/repo)
// on SQLite with its real code. bench/monitoring.sh runs it.
//
//  1. History: -hist series (default 10,000) get 7 days of synthetic
//     history written straight into the 1-minute and 10-minute tiers
//     (Repo.WriteHistory), ending where ingest starts.
//  2. Ingest: -series distinct series (default 250,000) from 50 nodes, one
//     sample of every series per 10 s of synthetic time (each node's batch
//     stamped with its collection time plus -5..+5 ms of jitter); per
//     interface 10 counters (10 to 10,000 packets/s, Poisson-like noise),
//     7 utilisation gauges (3 decimals) and 3 constants; appended as
//     fast as the repository accepts them for -duration of wall time, in
//     pushes of -per-append series (5,000: one node's push), from -workers
//     goroutines. Reported: samples/s, CPU seconds of the process
//     (getrusage user+sys, which includes generating the samples), CPU per
//     million samples, peak RSS and heap, and bytes on disk.
//  3. Close (final checkpoint), then bytes per raw sample: sealed chunks
//     from SQLite's dbstat (the chunks table's leaf pages shared among
//     their rows by size, plus its interior pages and its index's pages by
//     row count, divided by the raw samples in sealed chunks); open chunks
//     from the heads file (PATH.heads: its bytes shared among the tiers by
//     their share of its chunk data, divided by the raw samples in it); and
//     both together, which the target is checked on.
//  4. Reopen (timed), then dashboard queries on random history series: 1 h
//     at a step of 12 s and 7 d at 2016 s (7d/300), one series by name and
//     labels, and a second row matching 10 series (one node's card).
//
// The workload is bench/monbench/workload's (the same samples for the same
// seed, for peer benchmarks).
//
// Targets: ingest >= 100,000 samples/s, <= 2 bytes per raw sample on disk
// (sealed and open chunks together), query p99 < 100 ms.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lightpath/lightpath/bench/monbench/workload"
	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/repo"
)

const (
	nodes    = workload.Nodes
	interval = workload.Interval
)

func main() {
	var (
		dir       = flag.String("dir", "", "work directory (required)")
		nSeries   = flag.Int("series", 250_000, "distinct series")
		duration  = flag.Duration("duration", 5*time.Minute, "wall time of the ingest")
		perAppend = flag.Int("per-append", 5000, "series per Append (one node's push)")
		workers   = flag.Int("workers", 2, "goroutines appending")
		hist      = flag.Int("hist", 10_000, "series with 7 days of history")
		queries   = flag.Int("queries", 200, "queries per kind")
		seed      = flag.Uint64("seed", 1, "random seed")
	)
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "monbench: -dir is required")
		os.Exit(2)
	}
	if err := run(*dir, *nSeries, *duration, *perAppend, *workers, *hist, *queries, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "monbench:", err)
		os.Exit(1)
	}
}

func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[%s] "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func maxRSS() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Maxrss * 1024
}

func run(dir string, nSeries int, duration time.Duration, perAppend, workers, hist, queries int, seed uint64) error {
	ctx := context.Background()
	path := filepath.Join(dir, "mon.db")
	perNode := nSeries / nodes
	if err := workload.Check(nSeries); err != nil {
		return fmt.Errorf("-series: %w", err)
	}
	if perAppend <= 0 || perNode%perAppend != 0 {
		return fmt.Errorf("-per-append must divide %d (the series per node)", perNode)
	}
	ifs := perNode / len(workload.Metrics)
	// Synthetic time: ingest starts at t0; the history ends before it.
	t0 := workload.Start
	var synth atomic.Int64
	synth.Store(t0.UnixMilli())
	now := func() time.Time { return time.UnixMilli(synth.Load()) }
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := repo.Options{Path: path, Now: now, Log: log}

	r, err := repo.Open(ctx, opts)
	if err != nil {
		return err
	}
	wl, err := workload.New(nSeries, seed)
	if err != nil {
		return err
	}
	fmt.Printf("monitoring repository benchmark: SQLite file in %s, %d CPUs, %s\n", dir, runtime.NumCPU(), runtime.Version())
	nk := map[workload.Kind]int{}
	for _, m := range workload.Metrics {
		nk[m.Kind]++
	}
	fmt.Printf("workload: %d series (%d nodes x %d metrics x %d interfaces): %d counters (10 to 10,000 packets/s, drifting, with Poisson-like noise),\n"+
		"  %d gauges (utilisation-like, 3 decimals such as 0.734, random walk), %d constants; one sample of each per %v of synthetic time,\n"+
		"  each node's push stamped with its collection time plus uniform jitter of +-5 ms\n",
		nSeries, nodes, len(workload.Metrics), ifs, nk[workload.Counter], nk[workload.Gauge], nk[workload.Constant], interval)

	// 1. History.
	type hs struct {
		name string
		ls   monitor.Labels
	}
	var histSeries []hs
	hStart := time.Now()
	{
		rng := rand.New(rand.NewPCG(seed, 999))
		for ni := range wl.Nodes() {
			for _, p := range wl.Series(ni) {
				if len(histSeries) == hist {
					break
				}
				histSeries = append(histSeries, hs{p.Name, p.Labels.With("node", wl.NodeName(ni))})
			}
		}
		from := t0.Add(-7 * 24 * time.Hour).UnixMilli()
		var hpts int
		for _, h := range histSeries {
			for tier, step := range []int64{60_000, 600_000} {
				pts := make([]repo.PointTV, 0, 7*24*3600_000/step)
				v := rng.Float64()
				for t := from + step; t < t0.UnixMilli(); t += step {
					v = math.Min(1, math.Max(0, v+rng.NormFloat64()*0.01))
					pts = append(pts, repo.PointTV{T: t, V: v})
				}
				if err := r.WriteHistory(ctx, tier+1, h.name, h.ls, pts); err != nil {
					return fmt.Errorf("history: %w", err)
				}
				hpts += len(pts)
			}
		}
		progress("history: %d series, %d points into the 1m and 10m tiers in %.1f s", len(histSeries), hpts, time.Since(hStart).Seconds())
		fmt.Printf("history: %d series x 7 days in the 1m and 10m tiers (%d points), written in %.1f s\n", len(histSeries), hpts, time.Since(hStart).Seconds())
	}

	// 2. Ingest.
	var stored, appends atomic.Int64
	var peakHeap atomic.Uint64
	stopMon := make(chan struct{})
	var monWG sync.WaitGroup
	monWG.Add(1)
	go func() {
		defer monWG.Done()
		var ms runtime.MemStats
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		last := time.Now()
		var lastN int64
		for {
			select {
			case <-stopMon:
				return
			case <-tk.C:
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peakHeap.Load() {
					peakHeap.Store(ms.HeapInuse)
				}
				if time.Since(last) >= 30*time.Second {
					n := stored.Load()
					progress("ingest: %d samples, %.0f/s over the last %.0f s, synthetic time %s", n,
						float64(n-lastN)/time.Since(last).Seconds(), time.Since(last).Seconds(), now().Format(time.DateTime))
					last, lastN = time.Now(), n
				}
			}
		}
	}()
	runtime.GC()
	cpu0, wall0 := cpu(), time.Now()
	deadline := wall0.Add(duration)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	steps := make([]int64, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for step := int64(0); time.Now().Before(deadline); step++ {
				base := t0.UnixMilli() + step*interval.Milliseconds()
				for ni := w; ni < nodes; ni += workers {
					// push number step of node ni: its timestamp (with
					// jitter) and its points, from the shared workload
					nb := wl.NextBatch(ni)
					pts := nb.Groups[0].Points
					for off := 0; off < len(pts); off += perAppend {
						b := &monitor.Batch{Node: nb.Node, Seq: nb.Seq, Meta: nb.Meta,
							Groups: []monitor.Group{{T: nb.Groups[0].T, Points: pts[off : off+perAppend]}}}
						res, err := r.Append(ctx, b)
						if err != nil {
							errs <- err
							return
						}
						if res.Duplicate != 0 {
							errs <- fmt.Errorf("unexpected duplicates: %+v", res)
							return
						}
						stored.Add(int64(res.Stored))
						appends.Add(1)
					}
				}
				for {
					cur := synth.Load()
					if base <= cur || synth.CompareAndSwap(cur, base) {
						break
					}
				}
				steps[w] = step + 1
			}
		}()
	}
	wg.Wait()
	wall := time.Since(wall0)
	cpuUsed := cpu() - cpu0
	close(stopMon)
	monWG.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("ingest: %w", err)
	default:
	}
	n := stored.Load()
	rate := float64(n) / wall.Seconds()
	st := r.Stats()
	fmt.Printf("\ningest: pushes of %d series (one node's push; %d nodes), %d goroutines appending, each Append fsyncs the repository's log\n", perAppend, nodes, workers)
	fmt.Printf("  %-38s %d samples in %d Appends over %.1f s wall; synthetic time covered %v\n", "stored", n, appends.Load(), wall.Seconds(), time.Duration(minSteps(steps))*interval)
	fmt.Printf("  %-38s %.0f samples/s\n", "sustained rate", rate)
	fmt.Printf("  %-38s %.1f s user+sys (%.2f cores), %.2f CPU s per million samples (includes generating them)\n", "CPU", cpuUsed.Seconds(), cpuUsed.Seconds()/wall.Seconds(), cpuUsed.Seconds()/float64(n)*1e6)
	fmt.Printf("  %-38s %.0f MiB peak RSS, %.0f MiB peak heap in use\n", "memory", float64(maxRSS())/(1<<20), float64(peakHeap.Load())/(1<<20))
	fmt.Printf("  %-38s %d checkpoints, the last took %.1f s; %.0f MiB on disk before the final checkpoint\n", "checkpoints", st.Checkpoints, st.LastCheckpoint.Seconds(), float64(st.DiskBytes)/(1<<20))

	// 3. Close and measure the raw tier.
	c0 := time.Now()
	if err := r.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	closeT := time.Since(c0)
	ch, total, err := onDisk(path)
	if err != nil {
		return fmt.Errorf("raw tier: %w", err)
	}
	hd, hf, err := headsFile(path)
	if err != nil {
		return fmt.Errorf("raw tier: %w", err)
	}
	bps := float64(ch.bytes) / float64(ch.samples)
	both := float64(ch.bytes+hd.bytes) / float64(ch.samples+hd.samples)
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Printf("  %-38s %.1f s (the final checkpoint)\n", "close", closeT.Seconds())
	fmt.Printf("  %-38s %.3f bytes/sample (%d raw samples in sealed chunks, %.1f MiB of pages; chunk data alone %.3f bytes/sample)\n",
		"raw tier on disk (dbstat), chunks", bps, ch.samples, mib(ch.bytes), float64(ch.data)/float64(ch.samples))
	fmt.Printf("  %-38s   counted: the chunks table's leaf pages shared among their rows by size, its interior pages and\n", "")
	fmt.Printf("  %-38s   its index chunks_key's pages by row count; not counted: the open chunks, the next line\n", "")
	fmt.Printf("  %-38s %.3f bytes/sample (%d raw samples in open chunks, %.1f MiB of the heads file; chunk data alone %.3f bytes/sample)\n",
		"raw tier on disk, heads file", float64(hd.bytes)/float64(max(hd.samples, 1)), hd.samples, mib(hd.bytes), float64(hd.data)/float64(max(hd.samples, 1)))
	fmt.Printf("  %-38s   counted: the heads file's bytes (open chunks, series state, framing) shared among the tiers by\n", "")
	fmt.Printf("  %-38s   their share of its chunk data\n", "")
	fmt.Printf("  %-38s %.3f bytes/sample (sealed chunks and open chunks together)\n", "raw tier on disk, all", both)
	fmt.Printf("  %-38s %.1f MiB chunks table and index, %.1f MiB heads file (all tiers, %d series), %.1f MiB SQLite file in use\n", "", mib(ch.table), mib(hf), st.Series, mib(total))

	// 4. Reopen and query.
	o0 := time.Now()
	r, err = repo.Open(ctx, opts)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer r.Close()
	fmt.Printf("  %-38s %.1f s (%d series loaded)\n", "reopen", time.Since(o0).Seconds(), r.Stats().Series)
	end := now()
	qrng := rand.New(rand.NewPCG(seed, 77))
	type qkind struct {
		name  string
		span  time.Duration
		multi bool
	}
	fmt.Printf("\nqueries: %d per row, one at a time, random history series; the range ends at the last ingested sample\n", queries)
	fmt.Printf("  %-44s %8s %8s %8s %10s %6s\n", "query", "p50 ms", "p99 ms", "max ms", "points", "tier")
	var worstP99 float64
	for _, k := range []qkind{{"1h, step 12s, 1 series", time.Hour, false}, {"1h, step 12s, 10 series (a node's card)", time.Hour, true},
		{"7d, step 2016s, 1 series", 7 * 24 * time.Hour, false}, {"7d, step 2016s, 10 series (a node's card)", 7 * 24 * time.Hour, true}} {
		var lat []float64
		var pts, ser int
		for range queries {
			h := histSeries[qrng.IntN(len(histSeries))]
			m := map[string]string{"node": h.ls.Get("node"), "card": h.ls.Get("card")}
			if !k.multi {
				m["if"] = h.ls.Get("if")
			}
			q := repo.Query{Name: h.name, Match: m, Start: end.Add(-k.span), End: end, Step: k.span / 300, Tier: -1}
			s0 := time.Now()
			ss, err := r.Query(ctx, q)
			if err != nil {
				return fmt.Errorf("query %s: %w", k.name, err)
			}
			lat = append(lat, float64(time.Since(s0).Microseconds())/1000)
			for _, s := range ss {
				pts += len(s.Points)
			}
			ser += len(ss)
		}
		sort.Float64s(lat)
		p99 := pct(lat, 0.99)
		worstP99 = math.Max(worstP99, p99)
		fmt.Printf("  %-44s %8.2f %8.2f %8.2f %10s %6s\n", k.name, pct(lat, 0.5), p99, lat[len(lat)-1],
			fmt.Sprintf("%.0f/q", float64(pts)/float64(queries)), tierOf(k.span))
		_ = ser
	}

	fmt.Printf("\ntargets\n")
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	fmt.Printf("  %-44s %-28s %s\n", "ingest >= 100,000 samples/s", fmt.Sprintf("%.0f samples/s", rate), verdict(rate >= 100_000))
	fmt.Printf("  %-44s %-28s %s\n", "raw tier <= 2 bytes/sample on disk (all)", fmt.Sprintf("%.3f bytes/sample", both), verdict(both <= 2))
	fmt.Printf("  %-44s %-28s %s\n", "query p99 < 100 ms (worst row)", fmt.Sprintf("%.2f ms", worstP99), verdict(worstP99 < 100))
	return nil
}

func tierOf(span time.Duration) string {
	if span <= 3*time.Hour {
		return "raw"
	}
	return "1m"
}

func minSteps(s []int64) int64 {
	m := s[0]
	for _, x := range s {
		m = min(m, x)
	}
	return m
}

func pct(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// tierBytes is what one table (and its index) holds of tier 0.
type tierBytes struct {
	bytes   int64 // pages attributed to tier-0 rows
	table   int64 // all the table's pages (and its index's)
	rows    int64 // tier-0 rows
	samples int64 // in tier-0 rows
	data    int64 // bytes of chunk data in tier-0 rows
}

// rawTier measures tier 0 in the closed file with dbstat, for a table
// whose rows come in the order of rowsQ (tier, length(data), n): each leaf
// page's bytes are shared among its rows by their size (data plus ~24
// bytes of key and header), the interior pages and those of index by
// row count.
func rawTier(db *sql.DB, table, index, rowsQ string) (tb tierBytes, err error) {
	type row struct {
		raw bool
		sz  int64
	}
	var rs []row
	rows, err := db.Query(rowsQ)
	if err != nil {
		return tb, err
	}
	for rows.Next() {
		var tier, l, n int64
		if err = rows.Scan(&tier, &l, &n); err != nil {
			rows.Close()
			return tb, err
		}
		rs = append(rs, row{tier == 0, l + 24})
		if tier == 0 {
			tb.rows++
			tb.samples += n
			tb.data += l
		}
	}
	rows.Close()
	if err = rows.Err(); err != nil {
		return tb, err
	}
	pages, err := db.Query(`SELECT name, path, pagetype, ncell, pgsize FROM dbstat WHERE name IN (?, ?) ORDER BY name, path`, table, index)
	if err != nil {
		return tb, err
	}
	defer pages.Close()
	var next int
	var shared int64 // interior and index pages
	for pages.Next() {
		var name, p, typ string
		var ncell, size int64
		if err = pages.Scan(&name, &p, &typ, &ncell, &size); err != nil {
			return tb, err
		}
		tb.table += size
		switch {
		case name == table && typ == "leaf":
			var raw, all int64
			for i := 0; i < int(ncell) && next < len(rs); i++ {
				all += rs[next].sz
				if rs[next].raw {
					raw += rs[next].sz
				}
				next++
			}
			if all > 0 {
				tb.bytes += size * raw / all
			}
		case typ == "overflow":
			return tb, fmt.Errorf("a row of %s spilled to an overflow page (%s)", name, p)
		default:
			shared += size
		}
	}
	if err = pages.Err(); err != nil {
		return tb, err
	}
	// A rowid table keeps every row in a leaf; a WITHOUT ROWID table (heads)
	// keeps a few in interior pages, counted with them as shared.
	if index != "" && next != len(rs) {
		return tb, fmt.Errorf("%s: %d rows in its leaf pages, %d rows read", table, next, len(rs))
	}
	tb.bytes += shared * tb.rows / max(int64(len(rs)), 1)
	return tb, nil
}

// onDisk measures the raw tier in chunks (sealed chunks), and the file in
// use.
func onDisk(path string) (chunks tierBytes, total int64, err error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return
	}
	defer db.Close()
	if chunks, err = rawTier(db, "chunks", "chunks_key", `SELECT tier, length(data), n FROM chunks ORDER BY id`); err != nil {
		return
	}
	var pages, free, ps int64
	_ = db.QueryRow(`PRAGMA page_count`).Scan(&pages)
	_ = db.QueryRow(`PRAGMA freelist_count`).Scan(&free)
	_ = db.QueryRow(`PRAGMA page_size`).Scan(&ps)
	total = (pages - free) * ps
	return
}

// headsFile measures the raw tier in the heads file (the open chunks the
// final checkpoint wrote, with every series' state): the file's bytes
// shared among the tiers by their share of its chunk data.
func headsFile(path string) (raw tierBytes, size int64, err error) {
	hf, err := repo.ReadHeadsFile(path)
	if err != nil {
		return raw, 0, err
	}
	var all int64
	for _, t := range hf.Tiers {
		all += t.DataBytes
	}
	t := hf.Tiers[0]
	raw = tierBytes{table: hf.Bytes, rows: t.Chunks, samples: t.Samples, data: t.DataBytes}
	if all > 0 {
		raw.bytes = int64(math.Round(float64(hf.Bytes) * float64(t.DataBytes) / float64(all)))
	}
	return raw, hf.Bytes, nil
}
