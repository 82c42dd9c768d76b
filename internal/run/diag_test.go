package run

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/lightpath/lightpath/internal/reserve"
)

// diagAnswer builds one netlink answer as the kernel writes it: a
// SOCK_DIAG_BY_FAMILY message per socket, then NLMSG_DONE.
func diagAnswer(seq uint32, socks []struct {
	local, remote netip.AddrPort
	cgroup        uint64
}) []byte {
	ne := binary.NativeEndian
	var out []byte
	msg := func(typ uint16, data []byte) {
		h := make([]byte, nlHeaderLen)
		ne.PutUint32(h[0:], uint32(nlHeaderLen+len(data)))
		ne.PutUint16(h[4:], typ)
		ne.PutUint32(h[8:], seq)
		out = append(append(out, h...), data...)
	}
	for _, s := range socks {
		p := make([]byte, diagMsgLen+12)
		p[0] = 2
		if s.local.Addr().Is6() {
			p[0] = 10
		}
		binary.BigEndian.PutUint16(p[4:], s.local.Port())
		binary.BigEndian.PutUint16(p[6:], s.remote.Port())
		l, r := s.local.Addr().As16(), s.remote.Addr().As16()
		if p[0] == 2 {
			l4, r4 := s.local.Addr().As4(), s.remote.Addr().As4()
			copy(p[8:], l4[:])
			copy(p[24:], r4[:])
		} else {
			copy(p[8:], l[:])
			copy(p[24:], r[:])
		}
		ne.PutUint16(p[diagMsgLen:], 12)
		ne.PutUint16(p[diagMsgLen+2:], diagCgroupID)
		ne.PutUint64(p[diagMsgLen+4:], s.cgroup)
		msg(diagByFamily, p)
	}
	msg(3, make([]byte, 4))
	return out
}

func TestParseDiag(t *testing.T) {
	ap := netip.MustParseAddrPort
	type sock = struct {
		local, remote netip.AddrPort
		cgroup        uint64
	}
	buf := diagAnswer(7, []sock{
		{ap("198.18.2.1:40000"), ap("198.18.1.1:5201"), 42},
		{ap("[2001:2:0:2::1]:40001"), ap("[2001:2:0:1::1]:5201"), 42},
		{ap("198.18.2.1:40002"), ap("198.18.1.1:5201"), 43}, // another cgroup
	})
	conns, done, errno := parseDiag(buf, 7, reserve.ProtoTCP, 42)
	want := []Conn{{reserve.ProtoTCP, ap("198.18.2.1:40000"), ap("198.18.1.1:5201")},
		{reserve.ProtoTCP, ap("[2001:2:0:2::1]:40001"), ap("[2001:2:0:1::1]:5201")}}
	if !done || errno != 0 || len(conns) != 2 || conns[0] != want[0] || conns[1] != want[1] {
		t.Errorf("got %+v done %v errno %d; want %+v, done", conns, done, errno, want)
	}
	if conns, done, _ := parseDiag(buf, 8, reserve.ProtoTCP, 42); len(conns) != 0 || done {
		t.Errorf("another request's answer: %+v done %v; want nothing, not done", conns, done)
	}
	for n := range buf {
		parseDiag(buf[:n], 7, reserve.ProtoTCP, 42) // truncated: no panic
	}
	// The request: the bytecode's jumps land at the end (match) and past
	// it (no match).
	req := diagRequest(1, 2, 6, 42)
	ne := binary.NativeEndian
	if len(req) != nlHeaderLen+diagReqLen+16 || int(ne.Uint32(req)) != len(req) {
		t.Fatalf("request of %d bytes says %d", len(req), ne.Uint32(req))
	}
	bc := req[nlHeaderLen+diagReqLen+4:]
	if bc[0] != diagBCCgroup || bc[1] != 12 || ne.Uint16(bc[2:]) != 16 || ne.Uint64(bc[4:]) != 42 {
		t.Errorf("bytecode % x", bc)
	}
}

func FuzzParseDiag(f *testing.F) {
	f.Add(diagAnswer(1, []struct {
		local, remote netip.AddrPort
		cgroup        uint64
	}{{netip.MustParseAddrPort("198.18.2.1:1"), netip.MustParseAddrPort("198.18.1.1:2"), 5}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		conns, _, _ := parseDiag(b, 1, reserve.ProtoUDP, 5)
		for _, c := range conns {
			if !c.Local.Addr().IsValid() || !c.Remote.Addr().IsValid() || c.Proto != reserve.ProtoUDP {
				t.Fatalf("bad conn %+v", c)
			}
		}
	})
}
