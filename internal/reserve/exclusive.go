package reserve

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Exclusive is a hold of a node, or of every node of a site, for one owner
// over [Start, End): DataTAG's "reserve all or part of the testbed
// exclusively", for experiments that need hosts nobody else's traffic
// touches. While a hold stands, no reservation of another owner may touch
// any of its nodes and no other owner may hold them; the owner's own
// reservations go on as usual, which is the point of holding them.
//
// A hold books no bandwidth, so it never enters the Schedule: the
// controller checks holds against reservations (ReservationsBlocking,
// ExclusiveConflicts) around admission instead. Like Reservation it is a
// value: CancelExclusive returns a changed copy, and the store updates it
// with a compare-and-swap on Version.
type Exclusive struct {
	ID      string `json:"id"`
	Owner   string `json:"owner"`
	Project string `json:"project,omitempty"`
	// Node or Site is what was asked for: exactly one is set.
	Node string `json:"node,omitempty"`
	Site string `json:"site,omitempty"`
	// Nodes are the nodes covered, a sorted set. The controller resolves a
	// site to its nodes at creation and keeps the result, so a hold covers
	// the same nodes for its whole life even if the topology changes.
	Nodes []string `json:"nodes"`
	// Start and End bound the window, half open: [Start, End).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// State is StateReserved while the hold stands and StateCancelled once
	// cancelled. A hold that reaches its end keeps StateReserved: it simply
	// stops being live (LiveAt), so no timed event is needed to end it.
	State State `json:"state"`
	// Version is 1 on creation and bumped by each change.
	Version   uint64    `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	// CancelledAt, CancelledBy and Why record the cancellation, if any.
	CancelledAt time.Time `json:"cancelled_at,omitzero"`
	CancelledBy string    `json:"cancelled_by,omitempty"`
	Why         string    `json:"why,omitempty"`
}

// LiveAt reports whether the hold still stands at now: not cancelled and
// not over. A hold that has not started yet is live, because it already
// keeps others from booking its window.
func (x Exclusive) LiveAt(now time.Time) bool {
	return x.State == StateReserved && now.Before(x.End)
}

// Overlaps reports whether the hold's window shares an instant with
// [start, end). Windows are half open, as in Reservation.Overlaps, so a
// hold that ends at 10:00 leaves the nodes free to one that starts at 10:00.
func (x Exclusive) Overlaps(start, end time.Time) bool {
	return x.Start.Before(end) && start.Before(x.End)
}

// ValidateExclusive checks what every new hold must satisfy whatever the
// policy (a *RequestError, 400): exactly one of Node and Site, the nodes
// covered as a non-empty sorted set (for a node hold, that node alone), an
// end after the start, a start not in the past (give or take StartGrace),
// and an ID and an owner. The user's own mistakes are reported before the
// controller's (ID, owner), so a user never sees a complaint about a field
// they did not send.
func ValidateExclusive(x Exclusive, now time.Time) error {
	switch {
	case x.Node == "" && x.Site == "":
		return &RequestError{Field: "node", Message: "node or site: one is required"}
	case x.Node != "" && x.Site != "":
		return &RequestError{Field: "site", Message: fmt.Sprintf("node %q and site %q are both given: hold a node or a site, not both", x.Node, x.Site)}
	}
	if err := exCheckNodes(x); err != nil {
		return err
	}
	switch {
	case x.Start.IsZero():
		return &RequestError{Field: "start", Message: "start: a time is required"}
	case x.End.IsZero():
		return &RequestError{Field: "end", Message: "end: a time (or a duration) is required"}
	case !x.End.After(x.Start):
		return &RequestError{Field: "end", Message: fmt.Sprintf("end %s is not after start %s", stFormatTime(x.End), stFormatTime(x.Start))}
	case x.Start.Before(now.Add(-StartGrace)):
		return &RequestError{Field: "start", Message: fmt.Sprintf("start %s is in the past (it is now %s)", stFormatTime(x.Start), stFormatTime(now))}
	case x.ID == "":
		return &RequestError{Field: "id", Message: "exclusive hold has no id"}
	case x.Owner == "":
		return &RequestError{Field: "owner", Message: "exclusive hold has no owner"}
	}
	return nil
}

// exCheckNodes checks the nodes covered. A site that resolves to no node
// would hold nothing while looking like it holds something, so it is
// refused rather than stored.
func exCheckNodes(x Exclusive) error {
	what := "site " + x.Site
	if x.Node != "" {
		what = "node " + x.Node
	}
	if len(x.Nodes) == 0 {
		return &RequestError{Field: "nodes", Message: fmt.Sprintf("%s covers no node", what)}
	}
	for i, n := range x.Nodes {
		switch {
		case n == "":
			return &RequestError{Field: "nodes", Message: fmt.Sprintf("%s: node %d of those covered has no name", what, i+1)}
		case i > 0 && n <= x.Nodes[i-1]:
			return &RequestError{Field: "nodes", Message: fmt.Sprintf("%s: the nodes covered must be sorted without repeats (%q after %q)", what, n, x.Nodes[i-1])}
		}
	}
	if x.Node != "" && (len(x.Nodes) != 1 || x.Nodes[0] != x.Node) {
		return &RequestError{Field: "nodes", Message: fmt.Sprintf("a hold of node %s covers that node alone, not %s", x.Node, strings.Join(x.Nodes, ", "))}
	}
	return nil
}

// CheckExclusivePolicy checks a new hold by a requester with role against
// policy p. It first runs ValidateExclusive, so one call answers both "is
// it well-formed" (a *RequestError, 400) and "is it allowed" (a
// *PolicyError, 403). A hold is bounded in time like a reservation, by the
// MaxDuration, MinDuration and Horizon resolved for its project, and with
// the same messages: holding a host for a week is no more acceptable than
// reserving a path for a week. The bandwidth limits do not apply, since a
// hold books no bandwidth. Whether other reservations or holds are in the
// way is not policy: see ReservationsBlocking and ExclusiveConflicts.
func CheckExclusivePolicy(p Policy, role Role, x Exclusive, now time.Time) error {
	if err := ValidateExclusive(x, now); err != nil {
		return err
	}
	_, _, err := polTime(p, role, x.Project, x.Start, x.End, now, "hold nodes exclusively")
	return err
}

// ExclusiveConflicts returns the holds in xs, in their order, of owners
// other than owner that are live at now, overlap [start, end) and cover
// one of nodes. The controller refuses a reservation when any is returned
// (nodes being Reservation.Nodes), and a new hold likewise (nodes being the
// nodes it covers): holds of one owner never conflict with each other or
// with that owner's reservations.
func ExclusiveConflicts(owner string, nodes []string, start, end time.Time, xs []Exclusive, now time.Time) []Exclusive {
	var out []Exclusive
	for _, x := range xs {
		if x.Owner != owner && x.LiveAt(now) && x.Overlaps(start, end) && exShare(x.Nodes, nodes) {
			out = append(out, x)
		}
	}
	return out
}

// ReservationsBlocking returns the reservations in rs, in their order, of
// owners other than owner that are live (State.Live, so a HELD one counts:
// it may yet be committed), overlap [start, end) and touch one of nodes
// (Reservation.Nodes). A hold is granted only when none is returned: it
// promises the nodes to its owner alone, and those reservations were
// promised first.
func ReservationsBlocking(owner string, nodes []string, start, end time.Time, rs []Reservation) []Reservation {
	var out []Reservation
	for _, r := range rs {
		if r.Owner != owner && r.State.Live() && r.Start.Before(end) && start.Before(r.End) && exShare(r.Nodes(), nodes) {
			out = append(out, r)
		}
	}
	return out
}

// exShare reports whether a and b have a node in common. Neither needs to
// be sorted: callers pass a reservation's nodes, a request's, or a hold's
// as stored, and the sets are small.
func exShare(a, b []string) bool {
	for _, n := range a {
		if slices.Contains(b, n) {
			return true
		}
	}
	return false
}

// ExclusiveConflictError is a reservation or hold refused because of other
// owners' holds, or a hold refused because of other owners' reservations
// (409: it may succeed at another time or once they are cancelled). It
// names who holds what and when, so the user knows whom to ask.
type ExclusiveConflictError struct {
	// Holds and Reservations are what stands in the way; usually one of
	// the two is set.
	Holds        []Exclusive
	Reservations []Reservation
	// Message says what was refused ("cannot hold site cern from ... to
	// ..."); Error follows it with the list. When empty, Error says what
	// kind of conflict it is.
	Message string
}

// exMaxListed bounds how many conflicts and nodes a message lists: enough
// to see who is in the way, without a wall of text for a busy site.
const exMaxListed = 5

// Error says what was refused, then lists up to five of the holds and
// reservations in the way with their owners, nodes and windows.
func (e *ExclusiveConflictError) Error() string {
	var items []string
	for _, x := range e.Holds {
		on := "node " + x.Node
		if x.Node == "" {
			on = fmt.Sprintf("site %s (%s)", x.Site, exList(x.Nodes))
		}
		items = append(items, fmt.Sprintf("exclusive hold %s of %s on %s from %s to %s", x.ID, x.Owner, on, stFormatTime(x.Start), stFormatTime(x.End)))
	}
	for _, r := range e.Reservations {
		items = append(items, fmt.Sprintf("reservation %s of %s on %s from %s to %s", r.ID, r.Owner, exList(r.Nodes()), stFormatTime(r.Start), stFormatTime(r.End)))
	}
	msg := e.Message
	if msg == "" {
		msg = "the nodes are reserved by others then"
		if len(e.Holds) > 0 {
			msg = "the nodes are held exclusively by others then"
		}
	}
	more := ""
	if len(items) > exMaxListed {
		items, more = items[:exMaxListed], fmt.Sprintf(" and %d more", len(items)-exMaxListed)
	}
	return fmt.Sprintf("%s: %s%s", msg, strings.Join(items, "; "), more)
}

// Unwrap makes an ExclusiveConflictError match ErrConflict.
func (e *ExclusiveConflictError) Unwrap() error { return ErrConflict }

// exList joins up to exMaxListed node names, saying how many more there are.
func exList(nodes []string) string {
	if len(nodes) > exMaxListed {
		return fmt.Sprintf("%s and %d more", strings.Join(nodes[:exMaxListed], ", "), len(nodes)-exMaxListed)
	}
	return strings.Join(nodes, ", ")
}

// CancelExclusive cancels hold x at now on behalf of by, with reason why
// (which may be empty), and returns the changed copy: State becomes
// StateCancelled and Version is bumped. It is pure: x is not modified.
// Cancelling a cancelled hold returns it unchanged and no error, so a
// retried cancel is harmless (the controller stores nothing then). A hold
// that has ended (now at or after End) cannot be cancelled: it has already
// released its nodes, and rewriting it would falsify the record of who held
// what (ErrConflict).
func CancelExclusive(x Exclusive, by, why string, now time.Time) (Exclusive, error) {
	switch {
	case by == "":
		return x, resvErrorf(ErrInvalid, "cancel of exclusive hold %s says nobody did it", x.ID)
	case x.State == StateCancelled:
		return x, nil
	case x.State != StateReserved:
		return x, resvErrorf(ErrConflict, "exclusive hold %s is not standing (state %q): cannot cancel it", x.ID, x.State)
	case !now.Before(x.End):
		return x, resvErrorf(ErrConflict, "exclusive hold %s ended at %s: cannot cancel: it is over", x.ID, stFormatTime(x.End))
	}
	x.State = StateCancelled
	x.Version++
	x.CancelledAt, x.CancelledBy, x.Why = now, by, why
	return x, nil
}

// CheckExclusiveChain applies the maximum duration max (resolved from
// source, as in LimitSources) to the run of holds that x joins: x and the
// holds in mine of the same owner that cover one of x's nodes and overlap
// x or touch it end to start, then those that overlap or touch the run so
// far, and so on. Holds back to back are one hold to the rule: without
// this, twenty-one 8-hour holds in a row keep a node for a week under an
// 8-hour limit. A cancelled hold counts until it was cancelled; one
// cancelled before it started does not count. The refusal is a
// *PolicyError (403) that names the holds of the run.
func CheckExclusiveChain(x Exclusive, mine []Exclusive, max time.Duration, source string) error {
	type span struct {
		start, end time.Time
		id         string
	}
	var spans []span
	for _, h := range mine {
		if h.ID == x.ID || h.Owner != x.Owner || !exShare(h.Nodes, x.Nodes) {
			continue
		}
		end := h.End
		switch h.State {
		case StateReserved:
		case StateCancelled:
			if h.CancelledAt.IsZero() || !h.CancelledAt.After(h.Start) {
				continue
			}
			if h.CancelledAt.Before(end) {
				end = h.CancelledAt
			}
		default:
			continue
		}
		spans = append(spans, span{h.Start, end, h.ID})
	}
	start, end := x.Start, x.End
	used := make([]bool, len(spans))
	var ids []string
	for grown := true; grown; {
		grown = false
		for i, s := range spans {
			if used[i] || s.start.After(end) || start.After(s.end) {
				continue
			}
			used[i], grown = true, true
			ids = append(ids, s.id)
			if s.start.Before(start) {
				start = s.start
			}
			if s.end.After(end) {
				end = s.end
			}
		}
	}
	if d := end.Sub(start); len(ids) > 0 && d > max {
		slices.Sort(ids)
		more := ""
		if len(ids) > exMaxListed {
			ids, more = ids[:exMaxListed], fmt.Sprintf(" and %d more", len(ids)-exMaxListed)
		}
		return &PolicyError{Rule: RuleMaxDuration, Message: fmt.Sprintf(
			"with your holds %s%s, which overlap it or touch it end to start, this hold makes one of %s in a row (%s to %s), over the %s maximum for %s: holds back to back count as one",
			strings.Join(ids, ", "), more, stFormatDuration(d), stFormatTime(start), stFormatTime(end), stFormatDuration(max), polFor(source))}
	}
	return nil
}
