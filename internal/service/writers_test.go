package service_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// named is one file under data/ for each name, of 1,000 bytes.
func named(names ...string) []apiv1.ListedFile {
	var out []apiv1.ListedFile
	for _, n := range names {
		out = append(out, apiv1.ListedFile{Path: "data/" + n, Source: "data", Size: 1000, MTime: t0})
	}
	return out
}

// submitAs submits a job of user u and has a1 claim its listing (the
// only thing a1 is handed: listings come first).
func (e *env) submitAs(u controller.Actor, req transfer.JobRequest) (transfer.Job, apiv1.TaskWork) {
	e.t.Helper()
	j, _, err := e.s.Submit(e.ctx, u, req)
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	ws := e.claim("a1", 1)
	if len(ws) != 1 || ws[0].Task.Kind != transfer.TaskList || ws[0].Task.Job != j.ID {
		e.t.Fatalf("list claim of %s: %+v", j.ID, ws)
	}
	return j, ws[0]
}

// writerRun plays the data nodes until no job of ids is live: it claims
// on every source node, checks that no claimed file lands where another
// job's file is being written (claimed and not yet reported) or where a
// job it waits for has not ended its file, and reports every task done.
type writerRun struct {
	e *env
	// moving are the destinations of the claimed, unreported files, to
	// the job moving each.
	moving map[string]string
	// claimed counts each job's files claimed.
	claimed map[string]int
}

func newWriterRun(e *env) *writerRun {
	return &writerRun{e: e, moving: map[string]string{}, claimed: map[string]int{}}
}

// claimAll claims on a1 and a2 and checks each claimed file.
func (r *writerRun) claimAll() []apiv1.TaskWork {
	r.e.t.Helper()
	var ws []apiv1.TaskWork
	for _, n := range []string{"a1", "a2"} {
		ws = append(ws, r.e.claim(n, 8)...)
	}
	for _, w := range ws {
		if w.Task.Kind != transfer.TaskCopy {
			continue
		}
		for _, f := range w.Files {
			if other, ok := r.moving[f.Dest]; ok && other != w.Task.Job {
				r.e.t.Fatalf("job %s claimed %s while job %s writes it", w.Task.Job, f.Dest, other)
			}
			for _, k := range f.WaitsFor {
				kj := r.e.job(k)
				if !transfer.JobEnded(kj.State) {
					fs, err := r.e.st.ListJobFiles(r.e.ctx, store.JobFileFilter{Job: k, Dests: []string{f.Dest}})
					if err != nil {
						r.e.t.Fatal(err)
					}
					if len(fs) == 1 && !slices.Contains([]string{transfer.FileSucceeded, transfer.FileFailed, transfer.FileCancelled}, fs[0].State) {
						r.e.t.Fatalf("job %s claimed %s while job %s (%s) has it %s", w.Task.Job, f.Dest, k, kj.State, fs[0].State)
					}
				}
			}
			r.moving[f.Dest] = w.Task.Job
			r.claimed[w.Task.Job]++
		}
	}
	return ws
}

// report reports the copy tasks done, every file arrived.
func (r *writerRun) report(ws []apiv1.TaskWork) {
	r.e.t.Helper()
	for _, w := range ws {
		if w.Task.Kind != transfer.TaskCopy {
			continue
		}
		if _, err := r.e.s.Report(r.e.ctx, agent(w.Task.From), w.Task.ID, r.e.okReport(w)); err != nil {
			r.e.t.Fatalf("report %s: %v", w.Task.ID, err)
		}
		for _, f := range w.Files {
			delete(r.moving, f.Dest)
		}
	}
}

// untilEnded claims and reports until every job of ids has ended.
func (r *writerRun) untilEnded(ids ...string) {
	r.e.t.Helper()
	for range 50 {
		live := slices.ContainsFunc(ids, func(id string) bool { return !transfer.JobEnded(r.e.job(id).State) })
		if !live {
			return
		}
		r.report(r.claimAll())
	}
	for _, id := range ids {
		j := r.e.job(id)
		r.e.t.Logf("job %s: %s %q", id, j.State, j.Reason)
	}
	r.e.t.Fatal("the jobs did not end in 50 rounds of claims")
}

