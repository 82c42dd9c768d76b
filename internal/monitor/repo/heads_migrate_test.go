package repo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/testclock"
)

// TestMigrateHeadsTable: a file of the older version, with its open chunks
// in a heads table and the series' state in series.state, opens with all
// its samples; the table is moved to the heads file and dropped, and
// appends go on in the same chunks. A heads file that has gone missing is
// refused.
func TestMigrateHeadsTable(t *testing.T) {
	c := testclock.New(t0.Add(3 * time.Hour))
	path := filepath.Join(t.TempDir(), "m.db")
	ctx := context.Background()
	r := open(t, path, c, nil)
	feedMinutes(t, r, 0, 100)
	want := query(t, r, Query{Name: "m", Start: t0, End: t0.Add(3 * time.Hour), Tier: 1})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// Make it an older file: the heads table and state, no heads file.
	b, err := os.ReadFile(headsPath(path))
	if err != nil {
		t.Fatal(err)
	}
	r = open(t, path, c, nil) // only for its db and tiers
	db, tiers := r.db, r.tiers
	if _, err := db.Exec(`CREATE TABLE heads (tier INTEGER NOT NULL, series_id INTEGER NOT NULL, win INTEGER NOT NULL,
		start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL,
		PRIMARY KEY (tier, series_id)) WITHOUT ROWID`); err != nil {
		t.Fatal(err)
	}
	var heads int
	if _, _, err := readHeads(b, tiers, func(ss *snapSeries) {
		s := newSeries(ss.id, "", nil, len(tiers))
		s.lastT, s.lastV = ss.lastT, ss.lastV
		for i, st := range ss.tiers {
			ts := &s.tiers[i]
			ts.lastT, ts.bucket, ts.n, ts.sum = st.lastT, st.bucket, st.n, st.sum
			for _, c := range st.chunks {
				if _, err := db.Exec(`INSERT INTO heads VALUES(?, ?, ?, ?, ?, ?, ?)`, i, ss.id, c.win, c.start, c.end, c.n, c.data); err != nil {
					t.Fatal(err)
				}
				heads++
			}
		}
		if _, err := db.Exec(`UPDATE series SET state = ? WHERE id = ?`, encState(s), ss.id); err != nil {
			t.Fatal(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM settings WHERE k IN ('heads_gen', 'heads_file')`); err != nil {
		t.Fatal(err)
	}
	r.stopForTest()
	if err := os.Remove(headsPath(path)); err != nil {
		t.Fatal(err)
	}
	if heads < 2 {
		t.Fatalf("%d heads rows", heads)
	}

	r = open(t, path, c, nil)
	var n int
	if err := r.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'heads'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("heads table still there after Open (%d, %v)", n, err)
	}
	if _, err := os.Stat(headsPath(path)); err != nil {
		t.Fatal(err)
	}
	if ss := query(t, r, Query{Name: "m", Start: t0, End: t0.Add(3 * time.Hour), Tier: 0}); len(ss) != 1 || len(ss[0].Points) != 100 {
		t.Fatalf("after migration: %+v", ss)
	}
	feedMinutes(t, r, 100, 200)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = open(t, path, c, nil)
	ss := query(t, r, Query{Name: "m", Start: t0, End: t0.Add(3 * time.Hour), Tier: 0})
	if len(ss) != 1 || len(ss[0].Points) != 200 {
		t.Fatalf("after appends: %d series", len(ss))
	}
	if _, _, hn, hs := rawCounts(t, r); hn != 1 || hs != 200 {
		t.Fatalf("heads: %d chunks, %d samples; want the same chunk of 200", hn, hs)
	}
	// The downsampled tier went on from the migrated state.
	got := query(t, r, Query{Name: "m", Start: t0, End: t0.Add(3 * time.Hour), Tier: 1})
	if len(got[0].Points) <= len(want[0].Points) || got[0].Points[len(want[0].Points)-1] != want[0].Points[len(want[0].Points)-1] {
		t.Fatalf("tier 1: %d points before, %d after", len(want[0].Points), len(got[0].Points))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// Without its heads file, the repository is refused.
	if err := os.Remove(headsPath(path)); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, Options{Path: path, Now: c.Now})
	if err == nil || !strings.Contains(err.Error(), "heads file") {
		t.Fatalf("open without the heads file: %v", err)
	}
}

// stopForTest closes a repository without a checkpoint.
func (r *Repo) stopForTest() {
	close(r.stop)
	<-r.done
	r.w.f.Close()
	r.db.Close()
}
