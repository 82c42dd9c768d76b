package emu

import (
	"sync"

	"github.com/lightpath/lightpath/internal/heapq"
)

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
}

func (p *packet) data() []byte { return p.buf.b[:p.n] }

// delayLine holds the packets of one pipe until they are due: a min-heap
// by due time, ties broken by arrival. Without Reorder, due times are
// forced non-decreasing, so the heap degenerates into a FIFO whose pushes
// cost one comparison; one structure serves both modes and a change of
// Reorder at run time needs no migration.
type delayLine struct {
	h       heapq.Heap[int64, packet]
	lastDue int64 // the latest due time pushed: the floor for FIFO order
}

func (d *delayLine) len() int { return d.h.Len() }

// push adds p; with fifo its due time is first raised to lastDue.
func (d *delayLine) push(p packet, fifo bool) {
	if fifo && p.due < d.lastDue {
		p.due = d.lastDue
	}
	d.lastDue = max(d.lastDue, p.due)
	d.h.Push(p.due, p)
}

// head returns the earliest packet's due time.
func (d *delayLine) head() (int64, bool) {
	if d.h.Len() == 0 {
		return 0, false
	}
	due, _ := d.h.Top()
	return due, true
}

// pop removes and returns the earliest packet.
func (d *delayLine) pop() packet {
	_, p := d.h.Pop()
	return p
}