// TestWritersRefuse: a job listing a file another live job (of another
// user) writes fails at its listing naming that job and the path, by
// default; the first job goes on and succeeds, and a job to another
// destination path is not held by it (issue 29).
func TestWritersRefuse(t *testing.T) { eachStore(t, testWritersRefuse) }

func testWritersRefuse(t *testing.T, db string) {
	e := newEnvAt(t, db, wholeFiles)
	for _, ep := range []string{"src", "dst"} {
		if _, err := e.s.Allow(e.ctx, admin, ep, apiv1.EndpointAllow{Users: []string{"bob"}}); err != nil {
			t.Fatal(err)
		}
	}
	a, w := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	e.page(w, 0, false, named("a.dat", "b.dat"))
	if j := e.job(a.ID); j.State != transfer.JobActive || j.OnConflict != transfer.ConflictRefuse {
		t.Fatalf("first job: %s %q, on_conflict %q", j.State, j.Reason, j.OnConflict)
	}
	b, w := e.submitAs(bob, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	if ans := e.page(w, 0, false, named("c.dat", "b.dat")); ans.Task.State != transfer.TaskFailed {
		t.Fatalf("second job's listing: %+v", ans.Task)
	}
	want := "the listing was refused: destination dst:in/data/b.dat is being written by job " + a.ID + " (another writer): resubmit when it ends, or with --on-conflict wait"
	if j := e.job(b.ID); j.State != transfer.JobFailed || j.Reason != want {
		t.Fatalf("second job: %s %q; want FAILED %q", j.State, j.Reason, want)
	}
	if fs, err := e.st.ListJobFiles(e.ctx, store.JobFileFilter{Job: b.ID}); err != nil || len(fs) != 0 {
		t.Fatalf("the refused job's files: %d, %v", len(fs), err)
	}
	// Another destination path: no writer there.
	c, w := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:out"})
	e.page(w, 0, false, named("a.dat", "b.dat"))
	r := newWriterRun(e)
	r.untilEnded(a.ID, c.ID)
	for _, id := range []string{a.ID, c.ID} {
		if j := e.job(id); j.State != transfer.JobSucceeded {
			t.Fatalf("job %s: %s %q", id, j.State, j.Reason)
		}
	}
	// Once the first has ended, the same files are written again.
	d, w := e.submitAs(bob, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	e.page(w, 0, false, named("c.dat", "b.dat"))
	r.untilEnded(d.ID)
	if j := e.job(d.ID); j.State != transfer.JobSucceeded {
		t.Fatalf("the job after the first ended: %s %q", j.State, j.Reason)
	}
}

// TestWritersWait: with on_conflict wait, the files another job writes
// are not claimed until that job's file has ended, while the others move;
// then they go on, and both jobs succeed.
func TestWritersWait(t *testing.T) {
	e := newEnv(t, wholeFiles)
	if _, _, err := e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", OnConflict: "sometimes"}); err == nil ||
		!strings.Contains(err.Error(), `on-conflict "sometimes": want refuse or wait`) {
		t.Fatalf("on_conflict sometimes: %v", err)
	}
	a, w := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	e.page(w, 0, false, named("a.dat", "b.dat"))
	b, w := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", OnConflict: transfer.ConflictWait})
	e.page(w, 0, false, named("b.dat", "c.dat"))
	jb := e.job(b.ID)
	if jb.State != transfer.JobActive || jb.OnConflict != transfer.ConflictWait {
		t.Fatalf("waiting job: %s %q", jb.State, jb.Reason)
	}
	fs, err := e.st.ListJobFiles(e.ctx, store.JobFileFilter{Job: b.ID})
	if err != nil || len(fs) != 2 || !slices.Equal(fs[0].WaitsFor, []string{a.ID}) || fs[1].WaitsFor != nil {
		t.Fatalf("waiting job's files: %+v, %v", fs, err)
	}
	r := newWriterRun(e)
	ws := r.claimAll()
	// a.dat and b.dat of the first, c.dat of the second; b.dat of the
	// second waits.
	if r.claimed[a.ID] != 2 || r.claimed[b.ID] != 1 {
		t.Fatalf("claimed: %v", r.claimed)
	}
	if more := r.claimAll(); len(more) != 0 {
		t.Fatalf("claimed while the first writes: %+v", more)
	}
	if jb := e.job(b.ID); jb.Reason != "waiting for job "+a.ID+" to end writing dst:in/data/b.dat (on_conflict wait)" {
		t.Fatalf("waiting job's reason: %q", jb.Reason)
	}
	r.report(ws)
	r.untilEnded(a.ID, b.ID)
	for _, id := range []string{a.ID, b.ID} {
		if j := e.job(id); j.State != transfer.JobSucceeded || j.FilesDone != 2 {
			t.Fatalf("job %s: %s %q, %d files done", id, j.State, j.Reason, j.FilesDone)
		}
	}
}

// TestWritersInterleaved: two jobs' listings in pages, interleaved, each
// listing a path the other's earlier page holds. With wait on both, each
// waits for the other where it came second and neither fails nor blocks
// the other for good; with refuse, the one listing a held path second
// fails naming the other, which succeeds.
func TestWritersInterleaved(t *testing.T) {
	for _, mode := range []string{transfer.ConflictWait, transfer.ConflictRefuse} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, wholeFiles)
			req := transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", OnConflict: mode}
			a, wa := e.submitAs(alice, req)
			b, wb := e.submitAs(alice, req)
			e.page(wa, 0, true, named("a0", "a1", "x"))
			e.page(wb, 0, true, named("b0", "y"))
			e.page(wa, 1, true, named("a2", "y"))   // y: b's first
			e.page(wb, 1, false, named("b1", "x"))  // x: a's first
			e.page(wa, 2, false, named("a3", "a4")) // a's last
			if mode == transfer.ConflictRefuse {
				// a listed y second: refused at that page, naming b.
				ja, jb := e.job(a.ID), e.job(b.ID)
				if ja.State != transfer.JobFailed || !strings.Contains(ja.Reason, "destination dst:in/data/y is being written by job "+b.ID) {
					t.Fatalf("first job: %s %q", ja.State, ja.Reason)
				}
				// b listed x once a had failed: a's claim went with it.
				if jb.State != transfer.JobActive {
					t.Fatalf("second job: %s %q", jb.State, jb.Reason)
				}
				newWriterRun(e).untilEnded(b.ID)
				if jb := e.job(b.ID); jb.State != transfer.JobSucceeded || jb.FilesDone != 4 {
					t.Fatalf("second job: %s %q", jb.State, jb.Reason)
				}
				return
			}
			r := newWriterRun(e)
			r.untilEnded(a.ID, b.ID)
			for id, n := range map[string]int{a.ID: 7, b.ID: 4} {
				if j := e.job(id); j.State != transfer.JobSucceeded || j.FilesDone != n {
					t.Fatalf("job %s: %s %q, %d files done", id, j.State, j.Reason, j.FilesDone)
				}
			}
		})
	}
}

