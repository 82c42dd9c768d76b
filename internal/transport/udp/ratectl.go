package udp

import (
	"fmt"
	"time"

	"github.com/lightpath/lightpath/internal/cc/fast"
)

// Rate controls (Options.CC): what a stream may have in flight and how fast
// it paces. Each is told of every acknowledgement, of each round (one
// round trip's worth of acknowledgements) and of timeouts; the stream asks
// it for its window and rate before it sends.
const (
	CCFixed = "fixed" // LambdaStream: steady at the set rate
	CCFast  = "fast"  // FAST's window equation (internal/cc) from queueing delay
	CCAIMD  = "aimd"  // Reno-like additive increase, multiplicative decrease
)

// Names lists the rate controls, for messages.
var Names = []string{CCFixed, CCFast, CCAIMD}

// round is what a round of acknowledgements measured.
type round struct {
	avg, base time.Duration // the round's mean round trip; the smallest ever
	low       time.Duration // the smallest round's mean so far, this one's included (0: unknown)
	pkts      int           // data datagrams acknowledged in the round
	lost      int           // data datagrams found lost (NAKs and timeouts)
	ce        int           // datagrams that arrived marked CE
	mss       int
}

// controller is one rate control's state.
type controller interface {
	name() string
	// onAck: acked bytes newly acknowledged (cumulatively or selectively);
	// srtt the smoothed round trip, base the smallest.
	onAck(acked int, mss int, srtt, base time.Duration)
	// onRound: a round ended.
	onRound(r round)
	// onTimeout: a retransmission timeout fired (nothing heard for an RTO).
	onTimeout(mss int)
	// window is the bytes allowed in flight.
	window(mss int) int
	// rate is the pacing rate in bytes/s for a smoothed round trip srtt;
	// 0 leaves the stream unpaced (the window limits it).
	rate(srtt time.Duration, mss int) uint64
	// setTarget gives the rate set on the stream (Options.PacingRate,
	// SetPacingRate; 0: none).
	setTarget(bps uint64)
}

// Tuning are the rate controls' parameters.
type Tuning struct {
	// FAST is the fast control's alpha (packets queued per flow) and
	// gamma; zero takes fast.DefaultParams.
	FAST fast.Params
	// LossTolerance is the fraction of a round's datagrams that may be
	// lost before fast and fixed take the loss for congestion and slow
	// down (below it, loss is taken as random and only repaired). It is the
	// fairness factor against TCP on a shared path: a queue that overflows
	// because TCP shares it loses more than this, and the UDP flow yields.
	// 0 means 0.05.
	LossTolerance float64
	// DelayThreshold is the queueing delay (the round's mean round trip
	// above the smallest) at which fixed slows down; 0 means the larger of
	// 5 ms and a tenth of the smallest round trip.
	DelayThreshold time.Duration
}

func (t Tuning) lossTolerance() float64 {
	if t.LossTolerance <= 0 {
		return 0.05
	}
	return t.LossTolerance
}

func (t Tuning) delayThreshold(base time.Duration) time.Duration {
	if t.DelayThreshold > 0 {
		return t.DelayThreshold
	}
	return max(5*time.Millisecond, base/10)
}

// newController makes the named control; "" picks fixed when a rate is
// set, fast otherwise.
func newController(name string, target uint64, t Tuning) (controller, error) {
	if name == "" {
		name = CCFast
		if target > 0 {
			name = CCFixed
		}
	}
	switch name {
	case CCFixed:
		f := &fixedCtl{t: t}
		f.setTarget(target)
		return f, nil
	case CCFast:
		p := t.FAST
		if p == (fast.Params{}) {
			p = fast.DefaultParams
		}
		if err := p.Check(); err != nil {
			return nil, fmt.Errorf("fast: %w", err)
		}
		return &fastCtl{p: p, t: t, w: initialWindow, slowStart: true, target: target}, nil
	case CCAIMD:
		return &aimdCtl{w: initialWindow * 1500, ssthresh: 1 << 62, target: target}, nil
	}
	return nil, fmt.Errorf("congestion control %q: the udp transport offers %v", name, Names)
}

