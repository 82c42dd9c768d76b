package units

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"0", 0},
		{"1000", 1000},
		{"500M", 500e6},
		{"10G", 10e9},
		{"10Gbps", 10e9},
		{"10gbit", 10e9},
		{"10GBIT", 10e9},
		{"1.5Gbit/s", 1.5e9},
		{"1.5gbits/s", 1.5e9},
		{"100kbps", 100e3},
		{"100Kb/s", 100e3},
		{"2T", 2e12},
		{"2Tb", 2e12},
		{"1P", 1e15},
		{"18E", 18e18},
		{"9.42 Gbit/s", 9.42e9},
		{"  10G  ", 10e9},
		{".5k", 500},
		{"5.", 5},
		{"1.5", 2}, // rounded half up to whole bits
		{"0.0000000001G", 0},
		{"18446744073709551615", math.MaxUint64},
		{"000010M", 10e6},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRate(tt.in)
			if err != nil {
				t.Fatalf("ParseRate(%q) error: %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseRate(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseRateErrors(t *testing.T) {
	tests := []struct {
		in   string
		kind error
		msg  string // substring of the error message
	}{
		{"", ErrSyntax, `invalid rate "": want a number`},
		{"10Q", ErrSyntax, `invalid rate "10Q": want a number with an optional SI prefix, like 500M or 10Gbps`},
		{"-5M", ErrRange, "non-negative"},
		{"NaN", ErrSyntax, "want a number"},
		{"Inf", ErrSyntax, "want a number"},
		{"1e9", ErrSyntax, "want a number"},
		{"+5", ErrSyntax, "want a number"},
		{"0x10", ErrSyntax, "want a number"},
		{"1.2.3", ErrSyntax, "want a number"},
		{".", ErrSyntax, "want a number"},
		{"G", ErrSyntax, "want a number"},
		{"10Gi", ErrSyntax, "want a number"},
		{"10GG", ErrSyntax, "want a number"},
		{"10 G bps", ErrSyntax, "want a number"},
		{"10Gbyte", ErrSyntax, "want a number"},
		{"19E", ErrRange, "want at most 18.4 Ebit/s"},
		{"18446744073709551616", ErrRange, "want at most"},
		{"99999999999999999999999999999", ErrRange, "want at most"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRate(tt.in)
			if err == nil {
				t.Fatalf("ParseRate(%q) = %d, want error", tt.in, got)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("ParseRate(%q) error %v is not %v", tt.in, err, tt.kind)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("ParseRate(%q) error %q does not contain %q", tt.in, err, tt.msg)
			}
		})
	}
}

