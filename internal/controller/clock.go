package controller

import (
	"context"
	"time"

	"github.com/lightpath/lightpath/internal/heapq"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// The clock: timed transitions (a hold expiring, a start, an end) are
// applied by one loop that sleeps until the earliest instant any live
// reservation has something due. A min-heap keeps those instants; an entry
// is stale, and skipped, when its reservation has changed since it was
// pushed, so changes only push and never search the heap.

type dueEntry struct {
	at      time.Time
	id      string
	version uint64
}

// dueHeap is the min-heap of dueEntries by at (keyed in Unix nanoseconds).
type dueHeap = heapq.Heap[int64, dueEntry]

// pushEntry adds e to the heap.
func (c *Controller) pushEntry(e dueEntry) { c.due.Push(e.at.UnixNano(), e) }

// topDue is the earliest entry; the heap must not be empty.
func (c *Controller) topDue() dueEntry {
	_, e := c.due.Top()
	return e
}

// pushDue records when r next has something due; the caller holds mu.
func (c *Controller) pushDue(r reserve.Reservation) {
	if at, ok := reserve.NextDue(r); ok {
		c.pushEntry(dueEntry{at: at, id: r.ID, version: r.Version})
	}
}

// nextDue returns the earliest instant of a current heap entry, dropping
// stale ones; the caller holds mu.
func (c *Controller) nextDue() (time.Time, bool) {
	for c.due.Len() > 0 {
		e := c.topDue()
		if r, ok := c.live[e.id]; ok && r.Version == e.version {
			return e.at, true
		}
		c.due.Pop()
	}
	return time.Time{}, false
}

// Run applies timed transitions as they fall due until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.Tick(ctx)
		c.mu.Lock()
		now := c.now()
		at, ok := c.nextDue()
		if l, lok := c.nextLease(now); lok && (!ok || l.Before(at)) {
			at, ok = l, true
		}
		c.mu.Unlock()
		wait := time.Hour
		if ok {
			wait = max(at.Sub(now), time.Millisecond)
			wait = min(wait, time.Hour)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-c.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// Tick applies every timed transition due now. Run calls it; tests call it
// with a fake clock.
func (c *Controller) Tick(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if lapsed := c.checkLeases(ctx, now); len(lapsed) > 0 {
		c.rejudgeNodes(ctx, now, lapsed...)
	}
	for c.due.Len() > 0 {
		e := c.topDue()
		r, ok := c.live[e.id]
		if !ok || r.Version != e.version {
			c.due.Pop()
			continue
		}
		if e.at.After(now) {
			break
		}
		c.due.Pop()
		n, trs, err := reserve.CatchUp(r, now)
		if err != nil {
			c.log.Error("timed transition", "id", r.ID, "err", err)
			continue
		}
		if len(trs) == 0 {
			c.pushDue(r)
			continue
		}
		if err := c.record(ctx, r, n, store.AuditEntry{At: now, Who: reserve.ActorController, What: "timed " + n.ID, Detail: describeTransitions(trs)}, trs...); err != nil {
			// Try again later rather than lose the transition: the
			// store may be back by then.
			c.log.Error("store timed transition", "id", r.ID, "err", err)
			c.pushEntry(dueEntry{at: now.Add(time.Second), id: r.ID, version: r.Version})
			continue
		}
	}
}

// apply updates the in-memory state after r's new version committed: the
// booking follows the reservation, and a terminal one leaves the schedule.
// The caller holds mu.
func (c *Controller) apply(r reserve.Reservation) {
	old, had := c.live[r.ID]
	if had {
		if !r.State.Live() || !sameBooking(old, r) {
			if _, err := c.sched.Remove(r.ID); err != nil {
				c.log.Error("release booking", "id", r.ID, "err", err)
			}
		}
	}
	if !r.State.Live() {
		c.dropLive(r.ID)
		return
	}
	if !had || !sameBooking(old, r) {
		if err := c.sched.Add(booking(r)); err != nil {
			c.log.Error("book", "id", r.ID, "err", err)
		}
	}
	c.setLive(r)
	c.pushDue(r)
}

func sameBooking(a, b reserve.Reservation) bool {
	if a.Bandwidth != b.Bandwidth || !a.Start.Equal(b.Start) || !a.End.Equal(b.End) || len(a.Path) != len(b.Path) {
		return false
	}
	for i := range a.Path {
		if a.Path[i] != b.Path[i] {
			return false
		}
	}
	return true
}

// checkLeases marks the agents whose leases have lapsed since it last
// looked, and returns their nodes; the caller holds mu.
func (c *Controller) checkLeases(ctx context.Context, now time.Time) []string {
	var lapsed []string
	for n, l := range c.agents {
		exp := l.expires()
		if now.Before(exp) || c.lapsed[n] {
			continue
		}
		c.lapsed[n] = true
		lapsed = append(lapsed, n)
		c.log.Warn("agent gone", "node", n, "lease_expired", exp)
		if err := c.st.AppendAudit(ctx, store.AuditEntry{At: now, Who: reserve.ActorController, What: "agent gone " + n,
			Detail: "lease expired at " + exp.Format(time.RFC3339)}); err != nil {
			c.log.Error("audit", "err", err)
		}
	}
	return lapsed
}

// catchUp applies the timed events due for the live reservation r at now
// that the clock loop has not applied yet, and returns r as it then
// stands: a request or a judgement acts on that, not on a reservation
// whose start or end has passed unseen (which the state machine refuses).
// The caller holds mu.
func (c *Controller) catchUp(ctx context.Context, r reserve.Reservation, now time.Time) (reserve.Reservation, error) {
	n, trs, err := reserve.CatchUp(r, now)
	if err != nil || len(trs) == 0 {
		return r, err
	}
	if err := c.record(ctx, r, n, store.AuditEntry{At: now, Who: reserve.ActorController, What: "timed " + r.ID, Detail: describeTransitions(trs)}, trs...); err != nil {
		return r, err
	}
	return n, nil
}
