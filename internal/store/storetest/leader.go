package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

func lead(t *testing.T, url string) *store.Leadership {
	t.Helper()
	l, err := store.Lead(ctxFor(t), url, nil)
	if err != nil {
		t.Fatalf("lead: %v", err)
	}
	t.Cleanup(func() { l.Store().Close(); l.Release() })
	return l
}

// testLeaderLock: one leader at a time. While one holds the lock a second
// Lead waits as a standby (told once) until its context ends; once the
// first releases it, the second leads with the next epoch.
func testLeaderLock(t *testing.T, url string) {
	first := lead(t, url)
	if first.Epoch() != 1 {
		t.Errorf("the first leader's epoch is %d, want 1", first.Epoch())
	}
	var told atomic.Int32
	ctx, cancel := context.WithTimeout(ctxFor(t), 1500*time.Millisecond)
	defer cancel()
	if l, err := store.Lead(ctx, url, func() { told.Add(1) }); err == nil {
		l.Release()
		t.Fatal("a second Lead got the lock the first holds")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second Lead while the first holds the lock: %v, want the context's deadline", err)
	}
	if n := told.Load(); n != 1 {
		t.Errorf("standby told %d times, want once", n)
	}
	select {
	case <-first.Lost():
		t.Fatal("the leader's Lost fired while it held the lock")
	default:
	}

	// The next one waits until the first lets go, then leads.
	got := make(chan *store.Leadership, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := store.Lead(ctxFor(t), url, func() { told.Add(1) })
		if err != nil {
			errc <- err
			return
		}
		got <- l
	}()
	time.Sleep(700 * time.Millisecond) // let it find the lock taken
	if err := first.Release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	select {
	case err := <-errc:
		t.Fatalf("lead after the release: %v", err)
	case second := <-got:
		defer func() { second.Store().Close(); second.Release() }()
		if second.Epoch() != 2 {
			t.Errorf("the second leader's epoch is %d, want 2", second.Epoch())
		}
		v, err := second.Store().GetSetting(ctxFor(t), store.EpochKey)
		if err != nil || v != "2" {
			t.Errorf("stored epoch %q, %v; want 2", v, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no lead 20 s after the leader released the lock")
	}
}

// testFencing: a deposed leader (it lost the lock, a standby took over)
// that comes back with its stale epoch cannot write: every write
// transaction, and every single write, fails with ErrDeposed and leaves
// nothing; it can still read. The new leader writes.
func testFencing(t *testing.T, url string) {
	ctx := ctxFor(t)
	old := lead(t, url)
	s := old.Store()
	if err := s.CreateUser(ctx, store.User{Name: "alice", Role: reserve.RoleUser, CreatedAt: base}); err != nil {
		t.Fatalf("the leader writes: %v", err)
	}
	// The lock is lost (on PostgreSQL, its connection dropped); a standby
	// takes over while the old leader still has its database handle.
	if err := old.Release(); err != nil {
		t.Fatal(err)
	}
	next := lead(t, url)
	if next.Epoch() != old.Epoch()+1 {
		t.Errorf("epochs %d then %d, want one more", old.Epoch(), next.Epoch())
	}

	if err := s.CreateReservation(ctx, sample(t, "r-late", "alice")); !errors.Is(err, store.ErrDeposed) {
		t.Errorf("a deposed leader's create: %v, want ErrDeposed", err)
	}
	if err := s.PutSetting(ctx, store.EpochKey, "1"); !errors.Is(err, store.ErrDeposed) {
		t.Errorf("a deposed leader's setting: %v, want ErrDeposed", err)
	}
	ran := false
	err := s.Tx(ctx, func(tx store.Store) error {
		ran = true
		return tx.CreateUser(ctx, store.User{Name: "mallory", Role: reserve.RoleUser, CreatedAt: base})
	})
	if !errors.Is(err, store.ErrDeposed) || ran {
		t.Errorf("a deposed leader's Tx: %v (fn ran: %v), want ErrDeposed before fn", err, ran)
	}
	if _, err := s.GetUser(ctx, "alice"); err != nil {
		t.Errorf("a deposed leader reads: %v", err)
	}

	ns := next.Store()
	if _, err := ns.GetReservation(ctx, "r-late"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("the deposed leader's create is stored: %v", err)
	}
	if _, err := ns.GetUser(ctx, "mallory"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("the deposed leader's Tx is stored: %v", err)
	}
	if v, _ := ns.GetSetting(ctx, store.EpochKey); v != "2" {
		t.Errorf("stored epoch %q, want 2", v)
	}
	if err := ns.CreateReservation(ctx, sample(t, "r-new", "alice")); err != nil {
		t.Errorf("the new leader's create: %v", err)
	}
	// A plain Store (not a leader's) is not fenced: tools and tests that
	// open the database directly keep working.
	plain := open(t, url)
	if err := plain.PutSetting(ctx, "note", "x"); err != nil {
		t.Errorf("an unfenced store's write: %v", err)
	}
}
