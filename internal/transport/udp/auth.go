package udp

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// Authentication. Each stream has two keys, one per direction, derived
// from the session's secret (which the control channel handed over and
// which never travels on the data path), the session id, the stream id and
// the dialler's random (fresh for every dial, so a stream id used again
// never reuses a key):
//
//	key(dir) = HMAC-SHA256(secret, "lightpath-udp-1" | session | stream | random | dir)[:16]
//
// Every datagram is authenticated with AES-128-GCM over the whole datagram
// as additional data and an empty plaintext (GMAC), with the packet number
// as the nonce: packet numbers never repeat in a direction, so neither does
// a nonce under a key. GMAC was chosen by measurement (BenchmarkMAC, quoted
// in docs/udp.md): about 5 GB/s a core on 1472-byte datagrams against
// about 1 GB/s for HMAC-SHA256. The payload is not encrypted: the mover's
// data is not secret from the path today (as over TCP), only its integrity
// and origin matter.

const (
	dirDialler  = 'c' // the dialler's datagrams
	dirListener = 's' // the listener's
)

// streamKeys are a stream's MACs: send for what this end sends, recv for
// what it accepts.
type streamKeys struct {
	send, recv cipher.AEAD
}

var errNoKey = errors.New("no session key")

func deriveKey(secret []byte, session [16]byte, stream uint32, random [16]byte, dir byte) (cipher.AEAD, error) {
	if len(secret) == 0 {
		return nil, errNoKey
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("lightpath-udp-1"))
	m.Write(session[:])
	var s [4]byte
	binary.BigEndian.PutUint32(s[:], stream)
	m.Write(s[:])
	m.Write(random[:])
	m.Write([]byte{dir})
	k := m.Sum(nil)
	b, err := aes.NewCipher(k[:16])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// keysFor derives both keys of a stream as the dialler (dialler true) or
// the listener sees them.
func keysFor(secret []byte, session [16]byte, stream uint32, random [16]byte, dialler bool) (streamKeys, error) {
	c, err := deriveKey(secret, session, stream, random, dirDialler)
	if err != nil {
		return streamKeys{}, err
	}
	s, err := deriveKey(secret, session, stream, random, dirListener)
	if err != nil {
		return streamKeys{}, err
	}
	if dialler {
		return streamKeys{send: c, recv: s}, nil
	}
	return streamKeys{send: s, recv: c}, nil
}

func nonce(pn uint64) [12]byte {
	var n [12]byte
	binary.BigEndian.PutUint64(n[4:], pn)
	return n
}

// seal appends the MAC to b (header and body) and returns the datagram.
func seal(a cipher.AEAD, b []byte) []byte {
	n := nonce(binary.BigEndian.Uint64(b[24:32]))
	return a.Seal(b, n[:], nil, b)
}

// verify says whether b (a whole datagram, at least minLen long) carries a
// good MAC under a.
func verify(a cipher.AEAD, b []byte) bool {
	n := nonce(binary.BigEndian.Uint64(b[24:32]))
	var scratch [0]byte
	_, err := a.Open(scratch[:0], n[:], b[len(b)-tagLen:], b[:len(b)-tagLen])
	return err == nil
}

// replayWindow remembers the packet numbers received in one direction:
// the highest, and which of the window below it arrived. A packet number
// seen before, or older than the window, is a replay (or too late to
// matter: its data, if any, is sent again).
type replayWindow struct {
	top  uint64 // highest packet number accepted, +1 (0: none yet)
	bits [replayWords]uint64
}

const (
	replayWords = 64
	replaySpan  = replayWords * 64 // 4096 packets
)

// fresh says whether pn may be accepted: not seen, not too old.
func (w *replayWindow) fresh(pn uint64) bool {
	if pn >= w.top {
		return true
	}
	if pn/64+replayWords <= (w.top-1)/64 {
		return false // older than the window
	}
	return w.bits[(pn/64)%replayWords]&(1<<(pn%64)) == 0
}

// mark records pn as received; call it only once the MAC checked out and
// fresh said yes.
func (w *replayWindow) mark(pn uint64) {
	if pn >= w.top {
		if w.top > 0 {
			// Clear the words the window moves onto: they hold bits of
			// packet numbers a window ago.
			cur, next := (w.top-1)/64, pn/64
			if next-cur >= replayWords {
				w.bits = [replayWords]uint64{}
			} else {
				for i := cur + 1; i <= next; i++ {
					w.bits[i%replayWords] = 0
				}
			}
		}
		w.top = pn + 1
	}
	w.bits[(pn/64)%replayWords] |= 1 << (pn % 64)
}
