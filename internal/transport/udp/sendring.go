package udp

// sendRing is a stream's send buffer: the bytes written and not yet
// acknowledged, by stream offset, kept as datagram slots. Each slot holds
// per payload bytes with room for a data packet's header before them and
// its MAC after, so a segment that fills a slot is sealed and sent where
// it lies: its header written in front, its MAC behind, no copy. Slots sit
// back to back, so a run of them is one buffer for a segmented send (GSO).
// Other segments (a partial slot, or any after the path's MTU shrank below
// the slots) are copied into a datagram as before.
type sendRing struct {
	buf    []byte
	per    int // payload bytes a slot holds: the stream's mss when made
	stride int // a slot's bytes: header room, payload, MAC
	slots  int
}

// slotHead is the room before a slot's payload: a data packet's header.
const slotHead = hdrLen + dataHdr

func newSendRing(size, per int) sendRing {
	per = max(per, 1)
	slots := max((size+per-1)/per, 2)
	stride := slotHead + per + tagLen
	return sendRing{buf: make([]byte, slots*stride), per: per, stride: stride, slots: slots}
}

// size is how many stream bytes the ring holds.
func (r *sendRing) size() int { return r.slots * r.per }

// at is where the payload byte of stream offset off lies in buf, and how
// many bytes of its slot follow from there.
func (r *sendRing) at(off uint64) (pos, left int) {
	k := int(off / uint64(r.per) % uint64(r.slots))
	in := int(off % uint64(r.per))
	return k*r.stride + slotHead + in, r.per - in
}

// region is the payload room from off to the end of its slot, at most n
// bytes.
func (r *sendRing) region(off uint64, n int) []byte {
	p, left := r.at(off)
	return r.buf[p : p+min(left, n)]
}

// copyOut copies len(dst) bytes from offset off, which may run over slots.
func (r *sendRing) copyOut(dst []byte, off uint64) {
	for len(dst) > 0 {
		k := copy(dst, r.region(off, len(dst)))
		dst, off = dst[k:], off+uint64(k)
	}
}

// whole says whether the segment [off, off+n) fills a slot, so it can be
// sent in place.
func (r *sendRing) whole(off uint64, n int) bool {
	return n == r.per && off%uint64(r.per) == 0
}

// slot is the datagram room of the slot starting at off (a multiple of
// per): header room and payload; its capacity runs to the ring's end, the
// MAC's room first.
func (r *sendRing) slot(off uint64) []byte {
	p, _ := r.at(off)
	p -= slotHead
	return r.buf[p : p+slotHead+r.per]
}

// grow makes a ring of size stream bytes, in slots of per, holding the
// bytes of [from, to) of r. Segments cut from r keep their bounds: those
// off the new slots go by copy.
func (r *sendRing) grow(from, to uint64, size, per int) sendRing {
	nr := newSendRing(size, per)
	for off := from; off < to; {
		dst := nr.region(off, int(to-off))
		r.copyOut(dst, off)
		off += uint64(len(dst))
	}
	return nr
}

// adjacent says whether b starts where a ends, in a's array (the arena or
// the send ring, each of which a datagram's capacity runs to the end of):
// two datagrams that can go in one segmented send as they lie.
func adjacent(a, b []byte) bool {
	return len(b) > 0 && cap(a)-len(a) >= len(b) && &a[:len(a)+1][len(a)] == &b[0]
}
