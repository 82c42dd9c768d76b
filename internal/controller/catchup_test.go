package controller_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
)

// TestOpenCatchesUp pins catch-up: reservations whose start, end or hold
// expiry passed while no controller ran are brought up to date by Open,
// before anything is served, with the transitions a running clock would
// have made (in order) and an audit entry "catch-up ID"; what is still to
// come stays due, and the new controller's clock applies it.
func TestOpenCatchesUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent bool // h1 has an agent when the reservation is made
		in    controller.CreateInput
		// before runs on the first controller before it stops.
		before func(h *harness, r reserve.Reservation)
		away   time.Duration // clock after t0 when the new controller opens
		want   reserve.State
		states []reserve.State
		why    string
		// later, when set, is a further instant at which the new
		// controller's clock must move it to wantLater.
		later     time.Duration
		wantLater reserve.State
	}{{
		name:   "start passed",
		in:     controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Minute), Duration: time.Hour},
		away:   10 * time.Minute,
		want:   reserve.StateActive,
		states: []reserve.State{reserve.StateReserved, reserve.StateActive},
		why:    "start 2031-05-04T10:01:00Z reached",
		later:  61 * time.Minute, wantLater: reserve.StateFinished,
	}, {
		name:   "start and end passed",
		in:     controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Minute), Duration: time.Hour},
		away:   24 * time.Hour,
		want:   reserve.StateFinished,
		states: []reserve.State{reserve.StateReserved, reserve.StateActive, reserve.StateFinished},
		why:    "end 2031-05-04T11:01:00Z reached",
	}, {
		name:   "active, end passed",
		in:     controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Duration: time.Hour},
		before: func(h *harness, r reserve.Reservation) { h.at(t0.Add(time.Second)) },
		away:   2 * time.Hour,
		want:   reserve.StateFinished,
		states: []reserve.State{reserve.StateReserved, reserve.StateActive, reserve.StateFinished},
	}, {
		name:   "hold expired",
		in:     controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Hour), Duration: time.Hour, Hold: 5 * time.Minute},
		away:   30 * time.Minute,
		want:   reserve.StateCancelled,
		states: []reserve.State{reserve.StateHeld, reserve.StateCancelled},
		why:    "hold expired at 2031-05-04T10:05:00Z without a commit",
	}, {
		name:   "nothing due yet",
		in:     controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Hour), Duration: time.Hour},
		away:   30 * time.Minute,
		want:   reserve.StateReserved,
		states: []reserve.State{reserve.StateReserved},
		later:  time.Hour, wantLater: reserve.StateActive,
	}, {
		name:  "managed node never reported before the end",
		agent: true,
		in:    controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Minute), Duration: time.Hour},
		before: func(h *harness, r reserve.Reservation) {
			if !slices.Equal(r.ManagedNodes, []string{"h1"}) {
				h.t.Fatalf("managed nodes %v, want [h1]", r.ManagedNodes)
			}
		},
		away:   2 * time.Hour,
		want:   reserve.StateFailed,
		states: []reserve.State{reserve.StateReserved, reserve.StateFailed},
		why:    "window ended at 2031-05-04T11:01:00Z before node h1 reported its part in place",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, oneLink)
			if tc.agent {
				h.heartbeat("h1", time.Minute)
			}
			r := h.create(tc.in)
			if tc.before != nil {
				tc.before(h, r)
			}
			h.stop()
			h.clk.Set(t0.Add(tc.away))
			if err := h.open(""); err != nil {
				t.Fatal(err)
			}
			// No Tick: Open alone must have caught it up.
			got := h.wantState(r.ID, tc.want)
			if s := states(got); !slices.Equal(s, tc.states) {
				t.Fatalf("went through %v, want %v", s, tc.states)
			}
			if last := got.History[len(got.History)-1]; tc.why != "" && last.Why != tc.why {
				t.Fatalf("last transition says %q, want %q", last.Why, tc.why)
			}
			if caught := tc.want != tc.states[0]; h.audited("catch-up "+r.ID) != caught {
				t.Fatalf("audit entry \"catch-up %s\": %v, want %v", r.ID, !caught, caught)
			}
			if live := h.c.LiveCount(); live != map[bool]int{true: 1, false: 0}[tc.want.Live()] {
				t.Fatalf("%d live with it %s", live, tc.want)
			}
			// Caught up once: a second restart at the same instant finds
			// nothing more to do.
			h.restart()
			if again := h.get(r.ID); again.Version != got.Version {
				t.Fatalf("a second restart changed it again: version %d → %d (%s)", got.Version, again.Version, history(again))
			}
			if tc.later != 0 {
				h.at(t0.Add(tc.later))
				h.wantState(r.ID, tc.wantLater)
			}
		})
	}
}

