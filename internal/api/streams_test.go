package api_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
)

// bound is how long a test waits for something that should happen at
// once: generous, so a loaded machine does not fail it.
const bound = 30 * time.Second

// openStream opens path (an event or live stream) with token in the query,
// as EventSource does, and returns the response (200 or not).
func openStream(t *testing.T, base, path, token string) *http.Response {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	resp, err := http.Get(base + path + sep + "access_token=" + url.QueryEscape(token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// firstFrame reads up to the end of the first frame (a blank line).
func firstFrame(t *testing.T, br *bufio.Reader) {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read the first frame: %v", err)
		}
		if line == "\n" {
			return
		}
	}
}

// untilEnd reads the rest of a stream: it must end within bound.
func untilEnd(t *testing.T, what string, br *bufio.Reader) string {
	t.Helper()
	type result struct {
		s   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(br)
		ch <- result{string(b), err}
	}()
	select {
	case r := <-ch:
		if r.err != nil && !errors.Is(r.err, io.ErrUnexpectedEOF) {
			t.Logf("%s: read: %v", what, r.err)
		}
		return r.s
	case <-time.After(bound):
		t.Fatalf("%s: the stream is still open %s later", what, bound)
		return ""
	}
}

func (e *env) token(user, by, expiresIn string) apiv1.Token {
	e.t.Helper()
	var tok apiv1.Token
	if st, raw := e.do("POST", "/api/v1/users/"+user+"/tokens", by, apiv1.TokenRequest{ExpiresIn: expiresIn}, &tok); st != 201 {
		e.t.Fatalf("create token: %d %s", st, raw)
	}
	return tok
}

var streamPaths = []string{"/api/v1/events", "/api/v1/metrics/live?every=200ms"}

// TestStreamsEndWhenTheTokenIsRevoked: revoking the token an open event or
// live stream was opened with ends it, with a last frame saying why.
func TestStreamsEndWhenTheTokenIsRevoked(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	alice := e.user("alice", "user")
	for _, p := range streamPaths {
		t.Run(p, func(t *testing.T) {
			tok := e.token("alice", alice, "")
			resp := openStream(t, e.srv.URL, p, tok.Secret)
			if resp.StatusCode != 200 {
				t.Fatalf("open: %d", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			firstFrame(t, br)
			if st, raw := e.do("DELETE", "/api/v1/tokens/"+tok.ID, alice, nil, nil); st != 204 && st != 200 {
				t.Fatalf("revoke: %d %s", st, raw)
			}
			rest := untilEnd(t, p, br)
			if !strings.Contains(rest, "event: end\n") || !strings.Contains(rest, "was revoked") {
				t.Errorf("the stream ended without saying why: %q", rest)
			}
			if r := openStream(t, e.srv.URL, p, tok.Secret); r.StatusCode != 401 {
				t.Errorf("reopen with the revoked token: %d", r.StatusCode)
			}
		})
	}
}

// TestStreamsEndWhenTheUserIsRevoked: DELETE /api/v1/users/{name}/tokens
// revokes every token of the user at once and ends all their streams;
// another user's stream goes on.
func TestStreamsEndWhenTheUserIsRevoked(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	e.user("alice", "user")
	bob := e.user("bob", "user")
	var brs []*bufio.Reader
	for _, p := range streamPaths {
		resp := openStream(t, e.srv.URL, p, e.token("alice", e.admin, "").Secret)
		if resp.StatusCode != 200 {
			t.Fatalf("open %s: %d", p, resp.StatusCode)
		}
		br := bufio.NewReader(resp.Body)
		firstFrame(t, br)
		brs = append(brs, br)
	}
	bobLive := bufio.NewReader(openStream(t, e.srv.URL, streamPaths[1], bob).Body)
	firstFrame(t, bobLive)
	if st, raw := e.do("DELETE", "/api/v1/users/alice/tokens", bob, nil, nil); st != 403 {
		t.Errorf("bob revokes alice: %d %s", st, raw)
	}
	var out apiv1.TokenList
	if st, raw := e.do("DELETE", "/api/v1/users/alice/tokens", e.admin, nil, &out); st != 200 || len(out.Tokens) != 3 {
		t.Fatalf("revoke alice: %d %s", st, raw)
	}
	for i, br := range brs {
		if rest := untilEnd(t, streamPaths[i], br); !strings.Contains(rest, "event: end\n") || !strings.Contains(rest, "was revoked") {
			t.Errorf("%s ended without saying why: %q", streamPaths[i], rest)
		}
	}
	firstFrame(t, bobLive)
	if st, _ := e.do("DELETE", "/api/v1/users/nobody/tokens", e.admin, nil, nil); st != 404 {
		t.Errorf("revoke nobody: %d", st)
	}
}

// TestStreamsEndWhenTheTokenExpires: a stream opened with a token that
// expires ends when the controller's clock passes the expiry.
func TestStreamsEndWhenTheTokenExpires(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	alice := e.user("alice", "user")
	tok := e.token("alice", alice, "1h")
	var brs []*bufio.Reader
	for _, p := range streamPaths {
		resp := openStream(t, e.srv.URL, p, tok.Secret)
		if resp.StatusCode != 200 {
			t.Fatalf("open %s: %d", p, resp.StatusCode)
		}
		br := bufio.NewReader(resp.Body)
		firstFrame(t, br)
		brs = append(brs, br)
	}
	e.clk.Add(61 * time.Minute)
	for i, br := range brs {
		if rest := untilEnd(t, streamPaths[i], br); !strings.Contains(rest, "event: end\n") || !strings.Contains(rest, "expired") {
			t.Errorf("%s ended without saying why: %q", streamPaths[i], rest)
		}
	}
}

// TestTokenCannotOutliveItsParent: a token created with an expiring token
// expires no later than it; asking for more is refused (400, expires_in).
func TestTokenCannotOutliveItsParent(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	alice := e.user("alice", "user")
	short := e.token("alice", alice, "1h").Secret
	for _, in := range []string{"", "2h", "61m"} {
		st, raw := e.do("POST", "/api/v1/users/alice/tokens", short, apiv1.TokenRequest{ExpiresIn: in}, nil)
		if st != 400 {
			t.Errorf("expires_in %q with a 1h token: %d %s", in, st, raw)
			continue
		}
		if d := errorOf(t, raw); d.Field != "expires_in" || !strings.Contains(d.Message, "cannot create") {
			t.Errorf("expires_in %q: %+v", in, d)
		}
	}
	child := e.token("alice", short, "30m")
	if child.ExpiresAt.After(t0.Add(time.Hour)) {
		t.Errorf("the child expires at %s, after its parent", child.ExpiresAt)
	}
	// The admin's bootstrap token never expires: it mints freely.
	e.token("alice", e.admin, "")
}

// TestStreamsPerIdentity: one user gets DefaultMaxStreams open streams;
// the next is refused with 429 while another user still gets theirs, and
// closing one frees its slot.
func TestStreamsPerIdentity(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	alice := e.user("alice", "user")
	bob := e.user("bob", "user")
	var open []*http.Response
	for i := range api.DefaultMaxStreams {
		resp := openStream(t, e.srv.URL, streamPaths[i%2], alice)
		if resp.StatusCode != 200 {
			t.Fatalf("stream %d: %d", i+1, resp.StatusCode)
		}
		open = append(open, resp)
	}
	resp := openStream(t, e.srv.URL, streamPaths[0], alice)
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 {
		t.Fatalf("stream %d: %d %s", api.DefaultMaxStreams+1, resp.StatusCode, raw)
	}
	checkResponse(t, "GET", "/api/v1/events", resp.StatusCode, raw)
	if d := errorOf(t, raw); d.Code != apiv1.CodeTooMany || !strings.Contains(d.Message, "alice already holds 8 open streams") {
		t.Errorf("429: %+v", d)
	}
	if r := openStream(t, e.srv.URL, streamPaths[1], bob); r.StatusCode != 200 {
		t.Errorf("bob's stream: %d", r.StatusCode)
	}
	// The agents of a testbed share a token, one stream per node.
	agent := e.user("agent", "agent")
	for i := range api.DefaultMaxStreams + 2 {
		if r := openStream(t, e.srv.URL, streamPaths[0], agent); r.StatusCode != 200 {
			t.Errorf("agent stream %d: %d", i+1, r.StatusCode)
		}
	}
	open[0].Body.Close()
	deadline := time.Now().Add(bound)
	for {
		r := openStream(t, e.srv.URL, streamPaths[0], alice)
		if r.StatusCode == 200 {
			break
		}
		r.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("closing a stream freed no slot: %d", r.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serveHTTP serves e's API with the controller's HTTP server and o's
// bounds on a loopback listener capped at maxConns, returning its URL.
func serveHTTP(t *testing.T, e *env, o api.HTTPOptions, maxConns int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := e.h.HTTPServer(context.Background(), o)
	go srv.Serve(api.NewConnLimit(maxConns, 0).Wrap(ln, true))
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// closedByServer reads c until the server closes it; the test's own
// deadline (bound) firing instead means the server kept it open.
func closedByServer(t *testing.T, what string, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(bound))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: the server kept the connection open %s", what, bound)
	}
}

// TestConnectionTimeouts: a client sending its body slowly is cut after the
// read timeout, an idle keep-alive connection is closed, and a stream lives
// on past the read and write timeouts.
func TestConnectionTimeouts(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	alice := e.user("alice", "user")
	base := serveHTTP(t, e, api.HTTPOptions{ReadHeaderTimeout: time.Second, ReadTimeout: time.Second,
		WriteTimeout: time.Second, IdleTimeout: 500 * time.Millisecond}, 100)
	addr := strings.TrimPrefix(base, "http://")

	t.Run("slow body", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST /api/v1/exclusives HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+alice+
			"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"reason\": \"")
		closedByServer(t, "slow body", c)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("health: %d close=%v", resp.StatusCode, resp.Close)
		}
		closedByServer(t, "idle keep-alive", c)
	})
	t.Run("a stream outlives the timeouts", func(t *testing.T) {
		resp := openStream(t, base, "/api/v1/metrics/live?every=200ms", alice)
		if resp.StatusCode != 200 {
			t.Fatalf("live: %d", resp.StatusCode)
		}
		br := bufio.NewReader(resp.Body)
		// 15 frames at 200 ms: three times the read and write timeouts.
		for i := range 15 {
			if _, err := br.ReadString('\n'); err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			firstFrame(t, br)
		}
	})
}

// TestMaxConns: past the cap a connection gets a 503 saying so; a closed
// connection frees its place.
func TestMaxConns(t *testing.T) {
	e := newEnv(t, sqliteURL(t), oneLink)
	alice := e.user("alice", "user")
	base := serveHTTP(t, e, api.DefaultHTTPOptions(), 2)
	var held []*http.Response
	for range 2 {
		resp := openStream(t, base, "/api/v1/events", alice)
		if resp.StatusCode != 200 {
			t.Fatalf("events: %d", resp.StatusCode)
		}
		held = append(held, resp)
	}
	get := func() (int, string) {
		cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := cl.Get(base + "/api/v1/health")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := get(); st != 503 || !strings.Contains(body, "--max-conns") {
		t.Errorf("over the cap: %d %s", st, body)
	} else {
		checkResponse(t, "GET", "/api/v1/health", st, []byte(body))
	}
	held[0].Body.Close()
	deadline := time.Now().Add(bound)
	for {
		st, body := get()
		if st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed connection freed no place: %d %s", st, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
