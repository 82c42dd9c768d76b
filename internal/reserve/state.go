package reserve

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// EventKind names what happened to a reservation. The names appear in the
// history and the event stream.
type EventKind string

// The events. Three are timed (hold-expired, start-reached, end-reached):
// the controller learns them from Due rather than from a request, so that
// after a restart it can replay what it missed.
const (
	EventCreate          EventKind = "create"
	EventCommit          EventKind = "commit"
	EventHoldExpired     EventKind = "hold-expired"
	EventStartReached    EventKind = "start-reached"
	EventNodeProvisioned EventKind = "node-provisioned"
	EventNodeFailed      EventKind = "node-failed"
	EventEndReached      EventKind = "end-reached"
	EventCancel          EventKind = "cancel"
	EventModify          EventKind = "modify"
	EventDegrade         EventKind = "degrade"
	EventRecover         EventKind = "recover"
)

// Timed reports whether k is one of the events that the passage of time
// causes, which Due lists.
func (k EventKind) Timed() bool {
	return k == EventHoldExpired || k == EventStartReached || k == EventEndReached
}

// ActorController is the By of the events the controller raises itself:
// the timed ones from Due.
const ActorController = "controller"

// Event is one thing that happens to a reservation, as input to Next.
type Event struct {
	Kind EventKind
	// By says who: a user name, "agent:NODE", or ActorController. Required,
	// because every transition records who made it.
	By string
	// Why is the reason recorded in the history. It is required for
	// node-failed and degrade (it becomes the failure or degraded reason);
	// elsewhere an empty Why is replaced by a description of the event.
	Why string
	// Version, when not zero, must equal the reservation's Version, or the
	// event is refused with a StaleVersionError. Zero skips the check, for
	// timed events and for clients that do not send one; the API decides
	// which requests must.
	Version uint64
	// Hold, on create only: when positive the reservation is HELD and
	// released after Hold unless committed; zero commits at once.
	Hold time.Duration
	// Node is the reporting node, for node-provisioned and node-failed.
	Node string
	// Change is what a modify changes.
	Change Modification
}

// Modification is what a modify event changes; zero fields stay as they
// are. The controller has already checked that the result is admissible
// (capacity, policy, DSCP): Next only applies it and records it.
type Modification struct {
	Start     time.Time // refused once ACTIVE: the window has begun
	End       time.Time
	Bandwidth uint64
	// Path, when not nil, replaces the path, and ManagedNodes replaces the
	// managed nodes with it (nil meaning none), because which nodes are
	// managed depends on the path. ManagedNodes is ignored without a Path.
	Path         []PathHop
	ManagedNodes []string
	DSCP         uint8
	// FlowSpec, when not nil, replaces the flow spec (the agents steer
	// the new flows; the reservation keeps its state and DSCP).
	FlowSpec *FlowSpec
}

// Next applies ev to r at time now and returns the new reservation and the
// transition it recorded. It is pure: r is not modified, and the same
// inputs always give the same outputs, so the state machine is tested
// without a clock or a store.
//
// An event whose effect already holds (a repeated commit or cancel, a node
// reporting twice, start-reached on an ACTIVE reservation, a modify that
// changes nothing) returns r unchanged and a zero Transition, so retries
// are harmless; the controller stores nothing then. Every other accepted
// event bumps Version and appends its Transition to History.
//
// Order is part of correctness: while a timed event is due (see Due),
// every other event except create is refused, so a controller that was
// down must catch up (CatchUp) before serving requests, and a commit that
// arrives after the hold expired fails the same way whether or not the
// expiry has been processed yet.
func Next(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	if ev.By == "" {
		return r, Transition{}, resvErrorf(ErrInvalid, "%s event for reservation %s says nobody did it", ev.Kind, r.ID)
	}
	if ev.Kind == EventCreate {
		return stCreate(r, ev, now)
	}
	if !r.State.Valid() {
		return r, Transition{}, &TransitionError{ID: r.ID, State: r.State, Event: ev.Kind, Reason: "it has not been created"}
	}
	if ev.Version != 0 && ev.Version != r.Version {
		return r, Transition{}, &StaleVersionError{ID: r.ID, Current: r.Version, Given: ev.Version}
	}
	if !ev.Kind.Timed() {
		if due := Due(r, now); len(due) > 0 {
			return r, Transition{}, stRefuse(r, ev, fmt.Sprintf("%s is due first (%s)", due[0].Kind, due[0].Why))
		}
	}
	switch ev.Kind {
	case EventCommit:
		return stCommit(r, ev, now)
	case EventHoldExpired:
		return stHoldExpired(r, ev, now)
	case EventStartReached:
		return stStartReached(r, ev, now)
	case EventNodeProvisioned:
		return stNodeProvisioned(r, ev, now)
	case EventNodeFailed:
		return stNodeFailed(r, ev, now)
	case EventEndReached:
		return stEndReached(r, ev, now)
	case EventCancel:
		return stCancel(r, ev, now)
	case EventModify:
		return stModify(r, ev, now)
	case EventDegrade:
		return stDegrade(r, ev, now)
	case EventRecover:
		return stRecoverFrom(r, ev, now)
	}
	return r, Transition{}, resvErrorf(ErrInvalid, "unknown event %q", ev.Kind)
}

