package repo

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/testclock"
)

// tierSamples counts what the repository holds of each series in a tier:
// chunks in SQLite plus the chunks in memory (open and sealed), by series
// id. A sample stored twice counts twice (a query would hide it).
func tierSamples(t *testing.T, r *Repo, tier int) map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	rows, err := r.db.Query(`SELECT series_id, sum(n) FROM chunks WHERE tier = ? GROUP BY series_id`, tier)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] += n
	}
	rows.Close()
	r.idx.RLock()
	defer r.idx.RUnlock()
	for id, s := range r.byID {
		s.mu.Lock()
		ts := &s.tiers[tier]
		for _, c := range ts.sealed {
			out[id] += int64(c.n)
		}
		if ts.head != nil {
			out[id] += int64(ts.head.Len())
		}
		if ts.stored != nil {
			out[id] += int64(ts.storedN)
		}
		s.mu.Unlock()
	}
	return out
}

const crashHeadsEnv = "LIGHTPATH_REPO_CRASH_HEADS_CHILD"

// TestCrashHeadsChild appends like TestCrashChild and kills itself inside
// a checkpoint, after it committed sealed chunks and before it wrote the
// heads file, once 1500 batches are acknowledged.
func TestCrashHeadsChild(t *testing.T) {
	path := os.Getenv(crashHeadsEnv)
	if path == "" {
		t.Skip("the child of TestCrashBetweenCommitAndHeads")
	}
	var acked atomic.Int64
	testHookBeforeHeads = func(chunks int) {
		if chunks > 0 && acked.Load() >= 1500 {
			fmt.Println("killing myself between commit and heads file")
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	r, err := Open(context.Background(), Options{Path: path, Checkpoint: 50 * time.Millisecond, Now: func() time.Time { return time.UnixMilli(3_600_000) }})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	start := 1
	if ss, err := r.Query(context.Background(), Query{Name: "m", Start: time.UnixMilli(0), End: time.UnixMilli(1 << 40), Tier: 0}); err == nil && len(ss) > 0 {
		start = len(ss[0].Points) + 1
	}
	for i := start; ; i++ {
		var ps []monitor.Point
		for j := range 50 {
			ps = append(ps, pt("m", float64(i*100+j), "j", strconv.Itoa(j)))
		}
		if _, err := r.Append(context.Background(), batch("n", int64(i)*1000, ps...)); err != nil {
			fmt.Println("append:", err)
			os.Exit(1)
		}
		acked.Store(int64(i - start + 1))
		fmt.Printf("ack %d\n", i)
	}
}

// TestCrashBetweenCommitAndHeads: a crash between a checkpoint's commit of
// sealed chunks and its heads file loses no acknowledged sample and stores
// none twice, in the raw tier or the downsampled one; twice in a row.
func TestCrashBetweenCommitAndHeads(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "m.db")
	acked := 0
	for round := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHeadsChild$", "-test.v")
		cmd.Env = append(os.Environ(), crashHeadsEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killed := false
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var n int
			if _, err := fmt.Sscanf(sc.Text(), "ack %d", &n); err == nil {
				acked = max(acked, n)
			} else if sc.Text() == "killing myself between commit and heads file" {
				killed = true
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: the child did not reach the hook (%d acknowledged)", round, acked)
		}
		// The crash is where it should be: SQLite's generation is ahead of
		// the heads file's.
		b, err := os.ReadFile(headsPath(path))
		if err != nil {
			t.Fatal(err)
		}
		fileGen, _, err := readHeads(b, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Open(context.Background(), Options{Path: path, Now: func() time.Time { return time.UnixMilli(3_600_000) }})
		if err != nil {
			t.Fatal(err)
		}
		if r.gen <= fileGen {
			t.Fatalf("round %d: SQLite generation %d, heads file's %d: not a crash between the two", round, r.gen, fileGen)
		}
		for tier := range 2 {
			ss, err := r.Query(context.Background(), Query{Name: "m", Start: time.UnixMilli(0), End: time.UnixMilli(int64(acked+1000) * 1000), Tier: tier})
			if err != nil {
				t.Fatal(err)
			}
			if len(ss) != 50 {
				t.Fatalf("round %d tier %d: %d series", round, tier, len(ss))
			}
			counts := tierSamples(t, r, tier)
			for _, s := range ss {
				j, _ := strconv.Atoi(s.Labels.Get("j"))
				r.idx.RLock()
				id := r.byKey[string(seriesKeyNoNode(nil, "m", s.Labels))].id
				r.idx.RUnlock()
				if counts[id] != int64(len(s.Points)) {
					t.Fatalf("round %d tier %d: series j=%d stores %d samples, %d distinct", round, tier, j, counts[id], len(s.Points))
				}
				if tier == 1 {
					continue
				}
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
			t.Logf("round %d tier %d: %d acknowledged, %d samples per series, none twice", round, tier, acked, len(ss[0].Points))
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTrimHeads: trimHeads itself, where the log's replay would not make
// the same chunks again: an open chunk whose samples SQLite's last chunk
// holds goes, the tier moves on to that chunk's end, a later open chunk
// stays.
func TestTrimHeads(t *testing.T) {
	c := testclock.New(t0.Add(3 * time.Hour))
	path := filepath.Join(t.TempDir(), "m.db")
	r := open(t, path, c, nil)
	defer r.Close()
	feedMinutes(t, r, 0, 100)
	ctx := context.Background()
	if err := r.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	r.idx.RLock()
	s := r.byID[1]
	r.idx.RUnlock()
	s.mu.Lock()
	ts := &s.tiers[0]
	win, start, end := ts.headWin, ts.headStart, ts.headEnd
	s.mu.Unlock()
	// SQLite holds a chunk with the head's samples and 10 more.
	if _, err := r.db.Exec(`INSERT INTO chunks(tier, win, series_id, start_ms, end_ms, n, data) VALUES(0, ?, 1, ?, ?, 110, x'00')`, win, start, end+100_000); err != nil {
		t.Fatal(err)
	}
	if err := r.trimHeads(ctx, 0); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	if ts.head != nil || ts.stored != nil || ts.lastT != end+100_000 {
		t.Fatalf("after trim: head %v stored %v lastT %d (want none, none, %d)", ts.head != nil, ts.stored != nil, ts.lastT, end+100_000)
	}
	// Tier 1's head is later than its chunks in SQLite (none): it stays.
	if s.tiers[1].head == nil && s.tiers[1].stored == nil {
		t.Fatal("tier 1's head went")
	}
	s.mu.Unlock()
}
