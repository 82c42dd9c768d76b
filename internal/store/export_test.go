package store

import (
	"context"
	"fmt"
	"strings"
)

// SetSchemaVersion records version v as applied, for the test of a
// database newer than the code.
func SetSchemaVersion(ctx context.Context, s Store, v int) error {
	_, err := s.(*sqlStore).q.exec(ctx, `INSERT INTO schema_version (version, applied_ns) VALUES (?, 0)`, v)
	return err
}

// OpenAt opens the database at url migrated to version v and no further,
// as code of that version left it, for the upgrade tests.
func OpenAt(ctx context.Context, url string, v int) (Store, error) {
	s, err := openURL(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := s.migrateTo(ctx, v); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return s, nil
}

// ExecRaw runs one statement on the database as it is, for the upgrade
// tests to write rows as an older version's code did.
func (s *sqlStore) ExecRaw(ctx context.Context, q string, args ...any) error {
	_, err := s.q.exec(ctx, q, args...)
	return err
}

// ColumnCollations returns the collation of each text column of a
// PostgreSQL table in the store's schema ("" for the database's default).
func ColumnCollations(ctx context.Context, s Store, table string) (map[string]string, error) {
	rs, err := s.(*sqlStore).q.query(ctx, `SELECT column_name, COALESCE(collation_name, '') FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = ? AND data_type = 'text'`, table)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := map[string]string{}
	for rs.Next() {
		var col, coll string
		if err := rs.Scan(&col, &coll); err != nil {
			return nil, err
		}
		out[col] = coll
	}
	return out, rs.Err()
}

// JobFilesPlan returns SQLite's plan of ListJobFiles(f) (at most 500
// paths and destinations), one step a line, for the test that it is
// answered by an index.
func JobFilesPlan(ctx context.Context, s Store, f JobFileFilter) (string, error) {
	q, args := jobFilesQuery(f)
	rs, err := s.(*sqlStore).q.query(ctx, `EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		return "", err
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var id, parent, unused int64
		var detail string
		if err := rs.Scan(&id, &parent, &unused, &detail); err != nil {
			return "", err
		}
		out = append(out, detail)
	}
	return strings.Join(out, "\n"), rs.Err()
}
