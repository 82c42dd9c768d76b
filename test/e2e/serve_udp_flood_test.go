//go:build linux

package e2e

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/wire"
)

// TestServeUDPSynFlood: a client of a `serve` without a token opens one UDP
// session asking for one stream (and so learns its secret), then sends
// 2,000 authenticated SYNs with distinct stream ids, each from a port of
// its own, kept open. When the server ends the session (its streams never
// joined), it holds at most the one stream the session agreed on: its
// descriptors are as before but for that stream's socket (each SYN held
// one before). A copy over UDP still succeeds.
func TestServeUDPSynFlood(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)
	srv.mu.Lock()
	pid := srv.cmd.Process.Pid
	srv.mu.Unlock()
	fds := func() int {
		es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	before := fds()

	ctrl, session, key := openUDPSession(t, srv.addr)
	defer ctrl.Close()
	uaddr, err := net.ResolveUDPAddr("udp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	const syns = 2000
	for i := range syns {
		s, err := net.DialUDP("udp", nil, uaddr)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Write(forgedUDPSyn(key, session, uint32(1000+i))); err != nil {
			t.Fatal(err)
		}
	}
	// The server ends the session when its streams have not joined within
	// its idle timeout: by then it has judged every SYN.
	ctrl.SetReadDeadline(time.Now().Add(2 * time.Minute)) // bounds a hang only
	if _, err := bufio.NewReader(ctrl).ReadByte(); err == nil {
		for {
			if _, err := ctrl.Read(make([]byte, 4096)); err != nil {
				break
			}
		}
	}
	// The control connection is gone; the session's one stream may still
	// hold its socket (half-open, for the handshake's 15 s).
	if n := fds(); n > before+1 {
		t.Errorf("the server holds %d descriptors after %d SYNs of a one-stream session, %d before: want at most %d", n, syns, before, before+1)
	}

	src := filepath.Join(dir, "f.bin")
	writeRandom(t, src, 1<<20, 1)
	r := runLP(t, runOpts{}, "cp", "--transport", "udp", src, srv.URL("f.bin"))
	mustSucceed(t, "cp --transport udp after the flood", r)
}

// openUDPSession opens a mover session asking for one UDP stream (a
// bench) on a server without a token, which hands over the session's
// secret: the control connection, the session, and the key its UDP streams
// authenticate under.
func openUDPSession(t *testing.T, addr string) (net.Conn, [16]byte, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var nonce [wire.NonceSize]byte
	rand.Read(nonce[:])
	nonce[wire.NonceSize-1] = '\n'
	if _, err := c.Write(wire.AppendHello(nil, wire.Hello{MinVersion: wire.MinVersion, MaxVersion: wire.MaxVersion, Kind: wire.KindControl, Nonce: nonce})); err != nil {
		t.Fatal(err)
	}
	r := wire.NewReader(bufio.NewReader(c))
	m, err := r.Read()
	ok, isOK := m.(*wire.HelloOK)
	if err != nil || !isOK || ok.AuthRequired {
		t.Fatalf("hello answered %#v, %v", m, err)
	}
	r.Version = ok.Version
	w := wire.NewWriter(c)
	if err := w.Write(&wire.Transport{Name: "udp"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Send(&wire.Bench{Streams: 1, Duration: int64(time.Second)}); err != nil {
		t.Fatal(err)
	}
	m, err = r.Read()
	acc, isAcc := m.(*wire.Accept)
	if err != nil || !isAcc || len(acc.Secret) == 0 {
		t.Fatalf("the request answered %#v, %v", m, err)
	}
	h := hmac.New(sha256.New, acc.Secret)
	h.Write([]byte("lightpath v1 udp key"))
	h.Write(acc.Session[:])
	return c, acc.Session, h.Sum(nil)
}

// forgedUDPSyn is a SYN of the UDP transport for stream of session
// (docs/udp.md: header, body, GMAC under the dialler's key), with a fresh
// random.
func forgedUDPSyn(secret []byte, session [16]byte, stream uint32) []byte {
	var random [16]byte
	rand.Read(random[:])
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("lightpath-udp-1"))
	m.Write(session[:])
	m.Write(binary.BigEndian.AppendUint32(nil, stream))
	m.Write(random[:])
	m.Write([]byte{'c'})
	block, _ := aes.NewCipher(m.Sum(nil)[:16])
	gcm, _ := cipher.NewGCM(block)
	const pn = 1
	b := make([]byte, 32, 128)
	b[0], b[1] = 2, 1 // version 2, SYN
	binary.BigEndian.PutUint32(b[4:], stream)
	copy(b[8:24], session[:])
	binary.BigEndian.PutUint64(b[24:], pn)
	b = append(b, random[:]...)
	b = binary.BigEndian.AppendUint64(b, 4<<20)
	b = binary.BigEndian.AppendUint16(b, 1500)
	var n [12]byte
	binary.BigEndian.PutUint64(n[4:], pn)
	return gcm.Seal(b, n[:], nil, b)
}
