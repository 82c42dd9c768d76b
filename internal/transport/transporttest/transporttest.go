// Package transporttest is the conformance suite of transport.Transport:
// every transport runs Run, so the mover can rely on the contract written
// on the interface whichever transport carries its streams.
package transporttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/transport"
)

// Run runs the suite. newTransport returns the transport under test for one
// subtest; streams are opened on loopback.
func Run(t *testing.T, newTransport func(t *testing.T) transport.Transport) {
	tests := []struct {
		name string
		fn   func(t *testing.T, tr transport.Transport)
	}{
		{"Streams", testStreams},
		{"OrderedAndComplete", testOrdered},
		{"FullDuplex", testFullDuplex},
		{"CloseWrite", testCloseWrite},
		{"CloseUnblocks", testCloseUnblocks},
		{"ReadDeadline", testReadDeadline},
		{"WriteDeadline", testWriteDeadline},
		{"DialErrors", testDialErrors},
		{"LocalAddr", testLocalAddr},
		{"ListenerClose", testListenerClose},
		{"Stats", testStats},
		{"Tune", testTune},
		{"PacingRate", testPacingRate},
		{"FileSender", testFileSender},
		{"ReaderFrom", testReaderFrom},
		{"ReadLowater", testReadLowater},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newTransport(t)) })
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func listen(t *testing.T, tr transport.Transport) net.Listener {
	t.Helper()
	ln, err := tr.Listen(ctxFor(t), "127.0.0.1:0", transport.Options{DSCP: -1})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// pair opens a stream: the dialled end and the accepted end.
func pair(t *testing.T, tr transport.Transport) (client, server transport.Conn) {
	t.Helper()
	ln := listen(t, tr)
	type res struct {
		c   net.Conn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		acc <- res{c, err}
	}()
	c, err := tr.Dial(ctxFor(t), ln.Addr().String(), transport.Options{DSCP: -1})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	r := <-acc
	if r.err != nil {
		t.Fatalf("accept: %v", r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	s, ok := r.c.(transport.Conn)
	if !ok {
		t.Fatalf("accepted %T, which is not a transport.Conn", r.c)
	}
	return c, s
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// writeAsync writes p in pieces of the given size and reports the error.
func writeAsync(c net.Conn, p []byte, piece int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for len(p) > 0 {
			k := min(piece, len(p))
			n, err := c.Write(p[:k])
			if err == nil && n != k {
				err = io.ErrShortWrite
			}
			if err != nil {
				done <- err
				return
			}
			p = p[k:]
		}
		done <- nil
	}()
	return done
}

func testStreams(t *testing.T, tr transport.Transport) {
	if tr.Name() == "" {
		t.Error("the transport has no name")
	}
	c, s := pair(t, tr)
	if c.LocalAddr() == nil || c.RemoteAddr() == nil || s.LocalAddr() == nil || s.RemoteAddr() == nil {
		t.Fatal("a stream has no address")
	}
	if c.RemoteAddr().String() != s.LocalAddr().String() {
		t.Errorf("dialled %s but the stream was accepted on %s", c.RemoteAddr(), s.LocalAddr())
	}
}

func testOrdered(t *testing.T, tr transport.Transport) {
	for _, tc := range []struct {
		name  string
		size  int
		piece int
	}{
		{"one byte", 1, 1},
		{"small writes", 100 << 10, 7},
		{"large writes", 16 << 20, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := pair(t, tr)
			want := random(tc.size)
			werr := writeAsync(c, want, tc.piece)
			got := make([]byte, len(want))
			if _, err := io.ReadFull(s, got); err != nil {
				t.Fatalf("read: %v", err)
			}
			if err := <-werr; err != nil {
				t.Fatalf("write: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("the bytes read differ from the bytes written")
			}
		})
	}
}

func testFullDuplex(t *testing.T, tr transport.Transport) {
	c, s := pair(t, tr)
	a, b := random(4<<20), random(4<<20)
	ea, eb := writeAsync(c, a, 64<<10), writeAsync(s, b, 64<<10)
	var wg sync.WaitGroup
	var gotA, gotB []byte
	var errA, errB error
	wg.Add(2)
	go func() { defer wg.Done(); gotA, errA = readN(s, len(a)) }()
	go func() { defer wg.Done(); gotB, errB = readN(c, len(b)) }()
	wg.Wait()
	if err := errors.Join(errA, errB, <-ea, <-eb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotA, a) || !bytes.Equal(gotB, b) {
		t.Fatal("the bytes read differ from the bytes written")
	}
}

func readN(c net.Conn, n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	return b, err
}

func testCloseWrite(t *testing.T, tr transport.Transport) {
	c, s := pair(t, tr)
	want := random(1 << 20)
	werr := writeAsync(c, want, 256<<10)
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatalf("read to the end: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes before the end differ from those written")
	}
	// The other direction still works.
	if _, err := s.Write([]byte("reply")); err != nil {
		t.Fatalf("write back after the peer's CloseWrite: %v", err)
	}
	if b, err := readN(c, 5); err != nil || string(b) != "reply" {
		t.Fatalf("read after CloseWrite = %q, %v", b, err)
	}
}

func testCloseUnblocks(t *testing.T, tr transport.Transport) {
	c, s := pair(t, tr)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the read block
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("a read blocked across Close returned %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock a pending read")
	}
	// The peer sees the end.
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(s); err != nil {
		t.Errorf("the peer's read after Close: %v, want io.EOF", err)
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Error("a write after Close succeeded")
	}
}

func testReadDeadline(t *testing.T, tr transport.Transport) {
	c, s := pair(t, tr)
	s.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := s.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	s.SetReadDeadline(time.Time{})
	if _, err := c.Write([]byte("later")); err != nil {
		t.Fatal(err)
	}
	if b, err := readN(s, 5); err != nil || string(b) != "later" {
		t.Fatalf("read after the deadline was lifted = %q, %v", b, err)
	}
}

func testWriteDeadline(t *testing.T, tr transport.Transport) {
	c, s := pair(t, tr)
	// The peer does not read: the write blocks once every buffer is full.
	c.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 1<<20)
	var err error
	for i := 0; i < 4096 && err == nil; i++ {
		_, err = c.Write(buf)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer that does not read: %v, want os.ErrDeadlineExceeded", err)
	}
	// A later deadline lets the stream continue: drain, then write again.
	c.SetWriteDeadline(time.Time{})
	go io.Copy(io.Discard, s)
	if _, err := c.Write([]byte("more")); err != nil {
		t.Fatalf("write after the deadline was lifted: %v", err)
	}
}

