package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/retry"
)

// Enrol returns a client (for a node agent or a data node) whose token acts for node alone, and the secret
// of the token it created for that, if it did (for the caller to keep).
// The controller takes an agent's reports only for the node its identity
// is bound to; an agent token bound to no node (one token handed to every
// agent, as testbed up --agents does, or one made before node bindings)
// may only create tokens bound to a node for itself, and only for a node
// that holds no live token of its user: enrolling a node again (its kept
// token lost) needs an admin, so a copy of the shared token elsewhere
// cannot take a node over. Enrol does that, unless kept, a token it
// created before, still acts for node. A token already bound to node, or
// an admin's, is used as it is; one bound to another node is an error.
// While the controller cannot be reached, Enrol waits for it.
func Enrol(ctx context.Context, c *Client, node, kept string, log *slog.Logger) (*Client, string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if kept != "" {
		kc := c.WithToken(kept)
		who, err := whoami(ctx, kc, log)
		switch {
		case err == nil && who.Node == node:
			return kc, "", nil
		case err != nil && !isStatus(err, http.StatusUnauthorized):
			return nil, "", err
		}
		log.Info("the kept token no longer acts for this node: enrolling again")
	}
	who, err := whoami(ctx, c, log)
	if err != nil {
		return nil, "", err
	}
	switch {
	case who.Node == node || who.Role == "admin":
		return c, "", nil
	case who.Node != "":
		return nil, "", fmt.Errorf("the token is %s's, bound to node %s, not %s", who.User, who.Node, node)
	case who.Role != "agent":
		return nil, "", fmt.Errorf("the token is %s's, of role %s: an agent needs a token of role agent (lightpath user add NAME --role agent --node %s)", who.User, who.Role, node)
	}
	tok, err := c.CreateToken(ctx, who.User, apiv1.TokenRequest{Node: node})
	if err != nil {
		return nil, "", fmt.Errorf("enrol as node %s: %w", node, err)
	}
	log.Info("enrolled: a token of its own for this node", "user", who.User, "token", tok.ID)
	return c.WithToken(tok.Secret), tok.Secret, nil
}

// whoami asks the controller whose token c sends, waiting while the
// controller cannot be reached.
func whoami(ctx context.Context, c *Client, log *slog.Logger) (apiv1.Whoami, error) {
	said := false
	for {
		who, err := c.Whoami(ctx)
		if err == nil || !retry.IsTransient(err) {
			return who, err
		}
		if !said {
			log.Warn("waiting for the controller", "err", err)
			said = true
		}
		select {
		case <-ctx.Done():
			return who, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func isStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}
