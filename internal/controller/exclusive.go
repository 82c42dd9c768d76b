package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// ExclusiveInput holds a node or a site.
type ExclusiveInput struct {
	Node, Site string
	Start, End time.Time
	Duration   time.Duration
	Project    string
}

// CreateExclusive holds a node, or every node of a site, for the actor
// over a window: refused while someone else's live reservation or hold
// touches one of those nodes in that window, and from then on no one
// else's reservation may.
func (c *Controller) CreateExclusive(ctx context.Context, a Actor, in ExclusiveInput) (reserve.Exclusive, error) {
	if a.Role == reserve.RoleAgent {
		return reserve.Exclusive{}, forbidden("agents do not hold nodes")
	}
	if in.Project != "" && !a.SeesAll() && !slices.Contains(a.Projects, in.Project) {
		return reserve.Exclusive{}, forbidden(fmt.Sprintf("you are not a member of project %q", in.Project))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return reserve.Exclusive{}, ErrNoTopology
	}
	nodes, err := c.topo.nodeSet(in.Node, in.Site)
	if err != nil {
		return reserve.Exclusive{}, err
	}
	now := c.now()
	x := reserve.Exclusive{ID: newID("x-"), Owner: a.Name, Project: in.Project, Node: in.Node, Site: in.Site,
		Nodes: nodes, Start: in.Start, End: in.End, State: reserve.StateReserved, Version: 1, CreatedAt: now}
	if x.Start.IsZero() {
		x.Start = now
	}
	if x.End.IsZero() && in.Duration > 0 {
		x.End = x.Start.Add(in.Duration)
	}
	if err := reserve.CheckExclusivePolicy(c.policy, a.Role, x, now); err != nil {
		return reserve.Exclusive{}, err
	}
	if err := c.checkExclusiveChain(ctx, a, x, now); err != nil {
		return reserve.Exclusive{}, err
	}
	if xs := reserve.ExclusiveConflicts(a.Name, nodes, x.Start, x.End, c.exclusives(), now); len(xs) > 0 {
		return reserve.Exclusive{}, &reserve.ExclusiveConflictError{Holds: xs, Message: "others hold some of these nodes exclusively then"}
	}
	if rs := reserve.ReservationsBlocking(a.Name, nodes, x.Start, x.End, c.touchingAny(nodes...)); len(rs) > 0 {
		sort.Slice(rs, func(i, j int) bool { return rs[i].ID < rs[j].ID })
		return reserve.Exclusive{}, &reserve.ExclusiveConflictError{Reservations: rs, Message: "other users' reservations use these nodes then"}
	}
	where := "node " + x.Node
	if x.Site != "" {
		where = "site " + x.Site
	}
	if err := c.commit(ctx, func(tx store.Store) error { return tx.CreateExclusive(ctx, x) },
		store.AuditEntry{At: now, Who: a.Name, What: "hold " + x.ID, Detail: fmt.Sprintf("%s %s..%s", where, x.Start.Format(time.RFC3339), x.End.Format(time.RFC3339))}); err != nil {
		return reserve.Exclusive{}, fmt.Errorf("store exclusive hold: %w", err)
	}
	c.excl[x.ID] = x
	c.publishExclusive(x)
	return x, nil
}

// CancelExclusive releases a hold (its owner, an operator or an admin).
func (c *Controller) CancelExclusive(ctx context.Context, a Actor, id, why string) (reserve.Exclusive, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	x, err := c.st.GetExclusive(ctx, id)
	if err != nil {
		return x, err
	}
	if !a.Sees(x.Owner) {
		return reserve.Exclusive{}, notFound("exclusive hold", id)
	}
	now := c.now()
	n, err := reserve.CancelExclusive(x, a.Name, why, now)
	if err != nil || n.Version == x.Version {
		return n, err
	}
	if err := c.commit(ctx, func(tx store.Store) error { return tx.UpdateExclusive(ctx, n, x.Version) },
		store.AuditEntry{At: now, Who: a.Name, What: "release " + id, Detail: why}); err != nil {
		return x, fmt.Errorf("store exclusive hold: %w", err)
	}
	delete(c.excl, id)
	c.publishExclusive(n)
	return n, nil
}

// ListExclusives lists holds (everyone may see who holds what).
func (c *Controller) ListExclusives(ctx context.Context, f store.Filter) ([]reserve.Exclusive, error) {
	return c.st.ListExclusives(ctx, f)
}
