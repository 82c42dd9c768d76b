//go:build linux

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/transfer"
)

// TestServiceForgedReport (issue 28, finding 4): a compromised source
// data node (the test, holding a token bound to a1, with siteB's real
// data nodes as destinations) reports its copy task's file OK with a
// bogus checksum and absurd figures, and nothing written at the
// destination: with no receipt, with a made-up one, and with a genuine
// receipt of another file replayed. None counts: the file is sent again,
// then FAILED saying the destination did not confirm it; the job is not
// SUCCEEDED, nothing is counted as moved (the job's tallies, the
// service's moved bytes in /metrics), and the stored figures are within
// the task's bounds. The honest path still works: a file the real
// destination wrote, reported with its receipt, ends its job SUCCEEDED
// with the destination's checksum.
func TestServiceForgedReport(t *testing.T) {
	t.Parallel()
	s := startSvc(t, svcOpts{})
	f := startFakeSource(t, s)
	ctx := context.Background()

	// The honest path: pushed to the real destination, which confirms it.
	content := randomBytes(5000)
	sum := fmt.Sprintf("%08x", crc32.Checksum(content, crc32.MakeTable(crc32.Castagnoli)))
	honest, w := f.job(t, "honest.dat", content)
	receipt, err := craftedPushReceipt(t, w.Address, w.Grant, "in/data", "honest.dat", content)
	if err != nil {
		t.Fatalf("the task's push: %v", err)
	}
	if _, err := f.c.ReportTask(ctx, w.Task.ID, apiv1.TaskReport{Attempt: w.Task.Attempt, Done: true, BytesDone: int64(len(content)),
		Files: []apiv1.FileReport{{Path: w.Files[0].Path, OK: true, Checksum: sum, Bytes: int64(len(content)), Receipt: receipt}}}); err != nil {
		t.Fatalf("the honest report: %v", err)
	}
	f.forget(w.Task.ID)
	page := s.job(s.alice, honest)
	if page.Job.State != transfer.JobSucceeded || len(page.Files) != 1 || page.Files[0].Checksum != sum || page.Job.BytesDone != int64(len(content)) {
		t.Fatalf("the honest job: %s %q, files %+v", page.Job.State, page.Job.Reason, page.Files)
	}
	moved := movedBytes(t, s)
	if moved != int64(len(content)) {
		t.Fatalf("/metrics says %d bytes moved after the honest job, want %d", moved, len(content))
	}

	// The forged reports: nothing is pushed.
	forged, w := f.job(t, "forged.dat", randomBytes(4000))
	forgeries := []struct{ what, receipt string }{
		{"no receipt", ""},
		{"a made-up receipt", strings.Repeat("A", 43)},
		{"the honest file's receipt replayed", receipt},
	}
	// While the task runs, absurd figures are stored within its bounds:
	// its bytes, and twice the 1 Gbit/s access links of its nodes.
	if ans, err := f.c.ReportTask(ctx, w.Task.ID, apiv1.TaskReport{Attempt: w.Task.Attempt, BytesDone: 999999999999, ThroughputBps: 1e300}); err != nil || ans.Task.BytesDone != w.Task.Bytes {
		t.Fatalf("a running report's figures: %v, %d bytes done of %d", err, ans.Task.BytesDone, w.Task.Bytes)
	}
	if bps := metric(t, s, "lightpath_service_throughput_bytes_per_second"); bps > 2e9/8 {
		t.Errorf("/metrics says the service runs at %v bytes/s, over its nodes' access links", bps)
	}
	for i, fg := range forgeries {
		if i > 0 {
			w = f.claim(t, transfer.TaskCopy)
			if w.Task.Job != forged {
				t.Fatalf("%s: claimed a task of job %s, want %s", fg.what, w.Task.Job, forged)
			}
		}
		ans, err := f.c.ReportTask(ctx, w.Task.ID, apiv1.TaskReport{Attempt: w.Task.Attempt, Done: true,
			BytesDone: 999999999999, ThroughputBps: 1e300,
			Files: []apiv1.FileReport{{Path: w.Files[0].Path, OK: true, Checksum: sum, Bytes: 4000, Receipt: fg.receipt}}})
		if err != nil {
			t.Fatalf("%s: the report: %v", fg.what, err)
		}
		f.forget(w.Task.ID)
		if ans.Task.State == transfer.TaskSucceeded || ans.Task.BytesDone > w.Task.Bytes {
			t.Fatalf("%s: the task %s, %d bytes done of %d", fg.what, ans.Task.State, ans.Task.BytesDone, w.Task.Bytes)
		}
		t.Logf("%s: task %s: %s", fg.what, ans.Task.State, ans.Task.Error)
	}
	page = s.job(s.alice, forged)
	j := page.Job
	if j.State != transfer.JobFailed || j.FilesDone != 0 || j.BytesDone != 0 ||
		!strings.Contains(j.Reason, "data/forged.dat: the destination did not confirm it") {
		t.Fatalf("the forged job: %s %q, %d files and %d bytes done", j.State, j.Reason, j.FilesDone, j.BytesDone)
	}
	if len(page.Files) != 1 || page.Files[0].State != transfer.FileFailed || page.Files[0].Checksum != "" {
		t.Fatalf("the forged file: %+v", page.Files)
	}
	for _, tk := range page.Tasks {
		if tk.BytesDone > tk.Bytes || tk.BytesDone < 0 {
			t.Errorf("task %s stored %d bytes done of %d", tk.ID, tk.BytesDone, tk.Bytes)
		}
	}
	for _, p := range j.Pairs {
		if p.BytesDone != 0 {
			t.Errorf("pair %s → %s counted %d bytes", p.From, p.To, p.BytesDone)
		}
	}
	if j.ThroughputBps > 1e12 {
		t.Errorf("the job's throughput %v bit/s", j.ThroughputBps)
	}
	if got := movedBytes(t, s); got != moved {
		t.Errorf("/metrics says %d bytes moved after the forged reports, want %d", got, moved)
	}
	unwritten(t, s, "data/forged.dat")
}

// movedBytes reads the service's moved bytes from the controller's
// /metrics.
func movedBytes(t *testing.T, s *svc) int64 {
	t.Helper()
	return int64(metric(t, s, "lightpath_service_moved_bytes_total"))
}

// metric reads a metric without labels from the controller's /metrics.
func metric(t *testing.T, s *svc, name string) float64 {
	t.Helper()
	resp, err := http.Get(strings.Split(s.url, ",")[0] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s %q", name, v)
			}
			return n
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}
