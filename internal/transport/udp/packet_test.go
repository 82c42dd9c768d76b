package udp

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/transport"
)

func TestAckRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    ack
	}{
		{"bare", ack{cum: 10, limit: 1 << 20, echo: 7, delay: 300, ce: 2, repairs: 5}},
		{"ranges", ack{cum: 100, limit: 1 << 30, sack: []span{{200, 300}, {400, 500}}, nak: []span{{100, 200}, {300, 400}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.a.put(nil)
			var got ack
			if err := parseAck(b, &got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.put(nil), b) {
				t.Fatalf("round trip: %+v, want %+v", got, tc.a)
			}
		})
	}
	for _, bad := range [][]byte{
		nil,
		make([]byte, ackFixed-1),
		append(make([]byte, ackFixed-2), 1, 0), // a range announced, absent
		append(append(make([]byte, ackFixed-2), 1, 0), make([]byte, 16)...), // an empty range
	} {
		var a ack
		if parseAck(bad, &a) == nil {
			t.Errorf("parseAck(%x) accepted it", bad)
		}
	}
}

func TestReplayWindow(t *testing.T) {
	var w replayWindow
	accept := func(pn uint64) bool {
		if !w.fresh(pn) {
			return false
		}
		w.mark(pn)
		return true
	}
	for _, tc := range []struct {
		pn   uint64
		want bool
	}{
		{0, true}, {0, false}, {5, true}, {3, true}, {3, false}, {5, false},
		{100, true}, {64, true}, {64, false}, {4000, true}, {100, false}, {200, true}, {200, false},
		{10000, true}, {4000, false}, // older than the window now
		{10000 - replaySpan + 64, true}, {9999, true}, {10001, true}, {10001, false},
		{1 << 40, true}, {1<<40 - 1, true}, {10001, false},
	} {
		if got := accept(tc.pn); got != tc.want {
			t.Errorf("packet %d: accepted %v, want %v", tc.pn, got, tc.want)
		}
	}
}

// fuzzConn is a listener's stream, established, whose datagrams go to a
// socket nobody reads.
func fuzzConn(t *testing.T, sink *net.UDPConn) (*conn, streamKeys) {
	uc, err := net.DialUDP("udp", nil, sink.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := uc.SyscallConn()
	secret := []byte("a secret of the fuzz session....")
	var session [16]byte
	peer, _ := keysFor(secret, session, 1, [16]byte{}, true)
	mine, _ := keysFor(secret, session, 1, [16]byte{}, false)
	c, err := newConn(&dialEndpoint{uc: uc, rc: rc}, uc.LocalAddr(), uc.RemoteAddr(), session, 1, false, mine, transport.Options{DSCP: -1, Window: 64 << 10}, Tuning{}, 1500)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.establish()
	c.peerLimit = 64 << 10
	c.mu.Unlock()
	return c, peer
}

// FuzzDatagram feeds the decoder arbitrary datagrams, and a stream the
// same datagrams authenticated (as a peer holding the key could send
// them): nothing may panic, and the stream's state stays consistent.
func FuzzDatagram(f *testing.F) {
	hdr := func(t ptype, flags uint16, pn uint64) []byte {
		b := make([]byte, hdrLen)
		putHeader(b, header{typ: t, flags: flags, stream: 1, pn: pn})
		return b
	}
	tag := make([]byte, tagLen)
	f.Add(append(syn{window: 1 << 20}.put(hdr(tSYN, 0, 0)), tag...))
	f.Add(append(binary.BigEndian.AppendUint64(hdr(tSYNACK, 0, 1), 1<<20), tag...))
	f.Add(append(append(binary.BigEndian.AppendUint64(hdr(tDATA, 0, 2), 0), "hello"...), tag...))
	f.Add(append(append(binary.BigEndian.AppendUint64(hdr(tDATA, fFIN, 3), 5), "!"...), tag...))
	f.Add(append(append(binary.BigEndian.AppendUint64(hdr(tDATA, 0, 4), 1000), "later"...), tag...))
	a := ack{cum: 0, limit: 1 << 16, echo: 2, sack: []span{{10, 20}}, nak: []span{{0, 10}}}
	f.Add(append(a.put(hdr(tACK, fFINACK, 5)), tag...))
	f.Add(append(binary.BigEndian.AppendUint32(hdr(tRST, 0, 6), rstClosed), tag...))
	f.Add(append(hdr(tPING, 0, 7), tag...))
	f.Add([]byte("garbage"))
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		f.Fatal(err)
	}
	defer sink.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		h, body, err := parseHeader(b)
		if err != nil {
			return
		}
		switch h.typ {
		case tSYN:
			parseSyn(body)
		case tDATA:
			parseData(body)
		case tACK:
			var a ack
			if parseAck(body, &a) == nil && !bytes.Equal(a.put(nil), body) {
				t.Fatalf("ack %+v does not encode back to %x", a, body)
			}
		case tRST:
			parseRst(body)
		}
		c, peer := fuzzConn(t, sink)
		defer c.ep.release()
		p := seal(peer.send, append([]byte(nil), b[:len(b)-tagLen]...))
		if ok, _ := c.input(p, h, p[hdrLen:len(p)-tagLen], 0); !ok {
			t.Fatal("an authenticated, fresh datagram was dropped")
		}
		// a stream that was written to can still be read, and its state holds
		c.SetReadDeadline(time.Now())
		c.Read(make([]byte, 100))
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.rCum > c.rRead+uint64(len(c.rbuf)) || c.rRead > c.rCum || c.inflight < 0 || c.sAcked > c.sNext {
			t.Fatalf("inconsistent state after %x: cum %d read %d inflight %d acked %d next %d", b, c.rCum, c.rRead, c.inflight, c.sAcked, c.sNext)
		}
	})
}
