//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/transfer"
)

// epEnv is a controller of the service topology with an admin, a user
// (alice) and a user of role agent for data nodes (dn), no data node
// running and no endpoint.
type epEnv struct {
	t                *testing.T
	dir, url         string
	admin, alice, dn string // token files
}

func newEPEnv(t *testing.T) *epEnv {
	t.Helper()
	dir := t.TempDir()
	topo := filepath.Join(dir, "topo.yaml")
	if err := os.WriteFile(topo, []byte(serviceTopology), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t, "127.0.0.1")
	ctl := startCtlProc(t, dir, "sqlite:"+filepath.Join(dir, "db"), topo, port)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller log:\n%s", ctl.log)
		}
	})
	e := &epEnv{t: t, dir: dir, url: ctl.url, admin: filepath.Join(dir, "admin.token")}
	for _, u := range []struct{ name, role string }{{"alice", "user"}, {"dn", "agent"}} {
		e.ok(e.admin, "user", "add", u.name, "--role", u.role)
		e.ok(e.admin, "user", "token", "create", u.name, "--out", filepath.Join(dir, u.name+".token"))
	}
	e.alice, e.dn = filepath.Join(dir, "alice.token"), filepath.Join(dir, "dn.token")
	return e
}

func (e *epEnv) lp(tok string, args ...string) result {
	e.t.Helper()
	return runLP(e.t, runOpts{timeout: time.Minute}, append(args, "--controller", e.url, "--controller-token-file", tok)...)
}

func (e *epEnv) ok(tok string, args ...string) result {
	e.t.Helper()
	r := e.lp(tok, args...)
	mustSucceed(e.t, strings.Join(args, " "), r)
	return r
}

// nodeToken has an admin create a token of dn bound to node.
func (e *epEnv) nodeToken(node string) string {
	e.t.Helper()
	f := filepath.Join(e.dir, "dn-"+node+".token")
	e.ok(e.admin, "user", "token", "create", "dn", "--node", node, "--out", f)
	return f
}

// endpoints is endpoint list --json, by name.
func (e *epEnv) endpoints() map[string]transfer.Endpoint {
	e.t.Helper()
	r := e.ok(e.admin, "endpoint", "list", "--json")
	out := map[string]transfer.Endpoint{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if l == "" {
			continue
		}
		var ep transfer.Endpoint
		if err := json.Unmarshal([]byte(l), &ep); err != nil {
			e.t.Fatalf("endpoint list --json: %v: %q", err, l)
		}
		if ep.Name != "" { // not the summary line
			out[ep.Name] = ep
		}
	}
	return out
}

// serve starts lightpath serve as data node node of endpoint ep on host
// (a 127.0.0.x address) with a token file, its lease 3s.
func (e *epEnv) serve(node, ep, host, tok string) (*proc, string) {
	e.t.Helper()
	addr := fmt.Sprintf("%s:%d", host, freePort(e.t, host))
	return startLP(e.t, runOpts{timeout: 2 * time.Minute}, "serve", "--listen", addr, "--root", e.t.TempDir(),
		"--transfer-log", os.DevNull, "--controller", e.url, "--controller-token-file", tok,
		"--node", node, "--endpoint", ep, "--lease", "3s"), addr
}

// beat sends one data node heartbeat through the REST API.
func (e *epEnv) beat(tok, node, ep string) (int, string) {
	e.t.Helper()
	return postJSON(e.t, e.url, tok, "/api/v1/datanodes/"+node+"/heartbeat",
		apiv1.DataNodeHeartbeat{Endpoint: ep, Address: "127.0.0.13:7000", Lease: "5m"})
}

// registered maps each registered data node to its endpoint.
func registered(eps map[string]transfer.Endpoint) map[string]string {
	out := map[string]string{}
	for _, ep := range eps {
		for _, n := range ep.Nodes {
			out[n.Node] = ep.Name
		}
	}
	return out
}

