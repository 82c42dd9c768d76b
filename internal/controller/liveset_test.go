package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// twoWANs is two sites of two hosts each, their routers joined through
// two transit routers, so a reservation between the sites has two paths,
// through different nodes, to move between.
const twoWANs = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: h1, site: s1}
  - {name: h2, site: s1}
  - {name: r1, site: s1, role: router}
  - {name: h3, site: s2}
  - {name: h4, site: s2}
  - {name: r2, site: s2, role: router}
  - {name: t1, site: s1, role: router}
  - {name: t2, site: s2, role: router}
links:
  - {name: h1-r1, ends: [h1, r1], rate: 10G}
  - {name: h2-r1, ends: [h2, r1], rate: 10G}
  - {name: h3-r2, ends: [h3, r2], rate: 10G}
  - {name: h4-r2, ends: [h4, r2], rate: 10G}
  - {name: a1, ends: [r1, t1], rate: 10G}
  - {name: b1, ends: [t1, r2], rate: 10G}
  - {name: a2, ends: [r1, t2], rate: 10G}
  - {name: b2, ends: [t2, r2], rate: 10G}
`

// testClock is a settable clock.
type testClock struct{ t time.Time }

func (c *testClock) Now() time.Time { return c.t }

// openTest opens a controller on a SQLite store in a temporary directory.
func openTest(t *testing.T, topo string, clk *testClock) *Controller {
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
	c, err := Open(ctx, Config{Store: st, StoreKind: "sqlite", Topology: tp, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ids(rs []reserve.Reservation) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	sort.Strings(out)
	return out
}

// scan is what the indexes must answer, by a full scan of the live set.
func scan(c *Controller, keep func(reserve.Reservation) bool) []string {
	var out []string
	for _, r := range c.live {
		if keep(r) {
			out = append(out, r.ID)
		}
	}
	sort.Strings(out)
	return out
}

// checkIndexes compares every index with a full scan of the live set.
func checkIndexes(t *testing.T, c *Controller, rng *rand.Rand, step string) {
	t.Helper()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, n := range c.topo.Graph.Nodes() {
		want := scan(c, func(r reserve.Reservation) bool { return slices.Contains(r.Nodes(), n) })
		if got := ids(c.touching(n)); !slices.Equal(got, want) {
			t.Fatalf("%s: touching(%s) = %v, a full scan finds %v", step, n, got, want)
		}
	}
	for _, p := range []string{"p1", "p2"} {
		want := scan(c, func(r reserve.Reservation) bool { return r.Project == p })
		if got := ids(c.projectLive(p)); !slices.Equal(got, want) {
			t.Fatalf("%s: projectLive(%s) = %v, a full scan finds %v", step, p, got, want)
		}
	}
	for _, o := range []string{"alice", "bob"} {
		want := scan(c, func(r reserve.Reservation) bool { return r.Owner == o })
		if got := c.ownerLive(o); got != len(want) {
			t.Fatalf("%s: ownerLive(%s) = %d, a full scan finds %d", step, o, got, len(want))
		}
	}
	nodes := c.topo.Graph.Nodes()
	for range 5 {
		ns := []string{nodes[rng.IntN(len(nodes))], nodes[rng.IntN(len(nodes))]}
		slices.Sort(ns)
		ns = slices.Compact(ns)
		start := c.now().Add(time.Duration(rng.IntN(8*60)-60) * time.Minute)
		end := start.Add(time.Duration(1+rng.IntN(4*60)) * time.Minute)
		want := scan(c, func(r reserve.Reservation) bool {
			share := false
			for _, n := range r.Nodes() {
				share = share || slices.Contains(ns, n)
			}
			return r.DSCP != 0 && share && r.Start.Before(end) && start.Before(r.End)
		})
		if got := ids(c.overlapping(ns, start, end)); !slices.Equal(got, want) {
			t.Fatalf("%s: overlapping(%v, %s, %s) = %v, a full scan finds %v", step, ns, start, end, got, want)
		}
	}
}

// TestLiveIndexesMatchScan runs a seeded random sequence of creates (with
// and without projects and flow specs), activations, reroutes, moves off a
// dead link, cancels and ends, and after each step checks that the
// indexes answer what a full scan of the live set does.
func TestLiveIndexesMatchScan(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 14))
			clk := &testClock{t: time.Date(2030, 3, 1, 12, 0, 0, 0, time.UTC)}
			c := openTest(t, twoWANs, clk)
			ctx := context.Background()
			admin := Actor{Name: "admin", Role: reserve.RoleAdmin}
			hosts := []string{"h1", "h2", "h3", "h4"}
			addr := func(n string) string { return c.topo.Addrs[n][0].Addr().String() }
			for _, u := range []string{"alice", "bob"} {
				if _, err := c.AddUser(ctx, admin, u, reserve.RoleUser, []string{"p1", "p2"}, ""); err != nil {
					t.Fatal(err)
				}
			}
			counts := map[string]int{}
			for i := range 400 {
				var step string
				switch op := rng.IntN(10); {
				case op < 4: // create
					from, to := hosts[rng.IntN(4)], hosts[rng.IntN(4)]
					if from == to {
						continue
					}
					in := CreateInput{Owner: []string{"alice", "bob"}[rng.IntN(2)], From: from, To: to,
						Bandwidth: uint64(1+rng.IntN(500)) * 1_000_000,
						Start:     clk.t.Add(time.Duration(rng.IntN(3*60)) * time.Minute),
						Duration:  time.Duration(10+rng.IntN(2*60)) * time.Minute}
					if p := rng.IntN(3); p > 0 {
						in.Project = fmt.Sprint("p", p)
					}
					if rng.IntN(2) == 0 {
						in.FlowSpec = fmt.Sprintf("tcp %s > %s:%d", addr(from), addr(to), 5000+rng.IntN(100))
					}
					if rng.IntN(4) == 0 {
						in.Hold = time.Duration(1+rng.IntN(20)) * time.Minute
					}
					_, err := c.Create(ctx, admin, in)
					step = fmt.Sprintf("%d create %+v: %v", i, in, err)
				case op < 6: // time passes: holds expire, starts (activations), ends
					clk.t = clk.t.Add(time.Duration(1+rng.IntN(30)) * time.Minute)
					c.Tick(ctx)
					step = fmt.Sprintf("%d tick to %s: %v", i, clk.t, error(nil))
				case op < 8: // reroute: another WAN link, or the scheduler's choice
					r, ok := c.randomLive(rng)
					if !ok {
						continue
					}
					in := ModifyInput{Version: r.Version, Reroute: rng.IntN(2) == 0}
					if !in.Reroute && len(r.Path) == 4 {
						other := map[string]string{"a1": "a2", "a2": "a1", "b1": "b2", "b2": "b1"}
						in.Path = []string{r.Path[0].Link, other[r.Path[1].Link], other[r.Path[2].Link], r.Path[3].Link}
					}
					_, err := c.Modify(ctx, admin, r.ID, in)
					step = fmt.Sprintf("%d modify %s %+v: %v", i, r.ID, in, err)
				case op < 9: // cancel
					r, ok := c.randomLive(rng)
					if !ok {
						continue
					}
					_, err := c.Cancel(ctx, admin, r.ID, r.Version, "test")
					step = fmt.Sprintf("%d cancel %s: %v", i, r.ID, err)
				default: // a WAN link goes down or comes back: moves
					wan := []string{"a1", "b1", "a2", "b2"}[rng.IntN(4)]
					var err error
					if rng.IntN(2) == 0 {
						_, err = c.LinkDown(ctx, admin, "r1", wan, "test")
					} else {
						err = c.LinkUp(ctx, admin, "r1", wan)
					}
					step = fmt.Sprintf("%d link %s: %v", i, wan, err)
				}
				kind := step[len(fmt.Sprint(i))+1:][:4]
				counts[kind]++
				if !strings.HasSuffix(step, "<nil>") {
					counts[kind+" refused"]++
				}
				checkIndexes(t, c, rng, step)
			}
			c.mu.RLock()
			n := len(c.live)
			c.mu.RUnlock()
			t.Logf("live at the end: %d; steps: %v", n, counts)
			// A restart restores the live set, and its indexes, from the
			// store.
			c.Close()
			c2, err := Open(ctx, Config{Store: c.st, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			if c2.LiveCount() != n {
				t.Fatalf("restart restored %d live reservations, want %d", c2.LiveCount(), n)
			}
			checkIndexes(t, c2, rng, "restart")
		})
	}
}

// randomLive picks one live reservation, by ID order so the seed decides.
func (c *Controller) randomLive(rng *rand.Rand) (reserve.Reservation, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.live) == 0 {
		return reserve.Reservation{}, false
	}
	ids := make([]string, 0, len(c.live))
	for id := range c.live {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return c.live[ids[rng.IntN(len(ids))]], true
}
