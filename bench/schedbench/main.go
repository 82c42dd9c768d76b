// Command schedbench measures the scheduler of issue 4 on its workload: a
// generated topology of 1,000 nodes and 3,000 links with 100,000 existing
// bookings (reserve.GenerateWorkload). bench/scheduler.sh runs it. It has
// two modes.
//
// Direct (the default) times the layers under the controller: every
// scheduling query kind of internal/reserve on the in-memory schedule,
// then, with -db, loads the bookings into a store and measures creates,
// each one store.Tx that runs admission on the schedule, inserts the
// reservation and adds it to the schedule.
//
// API (-api) measures the real controller through its HTTP API: it loads
// the bookings into the store given by -db as RESERVED reservations, opens
// controller.Open on it (timed: restoring every live reservation), serves
// api.NewServer on a loopback port and, as a plain HTTP client, times
// POST /api/v1/find for each find mode (sequential, one keep-alive
// connection), then POST /api/v1/reservations from -workers concurrent
// clients. Every answer must be 2xx or 409; anything else fails the run.
// With -heartbeat-rounds N it then times heartbeats (heartbeat.go): an
// agent on each of the 1,000 nodes, each with a token bound to its node,
// sends POST /api/v1/agents/{node}/heartbeat every 2 s for N rounds:
// latency p50/p99 and the process's CPU time per heartbeat.
//
//	schedbench [-api] [-queries N] [-creates N] [-heartbeat-rounds N] [-workers N] [-load N] [-db URL] [-seed S] [-json] [-cpuprofile F] [-memprofile F]
//
// Output: a table on stdout, or with -json one JSON object per row and a
// summary object last. Progress goes to stderr.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
)

const (
	nodes    = 1000
	links    = 3000
	bookings = 100_000
	gbps     = 1_000_000_000
	mbps     = 1_000_000
	// loadBatch is how many existing bookings go into one transaction.
	loadBatch = 1000
)

// row is one line of output; fields that do not apply are left out. The
// direct mode's rows are generate, query, load and creates; the API mode's
// are generate, api-load, api-startup, api-find and api-creates.
type row struct {
	Row       string   `json:"row"`
	Kind      string   `json:"kind,omitempty"`
	Algorithm string   `json:"algorithm,omitempty"`
	DB        string   `json:"db,omitempty"`
	N         int      `json:"n,omitempty"`
	Seconds   *float64 `json:"seconds,omitempty"`
	P50ms     *float64 `json:"p50_ms,omitempty"`
	P99ms     *float64 `json:"p99_ms,omitempty"`
	Maxms     *float64 `json:"max_ms,omitempty"`
	NonePct   *float64 `json:"none_pct,omitempty"` // direct: found nothing; api: answered 409
	PerSecond *float64 `json:"per_s,omitempty"`
	Accepted  *int     `json:"accepted,omitempty"`
	Rejected  *int     `json:"rejected,omitempty"` // direct: no capacity; api: answered 409
	Workers   int      `json:"workers,omitempty"`  // api-heartbeat: agents
	CPUms     *float64 `json:"cpu_ms,omitempty"`   // api-heartbeat: process CPU per heartbeat
	Note      string   `json:"note,omitempty"`
}

// summary is the last JSON line: the figures the targets are judged on.
type summary struct {
	Row                    string   `json:"row"`
	Mode                   string   `json:"mode"` // direct or api
	Seed                   int64    `json:"seed"`
	Nodes                  int      `json:"nodes"`
	Links                  int      `json:"links"`
	Bookings               int      `json:"bookings"`
	Queries                int      `json:"queries"`
	Creates                int      `json:"creates"`
	Loaded                 int      `json:"loaded"`
	DB                     string   `json:"db,omitempty"`
	GenerateSeconds        float64  `json:"generate_s"`
	FixedSlotP99ms         *float64 `json:"fixed_slot_p99_ms,omitempty"`
	EarliestStartPathP99ms *float64 `json:"earliest_start_path_p99_ms,omitempty"`
	EarliestStartAnyP99ms  *float64 `json:"earliest_start_any_p99_ms,omitempty"`
	LoadSeconds            *float64 `json:"load_s,omitempty"`
	StartupSeconds         *float64 `json:"startup_s,omitempty"` // api: controller.Open
	CreatesPerSecond       *float64 `json:"creates_per_s,omitempty"`
	CreateP50ms            *float64 `json:"create_p50_ms,omitempty"`
	CreateP99ms            *float64 `json:"create_p99_ms,omitempty"`
	HeartbeatP50ms         *float64 `json:"heartbeat_p50_ms,omitempty"`
	HeartbeatP99ms         *float64 `json:"heartbeat_p99_ms,omitempty"`
	HeartbeatCPUms         *float64 `json:"heartbeat_cpu_ms,omitempty"`
	HeartbeatsPerSecond    *float64 `json:"heartbeats_per_s,omitempty"`
}

func ptr[T any](v T) *T { return &v }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct returns the nearest-rank percentile p of sorted latencies.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] schedbench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// storeKind names the backend of a database URL as the controller does.
func storeKind(dbURL string) string {
	if strings.HasPrefix(dbURL, "sqlite:") {
		return "sqlite"
	}
	return "postgres"
}

