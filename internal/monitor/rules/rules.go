// Package rules is the pure core of Lightpath's alerting rules, in the
// spirit of Prometheus alerting rules: it parses a rules file, computes the
// value of a rule's expression over a window of samples, and steps a rule's
// state (ok, pending, firing) from one evaluation to the next. It reads no
// clock and does no I/O, so the evaluator that fetches series and the
// dispatcher that runs actions stay thin and every decision here is tested
// with plain values.
//
// # The rules file
//
// A rules file is one YAML document:
//
//	rules:
//	  - name: wan-saturated            # required, unique; letters, digits, "_", "-", ".", ":"
//	    expr:
//	      series: link_utilisation     # required; a Prometheus-style metric name
//	      labels: {link: wan}          # optional; every label must match exactly
//	      fn: avg                      # avg, max, min, last or rate; default last
//	      window: 30s                  # required; samples in [now-window, now], at most 7 days
//	    op: ">"                        # >, <, >= or <=; quote it, ">" alone starts a YAML block
//	    threshold: 0.9                 # a number: 0.01, 1% (= 0.01), 500M (= 500e6)
//	    for: 30s                       # optional; how long the condition must hold before firing
//	    severity: warning              # optional; info, warning (default) or critical
//	    actions:                       # optional; default [{log: {}}]
//	      - log: {}
//	      - webhook: {url: "https://ops.example/hook", timeout: 5s}
//	      - command: {argv: [/usr/local/bin/page, oncall], timeout: 10s}
//	      - reroute: {}
//
// Thresholds take an optional sign, a decimal number and either "%"
// (hundredths) or one SI prefix, case-insensitive as in package units:
// k=1e3, M=1e6, G=1e9, T=1e12, P=1e15, E=1e18.
//
// Durations are Go durations ("500ms", "30s", "5m"). A webhook needs an
// http or https URL with a host; a command needs a non-empty argv, which is
// run without a shell. Action timeouts default to 10s and may not exceed
// one minute, so a hanging hook cannot hold up the other actions for long.
//
// Anchors, aliases and merge keys (<<) work as in plain YAML, so rules can
// share settings. Unknown keys, duplicate keys and values of the wrong kind
// are errors; every error names FILE:LINE and what was expected, and one
// Parse reports up to 20 of them.
//
// # States
//
// A rule is ok until its condition first holds, then pending; once the
// condition has held for the rule's `for` duration (at once when it is 0) it
// is firing. When the condition stops holding the rule returns to ok; from
// firing that is a resolved transition. An evaluation without a value keeps
// the state and is counted in Status.Missing.
package rules

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// File is a parsed rules file.
type File struct {
	Name  string // as given to Parse, for messages
	Rules []Rule
}

// Rule is one alerting rule.
type Rule struct {
	Name      string
	Line      int // where the rule starts in its file
	Expr      Expr
	Op        Op
	Threshold float64
	// Unit is how the threshold was written ("", "%" or an SI prefix
	// such as "M"); reasons print values the same way.
	Unit     string
	For      time.Duration
	Severity Severity
	Actions  []Action
}

// Expr selects one series and reduces its samples over a window.
type Expr struct {
	Series string
	Labels map[string]string
	Fn     Fn
	Window time.Duration
}

// String renders the expression as reasons show it:
// link_utilisation{link=wan} avg over 30s.
func (e Expr) String() string {
	var b strings.Builder
	b.WriteString(e.Series)
	if len(e.Labels) > 0 {
		keys := make([]string, 0, len(e.Labels))
		for k := range e.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%s", k, e.Labels[k])
		}
		b.WriteByte('}')
	}
	fmt.Fprintf(&b, " %s over %v", e.Fn, e.Window)
	return b.String()
}

// Fn reduces the samples in a window to one value.
type Fn string

// The window functions.
const (
	FnAvg  Fn = "avg"
	FnMax  Fn = "max"
	FnMin  Fn = "min"
	FnLast Fn = "last"
	FnRate Fn = "rate" // per second, for counters
)

var fns = []string{string(FnAvg), string(FnMax), string(FnMin), string(FnLast), string(FnRate)}

// Op compares a value with a threshold.
type Op string

// The comparison operators.
const (
	OpGT Op = ">"
	OpLT Op = "<"
	OpGE Op = ">="
	OpLE Op = "<="
)

var ops = []string{string(OpGT), string(OpLT), string(OpGE), string(OpLE)}

// Holds reports whether v op threshold. NaN never holds.
func (o Op) Holds(v, threshold float64) bool {
	switch o {
	case OpGT:
		return v > threshold
	case OpLT:
		return v < threshold
	case OpGE:
		return v >= threshold
	case OpLE:
		return v <= threshold
	}
	return false
}

// Severity says how urgent a firing rule is.
type Severity string

// The severities.
const (
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityCritical Severity = "critical"
)

var severities = []string{string(SeverityInfo), string(SeverityWarning), string(SeverityCritical)}

// ActionKind says what an action does.
type ActionKind string

// The actions.
const (
	ActionLog     ActionKind = "log"
	ActionWebhook ActionKind = "webhook" // POST of a JSON document to URL
	ActionCommand ActionKind = "command" // run Argv, without a shell
	ActionReroute ActionKind = "reroute" // move affected reservations to an alternate path
)

var actionKinds = []string{string(ActionLog), string(ActionWebhook), string(ActionCommand), string(ActionReroute)}

// Action is one thing to do on a rule's transitions.
type Action struct {
	Kind    ActionKind
	Line    int
	URL     string        // webhook
	Argv    []string      // command
	Timeout time.Duration // webhook and command
}

// Limits of the file format.
const (
	// DefaultTimeout bounds a webhook or command when the file gives none.
	DefaultTimeout = 10 * time.Second
	// MaxTimeout bounds any action, so that one that hangs cannot hold
	// up the others for long.
	MaxTimeout = time.Minute
	// MaxWindow keeps the samples one evaluation reads bounded.
	MaxWindow = 7 * 24 * time.Hour

	maxNameLen = 64
	maxErrors  = 20
)
