package service

import (
	"context"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// divideRates is the pace of each running copy task among tasks (one
// job's): a booked pair's rate (a pair with a reservation that has not
// moved to the routed path) shared evenly among the pair's ACTIVE copy
// tasks, rounded down so that they never sum above the booking; 0 for a
// task of an unbooked pair. Tasks that do not run are left out.
//
// The pace follows the tasks as they start and end: with one task left,
// it runs at the whole booked rate instead of the share it was claimed
// with, and a task that starts beside others takes its share from them.
func divideRates(pairs []transfer.Pair, tasks []transfer.Task) map[string]uint64 {
	type route struct{ from, to string }
	booked := map[route]uint64{}
	for _, p := range pairs {
		if p.Reservation != "" && p.Routed == "" {
			booked[route{p.From, p.To}] = p.RateBps
		}
	}
	runs := func(t transfer.Task) bool { return t.Kind == transfer.TaskCopy && t.State == transfer.TaskActive }
	n := map[route]uint64{}
	for _, t := range tasks {
		if runs(t) {
			n[route{t.From, t.To}]++
		}
	}
	out := map[string]uint64{}
	for _, t := range tasks {
		if runs(t) {
			k := route{t.From, t.To}
			out[t.ID] = booked[k] / n[k]
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
