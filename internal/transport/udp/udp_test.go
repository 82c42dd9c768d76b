package udp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/transport/transporttest"
	"github.com/lightpath/lightpath/internal/transport/udp"
)

// newSession makes a session as the mover's control channel would: a
// random id and secret, known to the listener's key lookup.
func newSession(t testing.TB) (*udp.Transport, transport.Auth) {
	var a transport.Auth
	rand.Read(a.Session[:])
	a.Key = make([]byte, 32)
	rand.Read(a.Key)
	tr := &udp.Transport{
		Keys: func(s [16]byte) ([]byte, bool) {
			if s == a.Session {
				return a.Key, true
			}
			return nil, false
		},
		Auth: &a,
	}
	return tr, a
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transport.Transport {
		tr, _ := newSession(t)
		return tr
	})
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// viaRelay opens a stream from a dialler through a relay to a listener.
func viaRelay(t testing.TB, o transport.Options, seed uint64, tuning ...udp.Tuning) (client, server transport.Conn, ln *udp.Listener, r *relay) {
	t.Helper()
	return viaRelayWith(t, o, seed, nil, tuning...)
}

// viaRelayWith is viaRelay with the relay set up by setup (if not nil)
// before the stream opens, so the handshake crosses the same path.
func viaRelayWith(t testing.TB, o transport.Options, seed uint64, setup func(*relay), tuning ...udp.Tuning) (client, server transport.Conn, ln *udp.Listener, r *relay) {
	t.Helper()
	tr, _ := newSession(t)
	for _, tu := range tuning {
		tr.Tuning = tu
	}
	l, err := tr.Listen(ctx(t), "127.0.0.1:0", transport.Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r = newRelay(t, l.Addr(), seed)
	if setup != nil {
		setup(r)
	}
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		acc <- c
	}()
	c, err := tr.Dial(ctx(t), r.Addr(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { s.Close() })
	return c, s.(transport.Conn), l.(*udp.Listener), r
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// exchange sends a from c to s and b from s to c at once and checks both
// arrive whole.
func exchange(t testing.TB, c, s transport.Conn, a, b []byte) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	got := make([][]byte, 2)
	wg.Add(4)
	go func() { defer wg.Done(); _, errs[0] = c.Write(a) }()
	go func() { defer wg.Done(); _, errs[1] = s.Write(b) }()
	go func() { defer wg.Done(); got[0] = make([]byte, len(a)); _, errs[2] = io.ReadFull(s, got[0]) }()
	go func() { defer wg.Done(); got[1] = make([]byte, len(b)); _, errs[3] = io.ReadFull(c, got[1]) }()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[0], a) || !bytes.Equal(got[1], b) {
		t.Fatal("the bytes read differ from the bytes written")
	}
}

// TestLossyPath: through a relay that drops, duplicates and reorders
// datagrams at random in both directions, both directions' bytes arrive
// whole and in order, and the streams say they repaired loss and dropped
// the duplicates (which the replay window takes for replays).
func TestLossyPath(t *testing.T) {
	for _, tc := range []struct {
		name               string
		loss, dup, reorder float64
		cc                 string
		rate               uint64
	}{
		{"loss 2%", 0.02, 0, 0, "", 0},
		{"loss, duplicates, reordering", 0.03, 0.03, 0.05, "", 0},
		{"heavy loss, fixed rate", 0.15, 0.02, 0.05, "fixed", 50 << 20},
		{"aimd", 0.03, 0.03, 0.05, "aimd", 0},
		{"a third lost, reordered, duplicated", 0.3, 0.3, 0.3, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s, _, r := viaRelay(t, transport.Options{DSCP: -1, CC: tc.cc, PacingRate: tc.rate}, 7)
			r.set(tc.loss, tc.dup, tc.reorder)
			exchange(t, c, s, random(6<<20), random(2<<20))
			// and the end of the stream crosses the same path
			cs, ss := endStats(t, c, s)
			if cs.Retransmits == 0 || cs.BytesRetrans == 0 {
				t.Errorf("nothing sent again over a lossy path: %+v", cs)
			}
			if ss.LossRepaired == 0 {
				t.Errorf("the receiver repaired no loss: %+v", ss)
			}
			if tc.dup > 0 && cs.Dropped+ss.Dropped == 0 {
				t.Errorf("duplicated datagrams were not dropped: client %+v server %+v", cs, ss)
			}
			t.Logf("client: sent %d (again %d, %d datagrams), dropped %d; server: received %d, repaired %d, dropped %d",
				cs.BytesSent, cs.BytesRetrans, cs.Datagrams, cs.Dropped, ss.BytesReceived, ss.LossRepaired, ss.Dropped)
		})
	}
}

