//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/lightpath/lightpath/internal/units"
)

var webuiScreenshot = flag.String("webui.screenshot", "", "write a screenshot of the web UI at the end of TestWebUI to this PNG file")

// chromiumPath finds a Chromium or Chrome binary (scripts/deps.sh installs
// Debian's chromium).
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// webuiController is a running `lightpath controller` on a loopback port
// with a fresh SQLite database and the two-site topology.
type webuiController struct {
	url   string // http://127.0.0.1:PORT
	token string // the admin's

	mu     sync.Mutex
	stderr bytes.Buffer
}

func (c *webuiController) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

var listenAddrRE = regexp.MustCompile(`addr="?([^"\s]+)`)

// startWebUIController starts the real binary and waits for the line it
// logs when it listens. It is stopped (SIGTERM) when the test ends.
func startWebUIController(t *testing.T) *webuiController {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin.token")
	cmd := exec.Command(lpBin, "controller", "--listen", "127.0.0.1:0",
		"--db", "sqlite:"+filepath.Join(dir, "controller.db"),
		"--topology", repoFile("examples/two-site.yaml"),
		"--admin-token-file", tokenFile)
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start lightpath controller: %v", err)
	}
	c := &webuiController{}
	addrs := make(chan string, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.stderr.WriteString(line + "\n")
			c.mu.Unlock()
			if strings.Contains(line, "listening") {
				if m := listenAddrRE.FindStringSubmatch(line); m != nil && !strings.HasPrefix(m[1], "unix:") {
					select {
					case addrs <- m[1]:
					default:
					}
				}
			}
		}
	}()
	exited := make(chan error, 1)
	go func() {
		<-done
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("controller stderr:\n%s", c.log())
		}
	})
	select {
	case addr := <-addrs:
		c.url = "http://" + addr
	case err := <-exited:
		t.Fatalf("lightpath controller exited before listening (%v):\n%s", err, c.log())
	case <-time.After(2 * time.Minute):
		t.Fatalf("lightpath controller did not log a listening line in 2 min:\n%s", c.log())
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatalf("read the admin token: %v", err)
	}
	c.token = strings.TrimSpace(string(b))
	return c
}

// call makes an API request as the admin, as a second client beside the
// browser would.
func (c *webuiController) call(t *testing.T, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

// browserProblems collects what the page reported as wrong: console errors
// and assertions, uncaught exceptions, and the browser's own error log
// (failed loads). allow says which log entries the test provoked on purpose.
type browserProblems struct {
	mu       sync.Mutex
	problems []string
	allow    []func(e *cdplog.Entry) bool
}

func (b *browserProblems) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				if a.Value != nil {
					args = append(args, string(a.Value))
				} else {
					args = append(args, a.Description)
				}
			}
			b.problems = append(b.problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		b.problems = append(b.problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level != cdplog.EntryLevelError {
			return
		}
		for _, ok := range b.allow {
			if ok(ev.Entry) {
				return
			}
		}
		b.problems = append(b.problems, fmt.Sprintf("log (%s) %s: %s", ev.Entry.Source, ev.Entry.URL, ev.Entry.Text))
	}
}

// expectFailedLoad allows one kind of failed request the test provokes on
// purpose (a refused token, a capacity refusal): the browser logs those.
func (b *browserProblems) expectFailedLoad(path string, status int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allow = append(b.allow, func(e *cdplog.Entry) bool {
		return e.Source == cdplog.EntrySourceNetwork && strings.Contains(e.URL, path) &&
			strings.Contains(e.Text, fmt.Sprintf("status of %d", status))
	})
}

