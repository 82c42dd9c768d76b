package controller_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
)

// TestClockStateMachine pins the reservation's life under the clock,
// without agents: a RESERVED reservation becomes ACTIVE when its start
// passes and FINISHED at its end, not a millisecond before either; a tick
// that finds both passed applies both, in order; a hold not committed in
// time is cancelled (at its expiry, or at the window's end if that comes
// first); a committed hold runs like any reservation; a cancel is final,
// and the clock leaves it alone. Each step moves the clock, optionally
// acts, ticks, and checks the state as stored.
func TestClockStateMachine(t *testing.T) {
	type step struct {
		at   time.Duration // clock after t0
		do   func(h *harness, r reserve.Reservation) (reserve.Reservation, error)
		want reserve.State
		why  string // the last transition's reason says this
	}
	commit := func(h *harness, r reserve.Reservation) (reserve.Reservation, error) {
		return h.c.Commit(h.ctx, alice, r.ID, r.Version)
	}
	cancel := func(h *harness, r reserve.Reservation) (reserve.Reservation, error) {
		return h.c.Cancel(h.ctx, alice, r.ID, r.Version, "plans changed")
	}
	for _, tc := range []struct {
		name   string
		in     controller.CreateInput
		first  reserve.State
		steps  []step
		states []reserve.State // the whole history at the end
	}{{
		name:  "reserved starts then finishes",
		in:    controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Minute), Duration: 10 * time.Minute},
		first: reserve.StateReserved,
		steps: []step{
			{at: time.Minute - time.Millisecond, want: reserve.StateReserved},
			{at: time.Minute, want: reserve.StateActive, why: "start 2031-05-04T10:01:00Z reached"},
			{at: 11*time.Minute - time.Millisecond, want: reserve.StateActive},
			{at: 11 * time.Minute, want: reserve.StateFinished, why: "end 2031-05-04T10:11:00Z reached"},
			{at: time.Hour, want: reserve.StateFinished},
		},
		states: []reserve.State{reserve.StateReserved, reserve.StateActive, reserve.StateFinished},
	}, {
		name:  "a tick after start and end applies both in order",
		in:    controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Minute), Duration: 10 * time.Minute},
		first: reserve.StateReserved,
		steps: []step{
			{at: 3 * time.Hour, want: reserve.StateFinished},
		},
		states: []reserve.State{reserve.StateReserved, reserve.StateActive, reserve.StateFinished},
	}, {
		name:  "starting now, active on the first tick",
		in:    controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Duration: time.Minute},
		first: reserve.StateReserved,
		steps: []step{
			{at: 0, want: reserve.StateActive},
			{at: time.Minute, want: reserve.StateFinished},
		},
		states: []reserve.State{reserve.StateReserved, reserve.StateActive, reserve.StateFinished},
	}, {
		name:  "hold expires without a commit",
		in:    controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Hour), Duration: time.Hour, Hold: 5 * time.Minute},
		first: reserve.StateHeld,
		steps: []step{
			{at: 5*time.Minute - time.Millisecond, want: reserve.StateHeld},
			{at: 5 * time.Minute, want: reserve.StateCancelled, why: "hold expired at 2031-05-04T10:05:00Z without a commit"},
			{at: 2 * time.Hour, want: reserve.StateCancelled},
		},
		states: []reserve.State{reserve.StateHeld, reserve.StateCancelled},
	}, {
		name:  "window ends before the hold does",
		in:    controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Duration: 2 * time.Minute, Hold: 10 * time.Minute},
		first: reserve.StateHeld,
		steps: []step{
			{at: time.Minute, want: reserve.StateHeld},
			{at: 2 * time.Minute, want: reserve.StateCancelled, why: "window ended at 2031-05-04T10:02:00Z before a commit"},
		},
		states: []reserve.State{reserve.StateHeld, reserve.StateCancelled},
	}, {
		name:  "committed hold runs its window",
		in:    controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Hour), Duration: time.Hour, Hold: 5 * time.Minute},
		first: reserve.StateHeld,
		steps: []step{
			{at: time.Minute, do: commit, want: reserve.StateReserved, why: "committed"},
			{at: 5 * time.Minute, want: reserve.StateReserved},
			{at: time.Hour, want: reserve.StateActive},
			{at: 2 * time.Hour, want: reserve.StateFinished},
		},
		states: []reserve.State{reserve.StateHeld, reserve.StateReserved, reserve.StateActive, reserve.StateFinished},
	}, {
		name:  "cancelled before its start stays cancelled",
		in:    controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Hour), Duration: time.Hour},
		first: reserve.StateReserved,
		steps: []step{
			{at: time.Minute, do: cancel, want: reserve.StateCancelled, why: "plans changed"},
			{at: time.Hour, want: reserve.StateCancelled},
			{at: 3 * time.Hour, want: reserve.StateCancelled},
		},
		states: []reserve.State{reserve.StateReserved, reserve.StateCancelled},
	}, {
		name:  "cancelled while active",
		in:    controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Duration: time.Hour},
		first: reserve.StateReserved,
		steps: []step{
			{at: 0, want: reserve.StateActive},
			{at: 10 * time.Minute, do: cancel, want: reserve.StateCancelled, why: "plans changed"},
			{at: 2 * time.Hour, want: reserve.StateCancelled},
		},
		states: []reserve.State{reserve.StateReserved, reserve.StateActive, reserve.StateCancelled},
	}, {
		// A request on a reservation whose start passed unseen by the
		// clock sees the start applied first (current catches it up).
		name:  "cancel after an unticked start catches the start up first",
		in:    controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Minute), Duration: time.Hour},
		first: reserve.StateReserved,
		steps: []step{
			{at: 30 * time.Minute, do: func(h *harness, r reserve.Reservation) (reserve.Reservation, error) {
				return h.c.Cancel(h.ctx, alice, r.ID, 0, "")
			}, want: reserve.StateCancelled, why: "cancelled"},
		},
		states: []reserve.State{reserve.StateReserved, reserve.StateActive, reserve.StateCancelled},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, oneLink)
			r := h.create(tc.in)
			if r.State != tc.first {
				t.Fatalf("created %s, want %s", r.State, tc.first)
			}
			for _, s := range tc.steps {
				h.clk.Set(t0.Add(s.at))
				if s.do != nil {
					if _, err := s.do(h, h.get(r.ID)); err != nil {
						t.Fatalf("at +%s: %v", s.at, err)
					}
				} else {
					h.c.Tick(h.ctx)
				}
				got := h.wantState(r.ID, s.want)
				if last := got.History[len(got.History)-1]; s.why != "" && last.Why != s.why {
					t.Fatalf("at +%s: last transition says %q, want %q", s.at, last.Why, s.why)
				}
				if live := h.c.LiveCount(); live != map[bool]int{true: 1, false: 0}[got.State.Live()] {
					t.Fatalf("at +%s: %d live reservations with it %s", s.at, live, got.State)
				}
			}
			if got := states(h.get(r.ID)); !slices.Equal(got, tc.states) {
				t.Fatalf("went through %v, want %v", got, tc.states)
			}
		})
	}
}

