package controller

import (
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
			if p.ev.Seq > after && s.wants(p.owner, p.id) {
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

func (s *subscriber) wants(owner, id string) bool {
	// Agents follow every reservation: any may cross their node.
	return (s.actor.sees(owner) || s.actor.Role == reserve.RoleAgent) && (s.id == "" || s.id == id)
}

func (b *broker) publish(ev Event, owner, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	ev.Seq = b.seq
	if len(b.recent) == replayLen {
		copy(b.recent, b.recent[1:])
		b.recent = b.recent[:replayLen-1]
	}
	b.recent = append(b.recent, published{ev: ev, owner: owner, id: id})
	for s := range b.subs {
		if !s.wants(owner, id) {
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

func (c *Controller) publishReservation(r reserve.Reservation, t reserve.Transition) {
	c.events.publish(Event{Kind: "reservation", Reservation: &r, Transition: &t}, r.Owner, r.ID)
}

func (c *Controller) publishExclusive(x reserve.Exclusive) {
	c.events.publish(Event{Kind: "exclusive", Exclusive: &x}, x.Owner, x.ID)
}
