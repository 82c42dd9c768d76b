// Package progress shows how far a long transfer has got: a one-line
// summary rendered by the pure function Line, a throttled terminal Bar that
// redraws it in place, and a RateMeter that smooths the transfer rate so
// that the estimated time remaining does not jump around.
package progress

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/lightpath/lightpath/internal/units"
)

// State is a snapshot of a transfer's progress.
type State struct {
	// FilesTotal and BytesTotal are 0 while not known, for example while
	// the source is still being scanned.
	FilesDone, FilesTotal int
	Bytes, BytesTotal     int64
	// Rate is in bits per second, like every rate in this project,
	// typically from a RateMeter.
	Rate    float64
	Elapsed time.Duration
}

const (
	sep = "  "
	// minBar is the narrowest bar, brackets included, worth drawing; a
	// shorter one conveys nothing the percentage does not.
	minBar = 12
	// maxBar keeps the bar from dominating a very wide terminal.
	maxBar = 52
	// maxETA is the longest estimate shown. Beyond it the estimate is
	// useless, and at the extreme it would overflow time.Duration.
	maxETA = 365 * 24 * time.Hour
)

// field is one part of the line; fields with a lower drop value are
// removed first when the line does not fit.
type field struct {
	text string
	drop int
}

// Line renders s as one line at most width columns wide (all output is
// ASCII, so bytes and columns coincide). In full it reads
//
//	[=========>          ]   45%  1.23 GiB/2.73 GiB  12/40 files  9.42 Gbit/s  ETA 3m05s
//
// As width shrinks, the bar goes first, then the file count, the byte
// count, the rate and the ETA, leaving the percentage; if not even that
// fits, the line is empty. When BytesTotal is unknown there is no bar or
// percentage, the ETA is "--" (as it is when the rate is unknown) and the
// byte count is kept longest. Once all bytes are done the ETA gives way to
// the elapsed time ("took 3m05s"). Numbers are padded to their widest form
// so that fields do not shift as they change.
func Line(s State, width int) string {
	if width <= 0 {
		return ""
	}
	known := s.BytesTotal > 0
	done := min(max(s.Bytes, 0), max(s.BytesTotal, 0))

	var fields []field
	if known {
		fields = append(fields,
			field{fmt.Sprintf("%3d%%", scaled(done, s.BytesTotal, 100)), 5},
			field{fmt.Sprintf("%8s/%s", units.FormatSize(s.Bytes), units.FormatSize(s.BytesTotal)), 2})
	} else {
		// Without a total, the byte count is the only sign of progress.
		fields = append(fields, field{fmt.Sprintf("%8s", units.FormatSize(s.Bytes)), 5})
	}
	switch {
	case s.FilesTotal > 0:
		n := len(fmt.Sprint(s.FilesTotal))
		fields = append(fields, field{fmt.Sprintf("%*d/%d files", n, s.FilesDone, s.FilesTotal), 1})
	case s.FilesDone > 0:
		fields = append(fields, field{fmt.Sprintf("%d files", s.FilesDone), 1})
	}
	fields = append(fields, field{fmt.Sprintf("%11s", units.FormatRate(s.Rate)), 3})
	// Pad the ETA so the bar keeps its length as the ETA shortens; the
	// padding is trimmed off the end of the line below. Without a total
	// the ETA is always "--", so it is the first to go.
	eta := field{fmt.Sprintf("%-9s", timeLeft(s)), 4}
	if !known {
		eta.drop = 0
	}
	fields = append(fields, eta)

	// Fit without the ETA padding, but size the bar with it, so that the
	// bar keeps its length while dropping no field that would fit.
	text := join(fields)
	for len(strings.TrimRight(text, " ")) > width && len(fields) > 1 {
		fields = dropOne(fields)
		text = join(fields)
	}
	if len(strings.TrimRight(text, " ")) > width {
		// Only the most important field is left. Without its padding it
		// may still fit; if not, show nothing rather than a fragment such
		// as "10" of "100%".
		if text = strings.TrimSpace(text); len(text) > width {
			return ""
		}
		return text
	}
	if room := width - len(text) - len(sep); known && room >= minBar {
		text = bar(done, s.BytesTotal, min(room, maxBar)) + sep + text
	}
	return strings.TrimRight(text, " ")
}

// timeLeft is the ETA field: the remaining bytes over the current rate,
// or the elapsed time once everything is done.
func timeLeft(s State) string {
	if s.BytesTotal > 0 && s.Bytes >= s.BytesTotal {
		if s.Elapsed > 0 {
			return "took " + units.FormatDuration(s.Elapsed)
		}
		return "done"
	}
	if s.BytesTotal <= 0 || !(s.Rate > 0) {
		return "ETA --"
	}
	secs := float64(s.BytesTotal-max(s.Bytes, 0)) * 8 / s.Rate
	if secs > maxETA.Seconds() {
		return "ETA --"
	}
	return "ETA " + units.FormatDuration(time.Duration(secs*float64(time.Second)))
}

// scaled returns done*n/total rounded down, without the overflow that
// done*n could cause and without the float error that would show 29 of 100
// as 28%. It requires 0 <= done <= total and total > 0.
func scaled(done, total int64, n int) int {
	hi, lo := bits.Mul64(uint64(done), uint64(n))
	q, _ := bits.Div64(hi, lo, uint64(total))
	return int(q)
}

