//go:build linux

package udp

import (
	"encoding/binary"
	"io"
	"net/netip"
	"os"
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
			// a dual-stack socket's IPv4 peers go by the IPv4 options
			unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
			unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
			unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_TOS, tos)
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

// reusePort lets sockets share a port (SO_REUSEPORT): a listener's and its
// streams' connected ones.
func reusePort(rc syscall.RawConn) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// processNetns is the network namespace the process started in: where its
// threads are unless one is locked and switched for a while (as the
// testbed and tests do, through internal/netns).
var processNetns, _ = os.Stat("/proc/thread-self/ns/net")

// threadInProcessNetns says whether the calling thread is in the process's
// network namespace: sockets a listener opens later, from any thread, land
// there, so they may stand beside the listener's only then.
func threadInProcessNetns() bool {
	a, err := os.Stat("/proc/thread-self/ns/net")
	if err != nil || processNetns == nil {
		return false
	}
	return os.SameFile(a, processNetns)
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

// tosOOB appends the control message that marks one datagram sent on a
// shared (unconnected) socket with tos, for an IPv4 peer or an IPv6 one.
func tosOOB(dst []byte, v4 bool, tos int) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, unix.CmsgSpace(4))...)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&dst[n]))
	if v4 {
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_TOS
	} else {
		h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_TCLASS
	}
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(dst[n+unix.CmsgLen(0):], uint32(tos))
	return dst
}

// oobSize is room for the control messages a read returns.
var oobSize = unix.CmsgSpace(4)*4 + unix.CmsgSpace(unix.SizeofInet6Pktinfo)*2

// eachCmsg calls fn for each control message of a read until fn says stop.
func eachCmsg(oob []byte, fn func(level, typ int32, data []byte) bool) {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		n := int(h.Len)
		if n < unix.SizeofCmsghdr || n > len(oob) {
			return
		}
		if !fn(h.Level, h.Type, oob[unix.CmsgLen(0):n]) {
			return
		}
		sp := unix.CmsgSpace(n - unix.CmsgLen(0))
		if sp > len(oob) {
			return
		}
		oob = oob[sp:]
	}
}

// tosOf finds the TOS byte (IPv4 IP_TOS, one byte; IPv6 IPV6_TCLASS, an
// int) among a read's control messages.
func tosOf(oob []byte) (tos byte, ok bool) {
	eachCmsg(oob, func(level, typ int32, data []byte) bool {
		switch {
		case level == unix.IPPROTO_IP && typ == unix.IP_TOS && len(data) >= 1:
			tos, ok = data[0], true
		case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_TCLASS && len(data) >= 4:
			tos, ok = byte(binary.NativeEndian.Uint32(data)), true
		}
		return !ok
	})
	return tos, ok
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
func groSize(oob []byte) (size int) {
	eachCmsg(oob, func(level, typ int32, data []byte) bool {
		if level != unix.SOL_UDP || typ != unix.UDP_GRO {
			return true
		}
		switch {
		case len(data) >= 4:
			size = int(binary.NativeEndian.Uint32(data))
		case len(data) >= 2:
			size = int(binary.NativeEndian.Uint16(data))
		}
		return false
	})
	return size
}

// enablePktinfo makes a listener's socket report each datagram's
// destination address, so that its answers leave from it (IP_PKTINFO; on a
// dual-stack socket IPV6_RECVPKTINFO as well, IP_PKTINFO serving the
// IPv4-mapped peers).
func enablePktinfo(rc syscall.RawConn, v6 bool) {
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		if v6 {
			unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		}
	})
}

// dstOf finds the destination address of a read (IP_PKTINFO or
// IPV6_PKTINFO).
func dstOf(oob []byte) (dst netip.Addr) {
	eachCmsg(oob, func(level, typ int32, data []byte) bool {
		switch {
		case level == unix.IPPROTO_IP && typ == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			p := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
			dst = netip.AddrFrom4(p.Addr)
		case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			p := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
			dst = netip.AddrFrom16(p.Addr).Unmap()
		}
		return !dst.IsValid()
	})
	return dst
}

// srcOOB appends the control message that sends a datagram from src (one
// of the host's addresses) on an unconnected socket.
func srcOOB(dst []byte, src netip.Addr) []byte {
	n := len(dst)
	if src.Is4() {
		dst = append(dst, make([]byte, unix.CmsgSpace(unix.SizeofInet4Pktinfo))...)
		h := (*unix.Cmsghdr)(unsafe.Pointer(&dst[n]))
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
		h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		p := (*unix.Inet4Pktinfo)(unsafe.Pointer(&dst[n+unix.CmsgLen(0)]))
		p.Spec_dst = src.As4()
		return dst
	}
	dst = append(dst, make([]byte, unix.CmsgSpace(unix.SizeofInet6Pktinfo))...)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&dst[n]))
	h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet6Pktinfo))
	p := (*unix.Inet6Pktinfo)(unsafe.Pointer(&dst[n+unix.CmsgLen(0)]))
	p.Addr = src.As16()
	return dst
}

// gsoRefused says whether a segmented send failed for want of GSO (the
// device cannot checksum, the kernel has no UDP_SEGMENT), not for the
// datagrams' sake.
func gsoRefused(err error) bool {
	return errorsIs(err, unix.EIO) || errorsIs(err, unix.EINVAL) || errorsIs(err, unix.ENOPROTOOPT) || errorsIs(err, unix.EOPNOTSUPP)
}

// batchedReads: readBatch reads many datagrams a call (recvmmsg).
const batchedReads = true

// readAtv reads f from off into bufs, one after the other (preadv(2): one
// system call for many send-ring slots), until they are full or the file
// ends (io.EOF with what it read).
func readAtv(f *os.File, bufs [][]byte, off int64) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	total := 0
	for len(bufs) > 0 {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			for {
				n, rerr = unix.Preadv(int(fd), bufs, off)
				if rerr != unix.EINTR {
					return true
				}
			}
		}); err != nil {
			return total, err
		}
		if rerr != nil {
			return total, &os.PathError{Op: "preadv", Path: f.Name(), Err: rerr}
		}
		if n == 0 {
			return total, io.EOF
		}
		total, off = total+n, off+int64(n)
		for n > 0 && len(bufs) > 0 {
			k := min(n, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			n -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}
	return total, nil
}
