package api_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/grant"
)

// TestJobRoutes drives the transfer service's routes as the data nodes
// and users would: every role's reach, every status, and the bodies the
// OpenAPI document gives (e.do checks each answer against it).
func TestJobRoutes(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	alice, bob := e.user("alice", "user"), e.user("bob", "user")
	a1, b1 := e.agent("dn-a1", "a1"), e.agent("dn-b1", "b1")
	beat := func(tok, node, ep string, tasks ...apiv1.TaskProgress) (int, apiv1.DataNodeWork, []byte) {
		t.Helper()
		var w apiv1.DataNodeWork
		st, raw := e.do("POST", "/api/v1/datanodes/"+node+"/heartbeat", tok, apiv1.DataNodeHeartbeat{Endpoint: ep, Address: "127.0.0.1:7000", Tasks: tasks}, &w)
		return st, w, raw
	}
	// Endpoints are an admin's to add: a data node joins one that lists
	// it, and creates none.
	if st, _, raw := beat(a1, "a1", "src"); st != 403 || !strings.Contains(string(raw), "endpoint src does not exist: an admin creates it") {
		t.Fatalf("heartbeat a1 before src exists: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/endpoints", a1, apiv1.EndpointAdd{Name: "src", Site: "site-a", Nodes: []string{"a1"}}, nil); st != 403 {
		t.Fatalf("a node adds src: %d %s", st, raw)
	}
	for _, add := range []apiv1.EndpointAdd{{Name: "src", Site: "site-a", Nodes: []string{"a1"}}, {Name: "dst", Site: "site-b", Nodes: []string{"b1"}}} {
		var ep transfer.Endpoint
		if st, raw := e.do("POST", "/api/v1/endpoints", e.admin, add, &ep); st != 201 || ep.Site != add.Site || len(ep.Members) != 1 {
			t.Fatalf("add %s: %d %s", add.Name, st, raw)
		}
	}
	if st, raw := e.do("POST", "/api/v1/endpoints", e.admin, apiv1.EndpointAdd{Name: "src", Site: "site-b"}, nil); st != 409 {
		t.Fatalf("add src at another site: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/endpoints", e.admin, apiv1.EndpointAdd{Name: "gone", Site: "site-b"}, nil); st != 201 {
		t.Fatalf("add gone: %d %s", st, raw)
	}
	if st, raw := e.do("DELETE", "/api/v1/endpoints/gone", e.admin, nil, nil); st != 204 {
		t.Fatalf("remove gone: %d %s", st, raw)
	}
	if st, raw := e.do("DELETE", "/api/v1/endpoints/gone", e.admin, nil, nil); st != 404 {
		t.Fatalf("remove gone again: %d %s", st, raw)
	}
	if st, raw := e.do("DELETE", "/api/v1/endpoints/dst/nodes/b2", e.admin, nil, nil); st != 400 {
		t.Fatalf("remove b2, not listed, from dst: %d %s", st, raw)
	}
	if st, raw := e.do("DELETE", "/api/v1/endpoints/src", b1, nil, nil); st != 403 {
		t.Fatalf("a node removes src: %d %s", st, raw)
	}
	if st, w, raw := beat(a1, "a1", "src"); st != 200 || w.GrantKey == "" || w.Node != "a1" {
		t.Fatalf("heartbeat a1: %d %s", st, raw)
	}
	if st, _, raw := beat(b1, "b1", "dst"); st != 200 {
		t.Fatalf("heartbeat b1: %d %s", st, raw)
	}
	for _, tc := range []struct{ tok, node string }{{a1, "b1"}, {alice, "a1"}} {
		if st, _, raw := beat(tc.tok, tc.node, "src"); st != 403 {
			t.Fatalf("heartbeat for %s by another: %d %s", tc.node, st, raw)
		}
	}
	var eps apiv1.EndpointList
	if st, raw := e.do("GET", "/api/v1/endpoints", bob, nil, &eps); st != 200 || len(eps.Endpoints) != 2 || len(eps.Endpoints[1].Nodes) != 1 || !eps.Endpoints[1].Nodes[0].Alive {
		t.Fatalf("endpoints: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/endpoints/src/allow", alice, apiv1.EndpointAllow{Users: []string{"alice"}}, nil); st != 403 {
		t.Fatalf("a user allows: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/endpoints/nowhere/allow", e.admin, apiv1.EndpointAllow{Users: []string{"alice"}}, nil); st != 404 {
		t.Fatalf("allow an unknown endpoint: %d %s", st, raw)
	}
	for _, ep := range []string{"src", "dst"} {
		if st, raw := e.do("POST", "/api/v1/endpoints/"+ep+"/allow", e.admin, apiv1.EndpointAllow{Users: []string{"alice"}}, nil); st != 200 {
			t.Fatalf("allow: %d %s", st, raw)
		}
	}

	// Submission: 201, the same again 200, another request under the key 409.
	req := transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Key: "k1"}
	var jr apiv1.JobResponse
	if st, raw := e.do("POST", "/api/v1/jobs", alice, req, &jr); st != 201 || !jr.Created || jr.Job.State != transfer.JobQueued || !strings.HasPrefix(jr.Job.ID, "j-") {
		t.Fatalf("submit: %d %s", st, raw)
	}
	id := jr.Job.ID
	if st, raw := e.do("POST", "/api/v1/jobs", alice, req, &jr); st != 200 || jr.Created || jr.Job.ID != id {
		t.Fatalf("resubmit: %d %s", st, raw)
	}
	req.Priority = 3
	if st, raw := e.do("POST", "/api/v1/jobs", alice, req, nil); st != 409 || errorOf(t, raw).Code != apiv1.CodeConflict {
		t.Fatalf("another request under the key: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/jobs", alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(-time.Hour)}, nil); st != 400 || errorOf(t, raw).Field != "deadline" {
		t.Fatalf("a deadline in the past: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/jobs", bob, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, nil); st != 403 {
		t.Fatalf("bob submits on endpoints he may not use: %d %s", st, raw)
	}
	if st, raw := e.do("GET", "/api/v1/jobs/"+id, bob, nil, nil); st != 404 {
		t.Fatalf("bob sees alice's job: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/jobs/"+id+"/cancel", bob, nil, nil); st != 404 {
		t.Fatalf("bob cancels alice's job: %d %s", st, raw)
	}

	// a1 lists the dataset, then copies it to b1.
	var c apiv1.Claim
	if st, raw := e.do("POST", "/api/v1/datanodes/a1/claim", b1, apiv1.ClaimRequest{}, nil); st != 403 {
		t.Fatalf("b1 claims for a1: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/datanodes/a1/claim", a1, apiv1.ClaimRequest{Max: 2}, &c); st != 200 || len(c.Tasks) != 1 || c.Tasks[0].Task.Kind != transfer.TaskList {
		t.Fatalf("claim the listing: %d %s", st, raw)
	}
	var files []apiv1.ListedFile
	for i := range 5 {
		files = append(files, apiv1.ListedFile{Path: fmt.Sprintf("data/f%d", i), Source: "data", Size: 1000})
	}
	var ans apiv1.TaskAnswer
	if st, raw := e.do("POST", "/api/v1/tasks/"+c.Tasks[0].Task.ID+"/listing", a1, apiv1.Listing{Attempt: 1, Files: files}, &ans); st != 200 || ans.Cancel {
		t.Fatalf("listing: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/datanodes/a1/claim", a1, nil, &c); st != 200 || len(c.Tasks) != 1 || len(c.Tasks[0].Files) != 5 || c.Tasks[0].Grant == "" {
		t.Fatalf("claim the copy: %d %s", st, raw)
	}
	task := c.Tasks[0].Task
	st, bw, raw := beat(b1, "b1", "dst")
	if st != 200 || len(bw.Fences) != 1 || bw.Fences[0].Task != task.ID {
		t.Fatalf("b1's fences: %d %s", st, raw)
	}
	// b1's receipt secret: its server signs with it what it wrote.
	b1Secret, err := base64.StdEncoding.DecodeString(bw.ReceiptKey)
	if err != nil || len(b1Secret) == 0 {
		t.Fatalf("b1's receipt key %q: %v", bw.ReceiptKey, err)
	}
	// A page that waits for the job to end answers once the wait passes
	// while the job runs; a bad wait is refused.
	var page apiv1.JobPage
	if st, raw := e.do("GET", "/api/v1/jobs/"+id+"?files=none&wait=50ms", alice, nil, &page); st != 200 || page.Job.State != transfer.JobActive {
		t.Fatalf("a page that waits for a running job: %d %s", st, raw)
	}
	for _, w := range []string{"31s", "-1s", "soon"} {
		if st, raw := e.do("GET", "/api/v1/jobs/"+id+"?wait="+w, alice, nil, nil); st != 400 || errorOf(t, raw).Field != "wait" {
			t.Fatalf("wait=%s: %d %s", w, st, raw)
		}
	}
	rep := apiv1.TaskReport{Attempt: 1, Done: true, BytesDone: 5000}
	for _, f := range c.Tasks[0].Files {
		rc := grant.Receipt{Task: task.ID, Attempt: 1, Path: f.Dest, Size: f.Size, Algo: transfer.ChecksumCRC32C, Sum: "00c0ffee"}
		rep.Files = append(rep.Files, apiv1.FileReport{Path: f.Path, OK: true, Checksum: "00c0ffee", Receipt: grant.Spell(rc.Sign(b1Secret))})
	}
	// Another node is refused, and told nothing of the task.
	if st, raw := e.do("POST", "/api/v1/tasks/"+task.ID+"/report", b1, rep, nil); st != 403 || strings.Contains(string(raw), id) || strings.Contains(strings.ReplaceAll(string(raw), task.ID, ""), "a1") {
		t.Fatalf("another node reports a1's task: %d %s", st, raw)
	}
	// The destination asks whether the attempt is current: yes while it
	// runs (only b1's token asks for b1), no once the task ended.
	var gs apiv1.GrantStatus
	check := apiv1.GrantCheck{Task: task.ID, Attempt: 1}
	if st, raw := e.do("POST", "/api/v1/datanodes/b1/grants/check", b1, check, &gs); st != 200 || !gs.Current {
		t.Fatalf("b1 checks the running attempt: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/datanodes/b1/grants/check", a1, check, nil); st != 403 {
		t.Fatalf("a1 checks for b1: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/datanodes/b1/grants/check", b1, apiv1.GrantCheck{Task: task.ID}, nil); st != 400 {
		t.Fatalf("a check without an attempt: %d %s", st, raw)
	}
	ans = apiv1.TaskAnswer{}
	if st, raw := e.do("POST", "/api/v1/tasks/"+task.ID+"/report", a1, rep, &ans); st != 200 || ans.Cancel || ans.Task.State != transfer.TaskSucceeded {
		t.Fatalf("report: %d %s", st, raw)
	}
	gs = apiv1.GrantStatus{}
	if st, raw := e.do("POST", "/api/v1/datanodes/b1/grants/check", b1, check, &gs); st != 200 || gs.Current || !strings.Contains(gs.Reason, "SUCCEEDED") {
		t.Fatalf("b1 checks the ended attempt: %d %s", st, raw)
	}
	// An ended job's page is answered at once, wait or not.
	if st, raw := e.do("GET", "/api/v1/jobs/"+id+"?files=SUCCEEDED&optimizer=1&wait=30s", alice, nil, &page); st != 200 || page.Job.State != transfer.JobSucceeded || len(page.Files) != 5 || len(page.Tasks) != 2 || len(page.Decisions) == 0 {
		t.Fatalf("the job's page: %d %s", st, raw)
	}
	if st, raw := e.do("GET", "/api/v1/jobs/"+id+"?files=bogus", alice, nil, nil); st != 400 {
		t.Fatalf("files=bogus: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/jobs/"+id+"/cancel", alice, apiv1.ActionRequest{Reason: "late"}, nil); st != 409 {
		t.Fatalf("cancel an ended job: %d %s", st, raw)
	}
	var jl apiv1.JobList
	for _, tc := range []struct {
		tok  string
		want int
	}{{alice, 1}, {bob, 0}, {e.admin, 1}} {
		if st, raw := e.do("GET", "/api/v1/jobs?state=SUCCEEDED&limit=5", tc.tok, nil, &jl); st != 200 || len(jl.Jobs) != tc.want {
			t.Fatalf("list: %d %s", st, raw)
		}
	}
	if m := scrape(t, e); !strings.Contains(m, "lightpath_service_moved_bytes_total 5000") || !strings.Contains(m, "lightpath_service_throughput_bytes_per_second") ||
		!strings.Contains(m, `lightpath_service_jobs{state="SUCCEEDED"} 1`) || !strings.Contains(m, `lightpath_service_jobs{state="FAILED"} 0`) {
		t.Fatalf("/metrics lacks the service's aggregates or its jobs by state")
	}

	// A deadline that cannot be met: the submission is answered at once
	// (QUEUED); once listed and planned, the job ends FAILED with the
	// refusal and its earliest completion as its reason.
	var sub apiv1.JobResponse
	if st, raw := e.do("POST", "/api/v1/jobs", alice, transfer.JobRequest{Sources: []string{"src:big"}, Destination: "dst:in", Deadline: t0.Add(time.Minute)}, &sub); st != 201 || sub.Job.State != transfer.JobQueued {
		t.Fatalf("a deadline submission: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/datanodes/a1/claim", a1, nil, &c); st != 200 || len(c.Tasks) != 1 {
		t.Fatalf("claim: %d %s", st, raw)
	}
	big := []apiv1.ListedFile{{Path: "big/x", Source: "big", Size: 1 << 40}}
	if st, raw := e.do("POST", "/api/v1/tasks/"+c.Tasks[0].Task.ID+"/listing", a1, apiv1.Listing{Attempt: 1, Files: big}, nil); st != 200 {
		t.Fatalf("listing: %d %s", st, raw)
	}
	e.svc.BookPending(context.Background())
	var jp apiv1.JobPage
	if st, raw := e.do("GET", "/api/v1/jobs/"+sub.Job.ID, alice, nil, &jp); st != 200 || jp.Job.State != transfer.JobFailed ||
		!strings.Contains(jp.Job.Reason, "cannot be met: the earliest completion is") {
		t.Fatalf("infeasible deadline: %d %s", st, raw)
	}
	if st, raw := e.do("GET", "/api/v1/jobs", alice, nil, &jl); st != 200 || len(jl.Jobs) != 2 {
		t.Fatalf("jobs after the refusal: %d %s", st, raw)
	}
}

// TestClaimWaits: a claim with a wait is held until a job gives it work,
// or answered empty when the wait passes; a wait over 30s is refused. A
// submission over the policy's max_jobs is refused with 429 "limit".
func TestClaimWaits(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	alice := e.user("alice", "user")
	a1, b1 := e.agent("dn-a1", "a1"), e.agent("dn-b1", "b1")
	for _, n := range []struct{ tok, node, ep string }{{a1, "a1", "src"}, {b1, "b1", "dst"}} {
		site := map[string]string{"src": "site-a", "dst": "site-b"}[n.ep]
		if st, raw := e.do("POST", "/api/v1/endpoints", e.admin, apiv1.EndpointAdd{Name: n.ep, Site: site, Nodes: []string{n.node}}, nil); st != 201 {
			t.Fatalf("add %s: %d %s", n.ep, st, raw)
		}
		if st, raw := e.do("POST", "/api/v1/datanodes/"+n.node+"/heartbeat", n.tok, apiv1.DataNodeHeartbeat{Endpoint: n.ep, Address: "127.0.0.1:7000"}, nil); st != 200 {
			t.Fatalf("heartbeat %s: %d %s", n.node, st, raw)
		}
	}
	for _, ep := range []string{"src", "dst"} {
		if st, raw := e.do("POST", "/api/v1/endpoints/"+ep+"/allow", e.admin, apiv1.EndpointAllow{Users: []string{"alice"}}, nil); st != 200 {
			t.Fatalf("allow: %d %s", st, raw)
		}
	}
	for _, w := range []string{"31s", "soon", "-1s"} {
		if st, raw := e.do("POST", "/api/v1/datanodes/a1/claim", a1, apiv1.ClaimRequest{Wait: w}, nil); st != 400 || errorOf(t, raw).Field != "wait" {
			t.Fatalf("wait %q: %d %s", w, st, raw)
		}
	}
	var c apiv1.Claim
	if st, raw := e.do("POST", "/api/v1/datanodes/a1/claim", a1, apiv1.ClaimRequest{Wait: "50ms"}, &c); st != 200 || len(c.Tasks) != 0 {
		t.Fatalf("a wait with nothing to hand out: %d %s", st, raw)
	}
	type answer struct {
		st  int
		c   apiv1.Claim
		raw []byte
	}
	done := make(chan answer, 1)
	parked := e.svc.Parked()
	go func() {
		var c apiv1.Claim
		st, raw := e.do("POST", "/api/v1/datanodes/a1/claim", a1, apiv1.ClaimRequest{Max: 2, Wait: "30s"}, &c)
		done <- answer{st, c, raw}
	}()
	// The claim is held while there is nothing for it: once the service
	// has looked and parked it, it must not have answered.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		held := e.svc.Parked() > parked
		select {
		case a := <-done:
			t.Fatalf("the claim was answered before there was work: %d %s", a.st, a.raw)
		default:
		}
		if held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim never waited")
		}
	}
	if st, raw := e.do("PUT", "/api/v1/policy", e.admin, apiv1.Policy{Default: apiv1.Limits{MaxJobs: 1}}, nil); st != 200 {
		t.Fatalf("set policy: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/jobs", alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, nil); st != 201 {
		t.Fatalf("submit: %d %s", st, raw)
	}
	a := <-done
	if a.st != 200 || len(a.c.Tasks) != 1 || a.c.Tasks[0].Task.Kind != transfer.TaskList {
		t.Fatalf("the waiting claim: %d %s", a.st, a.raw)
	}
	st, raw := e.do("POST", "/api/v1/jobs", alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in2"}, nil)
	if d := errorOf(t, raw); st != 429 || d.Code != apiv1.CodeLimit || !strings.Contains(d.Message, "max_jobs 1") {
		t.Fatalf("a job over max_jobs: %d %s", st, raw)
	}
}
