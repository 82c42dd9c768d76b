package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// StrandError is a topology reload refused because live reservations or
// holds would lose what they use: Stranded names each and why.
type StrandError struct {
	Stranded []string
}

func (e *StrandError) Error() string {
	n := len(e.Stranded)
	show := e.Stranded[:min(n, 5)]
	msg := fmt.Sprintf("the new topology would strand %d live reservations or holds: %s", n, strings.Join(show, "; "))
	if n > 5 {
		msg += fmt.Sprintf("; and %d more", n-5)
	}
	return msg + " (cancel or move them first)"
}

// Unwrap makes a StrandError match reserve.ErrConflict.
func (e *StrandError) Unwrap() error { return reserve.ErrConflict }

// ReloadTopology replaces the topology (admins only) unless a live
// reservation would lose a node or link of its path or the bandwidth it
// holds (every live booking is re-admitted on the new graph), or a hold
// would lose a node. Then nothing changes and the error lists them all.
func (c *Controller) ReloadTopology(ctx context.Context, a Actor, t *Topo) ([]string, error) {
	if a.Role != reserve.RoleAdmin {
		return nil, forbidden("only an admin may change the topology")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reload(ctx, a, t)
}

// reload is ReloadTopology with mu held.
func (c *Controller) reload(ctx context.Context, a Actor, t *Topo) ([]string, error) {
	sched, stranded := c.admitAll(t)
	if len(stranded) > 0 {
		return stranded, &StrandError{Stranded: stranded}
	}
	now := c.now()
	if err := c.commit(ctx, func(tx store.Store) error {
		if t.YAML == "" {
			return nil // a generated graph (NewTopo): nothing to keep
		}
		if err := tx.PutSetting(ctx, settingTopology, t.YAML); err != nil {
			return err
		}
		return tx.PutSetting(ctx, settingTopologyName, t.Name)
	}, store.AuditEntry{At: now, Who: a.Name, What: "load topology " + t.Name,
		Detail: fmt.Sprintf("%d nodes, %d links", len(t.Graph.Nodes()), len(t.Graph.Links()))}); err != nil {
		return nil, fmt.Errorf("store topology: %w", err)
	}
	c.topo, c.sched = t, sched
	c.log.Info("topology loaded", "name", t.Name, "nodes", len(t.Graph.Nodes()), "links", len(t.Graph.Links()), "path_preference", c.pref)
	return nil, nil
}

// admitAll books every live reservation on a new schedule of t's graph,
// in order of start, and lists those that do not fit (a node or link gone,
// or not enough capacity) and the holds that lose a node.
func (c *Controller) admitAll(t *Topo) (*reserve.Schedule, []string) {
	sched := reserve.NewSchedule(t.Graph)
	if err := sched.SetPathPreference(c.pref); err != nil { // cannot happen: open checked it
		panic(err)
	}
	var stranded []string
	rs := c.liveList()
	sort.Slice(rs, func(i, j int) bool {
		if !rs[i].Start.Equal(rs[j].Start) {
			return rs[i].Start.Before(rs[j].Start)
		}
		return rs[i].ID < rs[j].ID
	})
	for _, r := range rs {
		b := booking(r)
		if err := t.Graph.ValidatePath(r.From, r.To, b.Path); err != nil {
			stranded = append(stranded, fmt.Sprintf("%s: %v", r.ID, err))
			continue
		}
		if err := sched.Add(b); err != nil {
			stranded = append(stranded, fmt.Sprintf("%s: %v", r.ID, err))
		}
	}
	for _, x := range c.exclusives() {
		for _, n := range x.Nodes {
			if _, ok := t.Graph.Role(n); !ok {
				stranded = append(stranded, fmt.Sprintf("%s: node %s is gone", x.ID, n))
				break
			}
		}
	}
	return sched, stranded
}

// DirectionTimeline is one direction of a link over a window.
type DirectionTimeline struct {
	Hop        reserve.Hop
	Reservable uint64
	Steps      []reserve.Step
	Bookings   []reserve.Reservation
}

// Timeline returns, for each direction of each link (or of one), what is
// booked over [from, to) and by which live reservations.
func (c *Controller) Timeline(from, to time.Time, link string) ([]DirectionTimeline, error) {
	if !to.After(from) {
		return nil, &reserve.RequestError{Field: "to", Message: "the timeline's end must be after its start"}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.topo == nil {
		return nil, ErrNoTopology
	}
	links := c.topo.Graph.Links()
	if link != "" {
		l, ok := c.topo.Graph.Link(link)
		if !ok {
			return nil, notFound("link", link)
		}
		links = []reserve.Link{l}
	}
	byHop := map[reserve.Hop][]reserve.Reservation{}
	for _, r := range c.live {
		if !r.Start.Before(to) || !from.Before(r.End) {
			continue
		}
		for _, h := range r.Path {
			hop := reserve.Hop(h)
			byHop[hop] = append(byHop[hop], r)
		}
	}
	var out []DirectionTimeline
	for _, l := range links {
		for _, h := range []reserve.Hop{{Link: l.Name, From: l.A, To: l.B}, {Link: l.Name, From: l.B, To: l.A}} {
			capacity, err := c.topo.Graph.ReservableCapacity(h)
			if err != nil {
				return nil, err
			}
			steps, err := c.sched.Steps(h, from, to)
			if err != nil {
				return nil, err
			}
			bs := byHop[h]
			sort.Slice(bs, func(i, j int) bool {
				if !bs[i].Start.Equal(bs[j].Start) {
					return bs[i].Start.Before(bs[j].Start)
				}
				return bs[i].ID < bs[j].ID
			})
			out = append(out, DirectionTimeline{Hop: h, Reservable: capacity, Steps: steps, Bookings: bs})
		}
	}
	return out, nil
}
