package emu

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The virtio_net_hdr that IFF_VNET_HDR puts in front of every packet on
// a TUN device (include/uapi/linux/virtio_net.h). The emulator forces it
// little-endian (TUNSETVNETLE) so that this code reads it the same way on
// every host.
const (
	vnetHdrLen = 10

	vnetFlagNeedsCsum = 1 // csum_start/csum_offset say where the kernel must put the L4 checksum

	gsoNone  = 0
	gsoTCPv4 = 1
	gsoUDP   = 3
	gsoTCPv6 = 4
	gsoUDPL4 = 5
	gsoECN   = 0x80 // flag: the TCP flow uses ECN, so CWR goes on the first segment only

	protoTCP = 6
	protoUDP = 17

	tcpFlagFIN = 0x01
	tcpFlagPSH = 0x08
	tcpFlagCWR = 0x80
	tcpCsumOff = 16 // offset of the checksum in the TCP header
	udpHdrLen  = 8
	udpCsumOff = 6 // offset of the checksum in the UDP header
)

// maxPacket is the largest read a TUN device can return: its vnet header
// and a 64 KiB GSO super-packet (an IPv6 payload of up to 65535 bytes
// after the 40 bytes of fixed header), with some room to spare.
const maxPacket = vnetHdrLen + 40 + 65535 + 1024

// pktInfo is what the pipeline needs to know about one packet read from a
// TUN device (vnet header included).
type pktInfo struct {
	segs      int // wire segments it stands for (1 unless GSO)
	wireBytes int // IP bytes on the wire: each segment with its headers

	// For GSO super-packets that can be split (split is true): TCP
	// segments (TSO) or UDP datagrams (USO).
	split   bool
	proto   byte // protoTCP or protoUDP
	v6      bool
	ipHdr   int // IPv4: length of the IP header, to checksum it
	l4Off   int // offset of the TCP or UDP header from the start of the IP packet
	hdrLen  int // l4Off + TCP or UDP header: the bytes every segment repeats
	gsoSize int // payload bytes per segment (the MSS, or the UDP_SEGMENT size)

	// The largest wire segment the packet stands for: its TCP or UDP
	// payload (0 for other protocols and later fragments) and its IP
	// length. Both 0 for a super-packet that cannot be parsed: its size
	// on the wire is unknown.
	segPayload, segPacket int
}

var errShort = errors.New("packet shorter than its headers")

