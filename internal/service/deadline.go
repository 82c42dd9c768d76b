package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/plan"
)

// schedule books a listed deadline job: SCHEDULED with its pairs, or,
// when it cannot be booked, refused to its waiting submitter (the job
// deleted, nothing booked) or FAILED when no one waits (a restart). The
// caller holds mu.
func (s *Service) schedule(ctx context.Context, j transfer.Job) {
	waiter := s.waiters[j.ID]
	pairs, algorithm, err := s.book(ctx, j)
	now := s.now()
	if err != nil {
		if waiter != nil {
			delete(s.waiters, j.ID)
			waiter <- s.refuse(ctx, j, nil, err, now)
			return
		}
		var w store.JobSweep
		serr := s.tx(ctx, func(tx store.Store) error {
			var err2 error
			w, err2 = s.endQueued(ctx, tx, &j, oneLine(err.Error()), now)
			return err2
		})
		if serr != nil {
			s.log.Error("fail a job that could not be booked", "job", j.ID, "err", serr)
			return
		}
		s.goSweep(ctx, w)
		return
	}
	j.Pairs, j.Algorithm, j.State = pairs, algorithm, transfer.JobScheduled
	j.Reason = scheduledReason(j)
	if err := s.tx(ctx, func(tx store.Store) error { return s.saveJob(ctx, tx, &j, now) }); err != nil {
		s.log.Error("store a booked job", "job", j.ID, "err", err)
		s.release(ctx, j, "the job's booking could not be stored")
		s.recover = true
		if waiter != nil {
			delete(s.waiters, j.ID)
			waiter <- err
		}
		return
	}
	if waiter != nil {
		delete(s.waiters, j.ID)
		waiter <- nil
	}
}

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

// refusal is the answer to a waiting deadline submission whose job is
// refused: the job is FAILED at once and swept away (its files a step at
// a time, then itself), the submitter driving the sweep before it answers
// (refused), so that a refusal leaves nothing behind and no step holds mu
// long however many files were listed.
type refusal struct {
	err   error
	sweep store.JobSweep
}

func (r *refusal) Error() string { return r.err.Error() }

func (r *refusal) Unwrap() error { return r.err }

// refuse fails job j of a waiting submission for err, with its list task
// t when one is given, recording the sweep that deletes it; it returns
// the waiter's answer. The caller holds mu.
func (s *Service) refuse(ctx context.Context, j transfer.Job, t *transfer.Task, err error, now time.Time) error {
	w := store.JobSweep{Job: j.ID, Drop: true, DeleteJob: true, At: now}
	why := oneLine(err.Error())
	serr := s.tx(ctx, func(tx store.Store) error {
		if t != nil {
			if err := tx.UpdateTask(ctx, *t); err != nil {
				return err
			}
		}
		if err := tx.PutJobSweep(ctx, w); err != nil {
			return err
		}
		j.State, j.Reason, j.EndedAt = transfer.JobFailed, why, now
		j.FilesTotal, j.BytesTotal = 0, 0
		return s.saveJob(ctx, tx, &j, now)
	})
	if serr != nil {
		s.log.Error("fail a refused job", "job", j.ID, "err", serr)
		return err
	}
	return &refusal{err: err, sweep: w}
}

