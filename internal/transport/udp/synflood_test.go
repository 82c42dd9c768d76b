package udp

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/transport"
)

// forgedSyn is a SYN for stream of session, authenticated under secret
// as a client holding the session's key (any client of a server without
// a token gets one) can make it, with a fresh random.
func forgedSyn(secret []byte, session [16]byte, stream uint32) []byte {
	var random [16]byte
	rand.Read(random[:])
	keys, err := keysFor(secret, session, stream, random, true)
	if err != nil {
		panic(err)
	}
	b := make([]byte, hdrLen, 128)
	putHeader(b, header{typ: tSYN, stream: stream, session: session, pn: 1})
	b = syn{random: random, window: 4 << 20, mtu: 1500}.put(b)
	return seal(keys.send, b)
}

// openFDs counts the process's descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(es)
}

// listenerState is what a listener holds: its streams, and those of them
// that have taken their buffers.
func listenerState(l *Listener) (conns, rings int) {
	l.mu.Lock()
	cs := make([]*conn, 0, len(l.conns))
	for _, c := range l.conns {
		cs = append(cs, c)
	}
	l.mu.Unlock()
	for _, c := range cs {
		c.mu.Lock()
		if c.rbuf != nil || c.sring.buf != nil {
			rings++
		}
		c.mu.Unlock()
	}
	return len(cs), rings
}

// TestSynFlood: a client holding one session's key sends thousands of
// authenticated SYNs with distinct stream ids (as the probe of issue 28
// did). The listener opens no more streams than the session agreed on,
// holds no more handshakes than its per-client cap, allocates no
// buffers for streams that never joined, and so holds a bounded count of
// descriptors; a legitimate session from another address still works.
func TestSynFlood(t *testing.T) {
	const syns = 3000
	cases := []struct {
		name      string
		streams   int // what the session agreed on
		wantConns int // the most streams the listener may hold
	}{
		{"one stream agreed", 1, 1},
		{"more agreed than the per-client cap", syns, DefaultMaxHalfOpenPerClient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var evil, good transport.Auth
			for _, a := range []*transport.Auth{&evil, &good} {
				rand.Read(a.Session[:])
				a.Key = make([]byte, 32)
				rand.Read(a.Key)
			}
			tr := &Transport{
				Keys: func(s [16]byte) ([]byte, bool) {
					switch s {
					case evil.Session:
						return evil.Key, true
					case good.Session:
						return good.Key, true
					}
					return nil, false
				},
				Streams: func(s [16]byte) int {
					if s == evil.Session {
						return tc.streams
					}
					return 1
				},
			}
			ln, err := tr.Listen(context.Background(), "127.0.0.1:0", transport.Options{DSCP: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			l := ln.(*Listener)
			l.reuse.Store(true) // a socket per stream: descriptors show what a stream holds
			// Each SYN from a port of its own, kept open (never answering):
			// a stream's own socket, connected to the port its SYN came
			// from, would take the next SYNs from that port away from the
			// listener, and a closed port would end the stream at once.
			attackers := make([]*net.UDPConn, syns)
			for i := range attackers {
				if attackers[i], err = net.DialUDP("udp", nil, l.Addr().(*net.UDPAddr)); err != nil {
					t.Fatal(err)
				}
				defer attackers[i].Close()
			}
			before := openFDs(t)
			// Every SYN is judged before the test goes on. One at a time
			// while the listener may open streams: a stream's socket, bound
			// beside the listener's but not yet connected, could take a SYN
			// meant for the listener. Then in batches the listener reads
			// before the next comes, so that none is lost in the socket's
			// queue.
			send := func(i int) {
				if _, err := attackers[i].Write(forgedSyn(evil.Key, evil.Session, uint32(1000+i))); err != nil {
					t.Fatal(err)
				}
			}
			for sent := 0; sent < syns; {
				n := 50
				if sent < tc.wantConns+10 {
					n = 1
				}
				for range min(n, syns-sent) {
					send(sent)
					sent++
				}
				for deadline := time.Now().Add(30 * time.Second); int(l.judged.Load()) < sent; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						conns, rings := listenerState(l)
						t.Fatalf("after %d SYNs the listener judged %d, and holds %d streams, %d with buffers (at most %d, none, wanted)", sent, l.judged.Load(), conns, rings, tc.wantConns)
					}
				}
			}
			conns, rings := listenerState(l)
			if conns > tc.wantConns {
				t.Errorf("the listener holds %d streams of the flooding session, want at most %d", conns, tc.wantConns)
			}
			if rings != 0 {
				t.Errorf("%d streams that never joined hold buffers", rings)
			}
			if got, want := l.Refused(), uint64(syns-tc.wantConns); got < want {
				t.Errorf("refused %d SYNs, want at least %d", got, want)
			}
			// a socket per stream held, and a few the runtime may open
			if fds := openFDs(t) - before; fds > tc.wantConns+4 {
				t.Errorf("the process holds %d more descriptors after %d SYNs, want at most %d", fds, syns, tc.wantConns+4)
			}

			// A legitimate session from another address of the client's
			// host is served while the flood's handshakes are held.
			acc := make(chan net.Conn, 1)
			go func() {
				c, _ := ln.Accept()
				acc <- c
			}()
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			gtr := &Transport{Auth: &good}
			c, err := gtr.Dial(dctx, l.Addr().String(), transport.Options{DSCP: -1, LocalAddr: "127.0.0.2"})
			if err != nil {
				t.Fatalf("a legitimate session beside the flood: %v", err)
			}
			defer c.Close()
			var s net.Conn
			select {
			case s = <-acc:
			case <-dctx.Done():
				t.Fatal("the legitimate stream was never accepted")
			}
			defer s.Close()
			msg := []byte("hello beside the flood")
			go c.Write(msg)
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("read %q, %v: want %q", got, err, msg)
			}
			if _, rings := listenerState(l); rings != 1 {
				t.Errorf("%d streams hold buffers, want the one that joined", rings)
			}
		})
	}
}
