//go:build linux

package emu

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/roottest"
)

func run(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newTestNetns creates a network namespace for the test, with loopback up
// and IPv6 off (so that no router solicitations or DAD probes cross the
// links and muddle the counters), and removes it at cleanup.
func newTestNetns(t testing.TB, name string) string {
	t.Helper()
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", name, err, out)
		}
	})
	path := "/run/netns/" + name
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	err := netns.Do(path, func() error {
		for _, f := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+f+"/disable_ipv6", []byte("1"), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// testLink is two namespaces joined by a link through an emulator:
// A (198.18.254.1/30 on emu0) ↔ B (198.18.254.2/30 on emu0).
type testLink struct {
	e            *Emulator
	nameA, nameB string // namespace names
	nsA, nsB     string // namespace paths
	addrA, addrB net.IP
}

const testDev = "emu0"

func newTestLink(t testing.TB, mtu int, params Params) *testLink {
	t.Helper()
	roottest.Require(t, "creates network namespaces and TUN devices")
	var rnd [3]byte
	rand.Read(rnd[:])
	prefix := "lp-emutest-" + hex.EncodeToString(rnd[:])
	l := &testLink{nameA: prefix + "-a", nameB: prefix + "-b", addrA: net.IPv4(198, 18, 254, 1), addrB: net.IPv4(198, 18, 254, 2)}
	l.nsA = newTestNetns(t, l.nameA)
	l.nsB = newTestNetns(t, l.nameB)
	for _, x := range []struct {
		ns, name string
		addr     net.IP
	}{{l.nsA, l.nameA, l.addrA}, {l.nsB, l.nameB, l.addrB}} {
		if err := CreateTun(x.ns, testDev, mtu); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := DeleteTun(x.ns, testDev); err != nil {
				t.Error(err)
			}
		})
		run(t, "ip", "-n", x.name, "addr", "add", x.addr.String()+"/30", "dev", testDev)
		run(t, "ip", "-n", x.name, "link", "set", testDev, "up")
	}
	l.e = New(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() {
		if err := l.e.Close(); err != nil {
			t.Error(err)
		}
	})
	for _, s := range []PipeSpec{
		{Link: "l", From: "a", To: "b", FromNS: l.nsA, FromDev: testDev, ToNS: l.nsB, ToDev: testDev, Params: params},
		{Link: "l", From: "b", To: "a", FromNS: l.nsB, FromDev: testDev, ToNS: l.nsA, ToDev: testDev, Params: params},
	} {
		if err := l.e.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel turns the carrier on when the emulator attaches, and
	// starts the qdisc a moment later (linkwatch): until then it drops.
	waitCarrier(t, l.nsA, !params.Down)
	waitCarrier(t, l.nsB, !params.Down)
	return l
}

// waitCarrier waits until emu0 in ns has its carrier on (or off) and is
// operationally up (or not): only then does the kernel queue to it.
func waitCarrier(t testing.TB, ns string, on bool) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		h, link, err := linkAt(ns, testDev)
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
		a := link.Attrs()
		if (a.RawFlags&unix.IFF_LOWER_UP != 0) == on && (a.OperState == netlink.OperUp) == on {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s: flags %#x, operstate %v; want carrier %v", testDev, ns, a.RawFlags, a.OperState, on)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

func (l *testLink) stats(t testing.TB, from string) PipeStats {
	t.Helper()
	for _, s := range l.e.Stats() {
		if s.From == from {
			return s
		}
	}
	t.Fatalf("no pipe from %s", from)
	return PipeStats{}
}

// settledStats returns the stats of the pipe from from once every packet
// read (and every copy made) has been written or dropped (the last ones of
// a transfer may still be on their way when it ends).
func (l *testLink) settledStats(t testing.TB, from string) PipeStats {
	t.Helper()
	var st PipeStats
	if !waitFor(hang, func() bool {
		st = l.stats(t, from)
		return settled(st)
	}) {
		t.Errorf("the pipe from %s never settled: %+v", from, st)
	}
	return st
}

// settled tells whether every packet the pipe read (and every copy it
// made) has been written or dropped.
func settled(st PipeStats) bool {
	return st.QueuedPackets == 0 && st.PacketsIn+st.Duplicated == st.PacketsOut+st.DropsLoss+st.DropsDown+st.DropsBlackhole+st.DropsQueue+st.DropsError
}

// listenUDP opens a UDP socket in B on port.
func (l *testLink) listenUDP(t testing.TB, port int) *net.UDPConn {
	t.Helper()
	var conn *net.UDPConn
	err := netns.Do(l.nsB, func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: l.addrB, Port: port})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// udpEcho runs a UDP echo server in B on port, until the test ends.
func (l *testLink) udpEcho(t testing.TB, port int) {
	t.Helper()
	conn := l.listenUDP(t, port)
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			conn.WriteToUDP(buf[:n], from)
		}
	}()
}

