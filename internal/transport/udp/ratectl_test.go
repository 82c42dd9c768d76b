package udp

import (
	"math"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/cc/fast"
)

const tmss = 1416

func TestNewController(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target uint64
		t      Tuning
		want   string
		err    bool
	}{
		{"", 0, Tuning{}, CCFast, false},
		{"", 1 << 20, Tuning{}, CCFixed, false},
		{"fixed", 0, Tuning{}, CCFixed, false},
		{"fast", 1 << 20, Tuning{}, CCFast, false},
		{"aimd", 0, Tuning{}, CCAIMD, false},
		{"cubic", 0, Tuning{}, "", true},
		{"fast", 0, Tuning{FAST: fast.Params{Alpha: 0, Gamma: 10}}, "", true},
	} {
		c, err := newController(tc.name, tc.target, tc.t)
		if (err != nil) != tc.err {
			t.Errorf("newController(%q): %v", tc.name, err)
			continue
		}
		if cerr := CheckCC(tc.name); (cerr != nil) != (err != nil) && tc.t == (Tuning{}) {
			t.Errorf("CheckCC(%q) = %v, newController %v", tc.name, cerr, err)
		}
		if err == nil && c.name() != tc.want {
			t.Errorf("newController(%q, %d) = %s, want %s", tc.name, tc.target, c.name(), tc.want)
		}
	}
}

// TestFixed: the rate for new data holds through random loss (the repairs
// paced on top), drops by an eighth a round on queueing delay, CE marks
// and heavy loss, and climbs back to the set rate, never above it.
func TestFixed(t *testing.T) {
	const target = 100 << 20
	base := 20 * time.Millisecond
	calm := round{base: base, avg: base + time.Millisecond, pkts: 1000, mss: tmss}
	for _, tc := range []struct {
		name string
		r    round
		want uint64 // after one round from the target
	}{
		{"calm", calm, target},
		{"random loss", round{base: base, avg: base, pkts: 990, lost: 10, mss: tmss}, target},
		{"heavy loss", round{base: base, avg: base, pkts: 900, lost: 100, mss: tmss}, target - target/8},
		{"queueing delay", round{base: base, avg: base + 6*time.Millisecond, pkts: 1000, mss: tmss}, target - target/8},
		{"delay under the threshold", round{base: base, avg: base + 4*time.Millisecond, pkts: 1000, mss: tmss}, target},
		{"a CE mark", round{base: base, avg: base, pkts: 1000, ce: 1, mss: tmss}, target - target/8},
		// jitter: the smallest round trip 6 ms under the rounds' means,
		// which do not rise
		{"jitter", round{base: base, avg: base + 6*time.Millisecond, low: base + 5*time.Millisecond, pkts: 1000, mss: tmss}, target},
		{"delay rising above the lowest round", round{base: base, avg: base + 12*time.Millisecond, low: base + 5*time.Millisecond, pkts: 1000, mss: tmss}, target - target/8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newController(CCFixed, target, Tuning{})
			c.onRound(tc.r)
			if got := c.(*fixedCtl).cur; got != tc.want {
				t.Errorf("rate for new data after the round = %d, want %d", got, tc.want)
			}
		})
	}
	// repairs go on top of the rate: with 1% of the datagrams repaired
	// round after round, new data still goes at the target
	c0, _ := newController(CCFixed, target, Tuning{})
	for range 60 {
		c0.onRound(round{base: base, avg: base, pkts: 990, lost: 10, mss: tmss})
	}
	if got, want := c0.rate(base, tmss), float64(target)/0.99; math.Abs(float64(got)-want) > want/1000 {
		t.Errorf("pacing with 1%% repaired: %d, want %.0f (the target and the repairs)", got, want)
	}
	c, _ := newController(CCFixed, target, Tuning{})
	congested := round{base: base, avg: base + 50*time.Millisecond, pkts: 1000, mss: tmss}
	for range 100 {
		c.onRound(congested)
	}
	if got := c.rate(base, tmss); got != target/16 {
		t.Errorf("after long congestion the rate is %d, want the floor %d", got, target/16)
	}
	for i := range 40 {
		c.onRound(calm)
		if got := c.rate(base, tmss); got > target {
			t.Fatalf("round %d: rate %d above the set rate", i, got)
		}
	}
	if got := c.rate(base, tmss); got != target {
		t.Errorf("after calm rounds the rate is %d, want %d", got, target)
	}
	c.setTarget(target / 2)
	if got := c.rate(base, tmss); got != target/2 {
		t.Errorf("after setTarget the rate is %d", got)
	}
	if w := c.window(tmss); w < 1024*tmss {
		t.Errorf("window %d under 1024 datagrams", w)
	}
}

