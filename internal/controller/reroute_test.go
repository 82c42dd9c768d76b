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

// other returns the link of twoLinks that is not l.
func other(l string) string {
	if l == "p" {
		return "q"
	}
	return "p"
}

// TestLinkDownReroutes pins what a link reported down does to the live
// reservations crossing it: each moves to another path when one has the
// bandwidth over its window (a modification, its state kept, recorded in
// its history), or, when none has, stays where it is, flagged degraded
// with why; reservations not on the link are untouched; new reservations
// avoid the link while it is down; the link's return recovers what it
// degraded and brings what it moved back to the preferred path.
func TestLinkDownReroutes(t *testing.T) {
	for _, tc := range []struct {
		name string
		topo string
		// rate is the bandwidth of the reservation on the failing link,
		// start when it begins (after t0); filler, when not zero, is the
		// bandwidth another reservation books over the same window first,
		// on the other link when there is one.
		rate, filler uint64
		start        time.Duration
		moved        bool
	}{
		{name: "active, the other path has room", topo: twoLinks, rate: 500 * mbit, moved: true},
		{name: "future, the other path has room", topo: twoLinks, rate: 500 * mbit, start: time.Hour, moved: true},
		{name: "the other path is full", topo: twoLinks, rate: 500 * mbit, filler: 600 * mbit, moved: false},
		{name: "no other path", topo: oneLink, rate: 500 * mbit, moved: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.topo)
			window := controller.CreateInput{From: "h1", To: "h2", Start: t0.Add(tc.start), Duration: 2 * time.Hour}
			var filler reserve.Reservation
			if tc.filler != 0 {
				in := window
				in.Bandwidth = tc.filler
				filler = h.create(in)
			}
			in := window
			in.Bandwidth = tc.rate
			r := h.create(in)
			h.at(t0)
			r = h.get(r.ID)
			if tc.filler != 0 {
				filler = h.get(filler.ID)
			}
			dead := r.Path[0].Link
			if tc.filler != 0 && filler.Path[0].Link == dead {
				t.Fatalf("filler and reservation share link %s: the test's bookings are wrong", dead)
			}

			moved, err := h.c.LinkDown(h.ctx, agentOf("h1"), "h1", dead, "carrier lost")
			if err != nil {
				t.Fatal(err)
			}
			if len(moved) != 1 || moved[0].ID != r.ID {
				t.Fatalf("LinkDown acted on %d reservations, want %s alone", len(moved), r.ID)
			}
			got := h.wantState(r.ID, r.State)
			last := got.History[len(got.History)-1]
			if tc.moved {
				if want := []string{other(dead)}; !slices.Equal(links(got.Path), want) || got.Degraded {
					t.Fatalf("after %s went down: path %v degraded %v, want path %v, not degraded", dead, links(got.Path), got.Degraded, want)
				}
				if last.Event != reserve.EventModify || !strings.Contains(last.Why, "moved off: link "+dead+" down at h1") || !strings.Contains(last.Why, "carrier lost") {
					t.Fatalf("last transition %s %q, want a modification saying it moved off %s", last.Event, last.Why, dead)
				}
			} else {
				if !slices.Equal(got.Path, r.Path) || !got.Degraded || !strings.Contains(got.DegradedReason, "no other path has the bandwidth") {
					t.Fatalf("after %s went down: path %v degraded %v (%q), want it kept and degraded", dead, links(got.Path), got.Degraded, got.DegradedReason)
				}
			}
			if tc.filler != 0 {
				if f := h.get(filler.ID); f.Version != filler.Version {
					t.Fatalf("the reservation on the live link changed: %s", history(f))
				}
			}
			if !h.audited("link down " + dead) {
				t.Fatal("no audit entry for the link down")
			}

			// While it is down, new bookings avoid it, or are refused
			// when only it would do.
			probe := controller.CreateInput{From: "h2", To: "h1", Bandwidth: 10 * mbit, Duration: time.Minute}
			n, err := h.c.Create(h.ctx, alice, probe)
			if tc.topo == oneLink {
				wantErr(t, err, reserve.ErrCapacity, "no path carries")
			} else if err != nil || slices.Contains(links(n.Reservation.Path), dead) {
				t.Fatalf("a new booking while %s is down: %v, path %v", dead, err, links(n.Reservation.Path))
			}

			// The link returns: a degraded reservation recovers, a moved
			// one goes back to the path it left, the preferred one (the
			// probe booked the other path).
			if err := h.c.LinkUp(h.ctx, agentOf("h2"), "h2", dead); err != nil {
				t.Fatal(err)
			}
			after := h.get(r.ID)
			if after.Degraded || !slices.Equal(after.Path, r.Path) {
				t.Fatalf("after the link returned: path %v degraded %v (%q), want path %v, not degraded", links(after.Path), after.Degraded, after.DegradedReason, links(r.Path))
			}
			if why := after.History[len(after.History)-1].Why; !tc.moved && !strings.HasPrefix(why, "recovered from: link "+dead+" down") ||
				tc.moved && !strings.HasSuffix(why, "(moved back: link "+dead+" up again)") {
				t.Fatalf("last transition %q, want a recovery from the link down, or a move back", why)
			}
			if _, err := h.c.Create(h.ctx, alice, probe); err != nil {
				t.Fatalf("a new booking after the link returned: %v", err)
			}
		})
	}
}

