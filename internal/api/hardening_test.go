package api_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/web"
)

// TestTextFieldsCapped: every free-text field of a request is capped at
// MaxTextBytes alike, and the 400 names the field.
func TestTextFieldsCapped(t *testing.T) {
	e := newMonEnv(t, oneLink, "")
	alice := e.user("alice", "user")
	agent := e.agent("agent-h1", "h1")
	long := strings.Repeat("x", api.MaxTextBytes+1)
	_, res, raw := e.create(alice, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Duration: "1h"})
	if res.Reservation.ID == "" {
		t.Fatalf("create: %s", raw)
	}
	var x struct{ ID string }
	if st, raw := e.do("POST", "/api/v1/exclusives", alice, apiv1.ExclusiveRequest{Node: "h2", Start: t0.Add(48 * time.Hour), Duration: "1h"}, &x); st != 201 {
		t.Fatalf("exclusive: %d %s", st, raw)
	}
	var tr transfer.Transfer
	if st, raw := e.do("POST", "/api/v1/transfers", alice, transfer.Registration{Direction: "push", Source: "a", Destination: "b"}, &tr); st != 201 {
		t.Fatalf("register: %d %s", st, raw)
	}
	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		field                     string
	}{
		{"exclusive cancel reason", "POST", "/api/v1/exclusives/" + x.ID + "/cancel", alice, apiv1.ActionRequest{Reason: long}, "reason"},
		{"reservation cancel reason", "POST", "/api/v1/reservations/" + res.Reservation.ID + "/cancel", alice, apiv1.ActionRequest{Reason: long}, "reason"},
		{"reservation project", "POST", "/api/v1/reservations", alice, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Duration: "1h", Project: long}, "project"},
		{"reservation path", "POST", "/api/v1/reservations", alice, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Duration: "1h", Path: []string{"l", long}}, "path[1]"},
		{"node report reason", "POST", "/api/v1/reservations/" + res.Reservation.ID + "/nodes/h1", agent, apiv1.NodeReport{Status: "failed", Reason: long}, "reason"},
		{"transfer source", "POST", "/api/v1/transfers", alice, transfer.Registration{Direction: "push", Source: long, Destination: "b"}, "source"},
		{"transfer destination", "POST", "/api/v1/transfers", alice, transfer.Registration{Direction: "push", Source: "a", Destination: long}, "destination"},
		{"progress error", "POST", "/api/v1/transfers/" + tr.ID + "/progress", alice, transfer.Report{State: "failed", Error: long}, "error"},
		{"progress path name", "POST", "/api/v1/transfers/" + tr.ID + "/progress", alice, transfer.Report{BytesByPath: map[string]int64{long: 1}}, "bytes_by_path"},
		{"user name", "POST", "/api/v1/users", e.admin, apiv1.UserRequest{Name: long, Role: "user"}, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, raw := e.do(tc.method, tc.path, tc.token, tc.body, nil)
			if st != 400 {
				t.Fatalf("%d %s", st, raw)
			}
			if d := errorOf(t, raw); d.Field != tc.field || !strings.Contains(d.Message, "over the 4096") {
				t.Errorf("%+v, want field %q", d, tc.field)
			}
		})
	}
	// At the cap, a reason is taken.
	if st, raw := e.do("POST", "/api/v1/exclusives/"+x.ID+"/cancel", alice, apiv1.ActionRequest{Reason: long[1:]}, nil); st != 200 {
		t.Errorf("a reason of %d bytes: %d %s", api.MaxTextBytes, st, raw)
	}
}

