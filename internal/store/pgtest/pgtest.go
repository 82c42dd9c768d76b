// Package pgtest gives tests a PostgreSQL database: the one named by
// LIGHTPATH_TEST_POSTGRES, or, when that is unset and the tests run as
// root, a throwaway server started with scripts/postgres.sh for the test
// binary's life. Each test gets a schema of its own, dropped afterwards.
// Otherwise the PostgreSQL tests skip, saying why.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	pgURL   string
	skipWhy string
	pgErr   error
	schemas atomic.Int64
)

// Main runs m with a PostgreSQL available to URL; call it from TestMain.
// repoRoot is the path from the test's package directory to the
// repository's root (where scripts/postgres.sh is).
func Main(m *testing.M, repoRoot string) int {
	pgURL = os.Getenv("LIGHTPATH_TEST_POSTGRES")
	if pgURL != "" {
		return m.Run()
	}
	for _, a := range os.Args[1:] {
		// A fuzzing run (and each of its workers) runs no test that needs
		// the database: starting a server per process would be waste.
		if strings.HasPrefix(a, "-test.fuzz") {
			skipWhy = "fuzzing: no PostgreSQL started"
			return m.Run()
		}
	}
	if os.Geteuid() != 0 {
		skipWhy = "set LIGHTPATH_TEST_POSTGRES=postgres://... or run as root to start a throwaway PostgreSQL"
		return m.Run()
	}
	if matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(matches) == 0 {
		skipWhy = "PostgreSQL is not installed (run make deps) and LIGHTPATH_TEST_POSTGRES is unset"
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "lightpath-pg-")
	if err != nil {
		pgErr = err
		return m.Run()
	}
	script := filepath.Join(repoRoot, "scripts", "postgres.sh")
	out, err := exec.Command(script, "start", dir).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		pgErr = fmt.Errorf("scripts/postgres.sh start: %w", err)
		os.RemoveAll(dir)
		return m.Run()
	}
	pgURL = strings.TrimSpace(string(out))
	defer func() {
		if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "scripts/postgres.sh stop: %v: %s\n", err, out)
		}
	}()
	return m.Run()
}

// URL returns a database URL whose search_path is a fresh schema, which
// needs only the right to create schemas, not databases. It skips the test
// when no PostgreSQL is available and fails it when one should have been.
func URL(t testing.TB) string {
	t.Helper()
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	if pgURL == "" {
		t.Skip(skipWhy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatalf("connect to %s: %v", pgURL, err)
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("lightpath_test_%d_%d", os.Getpid(), schemas.Add(1))
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, pgURL)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	sep := "?"
	if strings.Contains(pgURL, "?") {
		sep = "&"
	}
	return pgURL + sep + "search_path=" + schema
}
