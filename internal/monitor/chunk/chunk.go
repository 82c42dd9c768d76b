// Package chunk encodes the monitoring repository's series chunks: a
// compressed, append-only run of (timestamp in milliseconds, float64 value)
// samples of one series.
//
// The repository keeps series in chunks, not a row per sample, because a row
// costs tens of bytes and the raw tier's budget is about 2 bytes per sample.
// The encoding follows Facebook's Gorilla (as Prometheus' XOR chunks do):
// monitoring samples come at a nearly fixed interval, so the delta of the
// timestamp deltas is mostly zero or small and takes a few bits; values
// often repeat or change little.
//
// Values get one addition to Gorilla's XOR scheme: most of what the agents
// report are integers (counters) or short decimals (a utilisation of 0.734),
// whose XOR with the previous value still has tens of meaningful bits. When
// both the previous and the new value are exactly k-decimal numbers
// (float64(n)/10^k, bit for bit), the chunk stores the difference of the
// scaled integers instead, which for a counter or a slowly moving gauge
// takes a byte or less. Every value, NaN and ±Inf included, decodes back bit
// for bit.
//
// Layout: a 2-byte big-endian sample count, then a bit stream. The first
// sample is a zig-zag varint timestamp and 64 raw value bits; the second
// stores its timestamp delta as a varint; later ones store the delta's
// difference from a prediction (the last delta, Gorilla's delta-of-delta, or
// the deltas' running mean, whichever has done better) with an adaptive
// Golomb-Rice code (rather than Gorilla's fixed buckets, which spend 9 bits
// or more on any jitter). Each value after
// the first starts with a prefix: '0' same bits as the previous; '10'
// decimal difference at the last scale (Rice-coded, against a prediction
// that learns whether the series moves at a steady rate); '110' a new scale
// (4 bits) and the difference; '111' Gorilla XOR, reusing the previous
// leading/trailing zero window ('0') or giving a new one ('1', 5 bits of
// leading zeros and 6 of meaningful bits).
//
// A Chunk is not safe for concurrent use.
package chunk

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
)

// MaxSamples is the most samples one chunk holds (the count is 2 bytes).
const MaxSamples = math.MaxUint16

var (
	// ErrOutOfOrder is returned by Append for a timestamp not after the last.
	ErrOutOfOrder = errors.New("chunk: sample not after the last one")
	// ErrFull is returned by Append when the chunk holds MaxSamples.
	ErrFull = errors.New("chunk: full")
	// ErrCorrupt is returned for bytes that are not a valid chunk.
	ErrCorrupt = errors.New("chunk: corrupt or truncated")
)

const headerLen = 2

// maxScale is the largest decimal scale (values of n/10^maxScale).
const maxScale = 15

var pow10 = func() [maxScale + 1]float64 {
	var p [maxScale + 1]float64
	for i := range p {
		p[i] = math.Pow10(i)
	}
	return p
}()

// Chunk is a compressed, append-only run of samples. The zero value is not
// usable; call NewChunk or FromBytes.
type Chunk struct {
	w  bitWriter
	st state
}

// state is what encoder and decoder both track between samples.
type state struct {
	n        int
	t        int64
	delta    uint64 // last timestamp delta (wrapping arithmetic)
	v        float64
	scale    int
	leading  int
	trailing int
	window   bool // leading/trailing are set

	// rate is a running mean of the decimal differences at the current
	// scale and score how much better (negative) predicting the next
	// difference to be rate has done than predicting zero: counters move at
	// a steady rate, gauges wander. Encoder and decoder update both from
	// decoded values, so choosing costs no bits.
	rate  int64
	score int

	tc, vc rice // timestamps' and decimal values' residual coders

	// dq is a running mean of the timestamp deltas (×16) and tscore how
	// much better (negative) it has predicted the next delta than the last
	// delta did (Gorilla's delta-of-delta). A scrape's jitter is
	// independent from one sample to the next, so against the mean it costs
	// about a bit less than against the last delta; a missed scrape, though,
	// upsets the mean for a while, and then the last delta wins.
	dq     int64
	tscore int
}

func (s *state) predictDelta() uint64 {
	if s.tscore < 0 {
		return uint64((s.dq + 8) >> 4)
	}
	return s.delta
}

