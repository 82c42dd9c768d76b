package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/sqlitefile"
	"github.com/lightpath/lightpath/internal/transfer"
)

// MetricsFileImported is the setting that says the first wave's tables of
// the metrics file were copied into this store (ImportMetricsFile): its
// value is a JSON object with the file, the time and the counts.
const MetricsFileImported = "import.metrics-file"

// MetricsFileImport says what ImportMetricsFile did.
type MetricsFileImport struct {
	// Already is true when the store had imported a metrics file before:
	// nothing was read or copied.
	Already bool
	// Found is true when the file held the first wave's tables.
	Found bool
	// Transfers and Alerts count the records copied; Present those
	// already in the store (same ID), left as they were; Skipped those
	// that could not be read or stored (a transfer's document that does
	// not decode, text the store refuses), each named in SkippedWhy.
	Transfers, Alerts, Present, Skipped int
	SkippedWhy                          []string
}

// ImportMetricsFile copies the transfers and the alert history that the
// first wave kept in the SQLite metrics file at path (tables transfers and
// alert_history, beside the monitoring repository's) into s, once: the
// copy and the setting MetricsFileImported that marks it done are one
// transaction, so a start that fails half-way copies nothing, and a second
// run (the setting found) copies nothing again. The old tables are left in
// the file as they are, no longer read or written, so an older lightpath
// started on the same file still finds its records. A missing file, or one
// without those tables, is nothing to import and is not marked.
//
// Alert records get new IDs from the store, in the order of their old ones
// (so newest-first listing keeps its order); transfers keep their IDs.
func ImportMetricsFile(ctx context.Context, s Store, path string) (MetricsFileImport, error) {
	var out MetricsFileImport
	if _, err := s.GetSetting(ctx, MetricsFileImported); err == nil {
		out.Already = true
		return out, nil
	} else if !errors.Is(err, reserve.ErrNotFound) {
		return out, fmt.Errorf("import the metrics file: %w", err)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return out, nil
	} else if err != nil {
		return out, fmt.Errorf("import the metrics file: %w", err)
	}
	old, err := readMetricsFile(ctx, path)
	if err != nil {
		return out, fmt.Errorf("import the metrics file %s: %w", path, err)
	}
	if !old.found {
		return out, nil
	}
	out.Found = true
	err = s.Tx(ctx, func(tx Store) error {
		out.Transfers, out.Alerts, out.Present, out.Skipped, out.SkippedWhy = 0, 0, 0, len(old.skipped), old.skipped
		if _, err := tx.GetSetting(ctx, MetricsFileImported); err == nil {
			out.Already = true // another controller did it meanwhile
			return nil
		}
		for _, t := range old.transfers {
			err := tx.CreateTransfer(ctx, t)
			switch {
			case errors.Is(err, reserve.ErrConflict):
				out.Present++
			case errors.Is(err, reserve.ErrInvalid):
				out.Skipped++
				out.SkippedWhy = append(out.SkippedWhy, err.Error())
			case err != nil:
				return err
			default:
				out.Transfers++
			}
		}
		for _, r := range old.alerts {
			_, err := tx.AppendAlert(ctx, r)
			switch {
			case errors.Is(err, reserve.ErrInvalid):
				out.Skipped++
				out.SkippedWhy = append(out.SkippedWhy, fmt.Sprintf("alert record %d: %v", r.ID, err))
			case err != nil:
				return err
			default:
				out.Alerts++
			}
		}
		mark, _ := json.Marshal(map[string]any{"file": path, "at": time.Now().UTC(), "transfers": out.Transfers,
			"alerts": out.Alerts, "present": out.Present, "skipped": out.Skipped})
		return tx.PutSetting(ctx, MetricsFileImported, string(mark))
	})
	if err != nil {
		return MetricsFileImport{}, fmt.Errorf("import the metrics file %s: %w", path, err)
	}
	return out, nil
}

// firstWave is what the metrics file held.
type firstWave struct {
	found     bool
	transfers []transfer.Transfer
	alerts    []AlertRecord
	skipped   []string
}

// readMetricsFile reads the first wave's tables as its code wrote them:
// transfers (id, owner, started_ms, state, doc: the JSON of
// transfer.Transfer) and alert_history (id, at_ms, rule, severity,
// series, labels JSON, from_state, to_state, resolved, value (NULL for
// none), threshold, reason, actions JSON).
func readMetricsFile(ctx context.Context, path string) (firstWave, error) {
	var w firstWave
	db, err := sqlitefile.Open(ctx, path)
	if err != nil {
		return w, err
	}
	defer db.Close()
	tables := map[string]bool{}
	rs, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('transfers', 'alert_history')`)
	if err != nil {
		return w, fmt.Errorf("list tables: %w", err)
	}
	for rs.Next() {
		var n string
		if err := rs.Scan(&n); err != nil {
			rs.Close()
			return w, fmt.Errorf("list tables: %w", err)
		}
		tables[n] = true
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return w, fmt.Errorf("list tables: %w", err)
	}
	w.found = len(tables) > 0
	if tables["transfers"] {
		if err := readOldTransfers(ctx, db, &w); err != nil {
			return w, fmt.Errorf("read transfers: %w", err)
		}
	}
	if tables["alert_history"] {
		if err := readOldAlerts(ctx, db, &w); err != nil {
			return w, fmt.Errorf("read alert_history: %w", err)
		}
	}
	return w, nil
}

func readOldTransfers(ctx context.Context, db *sql.DB, w *firstWave) error {
	rs, err := db.QueryContext(ctx, `SELECT id, owner, doc FROM transfers ORDER BY started_ms, id`)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var id, owner, doc string
		if err := rs.Scan(&id, &owner, &doc); err != nil {
			return err
		}
		var t transfer.Transfer
		if err := json.Unmarshal([]byte(doc), &t); err != nil {
			w.skipped = append(w.skipped, fmt.Sprintf("transfer %s: its document does not decode: %v", id, err))
			continue
		}
		// The columns are what the first wave selected by; they win.
		t.ID, t.Owner = id, owner
		w.transfers = append(w.transfers, t)
	}
	return rs.Err()
}

func readOldAlerts(ctx context.Context, db *sql.DB, w *firstWave) error {
	rs, err := db.QueryContext(ctx, `SELECT id, at_ms, rule, severity, series, labels, from_state, to_state, resolved,
		value, threshold, reason, actions FROM alert_history ORDER BY id`)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var (
			r            AlertRecord
			at           int64
			labels, acts string
			value        sql.NullFloat64
		)
		if err := rs.Scan(&r.ID, &at, &r.Rule, &r.Severity, &r.Series, &labels, &r.From, &r.To, &r.Resolved,
			&value, &r.Threshold, &r.Reason, &acts); err != nil {
			return err
		}
		r.At = time.UnixMilli(at).UTC()
		r.Value = math.NaN()
		if value.Valid {
			r.Value = value.Float64
		}
		if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
			w.skipped = append(w.skipped, fmt.Sprintf("alert record %d: its labels do not decode: %v", r.ID, err))
			continue
		}
		if err := json.Unmarshal([]byte(acts), &r.Actions); err != nil {
			w.skipped = append(w.skipped, fmt.Sprintf("alert record %d: its actions do not decode: %v", r.ID, err))
			continue
		}
		w.alerts = append(w.alerts, r)
	}
	return rs.Err()
}
