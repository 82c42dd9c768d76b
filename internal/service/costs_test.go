package service_test

// Issue 28, findings 5, 6 and 11: what a submission, a waiting job and a
// refused listing cost the service, counted in store reads, never timed.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// sources is n distinct sources on endpoint ep, the last dup of them
// repeating the first (a request the validation refuses).
func sources(ep string, n, dup int) []string {
	out := make([]string, 0, n)
	for i := range n - dup {
		out = append(out, fmt.Sprintf("%s:data/f%06d", ep, i))
	}
	for range dup {
		out = append(out, out[0])
	}
	return out
}

// Permission comes before the request's validation: bob, allowed on no
// endpoint, is refused (403) for a request the validation would refuse
// (400), and his refusal reads the same from the store whatever the
// number of sources.
func TestSubmitPermissionFirst(t *testing.T) {
	e := newEnv(t)
	reads := service.CountReads(e.s)
	cost := map[int]int{}
	for _, n := range []int{2, 1000, service.MaxSources} {
		q0, r0 := reads.Counts()
		_, _, err := e.s.Submit(e.ctx, bob, transfer.JobRequest{Sources: sources("src", n, 1), Destination: "dst:in"})
		if !errors.Is(err, reserve.ErrForbidden) || !strings.Contains(err.Error(), "bob may not use endpoint src") {
			t.Fatalf("bob's %d sources: %v, want forbidden", n, err)
		}
		q1, r1 := reads.Counts()
		cost[n] = (q1-q0)*1000000 + (r1 - r0)
	}
	if cost[2] != cost[1000] || cost[2] != cost[service.MaxSources] {
		t.Errorf("bob's refusals read (queries*1e6 + rows) %v: it grows with the sources", cost)
	}
	// Allowed on the source only: still refused, for the destination.
	if _, err := e.s.Allow(e.ctx, admin, "src", apiv1.EndpointAllow{Users: []string{"alice", "bob"}}); err != nil {
		t.Fatal(err)
	}
	_, _, err := e.s.Submit(e.ctx, bob, transfer.JobRequest{Sources: sources("src", 10, 1), Destination: "dst:in"})
	if !errors.Is(err, reserve.ErrForbidden) || !strings.Contains(err.Error(), "endpoint dst") {
		t.Fatalf("bob on src only: %v, want forbidden on dst", err)
	}
	// Someone allowed gets the validation's answer.
	_, _, err = e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: sources("src", 10, 1), Destination: "dst:in"})
	if !errors.Is(err, reserve.ErrInvalid) || !strings.Contains(err.Error(), "is given twice") {
		t.Fatalf("alice's repeated source: %v, want invalid", err)
	}
	if js, _ := e.st.ListJobs(e.ctx, store.JobFilter{}); len(js) != 0 {
		t.Fatalf("%d jobs stored", len(js))
	}
}

// At most service.MaxSources sources: one more is refused as too large,
// before anything else (permission included) and with nothing stored.
func TestSubmitSourcesCap(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name  string
		who   controller.Actor
		n     int
		large bool
	}{
		{"alice at the cap", alice, service.MaxSources, false},
		{"alice over it", alice, service.MaxSources + 1, true},
		{"bob over it", bob, service.MaxSources + 1, true},
		{"far over it", alice, 100000, true},
	} {
		j, created, err := e.s.Submit(e.ctx, tc.who, transfer.JobRequest{Sources: sources("src", tc.n, 0), Destination: "dst:in" + fmt.Sprint(tc.n)})
		var tl *service.TooLargeError
		switch {
		case tc.large && (!errors.As(err, &tl) || !errors.Is(err, service.ErrTooLarge) || tl.Field != "sources" ||
			!strings.Contains(err.Error(), fmt.Sprintf("%d sources: a job takes at most %d", tc.n, service.MaxSources))):
			t.Errorf("%s: %v, want too large", tc.name, err)
		case !tc.large && (err != nil || !created || len(j.Sources) != tc.n):
			t.Errorf("%s: %v (created %v, %d sources)", tc.name, err, created, len(j.Sources))
		}
	}
	if js, _ := e.st.ListJobs(e.ctx, store.JobFilter{}); len(js) != 1 {
		t.Fatalf("%d jobs stored, want alice's one at the cap", len(js))
	}
}