// TestLinkDownReprovisions pins that a move to another path asks the
// managed nodes to provision again (their classes are on the old path)
// while an ACTIVE reservation stays ACTIVE: it is reported again, not
// restarted.
func TestLinkDownReprovisions(t *testing.T) {
	h := newHarness(t, twoLinks)
	h.heartbeat("h1", controller.MaxLease)
	r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Duration: time.Hour})
	if _, err := h.c.Report(h.ctx, agentOf("h1"), r.ID, "h1", true, ""); err != nil {
		t.Fatal(err)
	}
	r = h.wantState(r.ID, reserve.StateActive)
	if _, err := h.c.LinkDown(h.ctx, agentOf("h1"), "h1", r.Path[0].Link, ""); err != nil {
		t.Fatal(err)
	}
	got := h.wantState(r.ID, reserve.StateActive)
	if slices.Equal(got.Path, r.Path) || !slices.Equal(got.ManagedNodes, []string{"h1"}) || !slices.Equal(got.Pending(), []string{"h1"}) {
		t.Fatalf("after the move: path %v managed %v pending %v, want a new path with h1 managed and pending", links(got.Path), got.ManagedNodes, got.Pending())
	}
	if _, err := h.c.Report(h.ctx, agentOf("h1"), r.ID, "h1", true, ""); err != nil {
		t.Fatal(err)
	}
	if got := h.wantState(r.ID, reserve.StateActive); len(got.Pending()) != 0 {
		t.Fatalf("pending %v after the report on the new path", got.Pending())
	}
}

// TestLinkReportRefusals pins the link reports the controller turns away:
// an unknown link, an agent speaking for another node, a link that does
// not end at the reporting node, and a user who is no agent.
func TestLinkReportRefusals(t *testing.T) {
	const chain = `
sites: [{name: s1}]
nodes:
  - {name: a, site: s1}
  - {name: b, site: s1, role: router}
  - {name: c, site: s1}
links:
  - {name: ab, ends: [a, b], rate: 1G}
  - {name: bc, ends: [b, c], rate: 1G}
`
	h := newHarness(t, chain)
	var polErr *reserve.PolicyError
	for _, tc := range []struct {
		name     string
		who      controller.Actor
		node     string
		link     string
		notFound bool
		saying   string
	}{
		{name: "unknown link", who: agentOf("a"), node: "a", link: "zz", notFound: true, saying: `link "zz"`},
		{name: "agent of another node", who: agentOf("b"), node: "a", link: "ab", saying: "bound to node b"},
		{name: "link not ending at the node", who: agentOf("a"), node: "a", link: "bc", saying: "node a does not end it"},
		{name: "a user", who: alice, node: "a", link: "ab", saying: "only agents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				ok := errors.As(err, &polErr)
				if tc.notFound {
					ok = errors.Is(err, reserve.ErrNotFound)
				}
				if err == nil || !ok || !strings.Contains(err.Error(), tc.saying) {
					t.Fatalf("%s: got %v, want an error saying %q", op, err, tc.saying)
				}
			}
			_, err := h.c.LinkDown(h.ctx, tc.who, tc.node, tc.link, "")
			check("link down", err)
			check("link up", h.c.LinkUp(h.ctx, tc.who, tc.node, tc.link))
		})
	}
	// None of them took a link down: a path over both links is booked.
	h.create(controller.CreateInput{From: "a", To: "c", Bandwidth: 100 * mbit, Duration: time.Minute})
}

