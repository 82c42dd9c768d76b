package service

import (
	"context"
	"math/bits"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// divideRates is the pace of each running copy task among tasks (one
// job's): a booked pair's rate (a pair with a reservation that has not
// moved to the routed path) shared among the pair's ACTIVE copy tasks in
// proportion to the bytes each has left to send, counted as one second's
// worth of the booked rate at least, and rounded down so that they never
// sum above the booking; 0 for a task of an unbooked pair. Tasks that do
// not run are left out.
//
// Tasks of equal sizes share evenly. A small task beside a large one (the
// end of a pair's share) gets a small part: while it opens its session it
// sends nothing, and the large task keeps most of the booking meanwhile;
// and tasks that run to the end together do not leave one running alone
// at a share of the rate. The pace follows the tasks as they start, end
// and report: with one task left, it runs at the whole booked rate
// instead of the share it was claimed with, and a task that starts beside
// others takes its share from them.
func divideRates(pairs []transfer.Pair, tasks []transfer.Task) map[string]uint64 {
	type route struct{ from, to string }
	booked := map[route]uint64{}
	for _, p := range pairs {
		if p.Reservation != "" && p.Routed == "" {
			booked[route{p.From, p.To}] = p.RateBps
		}
	}
	runs := func(t transfer.Task) bool { return t.Kind == transfer.TaskCopy && t.State == transfer.TaskActive }
	weight := func(t transfer.Task) uint64 {
		return max(uint64(max(t.Bytes-t.BytesDone, 0)), booked[route{t.From, t.To}]/8, 1)
	}
	sum := map[route]uint64{}
	for _, t := range tasks {
		if runs(t) {
			sum[route{t.From, t.To}] += weight(t)
		}
	}
	out := map[string]uint64{}
	for _, t := range tasks {
		if runs(t) {
			k := route{t.From, t.To}
			// booked × weight / sum, exactly: the quotient is at most
			// booked, so it fits.
			hi, lo := bits.Mul64(booked[k], weight(t))
			out[t.ID], _ = bits.Div64(hi, lo, sum[k])
		}
	}
	return out
}

// repace divides the booked rates of job j's pairs whose source is node
// among their running tasks again, stores each task's new rate, and
// returns the rates of node's running copy tasks (changed or not).
func (s *Service) repace(ctx context.Context, tx store.Store, j transfer.Job, node string) ([]apiv1.TaskRate, error) {
	tasks, err := tx.ListTasks(ctx, store.TaskFilter{Job: j.ID, Kind: transfer.TaskCopy, States: []string{transfer.TaskActive}})
	if err != nil {
		return nil, err
	}
	rates := divideRates(j.Pairs, tasks)
	var out []apiv1.TaskRate
	for _, t := range tasks {
		if t.From != node {
			continue
		}
		r := rates[t.ID]
		if t.RateBps != r {
			t.RateBps = r
			if err := tx.UpdateTask(ctx, t); err != nil {
				return nil, err
			}
		}
		out = append(out, apiv1.TaskRate{Task: t.ID, Attempt: t.Attempt, RateBps: r})
	}
	return out, nil
}
