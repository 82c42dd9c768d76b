package controller_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
)

// TestAgentReports pins what a managed node's agent says about its part
// of a reservation: a reservation across a node whose agent's lease holds
// waits for that agent's "in place" before it becomes ACTIVE (at its
// start, or at the report if that comes later); a failure report fails
// it, with the node and the reason, and frees its bandwidth; a window that
// ends before the report fails it too, naming the node it waited for.
func TestAgentReports(t *testing.T) {
	type step struct {
		at     time.Duration
		report string // "ok", "failed" or "" (a tick)
		want   reserve.State
		why    string // the last transition's reason contains this
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{{
		name: "report after the start activates",
		steps: []step{
			{at: time.Minute, want: reserve.StateReserved},
			{at: 2 * time.Minute, want: reserve.StateReserved},
			{at: 3 * time.Minute, report: "ok", want: reserve.StateActive, why: "every managed node is ready, start 2031-05-04T10:01:00Z passed"},
			{at: 11 * time.Minute, want: reserve.StateFinished},
		},
	}, {
		name: "report before the start, the clock activates",
		steps: []step{
			{at: 30 * time.Second, report: "ok", want: reserve.StateReserved, why: "node h1 has its part in place"},
			{at: time.Minute, want: reserve.StateActive, why: "start 2031-05-04T10:01:00Z reached"},
		},
	}, {
		name: "failure before the start",
		steps: []step{
			{at: 30 * time.Second, report: "failed", want: reserve.StateFailed, why: "node h1: tc: no such device"},
			{at: time.Minute, want: reserve.StateFailed},
		},
	}, {
		name: "failure while active",
		steps: []step{
			{at: 30 * time.Second, report: "ok", want: reserve.StateReserved},
			{at: time.Minute, want: reserve.StateActive},
			{at: 5 * time.Minute, report: "failed", want: reserve.StateFailed, why: "node h1: tc: no such device"},
		},
	}, {
		name: "window over before the report",
		steps: []step{
			{at: time.Minute, want: reserve.StateReserved},
			{at: 11 * time.Minute, want: reserve.StateFailed, why: "window ended at 2031-05-04T10:11:00Z before node h1 reported its part in place"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, oneLink)
			h.heartbeat("h1", controller.MaxLease)
			r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 900 * mbit, Start: t0.Add(time.Minute), Duration: 10 * time.Minute})
			if !slices.Equal(r.ManagedNodes, []string{"h1"}) {
				t.Fatalf("managed nodes %v, want [h1]: only h1 has an agent", r.ManagedNodes)
			}
			for _, s := range tc.steps {
				h.clk.Set(t0.Add(s.at))
				if s.at < controller.MaxLease {
					h.heartbeat("h1", controller.MaxLease)
				}
				switch s.report {
				case "":
					h.c.Tick(h.ctx)
				case "ok", "failed":
					why := ""
					if s.report == "failed" {
						why = "tc: no such device"
					}
					if _, err := h.c.Report(h.ctx, agentOf("h1"), r.ID, "h1", s.report == "ok", why); err != nil {
						t.Fatalf("at +%s: report %s: %v", s.at, s.report, err)
					}
				}
				got := h.wantState(r.ID, s.want)
				if last := got.History[len(got.History)-1]; !strings.Contains(last.Why, s.why) {
					t.Fatalf("at +%s: last transition says %q, want %q in it", s.at, last.Why, s.why)
				}
				if got.State == reserve.StateFailed && !strings.Contains(got.FailureReason, "h1") {
					t.Fatalf("failure reason %q does not name the node", got.FailureReason)
				}
			}
			if got := h.get(r.ID); !got.State.Live() && h.clk.Now().Before(got.End) {
				// Failed early: its 900 Mbit/s, the whole link, is free
				// for the rest of its window.
				h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 900 * mbit, End: got.End})
			}
		})
	}
}

