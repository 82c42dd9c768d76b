package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lightpath/lightpath/internal/reserve"
)

// The two backends share every query: they differ only in how a
// transaction begins, how placeholders are spelled, a few DDL words and how
// a unique violation is reported, which is what backend abstracts. The SQL
// is the common subset of SQLite and PostgreSQL.

// querier runs statements on a pool or inside a transaction. Queries are
// written with ? placeholders; the backend rewrites them.
type querier interface {
	exec(ctx context.Context, q string, args ...any) (int64, error)
	query(ctx context.Context, q string, args ...any) (rows, error)
}

// rows is the part of database/sql's and pgx's row iterators used here.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// txn is an open write transaction.
type txn interface {
	querier
	commit(ctx context.Context) error
	rollback(ctx context.Context) error
}

type backend interface {
	name() string
	// begin opens a write transaction, waiting until no other one runs.
	begin(ctx context.Context) (txn, error)
	// serial is the column type of an auto-assigned integer primary key.
	serial() string
	// binary is the collation clause that makes a text column compare
	// byte by byte, as Go's strings do.
	binary() string
	isUnique(err error) bool
	close() error
}

// sqlStore implements Store on a backend, either on its pool or, inside
// Tx, on one transaction.
type sqlStore struct {
	b  backend
	q  querier
	tx bool
	// epoch, when not 0, fences the store's write transactions: each
	// fails with ErrDeposed unless the stored leader epoch is still this
	// (see Lead).
	epoch int64
	// deposed, when not nil, is told when a write found the epoch
	// overtaken (the Leadership's Lost closes at once).
	deposed func(error)
}

var _ Store = (*sqlStore)(nil)

func (s *sqlStore) Close() error { return s.b.close() }

