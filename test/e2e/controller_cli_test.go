//go:build linux

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The controller's command-line clients (lightpath reserve and lightpath
// user) against a real lightpath controller on loopback, scheduling on
// examples/two-site.yaml: a1 and a2 reach b1 and b2 over their 10 Gbit/s
// LANs and either the routed wan (1 Gbit/s, 900 Mbit/s reservable) or the
// dedicated link (2 Gbit/s, 1.8 Gbit/s reservable).

// cliCtl is a controller for the client tests: its TCP URL, its unix
// socket, and the admin token written to a file.
type cliCtl struct {
	t        *testing.T
	url      string // http://127.0.0.1:PORT
	sock     string // unix:PATH
	dir      string
	adminTok string // file

	extra  []string // more controller flags
	stopFn func()

	mu  sync.Mutex
	log strings.Builder
}

func startCLICtl(t *testing.T, extra ...string) *cliCtl {
	t.Helper()
	dir := t.TempDir()
	c := &cliCtl{t: t, dir: dir, adminTok: filepath.Join(dir, "admin.token"), extra: extra}
	c.launch()
	return c
}

// launch starts the controller process on c's database (again, after
// stop: a restart), and waits for its listening addresses.
func (c *cliCtl) launch() {
	t := c.t
	t.Helper()
	dir := c.dir
	sock := filepath.Join(dir, "controller.sock")
	args := append([]string{"controller", "--listen", "127.0.0.1:0", "--listen", "unix:" + sock,
		"--db", "sqlite:" + filepath.Join(dir, "db"), "--topology", repoFile("examples/two-site.yaml"),
		"--admin-token-file", c.adminTok}, c.extra...)
	cmd := exec.Command(lpBin, args...)
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start lightpath controller: %v", err)
	}
	// The controller logs one "listening" line per listener with its
	// address: the TCP one tells the port it was given.
	addrs := make(chan string, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.log.WriteString(line + "\n")
			c.mu.Unlock()
			if !strings.Contains(line, "listening") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if a, ok := strings.CutPrefix(f, "addr="); ok {
					addrs <- strings.Trim(a, `"`)
				}
			}
		}
	}()
	var once sync.Once
	c.stopFn = func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Errorf("lightpath controller did not exit within a minute of SIGTERM")
				cmd.Process.Kill()
				<-done
			}
			cmd.Wait()
		})
	}
	t.Cleanup(func() {
		c.stopFn()
		if t.Failed() {
			t.Logf("controller log:\n%s", c.Log())
		}
	})
	c.url, c.sock = "", ""
	deadline := time.After(2 * time.Minute) // bounds a hang only
	for c.url == "" || c.sock == "" {
		select {
		case a := <-addrs:
			if strings.HasPrefix(a, "/") {
				c.sock = "unix:" + a
			} else {
				c.url = "http://" + a
			}
		case <-done:
			t.Fatalf("lightpath controller exited at start:\n%s", c.Log())
		case <-deadline:
			t.Fatalf("lightpath controller logged no listening address in 2 min:\n%s", c.Log())
		}
	}
}

// stop stops the controller (SIGTERM, as an operator would) and waits.
func (c *cliCtl) stop() { c.stopFn() }

func (c *cliCtl) Log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// lp runs lightpath args against the controller over TCP as the holder of
// tokenFile (the times it prints in UTC).
func (c *cliCtl) lp(tokenFile string, args ...string) result {
	c.t.Helper()
	args = append(args, "--controller", c.url, "--controller-token-file", tokenFile)
	return runLP(c.t, runOpts{env: []string{"TZ=UTC"}, timeout: 60 * time.Second}, args...)
}

// ok is lp that must succeed.
func (c *cliCtl) ok(tokenFile string, args ...string) result {
	c.t.Helper()
	r := c.lp(tokenFile, args...)
	mustSucceed(c.t, "lightpath "+strings.Join(args, " "), r)
	return r
}