func (s *state) learnDelta(d uint64) {
	s.tscore += bits.Len64(zigzag(int64(d-uint64((s.dq+8)>>4)))) - bits.Len64(zigzag(int64(d-s.delta)))
	s.tscore = max(-8, min(8, s.tscore))
	s.dq += (int64(d<<4) - s.dq) >> 3
	s.delta = d
}

// prediction returns the predicted scaled integer after p.
func (s *state) prediction(p int64) int64 {
	if s.score < 0 {
		return p + s.rate
	}
	return p
}

// learn updates the predictor with the difference just stored.
func (s *state) learn(diff int64) {
	s.score += bits.Len64(zigzag(diff-s.rate)) - bits.Len64(zigzag(diff))
	s.score = max(-8, min(8, s.score))
	s.rate += (diff - s.rate) >> 2
}

// NewChunk returns an empty chunk.
func NewChunk() *Chunk {
	return &Chunk{w: bitWriter{b: make([]byte, headerLen, 128)}}
}

// Len returns the number of samples.
func (c *Chunk) Len() int { return c.st.n }

// Bytes returns the encoded chunk. It aliases the chunk's buffer: it is
// valid until the next Append.
func (c *Chunk) Bytes() []byte { return c.w.b }

// Append adds a sample. The timestamp must be after the last one.
func (c *Chunk) Append(t int64, v float64) error {
	s := &c.st
	if s.n >= MaxSamples {
		return ErrFull
	}
	if s.n > 0 && t <= s.t {
		return ErrOutOfOrder
	}
	w := &c.w
	switch s.n {
	case 0:
		writeUvarint(w, zigzag(t))
		w.writeBits(math.Float64bits(v), 64)
	case 1:
		d := uint64(t) - uint64(s.t)
		writeUvarint(w, d)
		s.delta, s.dq = d, int64(d<<4)
		c.appendValue(v)
	default:
		d := uint64(t) - uint64(s.t)
		s.tc.write(w, zigzag(int64(d-s.predictDelta())))
		s.learnDelta(d)
		c.appendValue(v)
	}
	s.t, s.v = t, v
	s.n++
	binary.BigEndian.PutUint16(w.b, uint16(s.n))
	return nil
}

func (c *Chunk) appendValue(v float64) {
	w, s := &c.w, &c.st
	if math.Float64bits(v) == math.Float64bits(s.v) {
		w.writeBits(0b0, 1)
		s.learn(0)
		return
	}
	if p, n, ok := decimalPair(s.v, v, s.scale); ok {
		w.writeBits(0b10, 2)
		s.vc.write(w, zigzag(n-s.prediction(p)))
		s.learn(n - p)
		return
	}
	for k := 0; k <= maxScale; k++ {
		if k == s.scale {
			continue
		}
		if p, n, ok := decimalPair(s.v, v, k); ok {
			w.writeBits(0b110, 3)
			w.writeBits(uint64(k), 4)
			s.scale, s.rate = k, 0
			s.vc.write(w, zigzag(n-s.prediction(p)))
			s.learn(n - p)
			return
		}
	}
	s.rate = 0
	w.writeBits(0b111, 3)
	x := math.Float64bits(v) ^ math.Float64bits(s.v)
	lead, trail := bits.LeadingZeros64(x), bits.TrailingZeros64(x)
	if lead > 31 {
		lead = 31
	}
	if s.window && lead >= s.leading && trail >= s.trailing {
		w.writeBits(0b0, 1)
		w.writeBits(x>>uint(s.trailing), 64-s.leading-s.trailing)
		return
	}
	sig := 64 - lead - trail
	w.writeBits(0b1, 1)
	w.writeBits(uint64(lead), 5)
	w.writeBits(uint64(sig&63), 6) // 64 is written as 0
	w.writeBits(x>>uint(trail), sig)
	s.leading, s.trailing, s.window = lead, trail, true
}

// decimalInt returns n where x == float64(n)/10^k bit for bit, |n| < 2^53.
func decimalInt(x float64, k int) (int64, bool) {
	r := math.Round(x * pow10[k])
	if !(math.Abs(r) < 1<<53) {
		return 0, false
	}
	if math.Float64bits(r/pow10[k]) != math.Float64bits(x) {
		return 0, false
	}
	return int64(r), true
}

