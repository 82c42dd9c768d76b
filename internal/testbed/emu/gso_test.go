package emu

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// gsoCase describes a TCP super-packet as the kernel would hand it over.
type gsoCase struct {
	name     string
	v6       bool
	ipOpts   int  // IPv4 options, bytes (multiple of 4)
	v6Ext    bool // an IPv6 destination options header before TCP
	tcpOpts  int  // TCP options, bytes (multiple of 4)
	payload  int
	mss      int
	flags    byte // TCP flags of the super-packet
	seq      uint32
	id       uint16
	ecn      bool
	wantSegs int
}

// buildGSO builds the super-packet: virtio header, IP, TCP with a partial
// checksum (the pseudo-header sum, as the kernel leaves it), payload.
func buildGSO(tc gsoCase) []byte {
	var ip []byte
	var l4Off int
	tcpLen := 20 + tc.tcpOpts + tc.payload
	if tc.v6 {
		ext := 0
		if tc.v6Ext {
			ext = 8
		}
		ip = make([]byte, 40+ext+tcpLen)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(ip)-40))
		ip[6] = protoTCP
		if tc.v6Ext {
			ip[6] = 60
			ip[40] = protoTCP // next header; length 0 = 8 bytes; then padding
			ip[42], ip[43] = 1, 4
		}
		ip[7] = 64
		copy(ip[8:], []byte{0x20, 0x01, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1})
		copy(ip[24:], []byte{0x20, 0x01, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2})
		l4Off = 40 + ext
	} else {
		ihl := 20 + tc.ipOpts
		ip = make([]byte, ihl+tcpLen)
		ip[0] = 0x40 | byte(ihl/4)
		ip[1] = 0x02 // ECT(0)
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		binary.BigEndian.PutUint16(ip[4:], tc.id)
		ip[6] = 0x40 // DF
		ip[8], ip[9] = 64, protoTCP
		copy(ip[12:], []byte{198, 18, 1, 1, 198, 18, 2, 2})
		for i := 20; i < ihl; i++ {
			ip[i] = 1 // NOP
		}
		binary.BigEndian.PutUint16(ip[10:], ^sum16(ip[:ihl], 0))
		l4Off = ihl
	}
	tcp := ip[l4Off:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5001)
	binary.BigEndian.PutUint32(tcp[4:], tc.seq)
	binary.BigEndian.PutUint32(tcp[8:], 0x01020304)
	tcp[12] = byte((20+tc.tcpOpts)/4) << 4
	tcp[13] = tc.flags
	binary.BigEndian.PutUint16(tcp[14:], 512)
	for i := 20; i < 20+tc.tcpOpts; i++ {
		tcp[i] = byte(i) // arbitrary: options are copied, not read
	}
	for i := 20 + tc.tcpOpts; i < len(tcp); i++ {
		tcp[i] = byte(i*7 + i>>8)
	}
	binary.BigEndian.PutUint16(tcp[16:], ^sum16(pseudo(ip, tc.v6, len(tcp)), 0)) // pseudo-header sum, folded, not complemented

	hdr := make([]byte, vnetHdrLen)
	hdr[0] = vnetFlagNeedsCsum
	hdr[1] = gsoTCPv4
	if tc.v6 {
		hdr[1] = gsoTCPv6
	}
	if tc.ecn {
		hdr[1] |= gsoECN
	}
	binary.LittleEndian.PutUint16(hdr[2:], uint16(l4Off+20+tc.tcpOpts))
	binary.LittleEndian.PutUint16(hdr[4:], uint16(tc.mss))
	binary.LittleEndian.PutUint16(hdr[6:], uint16(l4Off))
	binary.LittleEndian.PutUint16(hdr[8:], tcpCsumOff)
	return append(hdr, ip...)
}

