package client

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/retry"
)

// seen is one request as the fake controller received it.
type seen struct {
	Method, Path, Query, Auth, ContentType string
	Body                                   map[string]any
}

// fakeAPI is a controller that answers every route with a canned body and
// records what it was sent.
type fakeAPI struct {
	mu   sync.Mutex
	reqs []seen
	// answers maps "METHOD /path" to a status and a body.
	answers map[string]answer
}

type answer struct {
	status int
	body   any
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type")}
	if b, _ := io.ReadAll(r.Body); len(b) > 0 {
		if err := json.Unmarshal(b, &s.Body); err != nil {
			http.Error(w, "bad json", 400)
			return
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, s)
	a, ok := f.answers[r.Method+" "+r.URL.Path]
	f.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		json.NewEncoder(w).Encode(apiv1.ErrorBody{Error: apiv1.ErrorDetail{Code: apiv1.CodeNotFound, Message: "no route " + r.URL.Path}})
		return
	}
	if a.status == 0 {
		a.status = 200
	}
	if a.body == nil {
		w.WriteHeader(a.status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	if s, ok := a.body.(string); ok {
		io.WriteString(w, s)
		return
	}
	json.NewEncoder(w).Encode(a.body)
}

func (f *fakeAPI) last() seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

var (
	t0   = time.Date(2026, 5, 1, 14, 0, 0, 0, time.UTC)
	resv = reserve.Reservation{
		ID: "r-1", Owner: "alice", From: "a1", To: "b1", Bandwidth: 500e6, Start: t0, End: t0.Add(2 * time.Hour),
		Path:  []reserve.PathHop{{Link: "l1", From: "a1", To: "ra"}, {Link: "wan", From: "ra", To: "rb"}, {Link: "l2", From: "rb", To: "b1"}},
		State: reserve.StateReserved, Version: 1, CreatedAt: t0.Add(-time.Hour),
		History: []reserve.Transition{{To: reserve.StateReserved, Event: reserve.EventCreate, At: t0.Add(-time.Hour), By: "alice", Why: "created and committed", Version: 1}},
	}
	excl = reserve.Exclusive{ID: "x-1", Owner: "alice", Site: "site-a", Nodes: []string{"a1", "ra"}, Start: t0, End: t0.Add(time.Hour), State: reserve.StateReserved, Version: 1}
)

func newFake() *fakeAPI {
	return &fakeAPI{answers: map[string]answer{
		"GET /api/v1/health":                   {body: apiv1.Health{Status: "ok", SchemaVersion: 2, Store: "sqlite"}},
		"GET /api/v1/openapi.json":             {body: map[string]any{"openapi": "3.1.0"}},
		"GET /api/v1/whoami":                   {body: apiv1.Whoami{User: "alice", Role: "user", Projects: []string{"cms"}}},
		"GET /api/v1/topology":                 {body: apiv1.Topology{Name: "two-site"}},
		"PUT /api/v1/topology":                 {body: apiv1.Topology{Name: "three-site"}},
		"GET /api/v1/timeline":                 {body: apiv1.Timeline{From: t0, To: t0.Add(time.Hour)}},
		"POST /api/v1/find":                    {body: apiv1.Slot{Algorithm: "earliest", Bandwidth: 500e6, Start: t0, End: t0.Add(time.Hour), Path: resv.Path}},
		"GET /api/v1/reservations":             {body: apiv1.ReservationList{Reservations: []reserve.Reservation{resv, resv}}},
		"POST /api/v1/reservations":            {status: 201, body: apiv1.ReservationResponse{Reservation: resv, Algorithm: "fixed-bfs", Created: true}},
		"GET /api/v1/reservations/r-1":         {body: resv},
		"PATCH /api/v1/reservations/r-1":       {body: apiv1.ReservationResponse{Reservation: resv}},
		"POST /api/v1/reservations/r-1/commit": {body: resv},
		"POST /api/v1/reservations/r-1/cancel": {body: resv},
		"GET /api/v1/exclusives":               {body: apiv1.ExclusiveList{Exclusives: []reserve.Exclusive{excl}}},
		"POST /api/v1/exclusives":              {status: 201, body: excl},
		"POST /api/v1/exclusives/x-1/cancel":   {body: map[string]any{"exclusive": excl}},
		"GET /api/v1/users":                    {body: apiv1.UserList{Users: []apiv1.User{{Name: "alice", Role: "user"}}}},
		"POST /api/v1/users":                   {status: 201, body: apiv1.User{Name: "bob", Role: "operator"}},
		"POST /api/v1/users/bob/tokens":        {status: 201, body: apiv1.Token{ID: "t-1", User: "bob", Secret: "s3cret"}},
		"GET /api/v1/users/bob/tokens":         {body: apiv1.TokenList{Tokens: []apiv1.Token{{ID: "t-1", User: "bob"}}}},
		"DELETE /api/v1/tokens/t-1":            {status: 204},
		"GET /api/v1/policy":                   {body: apiv1.Policy{}},
		"PUT /api/v1/policy":                   {body: apiv1.Policy{}},
		"GET /api/v1/audit":                    {body: apiv1.AuditList{Entries: []apiv1.AuditEntry{{Seq: 1, Who: "admin", What: "user add"}}}},
	}}
}

// TestRoutes calls every method against the fake controller and checks the
// request it sent and the answer it decoded.
func TestRoutes(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := New(srv.URL, "tok", WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		call   func() (any, error)
		method string
		path   string
		query  string
		body   map[string]any
		want   any
	}{
		{"health", func() (any, error) { return c.Health(ctx) }, "GET", "/api/v1/health", "", nil, apiv1.Health{Status: "ok", SchemaVersion: 2, Store: "sqlite"}},
		{"openapi", func() (any, error) {
			d, err := c.OpenAPI(ctx)
			return strings.TrimSpace(string(d)), err
		}, "GET", "/api/v1/openapi.json", "", nil, `{"openapi":"3.1.0"}`},
		{"whoami", func() (any, error) { return c.Whoami(ctx) }, "GET", "/api/v1/whoami", "", nil, apiv1.Whoami{User: "alice", Role: "user", Projects: []string{"cms"}}},
		{"topology", func() (any, error) { return c.Topology(ctx) }, "GET", "/api/v1/topology", "", nil, apiv1.Topology{Name: "two-site"}},
		{"reload", func() (any, error) { return c.ReloadTopology(ctx, "name: x\n") }, "PUT", "/api/v1/topology", "", map[string]any{"yaml": "name: x\n"}, apiv1.Topology{Name: "three-site"}},
		{"timeline", func() (any, error) { return c.Timeline(ctx, t0, t0.Add(time.Hour), "wan") }, "GET", "/api/v1/timeline",
			"from=2026-05-01T14%3A00%3A00Z&link=wan&to=2026-05-01T15%3A00%3A00Z", nil, apiv1.Timeline{From: t0, To: t0.Add(time.Hour)}},
		{"find", func() (any, error) {
			return c.Find(ctx, apiv1.FindRequest{Mode: apiv1.FindEarliest, From: "a1", To: "b1", Bandwidth: 500e6, Duration: "1h0m0s"})
		}, "POST", "/api/v1/find", "", map[string]any{"mode": "earliest", "from": "a1", "to": "b1", "bandwidth_bps": 5e8, "duration": "1h0m0s"},
			apiv1.Slot{Algorithm: "earliest", Bandwidth: 500e6, Start: t0, End: t0.Add(time.Hour), Path: resv.Path}},
		{"list", func() (any, error) {
			return c.ListReservations(ctx, ListOptions{Owner: "alice", States: []string{"HELD", "ACTIVE"}, Node: "a1", Project: "cms"})
		}, "GET", "/api/v1/reservations", "node=a1&owner=alice&project=cms&state=HELD&state=ACTIVE", nil, []reserve.Reservation{resv, resv}},
		{"create", func() (any, error) {
			return c.CreateReservation(ctx, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 500e6, Start: t0, Duration: "2h0m0s", IdempotencyKey: "k"})
		}, "POST", "/api/v1/reservations", "", map[string]any{"from": "a1", "to": "b1", "bandwidth_bps": 5e8, "start": "2026-05-01T14:00:00Z", "duration": "2h0m0s", "idempotency_key": "k"},
			apiv1.ReservationResponse{Reservation: resv, Algorithm: "fixed-bfs", Created: true}},
		{"show (bare body)", func() (any, error) { return c.Reservation(ctx, "r-1") }, "GET", "/api/v1/reservations/r-1", "", nil, resv},
		{"modify (wrapped body)", func() (any, error) {
			return c.ModifyReservation(ctx, "r-1", apiv1.ModifyRequest{Version: 1, Bandwidth: 1e9})
		}, "PATCH", "/api/v1/reservations/r-1", "", map[string]any{"version": 1.0, "bandwidth_bps": 1e9}, resv},
		{"commit", func() (any, error) { return c.CommitReservation(ctx, "r-1", apiv1.ActionRequest{}) }, "POST", "/api/v1/reservations/r-1/commit", "", map[string]any{}, resv},
		{"cancel", func() (any, error) {
			return c.CancelReservation(ctx, "r-1", apiv1.ActionRequest{Reason: "done early"})
		}, "POST", "/api/v1/reservations/r-1/cancel", "", map[string]any{"reason": "done early"}, resv},
		{"exclusives", func() (any, error) { return c.Exclusives(ctx, ListOptions{Node: "a1"}) }, "GET", "/api/v1/exclusives", "node=a1", nil, []reserve.Exclusive{excl}},
		{"exclusive create", func() (any, error) {
			return c.CreateExclusive(ctx, apiv1.ExclusiveRequest{Site: "site-a", Start: t0, Duration: "1h0m0s"})
		}, "POST", "/api/v1/exclusives", "", map[string]any{"site": "site-a", "start": "2026-05-01T14:00:00Z", "duration": "1h0m0s"}, excl},
		{"exclusive cancel (wrapped body)", func() (any, error) { return c.CancelExclusive(ctx, "x-1", apiv1.ActionRequest{}) }, "POST", "/api/v1/exclusives/x-1/cancel", "", map[string]any{}, excl},
		{"users", func() (any, error) { return c.Users(ctx) }, "GET", "/api/v1/users", "", nil, []apiv1.User{{Name: "alice", Role: "user"}}},
		{"user add", func() (any, error) {
			return c.AddUser(ctx, apiv1.UserRequest{Name: "bob", Role: "operator", Projects: []string{"cms"}})
		}, "POST", "/api/v1/users", "", map[string]any{"name": "bob", "role": "operator", "projects": []any{"cms"}}, apiv1.User{Name: "bob", Role: "operator"}},
		{"token create", func() (any, error) { return c.CreateToken(ctx, "bob", apiv1.TokenRequest{ExpiresIn: "720h"}) }, "POST", "/api/v1/users/bob/tokens", "",
			map[string]any{"expires_in": "720h"}, apiv1.Token{ID: "t-1", User: "bob", Secret: "s3cret"}},
		{"tokens", func() (any, error) { return c.Tokens(ctx, "bob") }, "GET", "/api/v1/users/bob/tokens", "", nil, []apiv1.Token{{ID: "t-1", User: "bob"}}},
		{"revoke", func() (any, error) { return nil, c.RevokeToken(ctx, "t-1") }, "DELETE", "/api/v1/tokens/t-1", "", nil, nil},
		{"policy", func() (any, error) { return c.Policy(ctx) }, "GET", "/api/v1/policy", "", nil, apiv1.Policy{}},
		{"audit", func() (any, error) { return c.Audit(ctx, AuditOptions{Who: "admin", Limit: 5}) }, "GET", "/api/v1/audit", "limit=5&who=admin", nil,
			[]apiv1.AuditEntry{{Seq: 1, Who: "admin", What: "user add"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil && !equalJSON(t, got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
			s := f.last()
			if s.Method != tc.method || s.Path != tc.path || s.Query != tc.query {
				t.Errorf("sent %s %s?%s, want %s %s?%s", s.Method, s.Path, s.Query, tc.method, tc.path, tc.query)
			}
			if s.Auth != "Bearer tok" {
				t.Errorf("Authorization %q", s.Auth)
			}
			if tc.body != nil {
				if s.ContentType != "application/json" {
					t.Errorf("Content-Type %q", s.ContentType)
				}
				if !reflect.DeepEqual(s.Body, tc.body) {
					t.Errorf("body %v, want %v", s.Body, tc.body)
				}
			}
		})
	}
}

// equalJSON compares two values by their JSON, which is what the API
// promises (times compare by instant, nil and empty slices alike).
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

func TestNewURLs(t *testing.T) {
	for _, tc := range []struct {
		in, base string
		err      string
	}{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080", ""},
		{"https://ctl.example.org:8443/lightpath/", "https://ctl.example.org:8443/lightpath", ""},
		{"unix:/run/lightpath/x/controller.sock", "http://unix", ""},
		{"unix:///run/x.sock", "http://unix", ""},
		{"unix:", "", "unix:PATH"},
		{"127.0.0.1:8080", "", "http://HOST:PORT"},
		{"ftp://x:1", "", "http://HOST:PORT"},
		{"http://", "", "http://HOST:PORT"},
		{"http://u:p@x:1", "", "no user"},
	} {
		c, err := New(tc.in, "")
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("New(%q) error %v, want one mentioning %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("New(%q): %v", tc.in, err)
		case tc.err == "" && c.eps[0].base != tc.base:
			t.Errorf("New(%q) base %q, want %q", tc.in, c.eps[0].base, tc.base)
		}
	}
	if _, err := New("http://x:1", "", WithCAFile("/nonexistent")); err == nil {
		t.Error("a CA file with an http URL was accepted")
	}
}

func TestAPIErrors(t *testing.T) {
	f := newFake()
	f.answers["POST /api/v1/reservations"] = answer{409, apiv1.ErrorBody{Error: apiv1.ErrorDetail{
		Code: apiv1.CodeCapacity, Message: "500 Mbit/s does not fit from a1 to b1 in that slot",
		Alternatives: &apiv1.Alternatives{
			Earliest: &apiv1.Slot{Algorithm: "earliest", Bandwidth: 500e6, Start: t0.Add(time.Hour), End: t0.Add(3 * time.Hour), Path: resv.Path[:2]},
			Widest:   &apiv1.Slot{Algorithm: "widest", Bandwidth: 400e6, Start: t0, End: t0.Add(2 * time.Hour)},
		}}}}
	f.answers["GET /api/v1/whoami"] = answer{401, apiv1.ErrorBody{Error: apiv1.ErrorDetail{Code: apiv1.CodeUnauthorized, Message: "token revoked"}}}
	f.answers["GET /api/v1/users"] = answer{502, "<html>Bad Gateway</html>"}
	f.answers["PUT /api/v1/topology"] = answer{409, apiv1.ErrorBody{Error: apiv1.ErrorDetail{Code: apiv1.CodeConflict, Message: "reload would strand 2 reservations", Stranded: []string{"r-1", "r-2"}}}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, _ := New(srv.URL, "")
	ctx := context.Background()

	_, err := c.CreateReservation(ctx, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 500e6})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 409 || Code(err) != apiv1.CodeCapacity {
		t.Fatalf("capacity refusal: %#v", err)
	}
	want := "500 Mbit/s does not fit from a1 to b1 in that slot\n" +
		"earliest at that bandwidth: 2026-05-01T15:00:00Z → 2026-05-01T17:00:00Z via l1,wan\n" +
		"widest in that slot: 400 Mbit/s"
	if err.Error() != want {
		t.Errorf("capacity error:\n%s\nwant:\n%s", err, want)
	}
	if retry.IsTransient(err) {
		t.Error("a capacity refusal is retryable")
	}
	if f.last().Auth != "" {
		t.Errorf("sent Authorization %q without a token", f.last().Auth)
	}

	_, err = c.Whoami(ctx)
	if Code(err) != apiv1.CodeUnauthorized || err.Error() != "token revoked" {
		t.Errorf("401: %v (code %q)", err, Code(err))
	}
	_, err = c.Users(ctx)
	if !errors.As(err, &ae) || ae.Status != 502 || !strings.Contains(err.Error(), "502 Bad Gateway: <html>Bad Gateway</html>") || !retry.IsTransient(err) {
		t.Errorf("502 without a JSON body: %v", err)
	}
	_, err = c.ReloadTopology(ctx, "x")
	if err == nil || !strings.HasSuffix(err.Error(), "\nstranded: r-1, r-2") {
		t.Errorf("stranded: %v", err)
	}
	_, err = c.Reservation(ctx, "nope")
	if Code(err) != apiv1.CodeNotFound {
		t.Errorf("404: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, _ := New("http://"+addr, "tok")
	_, err = c.Health(context.Background())
	var ue *UnreachableError
	if !errors.As(err, &ue) || !retry.IsTransient(err) || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), addr) {
		t.Errorf("refused: %v", err)
	}
	if strings.Contains(err.Error(), `Get "`) {
		t.Errorf("error repeats the request: %v", err)
	}

	// A controller that answers too late is unreachable too (and retryable).
	// It answers only once the client has given up (its request ended).
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	c, _ = New(slow.URL, "", WithTimeout(50*time.Millisecond))
	if _, err := c.Health(context.Background()); !errors.As(err, &ue) || !retry.IsTransient(err) {
		t.Errorf("timeout: %v", err)
	}
	// A cancelled context is not.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Health(ctx); !errors.Is(err, context.Canceled) || retry.IsTransient(err) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestUnixSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "lpc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "controller.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	srv := httptest.NewUnstartedServer(f)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	c, err := New("unix:"+sock, "tok")
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Whoami(context.Background())
	if err != nil || w.User != "alice" {
		t.Fatalf("whoami over a unix socket: %+v, %v", w, err)
	}
	if s := f.last(); s.Path != "/api/v1/whoami" || s.Auth != "Bearer tok" {
		t.Errorf("sent %+v", s)
	}
	c, _ = New("unix:"+filepath.Join(dir, "none.sock"), "tok")
	if _, err := c.Health(context.Background()); !retry.IsTransient(err) || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("missing socket: %v", err)
	}
}

func TestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(newFake())
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := New(srv.URL, "tok", WithCAFile(caFile))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := c.Health(context.Background()); err != nil || h.Status != "ok" {
		t.Fatalf("health over TLS with the CA: %+v, %v", h, err)
	}
	c, _ = New(srv.URL, "tok")
	if _, err := c.Health(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("TLS without the CA: %v", err)
	}
	notPEM := filepath.Join(t.TempDir(), "x")
	os.WriteFile(notPEM, []byte("hello"), 0o644)
	if _, err := New(srv.URL, "", WithCAFile(notPEM)); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Errorf("CA file without PEM: %v", err)
	}
}

