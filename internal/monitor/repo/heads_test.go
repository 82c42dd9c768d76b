package repo

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestHeadsAcrossRestart: a checkpoint stores open chunks in heads, not in
// chunks; after a reopen the next appends go on in the same chunk; a
// sealed chunk leaves heads for chunks.
func TestHeadsAcrossRestart(t *testing.T) {
	c := &clock{t: t0.Add(3 * time.Hour)}
	path := filepath.Join(t.TempDir(), "m.db")
	ctx := context.Background()
	count := func(r *Repo, table string) (rows, samples int) {
		t.Helper()
		if err := r.db.QueryRow(`SELECT count(*), coalesce(sum(n), 0) FROM `+table+` WHERE tier = 0`).Scan(&rows, &samples); err != nil {
			t.Fatal(err)
		}
		return rows, samples
	}
	r := open(t, path, c, nil)
	feedMinutes(t, r, 0, 100) // 100 samples, all in the first 2 h window
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = open(t, path, c, nil)
	if n, _ := count(r, "chunks"); n != 0 {
		t.Fatalf("%d raw chunks in chunks before any was sealed", n)
	}
	if n, s := count(r, "heads"); n != 1 || s != 100 {
		t.Fatalf("heads: %d rows, %d samples; want 1, 100", n, s)
	}
	// Read before any append: the undecoded head answers.
	if ss := query(t, r, Query{Name: "m", Start: t0, End: t0.Add(3 * time.Hour), Tier: 0}); len(ss) != 1 || len(ss[0].Points) != 100 {
		t.Fatalf("after reopen: %+v", ss)
	}
	feedMinutes(t, r, 100, 200)
	if err := r.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if n, s := count(r, "heads"); n != 1 || s != 200 {
		t.Fatalf("heads after more appends: %d rows, %d samples; want one chunk of 200", n, s)
	}
	feedMinutes(t, r, 200, 800) // past the first window (720 samples)
	if err := r.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	cn, cs := count(r, "chunks")
	hn, hs := count(r, "heads")
	if cn != 1 || cs != 719 || hn != 1 || hs != 81 {
		t.Fatalf("chunks %d rows %d samples, heads %d rows %d samples; want 1/719 and 1/81", cn, cs, hn, hs)
	}
	ss := query(t, r, Query{Name: "m", Start: t0, End: t0.Add(3 * time.Hour), Tier: 0})
	if len(ss) != 1 || len(ss[0].Points) != 800 {
		t.Fatalf("got %d series, %d points; want 800", len(ss), len(ss[0].Points))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHeadsRetention: the head of a series that stopped goes once its
// window is past the tier's retention.
func TestHeadsRetention(t *testing.T) {
	c := &clock{t: t0.Add(time.Hour)}
	path := filepath.Join(t.TempDir(), "m.db")
	r := open(t, path, c, nil)
	defer r.Close()
	feedMinutes(t, r, 0, 100)
	ctx := context.Background()
	if err := r.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	heads := func() (n int) {
		t.Helper()
		if err := r.db.QueryRow(`SELECT count(*) FROM heads WHERE tier = 0`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := heads(); n != 1 {
		t.Fatalf("%d raw heads, want 1", n)
	}
	c.Set(t0.Add(6 * time.Hour)) // the 0-2h window is past 3h of retention
	if err := r.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if n := heads(); n != 0 {
		t.Fatalf("%d raw heads after retention, want 0", n)
	}
}
