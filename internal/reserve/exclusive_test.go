package reserve

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// exHold is a standing hold by owner of nodes over [rsvT0+from, rsvT0+to),
// created at rsvT0: a hold of the node when there is one, else of site "s".
func exHold(id, owner string, nodes []string, from, to time.Duration) Exclusive {
	x := Exclusive{ID: id, Owner: owner, Project: "cms", Nodes: nodes,
		Start: rsvT0.Add(from), End: rsvT0.Add(to), State: StateReserved, Version: 1, CreatedAt: rsvT0}
	if len(nodes) == 1 {
		x.Node = nodes[0]
	} else {
		x.Site = "s"
	}
	return x
}

// exReq is a new hold of site cern (h1, h2, rt) by alice, starting in an
// hour and lasting d.
func exReq(d time.Duration) Exclusive {
	return exHold("x-1", "alice", []string{"h1", "h2", "rt"}, time.Hour, time.Hour+d)
}

func exIDs[T any](list []T, id func(T) string) []string {
	var out []string
	for _, v := range list {
		out = append(out, id(v))
	}
	return out
}

func TestValidateExclusive(t *testing.T) {
	for _, tc := range []struct {
		name      string
		change    func(*Exclusive)
		wantField string // "" means valid
	}{
		{"valid site", func(*Exclusive) {}, ""},
		{"valid node", func(x *Exclusive) { x.Site, x.Node, x.Nodes = "", "h1", []string{"h1"} }, ""},
		{"neither node nor site", func(x *Exclusive) { x.Site = "" }, "node"},
		{"both node and site", func(x *Exclusive) { x.Node = "h1" }, "site"},
		{"no nodes", func(x *Exclusive) { x.Nodes = nil }, "nodes"},
		{"an empty node name", func(x *Exclusive) { x.Nodes = []string{"", "h1"} }, "nodes"},
		{"nodes unsorted", func(x *Exclusive) { x.Nodes = []string{"h2", "h1"} }, "nodes"},
		{"nodes repeated", func(x *Exclusive) { x.Nodes = []string{"h1", "h1"} }, "nodes"},
		{"node hold covering another node", func(x *Exclusive) { x.Site, x.Node, x.Nodes = "", "h1", []string{"h2"} }, "nodes"},
		{"node hold covering more than its node", func(x *Exclusive) { x.Site, x.Node = "", "h1" }, "nodes"},
		{"no start", func(x *Exclusive) { x.Start = time.Time{} }, "start"},
		{"no end", func(x *Exclusive) { x.End = time.Time{} }, "end"},
		{"end = start", func(x *Exclusive) { x.End = x.Start }, "end"},
		{"end before start", func(x *Exclusive) { x.End = x.Start.Add(-time.Second) }, "end"},
		{"start now", func(x *Exclusive) { x.Start = rsvT0 }, ""},
		{"start just within the grace", func(x *Exclusive) { x.Start = rsvT0.Add(-StartGrace) }, ""},
		{"start just past the grace", func(x *Exclusive) { x.Start = rsvT0.Add(-StartGrace - time.Nanosecond) }, "start"},
		{"no id", func(x *Exclusive) { x.ID = "" }, "id"},
		{"no owner", func(x *Exclusive) { x.Owner = "" }, "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := exReq(time.Hour)
			tc.change(&x)
			err := ValidateExclusive(x, rsvT0)
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			var re *RequestError
			if !errors.As(err, &re) || re.Field != tc.wantField || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v, want a RequestError on %s", err, tc.wantField)
			}
		})
	}
}