// TestTickIsIdempotent pins that ticking again at the same instant changes
// nothing: no extra transition, no version bump.
func TestTickIsIdempotent(t *testing.T) {
	h := newHarness(t, oneLink)
	r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Minute), Duration: time.Hour})
	h.at(t0.Add(time.Minute))
	a := h.wantState(r.ID, reserve.StateActive)
	for range 3 {
		h.c.Tick(h.ctx)
	}
	b := h.get(r.ID)
	if b.Version != a.Version || len(b.History) != len(a.History) {
		t.Fatalf("ticks at the same instant changed it: version %d → %d, %d → %d transitions", a.Version, b.Version, len(a.History), len(b.History))
	}
}

// TestEndReleasesCapacity pins that a reservation leaving the live set
// (finished or cancelled) gives its bandwidth back, while a live one
// keeps it: a second full-link create over the same window is refused
// for capacity, with alternatives, until then.
func TestEndReleasesCapacity(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(h *harness, r reserve.Reservation)
	}{
		{name: "cancel", end: func(h *harness, r reserve.Reservation) {
			if _, err := h.c.Cancel(h.ctx, alice, r.ID, r.Version, ""); err != nil {
				h.t.Fatal(err)
			}
		}},
		{name: "hold expiry", end: func(h *harness, r reserve.Reservation) { h.at(r.HoldExpires) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, oneLink)
			in := controller.CreateInput{From: "h1", To: "h2", Bandwidth: 900 * mbit, Start: t0.Add(time.Hour), Duration: time.Hour}
			first := in
			first.Hold = time.Minute
			r := h.create(first)
			_, err := h.c.Create(h.ctx, alice, in)
			var ref *controller.Refusal
			if !errors.As(err, &ref) || !errors.Is(err, reserve.ErrCapacity) {
				t.Fatalf("second full-link create: got %v, want a capacity refusal", err)
			}
			tc.end(h, r)
			if n := h.c.LiveCount(); n != 0 {
				t.Fatalf("%d live after the end, want 0", n)
			}
			h.create(in)
		})
	}
}

