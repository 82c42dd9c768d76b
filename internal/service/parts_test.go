package service_test

// Parts of large files: the service's side, with the test playing the
// data nodes (real checksums of real bytes, combined by the service).

import (
	"context"
	"fmt"
	"hash/adler32"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/checksum"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

const mib = 1 << 20

// smallParts cuts files of 8 MiB or more into parts of 4 MiB.
func smallParts(c *service.Config) { c.PartMinBytes, c.PartBytes = 8*mib, 4*mib }

// bigData is the content of the large file of these tests: 10 MiB and 5
// bytes, three parts of 4, 4 and 2 MiB + 5.
func bigData() []byte {
	b := make([]byte, 10*mib+5)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func crcHex(b []byte) string { return fmt.Sprintf("%08x", checksum.CRC32C(b)) }

// bigListing is data/big (bigData) and one small file, data/small.
func bigListing(data []byte) []apiv1.ListedFile {
	return []apiv1.ListedFile{
		{Path: "data/big", Source: "data", Size: int64(len(data)), MTime: t0},
		{Path: "data/small", Source: "data", Size: 1000, MTime: t0},
	}
}

// partReport is a part task's report: its part arrived with the right
// checksum; complete, it also completed the file (whole, the whole
// file's checksum the destination computed).
func (e *env) partReport(w apiv1.TaskWork, data []byte, complete bool, whole string) apiv1.TaskReport {
	p := w.Task.Part
	fr := apiv1.FileReport{Path: w.Files[0].Path, OK: true, Part: p, Bytes: p.Length,
		Checksum: crcHex(data[p.Offset : p.Offset+p.Length])}
	if complete {
		fr.Complete, fr.FileChecksum = true, whole
	}
	return e.sign(w, apiv1.TaskReport{Attempt: w.Task.Attempt, Done: true, BytesDone: p.Length, Files: []apiv1.FileReport{fr}})
}

// oneDestination leaves b2 out: its lease lapses, so the job's pairs
// are a1 → b1 and a2 → b1.
func (e *env) oneDestination() {
	e.t.Helper()
	for range 2 {
		e.clk.Add(10 * time.Second)
		for _, n := range []string{"a1", "a2", "b1"} {
			e.beat(n, nil)
		}
	}
}

func (e *env) file(job, path string) transfer.JobFile {
	e.t.Helper()
	fs, err := e.st.ListJobFiles(e.ctx, store.JobFileFilter{Job: job, Paths: []string{path}})
	if err != nil || len(fs) != 1 {
		e.t.Fatalf("file %s: %v, %v", path, fs, err)
	}
	return fs[0]
}

func (e *env) parts(job, path string) []transfer.FilePart {
	e.t.Helper()
	ps, err := e.st.ListFileParts(e.ctx, store.FilePartFilter{Job: job, Paths: []string{path}})
	if err != nil {
		e.t.Fatal(err)
	}
	return ps
}

func (e *env) report(w apiv1.TaskWork, rep apiv1.TaskReport) apiv1.TaskAnswer {
	e.t.Helper()
	ans, err := e.s.Report(e.ctx, agent(w.Task.From), w.Task.ID, e.sign(w, rep))
	if err != nil {
		e.t.Fatalf("report of %s: %v", w.Task.ID, err)
	}
	return ans
}

// claimPart claims one task on node and wants a part of data/big.
func (e *env) claimPart(node string) apiv1.TaskWork {
	e.t.Helper()
	ws := e.claim(node, 1)
	if len(ws) != 1 || ws[0].Task.Part == nil || len(ws[0].Files) != 1 || ws[0].Files[0].Path != "data/big" {
		e.t.Fatalf("%s's claim: %+v, want a part of data/big", node, ws)
	}
	return ws[0]
}

// A large file is cut into parts when listed; with two source nodes and
// one destination node its parts go over both pairs, each carrying bytes;
// the file's checksum is its parts' combined, and equals the
// destination's.
func TestPartsFromTwoSources(t *testing.T) { eachStore(t, testPartsFromTwoSources) }

func testPartsFromTwoSources(t *testing.T, db string) {
	e := newEnvAt(t, db, smallParts)
	e.oneDestination()
	data := bigData()
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, bigListing(data))
	if j.FilesTotal != 2 || j.BytesTotal != int64(len(data))+1000 {
		t.Fatalf("listed: %d files, %d bytes", j.FilesTotal, j.BytesTotal)
	}
	big := e.file(j.ID, "data/big")
	if big.Parts != 3 || big.PartsDone != 0 || e.file(j.ID, "data/small").Parts != 0 {
		t.Fatalf("big file: %d parts, small %d", big.Parts, e.file(j.ID, "data/small").Parts)
	}
	ps := e.parts(j.ID, "data/big")
	want := []transfer.Part{{Index: 0, Offset: 0, Length: 4 * mib}, {Index: 1, Offset: 4 * mib, Length: 4 * mib}, {Index: 2, Offset: 8 * mib, Length: 2*mib + 5}}
	for i, p := range ps {
		if p.Part != want[i] || p.State != transfer.FilePending {
			t.Fatalf("part %d: %+v, want %+v PENDING", i, p, want[i])
		}
	}

	// The parts first, one a task, over both pairs to b1.
	w1 := e.claimPart("a1")
	w2 := e.claimPart("a2")
	if w1.Task.Part.Index != 0 || w2.Task.Part.Index != 1 || w1.Task.To != "b1" || w2.Task.To != "b1" {
		t.Fatalf("parts %d → %s and %d → %s", w1.Task.Part.Index, w1.Task.To, w2.Task.Part.Index, w2.Task.To)
	}
	if w1.Task.Bytes != 4*mib || w1.Files[0].Dest != "in/data/big" || w1.Files[0].Size != int64(len(data)) || w1.Address != e.addr("b1") {
		t.Fatalf("part task: %+v, file %+v", w1.Task, w1.Files[0])
	}
	if f := e.file(j.ID, "data/big"); f.State != transfer.FileActive || f.To != "b1" || f.Attempts != 1 {
		t.Fatalf("the file once its first part is claimed: %s owner %q attempts %d", f.State, f.To, f.Attempts)
	}
	whole := crcHex(data)
	e.report(w1, e.partReport(w1, data, false, ""))
	w3 := e.claimPart("a1")
	if w3.Task.Part.Index != 2 {
		t.Fatalf("third part: %+v", w3.Task.Part)
	}
	// Every part but one in: the file is not done.
	e.report(w3, e.partReport(w3, data, false, ""))
	if f := e.file(j.ID, "data/big"); f.State != transfer.FileActive || f.PartsDone != 2 {
		t.Fatalf("two parts in: %s %d done", f.State, f.PartsDone)
	}
	// The last part's push completed the file at b1.
	e.report(w2, e.partReport(w2, data, true, whole))
	f := e.file(j.ID, "data/big")
	if f.State != transfer.FileSucceeded || f.PartsDone != 3 || f.Checksum != whole || f.Error != "" {
		t.Fatalf("the file: %s %d done checksum %s (want %s) %q", f.State, f.PartsDone, f.Checksum, whole, f.Error)
	}
	// The small file moves whole.
	ws := e.claim("a2", 1)
	if len(ws) != 1 || ws[0].Task.Part != nil || len(ws[0].Files) != 1 || ws[0].Files[0].Path != "data/small" {
		t.Fatalf("the small file's claim: %+v", ws)
	}
	e.report(ws[0], e.okReport(ws[0]))
	j = e.job(j.ID)
	if j.State != transfer.JobSucceeded || j.FilesDone != 2 || j.BytesDone != j.BytesTotal {
		t.Fatalf("job %s %q: %d files, %d of %d bytes", j.State, j.Reason, j.FilesDone, j.BytesDone, j.BytesTotal)
	}
	bytes := map[string]int64{}
	for _, p := range j.Pairs {
		bytes[p.From+"→"+p.To] = p.BytesDone
	}
	if bytes["a1→b1"] != 4*mib+2*mib+5 || bytes["a2→b1"] != 4*mib+1000 {
		t.Fatalf("bytes per pair: %v", bytes)
	}
	page, err := e.s.Get(e.ctx, alice, j.ID, nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, pf := range page.Files {
		if pf.Path == "data/big" && (pf.Parts != 3 || pf.PartsDone != 3) {
			t.Fatalf("the page's big file: %d of %d parts", pf.PartsDone, pf.Parts)
		}
	}
	for _, tk := range page.Tasks {
		if tk.Kind == transfer.TaskCopy && tk.State != transfer.TaskSucceeded {
			t.Fatalf("task %s %s %q", tk.ID, tk.State, tk.Error)
		}
	}
}

// The first part claimed fixes the file's owner: with two destination
// nodes, the other pair (a2 → b2) carries none of the file's parts.
func TestPartsOwnerFixed(t *testing.T) {
	e := newEnv(t, smallParts)
	data := bigData()
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, bigListing(data))
	w1 := e.claimPart("a1")
	owner := w1.Task.To
	other := map[string]string{"b1": "b2", "b2": "b1"}[owner]
	if f := e.file(j.ID, "data/big"); f.To != owner {
		t.Fatalf("owner %q, want %s", f.To, owner)
	}
	for _, p := range e.parts(j.ID, "data/big") {
		if p.To != owner {
			t.Fatalf("part %d goes to %q, not the owner %s", p.Index, p.To, owner)
		}
	}
	// a2's pair pushes to the other node: it gets the small file only.
	ws := e.claim("a2", 4)
	if len(ws) != 1 || ws[0].Task.Part != nil || ws[0].Files[0].Path != "data/small" || ws[0].Task.To != other {
		t.Fatalf("a2's claim: %+v", ws)
	}
	e.report(ws[0], e.okReport(ws[0]))
	if more := e.claim("a2", 4); len(more) != 0 {
		t.Fatalf("a2 claimed %+v, a part of a file another node owns", more[0].Task)
	}
	// The rest of the parts go to the owner, from a1.
	whole := crcHex(data)
	e.report(w1, e.partReport(w1, data, false, ""))
	for i := 1; i < 3; i++ {
		w := e.claimPart("a1")
		if w.Task.To != owner || w.Task.Part.Index != i {
			t.Fatalf("part %d → %s", w.Task.Part.Index, w.Task.To)
		}
		e.report(w, e.partReport(w, data, i == 2, whole))
	}
	if j = e.job(j.ID); j.State != transfer.JobSucceeded {
		t.Fatalf("job %s %q", j.State, j.Reason)
	}
}

// A part that fails goes back to the queue and is pushed again by the
// next claim; one failing for good fails its file, and the file's other
// parts with it.
func TestPartRetriedAndFailed(t *testing.T) { eachStore(t, testPartRetriedAndFailed) }

func testPartRetriedAndFailed(t *testing.T, db string) {
	e := newEnvAt(t, db, smallParts)
	e.oneDestination()
	data := bigData()
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, bigListing(data))
	w := e.claimPart("a1")
	ans := e.report(w, apiv1.TaskReport{Attempt: 1, Done: true, Error: "connection reset",
		Files: []apiv1.FileReport{{Path: "data/big", Part: w.Task.Part, Error: "connection reset"}}})
	if ans.Task.State != transfer.TaskFailed {
		t.Fatalf("task after its part failed: %s", ans.Task.State)
	}
	p := e.parts(j.ID, "data/big")[0]
	if p.State != transfer.FilePending || p.Attempts != 1 || p.Error != "connection reset" {
		t.Fatalf("failed part: %+v", p)
	}
	if f := e.file(j.ID, "data/big"); f.State != transfer.FileActive || f.To != "b1" {
		t.Fatalf("the file keeps its owner: %s %q", f.State, f.To)
	}
	again := e.claimPart("a2")
	if again.Task.Part.Index != 0 || again.Task.ID == w.Task.ID || again.Task.To != "b1" {
		t.Fatalf("the retry: %+v", again.Task)
	}
	if p := e.parts(j.ID, "data/big")[0]; p.State != transfer.FileActive || p.Attempts != 2 || p.Task != again.Task.ID {
		t.Fatalf("retried part: %+v", p)
	}
	// The task ends without a word on its part: it goes back again.
	e.report(again, apiv1.TaskReport{Attempt: 1, Done: true})
	if p := e.parts(j.ID, "data/big")[0]; p.State != transfer.FilePending || p.Error != "the task ended without a word on its part" {
		t.Fatalf("part of a task ended silent: %+v", p)
	}
	// Now a part refused for good.
	w = e.claimPart("a1")
	e.report(w, apiv1.TaskReport{Attempt: 1, Done: true, Files: []apiv1.FileReport{
		{Path: "data/big", Part: w.Task.Part, Error: "permission denied", Permanent: true, Class: apiv1.ClassPermission}}})
	f := e.file(j.ID, "data/big")
	if f.State != transfer.FileFailed || !strings.Contains(f.Error, "permission denied") || f.Class != apiv1.ClassPermission {
		t.Fatalf("the file after a part failed for good: %s %q (%s)", f.State, f.Error, f.Class)
	}
	for _, p := range e.parts(j.ID, "data/big") {
		if p.State != transfer.FileFailed {
			t.Fatalf("part %d after its file failed: %s", p.Index, p.State)
		}
	}
	ws := e.claim("a2", 4)
	if len(ws) != 1 || ws[0].Task.Part != nil {
		t.Fatalf("claim after the file failed: %+v", ws)
	}
	e.report(ws[0], e.okReport(ws[0]))
	if j = e.job(j.ID); j.State != transfer.JobFailed || !strings.Contains(j.Reason, "data/big: part 0: permission denied") {
		t.Fatalf("job %s %q", j.State, j.Reason)
	}
}

