package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/lightpath/lightpath/internal/reserve"
)

// Rerouted is what RerouteAround did to one reservation: moved to Path,
// or left where it was, with why.
type Rerouted struct {
	ID     string
	Moved  bool
	Path   []reserve.PathHop
	Reason string
}

// RerouteAround moves every reservation in its window now whose path
// crosses one of links (in the direction from → to when from is given) to
// another admissible path avoiding those links, for the alerting rule
// named rule, which fired because of why. A reservation no other path can
// carry stays where it is: a rule's judgement is weaker than a dead link's,
// so nothing is degraded. Each move is one modification, stored, audited
// and published like any other, and the agents re-provision it.
func (c *Controller) RerouteAround(ctx context.Context, rule string, links []string, from, why string) ([]Rerouted, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return nil, ErrNoTopology
	}
	now := c.now()
	var out []Rerouted
	for _, r := range c.liveList() {
		if now.Before(r.Start) || !now.Before(r.End) || (r.State != reserve.StateActive && r.State != reserve.StateReserved) {
			continue
		}
		if !slices.ContainsFunc(r.Path, func(h reserve.PathHop) bool {
			return slices.Contains(links, h.Link) && (from == "" || h.From == from)
		}) {
			continue
		}
		ch, err := c.alternatePath(r, append(slices.Clone(links), c.downLinks()...), now)
		var noPath *noAlternate
		var noCode *noDSCP
		switch {
		case errors.As(err, &noPath), errors.As(err, &noCode):
			out = append(out, Rerouted{ID: r.ID, Reason: err.Error()})
			continue
		case err != nil:
			return out, err
		}
		n, err := c.change(ctx, r, reserve.Event{Kind: reserve.EventModify, By: reserve.ActorController,
			Why: fmt.Sprintf("rerouted by rule %s: %s", rule, why), Change: ch}, now)
		if err != nil {
			return out, fmt.Errorf("reroute %s: %w", r.ID, err)
		}
		out = append(out, Rerouted{ID: n.ID, Moved: true, Path: n.Path})
	}
	return out, nil
}

// ReservedNow returns, per link direction ("link from"), the bandwidth of
// the ACTIVE reservations crossing it now: what the dashboard shows as
// reserved beside what is used.
func (c *Controller) ReservedNow() map[[2]string]uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[[2]string]uint64{}
	for _, r := range c.live {
		if r.State != reserve.StateActive {
			continue
		}
		for _, h := range r.Path {
			out[[2]string{h.Link, h.From}] += r.Bandwidth
		}
	}
	return out
}