// dialUDP returns a UDP socket in A connected to B:port.
func (l *testLink) dialUDP(t testing.TB, port int) *net.UDPConn {
	t.Helper()
	var conn *net.UDPConn
	err := netns.Do(l.nsA, func() (err error) {
		conn, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: l.addrB, Port: port})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// probe is one echoed datagram: its sequence number, when it was sent and
// how long it took to come back (0: lost).
type probe struct {
	seq     int
	sent    time.Time
	rtt     time.Duration
	arrival int // rank among the probes that came back
}

// probeRTT sends n probes of size bytes, one every interval, through an
// echo server on B and returns them once all have come back or none has
// for wait.
func (l *testLink) probeRTT(t testing.TB, conn *net.UDPConn, n int, size int, interval, wait time.Duration) []probe {
	t.Helper()
	return l.probeRTTWith(t, conn, n, size, interval, wait, nil)
}

// probeRTTWith is probeRTT calling before(i, back) ahead of sending probe
// i, so that a test can change the link at a point in the stream of
// probes; back counts the probes so far that satisfy ok (those not back
// have rtt 0).
func (l *testLink) probeRTTWith(t testing.TB, conn *net.UDPConn, n int, size int, interval, wait time.Duration, before func(i int, back func(ok func(probe) bool) int)) []probe {
	t.Helper()
	probes := make([]probe, n)
	var mu sync.Mutex
	back := func(ok func(probe) bool) int {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for _, p := range probes {
			if p.rtt > 0 && ok(p) {
				k++
			}
		}
		return k
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		arrivals := 0
		buf := make([]byte, 2048)
		for arrivals < n {
			conn.SetReadDeadline(time.Now().Add(wait))
			m, err := conn.Read(buf)
			if err != nil {
				return
			}
			now := time.Now()
			if m < 8 {
				continue
			}
			seq := int(binary.BigEndian.Uint64(buf))
			mu.Lock()
			if seq < n && probes[seq].rtt == 0 {
				probes[seq].rtt = now.Sub(probes[seq].sent)
				probes[seq].arrival = arrivals
				arrivals++
			}
			mu.Unlock()
		}
	}()
	msg := make([]byte, max(size, 8))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range n {
		if before != nil {
			before(i, back)
		}
		binary.BigEndian.PutUint64(msg, uint64(i))
		mu.Lock()
		probes[i] = probe{seq: i, sent: time.Now()}
		mu.Unlock()
		if _, err := conn.Write(msg); err != nil {
			t.Fatal(err)
		}
		<-tick.C
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(probes)
}

func rtts(probes []probe) []time.Duration {
	var out []time.Duration
	for _, p := range probes {
		if p.rtt > 0 {
			out = append(out, p.rtt)
		}
	}
	slices.Sort(out)
	return out
}

func quantile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}

// tcpTransfer sends size bytes of random data from A to B over TCP and
// checks that they arrive intact, within timeout.
func (l *testLink) tcpTransfer(t testing.TB, port int, size int64, timeout time.Duration) {
	t.Helper()
	var ln net.Listener
	err := netns.Do(l.nsB, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(l.addrB.String(), fmt.Sprint(port)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type result struct {
		n   int64
		sum []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
		h := sha256.New()
		n, err := io.Copy(h, c)
		got <- result{n, h.Sum(nil), err}
	}()
	var conn net.Conn
	err = netns.Do(l.nsA, func() (err error) {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp4", net.JoinHostPort(l.addrB.String(), fmt.Sprint(port)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	h := sha256.New()
	src := io.TeeReader(io.LimitReader(newPRNG(uint64(size)), size), h)
	if _, err := io.Copy(conn, src); err != nil {
		conn.Close()
		t.Fatalf("send: %v", err)
	}
	conn.Close()
	r := <-got
	if r.err != nil && !errors.Is(r.err, io.EOF) {
		t.Fatalf("receive: %v after %d bytes", r.err, r.n)
	}
	if r.n != size || string(r.sum) != string(h.Sum(nil)) {
		t.Fatalf("received %d bytes (sha256 %x), sent %d (sha256 %x)", r.n, r.sum, size, h.Sum(nil))
	}
}

// prng is a fast deterministic byte source: crypto/rand would make the
// sender, not the link, the bottleneck.
type prng struct{ s uint64 }

func newPRNG(seed uint64) *prng { return &prng{s: seed | 1} }

func (p *prng) Read(b []byte) (int, error) {
	for i := 0; i+8 <= len(b); i += 8 {
		p.s ^= p.s << 13
		p.s ^= p.s >> 7
		p.s ^= p.s << 17
		binary.LittleEndian.PutUint64(b[i:], p.s)
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(i)
	}
	return len(b), nil
}

// sink counts the datagrams B receives on a port and the order of their
// sequence numbers.
type sink struct {
	mu   sync.Mutex
	seqs []uint64
}

func (l *testLink) udpSink(t testing.TB, port int) *sink {
	t.Helper()
	conn := l.listenUDP(t, port)
	conn.SetReadBuffer(4 << 20)
	t.Cleanup(func() { conn.Close() })
	s := &sink{}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if n >= 8 {
				s.mu.Lock()
				s.seqs = append(s.seqs, binary.BigEndian.Uint64(buf))
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seqs)
}

// inversions counts datagrams that arrived after one with a higher
// sequence number, among those numbered from first on.
func (s *sink) inversions(first uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, high := 0, uint64(0)
	for _, q := range s.seqs {
		if q < first {
			continue
		}
		if q < high {
			n++
		}
		high = max(high, q)
	}
	return n
}

// hang bounds every wait for an event: it only stops a test that would
// hang, so it is far longer than any busy machine needs.
const hang = time.Minute

// waitFor polls cond every 5 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// sendGSO sends n datagrams of size bytes from A to B:port, numbered from
// first (the sequence number leads each datagram), batch of them per
// write with UDP_SEGMENT, as a GSO sender does; it sleeps a millisecond
// after each write, so that neither the sink nor the TUN ring overflows.
func (l *testLink) sendGSO(t testing.TB, port int, first uint64, n, size, batch int) {
	t.Helper()
	conn := l.dialUDP(t, port)
	if err := setUDPSegment(conn, size); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, batch*size)
	for seq := first; seq < first+uint64(n); {
		k := min(batch, int(first+uint64(n)-seq))
		for i := range k {
			binary.BigEndian.PutUint64(buf[i*size:], seq)
			seq++
		}
		if _, err := conn.Write(buf[:k*size]); err != nil {
			t.Fatalf("send a batch of %d datagrams with UDP_SEGMENT %d: %v", k, size, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// setUDPSegment turns UDP GSO on for conn: each write of more than size
// bytes leaves as datagrams of size bytes (the last one shorter).
func setUDPSegment(conn *net.UDPConn, size int) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, size)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("setsockopt UDP_SEGMENT: %w", serr)
	}
	return nil
}

// tally counts the datagrams numbered [first, first+n) the sink received:
// distinct ones and extra copies.
func (s *sink) tally(first uint64, n int) (distinct, copies int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[uint64]int, n)
	for _, q := range s.seqs {
		if q >= first && q < first+uint64(n) {
			seen[q]++
		}
	}
	for _, c := range seen {
		copies += c - 1
	}
	return len(seen), copies
}

// keepSending sends a numbered 200-byte datagram on c every millisecond
// until the test ends (write errors, as while a link is down, are
// expected), and returns the count of datagrams it has offered so far.
func keepSending(t *testing.T, c net.Conn) *atomic.Uint64 {
	stop := make(chan struct{})
	var sent atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		msg := make([]byte, 200)
		for i := uint64(0); ; i++ {
			binary.BigEndian.PutUint64(msg, i)
			c.Write(msg)
			sent.Add(1)
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
	return &sent
}
