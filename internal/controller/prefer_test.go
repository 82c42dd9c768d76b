package controller

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// circuitAndWAN is examples/two-site.yaml in small: a shared routed wan
// (1G, 0.9 reservable) and a dedicated circuit (2G, 1.8G reservable)
// between the sites' routers, as many hops and as slow as each other.
const circuitAndWAN = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: a1, site: s1}
  - {name: ra, site: s1, role: router}
  - {name: b1, site: s2}
  - {name: rb, site: s2, role: router}
links:
  - {name: a1-ra, ends: [a1, ra], rate: 10G}
  - {name: b1-rb, ends: [b1, rb], rate: 10G}
  - {name: wan, ends: [ra, rb], rate: 1G, delay: 25ms}
  - {name: circuit, ends: [ra, rb], rate: 2G, delay: 25ms, role: dedicated}
`

// openPref opens a controller on circuitAndWAN with a path preference.
func openPref(t *testing.T, pref reserve.PathPreference) (*Controller, error) {
	t.Helper()
	return openPrefOn(t, circuitAndWAN, pref)
}

// openPrefOn opens a controller on topo with a path preference.
func openPrefOn(t *testing.T, topo string, pref reserve.PathPreference) (*Controller, error) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tp, err := ParseTopology("test.yaml", []byte(topo))
	if err != nil {
		t.Fatal(err)
	}
	clk := &testClock{t: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)}
	c, err := Open(ctx, Config{Store: st, StoreKind: "sqlite", Topology: tp, Now: clk.Now, PathPreference: pref})
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}

// TestPathPreference checks the controller's path choice: by default a
// reservation with no path named lands on the dedicated circuit, and on
// the routed wan only when the circuit has no room left; --path-preference
// routed restores the routed-first choice; an unknown preference is
// refused at Open.
func TestPathPreference(t *testing.T) {
	admin := Actor{Name: "admin", Role: reserve.RoleAdmin}
	start := time.Date(2030, 1, 1, 13, 0, 0, 0, time.UTC)
	// booking is one create (a size makes it an earliest completion at
	// that rate at most) and the link it must land on.
	type booking struct {
		bw, size uint64
		link     string
	}
	for _, tc := range []struct {
		name string
		pref reserve.PathPreference
		// made in turn
		books []booking
	}{
		{name: "default", pref: "", books: []booking{{600e6, 0, "circuit"}, {1200e6, 0, "circuit"}, {500e6, 0, "wan"}}},
		{name: "dedicated, earliest completion", pref: reserve.PreferDedicated, books: []booking{{500e6, 1e9, "circuit"}}},
		{name: "routed", pref: reserve.PreferRouted, books: []booking{{600e6, 0, "wan"}, {600e6, 0, "circuit"}}},
		{name: "shortest (ties by name)", pref: reserve.PreferShortest, books: []booking{{600e6, 0, "circuit"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := openPref(t, tc.pref)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.pref; want == "" && c.PathPreference() != reserve.PreferDedicated || want != "" && c.PathPreference() != want {
				t.Errorf("PathPreference() = %q with %q configured", c.PathPreference(), tc.pref)
			}
			for i, b := range tc.books {
				in := CreateInput{From: "a1", To: "b1", Bandwidth: b.bw, Start: start, Duration: time.Hour, SizeBytes: b.size}
				cr, err := c.Create(context.Background(), admin, in)
				if err != nil {
					t.Fatalf("booking %d: %v", i, err)
				}
				if p := cr.Reservation.Path; len(p) != 3 || p[1].Link != b.link {
					t.Errorf("booking %d (%s): path %v, want it on %s", i, cr.Algorithm, p, b.link)
				}
			}
		})
	}
	if _, err := openPref(t, "widest"); err == nil || !strings.Contains(err.Error(), `unknown path preference "widest"`) {
		t.Errorf("Open with preference widest: %v", err)
	}
}

// TestLinkPrefer checks a link's prefer in the topology file: with the
// circuit marked prefer: false (kept for the reservations that name it)
// and the wan prefer: true, the default preference takes the wan first.
func TestLinkPrefer(t *testing.T) {
	topo := strings.Replace(circuitAndWAN, "role: dedicated}", "role: dedicated, prefer: false}", 1)
	topo = strings.Replace(topo, "delay: 25ms}\n  - {name: circuit", "delay: 25ms, prefer: true}\n  - {name: circuit", 1)
	c, err := openPrefOn(t, topo, "")
	if err != nil {
		t.Fatal(err)
	}
	in := CreateInput{From: "a1", To: "b1", Bandwidth: 600e6, Start: time.Date(2030, 1, 1, 13, 0, 0, 0, time.UTC), Duration: time.Hour}
	for _, want := range []string{"wan", "circuit"} { // the second does not fit on the wan
		cr, err := c.Create(context.Background(), Actor{Name: "admin", Role: reserve.RoleAdmin}, in)
		if err != nil {
			t.Fatal(err)
		}
		if p := cr.Reservation.Path; len(p) != 3 || p[1].Link != want {
			t.Errorf("path %v, want it on %s", p, want)
		}
	}
}
