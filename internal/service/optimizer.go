package service

import (
	"context"
	"time"

	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/optimize"
)

// The optimizer: one optimize.Pair per (job, from, to), fed by the
// tasks' progress and reports, deciding in the clock loop; every decision
// is stored, and the last one stored resumes the pair after a restart.

// pairOpt returns the optimizer of a job's pair, made (and resumed from
// the last stored decision) on first use. The caller holds mu.
func (s *Service) pairOpt(ctx context.Context, st store.Store, job, from, to string, booked uint64) *optimize.Pair {
	k := pairKey{job, from, to}
	if p, ok := s.opt[k]; ok {
		p.SetBooked(booked)
		return p
	}
	p := optimize.New(s.ocfg, booked)
	ds, err := st.ListDecisions(ctx, job, 0)
	if err != nil {
		s.log.Warn("read the optimizer's decisions", "job", job, "err", err)
	}
	for _, d := range ds { // newest first
		if d.From == from && d.To == to {
			p.Resume(d)
			s.last[k] = d
			break
		}
	}
	s.opt[k] = p
	return p
}

// decision is the pair's current choice; a pair that never decided makes
// its first decision now (stored with st).
func (s *Service) decision(ctx context.Context, st store.Store, j transfer.Job, from, to string, booked uint64, now time.Time) transfer.Decision {
	k := pairKey{j.ID, from, to}
	p := s.pairOpt(ctx, st, j.ID, from, to, booked)
	if d, ok := s.last[k]; ok {
		return d
	}
	d, fresh := p.Decide(now, 1, 0)
	if fresh {
		s.keep(ctx, st, j.ID, from, to, d)
	}
	return d
}

// keep stores a new decision and remembers it as the pair's current one.
func (s *Service) keep(ctx context.Context, st store.Store, job, from, to string, d transfer.Decision) {
	d.Job, d.From, d.To = job, from, to
	s.last[pairKey{job, from, to}] = d
	if err := st.AppendDecision(ctx, d); err != nil {
		s.log.Warn("store an optimizer decision", "job", job, "err", err)
	}
}

// observe feeds a task's news to its pair's optimizer. The caller holds mu.
func (s *Service) observe(ctx context.Context, st store.Store, j transfer.Job, t transfer.Task, bytes int64, ok, failed int, now time.Time) {
	if t.From == "" || t.To == "" {
		return
	}
	p := s.pairOpt(ctx, st, j.ID, t.From, t.To, t.RateBps)
	p.Observe(optimize.Sample{At: now, Bytes: bytes, FilesOK: ok, FilesFailed: failed})
}

// optimizeBacklog is how many tasks waiting for a pair the optimizer
// counts: past optimize.DefaultMaxConcurrency × ConnectionsPerTask (32) a
// longer queue changes no decision (a task's streams are 1 either way,
// and the queue is longer than the tasks running); a configured
// MaxConcurrency above the default raises it.
const optimizeBacklog = 64

// optimize lets every pair of the ACTIVE jobs decide again; new decisions
// are stored and the job's pairs show them. The caller holds mu.
func (s *Service) optimize(ctx context.Context, now time.Time) error {
	js, err := s.st.ListJobs(ctx, store.JobFilter{States: []string{transfer.JobActive}})
	if err != nil {
		return err
	}
	for _, j := range js {
		if len(j.Pairs) == 0 {
			continue
		}
		tasks, err := s.st.ListTasks(ctx, store.TaskFilter{Job: j.ID, Kind: transfer.TaskCopy, States: []string{transfer.TaskActive, transfer.TaskQueued}})
		if err != nil {
			return err
		}
		// The tasks still to come, counted up to what changes a decision
		// (optimizeBacklog a pair): by the index, a bounded count a job
		// a tick however many files wait (issue 28, finding 7).
		most := max(optimizeBacklog, s.ocfg.MaxConcurrency*optimize.ConnectionsPerTask+1) * len(j.Pairs)
		files, err := s.st.CountJobFilesUpTo(ctx, j.ID, []string{transfer.FilePending}, most*BatchFiles)
		if err != nil {
			return err
		}
		pending := (files + BatchFiles - 1) / BatchFiles
		// Each pending part of a large file is a task of its own.
		parts, err := s.st.ListFileParts(ctx, store.FilePartFilter{Job: j.ID, States: []string{transfer.FilePending}, Limit: most})
		if err != nil {
			return err
		}
		pending = min(pending+len(parts), most)
		changed := false
		for i := range j.Pairs {
			pr := &j.Pairs[i]
			active, queued := 0, 0
			for _, t := range tasks {
				if t.From == pr.From && t.To == pr.To {
					if t.State == transfer.TaskActive {
						active++
					} else {
						queued++
					}
				}
			}
			booked := pr.RateBps
			if pr.Reservation == "" || pr.Routed != "" {
				booked = 0
			}
			p := s.pairOpt(ctx, s.st, j.ID, pr.From, pr.To, booked)
			d, fresh := p.Decide(now, queued+pending/len(j.Pairs), active)
			if !fresh {
				continue
			}
			s.keep(ctx, s.st, j.ID, pr.From, pr.To, d)
			if pr.Concurrency != d.Concurrency || pr.Streams != d.Streams {
				pr.Concurrency, pr.Streams = d.Concurrency, d.Streams
				changed = true
			}
		}
		if changed {
			err := s.tx(ctx, func(tx store.Store) error {
				cur, err := tx.GetJob(ctx, j.ID)
				if err != nil {
					return err
				}
				for i := range cur.Pairs {
					for _, p := range j.Pairs {
						if p.From == cur.Pairs[i].From && p.To == cur.Pairs[i].To {
							cur.Pairs[i].Concurrency, cur.Pairs[i].Streams = p.Concurrency, p.Streams
						}
					}
				}
				return s.saveJob(ctx, tx, &cur, now)
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// forget drops an ended job's optimizers.
func (s *Service) forget(job string) {
	for k := range s.opt {
		if k.job == job {
			delete(s.opt, k)
			delete(s.last, k)
		}
	}
}
