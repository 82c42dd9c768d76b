package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
)

// ticketResv is a ticket as the controller sends it: RESERVED from cliT0,
// two managed nodes of which none has its part in place yet.
func ticketResv(t *testing.T) reserve.Reservation {
	t.Helper()
	fs, err := reserve.ParseFlowSpec("tcp 198.18.1.1 > 198.18.2.1:7070, udp 198.18.1.1 > 198.18.2.1:9000-9010")
	if err != nil {
		t.Fatal(err)
	}
	r := tableResv[0]
	r.State, r.Degraded, r.DegradedReason = reserve.StateReserved, false, ""
	r.FlowSpec, r.DSCP = fs, 10
	r.ManagedNodes, r.Provisioned = []string{"a1", "rb"}, nil
	r.Version = 1
	r.History = r.History[:1]
	return r
}

// ticketController is a fake controller for the ticket commands: it books
// and serves the reservation held in cur, and sends on the event stream
// the reservations put on events (then keeps the stream open).
type ticketController struct {
	*fakeController
	mu     sync.Mutex
	cur    reserve.Reservation
	events chan reserve.Reservation
	status int    // the create's answer when not 0
	errMsg string // its error body
}

func newTicketController(t *testing.T, r reserve.Reservation) (*ticketController, string) {
	tc := &ticketController{cur: r, events: make(chan reserve.Reservation, 8)}
	tc.fakeController = &fakeController{handle: tc.serve}
	srv := httptest.NewServer(tc.fakeController)
	t.Cleanup(srv.Close)
	return tc, srv.URL
}

func (tc *ticketController) set(r reserve.Reservation) {
	tc.mu.Lock()
	tc.cur = r
	tc.mu.Unlock()
}

func (tc *ticketController) get() reserve.Reservation {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.cur
}