// cliResv is what the tests read of a reservation's JSON.
type cliResv struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Bandwidth uint64    `json:"bandwidth_bps"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	State     string    `json:"state"`
	Version   uint64    `json:"version"`
	Path      []struct {
		Link string `json:"link"`
	} `json:"path"`
	History []struct {
		Event string `json:"event"`
		By    string `json:"by"`
		Why   string `json:"why"`
	} `json:"history"`
	Created   *bool  `json:"created"`
	Algorithm string `json:"algorithm"`
}

func (r cliResv) links() string {
	var ls []string
	for _, h := range r.Path {
		ls = append(ls, h.Link)
	}
	return strings.Join(ls, ",")
}

// jsonLines parses NDJSON output into one value per line.
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var vs []T
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		vs = append(vs, v)
	}
	return vs
}

func oneJSON[T any](t *testing.T, out string) T {
	t.Helper()
	vs := jsonLines[T](t, out)
	if len(vs) != 1 {
		t.Fatalf("want one JSON line, got %d:\n%s", len(vs), out)
	}
	return vs[0]
}

// listOf runs reserve list --json and checks its summary line.
func (c *cliCtl) listOf(tokenFile string, args ...string) []cliResv {
	c.t.Helper()
	r := c.ok(tokenFile, append([]string{"reserve", "list", "--json"}, args...)...)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	var sum struct {
		Summary bool `json:"summary"`
		Count   int  `json:"count"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || !sum.Summary || sum.Count != len(lines)-1 {
		c.t.Fatalf("reserve list --json: the last line is not a summary counting the others:\n%s", r.stdout)
	}
	return jsonLines[cliResv](c.t, strings.Join(lines[:len(lines)-1], "\n"))
}

