//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var dashboardScreenshot = flag.String("dashboard.screenshot", "", "write the screenshot TestDashboard takes mid-transfer to this PNG file (default: into the test's temporary directory; also to $LIGHTPATH_ARTIFACTS/dashboard.png when that is set)")

// dashboardBrowser starts headless Chromium as TestWebUI does and returns
// its tab, with the page's problems collected.
func dashboardBrowser(t *testing.T, chrome string, timeout time.Duration) *webuiBrowser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.WindowSize(1500, 1200),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel)
	problems := &browserProblems{}
	if err := chromedp.Listen(ctx, problems.listen); err != nil {
		t.Fatalf("start Chromium (%s): %v", chrome, err)
	}
	return &webuiBrowser{t: t, ctx: ctx, problems: problems}
}

// pollPage waits until the expression gives a non-empty string (a JSON
// object the test reads) and returns it.
func pollPage(b *webuiBrowser, what, expr string, d time.Duration) string {
	b.t.Helper()
	return webuiRun(b, what, chromedp.Poll[string](expr, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(200*time.Millisecond)))
}

// TestDashboard watches a real transfer on the dashboard: the two-site
// testbed with an agent in every node pushing metrics every second, a
// controller with one rule (ra → rb busy: utilisation over 2 %), a server
// in b1 and `cp --reserve 300M` from a1 (rate-limited so that it lasts long
// enough to be watched). While it runs, the map's line for the direction
// ra → rb of the link its reservation crosses reports a measured rate and
// a colour other than idle, that direction's chart is in use, shown first
// and has received live points while idle directions' charts are
// collapsed, the transfer is listed and its throughput chart grows, and its
// page shows each TCP stream's state and charts its RTT and cwnd. The rule
// fires for real: the map marks that direction (and not its twin), the
// alerts panel lists it firing, and the transfer's page lists it among the
// alerts on its path. Once the copy ends the transfer is listed as
// succeeded. Through all of it the page writes no console error and
// throws nothing.
func TestDashboard(t *testing.T) {
	t.Parallel()
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no Chromium binary (chromium, chromium-browser or google-chrome) on PATH: scripts/deps.sh installs Debian's chromium")
	}
	// The rule sees ra → rb on wan and on dedicated (each its own series):
	// the copy's 60 Mbit/s is 6 % of wan and 3 % of dedicated; the
	// agents' own traffic is a few kbit/s. It fires at the first
	// evaluation (every 200 ms here) that sees the copy.
	const rule = "ra-rb-busy"
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`rules:
  - name: `+rule+`
    expr: {series: lightpath_link_utilisation_ratio, labels: {from: ra, to: rb}, fn: max, window: 5s}
    op: ">"
    threshold: 2%
    for: 0s
    severity: warning
    actions:
      - log: {}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, tb := agentTestbed(t, "--rules", rules, "--rules-interval", "200ms")
	userTok := filepath.Join(c.dir, "alice.token")
	c.ok(c.adminTok, "user", "add", "alice", "--role", "user")
	c.ok(c.adminTok, "user", "token", "create", "alice", "--out", userTok)

	srcDir, dstDir := scratchDir(t), scratchDir(t)
	const size = 300 << 20
	src := filepath.Join(srcDir, "data.bin")
	writeRandom(t, src, size, 41)
	tb.serveIn("b1", "198.18.2.1:7070", dstDir)

	b := dashboardBrowser(t, chrome, 5*time.Minute)
	b.do("load the page and sign in as admin",
		chromedp.Navigate(c.url+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), readTok(t, c.adminTok)),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("app")),
		chromedp.WaitReady(chromedp.CSS(`#topomap line.dir[data-link="wan"][data-from="ra"]`)))
	b.within(time.Minute, "the metrics stream delivers frames",
		chromedp.WaitReady(chromedp.CSS(`#metrics-status[data-state="on"][data-frames]`)))
	// Before the copy the agents' lease state shows on the map.
	pollPage(b, "the map marks the six agents alive", `(() => {
		const n = document.querySelectorAll('#topomap g.node[data-agent="alive"]').length;
		return n === 6 ? String(n) : '';
	})()`, time.Minute)

	// The rule is in force and nothing fires yet.
	b.within(time.Minute, "the alerts panel shows the rule, nothing firing",
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#alerts[data-rules="1"][data-firing="0"] tr[data-rule=%q]`, rule))))

	// 300 MiB at 60 Mbit/s: about 40 s on the wire, while the checks
	// below take seconds (11 s on a quiet machine): long enough to watch
	// the rule fire beside other tests on a busy one. The test mostly
	// waits meanwhile, beside the others (t.Parallel).
	cp := startLP(t, runOpts{timeout: 4 * time.Minute}, "testbed", "exec", "--name", tb.name, "a1", "--",
		lpBin, "cp", "--json", "--rate", "60M", "--reserve", "300M", "--controller", c.sock, "--controller-token-file", userTok,
		src, "lp://198.18.2.1:7070/data.bin")
	started := time.Now()

	// The transfer as the API has it: its id and its reservation's path.
	var tr struct {
		ID          string `json:"id"`
		Reservation string `json:"reservation"`
	}
	if !waitFor(time.Minute, func() bool {
		var list struct {
			Transfers []struct {
				ID          string `json:"id"`
				Reservation string `json:"reservation"`
				State       string `json:"state"`
			} `json:"transfers"`
		}
		if c.getJSON(c.adminTok, "/api/v1/transfers", &list) != nil {
			return false
		}
		for _, x := range list.Transfers {
			if x.State == "running" && x.Reservation != "" {
				tr.ID, tr.Reservation = x.ID, x.Reservation
				return true
			}
		}
		return cp.Exited()
	}) || tr.ID == "" {
		t.Fatalf("no running transfer with a reservation registered:\n%s%s", cp.out.String(), cp.err.String())
	}
	var resv struct {
		Reservation struct {
			ID   string `json:"id"`
			Path []struct {
				Link string `json:"link"`
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"path"`
		} `json:"reservation"`
	}
	if err := c.getJSON(c.adminTok, "/api/v1/reservations/"+tr.Reservation, &resv); err != nil {
		t.Fatalf("read reservation %s: %v", tr.Reservation, err)
	}
	res := resv.Reservation
	link := ""
	for _, h := range res.Path {
		if h.From == "ra" && h.To == "rb" {
			link = h.Link
		}
	}
	if link != "wan" && link != "dedicated" {
		t.Fatalf("reservation %s's path %+v does not cross ra → rb on wan or dedicated", res.ID, res.Path)
	}
	t.Logf("transfer %s, reservation %s via %s (registered %.1f s after cp started)", tr.ID, res.ID, link, time.Since(started).Seconds())

	// The map's line for ra → rb on that link shows the measured rate (over
	// 1 Mbit/s: the copy's, not the agents' few kbit/s or the odd control
	// packet).
	lineSel := fmt.Sprintf(`#topomap line.dir[data-link=%q][data-from="ra"]`, link)
	var line struct {
		Bps, Reserved, Level, Colour, Title string
	}
	got := pollPage(b, "the map shows "+link+" ra → rb in use", fmt.Sprintf(`(() => {
		const l = document.querySelector(%q);
		if (!l || !(Number(l.dataset.bps) > 1e6) || l.dataset.level === 'idle') return '';
		return JSON.stringify({bps: l.dataset.bps, reserved: l.dataset.reservedBps, level: l.dataset.level,
			colour: l.getAttribute('stroke'), title: l.querySelector('title').textContent});
	})()`, lineSel), time.Minute)
	if err := json.Unmarshal([]byte(got), &line); err != nil {
		t.Fatal(err)
	}
	t.Logf("map: %s", line.Title)
	if line.Colour == "" || line.Colour == "#8c959f" {
		t.Errorf("the line for %s ra → rb is coloured %q while it carries %s bit/s: want a colour other than idle", link, line.Colour, line.Bps)
	}

	// That direction's chart receives a live point every second.
	chartSel := fmt.Sprintf(`#link-charts figure.link-chart[data-link=%q][data-from="ra"] .plot`, link)
	pts := pollPage(b, "the "+link+" ra → rb chart receives live points", fmt.Sprintf(`(() => {
		const p = document.querySelector(%q);
		return p && Number(p.dataset.livePoints) >= 4 ? p.dataset.livePoints + '/' + p.dataset.points : '';
	})()`, chartSel), time.Minute)
	t.Logf("link chart: %s live/total points", pts)

	// The charts in use come first; the idle ones are collapsed.
	charts := pollPage(b, "the "+link+" ra → rb chart is in use and first, idle ones collapsed", fmt.Sprintf(`(() => {
		const figs = [...document.querySelectorAll('#link-charts figure.link-chart')];
		const f = document.querySelector(%q).closest('figure');
		const busy = figs.filter((x) => x.dataset.busy === 'true');
		const shownIdle = figs.filter((x) => x.dataset.busy !== 'true' && x.offsetParent !== null);
		if (f.dataset.busy !== 'true' || f.offsetParent === null || figs.indexOf(f) >= busy.length || shownIdle.length > 0) return '';
		if (figs.length === busy.length) return '';
		return busy.length + ' in use, ' + (figs.length - busy.length) + ' idle collapsed';
	})()`, chartSel), time.Minute)
	t.Logf("link charts: %s", charts)

	// Clicking the line selects its chart.
	b.do("click the map's line", chromedp.Click(chromedp.CSS(lineSel)),
		chromedp.WaitReady(chromedp.CSS(fmt.Sprintf(`#link-charts figure.link-chart.selected[data-link=%q][data-from="ra"]`, link))))

	// The transfer is listed, its page open with a throughput chart that
	// grows, and its streams' TCP state.
	b.within(time.Minute, "the transfer is listed and its page open",
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#transfers tr[data-id=%q]`, tr.ID))),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#transfer-page[data-id=%q] #transfer-chart`, tr.ID))))
	count := func() int {
		return webuiRun(b, "count the transfer chart's points", chromedp.Evaluate[int](
			`Number(document.getElementById('transfer-chart').dataset.livePoints)`))
	}
	n0 := count()
	pollPage(b, "the transfer's chart grows", fmt.Sprintf(`(() => {
		const n = Number(document.getElementById('transfer-chart').dataset.livePoints);
		return n >= %d && n >= 3 ? String(n) : '';
	})()`, n0+2), time.Minute)
	streams := pollPage(b, "the transfer's streams show their TCP state", `(() => {
		const t = document.getElementById('transfer-streams');
		const row = t && t.querySelector('tbody tr[data-stream]');
		return row && /ms/.test(row.cells[1].textContent) ? row.textContent : '';
	})()`, time.Minute)
	t.Logf("first stream: %s", streams)
	streamCharts := pollPage(b, "the transfer's streams' RTT and cwnd are charted", `(() => {
		const r = document.getElementById('stream-rtt-chart');
		const c = document.getElementById('stream-cwnd-chart');
		if (!r || !c || !(Number(r.dataset.streams) >= 1) || !(Number(r.dataset.points) >= 2) || !(Number(c.dataset.points) >= 2)) return '';
		return r.dataset.streams + ' streams, ' + r.dataset.points + ' RTT and ' + c.dataset.points + ' cwnd instants';
	})()`, time.Minute)
	t.Logf("stream charts: %s", streamCharts)
	if p := b.attr("#transfer-reservation", "data-path"); !strings.Contains(p, link) {
		t.Errorf("the transfer page's reservation path is %q, want it through %s", p, link)
	}

	// The rule fires: the map marks the direction the copy crosses (and not
	// its twin), the panel lists it firing, the transfer's page among the
	// alerts on its path.
	marked := pollPage(b, "the map marks "+link+" ra → rb with the firing rule", fmt.Sprintf(`(() => {
		const l = document.querySelector(%q);
		const twin = document.querySelector(%q);
		if (!l || !(l.dataset.alerts || '').split(' ').includes(%q)) return '';
		return JSON.stringify({title: l.querySelector('title').textContent, twin: twin.dataset.alerts,
			halo: getComputedStyle(l.previousElementSibling).display});
	})()`, lineSel, fmt.Sprintf(`#topomap line.dir[data-link=%q][data-from="rb"]`, link), rule), time.Minute)
	var mark struct{ Title, Twin, Halo string }
	if err := json.Unmarshal([]byte(marked), &mark); err != nil {
		t.Fatal(err)
	}
	t.Logf("map, firing: %s (%.1f s after cp started)", mark.Title, time.Since(started).Seconds())
	if !strings.Contains(mark.Title, "firing: "+rule) || mark.Halo == "none" || mark.Twin != "" {
		t.Errorf("the map's mark of the firing rule: tooltip %q, outline display %q, the twin rb → ra marked %q: want the rule named, an outline, the twin unmarked",
			mark.Title, mark.Halo, mark.Twin)
	}
	b.within(time.Minute, "the alerts panel lists the rule firing",
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#alerts li.to-firing[data-rule=%q]`, rule))))
	b.within(time.Minute, "the transfer's page lists the rule among the alerts on its path",
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#transfer-alerts li[data-rule=%q][data-to="firing"]`, rule))))

	shot := *dashboardScreenshot
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "dashboard.png")
	}
	// A few more seconds of the copy make a screenshot worth looking at.
	pollPage(b, "ten points on the transfer's chart, or the copy over", `(() => {
		const n = Number(document.getElementById('transfer-chart').dataset.livePoints);
		return n >= 10 || document.getElementById('transfer-page').dataset.state !== 'running' ? String(n) : '';
	})()`, time.Minute)
	t.Logf("screenshot %.1f s after cp started (cp running: %v)", time.Since(started).Seconds(), !cp.Exited())
	png := webuiRun(b, "screenshot", chromedp.FullScreenshot(100))
	for _, f := range []string{shot, artifactPath("dashboard.png")} {
		if f == "" {
			continue
		}
		if err := os.WriteFile(f, png, 0o644); err != nil {
			t.Errorf("write the screenshot: %v", err)
		} else {
			t.Logf("screenshot: %s", f)
		}
	}

	r := cp.Wait()
	mustSucceed(t, "cp --reserve 300M", r)
	sum := parseReserveSummary(t, r.stdout)
	t.Logf("cp: %.0f Mbit/s, %.1f s, bytes by path %v, reservation %s via %s", sum.ThroughputBps/1e6, sum.Seconds, sum.BytesByPath,
		sum.Reservation, sum.ReservationPath)
	b.within(time.Minute, "the transfer is listed as succeeded once it ends",
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#transfers tr[data-id=%q][data-state="succeeded"]`, tr.ID))))

	// The page's last update (the transfer succeeded) has rendered: one
	// more frame and task of the page's, and one more round trip, bring
	// in anything it wrote to the console or threw.
	webuiRun(b, "the page's next frame", chromedp.Evaluate[bool](
		`new Promise((r) => requestAnimationFrame(() => setTimeout(() => r(true))))`, chromedp.EvalAwaitPromise))
	for _, p := range b.problems.list() {
		t.Errorf("browser: %s", p)
	}
}

// artifactPath is FILE in $LIGHTPATH_ARTIFACTS, or "" when that is not set.
func artifactPath(file string) string {
	dir := os.Getenv("LIGHTPATH_ARTIFACTS")
	if dir == "" {
		return ""
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	return filepath.Join(dir, file)
}