// TestLinkReportByProber: an agent on the path of a live reservation
// reports a link of that path it does not end (its probes found the path a
// blackhole): the reservation, with no other path, is degraded for the
// link, and the same agent's report of the link back recovers it. Off the
// path, the same report is refused.
func TestLinkReportByProber(t *testing.T) {
	const chain = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: a, site: s1}
  - {name: b, site: s1, role: router}
  - {name: c, site: s2}
  - {name: d, site: s2}
links:
  - {name: ab, ends: [a, b], rate: 1G}
  - {name: bc, ends: [b, c], rate: 1G}
  - {name: bd, ends: [b, d], rate: 1G}
`
	h := newHarness(t, chain)
	r := h.create(controller.CreateInput{From: "a", To: "c", Bandwidth: 100 * mbit, Duration: time.Hour})
	h.at(t0)
	const why = "blackhole: 5 probes lost on path ab,bc (reservation R, a to c)"
	if _, err := h.c.LinkDown(h.ctx, agentOf("d"), "d", "bc", why); err == nil || !strings.Contains(err.Error(), "node d does not end it") {
		t.Fatalf("d, off the path, reports bc down: %v", err)
	}
	moved, err := h.c.LinkDown(h.ctx, agentOf("a"), "a", "bc", why)
	if err != nil {
		t.Fatal(err)
	}
	if len(moved) != 1 || !moved[0].Degraded || !strings.Contains(moved[0].DegradedReason, "link bc down at a") || !strings.Contains(moved[0].DegradedReason, why) {
		t.Fatalf("after a's report: %+v, want r degraded for bc with the probes' reason", moved)
	}
	if err := h.c.LinkUp(h.ctx, agentOf("a"), "a", "bc"); err != nil {
		t.Fatal(err)
	}
	if got := h.get(r.ID); got.Degraded {
		t.Fatalf("after a's report of bc back: still degraded %q", got.DegradedReason)
	}
}

// TestRerouteAround pins the alerting rule's reroute: reservations in
// their window on the named links move to another path with room; one
// that no other path can carry stays where it is and is not degraded (a
// rule's judgement is weaker than a dead link's); reservations not yet in
// their window are left alone.
func TestRerouteAround(t *testing.T) {
	h := newHarness(t, twoLinks)
	a := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Duration: time.Hour})
	b := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 600 * mbit, Duration: time.Hour})
	future := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 100 * mbit, Start: t0.Add(2 * time.Hour), Duration: time.Hour})
	h.at(t0)
	if a.Path[0].Link == b.Path[0].Link {
		t.Fatalf("a and b share link %s: 1.1 Gbit/s on 900 Mbit/s", a.Path[0].Link)
	}
	// Rerouting around b's link: b (600) cannot fit beside a (500) on
	// the other; nothing else is on it in its window.
	hot := b.Path[0].Link
	out, err := h.c.RerouteAround(h.ctx, "hot-link", []string{hot}, "", "loss above 1%")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].ID != b.ID || out[0].Moved || !strings.Contains(out[0].Reason, "no other path has the bandwidth") {
		t.Fatalf("reroute around %s: %+v, want b left in place for want of bandwidth", hot, out)
	}
	if got := h.get(b.ID); got.Degraded || !slices.Equal(got.Path, b.Path) {
		t.Fatalf("b after a reroute that could not move it: path %v degraded %v", links(got.Path), got.Degraded)
	}
	// Around a's link: a (500) fits beside b (600)? No: 1.1G > 900M. Cancel
	// b first, then a moves; the future reservation, not yet in its
	// window, stays.
	if _, err := h.c.Cancel(h.ctx, alice, b.ID, 0, ""); err != nil {
		t.Fatal(err)
	}
	hot = a.Path[0].Link
	out, err = h.c.RerouteAround(h.ctx, "hot-link", []string{hot}, "", "loss above 1%")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].ID != a.ID || !out[0].Moved || !slices.Equal(links(out[0].Path), []string{other(hot)}) {
		t.Fatalf("reroute around %s: %+v, want a moved to %s", hot, out, other(hot))
	}
	got := h.wantState(a.ID, reserve.StateActive)
	if !slices.Equal(links(got.Path), []string{other(hot)}) || !strings.Contains(got.History[len(got.History)-1].Why, "rerouted by rule hot-link: loss above 1%") {
		t.Fatalf("a after the reroute: path %v, last transition %q", links(got.Path), got.History[len(got.History)-1].Why)
	}
	if f := h.get(future.ID); f.Version != future.Version {
		t.Fatalf("the future reservation was touched: %s", history(f))
	}
}

// TestAgentBackKeepsLinkDegradation pins that the two judgements of a
// reservation do not undo each other: one degraded because its link is
// down with no room elsewhere, whose agent then lapses (the agent's reason
// replaces the link's) and comes back while the link is still down, is
// degraded for the link again, or, if another path has room by then,
// moved there and recovered; the link's return recovers it. (Before the
// fix the heartbeat recovered it outright, its link still down.)
func TestAgentBackKeepsLinkDegradation(t *testing.T) {
	for _, tc := range []struct {
		name string
		// freeRoom cancels the filler while the agent is gone, so the
		// other path has room when it comes back.
		freeRoom bool
	}{
		{name: "still no room: degraded for the link"},
		{name: "room freed meanwhile: moved and recovered", freeRoom: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, twoLinks)
			const lease = 10 * time.Second
			h.heartbeat("h1", lease)
			filler := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 600 * mbit, Duration: time.Hour})
			r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Duration: time.Hour})
			for _, x := range []reserve.Reservation{filler, r} {
				if _, err := h.c.Report(h.ctx, agentOf("h1"), x.ID, "h1", true, ""); err != nil {
					t.Fatal(err)
				}
			}
			dead := r.Path[0].Link
			if _, err := h.c.LinkDown(h.ctx, agentOf("h1"), "h1", dead, "carrier lost"); err != nil {
				t.Fatal(err)
			}
			want := func(saying string, path []string) {
				t.Helper()
				got := h.wantState(r.ID, reserve.StateActive)
				if saying == "" && got.Degraded || saying != "" && (!got.Degraded || !strings.Contains(got.DegradedReason, saying)) || !slices.Equal(links(got.Path), path) {
					t.Fatalf("degraded %v (%q) on %v, want %q on %v\nhistory: %s", got.Degraded, got.DegradedReason, links(got.Path), saying, path, history(got))
				}
			}
			want("link "+dead+" down at h1", []string{dead})
			h.at(t0.Add(lease)) // the agent's lease lapses
			want("the agent of h1 is gone", []string{dead})
			if tc.freeRoom {
				if _, err := h.c.Cancel(h.ctx, alice, filler.ID, 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			h.heartbeat("h1", lease) // back, the link still down
			if tc.freeRoom {
				want("", []string{other(dead)})
			} else {
				want("link "+dead+" down at h1", []string{dead})
			}
			if err := h.c.LinkUp(h.ctx, agentOf("h1"), "h1", dead); err != nil {
				t.Fatal(err)
			}
			if tc.freeRoom {
				want("", []string{other(dead)})
			} else {
				want("", []string{dead})
			}
		})
	}
}

// TestLinkEventsWithATimedEventDue pins that a link event or a rule's
// reroute meeting a reservation whose start has passed but not yet been
// applied by the clock acts on it all the same (the start applied first):
// it is not left on a dead link, degraded after its link returned, or
// reported as a failed reroute.
func TestLinkEventsWithATimedEventDue(t *testing.T) {
	for _, tc := range []struct {
		name string
		topo string
		// before acts before the start; act after it, before any tick.
		before, act  func(h *harness, r reserve.Reservation) error
		moved        bool
		wantDegraded bool
	}{{
		name: "link down moves it",
		topo: twoLinks,
		act: func(h *harness, r reserve.Reservation) error {
			_, err := h.c.LinkDown(h.ctx, agentOf("h1"), "h1", r.Path[0].Link, "")
			return err
		},
		moved: true,
	}, {
		name: "link down degrades it",
		topo: oneLink,
		act: func(h *harness, r reserve.Reservation) error {
			_, err := h.c.LinkDown(h.ctx, agentOf("h1"), "h1", "l", "")
			return err
		},
		wantDegraded: true,
	}, {
		name: "link up recovers it",
		topo: oneLink,
		before: func(h *harness, r reserve.Reservation) error {
			_, err := h.c.LinkDown(h.ctx, agentOf("h1"), "h1", "l", "")
			return err
		},
		act: func(h *harness, r reserve.Reservation) error { return h.c.LinkUp(h.ctx, agentOf("h1"), "h1", "l") },
	}, {
		name: "a rule reroutes it",
		topo: twoLinks,
		act: func(h *harness, r reserve.Reservation) error {
			out, err := h.c.RerouteAround(h.ctx, "hot-link", []string{r.Path[0].Link}, "", "loss")
			if err == nil && (len(out) != 1 || !out[0].Moved) {
				h.t.Fatalf("reroute: %+v, want it moved", out)
			}
			return err
		},
		moved: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.topo)
			r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Start: t0.Add(time.Minute), Duration: time.Hour})
			if tc.before != nil {
				if err := tc.before(h, r); err != nil {
					t.Fatal(err)
				}
			}
			h.clk.Set(t0.Add(2 * time.Minute))
			if err := tc.act(h, r); err != nil {
				t.Fatal(err)
			}
			got := h.wantState(r.ID, reserve.StateActive)
			if got.Degraded != tc.wantDegraded || slices.Equal(got.Path, r.Path) == tc.moved {
				t.Fatalf("path %v degraded %v (%q), want moved %v degraded %v\nhistory: %s", links(got.Path), got.Degraded, got.DegradedReason, tc.moved, tc.wantDegraded, history(got))
			}
		})
	}
}

// TestLinkUpRecoversOnlyWhatIsBack pins LinkUp's recovery: a reservation
// degraded for a link recovers when that link returns, also when the
// controller restarted since the link went down (agents report a link
// only when it changes, so the new controller hears only the "up"); one
// whose path crosses another link still down stays degraded for that one.
func TestLinkUpRecoversOnlyWhatIsBack(t *testing.T) {
	// a - r - b: a path of two links and no other.
	const chain = `
