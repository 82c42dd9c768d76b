// Package checksum combines per-block checksums into whole-file checksums,
// so a file's CRC32C and adler32 are known end to end without reading the
// file a second time: each block is summed once as it passes, and the sums
// are joined in block order.
package checksum

import "hash/crc32"

// castagnoliReversed is the CRC32C polynomial in the reflected bit order that
// hash/crc32 uses.
const castagnoliReversed = 0x82f63b78

// mulmod multiplies two polynomials modulo the CRC polynomial, in the
// reflected representation (bit 31 is x^0).
func mulmod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
	return p
}

// pow2 holds x^(2^k) modulo the polynomial, for k = 0..63.
var pow2 = func() [64]uint32 {
	var t [64]uint32
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = mulmod(p, p)
	}
	return t
}()

// xpow8n returns x^(8n) modulo the polynomial: the factor that shifts a CRC
// past n zero bytes.
func xpow8n(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; k++ {
		if n&1 != 0 {
			p = mulmod(pow2[k%64], p)
		}
		n >>= 1
	}
	return p
}

// CombineCRC32C returns the CRC32C of A followed by B, given crcA of A,
// crcB of B and the length of B.
func CombineCRC32C(crcA, crcB uint32, lenB int64) uint32 {
	return mulmod(xpow8n(lenB), crcA) ^ crcB
}

// CRC32C sums p with the Castagnoli polynomial.
func CRC32C(p []byte) uint32 { return crc32.Checksum(p, table) }

// UpdateCRC32C extends crc with p.
func UpdateCRC32C(crc uint32, p []byte) uint32 { return crc32.Update(crc, table, p) }

var table = crc32.MakeTable(crc32.Castagnoli)

var zeroBlock [64 << 10]byte

// ZerosCRC32C is the CRC32C of n zero bytes, computed without touching n
// bytes: used for holes in sparse files.
func ZerosCRC32C(n int64) uint32 {
	if n <= int64(len(zeroBlock)) {
		return CRC32C(zeroBlock[:n])
	}
	half := ZerosCRC32C(n / 2)
	crc := CombineCRC32C(half, half, n/2)
	if n%2 == 1 {
		crc = UpdateCRC32C(crc, zeroBlock[:1])
	}
	return crc
}

const adlerBase = 65521

// CombineAdler32 returns the adler32 of A followed by B, given their adler32
// values and the length of B.
func CombineAdler32(adlerA, adlerB uint32, lenB int64) uint32 {
	rem := uint32(lenB % adlerBase)
	sum1 := adlerA & 0xffff
	sum2 := (rem * sum1) % adlerBase
	sum1 += (adlerB & 0xffff) + adlerBase - 1
	sum2 += (adlerA >> 16) + (adlerB >> 16) + adlerBase - rem
	if sum1 >= adlerBase {
		sum1 -= adlerBase
	}
	if sum1 >= adlerBase {
		sum1 -= adlerBase
	}
	if sum2 >= adlerBase<<1 {
		sum2 -= adlerBase << 1
	}
	if sum2 >= adlerBase {
		sum2 -= adlerBase
	}
	return sum1 | sum2<<16
}
