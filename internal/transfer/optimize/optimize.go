// Package optimize is the transfer service's per-pair optimizer, in the
// manner of FTS3's: once an interval, from the throughput and the
// success rate measured on a node pair, it chooses how many tasks run at
// once on the pair (concurrency) and how many streams each task opens,
// and says why in one line a user can read. Lower on failures, raise
// while throughput pays for it, hold when the queue is short or a
// reserved pair already runs at its booked rate. It is pure: the
// controller feeds it samples and the clock, and stores its decisions;
// after a restart it resumes from the last one stored.
package optimize

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/lightpath/lightpath/internal/transfer"
)

// Config bounds the optimizer. Zero fields take the defaults
// (WithDefaults).
type Config struct {
	// Interval is the least time between two decisions (60 s).
	Interval time.Duration
	// MinConcurrency and MaxConcurrency bound the tasks at once on a
	// pair (1 and 8).
	MinConcurrency, MaxConcurrency int
	// MaxStreams bounds the streams of one task (16).
	MaxStreams int
	// SuccessFloor is the success rate below which concurrency goes
	// down (0.97).
	SuccessFloor float64
}

// Defaults.
const (
	DefaultInterval       = time.Minute
	DefaultMinConcurrency = 1
	DefaultMaxConcurrency = 8
	DefaultMaxStreams     = 16
	DefaultSuccessFloor   = 0.97
	// ConnectionsPerTask: the connections a pair may open are its
	// concurrency × this, shared out as streams over its tasks.
	ConnectionsPerTask = 4
)

// Thresholds of the rules: throughput must rise by more than Rise over
// an interval to raise concurrency by one, by more than RiseMore to raise
// it by two; a reserved pair at BookedShare of its booked rate no longer
// raises.
const (
	Rise        = 0.05
	RiseMore    = 0.20
	BookedShare = 0.95
)

// WithDefaults fills the zero (or nonsensical) fields of c with the
// defaults; a MaxConcurrency below MinConcurrency becomes MinConcurrency.
func (c Config) WithDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.MinConcurrency <= 0 {
		c.MinConcurrency = DefaultMinConcurrency
	}
	if c.MaxConcurrency <= 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	c.MaxConcurrency = max(c.MaxConcurrency, c.MinConcurrency)
	if c.MaxStreams <= 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if !(c.SuccessFloor > 0 && c.SuccessFloor <= 1) { // also NaN
		c.SuccessFloor = DefaultSuccessFloor
	}
	return c
}

// Sample is what a task report says of a pair: the bytes moved since
// that task's previous report, and the files that ended in it.
type Sample struct {
	At          time.Time
	Bytes       int64
	FilesOK     int
	FilesFailed int
}

// Pair is the optimizer of one node pair of one job. Not safe for
// concurrent use.
type Pair struct {
	cfg    Config
	booked uint64
	cur    transfer.Decision
	// decided: cur holds a decision (made or resumed).
	decided bool
	// raisedFrom is the concurrency before the last decision raised it;
	// 0 when it did not raise.
	raisedFrom int
	// The interval being measured: since when, and what came in. A zero
	// since (after Resume) is set by the next sample, whose bytes are
	// not counted: they belong to a span before it that is not known.
	since      time.Time
	bytes      int64
	ok, failed int
}

// New is the optimizer of a pair, bookedBps its reservation's booked rate
// (0: not reserved).
func New(cfg Config, bookedBps uint64) *Pair {
	return &Pair{cfg: cfg.WithDefaults(), booked: bookedBps}
}

// SetBooked changes the booked rate: a pair that leaves its reservation
// for the routed path has 0.
func (p *Pair) SetBooked(bps uint64) { p.booked = bps }

// Resume takes the last decision stored for the pair as the current one,
// as a controller does after a restart: its concurrency and streams
// (brought within the bounds), its throughput as the one to compare the
// next interval with, and its Job, From and To. Whether it was a raise
// is not known, so the next decision does not step it back.
func (p *Pair) Resume(d transfer.Decision) {
	d.Concurrency = clamp(d.Concurrency, p.cfg.MinConcurrency, p.cfg.MaxConcurrency)
	d.Streams = clamp(d.Streams, 1, p.cfg.MaxStreams)
	if math.IsNaN(d.ThroughputBps) || math.IsInf(d.ThroughputBps, 0) || d.ThroughputBps < 0 {
		d.ThroughputBps = 0
	}
	p.cur, p.decided, p.raisedFrom = d, true, 0
	p.since, p.bytes, p.ok, p.failed = time.Time{}, 0, 0, 0
}

// Observe adds a task report to the interval being measured.
func (p *Pair) Observe(s Sample) {
	if p.since.IsZero() {
		p.since = s.At
	} else if s.Bytes > 0 {
		p.bytes += s.Bytes
	}
	p.ok += max(s.FilesOK, 0)
	p.failed += max(s.FilesFailed, 0)
}

