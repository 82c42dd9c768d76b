// Command monpush measures the monitoring repository's ingest through the
// controller's API, as the agents feed it: the workload of bench/monbench
// (bench/monbench/workload) encoded as the agents' JSON batches and sent
// with POST /api/v1/metrics/push to a real controller (internal/api over a
// controller on SQLite, the repository in its own file) on a loopback
// port, from -workers concurrent clients. Each answer is 200 only once the
// batch is durable. bench/monitoring.sh runs it beside monbench (which
// appends to the repository directly) to show what HTTP and JSON cost.
//
//	monpush -dir DIR [-series 250000] [-duration 1m] [-workers 2] [-seed 1]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lightpath/lightpath/bench/monbench/workload"
	"github.com/lightpath/lightpath/bench/rusage"
	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/monitor/repo"
	"github.com/lightpath/lightpath/internal/store"
)

func main() {
	dir := flag.String("dir", "", "an empty directory for the databases")
	nSeries := flag.Int("series", 250_000, "series (a multiple of 10,000)")
	duration := flag.Duration("duration", time.Minute, "how long to push")
	workers := flag.Int("workers", 2, "concurrent clients")
	seed := flag.Uint64("seed", 1, "the workload's seed (as monbench)")
	flag.Parse()
	if err := run(*dir, *nSeries, *duration, *workers, *seed); err != nil {
		fmt.Fprintf(os.Stderr, "monpush: %v\n", err)
		os.Exit(1)
	}
}

// topology is one site with the workload's nodes as hosts around a router:
// the controller takes pushes only from nodes it knows.
func topology(wl *workload.Workload) string {
	var b strings.Builder
	b.WriteString("sites: [{name: s}]\nnodes:\n  - {name: r, site: s, role: router}\n")
	for i := range wl.Nodes() {
		fmt.Fprintf(&b, "  - {name: %s, site: s}\n", wl.NodeName(i))
	}
	b.WriteString("links:\n")
	for i := range wl.Nodes() {
		fmt.Fprintf(&b, "  - {name: l%d, ends: [%s, r]}\n", i, wl.NodeName(i))
	}
	return b.String()
}

func run(dir string, nSeries int, duration time.Duration, workers int, seed uint64) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	wl, err := workload.New(nSeries, seed)
	if err != nil {
		return err
	}
	ctx := context.Background()
	topo, err := controller.ParseTopology("monpush.yaml", []byte(topology(wl)))
	if err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "controller.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := controller.Open(ctx, controller.Config{Store: st, StoreKind: "sqlite", Topology: topo})
	if err != nil {
		return err
	}
	defer c.Close()
	tokenFile := filepath.Join(dir, "admin.token")
	if _, err := c.BootstrapAdmin(ctx, tokenFile); err != nil {
		return err
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	rp, err := repo.Open(ctx, repo.Options{Path: filepath.Join(dir, "metrics.db")})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.NewServer(c, nil, "bench", nil).WithRepository(rp), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	url := "http://" + ln.Addr().String() + "/api/v1/metrics/push"
	token := strings.TrimSpace(string(tok))
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true}, Timeout: time.Minute}

	fmt.Printf("\nthrough the API: POST /api/v1/metrics/push of each node's push as JSON (%d series a batch, %d clients), to a controller on loopback; 200 once durable\n",
		wl.SeriesPerNode(), workers)
	cpu0, start := rusage.CPU(), time.Now()
	deadline := start.Add(duration)
	var stored, bodyBytes atomic.Int64
	var encode atomic.Int64 // nanoseconds the clients spent encoding
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var buf bytes.Buffer
			for time.Now().Before(deadline) {
				for ni := w; ni < wl.Nodes(); ni += workers {
					e0 := time.Now()
					buf.Reset()
					if err := json.NewEncoder(&buf).Encode(wl.NextBatch(ni)); err != nil {
						errs <- err
						return
					}
					encode.Add(int64(time.Since(e0)))
					bodyBytes.Add(int64(buf.Len()))
					req, _ := http.NewRequest("POST", url, bytes.NewReader(buf.Bytes()))
					req.Header.Set("Authorization", "Bearer "+token)
					req.Header.Set("Content-Type", "application/json")
					resp, err := hc.Do(req)
					if err != nil {
						errs <- err
						return
					}
					var res apiv1.PushResult
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || json.Unmarshal(body, &res) != nil {
						errs <- fmt.Errorf("push: %d %s", resp.StatusCode, body)
						return
					}
					stored.Add(int64(res.Stored))
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
	fmt.Printf("  stored                                 %d samples over %.1f s wall (%.1f MiB of JSON, %.1f bytes a sample)\n",
		n, wall.Seconds(), float64(bodyBytes.Load())/(1<<20), float64(bodyBytes.Load())/float64(max(n, 1)))
	fmt.Printf("  sustained rate                         %.0f samples/s\n", float64(n)/wall.Seconds())
	fmt.Printf("  CPU                                    %.1f s user+sys (%.2f cores) for clients and server together; the clients' encoding took %.1f s of it\n",
		used.Seconds(), used.Seconds()/wall.Seconds(), time.Duration(encode.Load()).Seconds())
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := rp.Close(); err != nil {
		return err
	}
	fmt.Printf("RESULT samples_per_second=%.0f\n", float64(n)/wall.Seconds())
	return nil
}