// sum16 is an independent RFC 1071 checksum (complemented), so the test
// does not trust the code under test.
func sum16(b []byte, init uint32) uint16 {
	s := init
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// pseudo returns the TCP pseudo-header of ip for a TCP length of n.
func pseudo(ip []byte, v6 bool, n int) []byte {
	if v6 {
		p := make([]byte, 40)
		copy(p, ip[8:40])
		binary.BigEndian.PutUint32(p[32:], uint32(n))
		p[39] = protoTCP
		return p
	}
	p := make([]byte, 12)
	copy(p, ip[12:20])
	p[9] = protoTCP
	binary.BigEndian.PutUint16(p[10:], uint16(n))
	return p
}

// finishChecksum does what the kernel does with a CHECKSUM_PARTIAL
// packet: sum from csum_start to the end, store the complement at
// csum_start+csum_offset.
func finishChecksum(t *testing.T, seg []byte) []byte {
	t.Helper()
	if seg[0] != vnetFlagNeedsCsum || seg[1] != gsoNone {
		t.Fatalf("vnet header flags %d gso type %d, want NEEDS_CSUM and no GSO", seg[0], seg[1])
	}
	start := int(binary.LittleEndian.Uint16(seg[6:]))
	off := int(binary.LittleEndian.Uint16(seg[8:]))
	ip := bytes.Clone(seg[vnetHdrLen:])
	binary.BigEndian.PutUint16(ip[start+off:], sum16(ip[start:], 0))
	return ip
}

func TestSegmentTCP(t *testing.T) {
	for _, tc := range []gsoCase{
		{name: "v4 45 segments", payload: 45 * 1448, mss: 1448, flags: 0x18, seq: 1000, id: 7, wantSegs: 45},
		{name: "v4 ragged tail", payload: 10*1448 + 333, mss: 1448, flags: 0x10, seq: 1, id: 1, wantSegs: 11},
		{name: "v4 odd lengths", payload: 3*1447 + 1, mss: 1447, flags: 0x10, seq: 5, wantSegs: 4},
		{name: "v4 options and timestamps", ipOpts: 8, tcpOpts: 12, payload: 7 * 1436, mss: 1436, flags: 0x18, seq: 99, id: 300, wantSegs: 7},
		{name: "v4 seq and id wrap", payload: 6 * 8948, mss: 8948, flags: 0x10, seq: 0xffffffff - 20000, id: 0xfffe, wantSegs: 6},
		{name: "v4 FIN PSH CWR ECE", tcpOpts: 12, payload: 4*1000 + 1, mss: 1000, flags: 0x80 | 0x40 | 0x18 | 0x01, ecn: true, seq: 77, wantSegs: 5},
		{name: "v4 one segment", payload: 500, mss: 1448, flags: 0x18, wantSegs: 1},
		{name: "v6", v6: true, tcpOpts: 12, payload: 44 * 1428, mss: 1428, flags: 0x18, seq: 123456, wantSegs: 44},
		{name: "v6 ragged", v6: true, payload: 2*1440 + 17, mss: 1440, flags: 0x19, seq: 3, wantSegs: 3},
		{name: "v6 extension header", v6: true, v6Ext: true, tcpOpts: 12, payload: 5*1420 + 9, mss: 1420, flags: 0x10, seq: 3, wantSegs: 6},
		{name: "v6 jumbo mss", v6: true, payload: 65000, mss: 8940, flags: 0x18, seq: 1 << 31, wantSegs: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkt := buildGSO(tc)
			orig := pkt[vnetHdrLen:]
			info, err := parsePacket(pkt)
			if err != nil {
				t.Fatal(err)
			}
			if !info.split || info.segs != tc.wantSegs || info.gsoSize != tc.mss {
				t.Fatalf("parse: %+v, want %d segments of %d", info, tc.wantSegs, tc.mss)
			}
			hdrLen := info.hdrLen
			if want := len(orig) + (tc.wantSegs-1)*hdrLen; info.wireBytes != want {
				t.Errorf("wire bytes %d, want %d", info.wireBytes, want)
			}
			if want := min(tc.mss, tc.payload); info.segPayload != want || info.segPacket != hdrLen+want {
				t.Errorf("largest segment: %d payload bytes in a %d-byte packet, want %d in %d", info.segPayload, info.segPacket, want, hdrLen+want)
			}
			var payload []byte
			wire, largest := 0, 0
			for i := range info.segs {
				n := info.segLen(pkt, i)
				dst := make([]byte, n+5) // room to spare: the length returned counts
				if m := segment(dst, pkt, &info, i); m != n {
					t.Fatalf("segment %d: length %d, segLen %d", i, m, n)
				}
				seg := finishChecksum(t, dst[:n])
				wire += len(seg)
				largest = max(largest, len(seg))
				l4 := info.l4Off
				tcp := seg[l4:]
				if tc.v6 {
					if got := int(binary.BigEndian.Uint16(seg[4:])); got != len(seg)-40 {
						t.Errorf("segment %d: payload length %d, want %d", i, got, len(seg)-40)
					}
				} else {
					if got := int(binary.BigEndian.Uint16(seg[2:])); got != len(seg) {
						t.Errorf("segment %d: total length %d, want %d", i, got, len(seg))
					}
					if got, want := binary.BigEndian.Uint16(seg[4:]), tc.id+uint16(i); got != want {
						t.Errorf("segment %d: id %d, want %d", i, got, want)
					}
					if c := sum16(seg[:info.ipHdr], 0); c != 0 {
						t.Errorf("segment %d: IPv4 header checksum off by %#x", i, c)
					}
				}
				if c := sum16(tcp, uint32(^sum16(pseudo(seg, tc.v6, len(tcp)), 0))); c != 0 {
					t.Errorf("segment %d: TCP checksum off by %#x", i, c)
				}
				if got, want := binary.BigEndian.Uint32(tcp[4:]), tc.seq+uint32(i*tc.mss); got != want {
					t.Errorf("segment %d: seq %d, want %d", i, got, want)
				}
				wantFlags := tc.flags
				if i != info.segs-1 {
					wantFlags &^= tcpFlagFIN | tcpFlagPSH
				}
				if i != 0 {
					wantFlags &^= tcpFlagCWR
				}
				if tcp[13] != wantFlags {
					t.Errorf("segment %d: flags %#x, want %#x", i, tcp[13], wantFlags)
				}
				// Everything else in the headers is the super-packet's.
				for _, r := range [][2]int{{l4, l4 + 4}, {l4 + 8, l4 + 13}, {l4 + 14, l4 + 16}, {l4 + 18, hdrLen}} {
					if !bytes.Equal(seg[r[0]:r[1]], orig[r[0]:r[1]]) {
						t.Errorf("segment %d: header bytes %d:%d changed", i, r[0], r[1])
					}
				}
				if tc.v6 {
					if !bytes.Equal(seg[6:l4], orig[6:l4]) || seg[0] != orig[0] {
						t.Errorf("segment %d: IPv6 header changed", i)
					}
				} else if !bytes.Equal(seg[12:info.ipHdr], orig[12:info.ipHdr]) || !bytes.Equal(seg[:2], orig[:2]) || !bytes.Equal(seg[6:10], orig[6:10]) {
					t.Errorf("segment %d: IPv4 header changed", i)
				}
				if i != info.segs-1 && len(seg)-hdrLen != tc.mss {
					t.Errorf("segment %d: %d payload bytes, want the mss %d", i, len(seg)-hdrLen, tc.mss)
				}
				payload = append(payload, seg[hdrLen:]...)
			}
			if !bytes.Equal(payload, orig[hdrLen:]) {
				t.Errorf("segments' payload differs from the super-packet's")
			}
			if wire != info.wireBytes {
				t.Errorf("segments carry %d bytes, parse said %d", wire, info.wireBytes)
			}
			if largest != info.segPacket {
				t.Errorf("the largest segment is %d bytes, parse said %d", largest, info.segPacket)
			}
		})
	}
}

