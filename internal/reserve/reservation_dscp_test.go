package reserve

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseDSCPPool(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []uint8 // nil: an error
	}{
		{"af11,af12,af13", []uint8{10, 12, 14}},
		{" AF41 , cs1,46 ", []uint8{8, 34, 46}},
		{"40-43,ef", []uint8{40, 41, 42, 43, 46}},
		{"63", []uint8{63}},
		{"0", nil},
		{"cs0", nil},
		{"64", nil},
		{"1-64", nil},
		{"43-40", nil},
		{"af11,10", nil}, // af11 is 10
		{"", nil},
		{"af11,", nil},
		{"af14", nil},
		{"+5", nil},
		{"0x10", nil},
	} {
		t.Run(tc.in, func(t *testing.T) {
			p, err := ParseDSCPPool(tc.in)
			if tc.want == nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseDSCPPool(%q) = %v, %v; want an invalid error", tc.in, p, err)
				}
				return
			}
			if err != nil || !slices.Equal(p.Values(), tc.want) {
				t.Fatalf("ParseDSCPPool(%q) = %v, %v; want %v", tc.in, p.Values(), err, tc.want)
			}
			again, err := ParseDSCPPool(p.String())
			if err != nil || !slices.Equal(again.Values(), p.Values()) {
				t.Errorf("String %q does not parse back: %v %v", p, again.Values(), err)
			}
		})
	}
	def := DefaultDSCPPool()
	if len(def.Values()) != 17 || def.Contains(0) || def.Contains(46) || def.Contains(48) || !def.Contains(10) {
		t.Errorf("default pool %s", def)
	}
	if DSCPName(46) != "ef" || DSCPName(10) != "af11" || DSCPName(3) != "3" {
		t.Errorf("names: %s %s %s", DSCPName(46), DSCPName(10), DSCPName(3))
	}
}

