package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// Agents: one per node that provisions reservations into its kernel. An
// agent holds a lease that its heartbeats renew; while the lease holds,
// the node is managed: reservations created across it wait for its report
// before they become ACTIVE. When a lease lapses, every live reservation
// that counts on the node is flagged degraded, and recovers when the agent
// is back.

// DefaultLease is how long an agent's heartbeat keeps it alive, and
// MaxLease the longest an agent may ask for.
const (
	DefaultLease = 15 * time.Second
	MaxLease     = 5 * time.Minute
)

// AgentInfo is an agent as the controller sees it.
type AgentInfo struct {
	Node         string
	RegisteredAt time.Time
	LeaseExpires time.Time
	Alive        bool
}

// AgentWork is what a heartbeat answers: the agent's lease, the topology's
// hash (to know when to read it again), and the live reservations that
// touch its node, which is everything it must provision or remove.
type AgentWork struct {
	Node           string
	LeaseExpires   time.Time
	TopologySHA256 string
	Reservations   []reserve.Reservation
}

// TopologyHash returns the SHA-256 of the topology's text. Every heartbeat
// answers with it, so it is computed once per text and kept.
func (t *Topo) TopologyHash() string {
	if h := t.hash.Load(); h != nil && h.yaml == t.YAML {
		return h.sum
	}
	sum := sha256.Sum256([]byte(t.YAML))
	h := &topoHash{yaml: t.YAML, sum: hex.EncodeToString(sum[:])}
	t.hash.Store(h)
	return h.sum
}

// topoHash is a topology text's SHA-256, kept with the text it is of.
type topoHash struct{ yaml, sum string }

func (a Actor) isAgent() bool { return a.Role == reserve.RoleAgent || a.Role == reserve.RoleAdmin }

// agentLease is one agent's lease. Its expiry is read and renewed
// atomically, so a renewal needs mu only shared (renew); everything else
// about the map and the other fields changes with mu held exclusively.
type agentLease struct {
	exp atomic.Pointer[time.Time]
	// stored is the expiry the store holds: renewals are written only when
	// it would lapse within half a lease (persistDue).
	stored time.Time
}

func newAgentLease(exp time.Time) *agentLease {
	l := &agentLease{stored: exp}
	l.exp.Store(&exp)
	return l
}

// expires returns when the lease lapses.
func (l *agentLease) expires() time.Time { return *l.exp.Load() }

// leaseOf returns when node's agent's lease lapses, and whether it has
// one; the caller holds mu (shared is enough).
func (c *Controller) leaseOf(node string) (time.Time, bool) {
	l, ok := c.agents[node]
	if !ok {
		return time.Time{}, false
	}
	return l.expires(), true
}

// persistDue reports whether a renewal to exp at now must be written to
// the store. Writing every renewal (every agent every 2 s: 500 write
// transactions a second for 1,000 agents) keeps nothing a restart needs
// that this does not: the store gets the new expiry when the one it holds
// would lapse within half a lease, or when the new one is earlier (a
// shorter lease asked for). So the stored expiry is never later than the
// agent's real one, and at most half a lease earlier: a controller that
// restarts finds an agent that kept heartbeating alive if it restarts
// within half a lease of the last write (7.5 s with the default lease; an
// agent renews every 2 s), and otherwise judges it gone at most half a
// lease early, until its next heartbeat brings it back.
func (l *agentLease) persistDue(now, exp time.Time, lease time.Duration) bool {
	return l.stored.Sub(now) < lease/2 || exp.Before(l.stored)
}