// TestPacketSizes checks the largest wire segment parsePacket reports, as
// the emulator's max_segment_bytes and max_packet_bytes count them.
func TestPacketSizes(t *testing.T) {
	plain := func(pkt []byte) []byte { // the same packet, not offloaded
		pkt = bytes.Clone(pkt)
		pkt[1] = gsoNone
		return pkt
	}
	tcp4 := buildGSO(gsoCase{tcpOpts: 12, payload: 1000, mss: 1448})
	tcp6 := buildGSO(gsoCase{v6: true, v6Ext: true, payload: 700, mss: 1428})
	udp4 := buildUSO(false, 1200, 1472, 1)
	udp6 := buildUSO(true, 1200, 1452, 0)
	// An IPv6 fragment header (44) before UDP: the first fragment has a
	// UDP header, a later one does not.
	frag := func(offset uint16) []byte {
		pkt := plain(udp6)
		ip := pkt[vnetHdrLen:]
		ext := make([]byte, 8)
		ext[0] = protoUDP
		binary.BigEndian.PutUint16(ext[2:], offset<<3)
		out := append(bytes.Clone(pkt[:vnetHdrLen+40]), ext...)
		out = append(out, ip[40:]...)
		out[vnetHdrLen+6] = 44
		return out
	}
	v4Frag := plain(udp4)
	v4Frag[vnetHdrLen+7] = 100 // fragment offset 100 × 8
	icmp := plain(udp4)
	icmp[vnetHdrLen+9] = 1
	for _, tc := range []struct {
		name            string
		pkt             []byte
		payload, packet int
	}{
		{"tcp v4 gso", buildGSO(gsoCase{tcpOpts: 12, payload: 20000, mss: 8948}), 8948, 20 + 32 + 8948},
		{"tcp v4 gso, less than a segment", tcp4, 1000, 20 + 32 + 1000},
		{"tcp v4 plain", plain(tcp4), 1000, 20 + 32 + 1000},
		{"tcp v6 plain, extension header", plain(tcp6), 700, 40 + 8 + 20 + 700},
		{"udp v4 gso", buildUSO(false, 3000, 1000, 1), 1000, 20 + 8 + 1000},
		{"udp v6 gso", buildUSO(true, 2500, 1000, 0), 1000, 40 + 8 + 1000},
		{"udp v4 plain", plain(udp4), 1200, 20 + 8 + 1200},
		{"udp v6 plain", plain(udp6), 1200, 40 + 8 + 1200},
		{"udp v6 first fragment", frag(0), 1200, 40 + 8 + 8 + 1200},
		{"udp v6 later fragment", frag(10), 0, 40 + 8 + 8 + 1200},
		{"udp v4 later fragment", v4Frag, 0, 20 + 8 + 1200},
		{"icmp", icmp, 0, 20 + 8 + 1200},
		{"tcp gso header only", buildGSO(gsoCase{payload: 0, mss: 1000}), 0, 40},
		{"gso we cannot parse", buildUSO(false, 3000, 0, 1), 0, 0},
		{"short", []byte{1, 2, 3}, 0, 0},
		{"vnet header and a byte", append(make([]byte, vnetHdrLen), 0x45), 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, _ := parsePacket(tc.pkt)
			if info.segPayload != tc.payload || info.segPacket != tc.packet {
				t.Errorf("largest segment: %d payload bytes, packet %d; want %d, %d", info.segPayload, info.segPacket, tc.payload, tc.packet)
			}
		})
	}
}