func TestAllocateDSCP(t *testing.T) {
	pool, err := NewDSCPPool(14, 10, 12)
	if err != nil {
		t.Fatal(err)
	}
	// The request: h1 → rt → h2 from 11:00 to 13:00.
	req := rsvDraft(false)
	// other builds a live reservation holding dscp over [from, to) along
	// the given nodes.
	other := func(id string, dscp uint8, from, to time.Duration, nodes ...string) Reservation {
		o := Reservation{ID: id, State: StateReserved, DSCP: dscp, Start: rsvT0.Add(from), End: rsvT0.Add(to),
			From: nodes[0], To: nodes[len(nodes)-1]}
		for i := 1; i < len(nodes); i++ {
			o.Path = append(o.Path, PathHop{Link: fmt.Sprintf("%s-%d", id, i), From: nodes[i-1], To: nodes[i]})
		}
		return o
	}
	for _, tc := range []struct {
		name    string
		mine    uint8 // the request's current value, for a re-allocation
		others  []Reservation
		want    uint8
		wantErr bool
	}{
		{name: "empty", want: 10},
		{name: "shares a node and a moment", others: []Reservation{other("a", 10, 2*time.Hour, 4*time.Hour, "h3", "rt", "h4")}, want: 12},
		{name: "shares an end node", others: []Reservation{other("a", 10, 0, 2*time.Hour, "h2", "h5")}, want: 12},
		{name: "same moment, other nodes: reuse", others: []Reservation{other("a", 10, time.Hour, 3*time.Hour, "h3", "r9", "h4")}, want: 10},
		{name: "same nodes, ends as this starts: reuse", others: []Reservation{other("a", 10, 0, time.Hour, "h1", "rt", "h2")}, want: 10},
		{name: "same nodes, starts as this ends: reuse", others: []Reservation{other("a", 10, 3*time.Hour, 5*time.Hour, "h1", "rt", "h2")}, want: 10},
		{name: "cancelled ones free their value", others: []Reservation{func() Reservation {
			o := other("a", 10, time.Hour, 3*time.Hour, "h1", "rt", "h2")
			o.State = StateCancelled
			return o
		}()}, want: 10},
		{name: "held ones keep their value", others: []Reservation{func() Reservation {
			o := other("a", 10, time.Hour, 3*time.Hour, "h1", "rt", "h2")
			o.State = StateHeld
			return o
		}()}, want: 12},
		{name: "lowest free, not next", others: []Reservation{other("a", 12, time.Hour, 2*time.Hour, "h1", "rt")}, want: 10},
		{name: "values outside the pool do not matter", others: []Reservation{other("a", 46, time.Hour, 2*time.Hour, "h1", "rt")}, want: 10},
		{name: "itself is skipped", others: []Reservation{other("res-1", 10, time.Hour, 3*time.Hour, "h1", "rt", "h2")}, want: 10},
		{name: "keeps its value when still free", mine: 14, others: []Reservation{other("a", 10, time.Hour, 2*time.Hour, "rt", "h2")}, want: 14},
		{name: "moves when its value is taken", mine: 14, others: []Reservation{other("a", 14, time.Hour, 2*time.Hour, "rt", "h2")}, want: 10},
		{name: "exhausted", others: []Reservation{
			other("a", 10, 0, 2*time.Hour, "h1", "rt"),
			other("b", 12, 2*time.Hour, 4*time.Hour, "rt", "h2"),
			other("c", 14, 90*time.Minute, 100*time.Minute, "h6", "h2"),
		}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req
			r.DSCP = tc.mine
			got, err := AllocateDSCP(pool, r, tc.others)
			if tc.wantErr {
				var ex *DSCPExhaustedError
				if !errors.As(err, &ex) || !errors.Is(err, ErrConflict) || ex.PoolSize != 3 || !slices.Equal(ex.HeldBy, []string{"a", "b", "c"}) {
					t.Fatalf("AllocateDSCP = %d, %v; want exhausted, held by a, b, c", got, err)
				}
				if !strings.Contains(err.Error(), "all 3 in the pool") {
					t.Errorf("message %q", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("AllocateDSCP = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// TestAllocateDSCPUnique books random reservations on a small network one
// after another, as the controller does, and checks the rule over the
// result by brute force: no two live reservations that overlap in time and
// share a node hold the same value, and a refusal happens only when every
// value is held by such a reservation.
func TestAllocateDSCPUnique(t *testing.T) {
	pool, _ := NewDSCPPool(10, 12, 14, 18)
	nodes := []string{"a", "b", "c", "d", "e", "f"}
	rng := rand.New(rand.NewPCG(4, 2))
	var booked []Reservation
	refused := 0
	for i := range 400 {
		x, y := rng.IntN(len(nodes)), rng.IntN(len(nodes)-1)
		if y >= x {
			y++
		}
		start := rsvT0.Add(time.Duration(rng.IntN(48)) * 30 * time.Minute)
		r := Reservation{ID: fmt.Sprintf("r%d", i), State: StateReserved, From: nodes[x], To: nodes[y],
			Start: start, End: start.Add(time.Duration(1+rng.IntN(8)) * 30 * time.Minute)}
		if rng.IntN(2) == 0 { // via a middle node
			m := nodes[(max(x, y)+1)%len(nodes)]
			if m != r.From && m != r.To {
				r.Path = []PathHop{{"l", r.From, m}, {"l", m, r.To}}
			}
		}
		if rng.IntN(10) == 0 {
			r.State = StateCancelled
		}
		v, err := AllocateDSCP(pool, r, booked)
		conflicts := map[uint8]bool{}
		for _, o := range booked {
			if o.State.Live() && o.Overlaps(r) && dscpShareNode(r.Nodes(), o.Nodes()) {
				conflicts[o.DSCP] = true
			}
		}
		if err != nil {
			if len(conflicts) != len(pool.Values()) {
				t.Fatalf("%s refused with only %v taken: %v", r.ID, conflicts, err)
			}
			refused++
			continue
		}
		if conflicts[v] {
			t.Fatalf("%s got %d, which a conflicting reservation holds", r.ID, v)
		}
		r.DSCP = v
		booked = append(booked, r)
	}
	if refused == 0 || refused > 300 {
		t.Errorf("%d of 400 refused: the workload does not exercise the pool", refused)
	}
}
