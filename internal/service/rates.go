package service

import (
	"context"
	"math/bits"
	"slices"
	"strings"
	"time"

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
//
// A booked pair whose window is open at now, that runs no task and has
// nothing more to do (its share done, or drained: no file of the job is
// left waiting for a pair) lends its rate to the job's running
// booked pairs over the same inter-site links (the path without its first
// and last link, the access links), in proportion to their own rates:
// the job never sends more over those links than it booked there, and
// the pair still working at the end of a job (a file larger than the
// others, the pairs a lost node's share went to) is not held to its part
// of a booking that idles beside it. A pair yet to start lends nothing. Beyond its booking on an access link a task only takes
// capacity no reservation holds (the classes' ceilings).
func divideRates(pairs []transfer.Pair, tasks []transfer.Task, now time.Time, drained bool) map[string]uint64 {
	type route struct{ from, to string }
	booked := map[route]uint64{}
	for _, p := range pairs {
		if p.Reservation != "" && p.Routed == "" {
			booked[route{p.From, p.To}] = p.RateBps
		}
	}
	runs := func(t transfer.Task) bool { return t.Kind == transfer.TaskCopy && t.State == transfer.TaskActive }
	running := map[route]bool{}
	for _, t := range tasks {
		if runs(t) {
			running[route{t.From, t.To}] = true
		}
	}
	idle := map[string]uint64{} // the idle rates by inter-site links
	busy := map[string]uint64{} // the running pairs' own rates by the same
	for _, p := range pairs {
		k := route{p.From, p.To}
		if booked[k] == 0 || len(p.Path) == 0 {
			continue
		}
		switch core := coreLinks(p.Path); {
		case running[k]:
			busy[core] += p.RateBps
		case (drained || p.ShareBytes > 0 && p.BytesDone >= p.ShareBytes) && windowOpen(p, now):
			idle[core] += p.RateBps
		}
	}
	for _, p := range pairs {
		k := route{p.From, p.To}
		core := coreLinks(p.Path)
		if running[k] && booked[k] > 0 && len(p.Path) > 0 && idle[core] > 0 {
			hi, lo := bits.Mul64(idle[core], p.RateBps)
			lent, _ := bits.Div64(hi, lo, busy[core])
			booked[k] += lent
		}
	}
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
	waiting, err := tx.CountJobFilesUpTo(ctx, j.ID, []string{transfer.FilePending}, 1)
	if err != nil {
		return nil, err
	}
	rates := divideRates(j.Pairs, tasks, s.now(), waiting == 0)
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

// paceOf sets a running task's RateBps, for the answer to its report,
// to its pace now: the rates of its node's tasks of the job are divided
// again (repace), so a pair whose job's other pairs went idle since
// speeds up within a report, not at its next heartbeat.
func (s *Service) paceOf(ctx context.Context, tx store.Store, j transfer.Job, t *transfer.Task) error {
	booked := slices.ContainsFunc(j.Pairs, func(p transfer.Pair) bool { return p.Reservation != "" && p.Routed == "" })
	if t.State != transfer.TaskActive || transfer.JobEnded(j.State) || !booked {
		return nil // an unbooked task's pace is the node's to share (0)
	}
	rates, err := s.repace(ctx, tx, j, t.From)
	if err != nil {
		return err
	}
	for _, r := range rates {
		if r.Task == t.ID {
			t.RateBps = r.RateBps
		}
	}
	return nil
}

// coreLinks names a pair's inter-site links: its path without the first
// and last link (the nodes' access links) where it has more than two.
func coreLinks(path []string) string {
	if len(path) > 2 {
		path = path[1 : len(path)-1]
	}
	return strings.Join(path, ",")
}

// windowOpen reports whether one of a pair's booked windows (the first
// and the consecutive ones after it) holds now.
func windowOpen(p transfer.Pair, now time.Time) bool {
	if !now.Before(p.Start) && now.Before(p.End) {
		return true
	}
	for _, l := range p.Later {
		if !now.Before(l.Start) && now.Before(l.End) {
			return true
		}
	}
	return false
}