func TestParsePacket(t *testing.T) {
	v4 := buildGSO(gsoCase{payload: 3000, mss: 1000})
	plain := bytes.Clone(v4)
	plain[1] = gsoNone
	badCsumStart := bytes.Clone(v4)
	badCsumStart[6] = 24
	udpGSO := bytes.Clone(v4)
	udpGSO[1] = gsoUDPL4
	noSize := bytes.Clone(v4)
	noSize[4], noSize[5] = 0, 0
	wrongVersion := bytes.Clone(v4)
	wrongVersion[1] = gsoTCPv6
	badLen := bytes.Clone(v4)
	badLen[vnetHdrLen+2]++
	headerOnly := buildGSO(gsoCase{payload: 0, mss: 1000})
	uso4 := buildUSO(false, 3000, 1000, 1)
	uso6 := buildUSO(true, 2500, 1000, 0)
	usoBadLen := bytes.Clone(uso4)
	usoBadLen[vnetHdrLen+20+5]++ // the UDP length
	usoTCPType := bytes.Clone(uso4)
	usoTCPType[1] = gsoTCPv4
	ufo := bytes.Clone(uso4)
	ufo[1] = gsoUDP
	for _, tc := range []struct {
		name     string
		pkt      []byte
		segs     int
		tcp, err bool
	}{
		{"gso", v4, 3, true, false},
		{"plain", plain, 1, false, false},
		{"short", []byte{1, 2, 3}, 1, false, true},
		{"csum_start elsewhere", badCsumStart, 1, false, true},
		{"udp gso", udpGSO, 1, false, true},
		{"gso size 0", noSize, 1, false, true},
		{"version mismatch", wrongVersion, 1, false, true},
		{"total length mismatch", badLen, 1, false, true},
		{"header only", headerOnly, 1, false, false},
		{"truncated", v4[:vnetHdrLen+30], 1, false, true},
		{"udp gso v4", uso4, 3, true, false},
		{"udp gso v6", uso6, 3, true, false},
		{"udp gso length mismatch", usoBadLen, 1, false, true},
		{"udp with tcp gso type", usoTCPType, 1, false, true},
		{"udp fragmentation offload", ufo, 1, false, true},
		{"udp gso truncated", uso4[:vnetHdrLen+24], 1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := parsePacket(tc.pkt)
			if (err != nil) != tc.err || info.segs != tc.segs || info.split != tc.tcp {
				t.Errorf("parse: %+v, %v; want %d segments, tcp %v, error %v", info, err, tc.segs, tc.tcp, tc.err)
			}
			if info.segs == 1 && len(tc.pkt) >= vnetHdrLen && info.wireBytes != len(tc.pkt)-vnetHdrLen {
				t.Errorf("wire bytes %d, want %d", info.wireBytes, len(tc.pkt)-vnetHdrLen)
			}
		})
	}
}

