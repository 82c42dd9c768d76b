package api

import (
	"context"
	"sync"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/booking"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/service"
)

// serviceActor is who the transfer service is when it acts as itself:
// following every reservation's events, releasing the reservations of a
// job whose owner is gone.
var serviceActor = controller.Actor{Name: "lightpath-service", Role: reserve.RoleAdmin}

// ServiceConfig is a transfer service's configuration on controller c in
// process: its store, clock, hold, policy and topology, its events, and
// its bookings through LocalBooker as each job's owner. The caller adds
// the service's own settings (Log, Tick, parts, the plan's priors).
func ServiceConfig(c *controller.Controller) service.Config {
	owner := BookerAs(c)
	return service.Config{
		Store:   c.Store(),
		Now:     c.Now,
		MaxHold: c.MaxHold(),
		Policy:  c.Policy,
		Topology: func() service.Network {
			// A nil *Topo in the interface would not be nil.
			if t := c.Topology(); t != nil {
				return t
			}
			return nil
		},
		Events: func(ctx context.Context) (<-chan apiv1.Event, func()) { return serviceEvents(ctx, c) },
		Booker: func(ctx context.Context, user string) (booking.Booker, error) {
			if user == "" {
				return LocalBooker{C: c, A: serviceActor}, nil
			}
			return owner(ctx, user)
		},
	}
}

// serviceEvents follows every reservation event as the service, in
// apiv1's form, until stop is called or ctx ends. The channel closes when
// the controller drops the subscription (the service fell behind) or
// closes, as the controller's own does.
func serviceEvents(ctx context.Context, c *controller.Controller) (<-chan apiv1.Event, func()) {
	in, cancel, _ := c.Subscribe(serviceActor, "", 0)
	out := make(chan apiv1.Event)
	done := make(chan struct{})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			close(done)
			cancel()
		})
	}
	go func() {
		defer close(out)
		for {
			var ev controller.Event
			var ok bool
			select {
			case ev, ok = <-in:
				if !ok {
					return
				}
			case <-done:
				return
			case <-ctx.Done():
				return
			}
			select {
			case out <- apiv1.Event{Seq: ev.Seq, Kind: ev.Kind, Reservation: ev.Reservation, Exclusive: ev.Exclusive, Transition: ev.Transition}:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, stop
}
