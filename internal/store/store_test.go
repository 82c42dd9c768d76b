package store_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/sqlitefile"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/store/pgtest"
	"github.com/lightpath/lightpath/internal/store/storetest"
	"github.com/lightpath/lightpath/internal/transfer"
)

// PostgreSQL for the tests comes from pgtest: LIGHTPATH_TEST_POSTGRES, or
// a throwaway server when the tests run as root; otherwise the PostgreSQL
// half skips, saying why.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, filepath.Join("..", ".."))) }

func sqliteURL(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "lightpath.db")
}

func postgresURL(t *testing.T) string { return pgtest.URL(t) }

func TestSQLite(t *testing.T)   { storetest.Run(t, sqliteURL) }
func TestPostgres(t *testing.T) { storetest.Run(t, postgresURL) }

func TestUpgradeSQLite(t *testing.T)   { storetest.RunUpgrade(t, sqliteURL, store.OpenAt) }
func TestUpgradePostgres(t *testing.T) { storetest.RunUpgrade(t, postgresURL, store.OpenAt) }

func TestSchemaTooNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(*testing.T) string
	}{{"SQLite", sqliteURL}, {"Postgres", postgresURL}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			url := tc.url(t)
			s, err := store.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.SetSchemaVersion(ctx, s, store.CodeSchemaVersion()+1); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s, err = store.Open(ctx, url)
			if !errors.Is(err, store.ErrSchemaTooNew) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("open a newer database: %v, want ErrSchemaTooNew", err)
			}
		})
	}
}

func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{"mysql://x", "sqlite:", "", "/var/lib/lightpath.db", "postgres://u:secret@127.0.0.1:1/db?connect_timeout=1"} {
		s, err := store.Open(ctx, url)
		if err == nil {
			s.Close()
			t.Errorf("open %q: no error", url)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("open %q: the error shows the password: %v", url, err)
		}
	}
	if _, err := store.Open(ctx, "mysql://x"); !errors.Is(err, reserve.ErrInvalid) {
		t.Errorf("unknown scheme: %v, want ErrInvalid", err)
	}
}

// An in-memory SQLite works as a store, for tests that need no file.
func TestSQLiteMemory(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, "sqlite::memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateUser(ctx, store.User{Name: "alice", Role: reserve.RoleUser}); err != nil {
		t.Fatal(err)
	}
	err = s.Tx(ctx, func(tx store.Store) error {
		_, err := tx.GetUser(ctx, "alice")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := s.ListUsers(ctx); err != nil || len(u) != 1 {
		t.Fatalf("users: %v, %v", u, err)
	}
}

// TestImportMetricsFile: every transfer and alert record of a first-wave
// metrics file is in the store after the import, once however often it
// runs, on both databases.
func TestImportMetricsFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(*testing.T) string
	}{{"SQLite", sqliteURL}, {"Postgres", postgresURL}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			url := tc.url(t)
			metrics := filepath.Join(t.TempDir(), "lightpath-metrics.db")
			storetest.FirstWaveMetricsFile(t, metrics)
			s, err := store.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			imp, err := store.ImportMetricsFile(ctx, s, metrics)
			if err != nil {
				t.Fatal(err)
			}
			if !imp.Found || imp.Already || imp.Transfers != 3 || imp.Alerts != 3 || imp.Skipped != 0 || imp.Present != 0 {
				t.Errorf("first import: %+v, want 3 transfers and 3 alert records", imp)
			}
			checkFirstWave(t, s)
			// Again, and again after a restart: nothing more.
			if imp, err := store.ImportMetricsFile(ctx, s, metrics); err != nil || !imp.Already || imp.Transfers != 0 {
				t.Errorf("second import: %+v, %v; want already done", imp, err)
			}
			s.Close()
			if s, err = store.Open(ctx, url); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if imp, err := store.ImportMetricsFile(ctx, s, metrics); err != nil || !imp.Already {
				t.Errorf("import after a restart: %+v, %v; want already done", imp, err)
			}
			checkFirstWave(t, s)
			if v, err := s.GetSetting(ctx, store.MetricsFileImported); err != nil || !strings.Contains(v, `"transfers":3`) {
				t.Errorf("the import's mark: %q, %v", v, err)
			}
		})
	}
}

