// Package sqlitefile opens the small SQLite tables that live beside the
// monitoring repository in its file (the alert history, the transfers):
// WAL journal, a busy timeout for the other connections to the same file
// (the repository's own), one connection, and the table's schema created
// if missing.
package sqlitefile

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// Open opens the SQLite file at path and runs each schema statement
// (CREATE ... IF NOT EXISTS) in order.
func Open(ctx context.Context, path string, schema ...string) (*sql.DB, error) {
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
