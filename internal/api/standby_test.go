package api_test

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
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