// The owner's lease lapses: the file's parts go back to the queue with
// the owner cleared, a new owner takes the file afresh, and the parts'
// old tasks are heard no more.
func TestPartsOwnerLapse(t *testing.T) { eachStore(t, testPartsOwnerLapse) }

func testPartsOwnerLapse(t *testing.T, db string) {
	e := newEnvAt(t, db, smallParts)
	data := bigData()
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, bigListing(data))
	w1 := e.claimPart("a1")
	owner := w1.Task.To
	other := map[string]string{"b1": "b2", "b2": "b1"}[owner]
	e.report(w1, e.partReport(w1, data, false, ""))
	w2 := e.claimPart("a1")
	// The owner goes silent.
	for range 2 {
		e.clk.Add(10 * time.Second)
		for _, n := range []string{"a1", "a2", other} {
			e.beat(n, nil)
		}
	}
	e.s.Tick(e.ctx)
	f := e.file(j.ID, "data/big")
	if f.State != transfer.FilePending || f.To != "" || f.PartsDone != 0 || !strings.Contains(f.Error, owner+", was lost") {
		t.Fatalf("the file after its owner lapsed: %s owner %q %d done %q", f.State, f.To, f.PartsDone, f.Error)
	}
	for _, p := range e.parts(j.ID, "data/big") {
		if p.State != transfer.FilePending || p.Task != "" || p.To != "" {
			t.Fatalf("part %d after the owner lapsed: %s in %q to %q", p.Index, p.State, p.Task, p.To)
		}
	}
	if j = e.job(j.ID); !strings.Contains(j.Reason, "data node "+owner+" lost") {
		t.Fatalf("reason: %q", j.Reason)
	}
	// The old task's word changes nothing.
	if ans := e.report(w2, e.partReport(w2, data, false, "")); ans.Task.State != transfer.TaskFailed {
		t.Fatalf("the old part task: %s", ans.Task.State)
	}
	if e.parts(j.ID, "data/big")[1].State != transfer.FilePending {
		t.Fatal("the old task's report counted")
	}
	// A new owner, every part sent again.
	whole := crcHex(data)
	for i := range 3 {
		w := e.claimPart([]string{"a2", "a1", "a2"}[i])
		if w.Task.To != other || w.Task.Part.Index != i {
			t.Fatalf("part %d → %s, want %d → %s", w.Task.Part.Index, w.Task.To, i, other)
		}
		e.report(w, e.partReport(w, data, i == 2, whole))
	}
	f = e.file(j.ID, "data/big")
	if f.State != transfer.FileSucceeded || f.To != other || f.Attempts != 2 || f.Checksum != whole {
		t.Fatalf("the file: %s owner %s attempts %d checksum %s", f.State, f.To, f.Attempts, f.Checksum)
	}
}

