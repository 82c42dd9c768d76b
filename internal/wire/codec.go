// Package wire is the mover's framed wire protocol: the opening handshake,
// the control messages of a session and the block headers of its data
// streams. It only encodes and decodes; it never touches sockets or files
// beyond the io.Reader and io.Writer it is handed. docs/protocol.md describes
// the format byte by byte.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/lightpath/lightpath/internal/retry"
)

// ErrMalformed is wrapped by every decoding error caused by the peer's bytes
// (as opposed to an I/O error), so callers can tell a broken peer from a
// broken connection. It is permanent for retry: the same peer sends the
// same bytes again.
var ErrMalformed = retry.Permanent(errors.New("malformed message"))

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// enc appends values to a byte slice.
type enc struct{ b []byte }

func (e *enc) u8(v uint8)   { e.b = append(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *enc) uv(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) iv(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) boolean(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}
func (e *enc) bytes(v []byte) { e.uv(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) str(v string)   { e.uv(uint64(len(v))); e.b = append(e.b, v...) }

// dec reads values from a byte slice; the first error sticks and later reads
// return zero values, so decoders check once at the end.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = malformed("truncated %s", what)
	}
}

func (d *dec) u8(what string) uint8 {
	if d.err != nil || len(d.b) < 1 {
		d.fail(what)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) u32(what string) uint32 {
	if d.err != nil || len(d.b) < 4 {
		d.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *dec) uv(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) iv(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length or element count and checks it against what is left,
// given that each element takes at least minSize bytes; this is what keeps a
// forged count from allocating gigabytes.
func (d *dec) count(what string, minSize int) int {
	v := d.uv(what)
	if d.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if v > uint64(len(d.b)/minSize) {
		d.err = malformed("%s count %d exceeds the %d bytes left", what, v, len(d.b))
		return 0
	}
	return int(v)
}

func (d *dec) boolean(what string) bool {
	switch d.u8(what) {
	case 0:
		return false
	case 1:
		return true
	default:
		if d.err == nil {
			d.err = malformed("%s: not a boolean", what)
		}
		return false
	}
}

func (d *dec) raw(what string) []byte {
	n := d.count(what, 1)
	if d.err != nil {
		return nil
	}
	v := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return v
}

func (d *dec) str(what string) string {
	n := d.count(what, 1)
	if d.err != nil {
		return ""
	}
	v := string(d.b[:n])
	d.b = d.b[n:]
	return v
}

func (d *dec) int(what string, max int64) int64 {
	v := d.iv(what)
	if d.err == nil && (v < 0 || v > max) {
		d.err = malformed("%s %d out of range [0, %d]", what, v, max)
	}
	return v
}

// un reads an unsigned varint no larger than max.
func (d *dec) un(what string, max uint64) uint64 {
	v := d.uv(what)
	if d.err == nil && v > max {
		d.err = malformed("%s %d out of range [0, %d]", what, v, max)
	}
	return v
}

func (d *dec) end(what string) error {
	if d.err != nil {
		return fmt.Errorf("%s: %w", what, d.err)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%s: %w", what, malformed("%d trailing bytes", len(d.b)))
	}
	return nil
}

const maxInt64 = math.MaxInt64
