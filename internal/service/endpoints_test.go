package service_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/transfer"
)

// Which data nodes serve an endpoint is an admin's decision (issue 28,
// finding 3): a node with an agent's token registers only for an
// endpoint that lists it, creates none, and never moves by itself.
func TestEndpointMembership(t *testing.T) {
	e := newEnv(t)
	hb := func(node, ep string) error {
		_, err := e.s.Heartbeat(e.ctx, agent(node), node, apiv1.DataNodeHeartbeat{Endpoint: ep, Address: e.addr(node), Lease: "15s"})
		return err
	}
	add := func(name, site string, nodes ...string) error {
		_, _, err := e.s.AddEndpoint(e.ctx, admin, apiv1.EndpointAdd{Name: name, Site: site, Nodes: nodes})
		return err
	}
	registered := func() map[string]string {
		eps, err := e.s.Endpoints(e.ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, ep := range eps {
			for _, n := range ep.Nodes {
				out[n.Node] = ep.Name
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		{"an agent's node creates an endpoint", func() error { return hb("a1", "squat") }, reserve.ErrForbidden},
		{"a user adds an endpoint", func() error {
			_, _, err := e.s.AddEndpoint(e.ctx, alice, apiv1.EndpointAdd{Name: "mine", Site: "s1"})
			return err
		}, reserve.ErrForbidden},
		{"a node adds an endpoint", func() error {
			_, _, err := e.s.AddEndpoint(e.ctx, agent("a1"), apiv1.EndpointAdd{Name: "mine", Site: "s1", Nodes: []string{"a1"}})
			return err
		}, reserve.ErrForbidden},
		{"an endpoint at no site", func() error { return add("x", "nowhere") }, reserve.ErrInvalid},
		{"a node of another site", func() error { return add("x", "s1", "b1") }, reserve.ErrInvalid},
		{"a router", func() error { return add("x", "s1", "ra") }, reserve.ErrInvalid},
		{"a node not in the topology", func() error { return add("x", "s1", "zz") }, reserve.ErrInvalid},
		{"a bad name", func() error { return add("a:b", "s1") }, reserve.ErrInvalid},
		{"src again at another site", func() error { return add("src", "s2") }, reserve.ErrConflict},
		{"a user removes an endpoint", func() error { _, err := e.s.RemoveEndpoint(e.ctx, bob, "src", nil); return err }, reserve.ErrForbidden},
		{"remove an endpoint that is not", func() error { _, err := e.s.RemoveEndpoint(e.ctx, admin, "none", nil); return err }, reserve.ErrNotFound},
		{"remove a node it does not list", func() error { _, err := e.s.RemoveEndpoint(e.ctx, admin, "src", []string{"b1"}); return err }, reserve.ErrInvalid},
	} {
		if err := tc.do(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := e.st.GetEndpoint(e.ctx, "squat"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("the squatted endpoint: %v", err)
	}
	if _, err := e.st.GetEndpoint(e.ctx, "mine"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("an endpoint of a user: %v", err)
	}

	// An endpoint that lists a2 but not a1: a1 may not join it, nor may
	// a2 while it is src's; once taken off src, a2 may.
	if err := add("other", "s1", "a2"); err != nil {
		t.Fatal(err)
	}
	if err := hb("a1", "other"); !errors.Is(err, reserve.ErrForbidden) {
		t.Errorf("a1 joins other, which does not list it: %v", err)
	}
	if err := hb("a2", "other"); !errors.Is(err, reserve.ErrForbidden) {
		t.Errorf("a2 moves from src to other by itself: %v", err)
	}
	if got := registered(); got["a1"] != "src" || got["a2"] != "src" {
		t.Errorf("registrations after refused moves: %v", got)
	}
	ep, err := e.s.RemoveEndpoint(e.ctx, admin, "src", []string{"a2"})
	if err != nil || slices.Contains(ep.Members, "a2") {
		t.Fatalf("take a2 off src: %+v, %v", ep, err)
	}
	if got := registered(); got["a2"] != "" {
		t.Errorf("a2 still registered: %v", got)
	}
	if err := hb("a2", "src"); !errors.Is(err, reserve.ErrForbidden) {
		t.Errorf("a2 back to src after it was taken off: %v", err)
	}
	if err := hb("a2", "other"); err != nil {
		t.Errorf("a2 joins other: %v", err)
	}

	// An admin's data node creates its endpoint, joins one, and moves.
	if _, err := e.s.Heartbeat(e.ctx, admin, "b2", apiv1.DataNodeHeartbeat{Endpoint: "auto", Address: e.addr("b2")}); err != nil {
		t.Fatalf("an admin's node creates auto: %v", err)
	}
	if auto, err := e.st.GetEndpoint(e.ctx, "auto"); err != nil || auto.Site != "s2" || !slices.Equal(auto.Members, []string{"b2"}) {
		t.Errorf("auto: %+v, %v", auto, err)
	}
	if dst, err := e.st.GetEndpoint(e.ctx, "dst"); err != nil || slices.Contains(dst.Members, "b2") {
		t.Errorf("dst after b2 moved: %+v, %v", dst, err)
	}

	// An endpoint in use by an unfinished job stays; once unused it goes,
	// with its nodes' registrations.
	j, _, err := e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.RemoveEndpoint(e.ctx, admin, "dst", nil); !errors.Is(err, reserve.ErrConflict) {
		t.Errorf("remove dst under job %s: %v", j.ID, err)
	}
	if _, err := e.s.RemoveEndpoint(e.ctx, admin, "other", nil); err != nil {
		t.Fatal(err)
	}
	if got := registered(); got["a2"] != "" {
		t.Errorf("a2 registered after other was removed: %v", got)
	}
	if err := hb("a2", "other"); !errors.Is(err, reserve.ErrForbidden) {
		t.Errorf("a2 recreates other: %v", err)
	}
}
