package udp

import (
	"bytes"
	"testing"
)

// TestSendRing: bytes written into the ring's slot regions come back by
// offset across slots and the ring's wrap, a slot's datagram room sits
// around its payload, neighbouring slots are adjacent (one segmented send)
// and a grown ring, in other slots, keeps every byte.
func TestSendRing(t *testing.T) {
	const per = 100
	r := newSendRing(1000, per)
	if r.size() != 1000 || r.slots != 10 || r.stride != slotHead+per+tagLen {
		t.Fatalf("ring of %d bytes in %d slots of stride %d", r.size(), r.slots, r.stride)
	}
	// stream bytes [950, 1650): over the wrap
	want := make([]byte, 700)
	for i := range want {
		want[i] = byte(i*7 + 3)
	}
	from := uint64(950)
	for off, rest := from, want; len(rest) > 0; {
		reg := r.region(off, len(rest))
		if len(reg) == 0 || len(reg) > per {
			t.Fatalf("region at %d: %d bytes", off, len(reg))
		}
		k := copy(reg, rest)
		rest, off = rest[k:], off+uint64(k)
	}
	got := make([]byte, len(want))
	r.copyOut(got, from)
	if !bytes.Equal(got, want) {
		t.Fatal("bytes read back by offset differ")
	}
	if !r.whole(1000, per) || r.whole(1050, 50) || r.whole(1000, 50) {
		t.Error("whole: wrong")
	}
	s := r.slot(1000)
	if len(s) != slotHead+per || cap(s) < slotHead+per+tagLen || !bytes.Equal(s[slotHead:], want[50:150]) {
		t.Error("a slot's datagram room is not header room then its payload, with the MAC's room after")
	}
	a, b := r.slot(1000), r.slot(1100)
	a = a[:len(a)+tagLen]
	if !adjacent(a, b) || adjacent(b, a) {
		t.Error("neighbouring slots are not adjacent one way only")
	}
	if adjacent(r.slot(1900)[:slotHead+per+tagLen], r.slot(2000)) {
		t.Error("the last slot and the first taken for adjacent")
	}
	for _, np := range []int{per, 64, 333} {
		g := r.grow(from, from+uint64(len(want)), 4000, np)
		got := make([]byte, len(want))
		g.copyOut(got, from)
		if !bytes.Equal(got, want) || g.per != np || g.size() < 4000 {
			t.Errorf("grown into slots of %d: bytes differ or size %d", np, g.size())
		}
	}
}
