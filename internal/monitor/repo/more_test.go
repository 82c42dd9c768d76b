package repo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/testclock"
)

func ms(d time.Duration) int64 { return t0.Add(d).UnixMilli() }

// feedMinutes appends one sample every 10 s for the given span, value i.
func feedMinutes(t *testing.T, r *Repo, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		ts := ms(time.Duration(i)*10*time.Second + 10*time.Second)
		if _, err := r.Append(context.Background(), batch("n", ts, pt("m", float64(i)))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDownsamplingAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	c := testclock.New(t0.Add(2 * time.Hour))
	path := filepath.Join(dir, "m.db")
	r := open(t, path, c, nil)
	// Samples i = 0.. at t0+10s*(i+1): minute k's bucket (k-1 min, k min]
	// holds i = 6(k-1) .. 6k-1, whose average is 6k-3.5.
	feedMinutes(t, r, 0, 200)
	// A restart in the middle of a bucket, without Close (as after a crash:
	// the log is replayed) and then with one.
	r.ingestMu.Lock()
	r.w.f.Close()
	r.ingestMu.Unlock()
	r2 := open(t, path, c, nil)
	feedMinutes(t, r2, 200, 400)
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	r3 := open(t, path, c, nil)
	defer r3.Close()
	feedMinutes(t, r3, 400, 730)
	ss := query(t, r3, Query{Name: "m", Start: t0, End: t0.Add(3 * time.Hour), Tier: 1})
	if len(ss) != 1 {
		t.Fatalf("got %d series", len(ss))
	}
	pts := ss[0].Points
	if len(pts) != 121 { // minutes 1..121 complete (sample 726 is in minute 122)
		t.Fatalf("1m tier: %d points, want 121", len(pts))
	}
	for i, p := range pts {
		k := int64(i + 1)
		if p.T != ms(time.Duration(k)*time.Minute) || p.V != float64(6*k)-3.5 {
			t.Fatalf("1m point %d: %+v, want t=%d v=%v", i, p, ms(time.Duration(k)*time.Minute), float64(6*k)-3.5)
		}
	}
	ss = query(t, r3, Query{Name: "m", Start: t0, End: t0.Add(2 * time.Hour), Tier: 2})
	pts = ss[0].Points
	if len(pts) != 12 {
		t.Fatalf("10m tier: %d points, want 12", len(pts))
	}
	for i, p := range pts {
		// the average of the 1m averages of minutes 10j+1..10j+10
		j := float64(i)
		want := 6*(10*j+5.5) - 3.5
		if p.T != ms(time.Duration(i+1)*10*time.Minute) || math.Abs(p.V-want) > 1e-9 {
			t.Fatalf("10m point %d: %+v, want %v", i, p, want)
		}
	}
}

func TestQuery(t *testing.T) {
	c := testclock.New(t0.Add(2 * time.Hour))
	r := open(t, filepath.Join(t.TempDir(), "m.db"), c, nil)
	defer r.Close()
	feedMinutes(t, r, 0, 720) // 2 hours
	ctx := context.Background()
	h := 2 * time.Hour
	for _, tc := range []struct {
		name    string
		q       Query
		invalid string
		points  int
		first   PointTV
	}{
		{name: "raw", q: Query{Name: "m", Start: t0, End: t0.Add(h), Tier: -1}, points: 720, first: PointTV{ms(10 * time.Second), 0}},
		{name: "step 1m from raw", q: Query{Name: "m", Start: t0, End: t0.Add(h), Step: time.Minute, Tier: -1}, points: 120, first: PointTV{ms(time.Minute), 2.5}},
		{name: "step 30s", q: Query{Name: "m", Start: t0, End: t0.Add(h), Step: 30 * time.Second, Tier: -1}, points: 240, first: PointTV{ms(30 * time.Second), 1}},
		{name: "forced 1m tier", q: Query{Name: "m", Start: t0, End: t0.Add(h), Tier: 1}, points: 119, first: PointTV{ms(time.Minute), 2.5}},
		{name: "beyond raw retention picks 1m", q: Query{Name: "m", Start: t0.Add(-2 * time.Hour), End: t0.Add(h), Step: time.Minute, Tier: -1}, points: 119, first: PointTV{ms(time.Minute), 2.5}},
		{name: "step 10m picks raw (finest covering)", q: Query{Name: "m", Start: t0, End: t0.Add(h), Step: 10 * time.Minute, Tier: -1}, points: 12, first: PointTV{ms(10 * time.Minute), 29.5}},
		{name: "unknown name", q: Query{Name: "nope", Start: t0, End: t0.Add(h), Tier: -1}, points: -1},
		{name: "no match", q: Query{Name: "m", Match: map[string]string{"if": "x"}, Start: t0, End: t0.Add(h), Tier: -1}, points: -1},
		{name: "empty match value", q: Query{Name: "m", Match: map[string]string{"if": ""}, Start: t0, End: t0.Add(h), Tier: -1}, points: 720, first: PointTV{ms(10 * time.Second), 0}},
		{name: "end before start", q: Query{Name: "m", Start: t0.Add(h), End: t0, Tier: -1}, invalid: "before start"},
		{name: "step under 1s", q: Query{Name: "m", Start: t0, End: t0.Add(h), Step: time.Millisecond, Tier: -1}, invalid: "under 1s"},
		{name: "too many points", q: Query{Name: "m", Start: t0, End: t0.Add(48 * time.Hour), Step: time.Second, Tier: -1}, invalid: "at most 11000"},
		{name: "too many raw samples", q: Query{Name: "m", Start: t0, End: t0.Add(h), Tier: 0}, points: 720, first: PointTV{ms(10 * time.Second), 0}},
		{name: "no name", q: Query{Start: t0, End: t0.Add(h), Tier: -1}, invalid: "metric name"},
		{name: "bad tier", q: Query{Name: "m", Start: t0, End: t0.Add(h), Tier: 3}, invalid: "tiers 0 to 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss, err := r.Query(ctx, tc.q)
			if tc.invalid != "" {
				if !errors.Is(err, monitor.ErrInvalid) || !strings.Contains(err.Error(), tc.invalid) {
					t.Fatalf("err = %v, want ErrInvalid with %q", err, tc.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.points < 0 {
				if len(ss) != 0 {
					t.Fatalf("want nothing, got %d series", len(ss))
				}
				return
			}
			if len(ss) != 1 || len(ss[0].Points) != tc.points || ss[0].Points[0] != tc.first {
				n := 0
				if len(ss) == 1 {
					n = len(ss[0].Points)
				}
				t.Fatalf("got %d series, %d points, first %+v; want %d points, first %+v", len(ss), n, ss, tc.points, tc.first)
			}
		})
	}
	// More than 11,000 raw samples without a step, and more than 10,000
	// series, are refused.
	r2 := open(t, filepath.Join(t.TempDir(), "m.db"), c, nil)
	defer r2.Close()
	pts := make([]monitor.Point, 0, 10001)
	for i := range 10001 {
		pts = append(pts, pt("many", 1, "i", strconv.Itoa(i)))
	}
	if _, err := r2.Append(ctx, batch("n", ms(time.Second), pts...)); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Query(ctx, Query{Name: "many", Start: t0, End: t0.Add(h), Tier: -1}); !errors.Is(err, monitor.ErrInvalid) {
		t.Fatalf("10,001 series: err = %v", err)
	}
	for i := range 11001 {
		if _, err := r2.Append(ctx, batch("n", ms(time.Duration(i+2)*100*time.Millisecond), pt("dense", 1))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r2.Query(ctx, Query{Name: "dense", Start: t0, End: t0.Add(h), Tier: 0}); !errors.Is(err, monitor.ErrInvalid) {
		t.Fatalf("11,001 raw samples: err = %v", err)
	}
}

func TestRetentionAndBudget(t *testing.T) {
	c := testclock.New(t0)
	path := filepath.Join(t.TempDir(), "m.db")
	tiers, err := ParseTiers("raw:3h,1m:7d,10m:180d")
	if err != nil {
		t.Fatal(err)
	}
	r := open(t, path, c, func(o *Options) { o.Tiers = tiers })
	ctx := context.Background()
	// 50 series, 10 hours at 10 s.
	for i := range 3600 {
		ts := ms(time.Duration(i+1) * 10 * time.Second)
		var ps []monitor.Point
		for j := range 50 {
			ps = append(ps, pt("m", float64(i*j%977)/1000, "j", strconv.Itoa(j)))
		}
		if _, err := r.Append(ctx, batch("n", ts, ps...)); err != nil {
			t.Fatal(err)
		}
		if i%360 == 0 {
			c.Set(time.UnixMilli(ts))
			if err := r.checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.Set(t0.Add(10 * time.Hour))
	if err := r.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if st.RetentionChunks == 0 {
		t.Fatalf("nothing dropped by retention: %+v", st)
	}
	ss := query(t, r, Query{Name: "m", Match: map[string]string{"j": "3"}, Start: t0, End: t0.Add(10 * time.Hour), Tier: 0})
	if first := ss[0].Points[0].T; first < ms(10*time.Hour-5*time.Hour) {
		t.Fatalf("raw data from %v kept, retention is 3h (whole 2h windows)", time.UnixMilli(first).Sub(t0))
	}
	ss = query(t, r, Query{Name: "m", Match: map[string]string{"j": "3"}, Start: t0, End: t0.Add(10 * time.Hour), Tier: 1})
	if ss[0].Points[0].T != ms(time.Minute) {
		t.Fatalf("1m tier lost its start: %+v", ss[0].Points[0])
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = open(t, path, c, func(o *Options) { o.Tiers = tiers })
	used := r.Stats().DiskBytes
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// A budget under what is used: the oldest chunks go, appends go on.
	budget := used * 2 / 3
	r = open(t, path, c, func(o *Options) { o.Tiers = tiers; o.Budget = budget })
	defer r.Close()
	st = r.Stats()
	if st.BudgetChunks == 0 || st.DiskBytes > budget {
		t.Fatalf("budget %d: %+v", budget, st)
	}
	ss = query(t, r, Query{Name: "m", Match: map[string]string{"j": "3"}, Start: t0, End: t0.Add(10 * time.Hour), Tier: 1})
	if len(ss) == 1 && ss[0].Points[0].T == ms(time.Minute) {
		t.Fatalf("the oldest 1m chunks were kept")
	}
	ss = query(t, r, Query{Name: "m", Match: map[string]string{"j": "3"}, Start: t0, End: t0.Add(10 * time.Hour), Tier: 0})
	if len(ss) != 1 || ss[0].Points[len(ss[0].Points)-1].T != ms(36000*time.Second) {
		t.Fatalf("the newest raw samples were dropped")
	}
	if res, err := r.Append(ctx, batch("n", ms(10*time.Hour+10*time.Second), pt("m", 1, "j", "3"))); err != nil || res.Stored != 1 {
		t.Fatalf("append over budget: %+v %v", res, err)
	}
}

func TestParseTiers(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{"raw:3h,1m:7d,10m:180d", ""},
		{"raw:1h", ""},
		{"1m:7d", "first tier must be raw"},
		{"raw:3h,raw:4h", "only the first"},
		{"raw:3h,1m", "STEP:RETENTION"},
		{"raw:3h,10m:7d,15m:30d", "multiple"},
		{"raw:3h,500ms:1d", "under 1s"},
		{"raw:xx", "retention"},
	} {
		_, err := ParseTiers(tc.in)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseTiers(%q) = %v, want %q", tc.in, err, tc.err)
		}
	}
}

func TestConcurrentAppendQuery(t *testing.T) {
	c := testclock.New(t0.Add(time.Hour))
	r := open(t, filepath.Join(t.TempDir(), "m.db"), c, func(o *Options) { o.Checkpoint = 20 * time.Millisecond })
	defer r.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := fmt.Sprintf("n%d", w)
			for i := range 300 {
				var ps []monitor.Point
				for j := range 20 {
					ps = append(ps, pt("m", float64(i), "j", strconv.Itoa(j)))
				}
				if _, err := r.Append(ctx, batch(node, ms(time.Duration(i+1)*10*time.Second), ps...)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				ss, err := r.Query(ctx, Query{Name: "m", Match: map[string]string{"j": "1"}, Start: t0, End: t0.Add(time.Hour), Tier: -1})
				if err != nil {
					t.Error(err)
					return
				}
				for _, s := range ss {
					for i, p := range s.Points {
						if p.V != float64(i) {
							t.Errorf("%s point %d = %v: a sample missing or out of order", s.Labels, i, p.V)
							return
						}
					}
				}
				r.Latest(func(string, monitor.Labels, monitor.Meta, int64, float64) {})
				_ = r.Stats()
			}
		}()
	}
	wg.Wait()
	ss := query(t, r, Query{Name: "m", Start: t0, End: t0.Add(time.Hour), Tier: 0})
	if len(ss) != 80 {
		t.Fatalf("%d series", len(ss))
	}
	for _, s := range ss {
		if len(s.Points) != 300 {
			t.Fatalf("%s: %d points", s.Labels, len(s.Points))
		}
	}
}

// The crash test: a child process appends batches and prints each one it
// has had acknowledged; the parent kills it with SIGKILL mid-stream,
// reopens the repository and finds every acknowledged sample.
const crashEnv = "LIGHTPATH_REPO_CRASH_CHILD"

func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("the child of TestCrashDurability")
	}
	r, err := Open(context.Background(), Options{Path: path, Checkpoint: 30 * time.Millisecond, Now: func() time.Time { return time.UnixMilli(3_600_000) }})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	for i := 1; ; i++ {
		var ps []monitor.Point
		for j := range 50 {
			ps = append(ps, pt("m", float64(i*100+j), "j", strconv.Itoa(j)))
		}
		if _, err := r.Append(context.Background(), batch("n", int64(i)*1000, ps...)); err != nil {
			fmt.Println("append:", err)
			os.Exit(1)
		}
		fmt.Printf("ack %d\n", i)
	}
}

func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "m.db")
	acked := 0
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		want := acked + 2000 + round*777
		for sc.Scan() {
			var n int
			if _, err := fmt.Sscanf(sc.Text(), "ack %d", &n); err == nil {
				acked = max(acked, n)
				if n >= want {
					break
				}
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		// Acknowledgements printed before the kill landed count too.
		for sc.Scan() {
			var n int
			if _, err := fmt.Sscanf(sc.Text(), "ack %d", &n); err == nil {
				acked = max(acked, n)
			}
		}
		_ = cmd.Wait()
		if acked < want {
			t.Fatalf("round %d: child stopped at %d acknowledged batches", round, acked)
		}
		r, err := Open(context.Background(), Options{Path: path, Now: func() time.Time { return time.UnixMilli(3_600_000) }})
		if err != nil {
			t.Fatal(err)
		}
		ss, err := r.Query(context.Background(), Query{Name: "m", Start: time.UnixMilli(0), End: time.UnixMilli(int64(acked+10) * 1000).Add(time.Hour), Tier: 0})
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) != 50 {
			t.Fatalf("round %d: %d series", round, len(ss))
		}
		for _, s := range ss {
			j, _ := strconv.Atoi(s.Labels.Get("j"))
			if len(s.Points) < acked {
				t.Fatalf("round %d: series j=%d has %d samples, %d acknowledged", round, j, len(s.Points), acked)
			}
			for i := 0; i < acked; i++ {
				p := s.Points[i]
				if p.T != int64(i+1)*1000 || p.V != float64((i+1)*100+j) {
					t.Fatalf("round %d: series j=%d sample %d = %+v", round, j, i, p)
				}
			}
		}
		t.Logf("round %d: %d batches acknowledged, all there (%d samples per series stored)", round, acked, len(ss[0].Points))
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		acked = len(ss[0].Points)
	}
}