func TestFormatRate(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0 bit/s"},
		{1, "1 bit/s"},
		{999, "999 bit/s"},
		{999.4, "999 bit/s"},
		{999.6, "1.00 kbit/s"},
		{1000, "1.00 kbit/s"},
		{12345, "12.3 kbit/s"},
		{512e6, "512 Mbit/s"},
		{999.6e6, "1.00 Gbit/s"},
		{9.42e9, "9.42 Gbit/s"},
		{9.996e9, "10.0 Gbit/s"},
		{99.96e9, "100 Gbit/s"},
		{2e12, "2.00 Tbit/s"},
		{math.MaxUint64, "18.4 Ebit/s"},
		{5e21, "5000 Ebit/s"},
		{-1, "-- bit/s"},
		{math.NaN(), "-- bit/s"},
		{math.Inf(1), "-- bit/s"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := FormatRate(tt.in); got != tt.want {
				t.Errorf("FormatRate(%g) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"512", 512},
		{"512B", 512},
		{"512 bytes", 512},
		{"4k", 4000},
		{"4K", 4000},
		{"4KB", 4000},
		{"4kb", 4000},
		{"4Ki", 4096},
		{"4KiB", 4096},
		{"4kib", 4096},
		{"2GB", 2e9},
		{"2GiB", 2 << 30},
		{"1TiB", 1 << 40},
		{"1.5MiB", 3 << 19},
		{"2.00 GiB", 2 << 30},
		{"16.0 KiB", 16 << 10},
		{"1P", 1e15},
		{"1PiB", 1 << 50},
		{"7EiB", 7 << 60},
		{"0.5", 1}, // rounded half up to whole bytes
		{"9223372036854775807", math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if err != nil {
				t.Fatalf("ParseSize(%q) error: %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseSize(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseSizeErrors(t *testing.T) {
	tests := []struct {
		in   string
		kind error
		msg  string
	}{
		{"", ErrSyntax, `invalid size "": want a byte count with an optional unit, like 512, 4KiB or 2GB`},
		{"4X", ErrSyntax, "want a byte count"},
		{"-1", ErrRange, "non-negative"},
		{"NaN", ErrSyntax, "want a byte count"},
		{"4iB", ErrSyntax, "want a byte count"},
		{"4KiBi", ErrSyntax, "want a byte count"},
		{"4Kbit", ErrSyntax, "want a byte count"},
		{"1e3", ErrSyntax, "want a byte count"},
		{"8EiB", ErrRange, "want less than 8 EiB"},
		{"9223372036854775808", ErrRange, "want less than 8 EiB"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if err == nil {
				t.Fatalf("ParseSize(%q) = %d, want error", tt.in, got)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("ParseSize(%q) error %v is not %v", tt.in, err, tt.kind)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("ParseSize(%q) error %q does not contain %q", tt.in, err, tt.msg)
			}
		})
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1000, "1000 B"},
		{1023, "1023 B"},
		{1024, "1.00 KiB"},
		{1536, "1.50 KiB"},
		{16 << 10, "16.0 KiB"},
		{1000 << 10, "1000 KiB"},
		{1024<<10 - 1, "1.00 MiB"},
		{2 << 30, "2.00 GiB"},
		{1 << 40, "1.00 TiB"},
		{math.MaxInt64, "8.00 EiB"},
		{-2048, "-2.00 KiB"},
		{math.MinInt64, "-8.00 EiB"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := FormatSize(tt.in); got != tt.want {
				t.Errorf("FormatSize(%d) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseFraction(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"0", 0},
		{"0%", 0},
		{"-0", 0},
		{"0.01%", 0.0001},
		{"0.0001", 0.0001},
		{"1e-4", 0.0001},
		{"5%", 0.05},
		{" 5 % ", 0.05},
		{"1", 1},
		{"100%", 1},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseFraction(tt.in)
			if err != nil {
				t.Fatalf("ParseFraction(%q) error: %v", tt.in, err)
			}
			if math.Abs(got-tt.want) > 1e-15 || math.Signbit(got) {
				t.Errorf("ParseFraction(%q) = %g, want %g", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseFractionErrors(t *testing.T) {
	tests := []struct {
		in   string
		kind error
		msg  string
	}{
		{"", ErrSyntax, `invalid fraction "": want a fraction between 0 and 1 or a percentage`},
		{"%", ErrSyntax, "want a fraction"},
		{"abc", ErrSyntax, "want a fraction"},
		{"NaN", ErrSyntax, "want a fraction"},
		{"inf%", ErrSyntax, "want a fraction"},
		{"1.5", ErrRange, "(did you mean 1.5%?)"},
		{"50", ErrRange, "(did you mean 50%?)"},
		{"101%", ErrRange, "want a fraction"},
		{"-0.1", ErrRange, "want a fraction"},
		{"1000", ErrRange, "want a fraction"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseFraction(tt.in)
			if err == nil {
				t.Fatalf("ParseFraction(%q) = %g, want error", tt.in, got)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("ParseFraction(%q) error %v is not %v", tt.in, err, tt.kind)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("ParseFraction(%q) error %q does not contain %q", tt.in, err, tt.msg)
			}
		})
	}
	t.Run("1000 has no hint", func(t *testing.T) {
		_, err := ParseFraction("1000")
		if err == nil || strings.Contains(err.Error(), "did you mean") {
			t.Errorf("ParseFraction(%q) error %v, want one without a percentage hint", "1000", err)
		}
	})
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{40 * time.Millisecond, "0s"},
		{800 * time.Millisecond, "0.8s"},
		{1500 * time.Millisecond, "1.5s"},
		{9940 * time.Millisecond, "9.9s"},
		{9960 * time.Millisecond, "10s"},
		{42 * time.Second, "42s"},
		{59*time.Second + 600*time.Millisecond, "1m00s"},
		{3*time.Minute + 5*time.Second, "3m05s"},
		{59*time.Minute + 59*time.Second + 600*time.Millisecond, "1h00m"},
		{time.Hour + 2*time.Minute, "1h02m"},
		{time.Hour + 2*time.Minute + 31*time.Second, "1h03m"},
		{100 * time.Hour, "100h00m"},
		{-42 * time.Second, "-42s"},
		{math.MaxInt64, "2562047h47m"},
		{math.MinInt64, "-2562047h47m"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := FormatDuration(tt.in); got != tt.want {
				t.Errorf("FormatDuration(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestRoundTrip checks that what we print can be read back and lands within
// the precision of three significant digits.
func TestRoundTrip(t *testing.T) {
	rates := []uint64{0, 1, 999, 1000, 1234, 999_999, 9_420_000_000, 123_456_789_012, math.MaxUint64}
	for _, v := range rates {
		s := FormatRate(float64(v))
		t.Run("rate "+s, func(t *testing.T) {
			got, err := ParseRate(s)
			if err != nil {
				t.Fatalf("ParseRate(FormatRate(%d) = %q) error: %v", v, s, err)
			}
			if !near(float64(got), float64(v)) {
				t.Errorf("ParseRate(FormatRate(%d) = %q) = %d", v, s, got)
			}
		})
	}
	sizes := []int64{0, 1, 1023, 1024, 1_000_000, 3 << 30, 1<<50 + 12345, 7 << 60}
	for _, v := range sizes {
		s := FormatSize(v)
		t.Run("size "+s, func(t *testing.T) {
			got, err := ParseSize(s)
			if err != nil {
				t.Fatalf("ParseSize(FormatSize(%d) = %q) error: %v", v, s, err)
			}
			if !near(float64(got), float64(v)) {
				t.Errorf("ParseSize(FormatSize(%d) = %q) = %d", v, s, got)
			}
		})
	}
}

// near reports whether got is within rounding to three significant digits
// of want.
func near(got, want float64) bool {
	return math.Abs(got-want) <= 0.005*want+0.5
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"500M", "10Gbps", "1.5Gbit/s", "100kbps", "2T", "1000", "-1", "18446744073709551615", "9.42 Gbit/s", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRate(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) {
				t.Fatalf("ParseRate(%q) error %v is neither ErrSyntax nor ErrRange", s, err)
			}
			return
		}
		out := FormatRate(float64(v))
		back, err := ParseRate(out)
		if err != nil {
			t.Fatalf("ParseRate(%q) = %d, formatted as %q which does not parse: %v", s, v, out, err)
		}
		if !near(float64(back), float64(v)) {
			t.Fatalf("ParseRate(%q) = %d, formatted as %q, reparsed as %d", s, v, out, back)
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4KiB", "2GB", "1TiB", "512", "4k", "-1", "9223372036854775807", "2.00 GiB", "1.5MiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) {
				t.Fatalf("ParseSize(%q) error %v is neither ErrSyntax nor ErrRange", s, err)
			}
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d, want non-negative", s, v)
		}
		out := FormatSize(v)
		back, err := ParseSize(out)
		if errors.Is(err, ErrRange) && float64(v) > 7.99*(1<<60) {
			return // just below 8 EiB rounds up to "8.00 EiB", one past the limit
		}
		if err != nil {
			t.Fatalf("ParseSize(%q) = %d, formatted as %q which does not parse: %v", s, v, out, err)
		}
		if !near(float64(back), float64(v)) {
			t.Fatalf("ParseSize(%q) = %d, formatted as %q, reparsed as %d", s, v, out, back)
		}
	})
}

func TestRateRefusesBytes(t *testing.T) {
	for _, in := range []string{"10GB", "10GB/s", "1MBps", "5B"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) accepted bytes as bits", in)
		}
	}
	for _, in := range []string{"10GBIT", "10Gbps", "10gb", "5b"} {
		if _, err := ParseRate(in); err != nil {
			t.Errorf("ParseRate(%q): %v", in, err)
		}
	}
}
