package progress

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// half is a transfer half way through 2 GiB at a rate that leaves 3m05s.
var half = State{
	FilesDone: 7, FilesTotal: 120,
	Bytes: 1 << 30, BytesTotal: 2 << 30,
	Rate:    8 * (1 << 30) / 185.0,
	Elapsed: time.Minute,
}

func TestLine(t *testing.T) {
	done := State{FilesDone: 40, FilesTotal: 40, Bytes: 2 << 30, BytesTotal: 2 << 30, Rate: 9.42e9, Elapsed: 185 * time.Second}
	counting := State{FilesDone: 3, Bytes: 5 << 20, Rate: 1e6}
	tests := []struct {
		name  string
		s     State
		width int
		want  string
	}{
		{"wide bar is capped", half, 120,
			"[=========================>                        ]   50%  1.00 GiB/2.00 GiB    7/120 files  46.4 Mbit/s  ETA 3m05s"},
		{"bar fills spare room", half, 78,
			"[======>     ]   50%  1.00 GiB/2.00 GiB    7/120 files  46.4 Mbit/s  ETA 3m05s"},
		{"narrowest bar", half, 76,
			"[=====>    ]   50%  1.00 GiB/2.00 GiB    7/120 files  46.4 Mbit/s  ETA 3m05s"},
		{"bar dropped first", half, 75,
			" 50%  1.00 GiB/2.00 GiB    7/120 files  46.4 Mbit/s  ETA 3m05s"},
		{"files dropped next", half, 60,
			" 50%  1.00 GiB/2.00 GiB  46.4 Mbit/s  ETA 3m05s"},
		{"then bytes", half, 40,
			" 50%  46.4 Mbit/s  ETA 3m05s"},
		{"then rate", half, 20,
			" 50%  ETA 3m05s"},
		{"percentage only", half, 4,
			" 50%"},
		{"percentage without padding", half, 3,
			"50%"},
		{"nothing fits", half, 2,
			""},
		{"zero width", half, 0,
			""},
		{"unknown totals", counting, 80,
			"5.00 MiB  3 files  1.00 Mbit/s  ETA --"},
		{"unknown totals drop ETA first", counting, 30,
			"5.00 MiB  3 files  1.00 Mbit/s"},
		{"unknown totals keep bytes", counting, 10,
			"5.00 MiB"},
		{"nothing yet", State{}, 80,
			"     0 B      0 bit/s  ETA --"},
		{"unknown rate", State{FilesTotal: 1, Bytes: 29, BytesTotal: 100}, 80,
			"[======>              ]   29%      29 B/100 B  0/1 files      0 bit/s  ETA --"},
		{"done shows elapsed", done, 80,
			"[===============]  100%  2.00 GiB/2.00 GiB  40/40 files  9.42 Gbit/s  took 3m05s"},
		{"done without elapsed", State{Bytes: 10, BytesTotal: 10}, 40,
			"100%      10 B/10 B      0 bit/s  done"},
		{"overshoot is clamped", State{Bytes: 11, BytesTotal: 10}, 38,
			"100%      11 B/10 B      0 bit/s  done"},
		{"just short of done", State{Bytes: 999, BytesTotal: 1000, Rate: 8}, 60,
			"[==========>]   99%     999 B/1000 B      8 bit/s  ETA 1.0s"},
		{"ETA beyond a year", State{Bytes: 0, BytesTotal: math.MaxInt64, Rate: 1}, 50,
			"  0%       0 B/8.00 EiB      1 bit/s  ETA --"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Line(tt.s, tt.width)
			if got != tt.want {
				t.Errorf("Line(%+v, %d) =\n%q, want\n%q", tt.s, tt.width, got, tt.want)
			}
		})
	}
}

// TestLineFits checks the one promise callers rely on most: whatever the
// state, the line never exceeds the width.
func TestLineFits(t *testing.T) {
	states := []State{
		{},
		half,
		{FilesDone: -1, Bytes: -5, BytesTotal: 10, Rate: math.NaN()},
		{FilesDone: math.MaxInt, FilesTotal: math.MaxInt, Bytes: math.MaxInt64, BytesTotal: math.MaxInt64, Rate: math.Inf(1), Elapsed: math.MaxInt64},
		{Bytes: 1, BytesTotal: math.MaxInt64, Rate: 1e-300},
	}
	for i, s := range states {
		for width := -1; width <= 200; width++ {
			if got := Line(s, width); len(got) > max(width, 0) {
				t.Errorf("state %d: Line(%+v, %d) = %q is %d long", i, s, width, got, len(got))
			}
		}
	}
}

// fakeClock is a settable clock for Bar.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newTestBar(w *bytes.Buffer) (*Bar, *fakeClock) {
	c := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := NewBar(w, 40)
	b.now = c.now
	return b, c
}

