package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/reserve"
)

var cliT0 = time.Date(2026, 5, 1, 14, 0, 0, 0, time.UTC)

func TestParseWhen(t *testing.T) {
	now := cliT0
	zone := displayZone
	displayZone = time.FixedZone("UTC+1", 3600)
	defer func() { displayZone = zone }()
	for _, tc := range []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"now", now, false},
		{"NOW", now, false},
		{" now ", now, false},
		{"+2h", now.Add(2 * time.Hour), false},
		{"+90m", now.Add(90 * time.Minute), false},
		{"+1d", now.Add(24 * time.Hour), false},
		{"+2d12h", now.Add(60 * time.Hour), false},
		{"2026-05-02T08:30:00Z", time.Date(2026, 5, 2, 8, 30, 0, 0, time.UTC), false},
		{"2026-05-02T10:30:00+02:00", time.Date(2026, 5, 2, 8, 30, 0, 0, time.UTC), false},
		{"2026-05-02T08:30:00.5Z", time.Date(2026, 5, 2, 8, 30, 0, 5e8, time.UTC), false},
		{"", time.Time{}, true},
		{"tomorrow", time.Time{}, true},
		{"+", time.Time{}, true},
		{"+0s", time.Time{}, true},
		{"+-2h", time.Time{}, true},
		{"-2h", time.Time{}, true},
		{"2h", time.Time{}, true},
		{"+2x", time.Time{}, true},
		// No zone: local time (displayZone, fixed to UTC+1 here).
		{"2026-11-26 09:00", time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC), false},
		{"2026-11-26T09:00", time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC), false},
		{"2026-05-02 08:30:15", time.Date(2026, 5, 2, 7, 30, 15, 0, time.UTC), false},
		{"2026-05-02T08:30:00", time.Date(2026, 5, 2, 7, 30, 0, 0, time.UTC), false},
		{"2026-05-02", time.Time{}, true},
		{"2026-05-02 25:00", time.Time{}, true},
	} {
		got, err := parseWhen(tc.in, now)
		if (err != nil) != tc.err || !got.Equal(tc.want) {
			t.Errorf("parseWhen(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), "RFC 3339") {
			t.Errorf("parseWhen(%q) error %q does not say what to write", tc.in, err)
		}
	}
}