// quiet waits until the listener has sent nothing for a while and returns
// how many datagrams it sent.
func quiet(r *relay) int {
	n := r.serverDatagrams()
	for {
		time.Sleep(150 * time.Millisecond)
		m := r.serverDatagrams()
		if m == n {
			return n
		}
		n = m
	}
}

// TestAttacks: datagrams that are not the peer's (garbage, truncated,
// altered, replayed, from another address, for an unknown session, a SYN
// replayed) are dropped and counted, get no reply, and never touch the
// stream's bytes.
func TestAttacks(t *testing.T) {
	c, s, ln, r := viaRelay(t, transport.Options{DSCP: -1}, 1)
	before := random(1 << 20)
	exchange(t, c, s, before, random(1000))
	captured := r.capturedCopy()
	if len(captured) < 10 {
		t.Fatalf("only %d datagrams captured", len(captured))
	}
	syn := captured[0]
	if syn[1] != 1 {
		t.Fatalf("the first datagram is of type %d, not a SYN", syn[1])
	}
	sent := quiet(r)
	drops := ln.Dropped()
	ss0, _ := s.Stats()

	var attacks [][]byte
	// replayed: every datagram the dialler sent, again, from its address
	attacks = append(attacks, captured...)
	// truncated and altered copies of data datagrams
	for i, p := range captured[1:] {
		if i > 200 {
			break
		}
		attacks = append(attacks, p[:len(p)/2], p[:len(p)-1])
		q := append([]byte(nil), p...)
		q[len(q)/2] ^= 0x40
		attacks = append(attacks, q)
		// a fresh packet number, so not a replay: the MAC fails
		q = append([]byte(nil), p...)
		q[31] ^= 0x01
		q[30] ^= 0x80
		attacks = append(attacks, q)
	}
	// garbage of every size around the header's
	for n := range 120 {
		attacks = append(attacks, random(n))
	}
	g := random(1400)
	g[0] = syn[0] // our version, a real type, our session
	g[1] = 3
	copy(g[8:24], syn[8:24])
	attacks = append(attacks, g)
	for _, p := range attacks {
		r.inject(p)
	}
	// a SYN for an unknown session, from another socket
	other, err := net.DialUDP("udp", nil, ln.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	unknown := append([]byte(nil), syn...)
	unknown[10] ^= 0xff
	other.Write(unknown)
	other.Write(syn)          // a replayed SYN from another address
	other.Write(captured[5])  // a replayed datagram from another address
	other.Write(random(1000)) // garbage
	dropped := func() uint64 {
		ss1, _ := s.Stats()
		return ln.Dropped() - drops + ss1.Dropped - ss0.Dropped
	}
	// Every forged datagram has been read and dropped once the counts
	// say so: only then is "no answer" a finding.
	for deadline := time.Now().Add(time.Minute); dropped() < uint64(len(attacks)+4); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d forged datagrams, %d dropped in a minute", len(attacks)+4, dropped())
		}
	}
	if after := quiet(r); after != sent {
		t.Errorf("the listener sent %d datagrams answering forged ones", after-sent)
	}
	other.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := other.Read(make([]byte, 2000)); err == nil {
		t.Errorf("a %d-byte answer came to a forged datagram", n)
	}
	if d := dropped(); d < uint64(len(attacks)) {
		t.Errorf("%d forged datagrams, %d dropped", len(attacks)+4, d)
	}
	// the streams carry on, unharmed
	exchange(t, c, s, random(1<<20), random(1<<20))
	c.Close()
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, s); err != nil {
		t.Fatal(err)
	}
	// the stream is over: its SYN, replayed, is dropped and opens nothing
	sent = quiet(r)
	dropsBefore := dropped()
	r.inject(syn)
	for deadline := time.Now().Add(time.Minute); dropped() == dropsBefore; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a replayed SYN was not dropped")
		}
	}
	acc := make(chan net.Conn, 1)
	go func() { a, _ := ln.Accept(); acc <- a }()
	select {
	case a := <-acc:
		if a != nil {
			t.Error("a replayed SYN opened a stream")
		}
	case <-time.After(100 * time.Millisecond):
	}
	if after := quiet(r); after != sent {
		t.Errorf("the listener answered a replayed SYN")
	}
}