// FuzzParsePacket feeds arbitrary reads to the parser and the splitter:
// neither may panic, and the segments must carry the payload exactly.
func FuzzParsePacket(f *testing.F) {
	// Small seeds: the fuzzer minimises every interesting input, slowly
	// for kilobytes.
	f.Add(buildGSO(gsoCase{payload: 100, mss: 40, tcpOpts: 12}))
	f.Add(buildGSO(gsoCase{v6: true, v6Ext: true, payload: 101, mss: 40}))
	f.Add(buildGSO(gsoCase{ipOpts: 4, payload: 3, mss: 1}))
	f.Add(buildUSO(false, 100, 40, 1))
	f.Add(buildUSO(true, 81, 40, 0))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		info, err := parsePacket(pkt)
		if info.segs < 1 {
			t.Fatalf("%d segments", info.segs)
		}
		if info.segPayload < 0 || info.segPayload > info.segPacket || info.segPacket > max(0, len(pkt)-vnetHdrLen) {
			t.Fatalf("largest segment: %d payload bytes in a %d-byte packet, read %d bytes", info.segPayload, info.segPacket, len(pkt))
		}
		if err != nil || !info.split {
			return
		}
		if info.segs > 4096 {
			return // a tiny gso_size: correct but slow to check
		}
		total := 0
		for i := range info.segs {
			dst := make([]byte, info.segLen(pkt, i))
			n := segment(dst, pkt, &info, i)
			total += n - vnetHdrLen - info.hdrLen
		}
		if want := len(pkt) - vnetHdrLen - info.hdrLen; total != want {
			t.Fatalf("segments carry %d payload bytes, want %d", total, want)
		}
		// Two runs carry the payload too.
		half, runs := info.segs/2, 0
		for _, r := range [][2]int{{0, half}, {half, info.segs}} {
			if r[0] == r[1] {
				continue
			}
			dst := make([]byte, info.runLen(pkt, r[0], r[1]))
			runs += segmentRun(dst, pkt, &info, r[0], r[1]) - vnetHdrLen - info.hdrLen
		}
		if runs != total {
			t.Fatalf("runs carry %d payload bytes, segments %d", runs, total)
		}
	})
}

// buildUSO builds a UDP GSO batch as the kernel hands it to a device with
// USO: virtio header (GSO_UDP_L4), IP, one UDP header whose length and
// partial checksum cover the whole batch, payload.
func buildUSO(v6 bool, payload, segSize int, id uint16) []byte {
	var ip []byte
	l4Off := 20
	udpLen := udpHdrLen + payload
	if v6 {
		l4Off = 40
		ip = make([]byte, 40+udpLen)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6], ip[7] = protoUDP, 64
		copy(ip[8:], []byte{0x20, 0x01, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1})
		copy(ip[24:], []byte{0x20, 0x01, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2})
	} else {
		ip = make([]byte, 20+udpLen)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		binary.BigEndian.PutUint16(ip[4:], id)
		ip[6] = 0x40
		ip[8], ip[9] = 64, protoUDP
		copy(ip[12:], []byte{198, 18, 1, 1, 198, 18, 2, 2})
		binary.BigEndian.PutUint16(ip[10:], ^sum16(ip[:20], 0))
	}
	udp := ip[l4Off:]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], 9000)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	for i := udpHdrLen; i < len(udp); i++ {
		udp[i] = byte(i*13 + i>>8)
	}
	binary.BigEndian.PutUint16(udp[6:], ^sum16(pseudoProto(ip, v6, len(udp), protoUDP), 0))

	hdr := make([]byte, vnetHdrLen)
	hdr[0] = vnetFlagNeedsCsum
	hdr[1] = gsoUDPL4
	binary.LittleEndian.PutUint16(hdr[2:], uint16(l4Off+udpHdrLen))
	binary.LittleEndian.PutUint16(hdr[4:], uint16(segSize))
	binary.LittleEndian.PutUint16(hdr[6:], uint16(l4Off))
	binary.LittleEndian.PutUint16(hdr[8:], udpCsumOff)
	return append(hdr, ip...)
}

