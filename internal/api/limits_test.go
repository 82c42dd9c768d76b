package api_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/testclock"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/registry"
)

// Issue 12, attacker 4: one ordinary user grew the controller without
// end. Each per-user limit answers 429 naming the limit and its flag.

func wantLimit(t *testing.T, what string, st int, raw []byte, flag string) {
	t.Helper()
	if st != http.StatusTooManyRequests {
		t.Fatalf("%s: %d %s, want 429", what, st, raw)
	}
	if d := errorOf(t, raw); d.Code != apiv1.CodeLimit || !strings.Contains(d.Message, flag) {
		t.Fatalf("%s: %+v, want code limit naming %s", what, d, flag)
	}
}

func TestTokensPerUserLimit(t *testing.T) {
	e := &env{t: t, url: sqliteURL(t), clk: testclock.New(t0), dir: t.TempDir(), limits: controller.Limits{MaxTokensPerUser: 2}}
	e.start(twoSite)
	alice := e.user("alice", "user") // her first token
	var second apiv1.Token
	if st, raw := e.do("POST", "/api/v1/users/alice/tokens", alice, apiv1.TokenRequest{}, &second); st != 201 {
		t.Fatalf("second token: %d %s", st, raw)
	}
	st, raw := e.do("POST", "/api/v1/users/alice/tokens", alice, apiv1.TokenRequest{}, nil)
	wantLimit(t, "a third token", st, raw, "--max-tokens-per-user 2")
	if !strings.Contains(string(raw), "alice has 2 usable tokens") {
		t.Errorf("the refusal does not count: %s", raw)
	}
	// An admin making one for her is refused alike; a revoked one frees
	// a place.
	st, raw = e.do("POST", "/api/v1/users/alice/tokens", e.admin, apiv1.TokenRequest{}, nil)
	wantLimit(t, "a third token by an admin", st, raw, "--max-tokens-per-user")
	if st, raw := e.do("DELETE", "/api/v1/tokens/"+second.ID, alice, nil, nil); st != 204 {
		t.Fatalf("revoke: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/users/alice/tokens", alice, apiv1.TokenRequest{}, nil); st != 201 {
		t.Errorf("a token after one was revoked: %d %s", st, raw)
	}
	// Admins are not limited.
	for i := range 3 {
		if st, raw := e.do("POST", "/api/v1/users/admin/tokens", e.admin, apiv1.TokenRequest{}, nil); st != 201 {
			t.Fatalf("admin token %d: %d %s", i, st, raw)
		}
	}
}

func TestReservationsPerUserLimit(t *testing.T) {
	e := &env{t: t, url: sqliteURL(t), clk: testclock.New(t0), dir: t.TempDir(), limits: controller.Limits{MaxReservationsPerUser: 2}}
	e.start(twoSite)
	alice := e.user("alice", "user")
	book := func(h int) (int, apiv1.ReservationResponse, []byte) {
		return e.create(alice, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 10 * mbps, Start: t0.Add(time.Duration(h) * time.Hour), Duration: "30m"})
	}
	var ids []string
	for h := 1; h <= 2; h++ {
		st, res, raw := book(h)
		if st != 201 {
			t.Fatalf("reservation %d: %d %s", h, st, raw)
		}
		ids = append(ids, res.Reservation.ID)
	}
	st, _, raw := book(3)
	wantLimit(t, "a third live reservation", st, raw, "--max-reservations-per-user 2")
	if st, raw := e.do("POST", "/api/v1/reservations/"+ids[0]+"/cancel", alice, nil, nil); st != 200 {
		t.Fatalf("cancel: %d %s", st, raw)
	}
	if st, _, raw := book(3); st != 201 {
		t.Errorf("a reservation after one was cancelled: %d %s", st, raw)
	}
	// An admin booking for himself is not limited.
	for h := 4; h <= 6; h++ {
		if st, _, raw := e.create(e.admin, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 10 * mbps, Start: t0.Add(time.Duration(h) * time.Hour), Duration: "30m"}); st != 201 {
			t.Fatalf("admin reservation %d: %d %s", h, st, raw)
		}
	}
}

