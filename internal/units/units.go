// Package units parses and prints the rates, sizes, fractions and durations
// that users type on the command line and read in progress output. It is the
// project's user-facing contract for these quantities, so every command uses
// it instead of formatting numbers on its own.
//
// Rates are bits per second with SI (decimal) prefixes: k=1e3, M=1e6, G=1e9,
// T=1e12, P=1e15, E=1e18. Prefixes and unit words are case-insensitive, so
// "10g", "10Gbps", "10gbit" and "10 Gbit/s" are all 10e9 bit/s. A trailing
// "b" means bits; an upper-case "B" (bytes, as in "10GB/s") is refused
// rather than guessed at.
//
// Sizes are bytes. A prefix without "i" is decimal and one with "i" is
// binary: "4k" and "4KB" are 4000 bytes, "4Ki" and "4KiB" are 4096 bytes.
// Sizes are printed with binary prefixes ("2.00 GiB") because that is how
// files and memory are usually measured.
//
// Numbers may have a fractional part ("1.5G"); the result is rounded to the
// nearest whole bit or byte. Exponents, signs and hexadecimal are rejected so
// that a typo is an error rather than a surprising value.
package units

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// ErrSyntax and ErrRange classify parse errors, so callers can use errors.Is
// to tell a malformed value from one that is well-formed but not allowed.
var (
	ErrSyntax = errors.New("invalid syntax")
	ErrRange  = errors.New("value out of range")
)

// parseError carries the exact message shown to users while still letting
// callers match ErrSyntax or ErrRange.
type parseError struct {
	what  string // "rate", "size" or "fraction"
	input string
	want  string // what the user should have typed
	kind  error  // ErrSyntax or ErrRange
}

func (e *parseError) Error() string {
	return fmt.Sprintf("invalid %s %q: %s", e.what, e.input, e.want)
}

func (e *parseError) Unwrap() error { return e.kind }

const (
	rateWant = "want a number with an optional SI prefix, like 500M or 10Gbps"
	sizeWant = "want a byte count with an optional unit, like 512, 4KiB or 2GB"
	fracWant = "want a fraction between 0 and 1 or a percentage, like 0.001 or 0.1%"
)

// prefixPower maps a lower-cased prefix letter to its power of 1000 or 1024.
var prefixPower = map[byte]int{'k': 1, 'm': 2, 'g': 3, 't': 4, 'p': 5, 'e': 6}

// rateSuffixes are the accepted spellings of "bits per second" after the
// prefix, lower-cased. The empty suffix makes "500M" work.
var rateSuffixes = map[string]bool{
	"": true, "b": true, "bps": true, "bit": true, "bits": true,
	"bit/s": true, "bits/s": true, "b/s": true,
}

// sizeSuffixes are the accepted spellings of "bytes" after the prefix (and
// its optional "i"), lower-cased.
var sizeSuffixes = map[string]bool{"": true, "b": true, "byte": true, "bytes": true}

// ParseRate parses a rate in bits per second, such as "500M", "10Gbps",
// "1.5Gbit/s" or "1000". See the package documentation for the syntax.
// Zero is accepted; what it means (for example "unlimited") is up to the
// caller.
func ParseRate(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, &parseError{"rate", s, "want a non-negative number of bits per second, like 500M or 10Gbps", ErrRange}
	}
	num, rest, ok := splitNumber(t)
	if !ok {
		return 0, &parseError{"rate", s, rateWant, ErrSyntax}
	}
	if suffix := strings.TrimLeft(rest, "kKmMgGtTpPeE"); strings.HasPrefix(suffix, "B") && !strings.HasPrefix(strings.ToLower(suffix), "bit") {
		// 10GB/s reads as bytes to most people; refuse rather than guess.
		return 0, &parseError{"rate", s, "rates are bits per second and B means bytes: write 10G, 10Gbps or 10gbit", ErrSyntax}
	}
	rest = strings.ToLower(rest)
	power := 0
	if rest != "" {
		if p, isPrefix := prefixPower[rest[0]]; isPrefix {
			power = p
			rest = rest[1:]
		}
	}
	if !rateSuffixes[rest] {
		return 0, &parseError{"rate", s, rateWant, ErrSyntax}
	}
	v, ok := scale(num, pow(1000, power), math.MaxUint64)
	if !ok {
		return 0, &parseError{"rate", s, "want at most " + FormatRate(math.MaxUint64), ErrRange}
	}
	return v, nil
}

// ParseSize parses a size in bytes, such as "512", "4KiB", "2GB" or "4k".
// See the package documentation for which prefixes are decimal and which
// are binary.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, &parseError{"size", s, "want a non-negative byte count, like 512, 4KiB or 2GB", ErrRange}
	}
	num, rest, ok := splitNumber(t)
	if !ok {
		return 0, &parseError{"size", s, sizeWant, ErrSyntax}
	}
	rest = strings.ToLower(rest)
	base, power := uint64(1000), 0
	if rest != "" {
		if p, isPrefix := prefixPower[rest[0]]; isPrefix {
			power = p
			rest = rest[1:]
			if strings.HasPrefix(rest, "i") {
				base = 1024
				rest = rest[1:]
			}
		}
	}
	if !sizeSuffixes[rest] {
		return 0, &parseError{"size", s, sizeWant, ErrSyntax}
	}
	v, ok := scale(num, pow(base, power), math.MaxInt64)
	if !ok {
		return 0, &parseError{"size", s, "want less than 8 EiB", ErrRange}
	}
	return int64(v), nil
}