// The parts' checksums combined must equal the destination's whole-file
// checksum and the expected one: a mismatch sends the whole file again,
// a second fails it. Every part in but none completing the file pushes
// the last part again.
func TestPartsChecksums(t *testing.T) { eachStore(t, testPartsChecksums) }

func testPartsChecksums(t *testing.T, db string) {
	e := newEnvAt(t, db, smallParts)
	e.oneDestination()
	data := bigData()
	whole := crcHex(data)
	// all pushes the file's three parts; the last says complete with dest.
	all := func(dest string) {
		t.Helper()
		for i := range 3 {
			w := e.claimPart("a1")
			e.report(w, e.partReport(w, data, i == 2 && dest != "", dest))
		}
	}
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, bigListing(data)[:1])
	// The destination computed another checksum: the whole file again.
	all("0badf00d")
	f := e.file(j.ID, "data/big")
	if f.State != transfer.FilePending || f.To != "" || f.PartsDone != 0 ||
		f.Error != "checksum mismatch: the parts combine to "+whole+", the destination has 0badf00d" {
		t.Fatalf("after a mismatch: %s owner %q done %d %q", f.State, f.To, f.PartsDone, f.Error)
	}
	for _, p := range e.parts(j.ID, "data/big") {
		if p.State != transfer.FilePending || p.Complete || p.Checksum != "" {
			t.Fatalf("part after a mismatch: %+v", p)
		}
	}
	// Every part in, none completing the file: the last one again.
	all("")
	ps := e.parts(j.ID, "data/big")
	if ps[2].State != transfer.FilePending || ps[0].State != transfer.FileSucceeded || e.file(j.ID, "data/big").PartsDone != 2 {
		t.Fatalf("parts when none completed the file: %+v", ps)
	}
	w := e.claimPart("a1")
	if w.Task.Part.Index != 2 {
		t.Fatalf("pushed again: part %d", w.Task.Part.Index)
	}
	e.report(w, e.partReport(w, data, true, whole))
	if f = e.file(j.ID, "data/big"); f.State != transfer.FileSucceeded || f.Checksum != whole || f.Attempts != 2 {
		t.Fatalf("the file: %s %s attempts %d %q", f.State, f.Checksum, f.Attempts, f.Error)
	}

	// The expected checksum is compared with the combined one: sent again
	// once, then failed.
	j2 := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:again",
		Expected: map[string]string{"src:data/big": "00000001"}}, bigListing(data)[:1])
	all(whole)
	if f = e.file(j2.ID, "data/big"); f.State != transfer.FilePending || f.Error != "checksum mismatch: got "+whole+", want 00000001" {
		t.Fatalf("after an expected mismatch: %s %q", f.State, f.Error)
	}
	all(whole)
	if f = e.file(j2.ID, "data/big"); f.State != transfer.FileFailed || f.Attempts != 2 {
		t.Fatalf("after a second mismatch: %s attempts %d %q", f.State, f.Attempts, f.Error)
	}
	if j2 = e.job(j2.ID); j2.State != transfer.JobFailed {
		t.Fatalf("job %s %q", j2.State, j2.Reason)
	}
	// A matching expected checksum, in capitals.
	j3 := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:third",
		Expected: map[string]string{"src:data/big": strings.ToUpper(whole)}}, bigListing(data)[:1])
	all(whole)
	if j3 = e.job(j3.ID); j3.State != transfer.JobSucceeded {
		t.Fatalf("job %s %q", j3.State, j3.Reason)
	}
}