// queuedCost submits n jobs that wait for their listing and returns what
// one clock tick, a claim by a node of another endpoint and a claim of
// four listings by a node of theirs read from the store.
func queuedCost(t *testing.T, n int) (tick, other, mine [2]int) {
	e := newEnv(t)
	for i := range n {
		if _, _, err := e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: fmt.Sprintf("dst:in%d", i)}); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	e.s.Tick(e.ctx) // the first after start also looks for unbooked jobs
	reads := service.CountReads(e.s)
	measure := func(fn func()) [2]int {
		q0, r0 := reads.Counts()
		fn()
		q1, r1 := reads.Counts()
		return [2]int{q1 - q0, r1 - r0}
	}
	tick = measure(func() { e.s.Tick(e.ctx) })
	other = measure(func() {
		if ws := e.claim("b1", 4); len(ws) != 0 {
			t.Fatalf("b1 claimed %d tasks", len(ws))
		}
	})
	mine = measure(func() {
		if ws := e.claim("a1", 4); len(ws) != 4 {
			t.Fatalf("a1 claimed %d tasks, want 4 listings", len(ws))
		}
	})
	return tick, other, mine
}

// The clock's tick and a data node's claim read as much of the store with
// 300 jobs waiting for their listing as with 5.
func TestQueuedJobsCostConstant(t *testing.T) {
	tick5, other5, mine5 := queuedCost(t, 5)
	tick300, other300, mine300 := queuedCost(t, 300)
	t.Logf("[queries rows] with 5 and 300 jobs waiting: tick %v %v, another endpoint's claim %v %v, a claim of 4 listings %v %v",
		tick5, tick300, other5, other300, mine5, mine300)
	if tick5 != tick300 {
		t.Errorf("a tick read [queries rows] %v with 5 jobs waiting, %v with 300", tick5, tick300)
	}
	if other5 != other300 {
		t.Errorf("another endpoint's claim read %v with 5 jobs waiting, %v with 300", other5, other300)
	}
	if mine5 != mine300 {
		t.Errorf("a claim of 4 listings read %v with 5 jobs waiting, %v with 300", mine5, mine300)
	}
}

// Without a policy, a user has at most reserve.DefaultMaxJobs unfinished
// jobs: the next is refused (429 "limit") and not stored.
func TestDefaultJobLimit(t *testing.T) {
	e := newEnv(t)
	for i := range reserve.DefaultMaxJobs {
		if _, _, err := e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: fmt.Sprintf("dst:in%d", i)}); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	_, _, err := e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:over"})
	var le *controller.LimitError
	want := fmt.Sprintf("user alice has %d unfinished jobs, the most allowed (max_jobs %d for everyone)", reserve.DefaultMaxJobs, reserve.DefaultMaxJobs)
	if !errors.As(err, &le) || le.Limit != "max_jobs" || !strings.Contains(err.Error(), want) {
		t.Fatalf("job over the default: %v, want %q", err, want)
	}
	if js, _ := e.st.ListJobs(e.ctx, store.JobFilter{}); len(js) != reserve.DefaultMaxJobs {
		t.Fatalf("%d jobs stored", len(js))
	}
}