// TestProgressCannotAttachHiddenReservation: a transfer's registration or
// progress report naming a reservation its caller may not see is refused
// as GET of that reservation would be (404), and nothing is attached.
func TestProgressCannotAttachHiddenReservation(t *testing.T) {
	e := newMonEnv(t, oneLink, "")
	alice := e.user("alice", "user")
	bob := e.user("bob", "user")
	_, res, raw := e.create(bob, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Duration: "1h"})
	if res.Reservation.ID == "" {
		t.Fatalf("create: %s", raw)
	}
	if st, raw := e.do("POST", "/api/v1/transfers", alice, transfer.Registration{Direction: "push", Source: "a", Destination: "b", Reservation: res.Reservation.ID}, nil); st != 404 {
		t.Errorf("register with bob's reservation: %d %s", st, raw)
	}
	var tr transfer.Transfer
	if st, raw := e.do("POST", "/api/v1/transfers", alice, transfer.Registration{Direction: "push", Source: "a", Destination: "b"}, &tr); st != 201 {
		t.Fatalf("register: %d %s", st, raw)
	}
	st, raw := e.do("POST", "/api/v1/transfers/"+tr.ID+"/progress", alice, transfer.Report{BytesDone: 1, Reservation: res.Reservation.ID}, nil)
	if st != 404 || !strings.Contains(string(raw), res.Reservation.ID) {
		t.Errorf("progress with bob's reservation: %d %s", st, raw)
	}
	var page apiv1.TransferPage
	if e.do("GET", "/api/v1/transfers/"+tr.ID, alice, nil, &page); page.Transfer.Reservation != "" || page.Reservation != nil {
		t.Errorf("bob's reservation was attached: %+v", page.Transfer)
	}
}

// TestOwnerMustBeAUser: an operator booking on someone's behalf names an
// existing user.
func TestOwnerMustBeAUser(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	e.user("alice", "user")
	op := e.user("olga", "operator")
	st, _, raw := e.create(op, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Duration: "1h", Owner: "nobody"})
	if st != 400 {
		t.Fatalf("owner nobody: %d %s", st, raw)
	}
	if d := errorOf(t, raw); d.Field != "owner" || !strings.Contains(d.Message, `"nobody" is not a user`) {
		t.Errorf("%+v", d)
	}
	if st, res, raw := e.create(op, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Duration: "1h", Owner: "alice"}); st != 201 || res.Reservation.Owner != "alice" {
		t.Errorf("owner alice: %d %s", st, raw)
	}
}

// TestUIHeaders: the web UI comes with its Content-Security-Policy and
// framing, referrer and sniffing headers, and lists no directory.
func TestUIHeaders(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	srv := httptest.NewServer(api.NewServer(e.c, web.FS, "test", nil))
	defer srv.Close()
	get := func(p string) (*http.Response, string) {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, p := range []string{"/", "/js/app.js", "/app.css"} {
		resp, _ := get(p)
		h := resp.Header
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "default-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %s", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q allows unsafe sources", p, csp)
		}
		if h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", p, h)
		}
	}
	for _, p := range []string{"/js/", "/js", "/vendor/uplot/", "/vendor"} {
		if resp, body := get(p); resp.StatusCode != 404 || strings.Contains(body, "app.js") || strings.Contains(body, "uPlot") {
			t.Errorf("%s: %d %q", p, resp.StatusCode, body)
		}
	}
}

// TestFilesArePrivate: the controller's database, the monitoring
// repository (its SQLite file, heads file, log) with their WAL and shared
// memory files, and the admin token file are created readable by their
// owner alone.
func TestFilesArePrivate(t *testing.T) {
	e := newMonEnv(t, oneLink, "")
	agent := e.agent("agent-h1", "h1")
	e.create(e.admin, apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: mbps, Duration: "1h"})
	if st, raw := e.do("POST", "/api/v1/metrics/push", agent, txBatch("h1", "eth0", "l", e.clk.Now(), 1), nil); st != 200 {
		t.Fatalf("push: %d %s", st, raw)
	}
	dbDir := filepath.Dir(strings.TrimPrefix(e.url, "sqlite:"))
	seen := map[string]bool{}
	for _, dir := range []string{dbDir, e.dir} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return nil // removed meanwhile
			}
			seen[d.Name()] = true
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s is %v: readable by others", p, fi.Mode().Perm())
			}
			return nil
		})
	}
	for _, want := range []string{"c.db", "c.db-wal", "c.db-shm", "metrics.db", "metrics.db.heads", "admin.token"} {
		if !seen[want] {
			t.Errorf("no %s among %v", want, seen)
		}
	}
}

// TestAdminTokenFileTightened: a controller that keeps an admin token file
// others may read (an older version's, or a careless copy) makes it 0600.
func TestAdminTokenFileTightened(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	file := filepath.Join(e.dir, "admin.token")
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	before := e.admin
	e.stopFn()
	e.start(oneLink)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the kept admin token file is %v", fi.Mode().Perm())
	}
	if e.admin != before {
		t.Errorf("the token was replaced, not kept")
	}
}