// refused is a waiting submission's answer: a refusal's job is swept away
// first, each step under its own hold of mu (what is left if this fails,
// the clock carries on).
func (s *Service) refused(ctx context.Context, err error) error {
	var r *refusal
	if !errors.As(err, &r) {
		return err
	}
	if _, derr := s.driveSweep(context.WithoutCancel(ctx), r.sweep, 0); derr != nil {
		s.log.Warn("delete a refused job", "job", r.sweep.Job, "err", derr)
	}
	return r.err
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

// book plans a deadline job over the live data nodes of both endpoints,
// asks the scheduler for each pair's earliest completion as the job's
// owner, HOLDs every reservation and commits them all, or releases them
// all when one fails.
func (s *Service) book(ctx context.Context, j transfer.Job) ([]transfer.Pair, string, error) {
	topo := s.c.Topology()
	if topo == nil {
		return nil, "", controller.ErrNoTopology
	}
	own, err := s.owner(ctx, j)
	if err != nil {
		return nil, "", err
	}
	_, live, err := s.liveNodes(ctx, s.st, s.now())
	if err != nil {
		return nil, "", err
	}
	srcEP, dstEP := srcEndpoint(j), dstLocation(j).Endpoint
	srcs, dsts := live[srcEP], live[dstEP]
	for ep, ns := range map[string][]transfer.DataNode{srcEP: srcs, dstEP: dsts} {
		if len(ns) == 0 {
			return nil, "", &DeadlineError{Deadline: j.Deadline, Why: "no data node of endpoint " + ep + " is alive"}
		}
	}
	caps := plan.Pairs(planNodes(topo, srcs), planNodes(topo, dsts))
	ask := func(p plan.PairCap, bytes int64) (plan.Offer, error) {
		res, err := s.c.Find(ctx, own, controller.FindInput{
			Mode: controller.FindCompletion, From: p.From, To: p.To,
			SizeBytes: uint64(bytes), Bandwidth: p.CapBps, Project: j.Project,
		})
		if err != nil {
			return plan.Offer{}, err
		}
		return plan.Offer{Start: res.Start, End: res.End, RateBps: res.Bandwidth, Algorithm: res.Algorithm}, nil
	}
	books, _, err := plan.Deadline(j.BytesTotal, caps, j.Deadline, ask)
	var inf *plan.InfeasibleError
	switch {
	case errors.As(err, &inf):
		return nil, "", &DeadlineError{Deadline: j.Deadline, Earliest: inf.Earliest, Algorithm: inf.Algorithm}
	case err != nil:
		return nil, "", &DeadlineError{Deadline: j.Deadline, Why: err.Error()}
	}
	algorithm := plan.Algorithm(books)
	var made []reserve.Reservation
	undo := func(why string) {
		for _, r := range made {
			s.cancelReservation(ctx, own, j.ID, r.ID, why)
		}
	}
	var pairs []transfer.Pair
	for _, b := range books {
		if b.Share == 0 {
			continue
		}
		to, _ := findNode(dsts, b.Pair.To)
		fs, err := flowSpec(topo, b.Pair.From, to, j.Transport == transfer.TransportUDP)
		if err != nil {
			undo("the job could not be booked")
			return nil, "", fmt.Errorf("book %s → %s: the flow: %w", b.Pair.From, b.Pair.To, err)
		}
		cr, err := s.c.Create(ctx, own, controller.CreateInput{
			Project: j.Project, From: b.Pair.From, To: b.Pair.To, Bandwidth: b.Offer.RateBps,
			Start: b.Offer.Start, End: b.Offer.End, FlowSpec: fs, Hold: s.c.MaxHold(),
			Key: j.ID + ":" + b.Pair.From + ">" + b.Pair.To,
		})
		if err != nil {
			undo("the job could not be booked")
			return nil, "", fmt.Errorf("book %s → %s: %w", b.Pair.From, b.Pair.To, err)
		}
		made = append(made, cr.Reservation)
		pairs = append(pairs, transfer.Pair{
			From: b.Pair.From, To: b.Pair.To, Reservation: cr.Reservation.ID,
			RateBps: cr.Reservation.Bandwidth, Start: cr.Reservation.Start, End: cr.Reservation.End,
			ShareBytes: b.Share,
		})
	}
	for _, r := range made {
		if r.State != reserve.StateHeld {
			continue
		}
		if _, err := s.c.Commit(ctx, own, r.ID, r.Version); err != nil {
			undo("the job could not be booked")
			return nil, "", fmt.Errorf("commit %s: %w", r.ID, err)
		}
	}
	return pairs, algorithm, nil
}

// deadlines starts SCHEDULED jobs whose window opened, books listed
// deadline jobs left unbooked (a restart between listing and booking),
// and deals with pairs still running at their reservation's end: the
// reservation is extended when admissible, else the pair goes on on the
// routed path, saying so. The caller holds mu.
func (s *Service) deadlines(ctx context.Context, now time.Time) error {
	// A listed deadline job is booked as its listing arrives (Listing):
	// one is left unbooked only by a restart in between, or a booking that
	// could not be stored, so the QUEUED jobs, however many wait, are read
	// only then (recover).
	states := []string{transfer.JobScheduled, transfer.JobActive}
	recovering := s.recover
	if recovering {
		states = append(states, transfer.JobQueued)
	}
	js, err := s.st.ListJobs(ctx, store.JobFilter{States: states})
	if err != nil {
		return err
	}
	for _, j := range js {
		switch {
		case j.State == transfer.JobQueued && !j.Deadline.IsZero():
			if _, waiting := s.waiters[j.ID]; waiting {
				continue
			}
			lists, err := s.st.ListTasks(ctx, store.TaskFilter{Job: j.ID, Kind: transfer.TaskList, States: []string{transfer.TaskSucceeded}})
			if err != nil || len(lists) == 0 {
				continue
			}
			s.schedule(ctx, j)
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
	if recovering {
		s.recover = false
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
	var own controller.Actor
	for i := range j.Pairs {
		p := &j.Pairs[i]
		if p.Reservation == "" || p.Routed != "" || now.Before(p.End.Add(-5*time.Second)) {
			continue
		}
		if own.Name == "" {
			var err error
			if own, err = s.owner(ctx, j); err != nil {
				return err
			}
		}
		left := p.ShareBytes - p.BytesDone
		if left < 0 {
			left = 0
		}
		ext := time.Minute
		if p.RateBps > 0 {
			ext = max(ext, time.Duration(float64(left)*8/float64(p.RateBps)*float64(time.Second))*5/4)
		}
		end := p.End.Add(ext)
		why := ""
		r, err := s.c.Get(ctx, own, p.Reservation)
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
				cr, err := s.c.Modify(ctx, own, r.ID, controller.ModifyInput{Version: version, End: end})
				if err == nil {
					p.End, extended = cr.Reservation.End, true
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