// TestCancelRefusals pins what a cancel cannot do: act on a stale
// version (the caller saw an older reservation), or undo a reservation
// that is over.
func TestCancelRefusals(t *testing.T) {
	h := newHarness(t, oneLink)
	r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 100 * mbit, Duration: time.Minute})
	h.at(t0) // RESERVED → ACTIVE: version moves on
	_, err := h.c.Cancel(h.ctx, alice, r.ID, r.Version, "")
	var stale *reserve.StaleVersionError
	if !errors.As(err, &stale) {
		t.Fatalf("cancel with the created version after it started: got %v, want a stale version error", err)
	}
	h.at(t0.Add(time.Minute))
	got := h.wantState(r.ID, reserve.StateFinished)
	_, err = h.c.Cancel(h.ctx, alice, r.ID, got.Version, "")
	var tr *reserve.TransitionError
	if !errors.As(err, &tr) || !strings.Contains(err.Error(), "it is over") {
		t.Fatalf("cancel of a finished reservation: got %v, want a transition error saying it is over", err)
	}
	h.wantState(r.ID, reserve.StateFinished)
}

// TestRunAppliesDueTransitions pins Run, the loop that drives Tick: it
// applies what is due when it starts, applies what falls due after a
// change wakes it, publishes each transition, and returns when its
// context ends.
func TestRunAppliesDueTransitions(t *testing.T) {
	h := newHarness(t, oneLink)
	r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 100 * mbit, Start: t0.Add(time.Minute), Duration: 10 * time.Minute})
	events, unsubscribe, _ := h.c.Subscribe(alice, r.ID, 0)
	defer unsubscribe()
	h.clk.Set(t0.Add(time.Minute))
	ctx, stop := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		h.c.Run(ctx)
		close(done)
	}()
	next := func() reserve.Transition {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("event stream closed")
			}
			return *ev.Transition
		case <-time.After(time.Minute): // a guard against a hang, not a timing assertion
			t.Fatal("no event from Run")
		}
		return reserve.Transition{}
	}
	if tr := next(); tr.To != reserve.StateActive {
		t.Fatalf("first transition %s→%s, want to ACTIVE", tr.From, tr.To)
	}
	// The next due instant is the end, ten fake minutes away: Run sleeps
	// on a real timer until a change wakes it. Move the clock past the end
	// and make a change.
	h.clk.Set(t0.Add(11 * time.Minute))
	h.create(controller.CreateInput{From: "h2", To: "h1", Bandwidth: 100 * mbit, Start: t0.Add(time.Hour), Duration: time.Minute})
	if tr := next(); tr.To != reserve.StateFinished {
		t.Fatalf("second transition %s→%s, want to FINISHED", tr.From, tr.To)
	}
	stop()
	<-done
	h.wantState(r.ID, reserve.StateFinished)
}