// pseudoProto is pseudo for another L4 protocol.
func pseudoProto(ip []byte, v6 bool, n int, proto byte) []byte {
	p := pseudo(ip, v6, n)
	if v6 {
		p[39] = proto
	} else {
		p[9] = proto
	}
	return p
}

func TestSegmentUDP(t *testing.T) {
	for _, tc := range []struct {
		name            string
		v6              bool
		payload, size   int
		id              uint16
		wantSegs, wantL int // segments, payload of the last
	}{
		{"v4 44 datagrams", false, 44 * 1472, 1472, 9, 44, 1472},
		{"v4 ragged tail", false, 10*1472 + 100, 1472, 1, 11, 100},
		{"v4 odd size, id wraps", false, 5*1001 + 1, 1001, 0xfffe, 6, 1},
		{"v4 one datagram", false, 700, 1472, 3, 1, 700},
		{"v4 jumbo", false, 7 * 8972, 8972, 5, 7, 8972},
		{"v6", true, 40 * 1452, 1452, 0, 40, 1452},
		{"v6 ragged", true, 3*1452 + 7, 1452, 0, 4, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkt := buildUSO(tc.v6, tc.payload, tc.size, tc.id)
			orig := pkt[vnetHdrLen:]
			info, err := parsePacket(pkt)
			if err != nil {
				t.Fatal(err)
			}
			if !info.split || info.proto != protoUDP || info.segs != tc.wantSegs || info.gsoSize != tc.size || info.hdrLen != info.l4Off+udpHdrLen {
				t.Fatalf("parse: %+v, want %d UDP datagrams of %d", info, tc.wantSegs, tc.size)
			}
			if want := len(orig) + (tc.wantSegs-1)*info.hdrLen; info.wireBytes != want {
				t.Errorf("wire bytes %d, want %d", info.wireBytes, want)
			}
			var payload []byte
			wire := 0
			for i := range info.segs {
				n := info.segLen(pkt, i)
				dst := make([]byte, n+3)
				if m := segment(dst, pkt, &info, i); m != n {
					t.Fatalf("datagram %d: length %d, segLen %d", i, m, n)
				}
				if off := binary.LittleEndian.Uint16(dst[8:]); off != udpCsumOff {
					t.Errorf("datagram %d: csum_offset %d, want %d", i, off, udpCsumOff)
				}
				seg := finishChecksum(t, dst[:n])
				wire += len(seg)
				udp := seg[info.l4Off:]
				if got := int(binary.BigEndian.Uint16(udp[4:])); got != len(udp) {
					t.Errorf("datagram %d: UDP length %d, want %d", i, got, len(udp))
				}
				if c := sum16(udp, uint32(^sum16(pseudoProto(seg, tc.v6, len(udp), protoUDP), 0))); c != 0 {
					t.Errorf("datagram %d: UDP checksum off by %#x", i, c)
				}
				if tc.v6 {
					if got := int(binary.BigEndian.Uint16(seg[4:])); got != len(seg)-40 {
						t.Errorf("datagram %d: payload length %d, want %d", i, got, len(seg)-40)
					}
				} else {
					if got := int(binary.BigEndian.Uint16(seg[2:])); got != len(seg) {
						t.Errorf("datagram %d: total length %d, want %d", i, got, len(seg))
					}
					if got, want := binary.BigEndian.Uint16(seg[4:]), tc.id+uint16(i); got != want {
						t.Errorf("datagram %d: id %d, want %d", i, got, want)
					}
					if c := sum16(seg[:20], 0); c != 0 {
						t.Errorf("datagram %d: IPv4 header checksum off by %#x", i, c)
					}
				}
				if !bytes.Equal(udp[:4], orig[info.l4Off:info.l4Off+4]) {
					t.Errorf("datagram %d: ports changed", i)
				}
				want := tc.size
				if i == info.segs-1 {
					want = tc.wantL
				}
				if len(udp)-udpHdrLen != want {
					t.Errorf("datagram %d: %d payload bytes, want %d", i, len(udp)-udpHdrLen, want)
				}
				payload = append(payload, udp[udpHdrLen:]...)
			}
			if !bytes.Equal(payload, orig[info.hdrLen:]) {
				t.Errorf("datagrams' payload differs from the batch's")
			}
			if wire != info.wireBytes {
				t.Errorf("datagrams carry %d bytes, parse said %d", wire, info.wireBytes)
			}
		})
	}
}

