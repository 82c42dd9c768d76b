package run

import (
	"encoding/binary"
	"net/netip"

	"github.com/lightpath/lightpath/internal/reserve"
)

// sock_diag (NETLINK_INET_DIAG) as linux/inet_diag.h defines it: the
// request and the parse are pure, so a test feeds them bytes; the socket
// is in run_linux.go.
const (
	diagByFamily    = 20 // SOCK_DIAG_BY_FAMILY
	diagReqBytecode = 1  // INET_DIAG_REQ_BYTECODE
	diagBCCgroup    = 13 // INET_DIAG_BC_CGROUP_COND: u64 cgroup v2 id
	diagCgroupID    = 21 // INET_DIAG_CGROUP_ID, in every answer
	diagMsgLen      = 72 // struct inet_diag_msg
	diagReqLen      = 56 // struct inet_diag_req_v2
	nlHeaderLen     = 16
	nlmFRequest     = 0x1
	nlmFDump        = 0x300
	tcpListen       = 10
)

// diagRequest is a dump request for the sockets of one family and
// protocol (IPPROTO_TCP or IPPROTO_UDP) in cgroup id, every state but
// LISTEN: the kernel filters with a one-instruction bytecode
// (INET_DIAG_BC_CGROUP_COND).
func diagRequest(seq uint32, family, proto uint8, cgroup uint64) []byte {
	ne := binary.NativeEndian
	// The bytecode: {code, yes, no} then the id. yes lands exactly at the
	// end (the socket matches); no jumps past it (it does not).
	const bcLen = 4 + 8
	attrLen := 4 + bcLen
	b := make([]byte, nlHeaderLen+diagReqLen+attrLen)
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], diagByFamily)
	ne.PutUint16(b[6:], nlmFRequest|nlmFDump)
	ne.PutUint32(b[8:], seq)
	r := b[nlHeaderLen:]
	r[0], r[1] = family, proto
	ne.PutUint32(r[4:], 0xffffffff&^(1<<tcpListen))
	a := r[diagReqLen:]
	ne.PutUint16(a[0:], uint16(attrLen))
	ne.PutUint16(a[2:], diagReqBytecode)
	a[4], a[5] = diagBCCgroup, bcLen
	ne.PutUint16(a[6:], bcLen+4)
	ne.PutUint64(a[8:], cgroup)
	return b
}

// parseDiag reads the answers (nlmsghdr + inet_diag_msg + attributes)
// in one netlink read for seq: the sockets of cgroup (the attribute is
// checked as well as the kernel's filter), whether the dump is done, and
// the error the kernel answered with (a negative errno), if any.
func parseDiag(buf []byte, seq uint32, proto reserve.Protocol, cgroup uint64) (conns []Conn, done bool, errno int32) {
	ne := binary.NativeEndian
	for len(buf) >= nlHeaderLen {
		l := int(ne.Uint32(buf[0:]))
		if l < nlHeaderLen || l > len(buf) {
			return conns, true, 0
		}
		typ, mseq := ne.Uint16(buf[4:]), ne.Uint32(buf[8:])
		data := buf[nlHeaderLen:l]
		buf = buf[min(len(buf), (l+3)&^3):]
		if mseq != seq {
			continue
		}
		switch typ {
		case 3: // NLMSG_DONE
			return conns, true, 0
		case 2: // NLMSG_ERROR
			if len(data) >= 4 {
				errno = int32(ne.Uint32(data))
			}
			return conns, true, errno
		case diagByFamily:
			if c, id, ok := parseDiagMsg(data, proto); ok && id == cgroup {
				conns = append(conns, c)
			}
		}
	}
	return conns, false, 0
}

// parseDiagMsg reads one inet_diag_msg and its cgroup id attribute.
func parseDiagMsg(p []byte, proto reserve.Protocol) (Conn, uint64, bool) {
	if len(p) < diagMsgLen {
		return Conn{}, 0, false
	}
	ne := binary.NativeEndian
	addr := func(b []byte) (netip.Addr, bool) {
		switch p[0] {
		case 2: // AF_INET
			return netip.AddrFrom4([4]byte(b[:4])), true
		case 10: // AF_INET6
			return netip.AddrFrom16([16]byte(b[:16])).Unmap(), true
		}
		return netip.Addr{}, false
	}
	src, ok1 := addr(p[8:24])
	dst, ok2 := addr(p[24:40])
	if !ok1 || !ok2 {
		return Conn{}, 0, false
	}
	c := Conn{Proto: proto,
		Local:  netip.AddrPortFrom(src, binary.BigEndian.Uint16(p[4:])),
		Remote: netip.AddrPortFrom(dst, binary.BigEndian.Uint16(p[6:]))}
	var id uint64
	for a := p[diagMsgLen:]; len(a) >= 4; {
		l := int(ne.Uint16(a[0:]))
		if l < 4 || l > len(a) {
			break
		}
		if ne.Uint16(a[2:]) == diagCgroupID && l >= 12 {
			id = ne.Uint64(a[4:])
		}
		a = a[min(len(a), (l+3)&^3):]
	}
	return c, id, true
}
