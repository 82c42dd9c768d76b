//go:build linux

package udp

import (
	"encoding/binary"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sockBuf is what the kernel is asked to buffer per socket: room for the
// bursts that pacing in user space still makes.
const sockBuf = 8 << 20

// setupSocket sets a stream's socket up before it binds: don't fragment
// (the payload size comes from the path, never from IP fragmentation),
// report each datagram's TOS byte (for CE marks), mark what it sends with
// tos, and big kernel buffers (forced where the process may).
func setupSocket(rc syscall.RawConn, v6 bool, tos int) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		s := int(fd)
		for _, size := range []struct{ force, plain int }{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
			if unix.SetsockoptInt(s, unix.SOL_SOCKET, size.force, sockBuf) != nil {
				unix.SetsockoptInt(s, unix.SOL_SOCKET, size.plain, sockBuf)
			}
		}
		if v6 {
			if serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO); serr != nil {
				return
			}
			if serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1); serr != nil {
				return
			}
			serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, tos)
			return
		}
		if serr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO); serr != nil {
			return
		}
		if serr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_RECVTOS, 1); serr != nil {
			return
		}
		serr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_TOS, tos)
	})
	if err != nil {
		return err
	}
	return serr
}

// setTOS changes the TOS byte (traffic class) a socket marks.
func setTOS(rc syscall.RawConn, v6 bool, tos int) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		if v6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, tos)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, tos)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// pathMTU is the MTU the kernel knows for a connected socket's path
// (IP_MTU: the route's, or what ICMP taught it); 0 if it cannot say.
func pathMTU(rc syscall.RawConn, v6 bool) int {
	mtu := 0
	rc.Control(func(fd uintptr) {
		var err error
		if v6 {
			mtu, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU)
		} else {
			mtu, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU)
		}
		if err != nil {
			mtu = 0
		}
	})
	return mtu
}

// tosOOB is the control message that marks one datagram sent on a shared
// (unconnected) socket with tos.
func tosOOB(v6 bool, tos int) []byte {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	if v6 {
		h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_TCLASS
	} else {
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_TOS
	}
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(b[unix.CmsgLen(0):], uint32(tos))
	return b
}

// oobSize is room for the control messages a read returns.
var oobSize = unix.CmsgSpace(4) * 8

// tosOf finds the TOS byte (IPv4 IP_TOS, one byte; IPv6 IPV6_TCLASS, an
// int) among a read's control messages.
func tosOf(oob []byte) (byte, bool) {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		n := int(h.Len)
		if n < unix.SizeofCmsghdr || n > len(oob) {
			return 0, false
		}
		data := oob[unix.CmsgLen(0):n]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			return data[0], true
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			return byte(binary.NativeEndian.Uint32(data)), true
		}
		sp := unix.CmsgSpace(n - unix.CmsgLen(0))
		if sp > len(oob) {
			return 0, false
		}
		oob = oob[sp:]
	}
	return 0, false
}

func isMsgSize(err error) bool { return errorsIs(err, unix.EMSGSIZE) }

func isRefused(err error) bool { return errorsIs(err, unix.ECONNREFUSED) }

// enableGRO asks the kernel to hand a socket's datagrams of one flow over
// coalesced (UDP_GRO): one read, a buffer of equal-sized datagrams and
// their size in a control message. It says whether the kernel agreed.
func enableGRO(rc syscall.RawConn) bool {
	ok := false
	rc.Control(func(fd uintptr) {
		ok = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1) == nil
	})
	return ok
}

// segmentOOB appends the control message that makes one send of a buffer
// go out as datagrams of size bytes each, the last possibly shorter
// (UDP_SEGMENT: UDP segmentation offload, done by the NIC or, failing
// that, once by the kernel).
func segmentOOB(dst []byte, size int) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, unix.CmsgSpace(2))...)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&dst[n]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(dst[n+unix.CmsgLen(0):], uint16(size))
	return dst
}

// groSize finds the size of the coalesced datagrams (UDP_GRO) among a
// read's control messages; 0 when the read is one datagram.
func groSize(oob []byte) int {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		n := int(h.Len)
		if n < unix.SizeofCmsghdr || n > len(oob) {
			return 0
		}
		data := oob[unix.CmsgLen(0):n]
		if h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO {
			switch {
			case len(data) >= 4:
				return int(binary.NativeEndian.Uint32(data))
			case len(data) >= 2:
				return int(binary.NativeEndian.Uint16(data))
			}
			return 0
		}
		sp := unix.CmsgSpace(n - unix.CmsgLen(0))
		if sp > len(oob) {
			return 0
		}
		oob = oob[sp:]
	}
	return 0
}

// gsoRefused says whether a segmented send failed for want of GSO (the
// device cannot checksum, the kernel has no UDP_SEGMENT), not for the
// datagrams' sake.
func gsoRefused(err error) bool {
	return errorsIs(err, unix.EIO) || errorsIs(err, unix.EINVAL) || errorsIs(err, unix.ENOPROTOOPT) || errorsIs(err, unix.EOPNOTSUPP)
}