// insertNew runs an INSERT of a row whose key must be new, what naming it
// ("job j-1"): a taken key is reserve.ErrConflict.
func (s *sqlStore) insertNew(ctx context.Context, what, q string, args ...any) error {
	_, err := s.q.exec(ctx, q, args...)
	if s.b.isUnique(err) {
		return fmt.Errorf("create %s: %w: the id is taken", what, reserve.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", what, err)
	}
	return nil
}

func (s *sqlStore) Tx(ctx context.Context, fn func(Store) error) (err error) {
	if s.tx {
		return fn(s)
	}
	t, err := s.b.begin(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	done := false
	defer func() {
		if !done {
			// fn panicked: discard its writes and let the panic go on.
			t.rollback(context.WithoutCancel(ctx))
		}
	}()
	if s.epoch != 0 {
		// Under the writers' lock: a new leader raises the epoch in a
		// write transaction, so none of ours can commit after it.
		if err = checkEpoch(ctx, t, s.epoch); err != nil {
			done = true
			t.rollback(context.WithoutCancel(ctx))
			if errors.Is(err, ErrDeposed) && s.deposed != nil {
				s.deposed(err)
			}
			return err
		}
	}
	err = fn(&sqlStore{b: s.b, q: t, tx: true})
	done = true
	if err != nil {
		t.rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := t.commit(ctx); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}

// write runs fn in the current transaction or, outside one, in a new one,
// so every write is atomic and takes part in the writers' serialisation.
func (s *sqlStore) write(ctx context.Context, fn func(*sqlStore) error) error {
	if s.tx {
		return fn(s)
	}
	return s.Tx(ctx, func(st Store) error { return fn(st.(*sqlStore)) })
}

// queryRow runs a query expected to return at most one row and scans it;
// found is false when there was none.
func (s *sqlStore) queryRow(ctx context.Context, q string, args []any, dest ...any) (found bool, err error) {
	rs, err := s.q.query(ctx, q, args...)
	if err != nil {
		return false, err
	}
	defer rs.Close()
	if !rs.Next() {
		return false, rs.Err()
	}
	if err := rs.Scan(dest...); err != nil {
		return false, err
	}
	return true, rs.Err()
}

// Times are int64 nanoseconds in UTC; the zero time is 0 (package doc).
func encTime(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func decTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// checkTime refuses instants int64 nanoseconds cannot hold, which
// UnixNano would silently wrap.
func checkTime(field string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if t.Year() < 1678 || t.Year() > 2261 {
		return fmt.Errorf("%w: %s %s is outside the storable years 1678-2261", reserve.ErrInvalid, field, t.UTC().Format(time.RFC3339))
	}
	return nil
}

func encUint(field string, v uint64) (int64, error) {
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %s %d is too large to store", reserve.ErrInvalid, field, v)
	}
	return int64(v), nil
}

func encJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// ---- schema ----

// migrations are the schema versions in order: migrations[i] takes the
// database from version i to i+1. Never edit one that has shipped; append.
// {{serial}} becomes the backend's auto-assigned integer key, {{binary}}
// its byte-order collation.
var migrations = [][]string{
	{
		`CREATE TABLE reservations (
			id TEXT PRIMARY KEY,
			owner TEXT NOT NULL,
			project TEXT NOT NULL,
			from_node TEXT NOT NULL,
			to_node TEXT NOT NULL,
			bandwidth BIGINT NOT NULL,
			start_ns BIGINT NOT NULL,
			end_ns BIGINT NOT NULL,
			flow_spec TEXT NOT NULL,
			dscp BIGINT NOT NULL,
			path TEXT NOT NULL,
			state TEXT NOT NULL,
			degraded BIGINT NOT NULL,
			degraded_reason TEXT NOT NULL,
			failure_reason TEXT NOT NULL,
			version BIGINT NOT NULL,
			idempotency_key TEXT,
			hold_expires_ns BIGINT NOT NULL,
			created_ns BIGINT NOT NULL,
			managed_nodes TEXT NOT NULL,
			provisioned TEXT NOT NULL,
			UNIQUE (owner, idempotency_key)
		)`,
		`CREATE INDEX reservations_state ON reservations (state, start_ns)`,
		`CREATE INDEX reservations_window ON reservations (start_ns, end_ns)`,
		`CREATE TABLE reservation_nodes (
			reservation_id TEXT NOT NULL REFERENCES reservations (id) ON DELETE CASCADE,
			node TEXT NOT NULL,
			PRIMARY KEY (node, reservation_id)
		)`,
		`CREATE TABLE transitions (
			seq {{serial}},
			reservation_id TEXT NOT NULL REFERENCES reservations (id) ON DELETE CASCADE,
			from_state TEXT NOT NULL,
			to_state TEXT NOT NULL,
			event TEXT NOT NULL,
			at_ns BIGINT NOT NULL,
			by_actor TEXT NOT NULL,
			why TEXT NOT NULL,
			version BIGINT NOT NULL
		)`,
		`CREATE INDEX transitions_reservation ON transitions (reservation_id, seq)`,
		`CREATE TABLE users (
			name TEXT PRIMARY KEY,
			role TEXT NOT NULL,
			projects TEXT NOT NULL,
			created_ns BIGINT NOT NULL
		)`,
		`CREATE TABLE tokens (
			id TEXT PRIMARY KEY,
			user_name TEXT NOT NULL REFERENCES users (name),
			hash TEXT NOT NULL UNIQUE,
			created_ns BIGINT NOT NULL,
			expires_ns BIGINT NOT NULL,
			revoked_ns BIGINT NOT NULL
		)`,
		`CREATE TABLE audit (
			seq {{serial}},
			at_ns BIGINT NOT NULL,
			who TEXT NOT NULL,
			what TEXT NOT NULL,
			detail TEXT NOT NULL
		)`,
		`CREATE INDEX audit_at ON audit (at_ns)`,
		`CREATE TABLE agents (
			node TEXT PRIMARY KEY,
			registered_ns BIGINT NOT NULL,
			lease_expires_ns BIGINT NOT NULL
		)`,
	},
	{
		// Version 2: writing a reservation replaces its node rows by
		// reservation_id, and deleting one cascades the same way; without
		// this index both scanned the whole table (creates fell from 870/s
		// to 140/s between 2,000 and 20,000 stored reservations).
		`CREATE INDEX reservation_nodes_reservation ON reservation_nodes (reservation_id)`,
	},
	{
		// Version 3: settings, and exclusive holds. A hold's nodes are rows
		// of their own, as a reservation's are, so "the holds covering
		// node N" is one lookup on the primary key (node first) rather
		// than a scan of every hold; the index by hold serves rewriting
		// and reading one hold's nodes. Holds are looked up by owner (a
		// user's list) and by end (the live ones: end after now).
		`CREATE TABLE settings (
			key TEXT PRIMARY KEY,
			value TEXT NOT NULL,
			updated_ns BIGINT NOT NULL
		)`,
		`CREATE TABLE exclusives (
			id TEXT PRIMARY KEY,
			owner TEXT NOT NULL,
			project TEXT NOT NULL,
			node TEXT NOT NULL,
			site TEXT NOT NULL,
			start_ns BIGINT NOT NULL,
			end_ns BIGINT NOT NULL,
			state TEXT NOT NULL,
			version BIGINT NOT NULL,
			created_ns BIGINT NOT NULL,
			cancelled_ns BIGINT NOT NULL,
			cancelled_by TEXT NOT NULL,
			why TEXT NOT NULL
		)`,
		`CREATE INDEX exclusives_owner ON exclusives (owner, start_ns)`,
		`CREATE INDEX exclusives_end ON exclusives (end_ns)`,
		`CREATE TABLE exclusive_nodes (
			exclusive_id TEXT NOT NULL REFERENCES exclusives (id) ON DELETE CASCADE,
			node TEXT NOT NULL,
			PRIMARY KEY (node, exclusive_id)
		)`,
		`CREATE INDEX exclusive_nodes_exclusive ON exclusive_nodes (exclusive_id)`,
	},
	{
		// Version 4: an agent's identity names its node. A user of role
		// agent may be bound to one node (every token of it acts for that
		// node alone), and a token may be bound to one (an agent user's
		// token per node). Existing users and tokens are bound to none: an
		// unbound agent may only mint node-bound tokens for itself, which
		// is what lightpath agent does on its first start (docs/agent.md).
		`ALTER TABLE users ADD COLUMN node TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE tokens ADD COLUMN node TEXT NOT NULL DEFAULT ''`,
	},
	{
		// Version 5: transfers and the alert history, which the first
		// wave kept in the metrics file (ImportMetricsFile carries them
		// over). A transfer is its JSON document plus the columns it is
		// selected by: an owner's live ones (owner, state, updated), the
		// running ones (state, updated), the newest (started). An alert
		// record's labels are rows of their own too, so "the records with
		// link l or node n" is a lookup on the primary key (name, value
		// first) on both databases, where the first wave used SQLite's
		// json_extract over every record.
		`CREATE TABLE transfers (
			id TEXT PRIMARY KEY,
			owner TEXT NOT NULL,
			state TEXT NOT NULL,
			started_ns BIGINT NOT NULL,
			updated_ns BIGINT NOT NULL,
			doc TEXT NOT NULL
		)`,
		`CREATE INDEX transfers_started ON transfers (started_ns)`,
		`CREATE INDEX transfers_owner_state ON transfers (owner, state, updated_ns)`,
		`CREATE INDEX transfers_state ON transfers (state, updated_ns)`,
		`CREATE TABLE alerts (
			id {{serial}},
			at_ns BIGINT NOT NULL,
			rule TEXT NOT NULL,
			severity TEXT NOT NULL,
			series TEXT NOT NULL,
			labels TEXT NOT NULL,
			from_state TEXT NOT NULL,
			to_state TEXT NOT NULL,
			resolved BIGINT NOT NULL,
			value DOUBLE PRECISION,
			threshold DOUBLE PRECISION NOT NULL,
			reason TEXT NOT NULL,
			actions TEXT NOT NULL
		)`,
		`CREATE INDEX alerts_at ON alerts (at_ns)`,
		`CREATE TABLE alert_labels (
			alert_id BIGINT NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
			name TEXT NOT NULL,
			value TEXT NOT NULL,
			PRIMARY KEY (name, value, alert_id)
		)`,
	},
	{
		// Version 6: the transfer service (Jobs). Each record is its JSON
		// document plus the columns it is selected or ordered by. Names,
		// IDs and paths compare byte by byte ({{binary}}) on both
		// databases, so a job's files page by (job, path) in the same
		// order everywhere, along the primary key. A job may have 100,000
		// files: the controller reads a job's files by state (the pending
		// ones, the counts), so (job, state) is indexed too; tasks are
		// read by job and by state (the queued ones to claim), decisions
		// by job, newest first. The children reference their job, and
		// DeleteJob deletes them itself as well, whatever the pragma.
		`CREATE TABLE endpoints (
			name TEXT {{binary}} PRIMARY KEY,
			doc TEXT NOT NULL
		)`,
		`CREATE TABLE datanodes (
			node TEXT {{binary}} PRIMARY KEY,
			endpoint TEXT NOT NULL,
			lease_ns BIGINT NOT NULL,
			doc TEXT NOT NULL
		)`,
		`CREATE INDEX datanodes_endpoint ON datanodes (endpoint)`,
		`CREATE TABLE jobs (
			id TEXT {{binary}} PRIMARY KEY,
			owner TEXT NOT NULL,
			key TEXT NOT NULL,
			state TEXT NOT NULL,
			created_ns BIGINT NOT NULL,
			version BIGINT NOT NULL,
			doc TEXT NOT NULL
		)`,
		`CREATE UNIQUE INDEX jobs_owner_key ON jobs (owner, key) WHERE key <> ''`,
		`CREATE INDEX jobs_created ON jobs (created_ns)`,
		`CREATE INDEX jobs_owner ON jobs (owner, created_ns)`,
		`CREATE INDEX jobs_state ON jobs (state, created_ns)`,
		`CREATE TABLE job_files (
			job TEXT {{binary}} NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
			path TEXT {{binary}} NOT NULL,
			state TEXT NOT NULL,
			task TEXT NOT NULL,
			size BIGINT NOT NULL,
			doc TEXT NOT NULL,
			PRIMARY KEY (job, path)
		)`,
		`CREATE INDEX job_files_state ON job_files (job, state)`,
		`CREATE INDEX job_files_task ON job_files (task)`,
		`CREATE TABLE tasks (
			id TEXT {{binary}} PRIMARY KEY,
			job TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
			kind TEXT NOT NULL,
			state TEXT NOT NULL,
			from_node TEXT NOT NULL,
			to_node TEXT NOT NULL,
			created_ns BIGINT NOT NULL,
			doc TEXT NOT NULL
		)`,
		`CREATE INDEX tasks_job ON tasks (job, created_ns)`,
		`CREATE INDEX tasks_state ON tasks (state, created_ns)`,
		`CREATE TABLE decisions (
			seq {{serial}},
			job TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
			at_ns BIGINT NOT NULL,
			doc TEXT NOT NULL
		)`,
		`CREATE INDEX decisions_job ON decisions (job, at_ns)`,
	},
	{
		// Version 7: the parts of large files (a file's blocks from
		// several source nodes into one destination node's partial file).
		// A part is its JSON document plus the columns it is selected by:
		// a file's parts in order (the primary key), the pending or
		// moving ones (state), those for a destination node (to_node:
		// the file's owner, or none yet), a task's (task).
		`CREATE TABLE file_parts (
			job TEXT {{binary}} NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
			path TEXT {{binary}} NOT NULL,
			idx BIGINT NOT NULL,
			state TEXT NOT NULL,
			to_node TEXT NOT NULL,
			task TEXT NOT NULL,
			doc TEXT NOT NULL,
			PRIMARY KEY (job, path, idx)
		)`,
		`CREATE INDEX file_parts_state ON file_parts (state, job)`,
		`CREATE INDEX file_parts_task ON file_parts (task)`,
	},
	{
		// Version 8: the endpoint a task reads from, so that a data
		// node's claim fetches its own endpoint's queued tasks by the
		// index, however many other jobs wait (issue 28).
		`ALTER TABLE tasks ADD COLUMN endpoint TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX tasks_queue ON tasks (kind, state, endpoint, created_ns)`,
	},
	{
		// Version 9: a file's destination path as a column, so that a
		// listing stored a page at a time is checked against the pages
		// before it by the index (two files landing on one destination),
		// never by holding the whole listing (issue 28, finding 7). Files
		// stored before it have none ('').
		`ALTER TABLE job_files ADD COLUMN dest TEXT {{binary}} NOT NULL DEFAULT ''`,
		`CREATE INDEX job_files_dest ON job_files (job, dest)`,
	},
	{
		// Version 10: the ended jobs whose files are still to be ended
		// or deleted (a cancel, a failure, a refused listing), a bounded
		// step at a time, each row carrying where the next step goes on.
		// The service's clock finds them by this table's index, however
		// many jobs there are, and carries them on after a restart or a
		// standby's takeover (issue 28, finding 7).
		`CREATE TABLE job_sweeps (
			job TEXT {{binary}} PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
			at_ns BIGINT NOT NULL,
			doc TEXT NOT NULL
		)`,
		`CREATE INDEX job_sweeps_at ON job_sweeps (at_ns, job)`,
	},
	{
		// Version 11: files by destination path across jobs, so that a
		// listing's page is checked against the other jobs still writing
		// any of its paths by this index (one writer per destination
		// file, issue 29), however many files the store holds.
		`CREATE INDEX job_files_writers ON job_files (dest, state)`,
	},
}

// CodeSchemaVersion returns the schema version this code migrates to.
func CodeSchemaVersion() int { return len(migrations) }

func (s *sqlStore) Migrate(ctx context.Context) error {
	return s.migrateTo(ctx, len(migrations))
}

// migrateTo applies the missing migrations up to version target (at most
// len(migrations)); the upgrade tests stop short of the latest to build
// the database an older controller left.
func (s *sqlStore) migrateTo(ctx context.Context, target int) error {
	return s.write(ctx, func(s *sqlStore) error {
		if _, err := s.q.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, applied_ns BIGINT NOT NULL)`); err != nil {
			return fmt.Errorf("migrate: create schema_version: %w", err)
		}
		have, err := s.schemaVersion(ctx)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if have > len(migrations) {
			return fmt.Errorf("migrate: %w: the %s database is at version %d, this program knows up to %d", ErrSchemaTooNew, s.b.name(), have, len(migrations))
		}
		for v := have; v < min(target, len(migrations)); v++ {
			for _, stmt := range migrations[v] {
				stmt = strings.ReplaceAll(stmt, "{{serial}}", s.b.serial())
				stmt = strings.ReplaceAll(stmt, "{{binary}}", s.b.binary())
				if _, err := s.q.exec(ctx, stmt); err != nil {
					return fmt.Errorf("migrate to version %d: %w", v+1, err)
				}
			}
			if _, err := s.q.exec(ctx, `INSERT INTO schema_version (version, applied_ns) VALUES (?, ?)`, v+1, time.Now().UnixNano()); err != nil {
				return fmt.Errorf("migrate to version %d: record version: %w", v+1, err)
			}
		}
		return nil
	})
}

func (s *sqlStore) SchemaVersion(ctx context.Context) (int, error) {
	return s.schemaVersion(ctx)
}

func (s *sqlStore) schemaVersion(ctx context.Context) (int, error) {
	var v int64
	if _, err := s.queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`, nil, &v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v), nil
}

// ---- reservations ----

const resvColumns = `id, owner, project, from_node, to_node, bandwidth, start_ns, end_ns,
	flow_spec, dscp, path, state, degraded, degraded_reason, failure_reason, version,
	COALESCE(idempotency_key, ''), hold_expires_ns, created_ns, managed_nodes, provisioned`

// resvArgs encodes r in the order of the reservations table's columns,
// from owner on (id is first in inserts and last in updates).
func resvArgs(r reserve.Reservation) ([]any, error) {
	bw, err := encUint("bandwidth", r.Bandwidth)
	if err != nil {
		return nil, err
	}
	ver, err := encUint("version", r.Version)
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		f string
		t time.Time
	}{{"start", r.Start}, {"end", r.End}, {"hold_expires", r.HoldExpires}, {"created_at", r.CreatedAt}} {
		if err := checkTime(c.f, c.t); err != nil {
			return nil, err
		}
	}
	path, err := encJSON(r.Path)
	if err != nil {
		return nil, fmt.Errorf("encode path: %w", err)
	}
	managed, err := encJSON(r.ManagedNodes)
	if err != nil {
		return nil, fmt.Errorf("encode managed nodes: %w", err)
	}
	prov, err := encJSON(r.Provisioned)
	if err != nil {
		return nil, fmt.Errorf("encode provisioned: %w", err)
	}
	return []any{r.Owner, r.Project, r.From, r.To, bw, encTime(r.Start), encTime(r.End),
		r.FlowSpec.String(), int64(r.DSCP), path, string(r.State), boolInt(r.Degraded),
		r.DegradedReason, r.FailureReason, ver, nullIfEmpty(r.IdempotencyKey),
		encTime(r.HoldExpires), encTime(r.CreatedAt), managed, prov}, nil
}

func scanResv(rs rows) (reserve.Reservation, error) {
	var (
		r                                  reserve.Reservation
		bw, start, end, dscp, deg, ver     int64
		hold, created                      int64
		flow, path, state, managed, provis string
	)
	if err := rs.Scan(&r.ID, &r.Owner, &r.Project, &r.From, &r.To, &bw, &start, &end,
		&flow, &dscp, &path, &state, &deg, &r.DegradedReason, &r.FailureReason, &ver,
		&r.IdempotencyKey, &hold, &created, &managed, &provis); err != nil {
		return r, err
	}
	r.Bandwidth, r.Start, r.End, r.DSCP = uint64(bw), decTime(start), decTime(end), uint8(dscp)
	r.State, r.Degraded, r.Version = reserve.State(state), deg != 0, uint64(ver)
	r.HoldExpires, r.CreatedAt = decTime(hold), decTime(created)
	if err := r.FlowSpec.UnmarshalText([]byte(flow)); err != nil {
		return r, fmt.Errorf("reservation %s: decode flow spec: %w", r.ID, err)
	}
	for _, f := range []struct {
		name, text string
		into       any
	}{{"path", path, &r.Path}, {"managed nodes", managed, &r.ManagedNodes}, {"provisioned", provis, &r.Provisioned}} {
		if err := json.Unmarshal([]byte(f.text), f.into); err != nil {
			return r, fmt.Errorf("reservation %s: decode %s: %w", r.ID, f.name, err)
		}
	}
	return r, nil
}

func (s *sqlStore) CreateReservation(ctx context.Context, r reserve.Reservation) error {
	if r.ID == "" {
		return fmt.Errorf("create reservation: %w: no id", reserve.ErrInvalid)
	}
	args, err := resvArgs(r)
	if err != nil {
		return fmt.Errorf("create reservation %s: %w", r.ID, err)
	}
	return s.write(ctx, func(s *sqlStore) error {
		if r.IdempotencyKey != "" {
			old, err := s.GetReservationByKey(ctx, r.Owner, r.IdempotencyKey)
			if err == nil {
				return &DuplicateKeyError{Existing: old}
			}
			if !errors.Is(err, reserve.ErrNotFound) {
				return fmt.Errorf("create reservation %s: %w", r.ID, err)
			}
		}
		if err := s.insertNew(ctx, "reservation "+r.ID, `INSERT INTO reservations (id, owner, project, from_node, to_node, bandwidth,
			start_ns, end_ns, flow_spec, dscp, path, state, degraded, degraded_reason, failure_reason,
			version, idempotency_key, hold_expires_ns, created_ns, managed_nodes, provisioned)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append([]any{r.ID}, args...)...); err != nil {
			return err
		}
		if err := s.putNodes(ctx, r); err != nil {
			return fmt.Errorf("create reservation %s: %w", r.ID, err)
		}
		if err := s.appendHistory(ctx, r.ID, r.History); err != nil {
			return fmt.Errorf("create reservation %s: %w", r.ID, err)
		}
		return nil
	})
}

func (s *sqlStore) putNodes(ctx context.Context, r reserve.Reservation) error {
	if _, err := s.q.exec(ctx, `DELETE FROM reservation_nodes WHERE reservation_id = ?`, r.ID); err != nil {
		return fmt.Errorf("clear nodes: %w", err)
	}
	for _, n := range r.Nodes() {
		if _, err := s.q.exec(ctx, `INSERT INTO reservation_nodes (reservation_id, node) VALUES (?, ?)`, r.ID, n); err != nil {
			return fmt.Errorf("store node %s: %w", n, err)
		}
	}
	return nil
}

func (s *sqlStore) appendHistory(ctx context.Context, id string, ts []reserve.Transition) error {
	for _, t := range ts {
		if err := checkTime("transition time", t.At); err != nil {
			return err
		}
		ver, err := encUint("transition version", t.Version)
		if err != nil {
			return err
		}
		if _, err := s.q.exec(ctx, `INSERT INTO transitions (reservation_id, from_state, to_state, event, at_ns, by_actor, why, version)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, string(t.From), string(t.To), string(t.Event), encTime(t.At), t.By, t.Why, ver); err != nil {
			return fmt.Errorf("append history: %w", err)
		}
	}
	return nil
}

func (s *sqlStore) GetReservation(ctx context.Context, id string) (reserve.Reservation, error) {
	list, err := s.listWhere(ctx, `r.id = ?`, []any{id})
	if err != nil {
		return reserve.Reservation{}, fmt.Errorf("get reservation %s: %w", id, err)
	}
	if len(list) == 0 {
		return reserve.Reservation{}, fmt.Errorf("reservation %s: %w", id, reserve.ErrNotFound)
	}
	return list[0], nil
}

func (s *sqlStore) GetReservationByKey(ctx context.Context, owner, key string) (reserve.Reservation, error) {
	list, err := s.listWhere(ctx, `r.owner = ? AND r.idempotency_key = ?`, []any{owner, key})
	if err != nil {
		return reserve.Reservation{}, fmt.Errorf("get reservation by idempotency key: %w", err)
	}
	if len(list) == 0 {
		return reserve.Reservation{}, fmt.Errorf("reservation of %s with idempotency key %q: %w", owner, key, reserve.ErrNotFound)
	}
	return list[0], nil
}

func (s *sqlStore) UpdateReservation(ctx context.Context, r reserve.Reservation, expected uint64) error {
	if r.Version <= expected {
		return fmt.Errorf("update reservation %s: %w: new version %d is not after %d", r.ID, reserve.ErrInvalid, r.Version, expected)
	}
	args, err := resvArgs(r)
	if err != nil {
		return fmt.Errorf("update reservation %s: %w", r.ID, err)
	}
	exp, err := encUint("version", expected)
	if err != nil {
		return fmt.Errorf("update reservation %s: %w", r.ID, err)
	}
	return s.write(ctx, func(s *sqlStore) error {
		// Owner (args[0]) and the idempotency key (args[15]) are fixed at creation.
		set := append(args[1:15:15], args[16:]...)
		n, err := s.q.exec(ctx, `UPDATE reservations SET project = ?, from_node = ?, to_node = ?, bandwidth = ?,
			start_ns = ?, end_ns = ?, flow_spec = ?, dscp = ?, path = ?, state = ?, degraded = ?,
			degraded_reason = ?, failure_reason = ?, version = ?, hold_expires_ns = ?, created_ns = ?,
			managed_nodes = ?, provisioned = ? WHERE id = ? AND version = ?`, append(set, r.ID, exp)...)
		if err != nil {
			return fmt.Errorf("update reservation %s: %w", r.ID, err)
		}
		if n == 0 {
			var cur int64
			found, err := s.queryRow(ctx, `SELECT version FROM reservations WHERE id = ?`, []any{r.ID}, &cur)
			switch {
			case err != nil:
				return fmt.Errorf("update reservation %s: %w", r.ID, err)
			case !found:
				return fmt.Errorf("update reservation %s: %w", r.ID, reserve.ErrNotFound)
			}
			return &reserve.StaleVersionError{ID: r.ID, Current: uint64(cur), Given: expected}
		}
		var stored int64
		if _, err := s.queryRow(ctx, `SELECT COUNT(*) FROM transitions WHERE reservation_id = ?`, []any{r.ID}, &stored); err != nil {
			return fmt.Errorf("update reservation %s: count history: %w", r.ID, err)
		}
		if int64(len(r.History)) < stored {
			return fmt.Errorf("update reservation %s: %w: history has %d entries, %d are stored and history is append-only", r.ID, reserve.ErrInvalid, len(r.History), stored)
		}
		if err := s.putNodes(ctx, r); err != nil {
			return fmt.Errorf("update reservation %s: %w", r.ID, err)
		}
		if err := s.appendHistory(ctx, r.ID, r.History[stored:]); err != nil {
			return fmt.Errorf("update reservation %s: %w", r.ID, err)
		}
		return nil
	})
}

// filterCond turns f into a condition on the table aliased a (reservations
// or exclusives, which share the columns filtered on) and its arguments;
// byNode selects the IDs of the rows touching the node given as its one
// argument.
func filterCond(f Filter, a, byNode string) (string, []any) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, v ...any) { where = append(where, cond); args = append(args, v...) }
	if f.Owner != "" {
		add(a+`.owner = ?`, f.Owner)
	}
	if f.Project != "" {
		add(a+`.project = ?`, f.Project)
	}
	if len(f.States) > 0 {
		marks := make([]string, len(f.States))
		for i, st := range f.States {
			marks[i] = "?"
			args = append(args, string(st))
		}
		where = append(where, a+`.state IN (`+strings.Join(marks, ", ")+`)`)
	}
	if !f.From.IsZero() {
		add(a+`.end_ns > ?`, encTime(f.From))
	}
	if !f.To.IsZero() {
		add(a+`.start_ns < ?`, encTime(f.To))
	}
	if f.Node != "" {
		add(a+`.id IN (`+byNode+`)`, f.Node)
	}
	if len(where) == 0 {
		return "1 = 1", nil
	}
	return strings.Join(where, " AND "), args
}

func (s *sqlStore) ListReservations(ctx context.Context, f Filter) ([]reserve.Reservation, error) {
	cond, args := filterCond(f, "r", `SELECT reservation_id FROM reservation_nodes WHERE node = ?`)
	list, err := s.listWhere(ctx, cond, args)
	if err != nil {
		return nil, fmt.Errorf("list reservations: %w", err)
	}
	return list, nil
}

func (s *sqlStore) ListLive(ctx context.Context) ([]reserve.Reservation, error) {
	var live []reserve.State
	for _, st := range reserve.States {
		if st.Live() {
			live = append(live, st)
		}
	}
	return s.ListReservations(ctx, Filter{States: live})
}

// listWhere returns the reservations matching cond (on alias r) with their
// history: two queries, however many reservations match.
func (s *sqlStore) listWhere(ctx context.Context, cond string, args []any) ([]reserve.Reservation, error) {
	rs, err := s.q.query(ctx, `SELECT `+resvColumns+` FROM reservations r WHERE `+cond+` ORDER BY r.start_ns, r.id`, args...)
	if err != nil {
		return nil, err
	}
	var out []reserve.Reservation
	index := map[string]int{}
	for rs.Next() {
		r, err := scanResv(rs)
		if err != nil {
			rs.Close()
			return nil, err
		}
		index[r.ID] = len(out)
		out = append(out, r)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	ts, err := s.q.query(ctx, `SELECT t.reservation_id, t.from_state, t.to_state, t.event, t.at_ns, t.by_actor, t.why, t.version
		FROM transitions t JOIN reservations r ON r.id = t.reservation_id WHERE `+cond+` ORDER BY t.seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	defer ts.Close()
	for ts.Next() {
		var (
			id, from, to, ev string
			at, ver          int64
			t                reserve.Transition
		)
		if err := ts.Scan(&id, &from, &to, &ev, &at, &t.By, &t.Why, &ver); err != nil {
			return nil, fmt.Errorf("read history: %w", err)
		}
		t.From, t.To, t.Event, t.At, t.Version = reserve.State(from), reserve.State(to), reserve.EventKind(ev), decTime(at), uint64(ver)
		if i, ok := index[id]; ok {
			out[i].History = append(out[i].History, t)
		}
	}
	if err := ts.Err(); err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	return out, nil
}

// ---- users and tokens ----

func (s *sqlStore) CreateUser(ctx context.Context, u User) error {
	if u.Name == "" {
		return fmt.Errorf("create user: %w: no name", reserve.ErrInvalid)
	}
	if err := checkTime("created_at", u.CreatedAt); err != nil {
		return fmt.Errorf("create user %s: %w", u.Name, err)
	}
	projects, err := encJSON(u.Projects)
	if err != nil {
		return fmt.Errorf("create user %s: %w", u.Name, err)
	}
	return s.write(ctx, func(s *sqlStore) error {
		_, err := s.q.exec(ctx, `INSERT INTO users (name, role, projects, created_ns, node) VALUES (?, ?, ?, ?, ?)`,
			u.Name, string(u.Role), projects, encTime(u.CreatedAt), u.Node)
		if s.b.isUnique(err) {
			return fmt.Errorf("create user %s: %w: the name is taken", u.Name, reserve.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("create user %s: %w", u.Name, err)
		}
		return nil
	})
}

func (s *sqlStore) listUsers(ctx context.Context, cond string, args ...any) ([]User, error) {
	rs, err := s.q.query(ctx, `SELECT name, role, projects, created_ns, node FROM users WHERE `+cond+` ORDER BY name`, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []User
	for rs.Next() {
		var (
			u              User
			role, projects string
			created        int64
		)
		if err := rs.Scan(&u.Name, &role, &projects, &created, &u.Node); err != nil {
			return nil, err
		}
		u.Role, u.CreatedAt = reserve.Role(role), decTime(created)
		if err := json.Unmarshal([]byte(projects), &u.Projects); err != nil {
			return nil, fmt.Errorf("user %s: decode projects: %w", u.Name, err)
		}
		out = append(out, u)
	}
	return out, rs.Err()
}

func (s *sqlStore) GetUser(ctx context.Context, name string) (User, error) {
	us, err := s.listUsers(ctx, `name = ?`, name)
	if err != nil {
		return User{}, fmt.Errorf("get user %s: %w", name, err)
	}
	if len(us) == 0 {
		return User{}, fmt.Errorf("user %s: %w", name, reserve.ErrNotFound)
	}
	return us[0], nil
}

func (s *sqlStore) ListUsers(ctx context.Context) ([]User, error) {
	us, err := s.listUsers(ctx, `1 = 1`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return us, nil
}

func (s *sqlStore) CreateToken(ctx context.Context, t Token) error {
	if t.ID == "" || t.User == "" || t.Hash == (TokenHash{}) {
		return fmt.Errorf("create token: %w: a token needs an id, a user and a hash", reserve.ErrInvalid)
	}
	for _, c := range []struct {
		f string
		t time.Time
	}{{"created_at", t.CreatedAt}, {"expires_at", t.ExpiresAt}, {"revoked_at", t.RevokedAt}} {
		if err := checkTime(c.f, c.t); err != nil {
			return fmt.Errorf("create token %s: %w", t.ID, err)
		}
	}
	return s.write(ctx, func(s *sqlStore) error {
		if _, err := s.GetUser(ctx, t.User); err != nil {
			return fmt.Errorf("create token %s: %w", t.ID, err)
		}
		_, err := s.q.exec(ctx, `INSERT INTO tokens (id, user_name, hash, created_ns, expires_ns, revoked_ns, node) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			t.ID, t.User, t.Hash.String(), encTime(t.CreatedAt), encTime(t.ExpiresAt), encTime(t.RevokedAt), t.Node)
		if s.b.isUnique(err) {
			return fmt.Errorf("create token %s: %w: the id or hash is taken", t.ID, reserve.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("create token %s: %w", t.ID, err)
		}
		return nil
	})
}

func (s *sqlStore) listTokens(ctx context.Context, cond string, args ...any) ([]Token, error) {
	rs, err := s.q.query(ctx, `SELECT id, user_name, hash, created_ns, expires_ns, revoked_ns, node FROM tokens WHERE `+cond+` ORDER BY created_ns, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Token
	for rs.Next() {
		var (
			t                         Token
			hash                      string
			created, expires, revoked int64
		)
		if err := rs.Scan(&t.ID, &t.User, &hash, &created, &expires, &revoked, &t.Node); err != nil {
			return nil, err
		}
		if b, err := decodeHash(hash); err != nil {
			return nil, fmt.Errorf("token %s: %w", t.ID, err)
		} else {
			t.Hash = b
		}
		t.CreatedAt, t.ExpiresAt, t.RevokedAt = decTime(created), decTime(expires), decTime(revoked)
		out = append(out, t)
	}
	return out, rs.Err()
}

func decodeHash(s string) (TokenHash, error) {
	var h TokenHash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("stored hash has %d hex digits, want %d", len(s), 2*len(h))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return h, fmt.Errorf("stored hash: %w", err)
	}
	copy(h[:], b)
	return h, nil
}

func (s *sqlStore) TokenByHash(ctx context.Context, h TokenHash) (Token, error) {
	ts, err := s.listTokens(ctx, `hash = ?`, h.String())
	if err != nil {
		return Token{}, fmt.Errorf("look up token: %w", err)
	}
	if len(ts) == 0 {
		// The hash is not named: it is as good as the token to an attacker
		// who can read logs of a database that leaked.
		return Token{}, fmt.Errorf("token: %w", reserve.ErrNotFound)
	}
	return ts[0], nil
}

func (s *sqlStore) ListTokens(ctx context.Context, user string) ([]Token, error) {
	ts, err := s.listTokens(ctx, `user_name = ?`, user)
	if err != nil {
		return nil, fmt.Errorf("list tokens of %s: %w", user, err)
	}
	return ts, nil
}

func (s *sqlStore) RevokeToken(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("revoke token %s: %w: no revocation time", id, reserve.ErrInvalid)
	}
	if err := checkTime("revoked_at", at); err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	return s.write(ctx, func(s *sqlStore) error {
		ts, err := s.listTokens(ctx, `id = ?`, id)
		if err != nil {
			return fmt.Errorf("revoke token %s: %w", id, err)
		}
		if len(ts) == 0 {
			return fmt.Errorf("token %s: %w", id, reserve.ErrNotFound)
		}
		if _, err := s.q.exec(ctx, `UPDATE tokens SET revoked_ns = ? WHERE id = ? AND revoked_ns = 0`, encTime(at), id); err != nil {
			return fmt.Errorf("revoke token %s: %w", id, err)
		}
		return nil
	})
}

// ---- audit ----

func (s *sqlStore) AppendAudit(ctx context.Context, e AuditEntry) error {
	if err := checkTime("at", e.At); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return s.write(ctx, func(s *sqlStore) error {
		if _, err := s.q.exec(ctx, `INSERT INTO audit (at_ns, who, what, detail) VALUES (?, ?, ?, ?)`,
			encTime(e.At), e.Who, e.What, e.Detail); err != nil {
			return fmt.Errorf("append audit: %w", err)
		}
		return nil
	})
}

func (s *sqlStore) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	q := `SELECT seq, at_ns, who, what, detail FROM audit WHERE 1 = 1`
	var args []any
	if f.Who != "" {
		q += ` AND who = ?`
		args = append(args, f.Who)
	}
	if !f.Since.IsZero() {
		q += ` AND at_ns >= ?`
		args = append(args, encTime(f.Since))
	}
	if !f.Until.IsZero() {
		q += ` AND at_ns < ?`
		args = append(args, encTime(f.Until))
	}
	q += ` ORDER BY seq`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	rs, err := s.q.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rs.Close()
	var out []AuditEntry
	for rs.Next() {
		var (
			e  AuditEntry
			at int64
		)
		if err := rs.Scan(&e.Seq, &at, &e.Who, &e.What, &e.Detail); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		e.At = decTime(at)
		out = append(out, e)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}

// ---- agents ----

func (s *sqlStore) PutAgent(ctx context.Context, a Agent) error {
	if a.Node == "" {
		return fmt.Errorf("register agent: %w: no node", reserve.ErrInvalid)
	}
	for _, t := range []time.Time{a.RegisteredAt, a.LeaseExpires} {
		if err := checkTime("agent time", t); err != nil {
			return fmt.Errorf("register agent %s: %w", a.Node, err)
		}
	}
	return s.write(ctx, func(s *sqlStore) error {
		if _, err := s.q.exec(ctx, `INSERT INTO agents (node, registered_ns, lease_expires_ns) VALUES (?, ?, ?)
			ON CONFLICT (node) DO UPDATE SET registered_ns = excluded.registered_ns, lease_expires_ns = excluded.lease_expires_ns`,
			a.Node, encTime(a.RegisteredAt), encTime(a.LeaseExpires)); err != nil {
			return fmt.Errorf("register agent %s: %w", a.Node, err)
		}
		return nil
	})
}

func (s *sqlStore) ListAgents(ctx context.Context) ([]Agent, error) {
	rs, err := s.q.query(ctx, `SELECT node, registered_ns, lease_expires_ns FROM agents ORDER BY node`)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	defer rs.Close()
	var out []Agent
	for rs.Next() {
		var (
			a          Agent
			reg, lease int64
		)
		if err := rs.Scan(&a.Node, &reg, &lease); err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		a.RegisteredAt, a.LeaseExpires = decTime(reg), decTime(lease)
		out = append(out, a)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return out, nil
}

// ---- settings ----

// checkText refuses what PostgreSQL's text cannot hold (a NUL byte,
// invalid UTF-8) and SQLite would take, so both backends answer alike.
func checkText(field, v string) error {
	switch {
	case strings.ContainsRune(v, 0):
		return fmt.Errorf("%w: the %s holds a NUL byte", reserve.ErrInvalid, field)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: the %s is not valid UTF-8", reserve.ErrInvalid, field)
	}
	return nil
}

func (s *sqlStore) GetSetting(ctx context.Context, key string) (string, error) {
	if err := checkText("key", key); err != nil {
		return "", fmt.Errorf("get setting: %w", err)
	}
	var v string
	found, err := s.queryRow(ctx, `SELECT value FROM settings WHERE key = ?`, []any{key}, &v)
	switch {
	case err != nil:
		return "", fmt.Errorf("get setting %q: %w", key, err)
	case !found:
		return "", fmt.Errorf("setting %q: %w", key, reserve.ErrNotFound)
	}
	return v, nil
}

func (s *sqlStore) PutSetting(ctx context.Context, key, value string) error {
	if key == "" {
		return fmt.Errorf("put setting: %w: no key", reserve.ErrInvalid)
	}
	if err := checkText("key", key); err != nil {
		return fmt.Errorf("put setting: %w", err)
	}
	if err := checkText("value", value); err != nil {
		return fmt.Errorf("put setting %q: %w", key, err)
	}
	return s.write(ctx, func(s *sqlStore) error {
		if _, err := s.q.exec(ctx, `INSERT INTO settings (key, value, updated_ns) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_ns = excluded.updated_ns`,
			key, value, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("put setting %q: %w", key, err)
		}
		return nil
	})
}

// ---- exclusive holds ----

const exclColumns = `x.id, x.owner, x.project, x.node, x.site, x.start_ns, x.end_ns, x.state,
	x.version, x.created_ns, x.cancelled_ns, x.cancelled_by, x.why`

// exclArgs encodes x in the order of the exclusives table's columns, from
// owner on (id is first in inserts and last in updates).
func exclArgs(x reserve.Exclusive) ([]any, error) {
	ver, err := encUint("version", x.Version)
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		f string
		t time.Time
	}{{"start", x.Start}, {"end", x.End}, {"created_at", x.CreatedAt}, {"cancelled_at", x.CancelledAt}} {
		if err := checkTime(c.f, c.t); err != nil {
			return nil, err
		}
	}
	for _, c := range []struct{ f, v string }{{"owner", x.Owner}, {"project", x.Project}, {"node", x.Node},
		{"site", x.Site}, {"state", string(x.State)}, {"cancelled_by", x.CancelledBy}, {"why", x.Why}} {
		if err := checkText(c.f, c.v); err != nil {
			return nil, err
		}
	}
	// Nodes are read back in sorted order: anything else would not come
	// back as it was given.
	for i, n := range x.Nodes {
		if err := checkText("node name", n); err != nil {
			return nil, err
		}
		switch {
		case n == "":
			return nil, fmt.Errorf("%w: node %d of those covered has no name", reserve.ErrInvalid, i+1)
		case i > 0 && n <= x.Nodes[i-1]:
			return nil, fmt.Errorf("%w: the nodes covered are not a sorted set (%q after %q)", reserve.ErrInvalid, n, x.Nodes[i-1])
		}
	}
	return []any{x.Owner, x.Project, x.Node, x.Site, encTime(x.Start), encTime(x.End), string(x.State),
		ver, encTime(x.CreatedAt), encTime(x.CancelledAt), x.CancelledBy, x.Why}, nil
}

func scanExcl(rs rows) (reserve.Exclusive, error) {
	var (
		x                                     reserve.Exclusive
		start, end, ver, created, cancelledAt int64
		state                                 string
	)
	if err := rs.Scan(&x.ID, &x.Owner, &x.Project, &x.Node, &x.Site, &start, &end, &state,
		&ver, &created, &cancelledAt, &x.CancelledBy, &x.Why); err != nil {
		return x, err
	}
	x.Start, x.End, x.State, x.Version = decTime(start), decTime(end), reserve.State(state), uint64(ver)
	x.CreatedAt, x.CancelledAt = decTime(created), decTime(cancelledAt)
	return x, nil
}

func (s *sqlStore) CreateExclusive(ctx context.Context, x reserve.Exclusive) error {
	if x.ID == "" {
		return fmt.Errorf("create exclusive hold: %w: no id", reserve.ErrInvalid)
	}
	if err := checkText("id", x.ID); err != nil {
		return fmt.Errorf("create exclusive hold: %w", err)
	}
	args, err := exclArgs(x)
	if err != nil {
		return fmt.Errorf("create exclusive hold %s: %w", x.ID, err)
	}
	return s.write(ctx, func(s *sqlStore) error {
		if err := s.insertNew(ctx, "exclusive hold "+x.ID, `INSERT INTO exclusives (id, owner, project, node, site, start_ns, end_ns,
			state, version, created_ns, cancelled_ns, cancelled_by, why)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append([]any{x.ID}, args...)...); err != nil {
			return err
		}
		if err := s.putExclNodes(ctx, x); err != nil {
			return fmt.Errorf("create exclusive hold %s: %w", x.ID, err)
		}
		return nil
	})
}

