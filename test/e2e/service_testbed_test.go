//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/transfer"
)

// The transfer service on the testbed, as root: the two-site testbed with
// an agent in every node, a data node in each of a1, a2 (endpoint siteA)
// and b1, b2 (endpoint siteB), one controller, and deadline jobs that book
// the network before they are accepted. One testbed and one controller
// serve every step, in turn:
//   - an infeasible deadline is refused with the earliest completion and
//     books nothing;
//   - a deadline job runs on both node pairs over their booked paths and
//     finishes before its deadline, verified file by file; its --id again
//     gives the same job, and another request under it is refused;
//   - bad input is refused in one line and stores nothing;
//   - the controller SIGKILLed mid-job and restarted on its store;
//   - a source data node stopped (SIGSTOP) until its lease lapses, its
//     tasks requeued and run by the other node, then let go (SIGCONT):
//     its old attempt is refused by the destination or stopped by the
//     controller;
//   - a source data node SIGKILLed mid-job: another node finishes its
//     tasks;
//
// and every job of them succeeds with every file identical.
func TestServiceOnTestbed(t *testing.T) {
	t.Parallel()
	// Each node sends at most 50 Mbit/s, so a job of the 44 MB dataset
	// takes seconds (a fault lands mid-job) and the planner has a rate to
	// plan with.
	const rate = 50e6
	s := startSvc(t, svcOpts{testbed: true, rate: "50M"})
	files := makeDataset(t, s.srcRoot, 3)
	total := datasetBytes(t, s.srcRoot, files)
	// deadline is an absolute deadline in d, so that a repeated
	// submission is the same request.
	deadline := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }

	t.Run("infeasible deadline", func(t *testing.T) {
		before := s.reservations()
		// 44 MB at 2 × 50 Mbit/s take 3.5 s at best.
		r := s.lp(s.alice, "transfer", "submit", "siteA:run1", "siteB:late", "--deadline", "+2s")
		checkFailure(t, "submit with a deadline that cannot be met", r, "cannot be met", "earliest completion")
		if r.stdout != "" {
			t.Errorf("a refused submission printed a job line: %q", r.stdout)
		}
		if got := s.reservations(); got != before {
			t.Errorf("an infeasible job left reservations: %d before, %d after", before, got)
		}
		// The job is kept FAILED with the refusal as its reason.
		if r := s.ok(s.alice, "transfer", "list", "--json"); !strings.Contains(r.stdout, "siteB:late") || !strings.Contains(r.stdout, "cannot be met") {
			t.Errorf("the refused job is not listed FAILED with its reason:\n%s", r.stdout)
		}
	})

	var first string // the deadline job's id
	t.Run("deadline job", func(t *testing.T) {
		s0 := s.tb.status()
		submitted := time.Now()
		end := deadline(2 * time.Minute)
		resp := s.submit("siteA:run1", "siteB:in", "--deadline", end, "--id", "run1-first")
		first = resp.Job.ID
		// Booked before it was accepted: the answer names its reservations.
		if !resp.Created {
			t.Errorf("the first submission says it was not created")
		}
		booked(t, resp.Job)
		j := s.arrived(s.wait(first), first, files, "in")
		s1 := s.tb.status()
		t.Logf("job %s: %s in %v (ACTIVE %v), algorithm %q, pairs %+v", j.Job.ID, j.Job.State, time.Since(submitted).Round(time.Millisecond),
			j.Job.EndedAt.Sub(j.Job.StartedAt).Round(time.Millisecond), j.Job.Algorithm, j.Job.Pairs)
		if !j.Job.EndedAt.Before(j.Job.Deadline) {
			t.Errorf("ended at %v, after its deadline %v", j.Job.EndedAt, j.Job.Deadline)
		}
		if j.Job.Algorithm == "" {
			t.Errorf("the job does not say which algorithm booked it")
		}
		var reservedLinks []string
		for _, p := range j.Job.Pairs {
			if p.Reservation == "" {
				// A pair taken on without a booking: a node's lease lapsed
				// on a busy machine and another node ran its task.
				t.Logf("pair %s → %s, unbooked, moved %d bytes", p.From, p.To, p.BytesDone)
				continue
			}
			if p.RateBps == 0 || p.RateBps > rate || p.ShareBytes <= 0 {
				t.Errorf("pair %s → %s booked %d bit/s for %d bytes: want a share at up to the nodes' %v bit/s", p.From, p.To, p.RateBps, p.ShareBytes, rate)
			}
			res := s.reservation(p.Reservation)
			if res.Owner != "alice" || res.From != p.From || res.To != p.To {
				t.Errorf("pair %s → %s: reservation %+v", p.From, p.To, res)
			}
			for _, h := range res.Path {
				if h.Link == "wan" || h.Link == "dedicated" {
					reservedLinks = append(reservedLinks, h.Link)
				}
			}
		}
		pairs := map[string]bool{}
		for _, f := range j.Files {
			pairs[f.From+">"+f.To] = true
		}
		// Both booked pairs carry files, unless a node's lease lapsed on a
		// busy machine and its tasks went to another node (a later
		// attempt says so).
		if k := slices.IndexFunc(j.Tasks, func(k transfer.Task) bool { return k.Attempt > 1 }); k >= 0 {
			t.Logf("task %s ran attempt %d: a lease lapsed, so the files went over %v", j.Tasks[k].ID, j.Tasks[k].Attempt, pairs)
		} else {
			for _, p := range j.Job.Pairs {
				if p.Reservation != "" && !pairs[p.From+">"+p.To] {
					t.Errorf("the files went over %v: want every booked node pair (%s > %s)", pairs, p.From, p.To)
				}
			}
			checkBothPairs(t, j)
		}
		var onReserved int64
		for _, l := range uniq(reservedLinks) {
			onReserved += int64(s1.bytesOn(l, "ra") - s0.bytesOn(l, "ra"))
		}
		t.Logf("bytes on the reserved links %v: %d of %d", uniq(reservedLinks), onReserved, total)
		// The pairs' 2 × 50 Mbit/s fit on the dedicated link: none is
		// booked on the routed wan (DESIGN.md, "Path choice").
		if slices.Contains(reservedLinks, "wan") {
			t.Errorf("the pairs were booked on %v: want the dedicated link alone, which has room for both", reservedLinks)
		}
		// Copies are handed out only once the job is ACTIVE, which it is
		// once its reservations are, every node's part in place: every
		// byte went steered, whenever it went.
		if onReserved < total {
			t.Errorf("the reserved links %v carried %d bytes of %d", uniq(reservedLinks), onReserved, total)
		}

		// The same --id and request again: the first job, not a second
		// one; another request under it: refused (409), nothing made.
		jobs, resvs := s.stored()
		again := s.submit("siteA:run1", "siteB:in", "--deadline", end, "--id", "run1-first")
		if again.Job.ID != first || again.Created {
			t.Errorf("resubmission with the same --id: job %s (created %v), want %s", again.Job.ID, again.Created, first)
		}
		status, body := s.post(s.alice, "/api/v1/jobs", transfer.JobRequest{Sources: []string{"siteA:run1"}, Destination: "siteB:other",
			Deadline: j.Job.Deadline, Key: "run1-first"})
		if status != 409 || !strings.Contains(body, "with another request") {
			t.Errorf("another request under the same id: %d %s, want 409", status, body)
		}
		checkFailure(t, "a resubmission that differs", s.lp(s.alice, "transfer", "submit", "siteA:run1", "siteB:other", "--deadline", end,
			"--id", "run1-first"), "transfer submit", "run1-first", first)
		if j2, r2 := s.stored(); j2 != jobs || r2 != resvs {
			t.Errorf("the repeated submissions stored %d jobs and %d reservations, want none", j2-jobs, r2-resvs)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		if first == "" {
			t.Skip("needs the deadline job")
		}
		jobs, resvs := s.stored()
		for _, c := range []struct {
			what string
			tok  string
			args []string
			want []string
		}{
			{"unknown endpoint", s.alice, []string{"transfer", "submit", "nowhere:run1", "siteB:in9", "--deadline", "+1m"}, []string{"transfer submit", "nowhere"}},
			{"path outside the root", s.alice, []string{"transfer", "submit", "siteA:../etc", "siteB:in9", "--deadline", "+1m"}, []string{"transfer submit", "out of the endpoint's root"}},
			{"destination outside the root", s.alice, []string{"transfer", "submit", "siteA:run1", "siteB:../../x", "--deadline", "+1m"}, []string{"transfer submit", "out of the endpoint's root"}},
			{"an endpoint bob may not use", s.bob, []string{"transfer", "submit", "siteA:run1", "siteB:in9", "--deadline", "+1m"}, []string{"transfer submit", "siteA"}},
			{"deadline in the past", s.alice, []string{"transfer", "submit", "siteA:run1", "siteB:in9", "--deadline", "2020-01-01T00:00:00Z"}, []string{"transfer submit", "in the past"}},
			{"malformed time", s.alice, []string{"transfer", "submit", "siteA:run1", "siteB:in9", "--deadline", "tomorrow at nine"}, []string{"transfer submit", "invalid time"}},
			{"two policies", s.alice, []string{"transfer", "submit", "siteA:run1", "siteB:in9", "--overwrite", "--skip-existing"}, []string{"transfer submit", "exclude each other"}},
			{"another user's job", s.bob, []string{"transfer", "status", first}, []string{"transfer status", first}},
			{"another user's job, cancelled", s.bob, []string{"transfer", "cancel", first}, []string{"transfer cancel", first}},
		} {
			checkFailure(t, c.what, s.lp(c.tok, c.args...), c.want...)
		}
		if j, r := s.stored(); j != jobs || r != resvs {
			t.Errorf("the bad input stored %d jobs and %d reservations, want none", j-jobs, r-resvs)
		}
		if j := s.job(s.alice, first); j.Job.State != transfer.JobSucceeded {
			t.Errorf("alice's job after bob's cancel: %s", j.Job.State)
		}
		if _, err := os.Stat(filepath.Join(s.dstRoot, "in9")); err == nil {
			t.Errorf("a refused job made its destination")
		}
	})

	t.Run("controller killed", func(t *testing.T) {
		var failed int
		id, dst, wait, j := s.faultMidJob(t, files, "in-ctl", func(apiv1.JobPage) bool {
			failed = s.nodeLogCount("failed; trying again")
			s.kill()
			return true
		})
		// Until the data nodes found it gone.
		if !waitFor(30*time.Second, func() bool { return s.nodeLogCount("failed; trying again") > failed }) {
			t.Errorf("no data node noticed the controller gone")
		}
		s.launch()
		// The reservations carry on under the new process, and the agents
		// come back to it.
		for _, p := range j.Job.Pairs {
			if res := s.reservation(p.Reservation); res.State != "ACTIVE" && s.job(s.alice, id).Job.State == transfer.JobActive {
				t.Errorf("pair %s → %s: reservation %s is %s after the restart", p.From, p.To, p.Reservation, res.State)
			}
		}
		j = s.arrived(wait, id, files, dst)
		t.Logf("job %s after the restart: %s, pairs %+v", id, j.Job.Reason, j.Job.Pairs)
		if !j.Job.EndedAt.Before(j.Job.Deadline) {
			t.Errorf("ended at %v, after its deadline %v", j.Job.EndedAt, j.Job.Deadline)
		}
		if out := s.ok(s.admin, "agent", "list").stdout; strings.Count(out, " alive ") != 6 {
			t.Errorf("agent list after the restart does not show six agents alive:\n%s", out)
		}
	})

	t.Run("stale attempt", func(t *testing.T) {
		// The tasks a1 ran at the last look before the stop that still
		// have files to move, read after the stop (the others are still
		// ACTIVE on a1, or requeued and claimed again once its lease
		// lapsed). Then, until one of them runs again elsewhere, at a new
		// attempt (or has run: a new attempt with little left to move may
		// end between two looks). Had a1 ended them, or reported every
		// file of them (a report sent before the stop may land after the
		// look: the job then ends without a new attempt), the job is let
		// finish and another one tried.
		var stale []transfer.Task
		var again transfer.Task
		id, dst, wait, _ := s.faultMidJob(t, files, "in-stale", func(j apiv1.JobPage) bool {
			seen := running(j, "a1")
			s.nodes["a1"].Signal(syscall.SIGSTOP)
			stale = stillToMove(seen, s.job(s.alice, j.Job.ID))
			if len(stale) == 0 {
				s.nodes["a1"].Signal(syscall.SIGCONT)
				return false
			}
			s.waitNodes(map[string]int{"siteA": 1, "siteB": 2})
			var ended bool
			if !waitFor(time.Minute, func() bool {
				now := s.job(s.alice, j.Job.ID)
				for _, k := range now.Tasks {
					for _, o := range stale {
						if k.ID == o.ID && k.Attempt > o.Attempt && k.From != "a1" && (k.State == transfer.TaskActive || k.State == transfer.TaskSucceeded) {
							again = k
							return true
						}
					}
				}
				ended = transfer.JobEnded(now.Job.State)
				return ended
			}) {
				s.nodes["a1"].Signal(syscall.SIGCONT)
				t.Fatal("no task of the stopped node ran a new attempt")
			}
			if ended {
				s.nodes["a1"].Signal(syscall.SIGCONT)
				return false
			}
			return true
		})
		t.Logf("task %s: attempt %d on %s → %s", again.ID, again.Attempt, again.From, again.To)
		// The old attempt ends when a1 runs again: the destination, told
		// the new fence by its heartbeat's fences or the new attempt's
		// grant, cuts or refuses its session, or the controller tells a1
		// to stop. (A session of a1's that was under way when it stopped
		// is cut while it is stopped; on a busy machine a1 may have been
		// stopped before its session began, so that is not waited for.)
		s.nodes["a1"].Signal(syscall.SIGCONT)
		s.arrived(wait, id, files, dst)
		var refused string
		for _, o := range stale {
			if o.ID == again.ID {
				refused = fmt.Sprintf("attempt %d of task %s is no longer current", o.Attempt, o.ID)
			}
		}
		if !waitFor(30*time.Second, func() bool {
			if strings.Contains(s.nodes[again.To].err.String(), refused) {
				return true
			}
			for _, l := range strings.Split(s.nodes["a1"].err.String(), "\n") {
				if strings.Contains(l, again.ID) && (strings.Contains(l, "stopping task") || strings.Contains(l, "no longer current")) {
					return true
				}
			}
			return false
		}) {
			t.Errorf("a1's old attempt of task %s was never stopped:\n%s\n%s:\n%s", again.ID, s.nodes["a1"].err.String(), again.To, s.nodes[again.To].err.String())
		}
	})

	t.Run("data node killed", func(t *testing.T) {
		// Both source nodes are stopped, then a1's tasks read: a1 can no
		// longer end them. Had it ended them all between the last look
		// and the stop, the job is let finish and another one tried.
		// With a2 stopped while a1 dies no source node is alive, so the
		// job cannot end, however long what follows takes.
		var lost []transfer.Task
		id, dst, wait, _ := s.faultMidJob(t, files, "in-kill", func(j apiv1.JobPage) bool {
			s.nodes["a2"].Signal(syscall.SIGSTOP)
			s.nodes["a1"].Signal(syscall.SIGSTOP)
			// a1's tasks with files to move: ACTIVE until its lease
			// lapses, then QUEUED, still naming a1 (no live source node
			// can claim them), however late this reads them.
			now := s.job(s.alice, j.Job.ID)
			var mine []transfer.Task
			for _, k := range now.Tasks {
				if k.Kind == transfer.TaskCopy && k.From == "a1" && (k.State == transfer.TaskActive || k.State == transfer.TaskQueued) {
					mine = append(mine, k)
				}
			}
			lost = stillToMove(mine, now)
			if len(lost) > 0 {
				s.nodes["a1"].Signal(syscall.SIGKILL)
				s.nodes["a1"].Wait()
				// A report a1 sent before the stop may land after the look
				// and end the job: a1 is started again and another job
				// tried. Once a1 is gone, no one can end it.
				if now := s.job(s.alice, j.Job.ID); !transfer.JobEnded(now.Job.State) && len(stillToMove(lost, now)) > 0 {
					return true
				}
				s.startNode("a1")
				s.nodes["a2"].Signal(syscall.SIGCONT)
				return false
			}
			s.nodes["a1"].Signal(syscall.SIGCONT)
			s.nodes["a2"].Signal(syscall.SIGCONT)
			return false
		})
		// A wait that times out first exits 2.
		if r := s.lp(s.alice, "transfer", "wait", id, "--timeout", "1s"); r.code != 2 || !strings.Contains(r.stderr, "still ACTIVE after 1s") {
			t.Errorf("transfer wait --timeout 1s of a running job: exit %d\n%s", r.code, r.stderr)
		}
		s.nodes["a2"].Signal(syscall.SIGCONT)
		s.waitNodes(map[string]int{"siteA": 1, "siteB": 2})
		j := s.arrived(wait, id, files, dst)
		for _, o := range lost {
			for _, k := range j.Tasks {
				if k.ID != o.ID {
					continue
				}
				t.Logf("task %s of the killed node (%d bytes moved by attempt %d): attempt %d on %s → %s, %s", k.ID, o.BytesDone, o.Attempt, k.Attempt, k.From, k.To, k.State)
				// A later attempt, not necessarily the next: a2 was stopped as
				// long as a1, so on a busy machine its own lease may lapse
				// too and the task be handed out once more.
				if k.From == "a1" || k.Attempt <= o.Attempt || k.State != transfer.TaskSucceeded {
					t.Errorf("task %s of the killed node: attempt %d on %s, %s; want a later attempt than %d on another node, SUCCEEDED",
						k.ID, k.Attempt, k.From, k.State, o.Attempt)
				}
			}
		}
	})
}

