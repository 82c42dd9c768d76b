package reserve

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The reservation the state tests start from: created at rsvT0, starting
// an hour later for two hours, over h1 → rt → h2 where rt (a router) may
// have an agent.
var rsvT0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

const rsvHold = 15 * time.Minute

func rsvDraft(managed bool) Reservation {
	r := Reservation{
		ID: "res-1", Owner: "alice", Project: "cms",
		From: "h1", To: "h2", Bandwidth: 1_000_000_000,
		Start: rsvT0.Add(time.Hour), End: rsvT0.Add(3 * time.Hour),
		Path: []PathHop{{Link: "l1", From: "h1", To: "rt"}, {Link: "l2", From: "rt", To: "h2"}},
	}
	if managed {
		r.ManagedNodes = []string{"rt"}
	}
	return r
}

// rsvStep applies one event that must be accepted and change something.
func rsvStep(t *testing.T, r Reservation, ev Event, now time.Time) Reservation {
	t.Helper()
	n, tr, err := Next(r, ev, now)
	if err != nil {
		t.Fatalf("%s at %s: %v", ev.Kind, now.Format(time.TimeOnly), err)
	}
	if tr.IsZero() {
		t.Fatalf("%s at %s changed nothing", ev.Kind, now.Format(time.TimeOnly))
	}
	return n
}

// rsvIn builds a reservation in state st through the state machine itself,
// so every test starts from a reservation the machine could produce.
func rsvIn(t *testing.T, st State, managed bool) Reservation {
	t.Helper()
	r := rsvDraft(managed || st == StateFailed)
	if st == StateHeld {
		return rsvStep(t, r, Event{Kind: EventCreate, By: "alice", Hold: rsvHold}, rsvT0)
	}
	r = rsvStep(t, r, Event{Kind: EventCreate, By: "alice"}, rsvT0)
	switch st {
	case StateReserved:
		return r
	case StateCancelled:
		return rsvStep(t, r, Event{Kind: EventCancel, By: "alice"}, rsvT0.Add(time.Minute))
	case StateFailed:
		return rsvStep(t, r, Event{Kind: EventNodeFailed, By: "agent:rt", Node: "rt", Why: "htb class refused"}, rsvT0.Add(time.Minute))
	}
	if managed {
		r = rsvStep(t, r, Event{Kind: EventNodeProvisioned, By: "agent:rt", Node: "rt"}, rsvT0.Add(time.Minute))
	}
	r = rsvStep(t, r, Event{Kind: EventStartReached, By: ActorController}, r.Start)
	if st == StateActive {
		return r
	}
	return rsvStep(t, r, Event{Kind: EventEndReached, By: ActorController}, r.End)
}