// decimalPair returns prev and v scaled by 10^k when the decoder, knowing
// prev, gets v back exactly from the scaled integers.
func decimalPair(prev, v float64, k int) (p, n int64, ok bool) {
	p, ok = decimalInt(prev, k)
	if !ok {
		return 0, 0, false
	}
	n, ok = decimalInt(v, k)
	if !ok || math.Float64bits(float64(n)/pow10[k]) != math.Float64bits(v) {
		return 0, 0, false // e.g. -0, which n/10^k gives back as +0
	}
	return p, n, true
}

// rice is an adaptive Golomb-Rice coder (as in JPEG-LS) for zig-zagged
// residuals: a sample costs about the bits of the residuals' recent mean
// magnitude plus two, so a timestamp jitter of ±5 ms costs fewer bits than
// one of ±50 ms, and a repeated residual of zero costs one bit, as in
// Gorilla. Encoder and decoder adapt it alike from the coded values.
type rice struct {
	sum, n uint64
}

const (
	riceReset  = 32 // halve the statistics after this many values
	riceEscape = 24 // a quotient this long is written as a length and bits
)

func (r *rice) k() int {
	n := r.n
	if n == 0 {
		n = 1
	}
	k := 0
	for k < 62 && n<<uint(k) < r.sum {
		k++
	}
	return k
}

// update learns u. An outlier (a missed scrape, a counter reset) counts
// as at most a few times the mean, so that it does not make the next
// dozens of ordinary values pay for wide codes.
func (r *rice) update(u uint64) {
	r.sum += min(u, 4*(r.sum/max(r.n, 1))+8)
	r.n++
	if r.n >= riceReset {
		r.sum >>= 1
		r.n >>= 1
	}
}

func (r *rice) write(w *bitWriter, u uint64) {
	k := r.k()
	if q := u >> uint(k); q < riceEscape {
		w.writeBits(1<<(q+1)-2, int(q)+1) // q ones and a zero
		w.writeBits(u&(1<<uint(k)-1), k)
	} else {
		w.writeBits(1<<riceEscape-1, riceEscape)
		l := bits.Len64(u) // u > 0 here
		w.writeBits(uint64(l-1), 6)
		w.writeBits(u, l-1) // the top bit is implied
	}
	r.update(u)
}

func (r *rice) read(br *bitReader) (uint64, error) {
	k := r.k()
	q, err := br.countOnes(riceEscape)
	if err != nil {
		return 0, err
	}
	var u uint64
	if q < riceEscape {
		low, err := br.readBits(k)
		if err != nil {
			return 0, err
		}
		if k > 0 && uint64(q) > math.MaxUint64>>uint(k) {
			return 0, ErrCorrupt
		}
		u = uint64(q)<<uint(k) | low
	} else {
		l, err := br.readBits(6)
		if err != nil {
			return 0, err
		}
		low, err := br.readBits(int(l))
		if err != nil {
			return 0, err
		}
		u = 1<<l | low
	}
	r.update(u)
	return u, nil
}

