package service

import (
	"runtime"
	"sync"
	"time"
)

// StallHold is how long a hold of the service's lock (mu) may last before
// the time it lasted counts as time the controller could not serve: a
// heartbeat waits for mu, so a data node cannot renew its lease while
// another request or the clock holds it.
const StallHold = time.Second

// maxStalls bounds the stalls remembered; the oldest go first.
const maxStalls = 256

// stall is a span of the controller's time in which it could not serve a
// heartbeat.
type stall struct{ from, to time.Time }

// stalls remembers the controller's stalls, for the lease rule: a lease
// never lapses because the controller was busy. A lease expiring at E is
// judged against E extended by the stalled time since E-MaxLease (its
// last renewal lies no earlier): the time in which its node could not have
// renewed it is given back, so a node that heartbeats on time keeps its
// lease whatever the controller did meanwhile, and a node that is gone
// loses it at most the stalled time later. Its own lock: liveNodes reads
// it with or without mu.
type stalls struct {
	mu   sync.Mutex
	list []stall
}

// note records a stall from from to to, forgetting those older than any
// lease could reach back.
func (st *stalls) note(from, to time.Time) {
	if !to.After(from) {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	keep := st.list[:0]
	for _, s := range st.list {
		switch {
		case !s.to.After(to.Add(-2 * MaxLease)):
		case !s.from.After(to) && !from.After(s.to):
			// One stall seen twice (its holder's and the clock's
			// wait) is given back once.
			from, to = minTime(from, s.from), maxTime(to, s.to)
		default:
			keep = append(keep, s)
		}
	}
	st.list = keep
	if len(st.list) >= maxStalls {
		st.list = st.list[1:]
	}
	st.list = append(st.list, stall{from, to})
}

// leaseEnd is when a lease that expires at exp lapses, now: exp extended
// by the stalled time between exp-MaxLease and now.
func (st *stalls) leaseEnd(exp, now time.Time) time.Time {
	if exp.IsZero() {
		return exp
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	from := exp.Add(-MaxLease)
	var credit time.Duration
	for _, s := range st.list {
		a, b := s.from, s.to
		if a.Before(from) {
			a = from
		}
		if b.After(now) {
			b = now
		}
		if b.After(a) {
			credit += b.Sub(a)
		}
	}
	return exp.Add(credit)
}

// lock takes mu, noting when.
func (s *Service) lock() {
	s.mu.Lock()
	s.heldSince = s.now()
}

// unlock lets mu go; a hold longer than StallHold is a stall, logged
// with the function that held it.
func (s *Service) unlock() {
	if now := s.now(); now.Sub(s.heldSince) > StallHold {
		s.stalled.note(s.heldSince, now)
		by := "?"
		if pc, _, _, ok := runtime.Caller(1); ok {
			if f := runtime.FuncForPC(pc); f != nil {
				by = f.Name()
			}
		}
		s.log.Warn("the service's lock was held long: leases get the time back", "held", now.Sub(s.heldSince).Round(time.Millisecond), "by", by)
	}
	s.mu.Unlock()
}

// leaseLive reports whether a lease expiring at exp still holds at now,
// given back the time the controller could not serve (stalls).
func (s *Service) leaseLive(exp, now time.Time) bool {
	return now.Before(s.stalled.leaseEnd(exp, now))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