// A listing the service refuses (two sources whose files land on one
// path; a listing too large for the API) fails its job with the reason at
// once; a listing that never comes back fails it after MaxAttempts
// tries. None is listed again.
func TestRefusedListingFailsJob(t *testing.T) {
	e := newEnv(t)
	submit := func(srcs ...string) transfer.Job {
		t.Helper()
		j, _, err := e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: srcs, Destination: "dst:in"})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	listing := func() apiv1.TaskWork {
		t.Helper()
		ws := e.claim("a1", 1)
		if len(ws) != 1 || ws[0].Task.Kind != transfer.TaskList {
			t.Fatalf("claim: %+v", ws)
		}
		return ws[0]
	}
	failed := func(j transfer.Job, why string) {
		t.Helper()
		got := e.job(j.ID)
		if got.State != transfer.JobFailed || !strings.Contains(got.Reason, why) {
			t.Fatalf("job %s %q, want FAILED saying %q", got.State, got.Reason, why)
		}
		ts, err := e.st.ListTasks(e.ctx, store.TaskFilter{Job: j.ID})
		if err != nil || len(ts) != 1 || ts[0].State != transfer.TaskFailed {
			t.Fatalf("tasks %+v %v", ts, err)
		}
		if ws := e.claim("a1", 4); len(ws) != 0 {
			t.Fatalf("listed again: %+v", ws)
		}
	}

	// Two sources that both hold f1.dat.
	j := submit("src:x/run1", "src:y/run1")
	w := listing()
	ans, err := e.s.Listing(e.ctx, agent("a1"), w.Task.ID, apiv1.Listing{Attempt: w.Task.Attempt, Files: []apiv1.ListedFile{
		{Path: "x/run1/f1.dat", Source: "x/run1", Size: 1, MTime: t0},
		{Path: "y/run1/f1.dat", Source: "y/run1", Size: 1, MTime: t0},
	}})
	if err != nil || ans.Task.State != transfer.TaskFailed {
		t.Fatalf("listing: %+v %v", ans, err)
	}
	failed(j, "the listing was refused: files x/run1/f1.dat and y/run1/f1.dat would both land at dst:in/run1/f1.dat")

	// A listing over the API's bound.
	j = submit("src:data")
	w = listing()
	if err := e.s.RefuseListing(e.ctx, agent("a2"), w.Task.ID, "not its holder"); err == nil {
		t.Fatal("another node's refusal of a listing was taken")
	}
	if got := e.job(j.ID); got.State != transfer.JobQueued {
		t.Fatalf("another node's word failed the job: %s %q", got.State, got.Reason)
	}
	if err := e.s.RefuseListing(e.ctx, agent("a1"), w.Task.ID, "the body is over 67108864 bytes"); err != nil {
		t.Fatal(err)
	}
	failed(j, "the listing was refused: the body is over 67108864 bytes")

	// A listing whose node is lost at every try.
	j = submit("src:data")
	for i := range service.MaxAttempts {
		w = listing()
		if w.Task.Attempt != i+1 {
			t.Fatalf("attempt %d, want %d", w.Task.Attempt, i+1)
		}
		e.clk.Add(20 * time.Second) // every lease lapses
		e.s.Tick(e.ctx)
		for _, n := range []string{"a1", "a2", "b1", "b2"} {
			e.beat(n, nil)
		}
	}
	failed(j, fmt.Sprintf("listing the dataset failed %d times; the last: data node a1 lost (its lease lapsed)", service.MaxAttempts))
}

// A queued listing stored before tasks kept their endpoint gets its job's
// at start, and is claimed by its endpoint's nodes as any other.
func TestOldTasksGetEndpoint(t *testing.T) {
	e := newEnv(t)
	j, _, err := e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.DeleteJob(e.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	j.Version = 1
	if err := e.st.CreateJob(e.ctx, j); err != nil {
		t.Fatal(err)
	}
	old := transfer.Task{ID: "k-old", Job: j.ID, Kind: transfer.TaskList, State: transfer.TaskQueued, CreatedAt: t0}
	if err := e.st.CreateTask(e.ctx, old); err != nil {
		t.Fatal(err)
	}
	if ws := e.claim("a1", 4); len(ws) != 0 {
		t.Fatalf("a task without an endpoint was claimed: %+v", ws)
	}
	e.restart()
	for _, n := range []string{"a1", "a2", "b1", "b2"} {
		e.beat(n, nil)
	}
	if got, err := e.st.GetTask(e.ctx, "k-old"); err != nil || got.Endpoint != "src" {
		t.Fatalf("after a restart: %+v %v", got, err)
	}
	if ws := e.claim("a1", 4); len(ws) != 1 || ws[0].Task.ID != "k-old" {
		t.Fatalf("claim: %+v", ws)
	}
}
