package reserve

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// The error classes of the reservation domain. Every error this package
// returns wraps exactly one of them, so the API maps an error to its HTTP
// status with errors.Is instead of matching messages: ErrInvalid is 400,
// ErrForbidden 403, ErrNotFound 404 and ErrConflict 409. The typed errors
// (TransitionError, StaleVersionError, PolicyError, RequestError,
// FlowSpecError, DSCPExhaustedError) carry the details for errors.As.
var (
	// ErrInvalid: the request itself is malformed or self-contradictory;
	// retrying it unchanged can never succeed.
	ErrInvalid = errors.New("invalid request")
	// ErrForbidden: the request is well-formed but policy does not allow it
	// for this role or project.
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: the request names something that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request clashes with the reservation's current state
	// (a stale version, a transition its state does not allow, a pool with
	// nothing free); it may succeed after re-reading or later.
	ErrConflict = errors.New("conflict")
)

// resvError is a plain message in one of the error classes, for the cases
// that carry no details worth a type of their own. Its message stands
// alone, without the class appended, because it is what users read.
type resvError struct {
	class error
	msg   string
}

func (e *resvError) Error() string { return e.msg }
func (e *resvError) Unwrap() error { return e.class }

func resvErrorf(class error, format string, args ...any) error {
	return &resvError{class: class, msg: fmt.Sprintf(format, args...)}
}

// State is where a reservation is in its life. The names are upper case
// because they are part of the API and the CLI output (DESIGN.md).
type State string

// The states. A reservation starts HELD (when the client asks for a hold)
// or RESERVED, becomes ACTIVE during its window, and ends in one of the
// three terminal states. Degradation is a flag, not a state, because a
// degraded reservation still holds its bandwidth and still ends normally.
const (
	StateHeld      State = "HELD"      // booked, but released unless committed before the hold expires
	StateReserved  State = "RESERVED"  // committed, waiting for its start
	StateActive    State = "ACTIVE"    // in its window, with every managed node's part in place
	StateFinished  State = "FINISHED"  // reached its end
	StateCancelled State = "CANCELLED" // cancelled by someone, or its hold expired
	StateFailed    State = "FAILED"    // a node could not carry it; see FailureReason
)

// States lists every state in life-cycle order, for validation and for
// clients that offer a filter.
var States = []State{StateHeld, StateReserved, StateActive, StateFinished, StateCancelled, StateFailed}

// ParseState parses an upper-case state name as it appears in the API.
func ParseState(s string) (State, error) {
	st := State(s)
	if !st.Valid() {
		return "", resvErrorf(ErrInvalid, "unknown reservation state %q: want one of HELD, RESERVED, ACTIVE, FINISHED, CANCELLED, FAILED", s)
	}
	return st, nil
}

// Valid reports whether s is one of the six states.
func (s State) Valid() bool { return slices.Contains(States, s) }

// Terminal reports whether no event can move a reservation out of s. A
// terminal reservation no longer holds bandwidth or a DSCP value.
func (s State) Terminal() bool {
	return s == StateFinished || s == StateCancelled || s == StateFailed
}

// Live reports whether a reservation in s holds capacity: admission, the
// DSCP pool and project limits count HELD, RESERVED and ACTIVE ones.
func (s State) Live() bool { return s == StateHeld || s == StateReserved || s == StateActive }

// PathHop is one directed hop of a reservation's path: the named link and
// the direction across it in which the bandwidth is guaranteed (each
// direction of a link has its own capacity, DESIGN.md).
type PathHop struct {
	Link string `json:"link"`
	From string `json:"from"`
	To   string `json:"to"`
}