// deleteReq sends DELETE to route path as the holder of tokenFile.
func deleteReq(t *testing.T, url, tokenFile, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("DELETE", url+path, nil)
	req.Header.Set("Authorization", "Bearer "+readTok(t, tokenFile))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("DELETE %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// lastErrLine is the last line of a process's stderr.
func lastErrLine(r result) string {
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestEndpointsAreAnAdminsDecision: which data nodes serve an endpoint is
// an admin's decision (issue 28, finding 3). A data node with a token
// bound to its host registers only for an endpoint that lists it: not
// for one that does not (alice's files would go to it), not for one that
// does not exist (the name would be squatted for good), and it does not
// move from its endpoint to another by itself. Admins add and remove
// endpoints and their nodes; nobody else does.
func TestEndpointsAreAnAdminsDecision(t *testing.T) {
	t.Parallel()
	e := newEPEnv(t)
	r := e.ok(e.admin, "endpoint", "add", "siteB", "--site", "s2", "--node", "b1")
	if !strings.Contains(r.stdout, "endpoint siteB at site s2: data nodes b1") {
		t.Errorf("endpoint add: %q", r.stdout)
	}
	b1, b2 := e.nodeToken("b1"), e.nodeToken("b2")
	if st, raw := e.beat(b1, "b1", "siteB"); st != 200 {
		t.Fatalf("b1 joins siteB, which lists it: %d %s", st, raw)
	}
	before := e.endpoints()

	// b2's data node, bound to b2, at siteB's site, not listed: refused,
	// and the endpoint is as it was.
	p, _ := e.serve("b2", "siteB", "127.0.0.14", b2)
	res := p.Wait()
	if res.code == 0 || !strings.HasPrefix(lastErrLine(res), "lightpath: serve: the controller refuses to register data node b2 of endpoint siteB: ") ||
		!strings.Contains(lastErrLine(res), "endpoint siteB does not list node b2 as a data node: an admin adds it (lightpath endpoint add siteB --site s2 --node b2)") {
		t.Errorf("b2 serving siteB: exit %d, last line %q", res.code, lastErrLine(res))
	}
	if st, raw := e.beat(b2, "b2", "siteB"); st != 403 || !strings.Contains(raw, "does not list node b2") {
		t.Errorf("b2's heartbeat for siteB: %d %s", st, raw)
	}
	after := e.endpoints()
	if len(after) != 1 || !slices.Equal(after["siteB"].Members, []string{"b1"}) || len(after["siteB"].Nodes) != 1 || after["siteB"].Nodes[0].Node != "b1" {
		t.Errorf("siteB after b2's attempts: %+v (before: %+v)", after["siteB"], before["siteB"])
	}

	// A name nobody added cannot be squatted: refused, not created, and
	// an admin adds it later as any other.
	p, _ = e.serve("b2", "squat", "127.0.0.14", b2)
	if res := p.Wait(); res.code == 0 || !strings.Contains(lastErrLine(res), "endpoint squat does not exist: an admin creates it") {
		t.Errorf("b2 creating squat: exit %d, last line %q", res.code, lastErrLine(res))
	}
	if _, ok := e.endpoints()["squat"]; ok {
		t.Errorf("squat was created by b2's data node: %+v", e.endpoints())
	}
	checkFailure(t, "endpoint add by a user", e.lp(e.alice, "endpoint", "add", "squat", "--site", "s2", "--node", "b2"),
		"endpoint add", "only admins add endpoints")
	checkFailure(t, "endpoint add by a data node", e.lp(b2, "endpoint", "add", "squat", "--site", "s2", "--node", "b2"),
		"endpoint add", "only admins add endpoints")
	checkFailure(t, "endpoint add of another site's node", e.lp(e.admin, "endpoint", "add", "squat", "--site", "s2", "--node", "a1"),
		"endpoint add", "node a1 is at site s1, not s2")
	e.ok(e.admin, "endpoint", "add", "squat", "--site", "s2", "--node", "b2")
	if r := e.ok(e.alice, "endpoint", "list"); !regexp.MustCompile(`(?m)^squat +s2 +b2 +not registered `).MatchString(r.stdout) {
		t.Errorf("endpoint list does not show b2 listed by squat, not registered yet:\n%s", r.stdout)
	}
	if st, raw := e.beat(b2, "b2", "squat"); st != 200 {
		t.Errorf("b2 joins squat once an admin listed it: %d %s", st, raw)
	}

	// b1 is listed by squat too, but serves siteB: it does not move.
	if r := e.ok(e.admin, "endpoint", "add", "squat", "--site", "s2", "--node", "b1"); !strings.Contains(r.stdout, "data nodes b1,b2") {
		t.Errorf("endpoint add squat --node b1: %q", r.stdout)
	}
	if st, raw := e.beat(b1, "b1", "squat"); st != 403 || !strings.Contains(raw, "node b1 is a data node of endpoint siteB: it does not move to squat by itself") {
		t.Errorf("b1 moving to squat: %d %s", st, raw)
	}
	if got := registered(e.endpoints()); got["b1"] != "siteB" || got["b2"] != "squat" {
		t.Errorf("registrations after b1's move: %v", got)
	}

	// An admin takes b1 off siteB: its registration goes, its heartbeat
	// for siteB is refused, and it may join squat.
	checkFailure(t, "endpoint remove by a user", e.lp(e.alice, "endpoint", "remove", "siteB", "--node", "b1"), "endpoint remove", "only admins")
	if r := e.ok(e.admin, "endpoint", "remove", "siteB", "--node", "b1"); !strings.Contains(r.stdout, "endpoint siteB at site s2: data nodes none") {
		t.Errorf("endpoint remove siteB --node b1: %q", r.stdout)
	}
	if got := registered(e.endpoints()); got["b1"] != "" {
		t.Errorf("b1 still registered after it was taken off siteB: %v", got)
	}
	if st, raw := e.beat(b1, "b1", "siteB"); st != 403 {
		t.Errorf("b1 back to siteB: %d %s", st, raw)
	}
	if st, raw := e.beat(b1, "b1", "squat"); st != 200 {
		t.Errorf("b1 joins squat: %d %s", st, raw)
	}
	if r := e.ok(e.admin, "endpoint", "remove", "siteB"); !strings.Contains(r.stdout, "endpoint siteB removed") {
		t.Errorf("endpoint remove siteB: %q", r.stdout)
	}
	checkFailure(t, "endpoint remove of a removed endpoint", e.lp(e.admin, "endpoint", "remove", "siteB"), "endpoint remove", "not found")
	if eps := e.endpoints(); len(eps) != 1 || len(eps["squat"].Nodes) != 2 {
		t.Errorf("endpoints at the end: %+v", eps)
	}
}

// TestEnrolNeedsAnAdmin: the token shared by data nodes (bound to no
// node) does not enrol a node that is enrolled already: a copy of it on
// another host neither takes node b1 over (its address, its token) nor
// revokes the real b1's token (issue 28, finding 10). A data node whose
// token an admin revokes exits with the reason instead of retrying.
func TestEnrolNeedsAnAdmin(t *testing.T) {
	t.Parallel()
	e := newEPEnv(t)
	e.ok(e.admin, "endpoint", "add", "siteB", "--site", "s2", "--node", "b1")
	real, addr := e.serve("b1", "siteB", "127.0.0.13", e.dn)
	alive := func() (transfer.DataNode, bool) {
		for _, n := range e.endpoints()["siteB"].Nodes {
			if n.Node == "b1" && n.Alive {
				return n, true
			}
		}
		return transfer.DataNode{}, false
	}
	if !waitFor(time.Minute, func() bool { _, ok := alive(); return ok || real.Exited() }) || real.Exited() {
		t.Fatalf("b1 did not register: %s", real.err.String())
	}
	var toks apiv1.TokenList
	if err := getJSON(t, e.url, e.admin, "/api/v1/users/dn/tokens", &toks); err != nil {
		t.Fatal(err)
	}
	var b1Tok apiv1.Token
	for _, tk := range toks.Tokens {
		if tk.Node == "b1" {
			b1Tok = tk
		}
	}
	if b1Tok.ID == "" {
		t.Fatalf("no token bound to b1: %+v", toks.Tokens)
	}

	// The attacker's copy, elsewhere: refused at enrolment.
	fake, _ := e.serve("b1", "siteB", "127.0.0.14", e.dn)
	res := fake.Wait()
	if res.code == 0 || !strings.Contains(lastErrLine(res), "lightpath: serve: data node b1: enrol as node b1: conflict: node b1 is enrolled already (token "+b1Tok.ID+" of dn is bound to it): enrolling it again needs an admin") {
		t.Errorf("the second b1: exit %d, last line %q", res.code, lastErrLine(res))
	}
	// Nor does the shared token revoke b1's, one by one or all at once.
	if st, raw := deleteReq(t, e.url, e.dn, "/api/v1/tokens/"+b1Tok.ID); st != 403 || !strings.Contains(raw, "bound to no node cannot revoke it") {
		t.Errorf("the shared token revoking b1's: %d %s", st, raw)
	}
	checkFailure(t, "user token revoke with the shared token", e.lp(e.dn, "user", "token", "revoke", b1Tok.ID), "user token revoke", "bound to no node cannot revoke it")
	if r := e.lp(e.dn, "user", "token", "revoke", "--user", "dn"); r.code != 0 {
		t.Errorf("user token revoke --user dn with the shared token: exit %d: %s", r.code, r.stderr)
	}
	if err := getJSON(t, e.url, e.admin, "/api/v1/users/dn/tokens", &toks); err != nil {
		t.Fatal(err)
	}
	for _, tk := range toks.Tokens {
		if tk.Node == "b1" && (tk.ID != b1Tok.ID || !tk.RevokedAt.IsZero()) {
			t.Errorf("b1's tokens after the attempts: %+v", toks.Tokens)
		}
	}
	if n, ok := alive(); !ok || n.Address != addr || real.Exited() {
		t.Errorf("the real b1 after the attempts: %+v alive %v (want %s), exited %v", n, ok, addr, real.Exited())
	}

	// Revoked by an admin: the real b1 exits, saying why.
	e.ok(e.admin, "user", "token", "revoke", b1Tok.ID)
	res = real.Wait()
	if last := lastErrLine(res); res.code == 0 || !strings.HasPrefix(last, "lightpath: serve: ") || !strings.Contains(last, "the controller no longer takes data node b1 of endpoint siteB") || !strings.Contains(last, "was revoked") {
		t.Errorf("the revoked b1: exit %d, last line %q", res.code, last)
	}
}
