package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/transfer"
)

// TestSubmitCosts (issue 28, findings 5 and 11): a submission of more
// than service.MaxSources sources is 413 "too_large" naming the field; a
// user allowed on no endpoint gets 403 before the validation's 400; a
// listing over the API's bound is 413 and fails its job with the reason.
func TestSubmitCosts(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	alice, bob := e.user("alice", "user"), e.user("bob", "user")
	a1, b1 := e.agent("dn-a1", "a1"), e.agent("dn-b1", "b1")
	for _, add := range []apiv1.EndpointAdd{{Name: "src", Site: "site-a", Nodes: []string{"a1"}}, {Name: "dst", Site: "site-b", Nodes: []string{"b1"}}} {
		if st, raw := e.do("POST", "/api/v1/endpoints", e.admin, add, nil); st != 201 {
			t.Fatalf("endpoint add %s: %d %s", add.Name, st, raw)
		}
	}
	for _, n := range []struct{ tok, node, ep string }{{a1, "a1", "src"}, {b1, "b1", "dst"}} {
		if st, raw := e.do("POST", "/api/v1/datanodes/"+n.node+"/heartbeat", n.tok, apiv1.DataNodeHeartbeat{Endpoint: n.ep, Address: "127.0.0.1:7000"}, nil); st != 200 {
			t.Fatalf("heartbeat %s: %d %s", n.node, st, raw)
		}
	}
	for _, ep := range []string{"src", "dst"} {
		if st, raw := e.do("POST", "/api/v1/endpoints/"+ep+"/allow", e.admin, apiv1.EndpointAllow{Users: []string{"alice"}}, nil); st != 200 {
			t.Fatalf("allow: %d %s", st, raw)
		}
	}
	srcs := func(n int, dup bool) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("src:%d", i)
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
		{"over the cap", alice, service.MaxSources + 1, false, 413, apiv1.CodeTooLarge, "10001 sources: a job takes at most 10000"},
		{"far over it, in 1 MiB", alice, 80000, false, 413, apiv1.CodeTooLarge, "80000 sources: a job takes at most 10000"},
		{"bob, a repeated source", bob, 1000, true, 403, apiv1.CodeForbidden, "bob may not use endpoint src"},
		{"alice, a repeated source", alice, 1000, true, 400, apiv1.CodeInvalid, "is given twice"},
	} {
		st, raw := e.do("POST", "/api/v1/jobs", tc.tok, transfer.JobRequest{Sources: srcs(tc.n, tc.dup), Destination: "dst:in"}, nil)
		if d := errorOf(t, raw); st != tc.status || d.Code != tc.code || !strings.Contains(d.Message, tc.says) {
			t.Errorf("%s: %d %s", tc.name, st, raw)
		}
	}
	var jl apiv1.JobList
	if st, raw := e.do("GET", "/api/v1/jobs", e.admin, nil, &jl); st != 200 || len(jl.Jobs) != 0 {
		t.Fatalf("jobs stored: %d %s", st, raw)
	}

	// A listing over the bound fails its job, which is not listed again.
	var jr apiv1.JobResponse
	if st, raw := e.do("POST", "/api/v1/jobs", alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, &jr); st != 201 {
		t.Fatalf("submit: %d %s", st, raw)
	}
	var c apiv1.Claim
	if st, raw := e.do("POST", "/api/v1/datanodes/a1/claim", a1, apiv1.ClaimRequest{Max: 1}, &c); st != 200 || len(c.Tasks) != 1 {
		t.Fatalf("claim: %d %s", st, raw)
	}
	body := `{"attempt":1,"files":[` + strings.Repeat(" ", 64<<20) + `]}`
	st, raw := e.do("POST", "/api/v1/tasks/"+c.Tasks[0].Task.ID+"/listing", a1, body, nil)
	if d := errorOf(t, raw); st != 413 || d.Code != apiv1.CodeTooLarge {
		t.Fatalf("a listing over the bound: %d %s", st, raw)
	}
	var p apiv1.JobPage
	if st, raw := e.do("GET", "/api/v1/jobs/"+jr.Job.ID, alice, nil, &p); st != 200 || p.Job.State != transfer.JobFailed ||
		!strings.Contains(p.Job.Reason, "the listing was refused: the body is over 8388608 bytes") {
		t.Fatalf("the job: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/datanodes/a1/claim", a1, apiv1.ClaimRequest{Max: 1}, &c); st != 200 || len(c.Tasks) != 0 {
		t.Fatalf("listed again: %d %s", st, raw)
	}
}
