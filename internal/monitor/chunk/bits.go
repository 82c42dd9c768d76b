package chunk

// bitWriter appends bits, most significant first, to a byte slice.
type bitWriter struct {
	b    []byte
	free uint8 // unused low bits in the last byte (0..7)
}

// writeBits writes the low n bits of v (n ≤ 64).
func (w *bitWriter) writeBits(v uint64, n int) {
	for n > 0 {
		if w.free == 0 {
			w.b = append(w.b, 0)
			w.free = 8
		}
		take := min(n, int(w.free))
		chunk := (v >> uint(n-take)) & (1<<uint(take) - 1)
		w.b[len(w.b)-1] |= byte(chunk << (w.free - uint8(take)))
		w.free -= uint8(take)
		n -= take
	}
}

// bitReader reads bits written by bitWriter; reading past the end is an
// error, which is how a truncated chunk is detected.
type bitReader struct {
	b   []byte
	pos int // in bits
}

func (r *bitReader) readBit() (bool, error) {
	v, err := r.readBits(1)
	return v == 1, err
}

func (r *bitReader) readBits(n int) (uint64, error) {
	if n < 0 || n > 64 || r.pos+n > len(r.b)*8 {
		return 0, ErrCorrupt
	}
	var v uint64
	for n > 0 {
		off := r.pos % 8
		avail := 8 - off
		take := min(n, avail)
		bits := uint64(r.b[r.pos/8]>>uint(avail-take)) & (1<<uint(take) - 1)
		v = v<<uint(take) | bits
		r.pos += take
		n -= take
	}
	return v, nil
}

// countOnes reads up to max one-bits ending at the first zero (a unary prefix).
func (r *bitReader) countOnes(max int) (int, error) {
	n := 0
	for n < max {
		b, err := r.readBit()
		if err != nil {
			return 0, err
		}
		if !b {
			break
		}
		n++
	}
	return n, nil
}
