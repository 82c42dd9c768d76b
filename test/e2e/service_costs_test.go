//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/transfer"
)

// TestServiceCosts (issue 28, finding 11) through the real controller
// and data nodes on loopback: a listing the controller refuses (two
// sources that both hold f1.dat) fails its job with the reason at once,
// is not listed again, and nothing is written at the destination. The
// submissions' bounds (finding 5) are internal/api's TestSubmitCosts.
func TestServiceCosts(t *testing.T) {
	t.Parallel()
	s := startSvc(t, svcOpts{})
	// Two sources that both hold f1.dat would land on one path.
	for _, d := range []string{"x/run1", "y/run1"} {
		writeRandom(t, filepath.Join(s.srcRoot, d, "f1.dat"), 1000, 1)
	}
	id := s.submit("siteA:x/run1", "siteA:y/run1", "siteB:in").Job.ID
	var j apiv1.JobPage
	if !waitFor(2*time.Minute, func() bool { j = s.job(s.alice, id); return transfer.JobEnded(j.Job.State) }) {
		t.Fatalf("job %s is still %s (%s): the refused listing is tried again", id, j.Job.State, j.Job.Reason)
	}
	want := "the listing was refused: files x/run1/f1.dat and y/run1/f1.dat would both land at siteB:in/run1/f1.dat"
	if j.Job.State != transfer.JobFailed || j.Job.Reason != want {
		t.Fatalf("job %s: %s %q, want FAILED %q", id, j.Job.State, j.Job.Reason, want)
	}
	if len(j.Tasks) != 1 || j.Tasks[0].Kind != transfer.TaskList || j.Tasks[0].Attempt != 1 || j.Tasks[0].State != transfer.TaskFailed {
		t.Fatalf("tasks: %+v", j.Tasks)
	}
	if w := s.lp(s.alice, "transfer", "wait", id, "--timeout", "1m"); w.code != 1 || !strings.Contains(w.stdout+w.stderr, "would both land at") {
		t.Errorf("transfer wait: exit %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	if _, err := os.Stat(filepath.Join(s.dstRoot, "in")); !os.IsNotExist(err) {
		t.Errorf("the destination was written: %v", err)
	}
}
