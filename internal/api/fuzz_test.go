package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/testclock"
)

// FuzzRequests sends arbitrary bodies to the routes that read one (those
// that change the policy, topology or users are left out, so every input
// meets the same controller): the answer is never a server error, and
// every error is the API's error body.
func FuzzRequests(f *testing.F) {
	for _, seed := range []string{
		`{"from":"h1","to":"h2","bandwidth_bps":1000000,"duration":"1h"}`,
		`{"from":"h1","to":"h2","bandwidth_bps":1,"start":"2030-03-01T13:00:00Z","end":"2030-03-01T14:00:00Z","flow_spec":"tcp 198.18.1.1 > 198.18.2.1:7070","hold":"max"}`,
		`{"from":"h1","to":"h2","size_bytes":1000000000,"deadline":"2030-03-02T00:00:00Z"}`,
		`{"mode":"earliest","from":"h1","to":"h2","bandwidth_bps":5,"duration":"1h"}`,
		`{"version":1,"bandwidth_bps":5}`,
		`{"node":"h1","duration":"1h"}`,
		`{"expires_in":"1h"}`,
		`[]`, `null`, `{"from":`, "\x00",
	} {
		for route := range 5 {
			f.Add(uint8(route), []byte(seed))
		}
	}
	dir, err := os.MkdirTemp("", "lightpath-fuzz-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	clk := testclock.New(t0)
	tp, err := controller.ParseTopology("one.yaml", []byte(oneLink))
	if err != nil {
		f.Fatal(err)
	}
	c, err := controller.Open(ctx, controller.Config{Store: st, Topology: tp, Now: clk.Now})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(c.Close)
	file := filepath.Join(dir, "admin.token")
	if _, err := c.BootstrapAdmin(ctx, file); err != nil {
		f.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	token := strings.TrimSpace(string(b))
	srv := api.NewServer(c, nil, "fuzz", nil)
	routes := []struct{ method, path string }{
		{"POST", "/api/v1/reservations"},
		{"POST", "/api/v1/find"},
		{"PATCH", "/api/v1/reservations/r-0"},
		{"POST", "/api/v1/exclusives"},
		{"POST", "/api/v1/users/admin/tokens"},
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := routes[int(route)%len(routes)]
		req := httptest.NewRequest(r.method, r.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", r.method, r.path, body, w.Code, w.Body)
		}
		if w.Code >= 400 {
			var e apiv1.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%s %s %q: %d answered %s", r.method, r.path, body, w.Code, w.Body)
			}
		}
		if w.Code == http.StatusCreated && r.path == "/api/v1/reservations" {
			// Keep the book from filling up: what was created is
			// cancelled, so every input meets the same schedule.
			var res apiv1.ReservationResponse
			if json.Unmarshal(w.Body.Bytes(), &res) == nil {
				c.Cancel(context.Background(), controller.Actor{Name: "admin", Role: "admin"}, res.Reservation.ID, 0, "fuzz")
			}
		}
	})
}
