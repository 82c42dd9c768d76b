package controller_test

// The controller tested on its own: a real store (SQLite in t.TempDir()),
// a fake clock the test moves, and the controller's exported methods. No
// HTTP: what these tests pin is the controller's behaviour, whatever face
// serves it. They use only exported API, so they survive changes to the
// controller's insides (indexes, a standby).

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/testclock"
)

// t0 is where every test's clock starts: whole milliseconds, as the
// controller keeps its instants.
var t0 = time.Date(2031, 5, 4, 10, 0, 0, 0, time.UTC)

const (
	gbit = 1_000_000_000
	mbit = 1_000_000
)

// oneLink is two hosts joined by one 1 Gbit/s link, 90% reservable: 900
// Mbit/s to book in each direction, on the only path.
const oneLink = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: h1, site: s1}
  - {name: h2, site: s2}
links:
  - {name: l, ends: [h1, h2], rate: 1G, delay: 5ms}
`

// twoLinks is two hosts joined by two parallel 1 Gbit/s links, p and q:
// two paths of 900 Mbit/s each, so a reservation can move off one.
const twoLinks = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: h1, site: s1}
  - {name: h2, site: s2}
links:
  - {name: p, ends: [h1, h2], rate: 1G, delay: 5ms}
  - {name: q, ends: [h1, h2], rate: 1G, delay: 5ms}
`

// Who acts.
var (
	admin = controller.Actor{Name: "root", Role: reserve.RoleAdmin}
	alice = controller.Actor{Name: "alice", Role: reserve.RoleUser}
)

// agentOf is the agent identity bound to node.
func agentOf(node string) controller.Actor {
	return controller.Actor{Name: "agent-" + node, Role: reserve.RoleAgent, Node: node}
}

// harness is one controller on a SQLite file, with the clock the test
// drives. restart closes it and opens another on the same database, as a
// controller process restarted later would.
type harness struct {
	t   *testing.T
	db  string
	clk *testclock.Clock
	st  store.Store
	c   *controller.Controller
	ctx context.Context
	// configure, when set, edits the Config of every controller opened.
	configure func(*controller.Config)
}

// newHarness opens a controller on a fresh database with topology topo
// (YAML; empty for none).
func newHarness(t *testing.T, topo string) *harness {
	t.Helper()
	return newHarnessConfig(t, topo, nil)
}

// newHarnessConfig is newHarness with configure editing every Config.
func newHarnessConfig(t *testing.T, topo string, configure func(*controller.Config)) *harness {
	t.Helper()
	h := &harness{t: t, db: "sqlite:" + filepath.Join(t.TempDir(), "controller.db"), clk: testclock.New(t0), ctx: context.Background(), configure: configure}
	if err := h.open(topo); err != nil {
		t.Fatal(err)
	}
	return h
}

// parseTopo parses a topology the test wrote.
func parseTopo(t *testing.T, name, yaml string) *controller.Topo {
	t.Helper()
	tp, err := controller.ParseTopology(name, []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// open opens the store and a controller on it, given topo (empty: the
// stored one). On failure nothing stays open.
func (h *harness) open(topo string) error {
	h.t.Helper()
	st, err := store.Open(h.ctx, h.db)
	if err != nil {
		return err
	}
	var tp *controller.Topo
	if topo != "" {
		tp = parseTopo(h.t, "test.yaml", topo)
	}
	cfg := controller.Config{Store: st, StoreKind: "sqlite", Topology: tp, Now: h.clk.Now}
	if h.configure != nil {
		h.configure(&cfg)
	}
	c, err := controller.Open(h.ctx, cfg)
	if err != nil {
		st.Close()
		return err
	}
	h.st, h.c = st, c
	h.t.Cleanup(func() {
		c.Close()
		st.Close()
	})
	return nil
}

// stop closes the controller and its store, as a controller that exits.
func (h *harness) stop() {
	h.c.Close()
	if err := h.st.Close(); err != nil {
		h.t.Fatal(err)
	}
}

// restart stops the controller and opens a new one on the same database
// with the stored topology.
func (h *harness) restart() {
	h.t.Helper()
	h.stop()
	if err := h.open(""); err != nil {
		h.t.Fatal(err)
	}
}

// at moves the clock to t and lets the controller's clock act.
func (h *harness) at(t time.Time) {
	h.clk.Set(t)
	h.c.Tick(h.ctx)
}

// create books a reservation for alice, failing the test if refused.
func (h *harness) create(in controller.CreateInput) reserve.Reservation {
	h.t.Helper()
	got, err := h.c.Create(h.ctx, alice, in)
	if err != nil {
		h.t.Fatalf("create %+v: %v", in, err)
	}
	return got.Reservation
}

// get reads a reservation back as stored.
func (h *harness) get(id string) reserve.Reservation {
	h.t.Helper()
	r, err := h.c.Get(h.ctx, admin, id)
	if err != nil {
		h.t.Fatalf("get %s: %v", id, err)
	}
	return r
}

// heartbeat renews node's agent's lease for lease.
func (h *harness) heartbeat(node string, lease time.Duration) controller.AgentWork {
	h.t.Helper()
	w, err := h.c.Heartbeat(h.ctx, agentOf(node), node, lease)
	if err != nil {
		h.t.Fatalf("heartbeat %s: %v", node, err)
	}
	return w
}

// wantState fails the test unless reservation id is in state want.
func (h *harness) wantState(id string, want reserve.State) reserve.Reservation {
	h.t.Helper()
	r := h.get(id)
	if r.State != want {
		h.t.Fatalf("%s is %s, want %s; history: %s", id, r.State, want, history(r))
	}
	return r
}

// history prints a reservation's transitions, for failure messages.
func history(r reserve.Reservation) string {
	var s []string
	for _, t := range r.History {
		s = append(s, string(t.From)+"→"+string(t.To)+" ("+t.Why+")")
	}
	return strings.Join(s, "; ")
}

// states lists the states a reservation went through, first to last.
func states(r reserve.Reservation) []reserve.State {
	var out []reserve.State
	for i, t := range r.History {
		if i == 0 {
			out = append(out, t.To)
			continue
		}
		if t.To != out[len(out)-1] {
			out = append(out, t.To)
		}
	}
	return out
}

// links lists the links of a path.
func links(p []reserve.PathHop) []string {
	out := make([]string, len(p))
	for i, h := range p {
		out[i] = h.Link
	}
	return out
}

// audited reports whether the audit log holds an entry whose What starts
// with prefix.
func (h *harness) audited(prefix string) bool {
	h.t.Helper()
	es, err := h.c.Audit(h.ctx, admin, store.AuditFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	return slices.ContainsFunc(es, func(e store.AuditEntry) bool { return strings.HasPrefix(e.What, prefix) })
}

// wantErr fails unless err matches target (errors.Is) and says every
// fragment.
func wantErr(t *testing.T, err, target error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", target)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("got %v, want an error matching %v", err, target)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q does not say %q", err, f)
		}
	}
}
