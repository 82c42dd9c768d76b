//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
)

// The transfer service end to end, on loopback, with the real binary: a
// controller on a small topology whose hosts are the data nodes, two
// `lightpath serve --controller` per endpoint (each on its own 127.0.0.x
// address; the two nodes of an endpoint serve the same directory, as a
// site's transfer nodes share a file system), and the command line as a
// user runs it.

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

// svc is a controller with its users and data nodes.
type svc struct {
	t    *testing.T
	dir  string
	port int
	url  string
	cmd  *exec.Cmd
	log  *lockedBuffer
	// Token files.
	admin, alice, bob, agent string
	// The endpoints' roots.
	srcRoot, dstRoot string
	nodes            map[string]*proc
	// With a standby: its port, process and log; url then names both
	// controllers (leader first), as the users and data nodes are given
	// them.
	standbyPort int
	standby     *exec.Cmd
	standbyLog  *lockedBuffer
	// ctlArgs are more flags for the controller.
	ctlArgs []string
}

// svcOpts are startSvcOpts's choices.
type svcOpts struct {
	rate    string // each data node's --max-rate
	standby bool   // a standby controller on the same database
	// ctlArgs are more flags for the controller.
	ctlArgs []string
	// without are data nodes not to start (of a1, a2, b1, b2).
	without []string
}

// startSvc starts the controller, makes the users, starts the four data
// nodes (each pacing its pushes at rate, --max-rate) and lets alice use
// both endpoints.
func startSvc(t *testing.T, rate string) *svc { return startSvcWith(t, rate, false) }

// startSvcWith is startSvc, with a standby controller on the same
// database when standby is true.
func startSvcWith(t *testing.T, rate string, standby bool) *svc {
	return startSvcOpts(t, svcOpts{rate: rate, standby: standby})
}

// startSvcOpts is startSvc with o's choices.
func startSvcOpts(t *testing.T, o svcOpts) *svc {
	t.Helper()
	rate, standby := o.rate, o.standby
	dir := t.TempDir()
	s := &svc{t: t, dir: dir, port: freePort(t, "127.0.0.1"), admin: filepath.Join(dir, "admin.token"),
		srcRoot: mkdir(t, dir, "siteA"), dstRoot: mkdir(t, dir, "siteB"), nodes: map[string]*proc{}, ctlArgs: o.ctlArgs}
	s.url = fmt.Sprintf("http://127.0.0.1:%d", s.port)
	if err := os.WriteFile(filepath.Join(dir, "topo.yaml"), []byte(serviceTopology), 0o644); err != nil {
		t.Fatal(err)
	}
	s.launch()
	if standby {
		s.standbyPort = freePort(t, "127.0.0.1")
		s.standby, s.standbyLog = s.start(s.standbyPort)
		s.url += fmt.Sprintf(",http://127.0.0.1:%d", s.standbyPort)
	}
	// The logs go into the test's output when it fails (or always with
	// SVC_LOGS=1 in the environment).
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SVC_LOGS") != "" {
			t.Logf("controller log:\n%s", s.log)
			if s.standbyLog != nil {
				t.Logf("standby controller log:\n%s", s.standbyLog)
			}
			for name, p := range s.nodes {
				t.Logf("data node %s log:\n%s", name, p.err.String())
			}
		}
	})
	for _, u := range []struct{ name, role string }{{"alice", "user"}, {"bob", "user"}, {"dn", "agent"}} {
		s.ok(s.admin, "user", "add", u.name, "--role", u.role)
		s.ok(s.admin, "user", "token", "create", u.name, "--out", filepath.Join(dir, u.name+".token"))
	}
	s.alice, s.bob, s.agent = filepath.Join(dir, "alice.token"), filepath.Join(dir, "bob.token"), filepath.Join(dir, "dn.token")
	alive := map[string]int{}
	for i, n := range []struct{ node, endpoint, root string }{
		{"a1", "siteA", s.srcRoot}, {"a2", "siteA", s.srcRoot}, {"b1", "siteB", s.dstRoot}, {"b2", "siteB", s.dstRoot},
	} {
		if slices.Contains(o.without, n.node) {
			continue
		}
		s.startNode(n.node, n.endpoint, n.root, fmt.Sprintf("127.0.0.%d", 11+i), rate)
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
	s.cmd, s.log = s.start(s.port)
}

