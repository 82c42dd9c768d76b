package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/transfer"
)

// ---- transfers ----

// transferDoc checks t and encodes it for the transfers table.
func transferDoc(t transfer.Transfer) (string, error) {
	for _, c := range []struct{ f, v string }{{"id", t.ID}, {"owner", t.Owner}, {"state", t.State}} {
		if c.v == "" {
			return "", fmt.Errorf("%w: no %s", reserve.ErrInvalid, c.f)
		}
		if err := checkText(c.f, c.v); err != nil {
			return "", err
		}
	}
	// The other fields travel inside the JSON document, where a NUL byte
	// is escaped; invalid UTF-8 would come back changed.
	for _, c := range []struct{ f, v string }{{"direction", t.Direction}, {"source", t.Source}, {"destination", t.Destination},
		{"from", t.From}, {"to", t.To}, {"flow", t.Flow}, {"reservation", t.Reservation}, {"bottleneck", t.Bottleneck},
		{"bottleneck_why", t.BottleneckWhy}, {"error", t.Error}} {
		if err := checkUTF8(c.f, c.v); err != nil {
			return "", err
		}
	}
	for p := range t.BytesByPath {
		if err := checkUTF8("path name", p); err != nil {
			return "", err
		}
	}
	for _, c := range []struct {
		f string
		t time.Time
	}{{"started_at", t.StartedAt}, {"updated_at", t.UpdatedAt}, {"ended_at", t.EndedAt}} {
		if err := checkTime(c.f, c.t); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal(t)
	if err != nil {
		// A throughput JSON cannot hold (NaN, infinite).
		return "", fmt.Errorf("%w: %v", reserve.ErrInvalid, err)
	}
	return string(b), nil
}

func checkUTF8(field, v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: the %s is not valid UTF-8", reserve.ErrInvalid, field)
	}
	return nil
}

func (s *sqlStore) CreateTransfer(ctx context.Context, t transfer.Transfer) error {
	doc, err := transferDoc(t)
	if err != nil {
		return fmt.Errorf("create transfer %s: %w", t.ID, err)
	}
	return s.write(ctx, func(s *sqlStore) error {
		return s.insertNew(ctx, "transfer "+t.ID, `INSERT INTO transfers (id, owner, state, started_ns, updated_ns, doc) VALUES (?, ?, ?, ?, ?, ?)`,
			t.ID, t.Owner, t.State, encTime(t.StartedAt), encTime(t.UpdatedAt), doc)
	})
}

func (s *sqlStore) UpdateTransfer(ctx context.Context, t transfer.Transfer) error {
	return s.write(ctx, func(s *sqlStore) error {
		// Owner and StartedAt are the stored ones (fixed at creation).
		old, err := s.GetTransfer(ctx, t.ID)
		if err != nil {
			return fmt.Errorf("update transfer: %w", err)
		}
		t.Owner, t.StartedAt = old.Owner, old.StartedAt
		doc, err := transferDoc(t)
		if err != nil {
			return fmt.Errorf("update transfer %s: %w", t.ID, err)
		}
		if _, err := s.q.exec(ctx, `UPDATE transfers SET state = ?, updated_ns = ?, doc = ? WHERE id = ?`,
			t.State, encTime(t.UpdatedAt), doc, t.ID); err != nil {
			return fmt.Errorf("update transfer %s: %w", t.ID, err)
		}
		return nil
	})
}

func (s *sqlStore) GetTransfer(ctx context.Context, id string) (transfer.Transfer, error) {
	ts, err := s.listTransfers(ctx, `id = ?`, []any{id}, 0)
	return one(ts, err, "transfer "+id)
}

