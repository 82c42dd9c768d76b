//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/testbed"
)

// Monitoring for real: the controller's repository fed by the six agents
// of the two-site testbed (every collector on, a push every second), rules
// that act on what they see, and the faults the issue names: the
// controller down for a minute while the agents push, an agent that
// vanishes.

type querySeries struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Points [][2]*float64     `json:"points"`
}

// query reads a metric's series from the controller; a failure is an
// empty answer, logged.
func (c *cliCtl) query(t *testing.T, name string, match map[string]string, start, end time.Time, step time.Duration) []querySeries {
	t.Helper()
	v := url.Values{"name": {name}, "start": {start.UTC().Format(time.RFC3339Nano)}, "end": {end.UTC().Format(time.RFC3339Nano)}}
	for k, val := range match {
		v.Add("match", k+"="+val)
	}
	if step > 0 {
		v.Set("step", step.String())
	}
	var out struct {
		Series []querySeries `json:"series"`
	}
	if err := c.getJSON(c.adminTok, "/api/v1/metrics/query?"+v.Encode(), &out); err != nil {
		t.Logf("query %s: %v", name, err)
		return nil
	}
	return out.Series
}

// latest is the last value of the first series, and whether there is one.
func latest(ss []querySeries) (float64, bool) {
	if len(ss) == 0 || len(ss[0].Points) == 0 {
		return 0, false
	}
	p := ss[0].Points[len(ss[0].Points)-1]
	if p[1] == nil {
		return 0, false
	}
	return *p[1], true
}

// hook is a webhook receiver on loopback: the controller runs in the host's
// namespace, so the rules' webhooks reach it there.
type hook struct {
	url  string
	mu   sync.Mutex
	docs []map[string]any
}