// TestAgentReportRefusals pins the reports the controller turns away, each
// leaving the reservation as it was: a failure without a reason, a report
// from a node the reservation does not wait for, an agent speaking for
// another node than its own, and a user who is no agent.
func TestAgentReportRefusals(t *testing.T) {
	h := newHarness(t, oneLink)
	h.heartbeat("h1", controller.MaxLease)
	r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 100 * mbit, Start: t0.Add(time.Minute), Duration: time.Hour})
	var reqErr *reserve.RequestError
	var polErr *reserve.PolicyError
	for _, tc := range []struct {
		name   string
		who    controller.Actor
		node   string
		ok     bool
		why    string
		match  func(error) bool
		saying string
	}{
		{name: "failure without a reason", who: agentOf("h1"), node: "h1", match: func(err error) bool { return errors.As(err, &reqErr) }, saying: "without a reason"},
		{name: "node not managed on it", who: agentOf("h2"), node: "h2", ok: true, match: func(err error) bool { return errors.Is(err, reserve.ErrNotFound) }, saying: "node h2 is not a managed node"},
		{name: "agent of another node", who: agentOf("h2"), node: "h1", ok: true, match: func(err error) bool { return errors.As(err, &polErr) }, saying: "bound to node h2"},
		{name: "unbound agent", who: controller.Actor{Name: "enrol", Role: reserve.RoleAgent}, node: "h1", ok: true, match: func(err error) bool { return errors.As(err, &polErr) }, saying: "bound to no node"},
		{name: "a user", who: alice, node: "h1", ok: true, match: func(err error) bool { return errors.As(err, &polErr) }, saying: "only agents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.get(r.ID)
			_, err := h.c.Report(h.ctx, tc.who, r.ID, tc.node, tc.ok, tc.why)
			if err == nil || !tc.match(err) || !strings.Contains(err.Error(), tc.saying) {
				t.Fatalf("got %v, want an error saying %q", err, tc.saying)
			}
			if after := h.get(r.ID); after.Version != before.Version {
				t.Fatalf("a refused report changed it: %s", history(after))
			}
		})
	}
}

// TestLeaseLapseDegradesAndHeartbeatRecovers pins the agent judgements
// under the clock: when an agent's lease lapses, every live reservation
// counting on its node is flagged degraded, naming the gone agents, and
// keeps its state; the node is no longer managed, so new reservations do
// not wait for it; a heartbeat from a gone agent recovers what it
// degraded, unless another of its agents is still gone.
func TestLeaseLapseDegradesAndHeartbeatRecovers(t *testing.T) {
	h := newHarness(t, oneLink)
	const lease = 10 * time.Second
	h.heartbeat("h1", lease)
	h.heartbeat("h2", lease)
	r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 100 * mbit, Duration: time.Hour})
	if !slices.Equal(r.ManagedNodes, []string{"h1", "h2"}) {
		t.Fatalf("managed nodes %v, want [h1 h2]", r.ManagedNodes)
	}
	for _, n := range r.ManagedNodes {
		if _, err := h.c.Report(h.ctx, agentOf(n), r.ID, n, true, ""); err != nil {
			t.Fatal(err)
		}
	}
	h.wantState(r.ID, reserve.StateActive)
	degraded := func(want string) {
		t.Helper()
		got := h.wantState(r.ID, reserve.StateActive)
		switch {
		case want == "" && got.Degraded:
			t.Fatalf("degraded (%q), want not", got.DegradedReason)
		case want != "" && (!got.Degraded || !strings.HasPrefix(got.DegradedReason, want)):
			t.Fatalf("degraded %v (%q), want degraded saying %q", got.Degraded, got.DegradedReason, want)
		}
	}

	// Just before the lease ends, nothing is judged.
	h.at(t0.Add(lease - time.Millisecond))
	degraded("")
	// h2 renews; h1 does not.
	h.heartbeat("h2", time.Minute)
	h.at(t0.Add(lease))
	degraded("the agent of h1 is gone")
	if h.c.Managed("h1") || !h.c.Managed("h2") {
		t.Fatalf("managed h1 %v h2 %v, want false true", h.c.Managed("h1"), h.c.Managed("h2"))
	}
	if !h.audited("agent gone h1") {
		t.Fatal("no audit entry for the gone agent")
	}
	agents := h.c.Agents()
	if len(agents) != 2 || agents[0].Node != "h1" || agents[0].Alive || !agents[1].Alive {
		t.Fatalf("agents %+v, want h1 gone and h2 alive", agents)
	}
	// A reservation made now does not wait for the gone agent.
	if n := h.create(controller.CreateInput{From: "h2", To: "h1", Bandwidth: 100 * mbit, Duration: time.Hour}); !slices.Equal(n.ManagedNodes, []string{"h2"}) {
		t.Fatalf("managed nodes of a new reservation %v, want [h2]", n.ManagedNodes)
	}

	// Both gone: the reason names both.
	h.at(t0.Add(time.Minute + lease))
	degraded("the agent of h1 and h2 is gone")
	// One back: still degraded, for the other alone.
	w := h.heartbeat("h1", controller.MaxLease)
	degraded("the agent of h2 is gone")
	if !slices.ContainsFunc(w.Reservations, func(x reserve.Reservation) bool { return x.ID == r.ID }) || w.TopologySHA256 == "" {
		t.Fatalf("h1's work does not list %s or lacks the topology's hash: %+v", r.ID, w)
	}
	// Both back: recovered, still ACTIVE, and the history says so.
	h.heartbeat("h2", controller.MaxLease)
	degraded("")
	got := h.get(r.ID)
	if last := got.History[len(got.History)-1]; !strings.HasPrefix(last.Why, "recovered from: the agent of h2 is gone") {
		t.Fatalf("last transition %q, want a recovery", last.Why)
	}
	if !h.audited("agent up h1") {
		t.Fatal("no audit entry for the agent back")
	}
}

