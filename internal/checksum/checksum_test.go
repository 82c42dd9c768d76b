package checksum

import (
	"hash/adler32"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name       string
		lenA, lenB int
	}{
		{"empty both", 0, 0},
		{"empty B", 100, 0},
		{"empty A", 0, 100},
		{"one byte each", 1, 1},
		{"uneven", 4097, 65537},
		{"large B", 3, 1 << 20},
		{"adler base boundary", 65521, 65521},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, tc.lenA+tc.lenB)
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
			a, b := buf[:tc.lenA], buf[tc.lenA:]
			tab := crc32.MakeTable(crc32.Castagnoli)
			if got, want := CombineCRC32C(crc32.Checksum(a, tab), crc32.Checksum(b, tab), int64(len(b))), crc32.Checksum(buf, tab); got != want {
				t.Errorf("crc32c combine = %08x, want %08x", got, want)
			}
			if got, want := CombineAdler32(adler32.Checksum(a), adler32.Checksum(b), int64(len(b))), adler32.Checksum(buf); got != want {
				t.Errorf("adler32 combine = %08x, want %08x", got, want)
			}
		})
	}
}

func TestZerosCRC32C(t *testing.T) {
	for _, n := range []int64{0, 1, 4096, 65536, 65537, 1<<20 + 3, 4 << 20} {
		if got, want := ZerosCRC32C(n), CRC32C(make([]byte, n)); got != want {
			t.Errorf("ZerosCRC32C(%d) = %08x, want %08x", n, got, want)
		}
	}
}