// stRefuse builds the error for an event r's state does not allow.
func stRefuse(r Reservation, ev Event, reason string) error {
	return &TransitionError{ID: r.ID, State: r.State, Event: ev.Kind, Reason: reason}
}

// stApply records one accepted change: it moves a copy of r to state to,
// bumps the version, appends the transition, and clears what only the old
// state needed. change edits the copy before it is recorded.
func stApply(r Reservation, ev Event, now time.Time, to State, why string, change func(*Reservation)) (Reservation, Transition, error) {
	n := r.clone()
	if change != nil {
		change(&n)
	}
	if to != StateHeld {
		n.HoldExpires = time.Time{}
	}
	if to.Terminal() {
		// Degraded describes a live guarantee; the history keeps the record.
		n.Degraded, n.DegradedReason = false, ""
	}
	n.State = to
	n.Version++
	if ev.Why != "" && ev.Kind != EventModify {
		why = ev.Why
	}
	t := Transition{From: r.State, To: to, Event: ev.Kind, At: now, By: ev.By, Why: why, Version: n.Version}
	n.History = append(n.History, t)
	return n, t, nil
}

// stUnchanged is Next's answer to an event whose effect already holds.
func stUnchanged(r Reservation) (Reservation, Transition, error) { return r, Transition{}, nil }

func stCreate(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	if r.State != "" {
		return r, Transition{}, stRefuse(r, ev, "it already exists")
	}
	if ev.Hold < 0 {
		return r, Transition{}, &RequestError{Field: "hold", Message: fmt.Sprintf("hold %s is negative", ev.Hold)}
	}
	if err := r.checkShape(); err != nil {
		return r, Transition{}, err
	}
	to, why := StateReserved, "created and committed"
	if ev.Hold > 0 {
		to, why = StateHeld, fmt.Sprintf("created on hold for %s", stFormatDuration(ev.Hold))
	}
	return stApply(r, ev, now, to, why, func(n *Reservation) {
		n.Version = 0
		n.CreatedAt = now
		n.History = nil
		n.Degraded, n.DegradedReason, n.FailureReason = false, "", ""
		n.ManagedNodes = stSortedSet(n.ManagedNodes)
		n.Provisioned = nil
		if ev.Hold > 0 {
			n.HoldExpires = now.Add(ev.Hold)
		}
	})
}

func stCommit(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	switch r.State {
	case StateHeld:
		return stApply(r, ev, now, StateReserved, "committed", nil)
	case StateReserved, StateActive:
		return stUnchanged(r)
	}
	return r, Transition{}, stRefuse(r, ev, "only a HELD reservation can be committed")
}

func stHoldExpired(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	if r.State != StateHeld {
		return r, Transition{}, stRefuse(r, ev, "only a HELD reservation has a hold")
	}
	why, due := stHoldDue(r, now)
	if !due {
		return r, Transition{}, stRefuse(r, ev, fmt.Sprintf("the hold runs until %s", stFormatTime(r.HoldExpires)))
	}
	return stApply(r, ev, now, StateCancelled, why, nil)
}

