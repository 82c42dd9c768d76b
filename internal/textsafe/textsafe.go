// Package textsafe makes strings that come from elsewhere (a peer, a stored
// record, another user) safe to print on a terminal. A terminal obeys control
// characters and escape sequences found in its output, so a file name or an
// error message carrying "\x1b[2J" would clear an operator's screen, and one
// carrying a bidirectional override would reorder what the operator reads.
// Sanitize keeps every printable character and spells every other one as a
// visible Go-style escape, so nothing is hidden and nothing is obeyed.
package textsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sanitize returns s with every character a terminal could act on replaced by
// a visible escape:
//
//   - C0 controls (U+0000..U+001F, including tab and newline), DEL (U+007F)
//     and C1 controls (U+0080..U+009F) become \xNN, so ESC is \x1b and the
//     rest of an escape sequence is left as harmless printable text;
//   - bidirectional formatting characters (U+061C, U+200E, U+200F,
//     U+202A..U+202E, U+2066..U+2069) and line/paragraph separators
//     (U+2028, U+2029) become \uNNNN;
//   - bytes that are not valid UTF-8 become \xNN.
//
// Everything else, including non-ASCII letters and a backslash, is kept as
// it is. No character is exempt: a multi-line peer message prints on one line.
func Sanitize(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			fmt.Fprintf(&b, `\x%02x`, r)
		case hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// clean reports whether s needs no change, so the common case allocates nothing.
func clean(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || (r >= 0x80 && r <= 0x9f) || hidden(r) {
			return false
		}
		i += n
	}
	return true
}

// hidden reports the formatting characters that change how surrounding text
// is displayed without being visible themselves.
func hidden(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029:
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// OneLine folds s onto one line: every run of white space, newlines
// included, becomes one space, and none leads or trails. A multi-line
// error then reads as the "<what>: <why>" of one line.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