// A booked job's shares count a part's bytes: with two source nodes and
// one destination node, each pair takes parts up to its share and leaves
// the rest to the other.
func TestPartsKeepToShares(t *testing.T) {
	// 800 MB in parts of 288 MiB: 302, 302 and 196 MB, shares of 400 MB.
	e := newEnv(t, func(c *service.Config) { c.PartMinBytes, c.PartBytes = 400e6, 300e6 })
	e.oneDestination()
	const size = 800_000_000
	j, err := e.submitDeadline(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Hour)},
		[]apiv1.ListedFile{{Path: "data/big", Source: "data", Size: size, MTime: t0}})
	if err != nil {
		t.Fatal(err)
	}
	j = e.startBooked(j)
	if len(j.Pairs) != 2 || j.Pairs[0].To != "b1" || j.Pairs[1].To != "b1" || j.Pairs[0].ShareBytes+j.Pairs[1].ShareBytes != size {
		t.Fatalf("pairs: %+v", j.Pairs)
	}
	got := map[string][]int{}
	for _, n := range []string{"a1", "a2"} {
		for _, w := range e.claim(n, 4) {
			if w.Task.Part == nil || w.Task.To != "b1" {
				t.Fatalf("%s claimed %+v", n, w.Task)
			}
			got[n] = append(got[n], w.Task.Part.Index)
		}
	}
	// a1's first part leaves less of its share than a second part: a2,
	// with room, takes it. The last one waits for a2, which runs one part
	// of a file at a time, and a1 has no room for it.
	if fmt.Sprint(got["a1"]) != "[0]" || fmt.Sprint(got["a2"]) != "[1]" {
		t.Fatalf("parts per source node: %v, want one over each", got)
	}
	for _, n := range []string{"a1", "a2"} {
		if ws := e.claim(n, 4); len(ws) != 0 {
			t.Fatalf("%s claimed part %d as well", n, ws[0].Task.Part.Index)
		}
	}
}