// start starts a controller on port and s's database and waits for its
// health (a standby's too).
func (s *svc) start(port int) (*exec.Cmd, *lockedBuffer) {
	t := s.t
	t.Helper()
	log := &lockedBuffer{}
	cmd := exec.Command(lpBin, "controller", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--db", "sqlite:"+filepath.Join(s.dir, "db"), "--topology", filepath.Join(s.dir, "topo.yaml"),
		"--admin-token-file", s.admin)
	cmd.Args = append(cmd.Args, s.ctlArgs...)
	cmd.Env = cleanEnv()
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	ok := waitFor(20*time.Second, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/health", port))
		if err != nil {
			return false
		}
		resp.Body.Close()
		_, err = os.Stat(s.admin)
		return resp.StatusCode == 200 && err == nil
	})
	if !ok {
		t.Fatalf("the controller did not come up:\n%s", log)
	}
	return cmd, log
}

// kill SIGKILLs the controller.
func (s *svc) kill() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
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

// startNode starts `lightpath serve --controller` for node.
func (s *svc) startNode(node, endpoint, root, host, rate string) {
	s.t.Helper()
	addr := fmt.Sprintf("%s:%d", host, freePort(s.t, host))
	args := []string{"serve", "--listen", addr, "--root", root, "--transfer-log", filepath.Join(s.dir, node+".transfers"),
		"--controller", s.url, "--controller-token-file", s.agent, "--node", node, "--endpoint", endpoint,
		"--lease", "3s", "--max-tasks", "2"}
	if rate != "" {
		args = append(args, "--max-rate", rate)
	}
	s.nodes[node] = startLP(s.t, runOpts{timeout: 10 * time.Minute}, args...)
}

type svcEndpoint struct {
	Name  string `json:"name"`
	Site  string `json:"site"`
	Nodes []struct {
		Node    string `json:"node"`
		Address string `json:"address"`
		Alive   bool   `json:"alive"`
	} `json:"nodes"`
}

// endpoints is endpoint list --json.
func (s *svc) endpoints() map[string]svcEndpoint {
	r := s.lp(s.admin, "endpoint", "list", "--json")
	out := map[string]svcEndpoint{}
	if r.code != 0 {
		return out
	}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e svcEndpoint
		if json.Unmarshal([]byte(l), &e) == nil && e.Name != "" {
			out[e.Name] = e
		}
	}
	return out
}

// waitNodes waits until each endpoint has n live data nodes.
func (s *svc) waitNodes(want map[string]int) {
	s.t.Helper()
	var eps map[string]svcEndpoint
	ok := waitFor(30*time.Second, func() bool {
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

// svcJob is what the tests read of a job page.
type svcJob struct {
	Job struct {
		ID          string `json:"id"`
		State       string `json:"state"`
		Reason      string `json:"reason"`
		FilesTotal  int    `json:"files_total"`
		FilesDone   int    `json:"files_done"`
		FilesFailed int    `json:"files_failed"`
	} `json:"job"`
	Files []struct {
		Path, Dest, State string
		Checksum          string `json:"checksum"`
	} `json:"files"`
	Tasks []struct {
		ID, Kind, State, From, To string
		Attempt                   int `json:"attempt"`
	} `json:"tasks"`
}

func (s *svc) job(tok, id string) svcJob {
	s.t.Helper()
	r := s.ok(tok, "transfer", "status", id, "--json")
	var j svcJob
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &j); err != nil {
		s.t.Fatalf("transfer status --json: %v\n%s", err, r.stdout)
	}
	return j
}

// submit submits as alice and returns the job's id.
func (s *svc) submit(args ...string) (string, bool) {
	s.t.Helper()
	r := s.ok(s.alice, append([]string{"transfer", "submit", "--json"}, args...)...)
	var resp struct {
		Job struct {
			ID, State string
		} `json:"job"`
		Created bool `json:"created"`
	}
	if err := json.Unmarshal([]byte(lastLine(r.stdout)), &resp); err != nil || !strings.HasPrefix(resp.Job.ID, "j-") {
		s.t.Fatalf("transfer submit --json: %v\n%s", err, r.stdout)
	}
	return resp.Job.ID, resp.Created
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

// sameDataset checks that every file arrived under dstRoot/in, identical.
func (s *svc) sameDataset(files []string) {
	s.t.Helper()
	for _, rel := range files {
		if !sameContent(s.t, filepath.Join(s.srcRoot, rel), filepath.Join(s.dstRoot, "in", rel)) {
			s.t.Errorf("%s: differs at the destination (or is missing)", rel)
		}
	}
	// Nothing half-received is left under a final name or beside one.
	filepath.WalkDir(s.dstRoot, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".lightpath-part") || strings.HasSuffix(p, ".lightpath-journal")) {
			s.t.Errorf("work file left at the destination: %s", p)
		}
		return nil
	})
}

