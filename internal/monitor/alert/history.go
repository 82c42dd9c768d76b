package alert

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/sqlitefile"
)

// History keeps every state change of every rule, in an SQLite file (by
// default the repository's own, in a table of its own).
type History struct {
	db *sql.DB
}

// OpenHistory opens (or creates) the history in the SQLite file at path.
func OpenHistory(ctx context.Context, path string) (*History, error) {
	db, err := sqlitefile.Open(ctx, path, `CREATE TABLE IF NOT EXISTS alert_history (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		at_ms INTEGER NOT NULL,
		rule TEXT NOT NULL,
		severity TEXT NOT NULL,
		series TEXT NOT NULL,
		labels TEXT NOT NULL,
		from_state TEXT NOT NULL,
		to_state TEXT NOT NULL,
		resolved INTEGER NOT NULL,
		value REAL,
		threshold REAL NOT NULL,
		reason TEXT NOT NULL,
		actions TEXT NOT NULL DEFAULT '[]')`,
		`CREATE INDEX IF NOT EXISTS alert_history_at ON alert_history(at_ms)`)
	if err != nil {
		return nil, fmt.Errorf("open alert history: %w", err)
	}
	return &History{db: db}, nil
}

// Close closes the history.
func (h *History) Close() error { return h.db.Close() }

// Add keeps one record and returns its id.
func (h *History) Add(ctx context.Context, r Record) (int64, error) {
	ls, _ := json.Marshal(r.Labels.Map())
	var v any = r.Value
	if r.Value != r.Value {
		v = nil
	}
	res, err := h.db.ExecContext(ctx, `INSERT INTO alert_history
		(at_ms, rule, severity, series, labels, from_state, to_state, resolved, value, threshold, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.At.UnixMilli(), r.Rule, r.Severity, r.Series, string(ls), r.From, r.To, r.Resolved, v, r.Threshold, r.Reason)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// SetActions records what a record's actions did.
func (h *History) SetActions(ctx context.Context, id int64, rs []ActionResult) error {
	b, _ := json.Marshal(rs)
	_, err := h.db.ExecContext(ctx, `UPDATE alert_history SET actions = ? WHERE id = ?`, string(b), id)
	return err
}

// Filter selects records: within [Since, Until] (zero: open), of Rule
// (""), and whose labels have any of the values in Any (label → values;
// empty: every record).
type Filter struct {
	Since, Until time.Time
	Rule         string
	Any          map[string][]string
	Limit        int // default 500, at most 5,000
}

// List returns the records that match f, newest first.
func (h *History) List(ctx context.Context, f Filter) ([]Record, error) {
	var where []string
	var args []any
	if !f.Since.IsZero() {
		where, args = append(where, "at_ms >= ?"), append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "at_ms <= ?"), append(args, f.Until.UnixMilli())
	}
	if f.Rule != "" {
		where, args = append(where, "rule = ?"), append(args, f.Rule)
	}
	var ors []string
	for label, vals := range f.Any {
		for _, v := range vals {
			ors = append(ors, "json_extract(labels, ?) = ?")
			args = append(args, "$."+jsonKey(label), v)
		}
	}
	if len(ors) > 0 {
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	} else if f.Any != nil {
		return []Record{}, nil // asked for labels, none given: nothing matches
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 500
	}
	limit = min(limit, 5000)
	q := `SELECT id, at_ms, rule, severity, series, labels, from_state, to_state, resolved, value, threshold, reason, actions FROM alert_history`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += fmt.Sprintf(" ORDER BY at_ms DESC, id DESC LIMIT %d", limit)
	rows, err := h.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read alert history: %w", err)
	}
	defer rows.Close()
	out := []Record{}
	for rows.Next() {
		var r Record
		var at int64
		var ls, acts string
		var v sql.NullFloat64
		if err := rows.Scan(&r.ID, &at, &r.Rule, &r.Severity, &r.Series, &ls, &r.From, &r.To, &r.Resolved, &v, &r.Threshold, &r.Reason, &acts); err != nil {
			return nil, fmt.Errorf("read alert history: %w", err)
		}
		r.At = time.UnixMilli(at).UTC()
		var m map[string]string
		_ = json.Unmarshal([]byte(ls), &m)
		r.Labels = monitor.FromMap(m)
		r.Value = v.Float64
		if !v.Valid {
			r.Value = nan()
		}
		_ = json.Unmarshal([]byte(acts), &r.Actions)
		out = append(out, r)
	}
	return out, rows.Err()
}

// jsonKey quotes a label name for a JSON path (label names are
// identifiers, but quoting keeps the path exact).
func jsonKey(s string) string { return `"` + strings.ReplaceAll(s, `"`, ``) + `"` }

func nan() float64 { return math.NaN() }
