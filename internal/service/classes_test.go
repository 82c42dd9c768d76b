package service_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/transfer"
)

// TestRetryByClass: what becomes of a failed file is decided by the class
// the data node gave its failure, never by the words of its error: a file
// not there, a refused permission and a full destination fail at once; a
// grant refused as stale sends the file again without costing it an
// attempt, however often; the network, a checksum and anything else
// (internal, and a class missing or unknown, as from an older data node)
// send it again up to MaxAttempts. A task that ends with a class fails its
// files without a verdict by it. A full destination names the storage in
// the job's reason while the rest goes on, and in its final reason.
func TestRetryByClass(t *testing.T) {
	e := newEnv(t, wholeFiles)
	e.clk.Add(20 * time.Second)
	e.beat("a1", nil)
	e.beat("b1", nil)
	// Words that would have decided before: the class decides now.
	cases := []struct {
		class, err string
		failed     bool // FAILED at once
		attempts   int  // the file's attempts after the report
		stored     string
	}{
		{apiv1.ClassNotFound, "open data/f000: gone", true, 1, apiv1.ClassNotFound},
		{apiv1.ClassPermission, "write refused", true, 1, apiv1.ClassPermission},
		{apiv1.ClassNoSpace, "not enough space at the destination: 1 KiB free, f002 needs 1000 B: free space there or choose another destination", true, 1, apiv1.ClassNoSpace},
		{apiv1.ClassGrant, "refused: grant: fenced: attempt 1 of task t is no longer current", false, 0, apiv1.ClassGrant},
		{apiv1.ClassNetwork, "permission denied: no such file or directory", false, 1, apiv1.ClassNetwork},
		{apiv1.ClassChecksum, "block 3 arrived damaged 5 times", false, 1, apiv1.ClassChecksum},
		{apiv1.ClassInternal, "read-only file system", false, 1, apiv1.ClassInternal},
		{"", "permission denied", false, 1, apiv1.ClassInternal},                   // an older data node
		{"disk-on-fire", "no space left on device", false, 1, apiv1.ClassInternal}, // a class unknown here
	}
	files := listed(len(cases)+1, 1000)
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, files)
	ws := e.claim("a1", 1)
	if len(ws) != 1 || len(ws[0].Files) != len(files) {
		t.Fatalf("claim: %d tasks", len(ws))
	}
	w := ws[0]
	rep := apiv1.TaskReport{Attempt: w.Task.Attempt, Done: true, Error: "refused: the server is read-only", Class: apiv1.ClassPermission}
	for i, c := range cases {
		rep.Files = append(rep.Files, apiv1.FileReport{Path: files[i].Path, Error: c.err, Class: c.class})
	}
	// The last file has no verdict of its own: the task's class fails it.
	if _, err := e.s.Report(e.ctx, agent("a1"), w.Task.ID, rep); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		f := e.file(j.ID, files[i].Path)
		wantState := transfer.FilePending
		if c.failed {
			wantState = transfer.FileFailed
		}
		if f.State != wantState || f.Attempts != c.attempts || f.Class != c.stored || f.Error != c.err {
			t.Errorf("class %q: %s after %d attempts, class %q, error %q; want %s after %d, class %q",
				c.class, f.State, f.Attempts, f.Class, f.Error, wantState, c.attempts, c.stored)
		}
	}
	last := e.file(j.ID, files[len(cases)].Path)
	if last.State != transfer.FileFailed || last.Class != apiv1.ClassPermission {
		t.Errorf("a file without a verdict in a task failed with class permission: %s, class %q", last.State, last.Class)
	}
	j = e.job(j.ID)
	if j.State != transfer.JobActive || !strings.HasPrefix(j.Reason, "storage: no space: data/f002: not enough space at the destination: 1 KiB free") {
		t.Fatalf("job with a full destination, the rest going on: %s %q", j.State, j.Reason)
	}

	// The grant's refusal again and again costs nothing; the others are
	// tried to their end.
	grantFile := files[3].Path
	for round := 0; ; round++ {
		ws := e.claim("a1", 1)
		if len(ws) == 0 {
			break
		}
		if round > 2*service.MaxAttempts {
			t.Fatalf("still claiming after %d rounds", round)
		}
		w := ws[0]
		rep := apiv1.TaskReport{Attempt: w.Task.Attempt, Done: true}
		for _, f := range w.Files {
			fr := apiv1.FileReport{Path: f.Path, Error: "connection reset", Class: apiv1.ClassNetwork}
			if f.Path == grantFile {
				fr.Error, fr.Class = "refused: grant: fenced", apiv1.ClassGrant
				if round == service.MaxAttempts {
					fr = apiv1.FileReport{Path: f.Path, OK: true, Checksum: "0badcafe", Bytes: f.Size}
				}
			}
			rep.Files = append(rep.Files, fr)
		}
		if _, err := e.s.Report(e.ctx, agent("a1"), w.Task.ID, e.sign(w, rep)); err != nil {
			t.Fatal(err)
		}
		if f := e.file(j.ID, grantFile); f.State == transfer.FilePending && f.Attempts != 0 {
			t.Fatalf("round %d: the grant's refusal cost the file: %d attempts", round, f.Attempts)
		}
	}
	if f := e.file(j.ID, grantFile); f.State != transfer.FileSucceeded || f.Class != "" || f.Error != "" {
		t.Errorf("the file refused by stale grants, then sent: %s, class %q, error %q", f.State, f.Class, f.Error)
	}
	j = e.job(j.ID)
	want := fmt.Sprintf("storage: no space: %d of %d files failed; first for want of room: data/f002: not enough space", len(files)-1, len(files))
	if j.State != transfer.JobFailed || !strings.HasPrefix(j.Reason, want) {
		t.Fatalf("job: %s %q, want FAILED %q…", j.State, j.Reason, want)
	}
}

