package service

import (
	"context"
	"errors"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// Sweeps end or delete an ended job's files in steps of ListingBatch,
// each its own transaction under its own short hold of mu, so that no
// cancel, failure or refusal holds the lock heartbeats need for longer
// than a step, however many files the job has (issue 28, finding 7). The
// sweep is recorded in the store in the transaction that ends the job:
// the request that ended it takes the first steps, and whatever a
// restart, a crash or a standby's takeover leaves undone the clock
// carries on, one step a tick (sweep), the sweep stepped longest ago
// first. Nothing else touches the files of an ended job meanwhile: claims
// take none, and its tasks' reports are answered stale.

// endSweep is the sweep that ends a job's files in states as state, with
// the files' error fileWhy (when set) and the parts' partWhy.
func endSweep(job string, states []string, state, fileWhy, partWhy string, now time.Time) store.JobSweep {
	return store.JobSweep{Job: job, States: states, State: state, Error: fileWhy, PartError: partWhy, At: now}
}

// sweep takes one step of the sweep stepped longest ago that no request
// drives, found by the store's index however many jobs there are (and
// read past at most the sweeps driven now). The caller holds mu.
func (s *Service) sweep(ctx context.Context, now time.Time) error {
	ws, err := s.st.ListJobSweeps(ctx, len(s.driving)+1)
	if err != nil {
		return err
	}
	for i := range ws {
		if s.driving[ws[i].Job] == 0 {
			_, err = s.sweepStep(ctx, &ws[i], now)
			return err
		}
	}
	return nil
}

// driveSweep steps w, each step under its own hold of mu, at most steps
// of them (0: until done), and reports whether it is done.
func (s *Service) driveSweep(ctx context.Context, w store.JobSweep, steps int) (bool, error) {
	s.lock()
	s.driving[w.Job]++
	s.unlock()
	defer func() {
		s.lock()
		if s.driving[w.Job]--; s.driving[w.Job] <= 0 {
			delete(s.driving, w.Job)
		}
		s.unlock()
	}()
	for step := 1; ; step++ {
		done, err := func() (bool, error) {
			s.lock()
			defer s.unlock()
			return s.sweepStep(ctx, &w, s.now())
		}()
		if err != nil || done || step == steps {
			return done, err
		}
	}
}

// goSweep drives w to its end once mu is let go, logging a failure: the
// clock carries on what is left.
func (s *Service) goSweep(ctx context.Context, w store.JobSweep) {
	go func() {
		if _, err := s.driveSweep(context.WithoutCancel(ctx), w, 0); err != nil {
			s.log.Warn("end the files of an ended job", "job", w.Job, "err", err)
		}
	}()
}

// sweepStep takes one step of w, in one transaction: ListingBatch of its
// job's files (and parts) ended or deleted, then w recorded with where the
// next step goes on, or forgotten when none is left. The caller holds mu.
func (s *Service) sweepStep(ctx context.Context, w *store.JobSweep, now time.Time) (bool, error) {
	done, start := false, *w
	err := s.tx(ctx, func(tx store.Store) error {
		*w, done = start, false // the transaction may run again
		more := false
		if w.Drop {
			n, err := tx.DeleteJobFiles(ctx, w.Job, ListingBatch)
			if err != nil {
				return err
			}
			more = n == ListingBatch
		} else {
			files, err := tx.ListJobFiles(ctx, store.JobFileFilter{Job: w.Job, States: w.States, After: w.After, Limit: ListingBatch})
			if err != nil {
				return err
			}
			if len(files) > 0 {
				w.After = files[len(files)-1].Path
			}
			for i := range files {
				files[i].State = w.State
				if w.Error != "" {
					files[i].Error = w.Error
				}
			}
			if err := tx.UpdateJobFiles(ctx, files); err != nil {
				return err
			}
			parts, err := tx.ListFileParts(ctx, store.FilePartFilter{Job: w.Job, States: []string{transfer.FilePending, transfer.FileActive}, Limit: ListingBatch})
			if err != nil {
				return err
			}
			if err := endParts(ctx, tx, parts, w.State, w.PartError); err != nil {
				return err
			}
			more = len(files) == ListingBatch || len(parts) == ListingBatch
		}
		if more {
			w.At = now
			err := tx.PutJobSweep(ctx, *w)
			if errors.Is(err, reserve.ErrNotFound) {
				// Its job went meanwhile (another step deleted it).
				done = true
				return nil
			}
			return err
		}
		done = true
		if w.DeleteJob {
			if err := tx.DeleteJob(ctx, w.Job); err != nil && !errors.Is(err, reserve.ErrNotFound) {
				return err
			}
			return nil
		}
		return tx.DeleteJobSweep(ctx, w.Job)
	})
	return done, err
}
