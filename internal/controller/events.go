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

type broker struct {
	mu     sync.Mutex
	seq    uint64
	subs   map[*subscriber]struct{}
	closed bool
}

func newBroker() *broker { return &broker{subs: map[*subscriber]struct{}{}} }

// Subscribe returns a channel of the events a may see (about reservation
// id only, when id is not empty), and a function that ends the
// subscription. The channel is closed when the subscriber falls too far
// behind or the controller closes.
func (c *Controller) Subscribe(a Actor, id string) (<-chan Event, func()) {
	b := c.events
	s := &subscriber{actor: a, id: id, ch: make(chan Event, subBuffer)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	b.subs[s] = struct{}{}
	return s.ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[s]; ok {
			delete(b.subs, s)
			close(s.ch)
		}
	}
}

func (b *broker) publish(ev Event, owner, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	ev.Seq = b.seq
	for s := range b.subs {
		if !s.actor.sees(owner) || (s.id != "" && s.id != id) {
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
