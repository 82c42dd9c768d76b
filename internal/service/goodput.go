package service

import (
	"context"
	"math"
	"strconv"

	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// settingGoodput keeps the measured goodput (η) across restarts and for
// a standby.
const settingGoodput = "service.goodput"

// Bounds of the measured goodput: a run that measured less than the
// floor is noise of a busy machine more than a property of the network,
// and a window is never planned with no room at all.
const (
	minGoodput = 0.5
	maxGoodput = 0.98
	// goodputWeight is how much a new measure moves the estimate.
	goodputWeight = 0.3
	// goodputMinSpan is the shortest ACTIVE span a measure is taken
	// from: shorter ones are start-up more than transfer.
	goodputMinSpan = 10 // seconds
)

// goodputNow is η as the planner uses it: the configured prior until a
// booked job has been measured, then the running estimate.
func (s *Service) goodputNow() float64 {
	if v := s.measured.Load(); v != 0 {
		return math.Float64frombits(v)
	}
	return s.goodput
}

// loadGoodput reads the stored estimate at start.
func (s *Service) loadGoodput(ctx context.Context) {
	v, err := s.st.GetSetting(ctx, settingGoodput)
	if err != nil || v == "" {
		return
	}
	if g, err := strconv.ParseFloat(v, 64); err == nil && g >= minGoodput && g <= maxGoodput {
		s.measured.Store(math.Float64bits(g))
	}
}

// observeGoodput folds a booked job that succeeded into the estimate: its
// aggregate over its ACTIVE span against the rates it booked (what
// bench/service.sh reports as aggregate / booked). It is stored with the
// job's end, in the same transaction.
func (s *Service) observeGoodput(ctx context.Context, tx store.Store, j transfer.Job) error {
	g, ok := jobGoodput(j)
	if !ok {
		return nil
	}
	cur := s.goodputNow()
	next := min(max(cur+goodputWeight*(g-cur), minGoodput), maxGoodput)
	if err := tx.PutSetting(ctx, settingGoodput, strconv.FormatFloat(next, 'f', 4, 64)); err != nil {
		return err
	}
	s.measured.Store(math.Float64bits(next))
	return nil
}

// jobGoodput is a finished booked job's aggregate over the rates it
// booked, while ACTIVE; false when there is nothing to measure.
func jobGoodput(j transfer.Job) (float64, bool) {
	if j.StartedAt.IsZero() || j.BytesDone <= 0 {
		return 0, false
	}
	span := j.EndedAt.Sub(j.StartedAt).Seconds()
	if span < goodputMinSpan {
		return 0, false
	}
	var booked uint64
	for _, p := range j.Pairs {
		if p.Reservation != "" && p.Routed == "" {
			booked += p.RateBps
		}
	}
	if booked == 0 {
		return 0, false
	}
	return float64(j.BytesDone) * 8 / (float64(booked) * span), true
}
