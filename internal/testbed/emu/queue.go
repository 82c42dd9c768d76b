package emu

import "sync"

// Buffers come in three sizes so that a queue of small packets (ACKs, the
// segments of a split) does not pin 64 KiB each: the reader reads into the
// largest and copies what fits into a smaller one. They are recycled
// through sync.Pools, which also hand idle memory back to the GC.
var bufSizes = [...]int{2048, 16 << 10, maxPacket}

var bufPools [len(bufSizes)]sync.Pool

type buffer struct{ b []byte }

// getBuffer returns a buffer of at least size bytes (size ≤ maxPacket).
func getBuffer(size int) *buffer {
	for i, s := range bufSizes {
		if size <= s {
			if b, ok := bufPools[i].Get().(*buffer); ok {
				return b
			}
			return &buffer{b: make([]byte, s)}
		}
	}
	panic("emu: buffer larger than maxPacket")
}

func putBuffer(b *buffer) {
	for i, s := range bufSizes {
		if cap(b.b) == s {
			bufPools[i].Put(b)
			return
		}
	}
}

// packet is one entry of a delay line: a packet as read from or to be
// written into a TUN device (vnet header first).
type packet struct {
	buf  *buffer
	n    int32 // bytes in buf, vnet header included
	segs int32 // wire segments
	wire int32 // IP bytes on the wire
	due  int64 // release time, nanoseconds on the monotonic clock (mono)
	seq  uint64
}

func (p *packet) data() []byte { return p.buf.b[:p.n] }

// delayLine holds the packets of one pipe until they are due: a min-heap
// by due time, ties broken by arrival. Without Reorder, due times are
// forced non-decreasing, so the heap degenerates into a FIFO whose pushes
// cost one comparison; one structure serves both modes and a change of
// Reorder at run time needs no migration.
type delayLine struct {
	h       []packet
	seq     uint64
	lastDue int64 // the latest due time pushed: the floor for FIFO order
}

func (d *delayLine) len() int { return len(d.h) }

func less(a, b *packet) bool { return a.due < b.due || (a.due == b.due && a.seq < b.seq) }

// push adds p; with fifo its due time is first raised to lastDue.
func (d *delayLine) push(p packet, fifo bool) {
	if fifo && p.due < d.lastDue {
		p.due = d.lastDue
	}
	d.lastDue = max(d.lastDue, p.due)
	d.seq++
	p.seq = d.seq
	d.h = append(d.h, p)
	i := len(d.h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !less(&d.h[i], &d.h[parent]) {
			break
		}
		d.h[i], d.h[parent] = d.h[parent], d.h[i]
		i = parent
	}
}

// head returns the earliest packet's due time.
func (d *delayLine) head() (int64, bool) {
	if len(d.h) == 0 {
		return 0, false
	}
	return d.h[0].due, true
}

// pop removes and returns the earliest packet.
func (d *delayLine) pop() packet {
	p := d.h[0]
	last := len(d.h) - 1
	d.h[0] = d.h[last]
	d.h[last] = packet{}
	d.h = d.h[:last]
	i, n := 0, last
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && less(&d.h[r], &d.h[l]) {
			m = r
		}
		if !less(&d.h[m], &d.h[i]) {
			break
		}
		d.h[i], d.h[m] = d.h[m], d.h[i]
		i = m
	}
	return p
}