// waitProgress waits until the job has moved some of its files but not
// all, and returns its page.
func (s *svc) waitProgress(id string) svcJob {
	s.t.Helper()
	var j svcJob
	if !waitFor(2*time.Minute, func() bool {
		j = s.job(s.alice, id)
		return j.Job.FilesDone > 0 || j.Job.State == "SUCCEEDED" || j.Job.State == "FAILED"
	}) {
		s.t.Fatalf("job %s moved no file: %+v", id, j.Job)
	}
	if j.Job.State != "ACTIVE" {
		s.t.Fatalf("job %s is %s before the fault could be injected: slow the nodes down (%+v)", id, j.Job.State, j.Job)
	}
	return j
}

// TestServiceEndToEnd: a dataset submitted with transfer submit arrives
// identical, spread over both node pairs; transfer wait exits 0; the same
// --id again makes no second job; bad input is refused in one line.
func TestServiceEndToEnd(t *testing.T) {
	// Paced at 200 Mbit/s a node: unpaced, the 21 MB went over loopback in
	// about 150 ms, all of it by the node that listed it, before the other
	// source node's next claim (every 250 ms when idle) could take a part.
	s := startSvc(t, "200M")
	files := makeDataset(t, s.srcRoot, 1)

	r := s.ok(s.admin, "endpoint", "list")
	for _, want := range []string{"siteA", "siteB", "s1", "s2", "a1", "a2", "b1", "b2", "alive", "127.0.0.11:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("endpoint list lacks %q:\n%s", want, r.stdout)
		}
	}

	id, created := s.submit("siteA:run1", "siteB:in/", "--id", "run1-first")
	if !created {
		t.Errorf("the first submission says it was not created")
	}
	w := s.lp(s.alice, "transfer", "wait", id, "--timeout", "3m")
	if w.code != 0 {
		t.Fatalf("transfer wait: exit %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	if !strings.Contains(w.stdout, "SUCCEEDED") {
		t.Errorf("transfer wait did not print the end:\n%s", w.stdout)
	}
	s.sameDataset(files)
	w = s.lp(s.alice, "transfer", "wait", id, "--json")
	var sum struct {
		Summary   bool   `json:"summary"`
		State     string `json:"state"`
		FilesDone int    `json:"files_done"`
	}
	if err := json.Unmarshal([]byte(lastLine(w.stdout)), &sum); w.code != 0 || err != nil || !sum.Summary || sum.State != "SUCCEEDED" || sum.FilesDone != len(files) {
		t.Errorf("transfer wait --json: exit %d, summary %+v (%v)\n%s", w.code, sum, err, w.stdout)
	}

	j := s.job(s.alice, id)
	if j.Job.State != "SUCCEEDED" || j.Job.FilesTotal != len(files) || j.Job.FilesDone != len(files) {
		t.Errorf("job: %+v, want SUCCEEDED with %d files", j.Job, len(files))
	}
	from, to := map[string]bool{}, map[string]bool{}
	for _, k := range j.Tasks {
		if k.Kind == "copy" {
			from[k.From], to[k.To] = true, true
		}
	}
	if !from["a1"] || !from["a2"] || !to["b1"] || !to["b2"] {
		t.Errorf("the copy tasks ran from %v to %v, want both nodes of each endpoint", from, to)
	}
	for _, f := range j.Files {
		if f.State != "SUCCEEDED" || len(f.Checksum) != 8 {
			t.Errorf("file %s: %s, checksum %q", f.Path, f.State, f.Checksum)
		}
	}

	// The same --id again: the first job, not a second one.
	again, created := s.submit("siteA:run1", "siteB:in/", "--id", "run1-first")
	if again != id || created {
		t.Errorf("resubmission with the same --id: job %s (created %v), want %s", again, created, id)
	}
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

	// Bad input: one line each, nothing made.
	checkFailure(t, "unknown endpoint", s.lp(s.alice, "transfer", "submit", "nowhere:run1", "siteB:in"), "transfer submit", "nowhere")
	checkFailure(t, "path with ..", s.lp(s.alice, "transfer", "submit", "siteA:../etc", "siteB:in"), "transfer submit", "out of the endpoint's root")
	checkFailure(t, "deadline in the past", s.lp(s.alice, "transfer", "submit", "siteA:run1", "siteB:in", "--deadline", "2020-01-01T00:00:00Z"), "transfer submit", "in the past")
	checkFailure(t, "malformed time", s.lp(s.alice, "transfer", "submit", "siteA:run1", "siteB:in", "--deadline", "tomorrow at nine"), "transfer submit", "invalid time")
	checkFailure(t, "two policies", s.lp(s.alice, "transfer", "submit", "siteA:run1", "siteB:in", "--overwrite", "--skip-existing"), "transfer submit", "exclude each other")
	checkFailure(t, "another user's job", s.lp(s.bob, "transfer", "status", id), "transfer status", id)
	checkFailure(t, "an endpoint bob may not use", s.lp(s.bob, "transfer", "submit", "siteA:run1", "siteB:in"), "transfer submit", "siteA")
	checkFailure(t, "a resubmission that differs", s.lp(s.alice, "transfer", "submit", "siteA:run1", "siteB:other", "--id", "run1-first"), "transfer submit")
	r = s.ok(s.alice, "transfer", "list", "--json")
	if n := strings.Count(r.stdout, `"id":"j-`); n != 1 {
		t.Errorf("after the bad submissions alice has %d jobs, want 1:\n%s", n, r.stdout)
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

	// A cancelled job: cancel says so, wait exits 1.
	second, _ := s.submit("siteA:run1", "siteB:in2")
	r = s.ok(s.alice, "transfer", "cancel", second)
	if !strings.Contains(r.stdout, "CANCELLED") {
		t.Errorf("transfer cancel: %s", r.stdout)
	}
	w = s.lp(s.alice, "transfer", "wait", second)
	if w.code != 1 || !strings.Contains(w.stderr, "CANCELLED") {
		t.Errorf("transfer wait of a cancelled job: exit %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
}

// partsPage is what the parts tests read of a job page.
type partsPage struct {
	Job struct {
		State string `json:"state"`
		Pairs []struct {
			From      string `json:"from"`
			To        string `json:"to"`
			BytesDone int64  `json:"bytes_done"`
		} `json:"pairs"`
	} `json:"job"`
	Files []struct {
		Path      string `json:"path"`
		State     string `json:"state"`
		Checksum  string `json:"checksum"`
		Attempts  int    `json:"attempts"`
		Parts     int    `json:"parts"`
		PartsDone int    `json:"parts_done"`
		To        string `json:"to"`
	} `json:"files"`
	Tasks []struct {
		Kind string `json:"kind"`
		From string `json:"from"`
		To   string `json:"to"`
		Part *struct {
			Index  int   `json:"index"`
			Length int64 `json:"length"`
		} `json:"part"`
	} `json:"tasks"`
}

func (s *svc) partsPage(id string) partsPage {
	s.t.Helper()
	r := s.ok(s.alice, "transfer", "status", id, "--json")
	var page partsPage
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &page); err != nil {
		s.t.Fatalf("transfer status --json: %v\n%s", err, r.stdout)
	}
	return page
}

// TestServiceLargeFileParts: one large file, cut into parts (the
// controller's part sizes lowered), goes from two source data nodes into
// one destination data node: both source nodes move parts of it, the job
// succeeds, the file arrives identical with its parts' checksums
// combined, and transfer show lists its parts.
func TestServiceLargeFileParts(t *testing.T) {
	// Paced at 200 Mbit/s a node, so the second source node claims parts
	// while the first pushes its own.
	s := startSvcOpts(t, svcOpts{rate: "200M", without: []string{"b2"},
		ctlArgs: []string{"--transfer-part-min", "32MiB", "--transfer-part-size", "16MiB"}})
	const size = 96 << 20
	writeRandom(t, filepath.Join(s.srcRoot, "big/huge.dat"), size, 42)
	writeRandom(t, filepath.Join(s.srcRoot, "big/small.dat"), 70_000, 43)
	id, _ := s.submit("siteA:big", "siteB:in/")
	w := s.lp(s.alice, "transfer", "wait", id, "--timeout", "3m")
	if w.code != 0 {
		t.Fatalf("transfer wait: exit %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
	s.sameDataset([]string{"big/huge.dat", "big/small.dat"})

	page := s.partsPage(id)
	if page.Job.State != "SUCCEEDED" {
		t.Fatalf("job %s", page.Job.State)
	}
	for _, f := range page.Files {
		want := 0
		if f.Path == "big/huge.dat" {
			want = 6
		}
		if f.State != "SUCCEEDED" || f.Parts != want || f.PartsDone != want || len(f.Checksum) != 8 {
			t.Errorf("file %s: %s, %d of %d parts (want %d), checksum %q", f.Path, f.State, f.PartsDone, f.Parts, want, f.Checksum)
		}
		if f.Path == "big/huge.dat" && f.To != "b1" {
			t.Errorf("the large file's owner: %q, want b1", f.To)
		}
	}
	parts := map[string]int{}
	for _, k := range page.Tasks {
		if k.Kind == "copy" && k.Part != nil {
			parts[k.From]++
			if k.To != "b1" {
				t.Errorf("a part went to %s", k.To)
			}
		}
	}
	moved := map[string]int64{}
	var total int64
	for _, p := range page.Job.Pairs {
		moved[p.From] += p.BytesDone
		total += p.BytesDone
		if p.To != "b1" {
			t.Errorf("pair %s → %s", p.From, p.To)
		}
	}
	if parts["a1"] == 0 || parts["a2"] == 0 || moved["a1"] == 0 || moved["a2"] == 0 {
		t.Errorf("the parts came from %v, bytes per source node %v: want both source nodes", parts, moved)
	}
	if total != size+70_000 {
		t.Errorf("the pairs moved %d bytes, want %d", total, size+70_000)
	}
	r := s.ok(s.alice, "transfer", "show", id)
	for _, want := range []string{"files in parts:", "big/huge.dat", "6/6", "b1"} {
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
	s := startSvcOpts(t, svcOpts{rate: "40M",
		ctlArgs: []string{"--transfer-part-min", "32MiB", "--transfer-part-size", "16MiB"}})
	writeRandom(t, filepath.Join(s.srcRoot, "big/huge.dat"), 96<<20, 44)
	id, _ := s.submit("siteA:big", "siteB:in/")
	wait := startLP(t, runOpts{timeout: 5 * time.Minute}, "transfer", "wait", id, "--controller", s.url, "--controller-token-file", s.alice)
	var owner string
	if !waitFor(2*time.Minute, func() bool {
		p := s.partsPage(id)
		if len(p.Files) != 1 || p.Job.State != "ACTIVE" {
			return false
		}
		owner = p.Files[0].To
		return p.Files[0].PartsDone >= 1 && p.Files[0].PartsDone < p.Files[0].Parts
	}) {
		t.Fatalf("the file never had some of its parts in: %+v", s.partsPage(id))
	}
	other := map[string]string{"b1": "b2", "b2": "b1"}[owner]
	if other == "" {
		t.Fatalf("owner %q", owner)
	}
	s.nodes[owner].Signal(syscall.SIGKILL)
	r := wait.Wait()
	if r.code != 0 {
		t.Fatalf("transfer wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s.sameDataset([]string{"big/huge.dat"})
	p := s.partsPage(id)
	if f := p.Files[0]; f.State != "SUCCEEDED" || f.To != other || f.Attempts != 2 || f.PartsDone != 6 || len(f.Checksum) != 8 {
		t.Errorf("the file after its owner %s was killed: %+v", owner, f)
	}
}

// TestServiceDataNodeKilled: a source data node SIGKILLed mid-job; its
// tasks go back to the queue when its lease lapses and finish on the
// other node; every file arrives identical.
func TestServiceDataNodeKilled(t *testing.T) {
	s := startSvc(t, "40M")
	files := makeDataset(t, s.srcRoot, 3)
	id, _ := s.submit("siteA:run1", "siteB:in/")
	wait := startLP(t, runOpts{timeout: 5 * time.Minute}, "transfer", "wait", id, "--controller", s.url, "--controller-token-file", s.alice)
	s.waitProgress(id)
	// A wait that times out first exits 2.
	if r := s.lp(s.alice, "transfer", "wait", id, "--timeout", "1s"); r.code != 2 || !strings.Contains(r.stderr, "still ACTIVE after 1s") {
		t.Errorf("transfer wait --timeout 1s of a running job: exit %d\n%s", r.code, r.stderr)
	}
	s.nodes["a1"].Signal(syscall.SIGKILL)
	s.waitNodes(map[string]int{"siteA": 1, "siteB": 2})
	r := wait.Wait()
	if r.code != 0 {
		t.Fatalf("transfer wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s.sameDataset(files)
	j := s.job(s.alice, id)
	requeued := false
	for _, k := range j.Tasks {
		if k.Kind == "copy" && k.Attempt > 1 {
			requeued = true
		}
	}
	if !requeued {
		t.Errorf("no copy task ran a second attempt after a1 was killed: %+v", j.Tasks)
	}
}

// TestServiceControllerKilled: the controller SIGKILLed mid-job and
// started again on its database; the data nodes and transfer wait carry
// on, and the job succeeds with every file identical.
func TestServiceControllerKilled(t *testing.T) {
	s := startSvc(t, "40M")
	files := makeDataset(t, s.srcRoot, 3)
	id, _ := s.submit("siteA:run1", "siteB:in/")
	wait := startLP(t, runOpts{timeout: 5 * time.Minute}, "transfer", "wait", id, "--controller", s.url, "--controller-token-file", s.alice)
	s.waitProgress(id)
	s.kill()
	time.Sleep(2 * time.Second) // the data nodes and wait find it gone
	s.launch()
	r := wait.Wait()
	if r.code != 0 {
		t.Fatalf("transfer wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s.sameDataset(files)
	if j := s.job(s.alice, id); j.Job.State != "SUCCEEDED" || j.Job.FilesDone != len(files) {
		t.Errorf("job after the restart: %+v", j.Job)
	}
}

// TestServiceStaleAttempt: a source data node stopped (SIGSTOP) mid-job
// loses its lease; its tasks go to a new attempt; when it is let go again
// (SIGCONT) its old attempt can no longer write (the destination fences
// it, the controller tells it to stop), and the job succeeds with every
// file identical.
func TestServiceStaleAttempt(t *testing.T) {
	s := startSvc(t, "40M")
	files := makeDataset(t, s.srcRoot, 3)
	id, _ := s.submit("siteA:run1", "siteB:in/")
	wait := startLP(t, runOpts{timeout: 5 * time.Minute}, "transfer", "wait", id, "--controller", s.url, "--controller-token-file", s.alice)
	s.waitProgress(id)
	s.nodes["a1"].Signal(syscall.SIGSTOP)
	s.waitNodes(map[string]int{"siteA": 1, "siteB": 2})
	// Until a task of a1 runs again elsewhere.
	if !waitFor(time.Minute, func() bool {
		for _, k := range s.job(s.alice, id).Tasks {
			if k.Kind == "copy" && k.Attempt > 1 {
				return true
			}
		}
		return false
	}) {
		t.Fatal("no task of the stopped node ran a second attempt")
	}
	s.nodes["a1"].Signal(syscall.SIGCONT)
	r := wait.Wait()
	if r.code != 0 {
		t.Fatalf("transfer wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s.sameDataset(files)
	// The old attempt was stopped: by the controller's word or by the
	// destination's refusal.
	if !waitFor(30*time.Second, func() bool {
		log := s.nodes["a1"].err.String()
		return strings.Contains(log, "stopping task") || strings.Contains(log, "no longer current") || strings.Contains(log, "task is over")
	}) {
		t.Errorf("a1's old attempt was never told to stop:\n%s", s.nodes["a1"].err.String())
	}
}

// TestServiceStandbyTakeover: a leader and a standby on one database; the
// data nodes, the user and transfer wait are given both URLs. The leader
// is SIGKILLed mid-job, the standby takes over, and the job still
// succeeds with every file identical.
func TestServiceStandbyTakeover(t *testing.T) {
	s := startSvcWith(t, "40M", true)
	standbyURL := fmt.Sprintf("http://127.0.0.1:%d", s.standbyPort)
	if h, err := health(t, standbyURL); err != nil || h.Role != apiv1.RoleStandby {
		t.Fatalf("the second controller: %+v %v", h, err)
	}
	files := makeDataset(t, s.srcRoot, 3)
	id, _ := s.submit("siteA:run1", "siteB:in/")
	wait := startLP(t, runOpts{timeout: 5 * time.Minute}, "transfer", "wait", id, "--controller", s.url, "--controller-token-file", s.alice)
	s.waitProgress(id)
	s.kill()
	if !waitFor(30*time.Second, func() bool {
		h, err := health(t, standbyURL)
		return err == nil && h.Role == apiv1.RoleLeader
	}) {
		t.Fatalf("the standby did not take over:\n%s", s.standbyLog)
	}
	r := wait.Wait()
	if r.code != 0 {
		t.Fatalf("transfer wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s.sameDataset(files)
	if j := s.job(s.alice, id); j.Job.State != "SUCCEEDED" || j.Job.FilesDone != len(files) {
		t.Errorf("job after the takeover: %+v", j.Job)
	}
}