func (b *browserProblems) list() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// TestWebUI drives the controller's web UI in headless Chromium against the
// real controller, as a person would: a refused token, then the admin's; a
// rate in bytes refused at the field; the earliest slot found and booked,
// then seen in the timeline (on each of its three link directions) and in
// "My reservations"; a capacity refusal whose earliest alternative is taken
// with one click; a booking made by another client arriving over the event
// stream; the timeline over 7 days; everything cancelled from the list; a
// user without operator controls whose revoked token is told. Through all
// of it the page writes no console error and throws nothing (the failed
// loads the test provokes on purpose aside).
func TestWebUI(t *testing.T) {
	t.Parallel()
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no Chromium binary (chromium, chromium-browser or google-chrome) on PATH: scripts/deps.sh installs Debian's chromium")
	}
	ctl := startWebUIController(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.WindowSize(1400, 1100),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	problems := &browserProblems{}
	if err := chromedp.Listen(ctx, problems.listen); err != nil {
		t.Fatalf("start Chromium (%s): %v", chrome, err)
	}
	b := &webuiBrowser{t: t, ctx: ctx, problems: problems}

	b.do("load the page", chromedp.Navigate(ctl.url+"/"), chromedp.WaitVisible(chromedp.ID("token")))

	// A wrong token is refused with a message that says so.
	problems.expectFailedLoad("/api/v1/whoami", http.StatusUnauthorized)
	b.do("sign in with a wrong token",
		chromedp.SendKeys(chromedp.ID("token"), "not-a-token"),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("auth-message")))
	if msg := b.text("#auth-message"); !strings.Contains(msg, "refused") {
		t.Errorf("a wrong token: message %q does not say it was refused", msg)
	}

	b.do("sign in as admin",
		clearInput("token"),
		chromedp.SendKeys(chromedp.ID("token"), ctl.token),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("app")),
		chromedp.WaitReady(chromedp.CSS(`#from option[value="a1"]`)))
	if who := b.text("#whoami"); !strings.Contains(who, "admin") {
		t.Errorf("whoami shows %q, want the admin", who)
	}
	b.do("the event stream connects",
		chromedp.WaitReady(chromedp.CSS(`#live-status[data-state="on"]`)))

	t.Run("rates parse as on the command line", func(t *testing.T) {
		in := []string{"500M", "1G", "10Gbps", "10gbit", "1.5 Gbit/s", "100kbps", ".5k", "1.5", "1000",
			"18E", "10GB/s", "10Q", "-5M", "1e9", "", "10Gi", "19E"}
		js := fmt.Sprintf(`import('./js/units.js').then(m => %s.map(s => {
			try { return String(m.parseRateExact(s)); } catch (e) { return 'error'; } }))`, mustJSON(t, in))
		got := webuiRun(b, "parse rates in the page", chromedp.Evaluate[[]string](js, chromedp.EvalAwaitPromise))
		for i, s := range in {
			want := "error"
			if v, err := units.ParseRate(s); err == nil {
				want = fmt.Sprint(v)
			}
			if got[i] != want {
				t.Errorf("parseRate(%q) = %s in the page, units.ParseRate says %s", s, got[i], want)
			}
		}
	})

	// A rate in bytes is refused in the page, at the field, before any call.
	b.do("reserve 10GB/s",
		chromedp.SendKeys(chromedp.ID("bandwidth"), "10GB/s"),
		chromedp.Click(chromedp.ID("reserve")),
		chromedp.WaitReady(chromedp.CSS(`#bandwidth[aria-invalid="true"]`)))
	if msg := b.text("#form-result"); !strings.Contains(msg, "B means bytes") {
		t.Errorf("a rate in bytes: the form says %q", msg)
	}

	// Find the earliest slot for 500 Mbit/s a1 → b1 for an hour, then book it.
	b.do("find the earliest slot",
		chromedp.SetValue(chromedp.ID("from"), "a1"),
		chromedp.SetValue(chromedp.ID("to"), "b1"),
		clearInput("bandwidth"),
		chromedp.SendKeys(chromedp.ID("bandwidth"), "500M"),
		chromedp.SetValue(chromedp.ID("duration"), "1h"),
		chromedp.Click(chromedp.ID("find-earliest")),
		chromedp.WaitVisible(chromedp.ID("slot")))
	if s := b.text("#slot"); !strings.Contains(s, "algorithm:") || !strings.Contains(s, "500 Mbit/s") {
		t.Errorf("the earliest slot shows %q, want the bandwidth and the algorithm", s)
	}
	if start := webuiRun(b, "read the start", chromedp.Value(chromedp.ID("start"))); start == "" {
		t.Errorf("Find earliest slot left the start field empty")
	}
	b.do("reserve", chromedp.Click(chromedp.ID("reserve")), chromedp.WaitVisible(chromedp.ID("booked")))
	first := b.attr("#booked", "data-id")
	if first == "" {
		t.Fatalf("no reservation id shown after booking: %q", b.text("#form-result"))
	}
	barSel := fmt.Sprintf(`#timeline li.booking[data-id=%q]`, first)
	rowSel := fmt.Sprintf(`#my-reservations tr[data-id=%q]`, first)
	b.do("the booking appears in the timeline and in my reservations",
		chromedp.WaitVisible(chromedp.CSS(barSel)),
		chromedp.WaitVisible(chromedp.CSS(rowSel)))
	nbars := webuiRun(b, "count the booking's bars", chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, barSel)))
	if nbars != 3 {
		t.Errorf("the booking shows on %d link directions, want 3 (a1→ra, ra→rb, rb→b1)", nbars)
	}
	if title := b.attr(barSel, "title"); !strings.Contains(title, "admin") || !strings.Contains(title, "500 Mbit/s") || !strings.Contains(title, "Z") {
		t.Errorf("the timeline bar's title %q does not say who, how much and when (UTC)", title)
	}
	if row := b.text(rowSel); !strings.Contains(row, "500 Mbit/s") || !strings.Contains(row, "a1 → b1") ||
		!(strings.Contains(row, "RESERVED") || strings.Contains(row, "ACTIVE")) {
		t.Errorf("my reservations shows %q, want 500 Mbit/s a1 → b1, reserved or active", row)
	}
	if title := b.attr(rowSel+" span.window", "title"); !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z – `).MatchString(title) {
		t.Errorf("a window's title is %q, want UTC ISO strings", title)
	}

	// Too much for what is left: the refusal offers alternatives, and
	// taking the earliest books it. The first booking took 500M of the
	// dedicated link's 1.8G reservable (circuits first); 1.2G fits beside
	// it once, and then on no path (wan reserves at most 0.9G).
	problems.expectFailedLoad("/api/v1/reservations", http.StatusConflict)
	book := func(bw string) {
		b.do("book "+bw+" a2 → b2",
			chromedp.SetValue(chromedp.ID("from"), "a2"),
			chromedp.SetValue(chromedp.ID("to"), "b2"),
			chromedp.SetValue(chromedp.ID("bandwidth"), bw),
			clearInput("start"),
			chromedp.SetValue(chromedp.ID("duration"), "2h"),
			chromedp.Click(chromedp.ID("reserve")))
	}
	book("1.2G")
	b.do("the first 1.2G fits", chromedp.WaitVisible(chromedp.ID("booked")))
	second := b.attr("#booked", "data-id")
	book("1.2G")
	b.do("the second 1.2G does not", chromedp.WaitVisible(chromedp.ID("capacity")),
		chromedp.WaitVisible(chromedp.ID("take-earliest")))
	b.do("take the earliest alternative", chromedp.Click(chromedp.ID("take-earliest")),
		chromedp.WaitVisible(chromedp.ID("booked")))
	third := b.attr("#booked", "data-id")
	if third == "" || third == second {
		t.Fatalf("taking the alternative booked %q (the first was %q)", third, second)
	}
	var r struct {
		Reservation struct {
			Start     time.Time `json:"start"`
			Bandwidth uint64    `json:"bandwidth_bps"`
		} `json:"reservation"`
	}
	ctl.call(t, "GET", "/api/v1/reservations/"+third, nil, &r)
	if r.Reservation.Bandwidth != 1.2e9 || time.Until(r.Reservation.Start) < time.Hour {
		t.Errorf("the alternative taken is %d bit/s from %s, want 1.2 Gbit/s after the first ends", r.Reservation.Bandwidth, r.Reservation.Start)
	}

	// A booking made by another client arrives over the event stream: the
	// page's own poll is a minute away.
	var other struct {
		Reservation struct {
			ID string `json:"id"`
		} `json:"reservation"`
	}
	ctl.call(t, "POST", "/api/v1/reservations", map[string]any{
		"from": "b2", "to": "a2", "bandwidth_bps": 100e6, "duration": "30m",
	}, &other)
	b.do("a booking from another client appears without a reload",
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#my-reservations tr[data-id=%q]`, other.Reservation.ID))),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#timeline li.booking[data-id=%q]`, other.Reservation.ID))))

	// The range selector reloads the timeline over the next 7 days.
	b.do("show the next 7 days", chromedp.SetValue(chromedp.ID("range"), "168h"))
	webuiRun(b, "the timeline spans 7 days", chromedp.Poll[bool](`(() => {
		const d = document.getElementById('timeline').dataset;
		return Date.parse(d.to) - Date.parse(d.from) === 7 * 24 * 3600 * 1000;
	})()`, chromedp.WithPollingTimeout(2*time.Minute)))
	b.do("the alternative taken shows over 7 days",
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#timeline li.booking[data-id=%q]`, third))))

	if *webuiScreenshot != "" {
		png := webuiRun(b, "screenshot", chromedp.FullScreenshot(100))
		if err := os.WriteFile(*webuiScreenshot, png, 0o644); err != nil {
			t.Error(err)
		}
	}

	// Cancel every one from the list: each leaves the list (live ones are
	// shown) and the timeline.
	for _, id := range []string{first, second, third, other.Reservation.ID} {
		row := fmt.Sprintf(`#my-reservations tr[data-id=%q]`, id)
		b.do("cancel "+id,
			chromedp.Click(chromedp.CSS(row+" button.cancel")),
			chromedp.WaitNotPresent(chromedp.CSS(row)),
			chromedp.WaitNotPresent(chromedp.CSS(fmt.Sprintf(`#timeline li.booking[data-id=%q]`, id))))
		var got struct {
			Reservation struct {
				State string `json:"state"`
			} `json:"reservation"`
		}
		ctl.call(t, "GET", "/api/v1/reservations/"+id, nil, &got)
		if got.Reservation.State != "CANCELLED" {
			t.Errorf("%s is %s after Cancel, want CANCELLED", id, got.Reservation.State)
		}
	}
	b.do("the list is empty", chromedp.WaitVisible(chromedp.CSS("#my-reservations tr.empty")))

	// A user signs in and sees no operator controls; when their token is
	// revoked, the next call says so and the page asks for a new one.
	ctl.call(t, "POST", "/api/v1/users", map[string]any{"name": "alice", "role": "user"}, nil)
	var tok struct {
		ID     string `json:"id"`
		Secret string `json:"token"`
	}
	ctl.call(t, "POST", "/api/v1/users/alice/tokens", map[string]any{}, &tok)
	b.do("sign in as alice",
		chromedp.Click(chromedp.ID("sign-out")),
		chromedp.WaitNotVisible(chromedp.ID("app")),
		chromedp.SendKeys(chromedp.ID("token"), tok.Secret),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("app")),
		chromedp.WaitNotVisible(chromedp.ID("everyone-label")),
		chromedp.WaitVisible(chromedp.CSS("#my-reservations tr.empty")))
	if who := b.text("#whoami"); !strings.Contains(who, "alice (user)") {
		t.Errorf("whoami shows %q, want alice (user)", who)
	}
	ctl.call(t, "DELETE", "/api/v1/tokens/"+tok.ID, nil, nil)
	problems.expectFailedLoad("/api/v1/timeline", http.StatusUnauthorized)
	problems.expectFailedLoad("/api/v1/whoami", http.StatusUnauthorized)
	problems.expectFailedLoad("/api/v1/events", http.StatusUnauthorized)
	// The live metrics stream ends with the token and may reconnect once
	// before the page notices.
	problems.expectFailedLoad("/api/v1/metrics/live", http.StatusUnauthorized)
	b.do("a revoked token is told",
		chromedp.Click(chromedp.ID("timeline-refresh")),
		chromedp.WaitVisible(chromedp.ID("auth-message")),
		chromedp.WaitNotVisible(chromedp.ID("app")))
	if msg := b.text("#auth-message"); !strings.Contains(msg, "no longer accepted") {
		t.Errorf("after the token was revoked the page says %q", msg)
	}

	// Let late events and refreshes land before judging the console.
	b.do("settle", chromedp.Sleep(500*time.Millisecond))
	for _, p := range problems.list() {
		t.Errorf("browser: %s", p)
	}
}

