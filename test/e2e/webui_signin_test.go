//go:build linux

package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var signInLinkRE = regexp.MustCompile(`url="?(http://[^"\s]+/#/signin\?code=[0-9a-f]+)`)

// TestWebUISignIn checks the dashboard's door in a real Chromium: the
// sign-in page says where the admin's token is (the file, named by the
// controller) and how others get one; the one-time link the controller
// logs at start signs in without a token, and a second use of it is
// refused with a message that says why.
func TestWebUISignIn(t *testing.T) {
	t.Parallel()
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no Chromium binary (chromium, chromium-browser or google-chrome) on PATH: scripts/deps.sh installs Debian's chromium")
	}
	ctl := startWebUIController(t)
	var link string
	if !waitFor(2*time.Minute, func() bool {
		m := signInLinkRE.FindStringSubmatch(ctl.log())
		if m != nil {
			link = m[1]
		}
		return m != nil
	}) {
		t.Fatalf("the controller logged no sign-in link:\n%s", ctl.log())
	}
	if !strings.HasPrefix(link, ctl.url+"/#/signin?code=") {
		t.Errorf("sign-in link %s is not on the controller's address %s", link, ctl.url)
	}

	b := dashboardBrowser(t, chrome, 2*time.Minute)
	problems := b.problems

	b.do("load the page", chromedp.Navigate(ctl.url+"/"), chromedp.WaitVisible(chromedp.ID("signin-help")),
		chromedp.WaitVisible(chromedp.CSS("#admin-token-file code")))
	help := b.text("#signin-help")
	for _, want := range []string{"--admin-token-file", "admin.token", "one-time sign-in link", "lightpath user token create NAME"} {
		if !strings.Contains(help, want) {
			t.Errorf("the sign-in page does not say %q:\n%s", want, help)
		}
	}

	b.do("open the sign-in link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("app")))
	if who := b.text("#whoami"); !strings.Contains(who, "admin") {
		t.Errorf("signed in by the link as %q, want the admin", who)
	}
	if hash := webuiRun(b, "read the address", chromedp.Evaluate[string]("location.hash")); hash != "" {
		t.Errorf("the code stayed in the address bar: %q", hash)
	}
	if !webuiRun(b, "the help is hidden", chromedp.Evaluate[bool]("document.getElementById('signin-help').hidden")) {
		t.Errorf("the sign-in help is still shown when signed in")
	}

	// Signed out, the same link does not sign in again.
	problems.expectFailedLoad("/api/v1/signin", http.StatusUnauthorized)
	b.do("sign out", chromedp.Click(chromedp.ID("sign-out")), chromedp.WaitNotVisible(chromedp.ID("app")))
	b.do("open the link again", chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID("auth-message")))
	if msg := b.text("#auth-message"); !strings.Contains(msg, "used already or has expired") {
		t.Errorf("a used link: message %q", msg)
	}
	if !webuiRun(b, "still signed out", chromedp.Evaluate[bool]("document.getElementById('app').hidden")) {
		t.Errorf("a used link signed in")
	}
	for _, p := range problems.list() {
		t.Errorf("browser: %s", p)
	}
}