// Reservation is a directed, timed bandwidth guarantee from one node to
// another along a path of links. It is a value: Next returns a changed
// copy and never modifies its argument, so the controller can compare the
// old and new versions and store the new one with a compare-and-swap on
// Version.
type Reservation struct {
	ID      string `json:"id"`
	Owner   string `json:"owner"`
	Project string `json:"project,omitempty"`
	// From and To are node names; the guarantee runs From → To only, and
	// the reverse traffic of the same flows is routed without one.
	From string `json:"from"`
	To   string `json:"to"`
	// Bandwidth is the guaranteed rate in bits per second.
	Bandwidth uint64 `json:"bandwidth_bps"`
	// Start and End bound the window, half open: [Start, End).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// FlowSpec, when set, names the packets steered onto the path.
	FlowSpec FlowSpec `json:"flow_spec,omitzero"`
	// DSCP is the codepoint every hop matches to steer and classify this
	// reservation's packets. Zero means none: CS0 is the default class that
	// all unsteered traffic carries, so it can never identify a reservation
	// and no pool may contain it.
	DSCP uint8 `json:"dscp,omitempty"`
	// Path runs from From to To, hop by hop.
	Path  []PathHop `json:"path"`
	State State     `json:"state"`
	// Degraded flags a live reservation whose guarantee may not hold right
	// now (for example a managed node's agent lease lapsed), with the reason.
	Degraded       bool   `json:"degraded"`
	DegradedReason string `json:"degraded_reason,omitempty"`
	// FailureReason says why a FAILED reservation failed.
	FailureReason string `json:"failure_reason,omitempty"`
	// Version counts accepted changes, starting at 1 on creation. Every
	// change bumps it, timed ones included, so a store can update with
	// "WHERE version = old" and a client that read an older copy is told so.
	Version uint64 `json:"version"`
	// IdempotencyKey, given by the client on create, makes a retried create
	// book once (see IdempotentMatch).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// HoldExpires is when a HELD reservation is released unless committed;
	// zero in every other state.
	HoldExpires time.Time `json:"hold_expires,omitzero"`
	CreatedAt   time.Time `json:"created_at"`
	// ManagedNodes are the nodes on the path that had an agent when the
	// path was set: each must report its part in place (Provisioned) before
	// the reservation becomes ACTIVE. Unmanaged nodes are not waited for.
	// Both are sorted sets.
	ManagedNodes []string `json:"managed_nodes,omitempty"`
	Provisioned  []string `json:"provisioned,omitempty"`
	// History records every accepted change, oldest first.
	History []Transition `json:"history"`
}

// Transition records one accepted event: who did what, when and why. It is
// the audit trail and the payload of the event stream, so it records
// changes that keep the state (modify, degrade, a node reporting in) as
// well as changes of state; From is empty for the creation.
type Transition struct {
	From  State     `json:"from,omitempty"`
	To    State     `json:"to"`
	Event EventKind `json:"event"`
	At    time.Time `json:"at"`
	By    string    `json:"by"`
	Why   string    `json:"why"`
	// Version is the reservation's version after the change.
	Version uint64 `json:"version"`
}

// IsZero reports whether t is the zero Transition, which Next returns when
// an event changed nothing (a repeated commit, a node reporting twice).
func (t Transition) IsZero() bool { return t.Event == "" }