// stillToMove is those of tasks that page j (read later) shows neither
// ended at the same attempt nor with every file of theirs arrived.
func stillToMove(tasks []transfer.Task, j apiv1.JobPage) []transfer.Task {
	var out []transfer.Task
	for _, o := range tasks {
		i := slices.IndexFunc(j.Tasks, func(k transfer.Task) bool { return k.ID == o.ID })
		if i < 0 || (j.Tasks[i].Attempt == o.Attempt && j.Tasks[i].State == transfer.TaskSucceeded) {
			continue
		}
		if slices.ContainsFunc(j.Files, func(f transfer.JobFile) bool { return f.Task == o.ID && f.State != transfer.FileSucceeded }) {
			out = append(out, o)
		}
	}
	return out
}

// booked checks that deadline job j was booked on two node pairs that
// between them use both nodes of each endpoint (the joint plan spreads over
// the pairs). A pair the job took on later without a booking (a task of a
// node whose lease lapsed, run by another node) may be listed too.
func booked(t *testing.T, j transfer.Job) {
	t.Helper()
	from, to := map[string]bool{}, map[string]bool{}
	n := 0
	for _, p := range j.Pairs {
		if p.Reservation != "" {
			n++
			from[p.From], to[p.To] = true, true
		}
	}
	if n != 2 || !from["a1"] || !from["a2"] || !to["b1"] || !to["b2"] {
		t.Fatalf("deadline job %s is not booked on two pairs over both nodes of each site: %+v", j.ID, j.Pairs)
	}
}

