package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/alert"
	"github.com/lightpath/lightpath/internal/monitor/repo"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/store/pgtest"
	"github.com/lightpath/lightpath/internal/testclock"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/registry"
)

// monitoring is what a test server gets beside the controller: the
// repository, transfers, and a rules evaluator the test steps by hand.
type monitoring struct {
	rules  string          // a rules file, or ""
	limits registry.Limits // the transfers' limits (zero: the defaults)
	ev     *alert.Evaluator
	repo   *repo.Repo
}

func (m *monitoring) attach(t *testing.T, h *api.Server, c *controller.Controller, st store.Store, dir string) func() {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "metrics.db")
	rp, err := repo.Open(ctx, repo.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	tr := registry.New(st, c.Now)
	tr.SetLimits(m.limits)
	hist := alert.NewHistory(st)
	m.repo = rp
	m.ev = alert.New(alert.Options{Source: alert.RepoSource(rp), History: hist, Now: c.Now,
		Reroute: func(ctx context.Context, rule string, links []string, from, why string) ([]string, error) {
			rs, err := c.RerouteAround(ctx, rule, links, from, why)
			var out []string
			for _, r := range rs {
				out = append(out, fmt.Sprintf("%s moved=%v %s", r.ID, r.Moved, r.Reason))
			}
			return out, err
		}})
	if m.rules != "" {
		if err := m.ev.Load(m.rules); err != nil {
			t.Fatal(err)
		}
	}
	h.WithRepository(rp).WithTransfers(tr).WithAlerts(m.ev, hist)
	return func() {
		m.ev.Wait()
		if err := rp.Close(); err != nil {
			t.Error(err)
		}
	}
}

func newMonEnv(t *testing.T, topo, rules string) *env {
	t.Helper()
	e := &env{t: t, url: sqliteURL(t), clk: testclock.New(t0), dir: t.TempDir(), mon: &monitoring{rules: rules}}
	e.start(topo)
	return e
}

// txBatch is what the interfaces collector of node pushes: the transmit
// counter of its device on link, at t.
func txBatch(node, dev, link string, t time.Time, bytes float64) monitor.Batch {
	return monitor.Batch{Node: node, Seq: 1,
		Meta: map[string]monitor.Meta{"lightpath_interface_transmit_bytes_total": {Type: monitor.Counter, Help: "Bytes sent."}},
		Groups: []monitor.Group{{T: t.UnixMilli(), Points: []monitor.Point{
			{Name: "lightpath_interface_transmit_bytes_total", Labels: monitor.L("device", dev, "link", link), V: bytes}}}}}
}

