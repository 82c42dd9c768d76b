//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/cc"
	"github.com/lightpath/lightpath/internal/cc/cctest"
	"github.com/lightpath/lightpath/internal/cc/fast"
)

// availableCC is what the kernel offers now (FAST appears once lightpath
// cc install fast has loaded it).
func availableCC(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		t.Skipf("no list of congestion controls: %v", err)
	}
	return strings.Fields(string(b))
}

// TestCpCC copies over loopback with --cc and reads back, from the
// summary, the congestion control each stream really ran: the client's
// in a push, the server's in a pull (it follows the client's --cc, or its
// own serve --cc when the client names none), and in a reverse bench. A
// --cc the kernel does not offer fails at once in one line.
func TestCpCC(t *testing.T) {
	t.Parallel()
	avail := availableCC(t)
	if !slices.Contains(avail, "reno") {
		t.Skip("the kernel offers no reno")
	}
	dir := scratchDir(t)
	src := filepath.Join(dir, "src.bin")
	writeRandom(t, src, 6<<20, 16)
	srv := startServer(t, mkdir(t, dir, "srv"))

	check := func(what string, s summary, want string) {
		t.Helper()
		if s.CC != want || len(s.PerStream) != 2 {
			t.Errorf("%s: summary cc %q over %d streams, want %q over 2", what, s.CC, len(s.PerStream), want)
		}
		for i, p := range s.PerStream {
			if p.CC != want {
				t.Errorf("%s: stream %d ran %q, want %q", what, i, p.CC, want)
			}
		}
	}
	check("push --cc reno", cpOK(t, "-P", "2", "--cc", "reno", src, srv.URL("a.bin")), "reno")
	check("pull --cc reno", cpOK(t, "-P", "2", "--cc", "reno", srv.URL("a.bin"), filepath.Join(dir, "back.bin")), "reno")
	sameFile(t, src, filepath.Join(dir, "back.bin"))
	// The server's transfer log names it too, for the push and the pull.
	sessions := func() (ccs []any) {
		for _, l := range srv.TransferLog() {
			if l["kind"] == "session" {
				ccs = append(ccs, l["cc"])
			}
		}
		return ccs
	}
	if !waitFor(10*time.Second, func() bool { return len(sessions()) >= 2 }) || !slices.Equal(sessions()[:2], []any{"reno", "reno"}) {
		t.Errorf("the server's transfer log: sessions ran %v, want reno twice", sessions())
	}

	// The human summary says it in a line of its own.
	r := runLP(t, runOpts{}, "cp", "-P", "2", "--cc", "reno", src, srv.URL("b.bin"))
	mustSucceed(t, "cp --cc reno", r)
	if !strings.Contains(r.stdout, "congestion control: reno (2 streams)") {
		t.Errorf("cp --cc reno: the summary does not name reno on 2 streams:\n%s", r.stdout)
	}

	// serve --cc is the default of what the server sends.
	srv2 := startServer(t, mkdir(t, dir, "srv2"), "--cc", "reno")
	cpOK(t, src, srv2.URL("a.bin"))
	check("pull from serve --cc reno", cpOK(t, "-P", "2", srv2.URL("a.bin"), filepath.Join(dir, "back2.bin")), "reno")
	b := runLP(t, runOpts{timeout: 30 * time.Second}, "bench", "-P", "2", "-t", "1", "--reverse", "--json", "lp://"+srv2.addr)
	mustSucceed(t, "bench --reverse", b)
	bs, _ := parseNDJSON(t, b.stdout, "cc", "per_stream")
	check("bench --reverse from serve --cc reno", bs, "reno")

	refused := map[string][]string{"nosuchcc": {"--cc", `"nosuchcc"`, "not offered", avail[0]}}
	for cc, want := range refused {
		for _, args := range [][]string{
			{"cp", "--cc", cc, src, srv.URL("c.bin")},
			{"bench", "--cc", cc, "-t", "1", "lp://" + srv.addr},
			{"serve", "--cc", cc, "--listen", "127.0.0.1:0", "--root", dir},
		} {
			r := runLP(t, runOpts{timeout: 30 * time.Second}, args...)
			checkFailure(t, "lightpath "+strings.Join(args, " "), r, want...)
		}
	}
	if _, err := os.Stat(filepath.Join(srv.root, "c.bin")); err == nil {
		t.Error("a copy refused for its --cc wrote its file")
	}
}

// TestCpFAST: without FAST loaded, --cc fast is refused by cp, bench and
// serve in one line naming the command that loads it; once loaded, a copy
// and a bench run over FAST and say so.
func TestCpFAST(t *testing.T) {
	cctest.Hold(t, "fast", false, nil)
	dir := scratchDir(t)
	src := filepath.Join(dir, "a.bin")
	writeRandom(t, src, 8<<20, 16)
	srv := startServer(t, mkdir(t, dir, "srv"))
	for _, args := range [][]string{
		{"cp", "--cc", "fast", src, srv.URL("c.bin")},
		{"bench", "--cc", "fast", "-t", "1", "lp://" + srv.addr},
		{"serve", "--cc", "fast", "--listen", "127.0.0.1:0", "--root", dir},
	} {
		r := runLP(t, runOpts{timeout: 30 * time.Second}, args...)
		checkFailure(t, "lightpath "+strings.Join(args, " "), r, "--cc", `"fast"`, "not loaded", "lightpath cc install fast")
	}
	if _, _, err := cc.Install("fast", fast.DefaultParams); err != nil {
		t.Fatal(err)
	}
	s := cpOK(t, "-P", "2", "--cc", "fast", src, srv.URL("c.bin"))
	if s.CC != "fast" {
		t.Errorf("cp --cc fast: summary cc %q", s.CC)
	}
	b := runLP(t, runOpts{timeout: 30 * time.Second}, "bench", "-P", "2", "-t", "1", "--cc", "fast", "--json", "lp://"+srv.addr)
	mustSucceed(t, "bench --cc fast", b)
	bs, _ := parseNDJSON(t, b.stdout, "cc")
	if bs.CC != "fast" {
		t.Errorf("bench --cc fast: summary cc %q", bs.CC)
	}
}