func (s *sqlStore) putExclNodes(ctx context.Context, x reserve.Exclusive) error {
	if _, err := s.q.exec(ctx, `DELETE FROM exclusive_nodes WHERE exclusive_id = ?`, x.ID); err != nil {
		return fmt.Errorf("clear nodes: %w", err)
	}
	for _, n := range x.Nodes {
		if _, err := s.q.exec(ctx, `INSERT INTO exclusive_nodes (exclusive_id, node) VALUES (?, ?)`, x.ID, n); err != nil {
			return fmt.Errorf("store node %s: %w", n, err)
		}
	}
	return nil
}

func (s *sqlStore) GetExclusive(ctx context.Context, id string) (reserve.Exclusive, error) {
	list, err := s.listExcl(ctx, `x.id = ?`, []any{id})
	if err != nil {
		return reserve.Exclusive{}, fmt.Errorf("get exclusive hold %s: %w", id, err)
	}
	if len(list) == 0 {
		return reserve.Exclusive{}, fmt.Errorf("exclusive hold %s: %w", id, reserve.ErrNotFound)
	}
	return list[0], nil
}

func (s *sqlStore) UpdateExclusive(ctx context.Context, x reserve.Exclusive, expected uint64) error {
	if x.Version <= expected {
		return fmt.Errorf("update exclusive hold %s: %w: new version %d is not after %d", x.ID, reserve.ErrInvalid, x.Version, expected)
	}
	args, err := exclArgs(x)
	if err != nil {
		return fmt.Errorf("update exclusive hold %s: %w", x.ID, err)
	}
	exp, err := encUint("version", expected)
	if err != nil {
		return fmt.Errorf("update exclusive hold %s: %w", x.ID, err)
	}
	return s.write(ctx, func(s *sqlStore) error {
		// The owner (args[0]) is fixed at creation.
		n, err := s.q.exec(ctx, `UPDATE exclusives SET project = ?, node = ?, site = ?, start_ns = ?, end_ns = ?,
			state = ?, version = ?, created_ns = ?, cancelled_ns = ?, cancelled_by = ?, why = ?
			WHERE id = ? AND version = ?`, append(args[1:len(args):len(args)], x.ID, exp)...)
		if err != nil {
			return fmt.Errorf("update exclusive hold %s: %w", x.ID, err)
		}
		if n == 0 {
			var cur int64
			found, err := s.queryRow(ctx, `SELECT version FROM exclusives WHERE id = ?`, []any{x.ID}, &cur)
			switch {
			case err != nil:
				return fmt.Errorf("update exclusive hold %s: %w", x.ID, err)
			case !found:
				return fmt.Errorf("update exclusive hold %s: %w", x.ID, reserve.ErrNotFound)
			}
			return &reserve.StaleVersionError{ID: x.ID, Current: uint64(cur), Given: expected}
		}
		if err := s.putExclNodes(ctx, x); err != nil {
			return fmt.Errorf("update exclusive hold %s: %w", x.ID, err)
		}
		return nil
	})
}