// transferCond is the WHERE clause of f (Limit aside).
func transferCond(f TransferFilter) (string, []any) {
	cond, args := []string{"1 = 1"}, []any{}
	if f.Owner != "" {
		cond, args = append(cond, "owner = ?"), append(args, f.Owner)
	}
	if len(f.States) > 0 {
		c, a := inStrings("state", f.States)
		cond, args = append(cond, c), append(args, a...)
	}
	if !f.Since.IsZero() {
		cond, args = append(cond, "started_ns >= ?"), append(args, encTime(f.Since))
	}
	if !f.UpdatedSince.IsZero() {
		cond, args = append(cond, "updated_ns >= ?"), append(args, encTime(f.UpdatedSince))
	}
	if f.Except != "" {
		cond, args = append(cond, "id <> ?"), append(args, f.Except)
	}
	return strings.Join(cond, " AND "), args
}

func (s *sqlStore) ListTransfers(ctx context.Context, f TransferFilter) ([]transfer.Transfer, error) {
	cond, args := transferCond(f)
	ts, err := s.listTransfers(ctx, cond, args, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list transfers: %w", err)
	}
	return ts, nil
}

func (s *sqlStore) CountTransfers(ctx context.Context, f TransferFilter) (int, error) {
	cond, args := transferCond(f)
	var n int64
	if _, err := s.queryRow(ctx, `SELECT COUNT(*) FROM transfers WHERE `+cond, args, &n); err != nil {
		return 0, fmt.Errorf("count transfers: %w", err)
	}
	return int(n), nil
}

func (s *sqlStore) listTransfers(ctx context.Context, cond string, args []any, limit int) ([]transfer.Transfer, error) {
	q := `SELECT id, started_ns, updated_ns, doc FROM transfers WHERE ` + cond + ` ORDER BY started_ns DESC, id`
	if limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, limit)
	}
	rs, err := s.q.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []transfer.Transfer
	for rs.Next() {
		var (
			id, doc          string
			started, updated int64
		)
		if err := rs.Scan(&id, &started, &updated, &doc); err != nil {
			return nil, err
		}
		var t transfer.Transfer
		if err := json.Unmarshal([]byte(doc), &t); err != nil {
			return nil, fmt.Errorf("transfer %s: stored document: %w", id, err)
		}
		t.ID, t.StartedAt, t.UpdatedAt = id, decTime(started), decTime(updated)
		if !t.EndedAt.IsZero() {
			t.EndedAt = t.EndedAt.UTC()
		}
		out = append(out, t)
	}
	return out, rs.Err()
}

// ---- alert history ----

