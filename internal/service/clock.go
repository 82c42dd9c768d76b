package service

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// Run runs the service's clock until ctx ends: every Config.Tick it
// requeues the tasks whose node's lease lapsed, starts booked jobs whose
// window opened, deals with reservations that end under a running job,
// and lets the optimizers decide. Between ticks it follows the
// controller's reservation events, so a booked job starts as soon as one
// of its reservations turns ACTIVE. Run it only while the controller
// leads.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	var events <-chan apiv1.Event
	stop := func() {}
	defer func() { stop() }()
	subscribe := func() {
		if s.events != nil {
			events, stop = s.events(ctx)
		}
		if err := s.startActive(ctx); err != nil {
			s.log.Warn("start booked jobs", "err", err)
		}
	}
	subscribe()
	for {
		select {
		case <-ctx.Done():
			// Waiting claims claim once more and answer, rather than
			// hold their requests on a controller that stops leading.
			s.lock()
			s.notify()
			s.unlock()
			return
		case <-s.bookKick:
			s.BookPending(ctx)
		case <-t.C:
			s.Tick(ctx)
			if events == nil {
				stop()
				subscribe()
			}
		case ev, ok := <-events:
			if !ok {
				// Dropped (it fell behind) or the controller closes: it
				// subscribes again at the next tick.
				events = nil
				continue
			}
			if tr := ev.Transition; ev.Reservation != nil && tr != nil && tr.To == reserve.StateActive && tr.From != reserve.StateActive {
				if err := s.startActive(ctx); err != nil {
					s.log.Warn("start booked jobs", "reservation", ev.Reservation.ID, "err", err)
				}
			}
		}
	}
}

// Tick does one round of the clock's work at the controller's now.
// Listed jobs are booked after the round, outside mu (BookPending).
func (s *Service) Tick(ctx context.Context) {
	s.round(ctx)
	s.BookPending(ctx)
}

func (s *Service) round(ctx context.Context) {
	asked := s.now()
	s.lock()
	defer s.unlock()
	now := s.now()
	if now.Sub(asked) > StallHold {
		// Whatever held mu so long kept heartbeats out as long: their
		// leases get the time back (stall.go) before lapse judges them.
		s.stalled.note(asked, now)
	}
	if err := s.lapseSuspects(ctx, now); err != nil {
		s.log.Warn("take the tasks of dead data nodes back", "err", err)
	}
	if err := s.lapse(ctx, now); err != nil {
		s.log.Warn("requeue the tasks of lost data nodes", "err", err)
	}
	if err := s.lapseOwners(ctx, now); err != nil {
		s.log.Warn("take back the files in parts of lost data nodes", "err", err)
	}
	if err := s.deadlines(ctx, now); err != nil {
		s.log.Warn("start or extend booked jobs", "err", err)
	}
	if err := s.sweep(ctx, now); err != nil {
		s.log.Warn("end the files of an ended job", "err", err)
	}
	if err := s.optimize(ctx, now); err != nil {
		s.log.Warn("optimizer round", "err", err)
	}
	for id, r := range s.rates {
		if !now.Before(r.until) {
			delete(s.rates, id)
		}
	}
}

