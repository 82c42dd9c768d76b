package wire

import (
	"encoding/binary"

	"github.com/lightpath/lightpath/internal/checksum"
)

// Data stream frame types.
const (
	DataBlock = 1 // a block header, followed by Length payload bytes
	DataHole  = 2 // a block that is all zeros; no payload follows
	DataEnd   = 3 // the sender has nothing more on this stream
)

// BlockHeaderSize is the size of a data stream frame header.
const BlockHeaderSize = 24

// BlockHeader introduces a block on a data stream. CRC covers the payload
// (or Length zero bytes for a hole); HeaderCRC covers the first 20 bytes of
// the header itself, so a header damaged in flight can never place a good
// payload at the wrong offset.
type BlockHeader struct {
	Kind   uint8
	File   uint32
	Index  uint32
	Length uint32
	CRC    uint32
}

// Put encodes h into b, which must hold BlockHeaderSize bytes.
func (h BlockHeader) Put(b []byte) {
	_ = b[BlockHeaderSize-1]
	b[0] = h.Kind
	b[1], b[2], b[3] = 0, 0, 0
	binary.BigEndian.PutUint32(b[4:], h.File)
	binary.BigEndian.PutUint32(b[8:], h.Index)
	binary.BigEndian.PutUint32(b[12:], h.Length)
	binary.BigEndian.PutUint32(b[16:], h.CRC)
	binary.BigEndian.PutUint32(b[20:], checksum.CRC32C(b[:20]))
}

// ParseBlockHeader decodes and checks a header.
func ParseBlockHeader(b []byte) (BlockHeader, error) {
	if len(b) != BlockHeaderSize {
		return BlockHeader{}, malformed("block header of %d bytes", len(b))
	}
	if checksum.CRC32C(b[:20]) != binary.BigEndian.Uint32(b[20:]) {
		return BlockHeader{}, malformed("block header checksum mismatch")
	}
	h := BlockHeader{
		Kind:   b[0],
		File:   binary.BigEndian.Uint32(b[4:]),
		Index:  binary.BigEndian.Uint32(b[8:]),
		Length: binary.BigEndian.Uint32(b[12:]),
		CRC:    binary.BigEndian.Uint32(b[16:]),
	}
	if h.Kind < DataBlock || h.Kind > DataEnd {
		return h, malformed("unknown data frame kind %d", h.Kind)
	}
	if b[1] != 0 || b[2] != 0 || b[3] != 0 {
		return h, malformed("reserved header bytes set")
	}
	return h, nil
}