// holdDue reports whether a HELD reservation's hold is over at now, and
// why: at its expiry, or earlier if its window has already ended, since a
// commit could no longer give anyone anything.
func stHoldDue(r Reservation, now time.Time) (string, bool) {
	switch {
	case !r.HoldExpires.IsZero() && !now.Before(r.HoldExpires):
		return fmt.Sprintf("hold expired at %s without a commit", stFormatTime(r.HoldExpires)), true
	case !now.Before(r.End):
		return fmt.Sprintf("window ended at %s before a commit", stFormatTime(r.End)), true
	}
	return "", false
}

func stStartReached(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	switch r.State {
	case StateActive:
		return stUnchanged(r)
	case StateReserved:
	default:
		return r, Transition{}, stRefuse(r, ev, "only a RESERVED reservation can start")
	}
	if now.Before(r.Start) {
		return r, Transition{}, stRefuse(r, ev, fmt.Sprintf("it starts at %s", stFormatTime(r.Start)))
	}
	if p := r.Pending(); len(p) > 0 {
		// Waiting for agents; the last node-provisioned activates it.
		return stUnchanged(r)
	}
	why := fmt.Sprintf("start %s reached", stFormatTime(r.Start))
	if len(r.ManagedNodes) > 0 {
		why += "; every managed node has its part in place"
	}
	return stApply(r, ev, now, StateActive, why, nil)
}

func stNodeProvisioned(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	if r.State != StateReserved && r.State != StateActive {
		return r, Transition{}, stRefuse(r, ev, "nodes provision only RESERVED and ACTIVE reservations")
	}
	if err := stCheckNodeManaged(r, ev.Node); err != nil {
		return r, Transition{}, err
	}
	if _, ok := slices.BinarySearch(r.Provisioned, ev.Node); ok {
		return stUnchanged(r)
	}
	provisioned := stSortedSet(append(slices.Clone(r.Provisioned), ev.Node))
	to, why := r.State, fmt.Sprintf("node %s has its part in place", ev.Node)
	if r.State == StateReserved && !now.Before(r.Start) && now.Before(r.End) {
		waiting := false
		for _, m := range r.ManagedNodes {
			if _, ok := slices.BinarySearch(provisioned, m); !ok {
				waiting = true
			}
		}
		if !waiting {
			to, why = StateActive, why+"; every managed node is ready, start "+stFormatTime(r.Start)+" passed"
		}
	}
	return stApply(r, ev, now, to, why, func(n *Reservation) { n.Provisioned = provisioned })
}

func stNodeFailed(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	if r.State != StateReserved && r.State != StateActive {
		return r, Transition{}, stRefuse(r, ev, "nodes provision only RESERVED and ACTIVE reservations")
	}
	if err := stCheckNodeManaged(r, ev.Node); err != nil {
		return r, Transition{}, err
	}
	if ev.Why == "" {
		return r, Transition{}, &RequestError{Field: "why", Message: fmt.Sprintf("node %s reported a failure without a reason", ev.Node)}
	}
	reason := fmt.Sprintf("node %s: %s", ev.Node, ev.Why)
	ev.Why = reason
	return stApply(r, ev, now, StateFailed, reason, func(n *Reservation) { n.FailureReason = reason })
}

// checkNodeManaged refuses reports from nodes the reservation does not
// wait for: after a path change an agent may still report on the old
// path, and counting it would activate the reservation too early.
func stCheckNodeManaged(r Reservation, node string) error {
	if node == "" {
		return resvErrorf(ErrInvalid, "node report for reservation %s names no node", r.ID)
	}
	if _, ok := slices.BinarySearch(r.ManagedNodes, node); !ok {
		return resvErrorf(ErrNotFound, "node %s is not a managed node on reservation %s's path", node, r.ID)
	}
	return nil
}

func stEndReached(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	if r.State != StateReserved && r.State != StateActive {
		return r, Transition{}, stRefuse(r, ev, "only a RESERVED or ACTIVE reservation can end")
	}
	if now.Before(r.End) {
		return r, Transition{}, stRefuse(r, ev, fmt.Sprintf("it ends at %s", stFormatTime(r.End)))
	}
	why := fmt.Sprintf("end %s reached", stFormatTime(r.End))
	if p := r.Pending(); r.State == StateReserved && len(p) > 0 {
		// The window passed without the path ever being in place: the
		// guarantee was never given, which the user must not read as FINISHED.
		reason := fmt.Sprintf("window ended at %s before node %s reported its part in place", stFormatTime(r.End), strings.Join(p, ", "))
		ev.Why = reason
		return stApply(r, ev, now, StateFailed, reason, func(n *Reservation) { n.FailureReason = reason })
	}
	return stApply(r, ev, now, StateFinished, why, nil)
}