// A part task whose source node is lost goes, at its next attempt, to
// another source node, still to the file's owner; one whose part was
// taken back meanwhile (its owner lost too) ends without work.
func TestPartTaskRequeued(t *testing.T) { eachStore(t, testPartTaskRequeued) }

func testPartTaskRequeued(t *testing.T, db string) {
	e := newEnvAt(t, db, smallParts)
	e.oneDestination()
	data := bigData()
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, bigListing(data)[:1])
	old := e.claimPart("a1")
	// a1 goes silent.
	for range 2 {
		e.clk.Add(10 * time.Second)
		e.beat("a2", nil)
		e.beat("b1", nil)
	}
	e.s.Tick(e.ctx)
	w := e.claimPart("a2")
	if w.Task.ID != old.Task.ID || w.Task.Attempt != 2 || w.Task.From != "a2" || w.Task.To != "b1" || w.Task.Part.Index != 0 {
		t.Fatalf("the requeued part task: %+v (part %+v)", w.Task, w.Task.Part)
	}
	if p := e.parts(j.ID, "data/big")[0]; p.State != transfer.FileActive || p.Task != w.Task.ID || p.From != "a2" || p.Attempts != 1 {
		t.Fatalf("its part: %+v", p)
	}
	// Now a2 and the owner b1 go silent, a1 and b2 come back: the file
	// starts afresh at b2, and the task of its old part ends unclaimed.
	for range 2 {
		e.clk.Add(10 * time.Second)
		e.beat("a1", nil)
		e.beat("b2", nil)
	}
	e.s.Tick(e.ctx)
	if f := e.file(j.ID, "data/big"); f.State != transfer.FilePending || f.To != "" {
		t.Fatalf("the file: %s owner %q", f.State, f.To)
	}
	w = e.claimPart("a1")
	if w.Task.ID == old.Task.ID || w.Task.To != "b2" || w.Task.Part.Index != 0 {
		t.Fatalf("after the owner was lost: %+v", w.Task)
	}
	tk, err := e.st.GetTask(e.ctx, old.Task.ID)
	if err != nil || tk.State != transfer.TaskCancelled || !strings.Contains(tk.Error, "taken back") {
		t.Fatalf("the old part's task: %s %q %v", tk.State, tk.Error, err)
	}
}

