//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/store/pgtest"
	"github.com/lightpath/lightpath/internal/topology"
	"github.com/lightpath/lightpath/internal/transfer"
)

// The transfer service end to end with the real binary: a controller,
// two `lightpath serve --controller` per endpoint (the two nodes of an
// endpoint serve the same directory, as a site's transfer nodes share a
// file system), and the command line as a user runs it. The harness
// (startSvc) runs it on loopback, on a small topology whose hosts are the
// data nodes, each on its own 127.0.0.x address, or on the two-site
// testbed with agents (TestServiceOnTestbed, where the faults are).

const serviceTopology = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: a1, site: s1}
  - {name: a2, site: s1}
  - {name: ra, site: s1, role: router}
  - {name: b1, site: s2}
  - {name: b2, site: s2}
  - {name: rb, site: s2, role: router}
links:
  - {name: a1-ra, ends: [a1, ra], rate: 1G}
  - {name: a2-ra, ends: [a2, ra], rate: 1G}
  - {name: b1-rb, ends: [b1, rb], rate: 1G}
  - {name: b2-rb, ends: [b2, rb], rate: 1G}
  - {name: wan, ends: [ra, rb], rate: 10G, delay: 5ms}
`

// svcOpts says how startSvc builds the service.
type svcOpts struct {
	rate    string // every data node's --max-rate ("": no cap)
	standby bool   // a standby controller on the same store
	// db is the controllers' store; nil: SQLite in the test's directory.
	db func(t *testing.T, dir string) string
	// testbed: on the two-site testbed (root), with an agent in every
	// node and each data node inside its node's namespace, calling the
	// controller on its unix socket; otherwise on loopback, on
	// serviceTopology.
	testbed bool
	// ctlArgs are more flags for the controllers.
	ctlArgs []string
	// topology is the testbed's topology file (a path in the repository
	// or an absolute one; "": examples/two-site.yaml) and nodes its data
	// nodes (nil: svcNodes), on the testbed only.
	topology string
	nodes    []svcNode
	// without are data nodes (of the nodes) not to start.
	without []string
	// advertise, on loopback, gives the address a data node listening on
	// listen tells the others to push to ("": listen itself), such as a
	// proxy's.
	advertise func(node, listen string) string
}

// svc is a controller with its users and data nodes.
type svc struct {
	t        *testing.T
	dir      string
	db, topo string // the controllers' --db and --topology
	port     int
	url      string
	sock     string   // unix:PATH the agents and data nodes call (on the testbed)
	ctl      *killCtl // the (first) controller
	// Token files.
	admin, alice, bob, dn string
	// The endpoints' roots.
	srcRoot, dstRoot string
	rate             string
	nodes            map[string]*proc
	tb               *tb // the testbed, or nil on loopback
	// With a standby: its port and process; url then names both
	// controllers (leader first), as the users and data nodes are given
	// them.
	standbyPort int
	standby     *killCtl
	ctlArgs     []string  // svcOpts.ctlArgs
	nodeList    []svcNode // the data nodes (svcOpts.nodes)
	advertise   func(node, listen string) string
}

// svcNode is a data node: its node, its endpoint and its loopback host.
type svcNode struct{ node, endpoint, host string }

// svcNodes are the data nodes, with their endpoints and their loopback
// hosts (on the testbed each listens on its node's address).
var svcNodes = []svcNode{
	{"a1", "siteA", "127.0.0.11"}, {"a2", "siteA", "127.0.0.12"}, {"b1", "siteB", "127.0.0.13"}, {"b2", "siteB", "127.0.0.14"},
}

// startSvc starts the controller (and the testbed with its agents),
// makes the users, starts the four data nodes and lets alice use both
// endpoints.
func startSvc(t *testing.T, o svcOpts) *svc {
	t.Helper()
	if o.testbed {
		skipUnlessNetRoot(t)
	}
	dir := t.TempDir()
	s := &svc{t: t, dir: dir, port: freePort(t, "127.0.0.1"), admin: filepath.Join(dir, "admin.token"),
		srcRoot: scratchDir(t), dstRoot: scratchDir(t), rate: o.rate, nodes: map[string]*proc{},
		db: "sqlite:" + filepath.Join(dir, "db"), topo: filepath.Join(dir, "topo.yaml"), ctlArgs: o.ctlArgs, advertise: o.advertise,
		nodeList: o.nodes}
	if s.nodeList == nil {
		s.nodeList = svcNodes
	}
	if o.topology == "" {
		o.topology = "examples/two-site.yaml"
	}
	if o.db != nil {
		s.db = o.db(t, dir)
	}
	s.url = fmt.Sprintf("http://127.0.0.1:%d", s.port)
	if o.testbed {
		topo, err := filepath.Abs(repoFile(o.topology))
		if err != nil {
			t.Fatal(err)
		}
		s.topo, s.sock = topo, "unix:"+filepath.Join(dir, "ctl.sock")
	} else if err := os.WriteFile(s.topo, []byte(serviceTopology), 0o644); err != nil {
		t.Fatal(err)
	}
	s.launch()
	if o.standby {
		s.standbyPort = freePort(t, "127.0.0.1")
		s.standby = s.start(s.standbyPort)
		s.url += fmt.Sprintf(",http://127.0.0.1:%d", s.standbyPort)
	}
	// The logs go into the test's output when it fails (or always with
	// SVC_LOGS=1 in the environment).
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SVC_LOGS") != "" {
			t.Logf("controller log:\n%s", s.ctl.log)
			if s.standby != nil {
				t.Logf("standby controller log:\n%s", s.standby.log)
			}
			for name, p := range s.nodes {
				t.Logf("data node %s log:\n%s", name, p.err.String())
			}
		}
	})
	if o.testbed {
		tp, err := topology.Load(s.topo)
		if err != nil {
			t.Fatal(err)
		}
		s.tb = agentsUp(t, s.topo, len(tp.Nodes), dir, s.url, s.sock, s.admin)
	}
	// Data nodes have a user of their own, apart from the agents'.
	for _, u := range []struct{ name, role string }{{"alice", "user"}, {"bob", "user"}, {"dn", "agent"}} {
		s.ok(s.admin, "user", "add", u.name, "--role", u.role)
		s.ok(s.admin, "user", "token", "create", u.name, "--out", filepath.Join(dir, u.name+".token"))
	}
	s.alice, s.bob, s.dn = filepath.Join(dir, "alice.token"), filepath.Join(dir, "bob.token"), filepath.Join(dir, "dn.token")
	// An admin says which nodes serve each endpoint, and gives each data
	// node a token bound to its node (docs/service.md deploys them so).
	sites := map[string]string{"siteA": "s1", "siteB": "s2"}
	if o.testbed {
		sites = map[string]string{"siteA": "site-a", "siteB": "site-b"}
	}
	for _, ep := range []string{"siteA", "siteB"} {
		var nodes []string
		for _, n := range s.nodeList {
			if n.endpoint == ep {
				nodes = append(nodes, n.node)
			}
		}
		s.ok(s.admin, "endpoint", "add", ep, "--site", sites[ep], "--node", strings.Join(nodes, ","))
	}
	for _, n := range s.nodeList {
		s.ok(s.admin, "user", "token", "create", "dn", "--node", n.node, "--out", filepath.Join(dir, "dn-"+n.node+".token"))
	}
	alive := map[string]int{}
	for _, n := range s.nodeList {
		if slices.Contains(o.without, n.node) {
			continue
		}
		s.startNode(n.node)
		alive[n.endpoint]++
	}
	s.waitNodes(alive)
	s.ok(s.admin, "endpoint", "allow", "siteA", "--user", "alice")
	s.ok(s.admin, "endpoint", "allow", "siteB", "--user", "alice")
	return s
}

// launch starts the controller on s's port and database (again after a
// kill) and waits for its health.
func (s *svc) launch() {
	s.ctl = s.start(s.port)
}

// start starts a controller on port and s's database and waits for its
// health (a standby's too).
func (s *svc) start(port int) *killCtl {
	s.t.Helper()
	extra := slices.Clone(s.ctlArgs)
	if s.sock != "" {
		extra = append(extra, "--listen", s.sock)
	}
	return startCtlProc(s.t, s.dir, s.db, s.topo, port, extra...)
}

// kill SIGKILLs the controller.
func (s *svc) kill() {
	s.ctl.cmd.Process.Kill()
	s.ctl.cmd.Wait()
}

func (s *svc) lp(tok string, args ...string) result {
	s.t.Helper()
	return runLP(s.t, runOpts{timeout: 3 * time.Minute},
		append(args, "--controller", s.url, "--controller-token-file", tok)...)
}

func (s *svc) ok(tok string, args ...string) result {
	s.t.Helper()
	r := s.lp(tok, args...)
	mustSucceed(s.t, strings.Join(args, " "), r)
	return r
}

// startNode starts `lightpath serve --controller` for node: on loopback
// on its own 127.0.0.x address, on the testbed inside the node at its
// address.
func (s *svc) startNode(node string) {
	s.t.Helper()
	for _, n := range s.nodeList {
		if n.node != node {
			continue
		}
		root, ctl := s.srcRoot, s.url
		if n.endpoint == "siteB" {
			root = s.dstRoot
		}
		if s.sock != "" {
			ctl = s.sock
		}
		args := []string{"--transfer-log", filepath.Join(s.dir, node+".transfers"),
			"--controller", ctl, "--controller-token-file", filepath.Join(s.dir, "dn-"+node+".token"), "--node", node, "--endpoint", n.endpoint,
			"--lease", "3s", "--max-tasks", "2"}
		if s.rate != "" {
			args = append(args, "--max-rate", s.rate)
		}
		if s.tb != nil {
			ip, _ := s.tb.status().node(node)
			s.nodes[node] = s.tb.serveIn(node, ip+":7070", root, args...)
			return
		}
		addr := fmt.Sprintf("%s:%d", n.host, freePort(s.t, n.host))
		if s.advertise != nil {
			if a := s.advertise(node, addr); a != "" {
				args = append(args, "--advertise", a)
			}
		}
		s.nodes[node] = startLP(s.t, runOpts{timeout: 10 * time.Minute},
			append([]string{"serve", "--listen", addr, "--root", root}, args...)...)
		return
	}
	s.t.Fatalf("no data node %s", node)
}

// endpoints is endpoint list --json.
func (s *svc) endpoints() map[string]transfer.Endpoint {
	r := s.lp(s.admin, "endpoint", "list", "--json")
	out := map[string]transfer.Endpoint{}
	if r.code != 0 {
		return out
	}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e transfer.Endpoint
		if json.Unmarshal([]byte(l), &e) == nil && e.Name != "" {
			out[e.Name] = e
		}
	}
	return out
}

// waitNodes waits until each endpoint has n live data nodes.
func (s *svc) waitNodes(want map[string]int) {
	s.t.Helper()
	var eps map[string]transfer.Endpoint
	ok := waitFor(2*time.Minute, func() bool {
		eps = s.endpoints()
		for name, n := range want {
			alive := 0
			for _, d := range eps[name].Nodes {
				if d.Alive {
					alive++
				}
			}
			if alive != n {
				return false
			}
		}
		return true
	})
	if !ok {
		s.t.Fatalf("the endpoints' data nodes are not all alive: %+v", eps)
	}
}

// job is transfer status --json: the job's page.
func (s *svc) job(tok, id string) apiv1.JobPage {
	s.t.Helper()
	r := s.ok(tok, "transfer", "status", id, "--json")
	var j apiv1.JobPage
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &j); err != nil {
		s.t.Fatalf("transfer status --json: %v\n%s", err, r.stdout)
	}
	return j
}

// submit submits as alice and returns the answer (the job's id, whether
// it was created).
func (s *svc) submit(args ...string) apiv1.JobResponse {
	s.t.Helper()
	r := s.ok(s.alice, append([]string{"transfer", "submit", "--json"}, args...)...)
	var resp apiv1.JobResponse
	if err := json.Unmarshal([]byte(lastLine(r.stdout)), &resp); err != nil || !strings.HasPrefix(resp.Job.ID, "j-") {
		s.t.Fatalf("transfer submit --json: %v\n%s", err, r.stdout)
	}
	return resp
}

// wait starts transfer wait on job id in the background.
func (s *svc) wait(id string) *proc {
	s.t.Helper()
	return startLP(s.t, runOpts{timeout: 5 * time.Minute}, "transfer", "wait", id, "--controller", s.url, "--controller-token-file", s.alice)
}

// datasetBytes is the size of files (makeDataset's) under root.
func datasetBytes(t *testing.T, root string, files []string) int64 {
	t.Helper()
	var total int64
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	return total
}

// makeDataset writes a tree of files of mixed sizes under root/run1 and
// returns their paths relative to root.
func makeDataset(t *testing.T, root string, scale int) []string {
	t.Helper()
	var files []string
	add := func(rel string, size int64) {
		writeRandom(t, filepath.Join(root, rel), size, uint64(len(files)+1))
		files = append(files, rel)
	}
	add("run1/empty", 0)
	for i := range 30 {
		add(fmt.Sprintf("run1/small/d%02d/f%03d.dat", i%5, i), int64(1+i*2311))
	}
	for i := range 6 {
		add(fmt.Sprintf("run1/mid/m%d.dat", i), int64(1<<20+i*77777))
	}
	for i := range 2 * scale {
		add(fmt.Sprintf("run1/big/b%d.dat", i), int64(6<<20+i*4099))
	}
	return files
}

// sameDataset checks that every file arrived under dstRoot/dst,
// identical, and that nothing half-received is left there.
func (s *svc) sameDataset(files []string, dst string) {
	s.t.Helper()
	for _, rel := range files {
		if !sameContent(s.t, filepath.Join(s.srcRoot, rel), filepath.Join(s.dstRoot, dst, rel)) {
			s.t.Errorf("%s: differs at the destination (or is missing)", rel)
		}
	}
	filepath.WalkDir(filepath.Join(s.dstRoot, dst), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".lightpath-part") || strings.HasSuffix(p, ".lightpath-journal")) {
			s.t.Errorf("work file left at the destination: %s", p)
		}
		return nil
	})
}

// succeeded checks that job id ended SUCCEEDED with every one of files
// verified, and returns its page.
func (s *svc) succeeded(id string, files []string) apiv1.JobPage {
	s.t.Helper()
	j := s.job(s.alice, id)
	if j.Job.State != transfer.JobSucceeded || j.Job.FilesTotal != len(files) || j.Job.FilesDone != len(files) {
		s.t.Errorf("job %s: %s (%s), %d of %d files done, want SUCCEEDED with all %d", id, j.Job.State, j.Job.Reason,
			j.Job.FilesDone, j.Job.FilesTotal, len(files))
	}
	for _, f := range j.Files {
		if f.State != transfer.FileSucceeded || len(f.Checksum) != 8 {
			s.t.Errorf("file %s: %s, checksum %q", f.Path, f.State, f.Checksum)
		}
	}
	return j
}

// midJob submits the dataset under run1 to siteB:dst as alice (with the
// more args given), starts transfer wait on it, and returns once the job
// is under way with a copy task of node running (waitMidJob): the moment
// to inject a fault.
func (s *svc) midJob(dst, node string, args ...string) (string, *proc, apiv1.JobPage) {
	s.t.Helper()
	id := s.submit(append([]string{"siteA:run1", "siteB:" + dst}, args...)...).Job.ID
	wait := s.wait(id)
	return id, wait, s.waitMidJob(id, node)
}

// arrived waits for transfer wait w of job id to exit 0, then checks that
// every one of files arrived identical under dst and the job SUCCEEDED,
// and returns its page.
func (s *svc) arrived(w *proc, id string, files []string, dst string) apiv1.JobPage {
	s.t.Helper()
	if r := w.Wait(); r.code != 0 {
		s.t.Fatalf("transfer wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s.sameDataset(files, dst)
	return s.succeeded(id, files)
}

// waitMidJob waits until job id is ACTIVE with at least a fifth of its
// bytes moved and a copy task of node running, and returns its page:
// the moment to inject a fault. It fails the test when the job ended
// first (underWay).
func (s *svc) waitMidJob(id, node string) apiv1.JobPage {
	s.t.Helper()
	j, ok := s.underWay(id, node)
	if !ok {
		s.t.Fatalf("job %s is %s before the fault could be injected: slow the nodes down (%+v)", id, j.Job.State, j.Job)
	}
	return j
}

// underWay waits until job id is ACTIVE with at least a fifth of its bytes
// moved and a copy task of node running, and returns its page, or the
// page and false when the job ended before it was seen so. What has moved
// is read from its copy tasks, whose bytes_done the data nodes' heartbeats
// keep current: the job's own bytes_done counts the files of the tasks
// that ended. It polls the API from the test itself, not through a
// command (a process to start, slow beside a busy core), so that a job of
// a few seconds is seldom over between two looks.
func (s *svc) underWay(id, node string) (apiv1.JobPage, bool) {
	s.t.Helper()
	cl, err := client.New(s.url, readTok(s.t, s.alice), client.WithTimeout(30*time.Second))
	if err != nil {
		s.t.Fatal(err)
	}
	var j apiv1.JobPage
	if !waitFor(2*time.Minute, func() bool {
		if j, err = cl.Job(context.Background(), id, client.JobPageOptions{}); err != nil {
			return false
		}
		if j.Job.State == transfer.JobSucceeded || j.Job.State == transfer.JobFailed {
			return true
		}
		return j.Job.State == transfer.JobActive && j.Job.BytesTotal > 0 && moved(j) >= j.Job.BytesTotal/5 &&
			len(running(j, node)) > 0
	}) {
		s.t.Fatalf("job %s did not get under way with a task of %s: %+v", id, node, j.Job)
	}
	return j, j.Job.State == transfer.JobActive
}

// moved is what the copy tasks of job page j have moved.
func moved(j apiv1.JobPage) int64 {
	var n int64
	for _, k := range j.Tasks {
		if k.Kind == transfer.TaskCopy {
			n += k.BytesDone
		}
	}
	return n
}

// running is the copy tasks of job page j that node runs.
func running(j apiv1.JobPage, node string) []transfer.Task {
	var out []transfer.Task
	for _, k := range j.Tasks {
		if k.Kind == transfer.TaskCopy && k.State == transfer.TaskActive && k.From == node {
			out = append(out, k)
		}
	}
	return out
}

// TestServiceEndToEnd: a dataset submitted with transfer submit arrives
// identical, spread over both node pairs; transfer wait exits 0 (and, with
// --json, ends with a summary); endpoint list, transfer list, show,
// status --optimizer, endpoint allow (and --remove) and cancel say what
// they should. The repeated --id and the bad inputs are checked on the
// testbed (TestServiceOnTestbed).
func TestServiceEndToEnd(t *testing.T) {
	t.Parallel()
	// The first job's pushes crawl (pushGate) until its copy tasks run
	// from both source nodes to both destination nodes: none can end
	// first, so however the machine schedules the nodes' claims, the
	// late one finds work left. Then at 200 Mbit/s a node.
	gate := newPushGate(0)
	s := startSvc(t, svcOpts{rate: "200M", advertise: gate.advertise(t)})
	files := makeDataset(t, s.srcRoot, 1)

	r := s.ok(s.admin, "endpoint", "list")
	for _, want := range []string{"siteA", "siteB", "s1", "s2", "a1", "a2", "b1", "b2", "alive", "127.0.0.11:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("endpoint list lacks %q:\n%s", want, r.stdout)
		}
	}

	resp := s.submit("siteA:run1", "siteB:in/", "--id", "run1-first")
	id := resp.Job.ID
	if !resp.Created {
		t.Errorf("the first submission says it was not created")
	}
	if !waitFor(2*time.Minute, func() bool {
		from, to := map[string]bool{}, map[string]bool{}
		for _, k := range s.job(s.alice, id).Tasks {
			if k.Kind == transfer.TaskCopy {
				from[k.From], to[k.To] = true, true
			}
		}
		return from["a1"] && from["a2"] && to["b1"] && to["b2"]
	}) {
		t.Fatalf("the job's copy tasks never ran over both node pairs: %+v", s.job(s.alice, id).Tasks)
	}
	gate.open()
	w := s.lp(s.alice, "transfer", "wait", id, "--timeout", "3m")
	if w.code != 0 {
		t.Fatalf("transfer wait: exit %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	if !strings.Contains(w.stdout, "SUCCEEDED") {
		t.Errorf("transfer wait did not print the end:\n%s", w.stdout)
	}
	s.sameDataset(files, "in")
	w = s.lp(s.alice, "transfer", "wait", id, "--json")
	var sum struct {
		Summary   bool   `json:"summary"`
		State     string `json:"state"`
		FilesDone int    `json:"files_done"`
	}
	if err := json.Unmarshal([]byte(lastLine(w.stdout)), &sum); w.code != 0 || err != nil || !sum.Summary || sum.State != "SUCCEEDED" || sum.FilesDone != len(files) {
		t.Errorf("transfer wait --json: exit %d, summary %+v (%v)\n%s", w.code, sum, err, w.stdout)
	}
	checkBothPairs(t, s.succeeded(id, files))

	r = s.ok(s.alice, "transfer", "list")
	if n := strings.Count(r.stdout, id); n != 1 || !strings.Contains(r.stdout, "KIND") || !strings.Contains(r.stdout, "job") {
		t.Errorf("transfer list shows job %s %d times:\n%s", id, n, r.stdout)
	}
	r = s.ok(s.alice, "transfer", "show", id)
	for _, want := range []string{id, "SUCCEEDED", "siteA:run1", "files: SUCCEEDED"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("transfer show lacks %q:\n%s", want, r.stdout)
		}
	}
	r = s.ok(s.alice, "transfer", "status", id, "--optimizer")
	if !strings.Contains(r.stdout, "optimizer") {
		t.Errorf("transfer status --optimizer says nothing of the optimizer:\n%s", r.stdout)
	}

	// allow and --remove.
	if r := s.ok(s.admin, "endpoint", "allow", "siteA", "--user", "bob"); !strings.Contains(r.stdout, "alice,bob") {
		t.Errorf("endpoint allow --user bob: %s", r.stdout)
	}
	if r := s.ok(s.admin, "endpoint", "allow", "siteA", "--user", "bob", "--remove"); strings.Contains(r.stdout, "bob") {
		t.Errorf("endpoint allow --user bob --remove: %s", r.stdout)
	}
	checkFailure(t, "endpoint allow as a user", s.lp(s.alice, "endpoint", "allow", "siteA", "--user", "alice"), "endpoint allow")

	// A job's congestion control: the job keeps it, its pushes run it (the
	// destination servers' transfer logs say what their sessions ran), and
	// one the data nodes' kernels lack fails the job, saying so.
	ccJob := s.submit("siteA:run1", "siteB:incc", "--cc", "reno")
	if ccJob.Job.CC != "reno" {
		t.Errorf("transfer submit --cc reno: the job's cc is %q", ccJob.Job.CC)
	}
	if w := s.lp(s.alice, "transfer", "wait", ccJob.Job.ID, "--timeout", "3m"); w.code != 0 {
		t.Fatalf("transfer wait of the --cc reno job: exit %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	s.sameDataset(files, "incc")
	if r := s.ok(s.alice, "transfer", "show", ccJob.Job.ID); !regexp.MustCompile(`(?m)^cc\s+reno$`).MatchString(r.stdout) {
		t.Errorf("transfer show of the --cc reno job does not say cc reno:\n%s", r.stdout)
	}
	ran := map[any]int{}
	for _, node := range []string{"b1", "b2"} {
		for _, l := range readJSONLines(t, filepath.Join(s.dir, node+".transfers")) {
			if l["kind"] == "session" && l["op"] == "put" && l["status"] == "ok" {
				ran[l["cc"]]++
			}
		}
	}
	if ran["reno"] == 0 {
		t.Errorf("no push of the --cc reno job ran reno at the destinations: sessions ran %v", ran)
	}
	// A job over UDP: the data nodes push over UDP streams (their
	// servers' transfer logs say so) under fast, the default without a
	// booking. The gate's proxy relays TCP alone: the destination nodes
	// start again, advertising their own addresses.
	s.advertise = nil
	for _, n := range []string{"b1", "b2"} {
		s.nodes[n].Signal(syscall.SIGTERM)
		s.nodes[n].Wait()
		s.startNode(n)
	}
	if !waitFor(2*time.Minute, func() bool {
		nodes := s.endpoints()["siteB"].Nodes
		for _, d := range nodes {
			if !d.Alive || strings.HasPrefix(d.Address, "127.0.0.1:") {
				return false
			}
		}
		return len(nodes) == 2
	}) {
		t.Fatalf("the destination nodes did not come back on their own addresses: %+v", s.endpoints()["siteB"])
	}
	udpJob := s.submit("siteA:run1", "siteB:inudp", "--transport", "udp")
	if udpJob.Job.Transport != "udp" {
		t.Errorf("transfer submit --transport udp: the job's transport is %q", udpJob.Job.Transport)
	}
	if w := s.lp(s.alice, "transfer", "wait", udpJob.Job.ID, "--timeout", "3m"); w.code != 0 {
		t.Fatalf("transfer wait of the --transport udp job: exit %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	s.sameDataset(files, "inudp")
	if r := s.ok(s.alice, "transfer", "show", udpJob.Job.ID); !regexp.MustCompile(`(?m)^transport\s+udp$`).MatchString(r.stdout) {
		t.Errorf("transfer show of the --transport udp job does not say transport udp:\n%s", r.stdout)
	}
	overUDP := 0
	for _, node := range []string{"b1", "b2"} {
		for _, l := range readJSONLines(t, filepath.Join(s.dir, node+".transfers")) {
			if l["kind"] == "session" && l["op"] == "put" && l["status"] == "ok" && l["transport"] == "udp" {
				overUDP++
				if l["cc"] != "fast" {
					t.Errorf("a push of the UDP job ran %v, want fast", l["cc"])
				}
			}
		}
	}
	if overUDP == 0 {
		t.Error("no push of the --transport udp job went over UDP at the destinations")
	}
	checkFailure(t, "transfer submit --transport udp --cc cubic",
		s.lp(s.alice, "transfer", "submit", "siteA:run1", "siteB:x", "--transport", "udp", "--cc", "cubic"), "--transport", "fixed, fast or aimd")

	bad := s.submit("siteA:run1", "siteB:inbad", "--cc", "nosuchcc").Job.ID
	w = s.lp(s.alice, "transfer", "wait", bad, "--timeout", "3m")
	if w.code != 1 || !strings.Contains(w.stdout+w.stderr, `congestion control "nosuchcc" is not offered`) {
		t.Errorf("transfer wait of a --cc nosuchcc job: exit %d, want 1 naming the congestion control\n%s\n%s", w.code, w.stdout, w.stderr)
	}

	// A cancelled job: cancel says so, wait exits 1. The source nodes are
	// stopped meanwhile, so the job cannot end before the cancel comes,
	// however slow the machine.
	for _, n := range []string{"a1", "a2"} {
		s.nodes[n].Signal(syscall.SIGSTOP)
		defer s.nodes[n].Signal(syscall.SIGCONT)
	}
	second := s.submit("siteA:run1", "siteB:in2").Job.ID
	r = s.ok(s.alice, "transfer", "cancel", second)
	if !strings.Contains(r.stdout, "CANCELLED") {
		t.Errorf("transfer cancel: %s", r.stdout)
	}
	w = s.lp(s.alice, "transfer", "wait", second)
	if w.code != 1 || !strings.Contains(w.stderr, "CANCELLED") {
		t.Errorf("transfer wait of a cancelled job: exit %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
}

// checkBothPairs checks that the copy tasks of job page j ran from both
// source nodes to both destination nodes.
func checkBothPairs(t *testing.T, j apiv1.JobPage) {
	t.Helper()
	from, to := map[string]bool{}, map[string]bool{}
	for _, k := range j.Tasks {
		if k.Kind == transfer.TaskCopy {
			from[k.From], to[k.To] = true, true
		}
	}
	if !from["a1"] || !from["a2"] || !to["b1"] || !to["b2"] {
		t.Errorf("the copy tasks ran from %v to %v, want both nodes of each endpoint", from, to)
	}
}

// TestServiceStandbyTakeover: a leader and a standby on one database
// (SQLite, then PostgreSQL); the data nodes, the user and transfer wait
// are given both URLs. The leader is SIGKILLed mid-job, the standby takes
// over, and the job still succeeds with every file identical.
func TestServiceStandbyTakeover(t *testing.T) {
	t.Parallel()
	for _, store := range []struct {
		name string
		db   func(t *testing.T, dir string) string
	}{
		{"sqlite", nil},
		{"postgres", func(t *testing.T, _ string) string { return pgtest.URL(t) }},
	} {
		t.Run(store.name, func(t *testing.T) {
			// Half the dataset goes at the nodes' pace, the rest crawls
			// (pushGate) until the standby leads: the job cannot end
			// before the controller is killed, however slow the machine.
			gate := newPushGate(0)
			s := startSvc(t, svcOpts{rate: "40M", standby: true, db: store.db, advertise: gate.advertise(t)})
			standbyURL := fmt.Sprintf("http://127.0.0.1:%d", s.standbyPort)
			if h, err := health(t, standbyURL); err != nil || h.Role != apiv1.RoleStandby {
				t.Fatalf("the second controller: %+v %v", h, err)
			}
			files := makeDataset(t, s.srcRoot, 3)
			gate.free.Store(datasetBytes(t, s.srcRoot, files) / 2)
			id, wait, _ := s.midJob("in/", "a1")
			s.kill()
			if !waitFor(2*time.Minute, func() bool {
				h, err := health(t, standbyURL)
				return err == nil && h.Role == apiv1.RoleLeader
			}) {
				t.Fatalf("the standby did not take over:\n%s", s.standby.log)
			}
			gate.open()
			s.arrived(wait, id, files, "in")
		})
	}
}

// partArgs lower the controller's part sizes: a file of 32 MiB or more
// moves in parts of 16 MiB.
var partArgs = []string{"--transfer-part-min", "32MiB", "--transfer-part-size", "16MiB"}

// pushGate holds a job running for as long as a test needs: the
// destination data nodes advertise a proxy (svcOpts.advertise) which,
// until open, passes the first free bytes pushed at the nodes' pace, then
// one read every 250 ms for all connections together. At that crawl a
// job of tens of MiB cannot end within a test's wait, yet every stream
// still moves well within the servers' stall timeout. The pause only
// paces bytes.
type pushGate struct {
	free   atomic.Int64 // settable while connections pass
	closed atomic.Bool
	passed atomic.Int64
	mu     sync.Mutex
}

func newPushGate(free int64) *pushGate {
	g := &pushGate{}
	g.free.Store(free)
	g.closed.Store(true)
	return g
}

// open lets everything through from now on.
func (g *pushGate) open() { g.closed.Store(false) }

func (g *pushGate) tamper(_ int, up bool, _ int64, b []byte) {
	if up && g.closed.Load() && g.passed.Add(int64(len(b))) > g.free.Load() {
		g.mu.Lock()
		time.Sleep(250 * time.Millisecond)
		g.mu.Unlock()
	}
}

// advertise is svcOpts.advertise: a gated proxy before each destination
// (siteB) data node.
func (g *pushGate) advertise(t *testing.T) func(node, listen string) string {
	return func(node, listen string) string {
		if !strings.HasPrefix(node, "b") {
			return ""
		}
		return startProxy(t, listen, false, g.tamper).Addr()
	}
}

// TestServiceLargeFileParts: one large file, cut into parts (the
// controller's part sizes lowered), goes from two source data nodes into
// one destination data node: both source nodes move parts of it, the job
// succeeds, the file arrives identical with its parts' checksums
// combined, and transfer show lists its parts.
func TestServiceLargeFileParts(t *testing.T) {
	t.Parallel()
	// The pushes crawl (pushGate) until both source nodes run a part: no
	// part can end first, so however the machine schedules the nodes'
	// claims, the second finds parts left. Then at 200 Mbit/s a node.
	gate := newPushGate(0)
	s := startSvc(t, svcOpts{rate: "200M", without: []string{"b2"}, ctlArgs: partArgs, advertise: gate.advertise(t)})
	const size = 96 << 20
	files := []string{"big/huge.dat", "big/small.dat"}
	writeRandom(t, filepath.Join(s.srcRoot, files[0]), size, 42)
	writeRandom(t, filepath.Join(s.srcRoot, files[1]), 70_000, 43)
	id := s.submit("siteA:big", "siteB:in/").Job.ID
	w := s.wait(id)
	if !waitFor(2*time.Minute, func() bool {
		from := map[string]bool{}
		for _, k := range s.job(s.alice, id).Tasks {
			if k.Kind == transfer.TaskCopy && k.Part != nil {
				from[k.From] = true
			}
		}
		return from["a1"] && from["a2"]
	}) {
		t.Fatalf("the two source nodes did not both take a part: %+v", s.job(s.alice, id).Tasks)
	}
	gate.open()
	p := s.arrived(w, id, files, "in")
	for _, f := range p.Files {
		want := 0
		if f.Path == files[0] {
			want = 6
		}
		if f.Parts != want || f.PartsDone != want {
			t.Errorf("file %s: %d of %d parts, want %d", f.Path, f.PartsDone, f.Parts, want)
		}
		if f.Path == files[0] && f.To != "b1" {
			t.Errorf("the large file's owner: %q, want b1", f.To)
		}
	}
	parts := map[string]int{}
	for _, k := range p.Tasks {
		if k.Kind == transfer.TaskCopy && k.Part != nil {
			parts[k.From]++
			if k.To != "b1" {
				t.Errorf("a part went to %s", k.To)
			}
		}
	}
	moved := map[string]int64{}
	var total int64
	for _, pr := range p.Job.Pairs {
		moved[pr.From] += pr.BytesDone
		total += pr.BytesDone
		if pr.To != "b1" {
			t.Errorf("pair %s → %s", pr.From, pr.To)
		}
	}
	if parts["a1"] == 0 || parts["a2"] == 0 || moved["a1"] == 0 || moved["a2"] == 0 {
		t.Errorf("the parts came from %v, bytes per source node %v: want both source nodes", parts, moved)
	}
	if total != size+70_000 {
		t.Errorf("the pairs moved %d bytes, want %d", total, size+70_000)
	}
	r := s.ok(s.alice, "transfer", "show", id)
	for _, want := range []string{"files in parts:", files[0], "6/6", "b1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("transfer show lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestServiceLargeFileOwnerKilled: the destination data node that owns a
// large file being received in parts is SIGKILLed once some parts are in;
// its lease lapses, the file's parts go back to the queue, the other
// destination node takes the file, and it arrives identical.
func TestServiceLargeFileOwnerKilled(t *testing.T) {
	t.Parallel()
	s := startSvc(t, svcOpts{rate: "40M", ctlArgs: partArgs})
	files := []string{"big/huge.dat"}
	writeRandom(t, filepath.Join(s.srcRoot, files[0]), 96<<20, 44)
	id := s.submit("siteA:big", "siteB:in/").Job.ID
	w := s.wait(id)
	var owner string
	if !waitFor(2*time.Minute, func() bool {
		j := s.job(s.alice, id)
		if len(j.Files) != 1 || j.Job.State != transfer.JobActive {
			return false
		}
		owner = j.Files[0].To
		return j.Files[0].PartsDone >= 1 && j.Files[0].PartsDone < j.Files[0].Parts
	}) {
		t.Fatalf("the file never had some of its parts in: %+v", s.job(s.alice, id).Files)
	}
	other := map[string]string{"b1": "b2", "b2": "b1"}[owner]
	if other == "" {
		t.Fatalf("owner %q", owner)
	}
	s.nodes[owner].Signal(syscall.SIGKILL)
	p := s.arrived(w, id, files, "in")
	if f := p.Files[0]; f.To != other || f.Attempts != 2 || f.PartsDone != 6 {
		t.Errorf("the file after its owner %s was killed: %+v", owner, f)
	}
}
