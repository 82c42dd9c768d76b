package registry

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// The controller's store is a registry's Store as it is.
var _ Store[store.Store] = store.Store(nil)

// openStore opens the controller's store (SQLite) at path.
func openStore(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "c.db")
	st := openStore(t, path)
	r := New(st, clk.now)
	for _, bad := range []transfer.Registration{{Direction: "sideways", Source: "a", Destination: "b"}, {Direction: "push"}, {Direction: "pull", Source: "a", Destination: "b", BytesTotal: -1}} {
		if _, err := r.Create(ctx, "alice", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("create %+v: %v, want ErrInvalid", bad, err)
		}
	}
	tr, err := r.Create(ctx, "alice", transfer.Registration{Direction: "push", Source: "f", Destination: "lp://b1:7070/", From: "a1", To: "b1", BytesTotal: 1000})
	if err != nil || tr.State != transfer.Running {
		t.Fatalf("create: %+v %v", tr, err)
	}
	clk.add(2 * time.Second)
	got, g, err := r.Report(ctx, tr.ID, "alice", transfer.Report{BytesDone: 500, BytesByPath: map[string]int64{"reserved": 500},
		Streams: []transfer.Stream{{RTTSeconds: 0.05, Cwnd: 10}, {RTTSeconds: 0.06, Cwnd: 12}}})
	if err != nil || got.ThroughputBps != 2000 || got.Streams != 2 {
		t.Fatalf("report: %+v %v", got, err)
	}
	// bytes, throughput, one path, two streams of five series.
	if len(g.Points) != 2+1+10 || g.T != clk.now().UnixMilli() {
		t.Errorf("samples: %d at %d", len(g.Points), g.T)
	}
	if _, _, err := r.Report(ctx, tr.ID, "bob", transfer.Report{BytesDone: 1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob's report: %v, want ErrNotFound", err)
	}
	if _, err := r.Get(ctx, tr.ID, func(o string) bool { return o == "bob" }); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob's get: %v, want ErrNotFound", err)
	}
	// Silent past StallAfter: shown stalled, not running.
	clk.add(transfer.StallAfter + time.Second)
	if got, _ := r.Get(ctx, tr.ID, nil); got.State != transfer.Stalled {
		t.Errorf("after %v of silence: %s, want stalled", transfer.StallAfter, got.State)
	}
	if run, _ := r.Running(ctx); len(run) != 0 {
		t.Errorf("running: %+v", run)
	}
	// A report revives it; the final one ends it.
	got, _, err = r.Report(ctx, tr.ID, "alice", transfer.Report{State: transfer.Succeeded, BytesDone: 1000, Verified: true, ThroughputBps: 4000, Bottleneck: "network"})
	if err != nil || got.State != transfer.Succeeded || got.EndedAt.IsZero() || got.ThroughputBps != 4000 || !got.Verified {
		t.Fatalf("final: %+v %v", got, err)
	}
	if _, _, err := r.Report(ctx, tr.ID, "alice", transfer.Report{BytesDone: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a report after the end: %v", err)
	}
	// Kept across a reopen.
	st.Close()
	st = openStore(t, path)
	defer st.Close()
	r2 := New(st, clk.now)
	l, err := r2.List(ctx, time.Time{}, 0, "alice")
	if err != nil || len(l) != 1 || l[0].State != transfer.Succeeded || l[0].Bottleneck != "network" {
		t.Fatalf("list after reopen: %+v %v", l, err)
	}
}

// TestInterrupted: a copy its user stopped ends interrupted (not failed),
// with its reason, and takes no report after.
func TestInterrupted(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	st := openStore(t, filepath.Join(t.TempDir(), "c.db"))
	defer st.Close()
	r := New(st, clk.now)
	tr, err := r.Create(ctx, "alice", transfer.Registration{Direction: "pull", Source: "lp://b1:7070/d", Destination: "d"})
	if err != nil {
		t.Fatal(err)
	}
	clk.add(time.Second)
	got, _, err := r.Report(ctx, tr.ID, "alice", transfer.Report{State: transfer.Interrupted, BytesDone: 10, Error: "interrupted by the user"})
	if err != nil || got.State != transfer.Interrupted || got.EndedAt.IsZero() || got.Error != "interrupted by the user" {
		t.Fatalf("interrupted: %+v %v", got, err)
	}
	if _, _, err := r.Report(ctx, tr.ID, "alice", transfer.Report{BytesDone: 11}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a report after the interruption: %v", err)
	}
	if _, _, err := r.Report(ctx, tr.ID, "alice", transfer.Report{State: "paused"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an unknown state: %v", err)
	}
}

// TestLiveLimitAcrossControllers: the live-transfer limit holds for
// registries on one database (two controllers, each with its own store
// handle), creating at once: counting and adding are one store
// transaction, not a lock of one process.
func TestLiveLimitAcrossControllers(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "c.db")
	var regs []*Registry
	for range 2 {
		st := openStore(t, path)
		defer st.Close()
		r := New(st, clk.now)
		r.SetLimits(Limits{MaxLive: 5})
		regs = append(regs, r)
	}
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		ok, refused int
	)
	for i := range 24 {
		wg.Go(func() {
			_, err := regs[i%2].Create(ctx, "alice", transfer.Registration{Direction: "push", Source: "f", Destination: "d"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrLimit):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok != 5 || refused != 19 {
		t.Errorf("%d created, %d refused; want 5 and 19", ok, refused)
	}
	// Another owner is not held back; a stalled transfer stops counting.
	if _, err := regs[0].Create(ctx, "bob", transfer.Registration{Direction: "push", Source: "f", Destination: "d"}); err != nil {
		t.Errorf("bob's create: %v", err)
	}
	clk.add(transfer.StallAfter + time.Second)
	if _, err := regs[1].Create(ctx, "alice", transfer.Registration{Direction: "push", Source: "f", Destination: "d"}); err != nil {
		t.Errorf("create once the others stalled: %v", err)
	}
	if l, err := regs[0].List(ctx, time.Time{}, 0, ""); err != nil || len(l) != 7 {
		t.Errorf("every owner's transfers: %d, %v; want 7", len(l), err)
	}
}
