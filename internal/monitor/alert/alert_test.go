package alert

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/store"
)

// data is a little repository: series by name, appended to by the test.
type data struct {
	mu     sync.Mutex
	series map[string][]*Series
}

func (d *data) add(name string, ls monitor.Labels, t time.Time, v float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.series == nil {
		d.series = map[string][]*Series{}
	}
	for _, s := range d.series[name] {
		if monitor.Key(name, s.Labels) == monitor.Key(name, ls) {
			s.T, s.V = append(s.T, t.UnixMilli()), append(s.V, v)
			return
		}
	}
	d.series[name] = append(d.series[name], &Series{Labels: ls, T: []int64{t.UnixMilli()}, V: []float64{v}})
}

func (d *data) source(_ context.Context, name string, match map[string]string, start, end time.Time) ([]Series, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Series
next:
	for _, s := range d.series[name] {
		for k, v := range match {
			if s.Labels.Get(k) != v {
				continue next
			}
		}
		var c Series
		c.Labels = s.Labels
		for i, t := range s.T {
			if t >= start.UnixMilli() && t <= end.UnixMilli() {
				c.T, c.V = append(c.T, t), append(c.V, s.V[i])
			}
		}
		out = append(out, c)
	}
	return out, nil
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func writeRules(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

const util = "lightpath_link_utilisation_ratio"

func TestFiringResolvingAndActions(t *testing.T) {
	dir := t.TempDir()
	hooks := make(chan Document, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d Document
		if err := json.NewDecoder(r.Body).Decode(&d); err != nil || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook body: %v", err)
		}
		hooks <- d
	}))
	defer srv.Close()
	out := filepath.Join(dir, "command.out")
	script := filepath.Join(dir, "hook.sh")
	writeRules(t, script, "#!/bin/sh\n{ echo \"$LIGHTPATH_ALERT_RULE $LIGHTPATH_ALERT_STATE\"; cat; echo; } >> "+out+"\n")
	if err := os.Chmod(script, 0o700); err != nil {
		t.Fatal(err)
	}
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeRules(t, rulesPath, `rules:
  - name: wan-busy
    expr: {series: `+util+`, labels: {link: wan}, fn: avg, window: 10s}
    op: ">"
    threshold: 90%
    for: 10s
    severity: critical
    actions:
      - log: {}
      - webhook: {url: "`+srv.URL+`", timeout: 2s}
      - command: {argv: [`+script+`], timeout: 2s}
      - reroute: {}
`)
	var mu sync.Mutex
	var rerouted []string
	clk := &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	d := &data{}
	h := NewHistory(openStore(t, dir))
	e := New(Options{Source: d.source, History: h, Now: clk.now,
		Reroute: func(_ context.Context, rule string, links []string, from, why string) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			rerouted = append(rerouted, rule+" "+strings.Join(links, ",")+" from "+from)
			return []string{"r-1 moved to wan2"}, nil
		}})
	if err := e.Load(rulesPath); err != nil {
		t.Fatal(err)
	}
	wan := monitor.L("link", "wan", "from", "ra", "to", "rb")
	other := monitor.L("link", "lan", "from", "a1", "to", "ra")
	var states []string
	step := func(v float64) {
		d.add(util, wan, clk.now(), v)
		d.add(util, other, clk.now(), v) // another link: never matches the rule's labels
		for _, r := range e.Eval(context.Background()) {
			states = append(states, r.From+">"+r.To)
		}
		clk.add(5 * time.Second)
	}
	for _, v := range []float64{0.5, 0.95, 0.97, 0.99, 0.98, 0.97, 0.2, 0.1, 0.1, 0.1} {
		step(v)
	}
	e.Wait()
	// avg over 10s (three samples): .5 .725 .807 | .97 (pending at 15s) .98
	// .98 (firing at 25s, held 10s) | .72 (ok) ...
	if got := strings.Join(states, " "); got != "ok>pending pending>firing firing>ok" {
		t.Fatalf("transitions %q", got)
	}
	// Actions ran on firing and on resolve: two webhooks, the first firing.
	d1, d2 := <-hooks, <-hooks
	if d1.State != "firing" || d1.Rule != "wan-busy" || d1.Labels["link"] != "wan" || d1.Severity != "critical" || !strings.Contains(d1.Reason, "> 0.9") && !strings.Contains(d1.Reason, "> 90%") {
		t.Errorf("firing webhook: %+v", d1)
	}
	if d2.State != "ok" || !d2.Resolved {
		t.Errorf("resolve webhook: %+v", d2)
	}
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), "wan-busy firing") || !strings.Contains(string(b), "wan-busy ok") || !strings.Contains(string(b), `"rule":"wan-busy"`) {
		t.Errorf("command output: %s", b)
	}
	if len(rerouted) != 1 || rerouted[0] != "wan-busy wan from ra" {
		t.Errorf("rerouted %v, want once, on firing", rerouted)
	}
	recs, err := h.List(context.Background(), Filter{Any: map[string][]string{"link": {"wan", "nowhere"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].To != "ok" || recs[2].To != "pending" {
		t.Fatalf("history %+v", recs)
	}
	fired := recs[1]
	if fired.To != "firing" || len(fired.Actions) != 4 {
		t.Fatalf("firing record %+v", fired)
	}
	for _, a := range fired.Actions {
		if !a.OK {
			t.Errorf("action %s failed: %s", a.Kind, a.Detail)
		}
		if a.Kind == "reroute" && a.Detail != "r-1 moved to wan2" {
			t.Errorf("reroute detail %q", a.Detail)
		}
	}
	if none, _ := h.List(context.Background(), Filter{Any: map[string][]string{"link": {"lan"}}}); len(none) != 0 {
		t.Errorf("history of lan: %+v", none)
	}
	st := e.Status()
	if len(st.Rules) != 1 || len(st.Instances) != 1 || st.Instances[0].State != "ok" {
		t.Errorf("status %+v", st)
	}
}

// A webhook that hangs is cut off by its timeout; the other actions of the
// same transition go on and finish first.
func TestHangingWebhook(t *testing.T) {
	dir := t.TempDir()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release) // before Close, which waits for the handler
	mark := filepath.Join(dir, "ran")
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeRules(t, rulesPath, `rules:
  - name: hot
    expr: {series: x, window: 1s}
    op: ">"
    threshold: 1
    actions:
      - webhook: {url: "`+srv.URL+`", timeout: 300ms}
      - command: {argv: [touch, `+mark+`]}
`)
	h := NewHistory(openStore(t, dir))
	clk := &clock{t: time.Unix(1e9, 0)}
	d := &data{}
	e := New(Options{Source: d.source, History: h, Now: clk.now})
	if err := e.Load(rulesPath); err != nil {
		t.Fatal(err)
	}
	d.add("x", nil, clk.now(), 5)
	if got := e.Eval(context.Background()); len(got) != 1 || got[0].To != "firing" {
		t.Fatalf("eval: %+v", got)
	}
	// The command finishes while the webhook still hangs.
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not run while the webhook hung")
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.Wait()
	recs, _ := h.List(context.Background(), Filter{})
	if len(recs) != 1 || len(recs[0].Actions) != 2 {
		t.Fatalf("history %+v", recs)
	}
	wh, cmd := recs[0].Actions[0], recs[0].Actions[1]
	if wh.OK || !strings.Contains(wh.Detail, "timed out after 300ms") {
		t.Errorf("webhook result %+v, want timed out", wh)
	}
	if !cmd.OK {
		t.Errorf("command result %+v", cmd)
	}
}

// A malformed rules file is refused with its line; the rules in force stay
// and keep firing; the evaluator re-reads the file when it changes.
func TestMalformedRulesKeepOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	good := "rules:\n  - name: hot\n    expr: {series: x, window: 1s}\n    op: \">\"\n    threshold: 1\n"
	writeRules(t, path, good)
	clk := &clock{t: time.Unix(1e9, 0)}
	d := &data{}
	e := New(Options{Source: d.source, Now: clk.now, Interval: 20 * time.Millisecond})
	if err := e.Load(path); err != nil {
		t.Fatal(err)
	}
	writeRules(t, path, good+"    bogus: 1\n")
	err := e.Load(path)
	if err == nil || !strings.Contains(err.Error(), "rules.yaml:6") {
		t.Fatalf("malformed file: %v, want an error naming rules.yaml:6", err)
	}
	st := e.Status()
	if len(st.Rules) != 1 || !strings.Contains(st.LoadError, ":6") {
		t.Fatalf("status after a refused file: %+v", st)
	}
	d.add("x", nil, clk.now(), 5)
	if got := e.Eval(context.Background()); len(got) != 1 || got[0].To != "firing" {
		t.Fatalf("the old rule should still fire: %+v", got)
	}
	// Mended on disk: Run picks it up.
	writeRules(t, path, strings.Replace(good, "hot", "warm", 1))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	deadline := time.Now().Add(time.Minute)
	for e.Status().Rules[0].Name != "warm" {
		if time.Now().After(deadline) {
			t.Fatal("the mended file was not re-read")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if st := e.Status(); st.LoadError != "" {
		t.Errorf("load error kept after a good file: %q", st.LoadError)
	}
}

func TestRecordJSON(t *testing.T) {
	r := Record{Rule: "r", Labels: monitor.L("link", "wan"), Value: nan()}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"labels":{"link":"wan"}`) || !strings.Contains(string(b), `"value":null`) {
		t.Errorf("record JSON %s", b)
	}
	_ = io.Discard
}

func nan() float64 { return math.NaN() }

// The controller's store is a history's Store as it is.
var _ Store = store.Store(nil)

// openStore opens a controller's store (SQLite) in dir, closed when the
// test ends.
func openStore(t *testing.T, dir string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
