package grant

import (
	"bytes"
	"strings"
	"testing"
)

// TestReceipt: a receipt verifies with the destination node's secret and
// the fields it was signed over, and with nothing else: another node's
// secret, any field changed, a damaged or foreign MAC.
func TestReceipt(t *testing.T) {
	key := []byte("the controller's receipt key, 32b")
	b1, b2 := NodeSecret(key, "b1"), NodeSecret(key, "b2")
	if bytes.Equal(b1, b2) || bytes.Equal(b1, NodeSecret([]byte("another key"), "b1")) {
		t.Fatal("node secrets collide")
	}
	r := Receipt{Task: "k-1", Attempt: 2, Path: "in/run1/f.dat", Size: 1 << 20, Algo: "crc32c", Sum: "0badcafe"}
	part := Receipt{Task: "k-2", Attempt: 1, Path: "in/big", Size: 1 << 30, Algo: "adler32", Sum: "12345678",
		Offset: 256 << 20, Length: 256 << 20, Complete: true, FileSum: "9abcdef0"}
	mac, pmac := Spell(r.Sign(b1)), Spell(part.Sign(b1))
	for _, tc := range []struct {
		name   string
		r      Receipt
		secret []byte
		mac    string
		ok     bool
	}{
		{"as signed", r, b1, mac, true},
		{"a part as signed", part, b1, pmac, true},
		{"another node's secret", r, b2, mac, false},
		{"no secret", r, nil, mac, false},
		{"no receipt", r, b1, "", false},
		{"another task", with(r, func(x *Receipt) { x.Task = "k-9" }), b1, mac, false},
		{"another attempt", with(r, func(x *Receipt) { x.Attempt = 3 }), b1, mac, false},
		{"another path", with(r, func(x *Receipt) { x.Path = "in/run1/g.dat" }), b1, mac, false},
		{"another size", with(r, func(x *Receipt) { x.Size++ }), b1, mac, false},
		{"another checksum", with(r, func(x *Receipt) { x.Sum = "deadbeef" }), b1, mac, false},
		{"no checksum", with(r, func(x *Receipt) { x.Sum = "" }), b1, mac, false},
		{"another algorithm", with(r, func(x *Receipt) { x.Algo = "adler32" }), b1, mac, false},
		{"a part's offset", with(part, func(x *Receipt) { x.Offset = 0 }), b1, pmac, false},
		{"a part's length", with(part, func(x *Receipt) { x.Length-- }), b1, pmac, false},
		{"a part not completing", with(part, func(x *Receipt) { x.Complete = false }), b1, pmac, false},
		{"a part's file checksum", with(part, func(x *Receipt) { x.FileSum = "00000000" }), b1, pmac, false},
		// Length-prefixed fields: moving bytes from one field to the next
		// makes another receipt.
		{"fields shifted", with(r, func(x *Receipt) { x.Task, x.Path = "k-1in/run1", "/f.dat" }), b1, mac, false},
		{"damaged", r, b1, "A" + mac[1:], false},
		{"not base64url", r, b1, strings.Repeat("!", len(mac)), false},
		{"too long", r, b1, mac + strings.Repeat("A", MaxReceipt), false},
		{"truncated", r, b1, mac[:len(mac)-4], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Verify(tc.secret, tc.mac); got != tc.ok {
				t.Errorf("Verify = %v, want %v", got, tc.ok)
			}
		})
	}
}

func with(r Receipt, f func(*Receipt)) Receipt {
	f(&r)
	return r
}

// TestVerifierReceiptKey: a verifier holds no receipt secret until it is
// given one, and keeps its own copy.
func TestVerifierReceiptKey(t *testing.T) {
	v := NewVerifier("b1", nil)
	if v.ReceiptKey() != nil {
		t.Fatal("a new verifier has a receipt secret")
	}
	s := []byte("secret")
	v.SetReceiptKey(s)
	s[0] = 'x'
	if string(v.ReceiptKey()) != "secret" {
		t.Fatalf("receipt secret %q", v.ReceiptKey())
	}
}
