package textsafe

import (
	"testing"
	"unicode/utf8"
)

func TestSanitize(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "data/file-1.bin", "data/file-1.bin"},
		{"utf8 letters kept", "résumé/日本語.txt", "résumé/日本語.txt"},
		{"backslash kept", `a\b`, `a\b`},
		{"clear screen", "x\x1b[2Jy", `x\x1b[2Jy`},
		{"osc title", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"newline and tab", "a\nb\tc\r", `a\x0ab\x09c\x0d`},
		{"nul", "a\x00b", `a\x00b`},
		{"del", "a\x7fb", `a\x7fb`},
		{"c1 csi", "a\u009b2Jb", `a\x9b2Jb`},
		{"c1 nel", "a\u0085b", `a\x85b`},
		{"invalid byte", "a\xffb", `a\xffb`},
		{"truncated rune", "a\xe6\x97", `a\xe6\x97`},
		{"bidi override", "evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"bidi isolate", "a\u2066b\u2069", `a\u2066b\u2069`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"nbsp kept", "a\u00a0b", "a\u00a0b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Sanitize(tc.in)
			if got != tc.want {
				t.Fatalf("Sanitize(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzSanitize checks the promise, not the spelling: whatever comes in, what
// goes out is valid UTF-8 without a control or hidden formatting character,
// and printable input is returned unchanged.
func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J", "\xff\xfe", "a\u202eb", "\u009b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Sanitize(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Sanitize(%q) = %q: not valid UTF-8", s, out)
		}
		for _, r := range out {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || hidden(r) {
				t.Fatalf("Sanitize(%q) = %q: keeps %U", s, out, r)
			}
		}
		if clean(s) != (out == s) {
			t.Fatalf("Sanitize(%q) = %q: clean=%v", s, out, clean(s))
		}
	})
}