func TestNext(t *testing.T) {
	var (
		before   = rsvT0.Add(10 * time.Minute) // inside the hold, before the start
		holdOver = rsvT0.Add(rsvHold)
		start    = rsvT0.Add(time.Hour)
		mid      = rsvT0.Add(2 * time.Hour)
		end      = rsvT0.Add(3 * time.Hour)
	)
	later := func(d time.Duration) time.Time { return rsvT0.Add(d) }
	draft := func(change func(*Reservation)) func(*testing.T) Reservation {
		return func(*testing.T) Reservation {
			r := rsvDraft(true)
			if change != nil {
				change(&r)
			}
			return r
		}
	}
	in := func(st State, managed bool) func(*testing.T) Reservation {
		return func(t *testing.T) Reservation { return rsvIn(t, st, managed) }
	}
	provisioned := func(t *testing.T) Reservation { // RESERVED, rt in place, before the start
		return rsvStep(t, rsvIn(t, StateReserved, true), Event{Kind: EventNodeProvisioned, By: "agent:rt", Node: "rt"}, before)
	}
	degraded := func(t *testing.T) Reservation {
		return rsvStep(t, rsvIn(t, StateActive, true), Event{Kind: EventDegrade, By: ActorController, Why: "agent rt: lease lapsed"}, mid)
	}
	const noop = State("no-op")
	for _, tc := range []struct {
		name    string
		r       func(*testing.T) Reservation
		ev      Event
		now     time.Time
		want    State // noop: accepted, nothing changed
		wantErr error
		check   func(*testing.T, Reservation, Transition)
	}{
		// create
		{name: "create commits", r: draft(nil), ev: Event{Kind: EventCreate, By: "alice"}, now: rsvT0, want: StateReserved,
			check: func(t *testing.T, r Reservation, tr Transition) {
				if r.Version != 1 || !r.CreatedAt.Equal(rsvT0) || !r.HoldExpires.IsZero() || tr.From != "" {
					t.Errorf("version %d, created %v, hold %v, from %q", r.Version, r.CreatedAt, r.HoldExpires, tr.From)
				}
			}},
		{name: "create holds", r: draft(nil), ev: Event{Kind: EventCreate, By: "alice", Hold: rsvHold}, now: rsvT0, want: StateHeld,
			check: func(t *testing.T, r Reservation, tr Transition) {
				if !r.HoldExpires.Equal(holdOver) || !strings.Contains(tr.Why, "15m") {
					t.Errorf("hold expires %v, why %q", r.HoldExpires, tr.Why)
				}
			}},
		{name: "create in the past is RESERVED, start due next", r: draft(nil), ev: Event{Kind: EventCreate, By: "alice"}, now: mid, want: StateReserved},
		{name: "create twice", r: in(StateReserved, true), ev: Event{Kind: EventCreate, By: "alice"}, now: before, wantErr: ErrConflict},
		{name: "create negative hold", r: draft(nil), ev: Event{Kind: EventCreate, By: "alice", Hold: -time.Second}, now: rsvT0, wantErr: ErrInvalid},
		{name: "create without id", r: draft(func(r *Reservation) { r.ID = "" }), ev: Event{Kind: EventCreate, By: "alice"}, now: rsvT0, wantErr: ErrInvalid},
		{name: "create zero bandwidth", r: draft(func(r *Reservation) { r.Bandwidth = 0 }), ev: Event{Kind: EventCreate, By: "alice"}, now: rsvT0, wantErr: ErrInvalid},
		{name: "create from = to", r: draft(func(r *Reservation) { r.To = "h1" }), ev: Event{Kind: EventCreate, By: "alice"}, now: rsvT0, wantErr: ErrInvalid},
		{name: "create end before start", r: draft(func(r *Reservation) { r.End = r.Start }), ev: Event{Kind: EventCreate, By: "alice"}, now: rsvT0, wantErr: ErrInvalid},
		{name: "create no path", r: draft(func(r *Reservation) { r.Path, r.ManagedNodes = nil, nil }), ev: Event{Kind: EventCreate, By: "alice"}, now: rsvT0, wantErr: ErrInvalid},
		{name: "create broken path", r: draft(func(r *Reservation) { r.Path[1].From = "rx" }), ev: Event{Kind: EventCreate, By: "alice"}, now: rsvT0, wantErr: ErrInvalid},
		{name: "create path to elsewhere", r: draft(func(r *Reservation) { r.To = "h3" }), ev: Event{Kind: EventCreate, By: "alice"}, now: rsvT0, wantErr: ErrInvalid},
		{name: "create managed node off path", r: draft(func(r *Reservation) { r.ManagedNodes = []string{"r9"} }), ev: Event{Kind: EventCreate, By: "alice"}, now: rsvT0, wantErr: ErrInvalid},
		{name: "create DSCP out of range", r: draft(func(r *Reservation) { r.DSCP = 64 }), ev: Event{Kind: EventCreate, By: "alice"}, now: rsvT0, wantErr: ErrInvalid},

		// commit
		{name: "commit held", r: in(StateHeld, true), ev: Event{Kind: EventCommit, By: "alice"}, now: before, want: StateReserved,
			check: func(t *testing.T, r Reservation, _ Transition) {
				if !r.HoldExpires.IsZero() {
					t.Errorf("hold expiry %v kept after commit", r.HoldExpires)
				}
			}},
		{name: "commit at hold expiry", r: in(StateHeld, true), ev: Event{Kind: EventCommit, By: "alice"}, now: holdOver, wantErr: ErrConflict},
		{name: "commit reserved again", r: in(StateReserved, true), ev: Event{Kind: EventCommit, By: "alice"}, now: before, want: noop},
		{name: "commit active", r: in(StateActive, true), ev: Event{Kind: EventCommit, By: "alice"}, now: mid, want: noop},
		{name: "commit finished", r: in(StateFinished, true), ev: Event{Kind: EventCommit, By: "alice"}, now: end, wantErr: ErrConflict},
		{name: "commit cancelled", r: in(StateCancelled, true), ev: Event{Kind: EventCommit, By: "alice"}, now: before, wantErr: ErrConflict},
		{name: "commit failed", r: in(StateFailed, true), ev: Event{Kind: EventCommit, By: "alice"}, now: before, wantErr: ErrConflict},

		// hold-expired
		{name: "hold expires", r: in(StateHeld, true), ev: Event{Kind: EventHoldExpired, By: ActorController}, now: holdOver, want: StateCancelled,
			check: func(t *testing.T, _ Reservation, tr Transition) {
				if !strings.Contains(tr.Why, "hold expired") {
					t.Errorf("why %q", tr.Why)
				}
			}},
		{name: "hold not yet expired", r: in(StateHeld, true), ev: Event{Kind: EventHoldExpired, By: ActorController}, now: before, wantErr: ErrConflict},
		{name: "hold expiry of a committed one", r: in(StateReserved, true), ev: Event{Kind: EventHoldExpired, By: ActorController}, now: holdOver, wantErr: ErrConflict},

		// start-reached
		{name: "start without agents", r: in(StateReserved, false), ev: Event{Kind: EventStartReached, By: ActorController}, now: start, want: StateActive},
		{name: "start waits for a managed node", r: in(StateReserved, true), ev: Event{Kind: EventStartReached, By: ActorController}, now: start, want: noop},
		{name: "start with every node in place", r: provisioned, ev: Event{Kind: EventStartReached, By: ActorController}, now: start, want: StateActive},
		{name: "start too early", r: in(StateReserved, false), ev: Event{Kind: EventStartReached, By: ActorController}, now: start.Add(-time.Nanosecond), wantErr: ErrConflict},
		{name: "start while held", r: in(StateHeld, false), ev: Event{Kind: EventStartReached, By: ActorController}, now: before, wantErr: ErrConflict},
		{name: "start again", r: in(StateActive, false), ev: Event{Kind: EventStartReached, By: ActorController}, now: mid, want: noop},
		{name: "start after cancel", r: in(StateCancelled, false), ev: Event{Kind: EventStartReached, By: ActorController}, now: start, wantErr: ErrConflict},

		// node-provisioned
		{name: "node in place before start", r: in(StateReserved, true), ev: Event{Kind: EventNodeProvisioned, By: "agent:rt", Node: "rt"}, now: before, want: StateReserved,
			check: func(t *testing.T, r Reservation, _ Transition) {
				if !slices.Equal(r.Provisioned, []string{"rt"}) || len(r.Pending()) != 0 {
					t.Errorf("provisioned %v, pending %v", r.Provisioned, r.Pending())
				}
			}},
		{name: "last node in place after start activates", r: in(StateReserved, true), ev: Event{Kind: EventNodeProvisioned, By: "agent:rt", Node: "rt"}, now: mid, want: StateActive},
		{name: "node reports twice", r: provisioned, ev: Event{Kind: EventNodeProvisioned, By: "agent:rt", Node: "rt"}, now: before, want: noop},
		{name: "node not managed", r: in(StateReserved, true), ev: Event{Kind: EventNodeProvisioned, By: "agent:h1", Node: "h1"}, now: before, wantErr: ErrNotFound},
		{name: "node unnamed", r: in(StateReserved, true), ev: Event{Kind: EventNodeProvisioned, By: "agent:rt"}, now: before, wantErr: ErrInvalid},
		{name: "node provisions a held one", r: in(StateHeld, true), ev: Event{Kind: EventNodeProvisioned, By: "agent:rt", Node: "rt"}, now: before, wantErr: ErrConflict},
		{name: "node provisions a finished one", r: in(StateFinished, true), ev: Event{Kind: EventNodeProvisioned, By: "agent:rt", Node: "rt"}, now: end, wantErr: ErrConflict},

		// node-failed
		{name: "node fails before start", r: in(StateReserved, true), ev: Event{Kind: EventNodeFailed, By: "agent:rt", Node: "rt", Why: "no such device"}, now: before, want: StateFailed,
			check: func(t *testing.T, r Reservation, _ Transition) {
				if r.FailureReason != "node rt: no such device" {
					t.Errorf("failure reason %q", r.FailureReason)
				}
			}},
		{name: "node fails while active", r: in(StateActive, true), ev: Event{Kind: EventNodeFailed, By: "agent:rt", Node: "rt", Why: "link down"}, now: mid, want: StateFailed},
		{name: "node fails without a reason", r: in(StateActive, true), ev: Event{Kind: EventNodeFailed, By: "agent:rt", Node: "rt"}, now: mid, wantErr: ErrInvalid},
		{name: "unmanaged node fails", r: in(StateActive, true), ev: Event{Kind: EventNodeFailed, By: "agent:h2", Node: "h2", Why: "x"}, now: mid, wantErr: ErrNotFound},
		{name: "node fails a held one", r: in(StateHeld, true), ev: Event{Kind: EventNodeFailed, By: "agent:rt", Node: "rt", Why: "x"}, now: before, wantErr: ErrConflict},
		{name: "node fails a cancelled one", r: in(StateCancelled, true), ev: Event{Kind: EventNodeFailed, By: "agent:rt", Node: "rt", Why: "x"}, now: before, wantErr: ErrConflict},

		// end-reached
		{name: "end of an active one", r: in(StateActive, true), ev: Event{Kind: EventEndReached, By: ActorController}, now: end, want: StateFinished},
		{name: "end too early", r: in(StateActive, true), ev: Event{Kind: EventEndReached, By: ActorController}, now: end.Add(-time.Nanosecond), wantErr: ErrConflict},
		{name: "end without the path ever in place", r: in(StateReserved, true), ev: Event{Kind: EventEndReached, By: ActorController}, now: end, want: StateFailed,
			check: func(t *testing.T, r Reservation, _ Transition) {
				if !strings.Contains(r.FailureReason, "node rt") {
					t.Errorf("failure reason %q", r.FailureReason)
				}
			}},
		{name: "end of a held one", r: in(StateHeld, true), ev: Event{Kind: EventEndReached, By: ActorController}, now: end, wantErr: ErrConflict},
		{name: "end of a finished one", r: in(StateFinished, true), ev: Event{Kind: EventEndReached, By: ActorController}, now: end, wantErr: ErrConflict},

		// cancel
		{name: "cancel held", r: in(StateHeld, true), ev: Event{Kind: EventCancel, By: "alice", Why: "plans changed"}, now: before, want: StateCancelled,
			check: func(t *testing.T, r Reservation, tr Transition) {
				if tr.Why != "plans changed" || !r.HoldExpires.IsZero() {
					t.Errorf("why %q, hold %v", tr.Why, r.HoldExpires)
				}
			}},
		{name: "cancel reserved", r: in(StateReserved, true), ev: Event{Kind: EventCancel, By: "alice"}, now: before, want: StateCancelled},
		{name: "cancel active", r: in(StateActive, true), ev: Event{Kind: EventCancel, By: "operator-bob"}, now: mid, want: StateCancelled},
		{name: "cancel twice", r: in(StateCancelled, true), ev: Event{Kind: EventCancel, By: "alice"}, now: mid, want: noop},
		{name: "cancel finished", r: in(StateFinished, true), ev: Event{Kind: EventCancel, By: "alice"}, now: end, wantErr: ErrConflict},
		{name: "cancel failed", r: in(StateFailed, true), ev: Event{Kind: EventCancel, By: "alice"}, now: mid, wantErr: ErrConflict},
		{name: "cancel after the end, before catching up", r: in(StateActive, true), ev: Event{Kind: EventCancel, By: "alice"}, now: end, wantErr: ErrConflict},

		// modify
		{name: "modify extends", r: in(StateReserved, true), ev: Event{Kind: EventModify, By: "alice", Version: 1, Why: "more data", Change: Modification{End: later(4 * time.Hour)}}, now: before, want: StateReserved,
			check: func(t *testing.T, r Reservation, tr Transition) {
				if !r.End.Equal(later(4*time.Hour)) || !strings.Contains(tr.Why, "end") || !strings.Contains(tr.Why, "more data") {
					t.Errorf("end %v, why %q", r.End, tr.Why)
				}
			}},
		{name: "modify with a stale version", r: provisioned, ev: Event{Kind: EventModify, By: "alice", Version: 1, Change: Modification{End: later(4 * time.Hour)}}, now: before, wantErr: ErrConflict},
		{name: "modify a held one keeps its hold", r: in(StateHeld, true), ev: Event{Kind: EventModify, By: "alice", Change: Modification{Bandwidth: 2_000_000_000}}, now: before, want: StateHeld,
			check: func(t *testing.T, r Reservation, _ Transition) {
				if !r.HoldExpires.Equal(holdOver) || r.Bandwidth != 2_000_000_000 {
					t.Errorf("hold %v, bandwidth %d", r.HoldExpires, r.Bandwidth)
				}
			}},
		{name: "modify moves a future start", r: in(StateReserved, false), ev: Event{Kind: EventModify, By: "alice", Change: Modification{Start: later(90 * time.Minute)}}, now: before, want: StateReserved},
		{name: "modify moves an active start", r: in(StateActive, true), ev: Event{Kind: EventModify, By: "alice", Change: Modification{Start: later(90 * time.Minute)}}, now: mid, wantErr: ErrConflict},
		{name: "modify extends an active one, agents' work stands", r: in(StateActive, true), ev: Event{Kind: EventModify, By: "alice", Change: Modification{End: later(5 * time.Hour)}}, now: mid, want: StateActive,
			check: func(t *testing.T, r Reservation, _ Transition) {
				if !slices.Equal(r.Provisioned, []string{"rt"}) {
					t.Errorf("provisioned %v", r.Provisioned)
				}
			}},
		{name: "modify bandwidth of an active one, agents redo", r: in(StateActive, true), ev: Event{Kind: EventModify, By: "alice", Change: Modification{Bandwidth: 3_000_000_000}}, now: mid, want: StateActive,
			check: func(t *testing.T, r Reservation, _ Transition) {
				if len(r.Provisioned) != 0 || !slices.Equal(r.Pending(), []string{"rt"}) {
					t.Errorf("provisioned %v, pending %v", r.Provisioned, r.Pending())
				}
			}},
		{name: "modify moves the path", r: provisioned, ev: Event{Kind: EventModify, By: "alice", Change: Modification{
			Path:         []PathHop{{Link: "l3", From: "h1", To: "rx"}, {Link: "l4", From: "rx", To: "h2"}},
			ManagedNodes: []string{"rx"}, DSCP: 12}}, now: before, want: StateReserved,
			check: func(t *testing.T, r Reservation, _ Transition) {
				if r.Path[0].Link != "l3" || !slices.Equal(r.ManagedNodes, []string{"rx"}) || len(r.Provisioned) != 0 || r.DSCP != 12 {
					t.Errorf("path %v, managed %v, provisioned %v, dscp %d", r.Path, r.ManagedNodes, r.Provisioned, r.DSCP)
				}
			}},
		{name: "modify path with a managed node off it", r: in(StateReserved, true), ev: Event{Kind: EventModify, By: "alice", Change: Modification{
			Path: []PathHop{{Link: "l3", From: "h1", To: "rx"}, {Link: "l4", From: "rx", To: "h2"}}, ManagedNodes: []string{"rt"}}}, now: before, wantErr: ErrInvalid},
		{name: "modify path that goes elsewhere", r: in(StateReserved, true), ev: Event{Kind: EventModify, By: "alice", Change: Modification{
			Path: []PathHop{{Link: "l3", From: "h1", To: "rx"}}}}, now: before, wantErr: ErrInvalid},
		{name: "modify end into the past", r: in(StateActive, true), ev: Event{Kind: EventModify, By: "alice", Change: Modification{End: mid}}, now: mid, wantErr: ErrInvalid},
		{name: "modify end before start", r: in(StateReserved, true), ev: Event{Kind: EventModify, By: "alice", Change: Modification{End: later(30 * time.Minute)}}, now: before, wantErr: ErrInvalid},
		{name: "modify that changes nothing", r: in(StateReserved, true), ev: Event{Kind: EventModify, By: "alice", Change: Modification{End: end, Bandwidth: 1_000_000_000}}, now: before, want: noop},
		{name: "modify a finished one", r: in(StateFinished, true), ev: Event{Kind: EventModify, By: "alice", Change: Modification{End: later(5 * time.Hour)}}, now: end, wantErr: ErrConflict},
		{name: "modify a cancelled one", r: in(StateCancelled, true), ev: Event{Kind: EventModify, By: "alice", Change: Modification{End: later(5 * time.Hour)}}, now: before, wantErr: ErrConflict},

		// degrade and recover
		{name: "degrade", r: in(StateActive, true), ev: Event{Kind: EventDegrade, By: ActorController, Why: "agent rt: lease lapsed"}, now: mid, want: StateActive,
			check: func(t *testing.T, r Reservation, _ Transition) {
				if !r.Degraded || r.DegradedReason != "agent rt: lease lapsed" {
					t.Errorf("degraded %v %q", r.Degraded, r.DegradedReason)
				}
			}},
		{name: "degrade a held one", r: in(StateHeld, true), ev: Event{Kind: EventDegrade, By: ActorController, Why: "x"}, now: before, want: StateHeld},
		{name: "degrade for the same reason", r: degraded, ev: Event{Kind: EventDegrade, By: ActorController, Why: "agent rt: lease lapsed"}, now: mid, want: noop},
		{name: "degrade for a new reason", r: degraded, ev: Event{Kind: EventDegrade, By: ActorController, Why: "link l2 down"}, now: mid, want: StateActive,
			check: func(t *testing.T, r Reservation, _ Transition) {
				if r.DegradedReason != "link l2 down" {
					t.Errorf("reason %q", r.DegradedReason)
				}
			}},
		{name: "degrade without a reason", r: in(StateActive, true), ev: Event{Kind: EventDegrade, By: ActorController}, now: mid, wantErr: ErrInvalid},
		{name: "degrade a finished one", r: in(StateFinished, true), ev: Event{Kind: EventDegrade, By: ActorController, Why: "x"}, now: end, wantErr: ErrConflict},
		{name: "recover", r: degraded, ev: Event{Kind: EventRecover, By: ActorController}, now: mid, want: StateActive,
			check: func(t *testing.T, r Reservation, tr Transition) {
				if r.Degraded || r.DegradedReason != "" || !strings.Contains(tr.Why, "lease lapsed") {
					t.Errorf("degraded %v %q, why %q", r.Degraded, r.DegradedReason, tr.Why)
				}
			}},
		{name: "recover a healthy one", r: in(StateActive, true), ev: Event{Kind: EventRecover, By: ActorController}, now: mid, want: noop},
		{name: "recover a failed one", r: in(StateFailed, true), ev: Event{Kind: EventRecover, By: ActorController}, now: mid, wantErr: ErrConflict},
		{name: "ending clears the degraded flag", r: degraded, ev: Event{Kind: EventEndReached, By: ActorController}, now: end, want: StateFinished,
			check: func(t *testing.T, r Reservation, _ Transition) {
				if r.Degraded || r.DegradedReason != "" {
					t.Errorf("still degraded: %q", r.DegradedReason)
				}
			}},

		// anything
		{name: "nobody did it", r: in(StateReserved, true), ev: Event{Kind: EventCancel}, now: before, wantErr: ErrInvalid},
		{name: "unknown event", r: in(StateReserved, true), ev: Event{Kind: "launch", By: "alice"}, now: before, wantErr: ErrInvalid},
		{name: "event before create", r: draft(nil), ev: Event{Kind: EventCommit, By: "alice"}, now: before, wantErr: ErrConflict},
		{name: "cancel with the current version", r: in(StateReserved, true), ev: Event{Kind: EventCancel, By: "alice", Version: 1}, now: before, want: StateCancelled},
		{name: "cancel with a stale version", r: provisioned, ev: Event{Kind: EventCancel, By: "alice", Version: 1}, now: before, wantErr: ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r(t)
			saved := r.clone()
			got, tr, err := Next(r, tc.ev, tc.now)
			if !reflect.DeepEqual(r, saved) {
				t.Fatalf("Next changed its argument:\n%+v\nwas\n%+v", r, saved)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want one matching %v", err, tc.wantErr)
				}
				if !reflect.DeepEqual(got, r) || !tr.IsZero() {
					t.Errorf("refused event still returned a change: %+v", tr)
				}
				if err.Error() == "" {
					t.Error("empty error message")
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if tc.want == noop {
				if !tr.IsZero() || !reflect.DeepEqual(got, r) {
					t.Fatalf("want no change, got %+v", tr)
				}
				return
			}
			if got.State != tc.want {
				t.Fatalf("state %s, want %s", got.State, tc.want)
			}
			wantTr := Transition{From: r.State, To: tc.want, Event: tc.ev.Kind, At: tc.now, By: tc.ev.By, Why: tr.Why, Version: r.Version + 1}
			if tr != wantTr || tr.Why == "" {
				t.Errorf("transition %+v, want %+v with a why", tr, wantTr)
			}
			if got.Version != r.Version+1 || len(got.History) != len(r.History)+1 || got.History[len(got.History)-1] != tr {
				t.Errorf("version %d (was %d), history %d long (was %d), last %+v", got.Version, r.Version, len(got.History), len(r.History), got.History[len(got.History)-1])
			}
			if tc.check != nil {
				tc.check(t, got, tr)
			}
		})
	}
}