// Twenty-one 8-hour holds back to back passed the 8-hour rule: a run of
// holds that overlap or touch counts as one.
func TestExclusiveHoldsChained(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	alice := e.user("alice", "user")
	hold := func(node string, start time.Time, d string) (int, reserve.Exclusive, []byte) {
		var x reserve.Exclusive
		st, raw := e.do("POST", "/api/v1/exclusives", alice, apiv1.ExclusiveRequest{Node: node, Start: start, Duration: d}, &x)
		return st, x, raw
	}
	s0 := t0.Add(6 * time.Hour)
	st, first, raw := hold("a1", s0, "8h")
	if st != 201 {
		t.Fatalf("the first 8-hour hold: %d %s", st, raw)
	}
	for _, tc := range []struct {
		name  string
		start time.Time
		d     string
	}{
		{"back to back", s0.Add(8 * time.Hour), "8h"},
		{"overlapping", s0.Add(7 * time.Hour), "2h"},
		{"just before", s0.Add(-2 * time.Hour), "2h"},
	} {
		st, _, raw := hold("a1", tc.start, tc.d)
		if st != 403 || !strings.Contains(string(raw), "holds back to back count as one") || !strings.Contains(string(raw), first.ID) || !strings.Contains(string(raw), "8h maximum") {
			t.Errorf("%s: %d %s, want 403 naming %s", tc.name, st, raw, first.ID)
		}
	}
	// A gap, another node, or a chain within the limit are fine.
	if st, _, raw := hold("a1", s0.Add(9*time.Hour), "8h"); st != 201 {
		t.Errorf("after an hour's gap: %d %s", st, raw)
	}
	if st, _, raw := hold("b1", s0.Add(8*time.Hour), "8h"); st != 201 {
		t.Errorf("another node back to back: %d %s", st, raw)
	}
	st, short, raw := hold("rb", s0, "4h")
	if st != 201 {
		t.Fatalf("a 4-hour hold: %d %s", st, raw)
	}
	if st, _, raw := hold("rb", s0.Add(4*time.Hour), "4h"); st != 201 {
		t.Errorf("two 4-hour holds back to back (8 h): %d %s", st, raw)
	}
	// A hold cancelled before it started held nothing.
	if st, raw := e.do("POST", "/api/v1/exclusives/"+short.ID+"/cancel", alice, nil, nil); st != 200 {
		t.Fatalf("cancel: %d %s", st, raw)
	}
	if st, _, raw := hold("rb", s0.Add(-4*time.Hour+time.Minute), "4h"); st != 201 {
		t.Errorf("a hold before a cancelled one: %d %s", st, raw)
	}
}