// CheckCC says whether a stream may be given the named rate control
// ("" is the transport's choice), as transport.CheckCC does for TCP's
// congestion controls: the mover asks before dialling.
func CheckCC(name string) error {
	_, err := newController(name, 0, Tuning{})
	return err
}

// initialWindow is the window, in datagrams, a stream starts with.
const initialWindow = 32

// capRate applies the stream's cap to a rate (0 is no limit on either).
func capRate(r, target uint64) uint64 {
	if target > 0 && (r == 0 || r > target) {
		return target
	}
	return r
}

// windowRate paces a window over a round trip, a quarter faster so that
// the window, not the pacing, is what binds.
func windowRate(w int, srtt time.Duration) uint64 {
	if srtt <= 0 {
		return 0
	}
	return uint64(float64(w) * 1.25 / srtt.Seconds())
}

// fixedCtl is LambdaStream's control: send new data at the target rate,
// the repairs on top; loss is repaired, not answered, unless a round loses more than the tolerance; a
// queueing delay (the round's mean above the lowest round's) above the threshold or a CE mark lowers the rate by an
// eighth per round, and the rate climbs back by a sixteenth of the target
// per round once the delay is below half the threshold.
type fixedCtl struct {
	t      Tuning
	target uint64 // bytes/s; 0: unpaced
	cur    uint64
	srtt   time.Duration
	loss   float64 // the share of datagrams repaired, smoothed over rounds
}

// maxRepairShare bounds what fixed paces on top of its rate for repairs.
const maxRepairShare = 0.1

func (f *fixedCtl) name() string { return CCFixed }

func (f *fixedCtl) setTarget(bps uint64) { f.target, f.cur = bps, bps }

func (f *fixedCtl) onAck(int, int, time.Duration, time.Duration) {}

func (f *fixedCtl) onRound(r round) {
	f.srtt = r.avg
	if f.target == 0 {
		return
	}
	// A rising delay is the round's mean above the lowest round's mean:
	// jitter, which the smallest single round trip catches at its lowest,
	// averages out over a round and is not taken for a queue.
	q := r.avg - r.base
	if r.low > 0 {
		q = r.avg - r.low
	}
	if n := r.pkts + r.lost; n > 0 {
		f.loss += (float64(r.lost)/float64(n) - f.loss) / 8
	}
	th := f.t.delayThreshold(r.base)
	congested := r.ce > 0 || q > th || float64(r.lost) > f.t.lossTolerance()*float64(r.pkts+r.lost)
	switch {
	case congested:
		f.cur = max(f.cur-f.cur/8, f.target/16, 1)
	case q < th/2:
		f.cur = min(f.target, f.cur+max(f.target/16, 1))
	}
}

func (f *fixedCtl) onTimeout(int) {}

// window: three times what the rate puts in flight over a round trip, and never
// under 1024 datagrams, so that a stretch of a longer round trip does not
// stall the rate; unpaced, the receiver's window is the only limit.
func (f *fixedCtl) window(mss int) int {
	if f.target == 0 {
		return 1 << 40
	}
	return max(int(3*float64(f.cur)*f.srtt.Seconds()), 1024*mss)
}

// rate is the current rate for new data, and on top of it what repairs
// take (the share of datagrams lost of late, up to maxRepairShare), so
// that random loss, repaired, does not slow the delivery: a transfer on a
// booking of R delivers R and ends when the booking says.
func (f *fixedCtl) rate(srtt time.Duration, _ int) uint64 {
	if f.srtt == 0 {
		f.srtt = srtt
	}
	return uint64(float64(f.cur) / (1 - min(f.loss, maxRepairShare)))
}