func TestStaleVersionError(t *testing.T) {
	r := rsvIn(t, StateActive, true) // version 3: create, provisioned, start
	_, _, err := Next(r, Event{Kind: EventModify, By: "alice", Version: 2, Change: Modification{End: r.End.Add(time.Hour)}}, r.Start)
	var stale *StaleVersionError
	if !errors.As(err, &stale) || stale.Current != 3 || stale.Given != 2 || !errors.Is(err, ErrConflict) {
		t.Fatalf("error %v, want a StaleVersionError 3 vs 2", err)
	}
	var te *TransitionError
	_, _, err = Next(r, Event{Kind: EventCommit, By: "alice"}, r.End)
	if !errors.As(err, &te) || te.State != StateActive || te.Event != EventCommit {
		t.Fatalf("error %v, want a TransitionError", err)
	}
}

// TestHistory follows one reservation through its whole life and checks
// the audit trail it leaves.
func TestHistory(t *testing.T) {
	r := rsvDraft(true)
	r = rsvStep(t, r, Event{Kind: EventCreate, By: "alice", Hold: rsvHold}, rsvT0)
	r = rsvStep(t, r, Event{Kind: EventCommit, By: "alice", Version: 1}, rsvT0.Add(time.Minute))
	r = rsvStep(t, r, Event{Kind: EventNodeProvisioned, By: "agent:rt", Node: "rt"}, rsvT0.Add(2*time.Minute))
	r, done, err := CatchUp(r, r.Start)
	if err != nil || len(done) != 1 {
		t.Fatalf("catch up at start: %v, %d transitions", err, len(done))
	}
	r = rsvStep(t, r, Event{Kind: EventDegrade, By: ActorController, Why: "lease lapsed"}, r.Start.Add(time.Minute))
	r = rsvStep(t, r, Event{Kind: EventRecover, By: ActorController}, r.Start.Add(2*time.Minute))
	r = rsvStep(t, r, Event{Kind: EventModify, By: "alice", Change: Modification{End: r.End.Add(time.Hour)}}, r.Start.Add(3*time.Minute))
	r, _, err = CatchUp(r, r.End)
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		from, to State
		ev       EventKind
		by       string
	}
	var got []step
	for i, tr := range r.History {
		got = append(got, step{tr.From, tr.To, tr.Event, tr.By})
		if tr.Version != uint64(i+1) {
			t.Errorf("transition %d has version %d", i, tr.Version)
		}
		if i > 0 && tr.At.Before(r.History[i-1].At) {
			t.Errorf("transition %d goes back in time", i)
		}
	}
	want := []step{
		{"", StateHeld, EventCreate, "alice"},
		{StateHeld, StateReserved, EventCommit, "alice"},
		{StateReserved, StateReserved, EventNodeProvisioned, "agent:rt"},
		{StateReserved, StateActive, EventStartReached, ActorController},
		{StateActive, StateActive, EventDegrade, ActorController},
		{StateActive, StateActive, EventRecover, ActorController},
		{StateActive, StateActive, EventModify, "alice"},
		{StateActive, StateFinished, EventEndReached, ActorController},
	}
	if !slices.Equal(got, want) {
		t.Errorf("history\n%v\nwant\n%v", got, want)
	}
	if r.Version != uint64(len(want)) {
		t.Errorf("version %d, want %d", r.Version, len(want))
	}
}