func TestBarThrottle(t *testing.T) {
	frame := func(s State) string { return "\r" + Line(s, 39) + "\x1b[K" }
	s1 := State{Bytes: 1, BytesTotal: 100}
	s2 := State{Bytes: 2, BytesTotal: 100}
	s3 := State{Bytes: 3, BytesTotal: 100}
	s4 := State{Bytes: 100, BytesTotal: 100}
	tests := []struct {
		name string
		run  func(b *Bar, c *fakeClock)
		want string
	}{
		{"first update draws", func(b *Bar, c *fakeClock) {
			b.Update(s1)
		}, frame(s1)},
		{"updates within 200ms are dropped", func(b *Bar, c *fakeClock) {
			b.Update(s1)
			c.advance(100 * time.Millisecond)
			b.Update(s2)
			c.advance(99 * time.Millisecond)
			b.Update(s3)
		}, frame(s1)},
		{"update after 200ms draws", func(b *Bar, c *fakeClock) {
			b.Update(s1)
			c.advance(150 * time.Millisecond)
			b.Update(s2)
			c.advance(50 * time.Millisecond)
			b.Update(s3)
		}, frame(s1) + frame(s3)},
		{"finish always draws and ends the line", func(b *Bar, c *fakeClock) {
			b.Update(s1)
			c.advance(time.Millisecond)
			b.Finish(s4)
		}, frame(s1) + frame(s4) + "\n"},
		{"nothing after finish", func(b *Bar, c *fakeClock) {
			b.Finish(s4)
			c.advance(time.Second)
			b.Update(s1)
			b.Finish(s1)
			b.Clear()
		}, frame(s4) + "\n"},
		{"clear erases and allows an immediate redraw", func(b *Bar, c *fakeClock) {
			b.Update(s1)
			b.Clear()
			b.Clear()
			b.Update(s2)
		}, frame(s1) + "\r\x1b[K" + frame(s2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			b, c := newTestBar(&buf)
			tt.run(b, c)
			if got := buf.String(); got != tt.want {
				t.Errorf("output =\n%q, want\n%q", got, tt.want)
			}
		})
	}
}

func TestTerminalWidthNotATerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if w, ok := TerminalWidth(f); ok {
		t.Errorf("TerminalWidth(regular file) = %d, true; want false", w)
	}
}

func TestRateMeter(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	const mbps = 8e6 // 1 MB/s in bits per second

	t.Run("first sample has no rate", func(t *testing.T) {
		var m RateMeter
		if got := m.Observe(start, 1000); got != 0 {
			t.Errorf("first Observe = %g, want 0", got)
		}
	})
	t.Run("warm-up is the average since the start", func(t *testing.T) {
		var m RateMeter
		m.Observe(at(0), 0)
		if got := m.Observe(at(100*time.Millisecond), 100_000); got != mbps {
			t.Errorf("after 100ms at 1 MB/s: %g, want %g", got, mbps)
		}
		if got := m.Observe(at(time.Second), 400_000); math.Abs(got-3.2e6) > 1 {
			t.Errorf("400 kB in 1s: %g, want 3.2e6", got)
		}
	})
	t.Run("converges to a steady rate", func(t *testing.T) {
		var m RateMeter
		var got float64
		for i := range 101 { // 10 s at 100 ms, with bursty arrivals
			n := int64(i) * 100_000
			if i%2 == 1 {
				n -= 50_000
			}
			got = m.Observe(at(time.Duration(i)*100*time.Millisecond), n)
		}
		if math.Abs(got-mbps)/mbps > 0.05 {
			t.Errorf("after 10 s at 1 MB/s: %g, want within 5%% of %g", got, mbps)
		}
	})
	t.Run("follows a step smoothly", func(t *testing.T) {
		var m RateMeter
		var n int64
		var i int
		step := func(until time.Duration, bytesPerTick int64) float64 {
			var r float64
			for ; time.Duration(i)*100*time.Millisecond <= until; i++ {
				r = m.Observe(at(time.Duration(i)*100*time.Millisecond), n)
				n += bytesPerTick
			}
			return r
		}
		step(10*time.Second, 100_000) // 1 MB/s
		early := step(10500*time.Millisecond, 200_000)
		if early > 1.3*mbps {
			t.Errorf("0.5 s after doubling: %g, want under %g (no jump)", early, 1.3*mbps)
		}
		late := step(20*time.Second, 200_000)
		if math.Abs(late-2*mbps)/(2*mbps) > 0.05 {
			t.Errorf("10 s after doubling: %g, want within 5%% of %g", late, 2*mbps)
		}
		stalled := step(25*time.Second, 0)
		if stalled > 0.2*late {
			t.Errorf("5 s into a stall: %g, want under %g", stalled, 0.2*late)
		}
	})
	t.Run("ignores samples out of order", func(t *testing.T) {
		var m RateMeter
		m.Observe(at(0), 0)
		r := m.Observe(at(time.Second), 1_000_000)
		if got := m.Observe(at(time.Second), 2_000_000); got != r {
			t.Errorf("same-time sample changed the rate to %g, want %g", got, r)
		}
		if got := m.Observe(at(500*time.Millisecond), 3_000_000); got != r {
			t.Errorf("earlier sample changed the rate to %g, want %g", got, r)
		}
		// The bytes of the ignored samples count once time moves on.
		if got := m.Observe(at(2*time.Second), 3_000_000); got != 12e6 {
			t.Errorf("3 MB in 2 s: %g, want 1.2e7", got)
		}
	})
	t.Run("restarted counter keeps the rate", func(t *testing.T) {
		var m RateMeter
		m.Observe(at(0), 0)
		r := m.Observe(at(time.Second), 1_000_000)
		if got := m.Observe(at(2*time.Second), 10); got != r {
			t.Errorf("after counter reset: %g, want %g", got, r)
		}
		if got := m.Observe(at(3*time.Second), 1_000_010); got != r {
			t.Errorf("1 MB/s after reset: %g, want %g", got, r)
		}
	})
}

func TestLineNoControlCharacters(t *testing.T) {
	if got := Line(half, 200); strings.ContainsAny(got, "\r\n\x1b") {
		t.Errorf("Line(%+v, 200) = %q contains control characters", half, got)
	}
}
