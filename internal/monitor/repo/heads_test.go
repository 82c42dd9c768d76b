package repo

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/testclock"
)

// rawCounts: tier 0's sealed chunks in SQLite, and its open chunks in the
// heads file (as the last checkpoint wrote it).
func rawCounts(t *testing.T, r *Repo) (chunkRows, chunkSamples, headChunks, headSamples int64) {
	t.Helper()
	if err := r.db.QueryRow(`SELECT count(*), coalesce(sum(n), 0) FROM chunks WHERE tier = 0`).Scan(&chunkRows, &chunkSamples); err != nil {
		t.Fatal(err)
	}
	hf, err := ReadHeadsFile(r.o.Path)
	if err != nil {
		t.Fatal(err)
	}
	return chunkRows, chunkSamples, hf.Tiers[0].Chunks, hf.Tiers[0].Samples
}

// TestHeadsAcrossRestart: a checkpoint stores open chunks in the heads
// file, not in chunks; after a reopen the next appends go on in the same
// chunk; a sealed chunk leaves the heads file for chunks.
func TestHeadsAcrossRestart(t *testing.T) {
	c := testclock.New(t0.Add(3 * time.Hour))
	path := filepath.Join(t.TempDir(), "m.db")
	ctx := context.Background()
	r := open(t, path, c, nil)
	feedMinutes(t, r, 0, 100) // 100 samples, all in the first 2 h window
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = open(t, path, c, nil)
	if n, _, hn, hs := rawCounts(t, r); n != 0 || hn != 1 || hs != 100 {
		t.Fatalf("%d raw chunks in chunks, heads %d chunks %d samples; want 0, 1, 100", n, hn, hs)
	}
	var tables int
	if err := r.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'heads'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("a heads table in a new file (%d, %v)", tables, err)
	}
	// Read before any append: the undecoded head answers.
	if ss := query(t, r, Query{Name: "m", Start: t0, End: t0.Add(3 * time.Hour), Tier: 0}); len(ss) != 1 || len(ss[0].Points) != 100 {
		t.Fatalf("after reopen: %+v", ss)
	}
	feedMinutes(t, r, 100, 200)
	if err := r.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, hn, hs := rawCounts(t, r); hn != 1 || hs != 200 {
		t.Fatalf("heads after more appends: %d chunks, %d samples; want one chunk of 200", hn, hs)
	}
	feedMinutes(t, r, 200, 800) // past the first window (720 samples)
	if err := r.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if cn, cs, hn, hs := rawCounts(t, r); cn != 1 || cs != 719 || hn != 1 || hs != 81 {
		t.Fatalf("chunks %d rows %d samples, heads %d chunks %d samples; want 1/719 and 1/81", cn, cs, hn, hs)
	}
	ss := query(t, r, Query{Name: "m", Start: t0, End: t0.Add(3 * time.Hour), Tier: 0})
	if len(ss) != 1 || len(ss[0].Points) != 800 {
		t.Fatalf("got %d series, %d points; want 800", len(ss), len(ss[0].Points))
	}
	st := r.Stats()
	if st.HeadsBytes <= 0 || st.Tiers[0].Samples != 800 {
		t.Fatalf("stats: heads file %d bytes, raw samples %d (want 800)", st.HeadsBytes, st.Tiers[0].Samples)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHeadsRetention: the head of a series that stopped goes once its
// window is past the tier's retention.
func TestHeadsRetention(t *testing.T) {
	c := testclock.New(t0.Add(time.Hour))
	path := filepath.Join(t.TempDir(), "m.db")
	r := open(t, path, c, nil)
	defer r.Close()
	feedMinutes(t, r, 0, 100)
	ctx := context.Background()
	if err := r.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, n, _ := rawCounts(t, r); n != 1 {
		t.Fatalf("%d raw heads, want 1", n)
	}
	c.Set(t0.Add(6 * time.Hour)) // the 0-2h window is past 3h of retention
	if err := r.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, n, _ := rawCounts(t, r); n != 0 {
		t.Fatalf("%d raw heads after retention, want 0", n)
	}
	if st := r.Stats(); st.RetentionChunks == 0 {
		t.Fatalf("retention not counted: %+v", st)
	}
}