// TestWritersEndedRelease: a job that ends (cancelled, or refused at its
// listing) holds none of its paths: the job waiting for it goes on, and a
// job refusing a conflict lists them.
func TestWritersEndedRelease(t *testing.T) {
	e := newEnv(t, wholeFiles)
	a, w := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	e.page(w, 0, false, named("a.dat", "b.dat"))
	b, w := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", OnConflict: transfer.ConflictWait})
	e.page(w, 0, false, named("a.dat", "b.dat"))
	r := newWriterRun(e)
	ws := r.claimAll()
	if r.claimed[a.ID] != 2 || r.claimed[b.ID] != 0 {
		t.Fatalf("claimed: %v", r.claimed)
	}
	if _, err := e.s.Cancel(e.ctx, alice, a.ID, ""); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		for _, f := range w.Files {
			delete(r.moving, f.Dest) // the cancelled job's pushes are fenced
		}
	}
	r.untilEnded(b.ID)
	if j := e.job(b.ID); j.State != transfer.JobSucceeded || j.FilesDone != 2 {
		t.Fatalf("the job that waited: %s %q", j.State, j.Reason)
	}

	// A listing stopped half way (its job QUEUED) holds its paths; once
	// refused for another reason, it holds none.
	c, wc := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	e.page(wc, 0, true, named("c.dat"))
	d, wd := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	e.page(wd, 0, false, named("c.dat"))
	if j := e.job(d.ID); j.State != transfer.JobFailed || !strings.Contains(j.Reason, "being written by job "+c.ID) {
		t.Fatalf("a job writing what a half-listed one holds: %s %q", j.State, j.Reason)
	}
	if ans, err := e.s.Listing(e.ctx, agent("a1"), wc.Task.ID, apiv1.Listing{Attempt: wc.Task.Attempt, Page: 1, Files: named("../x")}); err != nil || ans.Task.State != transfer.TaskFailed {
		t.Fatalf("a refused page: %+v, %v", ans, err)
	}
	f, wf := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	e.page(wf, 0, false, named("c.dat"))
	if j := e.job(f.ID); j.State != transfer.JobActive {
		t.Fatalf("a job writing what a refused one held: %s %q", j.State, j.Reason)
	}
}

