package store_test

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

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/store/storetest"
)

// PostgreSQL for the tests: LIGHTPATH_TEST_POSTGRES names a database, or,
// when it is unset and the tests run as root, TestMain starts a throwaway
// server with scripts/postgres.sh and stops it afterwards. Otherwise the
// PostgreSQL half skips, saying why.
var (
	pgURL  string
	pgSkip string // why the PostgreSQL tests skip, when pgURL is empty
	pgErr  error  // the throwaway server failed to start
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	pgURL = os.Getenv("LIGHTPATH_TEST_POSTGRES")
	if pgURL == "" {
		switch {
		case os.Geteuid() != 0:
			pgSkip = "set LIGHTPATH_TEST_POSTGRES=postgres://... or run as root to start a throwaway PostgreSQL"
		default:
			if matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(matches) == 0 {
				pgSkip = "PostgreSQL is not installed (run make deps) and LIGHTPATH_TEST_POSTGRES is unset"
				break
			}
			dir, err := os.MkdirTemp("", "lightpath-pg-")
			if err != nil {
				pgErr = err
				break
			}
			script := filepath.Join("..", "..", "scripts", "postgres.sh")
			out, err := exec.Command(script, "start", dir).Output()
			if err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
				}
				pgErr = fmt.Errorf("scripts/postgres.sh start: %w", err)
				os.RemoveAll(dir)
				break
			}
			pgURL = strings.TrimSpace(string(out))
			defer func() {
				if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
					fmt.Fprintf(os.Stderr, "scripts/postgres.sh stop: %v: %s\n", err, out)
				}
			}()
		}
	}
	return m.Run()
}

func sqliteURL(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "lightpath.db")
}

var pgSchemas atomic.Int64

// postgresURL gives each test a schema of its own in the test database,
// which needs only the right to create schemas there, not databases.
func postgresURL(t *testing.T) string {
	t.Helper()
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	if pgURL == "" {
		t.Skip(pgSkip)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatalf("connect to %s: %v", pgURL, err)
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("lightpath_test_%d_%d", os.Getpid(), pgSchemas.Add(1))
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