// TestFastRound: fast's round is fast.Decide's, FAST TCP's arithmetic.
func TestFastRound(t *testing.T) {
	p := fast.DefaultParams
	c, _ := newController(CCFast, 0, Tuning{})
	f := c.(*fastCtl)
	// slow start: every acknowledged datagram adds one
	w0 := f.w
	f.onAck(10*tmss+5, tmss, 0, 0)
	if f.w != w0+10 {
		t.Fatalf("slow start: window %d after 10 datagrams acked from %d", f.w, w0)
	}
	// an acknowledgement whose round trip shows a backlog of alpha ends
	// slow start with FAST's whole step (gamma 1)
	g := *f
	g.w = 1000
	g.onAck(tmss, tmss, 20*time.Millisecond, 10*time.Millisecond) // backlog 1001*(20-10)/20 >= alpha
	if want := fast.Update(1001, 10000, 20000, p.Alpha, fast.GammaScale); g.slowStart || g.w != want {
		t.Fatalf("slow start on a backlog: window %d (slow start %v), want %d", g.w, g.slowStart, want)
	}
	g = *f
	g.onAck(tmss, tmss, 10100*time.Microsecond, 10*time.Millisecond) // backlog 0
	if !g.slowStart {
		t.Fatal("slow start ended without a backlog")
	}
	// a round with no queue: slow start goes on
	f.onRound(round{base: 10 * time.Millisecond, avg: 10 * time.Millisecond, pkts: 40, mss: tmss})
	if !f.slowStart || f.w != w0+10 {
		t.Fatalf("a round without a queue ended slow start: %+v", f)
	}
	// a queue of alpha: FAST's update from here
	f.w = 1000
	avg := 20 * time.Millisecond // backlog 1000*(20-10)/20 = 500 >= alpha
	f.onRound(round{base: 10 * time.Millisecond, avg: avg, pkts: 1000, mss: tmss})
	want, _ := fast.Decide(1000, 10000, 20000, true, p)
	if f.slowStart || f.w != want {
		t.Fatalf("window %d (slow start %v), want %d from fast.Decide", f.w, f.slowStart, want)
	}
	// random loss below the tolerance: FAST's update, no cut
	w := f.w
	f.onRound(round{base: 10 * time.Millisecond, avg: 15 * time.Millisecond, pkts: 990, lost: 10, mss: tmss})
	if want := fast.Update(w, 10000, 15000, p.Alpha, p.Gamma); f.w != want {
		t.Errorf("after a round with 1%% loss: %d, want %d", f.w, want)
	}
	// CE and heavy loss halve the window, once a round trip; a timeout
	// halves it too
	w = f.w
	f.onRound(round{base: 10 * time.Millisecond, avg: 15 * time.Millisecond, pkts: 1000, ce: 3, mss: tmss})
	if f.w != w/2 {
		t.Errorf("after CE: %d, want %d", f.w, w/2)
	}
	w = f.w
	heavy := round{base: 10 * time.Millisecond, avg: 15 * time.Millisecond, pkts: 900, lost: 100, mss: tmss}
	f.onRound(heavy)
	if want := fast.Update(w, 10000, 15000, p.Alpha, p.Gamma); f.w != want {
		t.Errorf("the round after a cut: %d, want FAST's update %d (no second cut)", f.w, want)
	}
	w = f.w
	f.onRound(heavy)
	if f.w != w/2 {
		t.Errorf("after 10%% loss: %d, want %d", f.w, w/2)
	}
	w = f.w
	f.onTimeout(tmss)
	if f.w != w/2 {
		t.Errorf("after a timeout: %d, want %d", f.w, w/2)
	}
	if r := f.rate(10*time.Millisecond, tmss); r != uint64(float64(f.w*tmss)*1.25/0.01) {
		t.Errorf("rate %d for window %d over 10 ms", r, f.w)
	}
	f.setTarget(1 << 20)
	if r := f.rate(10*time.Millisecond, tmss); r != 1<<20 {
		t.Errorf("capped rate %d", r)
	}
}

func TestAIMD(t *testing.T) {
	c, _ := newController(CCAIMD, 0, Tuning{})
	a := c.(*aimdCtl)
	w := a.window(tmss)
	a.onAck(w, tmss, 0, 0) // slow start: a window's worth acked doubles it
	if a.window(tmss) != 2*w {
		t.Fatalf("slow start: %d, want %d", a.window(tmss), 2*w)
	}
	a.onRound(round{lost: 1, mss: tmss})
	if a.window(tmss) != w {
		t.Fatalf("loss: %d, want %d", a.window(tmss), w)
	}
	a.onAck(w, tmss, 0, 0) // congestion avoidance: a window acked adds a datagram
	if got := a.window(tmss); got != w+tmss {
		t.Fatalf("congestion avoidance: %d, want %d", got, w+tmss)
	}
	a.onTimeout(tmss)
	if a.window(tmss) != 2*tmss {
		t.Fatalf("timeout: %d", a.window(tmss))
	}
}

