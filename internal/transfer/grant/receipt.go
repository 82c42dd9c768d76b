package grant

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strconv"
)

// A receipt is a destination data node's word that it wrote a file (or a
// part of one) under a grant, with the checksum it computed itself of the
// bytes it wrote: an HMAC keyed with the node's own secret, which the
// controller derives from its receipt key and hands to that node alone (in
// the answer to the node's authenticated heartbeat). The source node
// carries the receipt to the controller in its report, and cannot make one
// for a file the destination did not write as reported: it does not hold
// the destination's secret. A receipt binds the task's attempt, so it is
// no good for another task or attempt.
type Receipt struct {
	Task    string
	Attempt int
	// Path is the file's path under the destination's root, Size the
	// whole file's size.
	Path string
	Size int64
	// Algo names the checksum (crc32c or adler32); Sum is the checksum in
	// hex of what the destination holds, or "" for a file it left alone
	// without reading it (the job's policy skips existing files).
	Algo string
	Sum  string
	// Offset and Length are a part's, for a part push (Length 0 for a
	// whole file); Complete says the push completed the file, whose whole
	// checksum (hex, Algo) is then FileSum.
	Offset, Length int64
	Complete       bool
	FileSum        string
}

// receiptLabel keeps receipts apart from any other MAC made with a key
// derived the same way.
const receiptLabel = "lightpath receipt v1"

// NodeSecret is node's receipt secret, derived from the controller's
// receipt key.
func NodeSecret(key []byte, node string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("lightpath receipt node secret v1\x00"))
	h.Write([]byte(node))
	return h.Sum(nil)
}

// message is the receipt's fields, each length-prefixed, so no two
// receipts share a message.
func (r Receipt) message() []byte {
	var b []byte
	add := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	add(receiptLabel)
	add(r.Task)
	add(strconv.Itoa(r.Attempt))
	add(r.Path)
	add(strconv.FormatInt(r.Size, 10))
	add(r.Algo)
	add(r.Sum)
	add(strconv.FormatInt(r.Offset, 10))
	add(strconv.FormatInt(r.Length, 10))
	add(strconv.FormatBool(r.Complete))
	add(r.FileSum)
	return b
}

// Sign returns the receipt's MAC with the node's secret.
func (r Receipt) Sign(secret []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(r.message())
	return h.Sum(nil)
}

// Spell writes a receipt's MAC as text (base64url, unpadded),
// as a report carries it.
func Spell(mac []byte) string { return base64.RawURLEncoding.EncodeToString(mac) }

// MaxReceipt bounds the text of a receipt a controller reads.
const MaxReceipt = 64

// Verify reports whether mac, as Spell wrote it, is the receipt's MAC with
// the node's secret. An empty secret verifies nothing.
func (r Receipt) Verify(secret []byte, mac string) bool {
	if len(secret) == 0 || mac == "" || len(mac) > MaxReceipt {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil {
		return false
	}
	return hmac.Equal(got, r.Sign(secret))
}

// SetReceiptKey sets the node's receipt secret (from its heartbeat
// answers): its server signs, with it, the receipts of the files it
// writes under grants.
func (v *Verifier) SetReceiptKey(secret []byte) {
	v.mu.Lock()
	v.receipt = append([]byte(nil), secret...)
	v.mu.Unlock()
}

// ReceiptKey is the node's receipt secret, nil before the controller gave
// one.
func (v *Verifier) ReceiptKey() []byte {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.receipt
}