func TestParseSpan(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"2h", 2 * time.Hour, false},
		{"90m", 90 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"1d", 24 * time.Hour, false},
		{"30d", 720 * time.Hour, false},
		{"1d6h", 30 * time.Hour, false},
		{"0s", 0, true},
		{"0d", 0, true},
		{"-1h", 0, true},
		{"1", 0, true},
		{"d", 0, true},
		{"1.5d", 0, true},
		{"1d-1h", 0, true},
		{"two hours", 0, true},
	} {
		got, err := parseSpan(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseSpan(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestWindowResolve(t *testing.T) {
	now := cliT0
	for _, tc := range []struct {
		name       string
		w          window
		need       bool
		start, end time.Time
		d          time.Duration
		err        string
	}{
		{"start and duration", window{start: "+1h", duration: "2h"}, true, now.Add(time.Hour), time.Time{}, 2 * time.Hour, ""},
		{"default start", window{duration: "30m"}, true, now, time.Time{}, 30 * time.Minute, ""},
		{"start and end", window{start: "now", end: "+3h"}, true, now, now.Add(3 * time.Hour), 0, ""},
		{"neither when needed", window{start: "+1h"}, true, time.Time{}, time.Time{}, 0, "--duration D or --end TIME"},
		{"neither when optional", window{}, false, now, time.Time{}, 0, ""},
		{"both", window{end: "+1h", duration: "1h"}, true, time.Time{}, time.Time{}, 0, "exclude each other"},
		{"end before start", window{start: "+2h", end: "+1h"}, true, time.Time{}, time.Time{}, 0, "not after"},
		{"bad start", window{start: "soon", duration: "1h"}, true, time.Time{}, time.Time{}, 0, "--start"},
		{"bad duration", window{duration: "long"}, true, time.Time{}, time.Time{}, 0, "--duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, e, d, err := tc.w.resolve(now, tc.need)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil || !s.Equal(tc.start) || !e.Equal(tc.end) || d != tc.d {
				t.Errorf("= %v, %v, %v, %v; want %v, %v, %v", s, e, d, err, tc.start, tc.end, tc.d)
			}
		})
	}
}

func TestResolveNow(t *testing.T) {
	before := time.Now()
	n := resolveNow()
	after := time.Now()
	// The second it was called in (or the next, had it turned meanwhile).
	if n.Nanosecond() != 0 || n.Location() != time.UTC || n.Before(before.Truncate(time.Second)) || n.After(after) {
		t.Errorf("resolveNow() = %v", n)
	}
}

func TestUntilVerdict(t *testing.T) {
	for _, tc := range []struct {
		state, want reserve.State
		done        bool
		err         string
	}{
		{reserve.StateReserved, reserve.StateActive, false, ""},
		{reserve.StateHeld, reserve.StateActive, false, ""},
		{reserve.StateActive, reserve.StateActive, true, ""},
		{reserve.StateFinished, reserve.StateActive, true, "never be ACTIVE"},
		{reserve.StateCancelled, reserve.StateActive, true, "never be ACTIVE"},
		{reserve.StateFailed, reserve.StateFinished, true, "FAILED (agent gone): it will never be FINISHED"},
		{reserve.StateActive, reserve.StateReserved, true, "already ACTIVE, past RESERVED"},
		{reserve.StateReserved, reserve.StateCancelled, false, ""},
		{reserve.StateCancelled, reserve.StateCancelled, true, ""},
	} {
		r := reserve.Reservation{ID: "r-1", State: tc.state}
		if tc.state == reserve.StateFailed {
			r.FailureReason = "agent gone"
		}
		done, err := untilVerdict(r, tc.want)
		if done != tc.done || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("untilVerdict(%s, %s) = %v, %v; want %v, %q", tc.state, tc.want, done, err, tc.done, tc.err)
		}
	}
}

var tableResv = []reserve.Reservation{
	{
		ID: "r-1", Owner: "alice", Project: "cms", From: "a1", To: "b1", Bandwidth: 500e6, Start: cliT0, End: cliT0.Add(2 * time.Hour),
		Path:  []reserve.PathHop{{Link: "a1-ra", From: "a1", To: "ra"}, {Link: "wan", From: "ra", To: "rb"}, {Link: "b1-rb", From: "rb", To: "b1"}},
		State: reserve.StateActive, Degraded: true, DegradedReason: "agent rb lease lapsed", Version: 3, CreatedAt: cliT0.Add(-time.Hour),
		ManagedNodes: []string{"a1", "rb"}, Provisioned: []string{"a1"}, DSCP: 10,
		History: []reserve.Transition{
			{To: reserve.StateReserved, Event: reserve.EventCreate, At: cliT0.Add(-time.Hour), By: "alice", Why: "created and committed", Version: 1},
			{From: reserve.StateReserved, To: reserve.StateActive, Event: reserve.EventStartReached, At: cliT0, By: "controller", Why: "start reached", Version: 2},
		},
	},
	{ID: "r-22", Owner: "bob", From: "a2", To: "b2", Bandwidth: 10e9, Start: cliT0, End: cliT0.Add(time.Hour), State: reserve.StateHeld, Version: 1},
}

func withUTC(t *testing.T) {
	old := displayZone
	displayZone = time.UTC
	t.Cleanup(func() { displayZone = old })
}

