package controller

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// storedLease reads node's lease from the store.
func storedLease(t *testing.T, st store.Store, node string) time.Time {
	t.Helper()
	as, err := st.ListAgents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.Node == node {
			return a.LeaseExpires
		}
	}
	t.Fatalf("no agent of %s in the store", node)
	return time.Time{}
}

// Issue 14: a renewal is written to the store only when the stored lease
// would lapse within half a lease (or the new one is shorter), and a
// restart still finds an agent that kept heartbeating alive.
func TestLeaseRenewalWrites(t *testing.T) {
	ctx := context.Background()
	clk := &testClock{t: time.Date(2030, 3, 1, 12, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tp, err := ParseTopology("test.yaml", []byte(twoWANs))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, Config{Store: st, Topology: tp, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ag := Actor{Name: "agent-h1", Role: reserve.RoleAgent, Node: "h1"}
	beat := func(lease time.Duration) AgentWork {
		t.Helper()
		w, err := c.Heartbeat(ctx, ag, "h1", lease)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	const lease = 15 * time.Second
	first := beat(lease)
	if got := storedLease(t, st, "h1"); !got.Equal(first.LeaseExpires) {
		t.Fatalf("registration stored lease %s, want %s", got, first.LeaseExpires)
	}
	// Renewals every 2 s: the stored lease still holds for more than half
	// a lease, so nothing is written, but the lease in force moves on.
	var w AgentWork
	for range 3 {
		clk.t = clk.t.Add(2 * time.Second)
		w = beat(lease)
	}
	if got := storedLease(t, st, "h1"); !got.Equal(first.LeaseExpires) {
		t.Errorf("renewals within the margin wrote the lease: stored %s, want %s still", got, first.LeaseExpires)
	}
	if !w.LeaseExpires.Equal(clk.t.Add(lease)) {
		t.Errorf("renewal answered lease %s, want %s", w.LeaseExpires, clk.t.Add(lease))
	}
	if as := c.Agents(); len(as) != 1 || !as[0].LeaseExpires.Equal(w.LeaseExpires) || !as[0].Alive {
		t.Errorf("agents after renewals: %+v, want h1 alive until %s", as, w.LeaseExpires)
	}
	// 8 s after the write the stored lease has under half a lease left:
	// this renewal is written.
	clk.t = clk.t.Add(2 * time.Second)
	w = beat(lease)
	if got := storedLease(t, st, "h1"); !got.Equal(w.LeaseExpires) {
		t.Errorf("renewal with the stored lease due within half a lease: stored %s, want %s", got, w.LeaseExpires)
	}
	// A shorter lease is written at once: the store never says later
	// than the truth.
	clk.t = clk.t.Add(time.Second)
	w = beat(5 * time.Second)
	if got := storedLease(t, st, "h1"); !got.Equal(w.LeaseExpires) {
		t.Errorf("shorter lease: stored %s, want %s", got, w.LeaseExpires)
	}
	w = beat(lease)
	// A restart within the margin finds the agent alive, its reservations
	// not degraded.
	c.Close()
	clk.t = clk.t.Add(3 * time.Second)
	c2, err := Open(ctx, Config{Store: st, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if !c2.Managed("h1") {
		t.Errorf("after a restart 3 s after a heartbeat the agent of h1 is gone (stored lease %s)", storedLease(t, st, "h1"))
	}
}

// Renewals under the shared lock race with everything else the
// controller does to agents: run with -race.
func TestConcurrentRenewals(t *testing.T) {
	ctx := context.Background()
	clk := &lockedClock{t: time.Date(2030, 3, 1, 12, 0, 0, 0, time.UTC)}
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tp, err := ParseTopology("test.yaml", []byte(twoWANs))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, Config{Store: st, Topology: tp, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	for _, n := range []string{"h1", "h2", "h3", "h4"} {
		wg.Go(func() {
			for range 200 {
				if _, err := c.Heartbeat(ctx, Actor{Name: "agent-" + n, Role: reserve.RoleAgent, Node: n}, n, 15*time.Second); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			clk.add(100 * time.Millisecond)
			c.Tick(ctx)
			c.Agents()
			c.Counts()
		}
	})
	wg.Wait()
	// The heartbeats may end before the clock does: each agent beats once
	// more and is alive.
	for _, n := range []string{"h1", "h2", "h3", "h4"} {
		if _, err := c.Heartbeat(ctx, Actor{Name: "agent-" + n, Role: reserve.RoleAgent, Node: n}, n, 15*time.Second); err != nil {
			t.Fatal(err)
		}
		if !c.Managed(n) {
			t.Errorf("agent of %s gone after a heartbeat", n)
		}
	}
}

type lockedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *lockedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *lockedClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
