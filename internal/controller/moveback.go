package controller

// Back to the preferred path (issue 29): a reservation a dead link moved
// (moveOff) goes back to the path the controller prefers once that path
// is healthy again, if it has room for the reservation at its rate over
// its window; otherwise it stays where the fault put it and nothing
// fails. Why each one moved is kept in the store, so a restarted
// controller (or a standby taking over) still brings it back.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// settingMovedOff is the reservations a dead link moved off their path
// (a JSON object by reservation ID, of movedOff).
const settingMovedOff = "moved_off"

// movedOff is why a reservation is off its path: a dead link moved it.
type movedOff struct {
	// From is the path it was on before the first move; To is where the
	// last move put it (a reservation moved since by anyone else is left
	// where it is).
	From []reserve.PathHop `json:"from"`
	To   []reserve.PathHop `json:"to"`
	// Links are the links down it moved off.
	Links []string `json:"links"`
}

// loadMovedOff reads the stored moves; Open calls it.
func (c *Controller) loadMovedOff(ctx context.Context) error {
	s, err := c.st.GetSetting(ctx, settingMovedOff)
	if errors.Is(err, reserve.ErrNotFound) {
		return nil
	}
	if err == nil {
		err = json.Unmarshal([]byte(s), &c.movedOff)
	}
	if err != nil {
		return fmt.Errorf("load the reservations moved off a dead link: %w", err)
	}
	return nil
}

// saveMovedOff stores the moves; the caller holds mu. A failure is
// logged: the moves stay in memory, and the next change stores them
// again (a restart before then leaves those reservations where they are).
func (c *Controller) saveMovedOff(ctx context.Context) {
	b, err := json.Marshal(c.movedOff)
	if err == nil {
		err = c.st.Tx(ctx, func(tx store.Store) error { return tx.PutSetting(ctx, settingMovedOff, string(b)) })
	}
	if err != nil {
		c.log.Error("store the reservations moved off a dead link", "err", err)
	}
}

// noteMovedOff records that moveOff moved old to n's path around links;
// the caller holds mu.
func (c *Controller) noteMovedOff(ctx context.Context, old, n reserve.Reservation, links []string) {
	m, ok := c.movedOff[n.ID]
	if !ok || !slices.Equal(m.To, old.Path) {
		m = movedOff{From: slices.Clone(old.Path)}
	}
	m.To = slices.Clone(n.Path)
	for _, l := range links {
		if !slices.Contains(m.Links, l) {
			m.Links = append(m.Links, l)
		}
	}
	c.movedOff[n.ID] = m
	c.saveMovedOff(ctx)
}

// moveBack brings the reservations moved off a dead link back to the
// preferred path once the path they left has no link down: the path the
// schedule's preference picks for them now, among those with room at
// their rate over their window and no link down, when it ranks before
// the one they are on. One that has no such path stays (asked again at
// the next link up); one that ended, or was moved since by someone else,
// is forgotten. LinkUp calls it; the caller holds mu.
func (c *Controller) moveBack(ctx context.Context, now time.Time) {
	changed := false
	for _, id := range slices.Sorted(maps.Keys(c.movedOff)) {
		m := c.movedOff[id]
		r, live := c.live[id]
		if !live || !now.Before(r.End) || !slices.Equal(r.Path, m.To) {
			delete(c.movedOff, id)
			changed = true
			continue
		}
		if slices.ContainsFunc(m.From, func(h reserve.PathHop) bool { _, down := c.linkDown[h.Link]; return down }) {
			continue // the path it left is not back yet
		}
		ch, err := c.preferredPath(r, now)
		var noPath *noAlternate
		var noCode *noDSCP
		switch {
		case errors.As(err, &noPath), errors.As(err, &noCode):
			c.log.Info("a reservation moved off a dead link stays", "id", id, "why", err)
			continue
		case err != nil:
			c.log.Error("move back to the preferred path", "id", id, "err", err)
			continue
		}
		delete(c.movedOff, id)
		changed = true
		if ch.Path == nil {
			continue // where it is is the preferred path now
		}
		why := "moved back: link " + strings.Join(m.Links, ", ") + " up again"
		if _, err := c.change(ctx, r, reserve.Event{Kind: reserve.EventModify, By: reserve.ActorController, Why: why, Change: ch}, now); err != nil {
			c.log.Error("move back to the preferred path", "id", id, "err", err)
		}
	}
	if changed {
		c.saveMovedOff(ctx)
	}
}

// preferredPath returns the modification that moves r to the path the
// schedule prefers for it (no Path: it is on it already), the links down
// avoided; as alternatePath, it fails with *noAlternate when no path has
// the room and with *noDSCP when no DSCP value is free on it. The caller
// holds mu.
func (c *Controller) preferredPath(r reserve.Reservation, now time.Time) (reserve.Modification, error) {
	ch, err := c.alternatePath(r, c.downLinks(), now)
	if err != nil {
		return reserve.Modification{}, err
	}
	better, err := c.sched.Prefers(toHops(ch.Path), toHops(r.Path))
	if err != nil || !better {
		return reserve.Modification{}, err
	}
	return ch, nil
}