// bottleneck is a fluid model of a link: flows' windows (datagrams) over
// a base round trip fill the pipe, the rest waits in the queue.
type bottleneck struct {
	pkts float64       // the link's datagrams per second
	base time.Duration // round trip without a queue
}

// rtt is the round trip with windows ws in flight.
func (b bottleneck) rtt(ws []float64) time.Duration {
	sum := 0.0
	for _, w := range ws {
		sum += w
	}
	q := max(sum-b.pkts*b.base.Seconds(), 0)
	return b.base + time.Duration(q/b.pkts*float64(time.Second))
}

// TestFastShares: two fast flows on one bottleneck, the second starting
// later, settle on equal shares (Jain's index above 0.99) with about
// alpha datagrams each queued.
func TestFastShares(t *testing.T) {
	link := bottleneck{pkts: 1e9 / 8 / tmss, base: 20 * time.Millisecond} // 1 Gbit/s
	flows := []*fastCtl{}
	for range 2 {
		c, _ := newController(CCFast, 0, Tuning{})
		flows = append(flows, c.(*fastCtl))
	}
	var last []float64
	for rnd := range 400 {
		active := flows[:1]
		if rnd >= 50 {
			active = flows
		}
		ws := make([]float64, len(active))
		for i, f := range active {
			ws[i] = float64(f.window(tmss)) / tmss
		}
		r := link.rtt(ws)
		for _, f := range active {
			// the round's acks, then the round
			f.onAck(f.window(tmss), tmss, r, link.base)
			f.onRound(round{base: link.base, avg: r, pkts: int(f.w), mss: tmss})
		}
		last = ws
	}
	sum, sq := 0.0, 0.0
	for _, w := range last {
		sum += w
		sq += w * w
	}
	jain := sum * sum / (float64(len(last)) * sq)
	t.Logf("windows %.0f, Jain %.4f", last, jain)
	if jain < 0.99 {
		t.Errorf("Jain's index %.3f for windows %v", jain, last)
	}
	queued := sum - link.pkts*link.base.Seconds()
	alpha := float64(fast.DefaultParams.Alpha)
	if math.Abs(queued-2*alpha) > alpha/2 {
		t.Errorf("%.0f datagrams queued by two flows, want about %.0f", queued, 2*alpha)
	}
}

// TestPacer: a sender that sends whenever the pacer lets it and sleeps as
// long as it says sends at the rate, give or take a burst, over a
// simulated second, whatever the rate and datagram size; an idle stream
// saves up no more than a burst.
func TestPacer(t *testing.T) {
	for _, tc := range []struct {
		rate  uint64
		dgram int
	}{
		{1e9 / 8, 1472}, {1e9 / 8, 8972}, {10e9 / 8, 8972}, {1e6, 1472}, {50e3, 1472},
	} {
		var p pacer
		now, sent := int64(0), 0
		for now < int64(time.Second) {
			p.refill(now, tc.rate, tc.dgram)
			for p.may(tc.rate, tc.dgram) {
				p.spend(tc.rate, tc.dgram)
				sent += tc.dgram
			}
			w := p.wait(tc.rate, tc.dgram)
			if w <= 0 {
				t.Fatalf("rate %d: no wait with no credit", tc.rate)
			}
			now += int64(w)
		}
		burst := max(8*tc.dgram, int(tc.rate/1000))
		// the last wait's credit is left unspent when the second ends
		quantum := min(max(int(float64(tc.rate)*200e-6), tc.dgram), maxGSOBytes)
		if lo, hi := int(tc.rate)-quantum-tc.dgram, int(tc.rate)+burst+tc.dgram; sent < lo || sent > hi {
			t.Errorf("rate %d, datagrams of %d: %d bytes in a second, want %d to %d", tc.rate, tc.dgram, sent, lo, hi)
		}
		// woken, finding nothing to send, then idle for a minute: one
		// burst, no more
		p.refill(now, tc.rate, tc.dgram)
		p.refill(now+int64(time.Minute), tc.rate, tc.dgram)
		if p.credit > float64(burst) {
			t.Errorf("rate %d: %.0f bytes saved up idle, burst %d", tc.rate, p.credit, burst)
		}
	}
	// a sender whose timer fires 2 ms late every time keeps its rate: the
	// credit earned while it overslept is not lost to the burst's cap
	for _, rate := range []uint64{1e9 / 8, 450e6 / 8} {
		var p pacer
		now, sent := int64(0), 0
		for now < int64(time.Second) {
			p.refill(now, rate, 1416)
			for p.may(rate, 1416) {
				p.spend(rate, 1416)
				sent += 1416
			}
			now += int64(p.wait(rate, 1416) + 2*time.Millisecond)
		}
		if float64(sent) < 0.98*float64(rate) {
			t.Errorf("rate %d, waking 2 ms late: %d bytes in a second", rate, sent)
		}
	}
	var p pacer
	if !p.may(0, 1472) || p.wait(0, 1472) != 0 {
		t.Error("an unpaced stream is held")
	}
}