func TestPrintReservations(t *testing.T) {
	withUTC(t)
	var b bytes.Buffer
	printReservations(&b, tableResv)
	want := `ID    STATE              FROM  TO  BANDWIDTH   START                 END                   PATH             OWNER  PROJECT
r-1   ACTIVE (degraded)  a1    b1  500 Mbit/s  2026-05-01T14:00:00Z  2026-05-01T16:00:00Z  a1-ra,wan,b1-rb  alice  cms
r-22  HELD               a2    b2  10.0 Gbit/s 2026-05-01T14:00:00Z  2026-05-01T15:00:00Z  -                bob    -
`
	// tabwriter pads each column to its widest cell plus two spaces.
	want = strings.Replace(want, "10.0 Gbit/s 2026", "10.0 Gbit/s  2026", 1)
	want = strings.Replace(want, "BANDWIDTH   START", "BANDWIDTH    START", 1)
	want = strings.Replace(want, "500 Mbit/s  2026", "500 Mbit/s   2026", 1)
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestPrintList checks the three forms of a list's answer: NDJSON ending
// in the summary, the none line for an empty list, and the table (the
// header alone when a list has no none line).
func TestPrintList(t *testing.T) {
	table := func(w io.Writer, xs []string) {
		printTable(w, []string{"NAME", "LEN"}, xs, func(x string) []string { return []string{x, strconv.Itoa(len(x))} })
	}
	for _, tc := range []struct {
		name  string
		json  bool
		items []string
		none  string
		want  string
	}{
		{"json", true, []string{"a", "bc"}, "no things", "\"a\"\n\"bc\"\n{\"summary\":true,\"count\":2}\n"},
		{"empty json", true, nil, "no things", "{\"summary\":true,\"count\":0}\n"},
		{"table", false, []string{"a", "bcd"}, "no things", "NAME  LEN\na     1\nbcd   3\n"},
		{"empty", false, nil, "no things", "no things\n"},
		{"empty without a none line", false, nil, "", "NAME  LEN\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printList(&b, tc.json, tc.items, tc.none, table)
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}

func TestPrintReservation(t *testing.T) {
	withUTC(t)
	var b bytes.Buffer
	printReservation(&b, tableResv[0])
	for _, want := range []string{
		"id             r-1 (version 3)\n",
		"state          ACTIVE (degraded)\n",
		"degraded       agent rb lease lapsed\n",
		"owner          alice (project cms)\n",
		"from → to      a1 → b1\n",
		"bandwidth      500 Mbit/s\n",
		"window         2026-05-01T14:00:00Z → 2026-05-01T16:00:00Z (2h00m)\n",
		"path           a1 -a1-ra-> ra -wan-> rb -b1-rb-> b1\n",
		"dscp           10\n",
		"managed nodes  a1, rb (waiting for rb)\n",
		"\nhistory:\n",
		"  AT                    EVENT          STATE              BY          VERSION  WHY\n",
		"  2026-05-01T14:00:00Z  start-reached  RESERVED → ACTIVE  controller  2        start reached\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("show lacks %q:\n%s", want, b.String())
		}
	}
}

func TestDescribe(t *testing.T) {
	withUTC(t)
	if got, want := describeReservation(tableResv[0]), "r-1 ACTIVE (degraded): a1 → b1 at 500 Mbit/s, 2026-05-01T14:00:00Z → 2026-05-01T16:00:00Z (2h00m) via a1-ra,wan,b1-rb"; got != want {
		t.Errorf("describeReservation:\n%s\nwant:\n%s", got, want)
	}
	tr := tableResv[0].History[1]
	ev := apiv1.Event{Seq: 4, Kind: "reservation", Reservation: &tableResv[0], Transition: &tr}
	if got, want := describeEvent(ev), "2026-05-01T14:00:00Z  r-1  RESERVED → ACTIVE  start-reached by controller: start reached  (a1 → b1, 500 Mbit/s, 2026-05-01T14:00:00Z → 2026-05-01T16:00:00Z)"; got != want {
		t.Errorf("describeEvent:\n%s\nwant:\n%s", got, want)
	}
	x := reserve.Exclusive{ID: "x-1", Owner: "alice", Site: "site-b", Nodes: []string{"b1", "rb"}, Start: cliT0, End: cliT0.Add(time.Hour), State: reserve.StateReserved, CreatedAt: cliT0}
	if got := describeEvent(apiv1.Event{Kind: "exclusive", Exclusive: &x}); !strings.Contains(got, "x-1  RESERVED  exclusive hold of site site-b by alice") {
		t.Errorf("describeEvent(exclusive) = %s", got)
	}
	var b bytes.Buffer
	printExclusives(&b, []reserve.Exclusive{x})
	if !strings.Contains(b.String(), "x-1  RESERVED  site site-b  b1,rb  2026-05-01T14:00:00Z  2026-05-01T15:00:00Z  alice  -") {
		t.Errorf("exclusives:\n%s", b.String())
	}
}

func TestCtlError(t *testing.T) {
	withUTC(t)
	c, _ := client.New("http://127.0.0.1:1", "")
	capErr := &client.APIError{Status: 409, Detail: apiv1.ErrorDetail{Code: apiv1.CodeCapacity, Message: "no path carries 500 Mbit/s",
		Alternatives: &apiv1.Alternatives{
			Earliest: &apiv1.Slot{Bandwidth: 500e6, Start: cliT0, End: cliT0.Add(time.Hour), Path: []reserve.PathHop{{Link: "l1"}, {Link: "wan"}}},
			Widest:   &apiv1.Slot{Bandwidth: 400e6},
		}}}
	err := c.Explain("reserve create", capErr)
	want := "reserve create: no path carries 500 Mbit/s; earliest at that bandwidth: 2026-05-01T14:00:00Z → 2026-05-01T15:00:00Z via l1,wan; widest in that slot: 400 Mbit/s"
	if err.Error() != want {
		t.Errorf("capacity:\n%s\nwant:\n%s", err, want)
	}
	var ae *client.APIError
	if !errors.As(err, &ae) {
		t.Error("the API error is lost")
	}
	err = c.Explain("reserve list", &client.APIError{Status: 401, Detail: apiv1.ErrorDetail{Code: apiv1.CodeUnauthorized, Message: "no token"}})
	if !strings.Contains(err.Error(), "LIGHTPATH_CONTROLLER_TOKEN") {
		t.Errorf("401 without a token: %v", err)
	}
	err = c.Explain("reserve list", errors.New("two\nlines"))
	if err.Error() != "reserve list: two lines" {
		t.Errorf("multi-line: %q", err)
	}
}

// fakeController answers the CLI's requests with canned bodies and
// records them.
type fakeController struct {
	mu     sync.Mutex
	bodies []map[string]any
	paths  []string
	handle func(w http.ResponseWriter, r *http.Request, n int) bool // true: handled
}

func (f *fakeController) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if b, _ := io.ReadAll(r.Body); len(b) > 0 {
		json.Unmarshal(b, &body)
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	n := len(f.paths)
	f.mu.Unlock()
	if f.handle != nil && f.handle(w, r, n) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.Method + " " + r.URL.Path {
	case "POST /api/v1/reservations":
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(apiv1.ReservationResponse{Reservation: tableResv[0], Algorithm: "fixed-bfs", Created: true})
	case "GET /api/v1/reservations":
		json.NewEncoder(w).Encode(apiv1.ReservationList{Reservations: tableResv})
	case "GET /api/v1/reservations/r-1":
		json.NewEncoder(w).Encode(apiv1.ReservationResponse{Reservation: tableResv[0]})
	case "PATCH /api/v1/reservations/r-1":
		json.NewEncoder(w).Encode(apiv1.ReservationResponse{Reservation: tableResv[0]})
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"code":"not_found","message":"no such thing"}}`)
	}
}

// bodiesSeen returns the bodies received so far.
func (f *fakeController) bodiesSeen() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

// pathsSeen returns the "METHOD /path" of each request received so far.
func (f *fakeController) pathsSeen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...)
}

// runCLI runs the command line against a controller, returning stdout and
// the error.
func runCLI(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	t.Setenv("LIGHTPATH_CONTROLLER", url)
	t.Setenv("LIGHTPATH_CONTROLLER_TOKEN", "tok")
	var out, errb bytes.Buffer
	root := newRoot(&out, &errb)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestCreateRetriesOnce checks a create whose answer is lost is sent again
// with the same idempotency key, and only once more.
func TestCreateRetriesOnce(t *testing.T) {
	withUTC(t)
	f := &fakeController{handle: func(w http.ResponseWriter, r *http.Request, n int) bool {
		if n == 1 {
			// The controller got it, but the answer never arrives.
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return true
		}
		return false
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	out, err := runCLI(t, srv.URL, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "500M", "--start", "now", "--duration", "2h", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.bodiesSeen()) != 2 {
		t.Fatalf("%d requests, want 2", len(f.bodiesSeen()))
	}
	k1, k2 := f.bodiesSeen()[0]["idempotency_key"], f.bodiesSeen()[1]["idempotency_key"]
	if k1 == nil || k1 == "" || k1 != k2 {
		t.Errorf("idempotency keys %v and %v, want the same one", k1, k2)
	}
	if f.bodiesSeen()[0]["start"] != f.bodiesSeen()[1]["start"] || f.bodiesSeen()[0]["start"] == nil {
		t.Errorf("starts %v and %v: a retry must send the same request", f.bodiesSeen()[0]["start"], f.bodiesSeen()[1]["start"])
	}
	if f.bodiesSeen()[0]["bandwidth_bps"] != 5e8 || f.bodiesSeen()[0]["duration"] != "2h0m0s" {
		t.Errorf("body %v", f.bodiesSeen()[0])
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(out), &line); err != nil || line["id"] != "r-1" || line["created"] != true || line["bandwidth_bps"] != 5e8 {
		t.Errorf("--json line %q (%v)", out, err)
	}

	// The first try hung until its start had passed: the second is refused
	// for its start (so nothing was booked), and a third asks from now.
	f4 := &fakeController{handle: func(w http.ResponseWriter, r *http.Request, n int) bool {
		switch n {
		case 1:
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return true
		case 2:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"code":"invalid","field":"start","message":"start is in the past"}}`)
			return true
		}
		return false
	}}
	srv4 := httptest.NewServer(f4)
	defer srv4.Close()
	if _, err := runCLI(t, srv4.URL, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "500M", "--duration", "2h"); err != nil {
		t.Errorf("create after a start went by: %v", err)
	}
	if bs := f4.bodiesSeen(); len(bs) != 3 || bs[2]["idempotency_key"] != bs[0]["idempotency_key"] || bs[2]["start"].(string) < bs[0]["start"].(string) {
		t.Errorf("requests after a start went by: %v", bs)
	}
	// Not so for a start the user gave.
	f4.mu.Lock()
	f4.bodies, f4.paths = nil, nil
	f4.mu.Unlock()
	if _, err := runCLI(t, srv4.URL, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "500M", "--start", "+1h", "--duration", "2h"); err == nil {
		t.Error("a refused start was sent again")
	}

	// Two lost answers: the second failure is reported.
	f2 := &fakeController{handle: func(w http.ResponseWriter, r *http.Request, n int) bool {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return true
	}}
	srv2 := httptest.NewServer(f2)
	defer srv2.Close()
	_, err = runCLI(t, srv2.URL, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "500M", "--duration", "2h", "--idempotency-key", "mine")
	if err == nil || len(f2.bodiesSeen()) != 2 || f2.bodiesSeen()[1]["idempotency_key"] != "mine" {
		t.Errorf("error %v after %d requests (%v)", err, len(f2.bodiesSeen()), f2.bodiesSeen())
	}

	// A refusal is not retried.
	f3 := &fakeController{handle: func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(409)
		io.WriteString(w, `{"error":{"code":"capacity","message":"does not fit","alternatives":{"widest":{"algorithm":"w","bandwidth_bps":400000000}}}}`)
		return true
	}}
	srv3 := httptest.NewServer(f3)
	defer srv3.Close()
	out, err = runCLI(t, srv3.URL, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "500M", "--duration", "2h", "--json")
	if err == nil || err.Error() != "reserve create: does not fit; widest in that slot: 400 Mbit/s" || len(f3.bodiesSeen()) != 1 {
		t.Errorf("refusal: %v after %d requests", err, len(f3.bodiesSeen()))
	}
	var eb apiv1.ErrorBody
	if json.Unmarshal([]byte(out), &eb) != nil || eb.Error.Alternatives == nil || eb.Error.Alternatives.Widest.Bandwidth != 400e6 {
		t.Errorf("--json refusal line %q", out)
	}
}