sites: [{name: s1}]
nodes:
  - {name: a, site: s1}
  - {name: r, site: s1, role: router}
  - {name: b, site: s1}
links:
  - {name: ar, ends: [a, r], rate: 1G}
  - {name: rb, ends: [r, b], rate: 1G}
`
	for _, tc := range []struct {
		name    string
		down    []string // links reported down, in order
		restart bool     // the controller restarts before the link up
		up      string
		want    string // the degraded reason after the up; "": recovered
	}{
		{name: "its link back", down: []string{"ar"}, up: "ar"},
		{name: "its link back after a restart", down: []string{"ar"}, restart: true, up: "ar"},
		{name: "another of its links still down", down: []string{"ar", "rb"}, up: "ar", want: "link rb down at r"},
		{name: "the other link back first", down: []string{"ar", "rb"}, up: "rb", want: "link ar down at a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, chain)
			res := h.create(controller.CreateInput{From: "a", To: "b", Bandwidth: 100 * mbit, Duration: time.Hour})
			h.at(t0)
			at := map[string]string{"ar": "a", "rb": "r"} // the end each link is reported from
			for _, l := range tc.down {
				if _, err := h.c.LinkDown(h.ctx, agentOf(at[l]), at[l], l, ""); err != nil {
					t.Fatal(err)
				}
			}
			if got := h.get(res.ID); !got.Degraded {
				t.Fatal("not degraded with its only path down")
			}
			if tc.restart {
				h.restart()
			}
			if err := h.c.LinkUp(h.ctx, agentOf(at[tc.up]), at[tc.up], tc.up); err != nil {
				t.Fatal(err)
			}
			got := h.wantState(res.ID, reserve.StateActive)
			if tc.want == "" && got.Degraded || tc.want != "" && (!got.Degraded || !strings.Contains(got.DegradedReason, tc.want) || strings.Contains(got.DegradedReason, "link "+tc.up+" down")) {
				t.Fatalf("after %s came back: degraded %v (%q), want %q\nhistory: %s", tc.up, got.Degraded, got.DegradedReason, tc.want, history(got))
			}
		})
	}
}

// TestLinkDownWithFlowSpec pins a move of a reservation that steers flows:
// on the new path it needs a DSCP value free on every node there, so with
// one to spare it moves under a new value, and with none (the only value
// is used by a reservation on a node of the new path) it stays, degraded,
// saying so.
func TestLinkDownWithFlowSpec(t *testing.T) {
	// h1 - h2 directly over p, or through router c; d - c - e is another
	// path through c that does not touch h1 or h2.
	const topo = `
