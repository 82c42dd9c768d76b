package service_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
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