func (s *sqlStore) ListExclusives(ctx context.Context, f Filter) ([]reserve.Exclusive, error) {
	cond, args := filterCond(f, "x", `SELECT exclusive_id FROM exclusive_nodes WHERE node = ?`)
	list, err := s.listExcl(ctx, cond, args)
	if err != nil {
		return nil, fmt.Errorf("list exclusive holds: %w", err)
	}
	return list, nil
}

// listExcl returns the holds matching cond (on alias x) with their nodes:
// two queries, however many holds match.
func (s *sqlStore) listExcl(ctx context.Context, cond string, args []any) ([]reserve.Exclusive, error) {
	rs, err := s.q.query(ctx, `SELECT `+exclColumns+` FROM exclusives x WHERE `+cond+` ORDER BY x.start_ns, x.id`, args...)
	if err != nil {
		return nil, err
	}
	var out []reserve.Exclusive
	index := map[string]int{}
	for rs.Next() {
		x, err := scanExcl(rs)
		if err != nil {
			rs.Close()
			return nil, err
		}
		index[x.ID] = len(out)
		out = append(out, x)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	ns, err := s.q.query(ctx, `SELECT n.exclusive_id, n.node FROM exclusive_nodes n
		JOIN exclusives x ON x.id = n.exclusive_id WHERE `+cond, args...)
	if err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	defer ns.Close()
	for ns.Next() {
		var id, node string
		if err := ns.Scan(&id, &node); err != nil {
			return nil, fmt.Errorf("read nodes: %w", err)
		}
		if i, ok := index[id]; ok {
			out[i].Nodes = append(out[i].Nodes, node)
		}
	}
	if err := ns.Err(); err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	// Sorted here, not by ORDER BY: PostgreSQL would sort by the
	// database's collation, which need not be Go's byte order.
	for i := range out {
		slices.Sort(out[i].Nodes)
	}
	return out, nil
}