// fits reports whether v is representable in n bits, two's complement.
func fits(v int64, n int) bool {
	return v >= -(1<<uint(n-1)) && v < 1<<uint(n-1)
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func writeUvarint(w *bitWriter, u uint64) {
	var buf [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(buf[:], u)
	for _, b := range buf[:n] {
		w.writeBits(uint64(b), 8)
	}
}

func readUvarint(r *bitReader) (uint64, error) {
	var buf [binary.MaxVarintLen64]byte
	for i := range buf {
		b, err := r.readBits(8)
		if err != nil {
			return 0, err
		}
		buf[i] = byte(b)
		if b < 0x80 {
			u, n := binary.Uvarint(buf[:i+1])
			if n <= 0 {
				return 0, ErrCorrupt
			}
			return u, nil
		}
	}
	return 0, ErrCorrupt
}

// FromBytes decodes and checks a chunk; the result can be appended to. The
// bytes are copied. Any bytes past the last sample, or nonzero padding bits,
// make the chunk corrupt, so that Bytes gives back exactly b.
func FromBytes(b []byte) (*Chunk, error) {
	if len(b) < headerLen {
		return nil, ErrCorrupt
	}
	it := newIterator(b)
	for it.Next() {
	}
	if it.err != nil {
		return nil, it.err
	}
	used := (it.r.pos + 7) / 8
	if used != len(b) {
		return nil, ErrCorrupt
	}
	free := uint8(used*8 - it.r.pos)
	if it.r.pos > headerLen*8 && b[len(b)-1]&(1<<free-1) != 0 {
		return nil, ErrCorrupt
	}
	c := &Chunk{st: it.st}
	c.w.b = append(make([]byte, 0, max(len(b), 128)), b...)
	c.w.free = free
	return c, nil
}

// Iterator walks a chunk's samples in order.
type Iterator struct {
	r     bitReader
	total int
	st    state
	err   error
}

// Iterator returns an iterator over the samples appended so far.
func (c *Chunk) Iterator() *Iterator { return newIterator(c.w.b) }

func newIterator(b []byte) *Iterator {
	it := &Iterator{r: bitReader{b: b, pos: headerLen * 8}}
	if len(b) < headerLen {
		it.err = ErrCorrupt
		return it
	}
	it.total = int(binary.BigEndian.Uint16(b))
	return it
}

// Next advances to the next sample; it returns false at the end or on error.
func (it *Iterator) Next() bool {
	if it.err != nil || it.st.n >= it.total {
		return false
	}
	if err := it.next(); err != nil {
		it.err = err
		return false
	}
	it.st.n++
	return true
}

func (it *Iterator) next() error {
	s, r := &it.st, &it.r
	if s.n == 0 {
		u, err := readUvarint(r)
		if err != nil {
			return err
		}
		vb, err := r.readBits(64)
		if err != nil {
			return err
		}
		s.t, s.v = unzigzag(u), math.Float64frombits(vb)
		return nil
	}
	var d uint64
	if s.n == 1 {
		u, err := readUvarint(r)
		if err != nil {
			return err
		}
		d = u
		s.delta, s.dq = d, int64(d<<4)
	} else {
		u, err := s.tc.read(r)
		if err != nil {
			return err
		}
		d = s.predictDelta() + uint64(unzigzag(u))
		s.learnDelta(d)
	}
	t := int64(uint64(s.t) + d)
	if t <= s.t {
		return ErrCorrupt
	}
	v, err := it.readValue()
	if err != nil {
		return err
	}
	s.t, s.v = t, v
	return nil
}

func (it *Iterator) readValue() (float64, error) {
	s, r := &it.st, &it.r
	ones, err := r.countOnes(3)
	if err != nil {
		return 0, err
	}
	switch ones {
	case 0:
		s.learn(0)
		return s.v, nil
	case 1, 2:
		k := s.scale
		if ones == 2 {
			u, err := r.readBits(4)
			if err != nil {
				return 0, err
			}
			k = int(u)
			if k > maxScale || k == s.scale {
				return 0, ErrCorrupt
			}
			s.scale, s.rate = k, 0
		}
		u, err := s.vc.read(r)
		if err != nil {
			return 0, err
		}
		d := unzigzag(u)
		p, ok := decimalInt(s.v, k)
		if !ok {
			return 0, ErrCorrupt
		}
		pred := s.prediction(p)
		n := pred + d
		if !fits(n, 54) || n == -(1<<53) || (d > 0 && n < pred) || (d < 0 && n > pred) {
			return 0, ErrCorrupt
		}
		s.learn(n - p)
		return float64(n) / pow10[k], nil
	}
	s.rate = 0
	ctl, err := r.readBit()
	if err != nil {
		return 0, err
	}
	if ctl {
		lead, err := r.readBits(5)
		if err != nil {
			return 0, err
		}
		sig, err := r.readBits(6)
		if err != nil {
			return 0, err
		}
		if sig == 0 {
			sig = 64
		}
		if lead+sig > 64 {
			return 0, ErrCorrupt
		}
		s.leading, s.trailing, s.window = int(lead), int(64-lead-sig), true
	} else if !s.window {
		return 0, ErrCorrupt
	}
	x, err := r.readBits(64 - s.leading - s.trailing)
	if err != nil {
		return 0, err
	}
	return math.Float64frombits(math.Float64bits(s.v) ^ x<<uint(s.trailing)), nil
}

// At returns the current sample.
func (it *Iterator) At() (int64, float64) { return it.st.t, it.st.v }

// Err returns the error that stopped the iteration, if any.
func (it *Iterator) Err() error { return it.err }
