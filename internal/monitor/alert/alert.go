// Package alert runs the rules of a rules file against the repository:
// every interval it reads each rule's series over its window, steps the
// state of each matching series (ok, pending, firing) with package rules,
// keeps every state change with its reason in a history, and runs the
// rule's actions when a series starts or stops firing: log, webhook,
// command, and reroute (move the reservations crossing the series' link
// to another admissible path). Actions run apart from the evaluation and
// from one another, each bounded by its timeout, so a hook that hangs
// holds up nothing else.
//
// The rules file is re-read when it changes; a file that does not parse
// leaves the rules in force and its error (naming the line) in Status.
package alert

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/rules"
)

// Series is one series' samples as the evaluator reads them.
type Series struct {
	Labels monitor.Labels
	T      []int64 // milliseconds since the epoch
	V      []float64
}

// Source reads the samples of the series named name whose labels include
// match, within [start, end].
type Source func(ctx context.Context, name string, match map[string]string, start, end time.Time) ([]Series, error)

// Rerouter moves the reservations crossing links (from the node from, when
// given) to other paths, for rule because of why. It returns one line per
// reservation saying what it did.
type Rerouter func(ctx context.Context, rule string, links []string, from, why string) ([]string, error)

// Options configure an Evaluator.
type Options struct {
	Source   Source
	History  *History
	Reroute  Rerouter // nil: reroute actions fail with a reason
	Interval time.Duration
	Log      *slog.Logger
	Now      func() time.Time
	// Client sends webhooks; nil uses a default client (each request
	// bounded by its action's timeout anyway).
	Client HTTPDoer
}

// DefaultInterval is how often rules are evaluated by default.
const DefaultInterval = 5 * time.Second

// Evaluator evaluates a rules file.
type Evaluator struct {
	o Options

	mu      sync.Mutex
	file    *rules.File
	path    string
	stamp   string // size and mtime of the file last read
	loadErr error
	loaded  time.Time
	inst    map[string]*instance     // rule + "\x00" + series key
	chain   map[string]chan struct{} // per instance: done when its last actions are
	actions sync.WaitGroup
}

type instance struct {
	rule   string
	labels monitor.Labels
	st     rules.Status
}

// New returns an evaluator with no rules.
func New(o Options) *Evaluator {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Client == nil {
		o.Client = defaultClient
	}
	return &Evaluator{o: o, file: &rules.File{}, inst: map[string]*instance{}, chain: map[string]chan struct{}{}}
}

// Load reads the rules file at path and puts it in force. On error the
// rules in force stay, and the error is kept for Status.
func (e *Evaluator) Load(path string) error {
	stamp := fileStamp(path)
	f, err := rules.Load(path)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.path, e.stamp = path, stamp
	if err != nil {
		e.loadErr = err
		e.o.Log.Error("rules file refused; the rules in force stay", "file", path, "err", err)
		return err
	}
	e.set(f)
	return nil
}

// SetRules puts f in force (nil: no rules).
func (e *Evaluator) SetRules(f *rules.File) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.set(f)
}

func (e *Evaluator) set(f *rules.File) {
	if f == nil {
		f = &rules.File{}
	}
	e.file, e.loadErr, e.loaded = f, nil, e.o.Now()
	// Series of rules that are gone lose their state.
	names := map[string]bool{}
	for _, r := range f.Rules {
		names[r.Name] = true
	}
	for k, in := range e.inst {
		if !names[in.rule] {
			delete(e.inst, k)
		}
	}
	e.o.Log.Info("rules in force", "file", f.Name, "rules", len(f.Rules))
}

func fileStamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "missing"
	}
	return fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
}

// Run evaluates every interval until ctx ends, re-reading the rules file
// when it changes, then waits for the actions under way.
func (e *Evaluator) Run(ctx context.Context) {
	t := time.NewTicker(e.o.Interval)
	defer t.Stop()
	for {
		e.mu.Lock()
		path, stamp := e.path, e.stamp
		e.mu.Unlock()
		if path != "" && fileStamp(path) != stamp {
			_ = e.Load(path)
		}
		e.Eval(ctx)
		select {
		case <-ctx.Done():
			e.actions.Wait()
			return
		case <-t.C:
		}
	}
}

// Wait waits for the actions under way.
func (e *Evaluator) Wait() { e.actions.Wait() }