func testDialErrors(t *testing.T, tr transport.Transport) {
	ln := listen(t, tr)
	addr := ln.Addr().String()
	ln.Close()
	if c, err := tr.Dial(ctxFor(t), addr, transport.Options{DSCP: -1}); err == nil {
		c.Close()
		t.Error("dial to a closed listener succeeded")
	}
	ln = listen(t, tr)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c, err := tr.Dial(ctx, ln.Addr().String(), transport.Options{DSCP: -1}); err == nil {
		c.Close()
		t.Error("dial with an ended context succeeded")
	}
	if c, err := tr.Dial(ctxFor(t), ln.Addr().String(), transport.Options{DSCP: 64}); err == nil {
		c.Close()
		t.Error("dial with DSCP 64 succeeded")
	}
	if c, err := tr.Dial(ctxFor(t), ln.Addr().String(), transport.Options{DSCP: -1, CC: "no-such-control"}); err == nil {
		c.Close()
		t.Error("dial with an unknown congestion control succeeded")
	}
}

// testLocalAddr: a stream dialled with Options.LocalAddr leaves from that
// address (the peer sees it), and one the host cannot use, or that is no
// address, fails the dial.
func testLocalAddr(t *testing.T, tr transport.Transport) {
	local := "127.0.0.1"
	if runtime.GOOS == "linux" {
		local = "127.0.0.2" // all of 127/8 is the host's on Linux
	}
	ln := listen(t, tr)
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := tr.Dial(ctxFor(t), ln.Addr().String(), transport.Options{DSCP: -1, LocalAddr: local})
	if err != nil {
		t.Fatalf("dial from %s: %v", local, err)
	}
	defer c.Close()
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	defer s.Close()
	if got, _, _ := net.SplitHostPort(s.RemoteAddr().String()); got != local {
		t.Errorf("the peer sees the stream from %s, want %s", got, local)
	}
	for _, bad := range []string{"no-address", "192.0.2.1"} { // 192.0.2.1: TEST-NET-1, not the host's
		if c, err := tr.Dial(ctxFor(t), ln.Addr().String(), transport.Options{DSCP: -1, LocalAddr: bad}); err == nil {
			c.Close()
			t.Errorf("dial from %s succeeded", bad)
		}
	}
}