// reservations counts the reservations stored.
func (s *svc) reservations() int {
	s.t.Helper()
	return strings.Count(s.ok(s.admin, "reserve", "list", "--json").stdout, `"id":"r-`)
}

// stored counts the jobs of alice and bob, and the reservations.
func (s *svc) stored() (jobs, reservations int) {
	s.t.Helper()
	for _, tok := range []string{s.alice, s.bob} {
		jobs += strings.Count(s.ok(tok, "transfer", "list", "--json").stdout, `"id":"j-`)
	}
	return jobs, s.reservations()
}

// reservation reads a reservation from the (leading) controller.
func (s *svc) reservation(id string) cliResv {
	s.t.Helper()
	return readReservation(s.t, fmt.Sprintf("http://127.0.0.1:%d", s.port), s.admin, id)
}

// nodeLogCount counts what the data nodes logged containing text.
func (s *svc) nodeLogCount(text string) int {
	n := 0
	for _, p := range s.nodes {
		n += strings.Count(p.err.String(), text)
	}
	return n
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// post sends a JSON body to a route of the (leading) controller as the
// holder of tok and returns the status and body.
func (s *svc) post(tok, path string, body any) (int, string) {
	s.t.Helper()
	return postJSON(s.t, fmt.Sprintf("http://127.0.0.1:%d", s.port), tok, path, body)
}

// faultMidJob submits a deadline job of the dataset (files) to a fresh
// destination named prefix and the try's number, waits until it is under
// way with a task of a1 running, checks it was booked, and calls fault,
// which injects the fault and says whether it landed mid-job (false: what
// it needed ended first; it has undone what it did). A job that ended
// before it was seen under way, or that the fault missed, is let finish
// verified and another is tried, three at most: a job lasts seconds, and
// a busy machine can let one slip between two looks.
func (s *svc) faultMidJob(t *testing.T, files []string, prefix string, fault func(apiv1.JobPage) bool) (id, dst string, wait *proc, j apiv1.JobPage) {
	t.Helper()
	for try := 1; try <= 3; try++ {
		s.waitNodes(map[string]int{"siteA": 2, "siteB": 2})
		dst = fmt.Sprintf("%s%d", prefix, try)
		id = s.submit("siteA:run1", "siteB:"+dst, "--deadline", "+2m").Job.ID
		wait = s.wait(id)
		var ok bool
		if j, ok = s.underWay(id, "a1"); ok {
			booked(t, j.Job)
			if fault(j) {
				return id, dst, wait, j
			}
		}
		t.Logf("try %d: job %s ended what the fault needed before it landed", try, id)
		s.arrived(wait, id, files, dst)
	}
	t.Fatal("three jobs ended what the fault needed before it could land")
	return
}