// Heartbeat registers the agent of node, or renews its lease, and returns
// its work. An agent that was gone is alive again: the reservations it had
// degraded recover (unless another of their nodes is still gone).
//
// A renewal of a live lease that need not be written (persistDue) takes mu
// only shared (renew): the work it returns is a read, and the new expiry
// is stored atomically. Registrations, returns and renewals to be written
// take mu exclusively.
func (c *Controller) Heartbeat(ctx context.Context, a Actor, node string, lease time.Duration) (AgentWork, error) {
	if !a.isAgent() {
		return AgentWork{}, forbidden("only agents send heartbeats")
	}
	if err := a.ActsFor(node); err != nil {
		return AgentWork{}, err
	}
	if lease == 0 {
		lease = DefaultLease
	}
	if lease < time.Second || lease > MaxLease {
		return AgentWork{}, &reserve.RequestError{Field: "lease", Message: fmt.Sprintf("lease %s: want 1s to %s", lease, MaxLease)}
	}
	c.mu.RLock()
	w, ok := c.renew(node, lease)
	c.mu.RUnlock()
	if ok {
		return w, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return AgentWork{}, ErrNoTopology
	}
	if err := c.topo.checkNode("node", node); err != nil {
		return AgentWork{}, err
	}
	now := c.now()
	l, known := c.agents[node]
	wasAlive := known && now.Before(l.expires())
	reg := c.agentSince[node]
	if !wasAlive || reg.IsZero() {
		reg = now
	}
	ag := store.Agent{Node: node, RegisteredAt: reg, LeaseExpires: now.Add(lease)}
	put := func(tx store.Store) error { return tx.PutAgent(ctx, ag) }
	switch {
	case !wasAlive:
		if err := c.commit(ctx, put, store.AuditEntry{At: now, Who: a.Name, What: "agent up " + node,
			Detail: fmt.Sprintf("lease %s", lease)}); err != nil {
			return AgentWork{}, fmt.Errorf("store agent: %w", err)
		}
		l = newAgentLease(ag.LeaseExpires)
		c.agents[node] = l
	case l.persistDue(now, ag.LeaseExpires, lease):
		// Renewals are frequent and say nothing new: no audit entry.
		if err := c.st.Tx(ctx, put); err != nil {
			return AgentWork{}, fmt.Errorf("store agent: %w", err)
		}
		l.stored = ag.LeaseExpires
	}
	l.exp.Store(&ag.LeaseExpires)
	c.agentSince[node] = reg
	c.lapsed[node] = false
	if !wasAlive {
		c.log.Info("agent up", "node", node, "lease", lease)
		c.rejudgeNodes(ctx, now, node)
		// A new lease for the clock to watch. A renewal only puts the
		// earliest lapse later: the clock wakes at the one it knew, finds
		// nothing lapsed and sleeps again, so renewals need not wake it.
		c.kick()
	}
	return AgentWork{Node: node, LeaseExpires: ag.LeaseExpires, TopologySHA256: c.topo.TopologyHash(), Reservations: c.touching(node)}, nil
}

// renew is a heartbeat's renewal of a live lease that need not be written
// to the store, under mu held shared: it moves the expiry later atomically
// and returns the agent's work. It reports false, changing nothing, for
// anything else (an unknown node, an agent gone or new, a renewal due to be
// written, a shorter lease), which Heartbeat then does under mu held
// exclusively.
func (c *Controller) renew(node string, lease time.Duration) (AgentWork, bool) {
	if c.topo == nil {
		return AgentWork{}, false
	}
	if _, ok := c.topo.Graph.Role(node); !ok {
		return AgentWork{}, false
	}
	l, known := c.agents[node]
	if !known || c.lapsed[node] || c.agentSince[node].IsZero() {
		return AgentWork{}, false
	}
	now := c.now()
	exp := now.Add(lease)
	for {
		cur := l.exp.Load()
		if !now.Before(*cur) || exp.Before(*cur) || l.persistDue(now, exp, lease) {
			return AgentWork{}, false
		}
		if l.exp.CompareAndSwap(cur, &exp) {
			break
		}
	}
	return AgentWork{Node: node, LeaseExpires: exp, TopologySHA256: c.topo.TopologyHash(), Reservations: c.touching(node)}, true
}