// bookedBigFile starts a booked job of one 800 MB file in parts of 300 MB
// over two pairs to two destination nodes, and has a1 claim its first
// part (which makes the pair's destination the file's owner).
func bookedBigFile(t *testing.T) (*env, transfer.Job, apiv1.TaskWork) {
	t.Helper()
	// The window outlasts the test's moves of the clock (a minute at least).
	e := newEnv(t, func(c *service.Config) { c.PartMinBytes, c.PartBytes, c.MinWindow = 400e6, 300e6, time.Minute })
	j, err := e.submitDeadline(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Hour)},
		[]apiv1.ListedFile{{Path: "data/big", Source: "data", Size: 800_000_000, MTime: t0}})
	if err != nil {
		t.Fatal(err)
	}
	return e, e.startBooked(j), e.claimPart("a1")
}

// A booked job whose only live pair to a file's owner lost its source
// node: the owner lives but nothing can push to it, so the file is taken
// back and starts afresh over a pair that can.
func TestPartsOwnerUnreachable(t *testing.T) {
	e, j, w := bookedBigFile(t)
	owner := w.Task.To
	other := map[string]string{"b1": "b2", "b2": "b1"}[owner]
	for range 2 {
		e.clk.Add(10 * time.Second)
		for _, n := range []string{"a2", "b1", "b2"} {
			e.beat(n, nil)
		}
	}
	e.s.Tick(e.ctx)
	if f := e.file(j.ID, "data/big"); f.State != transfer.FilePending || f.To != "" || !strings.Contains(f.Error, "no live source node has a booked pair to its owner") {
		t.Fatalf("the file: %s owner %q %q", f.State, f.To, f.Error)
	}
	// The clock's round says so; the lost pair's share booked again over
	// the live nodes (rebook.go) may say so after it.
	if j = e.job(j.ID); !strings.Contains(j.Reason, "no live pair to data node "+owner) && !strings.Contains(j.Reason, "data node lost on a1 > "+owner) {
		t.Fatalf("reason %q", j.Reason)
	}
	w2 := e.claimPart("a2")
	if w2.Task.ID == w.Task.ID || w2.Task.To != other || w2.Task.Part.Index != 0 || w2.Task.Reservation == "" {
		t.Fatalf("after the file was taken back: %+v", w2.Task)
	}
}

