package service_test

// The service on a real SQLite store and a real controller, with a clock
// the test moves by hand; data nodes are played by the test through the
// service's methods, as the API calls them.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/store/pgtest"
	"github.com/lightpath/lightpath/internal/testclock"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/grant"
)

var t0 = time.Date(2031, 5, 4, 10, 0, 0, 0, time.UTC)

// twoSites: two hosts per site behind a router, 1 Gbit/s access links and
// a 10 Gbit/s path between the routers.
const twoSites = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: a1, site: s1}
  - {name: a2, site: s1}
  - {name: ra, site: s1, role: router}
  - {name: rb, site: s2, role: router}
  - {name: b1, site: s2}
  - {name: b2, site: s2}
links:
  - {name: la1, ends: [a1, ra], rate: 1G}
  - {name: la2, ends: [a2, ra], rate: 1G}
  - {name: wan, ends: [ra, rb], rate: 10G, delay: 10ms}
  - {name: lb1, ends: [rb, b1], rate: 1G}
  - {name: lb2, ends: [rb, b2], rate: 1G}
`

var (
	admin = controller.Actor{Name: "root", Role: reserve.RoleAdmin}
	alice = controller.Actor{Name: "alice", Role: reserve.RoleUser, Projects: []string{"cms"}}
	bob   = controller.Actor{Name: "bob", Role: reserve.RoleUser}
	oper  = controller.Actor{Name: "olga", Role: reserve.RoleOperator}
)

func agent(node string) controller.Actor {
	return controller.Actor{Name: "dn-" + node, Role: reserve.RoleAgent, Node: node}
}

type env struct {
	t   *testing.T
	ctx context.Context
	db  string
	clk *testclock.Clock
	st  store.Store
	c   *controller.Controller
	s   *service.Service
	// opts change the service's configuration.
	opts []func(*service.Config)
	// secrets are the data nodes' receipt secrets, from their heartbeat
	// answers.
	secrets map[string][]byte
}

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, filepath.Join("..", ".."))) }

func sqliteURL(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "controller.db") }

// eachStore runs a test on SQLite and on PostgreSQL (when one is there).
func eachStore(t *testing.T, fn func(t *testing.T, db string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteURL(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, pgtest.URL(t)) })
}

func newEnv(t *testing.T, opts ...func(*service.Config)) *env {
	t.Helper()
	return newEnvAt(t, sqliteURL(t), opts...)
}

// wholeFiles configures a service that never cuts files in parts.
func wholeFiles(c *service.Config) { c.PartMinBytes = -1 }

// newEnvAt is a controller and its service on database db, with users
// alice, bob and olga, data nodes a1 and a2 of endpoint src (site s1) and
// b1 and b2 of dst (site s2), and alice allowed on both endpoints.
func newEnvAt(t *testing.T, db string, opts ...func(*service.Config)) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), db: db, clk: testclock.New(t0), opts: opts}
	tp, err := controller.ParseTopology("two.yaml", []byte(twoSites))
	if err != nil {
		t.Fatal(err)
	}
	e.open(tp)
	for _, u := range []controller.Actor{alice, bob, oper} {
		if _, err := e.c.AddUser(e.ctx, admin, u.Name, u.Role, u.Projects, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, ep := range []apiv1.EndpointAdd{{Name: "src", Site: "s1", Nodes: []string{"a1", "a2"}}, {Name: "dst", Site: "s2", Nodes: []string{"b1", "b2"}}} {
		if _, _, err := e.s.AddEndpoint(e.ctx, admin, ep); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a1", "a2", "b1", "b2"} {
		e.beat(n, nil)
	}
	for _, ep := range []string{"src", "dst"} {
		if _, err := e.s.Allow(e.ctx, admin, ep, apiv1.EndpointAllow{Users: []string{"alice"}}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *env) open(tp *controller.Topo) {
	e.t.Helper()
	st, err := store.Open(e.ctx, e.db)
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := controller.Open(e.ctx, controller.Config{Store: st, StoreKind: "sqlite", Topology: tp, Now: e.clk.Now})
	if err != nil {
		st.Close()
		e.t.Fatal(err)
	}
	// The tests move the clock by hand and call Tick themselves: Run's
	// own tick (in the tests that run it) never comes.
	cfg := api.ServiceConfig(c)
	cfg.Tick = time.Hour
	for _, o := range e.opts {
		o(&cfg)
	}
	s, err := service.New(e.ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.st, e.c, e.s = st, c, s
	e.t.Cleanup(func() { c.Close(); st.Close() })
}

// restart closes the controller and opens another (and its service) on
// the same database, as a controller killed and started again.
func (e *env) restart() {
	e.t.Helper()
	e.c.Close()
	if err := e.st.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open(nil)
}

func (e *env) addr(node string) string {
	return e.c.Topology().Addrs[node][0].Addr().String() + ":7000"
}

func endpointOf(node string) string {
	if strings.HasPrefix(node, "a") {
		return "src"
	}
	return "dst"
}

func (e *env) beat(node string, tasks []apiv1.TaskProgress) apiv1.DataNodeWork {
	e.t.Helper()
	w, err := e.s.Heartbeat(e.ctx, agent(node), node, apiv1.DataNodeHeartbeat{Endpoint: endpointOf(node), Address: e.addr(node), Lease: "15s", Tasks: tasks, Parts: true})
	if err != nil {
		e.t.Fatalf("heartbeat %s: %v", node, err)
	}
	k, err := base64.StdEncoding.DecodeString(w.ReceiptKey)
	if err != nil || len(k) == 0 {
		e.t.Fatalf("heartbeat %s: receipt key %q: %v", node, w.ReceiptKey, err)
	}
	if e.secrets == nil {
		e.secrets = map[string][]byte{}
	}
	e.secrets[node] = k
	return w
}

// sign gives a report's OK verdicts the receipts the task's destination
// would sign for them (a part task's: its part), as a real destination
// node's server does for what it wrote.
func (e *env) sign(w apiv1.TaskWork, rep apiv1.TaskReport) apiv1.TaskReport {
	e.t.Helper()
	algo := transfer.ChecksumCRC32C
	if w.Checksum == transfer.ChecksumAdler32 {
		algo = w.Checksum
	}
	for i := range rep.Files {
		fr := &rep.Files[i]
		k := slices.IndexFunc(w.Files, func(f transfer.JobFile) bool { return f.Path == fr.Path })
		if !fr.OK || k < 0 {
			continue
		}
		f := w.Files[k]
		rc := grant.Receipt{Task: w.Task.ID, Attempt: w.Task.Attempt, Path: f.Dest, Size: f.Size, Algo: algo, Sum: fr.Checksum}
		if p := w.Task.Part; p != nil {
			rc.Offset, rc.Length, rc.Complete, rc.FileSum = p.Offset, p.Length, fr.Complete, fr.FileChecksum
		}
		fr.Receipt = grant.Spell(rc.Sign(e.secrets[w.Task.To]))
	}
	return rep
}

func (e *env) claim(node string, max int) []apiv1.TaskWork {
	e.t.Helper()
	c, err := e.s.Claim(e.ctx, agent(node), node, apiv1.ClaimRequest{Max: max})
	if err != nil {
		e.t.Fatalf("claim %s: %v", node, err)
	}
	return c.Tasks
}

func (e *env) job(id string) transfer.Job {
	e.t.Helper()
	p, err := e.s.Get(e.ctx, admin, id, nil, true, false)
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Job
}

// listed is n files of size bytes under data/.
func listed(n int, size int64) []apiv1.ListedFile {
	var out []apiv1.ListedFile
	for i := range n {
		out = append(out, apiv1.ListedFile{Path: fmt.Sprintf("data/f%03d", i), Source: "data", Size: size, MTime: t0})
	}
	return out
}

// listJob submits a job and has a1 list it with files.
func (e *env) listJob(req transfer.JobRequest, files []apiv1.ListedFile) transfer.Job {
	e.t.Helper()
	j, created, err := e.s.Submit(e.ctx, alice, req)
	if err != nil || !created {
		e.t.Fatalf("submit: %v (created %v)", err, created)
	}
	if j.State != transfer.JobQueued || j.Reason != "listing the dataset on endpoint src" {
		e.t.Fatalf("new job: %s %q", j.State, j.Reason)
	}
	ws := e.claim("a1", 4)
	if len(ws) != 1 || ws[0].Task.Kind != transfer.TaskList || ws[0].Task.Attempt != 1 || len(ws[0].Sources) != 1 || ws[0].Sources[0] != "data" {
		e.t.Fatalf("list claim: %+v", ws)
	}
	ans, err := e.s.Listing(e.ctx, agent("a1"), ws[0].Task.ID, apiv1.Listing{Attempt: 1, Files: files})
	if err != nil || ans.Cancel {
		e.t.Fatalf("listing: %v %+v", err, ans)
	}
	return e.job(j.ID)
}

func (e *env) okReport(w apiv1.TaskWork) apiv1.TaskReport {
	r := apiv1.TaskReport{Attempt: w.Task.Attempt, Done: true, BytesDone: w.Task.Bytes}
	for _, f := range w.Files {
		r.Files = append(r.Files, apiv1.FileReport{Path: f.Path, OK: true, Checksum: "0badcafe", Bytes: f.Size})
	}
	return e.sign(w, r)
}

// TestPushEnds: a push's flow spec names the source node's address and
// the destination server's; the push is told to leave from that source
// only when the server's address is its node's, so the spec matches it.
func TestPushEnds(t *testing.T) {
	tp, err := controller.ParseTopology("two.yaml", []byte(twoSites))
	if err != nil {
		t.Fatal(err)
	}
	a1 := tp.Addrs["a1"][0].Addr().String()
	b1 := tp.Addrs["b1"][0].Addr().String()
	for _, tc := range []struct {
		name, address, spec, source string
	}{
		{"its node's address", b1 + ":7000", "tcp " + a1 + " > " + b1 + ":7000", a1},
		{"another address", "127.0.0.1:7000", "tcp " + a1 + " > " + b1 + ":7000", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to := transfer.DataNode{Node: "b1", Address: tc.address}
			spec, err := service.FlowSpec(tp, "a1", to, false)
			if err != nil || spec != tc.spec {
				t.Errorf("flow spec %q (%v), want %q", spec, err, tc.spec)
			}
			// A UDP job's data goes to the same port over udp.
			spec, err = service.FlowSpec(tp, "a1", to, true)
			if want := tc.spec + ", udp " + strings.TrimPrefix(tc.spec, "tcp "); err != nil || spec != want {
				t.Errorf("udp flow spec %q (%v), want %q", spec, err, want)
			}
			if got := service.SourceAddr(tp, "a1", to); got != tc.source {
				t.Errorf("source %q, want %q", got, tc.source)
			}
		})
	}
	if got := service.SourceAddr(nil, "a1", transfer.DataNode{Node: "b1", Address: b1 + ":7000"}); got != "" {
		t.Errorf("without a topology: source %q", got)
	}
}

func TestJobLifecycle(t *testing.T) { eachStore(t, testJobLifecycle) }

func testJobLifecycle(t *testing.T, db string) {
	e := newEnvAt(t, db)
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", CC: "fast", Transport: "udp"}, listed(100, 1<<20))
	if j.State != transfer.JobActive || j.FilesTotal != 100 || j.BytesTotal != 100<<20 || j.Reason != "moving: 0 of 100 files" {
		t.Fatalf("listed job: %s %q files %d bytes %d", j.State, j.Reason, j.FilesTotal, j.BytesTotal)
	}
	if j.Checksum != transfer.ChecksumCRC32C || j.Policy != transfer.PolicyUpdate || j.CC != "fast" || j.Transport != "udp" {
		t.Fatalf("defaults: %q %q, cc %q, transport %q", j.Checksum, j.Policy, j.CC, j.Transport)
	}
	w1 := e.claim("a1", 4)
	w2 := e.claim("a2", 4)
	if len(w1) != 1 || len(w2) != 1 {
		t.Fatalf("copy claims: a1 %d, a2 %d tasks", len(w1), len(w2))
	}
	// Each pair's part of the dataset, at most BatchFiles a task.
	if len(w1[0].Files) != 50 || len(w2[0].Files) != 50 {
		t.Fatalf("batches: %d and %d files", len(w1[0].Files), len(w2[0].Files))
	}
	if w1[0].Task.To == w2[0].Task.To {
		t.Fatalf("both pairs push to %s", w1[0].Task.To)
	}
	for _, w := range append(w1, w2...) {
		if w.Task.State != transfer.TaskActive || w.Task.Attempt != 1 || w.Address != e.addr(w.Task.To) || w.Checksum != "crc32c" || w.Policy != "update" || w.CC != "fast" || w.Transport != "udp" {
			t.Fatalf("task work: %+v, cc %q, transport %q", w.Task, w.CC, w.Transport)
		}
		if w.Files[0].Dest != "in/"+w.Files[0].Path || w.Files[0].State != transfer.FileActive || w.Files[0].Attempts != 1 {
			t.Fatalf("file: %+v", w.Files[0])
		}
		if want := e.c.Topology().Addrs[w.Task.From][0].Addr().String(); w.SourceAddr != want {
			t.Fatalf("task %s leaves from %q, want %s (its flow spec's source)", w.Task.ID, w.SourceAddr, want)
		}
		pub, _ := grant.DecodeKey(e.s.GrantKey())
		g, err := grant.Parse(pub, w.Grant)
		if err != nil || g.User != "alice" || g.Node != w.Task.To || g.Task != w.Task.ID || g.Attempt != 1 || g.Mode != grant.Write || len(g.Paths) != 1 || g.Paths[0] != "in" {
			t.Fatalf("grant %+v: %v", g, err)
		}
	}
	// The destination nodes are told their tasks' attempts.
	if f := e.beat(w1[0].Task.To, nil).Fences; len(f) != 1 || f[0].Task != w1[0].Task.ID || f[0].Attempt != 1 {
		t.Fatalf("fences of %s: %+v", w1[0].Task.To, f)
	}
	if more := e.claim("a1", 4); len(more) != 0 {
		t.Fatalf("a claim with nothing left handed out %d tasks", len(more))
	}
	// Progress, then the reports.
	e.clk.Add(2 * time.Second)
	e.beat("a1", []apiv1.TaskProgress{{Task: w1[0].Task.ID, Attempt: 1, BytesDone: 1 << 20, ThroughputBps: 8e8}})
	if ag := e.s.Aggregates(); ag.ThroughputBps != 8e8 || ag.SiteOutBps["s1"] != 8e8 || ag.SiteInBps["s2"] != 8e8 {
		t.Fatalf("aggregates: %+v", ag)
	}
	for _, w := range []apiv1.TaskWork{w1[0], w2[0]} {
		ans, err := e.s.Report(e.ctx, agent(w.Task.From), w.Task.ID, e.okReport(w))
		if err != nil || ans.Cancel || ans.Task.State != transfer.TaskSucceeded {
			t.Fatalf("report: %v %+v", err, ans)
		}
	}
	j = e.job(j.ID)
	if j.State != transfer.JobSucceeded || j.FilesDone != 100 || j.BytesDone != 100<<20 || j.Reason != "" || j.EndedAt.IsZero() {
		t.Fatalf("ended job: %s %q done %d bytes %d", j.State, j.Reason, j.FilesDone, j.BytesDone)
	}
	var pairBytes int64
	for _, p := range j.Pairs {
		pairBytes += p.BytesDone
	}
	if len(j.Pairs) != 2 || pairBytes != j.BytesDone {
		t.Fatalf("pairs: %+v", j.Pairs)
	}
	if ag := e.s.Aggregates(); ag.BytesMoved != 100<<20 {
		t.Fatalf("bytes moved: %d", ag.BytesMoved)
	}
	page, err := e.s.Get(e.ctx, alice, j.ID, []string{transfer.FileSucceeded}, false, true)
	if err != nil || len(page.Files) != 100 || len(page.Tasks) != 3 || len(page.Decisions) == 0 {
		t.Fatalf("page: %v files %d tasks %d decisions %d", err, len(page.Files), len(page.Tasks), len(page.Decisions))
	}
	if _, err := e.s.Get(e.ctx, bob, j.ID, nil, false, false); !errors.Is(err, reserve.ErrNotFound) {
		t.Fatalf("bob sees alice's job: %v", err)
	}
	if js, _ := e.s.List(e.ctx, bob, store.JobFilter{}); len(js) != 0 {
		t.Fatalf("bob lists %d jobs", len(js))
	}
	if js, _ := e.s.List(e.ctx, oper, store.JobFilter{}); len(js) != 1 {
		t.Fatalf("an operator lists %d jobs", len(js))
	}
}

func TestFileRetriesAndFailure(t *testing.T) {
	e := newEnv(t)
	// One pair only: a2 and b2 go silent.
	e.clk.Add(20 * time.Second)
	e.beat("a1", nil)
	e.beat("b1", nil)
	files := listed(3, 1000)
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in",
		Expected: map[string]string{"src:data/f001": "00000001"}}, files)
	attempt := func() apiv1.TaskWork {
		t.Helper()
		ws := e.claim("a1", 1)
		if len(ws) != 1 {
			t.Fatalf("claim: %d tasks", len(ws))
		}
		return ws[0]
	}
	// f000 is refused for good, f001's checksum differs, f002 drops.
	w := attempt()
	rep := apiv1.TaskReport{Attempt: 1, Done: true, Files: []apiv1.FileReport{
		{Path: "data/f000", Error: "permission denied", Permanent: true, Class: apiv1.ClassPermission},
		{Path: "data/f001", OK: true, Checksum: "00000002"},
		{Path: "data/f002", Error: "connection reset", Class: apiv1.ClassNetwork},
	}}
	if _, err := e.s.Report(e.ctx, agent("a1"), w.Task.ID, e.sign(w, rep)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		w = attempt()
		rep = apiv1.TaskReport{Attempt: 1, Done: true}
		for _, f := range w.Files {
			rep.Files = append(rep.Files, apiv1.FileReport{Path: f.Path, OK: f.Path == "data/f001", Checksum: "00000002", Error: "connection reset", Class: apiv1.ClassNetwork})
		}
		if _, err := e.s.Report(e.ctx, agent("a1"), w.Task.ID, e.sign(w, rep)); err != nil {
			t.Fatal(err)
		}
	}
	j = e.job(j.ID)
	if j.State != transfer.JobFailed || j.FilesFailed != 3 {
		t.Fatalf("job: %s failed %d", j.State, j.FilesFailed)
	}
	want := "3 of 3 files failed; first: data/f000: permission denied"
	if j.Reason != want {
		t.Fatalf("reason %q, want %q", j.Reason, want)
	}
	page, _ := e.s.Get(e.ctx, alice, j.ID, nil, false, false)
	for _, f := range page.Files {
		switch f.Path {
		case "data/f000":
			if f.Attempts != 1 {
				t.Errorf("f000 tried %d times", f.Attempts)
			}
		case "data/f001":
			if f.Attempts != 2 || f.Error != "checksum mismatch: got 00000002, want 00000001" {
				t.Errorf("f001: %d attempts, %q", f.Attempts, f.Error)
			}
		case "data/f002":
			if f.Attempts != service.MaxAttempts || f.Error != "connection reset" {
				t.Errorf("f002: %d attempts, %q", f.Attempts, f.Error)
			}
		}
	}
}

func TestSubmitRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	if _, _, err := e.s.AddEndpoint(e.ctx, admin, apiv1.EndpointAdd{Name: "closed", Site: "s1"}); err != nil {
		t.Fatal(err)
	}
	e.beat("a1", nil)
	ok := transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}
	for _, tc := range []struct {
		name  string
		who   controller.Actor
		edit  func(*transfer.JobRequest)
		want  error
		field string
	}{
		{"no source", alice, func(r *transfer.JobRequest) { r.Sources = nil }, reserve.ErrInvalid, "sources"},
		{"malformed source", alice, func(r *transfer.JobRequest) { r.Sources = []string{"data"} }, reserve.ErrInvalid, "sources"},
		{"source out of root", alice, func(r *transfer.JobRequest) { r.Sources = []string{"src:../etc"} }, reserve.ErrInvalid, "sources"},
		{"two source endpoints", alice, func(r *transfer.JobRequest) { r.Sources = []string{"src:a", "dst:b"} }, reserve.ErrInvalid, "sources"},
		{"malformed destination", alice, func(r *transfer.JobRequest) { r.Destination = ":in" }, reserve.ErrInvalid, "destination"},
		{"unknown source endpoint", alice, func(r *transfer.JobRequest) { r.Sources = []string{"nowhere:data"} }, reserve.ErrInvalid, "sources"},
		{"unknown destination endpoint", alice, func(r *transfer.JobRequest) { r.Destination = "nowhere:in" }, reserve.ErrInvalid, "destination"},
		{"endpoint not allowed", bob, func(r *transfer.JobRequest) {}, reserve.ErrForbidden, ""},
		{"closed endpoint", alice, func(r *transfer.JobRequest) { r.Destination = "closed:in" }, reserve.ErrForbidden, ""},
		{"deadline in the past", alice, func(r *transfer.JobRequest) { r.Deadline = t0.Add(-time.Minute) }, reserve.ErrInvalid, "deadline"},
		{"checksum", alice, func(r *transfer.JobRequest) { r.Checksum = "md5" }, reserve.ErrInvalid, "checksum"},
		{"policy", alice, func(r *transfer.JobRequest) { r.Policy = "clobber" }, reserve.ErrInvalid, "policy"},
		{"priority", alice, func(r *transfer.JobRequest) { r.Priority = 1001 }, reserve.ErrInvalid, "priority"},
		{"cc not a name", alice, func(r *transfer.JobRequest) { r.CC = "FAST TCP" }, reserve.ErrInvalid, "cc"},
		{"cc too long", alice, func(r *transfer.JobRequest) { r.CC = "a-name-longer-than-the-kernels" }, reserve.ErrInvalid, "cc"},
		{"unknown transport", alice, func(r *transfer.JobRequest) { r.Transport = "quic" }, reserve.ErrInvalid, "transport"},
		{"a kernel's cc over udp", alice, func(r *transfer.JobRequest) { r.Transport, r.CC = "udp", "cubic" }, reserve.ErrInvalid, "transport"},
		{"expected not hex", alice, func(r *transfer.JobRequest) { r.Expected = map[string]string{"src:data/x": "zz"} }, reserve.ErrInvalid, "expected_checksums"},
		{"project not a member", alice, func(r *transfer.JobRequest) { r.Project = "atlas" }, reserve.ErrForbidden, ""},
		{"agent", agent("a1"), func(r *transfer.JobRequest) {}, reserve.ErrForbidden, ""},
		{"onto itself", alice, func(r *transfer.JobRequest) { r.Destination = "src:data/in" }, reserve.ErrInvalid, "destination"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := ok
			req.Sources = append([]string(nil), ok.Sources...)
			tc.edit(&req)
			_, _, err := e.s.Submit(e.ctx, tc.who, req)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			var re *reserve.RequestError
			if tc.field != "" && (!errors.As(err, &re) || re.Field != tc.field) {
				t.Fatalf("error %v: want field %s", err, tc.field)
			}
		})
	}
	if js, err := e.st.ListJobs(e.ctx, store.JobFilter{}); err != nil || len(js) != 0 {
		t.Fatalf("bad requests stored %d jobs (%v)", len(js), err)
	}
	if ts, err := e.st.ListTasks(e.ctx, store.TaskFilter{}); err != nil || len(ts) != 0 {
		t.Fatalf("bad requests stored %d tasks (%v)", len(ts), err)
	}
}

func TestSubmitIdempotent(t *testing.T) {
	e := newEnv(t)
	req := transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Key: "run-7"}
	j1, created, err := e.s.Submit(e.ctx, alice, req)
	if err != nil || !created {
		t.Fatal(err, created)
	}
	req.Checksum = "crc32c" // the default, spelled out: the same request
	j2, created, err := e.s.Submit(e.ctx, alice, req)
	if err != nil || created || j2.ID != j1.ID {
		t.Fatalf("repeat: %v created %v id %s vs %s", err, created, j2.ID, j1.ID)
	}
	req.Priority = 5
	if _, _, err := e.s.Submit(e.ctx, alice, req); !errors.Is(err, reserve.ErrConflict) {
		t.Fatalf("a different request under the key: %v", err)
	}
	req.Priority, req.CC = 0, "reno"
	if _, _, err := e.s.Submit(e.ctx, alice, req); !errors.Is(err, reserve.ErrConflict) {
		t.Fatalf("another congestion control under the key: %v", err)
	}
	// The key is the owner's: an operator may use it for another job.
	req.CC = ""
	if _, created, err := e.s.Submit(e.ctx, oper, req); err != nil || !created {
		t.Fatalf("another owner's key: %v %v", err, created)
	}
	if js, _ := e.st.ListJobs(e.ctx, store.JobFilter{}); len(js) != 2 {
		t.Fatalf("%d jobs", len(js))
	}
}

func TestLeaseLapseRequeues(t *testing.T) { eachStore(t, testLeaseLapseRequeues) }

func testLeaseLapseRequeues(t *testing.T, db string) {
	e := newEnvAt(t, db)
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(10, 1000))
	old := e.claim("a1", 1)[0]
	to := old.Task.To
	// a1 goes silent; the others keep beating.
	e.clk.Add(10 * time.Second)
	for _, n := range []string{"a2", "b1", "b2"} {
		e.beat(n, nil)
	}
	e.clk.Add(10 * time.Second)
	for _, n := range []string{"a2", "b1", "b2"} {
		e.beat(n, nil)
	}
	e.s.Tick(e.ctx)
	j = e.job(j.ID)
	if j.Reason != "data node a1 lost; its tasks wait for another node" {
		t.Fatalf("reason: %q", j.Reason)
	}
	if _, err := e.s.Claim(e.ctx, agent("a1"), "a1", apiv1.ClaimRequest{}); !errors.Is(err, reserve.ErrConflict) {
		t.Fatalf("a lapsed node claims: %v", err)
	}
	ws := e.claim("a2", 1)
	if len(ws) != 1 || ws[0].Task.ID != old.Task.ID || ws[0].Task.Attempt != 2 || ws[0].Task.From != "a2" || ws[0].Task.To != to || len(ws[0].Files) != 5 {
		t.Fatalf("requeued claim: %+v", ws)
	}
	// The destination fences the old attempt; a1, back, is told to stop.
	if f := e.beat(to, nil).Fences; len(f) != 1 || f[0].Attempt != 2 {
		t.Fatalf("fences: %+v", f)
	}
	if w := e.beat("a1", []apiv1.TaskProgress{{Task: old.Task.ID, Attempt: 1}}); len(w.Cancel) != 1 || w.Cancel[0] != old.Task.ID {
		t.Fatalf("a1's heartbeat: cancel %v", w.Cancel)
	}
	// a1 no longer holds the task: its report is refused, and says
	// nothing of the task (a2 holds it now).
	ans, err := e.s.Report(e.ctx, agent("a1"), old.Task.ID, e.okReport(old))
	// (The task's random id may hold "a2" too: it is taken out first.)
	if !errors.Is(err, reserve.ErrForbidden) || ans.Task.ID != "" || strings.Contains(strings.ReplaceAll(err.Error(), old.Task.ID, ""), "a2") {
		t.Fatalf("the old attempt's report: %v %+v", err, ans)
	}
	if e.job(j.ID).FilesDone != 0 {
		t.Fatal("the old attempt's report counted")
	}
	if ans, err := e.s.Report(e.ctx, agent("a2"), ws[0].Task.ID, e.okReport(ws[0])); err != nil || ans.Cancel {
		t.Fatalf("the new attempt's report: %v %+v", err, ans)
	}
	// The other half, on a2's own pair.
	rest := e.claim("a2", 1)
	if len(rest) != 1 || len(rest[0].Files) != 5 || rest[0].Task.Attempt != 1 {
		t.Fatalf("the rest: %+v", rest)
	}
	if _, err := e.s.Report(e.ctx, agent("a2"), rest[0].Task.ID, e.okReport(rest[0])); err != nil {
		t.Fatal(err)
	}
	if j = e.job(j.ID); j.State != transfer.JobSucceeded {
		t.Fatalf("job %s %q", j.State, j.Reason)
	}
	// An agent cannot speak for another node.
	if _, err := e.s.Claim(e.ctx, agent("a1"), "a2", apiv1.ClaimRequest{}); !errors.Is(err, reserve.ErrForbidden) {
		t.Fatalf("a1 claims for a2: %v", err)
	}
}

func TestCancelJob(t *testing.T) {
	e := newEnv(t)
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(10, 1000))
	w := e.claim("a1", 1)[0]
	if _, err := e.s.Cancel(e.ctx, bob, j.ID, ""); !errors.Is(err, reserve.ErrNotFound) {
		t.Fatalf("bob cancels alice's job: %v", err)
	}
	j, err := e.s.Cancel(e.ctx, alice, j.ID, "wrong dataset")
	if err != nil || j.State != transfer.JobCancelled || j.Reason != "cancelled by alice: wrong dataset" {
		t.Fatalf("cancel: %v %s %q", err, j.State, j.Reason)
	}
	if w := e.beat("a1", []apiv1.TaskProgress{{Task: w.Task.ID, Attempt: 1}}); len(w.Cancel) != 1 {
		t.Fatalf("heartbeat after cancel: %+v", w.Cancel)
	}
	if ans, err := e.s.Report(e.ctx, agent("a1"), w.Task.ID, e.okReport(w)); err != nil || !ans.Cancel || !strings.Contains(ans.Reason, "cancelled") {
		t.Fatalf("report after cancel: %v %+v", err, ans)
	}
	page, _ := e.s.Get(e.ctx, alice, j.ID, []string{transfer.FileCancelled}, false, false)
	if len(page.Files) != 10 {
		t.Fatalf("%d files cancelled", len(page.Files))
	}
	if _, err := e.s.Cancel(e.ctx, alice, j.ID, ""); !errors.Is(err, reserve.ErrConflict) {
		t.Fatalf("cancel twice: %v", err)
	}
}

// submitDeadline submits a deadline job and plays a1 listing it while the
// submission waits.
// latestStart is the latest start of a booked job's pairs.
func latestStart(j transfer.Job) time.Time {
	start := j.Pairs[0].Start
	for _, p := range j.Pairs {
		if p.Start.After(start) {
			start = p.Start
		}
	}
	return start
}

// startBooked moves the clock to the latest start of a booked job's
// pairs, has every data node heartbeat and the clock tick, and returns
// the job, which must then be ACTIVE.
func (e *env) startBooked(j transfer.Job) transfer.Job {
	e.t.Helper()
	start := latestStart(j)
	e.clk.Set(start)
	for _, n := range []string{"a1", "a2", "b1", "b2"} {
		e.beat(n, nil)
	}
	e.c.Tick(e.ctx) // the reservations turn ACTIVE
	e.s.Tick(e.ctx)
	if j = e.job(j.ID); j.State != transfer.JobActive {
		e.t.Fatalf("at its start the job is %s %q", j.State, j.Reason)
	}
	return j
}

func (e *env) submitDeadline(req transfer.JobRequest, files []apiv1.ListedFile) (transfer.Job, error) {
	e.t.Helper()
	j, _, err := e.s.Submit(e.ctx, alice, req)
	if err != nil {
		return j, err
	}
	if j.State != transfer.JobQueued {
		e.t.Fatalf("a submission is answered QUEUED at once, not %s", j.State)
	}
	ws := e.claim("a1", 1)
	if len(ws) != 1 {
		e.t.Fatalf("the submission's listing: %+v", ws)
	}
	if _, err := e.s.Listing(e.ctx, agent("a1"), ws[0].Task.ID, apiv1.Listing{Attempt: 1, Files: files}); err != nil {
		e.t.Fatal(err)
	}
	e.s.BookPending(e.ctx)
	j = e.job(j.ID)
	if j.State == transfer.JobFailed {
		return j, errors.New(j.Reason)
	}
	return j, nil
}

func TestDeadlineJobBooked(t *testing.T) { eachStore(t, testDeadlineJobBooked) }

func testDeadlineJobBooked(t *testing.T, db string) {
	e := newEnvAt(t, db)
	// 4 GB by an hour from now: each pair's access links carry 900 Mbit/s.
	j, err := e.submitDeadline(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Hour)}, listed(40, 100_000_000))
	if err != nil {
		t.Fatal(err)
	}
	if j.State != transfer.JobScheduled || len(j.Pairs) != 2 || j.Algorithm == "" || !strings.HasPrefix(j.Reason, "booked: starts at ") {
		t.Fatalf("booked job: %s %q pairs %+v", j.State, j.Reason, j.Pairs)
	}
	var shares int64
	for _, p := range j.Pairs {
		shares += p.ShareBytes
		r, err := e.c.Get(e.ctx, alice, p.Reservation)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != reserve.StateReserved || len(r.History) < 2 || r.History[0].To != reserve.StateHeld || r.History[1].To != reserve.StateReserved {
			t.Fatalf("reservation %s: %s, history %+v", r.ID, r.State, r.History)
		}
		if r.From != p.From || r.To != p.To || r.Bandwidth != p.RateBps || r.End.After(j.Deadline) || r.FlowSpec.IsZero() {
			t.Fatalf("reservation %+v for pair %+v", r, p)
		}
	}
	if shares != j.BytesTotal {
		t.Fatalf("shares sum to %d, the dataset is %d", shares, j.BytesTotal)
	}
	// The window opens: the job goes ACTIVE and its tasks run paced.
	j = e.startBooked(j)
	ws := e.claim("a1", 4)
	if len(ws) == 0 || ws[0].Task.Reservation == "" || ws[0].Task.RateBps == 0 {
		t.Fatalf("paced task: %+v", ws)
	}
	// Cancelling releases the reservations.
	if _, err := e.s.Cancel(e.ctx, alice, j.ID, ""); err != nil {
		t.Fatal(err)
	}
	for _, p := range j.Pairs {
		if r, _ := e.c.Get(e.ctx, alice, p.Reservation); r.State != reserve.StateCancelled {
			t.Fatalf("reservation %s after the job's cancel: %s", r.ID, r.State)
		}
	}
}

// TestBookedJobStartsWhenActive: Run starts a booked job as soon as one
// of its reservations turns ACTIVE, from the controller's events, without
// waiting for its clock's tick (an hour here).
func TestBookedJobStartsWhenActive(t *testing.T) {
	e := newEnv(t)
	j, err := e.submitDeadline(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Hour)}, listed(40, 100_000_000))
	if err != nil {
		t.Fatal(err)
	}
	if j.State != transfer.JobScheduled {
		t.Fatalf("booked job: %s %q", j.State, j.Reason)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { e.s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// The controller's clock turns the reservations ACTIVE (their start
	// is now; no agent manages this topology's nodes).
	e.clk.Set(j.Pairs[0].Start)
	e.c.Tick(e.ctx)
	for _, p := range j.Pairs {
		if r, err := e.c.Get(e.ctx, alice, p.Reservation); err != nil || r.State != reserve.StateActive {
			t.Fatalf("reservation %s after the controller's tick: %s %v", p.Reservation, r.State, err)
		}
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if j = e.job(j.ID); j.State != transfer.JobScheduled {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if j.State != transfer.JobActive || !j.StartedAt.Equal(e.clk.Now()) {
		t.Fatalf("the job once its reservations are ACTIVE: %s %q, started %v", j.State, j.Reason, j.StartedAt)
	}
	if ws := e.claim("a1", 4); len(ws) == 0 || ws[0].Task.Reservation == "" || ws[0].Task.RateBps == 0 {
		t.Fatalf("paced task: %+v", ws)
	}
}

// TestPairWaitsForItsReservation: a booked pair's copies wait for its
// reservation to be in place (ACTIVE), not only for its start, and go on
// anyway once ProvisionGrace has passed.
func TestPairWaitsForItsReservation(t *testing.T) {
	e := newEnv(t)
	j, err := e.submitDeadline(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Hour)}, listed(40, 100_000_000))
	if err != nil {
		t.Fatal(err)
	}
	start := latestStart(j)
	// The window opens, the reservations are still RESERVED (the
	// controller's clock has not run): the job is ACTIVE by the service's
	// tick, its pairs wait.
	e.clk.Set(start)
	for _, n := range []string{"a1", "a2", "b1", "b2"} {
		e.beat(n, nil)
	}
	e.s.Tick(e.ctx)
	if j = e.job(j.ID); j.State != transfer.JobActive {
		t.Fatalf("at its start the job is %s %q", j.State, j.Reason)
	}
	if ws := e.claim("a1", 4); len(ws) != 0 {
		t.Fatalf("a1's pair copies while its reservation is RESERVED: %+v", ws)
	}
	// Past the grace a pair goes on without its reservation in place.
	e.clk.Set(start.Add(service.ProvisionGrace))
	if ws := e.claim("a2", 4); len(ws) == 0 || ws[0].Task.Reservation == "" {
		t.Fatalf("a2's pair after the grace: %+v", ws)
	}
	// In place: a1's pair starts.
	e.c.Tick(e.ctx)
	if ws := e.claim("a1", 4); len(ws) == 0 || ws[0].Task.Reservation == "" || ws[0].Task.RateBps == 0 {
		t.Fatalf("a1's pair once its reservation is ACTIVE: %+v", ws)
	}
}

// A deadline that cannot be met: the job ends FAILED with the refusal
// and the earliest completion as its reason, its files cancelled, nothing
// booked (feasibility is decided before any hold).
func TestDeadlineInfeasibleRefused(t *testing.T) {
	e := newEnv(t)
	// 40 GB in a minute over two 900 Mbit/s pairs cannot be done.
	j, err := e.submitDeadline(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Minute)}, listed(40, 1_000_000_000))
	if err == nil || j.State != transfer.JobFailed {
		t.Fatalf("infeasible deadline: %s %v", j.State, err)
	}
	want := "deadline 2031-05-04T10:01:00Z cannot be met: the earliest completion is "
	if !strings.HasPrefix(j.Reason, want) || !strings.Contains(j.Reason, "(algorithm joint-maxflow-earliest-completion)") {
		t.Fatalf("reason %q", j.Reason)
	}
	if rs, _ := e.c.List(e.ctx, admin, store.Filter{}); len(rs) != 0 {
		t.Fatalf("a refused job booked %d reservations", len(rs))
	}
	for range 10 {
		e.s.Tick(e.ctx) // the sweep ends its files
	}
	if fs, _ := e.st.ListJobFiles(e.ctx, store.JobFileFilter{Job: j.ID, States: []string{transfer.FilePending}}); len(fs) != 0 {
		t.Fatalf("%d files of a refused job still PENDING", len(fs))
	}
}

func TestRestartCarriesOn(t *testing.T) { eachStore(t, testRestartCarriesOn) }

func testRestartCarriesOn(t *testing.T, db string) {
	e := newEnvAt(t, db)
	key := e.s.GrantKey()
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(100, 1000))
	w1 := e.claim("a1", 1)[0]
	e.restart()
	if e.s.GrantKey() != key {
		t.Fatal("the grant key changed over a restart")
	}
	if ans, err := e.s.Report(e.ctx, agent("a1"), w1.Task.ID, e.okReport(w1)); err != nil || ans.Cancel {
		t.Fatalf("report after the restart: %v %+v", err, ans)
	}
	w2 := e.claim("a2", 1)
	if len(w2) != 1 || len(w2[0].Files) != 50 {
		t.Fatalf("claim after the restart: %+v", w2)
	}
	if _, err := e.s.Report(e.ctx, agent("a2"), w2[0].Task.ID, e.okReport(w2[0])); err != nil {
		t.Fatal(err)
	}
	if j = e.job(j.ID); j.State != transfer.JobSucceeded || j.FilesDone != 100 {
		t.Fatalf("job after the restart: %s %q %d", j.State, j.Reason, j.FilesDone)
	}
}

func TestEndpoints(t *testing.T) {
	e := newEnv(t)
	// A node of the other site may not join an endpoint.
	if _, err := e.s.Heartbeat(e.ctx, agent("b1"), "b1", apiv1.DataNodeHeartbeat{Endpoint: "src", Address: e.addr("b1")}); !errors.Is(err, reserve.ErrForbidden) {
		t.Fatalf("b1 joins src: %v", err)
	}
	if _, err := e.s.Heartbeat(e.ctx, agent("ra"), "ra", apiv1.DataNodeHeartbeat{Endpoint: "src", Address: "10.0.0.1:7000"}); !errors.Is(err, reserve.ErrInvalid) {
		t.Fatalf("a router joins: %v", err)
	}
	if _, err := e.s.Heartbeat(e.ctx, agent("a1"), "a1", apiv1.DataNodeHeartbeat{Endpoint: "src", Address: e.addr("a1"), Lease: "1h"}); !errors.Is(err, reserve.ErrInvalid) {
		t.Fatalf("a lease of an hour: %v", err)
	}
	e.clk.Add(20 * time.Second)
	e.beat("a1", nil)
	eps, err := e.s.Endpoints(e.ctx, bob)
	if err != nil || len(eps) != 2 || eps[1].Name != "src" || eps[1].Site != "s1" || len(eps[1].Nodes) != 2 {
		t.Fatalf("endpoints: %v %+v", err, eps)
	}
	if !eps[1].Nodes[0].Alive || eps[1].Nodes[1].Alive {
		t.Fatalf("alive: %+v", eps[1].Nodes)
	}
	if _, err := e.s.Allow(e.ctx, alice, "src", apiv1.EndpointAllow{Users: []string{"bob"}}); !errors.Is(err, reserve.ErrForbidden) {
		t.Fatalf("alice allows: %v", err)
	}
	if _, err := e.s.Allow(e.ctx, admin, "nowhere", apiv1.EndpointAllow{Users: []string{"bob"}}); !errors.Is(err, reserve.ErrNotFound) {
		t.Fatalf("allow an unknown endpoint: %v", err)
	}
	ep, err := e.s.Allow(e.ctx, admin, "src", apiv1.EndpointAllow{Users: []string{"alice"}, Remove: true})
	if err != nil || len(ep.Users) != 0 {
		t.Fatalf("remove: %v %+v", err, ep)
	}
}

func TestDeadlineOverrun(t *testing.T) {
	e := newEnv(t)
	j, err := e.submitDeadline(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Hour)}, listed(40, 100_000_000))
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Pairs) != 2 {
		t.Fatalf("pairs: %+v", j.Pairs)
	}
	// Someone books the first pair's path right after its window: it
	// cannot be extended. The second pair's can.
	blocked, free := j.Pairs[0], j.Pairs[1]
	if _, err := e.c.Create(e.ctx, admin, controller.CreateInput{From: blocked.From, To: blocked.To, Bandwidth: 900_000_000, Start: blocked.End, Duration: time.Hour}); err != nil {
		t.Fatal(err)
	}
	end := blocked.End
	if free.End.After(end) {
		end = free.End
	}
	e.clk.Set(end.Add(-time.Second))
	for _, n := range []string{"a1", "a2", "b1", "b2"} {
		e.beat(n, nil)
	}
	e.s.Tick(e.ctx)
	j = e.job(j.ID)
	if j.State != transfer.JobActive {
		t.Fatalf("job %s %q", j.State, j.Reason)
	}
	if p := j.Pairs[0]; p.Routed == "" || !strings.Contains(p.Routed, "the pair goes on on the routed path") {
		t.Fatalf("blocked pair: %+v", p)
	}
	p := j.Pairs[1]
	if p.Routed != "" || !p.End.After(free.End) {
		t.Fatalf("free pair not extended: %+v (was to %s)", p, free.End)
	}
	if r, _ := e.c.Get(e.ctx, alice, p.Reservation); !r.End.Equal(p.End) {
		t.Fatalf("reservation ends %s, the pair %s", r.End, p.End)
	}
	// The routed pair's new tasks run unpaced, without the reservation.
	for _, w := range e.claim(blocked.From, 4) {
		if w.Task.To == blocked.To && (w.Task.RateBps != 0 || w.Task.Reservation != "") {
			t.Fatalf("a routed pair's task: %+v", w.Task)
		}
	}
}

func TestBatchesCapped(t *testing.T) {
	e := newEnv(t, wholeFiles)
	e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(3000, 1000))
	ws := e.claim("a1", 4)
	if len(ws) != 1 || len(ws[0].Files) != service.BatchFiles {
		t.Fatalf("a claim of a large dataset: %d tasks, first of %d files", len(ws), len(ws[0].Files))
	}
	big := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:big"}, listed(8, 400<<20))
	n := 0
	for _, w := range e.claim("a2", 4) {
		if w.Task.Job != big.ID {
			continue
		}
		n++
		if w.Task.Bytes > service.BatchBytes || len(w.Files) != 2 {
			t.Fatalf("a task of large files: %d files, %d bytes", len(w.Files), w.Task.Bytes)
		}
	}
	if n != 1 {
		t.Fatalf("%d tasks of the large files", n)
	}
}

// A data node that restarted (and so lost its tasks) goes on beating:
// the tasks it no longer names lapse and go to the next claim.
func TestTasksNotNamedLapse(t *testing.T) {
	e := newEnv(t)
	e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(10, 1000))
	w := e.claim("a1", 1)[0]
	for range 3 {
		e.clk.Add(10 * time.Second)
		for _, n := range []string{"a1", "b1", "b2"} {
			e.beat(n, nil)
		}
		e.s.Tick(e.ctx)
	}
	again := e.claim("a1", 1)
	if len(again) != 1 || again[0].Task.ID != w.Task.ID || again[0].Task.Attempt != 2 {
		t.Fatalf("the lost task: %+v", again)
	}
	// One the node names keeps its lease.
	for range 3 {
		e.clk.Add(10 * time.Second)
		e.beat("a1", []apiv1.TaskProgress{{Task: w.Task.ID, Attempt: 2}})
		e.s.Tick(e.ctx)
	}
	if tk, _ := e.st.GetTask(e.ctx, w.Task.ID); tk.State != transfer.TaskActive || tk.Attempt != 2 {
		t.Fatalf("a named task: %s attempt %d", tk.State, tk.Attempt)
	}
}

// A node reports its files as they arrive: the last one ends the job and
// the task with it; the task's own end comes after and is told so.
func TestPartialReports(t *testing.T) {
	e := newEnv(t)
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(4, 1000))
	w := e.claim("a1", 1)[0]
	for i, f := range w.Files {
		ans, err := e.s.Report(e.ctx, agent("a1"), w.Task.ID, e.sign(w, apiv1.TaskReport{Attempt: 1, BytesDone: int64(i+1) * 1000,
			Files: []apiv1.FileReport{{Path: f.Path, OK: true, Checksum: "0000abcd"}}}))
		if err != nil || ans.Cancel {
			t.Fatalf("report %d: %v %+v", i, err, ans)
		}
	}
	if j = e.job(j.ID); j.State != transfer.JobActive || j.FilesDone != 2 || j.Reason != "moving: 2 of 4 files" {
		t.Fatalf("half way: %s %q done %d", j.State, j.Reason, j.FilesDone)
	}
	w2 := e.claim("a2", 1)[0]
	ans, err := e.s.Report(e.ctx, agent("a2"), w2.Task.ID, e.sign(w2, apiv1.TaskReport{Attempt: 1, Files: []apiv1.FileReport{
		{Path: w2.Files[0].Path, OK: true}, {Path: w2.Files[1].Path, OK: true}}}))
	if err != nil || ans.Task.State != transfer.TaskSucceeded {
		t.Fatalf("the last files: %v %+v", err, ans.Task)
	}
	if j = e.job(j.ID); j.State != transfer.JobSucceeded {
		t.Fatalf("job %s %q", j.State, j.Reason)
	}
	page, _ := e.s.Get(e.ctx, alice, j.ID, nil, true, false)
	for _, tk := range page.Tasks {
		if tk.State != transfer.TaskSucceeded {
			t.Fatalf("task %s (%s) is %s", tk.ID, tk.Kind, tk.State)
		}
	}
	ans, err = e.s.Report(e.ctx, agent("a1"), w.Task.ID, apiv1.TaskReport{Attempt: 1, Done: true})
	if err != nil || !ans.Cancel || !strings.Contains(ans.Reason, "has ended (SUCCEEDED)") {
		t.Fatalf("the end after the job's: %v %+v", err, ans)
	}
}

func TestDeadlineErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		deadline, earliest time.Time
		want               string
	}{
		{t0, t0.Add(90 * time.Minute), "deadline 2031-05-04T10:00:00Z cannot be met: the earliest completion is 2031-05-04T11:30:00Z (algorithm a)"},
		{t0.Add(time.Second), t0.Add(1200 * time.Millisecond), "deadline 2031-05-04T10:00:01.000Z cannot be met: the earliest completion is 2031-05-04T10:00:01.200Z (algorithm a)"},
	} {
		if got := (&service.DeadlineError{Deadline: tc.deadline, Earliest: tc.earliest, Algorithm: "a"}).Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
	if got := (&service.DeadlineError{Deadline: t0, Why: "no data node of endpoint dst is alive"}).Error(); got != "deadline 2031-05-04T10:00:00Z cannot be met: no data node of endpoint dst is alive" {
		t.Errorf("got %s", got)
	}
}

// Claims at once from both source nodes never give a file to two tasks.
func TestConcurrentClaims(t *testing.T) {
	e := newEnv(t)
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(1000, 1000))
	seen := map[string]string{}
	for round := 0; ; round++ {
		if round > 100 {
			t.Fatal("the job never ended")
		}
		type got struct {
			node string
			ws   []apiv1.TaskWork
			err  error
		}
		ch := make(chan got, 2)
		for _, n := range []string{"a1", "a2"} {
			go func() {
				c, err := e.s.Claim(e.ctx, agent(n), n, apiv1.ClaimRequest{Max: 4})
				ch <- got{n, c.Tasks, err}
			}()
		}
		var all []got
		for range 2 {
			g := <-ch
			if g.err != nil {
				t.Fatal(g.err)
			}
			all = append(all, g)
		}
		n := 0
		for _, g := range all {
			for _, w := range g.ws {
				n++
				for _, f := range w.Files {
					if other, ok := seen[f.Path]; ok {
						t.Fatalf("file %s in tasks %s and %s", f.Path, other, w.Task.ID)
					}
					seen[f.Path] = w.Task.ID
				}
				if _, err := e.s.Report(e.ctx, agent(g.node), w.Task.ID, e.okReport(w)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n == 0 {
			break
		}
	}
	if j = e.job(j.ID); j.State != transfer.JobSucceeded || len(seen) != 1000 {
		t.Fatalf("job %s, %d files seen", j.State, len(seen))
	}
}

// A job says what it waits for: a live data node of its source endpoint,
// then its listing.
func TestQueuedReason(t *testing.T) {
	e := newEnv(t)
	e.clk.Add(20 * time.Second) // every lease lapsed
	j, _, err := e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	if err != nil || j.Reason != "waiting for a live data node of endpoint src" {
		t.Fatalf("submit: %v %q", err, j.Reason)
	}
	e.beat("a2", nil)
	e.s.Tick(e.ctx)
	if j = e.job(j.ID); j.Reason != "listing the dataset on endpoint src" {
		t.Fatalf("with a2 back: %q", j.Reason)
	}
}

// The optimizer raises a pair's concurrency as its throughput rises, keeps
// each decision, and a restarted controller resumes from the last one.
func TestOptimizerDecidesAndResumes(t *testing.T) {
	e := newEnv(t)
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(10000, 1000))
	first := e.claim("a1", 4)
	if len(first) != 1 {
		t.Fatalf("at the start concurrency 1: %d tasks", len(first))
	}
	w := first[0]
	e.clk.Add(30 * time.Second)
	e.beat("a1", []apiv1.TaskProgress{{Task: w.Task.ID, Attempt: 1, BytesDone: 30_000, ThroughputBps: 8000}})
	e.clk.Add(31 * time.Second)
	for _, n := range []string{"a1", "a2", "b1", "b2"} {
		e.beat(n, []apiv1.TaskProgress{{Task: w.Task.ID, Attempt: 1, BytesDone: 60_000, ThroughputBps: 8000}})
	}
	e.s.Tick(e.ctx)
	page, err := e.s.Get(e.ctx, alice, j.ID, nil, true, true)
	if err != nil || len(page.Decisions) < 2 {
		t.Fatalf("decisions: %v %+v", err, page.Decisions)
	}
	d := page.Decisions[0]
	if d.From != "a1" || d.Concurrency != 3 || d.ThroughputBps <= 0 || d.Reason == "" || strings.Contains(d.Reason, "\n") {
		t.Fatalf("the decision after a rise: %+v", d)
	}
	more := e.claim("a1", 4)
	if len(more) != 2 {
		t.Fatalf("at concurrency 3 a1 took %d more tasks", len(more))
	}
	e.restart()
	for _, n := range []string{"a1", "a2", "b1", "b2"} {
		e.beat(n, []apiv1.TaskProgress{{Task: w.Task.ID, Attempt: 1}, {Task: more[0].Task.ID, Attempt: 1}, {Task: more[1].Task.ID, Attempt: 1}})
	}
	if _, err := e.s.Report(e.ctx, agent("a1"), w.Task.ID, e.okReport(w)); err != nil {
		t.Fatal(err)
	}
	if again := e.claim("a1", 4); len(again) != 1 {
		t.Fatalf("after the restart (concurrency 3 resumed, 2 running) a1 took %d tasks", len(again))
	}
}

// TestSharesFitLargeFiles: a booked job of two large files and many small
// ones sends one large file over each pair. The first pair to claim takes
// what fits in its share (a large file and some small ones) and leaves
// the other large file to the pair with room for it, instead of taking
// both and leaving the other pair the small files.
func TestSharesFitLargeFiles(t *testing.T) {
	e := newEnv(t, wholeFiles)
	files := []apiv1.ListedFile{
		{Path: "data/big0", Source: "data", Size: 400_000_000, MTime: t0},
		{Path: "data/big1", Source: "data", Size: 400_000_000, MTime: t0},
	}
	for i := range 20 {
		files = append(files, apiv1.ListedFile{Path: fmt.Sprintf("data/small%02d", i), Source: "data", Size: 5_000_000, MTime: t0})
	}
	j, err := e.submitDeadline(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Hour)}, files)
	if err != nil {
		t.Fatal(err)
	}
	j = e.startBooked(j)
	bigs := map[string]int{}
	for _, n := range []string{"a1", "a2"} {
		for _, w := range e.claim(n, 4) {
			t.Logf("%s: task %s %d files %d bytes", n, w.Task.ID, len(w.Files), w.Task.Bytes)
			for _, f := range w.Files {
				if strings.Contains(f.Path, "big") {
					bigs[n]++
				}
			}
		}
	}
	if bigs["a1"] != 1 || bigs["a2"] != 1 {
		t.Fatalf("large files per source node: %v, want one each (pairs %+v)", bigs, j.Pairs)
	}
}

// The policy's max_jobs and max_project_jobs: a job over either is
// refused with a *controller.LimitError naming it (429 "limit") and
// nothing stored; limits inherit from the default, the role and the
// project; an ended job frees its place.
func TestJobLimits(t *testing.T) {
	e := newEnv(t)
	carl := controller.Actor{Name: "carl", Role: reserve.RoleUser, Projects: []string{"cms"}}
	if _, err := e.c.AddUser(e.ctx, admin, carl.Name, carl.Role, carl.Projects, ""); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{"src", "dst"} {
		if _, err := e.s.Allow(e.ctx, admin, ep, apiv1.EndpointAllow{Projects: []string{"cms"}}); err != nil {
			t.Fatal(err)
		}
	}
	err := e.c.SetPolicy(e.ctx, admin, reserve.Policy{
		Default:  reserve.Limits{MaxJobs: 2},
		Roles:    map[reserve.Role]reserve.Limits{reserve.RoleOperator: {MaxJobs: reserve.UnlimitedJobs}},
		Projects: map[string]reserve.Limits{"cms": {MaxJobs: 3, MaxProjectJobs: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	submit := func(a controller.Actor, project string) (transfer.Job, error) {
		n++
		j, _, err := e.s.Submit(e.ctx, a, transfer.JobRequest{Sources: []string{"src:data"}, Destination: fmt.Sprintf("dst:in%d", n), Project: project})
		return j, err
	}
	stored := func() int {
		js, err := e.st.ListJobs(e.ctx, store.JobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(js)
	}
	refused := func(what string, err error, rule, msg string) {
		t.Helper()
		var le *controller.LimitError
		if !errors.As(err, &le) || !errors.Is(err, controller.ErrLimit) || le.Limit != rule || !strings.Contains(le.Message, msg) {
			t.Fatalf("%s: %v, want a %s limit saying %q", what, err, rule, msg)
		}
	}
	var first transfer.Job
	for i := range 2 {
		j, err := submit(alice, "")
		if err != nil {
			t.Fatalf("alice's job %d: %v", i+1, err)
		}
		if i == 0 {
			first = j
		}
	}
	before := stored()
	_, err = submit(alice, "")
	refused("alice's third job", err, "max_jobs", "user alice has 2 unfinished jobs, the most allowed (max_jobs 2 for everyone)")
	if !strings.Contains(err.Error(), "PUT /api/v1/policy") || stored() != before {
		t.Fatalf("refusal %q, %d jobs stored (was %d)", err, stored(), before)
	}
	// In project cms alice's own limit is the project's 3.
	inCMS, err := submit(alice, "cms")
	if err != nil {
		t.Fatalf("alice's job in cms: %v", err)
	}
	if _, err := submit(carl, "cms"); err != nil {
		t.Fatalf("carl's job in cms: %v", err)
	}
	_, err = submit(carl, "cms")
	refused("cms's third job", err, "max_project_jobs", "project cms has 2 unfinished jobs, the most allowed (max_project_jobs 2 for project cms)")
	if _, err := submit(carl, ""); err != nil {
		t.Fatalf("carl's job outside cms: %v", err)
	}
	// Operators are lifted by their role.
	for i := range 3 {
		if _, err := submit(oper, ""); err != nil {
			t.Fatalf("the operator's job %d: %v", i+1, err)
		}
	}
	// A cancelled job frees its place; alice's job in cms counts against
	// her default limit too.
	if _, err := e.s.Cancel(e.ctx, alice, first.ID, ""); err != nil {
		t.Fatal(err)
	}
	_, err = submit(alice, "")
	refused("alice's job with one in cms", err, "max_jobs", "user alice has 2 unfinished jobs")
	if _, err := e.s.Cancel(e.ctx, alice, inCMS.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := submit(alice, ""); err != nil {
		t.Fatalf("alice's job after a cancel: %v", err)
	}
	_, err = submit(alice, "")
	refused("alice's job over the limit again", err, "max_jobs", "max_jobs 2")
	// So do finished ones: every job listed empty SUCCEEDS.
	for {
		ws := e.claim("a1", service.MaxClaim)
		if len(ws) == 0 {
			break
		}
		for _, w := range ws {
			if _, err := e.s.Listing(e.ctx, agent("a1"), w.Task.ID, apiv1.Listing{Attempt: w.Task.Attempt}); err != nil {
				t.Fatal(err)
			}
		}
	}
	js, _ := e.s.List(e.ctx, alice, store.JobFilter{States: []string{transfer.JobSucceeded}})
	if len(js) != 2 {
		t.Fatalf("%d of alice's jobs succeeded, want 2", len(js))
	}
	for i := range 2 {
		if _, err := submit(alice, ""); err != nil {
			t.Fatalf("alice's job %d after hers ended: %v", i+1, err)
		}
	}
	if _, err := submit(carl, "cms"); err != nil {
		t.Fatalf("carl's job in cms after the project's ended: %v", err)
	}
}

// TestClaimWaits: a claim with Wait and nothing to hand out is held until
// a change gives it work (a job submitted: its listing; a job listed: its
// copies), and answered empty when the wait passes or its context ends.
func TestClaimWaits(t *testing.T) {
	e := newEnv(t)
	type result struct {
		c   apiv1.Claim
		err error
	}
	waiting := func(node, wait string) chan result {
		done := make(chan result, 1)
		parked := e.s.Parked()
		go func() {
			c, err := e.s.Claim(e.ctx, agent(node), node, apiv1.ClaimRequest{Max: 4, Wait: wait})
			done <- result{c, err}
		}()
		// It is held while there is nothing for it: once it has looked
		// and begun waiting, it must not have answered.
		heldAfter(t, e.s, parked, func() {
			select {
			case r := <-done:
				t.Fatalf("%s's claim was answered with nothing to hand out: %+v %v", node, r.c, r.err)
			default:
			}
		})
		return done
	}
	lister := waiting("a1", "30s")
	j, _, err := e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	if err != nil {
		t.Fatal(err)
	}
	r := <-lister
	if r.err != nil || len(r.c.Tasks) != 1 || r.c.Tasks[0].Task.Kind != transfer.TaskList || r.c.Tasks[0].Task.Job != j.ID {
		t.Fatalf("the waiting claim: %+v %v", r.c, r.err)
	}
	copier := waiting("a2", "30s")
	if _, err := e.s.Listing(e.ctx, agent("a1"), r.c.Tasks[0].Task.ID, apiv1.Listing{Attempt: 1, Files: listed(10, 1000)}); err != nil {
		t.Fatal(err)
	}
	r = <-copier
	if r.err != nil || len(r.c.Tasks) != 1 || r.c.Tasks[0].Task.Kind != transfer.TaskCopy || r.c.Tasks[0].Task.From != "a2" {
		t.Fatalf("the waiting claim after the listing: %+v %v", r.c, r.err)
	}
	// Nothing more for a2: empty once the wait passes.
	c, err := e.s.Claim(e.ctx, agent("a2"), "a2", apiv1.ClaimRequest{Max: 4, Wait: "100ms"})
	if err != nil || c.Tasks == nil || len(c.Tasks) != 0 {
		t.Fatalf("a claim with nothing to hand out: %+v %v", c, err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := e.s.Claim(ctx, agent("a2"), "a2", apiv1.ClaimRequest{Wait: "30s"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiting claim whose context ended: %v", err)
	}
	for _, w := range []string{"31s", "-1s", "soon"} {
		var re *reserve.RequestError
		if _, err := e.s.Claim(e.ctx, agent("a2"), "a2", apiv1.ClaimRequest{Wait: w}); !errors.As(err, &re) || re.Field != "wait" {
			t.Fatalf("wait %q: %v", w, err)
		}
	}
}

// heldAfter waits until a claim or job wait has parked since Parked read
// parked (it looked, found nothing and waits for the next change), then
// runs check, which tells whether the wait answered anyway.
func heldAfter(t *testing.T, s *service.Service, parked uint64, check func()) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); s.Parked() <= parked; time.Sleep(time.Millisecond) {
		check()
		if time.Now().After(deadline) {
			t.Fatal("no wait parked within a minute")
		}
	}
	check()
}

// TestWaitEnded: a wait for a job's end returns as the job ends, or when
// its time passes while the job runs, or at once for an ended job.
func TestWaitEnded(t *testing.T) {
	e := newEnv(t)
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(4, 1000))
	if err := e.s.WaitEnded(e.ctx, alice, j.ID, 10*time.Millisecond); err != nil {
		t.Fatalf("a short wait on a running job: %v", err)
	}
	if j = e.job(j.ID); j.State != transfer.JobActive {
		t.Fatalf("the job after a short wait: %s", j.State)
	}
	if err := e.s.WaitEnded(e.ctx, bob, j.ID, time.Second); !errors.Is(err, reserve.ErrNotFound) {
		t.Fatalf("bob waits for alice's job: %v", err)
	}
	done := make(chan error, 1)
	parked := e.s.Parked()
	go func() { done <- e.s.WaitEnded(e.ctx, alice, j.ID, 30*time.Second) }()
	notReturned := func(what string) func() {
		return func() {
			select {
			case err := <-done:
				t.Fatalf("the wait returned %s: %v", what, err)
			default:
			}
		}
	}
	heldAfter(t, e.s, parked, notReturned("while the job runs"))
	// Another job's change wakes it, but it waits on: it has looked again
	// once it parks again.
	parked = e.s.Parked()
	if _, _, err := e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:other"}); err != nil {
		t.Fatal(err)
	}
	heldAfter(t, e.s, parked, notReturned("on another job's change"))
	if _, err := e.s.Cancel(e.ctx, alice, j.ID, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the wait as the job ended: %v", err)
	}
	if err := e.s.WaitEnded(e.ctx, alice, j.ID, 30*time.Second); err != nil {
		t.Fatalf("a wait on an ended job: %v", err)
	}
}

// TestRatesRedivided: a booked pair's rate is shared among its running
// tasks and divided again as they start and end. A second task claimed
// beside a running one takes its share from it in the same answer (the
// claim's Rates lower the first), so the pair never runs above its
// booking; when one ends, the next heartbeat gives the other the whole
// booked rate.
func TestRatesRedivided(t *testing.T) { eachStore(t, testRatesRedivided) }

func testRatesRedivided(t *testing.T, db string) {
	e := newEnvAt(t, db)
	j, err := e.submitDeadline(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Hour)}, listed(40, 100_000_000))
	if err != nil {
		t.Fatal(err)
	}
	j = e.startBooked(j)
	c1, err := e.s.Claim(e.ctx, agent("a1"), "a1", apiv1.ClaimRequest{Max: 1})
	if err != nil || len(c1.Tasks) != 1 {
		t.Fatalf("first claim: %v %+v", err, c1)
	}
	first := c1.Tasks[0]
	var booked uint64
	for _, p := range j.Pairs {
		if p.From == "a1" && p.To == first.Task.To {
			booked = p.RateBps
		}
	}
	if booked == 0 || first.Task.RateBps != booked || len(c1.Rates) != 0 {
		t.Fatalf("a pair's only task runs at the booked %d: %d (rates %+v)", booked, first.Task.RateBps, c1.Rates)
	}

	// A second task of the pair (booked pairs run two at least): both at
	// half, the first's new rate in the same answer.
	c2, err := e.s.Claim(e.ctx, agent("a1"), "a1", apiv1.ClaimRequest{Max: 4})
	if err != nil || len(c2.Tasks) != 1 {
		t.Fatalf("second claim: %v %+v", err, c2)
	}
	second := c2.Tasks[0]
	if second.Task.To != first.Task.To {
		t.Fatalf("the second task goes to %s, the first to %s", second.Task.To, first.Task.To)
	}
	if len(c2.Rates) != 1 || c2.Rates[0].Task != first.Task.ID || c2.Rates[0].Attempt != 1 {
		t.Fatalf("the claim's rates: %+v, want the first task's", c2.Rates)
	}
	if sum := c2.Rates[0].RateBps + second.Task.RateBps; sum > booked || second.Task.RateBps != booked/2 || c2.Rates[0].RateBps != booked/2 {
		t.Fatalf("two tasks of a pair booked %d run at %d and %d", booked, c2.Rates[0].RateBps, second.Task.RateBps)
	}
	running := []apiv1.TaskProgress{{Task: first.Task.ID, Attempt: 1}, {Task: second.Task.ID, Attempt: 1}}
	w := e.beat("a1", running)
	if got := ratesOf(w.Rates); len(got) != 2 || got[first.Task.ID] != booked/2 || got[second.Task.ID] != booked/2 {
		t.Fatalf("the heartbeat's rates with two tasks: %v, want %d each", got, booked/2)
	}

	// The first ends: the second gets the whole booked rate.
	if _, err := e.s.Report(e.ctx, agent("a1"), first.Task.ID, e.okReport(first)); err != nil {
		t.Fatal(err)
	}
	w = e.beat("a1", running[1:])
	if got := ratesOf(w.Rates); len(got) != 1 || got[second.Task.ID] != booked {
		t.Fatalf("the heartbeat's rates after one task ended: %v, want %s at %d", got, second.Task.ID, booked)
	}
	page, err := e.s.Get(e.ctx, alice, j.ID, nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tk := range page.Tasks {
		if tk.ID == second.Task.ID {
			found = true
			if tk.RateBps != booked {
				t.Errorf("the stored task runs at %d, want %d", tk.RateBps, booked)
			}
		}
	}
	if !found {
		t.Errorf("task %s is not in the job's page", second.Task.ID)
	}
}

func ratesOf(rs []apiv1.TaskRate) map[string]uint64 {
	out := map[string]uint64{}
	for _, r := range rs {
		out[r.Task] = r.RateBps
	}
	return out
}

func TestDivideRates(t *testing.T) {
	pairs := []transfer.Pair{
		{From: "a1", To: "b1", Reservation: "r-1", RateBps: 1000},
		{From: "a2", To: "b2", Reservation: "r-2", RateBps: 900, Routed: "the window ended"},
		{From: "a1", To: "b2"},
	}
	task := func(id, from, to, state string) transfer.Task {
		return transfer.Task{ID: id, Kind: transfer.TaskCopy, From: from, To: to, State: state}
	}
	sized := func(id string, bytes, done int64) transfer.Task {
		t := task(id, "a1", "b1", transfer.TaskActive)
		t.Bytes, t.BytesDone = bytes, done
		return t
	}
	for _, tc := range []struct {
		name  string
		tasks []transfer.Task
		want  map[string]uint64
	}{
		{"one task: the whole booking", []transfer.Task{task("k1", "a1", "b1", transfer.TaskActive)}, map[string]uint64{"k1": 1000}},
		{"three share, rounded down", []transfer.Task{task("k1", "a1", "b1", transfer.TaskActive), task("k2", "a1", "b1", transfer.TaskActive), task("k3", "a1", "b1", transfer.TaskActive)},
			map[string]uint64{"k1": 333, "k2": 333, "k3": 333}},
		{"ended and queued tasks do not count", []transfer.Task{task("k1", "a1", "b1", transfer.TaskActive), task("k2", "a1", "b1", transfer.TaskSucceeded), task("k3", "a1", "b1", transfer.TaskQueued)},
			map[string]uint64{"k1": 1000}},
		{"routed and unbooked pairs: 0", []transfer.Task{task("k1", "a2", "b2", transfer.TaskActive), task("k2", "a1", "b2", transfer.TaskActive)},
			map[string]uint64{"k1": 0, "k2": 0}},
		{"by the bytes left", []transfer.Task{sized("k1", 9000, 0), sized("k2", 1000, 0)}, map[string]uint64{"k1": 900, "k2": 100}},
		{"the bytes sent do not count", []transfer.Task{sized("k1", 10000, 9000), sized("k2", 1000, 0)}, map[string]uint64{"k1": 500, "k2": 500}},
		{"a small task counts as a second of the booking", []transfer.Task{sized("k1", 100000, 0), sized("k2", 10, 0)},
			map[string]uint64{"k1": 998, "k2": 1}},
		{"pairs apart", []transfer.Task{task("k1", "a1", "b1", transfer.TaskActive), task("k2", "a1", "b2", transfer.TaskActive), task("k3", "a1", "b1", transfer.TaskActive)},
			map[string]uint64{"k1": 500, "k2": 0, "k3": 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := service.DivideRates(pairs, tc.tasks, t0, false)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for id, r := range tc.want {
				if got[id] != r {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestDivideRatesLends: a booked pair whose window is open and that runs
// no task lends its rate to the job's running pairs over the same
// inter-site links, by their own rates; not to pairs over other links,
// not once its window has closed, and a routed pair lends nothing.
func TestDivideRatesLends(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	pair := func(from, to string, rate uint64, core string, end int) transfer.Pair {
		return transfer.Pair{From: from, To: to, Reservation: "r-" + from + to, RateBps: rate, Start: at(0), End: at(end),
			Path: []string{from + "-ra", core, to + "-rb"}, ShareBytes: 1000, BytesDone: 1000}
	}
	pairs := []transfer.Pair{
		pair("a1", "b1", 450, "circuit", 20), // idle: lends 450 over the circuit
		pair("a2", "b1", 200, "circuit", 20),
		pair("a3", "b1", 100, "circuit", 20),
		pair("a3", "b3", 300, "wan", 20),
		pair("a2", "b3", 600, "wan", 10), // idle, but its window has closed
	}
	routed := pair("a1", "b3", 900, "wan", 20)
	routed.Routed = "a data node of the pair was lost"
	pairs = append(pairs, routed)
	task := func(id, from, to string) transfer.Task {
		return transfer.Task{ID: id, Kind: transfer.TaskCopy, From: from, To: to, State: transfer.TaskActive}
	}
	tasks := []transfer.Task{task("k1", "a2", "b1"), task("k2", "a3", "b1"), task("k3", "a3", "b3")}
	got := service.DivideRates(pairs, tasks, at(15), false)
	want := map[string]uint64{"k1": 200 + 300, "k2": 100 + 150, "k3": 300}
	if !maps.Equal(got, want) {
		t.Fatalf("at 15 s: %v, want %v", got, want)
	}
	if got := service.DivideRates(pairs, tasks, at(25), false); !maps.Equal(got, map[string]uint64{"k1": 200, "k2": 100, "k3": 300}) {
		t.Fatalf("after every window: %v", got)
	}
	// a1's pair yet to finish its share (or to start), then running
	// again: it lends nothing.
	pairs[0].BytesDone = 999
	if got := service.DivideRates(pairs, tasks, at(15), false); !maps.Equal(got, map[string]uint64{"k1": 200, "k2": 100, "k3": 300}) {
		t.Fatalf("a1's share not done: %v", got)
	}
	// ... unless no file of the job waits for a pair any more.
	if got := service.DivideRates(pairs, tasks, at(15), true); !maps.Equal(got, want) {
		t.Fatalf("a1's share not done, nothing waiting: %v, want %v", got, want)
	}
	pairs[0].BytesDone = 1000
	tasks = append(tasks, task("k4", "a1", "b1"))
	if got := service.DivideRates(pairs, tasks, at(15), false); !maps.Equal(got, map[string]uint64{"k1": 200, "k2": 100, "k3": 300, "k4": 450}) {
		t.Fatalf("a1 running: %v", got)
	}
}

// TestGrantDiesWithItsTask: the controller says an attempt is current only
// while its task runs it towards the asking node; once the task ends, is
// cancelled or re-attempted, the destination's question and its
// heartbeat's Granted both say so (the latter as a fence one past the
// attempt), and a node the task does not push to learns nothing of it.
func TestGrantDiesWithItsTask(t *testing.T) {
	e := newEnv(t)
	status := func(node, task string, attempt int) apiv1.GrantStatus {
		t.Helper()
		st, err := e.s.CheckGrant(e.ctx, agent(node), node, apiv1.GrantCheck{Task: task, Attempt: attempt})
		if err != nil {
			t.Fatalf("check %s/%d at %s: %v", task, attempt, node, err)
		}
		return st
	}
	// fenced says whether node's heartbeat, naming the attempt as held,
	// is answered with a fence one past it.
	fenced := func(node, task string, attempt int) bool {
		t.Helper()
		w, err := e.s.Heartbeat(e.ctx, agent(node), node, apiv1.DataNodeHeartbeat{Endpoint: endpointOf(node), Address: e.addr(node),
			Lease: "15s", Parts: true, Granted: []apiv1.Fence{{Task: task, Attempt: attempt}}})
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(w.Fences, apiv1.Fence{Task: task, Attempt: attempt + 1})
	}
	other := func(n string) string {
		if n == "b1" {
			return "b2"
		}
		return "b1"
	}

	// Ended: the task of a job of one file, which arrived.
	e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(1, 1000))
	w := e.claim("a1", 1)[0]
	id, to := w.Task.ID, w.Task.To
	if st := status(to, id, 1); !st.Current || fenced(to, id, 1) {
		t.Fatalf("a running attempt: %+v", st)
	}
	if st := status(to, id, 2); st.Current {
		t.Fatalf("an attempt not yet made: %+v", st)
	}
	// Another node of the endpoint asks: not current, and not a word of
	// the task's job or state.
	if st := status(other(to), id, 1); st.Current || strings.Contains(st.Reason, w.Task.Job) || strings.Contains(st.Reason, "ACTIVE") {
		t.Fatalf("asked by a node it does not push to: %+v", st)
	}
	if _, err := e.s.CheckGrant(e.ctx, agent("a1"), to, apiv1.GrantCheck{Task: id, Attempt: 1}); !errors.Is(err, reserve.ErrForbidden) {
		t.Fatalf("a1 asks for %s: %v", to, err)
	}
	if _, err := e.s.Report(e.ctx, agent("a1"), id, e.okReport(w)); err != nil {
		t.Fatal(err)
	}
	if st := status(to, id, 1); st.Current || !strings.Contains(st.Reason, "has ended (SUCCEEDED)") {
		t.Fatalf("after the job succeeded: %+v", st)
	}
	if !fenced(to, id, 1) {
		t.Fatal("the heartbeat does not fence an attempt held after its job ended")
	}

	// Cancelled.
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(1, 1000))
	w = e.claim("a1", 1)[0]
	id, to = w.Task.ID, w.Task.To
	if _, err := e.s.Cancel(e.ctx, alice, j.ID, ""); err != nil {
		t.Fatal(err)
	}
	if st := status(to, id, 1); st.Current || !strings.Contains(st.Reason, "was cancelled") || !fenced(to, id, 1) {
		t.Fatalf("after a cancel: %+v", st)
	}

	// Re-attempted: a1's lease lapses and a2 takes the task over.
	e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(1, 1000))
	w = e.claim("a1", 1)[0]
	id, to = w.Task.ID, w.Task.To
	for range 2 {
		e.clk.Add(10 * time.Second)
		for _, n := range []string{"a2", "b1", "b2"} {
			e.beat(n, nil)
		}
	}
	e.s.Tick(e.ctx)
	if st := status(to, id, 1); st.Current || !strings.Contains(st.Reason, "QUEUED") || !fenced(to, id, 1) {
		t.Fatalf("after the lease lapsed: %+v", st)
	}
	ws := e.claim("a2", 1)
	if len(ws) != 1 || ws[0].Task.ID != id || ws[0].Task.Attempt != 2 {
		t.Fatalf("requeued claim: %+v", ws)
	}
	to2 := ws[0].Task.To
	if st := status(to2, id, 2); !st.Current {
		t.Fatalf("the new attempt: %+v", st)
	}
	if st := status(to2, id, 1); st.Current || !strings.Contains(st.Reason, "attempt 2 is") || !fenced(to2, id, 1) {
		t.Fatalf("the old attempt after the new one: %+v", st)
	}
}
