package rules

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// State is where a rule stands.
type State string

// The states of a rule.
const (
	StateOK      State = "ok"
	StatePending State = "pending" // the condition holds, not yet for long enough
	StateFiring  State = "firing"
)

// Status is what Step carries from one evaluation of a rule to the next.
// The zero Status is a rule never evaluated, in state ok.
type Status struct {
	State State
	// ActiveSince is when the condition began to hold without a break;
	// zero in state ok.
	ActiveSince time.Time
	// Changed is when the state last changed; zero before the first
	// transition.
	Changed time.Time
	// Value is the last value seen, when HasValue.
	Value    float64
	HasValue bool
	// Missing counts evaluations in a row that had no value. They keep
	// the state: a collector that misses a beat neither fires nor
	// resolves a rule.
	Missing int
}

// Transition is one change of a rule's state, kept with its reason.
type Transition struct {
	Rule      string
	From, To  State
	At        time.Time
	Value     float64
	Threshold float64
	// Resolved marks firing → ok, the transition actions announce as a
	// recovery.
	Resolved bool
	// Reason says why in words, such as
	// "link_utilisation{link=wan} avg over 30s = 0.97 > 0.9 for 30s".
	Reason string
}

// Step evaluates rule once at now, given its previous status and the
// expression's value (ok is false when there is no value). It returns the
// new status and the transition made, or nil when the state stays. A NaN
// value counts as missing.
func Step(rule Rule, prev Status, value float64, ok bool, now time.Time) (Status, *Transition) {
	next := prev
	if next.State == "" {
		next.State = StateOK
	}
	if !ok || math.IsNaN(value) {
		next.Missing++
		return next, nil
	}
	next.Missing = 0
	next.Value, next.HasValue = value, true

	holds := rule.Op.Holds(value, rule.Threshold)
	var to State
	switch {
	case holds && next.State == StateOK:
		next.ActiveSince = now
		to = StatePending
		if rule.For <= 0 {
			to = StateFiring
		}
	case holds && next.State == StatePending:
		if now.Sub(next.ActiveSince) >= rule.For {
			to = StateFiring
		}
	case !holds && next.State != StateOK:
		to = StateOK
	}
	if to == "" {
		return next, nil
	}
	t := &Transition{
		Rule:      rule.Name,
		From:      next.State,
		To:        to,
		At:        now,
		Value:     value,
		Threshold: rule.Threshold,
		Resolved:  next.State == StateFiring && to == StateOK,
	}
	t.Reason = reason(rule, t, now.Sub(next.ActiveSince))
	next.State, next.Changed = to, now
	if to == StateOK {
		next.ActiveSince = time.Time{}
	}
	return next, t
}

// reason words a transition; held is how long the condition has held
// (before this evaluation, for a transition to ok).
func reason(rule Rule, t *Transition, held time.Duration) string {
	// Evaluations fall a little off whole seconds; a reason reads better
	// at a tenth of a second.
	held = held.Round(100 * time.Millisecond)
	head := fmt.Sprintf("%s = %s", rule.Expr, formatValue(t.Value, rule.Unit))
	cond := fmt.Sprintf("%s %s", rule.Op, formatValue(rule.Threshold, rule.Unit))
	switch {
	case t.To == StatePending:
		return fmt.Sprintf("%s %s, pending until it holds for %v", head, cond, rule.For)
	case t.To == StateFiring && t.From == StateOK:
		return fmt.Sprintf("%s %s", head, cond)
	case t.To == StateFiring:
		return fmt.Sprintf("%s %s for %v", head, cond, held)
	case t.Resolved:
		return fmt.Sprintf("%s, no longer %s after %v: resolved", head, cond, held)
	default:
		return fmt.Sprintf("%s, no longer %s after %v, before %v", head, cond, held, rule.For)
	}
}

// formatValue prints v in the unit the threshold was written in, so that
// a value and its threshold read alike ("97% > 90%", "612M > 500M").
func formatValue(v float64, unit string) string {
	if unit == "%" {
		return strconv.FormatFloat(round(v*100), 'g', -1, 64) + "%"
	}
	if m, ok := siPrefix[lower(unit)]; ok && unit != "" {
		return strconv.FormatFloat(round(v/m), 'g', -1, 64) + unit
	}
	return strconv.FormatFloat(round(v), 'g', -1, 64)
}

// round keeps four significant digits, enough for a reason and free of
// binary noise such as 0.30000000000000004.
func round(v float64) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	if err != nil {
		return v
	}
	return r
}

func lower(s string) string {
	if len(s) == 1 && s[0] >= 'A' && s[0] <= 'Z' {
		return string(s[0] + 'a' - 'A')
	}
	return s
}
