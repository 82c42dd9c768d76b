package mover

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/wire"
)

// TestHandshakesAdmit: places for connections not yet in a session,
// counted per address and overall, each given back once.
func TestHandshakesAdmit(t *testing.T) {
	var h handshakes
	const max, per = 3, 2
	a1, why := h.admit("a", max, per)
	a2, why2 := h.admit("a", max, per)
	if why != "" || why2 != "" {
		t.Fatalf("refused within the caps: %q %q", why, why2)
	}
	if _, why := h.admit("a", max, per); why != "too many connections from a awaiting their handshake (2 at once): wait for some to finish" {
		t.Errorf("third from a: %q", why)
	}
	b1, why := h.admit("b", max, per)
	if why != "" {
		t.Fatalf("b refused: %q", why)
	}
	if _, why := h.admit("c", max, per); why != "too many connections awaiting their handshake (3 at once): try again later" {
		t.Errorf("c past the overall cap: %q", why)
	}
	a1()
	a1() // a second release gives nothing back twice
	if h.total != 2 || h.byClient["a"] != 1 {
		t.Errorf("after one release: total %d, a %d; want 2, 1", h.total, h.byClient["a"])
	}
	if _, why := h.admit("c", max, per); why != "" {
		t.Errorf("c refused after a release: %q", why)
	}
	a2()
	b1()
	if h.total != 1 || len(h.byClient) != 1 {
		t.Errorf("after the releases: total %d, clients %v; want 1, {c:1}", h.total, h.byClient)
	}
}

// TestHandshakeTimeout: an idle connection is closed once the handshake
// timeout passes, and its place comes back: with one place per address,
// the next connection from it then gets a handshake.
func TestHandshakeTimeout(t *testing.T) {
	addr := serveConfig(t, ServerConfig{Root: t.TempDir(), MaxHandshakesPerClient: 1, HandshakeTimeout: 50 * time.Millisecond, IdleTimeout: time.Minute})
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	// The server closes it: the read ends (the deadline only bounds a hang).
	idle.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := idle.Read(make([]byte, 1)); err == nil {
		t.Fatal("the idle connection got data")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the idle connection was not closed")
	}
	// Its place is given back as its handler ends, just after the close
	// the client saw: asked again until a hello comes, or a minute.
	deadline := time.Now().Add(time.Minute)
	for {
		ok, what := hello(t, addr)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the next connection: %s, want a hello", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hello runs a client's hello against addr: whether the server answered
// it, and what came otherwise.
func hello(t *testing.T, addr string) (bool, string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var cn [wire.NonceSize]byte
	c.Write(wire.AppendHello(nil, wire.Hello{MinVersion: 1, MaxVersion: wire.MaxVersion, Kind: wire.KindControl, Nonce: cn}))
	c.SetReadDeadline(time.Now().Add(time.Minute))
	m, err := wire.NewReader(c).Read()
	if _, ok := m.(*wire.HelloOK); ok {
		return true, ""
	}
	if e, ok := m.(*wire.Error); ok {
		return false, e.Msg
	}
	return false, fmt.Sprint(err)
}
