//go:build linux

package e2e

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// idleHealth opens a connection from local (an address of the loopback
// net), asks GET /api/v1/health on it (with token, when not empty) and
// leaves it open, idle; the status it got, and the body when not 200.
func idleHealth(t *testing.T, addr, local, path, token string) (net.Conn, int, string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: time.Minute}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", local, err)
	}
	t.Cleanup(func() { c.Close() })
	st, body := ask(t, c, path, token)
	return c, st, body
}

// ask sends GET path on c and reads the answer: its status (0: none, the
// connection was closed) and body.
func ask(t *testing.T, c net.Conn, path, token string) (int, string) {
	t.Helper()
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\n"
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return 0, err.Error()
	}
	c.SetReadDeadline(time.Now().Add(time.Minute)) // bounds a hang only
	defer c.SetReadDeadline(time.Time{})
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestControllerConnsPerClient: one client address holds at most
// --max-conns-per-client connections that have not authenticated (64 by
// default): a 65th idle connection from 127.0.0.1 is refused with a 503
// naming the flag, while a request from 127.0.0.2 is served and a
// connection that authenticated leaves its address's count. The idle
// connections are not cut by --unauth-timeout here (an hour), so that
// the count is what is tested.
func TestControllerConnsPerClient(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t, "--unauth-timeout", "1h")
	admin := readTok(t, c.adminTok)
	addr := strings.TrimPrefix(c.url, "http://")
	// One connection authenticates first: it does not count.
	if _, st, body := idleHealth(t, addr, "127.0.0.1", "/api/v1/whoami", admin); st != 200 {
		t.Fatalf("whoami: %d %s", st, body)
	}
	for i := range 64 {
		if _, st, body := idleHealth(t, addr, "127.0.0.1", "/api/v1/health", ""); st != 200 {
			t.Fatalf("connection %d of 64 from 127.0.0.1: %d %s", i+1, st, body)
		}
	}
	_, st, body := idleHealth(t, addr, "127.0.0.1", "/api/v1/health", "")
	if st != 503 || !strings.Contains(body, `"code":"unavailable"`) || !strings.Contains(body, "--max-conns-per-client") {
		t.Errorf("the 65th connection from 127.0.0.1 not yet authenticated: %d %s", st, body)
	}
	if _, st, body := idleHealth(t, addr, "127.0.0.2", "/api/v1/health", ""); st != 200 {
		t.Errorf("a request from 127.0.0.2 while 127.0.0.1 holds its 64: %d %s", st, body)
	}
}

// TestControllerUnauthTimeout: a connection that has not authenticated is
// closed by the controller once idle for --unauth-timeout, one that sent
// nothing alike, while one that authenticated stays open (its idle bound
// is two minutes) and is answered again.
func TestControllerUnauthTimeout(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t, "--unauth-timeout", "1s")
	admin := readTok(t, c.adminTok)
	addr := strings.TrimPrefix(c.url, "http://")
	authed, st, body := idleHealth(t, addr, "127.0.0.1", "/api/v1/whoami", admin)
	if st != 200 {
		t.Fatalf("whoami: %d %s", st, body)
	}
	anon, st, body := idleHealth(t, addr, "127.0.0.1", "/api/v1/health", "")
	if st != 200 {
		t.Fatalf("health: %d %s", st, body)
	}
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for name, conn := range map[string]net.Conn{"idle after health": anon, "silent": silent} {
		conn.SetReadDeadline(time.Now().Add(time.Minute)) // bounds a hang only
		n, err := conn.Read(make([]byte, 1))
		if n != 0 || !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
			t.Errorf("%s: the controller did not close the connection: read %d, %v", name, n, err)
		}
	}
	if st, body := ask(t, authed, "/api/v1/whoami", admin); st != 200 {
		t.Errorf("the authenticated connection, after the others were closed: %d %s", st, body)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}