// bar draws a bar of the given width, brackets included, filled to
// done/total.
func bar(done, total int64, width int) string {
	inner := width - 2
	fill := scaled(done, total, inner)
	if fill >= inner {
		return "[" + strings.Repeat("=", inner) + "]"
	}
	return "[" + strings.Repeat("=", fill) + ">" + strings.Repeat(" ", inner-fill-1) + "]"
}

func join(fields []field) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f.text
	}
	return strings.Join(parts, sep)
}

// dropOne removes the field with the lowest drop value.
func dropOne(fields []field) []field {
	low := 0
	for i, f := range fields {
		if f.drop < fields[low].drop {
			low = i
		}
	}
	return append(fields[:low:low], fields[low+1:]...)
}

// redrawInterval limits how often a Bar draws: fast enough to look live,
// slow enough that drawing costs nothing next to the transfer and does not
// flood a slow terminal or a remote session.
const redrawInterval = 200 * time.Millisecond

// Bar draws Line in place on a terminal. It is safe for concurrent use.
// Write errors are ignored, because a broken progress display must not
// fail the transfer it reports on.
type Bar struct {
	mu       sync.Mutex
	w        io.Writer
	width    int
	now      func() time.Time // replaced in tests
	last     time.Time
	drawn    bool
	finished bool
}

// NewBar returns a Bar that draws on w, a terminal width columns wide (see
// TerminalWidth). Only call it when w is a terminal: the carriage returns
// and escape codes it writes would garble a log file.
func NewBar(w io.Writer, width int) *Bar {
	return &Bar{w: w, width: width, now: time.Now}
}

// Update redraws the line with s, unless it was drawn less than 200 ms ago,
// so it may be called as often as is convenient. It does nothing after
// Finish.
func (b *Bar) Update(s State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	t := b.now()
	if b.drawn && t.Sub(b.last) < redrawInterval {
		return
	}
	b.draw(s, t)
}

// Finish draws s regardless of throttling and ends the line, leaving the
// final state on screen. Later calls to Update and Finish do nothing.
func (b *Bar) Finish(s State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.draw(s, b.now())
	io.WriteString(b.w, "\n")
	b.finished = true
}

// Clear erases the line so that a message can be printed in its place;
// the next Update draws again immediately.
func (b *Bar) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished || !b.drawn {
		return
	}
	io.WriteString(b.w, "\r\x1b[K")
	b.drawn = false
}

func (b *Bar) draw(s State, t time.Time) {
	// One column is left free because some terminals wrap as soon as the
	// last column is written, and the next "\r" would then redraw on a new
	// line. A single Write keeps other output from splitting the frame.
	io.WriteString(b.w, "\r"+Line(s, b.width-1)+"\x1b[K")
	b.last = t
	b.drawn = true
}

// TerminalWidth reports the width of the terminal f is attached to, and
// ok=false when f is not a terminal, in which case callers should not draw
// a Bar. A terminal whose size cannot be read is assumed to be 80 columns.
func TerminalWidth(f *os.File) (width int, ok bool) {
	fd := int(f.Fd())
	if !term.IsTerminal(fd) {
		return 0, false
	}
	w, _, err := term.GetSize(fd)
	if err != nil || w <= 0 {
		return 80, true
	}
	return w, true
}

// rateWindow is the time constant of RateMeter's smoothing: long enough to
// hide bursts from buffering and congestion control, short enough to
// follow a real change in throughput within a few seconds.
const rateWindow = 2500 * time.Millisecond

// RateMeter turns cumulative byte counts into a smoothed rate. The zero
// value is ready to use. It is not safe for concurrent use.
//
// For the first 2.5 s it reports the average since the first sample, which
// avoids both the noise of a single short interval and the slow climb from
// zero of a plain moving average. After that it is an exponentially
// weighted moving average with a 2.5 s time constant, so a new rate is
// mostly reflected after 5-8 s.
type RateMeter struct {
	started   bool
	last      time.Time
	lastBytes int64
	span      time.Duration // time observed, while warming up
	sum       int64         // bytes observed, while warming up
	rate      float64       // bits per second
}

// Observe records that cumulativeBytes had been transferred by time t and
// returns the smoothed rate in bits per second (0 until a second sample
// arrives). Call it on a timer as well as when data moves, so that the rate
// falls during a stall instead of freezing.
//
// Samples not later than the previous one are ignored, their bytes being
// counted with the next sample. A count lower than the previous one (a
// restarted counter) starts a new baseline without changing the rate.
func (m *RateMeter) Observe(t time.Time, cumulativeBytes int64) float64 {
	if !m.started {
		m.started, m.last, m.lastBytes = true, t, cumulativeBytes
		return 0
	}
	dt := t.Sub(m.last)
	if dt <= 0 {
		return m.rate
	}
	delta := cumulativeBytes - m.lastBytes
	m.last, m.lastBytes = t, cumulativeBytes
	if delta < 0 {
		return m.rate
	}
	if m.span < rateWindow {
		m.span += dt
		m.sum += delta
		m.rate = float64(m.sum) * 8 / m.span.Seconds()
		return m.rate
	}
	instant := float64(delta) * 8 / dt.Seconds()
	alpha := 1 - math.Exp(-float64(dt)/float64(rateWindow))
	m.rate += alpha * (instant - m.rate)
	return m.rate
}