func testListenerClose(t *testing.T, tr transport.Transport) {
	ln := listen(t, tr)
	errc := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	ln.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("Accept on a closed listener returned a stream")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock Accept")
	}
	// A stream accepted before the listener closes stays open.
	ln2 := listen(t, tr)
	acc := make(chan net.Conn, 1)
	go func() { a, _ := ln2.Accept(); acc <- a }()
	d, err := tr.Dial(ctxFor(t), ln2.Addr().String(), transport.Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a := <-acc
	if a == nil {
		t.Fatal("accept failed")
	}
	defer a.Close()
	ln2.Close()
	if _, err := d.Write([]byte("still")); err != nil {
		t.Fatal(err)
	}
	if b, err := readN(a, 5); err != nil || string(b) != "still" {
		t.Fatalf("an accepted stream after its listener closed: %q, %v", b, err)
	}
}

func testStats(t *testing.T, tr transport.Transport) {
	c, s := pair(t, tr)
	if _, err := c.Stats(); errors.Is(err, errors.ErrUnsupported) {
		t.Skip("this platform cannot read the transport's statistics")
	}
	want := random(8 << 20)
	werr := writeAsync(c, want, 1<<20)
	// Statistics may be read from any goroutine while the stream runs.
	stop := make(chan struct{})
	polled := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				polled <- nil
				return
			default:
			}
			if _, err := c.Stats(); err != nil {
				polled <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if _, err := readN(s, len(want)); err != nil {
		t.Fatal(err)
	}
	close(stop)
	if err := errors.Join(<-werr, <-polled); err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.BytesSent < uint64(len(want)) {
		t.Errorf("BytesSent = %d after sending %d", st.BytesSent, len(want))
	}
	if st.RTT <= 0 || st.MSS == 0 || st.Cwnd == 0 {
		t.Errorf("no round trip, packet size or window measured: %+v", st)
	}
	if st.MinRTT > st.RTT+st.RTTVar*4 && st.RTT > 0 {
		t.Errorf("MinRTT %v above RTT %v", st.MinRTT, st.RTT)
	}
	if st.CC == "" && tr.Name() == "tcp" {
		t.Errorf("no congestion control read from a TCP stream: %+v", st)
	}
	if st.ReceiverLimited < 0 || st.SenderLimited < 0 || st.NetworkLimited() < 0 {
		t.Errorf("negative limited times: %+v", st)
	}
	if st.ReceiverLimited > st.BusyTime || st.SenderLimited > st.BusyTime {
		t.Errorf("a limited time exceeds the busy time: %+v", st)
	}
	rs, err := s.Stats()
	if err != nil {
		t.Fatalf("Stats of the receiving end: %v", err)
	}
	if rs.BytesReceived < uint64(len(want)) {
		t.Errorf("BytesReceived = %d after receiving %d", rs.BytesReceived, len(want))
	}
	c.Close()
	if _, err := c.Stats(); err == nil {
		t.Error("Stats of a closed stream succeeded")
	}
}

func testTune(t *testing.T, tr transport.Transport) {
	c, s := pair(t, tr)
	if err := s.Tune(transport.Options{DSCP: -1}); err != nil {
		t.Fatalf("Tune with nothing to change: %v", err)
	}
	if err := s.Tune(transport.Options{DSCP: 10, NotSentLowat: transport.DefaultNotSentLowat, PacingRate: 1 << 30}); errors.Is(err, errors.ErrUnsupported) {
		t.Skip("this platform cannot tune streams")
	} else if err != nil {
		t.Fatalf("Tune: %v", err)
	}
	if err := s.Tune(transport.Options{DSCP: 64}); err == nil {
		t.Error("Tune with DSCP 64 succeeded")
	}
	if err := s.Tune(transport.Options{DSCP: -1, CC: "no-such-control"}); err == nil {
		t.Error("Tune with an unknown congestion control succeeded")
	}
	// The congestion control one end reports running, the other takes,
	// and then reports.
	if cs, err := c.Stats(); err == nil && cs.CC != "" {
		if err := s.Tune(transport.Options{DSCP: -1, CC: cs.CC}); err != nil {
			t.Errorf("Tune to the congestion control %q its peer runs: %v", cs.CC, err)
		} else if ss, err := s.Stats(); err != nil || ss.CC != cs.CC {
			t.Errorf("after Tune to %q, Stats says %q (%v)", cs.CC, ss.CC, err)
		}
	}
	// A refused option leaves the stream usable.
	want := random(1 << 20)
	werr := writeAsync(s, want, 64<<10)
	got, err := readN(c, len(want))
	if err := errors.Join(err, <-werr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from the bytes written")
	}
}

