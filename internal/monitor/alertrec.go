package monitor

import "time"

// AlertRecord is one state change of one series under one alert rule, as
// the alert history (package monitor/alert) keeps it in the controller's
// store: its labels a plain map, so the store needs nothing of the model.
type AlertRecord struct {
	ID        int64 // assigned by the store
	At        time.Time
	Rule      string
	Severity  string
	Series    string
	Labels    map[string]string
	From, To  string
	Resolved  bool
	Value     float64 // NaN when there was none
	Threshold float64
	Reason    string
	Actions   []AlertAction
}

// AlertAction is what one of a record's actions did.
type AlertAction struct {
	Kind   string `json:"kind"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// AlertFilter selects alert records; zero fields match everything.
type AlertFilter struct {
	// Since and Until keep records with Since <= At <= Until.
	Since, Until time.Time
	Rule         string
	// Any, when not nil, keeps records with at least one of the labels
	// given (label name → the values it may have); a non-nil Any naming
	// no value matches nothing.
	Any map[string][]string
	// Limit, when positive, keeps the first Limit matches.
	Limit int
}
