package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// SessionToken mints a token for user that expires after ttl: what a
// one-time sign-in link (package api) exchanges its code for, so that the
// link gives a session that ends, never the admin's lasting token. why
// goes to the audit log.
func (c *Controller) SessionToken(ctx context.Context, user string, ttl time.Duration, why string) (string, store.Token, error) {
	if ttl <= 0 {
		return "", store.Token{}, errors.New("a session needs a lifetime above zero")
	}
	secret, h, err := store.NewToken()
	if err != nil {
		return "", store.Token{}, err
	}
	now := c.now()
	t := store.Token{ID: newID("t-"), User: user, Hash: h, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	err = c.commit(ctx, func(tx store.Store) error { return tx.CreateToken(ctx, t) },
		store.AuditEntry{At: now, Who: reserve.ActorController, What: "create token " + t.ID, Detail: fmt.Sprintf("for %s: %s", user, why)})
	if errors.Is(err, reserve.ErrNotFound) {
		return "", store.Token{}, notFound("user", user)
	}
	if err != nil {
		return "", store.Token{}, err
	}
	return secret, t, nil
}