// fastCtl runs FAST's window equation (fast.Decide, the same integer
// arithmetic as the kernel's FAST TCP) once a round on the round's mean
// round trip and the smallest seen: the window settles where the flow
// keeps alpha datagrams queued. Slow start doubles the window each round
// trip until the flow's backlog, judged on every acknowledgement from the
// smoothed round trip, reaches alpha; it then takes the whole step of
// FAST's equation at once (gamma 1), which drains what the last round trip
// of doubling queued. Judged once a round, a queue built by doubling was
// seen a round trip late, with the window four times the path's, and the
// queue overflowed for several rounds. Loss is repaired, not answered, up
// to the tolerance (random loss; a shared queue grows the round trip, which
// FAST's equation answers); above it, and on CE marks, the window halves,
// once a round trip: the round after a cut still reports loss the cut
// came too late to prevent. A timeout halves it too.
type fastCtl struct {
	p         fast.Params
	t         Tuning
	w         uint32 // datagrams
	slowStart bool
	target    uint64
	acked     int  // bytes acked in slow start, not yet turned into window
	cut       bool // the last round cut the window
}

func (f *fastCtl) name() string { return CCFast }

func (f *fastCtl) setTarget(bps uint64) { f.target = bps }

func (f *fastCtl) onAck(acked int, mss int, srtt, base time.Duration) {
	if !f.slowStart {
		return
	}
	f.acked += acked
	if n := f.acked / mss; n > 0 {
		f.w = min(f.w+uint32(n), 1<<30)
		f.acked -= n * mss
	}
	if base > 0 && srtt > base && fast.Backlog(f.w, us(base), us(srtt)) >= f.p.Alpha {
		f.slowStart = false
		f.w = max(fast.Update(f.w, us(base), us(srtt), f.p.Alpha, fast.GammaScale), fast.MinCwnd)
	}
}

func (f *fastCtl) onRound(r round) {
	base, avg := us(r.base), us(r.avg)
	heavy := float64(r.lost) > f.t.lossTolerance()*float64(r.pkts+r.lost)
	if (heavy || r.ce > 0) && !f.cut {
		f.w = max(f.w/2, fast.MinCwnd)
		f.slowStart, f.cut = false, true
		return
	}
	f.cut = false
	w, phase := fast.Decide(f.w, base, avg, f.slowStart, f.p)
	if phase != fast.PhaseSlowStart {
		f.slowStart = false
	}
	f.w = w
}

func (f *fastCtl) onTimeout(int) {
	f.w = max(f.w/2, fast.MinCwnd)
	f.slowStart = false
}

func (f *fastCtl) window(mss int) int { return int(f.w) * mss }

func (f *fastCtl) rate(srtt time.Duration, mss int) uint64 {
	return capRate(windowRate(f.window(mss), srtt), f.target)
}

// us is d in whole microseconds, at least 1 (FAST divides by it).
func us(d time.Duration) uint32 {
	return uint32(max(d.Microseconds(), 1))
}

// aimdCtl is the Reno-like control, for comparison: slow start to the
// first loss, then a datagram more per round and half the window on a
// round with loss or CE marks.
type aimdCtl struct {
	w, ssthresh int // bytes
	target      uint64
}

func (a *aimdCtl) name() string { return CCAIMD }

func (a *aimdCtl) setTarget(bps uint64) { a.target = bps }

func (a *aimdCtl) onAck(acked int, mss int, _, _ time.Duration) {
	if a.w < a.ssthresh {
		a.w += acked
		return
	}
	// congestion avoidance: mss per window's worth of acks
	a.w += max(mss*acked/max(a.w, 1), 1)
}

func (a *aimdCtl) onRound(r round) {
	if r.lost > 0 || r.ce > 0 {
		a.w = max(a.w/2, 2*r.mss)
		a.ssthresh = a.w
	}
}

func (a *aimdCtl) onTimeout(mss int) {
	a.ssthresh = max(a.w/2, 2*mss)
	a.w = 2 * mss
}

func (a *aimdCtl) window(int) int { return a.w }

func (a *aimdCtl) rate(srtt time.Duration, _ int) uint64 {
	return capRate(windowRate(a.w, srtt), a.target)
}

// cloneCtl copies a rate control's state.
func cloneCtl(x controller) controller {
	switch v := x.(type) {
	case *fixedCtl:
		c := *v
		return &c
	case *fastCtl:
		c := *v
		return &c
	case *aimdCtl:
		c := *v
		return &c
	}
	panic(fmt.Sprintf("udp: no copy of rate control %T", x))
}