func stCancel(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	switch r.State {
	case StateCancelled:
		return stUnchanged(r)
	case StateHeld, StateReserved, StateActive:
		return stApply(r, ev, now, StateCancelled, "cancelled", nil)
	}
	return r, Transition{}, stRefuse(r, ev, "it is over")
}

func stModify(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	if !r.State.Live() {
		return r, Transition{}, stRefuse(r, ev, "it is over")
	}
	c := ev.Change
	n := r.clone()
	var what []string
	reprovision := false
	if !c.Start.IsZero() && !c.Start.Equal(r.Start) {
		if r.State == StateActive {
			return r, Transition{}, stRefuse(r, ev, "its window has begun, so its start cannot move")
		}
		what = append(what, fmt.Sprintf("start %s → %s", stFormatTime(r.Start), stFormatTime(c.Start)))
		n.Start = c.Start
	}
	if !c.End.IsZero() && !c.End.Equal(r.End) {
		if !c.End.After(now) {
			return r, Transition{}, &RequestError{Field: "end", Message: fmt.Sprintf("new end %s is not in the future; cancel the reservation instead", stFormatTime(c.End))}
		}
		what = append(what, fmt.Sprintf("end %s → %s", stFormatTime(r.End), stFormatTime(c.End)))
		n.End = c.End
	}
	if c.Bandwidth != 0 && c.Bandwidth != r.Bandwidth {
		was, is := polRates(r.Bandwidth, c.Bandwidth)
		what = append(what, fmt.Sprintf("bandwidth %s → %s", was, is))
		n.Bandwidth = c.Bandwidth
		reprovision = true // every hop's rate class changes
	}
	if c.Path != nil {
		managed := stSortedSet(c.ManagedNodes)
		if !slices.Equal(c.Path, r.Path) {
			what = append(what, fmt.Sprintf("path %s → %s", stFormatPath(r.Path), stFormatPath(c.Path)))
			n.Path = slices.Clone(c.Path)
			reprovision = true
		}
		if !slices.Equal(managed, r.ManagedNodes) {
			what = append(what, fmt.Sprintf("managed nodes [%s] → [%s]", strings.Join(r.ManagedNodes, " "), strings.Join(managed, " ")))
			n.ManagedNodes = managed
		}
	}
	if c.DSCP != 0 && c.DSCP != r.DSCP {
		what = append(what, fmt.Sprintf("DSCP %d → %d", r.DSCP, c.DSCP))
		n.DSCP = c.DSCP
		reprovision = true // every hop matches on it
	}
	if c.FlowSpec != nil && !c.FlowSpec.Equal(r.FlowSpec) {
		what = append(what, fmt.Sprintf("flows %s", c.FlowSpec))
		n.FlowSpec = *c.FlowSpec
	}
	if len(what) == 0 {
		return stUnchanged(r)
	}
	if err := n.checkShape(); err != nil {
		return r, Transition{}, err
	}
	why := "modified: " + strings.Join(what, "; ")
	if ev.Why != "" {
		why += " (" + ev.Why + ")"
	}
	return stApply(r, ev, now, r.State, why, func(m *Reservation) {
		m.Start, m.End, m.Bandwidth, m.Path, m.ManagedNodes, m.DSCP = n.Start, n.End, n.Bandwidth, n.Path, n.ManagedNodes, n.DSCP
		m.FlowSpec = n.FlowSpec
		if reprovision {
			// What the agents put in place no longer matches: each must
			// report again. An ACTIVE reservation stays ACTIVE meanwhile,
			// as its old classes keep carrying it.
			m.Provisioned = nil
		} else {
			m.Provisioned = stIntersect(m.Provisioned, m.ManagedNodes)
		}
	})
}

func stDegrade(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	if !r.State.Live() {
		return r, Transition{}, stRefuse(r, ev, "it is over")
	}
	if ev.Why == "" {
		return r, Transition{}, &RequestError{Field: "why", Message: "degrading a reservation needs a reason"}
	}
	if r.Degraded && r.DegradedReason == ev.Why {
		return stUnchanged(r)
	}
	return stApply(r, ev, now, r.State, ev.Why, func(n *Reservation) { n.Degraded, n.DegradedReason = true, ev.Why })
}

