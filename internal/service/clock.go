package service

import (
	"context"
	"time"

	"github.com/lightpath/lightpath/internal/controller"
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
	var events <-chan controller.Event
	stop := func() {}
	defer func() { stop() }()
	subscribe := func() {
		events, stop, _ = s.c.Subscribe(controller.Actor{Name: "service", Role: reserve.RoleAdmin}, "", 0)
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
			s.mu.Lock()
			s.notify()
			s.mu.Unlock()
			return
		case <-t.C:
			s.Tick(ctx)
			if events == nil {
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
func (s *Service) Tick(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if err := s.lapse(ctx, now); err != nil {
		s.log.Warn("requeue the tasks of lost data nodes", "err", err)
	}
	if err := s.lapseOwners(ctx, now); err != nil {
		s.log.Warn("take back the files in parts of lost data nodes", "err", err)
	}
	if err := s.deadlines(ctx, now); err != nil {
		s.log.Warn("start or extend booked jobs", "err", err)
	}
	if err := s.optimize(ctx, now); err != nil {
		s.log.Warn("optimizer round", "err", err)
	}
	if err := s.queuedReasons(ctx, now); err != nil {
		s.log.Warn("say what queued jobs wait for", "err", err)
	}
	for id, r := range s.rates {
		if !now.Before(r.until) {
			delete(s.rates, id)
		}
	}
}

// lapse requeues the ACTIVE tasks whose lease lapsed: their files stay in
// them, and the next claim takes them with the next attempt.
func (s *Service) lapse(ctx context.Context, now time.Time) error {
	ts, err := s.st.ListTasks(ctx, store.TaskFilter{States: []string{transfer.TaskActive}})
	if err != nil {
		return err
	}
	for _, t := range ts {
		if now.Before(t.LeaseExpires) {
			continue
		}
		err := s.tx(ctx, func(tx store.Store) error {
			lost := t.From
			t.State, t.LeaseExpires = transfer.TaskQueued, time.Time{}
			t.Error = "data node " + lost + " lost (its lease lapsed)"
			if t.Kind == transfer.TaskList {
				t.From = ""
			}
			if err := tx.UpdateTask(ctx, t); err != nil {
				return err
			}
			j, err := tx.GetJob(ctx, t.Job)
			if err != nil {
				return err
			}
			if transfer.JobEnded(j.State) {
				return nil
			}
			j.Reason = "data node " + lost + " lost; its tasks wait for another node"
			return s.saveJob(ctx, tx, &j, now)
		})
		if err != nil {
			return err
		}
		delete(s.rates, t.ID)
	}
	return nil
}

// queuedReasons keeps the Reason of jobs waiting for their listing true:
// listing, or waiting for a live data node of the endpoint.
func (s *Service) queuedReasons(ctx context.Context, now time.Time) error {
	js, err := s.st.ListJobs(ctx, store.JobFilter{States: []string{transfer.JobQueued}})
	if err != nil || len(js) == 0 {
		return err
	}
	_, live, err := s.liveNodes(ctx, s.st, now)
	if err != nil {
		return err
	}
	for _, j := range js {
		ts, err := s.st.ListTasks(ctx, store.TaskFilter{Job: j.ID, Kind: transfer.TaskList, States: []string{transfer.TaskQueued}})
		if err != nil {
			return err
		}
		if len(ts) == 0 {
			continue
		}
		ep := srcEndpoint(j)
		why := listReason(ep, len(live[ep]) > 0)
		if ts[0].Error != "" && len(live[ep]) > 0 {
			why = ts[0].Error + "; " + why
		}
		if why == j.Reason {
			continue
		}
		j.Reason = why
		if err := s.tx(ctx, func(tx store.Store) error { return s.saveJob(ctx, tx, &j, now) }); err != nil {
			return err
		}
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

// Aggregates returns the service's aggregates now.
func (s *Service) Aggregates() Aggregates {
	s.mu.Lock()
	defer s.mu.Unlock()
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