// TestCatchUp replays what a controller missed while it was down.
func TestCatchUp(t *testing.T) {
	start, end := rsvT0.Add(time.Hour), rsvT0.Add(3*time.Hour)
	for _, tc := range []struct {
		name      string
		r         func(*testing.T) Reservation
		now       time.Time
		wantDue   []EventKind
		wantState State
		wantWhy   string // in the last transition
	}{
		{name: "hold expired while down", r: func(t *testing.T) Reservation { return rsvIn(t, StateHeld, true) },
			now: rsvT0.Add(40 * time.Minute), wantDue: []EventKind{EventHoldExpired}, wantState: StateCancelled, wantWhy: "hold expired at 2026-03-01T10:15:00Z"},
		{name: "held past its whole window", r: func(t *testing.T) Reservation {
			r := rsvDraft(false)
			return rsvStep(t, r, Event{Kind: EventCreate, By: "alice", Hold: 24 * time.Hour}, rsvT0)
		}, now: end, wantDue: []EventKind{EventHoldExpired}, wantState: StateCancelled, wantWhy: "window ended"},
		{name: "start and end both passed, no agents", r: func(t *testing.T) Reservation { return rsvIn(t, StateReserved, false) },
			now: end.Add(time.Hour), wantDue: []EventKind{EventStartReached, EventEndReached}, wantState: StateFinished, wantWhy: "end 2026-03-01T13:00:00Z reached"},
		{name: "start and end both passed, agent never reported", r: func(t *testing.T) Reservation { return rsvIn(t, StateReserved, true) },
			now: end.Add(time.Hour), wantDue: []EventKind{EventEndReached}, wantState: StateFailed, wantWhy: "before node rt reported"},
		{name: "start passed, agent has not reported", r: func(t *testing.T) Reservation { return rsvIn(t, StateReserved, true) },
			now: start.Add(time.Minute), wantDue: nil, wantState: StateReserved},
		{name: "start passed, no agents", r: func(t *testing.T) Reservation { return rsvIn(t, StateReserved, false) },
			now: start.Add(time.Minute), wantDue: []EventKind{EventStartReached}, wantState: StateActive, wantWhy: "start 2026-03-01T11:00:00Z reached"},
		{name: "active past its end", r: func(t *testing.T) Reservation { return rsvIn(t, StateActive, true) },
			now: end.Add(time.Second), wantDue: []EventKind{EventEndReached}, wantState: StateFinished},
		{name: "nothing due yet", r: func(t *testing.T) Reservation { return rsvIn(t, StateReserved, false) },
			now: start.Add(-time.Second), wantDue: nil, wantState: StateReserved},
		{name: "terminal", r: func(t *testing.T) Reservation { return rsvIn(t, StateCancelled, false) },
			now: end.Add(time.Hour), wantDue: nil, wantState: StateCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r(t)
			var kinds []EventKind
			for _, ev := range Due(r, tc.now) {
				kinds = append(kinds, ev.Kind)
				if ev.By != ActorController || !ev.Kind.Timed() {
					t.Errorf("due event %+v", ev)
				}
			}
			if !slices.Equal(kinds, tc.wantDue) {
				t.Errorf("due %v, want %v", kinds, tc.wantDue)
			}
			got, done, err := CatchUp(r, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tc.wantState || len(done) != len(tc.wantDue) {
				t.Fatalf("state %s after %d transitions, want %s after %d", got.State, len(done), tc.wantState, len(tc.wantDue))
			}
			if len(Due(got, tc.now)) != 0 {
				t.Errorf("still due after catching up: %v", Due(got, tc.now))
			}
			if len(done) > 0 && !strings.Contains(done[len(done)-1].Why, tc.wantWhy) {
				t.Errorf("why %q, want it to say %q", done[len(done)-1].Why, tc.wantWhy)
			}
			for _, tr := range done {
				if !tr.At.Equal(tc.now) {
					t.Errorf("transition %s recorded at %v, want the catch-up time %v", tr.Event, tr.At, tc.now)
				}
			}
		})
	}
}

