// Package sqlitefile opens an SQLite file the way the monitoring
// repository shares it: WAL journal, a busy timeout for the other
// connections to the same file, one connection, and a schema created if
// missing. The repository keeps its chunks this way; the store reads the
// first wave's transfers and alert history from the same file once
// (store.ImportMetricsFile), which kept them there.
package sqlitefile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// Open opens the SQLite file at path and runs each schema statement
// (CREATE ... IF NOT EXISTS) in order.
func Open(ctx context.Context, path string, schema ...string) (*sql.DB, error) {
	if err := CreatePrivate(path); err != nil {
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	for _, s := range schema {
		if _, err := db.ExecContext(ctx, s); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite %s: %w", path, err)
		}
	}
	return db, nil
}

// CreatePrivate creates the database file at path, empty and readable by
// its owner alone (0600), when it does not exist yet. SQLite gives its
// -wal and -shm files the database file's mode, so they are private too;
// left to itself it would create all three 0644, readable by every local
// user. A file that exists keeps its mode (its owner chose it). A missing
// directory is left for SQLite to report.
func CreatePrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		return f.Close()
	case errors.Is(err, fs.ErrExist), errors.Is(err, fs.ErrNotExist):
		return nil
	}
	return err
}