func TestPushQueryAndMetrics(t *testing.T) {
	e := newMonEnv(t, oneLink, "")
	agent := e.agent("agent-h1", "h1")
	user := e.user("alice", "user")
	var res apiv1.PushResult
	for i, b := range []float64{1e6, 1e6 + 62.5e6} { // 500 Mbit/s over the second
		if st, raw := e.do("POST", "/api/v1/metrics/push", agent, txBatch("h1", "eth0", "l", t0.Add(time.Duration(i-2)*time.Second), b), &res); st != 200 || res.Stored != 1 {
			t.Fatalf("push: %d %s", st, raw)
		}
	}
	// The same batch again (its answer lost): stored once.
	if st, raw := e.do("POST", "/api/v1/metrics/push", agent, txBatch("h1", "eth0", "l", t0.Add(-time.Second), 1e6+62.5e6), &res); st != 200 || res.Duplicate != 1 || res.Stored != 0 {
		t.Fatalf("push again: %d %s", st, raw)
	}
	var q apiv1.QueryResult
	if st, raw := e.do("GET", "/api/v1/metrics/query?name=lightpath_interface_transmit_bytes_total&match=node%3Dh1&start=1h", user, nil, &q); st != 200 || len(q.Series) != 1 || len(q.Series[0].Points) != 2 {
		t.Fatalf("query: %d %s", st, raw)
	}
	if l := q.Series[0].Labels; l["node"] != "h1" || l["link"] != "l" || l["device"] != "eth0" {
		t.Errorf("labels %v", l)
	}
	// The controller derived the link direction's throughput.
	if st, raw := e.do("GET", "/api/v1/metrics/query?name=lightpath_link_throughput_bytes_per_second&match=link%3Dl&match=from%3Dh1", user, nil, &q); st != 200 || len(q.Series) != 1 || len(q.Series[0].Points) != 1 || q.Series[0].Points[0][1].(float64) != 62.5e6 {
		t.Fatalf("derived throughput: %d %s", st, raw)
	}
	var names apiv1.MetricNames
	e.do("GET", "/api/v1/metrics/names", user, nil, &names)
	found := false
	for _, n := range names.Names {
		found = found || n.Name == "lightpath_link_utilisation_ratio" && n.Type == "gauge"
	}
	if !found {
		t.Errorf("names lack the utilisation: %+v", names)
	}

	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		msg                       string
	}{
		{"an unknown node", "POST", "/api/v1/metrics/push", e.admin, txBatch("nowhere", "eth0", "l", t0, 1), 400, `is not in the topology`},
		{"a user may not push", "POST", "/api/v1/metrics/push", user, txBatch("h1", "eth0", "l", t0, 1), 403, "only agents"},
		{"a malformed point", "POST", "/api/v1/metrics/push", agent, `{"node":"h1","groups":[{"t":1,"points":[["x",{}]]}]}`, 400, "a point is [name, {labels}, value]"},
		// The whole push is refused: the first point, valid, is not stored
		// either (the series count on /metrics below stays 3).
		{"a repeated label key", "POST", "/api/v1/metrics/push", agent, `{"node":"h1","groups":[{"t":1,"points":[["lightpath_ok",{"a":"1"},1],["lightpath_dup",{"0":"0","0":""},0]]}]}`, 400, `label \"0\" is given twice`},
		{"a bad metric name", "POST", "/api/v1/metrics/push", agent, `{"node":"h1","groups":[{"t":1,"points":[["no-dash",{},1]]}]}`, 400, "not a valid"},
		{"no name", "GET", "/api/v1/metrics/query", user, nil, 400, "name is required"},
		{"a step too fine for the range", "GET", "/api/v1/metrics/query?name=x&start=2000h&step=1s", user, nil, 400, "points"},
		{"a step under a second", "GET", "/api/v1/metrics/query?name=x&step=1ms", user, nil, 400, "step"},
		{"end before start", "GET", "/api/v1/metrics/query?name=x&start=2030-03-01T11:00:00Z&end=2030-03-01T10:00:00Z", user, nil, 400, "end"},
		{"a nonsense time", "GET", "/api/v1/metrics/query?name=x&start=yesterday", user, nil, 400, "RFC 3339"},
		{"a malformed match", "GET", "/api/v1/metrics/query?name=x&match=link", user, nil, 400, "LABEL=VALUE"},
		{"no token", "GET", "/api/v1/metrics/query?name=x", "", nil, 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, raw := e.do(tc.method, tc.path, tc.token, tc.body, nil)
			if st != tc.status || !strings.Contains(string(raw), tc.msg) {
				t.Fatalf("%d %s, want %d with %q", st, raw, tc.status, tc.msg)
			}
		})
	}

	body := scrape(t, e)
	for _, want := range []string{
		`# TYPE lightpath_interface_transmit_bytes_total counter`,
		`lightpath_interface_transmit_bytes_total{device="eth0",link="l",node="h1"} 6.35e+07`,
		`lightpath_link_utilisation_ratio{from="h1",link="l",node="h1",to="h2"} 0.5`,
		`lightpath_controller_repository_series 3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// scrape reads /metrics (no token needed).
func scrape(t *testing.T, e *env) string {
	t.Helper()
	resp, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// promtool is Prometheus' own checker, fetched by scripts/deps.sh.
func promtool(t *testing.T) string {
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/local/lib/lightpath/promtool"); err == nil {
		return "/usr/local/lib/lightpath/promtool"
	}
	t.Skip("promtool is not installed (scripts/deps.sh fetches it as root)")
	return ""
}

func TestPromtool(t *testing.T) {
	pt := promtool(t)
	e := newMonEnv(t, oneLink, "")
	agent := e.agent("agent-h1", "h1")
	// Series of one name with different label names (a device with a
	// link and one without) must still be one consistent family.
	b := txBatch("h1", "eth0", "l", t0, 5)
	b.Groups[0].Points = append(b.Groups[0].Points, monitor.Point{Name: "lightpath_interface_transmit_bytes_total", Labels: monitor.L("device", "dummy0"), V: 7})
	if st, raw := e.do("POST", "/api/v1/metrics/push", agent, b, nil); st != 200 {
		t.Fatalf("push: %d %s", st, raw)
	}
	body := scrape(t, e)
	if !strings.Contains(body, `lightpath_interface_transmit_bytes_total{device="dummy0",link="",node="h1"} 7`) {
		t.Errorf("the device without a link is missing or inconsistent:\n%s", body)
	}
	cmd := exec.Command(pt, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestTransfersAndAlerts(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(`rules:
  - name: wan-busy
    expr: {series: lightpath_link_utilisation_ratio, labels: {link: wan}, fn: last, window: 30s}
    op: ">"
    threshold: 80%
    actions: [{log: {}}, {reroute: {}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newMonEnv(t, twoSite, rules)
	agent := e.agent("agent-ra", "ra")
	alice := e.user("alice", "user")
	bob := e.user("bob", "user")
	// A reservation a1 → b1 on wan, ACTIVE now.
	st, res, raw := e.create(alice, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 300 * mbps, Duration: "1h",
		Path: []string{"a1-ra", "wan", "b1-rb"}, FlowSpec: "tcp 198.18.1.1 > 198.18.2.1:7070"})
	if st != 201 {
		t.Fatalf("create: %d %s", st, raw)
	}
	e.c.Tick(context.Background())
	var tr transfer.Transfer
	if st, raw := e.do("POST", "/api/v1/transfers", alice, transfer.Registration{Direction: "push", Source: "big.h5", Destination: "lp://b1:7070/",
		From: "a1", To: "b1", Reservation: res.Reservation.ID, BytesTotal: 1 << 30}, &tr); st != 201 || tr.State != "running" {
		t.Fatalf("register: %d %s", st, raw)
	}
	e.clk.Add(time.Second)
	if st, raw := e.do("POST", "/api/v1/transfers/"+tr.ID+"/progress", alice, transfer.Report{BytesDone: 100 << 20,
		BytesByPath: map[string]int64{"reserved": 100 << 20}, Streams: []transfer.Stream{{RTTSeconds: 0.05, Cwnd: 900, Retransmits: 2}}}, &tr); st != 200 || tr.ThroughputBps < 800e6 {
		t.Fatalf("progress: %d %s", st, raw)
	}
	if st, _ := e.do("POST", "/api/v1/transfers/"+tr.ID+"/progress", bob, transfer.Report{BytesDone: 1}, nil); st != 404 {
		t.Errorf("another user's report: %d, want 404", st)
	}
	if st, _ := e.do("GET", "/api/v1/transfers/"+tr.ID, bob, nil, nil); st != 404 {
		t.Errorf("another user's transfer page: %d, want 404", st)
	}
	// ra's wan device sends 900 Mbit/s: the rule fires and reroutes.
	for i, b := range []float64{0, 112.5e6} {
		if st, raw := e.do("POST", "/api/v1/metrics/push", agent, txBatch("ra", "wan0", "wan", e.clk.Now().Add(time.Duration(i-1)*time.Second), b), nil); st != 200 {
			t.Fatalf("push: %d %s", st, raw)
		}
	}
	recs := e.mon.ev.Eval(context.Background())
	e.mon.ev.Wait()
	if len(recs) != 1 || recs[0].To != "firing" || recs[0].Labels.Get("from") != "ra" {
		t.Fatalf("eval: %+v", recs)
	}
	var moved apiv1.ReservationResponse
	e.do("GET", "/api/v1/reservations/"+res.Reservation.ID, alice, nil, &moved)
	if got := fmt.Sprint(moved.Reservation.Path); !strings.Contains(got, "dedicated") {
		t.Errorf("after the rule fired, the reservation's path is %s, want it on dedicated", got)
	}
	var page apiv1.TransferPage
	if st, raw := e.do("GET", "/api/v1/transfers/"+tr.ID, alice, nil, &page); st != 200 || len(page.Alerts) != 1 {
		t.Fatalf("transfer page: %d %s", st, raw)
	}
	var rec struct {
		Rule, To, Reason string
		Actions          []alert.ActionResult
	}
	_ = json.Unmarshal(page.Alerts[0], &rec)
	if rec.Rule != "wan-busy" || rec.To != "firing" || !strings.Contains(rec.Reason, "wan") || len(rec.Actions) != 2 || !strings.Contains(rec.Actions[1].Detail, "moved=true") {
		t.Errorf("the page's alert: %+v", rec)
	}
	var al api.AlertsResult
	if st, raw := e.do("GET", "/api/v1/alerts", alice, nil, &al); st != 200 || len(al.Status.Instances) != 1 || al.Status.Instances[0].State != "firing" {
		t.Fatalf("alerts: %d %s", st, raw)
	}
	// /metrics has it as Prometheus' ALERTS has its own.
	if m := scrape(t, e); !strings.Contains(m, `lightpath_alerts{alertname="wan-busy",alertstate="firing",`) || !strings.Contains(m, `from="ra"`) {
		t.Errorf("/metrics lacks the firing alert:\n%s", grepLines(m, "lightpath_alerts"))
	}
	// The transfer's series are in the repository.
	var q apiv1.QueryResult
	if st, raw := e.do("GET", "/api/v1/metrics/query?name=lightpath_transfer_stream_cwnd_segments&match=transfer%3D"+tr.ID, alice, nil, &q); st != 200 || len(q.Series) != 1 {
		t.Fatalf("transfer series: %d %s", st, raw)
	}
	// The live stream has the link and the transfer.
	live := readLive(t, e, alice)
	var wan *apiv1.LiveLink
	for i, l := range live.Links {
		if l.Link == "wan" && l.From == "ra" {
			wan = &live.Links[i]
		}
	}
	if wan == nil || wan.Bps != 900e6 || wan.CapacityBps != 1e9 {
		t.Errorf("live links: %+v", live.Links)
	}
	if len(live.Transfers) != 1 || live.Transfers[0].ID != tr.ID {
		t.Errorf("live transfers: %+v", live.Transfers)
	}
	// It ends.
	if st, raw := e.do("POST", "/api/v1/transfers/"+tr.ID+"/progress", alice, transfer.Report{State: "succeeded", BytesDone: 1 << 30, Verified: true, Bottleneck: "reservation"}, &tr); st != 200 || tr.State != "succeeded" || tr.EndedAt.IsZero() {
		t.Fatalf("final report: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/transfers/"+tr.ID+"/progress", alice, transfer.Report{BytesDone: 1}, nil); st != 400 {
		t.Errorf("a report after the end: %d %s", st, raw)
	}
	var list apiv1.TransferList
	if e.do("GET", "/api/v1/transfers", bob, nil, &list); len(list.Transfers) != 0 {
		t.Errorf("bob sees %d transfers", len(list.Transfers))
	}
	if e.do("GET", "/api/v1/transfers", alice, nil, &list); len(list.Transfers) != 1 {
		t.Errorf("alice sees %d transfers", len(list.Transfers))
	}
	_ = reserve.StateActive
}

func readLive(t *testing.T, e *env, token string) apiv1.Live {
	t.Helper()
	resp, err := http.Get(e.srv.URL + "/api/v1/metrics/live?every=200ms&access_token=" + url.QueryEscape(token))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("live: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var lv apiv1.Live
			if err := json.Unmarshal([]byte(data), &lv); err != nil {
				t.Fatal(err)
			}
			return lv
		}
	}
	t.Fatal("the live stream ended without a frame")
	return apiv1.Live{}
}

// TestTransfersAndAlertsSurviveRestart: transfers and the alert history
// are in the controller's database, not in the metrics file: after a
// restart with the metrics file gone, both are there as they were, on
// SQLite and PostgreSQL, and a transfer carries on.
func TestTransfersAndAlertsSurviveRestart(t *testing.T) {
	for name, url := range map[string]func(*testing.T) string{"sqlite": sqliteURL, "postgres": func(t *testing.T) string { return pgtest.URL(t) }} {
		t.Run(name, func(t *testing.T) {
			rules := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(rules, []byte(`rules:
  - name: wan-busy
    expr: {series: lightpath_link_utilisation_ratio, labels: {link: wan}, fn: last, window: 30s}
    op: ">"
    threshold: 80%
    actions: [{log: {}}]
`), 0o600); err != nil {
				t.Fatal(err)
			}
			e := &env{t: t, url: url(t), clk: testclock.New(t0), dir: t.TempDir(), mon: &monitoring{rules: rules}}
			e.start(twoSite)
			agent := e.agent("agent-ra", "ra")
			alice := e.user("alice", "user")
			st, res, raw := e.create(alice, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 300 * mbps, Duration: "1h",
				Path: []string{"a1-ra", "wan", "b1-rb"}})
			if st != 201 {
				t.Fatalf("create: %d %s", st, raw)
			}
			var tr transfer.Transfer
			if st, raw := e.do("POST", "/api/v1/transfers", alice, transfer.Registration{Direction: "push", Source: "big.h5", Destination: "lp://b1:7070/",
				From: "a1", To: "b1", Reservation: res.Reservation.ID, BytesTotal: 1 << 30}, &tr); st != 201 {
				t.Fatalf("register: %d %s", st, raw)
			}
			e.clk.Add(time.Second)
			if st, raw := e.do("POST", "/api/v1/transfers/"+tr.ID+"/progress", alice, transfer.Report{BytesDone: 100 << 20,
				BytesByPath: map[string]int64{"routed": 100 << 20}, Streams: []transfer.Stream{{RTTSeconds: 0.05, Cwnd: 900}}}, &tr); st != 200 {
				t.Fatalf("progress: %d %s", st, raw)
			}
			for i, b := range []float64{0, 112.5e6} {
				if st, raw := e.do("POST", "/api/v1/metrics/push", agent, txBatch("ra", "wan0", "wan", e.clk.Now().Add(time.Duration(i-1)*time.Second), b), nil); st != 200 {
					t.Fatalf("push: %d %s", st, raw)
				}
			}
			if recs := e.mon.ev.Eval(context.Background()); len(recs) != 1 || recs[0].To != "firing" {
				t.Fatalf("eval: %+v", recs)
			}
			e.mon.ev.Wait()
			var before, after api.AlertsResult
			var listBefore, listAfter apiv1.TransferList
			e.do("GET", "/api/v1/alerts", alice, nil, &before)
			e.do("GET", "/api/v1/transfers", alice, nil, &listBefore)
			if len(before.History) != 1 || len(before.History[0].Actions) != 1 || len(listBefore.Transfers) != 1 {
				t.Fatalf("before the restart: history %+v, transfers %+v", before.History, listBefore.Transfers)
			}

			e.stopFn()
			for _, suffix := range []string{"", "-wal", "-shm"} {
				if err := os.Remove(filepath.Join(e.dir, "metrics.db"+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			}
			e.start(twoSite)

			e.do("GET", "/api/v1/transfers", alice, nil, &listAfter)
			if !reflect.DeepEqual(listAfter, listBefore) {
				t.Errorf("transfers after the restart:\n%+v\nbefore:\n%+v", listAfter, listBefore)
			}
			if st, raw := e.do("GET", "/api/v1/alerts", alice, nil, &after); st != 200 {
				t.Fatalf("alerts: %d %s", st, raw)
			}
			b1, _ := json.Marshal(before.History)
			b2, _ := json.Marshal(after.History)
			if string(b1) != string(b2) {
				t.Errorf("alert history after the restart:\n%s\nbefore:\n%s", b2, b1)
			}
			var page apiv1.TransferPage
			if st, raw := e.do("GET", "/api/v1/transfers/"+tr.ID, alice, nil, &page); st != 200 || len(page.Alerts) != 1 {
				t.Errorf("transfer page after the restart: %d %s", st, raw)
			}
			// The transfer carries on: its throughput is measured from the
			// report before the restart.
			e.clk.Add(time.Second)
			if st, raw := e.do("POST", "/api/v1/transfers/"+tr.ID+"/progress", alice, transfer.Report{State: "succeeded", BytesDone: 200 << 20}, &tr); st != 200 ||
				tr.State != "succeeded" || tr.ThroughputBps != 100<<20*8 {
				t.Errorf("final report after the restart: %d %s", st, raw)
			}
		})
	}
}

// grepLines is the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