// TestHeartbeatRefusals pins the heartbeats the controller turns away: a
// lease out of bounds, a node the topology lacks, an agent speaking for
// another node, and a user who is no agent.
func TestHeartbeatRefusals(t *testing.T) {
	h := newHarness(t, oneLink)
	var reqErr *reserve.RequestError
	var polErr *reserve.PolicyError
	for _, tc := range []struct {
		name   string
		who    controller.Actor
		node   string
		lease  time.Duration
		target any
		saying string
	}{
		{name: "lease too short", who: agentOf("h1"), node: "h1", lease: 500 * time.Millisecond, target: &reqErr, saying: "lease 500ms"},
		{name: "lease too long", who: agentOf("h1"), node: "h1", lease: controller.MaxLease + time.Second, target: &reqErr, saying: "want 1s to 5m0s"},
		{name: "unknown node", who: agentOf("h9"), node: "h9", target: &reqErr, saying: "h9"},
		{name: "agent of another node", who: agentOf("h2"), node: "h1", target: &polErr, saying: "bound to node h2"},
		{name: "a user", who: alice, node: "h1", target: &polErr, saying: "only agents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.c.Heartbeat(h.ctx, tc.who, tc.node, tc.lease)
			if err == nil || !errors.As(err, tc.target) || !strings.Contains(err.Error(), tc.saying) {
				t.Fatalf("got %v (%T), want %T saying %q", err, err, tc.target, tc.saying)
			}
		})
	}
	if agents := h.c.Agents(); len(agents) != 0 {
		t.Fatalf("refused heartbeats registered agents: %+v", agents)
	}
}

// TestJudgementWithATimedEventDue pins that an agent judgement is not lost
// when it meets a reservation with a timed event due at the same instant
// (its start passed, not yet applied): a lease that lapses then leaves it
// ACTIVE and degraded, and an agent back then leaves it ACTIVE and
// recovered, however many ticks follow.
func TestJudgementWithATimedEventDue(t *testing.T) {
	const lease = 10 * time.Second
	for _, tc := range []struct {
		name string
		// judge moves the clock past the start and has the judgement made.
		judge        func(h *harness)
		wantDegraded bool
	}{{
		name:         "lease lapses as the start falls due",
		judge:        func(h *harness) { h.at(t0.Add(2 * time.Minute)) },
		wantDegraded: true,
	}, {
		name: "agent back as the start falls due",
		judge: func(h *harness) {
			h.at(t0.Add(lease)) // lapsed before the start: degraded, RESERVED
			h.clk.Set(t0.Add(2 * time.Minute))
			h.heartbeat("h1", controller.MaxLease)
		},
		wantDegraded: false,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, oneLink)
			h.heartbeat("h1", lease)
			r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 100 * mbit, Start: t0.Add(time.Minute), Duration: time.Hour})
			if _, err := h.c.Report(h.ctx, agentOf("h1"), r.ID, "h1", true, ""); err != nil {
				t.Fatal(err)
			}
			tc.judge(h)
			for range 3 {
				h.c.Tick(h.ctx)
			}
			got := h.wantState(r.ID, reserve.StateActive)
			if got.Degraded != tc.wantDegraded {
				t.Fatalf("degraded %v (%q), want %v\nhistory: %s", got.Degraded, got.DegradedReason, tc.wantDegraded, history(got))
			}
		})
	}
}
