package fast

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestUpdate(t *testing.T) {
	for _, c := range []struct {
		name                       string
		w, base, avg, alpha, gamma uint32
		want                       uint32
	}{
		// No queue: target w+alpha, half-way there: +gamma*alpha.
		{"no queue", 100, 50000, 50000, 100, 512, 150},
		// A big step is held to twice the window.
		{"at most twice", 10, 50000, 50000, 100, 1024, 20},
		// w*(avg-base)/avg = 1100*1000/11000 = alpha: stay.
		{"equilibrium", 1100, 10000, 11000, 100, 512, 1100},
		// Queue of 1000 packets against alpha 100: target 1100, half-way.
		{"queue too long", 2000, 10000, 20000, 100, 512, 1550},
		// (924*1000 + 100*1001 + 512)/1024 = 1000.6 rounds to w, but the
		// target is a packet away: one packet up.
		{"at least one up", 1000, 10000, 10000, 1, 100, 1001},
		// target 980+10 = 990; (974*1000 + 50*990 + 512)/1024 = 1000.01.
		{"at least one down", 1000, 10000, 10200, 10, 50, 999},
		// Never below two packets.
		{"floor", 2, 1000, 100000, 1, 1024, MinCwnd},
		// A large window and alpha: no overflow in the products.
		{"large", 1 << 20, 100000, 100000, 100000, 1024, 1<<20 + 100000},
		{"huge rtt", 1 << 24, 1 << 30, 1<<30 + 1<<29, 100, 512, 13981063}, // (2^24 + 2^24/1.5 + 100 + 1)/2,
	} {
		if got := Update(c.w, c.base, c.avg, c.alpha, c.gamma); got != c.want {
			t.Errorf("%s: Update(w %d, base %d, avg %d, alpha %d, gamma %d) = %d, want %d", c.name, c.w, c.base, c.avg, c.alpha, c.gamma, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	p := Params{Alpha: 100, Gamma: 512}
	for _, c := range []struct {
		name         string
		w, base, avg uint32
		slowStart    bool
		want         uint32
		phase        Phase
	}{
		{"slow start, no queue", 500, 10000, 10100, true, 500, PhaseSlowStart},             // backlog 4
		{"slow start, queue of alpha", 1100, 10000, 11000, true, 1100, PhaseSlowStartEnds}, // backlog 100
		{"slow start overshoot", 4000, 10000, 20000, true, 3050, PhaseSlowStartEnds},
		{"fast", 2000, 10000, 20000, false, 1550, PhaseFAST},
		// A mean below the base (a new minimum came after the round's
		// samples) counts as no queue.
		{"mean below base", 100, 50000, 40000, false, 150, PhaseFAST},
	} {
		got, phase := Decide(c.w, c.base, c.avg, c.slowStart, p)
		if got != c.want || phase != c.phase {
			t.Errorf("%s: Decide = %d %s, want %d %s", c.name, got, phase, c.want, c.phase)
		}
	}
}

// TestConverges runs the equation against a fluid model of one bottleneck:
// a window beyond the path's bandwidth-delay product queues, which shows
// as RTT. FAST must settle with alpha packets queued, from below and above.
func TestConverges(t *testing.T) {
	const base = 50000 // us
	for _, c := range []struct {
		name       string
		bdp, start uint32
		p          Params
	}{
		{"100M 50ms from slow start's end", 430, 10, Params{100, 512}},
		{"1G 100ms from above", 8600, 30000, Params{100, 512}},
		{"small alpha, full step", 1000, 2, Params{15, 1024}},
		{"large alpha, small step", 2000, 100, Params{200, 128}},
	} {
		w := c.start
		for range 2000 {
			avg := uint32(base)
			if w > c.bdp {
				avg = base + uint32(uint64(w-c.bdp)*base/uint64(c.bdp))
			}
			w = Update(w, base, avg, c.p.Alpha, c.p.Gamma)
		}
		want := c.bdp + c.p.Alpha
		if w+2 < want || w > want+2 {
			t.Errorf("%s: settled at %d packets, want %d (BDP %d + alpha %d)", c.name, w, want, c.bdp, c.p.Alpha)
		}
	}
}

func TestRoundCheck(t *testing.T) {
	r := Round{Cwnd: 2000, BaseRTT: 10000, AvgRTT: 20000, NextCwnd: 1550, Alpha: 100, Gamma: 512, Phase: PhaseFAST, Backlog: 1000}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	r.NextCwnd = 1551
	if err := r.Check(); err == nil || !strings.Contains(err.Error(), "the program set 1551, the model 1550") {
		t.Fatalf("a wrong window: %v", err)
	}
	r.NextCwnd, r.Backlog = 1550, 999
	if err := r.Check(); err == nil || !strings.Contains(err.Error(), "backlog is 999, the model's 1000") {
		t.Fatalf("a wrong backlog: %v", err)
	}
	r = Round{Cwnd: 500, BaseRTT: 10000, AvgRTT: 10100, NextCwnd: 500, Alpha: 100, Gamma: 512, Phase: PhaseSlowStartEnds, Backlog: 4}
	if err := r.Check(); err == nil || !strings.Contains(err.Error(), "phase") {
		t.Fatalf("a wrong phase: %v", err)
	}
}

func TestOnLoss(t *testing.T) {
	const inf = 0x7fffffff
	for _, c := range []struct {
		name                           string
		cwnd, ssthresh, backlog, alpha uint32
		again                          bool
		want                           uint32
		phase                          Phase
	}{
		{"random, after slow start", 1000, 900, 10, 100, false, 1000, PhaseLossRandom},
		{"random, in slow start: it goes on", 300, inf, 0, 100, false, inf, PhaseLossRandom},
		{"random, soon after a halving", 500, 500, 0, 100, true, 500, PhaseLossRandom},
		{"just below half alpha", 1000, 900, 49, 100, false, 1000, PhaseLossRandom},
		{"half alpha: congestion", 1000, 900, 50, 100, false, 500, PhaseLossCongestion},
		{"congestion in slow start", 3000, inf, 400, 100, false, 1500, PhaseLossCongestion},
		{"congestion again in the episode: once", 1500, 1500, 400, 100, true, 1500, PhaseLossAgain},
		{"a timeout after the halving: its threshold stays", 1, 1500, 400, 100, true, 1500, PhaseLossAgain},
		{"never below two", 3, 3, 100, 100, false, MinCwnd, PhaseLossCongestion},
		{"alpha 1: a packet queued is congestion", 1000, 900, 1, 1, false, 500, PhaseLossCongestion},
	} {
		got, phase := OnLoss(c.cwnd, c.ssthresh, c.backlog, c.alpha, c.again)
		if got != c.want || phase != c.phase {
			t.Errorf("%s: OnLoss = %d %s, want %d %s", c.name, got, phase, c.want, c.phase)
		}
		r := Round{Cwnd: c.cwnd, Ssthresh: c.ssthresh, Backlog: c.backlog, Alpha: c.alpha, NextCwnd: c.want, Phase: c.phase}
		if c.again {
			r.Samples = 1
		}
		if err := r.Check(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		r.NextCwnd++
		if r.Check() == nil {
			t.Errorf("%s: a wrong threshold passed the check", c.name)
		}
	}
}

func TestParams(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"0.5", 512, true}, {"1", 1024, true}, {"0.125", 128, true}, {"0.0001", 1, true},
		{"0", 0, false}, {"-0.5", 0, false}, {"1.5", 0, false}, {"NaN", 0, false}, {"half", 0, false}, {"", 0, false},
	} {
		got, err := ParseGamma(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseGamma(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
	if err := DefaultParams.Check(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []Params{{0, 512}, {MaxAlpha + 1, 512}, {100, 0}, {100, GammaScale + 1}} {
		if p.Check() == nil {
			t.Errorf("%+v passed the check", p)
		}
	}
	b, err := json.Marshal(Params{Alpha: 100, Gamma: 512})
	if err != nil || string(b) != `{"alpha":100,"gamma":0.5}` {
		t.Fatalf("JSON %s, %v", b, err)
	}
}
