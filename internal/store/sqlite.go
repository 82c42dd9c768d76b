package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/lightpath/lightpath/internal/sqlitefile"
)

// SQLite: modernc.org/sqlite, pure Go. The database runs in WAL mode, so
// readers never wait for the writer, with foreign keys on and a busy
// timeout for other processes' writers.
//
// Transactions: SQLite has one writer at a time by design, so a write
// transaction begins with BEGIN IMMEDIATE (the DSN's _txlock), taking the
// write lock up front: a transaction that reads capacity and then inserts
// can never be overtaken between its read and its write, nor fail on
// upgrading its lock. Within one process the writers also queue on a
// channel first, so 200 concurrent transactions wait in Go, in order and
// honouring their contexts, instead of spinning in SQLite's busy handler;
// the busy timeout covers writers in other processes.

type sqliteBackend struct {
	db *sql.DB
	// writer holds one token; a write transaction takes it for its life.
	writer chan struct{}
}

func openSQLite(path string) (*sqlStore, error) {
	if path == "" {
		return nil, fmt.Errorf("sqlite: no path (want sqlite:PATH or sqlite::memory:)")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: path %q must not contain ? or #", path)
	}
	memory := path == ":memory:"
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	if !memory {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	q.Set("_txlock", "immediate")
	if !memory {
		if err := sqlitefile.CreatePrivate(path); err != nil {
			return nil, fmt.Errorf("sqlite %s: %w", path, err)
		}
	}
	dsn := "file:" + path + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	if memory {
		// Every connection to :memory: is a database of its own: keep one.
		db.SetMaxOpenConns(1)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	b := &sqliteBackend{db: db, writer: make(chan struct{}, 1)}
	return &sqlStore{b: b, q: sqlQuerier{db}}, nil
}

func (b *sqliteBackend) name() string   { return "SQLite" }
func (b *sqliteBackend) serial() string { return "INTEGER PRIMARY KEY AUTOINCREMENT" }
func (b *sqliteBackend) binary() string { return "COLLATE BINARY" }
func (b *sqliteBackend) close() error   { return b.db.Close() }

func (b *sqliteBackend) isUnique(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func (b *sqliteBackend) begin(ctx context.Context) (txn, error) {
	select {
	case b.writer <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		<-b.writer
		return nil, err
	}
	return &sqlTxn{sqlQuerier: sqlQuerier{tx}, tx: tx, release: func() { <-b.writer }}, nil
}

// sqlQuerier adapts database/sql to querier.
type sqlQuerier struct {
	db interface {
		ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	}
}

func (q sqlQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) query(ctx context.Context, query string, args ...any) (rows, error) {
	rs, err := q.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rs}, nil
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

type sqlTxn struct {
	sqlQuerier
	tx      *sql.Tx
	release func()
}

func (t *sqlTxn) commit(ctx context.Context) error {
	defer t.release()
	return t.tx.Commit()
}

func (t *sqlTxn) rollback(ctx context.Context) error {
	defer t.release()
	return t.tx.Rollback()
}
