package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/store/pgtest"
	"github.com/lightpath/lightpath/internal/testclock"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, filepath.Join("..", ".."))) }

var t0 = time.Date(2030, 3, 1, 12, 0, 0, 0, time.UTC)

// oneLink is two hosts joined by one 1 Gbit/s link, 90% reservable:
// 900 Mbit/s to book in each direction, and only one path.
const oneLink = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: h1, site: s1}
  - {name: h2, site: s2}
links:
  - {name: l, ends: [h1, h2], rate: 1G, delay: 5ms}
`

const twoSite = `
sites: [{name: site-a}, {name: site-b}]
nodes:
  - {name: a1, site: site-a}
  - {name: ra, site: site-a, role: router}
  - {name: b1, site: site-b}
  - {name: rb, site: site-b, role: router}
links:
  - {name: a1-ra, ends: [a1, ra], rate: 10G}
  - {name: b1-rb, ends: [b1, rb], rate: 10G}
  - {name: wan, ends: [ra, rb], rate: 1G, delay: 25ms}
  - {name: dedicated, ends: [ra, rb], rate: 2G, delay: 25ms, role: dedicated}
`

type env struct {
	t     *testing.T
	url   string // database
	clk   *testclock.Clock
	c     *controller.Controller
	srv   *httptest.Server
	admin string
	dir   string
	// stopFn stops the controller as a crash would not: cleanly, so the
	// test can start another on the same database.
	stopFn func()
	// mon, when set before start, gives the server a monitoring
	// repository, transfers and a rules evaluator (monitoring_test.go).
	mon *monitoring
	// limits and metricsAuth, when set before start, configure the
	// controller's per-user limits and /metrics (limits_test.go).
	limits      controller.Limits
	metricsAuth bool
	h           *api.Server
	svc         *service.Service
}

func sqliteURL(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "c.db") }

func newEnv(t *testing.T, dbURL, topo string) *env {
	t.Helper()
	e := &env{t: t, url: dbURL, clk: testclock.New(t0), dir: t.TempDir()}
	e.start(topo)
	return e
}

// start opens a controller on e's database (again, after stop: a restart).
func (e *env) start(topo string) {
	t := e.t
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	var tp *controller.Topo
	if topo != "" {
		if tp, err = controller.ParseTopology("test.yaml", []byte(topo)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := controller.Open(ctx, controller.Config{Store: st, StoreKind: "test", Topology: tp, Now: e.clk.Now, Limits: e.limits})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	file := filepath.Join(e.dir, "admin.token")
	if _, err := c.BootstrapAdmin(ctx, file); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	e.admin = strings.TrimSpace(string(b))
	e.c = c
	svc, err := service.New(ctx, api.ServiceConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	h := api.NewServer(c, nil, "test", nil).RequireMetricsToken(e.metricsAuth).WithSignIn(file).WithService(svc)
	e.h, e.svc = h, svc
	closeMon := func() {}
	if e.mon != nil {
		closeMon = e.mon.attach(t, h, c, st, e.dir)
	}
	srv := httptest.NewServer(h)
	e.srv = srv
	var once sync.Once
	e.stopFn = func() {
		once.Do(func() {
			srv.Close()
			closeMon()
			c.Close()
			st.Close()
		})
	}
	t.Cleanup(e.stopFn)
}

// do sends a request and decodes the answer into out (when not nil),
// returning the status and the raw body.
func (e *env) do(method, path, token string, body any, out any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.HasPrefix(path, "/api/v1/events") {
		checkResponse(e.t, method, path, resp.StatusCode, raw)
	}
	if out != nil && resp.StatusCode < 300 && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

func (e *env) create(token string, req apiv1.ReservationRequest) (int, apiv1.ReservationResponse, []byte) {
	e.t.Helper()
	var out apiv1.ReservationResponse
	st, raw := e.do("POST", "/api/v1/reservations", token, req, &out)
	return st, out, raw
}

func errorOf(t *testing.T, raw []byte) apiv1.ErrorDetail {
	t.Helper()
	var b apiv1.ErrorBody
	if err := json.Unmarshal(raw, &b); err != nil || b.Error.Code == "" {
		t.Fatalf("not an error body: %s", raw)
	}
	return b.Error
}

func (e *env) user(name, role string, projects ...string) string {
	e.t.Helper()
	if st, raw := e.do("POST", "/api/v1/users", e.admin, apiv1.UserRequest{Name: name, Role: role, Projects: projects}, nil); st != 201 {
		e.t.Fatalf("add user: %d %s", st, raw)
	}
	var tok apiv1.Token
	if st, raw := e.do("POST", "/api/v1/users/"+name+"/tokens", e.admin, apiv1.TokenRequest{}, &tok); st != 201 {
		e.t.Fatalf("create token: %d %s", st, raw)
	}
	return tok.Secret
}

// agent adds a user of role agent bound to node and returns its token.
func (e *env) agent(name, node string) string {
	e.t.Helper()
	if st, raw := e.do("POST", "/api/v1/users", e.admin, apiv1.UserRequest{Name: name, Role: "agent", Node: node}, nil); st != 201 {
		e.t.Fatalf("add agent: %d %s", st, raw)
	}
	var tok apiv1.Token
	if st, raw := e.do("POST", "/api/v1/users/"+name+"/tokens", e.admin, apiv1.TokenRequest{}, &tok); st != 201 {
		e.t.Fatalf("create token: %d %s", st, raw)
	}
	return tok.Secret
}

const mbps = 1_000_000

func TestLifecycle(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	alice := e.user("alice", "user", "cms")

	st, res, raw := e.create(alice, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 500 * mbps, Start: t0.Add(time.Hour), Duration: "2h", Project: "cms",
		FlowSpec: "tcp 198.18.1.1 > 198.18.2.1:7070"})
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, raw)
	}
	r := res.Reservation
	if r.State != reserve.StateReserved || r.Owner != "alice" || r.DSCP == 0 || len(r.Path) != 3 || res.Algorithm != reserve.AlgFixedSlot {
		t.Fatalf("created %+v (algorithm %s)", r, res.Algorithm)
	}
	if r.Path[1].Link != "dedicated" {
		t.Errorf("path %v: want the dedicated link (reserved flows go on the circuit first; DESIGN.md, Path choice)", r.Path)
	}

	// Another user sees nothing of it; an operator does.
	bob := e.user("bob", "user")
	if st, _ := e.do("GET", "/api/v1/reservations/"+r.ID, bob, nil, nil); st != 404 {
		t.Errorf("bob reads alice's reservation: %d, want 404", st)
	}
	var list apiv1.ReservationList
	e.do("GET", "/api/v1/reservations", bob, nil, &list)
	if len(list.Reservations) != 0 {
		t.Errorf("bob lists %d reservations, want 0", len(list.Reservations))
	}
	op := e.user("olga", "operator")
	e.do("GET", "/api/v1/reservations", op, nil, &list)
	if len(list.Reservations) != 1 {
		t.Errorf("operator lists %d reservations, want 1", len(list.Reservations))
	}

	// Modify needs the version; extending works while it fits.
	if st, raw := e.do("PATCH", "/api/v1/reservations/"+r.ID, alice, apiv1.ModifyRequest{End: r.End.Add(time.Hour)}, nil); st != 400 {
		t.Errorf("modify without version: %d %s", st, raw)
	}
	var mod apiv1.ReservationResponse
	if st, raw := e.do("PATCH", "/api/v1/reservations/"+r.ID, alice, apiv1.ModifyRequest{Version: r.Version, End: r.End.Add(time.Hour), Bandwidth: 600 * mbps}, &mod); st != 200 {
		t.Fatalf("modify: %d %s", st, raw)
	}
	if !mod.Reservation.End.Equal(r.End.Add(time.Hour)) || mod.Reservation.Bandwidth != 600*mbps || mod.Reservation.Version != r.Version+1 {
		t.Errorf("modified: %+v", mod.Reservation)
	}
	if st, raw := e.do("PATCH", "/api/v1/reservations/"+r.ID, alice, apiv1.ModifyRequest{Version: r.Version, Bandwidth: 100 * mbps}, nil); st != 409 {
		t.Errorf("modify with a stale version: %d %s", st, raw)
	}
	// Growing past the link (1.8G reservable) is refused and leaves it as it was.
	if st, raw := e.do("PATCH", "/api/v1/reservations/"+r.ID, alice, apiv1.ModifyRequest{Version: mod.Reservation.Version, Bandwidth: 1900 * mbps}, nil); st != 409 || errorOf(t, raw).Code != apiv1.CodeCapacity {
		t.Errorf("modify beyond the link: %d %s", st, raw)
	}
	// Moving it to the routed wan link.
	if st, raw := e.do("PATCH", "/api/v1/reservations/"+r.ID, alice, apiv1.ModifyRequest{Version: mod.Reservation.Version, Path: []string{"a1-ra", "wan", "b1-rb"}}, &mod); st != 200 || mod.Reservation.Path[1].Link != "wan" {
		t.Fatalf("move: %d %s", st, raw)
	}

	// The clock: start activates it, end finishes it.
	e.clk.Add(90 * time.Minute)
	e.c.Tick(context.Background())
	var got apiv1.ReservationResponse
	e.do("GET", "/api/v1/reservations/"+r.ID, alice, nil, &got)
	if got.Reservation.State != reserve.StateActive {
		t.Fatalf("after the start: %s", got.Reservation.State)
	}
	var cancelled apiv1.ReservationResponse
	if st, raw := e.do("POST", "/api/v1/reservations/"+r.ID+"/cancel", alice, apiv1.ActionRequest{Reason: "done early"}, &cancelled); st != 200 {
		t.Fatalf("cancel: %d %s", st, raw)
	}
	if cancelled.Reservation.State != reserve.StateCancelled {
		t.Errorf("cancelled: %s", cancelled.Reservation.State)
	}
	h := cancelled.Reservation.History
	if last := h[len(h)-1]; last.By != "alice" || !strings.Contains(last.Why, "done early") {
		t.Errorf("last transition %+v", last)
	}
	// Its capacity is free again.
	if st, _, raw := e.create(alice, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 1000 * mbps, Start: e.clk.Now(), Duration: "1h", Path: []string{"a1-ra", "wan", "b1-rb"}}); st != 409 {
		t.Errorf("1G over a 1G link, 0.9 reservable: %d %s", st, raw)
	}
	if st, _, raw := e.create(alice, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 900 * mbps, Start: e.clk.Now(), Duration: "1h", Path: []string{"a1-ra", "wan", "b1-rb"}}); st != 201 {
		t.Errorf("the wan link's whole reservable capacity after the cancel: %d %s", st, raw)
	}

	var audit apiv1.AuditList
	if st, raw := e.do("GET", "/api/v1/audit", op, nil, &audit); st != 200 {
		t.Fatalf("audit: %d %s", st, raw)
	}
	var whats []string
	for _, a := range audit.Entries {
		whats = append(whats, a.Who+" "+strings.Fields(a.What)[0])
	}
	for _, want := range []string{"alice create", "alice modify", "controller timed", "alice cancel", "admin add"} {
		if !strings.Contains(strings.Join(whats, "|"), want) {
			t.Errorf("audit lacks %q: %v", want, whats)
		}
	}
	if st, _ := e.do("GET", "/api/v1/audit", alice, nil, nil); st != 403 {
		t.Errorf("a user reads the audit log: %d", st)
	}
}

func TestRefusalOffersAlternatives(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	start := t0.Add(time.Hour)
	if st, _, raw := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 600 * mbps, Start: start, Duration: "2h"}); st != 201 {
		t.Fatalf("first: %d %s", st, raw)
	}
	st, _, raw := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 500 * mbps, Start: start.Add(30 * time.Minute), Duration: "1h"})
	if st != 409 {
		t.Fatalf("over capacity: %d %s", st, raw)
	}
	d := errorOf(t, raw)
	if d.Code != apiv1.CodeCapacity || d.Alternatives == nil || d.Alternatives.Earliest == nil || d.Alternatives.Widest == nil {
		t.Fatalf("refusal %s", raw)
	}
	if !d.Alternatives.Earliest.Start.Equal(start.Add(2*time.Hour)) || d.Alternatives.Earliest.Bandwidth != 500*mbps {
		t.Errorf("earliest alternative %+v, want 500M at %s", d.Alternatives.Earliest, start.Add(2*time.Hour))
	}
	if d.Alternatives.Widest.Bandwidth != 300*mbps {
		t.Errorf("widest alternative %d, want 300M", d.Alternatives.Widest.Bandwidth)
	}
	// Taking the earliest alternative books.
	if st, _, raw := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 500 * mbps, Start: d.Alternatives.Earliest.Start, End: d.Alternatives.Earliest.End}); st != 201 {
		t.Errorf("booking the alternative: %d %s", st, raw)
	}
	// The reverse direction has its own capacity.
	if st, _, raw := e.create(e.admin, apiv1.ReservationRequest{From: "h2", To: "h1", Bandwidth: 900 * mbps, Start: start, Duration: "2h"}); st != 201 {
		t.Errorf("the reverse direction: %d %s", st, raw)
	}
	// OSCARS's request of 1 Tbit/s.
	if st, _, raw := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 1_000_000 * mbps, Start: start.Add(10 * time.Hour), Duration: "1h"}); st != 409 || errorOf(t, raw).Code != apiv1.CodeCapacity {
		t.Errorf("1 Tbit/s: %d %s", st, raw)
	}
}

// TestSameInstant is the OSCARS overbooking case kept as a regression
// test: two equal reservations that start at the same instant must count
// twice at that instant.
func TestSameInstant(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	start := t0.Add(time.Hour)
	req := apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 500 * mbps, Start: start, Duration: "1h"}
	if st, _, raw := e.create(e.admin, req); st != 201 {
		t.Fatalf("first: %d %s", st, raw)
	}
	if st, _, raw := e.create(e.admin, req); st != 409 {
		t.Fatalf("second 500M at the same instant on 900M: %d %s", st, raw)
	}
	req.Bandwidth = 400 * mbps
	if st, _, raw := e.create(e.admin, req); st != 201 {
		t.Fatalf("400M beside 500M on 900M: %d %s", st, raw)
	}
}

func TestIdempotentCreate(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	req := apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 100 * mbps, Start: t0.Add(time.Hour), Duration: "1h", IdempotencyKey: "k1"}
	st1, r1, raw := e.create(e.admin, req)
	if st1 != 201 || !r1.Created {
		t.Fatalf("first: %d %s", st1, raw)
	}
	st2, r2, raw := e.create(e.admin, req)
	if st2 != 200 || r2.Created || r2.Reservation.ID != r1.Reservation.ID {
		t.Fatalf("retry: %d %s", st2, raw)
	}
	req.Bandwidth = 200 * mbps
	if st, _, raw := e.create(e.admin, req); st != 409 || !strings.Contains(string(raw), "idempotency key") {
		t.Fatalf("key reused with another bandwidth: %d %s", st, raw)
	}
	var list apiv1.ReservationList
	e.do("GET", "/api/v1/reservations", e.admin, nil, &list)
	if len(list.Reservations) != 1 {
		t.Errorf("%d reservations stored, want 1", len(list.Reservations))
	}
}

func TestHoldCommitAndExpiry(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	req := apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 800 * mbps, Start: t0.Add(time.Hour), Duration: "1h", Hold: "5m"}
	st, held, raw := e.create(e.admin, req)
	if st != 201 || held.Reservation.State != reserve.StateHeld {
		t.Fatalf("hold: %d %s", st, raw)
	}
	var c apiv1.ReservationResponse
	if st, raw := e.do("POST", "/api/v1/reservations/"+held.Reservation.ID+"/commit", e.admin, nil, &c); st != 200 || c.Reservation.State != reserve.StateReserved {
		t.Fatalf("commit: %d %s", st, raw)
	}
	req.Start = t0.Add(3 * time.Hour)
	_, held2, _ := e.create(e.admin, req)
	e.clk.Add(6 * time.Minute)
	e.c.Tick(context.Background())
	var got apiv1.ReservationResponse
	e.do("GET", "/api/v1/reservations/"+held2.Reservation.ID, e.admin, nil, &got)
	if got.Reservation.State != reserve.StateCancelled || !strings.Contains(got.Reservation.History[len(got.Reservation.History)-1].Why, "hold expired") {
		t.Fatalf("after the hold: %+v", got.Reservation)
	}
	if st, raw := e.do("POST", "/api/v1/reservations/"+held2.Reservation.ID+"/commit", e.admin, nil, nil); st != 409 {
		t.Errorf("commit after expiry: %d %s", st, raw)
	}
	// Its capacity was released.
	if st, _, raw := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 900 * mbps, Start: t0.Add(3 * time.Hour), Duration: "1h"}); st != 201 {
		t.Errorf("after the expired hold: %d %s", st, raw)
	}
	if st, _, raw := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 1, Start: t0.Add(5 * time.Hour), Duration: "1h", Hold: "2h"}); st != 400 {
		t.Errorf("a hold over the maximum: %d %s", st, raw)
	}
}

// TestRestartCatchesUp stops the controller, lets time pass, and checks
// that the new one applied what was due meanwhile before serving.
func TestRestartCatchesUp(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	_, held, _ := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 100 * mbps, Start: t0.Add(time.Hour), Duration: "1h", Hold: "1m"})
	_, later, _ := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 100 * mbps, Start: t0.Add(time.Hour), Duration: "1h"})
	_, long, _ := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 700 * mbps, Start: t0.Add(30 * time.Minute), Duration: "4h"})
	e.stopFn()
	e.clk.Add(3 * time.Hour)
	e.start("")
	want := map[string]reserve.State{held.Reservation.ID: reserve.StateCancelled, later.Reservation.ID: reserve.StateFinished, long.Reservation.ID: reserve.StateActive}
	for id, w := range want {
		var got apiv1.ReservationResponse
		e.do("GET", "/api/v1/reservations/"+id, e.admin, nil, &got)
		if got.Reservation.State != w {
			t.Errorf("%s after the restart: %s, want %s", id, got.Reservation.State, w)
		}
	}
	// The long one still holds its 700M; the others no longer count.
	if st, _, raw := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 300 * mbps, Start: e.clk.Now(), Duration: "30m"}); st != 409 {
		t.Errorf("300M beside the live 700M: %d %s", st, raw)
	}
	if st, _, raw := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 200 * mbps, Start: e.clk.Now(), Duration: "30m"}); st != 201 {
		t.Errorf("200M beside the live 700M: %d %s", st, raw)
	}
}

func TestTokens(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	alice := e.user("alice", "user")
	var who apiv1.Whoami
	if st, _ := e.do("GET", "/api/v1/whoami", alice, nil, &who); st != 200 || who.User != "alice" || who.Role != "user" {
		t.Fatalf("whoami: %d %+v", st, who)
	}
	// Short-lived token.
	var short apiv1.Token
	if st, raw := e.do("POST", "/api/v1/users/alice/tokens", alice, apiv1.TokenRequest{ExpiresIn: "1h"}, &short); st != 201 {
		t.Fatalf("own token: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/users/admin/tokens", alice, apiv1.TokenRequest{}, nil); st != 403 {
		t.Errorf("alice makes admin a token: %d %s", st, raw)
	}
	if st, _ := e.do("GET", "/api/v1/whoami", short.Secret, nil, nil); st != 200 {
		t.Errorf("fresh token: %d", st)
	}
	e.clk.Add(2 * time.Hour)
	if st, raw := e.do("GET", "/api/v1/whoami", short.Secret, nil, nil); st != 401 || !strings.Contains(string(raw), "expired") {
		t.Errorf("expired token: %d %s", st, raw)
	}
	// Revoke alice's main token.
	var toks apiv1.TokenList
	e.do("GET", "/api/v1/users/alice/tokens", e.admin, nil, &toks)
	if len(toks.Tokens) != 2 || toks.Tokens[0].Secret != "" {
		t.Fatalf("tokens %+v", toks)
	}
	main := toks.Tokens[0].ID
	if main == short.ID {
		main = toks.Tokens[1].ID
	}
	if st, raw := e.do("DELETE", "/api/v1/tokens/"+main, e.admin, nil, nil); st != 204 {
		t.Fatalf("revoke: %d %s", st, raw)
	}
	if st, raw := e.do("GET", "/api/v1/whoami", alice, nil, nil); st != 401 || !strings.Contains(string(raw), "revoked") {
		t.Errorf("revoked token: %d %s", st, raw)
	}
	for _, tok := range []string{"", "not-a-token"} {
		if st, raw := e.do("GET", "/api/v1/reservations", tok, nil, nil); st != 401 || errorOf(t, raw).Code != apiv1.CodeUnauthorized {
			t.Errorf("token %q: %d %s", tok, st, raw)
		}
	}
	if st, _ := e.do("GET", "/api/v1/health", "", nil, nil); st != 200 {
		t.Errorf("health without a token: %d", st)
	}
}

// TestBadInput sends what a careless or hostile client might: every one
// is answered 4xx with a clear message, and nothing is stored.
func TestBadInput(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	alice := e.user("alice", "user", "cms")
	e.do("POST", "/api/v1/users/alice/tokens", e.admin, apiv1.TokenRequest{ExpiresIn: "1m"}, nil)
	var revoked apiv1.Token
	e.do("POST", "/api/v1/users/alice/tokens", e.admin, apiv1.TokenRequest{}, &revoked)
	e.do("DELETE", "/api/v1/tokens/"+revoked.ID, e.admin, nil, nil)

	future := t0.Add(time.Hour).Format(time.RFC3339)
	good := func(extra string) string {
		return `{"from":"h1","to":"h2","bandwidth_bps":1000000,"start":"` + future + `","duration":"1h"` + extra + `}`
	}
	huge := `{"from":"h1","to":"h2","bandwidth_bps":1000000,"duration":"1h","project":"` + strings.Repeat("x", 2<<20) + `"}`
	for _, tc := range []struct {
		name, token, body string
		status            int
		code, field, want string
	}{
		{"malformed JSON", alice, `{"from":"h1",`, 400, "invalid", "", "malformed JSON"},
		{"not JSON", alice, `hello`, 400, "invalid", "", "malformed JSON"},
		{"empty body", alice, ``, 400, "invalid", "", "empty"},
		{"two values", alice, good("") + `{}`, 400, "invalid", "", "more than one"},
		{"unknown field", alice, good(`,"bandwith":5`), 400, "invalid", "bandwith", "unknown field"},
		{"wrong type", alice, `{"from":"h1","to":"h2","bandwidth_bps":"fast","duration":"1h"}`, 400, "invalid", "bandwidth_bps", "want uint64"},
		{"negative bandwidth", alice, `{"from":"h1","to":"h2","bandwidth_bps":-5,"duration":"1h"}`, 400, "invalid", "bandwidth_bps", "want uint64"},
		{"bad time", alice, `{"from":"h1","to":"h2","bandwidth_bps":5,"start":"tomorrow","duration":"1h"}`, 400, "invalid", "", "RFC 3339"},
		{"bad duration", alice, `{"from":"h1","to":"h2","bandwidth_bps":5,"duration":"an hour"}`, 400, "invalid", "duration", "positive duration"},
		{"huge body", alice, huge, 413, "too_large", "", "over"},
		{"in the past", alice, `{"from":"h1","to":"h2","bandwidth_bps":5,"start":"2030-03-01T10:00:00Z","duration":"1h"}`, 400, "invalid", "start", "past"},
		{"end before start", alice, `{"from":"h1","to":"h2","bandwidth_bps":5,"start":"` + future + `","end":"2030-03-01T12:30:00Z"}`, 400, "invalid", "end", "after"},
		{"end and duration", alice, good(`,"end":"2030-03-01T15:00:00Z"`), 400, "invalid", "duration", "not both"},
		{"no window", alice, `{"from":"h1","to":"h2","bandwidth_bps":5}`, 400, "invalid", "end", "duration"},
		{"zero bandwidth", alice, `{"from":"h1","to":"h2","bandwidth_bps":0,"duration":"1h"}`, 400, "invalid", "bandwidth_bps", "bandwidth"},
		{"unknown node", alice, `{"from":"h1","to":"h9","bandwidth_bps":5,"duration":"1h"}`, 400, "invalid", "to", "not in the topology"},
		{"same ends", alice, `{"from":"h1","to":"h1","bandwidth_bps":5,"duration":"1h"}`, 400, "invalid", "", ""},
		{"bad flow spec", alice, good(`,"flow_spec":"tcp 198.18.1.1 >> 198.18.2.1"`), 400, "invalid", "", "flow spec"},
		{"foreign flow", alice, good(`,"flow_spec":"tcp 10.0.0.1 > 198.18.2.1"`), 400, "invalid", "", ""},
		{"unknown link", alice, good(`,"path":["nope"]`), 400, "invalid", "path", "not in the topology"},
		{"too long", alice, `{"from":"h1","to":"h2","bandwidth_bps":5,"duration":"9h"}`, 403, "forbidden", "", "8h"},
		{"beyond the horizon", alice, `{"from":"h1","to":"h2","bandwidth_bps":5,"start":"2031-03-01T12:00:00Z","duration":"1h"}`, 403, "forbidden", "", "horizon"},
		{"not my project", alice, good(`,"project":"atlas"`), 403, "forbidden", "", "project"},
		{"no token", "", good(""), 401, "unauthorized", "", "no token"},
		{"revoked token", revoked.Secret, good(""), 401, "unauthorized", "", "revoked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.srv.URL+"/api/v1/reservations", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, raw)
			}
			d := errorOf(t, raw)
			if d.Code != tc.code || (tc.field != "" && d.Field != tc.field) || !strings.Contains(d.Message, tc.want) {
				t.Errorf("error %+v, want code %s field %q message containing %q", d, tc.code, tc.field, tc.want)
			}
		})
	}
	// A wrong media type and a wrong method.
	req, _ := http.NewRequest("POST", e.srv.URL+"/api/v1/reservations", strings.NewReader(good("")))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Authorization", "Bearer "+alice)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 415 {
		t.Errorf("text/plain: %v %v", resp.StatusCode, err)
	}
	if st, raw := e.do("DELETE", "/api/v1/reservations", alice, nil, nil); st != 405 || errorOf(t, raw).Code != apiv1.CodeMethodNotAllowed {
		t.Errorf("DELETE on the collection: %d %s", st, raw)
	}
	var list apiv1.ReservationList
	e.do("GET", "/api/v1/reservations", e.admin, nil, &list)
	if len(list.Reservations) != 0 {
		t.Errorf("bad requests stored %d reservations", len(list.Reservations))
	}
	var audit apiv1.AuditList
	e.do("GET", "/api/v1/audit", e.admin, nil, &audit)
	for _, a := range audit.Entries {
		if strings.HasPrefix(a.What, "create r-") {
			t.Errorf("audit has a create: %+v", a)
		}
	}
}

func TestExclusiveHolds(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	alice := e.user("alice", "user")
	bob := e.user("bob", "user")
	start := t0.Add(time.Hour)
	var x reserve.Exclusive
	if st, raw := e.do("POST", "/api/v1/exclusives", alice, apiv1.ExclusiveRequest{Site: "site-b", Start: start, Duration: "2h"}, &x); st != 201 {
		t.Fatalf("hold site-b: %d %s", st, raw)
	}
	if len(x.Nodes) != 2 {
		t.Errorf("site-b hold covers %v", x.Nodes)
	}
	// Bob cannot touch site-b in that window, but can before it.
	st, _, raw := e.create(bob, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: mbps, Start: start.Add(30 * time.Minute), Duration: "1h"})
	if st != 409 || !strings.Contains(string(raw), "alice") {
		t.Errorf("bob into alice's site: %d %s", st, raw)
	}
	if st, _, raw := e.create(bob, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: mbps, Start: t0.Add(10 * time.Minute), Duration: "50m"}); st != 201 {
		t.Errorf("bob before the hold: %d %s", st, raw)
	}
	// Alice herself can.
	if st, _, raw := e.create(alice, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: mbps, Start: start, Duration: "1h"}); st != 201 {
		t.Errorf("alice in her own site: %d %s", st, raw)
	}
	// Bob cannot hold a1 while alice's reservation uses it.
	if st, raw := e.do("POST", "/api/v1/exclusives", bob, apiv1.ExclusiveRequest{Node: "a1", Start: start, Duration: "1h"}, nil); st != 409 {
		t.Errorf("bob holds a node alice's reservation uses: %d %s", st, raw)
	}
	// Released, bob can book.
	if st, raw := e.do("POST", "/api/v1/exclusives/"+x.ID+"/cancel", bob, nil, nil); st != 404 {
		t.Errorf("bob releases alice's hold: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/exclusives/"+x.ID+"/cancel", alice, apiv1.ActionRequest{Reason: "done"}, nil); st != 200 {
		t.Fatalf("release: %d %s", st, raw)
	}
	if st, _, raw := e.create(bob, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: mbps, Start: start.Add(30 * time.Minute), Duration: "1h"}); st != 201 {
		t.Errorf("bob after the release: %d %s", st, raw)
	}
}

func TestTopologyReload(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	st, res, raw := e.create(e.admin, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 800 * mbps, Start: t0.Add(time.Hour), Duration: "1h", Path: []string{"a1-ra", "wan", "b1-rb"}})
	if st != 201 {
		t.Fatalf("create: %d %s", st, raw)
	}
	noWan := strings.Replace(twoSite, "  - {name: wan, ends: [ra, rb], rate: 1G, delay: 25ms}\n", "", 1)
	slowWan := strings.Replace(twoSite, "rate: 1G", "rate: 500M", 1)
	for name, y := range map[string]string{"without wan": noWan, "wan slowed": slowWan} {
		st, raw := e.do("PUT", "/api/v1/topology", e.admin, apiv1.TopologyReload{YAML: y}, nil)
		d := errorOf(t, raw)
		if st != 409 || len(d.Stranded) != 1 || !strings.HasPrefix(d.Stranded[0], res.Reservation.ID) {
			t.Errorf("%s: %d %s", name, st, raw)
		}
	}
	var topo apiv1.Topology
	e.do("GET", "/api/v1/topology", e.admin, nil, &topo)
	if topo.Stats.Links != 4 {
		t.Errorf("after the refused reloads: %d links", topo.Stats.Links)
	}
	// Adding a link is fine, and survives a restart.
	more := twoSite + "  - {name: wan2, ends: [ra, rb], rate: 1G, delay: 30ms}\n"
	if st, raw := e.do("PUT", "/api/v1/topology", e.admin, apiv1.TopologyReload{YAML: more}, &topo); st != 200 || topo.Stats.Links != 5 {
		t.Fatalf("reload with a link more: %d %s", st, raw)
	}
	alice := e.user("alice", "user")
	if st, raw := e.do("PUT", "/api/v1/topology", alice, apiv1.TopologyReload{YAML: more}, nil); st != 403 {
		t.Errorf("a user reloads: %d %s", st, raw)
	}
	if st, raw := e.do("PUT", "/api/v1/topology", e.admin, apiv1.TopologyReload{YAML: "links: [{name: x}]"}, nil); st != 400 {
		t.Errorf("a broken file: %d %s", st, raw)
	}
	e.stopFn()
	e.start("")
	e.do("GET", "/api/v1/topology", e.admin, nil, &topo)
	if topo.Stats.Links != 5 {
		t.Errorf("after a restart: %d links", topo.Stats.Links)
	}
}

func TestFind(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	start := t0.Add(time.Hour)
	e.create(e.admin, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 900 * mbps, Start: start, Duration: "2h", Path: []string{"a1-ra", "wan", "b1-rb"}})
	e.create(e.admin, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 1800 * mbps, Start: start, Duration: "1h", Path: []string{"a1-ra", "dedicated", "b1-rb"}})
	for _, tc := range []struct {
		req  apiv1.FindRequest
		alg  string
		bw   uint64
		from time.Time
	}{
		{apiv1.FindRequest{Mode: "earliest", From: "a1", To: "b1", Bandwidth: 500 * mbps, Start: start, Duration: "1h"}, reserve.AlgEarliestStart, 500 * mbps, start.Add(time.Hour)},
		{apiv1.FindRequest{Mode: "widest", From: "a1", To: "b1", Start: start.Add(90 * time.Minute), Duration: "1h"}, reserve.AlgWidestPath, 1800 * mbps, start.Add(90 * time.Minute)},
		{apiv1.FindRequest{Mode: "fixed", From: "a1", To: "b1", Bandwidth: 100 * mbps, Start: start.Add(time.Hour), Duration: "1h"}, reserve.AlgFixedSlot, 100 * mbps, start.Add(time.Hour)},
		{apiv1.FindRequest{Mode: "completion", From: "a1", To: "b1", SizeBytes: 900e9, Bandwidth: 1800 * mbps, Start: start}, reserve.AlgEarliestCompletion, 1800 * mbps, start.Add(time.Hour)},
	} {
		var s apiv1.Slot
		if st, raw := e.do("POST", "/api/v1/find", e.admin, tc.req, &s); st != 200 {
			t.Errorf("%s: %d %s", tc.req.Mode, st, raw)
			continue
		}
		if s.Algorithm != tc.alg || s.Bandwidth != tc.bw || !s.Start.Equal(tc.from) {
			t.Errorf("%s: %+v, want %s %d from %s", tc.req.Mode, s, tc.alg, tc.bw, tc.from)
		}
	}
	var all apiv1.Slot
	if st, raw := e.do("POST", "/api/v1/find", e.admin, apiv1.FindRequest{Mode: "all", From: "a1", To: "b1", Bandwidth: 1500 * mbps, Start: start, Duration: "1h", Horizon: start.Add(6 * time.Hour)}, &all); st != 200 || len(all.Windows) == 0 {
		t.Fatalf("all: %d %s", st, raw)
	}
	if !all.Windows[0].First.Equal(start.Add(time.Hour)) {
		t.Errorf("all: first window %+v", all.Windows[0])
	}
	// Booking by size: the earliest completion of 900 GB at up to 1.8G.
	st, res, raw := e.create(e.admin, apiv1.ReservationRequest{From: "a1", To: "b1", SizeBytes: 900e9, Bandwidth: 1800 * mbps, Start: start})
	if st != 201 || !res.Reservation.Start.Equal(start.Add(time.Hour)) || res.Reservation.Bandwidth != 1800*mbps {
		t.Errorf("create by size: %d %s", st, raw)
	}
	if st, _, raw := e.create(e.admin, apiv1.ReservationRequest{From: "a1", To: "b1", SizeBytes: 900e12, Start: start, Deadline: start.Add(2 * time.Hour)}); st != 409 || !strings.Contains(string(raw), "deadline") {
		t.Errorf("create by size past its deadline: %d %s", st, raw)
	}
}

func TestEventStream(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	alice := e.user("alice", "user")
	bob := e.user("bob", "user")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(q string) *bufio.Reader {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/events"+q, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		t.Cleanup(func() { resp.Body.Close() })
		return bufio.NewReader(resp.Body)
	}
	aliceEv := open("?access_token=" + alice)
	bobEv := open("?access_token=" + bob)
	_, res, _ := e.create(alice, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Start: t0.Add(time.Minute), Duration: "1h"})
	e.clk.Add(2 * time.Minute)
	e.c.Tick(context.Background())
	next := func(r *bufio.Reader) apiv1.Event {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("read event: %v", err)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var ev apiv1.Event
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Fatal(err)
				}
				return ev
			}
		}
	}
	for _, want := range []reserve.State{reserve.StateReserved, reserve.StateActive} {
		ev := next(aliceEv)
		if ev.Kind != "reservation" || ev.Reservation.ID != res.Reservation.ID || ev.Transition.To != want {
			t.Errorf("event %+v, want %s", ev, want)
		}
	}
	// Bob sees his own only.
	e.create(bob, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Start: e.clk.Now().Add(time.Hour), Duration: "1h"})
	if ev := next(bobEv); ev.Reservation.Owner != "bob" {
		t.Errorf("bob sees %s's reservation", ev.Reservation.Owner)
	}
}

// TestConcurrentCreates races 200 creates for one link on each store:
// every request is answered, none overbooks, and every refused one really
// did not fit beside what was accepted.
func TestConcurrentCreates(t *testing.T) {
	for name, url := range map[string]func(*testing.T) string{"sqlite": sqliteURL, "postgres": func(t *testing.T) string { return pgtest.URL(t) }} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, url(t), oneLink)
			const n = 200
			type out struct {
				req    apiv1.ReservationRequest
				status int
				r      reserve.Reservation
				raw    []byte
			}
			outs := make([]out, n)
			var wg sync.WaitGroup
			for i := range n {
				req := apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: uint64(50+(i*37)%400) * mbps,
					Start: t0.Add(time.Duration(i%12) * 10 * time.Minute), Duration: fmt.Sprintf("%dm", 20+(i*13)%60)}
				wg.Go(func() {
					j, _ := json.Marshal(req)
					hr, _ := http.NewRequest("POST", e.srv.URL+"/api/v1/reservations", bytes.NewReader(j))
					hr.Header.Set("Content-Type", "application/json")
					hr.Header.Set("Authorization", "Bearer "+e.admin)
					resp, err := http.DefaultClient.Do(hr)
					if err != nil {
						t.Error(err)
						return
					}
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					o := out{req: req, status: resp.StatusCode, raw: raw}
					if resp.StatusCode == 201 {
						var rr apiv1.ReservationResponse
						json.Unmarshal(raw, &rr)
						o.r = rr.Reservation
					}
					outs[i] = o
				})
			}
			wg.Wait()
			var accepted []reserve.Reservation
			refused := 0
			for _, o := range outs {
				switch o.status {
				case 201:
					accepted = append(accepted, o.r)
				case 409:
					refused++
				default:
					t.Fatalf("answer %d: %s", o.status, o.raw)
				}
			}
			if len(accepted) == 0 || refused == 0 {
				t.Fatalf("accepted %d, refused %d: the workload should do both", len(accepted), refused)
			}
			const capacity = 900 * mbps
			if at, sum := peak(accepted, time.Time{}, time.Time{}); sum > capacity {
				t.Fatalf("overbooked: %d bit/s at %s", sum, at)
			}
			for _, o := range outs {
				if o.status != 409 {
					continue
				}
				d, _ := time.ParseDuration(o.req.Duration)
				if _, sum := peak(accepted, o.req.Start, o.req.Start.Add(d)); sum+o.req.Bandwidth <= capacity {
					t.Errorf("refused %+v although it fits beside the accepted ones (peak %d)", o.req, sum)
				}
			}
			// The store agrees with the answers.
			var list apiv1.ReservationList
			e.do("GET", "/api/v1/reservations", e.admin, nil, &list)
			if len(list.Reservations) != len(accepted) {
				t.Errorf("store holds %d reservations, %d were accepted", len(list.Reservations), len(accepted))
			}
			t.Logf("%s: %d accepted, %d refused", name, len(accepted), refused)
		})
	}
}

// peak returns the largest sum of bandwidths at any instant of [from, to)
// (all time when both are zero): a brute-force check, instant by instant
// over every start, that trusts nothing of the scheduler's.
func peak(rs []reserve.Reservation, from, to time.Time) (time.Time, uint64) {
	var best uint64
	var at time.Time
	points := []time.Time{}
	if !from.IsZero() {
		points = append(points, from)
	}
	for _, r := range rs {
		points = append(points, r.Start)
	}
	for _, p := range points {
		if !from.IsZero() && (p.Before(from) || !p.Before(to)) {
			continue
		}
		var sum uint64
		for _, r := range rs {
			if !p.Before(r.Start) && p.Before(r.End) {
				sum += r.Bandwidth
			}
		}
		if sum > best {
			best, at = sum, p
		}
	}
	return at, best
}

func TestPolicy(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	alice := e.user("alice", "user", "cms")
	pol := apiv1.Policy{
		Default:  apiv1.Limits{MaxDuration: "2h"},
		Roles:    map[string]apiv1.Limits{"operator": {MaxDuration: "24h"}},
		Projects: map[string]apiv1.Limits{"cms": {MaxBandwidth: 300 * mbps, MaxProjectBandwidth: 500 * mbps, MaxJobs: 5, MaxProjectJobs: 7}},
	}
	if st, raw := e.do("PUT", "/api/v1/policy", alice, pol, nil); st != 403 {
		t.Errorf("a user sets the policy: %d %s", st, raw)
	}
	if st, raw := e.do("PUT", "/api/v1/policy", e.admin, apiv1.Policy{Default: apiv1.Limits{MaxDuration: "soon"}}, nil); st != 400 {
		t.Errorf("a bad duration: %d %s", st, raw)
	}
	if st, raw := e.do("PUT", "/api/v1/policy", e.admin, pol, nil); st != 200 {
		t.Fatalf("set policy: %d %s", st, raw)
	}
	start := t0.Add(time.Hour)
	for _, tc := range []struct {
		name   string
		req    apiv1.ReservationRequest
		status int
		want   string
	}{
		{"over the default duration", apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Start: start, Duration: "3h"}, 403, "2h"},
		{"over the project's per-reservation bandwidth", apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 400 * mbps, Start: start, Duration: "1h", Project: "cms"}, 403, "cms"},
		{"within", apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 300 * mbps, Start: start, Duration: "1h", Project: "cms"}, 201, ""},
		{"over the project's total", apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 300 * mbps, Start: start.Add(30 * time.Minute), Duration: "1h", Project: "cms"}, 403, "project"},
		{"the project's total after the first ends", apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 300 * mbps, Start: start.Add(time.Hour), Duration: "1h", Project: "cms"}, 201, ""},
	} {
		st, _, raw := e.create(alice, tc.req)
		if st != tc.status || !strings.Contains(string(raw), tc.want) {
			t.Errorf("%s: %d %s", tc.name, st, raw)
		}
	}
	op := e.user("olga", "operator")
	if st, _, raw := e.create(op, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Start: start, Duration: "3h"}); st != 201 {
		t.Errorf("an operator's 3h: %d %s", st, raw)
	}
	var got apiv1.Policy
	e.do("GET", "/api/v1/policy", alice, nil, &got)
	if got.Default.MaxDuration != "2h0m0s" || got.Projects["cms"].MaxProjectBandwidth != 500*mbps || got.Projects["cms"].MaxJobs != 5 || got.Projects["cms"].MaxProjectJobs != 7 {
		t.Errorf("policy read back %+v", got)
	}
	// It survives a restart.
	e.stopFn()
	e.start("")
	e.do("GET", "/api/v1/policy", e.admin, nil, &got)
	if got.Default.MaxDuration != "2h0m0s" {
		t.Errorf("policy after a restart %+v", got)
	}
}

// TestRetryWithoutStart retries a create that left the start to the
// controller ("now"): the retry, later, is the same request.
func TestRetryWithoutStart(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	req := apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Duration: "1h", IdempotencyKey: "k", Hold: "max"}
	st, first, raw := e.create(e.admin, req)
	if st != 201 || !first.Reservation.HoldExpires.Equal(t0.Add(controller.DefaultMaxHold)) {
		t.Fatalf("first: %d %s", st, raw)
	}
	e.clk.Add(30 * time.Second)
	st, again, raw := e.create(e.admin, req)
	if st != 200 || again.Reservation.ID != first.Reservation.ID {
		t.Fatalf("retry 30 s later: %d %s", st, raw)
	}
}

// TestEventReplay reconnects to the event stream with Last-Event-ID and
// gets what was sent meanwhile.
func TestEventReplay(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	for i := range 3 {
		e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Start: t0.Add(time.Duration(i+1) * time.Hour), Duration: "1h"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Last-Event-ID", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	var ids []string
	for len(ids) < 2 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, strings.TrimSpace(id))
		}
		if strings.HasPrefix(line, "event: missed") {
			t.Fatal("events reported missed although all are kept")
		}
	}
	if ids[0] != "2" || ids[1] != "3" {
		t.Errorf("replayed %v, want [2 3]", ids)
	}
}

// TestStartWithStrandingTopology restarts the controller with a topology
// file that would strand a live reservation: it refuses to start, saying
// which, and the stored topology is kept.
func TestStartWithStrandingTopology(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	_, res, _ := e.create(e.admin, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 800 * mbps, Start: t0.Add(time.Hour), Duration: "1h", Path: []string{"a1-ra", "wan", "b1-rb"}})
	e.stopFn()
	st, err := store.Open(context.Background(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	noWan, err := controller.ParseTopology("nowan.yaml", []byte(strings.Replace(twoSite, "  - {name: wan, ends: [ra, rb], rate: 1G, delay: 25ms}\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = controller.Open(context.Background(), controller.Config{Store: st, Topology: noWan, Now: e.clk.Now})
	if err == nil || !strings.Contains(err.Error(), res.Reservation.ID) || !strings.Contains(err.Error(), "strand") {
		t.Fatalf("start with a stranding topology: %v", err)
	}
	// A generated graph (no file) takes them all.
	g, err := controller.ParseTopology("again.yaml", []byte(twoSite))
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.Open(context.Background(), controller.Config{Store: st, Topology: controller.NewTopo("generated", g.Graph), Now: e.clk.Now})
	if err != nil {
		t.Fatalf("start with a generated graph: %v", err)
	}
	if c.LiveCount() != 1 {
		t.Errorf("%d live after the start, want 1", c.LiveCount())
	}
	c.Close()
}

func TestAgents(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	agent := e.agent("agent-ra", "ra")
	alice := e.user("alice", "user")
	var work apiv1.AgentWork
	if st, raw := e.do("POST", "/api/v1/agents/ra/heartbeat", alice, apiv1.HeartbeatRequest{}, nil); st != 403 {
		t.Errorf("a user's heartbeat: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/agents/nope/heartbeat", e.admin, apiv1.HeartbeatRequest{}, nil); st != 400 {
		t.Errorf("heartbeat of an unknown node: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/agents/ra/heartbeat", agent, apiv1.HeartbeatRequest{Lease: "10s"}, &work); st != 200 || len(work.Reservations) != 0 || work.TopologySHA256 == "" {
		t.Fatalf("heartbeat: %d %s", st, raw)
	}
	_, res, raw := e.create(alice, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 100 * mbps, Start: t0.Add(time.Minute), Duration: "1h"})
	r := res.Reservation
	if !slices.Equal(r.ManagedNodes, []string{"ra"}) {
		t.Fatalf("managed nodes %v: %s", r.ManagedNodes, raw)
	}
	e.do("POST", "/api/v1/agents/ra/heartbeat", agent, apiv1.HeartbeatRequest{Lease: "10s"}, &work)
	if len(work.Reservations) != 1 || work.Reservations[0].ID != r.ID {
		t.Fatalf("work %+v", work)
	}
	// Past its start it waits for ra.
	e.clk.Add(time.Minute + time.Second)
	e.do("POST", "/api/v1/agents/ra/heartbeat", agent, apiv1.HeartbeatRequest{Lease: "10s"}, nil)
	e.c.Tick(context.Background())
	get := func() reserve.Reservation {
		var got apiv1.ReservationResponse
		e.do("GET", "/api/v1/reservations/"+r.ID, alice, nil, &got)
		return got.Reservation
	}
	if s := get().State; s != reserve.StateReserved {
		t.Fatalf("past the start, before the report: %s", s)
	}
	if st, raw := e.do("POST", "/api/v1/reservations/"+r.ID+"/nodes/ra", agent, apiv1.NodeReport{Status: "failed"}, nil); st != 400 {
		t.Errorf("a failure without a reason: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/reservations/"+r.ID+"/nodes/rb", e.admin, apiv1.NodeReport{Status: "provisioned"}, nil); st != 404 {
		t.Errorf("a report from an unmanaged node: %d %s", st, raw)
	}
	var rep apiv1.ReservationResponse
	if st, raw := e.do("POST", "/api/v1/reservations/"+r.ID+"/nodes/ra", agent, apiv1.NodeReport{Status: "provisioned"}, &rep); st != 200 || rep.Reservation.State != reserve.StateActive {
		t.Fatalf("report: %d %s", st, raw)
	}
	// The lease lapses: degraded, naming ra; back: recovered.
	e.clk.Add(11 * time.Second)
	e.c.Tick(context.Background())
	if g := get(); !g.Degraded || !strings.Contains(g.DegradedReason, "ra") {
		t.Fatalf("after the lease lapsed: %+v", g)
	}
	var agents apiv1.AgentList
	e.do("GET", "/api/v1/agents", alice, nil, &agents)
	if len(agents.Agents) != 1 || agents.Agents[0].Alive {
		t.Errorf("agents %+v", agents)
	}
	e.do("POST", "/api/v1/agents/ra/heartbeat", agent, apiv1.HeartbeatRequest{Lease: "10s"}, nil)
	if g := get(); g.Degraded {
		t.Fatalf("after the agent came back: %+v", g)
	}
	// A failure fails the reservation, with the reason.
	_, res2, _ := e.create(alice, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 100 * mbps, Start: e.clk.Now(), Duration: "1h"})
	if st, raw := e.do("POST", "/api/v1/reservations/"+res2.Reservation.ID+"/nodes/ra", agent, apiv1.NodeReport{Status: "failed", Reason: "no such device"}, &rep); st != 200 || rep.Reservation.State != reserve.StateFailed || !strings.Contains(rep.Reservation.FailureReason, "no such device") {
		t.Errorf("failure report: %d %s", st, raw)
	}
}

func TestLinkDownMovesReservations(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	agent := e.agent("agent", "ra")
	start := t0.Add(time.Hour)
	_, a, _ := e.create(e.admin, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 500 * mbps, Start: start, Duration: "1h", Path: []string{"a1-ra", "dedicated", "b1-rb"}})
	_, b, _ := e.create(e.admin, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 1000 * mbps, Start: start, Duration: "1h", Path: []string{"a1-ra", "dedicated", "b1-rb"}})
	var out apiv1.LinkReportResult
	if st, raw := e.do("POST", "/api/v1/agents/ra/links/dedicated", e.admin, apiv1.LinkReport{Status: "sideways"}, nil); st != 400 {
		t.Errorf("a bad status: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/agents/ra/links/dedicated", agent, apiv1.LinkReport{Status: "down", Reason: "no carrier"}, &out); st != 200 || len(out.Reservations) != 2 {
		t.Fatalf("link down: %d %s", st, raw)
	}
	get := func(id string) reserve.Reservation {
		var got apiv1.ReservationResponse
		e.do("GET", "/api/v1/reservations/"+id, e.admin, nil, &got)
		return got.Reservation
	}
	// The 500M one fits on wan (900M reservable) and moves; the 1G one
	// does not and is degraded.
	if r := get(a.Reservation.ID); r.Path[1].Link != "wan" || r.Degraded || !strings.Contains(r.History[len(r.History)-1].Why, "moved off") {
		t.Errorf("the 500M reservation after the link went down: %+v", r)
	}
	if r := get(b.Reservation.ID); r.Path[1].Link != "dedicated" || !r.Degraded || !strings.Contains(r.DegradedReason, "dedicated down") {
		t.Errorf("the 1G reservation after the link went down: %+v", r)
	}
	// New bookings avoid it.
	if st, res, raw := e.create(e.admin, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 300 * mbps, Start: start.Add(2 * time.Hour), Duration: "1h"}); st != 201 || res.Reservation.Path[1].Link != "wan" {
		t.Errorf("a create while dedicated is down: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/agents/ra/links/dedicated", agent, apiv1.LinkReport{Status: "up"}, nil); st != 200 {
		t.Fatalf("link up: %d %s", st, raw)
	}
	if r := get(b.Reservation.ID); r.Degraded {
		t.Errorf("the 1G reservation after the link came back: %+v", r)
	}
}

// TestMetrics scrapes /metrics without a token: the controller's own
// series, by route pattern (no IDs), with the reservation gauges.
func TestMetrics(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	_, res, _ := e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Start: t0.Add(time.Hour), Duration: "1h"})
	e.do("GET", "/api/v1/reservations/"+res.Reservation.ID, e.admin, nil, nil)
	resp, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	for _, want := range []string{
		`lightpath_controller_http_requests_total{code="201",method="POST",route="/api/v1/reservations"} 1`,
		`lightpath_controller_http_requests_total{code="200",method="GET",route="/api/v1/reservations/{id}"} 1`,
		`lightpath_controller_reservations{state="RESERVED"} 1`,
		`lightpath_controller_agents{state="alive"} 0`,
		`lightpath_controller_http_request_duration_seconds_bucket{route="/api/v1/reservations",le=`,
		`go_goroutines `,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(body), res.Reservation.ID) {
		t.Errorf("/metrics names a reservation ID")
	}
	// Reserved bandwidth per link direction: every direction, and what
	// the ACTIVE reservations guarantee (bytes per second).
	const reserved = `lightpath_controller_reserved_bytes_per_second{from="h1",link="l",to="h2"} `
	if m := scrape(t, e); !strings.Contains(m, reserved+"0") || !strings.Contains(m, `lightpath_controller_reserved_bytes_per_second{from="h2",link="l",to="h1"} 0`) {
		t.Errorf("/metrics lacks the reserved bandwidth of each link direction before the start")
	}
	e.clk.Add(90 * time.Minute)
	e.c.Tick(context.Background())
	if m := scrape(t, e); !strings.Contains(m, reserved+"125000") {
		t.Errorf("/metrics: the ACTIVE reservation's 1 Mbit/s is not on h1 > h2 of l")
	}
}
