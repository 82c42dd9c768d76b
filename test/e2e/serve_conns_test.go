//go:build linux

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/wire"
)

// fdCount is how many descriptors process pid holds.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// idleConns opens n connections to addr from the loopback address from,
// sending nothing, and reads what the server says on each: the answer (an
// error frame's text, or "closed") arrives on the channel, once per
// connection the server refuses or closes.
func idleConns(t *testing.T, addr, from string, n int) ([]net.Conn, chan string) {
	t.Helper()
	out := make(chan string, n)
	var conns []net.Conn
	d := net.Dialer{Timeout: time.Minute, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %s from %s: %v", addr, from, err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
		go func() {
			m, err := wire.NewReader(c).Read()
			if e, ok := m.(*wire.Error); ok && err == nil {
				out <- e.Msg
				return
			}
			out <- "closed"
		}()
	}
	return conns, out
}

// tryHandshake runs a client's hello from the loopback address from: true
// when the server answers it, false with the server's refusal otherwise.
func tryHandshake(t *testing.T, addr, from string) (bool, string) {
	t.Helper()
	d := net.Dialer{Timeout: time.Minute, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	defer c.Close()
	var cn [wire.NonceSize]byte
	if _, err := c.Write(wire.AppendHello(nil, wire.Hello{MinVersion: 1, MaxVersion: wire.MaxVersion, Kind: wire.KindControl, Nonce: cn})); err != nil {
		return false, err.Error()
	}
	c.SetReadDeadline(time.Now().Add(time.Minute))
	m, err := wire.NewReader(c).Read()
	switch m := m.(type) {
	case *wire.HelloOK:
		return true, ""
	case *wire.Error:
		return false, m.Msg
	}
	return false, fmt.Sprint(err)
}

// collect takes n answers from ch, failing the test if they do not come
// (the deadline only bounds a hang).
func collect(t *testing.T, ch chan string, n int) []string {
	t.Helper()
	var got []string
	for range n {
		select {
		case m := <-ch:
			got = append(got, m)
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d connections answered: %q", len(got), n, got)
		}
	}
	return got
}

// TestServeHandshakeLimits is issue 28's 13th finding: connections that
// never finish their handshake are capped per client address and overall.
// Past the cap of one address its next connections are closed at once,
// with the reason, and the server holds no more descriptors for them;
// another address is served meanwhile; past the overall cap any address's
// connection is refused; closed idle connections give their places back.
func TestServeHandshakeLimits(t *testing.T) {
	t.Parallel()
	const perClient, overall = 8, 12
	root := t.TempDir()
	// Long timeouts: only the caps may close a connection in this test.
	srv := startServer(t, root, "--max-handshakes-per-client", strconv.Itoa(perClient), "--max-handshakes", strconv.Itoa(overall),
		"--handshake-timeout", "10m", "--idle-timeout", "10m")
	pid := srv.cmd.Process.Pid
	base := fdCount(t, pid)

	// One address: 40 idle connections, 8 held, 32 closed at once.
	const idle = 40
	held, answers := idleConns(t, srv.addr, "127.0.0.2", idle)
	perMsg := "too many connections from 127.0.0.2 awaiting their handshake (8 at once): wait for some to finish"
	for _, m := range collect(t, answers, idle-perClient) {
		if m != perMsg {
			t.Errorf("refused with %q, want %q", m, perMsg)
		}
	}
	select {
	case m := <-answers:
		t.Errorf("a connection within the cap was closed: %q", m)
	default:
	}
	// One descriptor per held connection, none for the refused ones but
	// the last, which its client may read the refusal of just before the
	// server closes it, and one the Go runtime may open for itself.
	if n := fdCount(t, pid) - base; n > perClient+2 {
		t.Errorf("the server holds %d more descriptors, want at most %d (one per held connection, two of slack)", n, perClient+2)
	}

	// Another address is served meanwhile.
	local := t.TempDir()
	writeFile(t, filepath.Join(local, "f.txt"), "served\n", 0o644)
	cpOK(t, "-P", "2", filepath.Join(local, "f.txt"), srv.URL("f.txt"))
	if b, _ := os.ReadFile(filepath.Join(root, "f.txt")); string(b) != "served\n" {
		t.Errorf("the other client's copy did not arrive: %q", b)
	}

	// A third address fills the overall cap: 4 held, 4 refused.
	_, answers3 := idleConns(t, srv.addr, "127.0.0.3", 8)
	allMsg := "too many connections awaiting their handshake (12 at once): try again later"
	for _, m := range collect(t, answers3, 8-(overall-perClient)) {
		if m != allMsg {
			t.Errorf("refused with %q, want %q", m, allMsg)
		}
	}
	_, answers4 := idleConns(t, srv.addr, "127.0.0.4", 1)
	if m := collect(t, answers4, 1)[0]; m != allMsg {
		t.Errorf("a fresh address past the overall cap: %q, want %q", m, allMsg)
	}

	// The first address lets its connections go: the places come back,
	// and a handshake from a fresh address goes through.
	for _, c := range held {
		c.Close()
	}
	var last string
	if !waitFor(time.Minute, func() bool {
		ok, msg := tryHandshake(t, srv.addr, "127.0.0.5")
		last = msg
		return ok
	}) {
		t.Fatalf("no place came back after the idle connections closed: %q", last)
	}
	if !strings.Contains(srv.Stderr(), "connection refused") {
		t.Errorf("the server did not log the refusals:\n%s", srv.Stderr())
	}
}