// Nodes returns the sorted set of nodes the reservation touches: its ends
// and every node on its path. The DSCP uniqueness rule and agents' work
// lists are both about these nodes.
func (r Reservation) Nodes() []string {
	nodes := []string{r.From, r.To}
	for _, h := range r.Path {
		nodes = append(nodes, h.From, h.To)
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if len(nodes) > 0 && nodes[0] == "" {
		nodes = nodes[1:]
	}
	return nodes
}

// Pending returns the managed nodes that have not yet reported their part
// in place, sorted; it is what an ACTIVE-to-be reservation is waiting for
// and what the API shows when a user asks why a path is not ready.
func (r Reservation) Pending() []string {
	var out []string
	for _, n := range r.ManagedNodes {
		if _, ok := slices.BinarySearch(r.Provisioned, n); !ok {
			out = append(out, n)
		}
	}
	return out
}

// Overlaps reports whether the windows of r and o share an instant. Windows
// are half open, so one that ends at 10:00 and one that starts at 10:00 do
// not overlap, the same convention admission uses.
func (r Reservation) Overlaps(o Reservation) bool {
	return r.Start.Before(o.End) && o.Start.Before(r.End)
}

// IdempotentMatch tells a retried create from a reuse of the key: the
// controller calls it with the reservation already stored under the
// client's idempotency key and the new request. Nil means the same request
// (answer with the stored reservation, book nothing); otherwise a conflict
// naming the first field that differs. Only what the client asked for is
// compared, not what the controller chose (ID, path, DSCP, state).
func IdempotentMatch(stored, req Reservation) error {
	diff := ""
	switch {
	case stored.Owner != req.Owner:
		diff = "owner"
	case stored.Project != req.Project:
		diff = "project"
	case stored.From != req.From:
		diff = "from"
	case stored.To != req.To:
		diff = "to"
	case stored.Bandwidth != req.Bandwidth:
		diff = "bandwidth"
	case !stored.Start.Equal(req.Start):
		diff = "start"
	case !stored.End.Equal(req.End):
		diff = "end"
	case !stored.FlowSpec.Equal(req.FlowSpec):
		diff = "flow spec"
	}
	if diff == "" {
		return nil
	}
	return resvErrorf(ErrConflict, "idempotency key %q was already used for reservation %s with a different %s", req.IdempotencyKey, stored.ID, diff)
}

// clone returns a copy of r whose slices can be changed without touching
// r's, which is what keeps Next pure. FlowSpec is shared: nothing here
// changes a FlowSpec in place.
func (r Reservation) clone() Reservation {
	r.Path = slices.Clone(r.Path)
	r.ManagedNodes = slices.Clone(r.ManagedNodes)
	r.Provisioned = slices.Clone(r.Provisioned)
	r.History = slices.Clone(r.History)
	return r
}

// checkShape verifies the invariants every stored reservation keeps,
// whatever the policy: without them the scheduler and the agents would act
// on nonsense. Policy and the "not in the past" rule are ValidateRequest's
// and CheckPolicy's, because they depend on who asks and when.
func (r Reservation) checkShape() error {
	switch {
	case r.ID == "":
		return &RequestError{Field: "id", Message: "reservation has no id"}
	case r.From == "" || r.To == "":
		return &RequestError{Field: "from", Message: "reservation needs both a from and a to node"}
	case r.From == r.To:
		return &RequestError{Field: "to", Message: fmt.Sprintf("from and to are the same node %q", r.From)}
	case r.Bandwidth == 0:
		return &RequestError{Field: "bandwidth_bps", Message: "bandwidth must be greater than zero"}
	case r.Start.IsZero() || r.End.IsZero():
		return &RequestError{Field: "start", Message: "reservation needs a start and an end"}
	case !r.End.After(r.Start):
		return &RequestError{Field: "end", Message: fmt.Sprintf("end %s is not after start %s", r.End.Format(time.RFC3339), r.Start.Format(time.RFC3339))}
	case r.DSCP > 63:
		return &RequestError{Field: "dscp", Message: fmt.Sprintf("DSCP %d is out of range 0-63", r.DSCP)}
	}
	if err := resvCheckPath(r.From, r.To, r.Path); err != nil {
		return err
	}
	return resvCheckManaged(r.Path, r.ManagedNodes)
}

// resvCheckPath verifies that path is a chain of hops from from to to. Loops
// are allowed here: whether a path is simple is the scheduler's business.
func resvCheckPath(from, to string, path []PathHop) error {
	if len(path) == 0 {
		return &RequestError{Field: "path", Message: "reservation has no path"}
	}
	at := from
	for i, h := range path {
		if h.Link == "" {
			return &RequestError{Field: "path", Message: fmt.Sprintf("hop %d names no link", i+1)}
		}
		if h.From != at {
			return &RequestError{Field: "path", Message: fmt.Sprintf("hop %d (%s) starts at %q, want %q", i+1, h.Link, h.From, at)}
		}
		if h.To == "" || h.To == h.From {
			return &RequestError{Field: "path", Message: fmt.Sprintf("hop %d (%s) goes nowhere", i+1, h.Link)}
		}
		at = h.To
	}
	if at != to {
		return &RequestError{Field: "path", Message: fmt.Sprintf("path ends at %q, want %q", at, to)}
	}
	return nil
}

// resvCheckManaged verifies that every managed node is on the path, since a
// node elsewhere could never have a part to put in place and the
// reservation would wait for it forever.
func resvCheckManaged(path []PathHop, managed []string) error {
	on := map[string]bool{}
	for _, h := range path {
		on[h.From], on[h.To] = true, true
	}
	for _, n := range managed {
		if !on[n] {
			return &RequestError{Field: "managed_nodes", Message: fmt.Sprintf("managed node %q is not on the path", n)}
		}
	}
	return nil
}

// RequestError is a malformed or self-contradictory request (400): Field
// names the offending request field, in the API's spelling.
type RequestError struct {
	Field   string
	Message string
}

// Error returns the message alone: it is written for the user.
func (e *RequestError) Error() string { return e.Message }

// Unwrap makes a RequestError match ErrInvalid.
func (e *RequestError) Unwrap() error { return ErrInvalid }

// TransitionError is an event the reservation's state does not allow, such
// as cancelling a FINISHED reservation or committing after the hold
// expired (409: it may have been allowed a moment ago).
type TransitionError struct {
	ID     string
	State  State
	Event  EventKind
	Reason string
}

// Error names the reservation, its state, the refused event and why.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("reservation %s is %s: cannot %s: %s", e.ID, e.State, e.Event, e.Reason)
}

// Unwrap makes a TransitionError match ErrConflict.
func (e *TransitionError) Unwrap() error { return ErrConflict }

// StaleVersionError is an event that named a version other than the
// reservation's current one: the client acted on an old copy and must
// re-read (409).
type StaleVersionError struct {
	ID      string
	Current uint64 // the reservation's version
	Given   uint64 // the version the client sent
}

// Error tells the client what to do: read again and retry.
func (e *StaleVersionError) Error() string {
	return fmt.Sprintf("reservation %s is at version %d, not %d: it changed since it was read; read it again and retry", e.ID, e.Current, e.Given)
}

// Unwrap makes a StaleVersionError match ErrConflict.
func (e *StaleVersionError) Unwrap() error { return ErrConflict }