// TestSlowReader: a reader far slower than the sender (a slow disk) holds
// the sender back through the flow control window: nothing is sent beyond
// the window (the receiver drops nothing), the sender reports the time the
// receiver limited it, and the bytes arrive whole.
func TestSlowReader(t *testing.T) {
	tr, _ := newSession(t)
	ln, err := tr.Listen(ctx(t), "127.0.0.1:0", transport.Options{DSCP: -1, Window: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { a, _ := ln.Accept(); acc <- a }()
	c, err := tr.Dial(ctx(t), ln.Addr().String(), transport.Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := (<-acc).(transport.Conn)
	defer s.Close()
	want := random(3 << 20)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(want)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // the slow disk
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from the bytes written")
	}
	ss, _ := s.Stats()
	cs, _ := c.Stats()
	if ss.Dropped != 0 {
		t.Errorf("the receiver dropped %d datagrams: the sender overran its window", ss.Dropped)
	}
	if cs.ReceiverLimited == 0 {
		t.Errorf("the sender never reports the receiver limiting it: %+v", cs)
	}
	t.Logf("sender: busy %v, receiver-limited %v, sent again %d bytes", cs.BusyTime, cs.ReceiverLimited, cs.BytesRetrans)
}

// TestReset: a stream closed with bytes unread resets: the peer's reads
// and writes fail with "connection reset", not a silent EOF.
func TestReset(t *testing.T) {
	tr, _ := newSession(t)
	ln, err := tr.Listen(ctx(t), "127.0.0.1:0", transport.Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { a, _ := ln.Accept(); acc <- a }()
	c, err := tr.Dial(ctx(t), ln.Addr().String(), transport.Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-acc
	if _, err := c.Write([]byte("never read")); err != nil {
		t.Fatal(err)
	}
	// wait until the bytes are in s's buffer, then close s unread
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := s.(transport.Conn).Stats()
		if st.BytesReceived > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 10)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read from a reset stream: %v, want connection reset", err)
	}
	if _, err := c.Write([]byte("more")); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("write to a reset stream: %v, want connection reset", err)
	}
}

func TestConfigErrors(t *testing.T) {
	tr := &udp.Transport{}
	if ln, err := tr.Listen(ctx(t), "127.0.0.1:0", transport.Options{DSCP: -1}); err == nil {
		ln.Close()
		t.Error("a listener without Keys")
	}
	keyed, a := newSession(t)
	ln, err := keyed.Listen(ctx(t), "127.0.0.1:0", transport.Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if c, err := tr.Dial(ctx(t), ln.Addr().String(), transport.Options{DSCP: -1}); err == nil {
		c.Close()
		t.Error("a dial without a session key")
	}
	// the key from the dial's options, not the transport's
	if c, err := tr.Dial(ctx(t), ln.Addr().String(), transport.Options{DSCP: -1, Auth: &a}); err != nil {
		t.Errorf("a dial with Options.Auth: %v", err)
	} else {
		c.Close()
	}
	// a wrong key: the listener drops the SYN unanswered, the dial gives up
	bad := transport.Auth{Session: a.Session, Key: []byte("not the session's secret")}
	short, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	if c, err := tr.Dial(short, ln.Addr().String(), transport.Options{DSCP: -1, Auth: &bad}); err == nil {
		c.Close()
		t.Error("a dial with the wrong key")
	}
	// The dial sent its SYN at once; the listener counts it as it reads.
	for deadline := time.Now().Add(time.Minute); ln.(*udp.Listener).Dropped() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not count the SYNs under the wrong key")
		}
	}
}