// parsePacket reads the vnet header of pkt and, for TCP and UDP GSO
// super-packets, the IP and L4 headers, to count wire segments and
// prepare a split. An
// error means the packet cannot be split (it is then forwarded whole and
// counted as one segment); it is not a reason to drop it, which is the
// kernel's call.
func parsePacket(pkt []byte) (pktInfo, error) {
	if len(pkt) < vnetHdrLen {
		return pktInfo{segs: 1}, errShort
	}
	ip := pkt[vnetHdrLen:]
	info := pktInfo{segs: 1, wireBytes: len(ip)}
	gsoType := pkt[1] &^ gsoECN
	if gsoType == gsoNone {
		info.segPacket, info.segPayload = len(ip), l4Payload(ip)
		return info, nil
	}
	gsoSize := int(binary.LittleEndian.Uint16(pkt[4:6]))
	proto := byte(protoTCP)
	switch gsoType {
	case gsoTCPv4, gsoTCPv6:
	case gsoUDPL4:
		// USO: one type for both families (the IP version says which).
		proto = protoUDP
	default:
		// UFO (gsoUDP) is never offered to the kernel, so this would be
		// a kernel surprise: count it whole.
		return info, fmt.Errorf("unsupported gso type %d", gsoType)
	}
	if gsoSize == 0 {
		return info, errors.New("gso packet with gso_size 0")
	}
	if len(ip) < 20 {
		return info, errShort
	}
	csumStart := -1
	if pkt[0]&vnetFlagNeedsCsum != 0 {
		csumStart = int(binary.LittleEndian.Uint16(pkt[6:8]))
	}
	switch ip[0] >> 4 {
	case 4:
		if gsoType == gsoTCPv6 {
			return info, errors.New("IPv4 packet with IPv6 gso type")
		}
		ihl := int(ip[0]&0xf) * 4
		if ihl < 20 || len(ip) < ihl {
			return info, fmt.Errorf("bad IPv4 header length %d", ihl)
		}
		if ip[9] != proto {
			return info, fmt.Errorf("gso type %d with IP protocol %d", gsoType, ip[9])
		}
		if tot := int(binary.BigEndian.Uint16(ip[2:4])); tot != len(ip) {
			return info, fmt.Errorf("IPv4 total length %d, packet %d", tot, len(ip))
		}
		info.ipHdr, info.l4Off = ihl, ihl
	case 6:
		if gsoType == gsoTCPv4 {
			return info, errors.New("IPv6 packet with IPv4 gso type")
		}
		if len(ip) < 40 {
			return info, errShort
		}
		if pl := int(binary.BigEndian.Uint16(ip[4:6])); pl != len(ip)-40 {
			return info, fmt.Errorf("IPv6 payload length %d, packet %d", pl, len(ip))
		}
		// Walk the extension headers that may precede TCP or UDP in a GSO
		// packet.
		nh, off := ip[6], 40
		for nh == 0 || nh == 43 || nh == 60 { // hop-by-hop, routing, destination options
			if len(ip) < off+2 {
				return info, errShort
			}
			nh, off = ip[off], off+(int(ip[off+1])+1)*8
		}
		if nh != proto {
			return info, fmt.Errorf("gso type %d with IPv6 next header %d", gsoType, nh)
		}
		info.v6, info.l4Off = true, off
	default:
		return info, fmt.Errorf("IP version %d", ip[0]>>4)
	}
	if csumStart >= 0 && csumStart != info.l4Off {
		return info, fmt.Errorf("csum_start %d, L4 header at %d", csumStart, info.l4Off)
	}
	if proto == protoUDP {
		if len(ip) < info.l4Off+udpHdrLen {
			return info, errShort
		}
		if ul := int(binary.BigEndian.Uint16(ip[info.l4Off+4:])); ul != len(ip)-info.l4Off {
			return info, fmt.Errorf("UDP length %d, datagram %d", ul, len(ip)-info.l4Off)
		}
		info.hdrLen = info.l4Off + udpHdrLen
	} else {
		if len(ip) < info.l4Off+20 {
			return info, errShort
		}
		doff := int(ip[info.l4Off+12]>>4) * 4
		if doff < 20 || len(ip) < info.l4Off+doff {
			return info, fmt.Errorf("bad TCP data offset %d", doff)
		}
		info.hdrLen = info.l4Off + doff
	}
	payload := len(ip) - info.hdrLen
	if payload <= 0 {
		info.segPacket = len(ip)
		return info, nil // a lone header: one segment, nothing to split
	}
	info.segPayload = min(gsoSize, payload)
	info.segPacket = info.hdrLen + info.segPayload
	info.split = true
	info.proto = proto
	info.gsoSize = gsoSize
	info.segs = (payload + gsoSize - 1) / gsoSize
	info.wireBytes = len(ip) + (info.segs-1)*info.hdrLen
	return info, nil
}

// l4Payload returns the TCP or UDP payload length of an IP packet that is
// not a super-packet, or 0 when it is neither (or a fragment after the
// first, or shorter than its headers).
func l4Payload(ip []byte) int {
	if len(ip) < 20 {
		return 0
	}
	var proto byte
	var off int
	switch ip[0] >> 4 {
	case 4:
		off = int(ip[0]&0xf) * 4
		if off < 20 || binary.BigEndian.Uint16(ip[6:8])&0x1fff != 0 {
			return 0
		}
		proto = ip[9]
	case 6:
		if len(ip) < 40 {
			return 0
		}
		proto, off = ip[6], 40
		for proto == 0 || proto == 43 || proto == 60 || proto == 44 {
			if len(ip) < off+8 {
				return 0
			}
			if proto == 44 { // fragment: 8 bytes, the offset in the top 13 bits of bytes 2-3
				if binary.BigEndian.Uint16(ip[off+2:off+4])>>3 != 0 {
					return 0
				}
				proto, off = ip[off], off+8
				continue
			}
			proto, off = ip[off], off+(int(ip[off+1])+1)*8
		}
	default:
		return 0
	}
	hdr := 0
	switch proto {
	case protoUDP:
		hdr = udpHdrLen
	case protoTCP:
		if len(ip) < off+20 {
			return 0
		}
		hdr = int(ip[off+12]>>4) * 4
	default:
		return 0
	}
	return max(0, len(ip)-off-hdr)
}

// segLen is the length of segment i of a super-packet, vnet header
// included: the size of the buffer segment needs.
func (info *pktInfo) segLen(pkt []byte, i int) int { return info.runLen(pkt, i, i+1) }