func TestReadSSE(t *testing.T) {
	in := ": keep-alive\n\n" +
		"event: reservation\nid: 7\ndata: {\"a\":1}\n\n" +
		"data: line1\r\ndata: line2\r\n\r\n" +
		"event: exclusive\ndata:{\"b\":2}\nretry: 1000\n\n" +
		"event: ignored\n\n" +
		"data: unterminated"
	var got []sseFrame
	err := readSSE(strings.NewReader(in), func(f sseFrame) error { got = append(got, f); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []sseFrame{
		{event: "reservation", data: `{"a":1}`, id: "7"},
		{event: "message", data: "line1\nline2", id: "7"},
		{event: "exclusive", data: `{"b":2}`, id: "7"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestEvents(t *testing.T) {
	release := make(chan struct{})
	var lastID, query, auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastID, query, auth = r.Header.Get("Last-Event-ID"), r.URL.RawQuery, r.Header.Get("Authorization")
		if r.URL.Path != "/api/v1/events" {
			w.WriteHeader(404)
			return
		}
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":"unauthorized","message":"no token"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		r1 := resv
		tr := reserve.Transition{From: reserve.StateReserved, To: reserve.StateActive, Event: reserve.EventStartReached, At: t0, By: "controller", Version: 2}
		for i, ev := range []apiv1.Event{
			{Seq: 1, Kind: "reservation", Reservation: &r1, Transition: &tr},
			{Seq: 2, Exclusive: &excl},
		} {
			b, _ := json.Marshal(ev)
			kind := []string{"reservation", "exclusive"}[i]
			fmt.Fprintf(w, ": ping\n\nevent: %s\nid: %d\ndata: %s\n\n", kind, ev.Seq, b)
			fl.Flush()
		}
		<-release
	}))
	defer srv.Close()
	defer close(release)

	c, _ := New(srv.URL, "", WithTimeout(50*time.Millisecond))
	if _, err := c.Events(context.Background(), "r-1"); Code(err) != apiv1.CodeUnauthorized {
		t.Errorf("events without a token: %v", err)
	}

	// The stream outlives the client's request timeout.
	c, _ = New(srv.URL, "tok", WithTimeout(50*time.Millisecond))
	s, err := c.EventsAfter(context.Background(), "r-1", "0")
	if err != nil {
		t.Fatal(err)
	}
	if query != "id=r-1" || lastID != "0" || auth != "Bearer tok" {
		t.Errorf("sent query %q, Last-Event-ID %q, Authorization %q", query, lastID, auth)
	}
	time.Sleep(100 * time.Millisecond)
	e1 := <-s.C
	e2 := <-s.C
	if e1.Seq != 1 || e1.Reservation == nil || e1.Reservation.ID != "r-1" || e1.Transition.To != reserve.StateActive {
		t.Errorf("first event %+v", e1)
	}
	if e2.Seq != 2 || e2.Kind != "exclusive" || e2.Exclusive == nil || e2.Exclusive.ID != "x-1" {
		t.Errorf("second event %+v (the kind comes from the event: line when the data has none)", e2)
	}
	if s.LastEventID() != "2" {
		t.Errorf("last event id %q", s.LastEventID())
	}
	s.Close()
	if _, ok := <-s.C; ok {
		t.Error("an event after Close")
	}
	if s.Err() != nil {
		t.Errorf("Err after Close: %v", s.Err())
	}
}

// TestEventsEnd checks a stream the controller ends is reported as such.
func TestEventsEnd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: reservation\ndata: {\"seq\":1}\n\nevent: reservation\ndata: {not json}\n\n")
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "tok")
	s, err := c.Events(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range s.C {
		n++
	}
	if n != 1 || s.Err() == nil || !strings.Contains(s.Err().Error(), "decode") {
		t.Errorf("%d events, Err %v", n, s.Err())
	}

	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
	}))
	defer srv2.Close()
	c, _ = New(srv2.URL, "tok")
	s, err = c.Events(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for range s.C {
	}
	if !retry.IsTransient(s.Err()) || !strings.Contains(s.Err().Error(), "closed the event stream") {
		t.Errorf("Err %v", s.Err())
	}
}
