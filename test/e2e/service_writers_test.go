//go:build linux

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/transfer"
)

// TestServiceOneWriter: two jobs writing the same destination files
// never both fail (issue 29). While the first moves (its pushes held by
// a gate), a second to the same files is refused at its listing, naming
// the first and a path (--on-conflict refuse, the default), and a third
// with --on-conflict wait runs without moving a file until the first's
// have ended; then the first and the third both succeed.
func TestServiceOneWriter(t *testing.T) {
	t.Parallel()
	gate := newPushGate(0)
	s := startSvc(t, svcOpts{advertise: gate.advertise(t)})
	var files []string
	for i := range 4 {
		rel := fmt.Sprintf("run1/f%d.dat", i)
		writeRandom(t, filepath.Join(s.srcRoot, rel), 300_000, uint64(i+1))
		files = append(files, rel)
	}
	first := s.submit("siteA:run1", "siteB:in").Job.ID
	firstWait := s.wait(first)
	state := func(id string) apiv1.JobPage { return s.job(s.alice, id) }
	var p apiv1.JobPage
	if !waitFor(2*time.Minute, func() bool { p = state(first); return p.Job.State == transfer.JobActive && len(p.Tasks) > 1 }) {
		t.Fatalf("the first job did not start moving: %s %q", p.Job.State, p.Job.Reason)
	}

	// The default: refused at its listing, naming the first and a path.
	second := s.submit("siteA:run1", "siteB:in").Job.ID
	if !waitFor(2*time.Minute, func() bool { p = state(second); return transfer.JobEnded(p.Job.State) }) {
		t.Fatalf("the second job did not end: %s %q", p.Job.State, p.Job.Reason)
	}
	if p.Job.State != transfer.JobFailed || !strings.HasPrefix(p.Job.Reason, "the listing was refused: destination siteB:in/run1/f") ||
		!strings.HasSuffix(p.Job.Reason, " is being written by job "+first+" (another writer): resubmit when it ends, or with --on-conflict wait") {
		t.Fatalf("the second job: %s %q; want FAILED naming %s", p.Job.State, p.Job.Reason, first)
	}
	if r := s.lp(s.alice, "transfer", "wait", second); r.code != 1 || !strings.Contains(r.stderr+r.stdout, "being written by job "+first) {
		t.Errorf("transfer wait on the refused job: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// With wait: it runs, every file waiting for the first's.
	third := s.submit("siteA:run1", "siteB:in", "--on-conflict", "wait").Job.ID
	thirdWait := s.wait(third)
	waiting := "waiting for job " + first + " to end writing siteB:in/run1/f"
	if !waitFor(2*time.Minute, func() bool { p = state(third); return strings.HasPrefix(p.Job.Reason, waiting) }) {
		t.Fatalf("the third job: %s %q; want it %s...", p.Job.State, p.Job.Reason, waiting)
	}
	if f := state(first); f.Job.State != transfer.JobActive {
		t.Fatalf("the first job ended while held: %s %q", f.Job.State, f.Job.Reason)
	}
	for _, k := range p.Tasks {
		if k.Kind == transfer.TaskCopy {
			t.Fatalf("the third job copies while the first writes: %+v", k)
		}
	}
	for _, f := range p.Files {
		if len(f.WaitsFor) != 1 || f.WaitsFor[0] != first {
			t.Fatalf("the third job's file %s waits for %v; want %s", f.Path, f.WaitsFor, first)
		}
	}
	if r := s.ok(s.alice, "transfer", "status", third); !strings.Contains(r.stdout, "on conflict  wait") {
		t.Errorf("transfer status of the waiting job:\n%s", r.stdout)
	}

	gate.open()
	s.arrived(firstWait, first, files, "in")
	s.arrived(thirdWait, third, files, "in")
}
