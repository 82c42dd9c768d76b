package emu

import (
	"math/rand/v2"

	"github.com/lightpath/lightpath/internal/topology"
)

// lossState is the per-pipe state of the loss model. Only the pipe's
// reader touches it, so it needs no lock.
type lossState struct {
	rng   *rand.Rand
	model string // the model bad belongs to: a new model starts good
	bad   bool   // Gilbert-Elliott: in the bad state
}

func newLossState(seed1, seed2 uint64) *lossState {
	return &lossState{rng: rand.New(rand.NewPCG(seed1, seed2))}
}

// lose decides the fate of one wire segment under l.
func (s *lossState) lose(l *topology.Loss) bool {
	if l.Model != s.model {
		s.model, s.bad = l.Model, false
	}
	switch l.Model {
	case topology.LossRandom:
		return l.Rate > 0 && s.rng.Float64() < l.Rate
	case topology.LossGilbertElliott:
		if s.bad {
			if l.R > 0 && s.rng.Float64() < l.R {
				s.bad = false
			}
		} else if l.P > 0 && s.rng.Float64() < l.P {
			s.bad = true
		}
		p := l.K
		if s.bad {
			p = l.H
		}
		return p > 0 && s.rng.Float64() < p
	}
	return false
}

// lossy says whether l can lose anything, so the reader can skip the
// per-segment draws on a clean link.
func lossy(l *topology.Loss) bool {
	switch l.Model {
	case topology.LossRandom:
		return l.Rate > 0
	case topology.LossGilbertElliott:
		return l.K > 0 || l.H > 0
	}
	return false
}