func alertArgs(r AlertRecord) (labels, actions string, value any, err error) {
	if err := checkTime("at", r.At); err != nil {
		return "", "", nil, err
	}
	for _, c := range []struct{ f, v string }{{"rule", r.Rule}, {"severity", r.Severity}, {"series", r.Series},
		{"from", r.From}, {"to", r.To}, {"reason", r.Reason}} {
		if err := checkText(c.f, c.v); err != nil {
			return "", "", nil, err
		}
	}
	for k, v := range r.Labels {
		if err := checkText("label name", k); err != nil {
			return "", "", nil, err
		}
		if err := checkText("label value", v); err != nil {
			return "", "", nil, err
		}
	}
	if labels, err = encJSON(nonNilMap(r.Labels)); err != nil {
		return "", "", nil, err
	}
	if actions, err = encActions(r.Actions); err != nil {
		return "", "", nil, err
	}
	if !math.IsNaN(r.Value) {
		value = r.Value
	}
	return labels, actions, value, nil
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func encActions(as []AlertAction) (string, error) {
	for _, a := range as {
		if err := checkUTF8("action kind", a.Kind); err != nil {
			return "", err
		}
		if err := checkUTF8("action detail", a.Detail); err != nil {
			return "", err
		}
	}
	if as == nil {
		as = []AlertAction{}
	}
	return encJSON(as)
}

func (s *sqlStore) AppendAlert(ctx context.Context, r AlertRecord) (int64, error) {
	labels, actions, value, err := alertArgs(r)
	if err != nil {
		return 0, fmt.Errorf("append alert record: %w", err)
	}
	var id int64
	err = s.write(ctx, func(s *sqlStore) error {
		found, err := s.queryRow(ctx, `INSERT INTO alerts (at_ns, rule, severity, series, labels, from_state, to_state,
			resolved, value, threshold, reason, actions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			[]any{encTime(r.At), r.Rule, r.Severity, r.Series, labels, r.From, r.To, boolInt(r.Resolved), value, r.Threshold, r.Reason, actions}, &id)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("no id assigned")
		}
		for k, v := range r.Labels {
			if _, err := s.q.exec(ctx, `INSERT INTO alert_labels (alert_id, name, value) VALUES (?, ?, ?)`, id, k, v); err != nil {
				return fmt.Errorf("store label %s: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("append alert record: %w", err)
	}
	return id, nil
}

func (s *sqlStore) SetAlertActions(ctx context.Context, id int64, actions []AlertAction) error {
	doc, err := encActions(actions)
	if err != nil {
		return fmt.Errorf("set the actions of alert record %d: %w", id, err)
	}
	return s.write(ctx, func(s *sqlStore) error {
		n, err := s.q.exec(ctx, `UPDATE alerts SET actions = ? WHERE id = ?`, doc, id)
		if err != nil {
			return fmt.Errorf("set the actions of alert record %d: %w", id, err)
		}
		if n == 0 {
			return fmt.Errorf("alert record %d: %w", id, reserve.ErrNotFound)
		}
		return nil
	})
}

func (s *sqlStore) ListAlerts(ctx context.Context, f AlertFilter) ([]AlertRecord, error) {
	cond, args := []string{"1 = 1"}, []any{}
	if !f.Since.IsZero() {
		cond, args = append(cond, "at_ns >= ?"), append(args, encTime(f.Since))
	}
	if !f.Until.IsZero() {
		cond, args = append(cond, "at_ns <= ?"), append(args, encTime(f.Until))
	}
	if f.Rule != "" {
		cond, args = append(cond, "rule = ?"), append(args, f.Rule)
	}
	if f.Any != nil {
		var ors []string
		for name, vals := range f.Any {
			for _, v := range vals {
				ors, args = append(ors, "(name = ? AND value = ?)"), append(args, name, v)
			}
		}
		if len(ors) == 0 {
			return []AlertRecord{}, nil // labels asked for, none given: nothing matches
		}
		cond = append(cond, "id IN (SELECT alert_id FROM alert_labels WHERE "+strings.Join(ors, " OR ")+")")
	}
	q := `SELECT id, at_ns, rule, severity, series, labels, from_state, to_state, resolved, value, threshold, reason, actions
		FROM alerts WHERE ` + strings.Join(cond, " AND ") + ` ORDER BY at_ns DESC, id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	rs, err := s.q.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list alert records: %w", err)
	}
	defer rs.Close()
	out := []AlertRecord{}
	for rs.Next() {
		var (
			r               AlertRecord
			at, resolved    int64
			labels, actions string
			value           sql.NullFloat64
		)
		if err := rs.Scan(&r.ID, &at, &r.Rule, &r.Severity, &r.Series, &labels, &r.From, &r.To, &resolved, &value, &r.Threshold, &r.Reason, &actions); err != nil {
			return nil, fmt.Errorf("list alert records: %w", err)
		}
		r.At, r.Resolved = decTime(at), resolved != 0
		r.Value = math.NaN()
		if value.Valid {
			r.Value = value.Float64
		}
		if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
			return nil, fmt.Errorf("alert record %d: stored labels: %w", r.ID, err)
		}
		if len(r.Labels) == 0 {
			r.Labels = nil
		}
		if err := json.Unmarshal([]byte(actions), &r.Actions); err != nil {
			return nil, fmt.Errorf("alert record %d: stored actions: %w", r.ID, err)
		}
		if len(r.Actions) == 0 {
			r.Actions = nil
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list alert records: %w", err)
	}
	return out, nil
}