func stRecoverFrom(r Reservation, ev Event, now time.Time) (Reservation, Transition, error) {
	if !r.State.Live() {
		return r, Transition{}, stRefuse(r, ev, "it is over")
	}
	if !r.Degraded {
		return stUnchanged(r)
	}
	return stApply(r, ev, now, r.State, "recovered from: "+r.DegradedReason, func(n *Reservation) { n.Degraded, n.DegradedReason = false, "" })
}

// Due lists the timed events that are due for r at now, in the order they
// must be applied, each with By set to ActorController. It depends on
// nothing but r and now, so a controller that restarts after any downtime
// computes what it missed from the stored reservations alone: a hold that
// expired, or a start and an end that both passed, come back as the events
// to replay (CatchUp does it).
//
// Only events that would change r are listed: start-reached is left out
// while managed nodes are pending, because then a node's report, not the
// clock, activates the reservation.
func Due(r Reservation, now time.Time) []Event {
	ev := func(k EventKind, why string) Event { return Event{Kind: k, By: ActorController, Why: why} }
	var out []Event
	end := fmt.Sprintf("end %s reached", stFormatTime(r.End))
	switch r.State {
	case StateHeld:
		if why, ok := stHoldDue(r, now); ok {
			out = append(out, ev(EventHoldExpired, why))
		}
	case StateReserved:
		if !now.Before(r.Start) && len(r.Pending()) == 0 {
			out = append(out, ev(EventStartReached, fmt.Sprintf("start %s reached", stFormatTime(r.Start))))
		}
		if !now.Before(r.End) {
			out = append(out, ev(EventEndReached, end))
		}
	case StateActive:
		if !now.Before(r.End) {
			out = append(out, ev(EventEndReached, end))
		}
	}
	return out
}

// NextDue returns the earliest instant at which Due will list an event for
// r, which may be in the past when one is already due, and false for a
// terminal reservation. The controller sleeps until the minimum over its
// live reservations instead of polling them all.
func NextDue(r Reservation) (time.Time, bool) {
	switch r.State {
	case StateHeld:
		if !r.HoldExpires.IsZero() && r.HoldExpires.Before(r.End) {
			return r.HoldExpires, true
		}
		return r.End, true
	case StateReserved:
		if len(r.Pending()) == 0 {
			return r.Start, true
		}
		return r.End, true
	case StateActive:
		return r.End, true
	}
	return time.Time{}, false
}

// CatchUp applies every timed event due for r at now, in order, and returns
// the result with the transitions made. Running it on every stored
// reservation after a restart, and on a reservation before applying a
// request to it, keeps the outcome independent of how long the controller
// was away.
func CatchUp(r Reservation, now time.Time) (Reservation, []Transition, error) {
	var done []Transition
	// Each applied event moves r towards a terminal state, so this ends;
	// the bound only guards against a future bug turning it into a spin.
	for range 8 {
		due := Due(r, now)
		if len(due) == 0 {
			return r, done, nil
		}
		n, t, err := Next(r, due[0], now)
		if err != nil {
			return r, done, err
		}
		if t.IsZero() {
			return r, done, fmt.Errorf("catch up reservation %s: %s changed nothing", r.ID, due[0].Kind)
		}
		r, done = n, append(done, t)
	}
	return r, done, fmt.Errorf("catch up reservation %s: events still due after 8 steps", r.ID)
}

// stSortedSet returns the sorted, duplicate-free copy of s (nil when empty),
// the form ManagedNodes and Provisioned are kept in.
func stSortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// stIntersect returns the elements of sorted set a that are in sorted set b.
func stIntersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); ok {
			out = append(out, x)
		}
	}
	return out
}

// stFormatTime prints an instant for the history: RFC 3339 in UTC, which is
// how the API prints times.
func stFormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func stFormatPath(p []PathHop) string {
	links := make([]string, len(p))
	for i, h := range p {
		links[i] = h.Link
	}
	return strings.Join(links, ",")
}

// stFormatDuration prints a duration the way people write one: "8h",
// "1h30m", "15m", "184 days", without Go's trailing "0m0s".
func stFormatDuration(d time.Duration) string {
	if d >= 48*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