// A data node that does not say it pushes parts (an older one) is handed
// no part task, as source or as destination; it takes whole files.
func TestPartsOnlyToNodesThatSayParts(t *testing.T) {
	e := newEnv(t, smallParts)
	e.oneDestination()
	old := func(node string) {
		t.Helper()
		if _, err := e.s.Heartbeat(e.ctx, agent(node), node, apiv1.DataNodeHeartbeat{Endpoint: endpointOf(node), Address: e.addr(node), Lease: "15s"}); err != nil {
			t.Fatal(err)
		}
	}
	old("a2")
	data := bigData()
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, bigListing(data))
	ws := e.claim("a2", 4)
	if len(ws) != 1 || ws[0].Task.Part != nil || ws[0].Files[0].Path != "data/small" {
		t.Fatalf("the older source node's claim: %+v", ws)
	}
	e.report(ws[0], e.okReport(ws[0]))
	if more := e.claim("a2", 4); len(more) != 0 {
		t.Fatalf("the older source node claimed %+v", more[0].Task)
	}
	// An older destination node: no part goes to it.
	old("b1")
	if ws := e.claim("a1", 4); len(ws) != 0 {
		t.Fatalf("a part for an older destination node: %+v", ws[0].Task)
	}
	e.beat("b1", nil)
	w := e.claimPart("a1")
	if w.Task.To != "b1" || e.file(j.ID, "data/big").To != "b1" {
		t.Fatalf("part task: %+v", w.Task)
	}
	// A listing by an older node cuts nothing.
	old("a1")
	j2 := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:whole"}, bigListing(data))
	if f := e.file(j2.ID, "data/big"); f.Parts != 0 || len(e.parts(j2.ID, "data/big")) != 0 {
		t.Fatalf("a file listed by an older node: %d parts", f.Parts)
	}
}

// A pair past its share still carries the parts of the file its
// destination owns when no other pair can (they go to other nodes): the
// file does not wait for shares that nothing else will use.
func TestPartsPastShareToOwner(t *testing.T) {
	// 800 MB in parts of 288 MiB over two pairs to two nodes, shares of
	// 400 MB: the owner's pair carries all three.
	e, j, w := bookedBigFile(t)
	owner := w.Task.To
	if ws := e.claim("a2", 4); len(ws) != 0 {
		t.Fatalf("a2's pair to the other node claimed %+v", ws[0].Task)
	}
	for i := range 3 {
		if i > 0 {
			w = e.claimPart("a1")
		}
		if w.Task.To != owner || w.Task.Part.Index != i {
			t.Fatalf("part %d → %s", w.Task.Part.Index, w.Task.To)
		}
		e.report(w, apiv1.TaskReport{Attempt: 1, Done: true, BytesDone: w.Task.Bytes, Files: []apiv1.FileReport{
			{Path: "data/big", OK: true, Part: w.Task.Part, Bytes: w.Task.Bytes, Complete: i == 2}}})
	}
	if j = e.job(j.ID); j.State != transfer.JobSucceeded {
		t.Fatalf("job %s %q", j.State, j.Reason)
	}
}

// A job checked with adler32: its parts' adler32 checksums combine into
// the whole file's.
func TestPartsAdler32(t *testing.T) {
	e := newEnv(t, smallParts)
	e.oneDestination()
	data := bigData()
	adler := func(b []byte) string { return fmt.Sprintf("%08x", adler32.Checksum(b)) }
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Checksum: transfer.ChecksumAdler32,
		Expected: map[string]string{"src:data/big": adler(data)}}, bigListing(data)[:1])
	for i := range 3 {
		w := e.claimPart("a1")
		p := w.Task.Part
		fr := apiv1.FileReport{Path: "data/big", OK: true, Part: p, Bytes: p.Length, Checksum: adler(data[p.Offset : p.Offset+p.Length])}
		if i == 2 {
			fr.Complete, fr.FileChecksum = true, adler(data)
		}
		e.report(w, apiv1.TaskReport{Attempt: w.Task.Attempt, Done: true, Files: []apiv1.FileReport{fr}})
	}
	if f := e.file(j.ID, "data/big"); f.State != transfer.FileSucceeded || f.Checksum != adler(data) {
		t.Fatalf("the file: %s checksum %s, want %s (%q)", f.State, f.Checksum, adler(data), f.Error)
	}
}

// A booked job of several large files over two pairs: the first pair to
// claim takes (and owns) one file, not every file, and leaves the next to
// the other pair, so each carries about its share. Before, the first
// claims made one node the owner of both files, and its pair carried
// twice its share while the other idled.
func TestPartsOwnersSpread(t *testing.T) {
	e := newEnv(t, func(c *service.Config) { c.PartMinBytes, c.PartBytes = 200e6, 100e6 })
	j, err := e.submitDeadline(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Hour)},
		[]apiv1.ListedFile{
			{Path: "data/l1", Source: "data", Size: 400_000_000, MTime: t0},
			{Path: "data/l2", Source: "data", Size: 400_000_000, MTime: t0},
		})
	if err != nil {
		t.Fatal(err)
	}
	e.startBooked(j)
	owners := map[string]string{} // file → the destination of the pair that took it
	for _, n := range []string{"a1", "a1", "a2", "a2"} {
		for _, w := range e.claim(n, 1) {
			if w.Task.Part == nil {
				t.Fatalf("%s claimed whole files %v", n, w.Task.Files)
			}
			f := w.Files[0].Path
			if o, ok := owners[f]; ok && o != w.Task.To {
				t.Fatalf("%s's parts go to %s and %s", f, o, w.Task.To)
			}
			owners[f] = w.Task.To
		}
	}
	if len(owners) != 2 || owners["data/l1"] == owners["data/l2"] {
		t.Fatalf("owners %v: want each file owned by another destination node", owners)
	}
}