// checkFirstWave checks that s holds the records of
// storetest.FirstWaveMetricsFile, once each.
func checkFirstWave(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	ts, err := s.ListTransfers(ctx, store.TransferFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range ts {
		ids = append(ids, x.ID)
	}
	if want := []string{"t-222222222222", "t-111111111111", "t-0a1b2c3d4e5f"}; !slices.Equal(ids, want) {
		t.Fatalf("transfers %v, want %v", ids, want)
	}
	want := transfer.Transfer{ID: "t-0a1b2c3d4e5f", Owner: "alice", State: "succeeded", Direction: "push", Source: "big.h5",
		Destination: "lp://b1:7070/", From: "a1", To: "b1", Flow: "tcp 198.18.1.1 > 198.18.2.1:7070", Reservation: "r-4f2a",
		Streams: 4, BytesTotal: 1 << 30, BytesDone: 1 << 30, BytesByPath: map[string]int64{"reserved": 1000000000, "routed": 73741824},
		ThroughputBps: 912000000.5, StartedAt: time.Date(2026, 11, 20, 9, 0, 0, 123456789, time.UTC),
		UpdatedAt: time.Date(2026, 11, 20, 9, 0, 12, 5e8, time.UTC), EndedAt: time.Date(2026, 11, 20, 9, 0, 12, 5e8, time.UTC),
		Verified: true, Bottleneck: "reservation", BottleneckWhy: "the reservation's 1 Gbit/s"}
	if !reflect.DeepEqual(ts[2], want) {
		t.Errorf("transfer:\n got %+v\nwant %+v", ts[2], want)
	}
	if ts[0].Source != "ünïcode dir" || ts[0].Error != "connection reset" || ts[1].Owner != "bob" || ts[1].State != "running" {
		t.Errorf("transfers: %+v", ts)
	}
	recs, err := s.ListAlerts(ctx, store.AlertFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d alert records, want 3: %+v", len(recs), recs)
	}
	if r := recs[0]; r.Rule != "node-down" || r.Value != 0 || r.Threshold != 1 || !reflect.DeepEqual(r.Labels, map[string]string{"node": "h1"}) {
		t.Errorf("newest record: %+v", r)
	}
	if r := recs[1]; r.Rule != "wan-busy" || !r.Resolved || r.To != "ok" || !math.IsNaN(r.Value) || r.Actions != nil {
		t.Errorf("the resolved record: %+v", r)
	}
	wantFiring := store.AlertRecord{ID: recs[2].ID, At: time.UnixMilli(1763629205000).UTC(), Rule: "wan-busy", Severity: "critical",
		Series: "lightpath_link_utilisation_ratio", Labels: map[string]string{"from": "ra", "link": "wan", "to": "rb"},
		From: "pending", To: "firing", Value: 0.93, Threshold: 0.8, Reason: "wan from ra: last over 30s 0.93 > 0.8",
		Actions: []store.AlertAction{{Kind: "log", OK: true}, {Kind: "reroute", OK: true, Detail: "r-4f2a moved=true"}}}
	if !reflect.DeepEqual(recs[2], wantFiring) {
		t.Errorf("the firing record:\n got %+v\nwant %+v", recs[2], wantFiring)
	}
	if !(recs[2].ID < recs[1].ID && recs[1].ID < recs[0].ID) {
		t.Errorf("ids %d, %d, %d: want the old order kept", recs[2].ID, recs[1].ID, recs[0].ID)
	}
	if got, err := s.ListAlerts(ctx, store.AlertFilter{Any: map[string][]string{"link": {"wan"}}}); err != nil || len(got) != 2 {
		t.Errorf("records of link wan: %d, %v; want 2", len(got), err)
	}
}

// TestImportMetricsFileNone: no file, or one without the first wave's
// tables, is nothing to import; the file is not created, nothing marked.
func TestImportMetricsFileNone(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, sqliteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	missing := filepath.Join(t.TempDir(), "none.db")
	if imp, err := store.ImportMetricsFile(ctx, s, missing); err != nil || imp.Found {
		t.Errorf("a missing file: %+v, %v", imp, err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the missing file was created: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.db")
	db, err := sqlitefile.Open(ctx, empty, `CREATE TABLE chunks (id INTEGER)`)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if imp, err := store.ImportMetricsFile(ctx, s, empty); err != nil || imp.Found {
		t.Errorf("a file without the tables: %+v, %v", imp, err)
	}
	if _, err := s.GetSetting(ctx, store.MetricsFileImported); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("marked done with nothing imported: %v", err)
	}
}

// TestPostgresByteOrder: the transfer service's names, IDs and paths
// compare byte by byte on PostgreSQL whatever the database's collation
// (the test cluster's is C, a production one's often en_US), so a job's
// files page in the order SQLite and Go give.
func TestPostgresByteOrder(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, postgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for table, cols := range map[string][]string{
		"endpoints": {"name"}, "datanodes": {"node"}, "jobs": {"id"}, "job_files": {"job", "path"}, "tasks": {"id"},
	} {
		got, err := store.ColumnCollations(ctx, s, table)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cols {
			if got[c] != "C" {
				t.Errorf("%s.%s has collation %q, want C", table, c, got[c])
			}
		}
	}
}

// TestWritersByIndex: the files of every job landing at given
// destinations, in given states, are found by the (dest, state) index
// on SQLite, never by a scan of every job's files (issue 29).
func TestWritersByIndex(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, sqliteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan, err := store.JobFilesPlan(ctx, s, store.JobFileFilter{Dests: []string{"in/a", "in/b"},
		States: []string{transfer.FilePending, transfer.FileActive}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "USING INDEX job_files_writers") || strings.Contains(plan, "SCAN job_files") {
		t.Errorf("plan of the files landing at two destinations:\n%s\nwant a search of job_files_writers", plan)
	}
}