// testPacingRate re-paces an established stream, raising, lowering and
// lifting its cap, and reads the cap back from the stream's statistics
// each time; the stream carries data before and after.
func testPacingRate(t *testing.T, tr transport.Transport) {
	c, s := pair(t, tr)
	if err := s.SetPacingRate(1 << 20); errors.Is(err, errors.ErrUnsupported) {
		t.Skip("this platform cannot pace streams")
	} else if err != nil {
		t.Fatalf("SetPacingRate: %v", err)
	}
	for _, bps := range []uint64{1 << 20, 1 << 26, 3 << 18, 0} {
		if err := s.SetPacingRate(bps); err != nil {
			t.Fatalf("SetPacingRate(%d): %v", bps, err)
		}
		st, err := s.Stats()
		if errors.Is(err, errors.ErrUnsupported) {
			continue
		}
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		if st.MaxPacingRate != bps {
			t.Errorf("after SetPacingRate(%d) the stream's cap reads %d", bps, st.MaxPacingRate)
		}
		want := random(64 << 10)
		werr := writeAsync(s, want, 16<<10)
		got, err := readN(c, len(want))
		if err := errors.Join(err, <-werr); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("the bytes read differ from the bytes written")
		}
	}
	s.Close()
	if err := s.SetPacingRate(1 << 20); err == nil {
		t.Error("SetPacingRate on a closed stream succeeded")
	}
}

func testFile(t *testing.T, data []byte) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func testFileSender(t *testing.T, tr transport.Transport) {
	c, s := pair(t, tr)
	fs, ok := c.(transport.FileSender)
	if !ok {
		t.Skipf("%s streams have no zero-copy file sending here", tr.Name())
	}
	data := random(3<<20 + 17)
	f := testFile(t, data)
	const off = 1000
	got := make(chan []byte, 1)
	go func() {
		b, _ := readN(s, len(data)-off)
		got <- b
	}()
	n, err := fs.SendFile(f, off, int64(len(data)-off))
	if err != nil || n != int64(len(data)-off) {
		t.Fatalf("SendFile = %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, data[off:]) {
		t.Fatal("the bytes received differ from the file's")
	}
	if pos, _ := f.Seek(0, io.SeekCurrent); pos != 0 {
		t.Errorf("SendFile moved the file's offset to %d", pos)
	}
	// Past the end of the file: an error, not a hang.
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := fs.SendFile(f, int64(len(data)), 10); err == nil {
		t.Fatal("SendFile past the end of the file succeeded")
	}
}

func testReaderFrom(t *testing.T, tr transport.Transport) {
	c, s := pair(t, tr)
	if _, ok := c.(io.ReaderFrom); !ok {
		t.Skipf("%s streams are not io.ReaderFroms", tr.Name())
	}
	data := random(2<<20 + 5)
	f := testFile(t, data)
	got := make(chan []byte, 1)
	go func() {
		b, _ := readN(s, len(data))
		got <- b
	}()
	if n, err := io.Copy(c, f); err != nil || n != int64(len(data)) {
		t.Fatalf("io.Copy = %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatal("the bytes received differ from the file's")
	}
}

func testReadLowater(t *testing.T, tr transport.Transport) {
	c, s := pair(t, tr)
	lw, ok := s.(transport.ReadLowater)
	if !ok {
		t.Skipf("%s streams have no read low-water mark here", tr.Name())
	}
	// The bytes arrive in two pieces. A read may return the first piece
	// alone; the reader lowers the mark to what it is still owed before
	// each read, as the contract asks, and gets all it was promised.
	want := random(64 << 10)
	go func() {
		c.Write(want[:1000])
		time.Sleep(20 * time.Millisecond)
		c.Write(want[1000:])
	}()
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(want))
	for n := 0; n < len(got); {
		if err := lw.SetReadLowat(len(got) - n); err != nil {
			t.Fatalf("SetReadLowat: %v", err)
		}
		k, err := s.Read(got[n:])
		n += k
		if err != nil {
			t.Fatalf("read under a low-water mark after %d bytes: %v", n, err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read under a low-water mark differ")
	}
	// Fewer bytes than the mark, then the end: the reader wakes for the end.
	if _, err := c.Write(want[:10]); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	rest, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(rest, want[:10]) {
		t.Fatalf("read to the end under a low-water mark = %d bytes, %v", len(rest), err)
	}
}
