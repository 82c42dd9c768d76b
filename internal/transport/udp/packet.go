package udp

import (
	"encoding/binary"
	"errors"
)

// The datagram format (docs/udp.md). Every datagram is
//
//	0      version (2)
//	1      type
//	2..3   flags
//	4..7   stream id
//	8..23  session id
//	24..31 packet number: per direction, never reused, the MAC's nonce
//	32..   body (by type)
//	last 16 bytes: the MAC (AES-128-GCM over everything before it, as GMAC)
//
// all integers big-endian.
const (
	version = 2 // 2: DATA's retransmission flag, ACK's repair count
	hdrLen  = 32
	tagLen  = 16
	minLen  = hdrLen + tagLen
)

type ptype uint8

const (
	tSYN    ptype = 1 // dialler: opens a stream; body: client random, window
	tSYNACK ptype = 2 // listener: accepts it; body: window
	tDATA   ptype = 3 // body: offset, payload; flag fFIN ends the stream
	tACK    ptype = 4 // body: ack
	tRST    ptype = 5 // body: code; the stream is over
	tPING   ptype = 6 // no body; asks for an ACK (a window probe)
)

const (
	fFIN    uint16 = 1 // DATA: the stream ends after this payload
	fFINACK uint16 = 2 // ACK: the peer's FIN arrived (all its bytes are in)
	fRETX   uint16 = 4 // DATA: the payload was sent before (a retransmission)
)

// header is a datagram's fixed part.
type header struct {
	typ     ptype
	flags   uint16
	stream  uint32
	session [16]byte
	pn      uint64
}

var (
	errShort   = errors.New("datagram too short")
	errVersion = errors.New("unknown protocol version")
	errType    = errors.New("unknown datagram type")
	errBody    = errors.New("malformed body")
)

// parseHeader reads the fixed part of b and returns the body (between the
// header and the MAC). It does not check the MAC.
func parseHeader(b []byte) (header, []byte, error) {
	var h header
	if len(b) < minLen {
		return h, nil, errShort
	}
	if b[0] != version {
		return h, nil, errVersion
	}
	h.typ = ptype(b[1])
	if h.typ < tSYN || h.typ > tPING {
		return h, nil, errType
	}
	h.flags = binary.BigEndian.Uint16(b[2:])
	h.stream = binary.BigEndian.Uint32(b[4:])
	copy(h.session[:], b[8:24])
	h.pn = binary.BigEndian.Uint64(b[24:])
	return h, b[hdrLen : len(b)-tagLen], nil
}

// putHeader writes h into b[:hdrLen].
func putHeader(b []byte, h header) {
	b[0] = version
	b[1] = byte(h.typ)
	binary.BigEndian.PutUint16(b[2:], h.flags)
	binary.BigEndian.PutUint32(b[4:], h.stream)
	copy(b[8:24], h.session[:])
	binary.BigEndian.PutUint64(b[24:], h.pn)
}

// syn is the body of SYN: the dialler's random, from which (with the
// secret, session and stream) both directions' keys are derived, the
// dialler's receive window, and the path MTU the dialler's connected
// socket sees (the listener, whose socket is not connected, starts from
// it).
type syn struct {
	random [16]byte
	window uint64
	mtu    uint16
}

const synLen = 26

func (s syn) put(b []byte) []byte {
	b = append(b, s.random[:]...)
	b = binary.BigEndian.AppendUint64(b, s.window)
	return binary.BigEndian.AppendUint16(b, s.mtu)
}

func parseSyn(b []byte) (syn, error) {
	var s syn
	if len(b) != synLen {
		return s, errBody
	}
	copy(s.random[:], b)
	s.window = binary.BigEndian.Uint64(b[16:])
	s.mtu = binary.BigEndian.Uint16(b[24:])
	return s, nil
}

// synRandom reads the random of a SYN before its MAC can be checked (the
// keys depend on it).
func synRandom(body []byte) ([16]byte, bool) {
	var r [16]byte
	if len(body) != synLen {
		return r, false
	}
	copy(r[:], body)
	return r, true
}

