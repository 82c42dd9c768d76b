//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/transfer"
)

// TestServiceCosts (issue 28, findings 5 and 11) through the real
// controller and data nodes on loopback: a submission of 10,001 sources
// is 413 and one from a user allowed on no endpoint 403 before its
// validation, with nothing stored; a listing the controller refuses (two
// sources that both hold f1.dat) fails its job with the reason at once,
// is not listed again, and nothing is written at the destination.
func TestServiceCosts(t *testing.T) {
	t.Parallel()
	s := startSvc(t, svcOpts{})
	srcs := func(n int, dup bool) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("siteA:d/%05d", i)
		}
		if dup {
			out[n-1] = out[0]
		}
		return out
	}
	for _, tc := range []struct {
		name, tok string
		n         int
		dup       bool
		status    int
		code      string
		says      string
	}{
		{"10,001 sources", s.alice, 10001, false, 413, apiv1.CodeTooLarge, "10001 sources: a job takes at most 10000"},
		{"bob, a repeated source", s.bob, 5000, true, 403, apiv1.CodeForbidden, "bob may not use endpoint siteA"},
		{"alice, a repeated source", s.alice, 5000, true, 400, apiv1.CodeInvalid, "is given twice"},
	} {
		st, body := s.post(tc.tok, "/api/v1/jobs", transfer.JobRequest{Sources: srcs(tc.n, tc.dup), Destination: "siteB:in"})
		var eb apiv1.ErrorBody
		if err := json.Unmarshal([]byte(body), &eb); err != nil || st != tc.status || eb.Error.Code != tc.code || !strings.Contains(eb.Error.Message, tc.says) {
			t.Errorf("%s: %d %s", tc.name, st, body)
		}
	}
	if out := s.ok(s.admin, "transfer", "list", "--json").stdout; strings.Contains(out, `"j-`) {
		t.Fatalf("jobs stored by refused submissions:\n%s", out)
	}

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
