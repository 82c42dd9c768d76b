package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/testclock"
	"github.com/lightpath/lightpath/internal/transfer"
)

// brokenBeat is a heartbeat of node that names the attempts whose
// sessions broke on its server.
func (e *env) brokenBeat(node string, broken ...apiv1.Fence) apiv1.DataNodeWork {
	e.t.Helper()
	w, err := e.s.Heartbeat(e.ctx, agent(node), node, apiv1.DataNodeHeartbeat{Endpoint: endpointOf(node), Address: e.addr(node),
		Lease: "15s", Parts: true, Broken: broken})
	if err != nil {
		e.t.Fatalf("heartbeat %s: %v", node, err)
	}
	return w
}

// TestBrokenSessionLapsesSource: a destination says the session of a
// running task broke; its source, silent since for SourceQuiet, is taken
// for dead long before its 15 s lease lapses: the task goes back to the
// queue for another node, saying why. A source that is heard after the
// break (its session broke, it lives) keeps its task, and a break named
// by a node that is not the task's destination, or of an old attempt,
// suspects no one.
func TestBrokenSessionLapsesSource(t *testing.T) {
	e := newEnv(t)
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(10, 1000))
	w := e.claim("a1", 1)[0]
	to, other := w.Task.To, "b1"
	if to == "b1" {
		other = "b2"
	}
	task := func() transfer.Task {
		t.Helper()
		ts, err := e.st.ListTasks(e.ctx, store.TaskFilter{Job: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range ts {
			if tk.ID == w.Task.ID {
				return tk
			}
		}
		t.Fatalf("task %s gone", w.Task.ID)
		return transfer.Task{}
	}
	// Not its destination, then an old attempt: no suspicion.
	e.clk.Add(time.Second)
	e.brokenBeat(other, apiv1.Fence{Task: w.Task.ID, Attempt: 1})
	e.brokenBeat(to, apiv1.Fence{Task: w.Task.ID, Attempt: 0})
	e.clk.Add(2 * service.SourceQuiet)
	for _, n := range []string{"a2", "b1", "b2"} {
		e.beat(n, nil)
	}
	e.s.Tick(e.ctx)
	if tk := task(); tk.State != transfer.TaskActive || tk.From != "a1" {
		t.Fatalf("a break named by another node lapsed the task: %s %s", tk.State, tk.From)
	}
	// The destination's word, and a1 reports after it: a1 lives.
	e.beat("a1", []apiv1.TaskProgress{{Task: w.Task.ID, Attempt: 1}})
	e.brokenBeat(to, apiv1.Fence{Task: w.Task.ID, Attempt: 1})
	e.clk.Add(500 * time.Millisecond)
	if _, err := e.s.Report(e.ctx, agent("a1"), w.Task.ID, apiv1.TaskReport{Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(2 * service.SourceQuiet)
	for _, n := range []string{"a2", "b1", "b2"} {
		e.beat(n, nil)
	}
	e.s.Tick(e.ctx)
	if tk := task(); tk.State != transfer.TaskActive {
		t.Fatalf("a source heard after the break lapsed: %s %q", tk.State, tk.Error)
	}
	// Broken again, and a1 stays silent: within SourceQuiet (plus the
	// clock's tick) its task is back in the queue, its lease still far
	// from lapsing.
	e.beat("a1", []apiv1.TaskProgress{{Task: w.Task.ID, Attempt: 1}})
	e.clk.Add(500 * time.Millisecond)
	e.brokenBeat(to, apiv1.Fence{Task: w.Task.ID, Attempt: 1})
	e.s.Tick(e.ctx)
	if tk := task(); tk.State != transfer.TaskActive {
		t.Fatalf("lapsed at once: %s", tk.State)
	}
	e.clk.Add(service.SourceQuiet)
	e.s.Tick(e.ctx)
	tk := task()
	if tk.State != transfer.TaskQueued || !strings.Contains(tk.Error, "data node a1 lost (its sessions broke") {
		t.Fatalf("after a broken session and silence: %s %q", tk.State, tk.Error)
	}
	if j = e.job(j.ID); !strings.Contains(j.Reason, "data node a1 lost") {
		t.Fatalf("job reason %q", j.Reason)
	}
	ws := e.claim("a2", 2)
	found := false
	for _, w2 := range ws {
		if w2.Task.ID == w.Task.ID {
			found = w2.Task.Attempt == 2 && w2.Task.From == "a2"
		}
	}
	if !found {
		t.Fatalf("a2's claim did not take the task again: %+v", ws)
	}
	// a1 back: it registers again, and is told to stop the old attempt.
	if bw := e.beat("a1", []apiv1.TaskProgress{{Task: w.Task.ID, Attempt: 1}}); len(bw.Cancel) != 1 {
		t.Fatalf("a1 back: cancel %v", bw.Cancel)
	}
}

// sharedWAN is three data nodes a site on fast access links behind one
// routed 500 Mbit/s path and one dedicated 1 Gbit/s circuit
// (examples/shared-wan.yaml).
const sharedWAN = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: a1, site: s1}
  - {name: a2, site: s1}
  - {name: a3, site: s1}
  - {name: ra, site: s1, role: router}
  - {name: rb, site: s2, role: router}
  - {name: b1, site: s2}
  - {name: b2, site: s2}
  - {name: b3, site: s2}
links:
  - {name: la1, ends: [a1, ra], rate: 4G}
  - {name: la2, ends: [a2, ra], rate: 4G}
  - {name: la3, ends: [a3, ra], rate: 4G}
  - {name: wan, ends: [ra, rb], rate: 500M, delay: 10ms}
  - {name: circuit, ends: [ra, rb], rate: 1G, delay: 10ms, role: dedicated}
  - {name: lb1, ends: [rb, b1], rate: 4G}
  - {name: lb2, ends: [rb, b2], rate: 4G}
  - {name: lb3, ends: [rb, b3], rate: 4G}
`

var sharedNodes = []string{"a1", "a2", "a3", "b1", "b2", "b3"}

// newSharedEnv is newEnv on sharedWAN: endpoints src (a1-a3) and dst
// (b1-b3), alice allowed on both.
func newSharedEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), db: sqliteURL(t), clk: testclock.New(t0)}
	tp, err := controller.ParseTopology("shared.yaml", []byte(sharedWAN))
	if err != nil {
		t.Fatal(err)
	}
	e.open(tp)
	if _, err := e.c.AddUser(e.ctx, admin, alice.Name, alice.Role, alice.Projects, ""); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []apiv1.EndpointAdd{{Name: "src", Site: "s1", Nodes: sharedNodes[:3]}, {Name: "dst", Site: "s2", Nodes: sharedNodes[3:]}} {
		if _, _, err := e.s.AddEndpoint(e.ctx, admin, ep); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.Allow(e.ctx, admin, ep.Name, apiv1.EndpointAllow{Users: []string{"alice"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range sharedNodes {
		e.beat(n, nil)
	}
	return e
}

// startShared is newSharedEnv with a deadline job of files booked over
// its three pairs and started; lost is a1's pair.
func startShared(t *testing.T, files []apiv1.ListedFile) (e *env, j transfer.Job, lost transfer.Pair) {
	t.Helper()
	e = newSharedEnv(t)
	j, err := e.submitDeadline(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Hour)}, files)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Set(latestStart(j))
	for _, n := range sharedNodes {
		e.beat(n, nil)
	}
	e.c.Tick(e.ctx)
	e.s.Tick(e.ctx)
	if j = e.job(j.ID); j.State != transfer.JobActive || len(j.Pairs) != 3 {
		t.Fatalf("the job at its start: %s %q, pairs %+v", j.State, j.Reason, j.Pairs)
	}
	return e, j, j.Pairs[slices.IndexFunc(j.Pairs, func(p transfer.Pair) bool { return p.From == "a1" })]
}

// A source lost mid-job on the shared WAN: its share is planned again
// over several live pairs into its destination, and its requeued task is
// split among them by their shares, not carried whole by the first pair
// to claim it while the other new reservations idle (the node-kill
// benchmark: 814 MB over one new pair, none over the other).
func TestLostSourceSplitAmongNewPairs(t *testing.T) {
	e, j, lost := startShared(t, listed(24, 100_000_000))
	ws := e.claim("a1", 16)
	var a1Files []string
	for _, w := range ws {
		if w.Task.To != lost.To {
			t.Fatalf("a1 pushes to %s, its pair is to %s", w.Task.To, lost.To)
		}
		for _, f := range w.Files {
			a1Files = append(a1Files, f.Path)
		}
	}
	if len(a1Files) < 2 {
		t.Fatalf("a1 took %d files: nothing to split", len(a1Files))
	}
	for _, n := range []string{"a2", "a3"} {
		e.claim(n, 16)
	}
	// a1's sessions break at its destination; it stays silent.
	var broken []apiv1.Fence
	for _, w := range ws {
		broken = append(broken, apiv1.Fence{Task: w.Task.ID, Attempt: w.Task.Attempt})
	}
	e.clk.Add(time.Second)
	e.brokenBeat(lost.To, broken...)
	e.clk.Add(service.SourceQuiet)
	for _, n := range sharedNodes[1:] {
		e.beat(n, nil)
	}
	e.s.Tick(e.ctx) // a1 taken for dead, its tasks requeued, its share planned again
	j = e.job(j.ID)
	var fresh []transfer.Pair // the new pairs into the lost pair's destination
	for _, p := range j.Pairs {
		if p.To == lost.To && p.From != "a1" && p.Reservation != "" && p.Routed == "" {
			fresh = append(fresh, p)
		}
	}
	if len(fresh) < 2 {
		t.Fatalf("the lost share went to %d new pairs: %+v (reason %q)", len(fresh), j.Pairs, j.Reason)
	}
	// Their reservations start.
	e.clk.Set(latestStart(transfer.Job{Pairs: fresh}))
	for _, n := range sharedNodes[1:] {
		e.beat(n, nil)
	}
	e.c.Tick(e.ctx)
	e.s.Tick(e.ctx)
	// The survivors claim until nothing is left: a1's files go over
	// every new pair into its destination, none past its share by more
	// than a file.
	took := map[string]int64{}
	carried := map[string]bool{}
	for range 8 {
		for _, n := range []string{"a2", "a3"} {
			for _, w := range e.claim(n, 16) {
				for _, f := range w.Files {
					if slices.Contains(a1Files, f.Path) {
						carried[w.Task.From+">"+w.Task.To] = true
					}
					if w.Task.To == lost.To {
						took[w.Task.From] += f.Size
					}
				}
			}
		}
	}
	for _, p := range fresh {
		if !carried[p.From+">"+p.To] {
			t.Errorf("new pair %s > %s carried none of a1's files (%v)", p.From, p.To, carried)
		}
		if took[p.From] > p.ShareBytes+100_000_000 {
			t.Errorf("new pair %s > %s took %d bytes of a share of %d", p.From, p.To, took[p.From], p.ShareBytes)
		}
	}
}

// A lost source's task of one file larger than what any new pair has
// left of its share: a new pair into its destination takes it whole
// rather than every pair leaving it to another (two new pairs with equal
// shares left each left it to the other, and the job stayed at 44 of 45
// files for good).
func TestLostSourceLargeFileNotStranded(t *testing.T) {
	e, j, lost := startShared(t, listed(3, 700_000_000))
	ws := e.claim("a1", 4)
	if len(ws) != 1 || len(ws[0].Files) != 1 {
		t.Fatalf("a1's claim: %+v", ws)
	}
	for _, n := range []string{"a2", "a3"} {
		e.claim(n, 4)
	}
	e.clk.Add(time.Second)
	e.brokenBeat(lost.To, apiv1.Fence{Task: ws[0].Task.ID, Attempt: ws[0].Task.Attempt})
	e.clk.Add(service.SourceQuiet)
	for _, n := range sharedNodes[1:] {
		e.beat(n, nil)
	}
	e.s.Tick(e.ctx)
	var fresh []transfer.Pair
	for _, p := range e.job(j.ID).Pairs {
		if p.To == lost.To && p.From != "a1" && p.Reservation != "" && p.Routed == "" {
			fresh = append(fresh, p)
		}
	}
	if len(fresh) == 0 {
		t.Fatalf("the lost share was not planned again: %+v", e.job(j.ID).Pairs)
	}
	e.clk.Set(latestStart(transfer.Job{Pairs: fresh}))
	for _, n := range sharedNodes[1:] {
		e.beat(n, nil)
	}
	e.c.Tick(e.ctx)
	e.s.Tick(e.ctx)
	for range 4 {
		for _, n := range []string{"a2", "a3"} {
			for _, w := range e.claim(n, 4) {
				if w.Task.ID == ws[0].Task.ID {
					if w.Task.To != lost.To || len(w.Files) != 1 {
						t.Fatalf("the lost task went %s > %s with %d files", w.Task.From, w.Task.To, len(w.Files))
					}
					return
				}
			}
		}
	}
	t.Fatalf("no live pair took the lost source's task (pairs %+v)", e.job(j.ID).Pairs)
}
