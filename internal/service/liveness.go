package service

import (
	"context"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// A data node that dies is evident long before its lease lapses: the
// sessions it ran break at their other ends. A node whose session broke
// (its peer's word: a destination's heartbeat naming the attempt in
// Broken, or a source's report of a push that failed on the network) is
// suspected; a suspect that has stayed silent since for its quiet time
// (no heartbeat, claim, report or grant check) is taken for dead: its
// lease ends there and then, its tasks go back QUEUED for other nodes
// (lapse), and its pairs' reservations are planned again (rebook.go).
// A node that lives answers within its quiet time: a source reports
// every running task every second (datanode.DefaultReportEvery), and
// every node heartbeats every third of its lease.
const (
	// SourceQuiet is how long a source node suspected by a destination
	// must stay silent to be taken for dead: three of its task reports.
	SourceQuiet = 3 * time.Second
	// quietMargin is added to a heartbeat interval for a suspect that
	// need not report in between (a destination).
	quietMargin = 2 * time.Second
	// suspectGrace is the least time between a suspicion and the verdict.
	suspectGrace = time.Second
)

// liveness remembers when each data node was last heard from and which
// are suspected. In memory only: a controller that restarts or takes
// over forgets its suspicions, and the leases decide as before.
type liveness struct {
	mu      sync.Mutex
	last    map[string]time.Time
	suspect map[string]suspicion
	// every is each node's heartbeat interval (a third of its lease).
	every map[string]time.Duration
}

// beats notes node's heartbeat interval.
func (l *liveness) beats(node string, every time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.every == nil {
		l.every = map[string]time.Duration{}
	}
	l.every[node] = every
}

// heartbeatQuiet is the quiet time of a node that need not be heard
// between its heartbeats: its interval (DefaultLease/3 when not known)
// and a margin.
func (l *liveness) heartbeatQuiet(node string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	every, ok := l.every[node]
	if !ok {
		every = DefaultLease / 3
	}
	return every + quietMargin
}

type suspicion struct {
	at    time.Time     // when the broken session was told
	quiet time.Duration // the silence after which the node is taken for dead
	why   string        // what broke, for the tasks' and the job's reasons
}

// heard notes a request from node at at (its arrival): it clears a
// suspicion told before it.
func (l *liveness) heard(node string, at time.Time) {
	if node == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	if at.After(l.last[node]) {
		l.last[node] = at
	}
	if s, ok := l.suspect[node]; ok && at.After(s.at) {
		delete(l.suspect, node)
	}
}

// suspect notes that a session of node broke at at; the first
// suspicion stands (a later one would only put the verdict off).
func (l *liveness) suspectNode(node string, at time.Time, quiet time.Duration, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.suspect == nil {
		l.suspect = map[string]suspicion{}
	}
	if _, ok := l.suspect[node]; ok {
		return
	}
	if h, ok := l.last[node]; ok && h.After(at) {
		return
	}
	l.suspect[node] = suspicion{at: at, quiet: quiet, why: why}
}

// dead takes out and returns the suspects silent for their quiet time at
// now; live says whether a silence that ends at a time has ended at now
// (leaseLive: the controller's stalls, in which no node could be heard,
// are given back).
func (l *liveness) dead(now time.Time, live func(exp, now time.Time) bool) map[string]suspicion {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out map[string]suspicion
	for node, s := range l.suspect {
		// Silent for its quiet time, and a moment at least after the
		// suspicion (a report may be on its way).
		end := l.last[node].Add(s.quiet)
		if soonest := s.at.Add(suspectGrace); end.Before(soonest) {
			end = soonest
		}
		if live(end, now) {
			continue
		}
		if out == nil {
			out = map[string]suspicion{}
		}
		out[node] = s
		delete(l.suspect, node)
	}
	return out
}

// lapseSuspects ends, at now, the lease of every suspected node silent
// for its quiet time, and the leases of the tasks it runs: lapse, in
// the same round, sends them back to the queue, and the rounds after
// plan the lost pairs again. mu is held.
func (s *Service) lapseSuspects(ctx context.Context, now time.Time) error {
	dead := s.alive.dead(now, s.leaseLive)
	if len(dead) == 0 {
		return nil
	}
	nodes, err := s.st.ListDataNodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		why, ok := dead[n.Node]
		if !ok || !now.Before(n.LeaseExpires) {
			continue
		}
		s.log.Warn("data node taken for dead: its sessions broke and it went silent", "node", n.Node, "broken", why.why,
			"silent_for", now.Sub(why.at).Round(time.Millisecond))
		err := s.tx(ctx, func(tx store.Store) error {
			n.LeaseExpires = now
			if err := tx.PutDataNode(ctx, n); err != nil {
				return err
			}
			ts, err := tx.ListTasks(ctx, store.TaskFilter{Node: n.Node, States: []string{transfer.TaskActive}})
			if err != nil {
				return err
			}
			for _, t := range ts {
				if t.From != n.Node || !now.Before(t.LeaseExpires) {
					continue
				}
				t.LeaseExpires = now
				if err := tx.UpdateTask(ctx, t); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		s.lostWhy[n.Node] = "its sessions broke (" + why.why + ") and it went silent"
	}
	return nil
}
