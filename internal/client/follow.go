package client

import (
	"context"
	"errors"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/retry"
)

// Follow says how FollowEvents follows the event stream.
type Follow struct {
	// ID limits the stream to one reservation (events about others are
	// dropped); "" follows every reservation and exclusive hold the
	// caller may see.
	ID string
	// Opened, when set, is called each time the stream is open, before
	// any of its events: first with resumed false, then after each resume.
	// The caller reads the state it follows there, so a change in between
	// is an event, not missed, and one the controller forgot while the
	// stream was lost is caught. stop ends the following.
	Opened func(resumed bool) (stop bool, err error)
	// Event is called for each event; stop ends the following.
	Event func(apiv1.Event) (stop bool, err error)
	// Lost, when set, is told why the stream was lost, before it is
	// resumed.
	Lost func(error)
	// Persist keeps trying whatever fails, as a daemon does: opening the
	// stream the first time, reopening it with an error that is not
	// transient, a stream the controller ended. Without it those end the
	// following with the error.
	Persist bool
	// Wait is the pause before each reopening (default one second).
	Wait time.Duration
}

// FollowEvents follows the event stream, resuming a lost stream after the
// last event read (Last-Event-ID), so nothing the controller still
// remembers is missed. It returns false and nil when ctx ends, true and
// the callback's error when Opened or Event says stop, and, without
// Persist, false and why the stream could not be followed: the first
// opening failed (an *APIError, an *UnreachableError), a reopening failed
// with an error that is not transient (retry.IsTransient), or the
// controller ended the stream (a *StreamEndedError).
func (c *Client) FollowEvents(ctx context.Context, f Follow) (bool, error) {
	wait := f.Wait
	if wait <= 0 {
		wait = time.Second
	}
	pause := func() bool {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	last, resumed := "", false
	for {
		s, err := c.EventsAfter(ctx, f.ID, last)
		if err != nil {
			if resumed && ctx.Err() != nil {
				return false, nil
			}
			if !f.Persist && (!resumed || !retry.IsTransient(err)) {
				return false, err
			}
			if !pause() {
				return false, nil
			}
			continue
		}
		if stop, err := c.followOne(s, f, resumed); stop {
			return true, err
		}
		last = s.LastEventID()
		if ctx.Err() != nil {
			return false, nil
		}
		var se *StreamEndedError
		if errors.As(s.Err(), &se) && !f.Persist {
			return false, se
		}
		if f.Lost != nil {
			f.Lost(s.Err())
		}
		resumed = true
		if !pause() {
			return false, nil
		}
	}
}

// followOne hands one open stream's events to f until it ends or f says
// stop, and closes it.
func (c *Client) followOne(s *EventStream, f Follow, resumed bool) (bool, error) {
	defer s.Close()
	if f.Opened != nil {
		if stop, err := f.Opened(resumed); stop {
			return true, err
		}
	}
	for ev := range s.C {
		if f.ID != "" && (ev.Reservation == nil || ev.Reservation.ID != f.ID) {
			continue
		}
		if f.Event == nil {
			continue
		}
		if stop, err := f.Event(ev); stop {
			return true, err
		}
	}
	return false, nil
}