// runLen is the length of the run of segments [i, j) of a super-packet,
// vnet header included: the size of the buffer segmentRun needs.
func (info *pktInfo) runLen(pkt []byte, i, j int) int {
	start := info.hdrLen + i*info.gsoSize
	end := min(info.hdrLen+j*info.gsoSize, len(pkt)-vnetHdrLen)
	return vnetHdrLen + info.hdrLen + end - start
}

// segment writes segment i of the GSO super-packet pkt (vnet header
// first, as read from the TUN device, parsed into info) into dst, which
// must hold info.segLen(pkt, i) bytes, and returns that length. It does
// what TSO and USO do: IP lengths, IPv4 id (+i) and header checksum; for
// TCP the sequence number, FIN and PSH only on the last segment and CWR
// only on the first; for UDP the datagram's length. The L4 checksum is
// left partial (the pseudo-header sum, with VIRTIO_NET_HDR_F_NEEDS_CSUM
// pointing at it) for the kernel to finish, exactly as the
// super-packet's was.
func segment(dst, pkt []byte, info *pktInfo, i int) int { return segmentRun(dst, pkt, info, i, i+1) }

// segmentRun writes the segments [i, j) of pkt as one packet, as segment
// does for one: a smaller super-packet of the same type and segment size
// when j-i > 1 (the kernel cuts it as it would have cut those segments of
// pkt), so that a batch that loses one segment goes on as two. dst must
// hold info.runLen(pkt, i, j) bytes; it returns that length.
func segmentRun(dst, pkt []byte, info *pktInfo, i, j int) int {
	ip := pkt[vnetHdrLen:]
	start := info.hdrLen + i*info.gsoSize
	end := min(info.hdrLen+j*info.gsoSize, len(ip))
	n := info.hdrLen + end - start
	out := dst[vnetHdrLen : vnetHdrLen+n]
	copy(out, ip[:info.hdrLen])
	copy(out[info.hdrLen:], ip[start:end])

	csumOff := tcpCsumOff
	if info.proto == protoUDP {
		csumOff = udpCsumOff
	}
	// vnet header: one packet (or a smaller super-packet) whose checksum
	// the kernel finishes.
	hdr := dst[:vnetHdrLen]
	clear(hdr)
	hdr[0] = vnetFlagNeedsCsum
	hdr[1] = gsoNone
	binary.LittleEndian.PutUint16(hdr[2:4], uint16(info.hdrLen)) // a hint: what the kernel keeps linear
	if j-i > 1 {
		hdr[1] = pkt[1] // the super-packet's type, ECN flag included
		binary.LittleEndian.PutUint16(hdr[4:6], uint16(info.gsoSize))
	}
	binary.LittleEndian.PutUint16(hdr[6:8], uint16(info.l4Off))
	binary.LittleEndian.PutUint16(hdr[8:10], uint16(csumOff))

	l4Len := n - info.l4Off
	var sum uint32
	if info.v6 {
		binary.BigEndian.PutUint16(out[4:6], uint16(n-40))
		sum = checksumAdd(out[8:40], 0) // source and destination
		sum += uint32(l4Len>>16) + uint32(l4Len&0xffff) + uint32(info.proto)
	} else {
		binary.BigEndian.PutUint16(out[2:4], uint16(n))
		id := binary.BigEndian.Uint16(out[4:6])
		binary.BigEndian.PutUint16(out[4:6], id+uint16(i))
		out[10], out[11] = 0, 0
		binary.BigEndian.PutUint16(out[10:12], ^checksumFold(checksumAdd(out[:info.ipHdr], 0)))
		sum = checksumAdd(out[12:20], 0)
		sum += uint32(l4Len) + uint32(info.proto)
	}

	l4 := out[info.l4Off:]
	if info.proto == protoUDP {
		binary.BigEndian.PutUint16(l4[4:6], uint16(l4Len))
	} else {
		seq := binary.BigEndian.Uint32(l4[4:8])
		binary.BigEndian.PutUint32(l4[4:8], seq+uint32(i*info.gsoSize))
		if j != info.segs {
			l4[13] &^= tcpFlagFIN | tcpFlagPSH
		}
		if i != 0 {
			l4[13] &^= tcpFlagCWR
		}
	}
	binary.BigEndian.PutUint16(l4[csumOff:], checksumFold(sum))
	return vnetHdrLen + n
}

// checksumAdd adds b to the one's complement sum as 16-bit big-endian
// words (RFC 1071), unfolded.
func checksumAdd(b []byte, sum uint32) uint32 {
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

// checksumFold folds a one's complement sum into 16 bits.
func checksumFold(sum uint32) uint16 {
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}
