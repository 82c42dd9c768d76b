package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/booking"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// endQueued fails a job before any of its files moved, recording the
// sweep that ends its files (sweep.go): the caller drives it (goSweep)
// once its transaction is stored, and the clock carries on what a restart
// leaves.
func (s *Service) endQueued(ctx context.Context, tx store.Store, j *transfer.Job, why string, now time.Time) (store.JobSweep, error) {
	w := endSweep(j.ID, []string{transfer.FilePending}, transfer.FileCancelled, why, why, now)
	if err := tx.PutJobSweep(ctx, w); err != nil {
		return w, err
	}
	j.State, j.Reason, j.EndedAt = transfer.JobFailed, why, now
	return w, s.saveJob(ctx, tx, j, now)
}

func scheduledReason(j transfer.Job) string {
	var start time.Time
	n := 0
	for _, p := range j.Pairs {
		if p.Reservation == "" {
			continue
		}
		n++
		if start.IsZero() || p.Start.Before(start) {
			start = p.Start
		}
	}
	return fmt.Sprintf("booked: starts at %s on %d pairs (algorithm %s)", start.UTC().Format(time.RFC3339), n, j.Algorithm)
}

// deadlines starts SCHEDULED jobs whose window opened and deals with
// pairs still running at their reservation's end: the pair moves to its
// next consecutive reservation, or the reservation is extended when
// admissible, else the pair goes on on the routed path, saying so. (Listed
// deadline jobs are booked outside mu, by BookPending.) The caller holds
// mu.
func (s *Service) deadlines(ctx context.Context, now time.Time) error {
	js, err := s.st.ListJobs(ctx, store.JobFilter{States: []string{transfer.JobScheduled, transfer.JobActive}})
	if err != nil {
		return err
	}
	var live map[string][]transfer.DataNode
	for _, j := range js {
		if slices.ContainsFunc(j.Pairs, func(p transfer.Pair) bool { return p.Reservation != "" }) {
			if live == nil {
				if _, live, err = s.liveNodes(ctx, s.st, now); err != nil {
					return err
				}
			}
			s.lostPairs(j, live)
		}
		switch {
		case j.State == transfer.JobScheduled:
			start := false
			for _, p := range j.Pairs {
				if p.Reservation != "" && !now.Before(p.Start) {
					start = true
				}
			}
			if start {
				if err := s.start(ctx, j, now); err != nil {
					return err
				}
			}
		case j.State == transfer.JobActive:
			if err := s.overrun(ctx, j, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// start turns a SCHEDULED job ACTIVE: its copies may be claimed. The
// caller holds mu.
func (s *Service) start(ctx context.Context, j transfer.Job, now time.Time) error {
	j.State, j.StartedAt = transfer.JobActive, now
	j.Reason = movingReason(j)
	if err := s.tx(ctx, func(tx store.Store) error { return s.saveJob(ctx, tx, &j, now) }); err != nil {
		return err
	}
	return s.overrun(ctx, j, now)
}

// startActive starts the SCHEDULED jobs one of whose reservations is
// ACTIVE (its start passed and every managed node has its part in place),
// and wakes the waiting claims (a running job's pair may wait for its
// reservation: provisioning): Run calls it as a reservation turns ACTIVE,
// so a booked job's copies begin then rather than at the clock's next
// tick, and as it (re)subscribes to the controller's events, for what it
// may have missed.
func (s *Service) startActive(ctx context.Context) error {
	s.lock()
	defer s.unlock()
	// The pairs of running jobs whose reservation this was may start:
	// the waiting claims claim again.
	s.notify()
	js, err := s.st.ListJobs(ctx, store.JobFilter{States: []string{transfer.JobScheduled}})
	if err != nil {
		return err
	}
	for _, j := range js {
		for _, p := range j.Pairs {
			if p.Reservation == "" {
				continue
			}
			r, err := s.st.GetReservation(ctx, p.Reservation)
			if err != nil {
				return err
			}
			if r.State == reserve.StateActive {
				s.log.Debug("a booked job's reservation is ACTIVE: the job starts", "job", j.ID, "reservation", r.ID)
				if err := s.start(ctx, j, s.now()); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// ProvisionGrace is how long after its start a booked pair waits for its
// reservation to turn ACTIVE (the agents on its path putting their part
// in place) before its copies start anyway.
const ProvisionGrace = 10 * time.Second

// provisioning reports whether pair p's reservation is still being put in
// place: RESERVED past its start, within ProvisionGrace. Its copies wait
// for it, so that they start on the reserved path (its flows steered onto
// it, its rate in place) rather than on the routed path and move over
// mid-stream; Run wakes the waiting claims as the reservation turns ACTIVE.
func (s *Service) provisioning(ctx context.Context, tx store.Store, p transfer.Pair, now time.Time) bool {
	if now.Before(p.Start) || !now.Before(p.Start.Add(ProvisionGrace)) {
		return false
	}
	r, err := tx.GetReservation(ctx, p.Reservation)
	return err == nil && r.State == reserve.StateReserved
}

// overrun extends (or leaves) the reservations of an ACTIVE job's pairs
// that reached their end with the job still running.
func (s *Service) overrun(ctx context.Context, j transfer.Job, now time.Time) error {
	changed := false
	var b booking.Booker
	for i := range j.Pairs {
		p := &j.Pairs[i]
		if p.Reservation == "" || p.Routed != "" || now.Before(p.End.Add(-5*time.Second)) {
			continue
		}
		if len(p.Later) > 0 {
			// The next of the pair's consecutive reservations takes over
			// where this one ends (the clock counts milliseconds).
			if now.Before(p.End.Truncate(time.Millisecond)) {
				continue
			}
			n := p.Later[0]
			p.Reservation, p.RateBps, p.Start, p.End, p.Later = n.Reservation, n.RateBps, n.Start, n.End, p.Later[1:]
			changed = true
			continue
		}
		if b == nil {
			var err error
			if b, err = s.booker(ctx, j.Owner); err != nil {
				return err
			}
		}
		left := p.ShareBytes - p.BytesDone
		if left < 0 {
			left = 0
		}
		// What is left of the pair's share at its rate, a quarter again,
		// and at least 10 s: a minute more for a job about to end held
		// capacity other jobs could have had.
		ext := 10 * time.Second
		if p.RateBps > 0 {
			ext = max(ext, time.Duration(float64(left)*8/float64(p.RateBps)*float64(time.Second))*5/4)
		}
		end := p.End.Add(ext)
		why := ""
		r, err := b.Reservation(ctx, p.Reservation)
		switch {
		case err != nil:
			why = err.Error()
		case !r.State.Live():
			why = fmt.Sprintf("reservation %s is %s", r.ID, r.State)
		default:
			// The controller's clock may have moved the reservation on
			// (RESERVED to ACTIVE) since the store was read, and each
			// agent's report of its part bumps the version: a short
			// window reaches its end while the agents on its path are
			// still reporting, so a stale version is tried again at the
			// current one for as long as it keeps changing under us (the
			// bound only stops a livelock: the reports are finite).
			version, extended := r.Version, false
			for range 32 {
				cr, err := b.ModifyReservation(ctx, r.ID, apiv1.ModifyRequest{Version: version, End: end})
				if err == nil {
					p.End, extended = cr.End, true
					break
				}
				why = err.Error()
				var stale *reserve.StaleVersionError
				if !errors.As(err, &stale) {
					break
				}
				version = stale.Current
			}
			if extended {
				changed = true
				continue
			}
		}
		p.Routed = oneLine(fmt.Sprintf("reservation %s ended at %s and could not be extended (%s): the pair goes on on the routed path", p.Reservation, p.End.UTC().Format(time.RFC3339), why))
		changed = true
	}
	if !changed {
		return nil
	}
	return s.tx(ctx, func(tx store.Store) error {
		cur, err := tx.GetJob(ctx, j.ID)
		if err != nil {
			return err
		}
		cur.Pairs = j.Pairs
		return s.saveJob(ctx, tx, &cur, now)
	})
}