// TestControllerCLILifecycle books, lists, shows, modifies and cancels a
// reservation, over TCP and the unix socket, in tables and in NDJSON.
func TestControllerCLILifecycle(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	adm := c.adminTok

	before := time.Now()
	r := c.ok(adm, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "500M", "--start", "+1h", "--duration", "2h", "--json")
	after := time.Now()
	created := oneJSON[cliResv](t, r.stdout)
	if created.ID == "" || created.State != "RESERVED" || created.Bandwidth != 500e6 || created.End.Sub(created.Start) != 2*time.Hour ||
		created.Created == nil || !*created.Created || created.Algorithm == "" || created.Version != 1 || created.Owner != "admin" {
		t.Fatalf("create --json: %+v\n%s", created, r.stdout)
	}
	// +1h is an hour after the command's clock read (to the second), which
	// fell between before and after however slow the machine.
	if lo, hi := before.Truncate(time.Second).Add(time.Hour), after.Add(time.Hour); created.Start.Before(lo) || created.Start.After(hi) {
		t.Errorf("--start +1h gave %s, want between %s and %s", created.Start, lo, hi)
	}
	// No path named: the dedicated link, which has room (the controller's
	// default --path-preference).
	if l := created.links(); l != "a1-ra,dedicated,b1-rb" {
		t.Errorf("path %s, want a1-ra,dedicated,b1-rb", l)
	}
	id := created.ID

	// A second one on a path we name, committed later.
	start := created.Start.Add(30 * time.Minute).Format(time.RFC3339)
	end := created.Start.Add(90 * time.Minute).Format(time.RFC3339)
	r = c.ok(adm, "reserve", "create", "--from", "a2", "--to", "b2", "--bandwidth", "1G", "--start", start, "--end", end,
		"--path", "a2-ra,dedicated,b2-rb", "--hold", "--flow", "tcp 198.18.1.2 > 198.18.2.2:7070")
	if !strings.HasPrefix(r.stdout, "held r-") || !strings.Contains(r.stdout, "1.00 Gbit/s") || !strings.Contains(r.stdout, "via a2-ra,dedicated,b2-rb") ||
		!strings.Contains(r.stdout, "lightpath reserve commit r-") {
		t.Errorf("create --hold said:\n%s", r.stdout)
	}
	held := strings.Fields(r.stdout)[1]

	// The table, over TCP; the same list as NDJSON over the unix socket.
	r = c.ok(adm, "reserve", "list")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], "BANDWIDTH") || !strings.Contains(lines[0], "PATH") {
		t.Fatalf("reserve list:\n%s", r.stdout)
	}
	for _, want := range []string{id, "RESERVED", "500 Mbit/s", created.Start.UTC().Format(time.RFC3339)} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("reserve list lacks %q:\n%s", want, r.stdout)
		}
	}
	ru := runLP(t, runOpts{env: []string{"LIGHTPATH_CONTROLLER=" + c.sock, "LIGHTPATH_CONTROLLER_TOKEN=" + readTok(t, adm)}},
		"reserve", "list", "--json", "--state", "HELD")
	mustSucceed(t, "reserve list over the unix socket", ru)
	if got := jsonLines[map[string]any](t, ru.stdout); len(got) != 2 || got[0]["id"] != held || got[1]["count"] != 1.0 {
		t.Errorf("list --state HELD over %s:\n%s", c.sock, ru.stdout)
	}

	c.ok(adm, "reserve", "commit", held)
	if rs := c.listOf(adm, "--state", "RESERVED"); len(rs) != 2 {
		t.Errorf("after commit, %d RESERVED, want 2: %+v", len(rs), rs)
	}

	// show: the detail and the history.
	r = c.ok(adm, "reserve", "show", id)
	for _, want := range []string{`(?m)^state +RESERVED$`, `(?m)^bandwidth +500 Mbit/s$`, `(?m)^path +a1 -a1-ra-> ra -dedicated-> rb -b1-rb-> b1$`,
		`(?m)^history:$`, `(?m)^  \S+ +create +RESERVED +admin +1 +created and committed$`} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("reserve show lacks %s:\n%s", want, r.stdout)
		}
	}

	// modify reads the version and sends it: twice in a row works.
	r = c.ok(adm, "reserve", "modify", id, "--bandwidth", "600M", "--json")
	m := oneJSON[cliResv](t, r.stdout)
	if m.Bandwidth != 600e6 || m.Version != 2 || !m.Start.Equal(created.Start) {
		t.Errorf("modify --bandwidth: %+v", m)
	}
	r = c.ok(adm, "reserve", "modify", id, "--start", created.Start.Add(time.Hour).Format(time.RFC3339), "--duration", "3h")
	if !strings.HasPrefix(r.stdout, "modified "+id) || !strings.Contains(r.stdout, "(3h00m)") || !strings.Contains(r.stdout, "600 Mbit/s") {
		t.Errorf("modify --start --duration said:\n%s", r.stdout)
	}
	r = c.ok(adm, "reserve", "show", id, "--json")
	s := oneJSON[cliResv](t, r.stdout)
	if s.Version != 3 || !s.Start.Equal(created.Start.Add(time.Hour)) || s.End.Sub(s.Start) != 3*time.Hour || len(s.History) != 3 || s.History[2].Event != "modify" {
		t.Errorf("after two modifies: %+v", s)
	}

	// cancel, with a reason kept in the history; cancelling again is harmless.
	r = c.ok(adm, "reserve", "cancel", id, "--reason", "beam time moved", "--json")
	x := oneJSON[cliResv](t, r.stdout)
	if x.State != "CANCELLED" || x.History[len(x.History)-1].Why != "beam time moved" {
		t.Errorf("cancel: %+v", x)
	}
	c.ok(adm, "reserve", "cancel", id)
	if rs := c.listOf(adm, "--state", "CANCELLED"); len(rs) != 1 || rs[0].ID != id {
		t.Errorf("CANCELLED: %+v", rs)
	}

	// Mistakes, each one error line.
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"show a missing reservation", []string{"reserve", "show", "r-nope"}, []string{"reserve show", "r-nope"}},
		{"modify a cancelled one", []string{"reserve", "modify", id, "--bandwidth", "1G"}, []string{"reserve modify", "CANCELLED"}},
		{"an unknown node", []string{"reserve", "create", "--from", "a1", "--to", "zz", "--bandwidth", "1G", "--duration", "1h"}, []string{"reserve create", "zz"}},
		{"a start in the past", []string{"reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "1G", "--start", "2020-01-01T00:00:00Z", "--duration", "1h"}, []string{"reserve create", "past"}},
		{"a bad time", []string{"reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "1G", "--start", "tomorrow", "--duration", "1h"}, []string{"--start", "RFC 3339"}},
		{"bytes for a rate", []string{"reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "1GB", "--duration", "1h"}, []string{"--bandwidth"}},
		{"no window", []string{"reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "1G"}, []string{"--duration"}},
		{"a bad state", []string{"reserve", "list", "--state", "RUNNING"}, []string{"--state", "RUNNING"}},
		{"watch --until without an ID", []string{"reserve", "watch", "--until", "ACTIVE"}, []string{"ID"}},
		{"an unknown verb", []string{"reserve", "book"}, []string{"reserve", "book"}},
		{"an unknown flag", []string{"reserve", "create", "--frobnicate"}, []string{"reserve create", "--frobnicate"}},
		{"an argument create does not take", []string{"reserve", "create", "a1"}, []string{"reserve create", "a1"}},
		{"show without an ID", []string{"reserve", "show"}, []string{"reserve show", "ID"}},
		{"token create without a name", []string{"user", "token", "create"}, []string{"user token create", "NAME"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkFailure(t, "lightpath "+strings.Join(tc.args, " "), c.lp(adm, tc.args...), tc.want...)
		})
	}
	// No controller there: one line naming it.
	closed := "http://127.0.0.1:" + strconv.Itoa(freePort(t, "127.0.0.1"))
	r = runLP(t, runOpts{}, "reserve", "list", "--controller", closed)
	checkFailure(t, "reserve list with no controller", r, closed, "refused")
}

func readTok(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestControllerCLICapacity fills the window, then checks a create that
// does not fit is refused with the alternatives, and that find agrees.
func TestControllerCLICapacity(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	adm := c.adminTok
	// 1.5G fits only on the dedicated link, then 800M only on the wan:
	// from +1h to +3h, 300M stay free on the dedicated link, 100M on the
	// wan.
	a := oneJSON[cliResv](t, c.ok(adm, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "1.5G", "--start", "+1h", "--duration", "2h", "--json").stdout)
	start := a.Start.Format(time.RFC3339)
	end := a.End.Format(time.RFC3339)
	b := oneJSON[cliResv](t, c.ok(adm, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "800M", "--start", start, "--end", end, "--json").stdout)
	if a.links() != "a1-ra,dedicated,b1-rb" || b.links() != "a1-ra,wan,b1-rb" {
		t.Fatalf("paths %s and %s", a.links(), b.links())
	}

	args := []string{"reserve", "create", "--from", "a2", "--to", "b2", "--bandwidth", "500M", "--start", start, "--duration", "2h"}
	r := c.lp(adm, args...)
	checkFailure(t, "an over-capacity create", r,
		"reserve create", "earliest at that bandwidth: "+end+" → "+a.End.Add(2*time.Hour).Format(time.RFC3339), "widest in that slot: 300 Mbit/s via a2-ra,dedicated,b2-rb")
	if r.stdout != "" {
		t.Errorf("a refused create printed on stdout:\n%s", r.stdout)
	}
	// With --json, the error object on stdout for scripts.
	r = c.lp(adm, append(args, "--json")...)
	if r.code == 0 {
		t.Fatal("a refused create --json exited 0")
	}
	eb := oneJSON[cliErrorBody](t, r.stdout)
	if eb.Error.Code != "capacity" || !eb.Error.Alternatives.Earliest.Start.Equal(a.End) || eb.Error.Alternatives.Widest.Bandwidth != 300e6 {
		t.Errorf("refusal --json: %+v\n%s", eb, r.stdout)
	}
	if rs := c.listOf(adm); len(rs) != 2 {
		t.Errorf("the refused create booked something: %d reservations", len(rs))
	}

	// find agrees: the fixed slot does not fit, the earliest start is when
	// the two end, the widest is 300M, and every start from then on fits.
	checkFailure(t, "find the full slot", c.lp(adm, "reserve", "find", "--from", "a2", "--to", "b2", "--bandwidth", "500M", "--start", start, "--duration", "2h"), "reserve find")
	r = c.ok(adm, "reserve", "find", "--from", "a2", "--to", "b2", "--bandwidth", "500M", "--start", start, "--duration", "2h", "--earliest")
	if !strings.HasPrefix(r.stdout, "earliest: a2 → b2 at 500 Mbit/s, "+end+" → ") {
		t.Errorf("find --earliest said:\n%s", r.stdout)
	}
	r = c.ok(adm, "reserve", "find", "--from", "a2", "--to", "b2", "--bandwidth", "500M", "--start", start, "--duration", "2h", "--earliest", "--json")
	slot := oneJSON[cliSlot](t, r.stdout)
	if !slot.Start.Equal(a.End) || slot.End.Sub(slot.Start) != 2*time.Hour || slot.Algorithm == "" {
		t.Errorf("find --earliest --json: %+v", slot)
	}
	r = c.ok(adm, "reserve", "find", "--from", "a2", "--to", "b2", "--start", start, "--duration", "2h", "--widest")
	if !strings.Contains(r.stdout, "widest: a2 → b2 at 300 Mbit/s") {
		t.Errorf("find --widest said:\n%s", r.stdout)
	}
	r = c.ok(adm, "reserve", "find", "--from", "a2", "--to", "b2", "--bandwidth", "500M", "--start", start, "--duration", "2h", "--all", "--horizon", "+1d")
	if !strings.Contains(r.stdout, "starts that fit") || !strings.Contains(r.stdout, end) {
		t.Errorf("find --all said:\n%s", r.stdout)
	}
	r = c.ok(adm, "reserve", "find", "--from", "a2", "--to", "b2", "--size", "100GB", "--bandwidth", "1G")
	if !strings.Contains(r.stdout, "earliest completion") {
		t.Errorf("find --size said:\n%s", r.stdout)
	}

	// Booking what find offered works.
	c.ok(adm, "reserve", "create", "--from", "a2", "--to", "b2", "--bandwidth", "500M", "--start", end, "--duration", "2h")
}

// cliSlot is what the tests read of a scheduler's answer.
type cliSlot struct {
	Algorithm string    `json:"algorithm"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Bandwidth uint64    `json:"bandwidth_bps"`
}

// cliErrorBody is what the tests read of an API error.
type cliErrorBody struct {
	Error struct {
		Code         string `json:"code"`
		Message      string `json:"message"`
		Alternatives struct {
			Earliest cliSlot `json:"earliest"`
			Widest   cliSlot `json:"widest"`
		} `json:"alternatives"`
	} `json:"error"`
}

// TestControllerCLIUsers adds a user, gives it a token, books with that
// token, and revokes it.
func TestControllerCLIUsers(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	adm := c.adminTok

	r := c.ok(adm, "user", "add", "alice", "--role", "user", "--project", "cms", "--json")
	if u := oneJSON[map[string]any](t, r.stdout); u["name"] != "alice" || u["role"] != "user" {
		t.Errorf("user add --json: %s", r.stdout)
	}
	c.ok(adm, "user", "add", "bob", "--role", "operator")
	checkFailure(t, "user add with a bad role", c.lp(adm, "user", "add", "carol", "--role", "root"), "--role")
	checkFailure(t, "user add twice", c.lp(adm, "user", "add", "alice", "--role", "user"), "user add", "alice")

	r = c.ok(adm, "user", "list")
	for _, want := range []string{"NAME", "admin", "alice", "bob", "operator", "cms"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("user list lacks %q:\n%s", want, r.stdout)
		}
	}

	tokFile := filepath.Join(c.dir, "alice.token")
	r = c.ok(adm, "user", "token", "create", "alice", "--expires-in", "1d", "--out", tokFile)
	if fi, err := os.Stat(tokFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v", fi, err)
	}
	secret := readTok(t, tokFile)
	if strings.Contains(r.stdout, secret) {
		t.Errorf("token create --out printed the secret:\n%s", r.stdout)
	}
	// Without --out the secret alone goes to stdout.
	r = c.ok(adm, "user", "token", "create", "alice")
	if second := strings.TrimSpace(r.stdout); second == "" || strings.ContainsAny(second, " \n") || second == secret {
		t.Errorf("token create said %q", r.stdout)
	}

	r = c.ok(tokFile, "user", "whoami")
	if !strings.HasPrefix(r.stdout, "alice (user, projects cms)") {
		t.Errorf("whoami with alice's token: %s", r.stdout)
	}
	// Alice books; the admin's booking is not hers to see.
	c.ok(adm, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "100M", "--start", "+2h", "--duration", "1h")
	mine := oneJSON[cliResv](t, c.ok(tokFile, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "100M", "--start", "+2h", "--duration", "1h", "--project", "cms", "--json").stdout)
	if mine.Owner != "alice" {
		t.Errorf("alice's reservation is owned by %q", mine.Owner)
	}
	if rs := c.listOf(tokFile); len(rs) != 1 || rs[0].ID != mine.ID {
		t.Errorf("alice sees %+v", rs)
	}
	if rs := c.listOf(adm); len(rs) != 2 {
		t.Errorf("the admin sees %d reservations, want 2", len(rs))
	}
	checkFailure(t, "a user lists users", c.lp(tokFile, "user", "list"), "user list")
	checkFailure(t, "a project alice is not in", c.lp(tokFile, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "100M",
		"--start", "+2h", "--duration", "1h", "--project", "atlas"), "reserve create", "atlas")

	r = c.ok(adm, "user", "token", "list", "alice", "--json")
	toks := jsonLines[map[string]any](t, r.stdout)
	if len(toks) != 3 || toks[2]["summary"] != true || toks[2]["count"] != 2.0 {
		t.Fatalf("token list --json:\n%s", r.stdout)
	}
	for _, tk := range toks[:2] {
		if _, ok := tk["token"]; ok {
			t.Errorf("token list shows a secret: %v", tk)
		}
	}
	r = c.ok(adm, "user", "token", "list", "alice")
	if !strings.Contains(r.stdout, "EXPIRES") || !strings.Contains(r.stdout, "never") {
		t.Errorf("token list:\n%s", r.stdout)
	}
	// Revoke the token in the file (the one that expires), then it is refused.
	var revokeID string
	for _, tk := range toks[:2] {
		if tk["expires_at"] != nil {
			revokeID = tk["id"].(string)
		}
	}
	c.ok(adm, "user", "token", "revoke", revokeID)
	r = c.lp(tokFile, "reserve", "list")
	checkFailure(t, "a revoked token", r, "reserve list", "revoked")
	checkFailure(t, "no token at all", runLP(t, runOpts{}, "reserve", "list", "--controller", c.url), "reserve list", "LIGHTPATH_CONTROLLER_TOKEN")
	r = c.ok(adm, "user", "token", "list", "alice")
	if strings.Count(r.stdout, "\n") != 3 {
		t.Errorf("token list after revoke:\n%s", r.stdout)
	}
}

// TestControllerCLIWatch follows reservations: one committed while
// watched, one that becomes ACTIVE at its start, one cancelled while
// waited for.
func TestControllerCLIWatch(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	adm := c.adminTok
	opts := runOpts{env: []string{"TZ=UTC"}, timeout: 60 * time.Second}
	watch := func(args ...string) *proc {
		return startLP(t, opts, append(append([]string{"reserve", "watch"}, args...), "--controller", c.url, "--controller-token-file", adm)...)
	}

	// A hold, committed while watched.
	held := oneJSON[cliResv](t, c.ok(adm, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "100M", "--start", "+1h", "--duration", "1h", "--hold=5m", "--json").stdout)
	if held.State != "HELD" {
		t.Fatalf("create --hold=5m: %+v", held)
	}
	all := watch("--json") // every event, until interrupted
	probe := 0
	subscribed(t, all, func() string {
		probe++
		return oneJSON[cliResv](t, c.ok(adm, "reserve", "create", "--from", "a2", "--to", "b1", "--bandwidth", fmt.Sprintf("%dM", probe),
			"--start", "+5h", "--duration", "1h", "--json").stdout).ID
	})
	w := watch(held.ID, "--until", "RESERVED", "--timeout", "3m")
	subscribed(t, w, pokeByModify(c, held.ID))
	c.ok(adm, "reserve", "commit", held.ID)
	r := w.Wait()
	mustSucceed(t, "watch --until RESERVED", r)
	if !regexp.MustCompile(`(?m)^\S+  ` + held.ID + `  HELD → RESERVED  commit by admin`).MatchString(r.stdout) {
		t.Errorf("watch --until RESERVED said:\n%s", r.stdout)
	}

	// One that starts in a moment: ACTIVE at its start.
	soon := oneJSON[cliResv](t, c.ok(adm, "reserve", "create", "--from", "a2", "--to", "b2", "--bandwidth", "100M", "--start", "+2s", "--duration", "1h", "--json").stdout)
	r = c.ok(adm, "reserve", "watch", soon.ID, "--until", "ACTIVE", "--timeout", "50s", "--json")
	lines := jsonLines[map[string]any](t, r.stdout)
	last := lines[len(lines)-1]
	if last["summary"] != true || last["reached"] != true || last["state"] != "ACTIVE" || last["id"] != soon.ID {
		t.Errorf("watch --until ACTIVE --json:\n%s", r.stdout)
	}
	// Watching for a state it is already in ends at once.
	r = c.ok(adm, "reserve", "watch", soon.ID, "--until", "active")
	if strings.TrimSpace(r.stdout) != soon.ID+" is ACTIVE" {
		t.Errorf("watch of an ACTIVE one --until ACTIVE said %q", r.stdout)
	}

	// Cancelled while waited for: it will never be ACTIVE.
	later := oneJSON[cliResv](t, c.ok(adm, "reserve", "create", "--from", "a1", "--to", "b2", "--bandwidth", "100M", "--start", "+1h", "--duration", "1h", "--json").stdout)
	w = watch(later.ID, "--until", "ACTIVE", "--timeout", "3m")
	subscribed(t, w, pokeByModify(c, later.ID))
	c.ok(adm, "reserve", "cancel", later.ID, "--reason", "called off")
	r = w.Wait()
	checkFailure(t, "watch of a cancelled reservation", r, "reserve watch", later.ID, "CANCELLED", "never be ACTIVE")
	if !strings.Contains(r.stdout, "RESERVED → CANCELLED  cancel by admin: called off") {
		t.Errorf("the watcher did not print the cancel:\n%s", r.stdout)
	}
	// And a timeout says what it is still.
	other := oneJSON[cliResv](t, c.ok(adm, "reserve", "create", "--from", "a1", "--to", "b2", "--bandwidth", "100M", "--start", "+1h", "--duration", "1h", "--json").stdout)
	checkFailure(t, "watch that times out", c.lp(adm, "reserve", "watch", other.ID, "--until", "ACTIVE", "--timeout", "1s"), "still RESERVED")

	// The watcher of everything saw each change, one JSON event per line
	// (the stream is ordered: once it shows the last change, it showed
	// the ones before).
	if !waitFor(2*time.Minute, func() bool { return strings.Contains(all.out.String(), other.ID) }) {
		t.Errorf("watch --json did not show %s", other.ID)
	}
	all.Signal(syscall.SIGINT)
	r = all.Wait()
	mustSucceed(t, "watch (interrupted)", r)
	events := jsonLines[map[string]any](t, r.stdout)
	seen := map[string]bool{}
	for _, ev := range events[:len(events)-1] {
		res, _ := ev["reservation"].(map[string]any)
		tr, _ := ev["transition"].(map[string]any)
		if res == nil || tr == nil {
			t.Errorf("an event without a reservation or a transition: %v", ev)
			continue
		}
		seen[res["id"].(string)+" "+tr["event"].(string)] = true
	}
	for _, want := range []string{held.ID + " commit", soon.ID + " create", soon.ID + " start-reached", later.ID + " cancel"} {
		if !seen[want] {
			t.Errorf("watch --json did not see %s; saw %v", want, seen)
		}
	}
	if sum := events[len(events)-1]; sum["summary"] != true || sum["events"] != float64(len(events)-1) {
		t.Errorf("watch --json summary %v after %d events", sum, len(events)-1)
	}
}

// subscribed returns once watcher w follows the event stream. A watch
// reads the stream from when it subscribed, and its own output is the only
// sign that it has: poke causes a change w follows and returns a string
// w's output will then show; subscribed pokes again until it does. The
// pause between pokes only paces them: the deadline bounds a hang.
func subscribed(t *testing.T, w *proc, poke func() string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		mark := poke()
		if waitFor(3*time.Second, func() bool { return strings.Contains(w.out.String(), mark) }) {
			return
		}
		if w.Exited() || time.Now().After(deadline) {
			t.Fatalf("lightpath %s never showed a change it follows:\n%s\n%s", strings.Join(w.args, " "), w.out.String(), w.err.String())
		}
	}
}

// pokeByModify is a poke for subscribed: a modify of reservation id (its
// bandwidth, a megabit more each time), which a watcher of id prints.
func pokeByModify(c *cliCtl, id string) func() string {
	n := 0
	return func() string {
		n++
		c.ok(c.adminTok, "reserve", "modify", id, "--bandwidth", fmt.Sprintf("%dM", 100+n))
		return id + "  " // a line of watch's: the time, then the ID
	}
}

// TestControllerCLIExclusive holds a site, sees another user's booking
// refused there, and releases it.
func TestControllerCLIExclusive(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	adm := c.adminTok
	c.ok(adm, "user", "add", "alice", "--role", "user")
	tokFile := filepath.Join(c.dir, "alice.token")
	c.ok(adm, "user", "token", "create", "alice", "--out", tokFile)

	r := c.ok(adm, "reserve", "exclusive", "create", "--site", "site-b", "--start", "+1h", "--duration", "2h", "--json")
	x := oneJSON[map[string]any](t, r.stdout)
	id, _ := x["id"].(string)
	if id == "" || x["site"] != "site-b" || x["state"] != "RESERVED" {
		t.Fatalf("exclusive create --json: %s", r.stdout)
	}
	r = c.ok(adm, "reserve", "exclusive", "list")
	if !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "site site-b") || !strings.Contains(r.stdout, "b1,b2,rb") {
		t.Errorf("exclusive list:\n%s", r.stdout)
	}
	checkFailure(t, "a booking into someone's hold", c.lp(tokFile, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "100M",
		"--start", "+90m", "--duration", "30m"), "reserve create", "exclusive")
	checkFailure(t, "--node and --site", c.lp(adm, "reserve", "exclusive", "create", "--site", "site-a", "--node", "a1", "--duration", "1h"), "--node", "--site")
	r = c.ok(adm, "reserve", "exclusive", "cancel", id, "--reason", "done")
	if !strings.HasPrefix(r.stdout, "released "+id) {
		t.Errorf("exclusive cancel said:\n%s", r.stdout)
	}
	c.ok(tokFile, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "100M", "--start", "+90m", "--duration", "30m")
}
