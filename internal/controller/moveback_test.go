package controller_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
)

// circuitAndWan is two hosts joined by a dedicated circuit, named so that
// it sorts after the routed wan: the preference, not the names, puts
// reservations on it. Each carries 900 Mbit/s reservable.
const circuitAndWan = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: h1, site: s1}
  - {name: h2, site: s2}
links:
  - {name: wan, ends: [h1, h2], rate: 1G, delay: 5ms, role: routed}
  - {name: zcircuit, ends: [h1, h2], rate: 1G, delay: 5ms, role: dedicated}
  - {name: zspare, ends: [h1, h2], rate: 1G, delay: 5ms, role: routed}
`

// TestLinkUpMovesBack pins what a link's return does to the reservations
// its fault moved off: each goes back to the preferred path (dedicated
// first: the circuit) when it has room at the reservation's rate over its
// window, also after a restart; one whose preferred path was booked
// meanwhile stays where it went, and one moved since by its owner stays
// where the owner put it. Nothing fails either way.
func TestLinkUpMovesBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		// meanwhile runs while the circuit is down, r on wan.
		meanwhile func(h *harness, r reserve.Reservation)
		restart   bool
		want      string // the link r is on after the circuit returns
		why       string // its last transition's reason ends so
	}{
		{name: "back on the circuit", want: "zcircuit", why: "(moved back: link zcircuit up again)"},
		{name: "back after a restart", restart: true, want: "zcircuit", why: "(moved back: link zcircuit up again)"},
		{name: "the circuit booked meanwhile", want: "wan", why: "moved off: link zcircuit down at h1 since 2031-05-04T10:00:00Z (carrier lost))",
			meanwhile: func(h *harness, r reserve.Reservation) {
				if _, err := h.c.Create(h.ctx, alice, controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Duration: time.Hour, Path: []string{"zcircuit"}}); err != nil {
					h.t.Fatal(err)
				}
			}},
		{name: "moved by its owner meanwhile", want: "zspare", why: "path wan → zspare",
			meanwhile: func(h *harness, r reserve.Reservation) {
				if _, err := h.c.Modify(h.ctx, alice, r.ID, controller.ModifyInput{Version: r.Version, Path: []string{"zspare"}}); err != nil {
					h.t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, circuitAndWan)
			r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Duration: time.Hour})
			h.at(t0)
			if got := links(h.get(r.ID).Path); !slices.Equal(got, []string{"zcircuit"}) {
				t.Fatalf("booked on %v, want the circuit", got)
			}
			if _, err := h.c.LinkDown(h.ctx, agentOf("h1"), "h1", "zcircuit", "carrier lost"); err != nil {
				t.Fatal(err)
			}
			moved := h.wantState(r.ID, reserve.StateActive)
			if !slices.Equal(links(moved.Path), []string{"wan"}) || moved.Degraded {
				t.Fatalf("after the circuit went down: on %v, degraded %v", links(moved.Path), moved.Degraded)
			}
			if tc.meanwhile != nil {
				tc.meanwhile(h, moved)
			}
			if tc.restart {
				h.restart()
			}
			h.clk.Add(10 * time.Minute)
			if err := h.c.LinkUp(h.ctx, agentOf("h2"), "h2", "zcircuit"); err != nil {
				t.Fatal(err)
			}
			got := h.wantState(r.ID, reserve.StateActive)
			last := got.History[len(got.History)-1]
			if !slices.Equal(links(got.Path), []string{tc.want}) || got.Degraded || !strings.Contains(last.Why, tc.why) {
				t.Fatalf("after the circuit returned: on %v, degraded %v, last %q; want on %s, %q\nhistory: %s", links(got.Path), got.Degraded, last.Why, tc.want, tc.why, history(got))
			}
			// Nothing more moves at a later return: the move is done.
			if _, err := h.c.LinkDown(h.ctx, agentOf("h1"), "h1", "zspare", ""); err != nil {
				t.Fatal(err)
			}
			if err := h.c.LinkUp(h.ctx, agentOf("h1"), "h1", "zspare"); err != nil {
				t.Fatal(err)
			}
			again := h.get(r.ID)
			if want := got.Path; tc.want != "zspare" && !slices.Equal(again.Path, want) {
				t.Fatalf("after another link went and came back: on %v, want %v\nhistory: %s", links(again.Path), links(want), history(again))
			}
		})
	}
}

// TestLinkUpMovesBackOnlyWhenItsPathIsUp pins that a reservation moved
// off two links in turn goes back only when the path it first left has no
// link down: the return of the second link alone leaves it where it is.
func TestLinkUpMovesBackOnlyWhenItsPathIsUp(t *testing.T) {
	h := newHarness(t, circuitAndWan)
	r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Duration: time.Hour})
	h.at(t0)
	for _, l := range []string{"zcircuit", "wan"} {
		if _, err := h.c.LinkDown(h.ctx, agentOf("h1"), "h1", l, ""); err != nil {
			t.Fatal(err)
		}
	}
	if got := links(h.get(r.ID).Path); !slices.Equal(got, []string{"zspare"}) {
		t.Fatalf("after the circuit and wan went down: on %v, want zspare", got)
	}
	if err := h.c.LinkUp(h.ctx, agentOf("h1"), "h1", "wan"); err != nil {
		t.Fatal(err)
	}
	if got := links(h.get(r.ID).Path); !slices.Equal(got, []string{"zspare"}) {
		t.Fatalf("after wan returned, the circuit still down: on %v, want zspare", got)
	}
	if err := h.c.LinkUp(h.ctx, agentOf("h1"), "h1", "zcircuit"); err != nil {
		t.Fatal(err)
	}
	if got := h.get(r.ID); !slices.Equal(links(got.Path), []string{"zcircuit"}) {
		t.Fatalf("after the circuit returned: on %v, want zcircuit\nhistory: %s", links(got.Path), history(got))
	}
}