func TestNextDue(t *testing.T) {
	start, end := rsvT0.Add(time.Hour), rsvT0.Add(3*time.Hour)
	for _, tc := range []struct {
		name   string
		st     State
		manage bool
		want   time.Time
		ok     bool
	}{
		{"held: the hold expiry", StateHeld, true, rsvT0.Add(rsvHold), true},
		{"reserved without agents: the start", StateReserved, false, start, true},
		{"reserved waiting for an agent: the end", StateReserved, true, end, true},
		{"active: the end", StateActive, true, end, true},
		{"finished: never", StateFinished, true, time.Time{}, false},
		{"cancelled: never", StateCancelled, true, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rsvIn(t, tc.st, tc.manage)
			got, ok := NextDue(r)
			if !got.Equal(tc.want) || ok != tc.ok {
				t.Fatalf("NextDue %v %v, want %v %v", got, ok, tc.want, tc.ok)
			}
			if ok {
				// Nothing is due just before it, something at it (unless an
				// agent must report first, which the clock cannot do).
				if due := Due(r, got.Add(-time.Nanosecond)); len(due) != 0 {
					t.Errorf("due before NextDue: %v", due)
				}
				if due := Due(r, got); len(due) == 0 {
					t.Errorf("nothing due at NextDue")
				}
			}
		})
	}
}

