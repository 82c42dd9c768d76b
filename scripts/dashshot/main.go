// Command dashshot photographs the controller's dashboard while a transfer
// runs, for `make demo`: it signs in to the web UI in headless Chromium
// with a token, waits until the controller lists a running transfer (of
// cp) or an ACTIVE job of the transfer service that has moved bytes, and
// the page has shown it for a few seconds of live data, and saves a
// screenshot of the whole page.
//
//	dashshot -url http://127.0.0.1:PORT -token-file admin.token -out dashboard.png [-wait 4s] [-timeout 2m]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	url := flag.String("url", "", "the controller's http://HOST:PORT")
	tokenFile := flag.String("token-file", "", "a token the page signs in with")
	out := flag.String("out", "dashboard.png", "the PNG to write")
	wait := flag.Duration("wait", 4*time.Second, "how long to let the page show the running transfer or job before the shot")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	if err := run(*url, *tokenFile, *out, *wait, *timeout); err != nil {
		fmt.Fprintf(os.Stderr, "dashshot: %v\n", err)
		os.Exit(1)
	}
}

func chromium() string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// running reports whether the controller lists a running transfer.
func running(url, token string) bool {
	// A copy recorded by cp (a running transfer) or a job of the transfer
	// service moving its files.
	var l struct {
		Transfers []struct {
			State string `json:"state"`
		} `json:"transfers"`
		Jobs []struct {
			State     string `json:"state"`
			BytesDone int64  `json:"bytes_done"`
		} `json:"jobs"`
	}
	for _, path := range []string{"/api/v1/transfers?limit=5", "/api/v1/jobs?limit=5"} {
		req, _ := http.NewRequest("GET", url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if err != nil {
			continue
		}
	}
	for _, t := range l.Transfers {
		if t.State == "running" {
			return true
		}
	}
	for _, j := range l.Jobs {
		if j.State == "ACTIVE" && j.BytesDone > 0 {
			return true
		}
	}
	return false
}

func run(url, tokenFile, out string, wait, timeout time.Duration) error {
	if url == "" || tokenFile == "" {
		return errors.New("-url and -token-file are required")
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	token := strings.TrimSpace(string(b))
	chrome := chromium()
	if chrome == "" {
		return errors.New("no Chromium on PATH (scripts/deps.sh installs Debian's chromium)")
	}
	dir, err := os.MkdirTemp("", "dashshot")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.WindowSize(1500, 1100),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(dir))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	if err := chromedp.Do(bctx, chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("sign-in"))); err != nil {
		return fmt.Errorf("sign in: %w", err)
	}
	for !running(url, token) {
		select {
		case <-ctx.Done():
			return errors.New("no transfer ran before the timeout")
		case <-time.After(200 * time.Millisecond):
		}
	}
	time.Sleep(wait)
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return os.WriteFile(out, png, 0o644)
}