// DATA's body: the payload's stream offset, then the payload.
const dataHdr = 8

func parseData(b []byte) (off uint64, payload []byte, err error) {
	if len(b) < dataHdr {
		return 0, nil, errBody
	}
	off = binary.BigEndian.Uint64(b)
	payload = b[dataHdr:]
	if off+uint64(len(payload)) < off {
		return 0, nil, errBody
	}
	return off, payload, nil
}

// span is a range of stream offsets [start, end).
type span struct{ start, end uint64 }

// ack is the receiver's report: every byte below cum arrived; the sender
// may send bytes below limit (flow control); sack lists ranges that
// arrived above cum, nak the holes the receiver judges lost (past its
// reorder tolerance); echo is the highest packet number received, delay
// how long the receiver held it before this ack (both for the round trip);
// ce counts the datagrams that arrived marked Congestion Experienced;
// repairs the retransmissions that brought bytes the receiver lacked (the
// sender's count of real loss: a retransmission whose original arrived
// after all repaired nothing).
type ack struct {
	cum, limit uint64
	echo       uint64
	delay      uint32 // microseconds
	ce         uint32
	repairs    uint32
	sack, nak  []span
}

const (
	ackFixed = 8 + 8 + 8 + 4 + 4 + 4 + 1 + 1
	maxSpans = 32 // of each kind per ack
)

func (a *ack) put(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, a.cum)
	b = binary.BigEndian.AppendUint64(b, a.limit)
	b = binary.BigEndian.AppendUint64(b, a.echo)
	b = binary.BigEndian.AppendUint32(b, a.delay)
	b = binary.BigEndian.AppendUint32(b, a.ce)
	b = binary.BigEndian.AppendUint32(b, a.repairs)
	ns, nn := min(len(a.sack), maxSpans), min(len(a.nak), maxSpans)
	b = append(b, byte(ns), byte(nn))
	for _, s := range a.sack[:ns] {
		b = binary.BigEndian.AppendUint64(b, s.start)
		b = binary.BigEndian.AppendUint64(b, s.end)
	}
	for _, s := range a.nak[:nn] {
		b = binary.BigEndian.AppendUint64(b, s.start)
		b = binary.BigEndian.AppendUint64(b, s.end)
	}
	return b
}

// parseAck reads an ack into a, reusing its span slices. Spans must be
// non-empty and lie above cum.
func parseAck(b []byte, a *ack) error {
	if len(b) < ackFixed {
		return errBody
	}
	a.cum = binary.BigEndian.Uint64(b)
	a.limit = binary.BigEndian.Uint64(b[8:])
	a.echo = binary.BigEndian.Uint64(b[16:])
	a.delay = binary.BigEndian.Uint32(b[24:])
	a.ce = binary.BigEndian.Uint32(b[28:])
	a.repairs = binary.BigEndian.Uint32(b[32:])
	ns, nn := int(b[36]), int(b[37])
	if ns > maxSpans || nn > maxSpans || len(b) != ackFixed+16*(ns+nn) {
		return errBody
	}
	p := b[ackFixed:]
	read := func(dst []span, n int) ([]span, error) {
		dst = dst[:0]
		for range n {
			s := span{binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])}
			p = p[16:]
			if s.start >= s.end || s.start < a.cum {
				return dst, errBody
			}
			dst = append(dst, s)
		}
		return dst, nil
	}
	var err error
	if a.sack, err = read(a.sack, ns); err != nil {
		return err
	}
	a.nak, err = read(a.nak, nn)
	return err
}

// RST's body: why.
const (
	rstClosed  uint32 = 1 // the peer closed with data unread, or data came after its Close
	rstRefused uint32 = 2 // the listener will not take the stream
)

func parseRst(b []byte) (uint32, error) {
	if len(b) != 4 {
		return 0, errBody
	}
	return binary.BigEndian.Uint32(b), nil
}
