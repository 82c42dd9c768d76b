package udp

import (
	"bytes"
	"testing"
	"time"
)

// holed is a receiver with n ranges above its cumulative point, each after
// a one-datagram hole opened long ago.
func holed(n int) *conn {
	c := &conn{mss: 1000, srtt: 100 * time.Millisecond, rttvar: time.Millisecond, rbuf: make([]byte, 1<<20)}
	for i := range n {
		s := uint64(2*i+1) * 1000
		c.rRanges = append(c.rRanges, rng{start: s, end: s + 1000, since: 1})
	}
	c.rHigh = uint64(2*n) * 1000
	return c
}

// TestAckSpans: an ack reports the newest ranges, and NAKs holes it has
// not NAKed within a round trip, so that a path with more holes open than
// an ack has spans (1% loss at thousands of datagrams a round trip) gets
// every hole repaired within a round trip or so, not maxSpans a round trip.
func TestAckSpans(t *testing.T) {
	c := holed(3 * maxSpans)
	var a ack
	c.buildAck(&a)
	if len(a.sack) != maxSpans || a.sack[0] != (span{c.rRanges[len(c.rRanges)-1].start, c.rRanges[len(c.rRanges)-1].end}) {
		t.Fatalf("sack %v: want the %d newest ranges, newest first", a.sack[:min(len(a.sack), 3)], maxSpans)
	}
	nakked := map[span]int{}
	for i := range 3 {
		if i > 0 {
			c.buildAck(&a)
		}
		if len(a.nak) == 0 {
			t.Fatal("an ack with no NAKs while holes are still un-NAKed")
		}
		for _, h := range a.nak {
			nakked[h]++
		}
	}
	// the first ack NAKed the lowest maxSpans; the next two the rest
	if len(nakked) != 3*maxSpans {
		t.Errorf("%d holes NAKed in three acks, want all %d", len(nakked), 3*maxSpans)
	}
	for h, n := range nakked {
		if n > 1 {
			t.Errorf("hole %v NAKed %d times within a round trip", h, n)
		}
	}
	// a round trip later, the holes still open are NAKed again
	for i := range c.rRanges {
		c.rRanges[i].naked -= int64(c.srtt + 2*c.rttvar)
	}
	c.buildAck(&a)
	if len(a.nak) != maxSpans || a.nak[0].start != 0 {
		t.Errorf("a round trip on: NAKs %v, want the lowest %d holes again", a.nak[:min(len(a.nak), 2)], maxSpans)
	}
}

// TestSentTimesGrow: with more datagrams in flight than the ring held, the
// echo of the oldest still measures a round trip.
func TestSentTimesGrow(t *testing.T) {
	c := &conn{srtt: 100 * time.Millisecond, sentTimes: make([]sentAt, minSentTimes)}
	const inFlight = 20000
	for pn := uint64(1); pn <= inFlight; pn++ {
		c.noteSent(pn, int64(pn))
	}
	if len(c.sentTimes) < inFlight {
		t.Fatalf("ring of %d for %d in flight", len(c.sentTimes), inFlight)
	}
	c.rttSample(1, 0, false)
	if c.round.n != 1 {
		t.Fatal("the first datagram's echo measured no round trip")
	}
	// acknowledged ones leave room: the ring stops growing
	n := len(c.sentTimes)
	for pn := uint64(inFlight + 1); pn <= 10*inFlight; pn++ {
		c.noteSent(pn, int64(pn))
		if pn%100 == 0 {
			c.rttSample(pn-100, 0, false)
		}
	}
	if len(c.sentTimes) != n {
		t.Errorf("the ring grew from %d to %d with 100 in flight", n, len(c.sentTimes))
	}
}

// TestGrowRing: the bytes at their offsets survive a ring's growth, the
// span wrapping in the old ring and in the new one.
func TestGrowRing(t *testing.T) {
	old := make([]byte, 16)
	want := map[uint64]byte{}
	for off := uint64(40); off < 52; off++ { // wraps at 48
		old[off%16] = byte(off)
		want[off] = byte(off)
	}
	for _, size := range []int{32, 64} {
		nb := growRing(old, 40, 52, size)
		for off, b := range want {
			if nb[off%uint64(size)] != b {
				t.Errorf("size %d: offset %d holds %d, want %d", size, off, nb[off%uint64(size)], b)
			}
		}
	}
	if !bytes.Equal(growRing(old, 5, 5, 32), make([]byte, 32)) {
		t.Error("an empty span copied bytes")
	}
}

// TestGrowWindow: the receive window grows, four times over, when data
// arrives past its middle while the reader keeps up; never for a slow
// reader, nor with a Window set.
func TestGrowWindow(t *testing.T) {
	const n = 4 << 20
	for _, tc := range []struct {
		name            string
		auto            bool
		high, cum, read uint64
		want            int
	}{
		{"past the middle, reader keeping up", true, 100 + n*6/10, 100 + n/10, 100, 4 * n},
		{"before the middle", true, 100 + n*4/10, 100 + n/10, 100, n},
		{"a slow reader", true, 100 + n*9/10, 100 + n*3/10, 100, n},
		{"a Window set", false, 100 + n*9/10, 100, 100, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &conn{rbuf: make([]byte, n), autoBuf: tc.auto, rHigh: tc.high, rCum: tc.cum, rRead: tc.read}
			c.rbuf[100%n] = 7
			c.growWindow()
			if len(c.rbuf) != tc.want {
				t.Errorf("window %d, want %d", len(c.rbuf), tc.want)
			}
			if c.rbuf[100%uint64(len(c.rbuf))] != 7 {
				t.Error("the unread byte moved")
			}
		})
	}
	c := &conn{rbuf: make([]byte, maxAutoBuffer/2), autoBuf: true, rHigh: maxAutoBuffer / 2}
	c.growWindow()
	if len(c.rbuf) != maxAutoBuffer {
		t.Errorf("window %d past the cap %d", len(c.rbuf), maxAutoBuffer)
	}
}
