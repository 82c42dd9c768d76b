package api_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
)

// transit is two sites joined through two transit routers, t1 and t2, so a
// reservation from a1 can move from one to the other.
const transit = `
sites: [{name: site-a}, {name: site-b}]
nodes:
  - {name: a1, site: site-a}
  - {name: ra, site: site-a, role: router}
  - {name: t1, site: site-a, role: router}
  - {name: t2, site: site-b, role: router}
  - {name: b1, site: site-b}
  - {name: b2, site: site-b}
  - {name: rb, site: site-b, role: router}
links:
  - {name: a1-ra, ends: [a1, ra], rate: 10G}
  - {name: b1-rb, ends: [b1, rb], rate: 10G}
  - {name: b2-rb, ends: [b2, rb], rate: 10G}
  - {name: ra-t1, ends: [ra, t1], rate: 1G}
  - {name: t1-rb, ends: [t1, rb], rate: 1G}
  - {name: ra-t2, ends: [ra, t2], rate: 1G}
  - {name: t2-rb, ends: [t2, rb], rate: 1G}
`

// nextEvent reads the next event of an SSE stream.
func nextEvent(t *testing.T, r *bufio.Reader) apiv1.Event {
	t.Helper()
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

// Issue 14: an agent is woken only by the events that touch its node. The
// agent of a1 does not get the event of a reservation between b1 and b2,
// and does get one touching a1; the agent of t1 gets the change that moves
// a reservation off t1 (it must remove it there) and nothing after; a user
// still gets every change of their own reservations.
func TestAgentEventsFollowItsNode(t *testing.T) {
	e := newEnv(t, sqliteURL(t), transit)
	alice := e.user("alice", "user")
	agentA1 := e.agent("agent-a1", "a1")
	agentT1 := e.agent("agent-t1", "t1")
	open := func(token string) *bufio.Reader {
		resp := openStream(t, e.srv.URL, "/api/v1/events", token)
		if resp.StatusCode != 200 {
			t.Fatalf("events: %d", resp.StatusCode)
		}
		br := bufio.NewReader(resp.Body)
		firstFrame(t, br)
		return br
	}
	a1Ev, t1Ev, aliceEv := open(agentA1), open(agentT1), open(alice)

	create := func(from, to string, path ...string) apiv1.ReservationResponse {
		t.Helper()
		st, res, raw := e.create(alice, apiv1.ReservationRequest{From: from, To: to, Bandwidth: 100 * mbps, Start: t0.Add(time.Hour), Duration: "1h", Path: path})
		if st != 201 {
			t.Fatalf("create %s to %s: %d %s", from, to, st, raw)
		}
		return res
	}
	elsewhere := create("b1", "b2")
	viaT1 := create("a1", "b1", "a1-ra", "ra-t1", "t1-rb", "b1-rb")
	if ev := nextEvent(t, a1Ev); ev.Reservation == nil || ev.Reservation.ID != viaT1.Reservation.ID {
		t.Fatalf("the agent of a1 got %+v first, want the reservation from a1 (%s), not the one between b1 and b2 (%s)", ev.Reservation, viaT1.Reservation.ID, elsewhere.Reservation.ID)
	}
	if ev := nextEvent(t, t1Ev); ev.Reservation == nil || ev.Reservation.ID != viaT1.Reservation.ID {
		t.Fatalf("the agent of t1 got %+v first, want %s", ev.Reservation, viaT1.Reservation.ID)
	}
	// Moved off t1: t1's agent must hear of it, though the reservation no
	// longer touches t1.
	if st, raw := e.do("PATCH", "/api/v1/reservations/"+viaT1.Reservation.ID, alice,
		apiv1.ModifyRequest{Version: viaT1.Reservation.Version, Path: []string{"a1-ra", "ra-t2", "t2-rb", "b1-rb"}}, nil); st != 200 {
		t.Fatalf("move to t2: %d %s", st, raw)
	}
	ev := nextEvent(t, t1Ev)
	if ev.Reservation == nil || ev.Reservation.ID != viaT1.Reservation.ID || ev.Reservation.Path[1].Link != "ra-t2" {
		t.Fatalf("the agent of t1 got %+v, want the move of %s off t1", ev.Reservation, viaT1.Reservation.ID)
	}
	if ev := nextEvent(t, a1Ev); ev.Reservation == nil || ev.Reservation.ID != viaT1.Reservation.ID || ev.Reservation.Path[1].Link != "ra-t2" {
		t.Fatalf("the agent of a1 got %+v, want the move of %s", ev.Reservation, viaT1.Reservation.ID)
	}
	// Now elsewhere for t1 too: its next event is the next one through t1.
	create("a1", "b2", "a1-ra", "ra-t2", "t2-rb", "b2-rb")
	again := create("b2", "a1", "b2-rb", "t1-rb", "ra-t1", "a1-ra")
	if ev := nextEvent(t, t1Ev); ev.Reservation == nil || ev.Reservation.ID != again.Reservation.ID {
		t.Fatalf("the agent of t1 got %+v, want %s (through t1)", ev.Reservation, again.Reservation.ID)
	}
	// Alice's stream is unchanged: all her reservations' changes, in order.
	for _, want := range []string{elsewhere.Reservation.ID, viaT1.Reservation.ID, viaT1.Reservation.ID} {
		if ev := nextEvent(t, aliceEv); ev.Reservation == nil || ev.Reservation.ID != want {
			t.Fatalf("alice got %+v, want %s", ev.Reservation, want)
		}
	}
}