func (tc *ticketController) serve(w http.ResponseWriter, r *http.Request, n int) bool {
	cur := tc.get()
	w.Header().Set("Content-Type", "application/json")
	switch r.Method + " " + r.URL.Path {
	case "POST /api/v1/reservations":
		if tc.status != 0 {
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.errMsg)
			return true
		}
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(apiv1.ReservationResponse{Reservation: cur, Algorithm: "fixed-slot-bfs", Created: true})
	case "GET /api/v1/reservations/" + cur.ID:
		json.NewEncoder(w).Encode(cur)
	case "PATCH /api/v1/reservations/" + cur.ID:
		// The fake has read the body already: take the end it recorded.
		end, _ := time.Parse(time.RFC3339, fmt.Sprint(tc.bodiesSeen()[n-1]["end"]))
		cur.End, cur.Version = end, cur.Version+1
		tc.set(cur)
		json.NewEncoder(w).Encode(cur)
	case "POST /api/v1/reservations/" + cur.ID + "/cancel":
		cur.State, cur.Version, cur.Degraded, cur.DegradedReason = reserve.StateCancelled, cur.Version+1, false, ""
		tc.set(cur)
		json.NewEncoder(w).Encode(cur)
	case "GET /api/v1/whoami":
		io.WriteString(w, `{"user":"alice","role":"operator","projects":[]}`)
	case "GET /api/v1/reservations":
		plain := tableResv[1]
		json.NewEncoder(w).Encode(apiv1.ReservationList{Reservations: []reserve.Reservation{cur, plain}})
	case "GET /api/v1/events":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for seq := 1; ; seq++ {
			select {
			case ev := <-tc.events:
				tc.set(ev)
				b, _ := json.Marshal(apiv1.Event{Seq: uint64(seq), Kind: "reservation", Reservation: &ev,
					Transition: &reserve.Transition{To: ev.State, Event: reserve.EventNodeProvisioned, At: cliT0, By: "agent", Version: ev.Version}})
				fmt.Fprintf(w, "id: %d\nevent: reservation\ndata: %s\n\n", seq, b)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return true
			}
		}
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"code":"not_found","message":"reservation r-9: not found"}}`)
	}
	return true
}

// TestTicketOpenWaitsForActive opens a ticket whose managed nodes report
// in one after the other: the command waits for ACTIVE and prints what
// was set up.
func TestTicketOpenWaitsForActive(t *testing.T) {
	withUTC(t)
	r := ticketResv(t)
	tc, url := newTicketController(t, r)
	one := r
	one.Provisioned, one.Version = []string{"a1"}, 2
	active := one
	active.Provisioned, active.State, active.Version = []string{"a1", "rb"}, reserve.StateActive, 3
	tc.events <- one
	tc.events <- active
	out, err := runCLI(t, url, "ticket", "open", "--from", "a1", "--to", "b1", "--flows", "tcp 198.18.1.1 > 198.18.2.1:7070",
		"--bandwidth", "500M", "--duration", "2h", "--project", "cms")
	if err != nil {
		t.Fatal(err)
	}
	body := tc.bodiesSeen()[0]
	if body["flow_spec"] != "tcp 198.18.1.1 > 198.18.2.1:7070" || body["bandwidth_bps"] != 5e8 || body["duration"] != "2h0m0s" ||
		body["project"] != "cms" || body["idempotency_key"] == nil || body["start"] == nil {
		t.Errorf("create body %v", body)
	}
	if got := strings.Join(tc.pathsSeen(), ","); !strings.HasPrefix(got, "POST /api/v1/reservations,GET /api/v1/events") {
		t.Errorf("requests %s: want the create, then the event stream", got)
	}
	for _, want := range []string{
		"opened ticket r-1: ACTIVE after ",
		"ticket         r-1 (version 3)\n",
		"from → to      a1 → b1 at 500 Mbit/s\n",
		"window         2026-05-01T14:00:00Z → 2026-05-01T16:00:00Z (2h00m)\n",
		"path           a1 -a1-ra-> ra -wan-> rb -b1-rb-> b1\n",
		"dscp           af11 (10)\n",
		"flows          tcp 198.18.1.1 > 198.18.2.1:7070\n               udp 198.18.1.1 > 198.18.2.1:9000-9010\n",
		"managed nodes  a1, rb (all in place)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("open lacks %q:\n%s", want, out)
		}
	}

	// Already ACTIVE when read after subscribing: no event needed. --json
	// prints one line, the ticket with what open adds.
	tc.set(active)
	out, err = runCLI(t, url, "ticket", "open", "--from", "a1", "--to", "b1", "--flows", "tcp 198.18.1.1 > 198.18.2.1:7070", "--bandwidth", "500M", "--end", "+1h", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var l map[string]any
	if strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &l) != nil || l["id"] != "r-1" || l["state"] != "ACTIVE" || l["ready"] != true ||
		l["dscp"] != 10.0 || l["dscp_name"] != "af11" || l["created"] != true || l["algorithm"] != "fixed-slot-bfs" || l["waited_seconds"] == nil ||
		l["waiting_for"] != nil || l["flow_spec"] != "tcp 198.18.1.1 > 198.18.2.1:7070, udp 198.18.1.1 > 198.18.2.1:9000-9010" {
		t.Errorf("open --json:\n%s", out)
	}
}

// TestTicketOpenTimesOut checks --wait running out: the ticket is printed,
// the error says what it still waits for, and nothing is cancelled.
func TestTicketOpenTimesOut(t *testing.T) {
	withUTC(t)
	r := ticketResv(t)
	r.Start, r.End = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	r.Provisioned = []string{"a1"}
	tc, url := newTicketController(t, r)
	out, err := runCLI(t, url, "ticket", "open", "--from", "a1", "--to", "b1", "--flows", "tcp 198.18.1.1 > 198.18.2.1:7070", "--bandwidth", "500M", "--duration", "1h", "--wait", "300ms")
	if err == nil || !strings.HasPrefix(err.Error(), "ticket open: ticket r-1 is still RESERVED after 300ms, waiting for rb to put its part in place; the ticket stays open: lightpath ticket status r-1") {
		t.Errorf("error %v", err)
	}
	if !strings.Contains(out, "opened ticket r-1: still RESERVED after") || !strings.Contains(out, "managed nodes  in place: a1; waiting for rb\n") {
		t.Errorf("printed:\n%s", out)
	}
	for _, p := range tc.pathsSeen() {
		if strings.HasSuffix(p, "/cancel") || strings.HasPrefix(p, "PATCH") {
			t.Errorf("a timed-out open changed the ticket: %v", tc.pathsSeen())
		}
	}

	// A start an hour ahead, no agents: it waits for the start; --json still
	// prints the ticket, not ready.
	r.Start, r.End, r.ManagedNodes, r.Provisioned = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour), nil, nil
	tc.set(r)
	out, err = runCLI(t, url, "ticket", "open", "--from", "a1", "--to", "b1", "--flows", "tcp 198.18.1.1 > 198.18.2.1:7070", "--bandwidth", "500M",
		"--start", "+1h", "--duration", "1h", "--wait", "200ms", "--json")
	if err == nil || !strings.Contains(err.Error(), "still RESERVED after 200ms, waiting for its start at "+fmtTime(r.Start)+"; the ticket stays open") {
		t.Errorf("error %v", err)
	}
	var l map[string]any
	if json.Unmarshal([]byte(out), &l) != nil || l["id"] != "r-1" || l["ready"] != false {
		t.Errorf("--json after a timeout:\n%s", out)
	}

	// --no-wait returns at once, without following the events.
	n := len(tc.pathsSeen())
	out, err = runCLI(t, url, "ticket", "open", "--from", "a1", "--to", "b1", "--flows", "tcp 198.18.1.1 > 198.18.2.1:7070", "--bandwidth", "500M", "--duration", "1h", "--no-wait")
	if err != nil || !strings.HasPrefix(out, "opened ticket r-1: RESERVED (not waiting") || len(tc.pathsSeen()) != n+1 {
		t.Errorf("--no-wait: %v, requests %v:\n%s", err, tc.pathsSeen()[n:], out)
	}
}

// TestTicketOpenFails checks a ticket that fails while waited for.
func TestTicketOpenFails(t *testing.T) {
	withUTC(t)
	r := ticketResv(t)
	tc, url := newTicketController(t, r)
	failed := r
	failed.State, failed.FailureReason, failed.Version = reserve.StateFailed, "rb: no device for link b1-rb", 2
	tc.events <- failed
	out, err := runCLI(t, url, "ticket", "open", "--from", "a1", "--to", "b1", "--flows", "tcp 198.18.1.1 > 198.18.2.1:7070", "--bandwidth", "500M", "--duration", "1h")
	if err == nil || err.Error() != "ticket open: reservation r-1 is FAILED (rb: no device for link b1-rb): it will never be ACTIVE" {
		t.Errorf("error %v", err)
	}
	if !strings.Contains(out, "opened ticket r-1, but it is FAILED") || !strings.Contains(out, "failed         rb: no device for link b1-rb\n") {
		t.Errorf("printed:\n%s", out)
	}
}

// TestTicketOpenRefused checks mistakes caught before a request, and the
// controller's refusals worded on one line.
func TestTicketOpenRefused(t *testing.T) {
	withUTC(t)
	base := []string{"ticket", "open", "--from", "a1", "--to", "b1"}
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"no flows", []string{"--bandwidth", "1G", "--duration", "1h"}, "--flows is required"},
		{"no bandwidth", []string{"--flows", "tcp 198.18.1.1 > 198.18.2.1", "--duration", "1h"}, "--bandwidth is required"},
		{"no window", []string{"--flows", "tcp 198.18.1.1 > 198.18.2.1", "--bandwidth", "1G"}, "--duration D or --end"},
		{"deadline without size", []string{"--flows", "tcp 198.18.1.1 > 198.18.2.1", "--bandwidth", "1G", "--duration", "1h", "--deadline", "+2h"}, "--deadline goes with --size"},
		{"wait and no-wait", []string{"--flows", "tcp 198.18.1.1 > 198.18.2.1", "--bandwidth", "1G", "--duration", "1h", "--wait", "1m", "--no-wait"}, "exclude each other"},
		{"zero wait", []string{"--flows", "tcp 198.18.1.1 > 198.18.2.1", "--bandwidth", "1G", "--duration", "1h", "--wait", "0s"}, "--no-wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, url := newTicketController(t, ticketResv(t))
			_, err := runCLI(t, url, append(base, tc.args...)...)
			if err == nil || !strings.HasPrefix(err.Error(), "ticket open: ") || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one mentioning %q", err, tc.err)
			}
			if len(f.pathsSeen()) != 0 {
				t.Errorf("requests were sent: %v", f.pathsSeen())
			}
		})
	}

	// The flow spec is the controller's to judge; its refusal names --flows.
	f, url := newTicketController(t, ticketResv(t))
	f.status = 400
	f.errMsg = `{"error":{"code":"invalid","field":"flow_spec","message":"flow 1 (tcp 10.0.0.1 > 198.18.2.1): source 10.0.0.1 is not an address of the reservation's from node (198.18.1.1)"}}`
	out, err := runCLI(t, url, append(base, "--flows", "tcp 10.0.0.1 > 198.18.2.1", "--bandwidth", "1G", "--duration", "1h", "--json")...)
	if err == nil || err.Error() != "ticket open: --flows: flow 1 (tcp 10.0.0.1 > 198.18.2.1): source 10.0.0.1 is not an address of the reservation's from node (198.18.1.1)" {
		t.Errorf("refused flow spec: %v", err)
	}
	if got := strings.Join(f.pathsSeen(), ","); got != "POST /api/v1/reservations" {
		t.Errorf("requests after a refusal: %s", got)
	}
	var eb apiv1.ErrorBody
	if json.Unmarshal([]byte(out), &eb) != nil || eb.Error.Field != "flow_spec" {
		t.Errorf("--json refusal line %q", out)
	}
	f.errMsg = `{"error":{"code":"invalid","message":"invalid flow spec \"tcp nowhere\" at column 12: want '>' and the destination after the source, got nothing"}}`
	if _, err := runCLI(t, url, append(base, "--flows", "tcp nowhere", "--bandwidth", "1G", "--duration", "1h")...); err == nil ||
		!strings.HasPrefix(err.Error(), `ticket open: --flows: invalid flow spec "tcp nowhere" at column 12`) {
		t.Errorf("malformed flow spec: %v", err)
	}
	f.status, f.errMsg = 409, `{"error":{"code":"capacity","message":"does not fit","alternatives":{"widest":{"algorithm":"w","bandwidth_bps":400000000}}}}`
	if _, err := runCLI(t, url, append(base, "--flows", "tcp 198.18.1.1 > 198.18.2.1", "--bandwidth", "1G", "--duration", "1h")...); err == nil ||
		err.Error() != "ticket open: does not fit; widest in that slot: 400 Mbit/s" {
		t.Errorf("capacity: %v", err)
	}
}

// TestTicketExtend checks extend reads the ticket, sends the version read
// with the new end, and refuses what is not a ticket or not later.
func TestTicketExtend(t *testing.T) {
	withUTC(t)
	r := ticketResv(t)
	r.Version = 4
	f, url := newTicketController(t, r)
	out, err := runCLI(t, url, "ticket", "extend", "r-1", "--by", "30m")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.pathsSeen(), ","); got != "GET /api/v1/reservations/r-1,PATCH /api/v1/reservations/r-1" {
		t.Fatalf("requests %s", got)
	}
	if b := f.bodiesSeen()[1]; b["version"] != 4.0 || b["end"] != "2026-05-01T16:30:00Z" || b["start"] != nil || b["bandwidth_bps"] != nil {
		t.Errorf("PATCH body %v", b)
	}
	if !strings.HasPrefix(out, "extended ticket r-1 to 2026-05-01T16:30:00Z (was 2026-05-01T16:00:00Z)\n") || !strings.Contains(out, "(version 5)") {
		t.Errorf("extend said:\n%s", out)
	}
	out, err = runCLI(t, url, "ticket", "extend", "r-1", "--end", "2026-05-01T18:00:00Z", "--json")
	var l map[string]any
	if err != nil || json.Unmarshal([]byte(out), &l) != nil || l["end"] != "2026-05-01T18:00:00Z" || l["version"] != 6.0 {
		t.Errorf("extend --end --json: %v\n%s", err, out)
	}

	n := len(f.pathsSeen())
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"r-1"}, "give one of --by D and --end TIME"},
		{[]string{"r-1", "--by", "1h", "--end", "+1h"}, "give one of"},
		{[]string{"r-1", "--by", "-1h"}, "--by"},
		{[]string{"r-1", "--end", "2026-05-01T17:00:00Z"}, "is not after the ticket's end 2026-05-01T18:00:00Z (to end it now: lightpath ticket close r-1)"},
		{[]string{"r-9", "--by", "1h"}, "ticket extend: reservation r-9: not found"},
	} {
		if _, err := runCLI(t, url, append([]string{"ticket", "extend"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("extend %v: %v, want an error mentioning %q", tc.args, err, tc.err)
		}
	}
	for _, p := range f.pathsSeen()[n:] {
		if strings.HasPrefix(p, "PATCH") {
			t.Errorf("a refused extend was sent: %v", f.pathsSeen()[n:])
		}
	}

	// A reservation without flows is not a ticket: nothing is changed.
	plain := r
	plain.FlowSpec = reserve.FlowSpec{}
	f.set(plain)
	n = len(f.pathsSeen())
	if _, err := runCLI(t, url, "ticket", "extend", "r-1", "--by", "1h"); err == nil || err.Error() != "ticket extend: r-1 is a reservation without flows, not a ticket: see lightpath reserve show r-1" {
		t.Errorf("extend of a reservation without flows: %v", err)
	}
	if got := f.pathsSeen()[n:]; len(got) != 1 {
		t.Errorf("requests %v", got)
	}
}

// TestTicketStatusAndClose checks status shows the last changes and the
// reasons, and close cancels once.
func TestTicketStatusAndClose(t *testing.T) {
	withUTC(t)
	r := ticketResv(t)
	r.State, r.Degraded, r.DegradedReason = reserve.StateActive, true, "agent rb lease lapsed"
	r.Provisioned = []string{"a1", "rb"}
	for i := 0; i < 7; i++ {
		r.History = append(r.History, reserve.Transition{From: reserve.StateActive, To: reserve.StateActive, Event: reserve.EventNodeProvisioned,
			At: cliT0.Add(time.Duration(i) * time.Minute), By: "agent", Why: fmt.Sprintf("change %d", i), Version: uint64(i + 2)})
	}
	f, url := newTicketController(t, r)
	out, err := runCLI(t, url, "ticket", "status", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"state          ACTIVE (degraded)\n",
		"degraded       agent rb lease lapsed\n",
		"owner          alice (project cms)\n",
		"managed nodes  a1, rb (all in place)\n",
		"\nlast 5 changes (all 8: lightpath reserve show r-1):\n",
		"change 6\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "change 1\n") || strings.Contains(out, "created and committed") {
		t.Errorf("status shows more than the last changes:\n%s", out)
	}
	out, err = runCLI(t, url, "ticket", "status", "r-1", "--json")
	var l map[string]any
	if err != nil || json.Unmarshal([]byte(out), &l) != nil || l["ready"] != true || l["degraded_reason"] != "agent rb lease lapsed" || len(l["history"].([]any)) != 8 {
		t.Errorf("status --json: %v\n%s", err, out)
	}
	if _, err := runCLI(t, url, "ticket", "status", "r-9"); err == nil || err.Error() != "ticket status: reservation r-9: not found" {
		t.Errorf("status of someone else's: %v", err)
	}

	n := len(f.pathsSeen())
	out, err = runCLI(t, url, "ticket", "close", "r-1", "--reason", "done")
	if err != nil || !strings.HasPrefix(out, "closed ticket r-1 CANCELLED: a1 → b1") {
		t.Errorf("close: %v\n%s", err, out)
	}
	if got := strings.Join(f.pathsSeen()[n:], ","); got != "GET /api/v1/reservations/r-1,POST /api/v1/reservations/r-1/cancel" {
		t.Errorf("close requests %s", got)
	}
	if b := f.bodiesSeen()[n+1]; b["reason"] != "done" || b["version"] != nil {
		t.Errorf("cancel body %v", b)
	}
	n = len(f.pathsSeen())
	out, err = runCLI(t, url, "ticket", "close", "r-1")
	if err != nil || !strings.HasPrefix(out, "ticket r-1 was closed already: r-1 CANCELLED") || len(f.pathsSeen()) != n+1 {
		t.Errorf("close again: %v, %v\n%s", err, f.pathsSeen()[n:], out)
	}
}

// TestTicketList checks list asks for the caller's reservations and keeps
// those with flows.
func TestTicketList(t *testing.T) {
	withUTC(t)
	f, url := newTicketController(t, ticketResv(t))
	out, err := runCLI(t, url, "ticket", "list", "--json", "--state", "reserved")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 || lines[1] != `{"summary":true,"count":1}` || !strings.Contains(lines[0], `"id":"r-1"`) || !strings.Contains(lines[0], `"dscp_name":"af11"`) {
		t.Errorf("list --json:\n%s", out)
	}
	if got := strings.Join(f.pathsSeen(), ","); got != "GET /api/v1/whoami,GET /api/v1/reservations" {
		t.Errorf("requests %s", got)
	}
	out, err = runCLI(t, url, "ticket", "list")
	if err != nil || !strings.Contains(out, "DSCP") || !strings.Contains(out, "af11 (10)") || strings.Contains(out, "r-22") {
		t.Errorf("list: %v\n%s", err, out)
	}
	if _, err := runCLI(t, url, "ticket", "list", "--state", "RUNNING"); err == nil || !strings.HasPrefix(err.Error(), "ticket list: --state") {
		t.Errorf("bad state: %v", err)
	}
}

func TestTicketWords(t *testing.T) {
	withUTC(t)
	now := cliT0
	r := reserve.Reservation{ID: "r-1", State: reserve.StateReserved, Start: now.Add(time.Hour), ManagedNodes: []string{"a1", "ra", "rb"}, Provisioned: []string{"ra"}}
	for _, tc := range []struct {
		name  string
		edit  func(*reserve.Reservation)
		wait  string
		nodes string
	}{
		{"before its start", func(*reserve.Reservation) {}, "waiting for its start at 2026-05-01T15:00:00Z, then for a1, rb to put their part in place", "in place: ra; waiting for a1, rb"},
		{"started", func(r *reserve.Reservation) { r.Start = now.Add(-time.Second) }, "waiting for a1, rb to put their part in place", "in place: ra; waiting for a1, rb"},
		{"one left", func(r *reserve.Reservation) { r.Start, r.Provisioned = now, []string{"a1", "ra"} }, "waiting for rb to put its part in place", "in place: a1, ra; waiting for rb"},
		{"none reported", func(r *reserve.Reservation) { r.Start, r.Provisioned = now, nil }, "waiting for a1, ra, rb to put their part in place", "waiting for a1, ra, rb"},
		{"no agents, later", func(r *reserve.Reservation) { r.ManagedNodes, r.Provisioned = nil, nil }, "waiting for its start at 2026-05-01T15:00:00Z", "none: no agent runs on its path"},
		{"no agents, due", func(r *reserve.Reservation) { r.Start, r.ManagedNodes, r.Provisioned = now, nil, nil }, "waiting for the controller to activate it", "none: no agent"},
		{"held", func(r *reserve.Reservation) { r.State = reserve.StateHeld }, "waiting to be committed (lightpath reserve commit r-1)", "in place: ra"},
		{"cancelled", func(r *reserve.Reservation) { r.State = reserve.StateCancelled }, "", "a1, ra, rb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := r
			tc.edit(&x)
			if tc.wait != "" {
				if got := waitingFor(x, now); got != tc.wait {
					t.Errorf("waitingFor = %q, want %q", got, tc.wait)
				}
			}
			if got := managedNodes(x); !strings.HasPrefix(got, tc.nodes) {
				t.Errorf("managedNodes = %q, want %q...", got, tc.nodes)
			}
		})
	}
	for v, want := range map[uint8]string{10: "af11 (10)", 46: "ef (46)", 8: "cs1 (8)", 3: "3", 0: "-"} {
		if got := fmtDSCP(v); got != want {
			t.Errorf("fmtDSCP(%d) = %q, want %q", v, got, want)
		}
	}
	var b bytes.Buffer
	printTickets(&b, []ticketLine{newTicketLine(ticketResv(t))})
	if !strings.Contains(b.String(), "r-1  RESERVED  a1    b1  500 Mbit/s  af11 (10)  2026-05-01T14:00:00Z  2026-05-01T16:00:00Z  tcp 198.18.1.1 > 198.18.2.1:7070, udp") {
		t.Errorf("ticket table:\n%s", b.String())
	}
}