func TestCreateRequests(t *testing.T) {
	withUTC(t)
	for _, tc := range []struct {
		name string
		args []string
		want map[string]any // fields of the body sent
		err  string
	}{
		{"end", []string{"--bandwidth", "1G", "--start", "2030-01-01T00:00:00Z", "--end", "2030-01-01T02:00:00Z", "--project", "cms", "--path", "l1,wan"},
			map[string]any{"bandwidth_bps": 1e9, "start": "2030-01-01T00:00:00Z", "end": "2030-01-01T02:00:00Z", "project": "cms", "path": []any{"l1", "wan"}}, ""},
		{"hold default", []string{"--bandwidth", "1G", "--duration", "1h", "--hold"}, map[string]any{"hold": "15m0s"}, ""},
		{"hold given", []string{"--bandwidth", "1G", "--duration", "1h", "--hold=5m"}, map[string]any{"hold": "5m0s"}, ""},
		{"flow", []string{"--bandwidth", "1G", "--duration", "1h", "--flow", "tcp 198.18.1.1 > 198.18.2.1:7070"}, map[string]any{"flow_spec": "tcp 198.18.1.1 > 198.18.2.1:7070"}, ""},
		{"completion", []string{"--size", "2TB", "--deadline", "2030-01-02T00:00:00Z", "--bandwidth", "5G"},
			map[string]any{"size_bytes": 2e12, "deadline": "2030-01-02T00:00:00Z", "bandwidth_bps": 5e9}, ""},
		{"completion at any rate", []string{"--size", "1TiB"}, map[string]any{"size_bytes": float64(1 << 40), "bandwidth_bps": 0.0}, ""},
		{"no bandwidth", []string{"--duration", "1h"}, nil, "--bandwidth is required"},
		{"zero bandwidth", []string{"--bandwidth", "0", "--duration", "1h"}, nil, "above zero"},
		{"bytes for bits", []string{"--bandwidth", "1GB", "--duration", "1h"}, nil, "bits per second"},
		{"no window", []string{"--bandwidth", "1G"}, nil, "--duration D or --end"},
		{"size and duration", []string{"--size", "1GB", "--duration", "1h"}, nil, "--size"},
		{"deadline without size", []string{"--bandwidth", "1G", "--duration", "1h", "--deadline", "+2h"}, nil, "--deadline goes with --size"},
		{"bad flow", []string{"--bandwidth", "1G", "--duration", "1h", "--flow", "tcp nowhere"}, nil, "--flow"},
		{"bad hold", []string{"--bandwidth", "1G", "--duration", "1h", "--hold=soon"}, nil, "--hold"},
		{"bad time", []string{"--bandwidth", "1G", "--duration", "1h", "--start", "tomorrow"}, nil, "--start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeController{}
			srv := httptest.NewServer(f)
			defer srv.Close()
			_, err := runCLI(t, srv.URL, append([]string{"reserve", "create", "--from", "a1", "--to", "b1"}, tc.args...)...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "reserve create: ") {
					t.Errorf("error %v, want one mentioning %q", err, tc.err)
				}
				if len(f.bodiesSeen()) != 0 {
					t.Errorf("a request was sent: %v", f.bodiesSeen())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				got, _ := json.Marshal(f.bodiesSeen()[0][k])
				want, _ := json.Marshal(v)
				if string(got) != string(want) {
					t.Errorf("%s = %s, want %s (body %v)", k, got, want, f.bodiesSeen()[0])
				}
			}
		})
	}
}