// TestWritersAtScale: a page is checked against the other writers by a
// few reads, whatever its files; the files of a job that all wait are
// passed over a bounded number of pages a claim, so a claim's reads do
// not grow with them, and a file further on that need not wait is found
// by the next claims.
func TestWritersAtScale(t *testing.T) {
	e := newEnv(t, wholeFiles)
	reads := service.CountReads(e.s)
	n := 3 * service.MaxWaitPages * service.BatchFiles
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("f%06d", i))
	}
	all := named(names...)
	// a's listing stops before its last page: a stays QUEUED, its files
	// pending, and every file of b waiting for a waits on.
	a, wa := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	for i, at := 0, 0; at < n; i++ {
		end := min(at+service.MaxListingFiles, n)
		e.page(wa, i, true, all[at:end])
		at = end
	}
	b, wb := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", OnConflict: transfer.ConflictWait})
	for i, at := 0, 0; at < n; i++ {
		end := min(at+service.MaxListingFiles, n)
		q0, _ := reads.Counts()
		e.page(wb, i, true, all[at:end])
		if q1, _ := reads.Counts(); q1-q0 > 20 {
			t.Fatalf("page %d of %d files: %d reads", i, end-at, q1-q0)
		}
		at = end
	}
	e.page(wb, (n+service.MaxListingFiles-1)/service.MaxListingFiles, false, named("zzz"))
	if j := e.job(b.ID); j.State != transfer.JobActive || j.FilesTotal != n+1 {
		t.Fatalf("waiting job: %s %q, %d files", j.State, j.Reason, j.FilesTotal)
	}
	if j := e.job(a.ID); j.State != transfer.JobQueued {
		t.Fatalf("half-listed job: %s %q", j.State, j.Reason)
	}
	var got []string
	for claims := 1; len(got) == 0; claims++ {
		if claims > 4 {
			t.Fatalf("zzz not claimed in %d claims", claims-1)
		}
		_, r0 := reads.Counts()
		for _, w := range e.claim("a1", 8) {
			for _, f := range w.Files {
				got = append(got, f.Path)
			}
		}
		if _, r1 := reads.Counts(); r1-r0 > 3*service.MaxWaitPages*service.BatchFiles {
			t.Fatalf("claim %d read %d rows; the waiting job has %d files", claims, r1-r0, n)
		}
	}
	if !slices.Equal(got, []string{"data/zzz"}) {
		t.Fatalf("claimed %d files (%v ...); want data/zzz alone", len(got), got[:min(3, len(got))])
	}
}

// TestWritersDryRun: a dry run writes nothing, so it is never refused for
// another job's files and never holds its own.
func TestWritersDryRun(t *testing.T) {
	e := newEnv(t, wholeFiles)
	a, w := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	e.page(w, 0, false, named("a.dat"))
	dry, w := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", DryRun: true})
	if ans := e.page(w, 0, false, named("a.dat", "b.dat")); ans.Task.State != transfer.TaskSucceeded {
		t.Fatalf("the dry run's listing beside job %s: %+v", a.ID, ans.Task)
	}
	if j := e.job(dry.ID); j.State == transfer.JobFailed {
		t.Fatalf("the dry run: %s %q", j.State, j.Reason)
	}
	b, w := e.submitAs(alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	e.page(w, 0, false, named("b.dat"))
	if j := e.job(b.ID); j.State != transfer.JobActive {
		t.Fatalf("a job writing what a dry run listed: %s %q", j.State, j.Reason)
	}
}
