package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/rules"
)

// Record is one state change of one series under one rule, kept in the
// history with its reason and, once they are done, what its actions did.
type Record struct {
	ID        int64          `json:"id"`
	At        time.Time      `json:"at"`
	Rule      string         `json:"rule"`
	Severity  string         `json:"severity"`
	Series    string         `json:"series"`
	Labels    monitor.Labels `json:"-"`
	From      string         `json:"from"`
	To        string         `json:"to"`
	Resolved  bool           `json:"resolved,omitempty"`
	Value     float64        `json:"value"`
	Threshold float64        `json:"threshold"`
	Reason    string         `json:"reason"`
	Actions   []ActionResult `json:"actions,omitempty"`

	key string // the rule and series: its actions run in order
}

// MarshalJSON adds the labels as an object (and a value JSON cannot hold
// as null).
func (r Record) MarshalJSON() ([]byte, error) {
	type plain Record
	var v any = r.Value
	if r.Value != r.Value || r.Value > 1e308 || r.Value < -1e308 {
		v = nil
	}
	return json.Marshal(struct {
		plain
		Labels map[string]string `json:"labels"`
		Value  any               `json:"value"`
	}{plain(r), r.Labels.Map(), v})
}

// ActionResult is what one action did.
type ActionResult struct {
	Kind   string `json:"kind"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// HTTPDoer sends a webhook.
type HTTPDoer interface {
	Do(*http.Request) (*http.Response, error)
}

var defaultClient = &http.Client{}

// Document is the JSON a webhook receives (POST) and a command reads on
// its standard input.
type Document struct {
	Rule      string            `json:"rule"`
	Severity  string            `json:"severity"`
	State     string            `json:"state"`
	From      string            `json:"from"`
	Resolved  bool              `json:"resolved"`
	Series    string            `json:"series"`
	Labels    map[string]string `json:"labels"`
	Value     *float64          `json:"value"`
	Threshold float64           `json:"threshold"`
	Reason    string            `json:"reason"`
	At        time.Time         `json:"at"`
}

func document(r *Record) Document {
	d := Document{Rule: r.Rule, Severity: r.Severity, State: r.To, From: r.From, Resolved: r.Resolved, Series: r.Series,
		Labels: r.Labels.Map(), Threshold: r.Threshold, Reason: r.Reason, At: r.At}
	if r.Value == r.Value {
		v := r.Value
		d.Value = &v
	}
	return d
}

// act stores a record and starts its rule's actions: when the series
// starts firing, and when it resolves (reroute only on firing).
func (e *Evaluator) act(ctx context.Context, f *rules.File, r *Record) {
	if e.o.History != nil {
		id, err := e.o.History.Add(ctx, *r)
		if err != nil {
			e.o.Log.Error("keep an alert state change", "rule", r.Rule, "err", err)
		}
		r.ID = id
	}
	var rule *rules.Rule
	for i := range f.Rules {
		if f.Rules[i].Name == r.Rule {
			rule = &f.Rules[i]
		}
	}
	if rule == nil || (r.To != string(rules.StateFiring) && !r.Resolved) {
		return
	}
	rec := *r
	// The actions of one series' transitions run in the order of the
	// transitions: a receiver never hears "resolved" before "firing".
	e.mu.Lock()
	prev := e.chain[r.key]
	done := make(chan struct{})
	e.chain[r.key] = done
	e.mu.Unlock()
	e.actions.Go(func() {
		defer func() {
			close(done)
			e.mu.Lock()
			if e.chain[rec.key] == done {
				delete(e.chain, rec.key)
			}
			e.mu.Unlock()
		}()
		if prev != nil {
			<-prev
		}
		// Each action on its own, bounded by its timeout: one that hangs
		// does not hold up the others.
		results := make([]ActionResult, len(rule.Actions))
		done := make(chan struct{}, len(rule.Actions))
		for i, a := range rule.Actions {
			go func() {
				defer func() { done <- struct{}{} }()
				results[i] = e.run(context.WithoutCancel(ctx), a, &rec)
			}()
		}
		for range rule.Actions {
			<-done
		}
		if e.o.History != nil && rec.ID != 0 {
			if err := e.o.History.SetActions(context.WithoutCancel(ctx), rec.ID, results); err != nil {
				e.o.Log.Error("keep alert action results", "rule", rec.Rule, "err", err)
			}
		}
	})
}

func (e *Evaluator) run(ctx context.Context, a rules.Action, r *Record) ActionResult {
	res := ActionResult{Kind: string(a.Kind)}
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = rules.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	switch a.Kind {
	case rules.ActionLog:
		lvl := e.o.Log.Warn
		if r.Resolved {
			lvl = e.o.Log.Info
		}
		lvl("alert", "rule", r.Rule, "severity", r.Severity, "state", r.To, "labels", r.Labels.String(), "reason", r.Reason)
		res.Detail = "logged"
	case rules.ActionWebhook:
		res.Detail, err = e.webhook(ctx, a.URL, r)
	case rules.ActionCommand:
		res.Detail, err = command(ctx, a.Argv, r)
	case rules.ActionReroute:
		if r.Resolved {
			res.Detail = "nothing to do on resolve"
			break
		}
		res.Detail, err = e.reroute(ctx, r)
	default:
		err = fmt.Errorf("unknown action %q", a.Kind)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) && err != nil {
		err = fmt.Errorf("timed out after %v", timeout)
	}
	if err != nil {
		res.Detail = err.Error()
		e.o.Log.Warn("alert action failed", "rule", r.Rule, "action", a.Kind, "err", err)
		return res
	}
	res.OK = true
	return res
}

func (e *Evaluator) webhook(ctx context.Context, url string, r *Record) (string, error) {
	body, _ := json.Marshal(document(r))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.o.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return "POST " + url + ": " + resp.Status, nil
}

// command runs argv without a shell, the document on its standard input
// and the essentials in LIGHTPATH_ALERT_* variables.
func command(ctx context.Context, argv []string, r *Record) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	body, _ := json.Marshal(document(r))
	cmd.Stdin = bytes.NewReader(body)
	cmd.Env = append(os.Environ(),
		"LIGHTPATH_ALERT_RULE="+r.Rule,
		"LIGHTPATH_ALERT_STATE="+r.To,
		"LIGHTPATH_ALERT_SEVERITY="+r.Severity,
		"LIGHTPATH_ALERT_LABELS="+r.Labels.String(),
		"LIGHTPATH_ALERT_REASON="+r.Reason)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	tail := strings.TrimSpace(string(out))
	if len(tail) > 200 {
		tail = "..." + tail[len(tail)-200:]
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%s: %v: %s", argv[0], err, tail)
	}
	return strings.TrimSpace(argv[0] + " exited 0 " + tail), nil
}

// reroute moves the reservations crossing the series' link (in its
// direction, when the series says from where).
func (e *Evaluator) reroute(ctx context.Context, r *Record) (string, error) {
	if e.o.Reroute == nil {
		return "", errors.New("this evaluator cannot reroute (no controller)")
	}
	link := r.Labels.Get("link")
	if link == "" {
		return "", fmt.Errorf("the series %s has no link label: nothing to reroute", monitor.Key(r.Series, r.Labels))
	}
	lines, err := e.o.Reroute(ctx, r.Rule, []string{link}, r.Labels.Get("from"), r.Reason)
	if err != nil {
		return "", err
	}
	if len(lines) == 0 {
		return "no reservation in its window crosses " + link, nil
	}
	return strings.Join(lines, "; "), nil
}
