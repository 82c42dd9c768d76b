package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/store"
)

// TestStandbyGate: before it leads, a controller's health answers 200
// with role standby and every other route 503 "standby" with a
// Retry-After, whatever the token; once it leads the same listener serves
// the API and health says leader. Both answers match the OpenAPI spec.
func TestStandbyGate(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	g := api.NewGate("test", "sqlite")
	gsrv := httptest.NewServer(g)
	defer gsrv.Close()
	ge := *e
	ge.srv = gsrv

	var h apiv1.Health
	st, body := ge.do("GET", "/api/v1/health", "", nil, &h)
	checkResponse(t, "GET", "/api/v1/health", st, body)
	if st != 200 || h.Role != apiv1.RoleStandby || h.Store != "sqlite" {
		t.Fatalf("standby health: %d %s", st, body)
	}
	for _, rq := range []struct{ method, path, token string }{
		{"POST", "/api/v1/reservations", e.admin},
		{"GET", "/api/v1/reservations", e.admin},
		{"GET", "/api/v1/whoami", ""},
		{"GET", "/api/v1/events", e.admin},
		{"GET", "/", ""},
	} {
		req := httptest.NewRequest(rq.method, rq.path, nil)
		if rq.token != "" {
			req.Header.Set("Authorization", "Bearer "+rq.token)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, req)
		var eb apiv1.ErrorBody
		if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || w.Code != 503 || eb.Error.Code != apiv1.CodeStandby {
			t.Errorf("%s %s on a standby: %d %s, want 503 code standby", rq.method, rq.path, w.Code, w.Body)
		}
		if ra := w.Header().Get("Retry-After"); ra != strconv.Itoa(api.StandbyRetryAfter) {
			t.Errorf("%s %s on a standby: Retry-After %q", rq.method, rq.path, ra)
		}
	}
	st, body = ge.do("POST", "/api/v1/reservations", e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: 1}, nil)
	checkResponse(t, "POST", "/api/v1/reservations", st, body)

	g.Lead(e.h)
	st, body = ge.do("GET", "/api/v1/health", "", nil, &h)
	checkResponse(t, "GET", "/api/v1/health", st, body)
	if st != 200 || h.Role != apiv1.RoleLeader {
		t.Fatalf("leader health: %d %s", st, body)
	}
	if st, body := ge.do("GET", "/api/v1/whoami", e.admin, nil, nil); st != 200 {
		t.Errorf("whoami once leading: %d %s", st, body)
	}
}

// TestEventsFromAnotherController: a stream resumed with an event id this
// controller never gave (the previous leader's, before a takeover) is told
// "missed", so the follower reads the state again instead of trusting
// that nothing happened.
func TestEventsFromAnotherController(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Duration: "1h"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Last-Event-ID", "500")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	for err == nil && (strings.HasPrefix(line, ":") || strings.TrimSpace(line) == "") {
		line, err = rd.ReadString('\n')
	}
	if !strings.HasPrefix(line, "event: missed") {
		t.Errorf("resumed after a foreign id: first line %q (%v), want event: missed", line, err)
	}
}

// TestDeposedWrite: a controller whose lead was taken over (its epoch is
// stale) answers a write 503 "standby", with Retry-After, and stores
// nothing, so clients given several URLs move on to the new leader.
func TestDeposedWrite(t *testing.T) {
	ctx := context.Background()
	url := sqliteURL(t)
	old, err := store.Lead(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Store().Close()
	tp, err := controller.ParseTopology("test.yaml", []byte(oneLink))
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.Open(ctx, controller.Config{Store: old.Store(), StoreKind: "sqlite", Topology: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	file := filepath.Join(t.TempDir(), "admin.token")
	if _, err := c.BootstrapAdmin(ctx, file); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	srv := httptest.NewServer(api.NewServer(c, nil, "test", nil))
	defer srv.Close()

	old.Release() // its lock's connection dropped, say
	next, err := store.Lead(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release()
	defer next.Store().Close()

	req, _ := http.NewRequest("POST", srv.URL+"/api/v1/reservations", strings.NewReader(`{"from":"h1","to":"h2","bandwidth_bps":1000,"duration":"1h"}`))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb apiv1.ErrorBody
	json.NewDecoder(resp.Body).Decode(&eb)
	if resp.StatusCode != 503 || eb.Error.Code != apiv1.CodeStandby || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a deposed controller's create: %d %+v, want 503 standby with Retry-After", resp.StatusCode, eb)
	}
	if rs, err := next.Store().ListReservations(ctx, store.Filter{}); err != nil || len(rs) != 0 {
		t.Errorf("stored after a deposed create: %v %v", rs, err)
	}
}
