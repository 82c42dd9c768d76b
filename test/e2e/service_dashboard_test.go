//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestServiceDashboard watches a job of the transfer service on the web
// UI: the jobs panel lists it with its state and reason, the aggregates
// show throughput summed over the running jobs, per site out and in, and
// the bytes moved, the job's page shows both node pairs and the
// optimizer's decisions; once it ends the panel says SUCCEEDED. The page
// writes no console error and throws nothing meanwhile.
func TestServiceDashboard(t *testing.T) {
	t.Parallel()
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no Chromium binary (chromium, chromium-browser or google-chrome) on PATH: scripts/deps.sh installs Debian's chromium")
	}
	// The pushes to the destination nodes go through a gate that, until
	// the page has shown the job running, passes the first 16 MiB (half
	// the dataset: blocks done, so a throughput to show) at the nodes'
	// pace, then crawls: what is left cannot arrive before the page's
	// wait gives up (90 s), however slowly the browser renders beside a
	// busy core. Then the job ends in seconds.
	gate := newPushGate(16 << 20)
	s := startSvc(t, svcOpts{rate: "40M", advertise: gate.advertise(t)})
	files := makeDataset(t, s.srcRoot, 2)
	id := s.submit("siteA:run1", "siteB:in").Job.ID

	tok, err := os.ReadFile(s.admin)
	if err != nil {
		t.Fatal(err)
	}
	b := dashboardBrowser(t, chrome, 3*time.Minute)
	b.do("sign in as admin", chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), strings.TrimSpace(string(tok))), chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("app")))

	// While it runs: listed ACTIVE with its reason, the aggregates moving,
	// both node pairs on its page (the page shows them once its detail is
	// loaded again after the first claims, which the aggregates can beat).
	raw := pollPage(b, "the job running on the jobs panel", `(() => {
		const tr = document.querySelector('#jobs tbody tr[data-id="`+id+`"]');
		const bps = Number(document.querySelector('#jobs-throughput')?.dataset.bps || 0);
		const pairs = document.querySelectorAll('#job-pairs tbody tr').length;
		if (!tr || tr.dataset.state !== 'ACTIVE' || bps <= 0 || pairs < 2) return '';
		const sites = [...document.querySelectorAll('#jobs-totals .site')].map((e) => e.dataset.site + ': ' + e.textContent);
		return JSON.stringify({reason: tr.querySelector('.reason')?.textContent || '', bps, sites, pairs,
			moved: Number(document.querySelector('#jobs-moved').dataset.bytes)});
	})()`, 90*time.Second)
	var live struct {
		Reason string   `json:"reason"`
		Bps    float64  `json:"bps"`
		Sites  []string `json:"sites"`
		Pairs  int      `json:"pairs"`
		Moved  int64    `json:"moved"`
	}
	if err := json.Unmarshal([]byte(raw), &live); err != nil {
		t.Fatal(err)
	}
	gate.open()
	t.Logf("while running: %+v", live)
	if !strings.HasPrefix(live.Reason, "moving:") {
		t.Errorf("the running job's reason on the panel: %q", live.Reason)
	}
	if len(live.Sites) != 2 || !strings.Contains(live.Sites[0]+live.Sites[1], "out") {
		t.Errorf("per-site aggregates: %v", live.Sites)
	}
	// live.Pairs is at least 2 (the poll waits for it); a third pair
	// appears when a node's lease lapses on a busy machine and another
	// node takes on its task.

	// At the end: SUCCEEDED, with the optimizer's decisions on its page.
	pollPage(b, "the job succeeded on the panel", `(() => {
		const tr = document.querySelector('#jobs tbody tr[data-id="`+id+`"]');
		return tr && tr.dataset.state === 'SUCCEEDED' && document.querySelectorAll('#job-decisions li').length > 0 ? 'yes' : '';
	})()`, 2*time.Minute)
	s.sameDataset(files, "in")
	for _, p := range b.problems.list() {
		t.Errorf("browser: %s", p)
	}
}