// ParseFraction parses a proportion such as a loss rate, given either as a
// percentage ("0.01%" is 0.0001) or as a plain fraction ("0.0001"). The
// result must lie within [0, 1].
func ParseFraction(s string) (float64, error) {
	t := strings.TrimSpace(s)
	percent := strings.HasSuffix(t, "%")
	if percent {
		t = strings.TrimSpace(strings.TrimSuffix(t, "%"))
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, &parseError{"fraction", s, fracWant, ErrSyntax}
	}
	if percent {
		v /= 100
	}
	if v < 0 || v > 1 {
		want := fracWant
		if !percent && v > 1 && v <= 100 {
			// "1" is a valid fraction, so a bare number above it is most
			// likely a percentage missing its sign.
			want += fmt.Sprintf(" (did you mean %s%%?)", t)
		}
		return 0, &parseError{"fraction", s, want, ErrRange}
	}
	return v + 0, nil // + 0 turns "-0" into 0
}

// splitNumber splits t into a leading unsigned decimal number and the
// remainder with surrounding spaces removed. ok is false when there is no
// well-formed number: at least one digit and at most one decimal point.
func splitNumber(t string) (num, rest string, ok bool) {
	i, digits, dots := 0, 0, 0
	for ; i < len(t); i++ {
		if c := t[i]; c >= '0' && c <= '9' {
			digits++
		} else if c == '.' {
			dots++
		} else {
			break
		}
	}
	if digits == 0 || dots > 1 {
		return "", "", false
	}
	return t[:i], strings.TrimSpace(t[i:]), true
}

// scale returns the decimal number num times mult, rounded half up to an
// integer, and false when the result exceeds limit. Arithmetic is exact so
// that large byte counts survive unchanged, which float64 cannot promise.
func scale(num string, mult, limit uint64) (uint64, bool) {
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, false // unreachable after splitNumber, but never panic
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).SetUint64(mult)))
	// floor(a/b + 1/2) == floor((2a + b) / 2b) for non-negative a and b > 0.
	n := new(big.Int).Lsh(r.Num(), 1)
	n.Add(n, r.Denom())
	d := new(big.Int).Lsh(r.Denom(), 1)
	n.Quo(n, d)
	if n.Cmp(new(big.Int).SetUint64(limit)) > 0 {
		return 0, false
	}
	return n.Uint64(), true
}

func pow(base uint64, n int) uint64 {
	v := uint64(1)
	for range n {
		v *= base
	}
	return v
}

var rateUnits = []string{"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s", "Pbit/s", "Ebit/s"}

// FormatRate formats a rate in bits per second with an SI prefix and three
// significant digits, such as "9.42 Gbit/s" or "512 Mbit/s". Rates below
// 1 kbit/s are printed as whole bits ("0 bit/s"). A negative, NaN or
// infinite rate, which means the rate is unknown, prints as "-- bit/s".
// The output is accepted by ParseRate.
func FormatRate(bps float64) string {
	if math.IsNaN(bps) || math.IsInf(bps, 0) || bps < 0 {
		return "-- bit/s"
	}
	if bps < 999.5 {
		return strconv.FormatFloat(bps, 'f', 0, 64) + " bit/s"
	}
	v, i := bps, 0
	// Compare against 999.5 rather than 1000 so that values which would
	// round up to "1000" move to the next prefix and print as "1.00".
	for i < len(rateUnits)-1 && v >= 999.5 {
		v /= 1000
		i++
	}
	return threeDigits(v) + " " + rateUnits[i]
}

var sizeUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// FormatSize formats a byte count with a binary prefix and three
// significant digits, such as "2.00 GiB", "16.0 KiB" or "512 B". Values
// from 1000 to 1023 of a unit keep four digits ("1000 KiB") instead of
// becoming "0.98 MiB". The output is accepted by ParseSize (for
// non-negative n).
func FormatSize(n int64) string {
	if n < 0 {
		// Convert via uint64 so that math.MinInt64 does not overflow.
		return "-" + formatSize(uint64(-(n+1))+1)
	}
	return formatSize(uint64(n))
}

func formatSize(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	v, i := float64(n), 0
	// 1023.5 rather than 1024 so that "1024 KiB" is printed as "1.00 MiB".
	for i < len(sizeUnits)-1 && v >= 1023.5 {
		v /= 1024
		i++
	}
	return threeDigits(v) + " " + sizeUnits[i]
}

// threeDigits formats v >= 1 with three significant digits, or as a whole
// number when it has more integer digits than that.
func threeDigits(v float64) string {
	switch {
	case v < 9.995:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 99.95:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
}

// FormatDuration formats a duration compactly for ETAs and elapsed times:
// "1h02m", "3m05s", "42s" or "0.8s". Precision drops as the duration grows,
// because a one-hour ETA is never accurate to the second. Zero prints as
// "0s".
func FormatDuration(d time.Duration) string {
	if d < 0 {
		// Convert via uint64 so that math.MinInt64 does not overflow.
		return "-" + formatDuration(uint64(-(d+1))+1)
	}
	return formatDuration(uint64(d))
}

func formatDuration(ns uint64) string {
	const (
		tenth  = uint64(100 * time.Millisecond)
		second = uint64(time.Second)
		minute = uint64(time.Minute)
		hour   = uint64(time.Hour)
	)
	// Round before choosing the format so that 59.7s becomes "1m00s"
	// rather than "60s".
	if t := (ns + tenth/2) / tenth; t < 100 {
		if t == 0 {
			return "0s"
		}
		return fmt.Sprintf("%d.%ds", t/10, t%10)
	}
	if s := (ns + second/2) / second; s < 60 {
		return fmt.Sprintf("%ds", s)
	} else if s < 3600 {
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	m := ns/minute + (ns%minute+minute/2)/minute
	return fmt.Sprintf("%dh%02dm", m/60, m%60)
}