// singles cuts a packet as the kernel would (a GSO packet into its
// segments, through the code under test, which TestSegmentTCP and
// TestSegmentUDP check against an independent checksum), and returns the
// segments with their checksums finished.
func singles(t *testing.T, pkt []byte) [][]byte {
	t.Helper()
	if pkt[1] == gsoNone {
		return [][]byte{finishChecksum(t, pkt)}
	}
	info, err := parsePacket(pkt)
	if err != nil || !info.split {
		t.Fatalf("a run does not parse as a super-packet: %+v, %v", info, err)
	}
	var out [][]byte
	for i := range info.segs {
		dst := make([]byte, info.segLen(pkt, i))
		segment(dst, pkt, &info, i)
		out = append(out, finishChecksum(t, dst))
	}
	return out
}

// TestSegmentRun checks that a run of segments cut from a super-packet is
// a super-packet the kernel cuts into exactly the segments it would have
// cut from the whole: segmenting the run gives the same bytes as
// segmenting the original.
func TestSegmentRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkt  []byte
	}{
		{"tcp v4", buildGSO(gsoCase{payload: 10*1448 + 333, mss: 1448, tcpOpts: 12, flags: 0x80 | 0x18 | 0x01, ecn: true, seq: 0xffffff00, id: 0xfffc})},
		{"tcp v6", buildGSO(gsoCase{v6: true, v6Ext: true, payload: 9 * 1420, mss: 1420, flags: 0x18, seq: 5})},
		{"udp v4", buildUSO(false, 10*1472+100, 1472, 0xfffd)},
		{"udp v6", buildUSO(true, 9*1452, 1452, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := parsePacket(tc.pkt)
			if err != nil {
				t.Fatal(err)
			}
			want := make([][]byte, info.segs)
			for k := range info.segs {
				dst := make([]byte, info.segLen(tc.pkt, k))
				segment(dst, tc.pkt, &info, k)
				want[k] = dst
			}
			for _, r := range [][2]int{{0, info.segs}, {0, 2}, {0, 1}, {1, 4}, {3, info.segs}, {info.segs - 2, info.segs}, {info.segs - 1, info.segs}} {
				i, j := r[0], r[1]
				run := make([]byte, info.runLen(tc.pkt, i, j))
				if n := segmentRun(run, tc.pkt, &info, i, j); n != len(run) {
					t.Fatalf("run [%d,%d): length %d, runLen %d", i, j, n, len(run))
				}
				if j-i == 1 {
					if !bytes.Equal(run, want[i]) {
						t.Errorf("run [%d,%d) differs from segment %d", i, j, i)
					}
					continue
				}
				ri, err := parsePacket(run)
				if err != nil || !ri.split || ri.segs != j-i || ri.gsoSize != info.gsoSize || run[1] != tc.pkt[1] {
					t.Fatalf("run [%d,%d): %+v, %v; want %d segments of %d", i, j, ri, err, j-i, info.gsoSize)
				}
				if wire := ri.wireBytes; wire != info.runLen(tc.pkt, i, j)-vnetHdrLen+(j-i-1)*info.hdrLen {
					t.Errorf("run [%d,%d): %d wire bytes", i, j, wire)
				}
				for k := range j - i {
					dst := make([]byte, ri.segLen(run, k))
					segment(dst, run, &ri, k)
					if !bytes.Equal(dst, want[i+k]) {
						t.Errorf("run [%d,%d): its segment %d differs from the original's segment %d", i, j, k, i+k)
					}
				}
			}
		})
	}
}