// TestPartRetryByClass: a part's failure is decided by its class as a
// file's is: refused by a stale grant, sent again at no cost; no space,
// the part and its file fail, and the job's reason names the storage.
func TestPartRetryByClass(t *testing.T) {
	e := newEnv(t, smallParts)
	e.oneDestination()
	data := bigData()
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, bigListing(data))
	w := e.claimPart("a1")
	e.report(w, apiv1.TaskReport{Attempt: 1, Done: true, Files: []apiv1.FileReport{
		{Path: "data/big", Part: w.Task.Part, Error: "refused: grant: fenced", Class: apiv1.ClassGrant}}})
	if p := e.parts(j.ID, "data/big")[0]; p.State != transfer.FilePending || p.Attempts != 0 || p.Class != apiv1.ClassGrant {
		t.Fatalf("part refused by a stale grant: %+v", p)
	}
	w = e.claimPart("a1")
	e.report(w, apiv1.TaskReport{Attempt: 1, Done: true, Error: "no space left at the destination", Class: apiv1.ClassNoSpace})
	f := e.file(j.ID, "data/big")
	if f.State != transfer.FileFailed || f.Class != apiv1.ClassNoSpace {
		t.Fatalf("file after its part found no space: %s, class %q", f.State, f.Class)
	}
	if j = e.job(j.ID); !strings.HasPrefix(j.Reason, "storage: no space: data/big: part 0: no space left at the destination") {
		t.Fatalf("job reason %q", j.Reason)
	}
}

// TestFreeBytes: a data node's heartbeat carries its root's free space,
// kept with the node (a heartbeat that cannot say keeps the last word);
// an endpoint's free space is the largest its live nodes last reported,
// unknown when none of them reports one; a negative figure is refused.
func TestFreeBytes(t *testing.T) {
	e := newEnv(t)
	beat := func(node string, free *int64) error {
		_, err := e.s.Heartbeat(e.ctx, agent(node), node, apiv1.DataNodeHeartbeat{Endpoint: endpointOf(node), Address: e.addr(node), Lease: "15s", FreeBytes: free})
		return err
	}
	bytes := func(n int64) *int64 { return &n }
	check := func(what, endpoint string, want int64, wantKnown bool) {
		t.Helper()
		free, known, err := e.s.FreeBytes(e.ctx, endpoint)
		if err != nil || free != want || known != wantKnown {
			t.Fatalf("%s: free %d known %v (%v), want %d %v", what, free, known, err, want, wantKnown)
		}
	}
	check("no node reports", "dst", 0, false)
	for _, b := range []struct {
		node string
		free *int64
	}{{"b1", bytes(1000)}, {"b2", bytes(5000)}, {"b2", nil}} {
		if err := beat(b.node, b.free); err != nil {
			t.Fatal(err)
		}
	}
	check("b2's last word kept", "dst", 5000, true)
	check("another endpoint", "src", 0, false)
	eps, err := e.s.Endpoints(e.ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		for _, n := range ep.Nodes {
			switch {
			case n.Node == "b1" && (n.FreeBytes != 1000 || !n.FreeBytesAt.Equal(t0)):
				t.Errorf("b1 as listed: %d free at %v", n.FreeBytes, n.FreeBytesAt)
			case n.Node == "a1" && !n.FreeBytesAt.IsZero():
				t.Errorf("a1 never said, yet lists %d free at %v", n.FreeBytes, n.FreeBytesAt)
			}
		}
	}
	// b2 goes silent and its lease lapses: b1's word is what is known.
	e.clk.Add(20 * time.Second)
	if err := beat("b1", bytes(800)); err != nil {
		t.Fatal(err)
	}
	check("b2 gone", "dst", 800, true)
	if err := beat("b1", bytes(-1)); !errors.Is(err, reserve.ErrInvalid) {
		t.Fatalf("negative free space: %v", err)
	}
}
