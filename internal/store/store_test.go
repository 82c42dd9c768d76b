package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/store/pgtest"
	"github.com/lightpath/lightpath/internal/store/storetest"
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