// config is what one run does.
type config struct {
	api        bool
	queries    int
	creates    int
	workers    int
	load       int
	heartbeats int
	dbURL      string
	seed       int64
	json       bool
	cpuprofile string
	memprofile string
}

func main() {
	var cfg config
	flag.BoolVar(&cfg.api, "api", false, "measure through the controller's HTTP API (needs -db; loads all bookings)")
	flag.IntVar(&cfg.queries, "queries", 1000, "queries of each kind (0 skips the queries)")
	flag.IntVar(&cfg.creates, "creates", 2000, "creates to run against the store given by -db")
	flag.IntVar(&cfg.load, "load", bookings, "direct mode: existing bookings to load into the store (all are in the schedule whatever this says)")
	flag.IntVar(&cfg.heartbeats, "heartbeat-rounds", 0, "API mode: rounds of heartbeats from an agent on every node, each every 2 s (0 skips the heartbeat row)")
	flag.IntVar(&cfg.workers, "workers", 8, "goroutines (API: HTTP clients) issuing creates concurrently")
	flag.StringVar(&cfg.dbURL, "db", "", "store: sqlite:PATH or postgres://... (empty skips the store; -api needs one)")
	flag.Int64Var(&cfg.seed, "seed", 1, "seed of the workload and of the queries")
	flag.BoolVar(&cfg.json, "json", false, "print NDJSON, one object per row, a summary last")
	flag.StringVar(&cfg.cpuprofile, "cpuprofile", "", "API mode: write a CPU profile of the whole process over the finds and creates to this file")
	flag.StringVar(&cfg.memprofile, "memprofile", "", "API mode: write a heap profile to this file once the creates are done")
	flag.Parse()
	if flag.NArg() > 0 || cfg.queries < 0 || cfg.creates < 0 || cfg.workers < 1 || cfg.load < 0 || cfg.load > bookings ||
		(cfg.api && cfg.dbURL == "") || cfg.heartbeats < 0 || (cfg.heartbeats > 0 && !cfg.api) || ((cfg.cpuprofile != "" || cfg.memprofile != "") && !cfg.api) {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	var rows []row
	sum := summary{Row: "summary", Mode: "direct", Seed: cfg.seed, Nodes: nodes, Links: links, Bookings: bookings,
		Queries: cfg.queries, Creates: cfg.creates, Loaded: cfg.load}
	if cfg.api {
		sum.Mode, sum.Loaded = "api", bookings
	}

	logf("generating %d nodes, %d links, %d bookings (seed %d)", nodes, links, bookings, cfg.seed)
	t0 := time.Now()
	w, err := reserve.GenerateWorkload(cfg.seed, nodes, links, bookings)
	if err != nil {
		return fmt.Errorf("generate workload: %w", err)
	}
	gen := time.Since(t0).Seconds()
	sum.GenerateSeconds = gen
	rows = append(rows, row{Row: "generate", N: bookings, Seconds: ptr(gen)})
	logf("generated in %.1f s", gen)

	if cfg.api {
		var prof *os.File
		if cfg.cpuprofile != "" {
			if prof, err = os.Create(cfg.cpuprofile); err != nil {
				return err
			}
			defer prof.Close()
		}
		rs, err := runAPI(w, cfg, &sum, prof)
		if err != nil {
			return err
		}
		rows = append(rows, rs...)
	} else {
		rs, err := runDirect(w, cfg, &sum)
		if err != nil {
			return err
		}
		rows = append(rows, rs...)
	}

	if cfg.json {
		enc := json.NewEncoder(os.Stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return enc.Encode(sum)
	}
	printTable(rows)
	return nil
}

// startProfile starts a CPU profile into f when f is not nil and returns
// what stops it.
func startProfile(f *os.File) (func(), error) {
	if f == nil {
		return func() {}, nil
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, err
	}
	return pprof.StopCPUProfile, nil
}

// writeHeapProfile writes a heap profile, after a collection, to file
// when file is not empty.
func writeHeapProfile(file string) error {
	if file == "" {
		return nil
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func f1(p *float64, format string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf(format, *p)
}

func printTable(rows []row) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tkind\tn\tp50 ms\tp99 ms\tmax ms\tnone %\tper s\tseconds\t")
	for _, r := range rows {
		kind := r.Kind
		if r.DB != "" {
			kind = strings.TrimSpace(r.DB + " " + r.Kind)
		}
		if r.CPUms != nil {
			kind += fmt.Sprintf(" (%d agents, %.3f ms CPU each)", r.Workers, *r.CPUms)
		}
		if r.Accepted != nil {
			kind += fmt.Sprintf(" (%d ok, %d rejected, %d workers)", *r.Accepted, *r.Rejected, r.Workers)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Row, kind, r.N,
			f1(r.P50ms, "%.3f"), f1(r.P99ms, "%.3f"), f1(r.Maxms, "%.3f"), f1(r.NonePct, "%.1f"),
			f1(r.PerSecond, "%.0f"), f1(r.Seconds, "%.1f"))
	}
	tw.Flush()
}
