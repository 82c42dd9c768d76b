package alert

import (
	"context"
	"fmt"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
)

// Store is what the history needs of the controller's store: the alert
// records, with the store's contract (store.Store's methods of the same
// names, which it has as they are: the records are monitor's).
type Store interface {
	AppendAlert(ctx context.Context, r monitor.AlertRecord) (int64, error)
	SetAlertActions(ctx context.Context, id int64, actions []monitor.AlertAction) error
	ListAlerts(ctx context.Context, f monitor.AlertFilter) ([]monitor.AlertRecord, error)
}

// History keeps every state change of every rule in the controller's
// store (store.Store, SQLite or PostgreSQL), so it survives a restart and
// a controller on PostgreSQL keeps none of it on its own disk.
type History struct {
	st Store
}

// NewHistory returns the history kept in st, which stays the caller's to
// close.
func NewHistory(st Store) *History { return &History{st: st} }

// Add keeps one record and returns its id.
func (h *History) Add(ctx context.Context, r Record) (int64, error) {
	return h.st.AppendAlert(ctx, monitor.AlertRecord{At: r.At, Rule: r.Rule, Severity: r.Severity, Series: r.Series,
		Labels: r.Labels.Map(), From: r.From, To: r.To, Resolved: r.Resolved, Value: r.Value, Threshold: r.Threshold,
		Reason: r.Reason, Actions: storeActions(r.Actions)})
}

// SetActions records what a record's actions did.
func (h *History) SetActions(ctx context.Context, id int64, rs []ActionResult) error {
	return h.st.SetAlertActions(ctx, id, storeActions(rs))
}

func storeActions(rs []ActionResult) []monitor.AlertAction {
	if rs == nil {
		return nil
	}
	out := make([]monitor.AlertAction, len(rs))
	for i, a := range rs {
		out[i] = monitor.AlertAction(a)
	}
	return out
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
	limit := f.Limit
	if limit <= 0 {
		limit = 500
	}
	limit = min(limit, 5000)
	recs, err := h.st.ListAlerts(ctx, monitor.AlertFilter{Since: f.Since, Until: f.Until, Rule: f.Rule, Any: f.Any, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("read alert history: %w", err)
	}
	out := make([]Record, 0, len(recs))
	for _, s := range recs {
		r := Record{ID: s.ID, At: s.At, Rule: s.Rule, Severity: s.Severity, Series: s.Series, Labels: monitor.FromMap(s.Labels),
			From: s.From, To: s.To, Resolved: s.Resolved, Value: s.Value, Threshold: s.Threshold, Reason: s.Reason}
		for _, a := range s.Actions {
			r.Actions = append(r.Actions, ActionResult(a))
		}
		out = append(out, r)
	}
	return out, nil
}
