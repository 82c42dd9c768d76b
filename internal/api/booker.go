package api

import (
	"context"
	"fmt"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/booking"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
)

// LocalBooker is booking.Booker in process: the routes' own calls on the
// controller, as an actor, with no HTTP in between. The transfer service
// books through it as each job's owner.
type LocalBooker struct {
	C *controller.Controller
	A controller.Actor
}

var _ booking.Booker = LocalBooker{}

// BookerAs returns the in-process Booker acting as user name (its role
// and projects from the store), for the transfer service.
func BookerAs(c *controller.Controller) func(ctx context.Context, user string) (booking.Booker, error) {
	return func(ctx context.Context, user string) (booking.Booker, error) {
		u, err := c.Store().GetUser(ctx, user)
		if err != nil {
			return nil, fmt.Errorf("look up user %s: %w", user, err)
		}
		return LocalBooker{C: c, A: controller.Actor{Name: u.Name, Role: u.Role, Projects: u.Projects}}, nil
	}
}

func (b LocalBooker) Topology(context.Context) (apiv1.Topology, error) { return topologyOf(b.C) }

func (b LocalBooker) Find(ctx context.Context, req apiv1.FindRequest) (apiv1.Slot, error) {
	return findSlot(ctx, b.C, b.A, req)
}

func (b LocalBooker) Plan(ctx context.Context, req apiv1.PlanRequest) (apiv1.Plan, error) {
	return planJoint(ctx, b.C, b.A, req)
}

// CreateReservationRetrying creates the reservation: in process an
// answer cannot be lost, so there is nothing to resend.
func (b LocalBooker) CreateReservationRetrying(ctx context.Context, req apiv1.ReservationRequest, _ bool) (apiv1.ReservationResponse, error) {
	return createReservation(ctx, b.C, b.A, req)
}

func (b LocalBooker) CommitReservation(ctx context.Context, id string, req apiv1.ActionRequest) (reserve.Reservation, error) {
	return b.C.Commit(ctx, b.A, id, req.Version)
}

func (b LocalBooker) Reservation(ctx context.Context, id string) (reserve.Reservation, error) {
	return b.C.Get(ctx, b.A, id)
}

func (b LocalBooker) CancelReservation(ctx context.Context, id string, req apiv1.ActionRequest) (reserve.Reservation, error) {
	return b.C.Cancel(ctx, b.A, id, req.Version, req.Reason)
}

func (b LocalBooker) ModifyReservation(ctx context.Context, id string, req apiv1.ModifyRequest) (reserve.Reservation, error) {
	res, err := b.C.Modify(ctx, b.A, id, controller.ModifyInput{Version: req.Version, Start: req.Start, End: req.End,
		Bandwidth: req.Bandwidth, Path: req.Path, Reroute: req.Reroute, FlowSpec: req.FlowSpec})
	return res.Reservation, err
}

// Watch follows reservation id through the controller's event broker
// (what client.Watch does over the event stream): current is told the
// reservation as it is, event each event, until one says done.
func (b LocalBooker) Watch(ctx context.Context, what, id string, lost func(error),
	current func(reserve.Reservation) (bool, error), event func(apiv1.Event) (bool, error)) (bool, error) {
	ch, cancel, _ := b.C.Subscribe(b.A, id, 0)
	defer cancel()
	if id != "" {
		r, err := b.C.Get(ctx, b.A, id)
		if err != nil {
			return true, b.Explain(what, err)
		}
		if done, err := current(r); done {
			return true, err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case ev, ok := <-ch:
			if !ok {
				err := fmt.Errorf("the controller's event stream closed")
				if lost != nil {
					lost(err)
				}
				return false, b.Explain(what, err)
			}
			if done, err := event(apiv1.Event{Seq: ev.Seq, Kind: ev.Kind, Reservation: ev.Reservation, Exclusive: ev.Exclusive, Transition: ev.Transition}); done {
				return true, err
			}
		}
	}
}

// Explain words err as "<what>: <why>".
func (LocalBooker) Explain(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
