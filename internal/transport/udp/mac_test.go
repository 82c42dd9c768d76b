package udp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"testing"
)

// BenchmarkMAC measures what authenticating a datagram costs, for the
// choice written in auth.go: GMAC (chosen), GCM encrypting the payload,
// HMAC-SHA256.
func BenchmarkMAC(b *testing.B) {
	keys, err := keysFor(make([]byte, 32), [16]byte{}, 1, [16]byte{}, true)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1472, 8972} {
		d := make([]byte, n-tagLen, n)
		b.Run("GMAC/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := 0; b.Loop(); i++ {
				binary.BigEndian.PutUint64(d[24:], uint64(i))
				seal(keys.send, d[:n-tagLen])
			}
		})
		b.Run("GCM-encrypt/"+strconv.Itoa(n), func(b *testing.B) {
			out := make([]byte, 0, n+tagLen)
			b.SetBytes(int64(n))
			for i := 0; b.Loop(); i++ {
				no := nonce(uint64(i))
				out = keys.send.Seal(out[:0], no[:], d[hdrLen:], d[:hdrLen])
			}
		})
		b.Run("HMAC-SHA256/"+strconv.Itoa(n), func(b *testing.B) {
			m := hmac.New(sha256.New, make([]byte, 32))
			sum := make([]byte, 0, 32)
			b.SetBytes(int64(n))
			for b.Loop() {
				m.Reset()
				m.Write(d)
				sum = m.Sum(sum[:0])
			}
		})
	}
}
