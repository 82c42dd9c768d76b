package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/textsafe"
)

// Explain words a failed request as the "<what failed>: <why>" of one
// line: a capacity refusal with its alternatives after semicolons, a 401
// without a token with the way to give one. The *APIError stays under it
// for errors.As. c may be nil.
func (c *Client) Explain(what string, err error) error {
	var ae *APIError
	if !errors.As(err, &ae) {
		return fmt.Errorf("%s: %s", what, textsafe.OneLine(err.Error()))
	}
	msg := ae.Detail.Message
	if msg == "" {
		msg = ae.Error()
	}
	parts := []string{textsafe.OneLine(msg)}
	parts = append(parts, ae.Alternatives()...)
	if len(ae.Detail.Stranded) > 0 {
		parts = append(parts, "stranded: "+strings.Join(ae.Detail.Stranded, ", "))
	}
	if ae.Detail.Code == apiv1.CodeUnauthorized && c != nil && !c.HasToken() {
		parts = append(parts, "give yours with --controller-token-file F or LIGHTPATH_CONTROLLER_TOKEN")
	}
	return &explained{msg: what + ": " + strings.Join(parts, "; "), err: err}
}

// explained keeps the *APIError under the one-line message.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// CreateReservationRetrying sends a create, and sends it again when the
// answer was lost (the controller could not be reached or was shutting
// down, or every controller it was given was a standby): the request's
// idempotency key makes the second try return what the first booked, if
// it did. fromNow says the start was "now" when the
// caller began: a start that passed while the first try hung is then
// moved to the new now.
func (c *Client) CreateReservationRetrying(ctx context.Context, req apiv1.ReservationRequest, fromNow bool) (apiv1.ReservationResponse, error) {
	resp, err := c.CreateReservation(ctx, req)
	if err == nil || !retry.IsTransient(err) || ctx.Err() != nil {
		return resp, err
	}
	// Once; with several controllers, until a standby has had the time
	// to take over (15 s) and a little more.
	tries := 1
	if len(c.eps) > 1 {
		tries = 20
	}
	for range tries {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		resp, err = c.CreateReservation(ctx, req)
		if err == nil || !retry.IsTransient(err) {
			break
		}
	}
	// The controller answers a known key before it checks the start, so
	// this refusal proves nothing was booked: ask again from now.
	var ae *APIError
	if errors.As(err, &ae) && ae.Detail.Code == apiv1.CodeInvalid && ae.Detail.Field == "start" && fromNow && ctx.Err() == nil {
		if fresh := time.Now().UTC().Truncate(time.Second); req.End.IsZero() || req.End.After(fresh) {
			req.Start = fresh
			resp, err = c.CreateReservation(ctx, req)
		}
	}
	return resp, err
}

// Watch reads the event stream: every change of reservation id, or of
// every reservation and exclusive hold the caller may see when id is "".
// It hands current the reservation as it is, read after subscribing (so a
// change in between is an event, not missed) and again after a lost
// stream was resumed (in case the controller forgot what was missed), and
// event each event, until one of them says done: Watch then returns true
// and their error. It returns false and nil when ctx ends first, and false
// and the failure (worded by Explain as what) when the controller cannot
// be followed. A lost stream is resumed after the last event read; lost,
// when set, is told why first.
func (c *Client) Watch(ctx context.Context, what, id string, lost func(error),
	current func(reserve.Reservation) (bool, error), event func(apiv1.Event) (bool, error)) (bool, error) {
	done, err := c.FollowEvents(ctx, Follow{
		ID: id,
		Opened: func(bool) (bool, error) {
			if id == "" {
				return false, nil
			}
			r, err := c.Reservation(ctx, id)
			if err != nil {
				return true, c.Explain(what, err)
			}
			return current(r)
		},
		Event: event,
		Lost:  lost,
	})
	if !done && err != nil {
		return false, c.Explain(what, err)
	}
	return done, err
}
