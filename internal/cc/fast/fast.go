// Package fast is FAST TCP's window equation in integers: the arithmetic of
// internal/cc's BPF program (bpf/fast.c), so that it can be table tested,
// each of the program's traced decisions checked against it, and user-space
// transports (the UDP transport's fast rate control) run the same rule. It
// is pure: no kernel, no BPF library.
package fast

import "fmt"

// GammaScale is gamma's fixed-point unit: BPF has no floating point.
const GammaScale = 1024

// MinCwnd is the smallest window FAST sets.
const MinCwnd = 2

// Update is FAST's window equation once per round, in the BPF program's
// integers (bpf/fast.c, fast_update):
//
//	target = base*w/avg + alpha                  (floor)
//	next   = ((1024-gamma)*w + gamma*target + 512) / 1024
//
// moved one packet further when rounding would leave it at w although the
// target is a packet or more away, then held to [MinCwnd, 2w]. base and
// avg are microseconds, avg >= base > 0; gamma is in 1/GammaScale.
func Update(w, base, avg, alpha, gamma uint32) uint32 {
	target := uint64(base)*uint64(w)/uint64(avg) + uint64(alpha)
	next := (uint64(GammaScale-gamma)*uint64(w) + uint64(gamma)*target + GammaScale/2) / GammaScale
	switch {
	case next == uint64(w) && target > uint64(w):
		next = uint64(w) + 1
	case next == uint64(w) && target < uint64(w):
		next = uint64(w) - 1
	}
	next = min(next, 2*uint64(w))
	return uint32(max(next, MinCwnd))
}

// Backlog is the packets a flow with window w keeps queued, estimated from
// a round's mean RTT avg and the base RTT: w*(avg-base)/avg.
func Backlog(w, base, avg uint32) uint32 {
	return uint32(uint64(w) * uint64(avg-base) / uint64(avg))
}

// Phase says what a round's decision was.
type Phase uint32

const (
	PhaseFAST           Phase = iota // FAST's update
	PhaseSlowStart                   // slow start goes on: no queue of alpha yet
	PhaseSlowStartEnds               // the queue appeared: FAST's update from here
	PhaseLossRandom                  // a loss with the queue short: kept (OnLoss)
	PhaseLossCongestion              // a loss with the queue built up: halved (OnLoss)
	PhaseLossAgain                   // a loss of an episode already halved: kept (OnLoss)
)

func (p Phase) String() string {
	switch p {
	case PhaseFAST:
		return "fast"
	case PhaseSlowStart:
		return "slow-start"
	case PhaseSlowStartEnds:
		return "slow-start-ends"
	case PhaseLossRandom:
		return "loss-random"
	case PhaseLossCongestion:
		return "loss-congestion"
	case PhaseLossAgain:
		return "loss-again"
	}
	return fmt.Sprintf("phase-%d", uint32(p))
}

// Decide is one round's decision as the BPF program takes it: in slow
// start (inSlowStart: cwnd below ssthresh) the window is left to grow until
// the backlog reaches alpha; otherwise, and on the round that ends slow
// start, Update sets it. It returns the window after the round (before the
// socket's clamp) and the phase.
func Decide(w, base, avg uint32, inSlowStart bool, p Params) (uint32, Phase) {
	avg = max(avg, base)
	phase := PhaseFAST
	if inSlowStart {
		phase = PhaseSlowStart
		if Backlog(w, base, avg) >= p.Alpha {
			phase = PhaseSlowStartEnds
		}
	}
	if phase == PhaseSlowStart {
		return w, phase
	}
	return Update(w, base, avg, p.Alpha, p.Gamma), phase
}

// OnLoss is the slow-start threshold a loss leaves (the window the
// kernel's recovery takes the flow to), as the BPF program's ssthresh
// decides it (bpf/fast.c, fast_loss), and what it made of the loss.
// backlog is the last round's estimate of the flow's own queue. Below
// alpha/2 the loss is taken for random loss, which the kernel repairs: the
// window stays, and slow start goes on if it was on (ssthresh is returned
// as it was). Otherwise it is congestion: half the window, at least
// MinCwnd, once per round trip: a loss that comes before the data
// outstanding at the last halving is acknowledged (again) keeps the
// threshold that halving set.
func OnLoss(cwnd, ssthresh, backlog, alpha uint32, again bool) (uint32, Phase) {
	switch {
	case 2*uint64(backlog) < uint64(alpha):
		if cwnd < ssthresh {
			return ssthresh, PhaseLossRandom
		}
		return cwnd, PhaseLossRandom
	case again:
		return ssthresh, PhaseLossAgain
	}
	return max(cwnd/2, MinCwnd), PhaseLossCongestion
}

// Round is one decision as the BPF program traced it: a round's (phases
// FAST and slow start) or a loss's (the loss phases: Cwnd is the window at
// the loss, Ssthresh the threshold before it, NextCwnd the one OnLoss set,
// Backlog the last round's estimate, Samples 1 when the loss came before
// the last halving was acknowledged).
type Round struct {
	TimeNs     uint64 `json:"time_ns"` // CLOCK_MONOTONIC
	LocalPort  uint16 `json:"local_port"`
	RemotePort uint16 `json:"remote_port"`
	Cwnd       uint32 `json:"cwnd"` // before the round's decision
	BaseRTT    uint32 `json:"base_rtt_us"`
	AvgRTT     uint32 `json:"avg_rtt_us"` // the round's mean
	Samples    uint32 `json:"samples"`
	NextCwnd   uint32 `json:"next_cwnd"` // after it
	Ssthresh   uint32 `json:"ssthresh"`
	Alpha      uint32 `json:"alpha"`
	Gamma      uint32 `json:"gamma"`
	Phase      Phase  `json:"phase"`
	Backlog    uint32 `json:"backlog"` // the round's estimate of the flow's own queue
	_          uint32
}

// Check recomputes r's decision with the model and says how they differ.
func (r Round) Check() error {
	if r.Phase == PhaseLossRandom || r.Phase == PhaseLossCongestion || r.Phase == PhaseLossAgain {
		want, phase := OnLoss(r.Cwnd, r.Ssthresh, r.Backlog, r.Alpha, r.Samples == 1)
		if phase != r.Phase || r.NextCwnd != want {
			return fmt.Errorf("loss at cwnd %d, ssthresh %d, backlog %d, alpha %d: the program set %d (%s), the model %d (%s)", r.Cwnd, r.Ssthresh, r.Backlog, r.Alpha, r.NextCwnd, r.Phase, want, phase)
		}
		return nil
	}
	if b := Backlog(r.Cwnd, r.BaseRTT, max(r.AvgRTT, r.BaseRTT)); b != r.Backlog {
		return fmt.Errorf("round at cwnd %d, base %d us, avg %d us: the program's backlog is %d, the model's %d", r.Cwnd, r.BaseRTT, r.AvgRTT, r.Backlog, b)
	}
	want, phase := Decide(r.Cwnd, r.BaseRTT, r.AvgRTT, r.Phase != PhaseFAST, Params{Alpha: r.Alpha, Gamma: r.Gamma})
	if phase != r.Phase {
		return fmt.Errorf("round at cwnd %d, base %d us, avg %d us: the program's phase is %s, the model's %s", r.Cwnd, r.BaseRTT, r.AvgRTT, r.Phase, phase)
	}
	if r.NextCwnd != want {
		return fmt.Errorf("round at cwnd %d, base %d us, avg %d us, %s: the program set %d, the model %d", r.Cwnd, r.BaseRTT, r.AvgRTT, Params{r.Alpha, r.Gamma}, r.NextCwnd, want)
	}
	return nil
}