// Eval evaluates every rule once and returns the state changes it made;
// their actions are started, not waited for.
func (e *Evaluator) Eval(ctx context.Context) []Record {
	e.mu.Lock()
	f := e.file
	e.mu.Unlock()
	now := e.o.Now()
	var out []Record
	for _, r := range f.Rules {
		series, err := e.o.Source(ctx, r.Expr.Series, r.Expr.Labels, now.Add(-r.Expr.Window), now)
		if err != nil {
			e.o.Log.Warn("rule not evaluated", "rule", r.Name, "err", err)
			continue
		}
		seen := map[string]bool{}
		for _, s := range series {
			key := r.Name + "\x00" + monitor.Key(r.Expr.Series, s.Labels)
			seen[key] = true
			samples := make([]rules.Sample, len(s.T))
			for i := range s.T {
				samples[i] = rules.Sample{T: time.UnixMilli(s.T[i]), V: s.V[i]}
			}
			v, ok := rules.Window(r.Expr.Fn, samples, now, r.Expr.Window)
			if rec := e.step(r, key, s.Labels, v, ok, now); rec != nil {
				out = append(out, *rec)
			}
		}
		// Series that gave nothing this time keep their state.
		e.mu.Lock()
		var quiet []*instance
		for k, in := range e.inst {
			if in.rule == r.Name && !seen[k] {
				quiet = append(quiet, in)
			}
		}
		e.mu.Unlock()
		for _, in := range quiet {
			e.step(r, r.Name+"\x00"+monitor.Key(r.Expr.Series, in.labels), in.labels, 0, false, now)
		}
	}
	for i := range out {
		e.act(ctx, f, &out[i])
	}
	return out
}

func (e *Evaluator) step(r rules.Rule, key string, ls monitor.Labels, v float64, ok bool, now time.Time) *Record {
	e.mu.Lock()
	in := e.inst[key]
	if in == nil {
		in = &instance{rule: r.Name, labels: ls}
		e.inst[key] = in
	}
	next, tr := rules.Step(r, in.st, v, ok, now)
	in.st = next
	e.mu.Unlock()
	if tr == nil {
		return nil
	}
	return &Record{key: key, At: tr.At, Rule: r.Name, Severity: string(r.Severity), Series: r.Expr.Series, Labels: ls,
		From: string(tr.From), To: string(tr.To), Resolved: tr.Resolved, Value: tr.Value, Threshold: tr.Threshold, Reason: tr.Reason}
}

// Status is the evaluator's state: the rules in force, each series' state,
// and the error of the last rules file that was refused.
type Status struct {
	File      string           `json:"file,omitempty"`
	LoadedAt  time.Time        `json:"loaded_at,omitzero"`
	LoadError string           `json:"load_error,omitempty"`
	Rules     []RuleStatus     `json:"rules"`
	Instances []InstanceStatus `json:"instances"`
}

// RuleStatus describes one rule in force.
type RuleStatus struct {
	Name      string   `json:"name"`
	Expr      string   `json:"expr"`
	Op        string   `json:"op"`
	Threshold float64  `json:"threshold"`
	For       string   `json:"for"`
	Severity  string   `json:"severity"`
	Actions   []string `json:"actions"`
}

// InstanceStatus is one series' state under one rule.
type InstanceStatus struct {
	Rule     string            `json:"rule"`
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	Since    time.Time         `json:"since,omitzero"`
	Value    *float64          `json:"value,omitempty"`
	Severity string            `json:"severity"`
}

// Status reports the rules in force and every series' state.
func (e *Evaluator) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Status{File: e.file.Name, LoadedAt: e.loaded, Rules: []RuleStatus{}, Instances: []InstanceStatus{}}
	if e.path != "" {
		st.File = e.path
	}
	if e.loadErr != nil {
		st.LoadError = e.loadErr.Error()
	}
	sev := map[string]string{}
	for _, r := range e.file.Rules {
		rs := RuleStatus{Name: r.Name, Expr: r.Expr.String(), Op: string(r.Op), Threshold: r.Threshold, For: r.For.String(), Severity: string(r.Severity)}
		for _, a := range r.Actions {
			rs.Actions = append(rs.Actions, string(a.Kind))
		}
		st.Rules = append(st.Rules, rs)
		sev[r.Name] = string(r.Severity)
	}
	for _, in := range e.inst {
		is := InstanceStatus{Rule: in.rule, Labels: in.labels.Map(), State: string(in.st.State), Severity: sev[in.rule]}
		if is.State == "" {
			is.State = string(rules.StateOK)
		}
		if in.st.HasValue && in.st.Value == in.st.Value {
			v := in.st.Value
			is.Value = &v
		}
		if in.st.State != rules.StateOK {
			is.Since = in.st.Changed
		}
		st.Instances = append(st.Instances, is)
	}
	slices.SortFunc(st.Instances, func(a, b InstanceStatus) int {
		if a.Rule != b.Rule {
			return cmp.Compare(a.Rule, b.Rule)
		}
		return cmp.Compare(fmt.Sprint(a.Labels), fmt.Sprint(b.Labels))
	})
	return st
}
