package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// Limits bound what one user may keep at the controller, so that an
// ordinary account cannot grow it without end. Zero means no limit (the
// controller command sets the defaults below). Admins are not limited:
// they can lift any limit anyway.
type Limits struct {
	// MaxTokensPerUser bounds a user's usable tokens (neither revoked
	// nor expired).
	MaxTokensPerUser int
	// MaxReservationsPerUser bounds a user's live reservations (HELD,
	// RESERVED or ACTIVE).
	MaxReservationsPerUser int
}

// The defaults of the controller command's flags.
const (
	DefaultMaxTokensPerUser       = 100
	DefaultMaxReservationsPerUser = 500
)

// ErrLimit is a request refused because a per-user limit is reached
// (429): it may succeed once the user has less.
var ErrLimit = reserve.ErrLimit

// LimitError says which limit a request would pass, its value and the
// controller flag that sets it (package reserve's, which the transfer
// service's job limits refuse with too).
type LimitError = reserve.LimitError

// checkTokenLimit refuses a new token for user when it already has the
// most usable tokens allowed; it runs in the transaction that creates it.
func (c *Controller) checkTokenLimit(ctx context.Context, tx store.Store, user string, now time.Time) error {
	max := c.limits.MaxTokensPerUser
	if max <= 0 {
		return nil
	}
	if u, err := tx.GetUser(ctx, user); err != nil || u.Role == reserve.RoleAdmin {
		return nil // the insert reports a missing user
	}
	ts, err := tx.ListTokens(ctx, user)
	if err != nil {
		return err
	}
	n := 0
	for _, t := range ts {
		if t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt)) {
			n++
		}
	}
	if n >= max {
		return &LimitError{Limit: "max-tokens-per-user", Max: max, Message: fmt.Sprintf(
			"user %s has %d usable tokens, the most allowed (the controller's --max-tokens-per-user %d): revoke one first (lightpath user token revoke ID)", user, n, max)}
	}
	return nil
}

// checkReservationLimit refuses a new reservation of owner when it already
// has the most live reservations allowed; the caller holds mu.
func (c *Controller) checkReservationLimit(a Actor, owner string) error {
	max := c.limits.MaxReservationsPerUser
	if max <= 0 || a.Role == reserve.RoleAdmin {
		return nil
	}
	n := c.ownerLive(owner)
	if n >= max {
		return &LimitError{Limit: "max-reservations-per-user", Max: max, Message: fmt.Sprintf(
			"%s has %d live reservations, the most allowed (the controller's --max-reservations-per-user %d): cancel one or wait for one to end", owner, n, max)}
	}
	return nil
}

// checkExclusiveChain applies the maximum duration to the run of holds x
// would join: the owner's holds of any of x's nodes that overlap it or
// touch it end to start, and so on from those, count as one hold for the
// rule, so twenty-one 8-hour holds back to back are 168 hours in a row,
// not twenty-one holds within the limit. The caller holds mu.
func (c *Controller) checkExclusiveChain(ctx context.Context, a Actor, x reserve.Exclusive, now time.Time) error {
	lim, src := c.policy.Resolve(a.Role, x.Project)
	if lim.MaxDuration <= 0 || lim.MaxDuration == reserve.UnlimitedDuration {
		return nil
	}
	// A hold further than the maximum from x cannot be in a chain within
	// the limit, and one that reaches x's window from there is returned.
	from, to := x.Start.Add(-lim.MaxDuration), x.End.Add(lim.MaxDuration)
	mine, err := c.st.ListExclusives(ctx, store.Filter{Owner: x.Owner, From: from, To: to})
	if err != nil {
		return fmt.Errorf("read the owner's holds: %w", err)
	}
	return reserve.CheckExclusiveChain(x, mine, lim.MaxDuration, src.MaxDuration)
}
