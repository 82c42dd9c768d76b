package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// TestPostgresLeaderStepsDown: when the leader lock's connection is cut
// (here the server terminates it, as it would a connection it found dead),
// the leader's Lost closes within a few seconds, a standby then leads with
// the next epoch, and the old leader's writes fail.
func TestPostgresLeaderStepsDown(t *testing.T) {
	url := postgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old, err := store.Lead(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Release()
	defer old.Store().Close()

	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var n int64
	err = admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 2 AND classid = $1::bigint::oid
		AND objid = (hashtext(current_schema())::bigint & 4294967295)::oid`, int64(0x6c706c64)).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("terminate the lock's connection: %d terminated, %v", n, err)
	}
	select {
	case <-old.Lost():
	case <-time.After(time.Minute): // the lock is checked every second: this only bounds a hang
		t.Fatal("Lost did not close a minute after the lock's connection was cut")
	}
	next, err := store.Lead(ctx, url, nil)
	if err != nil {
		t.Fatalf("a standby's lead after the cut: %v", err)
	}
	defer next.Release()
	defer next.Store().Close()
	if next.Epoch() != old.Epoch()+1 {
		t.Errorf("epochs %d then %d", old.Epoch(), next.Epoch())
	}
	if err := old.Store().PutSetting(ctx, "x", "y"); !errors.Is(err, store.ErrDeposed) {
		t.Errorf("the old leader's write: %v, want ErrDeposed", err)
	}
}

// TestLeadURLs: Lead refuses what Open refuses, and a private in-memory
// database, which nobody can share, is led at once.
func TestLeadURLs(t *testing.T) {
	ctx := context.Background()
	if _, err := store.Lead(ctx, "mysql://x", nil); !errors.Is(err, reserve.ErrInvalid) {
		t.Errorf("lead mysql://x: %v, want ErrInvalid", err)
	}
	if _, err := store.Lead(ctx, "sqlite:", nil); err == nil {
		t.Error("lead sqlite: without a path: no error")
	}
	if _, err := store.Lead(ctx, "sqlite:"+t.TempDir()+"/missing/db", nil); err == nil {
		t.Error("lead in a missing directory: no error")
	}
	l, err := store.Lead(ctx, "sqlite::memory:", nil)
	if err != nil {
		t.Fatalf("lead an in-memory database: %v", err)
	}
	defer l.Release()
	defer l.Store().Close()
	if err := l.Store().PutSetting(ctx, "k", "v"); err != nil || l.Epoch() != 1 {
		t.Errorf("the in-memory leader writes: %v, epoch %d", err, l.Epoch())
	}
}
