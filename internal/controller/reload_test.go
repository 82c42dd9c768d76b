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

// threeLinks is twoLinks with a third parallel link, r, that nothing in
// these tests books.
const threeLinks = twoLinks + "  - {name: r, ends: [h1, h2], rate: 1G, delay: 5ms}\n"

// TestReloadTopology pins topology reloads: one that would strand a live
// reservation (a link of its path gone, a node gone, the capacity it
// holds gone) or an exclusive hold (a node gone) is refused with a
// StrandError naming each, matching reserve.ErrConflict, and changes
// nothing, not even after a restart; one that strands nothing is applied,
// stored (a restart keeps it), and the reservations carry on.
func TestReloadTopology(t *testing.T) {
	// Every case starts with 500 Mbit/s booked on link p (q and r are
	// free) and an exclusive hold on h2 from three hours on.
	for _, tc := range []struct {
		name     string
		topo     string   // the new topology
		stranded []string // fragments the error names; none: applied
	}{{
		name:     "the used link removed",
		topo:     without(threeLinks, "p"),
		stranded: []string{"%ID%", `unknown link "p"`},
	}, {
		name:     "the used link below the booked bandwidth",
		topo:     strings.Replace(threeLinks, "{name: p, ends: [h1, h2], rate: 1G", "{name: p, ends: [h1, h2], rate: 400M", 1),
		stranded: []string{"%ID%", "500 Mbit/s requested is more than the 360 Mbit/s reservable"},
	}, {
		name: "a host removed",
		topo: `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: h1, site: s1}
  - {name: h3, site: s2}
links:
  - {name: p, ends: [h1, h3], rate: 1G}
`,
		stranded: []string{"%ID%", "%X%: node h2 is gone"},
	}, {
		name:     "an unused link removed",
		topo:     without(threeLinks, "q"),
		stranded: nil,
	}, {
		name:     "the used link made faster",
		topo:     strings.Replace(threeLinks, "{name: p, ends: [h1, h2], rate: 1G", "{name: p, ends: [h1, h2], rate: 10G", 1),
		stranded: nil,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, threeLinks)
			r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Path: []string{"p"}, Start: t0, Duration: 2 * time.Hour})
			x, err := h.c.CreateExclusive(h.ctx, alice, controller.ExclusiveInput{Node: "h2", Start: t0.Add(3 * time.Hour), Duration: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			h.at(t0)
			before := h.c.Topology()
			newYAML := tc.topo

			stranded, err := h.c.ReloadTopology(h.ctx, admin, parseTopo(t, "new.yaml", newYAML))
			if tc.stranded != nil {
				var se *controller.StrandError
				if !errors.As(err, &se) || !errors.Is(err, reserve.ErrConflict) {
					t.Fatalf("got %v, want a StrandError matching ErrConflict", err)
				}
				if !slices.Equal(stranded, se.Stranded) {
					t.Fatalf("returned %v, the error names %v", stranded, se.Stranded)
				}
				for _, f := range tc.stranded {
					f = strings.NewReplacer("%ID%", r.ID, "%X%", x.ID).Replace(f)
					if !strings.Contains(err.Error(), f) {
						t.Fatalf("error %q does not name %q", err, f)
					}
				}
				if !strings.Contains(err.Error(), "cancel or move them first") {
					t.Fatalf("error %q does not say what to do", err)
				}
				if h.c.Topology() != before {
					t.Fatal("a refused reload replaced the topology")
				}
				h.restart()
				if got := h.c.Topology().YAML; got != threeLinks {
					t.Fatalf("after a refused reload and a restart the stored topology is\n%s", got)
				}
			} else {
				if err != nil {
					t.Fatalf("reload: %v (stranded %v)", err, stranded)
				}
				if got := h.c.Topology(); got.YAML != newYAML || got.Name != "new.yaml" {
					t.Fatalf("topology after the reload: %q", got.Name)
				}
				if !h.audited("load topology new.yaml") {
					t.Fatal("no audit entry for the reload")
				}
				h.restart()
				if got := h.c.Topology(); got.YAML != newYAML || got.Name != "new.yaml" {
					t.Fatalf("topology after a restart: %q\n%s", got.Name, got.YAML)
				}
			}
			// Either way the reservation carries on, booked where it was.
			got := h.wantState(r.ID, reserve.StateActive)
			if !slices.Equal(links(got.Path), []string{"p"}) {
				t.Fatalf("path %v, want [p]", links(got.Path))
			}
			h.at(t0.Add(2 * time.Hour))
			h.wantState(r.ID, reserve.StateFinished)
		})
	}
}

// TestReloadBooksOnTheNewGraph pins that an applied reload books the live
// reservations on the new graph: capacity added by it is there to book,
// and what they hold on it stays held.
func TestReloadBooksOnTheNewGraph(t *testing.T) {
	h := newHarness(t, oneLink)
	h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 800 * mbit, Duration: time.Hour})
	in := controller.CreateInput{From: "h1", To: "h2", Bandwidth: 800 * mbit, Duration: time.Hour}
	_, err := h.c.Create(h.ctx, alice, in)
	wantErr(t, err, reserve.ErrCapacity)
	faster := strings.Replace(oneLink, "rate: 1G", "rate: 2G", 1) // 1.8 Gbit/s reservable
	if _, err := h.c.ReloadTopology(h.ctx, admin, parseTopo(t, "faster.yaml", faster)); err != nil {
		t.Fatal(err)
	}
	h.create(in)
	// 1.6 of 1.8 Gbit/s booked: a third is refused.
	_, err = h.c.Create(h.ctx, alice, in)
	wantErr(t, err, reserve.ErrCapacity)
}

// TestReloadRefusals pins who may reload, and that a controller opened
// with a topology that strands the stored reservations refuses to start
// (naming them) and leaves the database as it was.
func TestReloadRefusals(t *testing.T) {
	h := newHarness(t, twoLinks)
	r := h.create(controller.CreateInput{From: "h1", To: "h2", Bandwidth: 500 * mbit, Path: []string{"q"}, Duration: time.Hour})
	operator := controller.Actor{Name: "op", Role: reserve.RoleOperator}
	var polErr *reserve.PolicyError
	for _, a := range []controller.Actor{alice, operator, agentOf("h1")} {
		if _, err := h.c.ReloadTopology(h.ctx, a, parseTopo(t, "x.yaml", oneLink)); !errors.As(err, &polErr) {
			t.Fatalf("reload by %s (%s): got %v, want a refusal for the role", a.Name, a.Role, err)
		}
	}
	h.stop()
	err := h.open(without(twoLinks, "q"))
	var se *controller.StrandError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), r.ID) || !strings.Contains(err.Error(), "load topology test.yaml") {
		t.Fatalf("open with a topology that strands %s: got %v", r.ID, err)
	}
	if err := h.open(""); err != nil {
		t.Fatal(err)
	}
	if got := h.c.Topology().YAML; got != twoLinks {
		t.Fatalf("the refused open changed the stored topology to\n%s", got)
	}
	h.wantState(r.ID, reserve.StateActive)
}

// without returns topology yaml without the line of link name.
func without(yaml, link string) string {
	var out []string
	for _, l := range strings.Split(yaml, "\n") {
		if !strings.Contains(l, "{name: "+link+", ends:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