// TestCutPartsBounded (issue 28, finding 7): a file's size is the listing
// node's word, so what a page is cut into is bounded whatever sizes it
// claims: at most MaxFileParts parts a file (larger parts for a larger
// file, covering it whole) and MaxPageParts a page, the other large files
// of the page moving whole.
func TestCutPartsBounded(t *testing.T) {
	huge := []transfer.JobFile{{Job: "j", Path: "a", Size: 1 << 62}}
	ps := service.CutParts(1<<30, 256<<20, huge)
	if len(ps) == 0 || len(ps) > service.MaxFileParts || huge[0].Parts != len(ps) {
		t.Fatalf("a file of 2^62 bytes: %d parts (%d counted)", len(ps), huge[0].Parts)
	}
	var covered int64
	for i, p := range ps {
		if p.Offset != covered || p.Index != i {
			t.Fatalf("part %d at %d, index %d: want at %d", i, p.Offset, p.Index, covered)
		}
		covered += p.Length
	}
	if covered != 1<<62 {
		t.Fatalf("the parts cover %d bytes of %d", covered, int64(1)<<62)
	}

	page := make([]transfer.JobFile, 10000)
	for i := range page {
		page[i] = transfer.JobFile{Job: "j", Path: fmt.Sprintf("f%05d", i), Size: 1 << 50}
	}
	ps = service.CutParts(1<<30, 256<<20, page)
	whole, n := 0, 0
	for _, f := range page {
		if f.Parts == 0 {
			whole++
		}
		n += f.Parts
	}
	if len(ps) > service.MaxPageParts || n != len(ps) || whole == 0 {
		t.Fatalf("a page of 10,000 files of 2^50 bytes: %d parts (%d counted), %d files whole", len(ps), n, whole)
	}

	// Files as the defaults cut them are unchanged.
	ps = service.CutParts(1<<30, 256<<20, []transfer.JobFile{{Job: "j", Path: "b", Size: 10 << 30}})
	if len(ps) != 40 {
		t.Fatalf("a file of 10 GiB: %d parts, want 40", len(ps))
	}
}

// partsCounter counts the reads of every open part (no job named).
type partsCounter struct {
	store.Store
	scans atomic.Int64
}

func (c *partsCounter) ListFileParts(ctx context.Context, f store.FilePartFilter) ([]transfer.FilePart, error) {
	if f.Job == "" {
		c.scans.Add(1)
	}
	return c.Store.ListFileParts(ctx, f)
}

// TestOwnersScannedOnChange: the clock reads the open parts of every job
// only when a node's liveness or a job's pairs changed, not each second
// (issue 30: a 40 TB job has 150,000 parts); an owner that lapses is
// still taken back at the next round.
func TestOwnersScannedOnChange(t *testing.T) {
	var c *partsCounter
	e := newEnv(t, smallParts, func(cfg *service.Config) {
		c = &partsCounter{Store: cfg.Store}
		cfg.Store = c
	})
	data := bigData()
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, bigListing(data))
	w1 := e.claimPart("a1")
	owner := w1.Task.To
	other := map[string]string{"b1": "b2", "b2": "b1"}[owner]
	e.s.Tick(e.ctx)
	before := c.scans.Load()
	for range 5 {
		e.clk.Add(time.Second)
		for _, n := range []string{"a1", "a2", "b1", "b2"} {
			e.beat(n, nil)
		}
		e.s.Tick(e.ctx)
	}
	if n := c.scans.Load() - before; n != 0 {
		t.Fatalf("%d scans of every open part in 5 rounds where nothing changed", n)
	}
	// The owner goes silent: its lapse is a change, and its file is taken
	// back.
	for range 2 {
		e.clk.Add(10 * time.Second)
		for _, n := range []string{"a1", "a2", other} {
			e.beat(n, nil)
		}
	}
	e.s.Tick(e.ctx)
	if n := c.scans.Load() - before; n != 1 {
		t.Fatalf("%d scans after the owner lapsed, want 1", n)
	}
	if f := e.file(j.ID, "data/big"); f.State != transfer.FilePending || f.To != "" {
		t.Fatalf("the file after its owner lapsed: %s owner %q", f.State, f.To)
	}
}
