package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
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

// TestSQLiteLeaderSymlink: two leads on one SQLite database reached by two
// paths (one through a symlinked directory) contend for one lock: the
// second waits as a standby until the first releases.
func TestSQLiteLeaderSymlink(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("data", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := store.Lead(ctx, "sqlite:"+filepath.Join(dir, "data", "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Store().Close()
	standby := make(chan struct{})
	type lead struct {
		l   *store.Leadership
		err error
	}
	second := make(chan lead, 1)
	go func() {
		l, err := store.Lead(ctx, "sqlite:"+filepath.Join(dir, "alias", "db"), func() { close(standby) })
		second <- lead{l, err}
	}()
	select {
	case <-standby:
	case l := <-second:
		if l.err == nil {
			l.l.Release()
			l.l.Store().Close()
		}
		t.Fatalf("the lead through the symlink did not wait: %v", l.err)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	l := <-second
	if l.err != nil {
		t.Fatalf("the standby's lead once the first released: %v", l.err)
	}
	defer l.l.Release()
	defer l.l.Store().Close()
	if l.l.Epoch() != first.Epoch()+1 {
		t.Errorf("epochs %d then %d", first.Epoch(), l.l.Epoch())
	}
}

// TestSQLiteLeaderDeposed: a leader whose epoch another raised (a
// controller that took the database over by some path no lock covers)
// learns it at once: Lost closes, Err says it was deposed, and its writes
// fail.
func TestSQLiteLeaderDeposed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := store.Lead(ctx, "sqlite:"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	defer l.Store().Close()
	other, err := store.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.PutSetting(ctx, store.EpochKey, strconv.FormatInt(l.Epoch()+1, 10)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-ctx.Done(): // the epoch is checked every second: this only bounds a hang
		t.Fatal("Lost did not close after another raised the epoch")
	}
	if err := l.Err(); !errors.Is(err, store.ErrDeposed) {
		t.Errorf("Err = %v, want ErrDeposed", err)
	}
	if err := l.Store().PutSetting(ctx, "x", "y"); !errors.Is(err, store.ErrDeposed) {
		t.Errorf("the deposed leader's write: %v, want ErrDeposed", err)
	}
}