// lapse requeues the ACTIVE tasks whose lease lapsed: their files stay in
// them, and the next claim takes them with the next attempt. A lease
// never lapses because the controller was busy: the time mu was held
// past StallHold (or the clock waited for it so long), in which no
// heartbeat could renew a lease, is added to every lease it touched
// before lapse judges it (leaseLive, stall.go; issue 28, finding 7).
func (s *Service) lapse(ctx context.Context, now time.Time) error {
	ts, err := s.st.ListTasks(ctx, store.TaskFilter{States: []string{transfer.TaskActive}})
	if err != nil {
		return err
	}
	var live map[string][]transfer.DataNode
	for _, t := range ts {
		if s.leaseLive(t.LeaseExpires, now) {
			continue
		}
		if live == nil {
			if _, live, err = s.liveNodes(ctx, s.st, now); err != nil {
				return err
			}
		}
		failed := false // the listing failed for good
		drop := store.JobSweep{Job: t.Job, Drop: true, At: now}
		err := s.tx(ctx, func(tx store.Store) error {
			failed = false
			lost := t.From
			t.State, t.LeaseExpires = transfer.TaskQueued, time.Time{}
			t.Error = "data node " + lost + " lost (" + cmp.Or(s.lostWhy[lost], "its lease lapsed") + ")"
			if t.Kind == transfer.TaskList {
				t.From = ""
			}
			j, err := tx.GetJob(ctx, t.Job)
			if err != nil {
				return err
			}
			if t.Kind == transfer.TaskList && t.Attempt >= MaxAttempts && !transfer.JobEnded(j.State) {
				// A listing that never comes back (a node that dies on
				// this dataset, or one refused at every try) is not
				// tried forever.
				{
					why := fmt.Sprintf("listing the dataset failed %d times; the last: %s", t.Attempt, t.Error)
					t.State, t.Error, t.EndedAt = transfer.TaskFailed, why, now
					if err := tx.UpdateTask(ctx, t); err != nil {
						return err
					}
					j.State, j.Reason, j.EndedAt = transfer.JobFailed, why, now
					j.FilesTotal, j.BytesTotal = 0, 0
					failed = true
					if err := tx.PutJobSweep(ctx, drop); err != nil {
						return err
					}
					return s.saveJob(ctx, tx, &j, now)
				}
			}
			if err := tx.UpdateTask(ctx, t); err != nil {
				return err
			}
			if transfer.JobEnded(j.State) {
				return nil
			}
			j.Reason = "data node " + lost + " lost; its tasks wait for another node"
			if t.Kind == transfer.TaskList {
				ep := srcEndpoint(j)
				j.Reason = listReason(ep, len(live[ep]) > 0)
				if len(live[ep]) > 0 {
					j.Reason = t.Error + "; " + j.Reason
				}
			}
			return s.saveJob(ctx, tx, &j, now)
		})
		if err != nil {
			return err
		}
		delete(s.rates, t.ID)
		if failed {
			// The pages its attempts stored go, in steps, once the
			// clock lets mu go (or, after a restart, at its ticks).
			s.goSweep(ctx, drop)
		}
	}
	return nil
}

// queuedReason makes the Reason of a job waiting for its listing true
// at the time it is read (Get, List): listing, or waiting for a live data
// node of the endpoint, after what the clock or a claim last said (a lost
// node). Worked out when read, so the clock's work does not grow with the
// jobs waiting (issue 28, finding 6).
func queuedReason(j *transfer.Job, live map[string][]transfer.DataNode) {
	if j.State != transfer.JobQueued {
		return
	}
	ep := srcEndpoint(*j)
	for _, r := range [2]string{listReason(ep, true), listReason(ep, false)} {
		prefix, ok := strings.CutSuffix(j.Reason, r)
		if !ok {
			continue
		}
		if len(live[ep]) == 0 {
			j.Reason = listReason(ep, false)
		} else {
			j.Reason = prefix + listReason(ep, true)
		}
		return
	}
}

// queuedReasons applies queuedReason to the jobs read, with one lookup of
// the data nodes when one of them is QUEUED.
func (s *Service) queuedReasons(ctx context.Context, js []transfer.Job) error {
	if !slices.ContainsFunc(js, func(j transfer.Job) bool { return j.State == transfer.JobQueued }) {
		return nil
	}
	_, live, err := s.liveNodes(ctx, s.st, s.now())
	if err != nil {
		return err
	}
	for i := range js {
		queuedReason(&js[i], live)
	}
	return nil
}

// Aggregates are what the bandwidth challenge reported, for /metrics:
// throughput summed over every running task, per site in and out, and
// the running total of bytes moved.
type Aggregates struct {
	ThroughputBps float64
	SiteInBps     map[string]float64
	SiteOutBps    map[string]float64
	BytesMoved    int64
	RunningTasks  int
}

// JobStates are the states a job may be in, as /metrics counts them.
var JobStates = []string{transfer.JobQueued, transfer.JobScheduled, transfer.JobActive, transfer.JobSucceeded, transfer.JobFailed, transfer.JobCancelled}

// JobsByState counts the jobs in each of JobStates (0 for none), from the
// store's state index, without the service's lock.
func (s *Service) JobsByState(ctx context.Context) (map[string]int, error) {
	n, err := s.st.CountJobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(JobStates))
	for _, st := range JobStates {
		out[st] = n[st]
	}
	return out, nil
}

// Aggregates returns the service's aggregates now.
func (s *Service) Aggregates() Aggregates {
	s.lock()
	defer s.unlock()
	now := s.now()
	a := Aggregates{SiteInBps: map[string]float64{}, SiteOutBps: map[string]float64{}, BytesMoved: s.moved}
	for _, r := range s.rates {
		if !now.Before(r.until) {
			continue
		}
		a.RunningTasks++
		a.ThroughputBps += r.bps
		if r.fromSite != "" {
			a.SiteOutBps[r.fromSite] += r.bps
		}
		if r.toSite != "" {
			a.SiteInBps[r.toSite] += r.bps
		}
	}
	return a
}