func TestCheckExclusivePolicy(t *testing.T) {
	userMax := Policy{Roles: map[Role]Limits{RoleUser: {MaxDuration: 4 * time.Hour}}}
	cmsLong := Policy{
		Roles:    map[Role]Limits{RoleUser: {MaxDuration: 4 * time.Hour}},
		Projects: map[string]Limits{"cms": {MaxDuration: 24 * time.Hour, Horizon: 7 * 24 * time.Hour}},
	}
	minimum := Policy{Default: Limits{MinDuration: 5 * time.Minute}}
	// Bandwidth limits do not apply: a hold has no bandwidth.
	bw := Policy{Default: Limits{MaxBandwidth: 1, MaxProjectBandwidth: 1}}
	for _, tc := range []struct {
		name     string
		p        Policy
		role     Role
		d        time.Duration
		change   func(*Exclusive)
		wantRule PolicyRule // "" means allowed
		wantMsg  string
	}{
		{name: "defaults allow 8h", role: RoleUser, d: 8 * time.Hour},
		{name: "defaults refuse 8h and a nanosecond", role: RoleUser, d: 8*time.Hour + time.Nanosecond, wantRule: RuleMaxDuration, wantMsg: "for everyone"},
		{name: "user 5h", p: userMax, role: RoleUser, d: 5 * time.Hour, wantRule: RuleMaxDuration, wantMsg: "duration 5h exceeds the 4h maximum for role user"},
		{name: "operator falls back to the default", p: userMax, role: RoleOperator, d: 5 * time.Hour},
		{name: "project beats role", p: cmsLong, role: RoleUser, d: 24 * time.Hour},
		{name: "project's own maximum", p: cmsLong, role: RoleUser, d: 25 * time.Hour, wantRule: RuleMaxDuration, wantMsg: "duration 25h exceeds the 24h maximum for project cms"},
		{name: "role applies outside the project", p: cmsLong, role: RoleUser, d: 5 * time.Hour, change: func(x *Exclusive) { x.Project = "" }, wantRule: RuleMaxDuration, wantMsg: "role user"},
		{name: "minimum met", p: minimum, role: RoleUser, d: 5 * time.Minute},
		{name: "below the minimum", p: minimum, role: RoleUser, d: 5*time.Minute - time.Second, wantRule: RuleMinDuration, wantMsg: "duration 4m59s is below the 5m minimum for everyone"},
		{name: "end at the horizon", role: RoleUser, d: time.Hour, change: func(x *Exclusive) {
			x.End = rsvT0.Add(DefaultHorizon)
			x.Start = x.End.Add(-time.Hour)
		}},
		{name: "end past the horizon", role: RoleUser, d: time.Hour, change: func(x *Exclusive) {
			x.End = rsvT0.Add(DefaultHorizon + time.Second)
			x.Start = x.End.Add(-time.Hour)
		}, wantRule: RuleHorizon, wantMsg: "end 2026-09-01T10:00:01Z is beyond the booking horizon of 184 days for everyone: book to end by 2026-09-01T10:00:00Z"},
		{name: "project's horizon", p: cmsLong, role: RoleUser, d: time.Hour, change: func(x *Exclusive) {
			x.Start = rsvT0.Add(8 * 24 * time.Hour)
			x.End = x.Start.Add(time.Hour)
		}, wantRule: RuleHorizon, wantMsg: "horizon of 7 days for project cms"},
		{name: "bandwidth limits do not apply", p: bw, role: RoleUser, d: time.Hour},
		{name: "agents do not hold", role: RoleAgent, d: time.Hour, wantRule: RuleRole, wantMsg: "role agent"},
		{name: "unknown role", role: "guest", d: time.Hour, wantRule: RuleRole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := exReq(tc.d)
			if tc.change != nil {
				tc.change(&x)
			}
			err := CheckExclusivePolicy(tc.p, tc.role, x, rsvT0)
			if tc.wantRule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Rule != tc.wantRule || !errors.Is(err, ErrForbidden) {
				t.Fatalf("error %v, want a PolicyError for %s", err, tc.wantRule)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("message %q, want it to contain %q", err, tc.wantMsg)
			}
		})
	}
}

func TestCheckExclusivePolicyInvalidFirst(t *testing.T) {
	x := exReq(20 * time.Hour)
	x.Nodes = nil
	if err := CheckExclusivePolicy(Policy{}, RoleAgent, x, rsvT0); !errors.Is(err, ErrInvalid) || errors.Is(err, ErrForbidden) {
		t.Fatalf("error %v, want invalid (400) before forbidden (403)", err)
	}
}