// TestIPv6: a stream over IPv6 loopback, DSCP and all; datagrams are sized
// for IPv6's larger header.
func TestIPv6(t *testing.T) {
	tr, _ := newSession(t)
	ln, err := tr.Listen(ctx(t), "[::1]:0", transport.Options{DSCP: 46})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { a, _ := ln.Accept(); acc <- a }()
	c, err := tr.Dial(ctx(t), ln.Addr().String(), transport.Options{DSCP: 46})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := (<-acc).(transport.Conn)
	defer s.Close()
	exchange(t, c, s, random(2<<20), random(2<<20))
	if err := s.Tune(transport.Options{DSCP: 10}); err != nil {
		t.Fatal(err)
	}
	exchange(t, c, s, random(1<<20), random(1<<20))
	for _, end := range []transport.Conn{c, s} {
		if st, _ := end.Stats(); st.MSS != 9000-48-56 {
			t.Errorf("payload %d over IPv6 loopback, want %d", st.MSS, 9000-48-56)
		}
	}
}

// endStats ends a stream from c to s once exchange has run: c closes its
// sending side, s reads to the end (nothing more may come), then both ends'
// statistics.
func endStats(t *testing.T, c, s transport.Conn) (cs, ss transport.Stats) {
	t.Helper()
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	s.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := io.Copy(io.Discard, s); err != nil || n != 0 {
		t.Fatalf("read to the end: %d bytes, %v", n, err)
	}
	cs, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if ss, err = s.Stats(); err != nil {
		t.Fatal(err)
	}
	return cs, ss
}

// TestWaitingReader: a reader waiting with nothing queued has in-order
// data placed straight into its buffer. Over a path that loses, duplicates
// and reorders (so data also queues behind holes), readers with a low mark
// and buffers of every size get every byte in order; a reader whose
// deadline passes with bytes already placed gets them, not a timeout.
func TestWaitingReader(t *testing.T) {
	for _, tc := range []struct {
		name        string
		lowat, size int
		loss        float64
	}{
		{"no mark, small reads", 0, 1000, 0.02},
		{"mark, large reads", 256 << 10, 1 << 20, 0.02},
		{"mark above the read", 1 << 20, 64 << 10, 0.03},
		{"clean path, mark", 128 << 10, 1 << 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s, _, r := viaRelay(t, transport.Options{DSCP: -1}, 11)
			r.set(tc.loss, tc.loss, tc.loss)
			want := random(8 << 20)
			errc := make(chan error, 1)
			go func() {
				_, err := c.Write(want)
				if err == nil {
					err = c.(interface{ CloseWrite() error }).CloseWrite()
				}
				errc <- err
			}()
			s.(transport.ReadLowater).SetReadLowat(tc.lowat)
			var got []byte
			buf := make([]byte, tc.size)
			for {
				n, err := s.Read(buf)
				got = append(got, buf[:n]...)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes that differ from the %d written", len(got), len(want))
			}
		})
	}
	t.Run("deadline with bytes placed", func(t *testing.T) {
		c, s, _, _ := viaRelay(t, transport.Options{DSCP: -1}, 12)
		s.(transport.ReadLowater).SetReadLowat(64 << 10)
		want := random(10 << 10)
		type read struct {
			n   int
			err error
		}
		buf := make([]byte, 1<<20)
		done := make(chan read, 1)
		go func() { n, err := s.Read(buf); done <- read{n, err} }()
		go c.Write(want)
		// The deadline passes only once the bytes are in (short of the
		// mark, so the read still waits), however slow the machine.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			if st, _ := s.Stats(); st.BytesReceived >= uint64(len(want)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the bytes written never arrived")
			}
		}
		s.SetReadDeadline(time.Now())
		r := <-done
		if n, err := r.n, r.err; err != nil || !bytes.Equal(buf[:n], want) {
			t.Fatalf("read %d bytes (%v), want the %d written and no error", n, err, len(want))
		}
		n, err := s.Read(buf)
		if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a second read past the deadline: %d, %v; want a timeout", n, err)
		}
	})
}