sites: [{name: s1}, {name: s2}, {name: s3}]
nodes:
  - {name: h1, site: s1}
  - {name: h2, site: s2}
  - {name: c, site: s3, role: router}
  - {name: d, site: s3}
  - {name: e, site: s3}
links:
  - {name: p, ends: [h1, h2], rate: 1G}
  - {name: h1c, ends: [h1, c], rate: 1G}
  - {name: ch2, ends: [c, h2], rate: 1G}
  - {name: cd, ends: [c, d], rate: 1G}
  - {name: ce, ends: [c, e], rate: 1G}
`
	for _, tc := range []struct {
		name  string
		pool  []uint8
		moved bool
	}{
		{name: "a value to spare", pool: []uint8{10, 12}, moved: true},
		{name: "no value to spare", pool: []uint8{10}, moved: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := reserve.NewDSCPPool(tc.pool...)
			if err != nil {
				t.Fatal(err)
			}
			h := newHarnessConfig(t, topo, func(c *controller.Config) { c.DSCPPool = pool })
			addr := func(n string) string { return h.c.Topology().Addrs[n][0].Addr().String() }
			flow := func(from, to string) string { return "tcp " + addr(from) + " > " + addr(to) + ":7070" }
			a := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 100 * mbit, Path: []string{"p"}, Duration: time.Hour, FlowSpec: flow("h1", "h2")})
			b := h.create(controller.CreateInput{From: "d", To: "e", Bandwidth: 100 * mbit, Duration: time.Hour, FlowSpec: flow("d", "e")})
			if a.DSCP != 10 || b.DSCP != 10 {
				t.Fatalf("DSCP %d and %d, want 10 for both: they share no node", a.DSCP, b.DSCP)
			}
			if _, err := h.c.LinkDown(h.ctx, agentOf("h1"), "h1", "p", ""); err != nil {
				t.Fatal(err)
			}
			got := h.get(a.ID)
			if tc.moved {
				if !slices.Equal(links(got.Path), []string{"h1c", "ch2"}) || got.DSCP != 12 || got.Degraded {
					t.Fatalf("path %v DSCP %d degraded %v (%q), want moved through c under DSCP 12", links(got.Path), got.DSCP, got.Degraded, got.DegradedReason)
				}
			} else if !slices.Equal(links(got.Path), []string{"p"}) || got.DSCP != 10 || !got.Degraded || !strings.Contains(got.DegradedReason, "DSCP") {
				t.Fatalf("path %v DSCP %d degraded %v (%q), want it kept, degraded for want of a DSCP value", links(got.Path), got.DSCP, got.Degraded, got.DegradedReason)
			}
			if nb := h.get(b.ID); nb.Version != b.Version {
				t.Fatalf("the reservation through c changed: %s", history(nb))
			}
		})
	}
}

// TestLinksDownSurviveRestart pins that the links agents found down are
// part of the stored state: a controller restarted (or a standby taking
// over) still routes new bookings around a dead link, which no agent will
// report again until it changes, and its return is still heard.
func TestLinksDownSurviveRestart(t *testing.T) {
	h := newHarness(t, twoLinks)
	h.at(t0)
	if _, err := h.c.LinkDown(h.ctx, agentOf("h1"), "h1", "p", "carrier lost"); err != nil {
		t.Fatal(err)
	}
	h.restart()
	probe := controller.CreateInput{From: "h1", To: "h2", Bandwidth: 10 * mbit, Duration: time.Minute}
	for range 3 {
		n, err := h.c.Create(h.ctx, alice, probe)
		if err != nil || slices.Contains(links(n.Reservation.Path), "p") {
			t.Fatalf("a booking after the restart, link p down: %v, path %v", err, links(n.Reservation.Path))
		}
	}
	if err := h.c.LinkUp(h.ctx, agentOf("h2"), "h2", "p"); err != nil {
		t.Fatal(err)
	}
	h.restart()
	booked := map[string]bool{}
	for range 20 {
		n, err := h.c.Create(h.ctx, alice, probe)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(n.Reservation.Path) {
			booked[l] = true
		}
	}
	if !booked["p"] {
		t.Fatalf("after p came back and a restart, no booking took it: %v", booked)
	}
}
