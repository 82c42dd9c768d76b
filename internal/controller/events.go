package controller

import (
	"slices"
	"sync"

	"github.com/lightpath/lightpath/internal/reserve"
)

// Event is one change published to subscribers: the reservation or the
// exclusive hold after the change, and the transition that made it.
type Event struct {
	Seq         uint64
	Kind        string // "reservation" or "exclusive"
	Reservation *reserve.Reservation
	Exclusive   *reserve.Exclusive
	Transition  *reserve.Transition
}

// subBuffer is how many events a subscriber may fall behind before it is
// dropped: a stuck client must not hold up the controller, and a dropped
// one sees its stream end and reconnects.
const subBuffer = 256

type subscriber struct {
	actor Actor
	id    string
	ch    chan Event
}

// replayLen is how many recent events the broker keeps for clients that
// reconnect with the last event they saw (SSE's Last-Event-ID).
const replayLen = 4096

type published struct {
	ev        Event
	owner, id string
	// nodes are the nodes the change touches: a reservation's before and
	// after it (one moved off a node concerns that node's agent, which must
	// remove it), a hold's.
	nodes []string
}

type broker struct {
	mu     sync.Mutex
	seq    uint64
	subs   map[*subscriber]struct{}
	recent []published // the last replayLen events, oldest first
	closed bool
}

func newBroker() *broker { return &broker{subs: map[*subscriber]struct{}{}} }

// Subscribe returns a channel of the events a may see (about reservation
// id only, when id is not empty), and a function that ends the
// subscription. With after > 0 it first replays the kept events after
// that sequence number, and reports whether some it should have replayed
// are no longer kept, or after is past any it gave (another controller's,
// before a takeover). The channel is closed when the subscriber falls too
// far behind or the controller closes.
func (c *Controller) Subscribe(a Actor, id string, after uint64) (<-chan Event, func(), bool) {
	b := c.events
	s := &subscriber{actor: a, id: id, ch: make(chan Event, subBuffer+replayLen)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(s.ch)
		return s.ch, func() {}, false
	}
	missed := false
	if after > 0 {
		if len(b.recent) > 0 && b.recent[0].ev.Seq > after+1 {
			missed = true
		}
		if after > b.seq {
			// An id this broker never gave: another controller's (this
			// one took over from it) or one from before a restart. What
			// came after it is unknown.
			missed = true
		}
		for _, p := range b.recent {
			if p.ev.Seq > after && s.wants(p) {
				s.ch <- p.ev
			}
		}
	}
	b.subs[s] = struct{}{}
	return s.ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[s]; ok {
			delete(b.subs, s)
			close(s.ch)
		}
	}, missed
}

// wants reports whether the subscriber gets p: a user what it may see; an
// agent bound to a node only what touches its node, so a change elsewhere
// does not wake it (each event it gets costs a heartbeat and a read of its
// kernel). An agent bound to no node may act for none, but its stream is
// what it always was: every change.
func (s *subscriber) wants(p published) bool {
	if s.id != "" && s.id != p.id {
		return false
	}
	switch {
	case s.actor.Sees(p.owner):
		return true
	case s.actor.Role != reserve.RoleAgent:
		return false
	case s.actor.Node == "":
		return true
	}
	return slices.Contains(p.nodes, s.actor.Node)
}

func (b *broker) publish(ev Event, owner, id string, nodes []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	ev.Seq = b.seq
	if len(b.recent) == replayLen {
		copy(b.recent, b.recent[1:])
		b.recent = b.recent[:replayLen-1]
	}
	p := published{ev: ev, owner: owner, id: id, nodes: nodes}
	b.recent = append(b.recent, p)
	for s := range b.subs {
		if !s.wants(p) {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			delete(b.subs, s)
			close(s.ch)
		}
	}
}

func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		delete(b.subs, s)
		close(s.ch)
	}
}

// publishReservation publishes r's transition t; old is r before the
// change (the zero reservation for a create), whose nodes it touches too.
func (c *Controller) publishReservation(old, r reserve.Reservation, t reserve.Transition) {
	nodes := r.Nodes()
	if old.ID != "" {
		nodes = append(nodes, old.Nodes()...)
		slices.Sort(nodes)
		nodes = slices.Compact(nodes)
	}
	c.events.publish(Event{Kind: "reservation", Reservation: &r, Transition: &t}, r.Owner, r.ID, nodes)
}

func (c *Controller) publishExclusive(x reserve.Exclusive) {
	c.events.publish(Event{Kind: "exclusive", Exclusive: &x}, x.Owner, x.ID, x.Nodes)
}
