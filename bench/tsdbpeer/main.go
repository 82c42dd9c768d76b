// Command tsdbpeer is the monitoring benchmark's peer: it feeds the very
// workload bench/monbench feeds Lightpath's repository (the same series,
// values and timestamps, from bench/monbench/workload) to Prometheus' own
// storage engine, github.com/prometheus/prometheus/tsdb, used as a library
// the way Prometheus' scrape loop uses it: one appender per push, series
// references cached, Commit per push. It reports the sustained samples per
// second, CPU and memory, then compacts what it holds into blocks and
// reports their bytes per sample on disk. bench/monitoring.sh runs it
// after monbench and prints the ratios.
//
// It is its own Go module so that Prometheus' dependency tree stays out of
// Lightpath's.
//
//	tsdbpeer -dir DIR [-series 250000] [-duration 5m] [-workers 2] [-seed 1]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/lightpath/lightpath/bench/monbench/workload"
	"github.com/lightpath/lightpath/bench/rusage"
)

func main() {
	dir := flag.String("dir", "", "an empty directory for the TSDB")
	nSeries := flag.Int("series", 250_000, "series (a multiple of 10,000)")
	duration := flag.Duration("duration", 5*time.Minute, "how long to ingest")
	workers := flag.Int("workers", 2, "goroutines appending (as monbench)")
	seed := flag.Uint64("seed", 1, "the workload's seed (as monbench)")
	flag.Parse()
	if err := run(*dir, *nSeries, *duration, *workers, *seed); err != nil {
		fmt.Fprintf(os.Stderr, "tsdbpeer: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string, nSeries int, duration time.Duration, workers int, seed uint64) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	wl, err := workload.New(nSeries, seed)
	if err != nil {
		return err
	}
	opts := tsdb.DefaultOptions()
	opts.RetentionDuration = 0 // keep everything: the run covers hours of synthetic time
	db, err := tsdb.Open(dir, nil, nil, opts, nil)
	if err != nil {
		return fmt.Errorf("open tsdb: %w", err)
	}
	// Each node's series as Prometheus labels: the metric name, the
	// pushed labels and the node label Lightpath's repository adds.
	lbls := make([][]labels.Labels, wl.Nodes())
	refs := make([][]storage.SeriesRef, wl.Nodes())
	for i := range wl.Nodes() {
		for _, p := range wl.Series(i) {
			b := labels.NewScratchBuilder(len(p.Labels) + 2)
			b.Add("__name__", p.Name)
			b.Add("node", wl.NodeName(i))
			for _, l := range p.Labels {
				b.Add(l.Name, l.Value)
			}
			b.Sort()
			lbls[i] = append(lbls[i], b.Labels())
		}
		refs[i] = make([]storage.SeriesRef, len(lbls[i]))
	}
	fmt.Printf("peer: Prometheus TSDB (github.com/prometheus/prometheus/tsdb, default options but no retention) in %s\n", dir)
	ctx := context.Background()
	cpu0, start := rusage.CPU(), time.Now()
	deadline := start.Add(duration)
	var stored atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	var minT, maxT atomic.Int64
	minT.Store(1 << 62)
	for w := range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				for ni := w; ni < wl.Nodes(); ni += workers {
					t, pts := wl.Next(ni)
					app := db.Appender(ctx)
					for j, p := range pts {
						ref, err := app.Append(refs[ni][j], lbls[ni][j], t, p.V)
						if err != nil {
							app.Rollback()
							errs <- fmt.Errorf("append: %w", err)
							return
						}
						refs[ni][j] = ref
					}
					if err := app.Commit(); err != nil {
						errs <- fmt.Errorf("commit: %w", err)
						return
					}
					stored.Add(int64(len(pts)))
					for old := minT.Load(); t < old && !minT.CompareAndSwap(old, t); old = minT.Load() {
					}
					for old := maxT.Load(); t > old && !maxT.CompareAndSwap(old, t); old = maxT.Load() {
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	wall, used := time.Since(start), rusage.CPU()-cpu0
	n := stored.Load()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("  stored                                 %d samples over %.1f s wall; synthetic time covered %v\n", n, wall.Seconds(),
		time.Duration(maxT.Load()-minT.Load())*time.Millisecond)
	fmt.Printf("  sustained rate                         %.0f samples/s (WAL written per commit, fsynced per segment, as Prometheus does)\n", float64(n)/wall.Seconds())
	fmt.Printf("  CPU                                    %.1f s user+sys (%.2f cores), %.2f CPU s per million samples (includes generating them)\n",
		used.Seconds(), used.Seconds()/wall.Seconds(), used.Seconds()/(float64(n)/1e6))
	fmt.Printf("  memory                                 %d MiB peak RSS\n", rusage.MaxRSS()>>20)

	// Everything into blocks, as Prometheus does once data is 2 h old;
	// then the blocks' bytes per sample.
	c0 := time.Now()
	h := db.Head()
	if err := db.CompactHead(tsdb.NewRangeHead(h, h.MinTime(), h.MaxTime())); err != nil {
		return fmt.Errorf("compact the head: %w", err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	fmt.Printf("  compaction                             %.1f s (the head into blocks)\n", time.Since(c0).Seconds())
	var blockBytes, blockSamples, chunkBytes int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		meta := filepath.Join(dir, e.Name(), "meta.json")
		b, err := os.ReadFile(meta)
		if err != nil {
			continue
		}
		var m struct {
			Stats struct {
				NumSamples int64 `json:"numSamples"`
			} `json:"stats"`
		}
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		blockSamples += m.Stats.NumSamples
		filepath.Walk(filepath.Join(dir, e.Name()), func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				blockBytes += fi.Size()
				if filepath.Base(filepath.Dir(p)) == "chunks" {
					chunkBytes += fi.Size()
				}
			}
			return nil
		})
	}
	if blockSamples == 0 {
		return fmt.Errorf("no samples in blocks after compaction")
	}
	fmt.Printf("  blocks on disk                         %.3f bytes/sample (%d samples in %.1f MiB: chunks and index; chunk files alone %.3f bytes/sample)\n",
		float64(blockBytes)/float64(blockSamples), blockSamples, float64(blockBytes)/(1<<20), float64(chunkBytes)/float64(blockSamples))
	fmt.Printf("RESULT samples_per_second=%.0f bytes_per_sample=%.4f cpu_per_million=%.4f rss_mib=%d\n",
		float64(n)/wall.Seconds(), float64(blockBytes)/float64(blockSamples), used.Seconds()/(float64(n)/1e6), rusage.MaxRSS()>>20)
	return nil
}
