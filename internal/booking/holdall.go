package booking

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
)

// HoldAll books several reservations all or nothing: each is created
// HELD for hold (so none is RESERVED before every one has found room),
// then all are committed; when any create or commit fails, every one made
// is cancelled with why and the first failure is returned, wrapped with
// the request it came from. The requests' idempotency keys make a retried
// HoldAll find what an earlier one made.
func HoldAll(ctx context.Context, b Booker, reqs []apiv1.ReservationRequest, hold time.Duration, why string) ([]reserve.Reservation, error) {
	made := make([]reserve.Reservation, 0, len(reqs))
	undo := func(err error) ([]reserve.Reservation, error) {
		var errs []error
		for _, r := range made {
			if _, cerr := b.CancelReservation(context.WithoutCancel(ctx), r.ID, apiv1.ActionRequest{Reason: why}); cerr != nil {
				errs = append(errs, fmt.Errorf("release %s: %w", r.ID, cerr))
			}
		}
		return nil, errors.Join(append([]error{err}, errs...)...)
	}
	for _, req := range reqs {
		req.Hold = hold.String()
		cr, err := b.CreateReservationRetrying(ctx, req, false)
		if err != nil {
			return undo(fmt.Errorf("book %s → %s at %d bit/s: %w", req.From, req.To, req.Bandwidth, err))
		}
		made = append(made, cr.Reservation)
	}
	for i, r := range made {
		if r.State != reserve.StateHeld {
			continue
		}
		// No version: the holds are this call's own, and the clock or an
		// agent's report may have bumped one meanwhile (a short hold's
		// version changing under its commit refused tiny jobs).
		c, err := b.CommitReservation(ctx, r.ID, apiv1.ActionRequest{})
		if err != nil {
			return undo(fmt.Errorf("commit %s: %w", r.ID, err))
		}
		made[i] = c
	}
	return made, nil
}

// PushFlow is the flow of a push from address src to a mover server at
// dst: every connection of the session goes to the server's one port
// (its data over UDP too when udp). cp --reserve, run and the transfer
// service all write their flows with it (CopyFlow, WithUDP).
func PushFlow(src netip.Addr, dst netip.AddrPort, udp bool) reserve.FlowSpec {
	f := CopyFlow(true, src, dst)
	if udp {
		f = WithUDP(f)
	}
	return f
}
