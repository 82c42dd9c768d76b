package service_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/grant"
)

// TestForgedReports: a source node's report of files OK counts only with
// the destination's receipts. Without one, with one signed by another
// node's secret (the source's own), or over another checksum than the
// one reported, the file is a failed attempt: sent again, then FAILED
// saying the destination did not confirm it; nothing is counted as moved,
// and the report's figures are stored within the task's bounds. The
// honest report then still ends a job SUCCEEDED.
func TestForgedReports(t *testing.T) {
	e := newEnv(t, wholeFiles)
	e.oneDestination()
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(1, 1000))
	forgeries := []func(w apiv1.TaskWork, fr *apiv1.FileReport){
		func(w apiv1.TaskWork, fr *apiv1.FileReport) {}, // no receipt
		func(w apiv1.TaskWork, fr *apiv1.FileReport) { // the source's own secret
			rc := grant.Receipt{Task: w.Task.ID, Attempt: w.Task.Attempt, Path: w.Files[0].Dest, Size: 1000, Algo: "crc32c", Sum: fr.Checksum}
			fr.Receipt = grant.Spell(rc.Sign(e.secrets[w.Task.From]))
		},
		func(w apiv1.TaskWork, fr *apiv1.FileReport) { // the destination's, for other content
			rc := grant.Receipt{Task: w.Task.ID, Attempt: w.Task.Attempt, Path: w.Files[0].Dest, Size: 1000, Algo: "crc32c", Sum: "00000001"}
			fr.Receipt = grant.Spell(rc.Sign(e.secrets[w.Task.To]))
		},
	}
	for i, forge := range forgeries {
		ws := e.claim("a1", 1)
		if len(ws) != 1 {
			t.Fatalf("attempt %d: %d tasks claimed", i+1, len(ws))
		}
		w := ws[0]
		fr := apiv1.FileReport{Path: w.Files[0].Path, OK: true, Checksum: "deadbeef", Bytes: 1000}
		forge(w, &fr)
		ans, err := e.s.Report(e.ctx, agent("a1"), w.Task.ID, apiv1.TaskReport{Attempt: w.Task.Attempt, Done: true,
			BytesDone: 999999999999, ThroughputBps: 1e300, Files: []apiv1.FileReport{fr}})
		if err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		if ans.Task.State != transfer.TaskFailed || ans.Task.BytesDone > w.Task.Bytes {
			t.Fatalf("attempt %d: task %s, %d bytes done of %d", i+1, ans.Task.State, ans.Task.BytesDone, w.Task.Bytes)
		}
		f := e.file(j.ID, "data/f000")
		if f.State == transfer.FileSucceeded || !strings.HasPrefix(f.Error, "the destination did not confirm it") || f.Checksum != "" {
			t.Fatalf("attempt %d: file %s %q checksum %q", i+1, f.State, f.Error, f.Checksum)
		}
		if ag := e.s.Aggregates(); ag.BytesMoved != 0 || ag.ThroughputBps > service.MaxThroughputBps {
			t.Fatalf("attempt %d: %d bytes moved, %v bit/s", i+1, ag.BytesMoved, ag.ThroughputBps)
		}
	}
	j = e.job(j.ID)
	if j.State != transfer.JobFailed || j.FilesDone != 0 || j.BytesDone != 0 ||
		!strings.Contains(j.Reason, "data/f000: the destination did not confirm it") {
		t.Fatalf("job %s %q, %d files, %d bytes done", j.State, j.Reason, j.FilesDone, j.BytesDone)
	}

	// The honest path: the destination's receipt.
	j = e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in2"}, listed(1, 1000))
	w := e.claim("a1", 1)[0]
	rep := e.okReport(w)
	rep.ThroughputBps = 1e300
	if ans, err := e.s.Report(e.ctx, agent("a1"), w.Task.ID, rep); err != nil || ans.Task.State != transfer.TaskSucceeded {
		t.Fatalf("honest report: %v %+v", err, ans.Task)
	}
	if j = e.job(j.ID); j.State != transfer.JobSucceeded || j.BytesDone != 1000 {
		t.Fatalf("honest job %s %q, %d bytes", j.State, j.Reason, j.BytesDone)
	}
	if ag := e.s.Aggregates(); ag.BytesMoved != 1000 {
		t.Fatalf("%d bytes moved, want 1000", ag.BytesMoved)
	}

	// Figures no data node sends are refused.
	j = e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in3"}, listed(1, 1000))
	w = e.claim("a1", 1)[0]
	_, err := e.s.Report(e.ctx, agent("a1"), w.Task.ID, apiv1.TaskReport{Attempt: w.Task.Attempt, BytesDone: -1})
	var re *reserve.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("negative bytes: %v, want a request error", err)
	}
	// A heartbeat's progress is bounded as a report's.
	e.beat("a1", []apiv1.TaskProgress{{Task: w.Task.ID, Attempt: w.Task.Attempt, BytesDone: 999999999999, ThroughputBps: 1e300}})
	if tk, err := e.st.GetTask(e.ctx, w.Task.ID); err != nil || tk.BytesDone != w.Task.Bytes {
		t.Fatalf("after a heartbeat's progress: %d bytes done of %d", tk.BytesDone, w.Task.Bytes)
	}
	if ag := e.s.Aggregates(); ag.ThroughputBps > service.ThroughputMargin*1e9 {
		t.Fatalf("throughput %v bit/s over 1 Gbit/s access links", ag.ThroughputBps)
	}
}