// Agents lists every agent that ever registered, alive or gone.
func (c *Controller) Agents() []AgentInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	now := c.now()
	out := make([]AgentInfo, 0, len(c.agents))
	for n, l := range c.agents {
		exp := l.expires()
		out = append(out, AgentInfo{Node: n, RegisteredAt: c.agentSince[n], LeaseExpires: exp, Alive: now.Before(exp)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Report records an agent's word on its part of a reservation:
// provisioned (in place) or failed, with the reason.
func (c *Controller) Report(ctx context.Context, a Actor, id, node string, ok bool, why string) (reserve.Reservation, error) {
	if !a.isAgent() {
		return reserve.Reservation{}, forbidden("only agents report on nodes")
	}
	if err := a.ActsFor(node); err != nil {
		return reserve.Reservation{}, err
	}
	kind := reserve.EventNodeProvisioned
	if !ok {
		kind = reserve.EventNodeFailed
	}
	return c.event(ctx, a, id, reserve.Event{Kind: kind, By: "agent:" + node, Node: node, Why: why})
}

// nextLease returns when the earliest live lease lapses; the caller
// holds mu.
func (c *Controller) nextLease(now time.Time) (time.Time, bool) {
	var first time.Time
	for _, l := range c.agents {
		if exp := l.expires(); now.Before(exp) && (first.IsZero() || exp.Before(first)) {
			first = exp
		}
	}
	return first, !first.IsZero()
}

// rejudge brings every live reservation's degraded flag in line with its
// managed nodes' agents: degraded, naming the gone ones, or recovered. Open
// and LinkUp call it. The caller holds mu.
func (c *Controller) rejudge(ctx context.Context, now time.Time) {
	for _, r := range c.liveList() {
		c.judge(ctx, r, now)
	}
}

// rejudgeNodes is rejudge for the reservations that touch nodes, the only
// ones whose judgement a change of those nodes' agents can change (a
// reservation's managed nodes are nodes of its path): the clock calls it
// for the agents whose leases lapsed, a heartbeat for an agent back, so
// that costs what it changes rather than every live reservation. The
// caller holds mu.
func (c *Controller) rejudgeNodes(ctx context.Context, now time.Time, nodes ...string) {
	for _, r := range c.touchingAny(nodes...) {
		c.judge(ctx, r, now)
	}
}

// judge brings r's degraded flag in line with its managed nodes' agents;
// the caller holds mu.
func (c *Controller) judge(ctx context.Context, r reserve.Reservation, now time.Time) {
	var gone []string
	for _, n := range r.ManagedNodes {
		if exp, ok := c.leaseOf(n); !ok || !now.Before(exp) {
			gone = append(gone, n)
		}
	}
	ev := reserve.Event{Kind: reserve.EventRecover, By: reserve.ActorController}
	if len(gone) > 0 {
		ev = reserve.Event{Kind: reserve.EventDegrade, By: reserve.ActorController,
			Why: fmt.Sprintf("%s%s is gone: its part may not be in place", agentGone, joinNodes(gone))}
	} else if !strings.HasPrefix(r.DegradedReason, agentGone) {
		return // degraded for another reason (a link down), or not at all
	} else if c.onDownLink(r) {
		// Its agents are back, but a link of its path went down
		// meanwhile: the agents' degradation replaced the link's, which a
		// recovery would lose. Move it off the link now, or degrade it for
		// the link.
		n, err := c.moveOff(ctx, r, now)
		if err != nil {
			if !errors.Is(err, reserve.ErrConflict) {
				c.log.Error("judge reservation", "id", r.ID, "err", err)
			}
			return
		}
		if !strings.HasPrefix(n.DegradedReason, agentGone) {
			return // degraded for the link
		}
		r = n // moved to a live path: it recovers
	}
	// A conflict is a timed event due first: the clock's next tick
	// applies it and the one after judges again.
	if _, err := c.change(ctx, r, ev, now); err != nil && !errors.Is(err, reserve.ErrConflict) {
		c.log.Error("judge reservation", "id", r.ID, "err", err)
	}
}

// onDownLink reports whether r's path crosses a link known to be down;
// the caller holds mu.
func (c *Controller) onDownLink(r reserve.Reservation) bool {
	return slices.ContainsFunc(r.Path, func(h reserve.PathHop) bool {
		_, down := c.linkDown[h.Link]
		return down
	})
}

// agentGone begins the degraded reason rejudge gives, so it recovers only
// what it degraded.
const agentGone = "the agent of "

func joinNodes(ns []string) string {
	switch len(ns) {
	case 1:
		return ns[0]
	case 2:
		return ns[0] + " and " + ns[1]
	}
	s := ""
	for i, n := range ns[:len(ns)-1] {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s + " and " + ns[len(ns)-1]
}

// LinkDown records that an agent found link down (its carrier gone on
// node's end) and moves every live reservation off it: to the path the
// fixed-slot search finds without the links known to be down, if one has
// the bandwidth over the reservation's window, or, if none does, flags it
// degraded until the link returns. Agents withdraw their steering from a
// dead hop by themselves, so the flows fall back to the routed path in the
// meantime.
func (c *Controller) LinkDown(ctx context.Context, a Actor, node, link, why string) ([]reserve.Reservation, error) {
	if !a.isAgent() {
		return nil, forbidden("only agents report links")
	}
	if err := a.ActsFor(node); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return nil, ErrNoTopology
	}
	if _, ok := c.topo.Graph.Link(link); !ok {
		return nil, notFound("link", link)
	}
	if err := c.checkLinkEnd(a, node, link); err != nil {
		return nil, err
	}
	now := c.now()
	if _, known := c.linkDown[link]; !known {
		c.linkDown[link] = fmt.Sprintf("%s%s since %s", linkDownMark(link), node, now.Format(time.RFC3339))
		if why != "" {
			c.linkDown[link] += " (" + why + ")"
		}
		c.log.Warn("link down", "link", link, "node", node, "why", why)
		c.saveLinksDown(ctx)
		if err := c.st.AppendAudit(ctx, store.AuditEntry{At: now, Who: "agent:" + node, What: "link down " + link, Detail: why}); err != nil {
			c.log.Error("audit", "err", err)
		}
	}
	var moved []reserve.Reservation
	l, _ := c.topo.Graph.Link(link)
	for _, r := range c.touching(l.A) { // a reservation over the link touches both its ends
		if !slices.ContainsFunc(r.Path, func(h reserve.PathHop) bool { return h.Link == link }) {
			continue
		}
		n, err := c.moveOff(ctx, r, now)
		if err != nil {
			c.log.Error("move off a dead link", "id", r.ID, "err", err)
			continue
		}
		moved = append(moved, n)
	}
	return moved, nil
}

// LinkUp records that link is back; reservations degraded for it recover,
// and those moved off a dead link go back to the preferred path if it has
// room for them (moveBack).
func (c *Controller) LinkUp(ctx context.Context, a Actor, node, link string) error {
	if !a.isAgent() {
		return forbidden("only agents report links")
	}
	if err := a.ActsFor(node); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo != nil {
		if _, ok := c.topo.Graph.Link(link); !ok {
			return notFound("link", link)
		}
		if err := c.checkLinkEnd(a, node, link); err != nil {
			return err
		}
	}
	// A reservation degraded for the link recovers, also when this
	// controller did not hear the link go down: it restarted since, and an
	// agent reports a link only when it changes.
	mark := linkDownMark(link)
	var degraded []reserve.Reservation
	for _, r := range c.liveList() {
		if r.Degraded && strings.Contains(r.DegradedReason, mark) {
			degraded = append(degraded, r)
		}
	}
	_, known := c.linkDown[link]
	if !known && len(degraded) == 0 {
		return nil
	}
	delete(c.linkDown, link)
	if known {
		c.saveLinksDown(ctx)
	}
	now := c.now()
	c.log.Info("link up", "link", link, "node", node)
	if err := c.st.AppendAudit(ctx, store.AuditEntry{At: now, Who: "agent:" + node, What: "link up " + link}); err != nil {
		c.log.Error("audit", "err", err)
	}
	for _, r := range degraded {
		if c.onDownLink(r) {
			// Another link of its path is still down: move it off that
			// one, or degrade it for that one alone.
			n, err := c.moveOff(ctx, r, now)
			if err != nil {
				c.log.Error("move off a dead link", "id", r.ID, "err", err)
				continue
			}
			if !strings.Contains(n.DegradedReason, mark) {
				continue // degraded for the links still down
			}
			r = n // moved to a live path: it recovers
		}
		if _, err := c.change(ctx, r, reserve.Event{Kind: reserve.EventRecover, By: reserve.ActorController}, now); err != nil {
			c.log.Error("recover reservation", "id", r.ID, "err", err)
		}
	}
	c.moveBack(ctx, now) // those moved off go back to the preferred path
	c.rejudge(ctx, now)
	return nil
}

// saveLinksDown stores the links known to be down; the caller holds mu. A
// failure is logged: the links stay down in memory, and the next change
// stores them again.
func (c *Controller) saveLinksDown(ctx context.Context) {
	b, err := json.Marshal(c.linkDown)
	if err == nil {
		err = c.st.Tx(ctx, func(tx store.Store) error { return tx.PutSetting(ctx, settingLinksDown, string(b)) })
	}
	if err != nil {
		c.log.Error("store the links found down", "err", err)
	}
}

// linkDownMark begins the reason LinkDown gives a link, so LinkUp finds
// what it degraded.
func linkDownMark(link string) string { return "link " + link + " down at " }

// downLinks lists the links known to be down; the caller holds mu.
func (c *Controller) downLinks() []string {
	out := make([]string, 0, len(c.linkDown))
	for l := range c.linkDown {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// moveOff reroutes r around the links known to be down, or degrades it;
// the caller holds mu.
func (c *Controller) moveOff(ctx context.Context, r reserve.Reservation, now time.Time) (reserve.Reservation, error) {
	var reasons, down []string
	for _, h := range r.Path {
		if why, ok := c.linkDown[h.Link]; ok {
			reasons = append(reasons, why)
			down = append(down, h.Link)
		}
	}
	reason := strings.Join(reasons, "; ")
	ch, err := c.alternatePath(r, c.downLinks(), now)
	var noPath *noAlternate
	var noCode *noDSCP
	switch {
	case errors.As(err, &noPath):
		return c.change(ctx, r, reserve.Event{Kind: reserve.EventDegrade, By: reserve.ActorController,
			Why: reason + ": no other path has the bandwidth; the flows take the routed path until it returns"}, now)
	case errors.As(err, &noCode):
		return c.change(ctx, r, reserve.Event{Kind: reserve.EventDegrade, By: reserve.ActorController, Why: reason + ": " + err.Error()}, now)
	case err != nil:
		return r, err
	}
	n, err := c.change(ctx, r, reserve.Event{Kind: reserve.EventModify, By: reserve.ActorController, Why: "moved off: " + reason, Change: ch}, now)
	if err == nil && n.State.Live() && !slices.Equal(n.Path, r.Path) {
		c.noteMovedOff(ctx, r, n, down) // it goes back when the path is healthy again
	}
	return n, err
}

// noAlternate says no path avoiding the given links has the bandwidth.
type noAlternate struct{ err error }

func (e *noAlternate) Error() string { return "no other path has the bandwidth: " + e.err.Error() }
func (e *noAlternate) Unwrap() error { return e.err }

// noDSCP says no DSCP value is free on the alternate path.
type noDSCP struct{ err error }

func (e *noDSCP) Error() string { return e.err.Error() }
func (e *noDSCP) Unwrap() error { return e.err }

// alternatePath finds r a path over its window that avoids the links in
// avoid, with the bandwidth, and the modification that moves it there (a
// new DSCP when the new path's nodes need one); the caller holds mu. It
// fails with *noAlternate when there is no such path, and with *noDSCP
// when no DSCP value is free on it.
func (c *Controller) alternatePath(r reserve.Reservation, avoid []string, now time.Time) (reserve.Modification, error) {
	if _, err := c.sched.Remove(r.ID); err != nil {
		return reserve.Modification{}, err
	}
	res, err := c.sched.FixedSlotAvoiding(reserve.Request{From: r.From, To: r.To, Bandwidth: r.Bandwidth, Start: r.Start, End: r.End}, avoid)
	if err := c.sched.Add(booking(r)); err != nil {
		return reserve.Modification{}, err
	}
	if err != nil {
		return reserve.Modification{}, &noAlternate{err}
	}
	path := toPathHops(res.Path)
	ch := reserve.Modification{Path: path, ManagedNodes: c.managedOn(r.From, r.To, path, now)}
	if !r.FlowSpec.IsZero() {
		moved := r
		moved.Path = path
		v, err := reserve.AllocateDSCP(c.pool, moved, c.overlapping(moved.Nodes(), r.Start, r.End))
		if err != nil {
			return reserve.Modification{}, &noDSCP{err}
		}
		if v != r.DSCP {
			ch.DSCP = v
		}
	}
	return ch, nil
}

// change applies one event the controller raises itself, stores it and
// publishes it; the caller holds mu. The timed events due first (a start
// or an end passed before the clock loop saw it) are applied before it,
// as the state machine requires; a reservation they end needs no event.
func (c *Controller) change(ctx context.Context, r reserve.Reservation, ev reserve.Event, now time.Time) (reserve.Reservation, error) {
	if cu, err := c.catchUp(ctx, r, now); err != nil {
		return r, err
	} else if cu.Version != r.Version {
		if !cu.State.Live() {
			return cu, nil
		}
		r = cu
	}
	n, tr, err := reserve.Next(r, ev, now)
	if err != nil || tr.IsZero() {
		return n, err
	}
	if err := c.record(ctx, r, n, store.AuditEntry{At: now, Who: ev.By, What: string(ev.Kind) + " " + r.ID, Detail: tr.Why}, tr); err != nil {
		return r, err
	}
	return n, nil
}
