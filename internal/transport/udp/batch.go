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
