package controller

import (
	"slices"
	"sort"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
)

// The live set and its indexes. c.live holds every live reservation by ID;
// beside it, the indexes answer the questions asked on every heartbeat and
// create by looking only at what they return, not at everything live:
//
//   - byNode: the reservations whose ends or path include a node (touching:
//     an agent's heartbeat);
//   - byProject and byOwner: a project's reservations (projectLive: the
//     policy's project limit) and a user's (the per-user limit);
//   - dscpByNode: by node again, only the reservations holding a DSCP value
//     (overlapping: the only ones the DSCP pool is about), filtered by
//     window when asked.
//
// setLive and dropLive are the only writers of c.live, and keep the indexes
// with it; the caller holds mu exclusively.

type idSet map[string]struct{}

type liveIndex struct {
	byNode     map[string]idSet
	byProject  map[string]idSet
	byOwner    map[string]idSet
	dscpByNode map[string]idSet
}

func newLiveIndex() liveIndex {
	return liveIndex{byNode: map[string]idSet{}, byProject: map[string]idSet{}, byOwner: map[string]idSet{}, dscpByNode: map[string]idSet{}}
}

func addID(m map[string]idSet, key, id string) {
	s, ok := m[key]
	if !ok {
		s = idSet{}
		m[key] = s
	}
	s[id] = struct{}{}
}

func delID(m map[string]idSet, key, id string) {
	if s, ok := m[key]; ok {
		delete(s, id)
		if len(s) == 0 {
			delete(m, key)
		}
	}
}

// keys are what r is indexed under.
type indexKeys struct {
	nodes          []string
	project, owner string
	dscp           bool
}

func keysOf(r reserve.Reservation) indexKeys {
	return indexKeys{nodes: r.Nodes(), project: r.Project, owner: r.Owner, dscp: r.DSCP != 0}
}

func (k indexKeys) equal(o indexKeys) bool {
	return k.project == o.project && k.owner == o.owner && k.dscp == o.dscp && slices.Equal(k.nodes, o.nodes)
}

func (x liveIndex) add(id string, k indexKeys) {
	for _, n := range k.nodes {
		addID(x.byNode, n, id)
		if k.dscp {
			addID(x.dscpByNode, n, id)
		}
	}
	if k.project != "" {
		addID(x.byProject, k.project, id)
	}
	addID(x.byOwner, k.owner, id)
}

func (x liveIndex) remove(id string, k indexKeys) {
	for _, n := range k.nodes {
		delID(x.byNode, n, id)
		delID(x.dscpByNode, n, id)
	}
	if k.project != "" {
		delID(x.byProject, k.project, id)
	}
	delID(x.byOwner, k.owner, id)
}

// setLive puts r, live, into the live set (new, or a new version of one
// there) and its indexes.
func (c *Controller) setLive(r reserve.Reservation) {
	k := keysOf(r)
	if old, ok := c.live[r.ID]; ok {
		if prev := keysOf(old); !prev.equal(k) {
			c.idx.remove(r.ID, prev)
			c.idx.add(r.ID, k)
		}
	} else {
		c.idx.add(r.ID, k)
	}
	c.live[r.ID] = r
}

// dropLive takes reservation id out of the live set and its indexes.
func (c *Controller) dropLive(id string) {
	if old, ok := c.live[id]; ok {
		c.idx.remove(id, keysOf(old))
		delete(c.live, id)
	}
}

// pick returns the live reservations of ids that keep says to, sorted by
// start then ID.
func (c *Controller) pick(ids idSet, keep func(reserve.Reservation) bool) []reserve.Reservation {
	var out []reserve.Reservation
	for id := range ids {
		if r := c.live[id]; keep == nil || keep(r) {
			out = append(out, r)
		}
	}
	sortByStart(out)
	return out
}

func sortByStart(rs []reserve.Reservation) {
	sort.Slice(rs, func(i, j int) bool {
		if !rs[i].Start.Equal(rs[j].Start) {
			return rs[i].Start.Before(rs[j].Start)
		}
		return rs[i].ID < rs[j].ID
	})
}

// touching returns the live reservations whose path or ends include node,
// by start.
func (c *Controller) touching(node string) []reserve.Reservation {
	return c.pick(c.idx.byNode[node], nil)
}

// touchingAny returns the live reservations that include any of nodes, by
// start.
func (c *Controller) touchingAny(nodes ...string) []reserve.Reservation {
	seen := idSet{}
	for _, n := range nodes {
		for id := range c.idx.byNode[n] {
			seen[id] = struct{}{}
		}
	}
	return c.pick(seen, nil)
}

// projectLive returns the live reservations of one project, which is all
// the policy's project limit needs.
func (c *Controller) projectLive(project string) []reserve.Reservation {
	if project == "" {
		return nil
	}
	return c.pick(c.idx.byProject[project], nil)
}

// ownerLive counts the live reservations of owner.
func (c *Controller) ownerLive(owner string) int { return len(c.idx.byOwner[owner]) }

// overlapping returns the live reservations holding a DSCP value that
// overlap [start, end) and share a node with nodes: the only ones the DSCP
// pool is about (reserve.AllocateDSCP skips the others).
func (c *Controller) overlapping(nodes []string, start, end time.Time) []reserve.Reservation {
	seen := idSet{}
	for _, n := range nodes {
		for id := range c.idx.dscpByNode[n] {
			seen[id] = struct{}{}
		}
	}
	return c.pick(seen, func(r reserve.Reservation) bool { return r.Start.Before(end) && start.Before(r.End) })
}