// TestOpenRebooksCaughtUpReservations pins that what catch-up leaves live
// is booked on the new controller's schedule and what it ends is not: the
// link's capacity after a restart is what the surviving reservations hold.
func TestOpenRebooksCaughtUpReservations(t *testing.T) {
	h := newHarness(t, oneLink)
	// Ends while away: its 600 Mbit/s must be free afterwards.
	gone := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 600 * mbit, Start: t0, Duration: 30 * time.Minute})
	// Still running after: its 300 Mbit/s must still be held.
	kept := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 300 * mbit, Start: t0, Duration: 2 * time.Hour})
	h.stop()
	h.clk.Set(t0.Add(time.Hour))
	if err := h.open(""); err != nil {
		t.Fatal(err)
	}
	h.wantState(gone.ID, reserve.StateFinished)
	h.wantState(kept.ID, reserve.StateActive)
	h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 600 * mbit, Duration: 30 * time.Minute})
	_, err := h.c.Create(h.ctx, alice, controller.CreateInput{From: "h1", To: "h2", Bandwidth: 1 * mbit, Duration: 30 * time.Minute})
	wantErr(t, err, reserve.ErrCapacity)
}

// TestOpenJudgesLeasesLapsedWhileAway pins that an agent whose lease
// lapsed while no controller ran leaves the reservations counting on its
// node degraded as soon as the new controller opens, and that its next
// heartbeat recovers them.
func TestOpenJudgesLeasesLapsedWhileAway(t *testing.T) {
	h := newHarness(t, oneLink)
	h.heartbeat("h1", 30*time.Second)
	r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 100 * mbit, Duration: time.Hour})
	if _, err := h.c.Report(h.ctx, agentOf("h1"), r.ID, "h1", true, ""); err != nil {
		t.Fatal(err)
	}
	h.at(t0)
	if got := h.wantState(r.ID, reserve.StateActive); got.Degraded {
		t.Fatalf("degraded while its agent is alive: %s", got.DegradedReason)
	}
	h.stop()
	h.clk.Set(t0.Add(time.Minute))
	if err := h.open(""); err != nil {
		t.Fatal(err)
	}
	got := h.wantState(r.ID, reserve.StateActive)
	if !got.Degraded || !strings.HasPrefix(got.DegradedReason, "the agent of h1 is gone") {
		t.Fatalf("after the lease lapsed away: degraded %v (%q), want degraded by the agent of h1", got.Degraded, got.DegradedReason)
	}
	if h.c.Managed("h1") {
		t.Fatal("h1 still managed after its lease lapsed")
	}
	h.heartbeat("h1", 30*time.Second)
	if got := h.wantState(r.ID, reserve.StateActive); got.Degraded {
		t.Fatalf("still degraded after the agent came back: %s", got.DegradedReason)
	}
}

// TestOpenCatchesUpBeforeATopologyGiven pins the order of Open's work: the
// reservations are caught up before a topology given on the command line
// is checked against them, so one that ended while no controller ran does
// not block a topology without its link, while one still live does.
func TestOpenCatchesUpBeforeATopologyGiven(t *testing.T) {
	for _, tc := range []struct {
		name    string
		away    time.Duration // clock after t0 at the restart
		refused bool
	}{
		{name: "ended while away", away: 2 * time.Hour},
		{name: "still live", away: 30 * time.Minute, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, twoLinks)
			r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Path: []string{"q"}, Duration: time.Hour})
			h.stop()
			h.clk.Set(t0.Add(tc.away))
			err := h.open(without(twoLinks, "q"))
			if tc.refused {
				wantErr(t, err, reserve.ErrConflict, r.ID, `unknown link "q"`)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			h.wantState(r.ID, reserve.StateFinished)
			if got := h.c.Topology().YAML; got != without(twoLinks, "q") {
				t.Fatalf("topology after the open:\n%s", got)
			}
		})
	}
}
