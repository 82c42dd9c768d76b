package udp

import (
	"net"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// batcher sends datagrams each on its own but many in one system call
// (sendmmsg on Linux; one by one elsewhere), for paths where GSO does not
// work. One per endpoint, used by its stream's sender goroutine only.
type batcher struct {
	p4   *ipv4.PacketConn
	p6   *ipv6.PacketConn
	msgs []ipv4.Message // ipv6.Message is the same type
}

// write sends bs on uc (to addr, with the control messages oob, when uc is
// not connected) and returns how many went before the first that failed.
func (b *batcher) write(uc *net.UDPConn, v6 bool, bs [][]byte, addr net.Addr, oob []byte) (int, error) {
	if b.p4 == nil && b.p6 == nil {
		if v6 {
			b.p6 = ipv6.NewPacketConn(uc)
		} else {
			b.p4 = ipv4.NewPacketConn(uc)
		}
	}
	bs = bs[:min(len(bs), maxBatch)]
	if cap(b.msgs) < len(bs) {
		b.msgs = make([]ipv4.Message, maxBatch)
		for i := range b.msgs {
			b.msgs[i].Buffers = make([][]byte, 1)
		}
	}
	msgs := b.msgs[:len(bs)]
	for i, p := range bs {
		msgs[i].Buffers[0] = p
		msgs[i].OOB = oob
		msgs[i].Addr = addr
	}
	if b.p6 != nil {
		return b.p6.WriteBatch(msgs, 0)
	}
	return b.p4.WriteBatch(msgs, 0)
}

// readBatch is the buffers of batched reads: as many datagrams (or GRO's
// coalesced runs) in one system call as are queued, up to readBatchSize
// (recvmmsg on Linux; one per call elsewhere), so that reads are batched
// where GRO does not coalesce them (datagrams of several sends, a path
// that does not aggregate). One per reading goroutine.
type readBatch struct {
	p4   *ipv4.PacketConn
	p6   *ipv6.PacketConn
	msgs []ipv4.Message
}

// readBatchSize: reads per system call. Each takes a buffer of 64 KiB
// (what GRO may coalesce into one), 512 KiB a stream.
const readBatchSize = 8

func newReadBatch(uc *net.UDPConn, v6 bool) *readBatch {
	r := &readBatch{msgs: make([]ipv4.Message, readBatchSize)}
	if v6 {
		r.p6 = ipv6.NewPacketConn(uc)
	} else {
		r.p4 = ipv4.NewPacketConn(uc)
	}
	for i := range r.msgs {
		r.msgs[i].Buffers = [][]byte{make([]byte, 65536)}
		r.msgs[i].OOB = make([]byte, oobSize)
	}
	return r
}

// read waits for datagrams and returns those one system call brought in:
// each message's N bytes of Buffers[0] and NN of OOB.
func (r *readBatch) read() ([]ipv4.Message, error) {
	for i := range r.msgs {
		r.msgs[i].OOB = r.msgs[i].OOB[:cap(r.msgs[i].OOB)]
	}
	var n int
	var err error
	if r.p6 != nil {
		n, err = r.p6.ReadBatch(r.msgs, 0)
	} else {
		n, err = r.p4.ReadBatch(r.msgs, 0)
	}
	if err != nil {
		return nil, err
	}
	return r.msgs[:n], nil
}