// TestModifySendsVersion checks modify reads the reservation and sends the
// version it read, with the end computed from --duration.
func TestModifySendsVersion(t *testing.T) {
	f := &fakeController{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	if _, err := runCLI(t, srv.URL, "reserve", "modify", "r-1", "--duration", "3h", "--bandwidth", "600M"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.pathsSeen(), ",") != "GET /api/v1/reservations/r-1,PATCH /api/v1/reservations/r-1" {
		t.Fatalf("requests %v", f.pathsSeen())
	}
	b := f.bodiesSeen()[1]
	if b["version"] != 3.0 || b["end"] != "2026-05-01T17:00:00Z" || b["bandwidth_bps"] != 6e8 || b["start"] != nil {
		t.Errorf("PATCH body %v", b)
	}
	if _, err := runCLI(t, srv.URL, "reserve", "modify", "r-1"); err == nil || !strings.Contains(err.Error(), "nothing to change") {
		t.Errorf("modify without changes: %v", err)
	}
	if _, err := runCLI(t, srv.URL, "reserve", "modify", "r-1", "--path", "a,b", "--reroute"); err == nil || !strings.Contains(err.Error(), "exclude") {
		t.Errorf("--path with --reroute: %v", err)
	}
	if _, err := runCLI(t, srv.URL, "reserve", "show", "r-9"); err == nil || err.Error() != "reserve show: no such thing" {
		t.Errorf("show of a missing reservation: %v", err)
	}
}

func TestListJSON(t *testing.T) {
	f := &fakeController{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	out, err := runCLI(t, srv.URL, "reserve", "list", "--state", "active,held", "--json")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 || lines[2] != `{"summary":true,"count":2}` {
		t.Fatalf("list --json:\n%s", out)
	}
	var r reserve.Reservation
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil || r.ID != "r-1" || r.Bandwidth != 500e6 || !r.Start.Equal(cliT0) {
		t.Errorf("first line %s (%v)", lines[0], err)
	}
	if _, err := runCLI(t, srv.URL, "reserve", "list", "--state", "RUNNING"); err == nil || !strings.Contains(err.Error(), "--state") {
		t.Errorf("bad state: %v", err)
	}
}

// TestTokenOut checks token create --out writes the secret alone, mode
// 0600, and prints no secret.
func TestTokenOut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(apiv1.Token{ID: "t-1", User: "alice", Secret: "lp_s3cret", CreatedAt: cliT0})
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "alice.token")
	os.WriteFile(file, []byte("old"), 0o644)
	out, err := runCLI(t, srv.URL, "user", "token", "create", "alice", "--out", file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "lp_s3cret") || !strings.Contains(out, file) {
		t.Errorf("stdout %q", out)
	}
	b, err := os.ReadFile(file)
	fi, _ := os.Stat(file)
	if err != nil || string(b) != "lp_s3cret\n" || fi.Mode().Perm() != 0o600 {
		t.Errorf("file %q (%v), mode %v", b, err, fi.Mode())
	}
	out, err = runCLI(t, srv.URL, "user", "token", "create", "alice")
	if err != nil || out != "lp_s3cret\n" {
		t.Errorf("stdout %q, %v", out, err)
	}
	if _, err := runCLI(t, srv.URL, "user", "token", "create", "alice", "--out", filepath.Join(t.TempDir(), "no", "dir", "f")); err == nil {
		t.Error("--out into a missing directory was accepted")
	}
	if _, err := runCLI(t, srv.URL, "user", "add", "bob", "--role", "root"); err == nil || !strings.Contains(err.Error(), "user, operator, admin, agent") {
		t.Errorf("bad role: %v", err)
	}
}