func startHook(t *testing.T) *hook {
	h := &hook{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d map[string]any
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &d) == nil {
			h.mu.Lock()
			h.docs = append(h.docs, d)
			h.mu.Unlock()
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	h.url = "http://" + ln.Addr().String() + "/hook"
	return h
}

func (h *hook) states(rule string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, d := range h.docs {
		if d["rule"] == rule {
			out = append(out, fmt.Sprint(d["state"]))
		}
	}
	return out
}

// pidWith is the first lightpath process running subcommand sub (its
// first argument) with every one of parts among its arguments, or 0 (not
// the testbed exec that started it, whose arguments hold them too). With
// netns (a path such as /run/netns/lp-BED-NODE) only a process in that
// network namespace counts: tests beside this one run the same commands
// in testbeds of their own.
func pidWith(netns, sub string, parts ...string) int {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		all := len(args) > 1 && args[1] == sub
		for _, p := range parts {
			all = all && slices.Contains(args, p)
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if all && (netns == "" || pidInNetns(pid, netns)) {
			return pid
		}
	}
	return 0
}

func TestMonitoringOnTestbed(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	wh := startHook(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`rules:
  # The probes across wan stop coming back when its direction ra → rb is down.
  - name: wan-unreachable
    expr: {series: lightpath_probe_loss_ratio, labels: {link: wan, node: ra}, fn: min, window: 4s}
    op: ">="
    threshold: 1
    for: 2s
    severity: critical
    actions:
      - log: {}
      - webhook: {url: "`+wh.url+`", timeout: 2s}
  # wan busy in the direction ra → rb: move what is reserved there away.
  - name: wan-busy
    expr: {series: lightpath_link_utilisation_ratio, labels: {link: wan, from: ra}, fn: avg, window: 3s}
    op: ">"
    threshold: 10%
    for: 1s
    actions:
      - log: {}
      - reroute: {}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Rules evaluated every 200 ms: each fires at the first evaluation
	// after its condition has held for its "for".
	c, b := agentTestbed(t, "--rules", rules, "--rules-interval", "200ms")
	nodes := []string{"a1", "a2", "b1", "b2", "ra", "rb"}

	t.Run("every node's series on one scrape", func(t *testing.T) {
		if !waitFor(20*time.Second, func() bool {
			v, ok := latest(c.query(t, "lightpath_probe_rtt_seconds", map[string]string{"node": "ra", "link": "wan"}, time.Now().Add(-time.Minute), time.Now(), 0))
			return ok && v > 0
		}) {
			t.Fatal("no probe RTT from ra across wan within 20s")
		}
		// A loaded host only adds to a probe's time: the least RTT is what
		// the emulator was told (25 ms each way). Below a second it is in
		// seconds, not milliseconds.
		rtt := 0.0
		for _, s := range c.query(t, "lightpath_probe_rtt_seconds", map[string]string{"node": "ra", "link": "wan"}, time.Now().Add(-time.Minute), time.Now(), 0) {
			for _, p := range s.Points {
				if p[1] != nil && *p[1] > 0 && (rtt == 0 || *p[1] < rtt) {
					rtt = *p[1]
				}
			}
		}
		if rtt < 0.045 || rtt >= 1 {
			t.Errorf("least probe RTT ra → rb across wan = %.1f ms, want at least 50 (25 ms each way), in seconds", rtt*1000)
		}
		var body []byte
		missing := func() []string {
			resp, err := http.Get(c.url + "/metrics")
			if err != nil {
				return []string{err.Error()}
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			var out []string
			for _, n := range nodes {
				// The emulator's collector, which the agent command adds to
				// the registry (package collect/emulator), runs on every node
				// (each has a link end, and so pipes leaving it).
				for _, series := range []string{"lightpath_interface_transmit_bytes_total{", "lightpath_agent_collector_success{collector=\"host\"",
					"lightpath_emulator_in_bytes_total{"} {
					found := false
					for _, l := range strings.Split(string(body), "\n") {
						if strings.HasPrefix(l, series) && strings.Contains(l, `node="`+n+`"`) {
							found = true
							break
						}
					}
					if !found {
						out = append(out, series+"... of "+n)
					}
				}
			}
			return out
		}
		if !waitFor(20*time.Second, func() bool { return len(missing()) == 0 }) {
			t.Errorf("one scrape of /metrics lacks %v", missing())
		}
		if pt := promtoolPath(); pt != "" {
			cmd := exec.Command(pt, "check", "metrics")
			cmd.Stdin = strings.NewReader(string(body))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool check metrics: %v\n%s", err, out)
			}
		}
		t.Logf("probe RTT ra → rb across wan: %.1f ms; /metrics: %d bytes", rtt*1000, len(body))
	})

	t.Run("a rule fires when wan goes down and resolves when it is back", func(t *testing.T) {
		b.linkSet("wan", "--down")
		if !waitFor(30*time.Second, func() bool { return slices.Contains(wh.states("wan-unreachable"), "firing") }) {
			t.Fatalf("wan-unreachable did not fire within 30s; webhooks %v", wh.states("wan-unreachable"))
		}
		b.linkSet("wan", "--up")
		if !waitFor(30*time.Second, func() bool { return slices.Contains(wh.states("wan-unreachable"), "ok") }) {
			t.Fatalf("wan-unreachable did not resolve within 30s; webhooks %v", wh.states("wan-unreachable"))
		}
	})

	t.Run("a busy wan moves a reservation and the transfer's page says why", func(t *testing.T) {
		userTok := filepath.Join(c.dir, "alice.token")
		c.ok(c.adminTok, "user", "add", "alice", "--role", "user")
		c.ok(c.adminTok, "user", "token", "create", "alice", "--out", userTok)
		srcDir, dstDir := scratchDir(t), scratchDir(t)
		src := filepath.Join(srcDir, "data.bin")
		writeRandom(t, src, 8<<20, 41)
		b.serveIn("b1", "198.18.2.1:7070", dstDir)
		b.serveIn("b2", "198.18.2.2:7071", scratchDir(t))
		// The copy is held until the rule has moved its reservation: b1's
		// server is stopped, so the copy is registered and booked on wan
		// but cannot end. What makes wan busy is another flow, a2 → b2 at
		// 200 Mbit/s (a fifth of wan) with no reservation, until the
		// reroute.
		srv := pidWith("", "serve", "--root", dstDir)
		if srv == 0 {
			t.Fatal("no process of b1's server")
		}
		syscall.Kill(srv, syscall.SIGSTOP)
		defer syscall.Kill(srv, syscall.SIGCONT)
		// Paced at 16 Mbit/s, the copy's data takes 4 s at least once its
		// server runs again, however fast the machine: its report every
		// second carries its streams' TCP state at least once (the check
		// of its per-stream series below).
		cp := startLP(t, runOpts{timeout: 3 * time.Minute}, "testbed", "exec", "--name", b.name, "a1", "--", lpBin, "cp", "--json", "--retries", "5",
			"--rate", "16M", "--reserve", "300M", "--reserve-path", "a1-ra,wan,b1-rb", "--controller", c.sock, "--controller-token-file", userTok,
			src, "lp://198.18.2.1:7070/data.bin")
		var resv string
		if !waitFor(time.Minute, func() bool {
			var l struct {
				Transfers []struct {
					Reservation string `json:"reservation"`
					State       string `json:"state"`
				} `json:"transfers"`
			}
			if c.getJSON(userTok, "/api/v1/transfers", &l) == nil && len(l.Transfers) == 1 && l.Transfers[0].State == "running" {
				resv = l.Transfers[0].Reservation
			}
			return resv != "" || cp.Exited()
		}) || resv == "" {
			t.Fatalf("the copy was not registered running with a reservation:\n%s", cp.err.String())
		}
		busy := startLP(t, runOpts{timeout: 3 * time.Minute}, "testbed", "exec", "--name", b.name, "a2", "--",
			lpBin, "bench", "lp://198.18.2.2:7071", "--rate", "200M", "-t", "150")
		rerouted := func() bool {
			for _, h := range c.reservation(c.adminTok, resv).History {
				if strings.Contains(h.Why, "rerouted by rule wan-busy") {
					return true
				}
			}
			return false
		}
		if !waitFor(2*time.Minute, func() bool { return rerouted() || busy.Exited() }) || !rerouted() {
			t.Errorf("wan-busy did not move reservation %s while wan was busy: %+v", resv, c.reservation(c.adminTok, resv).History)
		}
		if pid := pidWith("/run/netns/lp-"+b.name+"-a2", "bench", "lp://198.18.2.2:7071"); pid != 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		busy.Wait()
		syscall.Kill(srv, syscall.SIGCONT)
		r := cp.Wait()
		mustSucceed(t, "cp --reserve over wan", r)
		sum := parseReserveSummary(t, r.stdout)
		var list struct {
			Transfers []struct {
				ID          string           `json:"id"`
				State       string           `json:"state"`
				Reservation string           `json:"reservation"`
				BytesDone   int64            `json:"bytes_done"`
				BytesByPath map[string]int64 `json:"bytes_by_path"`
				Verified    bool             `json:"verified"`
			} `json:"transfers"`
		}
		if err := c.getJSON(userTok, "/api/v1/transfers", &list); err != nil || len(list.Transfers) != 1 {
			t.Fatalf("transfers: %v %+v", err, list)
		}
		tr := list.Transfers[0]
		if tr.State != "succeeded" || !tr.Verified || tr.Reservation != sum.Reservation || tr.BytesDone != sum.BytesSent {
			t.Errorf("the recorded transfer %+v does not match cp's summary %s", tr, lastLine(r.stdout))
		}
		if sum.Reservation != resv {
			t.Errorf("cp's summary names reservation %s, the transfer's was %s", sum.Reservation, resv)
		}
		out := c.ok(userTok, "transfer", "show", tr.ID).stdout
		if !strings.Contains(out, "wan-busy firing") || !strings.Contains(out, "reroute ok") {
			t.Errorf("transfer show lacks the rule that moved it:\n%s", out)
		}
		t.Logf("transfer %s: %.0f Mbit/s, bytes by path %v; its page:\n%s", tr.ID, sum.ThroughputBps/1e6, sum.BytesByPath, out)
		// The transfer's own series: its throughput and each stream's TCP state.
		if ss := c.query(t, "lightpath_transfer_stream_rtt_seconds", map[string]string{"transfer": tr.ID}, time.Now().Add(-10*time.Minute), time.Now(), 0); len(ss) == 0 {
			t.Errorf("no per-stream RTT of transfer %s", tr.ID)
		}
	})

	t.Run("the controller down loses no sample", func(t *testing.T) {
		c.stop()
		// The agents go on collecting into their spools: the outage lasts
		// until each has spooled ten collections the controller has not
		// taken.
		spooled := map[string][]int64{}
		if !waitFor(2*time.Minute, func() bool {
			for _, n := range nodes {
				spooled[n] = spooledHostTimes(testbed.SpoolDir(b.name, n))
				if len(spooled[n]) < 10 {
					return false
				}
			}
			return true
		}) {
			c.launch()
			t.Fatalf("the agents did not spool ten collections each while the controller was down: %v", spooled)
		}
		c.launch()
		// Every collection spooled reaches the repository once the
		// controller is back: the spools drain at the next pushes.
		for _, n := range nodes {
			ts := spooled[n]
			var missing []int64
			if !waitFor(2*time.Minute, func() bool {
				ss := c.query(t, "lightpath_agent_collector_success", map[string]string{"node": n, "collector": "host"},
					time.UnixMilli(ts[0]-1000), time.UnixMilli(ts[len(ts)-1]+1000), 0)
				stored := map[int64]bool{}
				for _, s := range ss {
					for _, p := range s.Points {
						if p[0] != nil {
							stored[int64(*p[0])] = true
						}
					}
				}
				missing = missing[:0]
				for _, at := range ts {
					if !stored[at] {
						missing = append(missing, at)
					}
				}
				return len(missing) == 0
			}) {
				t.Errorf("%s: %d of the %d collections spooled during the outage are not in the repository: %v", n, len(missing), len(ts), missing)
			} else {
				t.Logf("%s: the %d collections spooled during the outage are all stored", n, len(ts))
			}
		}
	})

	t.Run("an agent that vanishes is shown gone", func(t *testing.T) {
		for _, pid := range agentPIDs(t, b, c.sock, "b2") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		var agents struct {
			Agents []struct {
				Node  string `json:"node"`
				Alive bool   `json:"alive"`
			} `json:"agents"`
		}
		if !waitFor(30*time.Second, func() bool {
			if err := c.getJSON(c.adminTok, "/api/v1/agents", &agents); err != nil {
				return false
			}
			for _, a := range agents.Agents {
				if a.Node == "b2" {
					return !a.Alive
				}
			}
			return false
		}) {
			t.Fatalf("b2's agent is not shown gone: %+v", agents)
		}
		if out := c.ok(c.adminTok, "agent", "list").stdout; !strings.Contains(out, "b2") || !strings.Contains(out, "gone") {
			t.Errorf("agent list does not show b2 gone:\n%s", out)
		}
	})
}

// spooledHostTimes is the instants (Unix ms, in order) of the groups in
// an agent's spool dir that hold its host collector's success.
func spooledHostTimes(dir string) []int64 {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var ts []int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // sent and removed meanwhile
		}
		var g monitor.Group
		if json.Unmarshal(data, &g) != nil {
			continue // meta.json
		}
		for _, p := range g.Points {
			if p.Name == "lightpath_agent_collector_success" && p.Labels.Get("collector") == "host" {
				ts = append(ts, g.T)
				break
			}
		}
	}
	slices.Sort(ts)
	return ts
}

// promtoolPath finds promtool (scripts/deps.sh fetches it), or "".
func promtoolPath() string {
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/local/lib/lightpath/promtool"); err == nil {
		return "/usr/local/lib/lightpath/promtool"
	}
	return ""
}

// pidInNetns says whether process pid runs in the network namespace bound at
// path.
func pidInNetns(pid int, path string) bool {
	var a, b syscall.Stat_t
	return syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &a) == nil && syscall.Stat(path, &b) == nil &&
		a.Ino == b.Ino && a.Dev == b.Dev
}