func TestTransferLimits(t *testing.T) {
	e := &env{t: t, url: sqliteURL(t), clk: testclock.New(t0), dir: t.TempDir(), mon: &monitoring{limits: registry.Limits{MaxLive: 2, MaxStreams: 4}}}
	e.start(twoSite)
	alice, bob := e.user("alice", "user"), e.user("bob", "user")
	register := func(tok string) (int, transfer.Transfer, []byte) {
		var tr transfer.Transfer
		st, raw := e.do("POST", "/api/v1/transfers", tok, transfer.Registration{Direction: "push", Source: "f", Destination: "lp://b1:7070/"}, &tr)
		return st, tr, raw
	}
	var trs []transfer.Transfer
	for i := range 2 {
		st, tr, raw := register(alice)
		if st != 201 {
			t.Fatalf("transfer %d: %d %s", i, st, raw)
		}
		trs = append(trs, tr)
	}
	st, _, raw := register(alice)
	wantLimit(t, "a third live transfer", st, raw, "--max-live-transfers-per-user 2")
	if st, _, raw := register(bob); st != 201 {
		t.Errorf("another user's transfer: %d %s", st, raw)
	}
	// A report of more streams than allowed is refused whole.
	streams := make([]transfer.Stream, 5)
	st, raw = e.do("POST", "/api/v1/transfers/"+trs[0].ID+"/progress", alice, transfer.Report{BytesDone: 1, Streams: streams}, nil)
	if st != 400 || !strings.Contains(string(raw), "5 streams") || !strings.Contains(string(raw), "--max-streams-per-report 4") {
		t.Errorf("5 streams: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/transfers/"+trs[0].ID+"/progress", alice, transfer.Report{BytesDone: 1, Streams: streams[:4]}, nil); st != 200 {
		t.Errorf("4 streams: %d %s", st, raw)
	}
	// One ends: a place is free.
	if st, raw := e.do("POST", "/api/v1/transfers/"+trs[1].ID+"/progress", alice, transfer.Report{State: "succeeded", BytesDone: 1, Verified: true}, nil); st != 200 {
		t.Fatalf("finish: %d %s", st, raw)
	}
	st, third, raw := register(alice)
	if st != 201 {
		t.Fatalf("a transfer after one ended: %d %s", st, raw)
	}
	// Stalled transfers stop counting, and count again when they report:
	// a stalled one cannot come back past the limit.
	e.clk.Add(transfer.StallAfter + time.Second)
	var fresh []transfer.Transfer
	for i := range 2 {
		st, tr, raw := register(alice)
		if st != 201 {
			t.Fatalf("transfer %d after the others stalled: %d %s", i, st, raw)
		}
		fresh = append(fresh, tr)
	}
	st, raw = e.do("POST", "/api/v1/transfers/"+third.ID+"/progress", alice, transfer.Report{BytesDone: 2}, nil)
	wantLimit(t, "a stalled transfer reporting again past the limit", st, raw, "--max-live-transfers-per-user 2")
	if st, raw := e.do("POST", "/api/v1/transfers/"+fresh[0].ID+"/progress", alice, transfer.Report{BytesDone: 2}, nil); st != 200 {
		t.Errorf("a live transfer's report: %d %s", st, raw)
	}
}

// /metrics carries no series of single connections or transfers: they
// stay in the repository.
func TestMetricsNoPerConnectionSeries(t *testing.T) {
	e := newMonEnv(t, twoSite, "")
	ra := e.agent("agent-ra", "ra")
	alice := e.user("alice", "user")
	b := monitor.Batch{Node: "ra", Seq: 1, Groups: []monitor.Group{{T: t0.UnixMilli(), Points: []monitor.Point{
		{Name: "lightpath_tcp_rtt_seconds", Labels: monitor.L("flow", "198.18.1.1:40001>198.18.2.1:7070", "side", "client", "dscp", "10"), V: 0.05},
		{Name: "lightpath_node_memory_bytes", Labels: monitor.L("kind", "used"), V: 1e9},
	}}}}
	if st, raw := e.do("POST", "/api/v1/metrics/push", ra, b, nil); st != 200 {
		t.Fatalf("push: %d %s", st, raw)
	}
	var tr transfer.Transfer
	if st, raw := e.do("POST", "/api/v1/transfers", alice, transfer.Registration{Direction: "push", Source: "f", Destination: "lp://b1:7070/", From: "a1"}, &tr); st != 201 {
		t.Fatalf("register: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/transfers/"+tr.ID+"/progress", alice, transfer.Report{BytesDone: 1 << 20, Streams: make([]transfer.Stream, 3)}, nil); st != 200 {
		t.Fatalf("report: %d %s", st, raw)
	}
	body := scrape(t, e)
	if !strings.Contains(body, `lightpath_node_memory_bytes{kind="used",node="ra"} 1e+09`) {
		t.Errorf("/metrics lacks the node's own series:\n%s", body)
	}
	for _, bad := range []string{"flow=", "transfer=", "stream=", "lightpath_tcp_rtt_seconds", "lightpath_transfer_"} {
		if strings.Contains(body, bad) {
			t.Errorf("/metrics carries %s", bad)
		}
	}
	// The repository still has them.
	for _, q := range []string{"name=lightpath_tcp_rtt_seconds&match=node%3Dra", "name=lightpath_transfer_stream_cwnd_segments&match=transfer%3D" + tr.ID} {
		var res apiv1.QueryResult
		if st, raw := e.do("GET", "/api/v1/metrics/query?"+q+"&start=2030-03-01T11:00:00Z&end=2030-03-01T13:00:00Z", alice, nil, &res); st != 200 || len(res.Series) == 0 {
			t.Errorf("query %s: %d %s", q, st, raw)
		}
	}
}

func TestMetricsRequireToken(t *testing.T) {
	e := &env{t: t, url: sqliteURL(t), clk: testclock.New(t0), dir: t.TempDir(), metricsAuth: true}
	e.start(twoSite)
	alice := e.user("alice", "user")
	get := func(tok string) (int, string, http.Header) {
		req, _ := http.NewRequest("GET", e.srv.URL+"/metrics", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	if st, body, h := get(""); st != 401 || !strings.Contains(body, "no token") || h.Get("WWW-Authenticate") == "" {
		t.Errorf("a scrape without a token: %d %s %v", st, body, h)
	}
	if st, body, _ := get("not-a-token"); st != 401 || !strings.Contains(body, "unknown token") {
		t.Errorf("a scrape with a wrong token: %d %s", st, body)
	}
	if st, body, _ := get(alice); st != 200 || !strings.Contains(body, "lightpath_controller_http_requests_total") {
		t.Errorf("a scrape with a token: %d %.200s", st, body)
	}
}

// A query over a range too long for raw samples, without a step, is given
// one (stated in the answer) instead of reading every sample to refuse.
func TestQueryLongRangeGetsAStep(t *testing.T) {
	e := newMonEnv(t, oneLink, "")
	agent := e.agent("agent-h1", "h1")
	alice := e.user("alice", "user")
	for i := range 3 {
		if st, raw := e.do("POST", "/api/v1/metrics/push", agent, txBatch("h1", "eth0", "l", t0.Add(time.Duration(i-3)*time.Second), float64(i)*1e6), nil); st != 200 {
			t.Fatalf("push: %d %s", st, raw)
		}
	}
	q := func(start, end, step string) (int, apiv1.QueryResult, []byte) {
		v := url.Values{"name": {"lightpath_interface_transmit_bytes_total"}, "start": {start}, "end": {end}}
		if step != "" {
			v.Set("step", step)
		}
		var res apiv1.QueryResult
		st, raw := e.do("GET", "/api/v1/metrics/query?"+v.Encode(), alice, nil, &res)
		return st, res, raw
	}
	// An hour: the raw samples, no step.
	if st, res, raw := q("2030-03-01T11:30:00Z", "2030-03-01T12:30:00Z", ""); st != 200 || res.Step != "" || len(res.Series) != 1 || len(res.Series[0].Points) != 3 {
		t.Errorf("an hour: %d %s", st, raw)
	}
	for _, tc := range []struct{ name, start, end string }{
		{"a year", "2029-03-01T12:00:00Z", "2030-03-01T12:30:00Z"},
		{"a millennium", "1970-01-01T00:00:00Z", "3000-01-01T00:00:00Z"},
	} {
		st, res, raw := q(tc.start, tc.end, "")
		if st != 200 || res.Step == "" {
			t.Errorf("%s: %d %s, want 200 with a step", tc.name, st, raw)
			continue
		}
		step, err := time.ParseDuration(res.Step)
		s, _ := time.Parse(time.RFC3339, tc.start)
		en, _ := time.Parse(time.RFC3339, tc.end)
		if err != nil || (en.UnixMilli()-s.UnixMilli())/step.Milliseconds()+1 > 11000 {
			t.Errorf("%s: step %s leaves too many points", tc.name, res.Step)
		}
		for _, sr := range res.Series {
			if len(sr.Points) > 11000 {
				t.Errorf("%s: %d points", tc.name, len(sr.Points))
			}
		}
	}
	// A step given too fine for the range is still refused, clearly.
	if st, _, raw := q("2029-03-01T12:00:00Z", "2030-03-01T12:00:00Z", "1s"); st != 400 || !strings.Contains(string(raw), "widen the step") {
		t.Errorf("a year at 1s: %d %s", st, raw)
	}
}