func TestExclusiveLiveAndOverlaps(t *testing.T) {
	x := exHold("x", "alice", []string{"h1"}, time.Hour, 2*time.Hour) // [11:00, 12:00)
	cancelled := x
	cancelled.State = StateCancelled
	at := func(d time.Duration) time.Time { return rsvT0.Add(d) }
	for _, tc := range []struct {
		name string
		x    Exclusive
		now  time.Time
		want bool
	}{
		{"before its start", x, at(0), true},
		{"during", x, at(90 * time.Minute), true},
		{"a nanosecond before its end", x, at(2*time.Hour - time.Nanosecond), true},
		{"at its end", x, at(2 * time.Hour), false},
		{"after", x, at(3 * time.Hour), false},
		{"cancelled", cancelled, at(0), false},
		{"no state", Exclusive{End: at(time.Hour)}, at(0), false},
	} {
		if got := tc.x.LiveAt(tc.now); got != tc.want {
			t.Errorf("LiveAt, %s: %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name       string
		start, end time.Duration
		want       bool
	}{
		{"ends at its start", 0, time.Hour, false},
		{"starts at its end", 2 * time.Hour, 3 * time.Hour, false},
		{"ends a nanosecond into it", 0, time.Hour + time.Nanosecond, true},
		{"starts a nanosecond before its end", 2*time.Hour - time.Nanosecond, 3 * time.Hour, true},
		{"inside", 70 * time.Minute, 80 * time.Minute, true},
		{"around", 0, 3 * time.Hour, true},
		{"same", time.Hour, 2 * time.Hour, true},
	} {
		if got := x.Overlaps(at(tc.start), at(tc.end)); got != tc.want {
			t.Errorf("Overlaps, %s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestExclusiveConflicts(t *testing.T) {
	cancelled := exHold("cancelled", "bob", []string{"h1"}, time.Hour, 2*time.Hour)
	cancelled.State = StateCancelled
	xs := []Exclusive{
		exHold("bob-h1", "bob", []string{"h1"}, time.Hour, 2*time.Hour),                 // [11:00, 12:00)
		exHold("bob-site", "bob", []string{"h2", "r1", "r2"}, 3*time.Hour, 4*time.Hour), // [13:00, 14:00)
		exHold("alice-h1", "alice", []string{"h1"}, time.Hour, 2*time.Hour),
		exHold("carol-old", "carol", []string{"h1"}, -2*time.Hour, -time.Hour), // ended at 09:00
		cancelled,
	}
	id := func(x Exclusive) string { return x.ID }
	for _, tc := range []struct {
		name       string
		owner      string
		nodes      []string
		start, end time.Duration
		now        time.Duration
		want       []string
	}{
		{"same node, same window", "carol", []string{"h1"}, time.Hour, 2 * time.Hour, 0, []string{"bob-h1", "alice-h1"}},
		{"own holds never conflict", "alice", []string{"h1"}, time.Hour, 2 * time.Hour, 0, []string{"bob-h1"}},
		{"ending where the hold starts", "carol", []string{"h1"}, 0, time.Hour, 0, nil},
		{"starting where the hold ends", "carol", []string{"h1"}, 2 * time.Hour, 3 * time.Hour, 0, nil},
		{"a nanosecond of overlap", "carol", []string{"h1"}, 2*time.Hour - time.Nanosecond, 3 * time.Hour, 0, []string{"bob-h1", "alice-h1"}},
		{"other nodes", "carol", []string{"h2", "h3"}, time.Hour, 2 * time.Hour, 0, nil},
		{"one node of a site", "carol", []string{"a", "r2", "z"}, 0, 5 * time.Hour, 0, []string{"bob-site"}},
		{"a path through both", "carol", []string{"h1", "h2", "r1"}, 0, 5 * time.Hour, 0, []string{"bob-h1", "bob-site", "alice-h1"}},
		{"ended holds never conflict", "dave", []string{"h1"}, -3 * time.Hour, 0, 0, nil},
		{"ended at now, though the window overlaps", "dave", []string{"h1"}, 0, 5 * time.Hour, 2 * time.Hour, nil},
		{"no nodes", "carol", nil, 0, 5 * time.Hour, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := exIDs(ExclusiveConflicts(tc.owner, tc.nodes, rsvT0.Add(tc.start), rsvT0.Add(tc.end), xs, rsvT0.Add(tc.now)), id)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReservationsBlocking(t *testing.T) {
	mk := func(id, owner string, st State, from, to time.Duration, via string) Reservation {
		r := rsvDraft(false)
		r.ID, r.Owner, r.State = id, owner, st
		r.Start, r.End = rsvT0.Add(from), rsvT0.Add(to)
		r.Path = []PathHop{{Link: "l1", From: "h1", To: via}, {Link: "l2", From: via, To: "h2"}}
		return r
	}
	rs := []Reservation{
		mk("bob-rt", "bob", StateReserved, time.Hour, 2*time.Hour, "rt"), // h1, h2, rt over [11:00, 12:00)
		mk("bob-r9", "bob", StateHeld, 3*time.Hour, 4*time.Hour, "r9"),   // h1, h2, r9 over [13:00, 14:00)
		mk("carol-rt", "carol", StateActive, 0, 2*time.Hour, "rt"),       // [10:00, 12:00)
		mk("alice-rt", "alice", StateReserved, time.Hour, 2*time.Hour, "rt"),
		mk("bob-done", "bob", StateFinished, time.Hour, 2*time.Hour, "rt"),
		mk("bob-gone", "bob", StateCancelled, time.Hour, 2*time.Hour, "rt"),
		mk("bob-fail", "bob", StateFailed, time.Hour, 2*time.Hour, "rt"),
	}
	id := func(r Reservation) string { return r.ID }
	for _, tc := range []struct {
		name       string
		owner      string
		nodes      []string
		start, end time.Duration
		want       []string
	}{
		{"a router on every path", "alice", []string{"rt"}, 0, 5 * time.Hour, []string{"carol-rt", "bob-rt"}},
		{"an end of every path", "dave", []string{"h2"}, 0, 5 * time.Hour, []string{"carol-rt", "bob-rt", "alice-rt", "bob-r9"}},
		{"own reservations never block", "bob", []string{"h1", "r9"}, 0, 5 * time.Hour, []string{"carol-rt", "alice-rt"}},
		{"a hop only one path takes", "alice", []string{"r9", "x"}, 0, 5 * time.Hour, []string{"bob-r9"}},
		{"ending where they start", "dave", []string{"r9"}, 0, 3 * time.Hour, nil},
		{"starting where they end", "dave", []string{"rt"}, 2 * time.Hour, 3 * time.Hour, nil},
		{"a nanosecond of overlap", "dave", []string{"rt"}, 2*time.Hour - time.Nanosecond, 3 * time.Hour, []string{"carol-rt", "bob-rt", "alice-rt"}},
		{"untouched nodes", "dave", []string{"h3", "r1"}, 0, 5 * time.Hour, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ReservationsBlocking(tc.owner, tc.nodes, rsvT0.Add(tc.start), rsvT0.Add(tc.end), rs)
			// The order is that of the input, whatever it is.
			want := map[string]bool{}
			for _, w := range tc.want {
				want[w] = true
			}
			var order []string
			for _, r := range rs {
				if want[r.ID] {
					order = append(order, r.ID)
				}
			}
			if ids := exIDs(got, id); !reflect.DeepEqual(ids, order) {
				t.Errorf("got %v, want %v", ids, order)
			}
		})
	}
}

func TestExclusiveConflictError(t *testing.T) {
	hold := exHold("x-7", "bob", []string{"h1"}, time.Hour, 2*time.Hour)
	site := exHold("x-8", "carol", []string{"a", "b", "c", "d", "e", "f", "g"}, time.Hour, 2*time.Hour)
	site.Site = "cern"
	r := rsvDraft(false)
	r.Owner, r.State = "dave", StateReserved
	many := make([]Reservation, 6)
	for i := range many {
		many[i] = r
		many[i].ID = fmt.Sprintf("res-%d", i+1)
	}
	for _, tc := range []struct {
		name string
		err  *ExclusiveConflictError
		want []string
		not  []string
	}{
		{"a node hold", &ExclusiveConflictError{Holds: []Exclusive{hold}, Message: "cannot reserve h1 to h2"}, []string{
			"cannot reserve h1 to h2: ", "exclusive hold x-7 of bob on node h1 from 2026-03-01T11:00:00Z to 2026-03-01T12:00:00Z"}, nil},
		{"a site hold names its site and some of its nodes", &ExclusiveConflictError{Holds: []Exclusive{site}}, []string{
			"held exclusively", "exclusive hold x-8 of carol on site cern (a, b, c, d, e and 2 more)"}, []string{"f, g"}},
		{"reservations", &ExclusiveConflictError{Reservations: many[:1], Message: "cannot hold site cern"}, []string{
			"cannot hold site cern: reservation res-1 of dave on h1, h2, rt from 2026-03-01T11:00:00Z to 2026-03-01T13:00:00Z"}, nil},
		{"five at most", &ExclusiveConflictError{Holds: []Exclusive{hold}, Reservations: many}, []string{
			"x-7", "res-1", "res-4", " and 2 more"}, []string{"res-5", "res-6"}},
		{"no message", &ExclusiveConflictError{Reservations: many[:2]}, []string{"reserved", "13:00:00Z; reservation res-2"}, []string{"more"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error = tc.err
			if !errors.Is(err, ErrConflict) {
				t.Errorf("%v does not match ErrConflict", err)
			}
			var ce *ExclusiveConflictError
			if !errors.As(fmt.Errorf("create: %w", err), &ce) || ce != tc.err {
				t.Error("errors.As does not find the ExclusiveConflictError")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q, want it to contain %q", err, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("message %q contains %q", err, n)
				}
			}
		})
	}
}

func TestCancelExclusive(t *testing.T) {
	standing := exHold("x-1", "alice", []string{"h1"}, time.Hour, 2*time.Hour) // [11:00, 12:00)
	cancelled := standing
	cancelled.State, cancelled.Version = StateCancelled, 2
	cancelled.CancelledAt, cancelled.CancelledBy, cancelled.Why = rsvT0, "bob", "first"
	for _, tc := range []struct {
		name    string
		x       Exclusive
		by, why string
		now     time.Duration
		want    Exclusive
		wantErr error
	}{
		{"before its start", standing, "alice", "plans changed", 0, func() Exclusive {
			w := standing
			w.State, w.Version, w.CancelledAt, w.CancelledBy, w.Why = StateCancelled, 2, rsvT0, "alice", "plans changed"
			return w
		}(), nil},
		{"during it, by an operator, no reason", standing, "op", "", 90 * time.Minute, func() Exclusive {
			w := standing
			w.State, w.Version, w.CancelledAt, w.CancelledBy = StateCancelled, 2, rsvT0.Add(90*time.Minute), "op"
			return w
		}(), nil},
		{"a nanosecond before its end", standing, "alice", "", 2*time.Hour - time.Nanosecond, func() Exclusive {
			w := standing
			w.State, w.Version, w.CancelledAt, w.CancelledBy = StateCancelled, 2, rsvT0.Add(2*time.Hour-time.Nanosecond), "alice"
			return w
		}(), nil},
		{"again, unchanged", cancelled, "alice", "second", time.Minute, cancelled, nil},
		{"again after its end, unchanged", cancelled, "alice", "", 3 * time.Hour, cancelled, nil},
		{"at its end", standing, "alice", "", 2 * time.Hour, standing, ErrConflict},
		{"after its end", standing, "alice", "", 3 * time.Hour, standing, ErrConflict},
		{"by nobody", standing, "", "", 0, standing, ErrInvalid},
		{"never created", Exclusive{ID: "x-2", End: rsvT0.Add(time.Hour)}, "alice", "", 0, Exclusive{ID: "x-2", End: rsvT0.Add(time.Hour)}, ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.x
			got, err := CancelExclusive(tc.x, tc.by, tc.why, rsvT0.Add(tc.now))
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
			if !reflect.DeepEqual(tc.x, before) {
				t.Error("the argument was changed")
			}
		})
	}
	if _, err := CancelExclusive(standing, "alice", "", rsvT0.Add(3*time.Hour)); !strings.Contains(fmt.Sprint(err), "x-1") {
		t.Errorf("cancel after the end: %v, want the hold named", err)
	}
}

// The JSON names are part of the API.
func TestExclusiveJSON(t *testing.T) {
	x := exReq(time.Hour)
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "owner", "project", "site", "nodes", "start", "end", "state", "version", "created_at"} {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: no %q", b, k)
		}
	}
	for _, k := range []string{"node", "cancelled_at", "cancelled_by", "why"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s: %q is set though empty", b, k)
		}
	}
	c, err := CancelExclusive(x, "bob", "maintenance", rsvT0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(c)
	var back Exclusive
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, c) {
		t.Errorf("round trip: %+v, %v\nwant %+v", back, err, c)
	}
}

func TestCheckExclusiveChain(t *testing.T) {
	h := time.Hour
	cancelled := func(x Exclusive, at time.Duration) Exclusive {
		x.State, x.CancelledAt, x.CancelledBy = StateCancelled, rsvT0.Add(at), x.Owner
		return x
	}
	x := exHold("x-new", "alice", []string{"h1"}, 9*h, 17*h) // 8 h
	for _, tc := range []struct {
		name    string
		mine    []Exclusive
		wantIDs []string // in the refusal; none: allowed
	}{
		{"alone", nil, nil},
		{"back to back before", []Exclusive{exHold("x-a", "alice", []string{"h1"}, h, 9*h)}, []string{"x-a"}},
		{"back to back after", []Exclusive{exHold("x-a", "alice", []string{"h1"}, 17*h, 18*h)}, []string{"x-a"}},
		{"overlapping", []Exclusive{exHold("x-a", "alice", []string{"h1", "h2"}, 16*h, 20*h)}, []string{"x-a"}},
		{"a run of three", []Exclusive{
			exHold("x-a", "alice", []string{"h1"}, 5*h, 7*h),
			exHold("x-b", "alice", []string{"h1"}, 7*h, 9*h),
		}, []string{"x-a", "x-b"}},
		{"a gap", []Exclusive{exHold("x-a", "alice", []string{"h1"}, h, 8*h)}, nil},
		{"another node", []Exclusive{exHold("x-a", "alice", []string{"h2"}, h, 9*h)}, nil},
		{"another owner", []Exclusive{exHold("x-a", "bob", []string{"h1"}, h, 9*h)}, nil},
		{"cancelled before it started", []Exclusive{cancelled(exHold("x-a", "alice", []string{"h1"}, h, 9*h), 0)}, nil},
		{"cancelled before it reached x", []Exclusive{cancelled(exHold("x-a", "alice", []string{"h1"}, h, 9*h), 8*h)}, nil},
		{"cancelled after it reached x", []Exclusive{cancelled(exHold("x-a", "alice", []string{"h1"}, h, 12*h), 10*h)}, []string{"x-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckExclusiveChain(x, tc.mine, 8*h, "default")
			if len(tc.wantIDs) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Rule != RuleMaxDuration || !errors.Is(err, ErrForbidden) {
				t.Fatalf("got %v, want a max_duration PolicyError", err)
			}
			for _, id := range tc.wantIDs {
				if !strings.Contains(pe.Message, id) {
					t.Errorf("%q does not name %s", pe.Message, id)
				}
			}
			if !strings.Contains(pe.Message, "8h maximum for everyone") {
				t.Errorf("%q does not name the limit", pe.Message)
			}
		})
	}
	// Within the limit together: allowed.
	short := exHold("x-new", "alice", []string{"h1"}, 9*h, 13*h)
	if err := CheckExclusiveChain(short, []Exclusive{exHold("x-a", "alice", []string{"h1"}, 5*h, 9*h)}, 8*h, "default"); err != nil {
		t.Errorf("two 4-hour holds back to back: %v", err)
	}
}