// webuiBrowser is the test's tab: each step fails the test with the page's
// text and what the browser reported so far.
type webuiBrowser struct {
	t        *testing.T
	ctx      context.Context
	problems *browserProblems
}

func (b *webuiBrowser) fail(what string, err error) {
	b.t.Helper()
	body, _ := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("body")))
	b.t.Fatalf("%s: %v\npage text:\n%s\nbrowser problems: %q", what, err, body, b.problems.list())
}

// do runs steps, each group bounded: chromedp's waits poll until their
// context ends. The bound only stops a hang: a busy machine's browser may
// take its time.
func (b *webuiBrowser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.within(2*time.Minute, what, steps...)
}

// within is do with another bound.
func (b *webuiBrowser) within(d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail(what, err)
	}
}

func (b *webuiBrowser) text(sel string) string {
	b.t.Helper()
	return webuiRun(b, "read "+sel, chromedp.Text(chromedp.CSS(sel)))
}

func (b *webuiBrowser) attr(sel, name string) string {
	b.t.Helper()
	return webuiRun(b, "read "+sel+" "+name, chromedp.AttributeValue(chromedp.CSS(sel), name)).Value
}

// clearInput empties a form control as a person would, which chromedp's
// Clear does not (it resets the default value, not what was typed) and
// SetValue with "" cannot.
func clearInput(id string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(e => {
		e.value = '';
		e.dispatchEvent(new Event('input', {bubbles: true}));
	})(document.getElementById(%q))`, id))
}

func webuiRun[T any](b *webuiBrowser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.fail(what, err)
	}
	return v
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
