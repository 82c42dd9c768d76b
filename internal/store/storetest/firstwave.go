package storetest

import (
	"context"
	_ "embed"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/sqlitefile"
)

//go:embed testdata/metrics-first-wave.sql
var firstWaveSQL string

// FirstWaveMetricsFile writes at path a metrics file as the first wave's
// controller left it: the transfers and alert_history tables created by
// that code's own statements, holding three transfers and three alert
// records (testdata/metrics-first-wave.sql), for the tests of
// store.ImportMetricsFile and of a controller started on such a file.
func FirstWaveMetricsFile(t *testing.T, path string) {
	t.Helper()
	var stmts []string
	for _, s := range strings.Split(firstWaveSQL, ";\n") {
		if strings.TrimSpace(s) != "" {
			stmts = append(stmts, s)
		}
	}
	db, err := sqlitefile.Open(context.Background(), path, stmts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