// Decide is the pair's decision at now, with queued tasks waiting for the
// pair (counted as active is: tasks, or the tasks its pending files would
// make) and active tasks running on it. The first call decides at once
// (MinConcurrency); later ones decide again once Interval has passed
// since the last decision, and otherwise return the current one with
// false. A new decision (true) is worth storing: its At is now, and it
// carries the pair's Job, From and To when Resume gave them (else the
// caller sets them). Its ThroughputBps is the interval's, or the last one
// carried over when the pair was idle or nothing could be measured (after
// a restart), so that the next interval is compared with real work.
func (p *Pair) Decide(now time.Time, queued, active int) (transfer.Decision, bool) {
	queued, active = max(queued, 0), max(active, 0)
	if !p.decided {
		c := p.cfg.MinConcurrency
		s := p.streams(c, queued, active)
		d := p.cur
		d.At, d.Concurrency, d.Streams, d.ThroughputBps, d.SuccessRate = now, c, s, 0, 1
		d.Reason = fmt.Sprintf("start: concurrency %d, %d stream%s per task", c, s, plural(s))
		p.commit(d, 0)
		return d, true
	}
	if now.Before(p.cur.At.Add(p.cfg.Interval)) {
		return p.cur, false
	}

	measured := !p.since.IsZero()
	var thr float64
	if elapsed := now.Sub(p.since).Seconds(); measured && elapsed > 0 {
		thr = float64(p.bytes) * 8 / elapsed
	}
	success := 1.0
	if ended := p.ok + p.failed; ended > 0 {
		success = float64(p.ok) / float64(ended)
	}
	prev, c := p.cur.ThroughputBps, p.cur.Concurrency
	rise := 0.0
	switch {
	case prev > 0:
		rise = (thr - prev) / prev
	case thr > 0:
		rise = math.Inf(1)
	}

	next, why := c, ""
	hold := func(what string) { next, why = c, fmt.Sprintf("%s: hold at %d", what, c) }
	change := func(what string, want int) {
		to := clamp(want, p.cfg.MinConcurrency, p.cfg.MaxConcurrency)
		switch {
		case to != c:
			next, why = to, fmt.Sprintf("%s: concurrency %d → %d", what, c, to)
		case want < c:
			next, why = c, fmt.Sprintf("%s: concurrency stays at its minimum %d", what, c)
		default:
			next, why = c, fmt.Sprintf("%s: concurrency stays at its maximum %d", what, c)
		}
	}
	switch {
	case queued == 0 && active == 0:
		hold("idle, nothing running or queued")
	case !measured:
		hold("no report since the controller restarted")
	case success < p.cfg.SuccessFloor:
		change(fmt.Sprintf("success %s < %s", percent(success), percent(p.cfg.SuccessFloor)), c-1)
	case p.booked > 0 && thr >= BookedShare*float64(p.booked):
		hold("at the booked rate")
	case queued <= active:
		hold(fmt.Sprintf("short queue (%d queued, %d running)", queued, active))
	case p.raisedFrom > 0 && rise <= Rise:
		change(fmt.Sprintf("raising to %d did not pay (throughput %s)", c, signed(rise)), p.raisedFrom)
	case math.IsInf(rise, 1):
		change("throughput rose from nothing", c+2)
	case rise > RiseMore:
		change(fmt.Sprintf("throughput up %s", whole(rise)), c+2)
	case rise > Rise:
		change(fmt.Sprintf("throughput up %s", whole(rise)), c+1)
	case rise < -Rise:
		hold(fmt.Sprintf("throughput down %s", whole(-rise)))
	default:
		hold(fmt.Sprintf("throughput flat (%s)", signed(rise)))
	}
	if !measured || (queued == 0 && active == 0) {
		// Nothing ran, or what ran is not known: keep the last
		// throughput as the one the next interval is compared with.
		thr = prev
	}
	d := p.cur
	d.At, d.Concurrency, d.Streams, d.ThroughputBps, d.SuccessRate, d.Reason =
		now, next, p.streams(next, queued, active), thr, success, why
	raisedFrom := 0
	if next > c {
		raisedFrom = c
	}
	p.commit(d, raisedFrom)
	return d, true
}

func (p *Pair) commit(d transfer.Decision, raisedFrom int) {
	p.cur, p.decided, p.raisedFrom = d, true, raisedFrom
	p.since, p.bytes, p.ok, p.failed = d.At, 0, 0, 0
}

// streams per task, as FTS3 shares them: the pair's connections
// (concurrency × ConnectionsPerTask) over the tasks running and queued
// (over the concurrency when there are none), from 1 to MaxStreams.
func (p *Pair) streams(concurrency, queued, active int) int {
	n := queued + active
	if n <= 0 {
		n = concurrency
	}
	return clamp(concurrency*ConnectionsPerTask/n, 1, p.cfg.MaxStreams)
}

func clamp(v, lo, hi int) int { return min(max(v, lo), hi) }

// percent prints a fraction as a percentage with at most one decimal:
// 0.91 → "91%", 0.975 → "97.5%".
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}

// signed prints a relative change as a signed whole percentage.
func signed(f float64) string {
	return fmt.Sprintf("%+.0f%%", f*100)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// whole prints a fraction as a whole percentage.
func whole(f float64) string {
	return fmt.Sprintf("%.0f%%", f*100)
}
