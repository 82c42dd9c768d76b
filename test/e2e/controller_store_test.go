//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/lightpath/lightpath/internal/store/pgtest"
	"github.com/lightpath/lightpath/internal/store/storetest"
)

// TestControllerImportsFirstWaveMetricsFile starts the controller on a
// metrics file as the first wave left it (transfers and alert history in
// its own tables) and finds every record through the API, from the
// database (SQLite, PostgreSQL); started again, it still finds each once
// and imports nothing more.
func TestControllerImportsFirstWaveMetricsFile(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]func(t *testing.T, dir string) string{
		"sqlite":   func(_ *testing.T, dir string) string { return "sqlite:" + filepath.Join(dir, "db") },
		"postgres": func(t *testing.T, _ string) string { return pgtest.URL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			metrics := filepath.Join(dir, "old-metrics.db")
			storetest.FirstWaveMetricsFile(t, metrics)
			rules := filepath.Join(dir, "rules.yaml")
			if err := os.WriteFile(rules, []byte("rules:\n  - name: quiet\n    expr: {series: lightpath_none, window: 10s}\n    op: \">\"\n    threshold: 1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"--metrics-db", metrics, "--rules", rules}
			url := db(t, dir)
			c := startKillCtl(t, dir, url, freePort(t, "127.0.0.1"), args...)
			checkFirstWaveAPI(t, c)
			if log := c.log.String(); !strings.Contains(log, "imported the transfers and alert history") || !strings.Contains(log, "transfers=3 alerts=3") {
				t.Errorf("the import is not logged:\n%s", log)
			}
			if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			c.cmd.Wait()

			c2 := startKillCtl(t, dir, url, freePort(t, "127.0.0.1"), args...)
			checkFirstWaveAPI(t, c2)
			if log := c2.log.String(); strings.Contains(log, "imported") {
				t.Errorf("imported again on the second start:\n%s", log)
			}
		})
	}
}

// checkFirstWaveAPI checks that the controller serves the records of
// storetest.FirstWaveMetricsFile, once each.
func checkFirstWaveAPI(t *testing.T, c *killCtl) {
	t.Helper()
	var list struct {
		Transfers []struct {
			ID, Owner, State, Source, Bottleneck string
			BytesByPath                          map[string]int64 `json:"bytes_by_path"`
		} `json:"transfers"`
	}
	if st, err := c.call("GET", "/api/v1/transfers", nil, &list); err != nil || st != 200 {
		t.Fatalf("list transfers: %d %v\n%s", st, err, c.log)
	}
	var ids []string
	for _, x := range list.Transfers {
		ids = append(ids, x.ID)
	}
	if want := []string{"t-222222222222", "t-111111111111", "t-0a1b2c3d4e5f"}; !slices.Equal(ids, want) {
		t.Fatalf("transfers %v, want %v", ids, want)
	}
	if x := list.Transfers[2]; x.Owner != "alice" || x.State != "succeeded" || x.Bottleneck != "reservation" || x.BytesByPath["routed"] != 73741824 {
		t.Errorf("transfer %+v", x)
	}
	// bob's, running in the old file, has not reported for days: stalled.
	if x := list.Transfers[1]; x.Owner != "bob" || x.State != "stalled" {
		t.Errorf("transfer %+v, want bob's, stalled", x)
	}
	var alerts struct {
		History []struct {
			Rule, To, Reason string
			Value            *float64
			Labels           map[string]string
			Actions          []struct{ Kind, Detail string }
		} `json:"history"`
	}
	if st, err := c.call("GET", "/api/v1/alerts", nil, &alerts); err != nil || st != 200 {
		t.Fatalf("alerts: %d %v", st, err)
	}
	h := alerts.History
	if len(h) != 3 {
		t.Fatalf("%d alert records, want 3: %+v", len(h), h)
	}
	if h[0].Rule != "node-down" || h[0].Labels["node"] != "h1" || h[1].To != "ok" || h[1].Value != nil ||
		h[2].Rule != "wan-busy" || h[2].Labels["link"] != "wan" || len(h[2].Actions) != 2 || h[2].Actions[1].Detail != "r-4f2a moved=true" {
		t.Errorf("alert history: %+v", h)
	}
}
