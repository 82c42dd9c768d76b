package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
)

// TestModifyFlowSpec: a modify may replace the flows of a reservation
// booked with a flow spec (lightpath run adds a pull's connections this
// way): the state and DSCP stay, the history says so. A flow spec outside
// the reservation's nodes, a bad one, and one for a reservation without
// flows are refused.
func TestModifyFlowSpec(t *testing.T) {
	clk := &testClock{t: time.Date(2030, 3, 1, 12, 0, 0, 0, time.UTC)}
	c := openTest(t, twoWANs, clk)
	ctx := context.Background()
	admin := Actor{Name: "admin", Role: reserve.RoleAdmin}
	addr := func(n string) string { return c.topo.Addrs[n][0].Addr().String() }
	h1, h2, h3 := addr("h1"), addr("h2"), addr("h3")
	mk := func(flow string) reserve.Reservation {
		t.Helper()
		cr, err := c.Create(ctx, admin, CreateInput{Owner: "admin", From: "h1", To: "h2", Bandwidth: 100_000_000,
			Start: clk.t.Add(time.Hour), Duration: time.Hour, FlowSpec: flow})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Get(ctx, admin, cr.Reservation.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := mk(fmt.Sprintf("any %s > %s cgroup lightpath/run-1", h1, h2))
	more := fmt.Sprintf("any %s > %s cgroup lightpath/run-1, tcp %s:5201 > %s:40000", h1, h2, h1, h2)
	m, err := c.Modify(ctx, admin, r.ID, ModifyInput{Version: r.Version, FlowSpec: more})
	if err != nil {
		t.Fatal(err)
	}
	got := m.Reservation
	if got.FlowSpec.String() != more || got.DSCP != r.DSCP || got.State != r.State || got.Version != r.Version+1 {
		t.Errorf("after the modify: flows %q DSCP %d state %s version %d; want %q, DSCP %d, %s, version %d",
			got.FlowSpec, got.DSCP, got.State, got.Version, more, r.DSCP, r.State, r.Version+1)
	}
	// The same again changes nothing.
	if again, err := c.Modify(ctx, admin, r.ID, ModifyInput{Version: got.Version, FlowSpec: more}); err != nil || again.Reservation.Version != got.Version {
		t.Errorf("the same flow spec again: version %d, %v; want unchanged", again.Reservation.Version, err)
	}
	for _, tc := range []struct{ name, flow string }{
		{"outside the nodes", fmt.Sprintf("tcp %s > %s", h3, h2)},
		{"bad", "tcp nowhere > " + h2},
	} {
		if _, err := c.Modify(ctx, admin, r.ID, ModifyInput{Version: got.Version, FlowSpec: tc.flow}); !errors.Is(err, reserve.ErrInvalid) {
			t.Errorf("%s (%q): %v, want invalid", tc.name, tc.flow, err)
		}
	}
	plain := mk("")
	if _, err := c.Modify(ctx, admin, plain.ID, ModifyInput{Version: plain.Version, FlowSpec: fmt.Sprintf("tcp %s > %s", h1, h2)}); !errors.Is(err, reserve.ErrInvalid) {
		t.Errorf("flows for a reservation booked without: %v, want invalid", err)
	}
}