func TestStates(t *testing.T) {
	for _, s := range States {
		if got, err := ParseState(string(s)); err != nil || got != s {
			t.Errorf("ParseState(%q) = %q, %v", s, got, err)
		}
		if s.Live() == s.Terminal() {
			t.Errorf("%s is both or neither live and terminal", s)
		}
	}
	if _, err := ParseState("held"); !errors.Is(err, ErrInvalid) {
		t.Errorf("lower-case state accepted: %v", err)
	}
}

func TestIdempotentMatch(t *testing.T) {
	stored := rsvIn(t, StateReserved, true)
	stored.IdempotencyKey = "k1"
	for _, tc := range []struct {
		name   string
		change func(*Reservation)
		diff   string // "" means the same request
	}{
		{"same request", func(*Reservation) {}, ""},
		{"same instant in another zone", func(r *Reservation) { r.Start = r.Start.In(time.FixedZone("CET", 3600)) }, ""},
		{"what the controller chose does not count", func(r *Reservation) { r.ID, r.DSCP, r.Path, r.State = "", 0, nil, "" }, ""},
		{"other bandwidth", func(r *Reservation) { r.Bandwidth++ }, "bandwidth"},
		{"other end", func(r *Reservation) { r.End = r.End.Add(time.Second) }, "end"},
		{"other destination", func(r *Reservation) { r.To = "h3" }, "to"},
		{"other flow spec", func(r *Reservation) { r.FlowSpec, _ = ParseFlowSpec("tcp 198.18.1.2 > 198.18.2.2") }, "flow spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := rsvDraft(true)
			req.IdempotencyKey = "k1"
			tc.change(&req)
			err := IdempotentMatch(stored, req)
			if tc.diff == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "different "+tc.diff) {
				t.Fatalf("error %v, want a conflict over %s", err, tc.diff)
			}
		})
	}
}