// TestControllerFlags checks where the CLI looks for the controller and
// the token.
func TestControllerFlags(t *testing.T) {
	var auth string
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"user":"alice","role":"user","projects":[]}`)
	}))
	defer srv.Close()
	tokFile := filepath.Join(t.TempDir(), "tok")
	os.WriteFile(tokFile, []byte("  from-file\n"), 0o600)
	if _, err := runCLI(t, srv.URL, "user", "whoami", "--controller-token-file", tokFile); err != nil || auth != "Bearer from-file" {
		t.Errorf("token file: %v, Authorization %q", err, auth)
	}
	if _, err := runCLI(t, srv.URL, "user", "whoami"); err != nil || auth != "Bearer tok" {
		t.Errorf("token env: %v, Authorization %q", err, auth)
	}
	if _, err := runCLI(t, "http://127.0.0.1:1", "user", "whoami", "--controller", srv.URL); err != nil || hits != 3 {
		t.Errorf("--controller over the environment: %v (%d hits)", err, hits)
	}
	if _, err := runCLI(t, srv.URL, "user", "whoami", "--controller", "ftp://x"); err == nil || !strings.Contains(err.Error(), "http://HOST:PORT") {
		t.Errorf("bad --controller: %v", err)
	}
	if _, err := runCLI(t, srv.URL, "user", "whoami", "--controller-token-file", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "--controller-token-file") {
		t.Errorf("missing token file: %v", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := runCLI(t, "http://"+addr, "reserve", "list"); err == nil || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "\n") {
		t.Errorf("no controller: %v", err)
	}
}

// TestWatchResumes checks watch resumes a broken event stream after the
// last event it read, and ends when the reservation reaches the state.
func TestWatchResumes(t *testing.T) {
	withUTC(t)
	reserved := tableResv[0]
	reserved.State, reserved.Degraded = reserve.StateReserved, false
	active := reserved
	active.State = reserve.StateActive
	var mu sync.Mutex
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/reservations/r-1":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(apiv1.ReservationResponse{Reservation: reserved})
		case "/api/v1/events":
			mu.Lock()
			lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
			n := len(lastIDs)
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			ev := apiv1.Event{Seq: uint64(n), Kind: "reservation", Reservation: &reserved,
				Transition: &reserve.Transition{From: reserve.StateReserved, To: reserve.StateReserved, Event: reserve.EventModify, At: cliT0, By: "alice", Version: 2}}
			if n == 2 {
				ev.Reservation = &active
				ev.Transition = &reserve.Transition{From: reserve.StateReserved, To: reserve.StateActive, Event: reserve.EventStartReached, At: cliT0, By: "controller", Version: 3}
			}
			b, _ := json.Marshal(ev)
			// An event for someone else's reservation is skipped.
			io.WriteString(w, "id: 0\nevent: reservation\ndata: {\"seq\":0,\"kind\":\"reservation\",\"reservation\":{\"id\":\"r-other\"}}\n\n")
			io.WriteString(w, "id: "+strconv.Itoa(n)+"\nevent: reservation\ndata: "+string(b)+"\n\n")
			// The first stream then breaks; the second stays open.
			if n == 2 {
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}
		default:
			w.WriteHeader(404)
		}
	}))
	defer srv.Close()
	out, err := runCLI(t, srv.URL, "reserve", "watch", "r-1", "--until", "ACTIVE", "--timeout", "20s")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "r-1  RESERVED  modify by alice") || !strings.Contains(lines[1], "r-1  RESERVED → ACTIVE  start-reached by controller") {
		t.Errorf("watch printed:\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lastIDs) != 2 || lastIDs[0] != "" || lastIDs[1] != "1" {
		t.Errorf("Last-Event-ID sent: %q", lastIDs)
	}
}
