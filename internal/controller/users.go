package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// ErrUnauthorized is a request without a usable token (401).
var ErrUnauthorized = errors.New("unauthorized")

// authError says why a token is not usable; it matches ErrUnauthorized.
type authError struct{ msg string }

func (e *authError) Error() string        { return e.msg }
func (e *authError) Is(target error) bool { return target == ErrUnauthorized }

func unauthorized(format string, args ...any) error {
	return &authError{msg: fmt.Sprintf(format, args...)}
}

// AdminUser is the user a fresh controller creates for its admin token.
const AdminUser = "admin"

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// authCache keeps recently used tokens' users so that a request costs no
// database round trip; a revocation in this controller drops the entry at
// once, and an entry is re-read after authTTL so a change made by another
// process is seen soon.
type authCache struct {
	mu sync.Mutex
	m  map[store.TokenHash]authEntry
	// changed is closed (and replaced) when a token is revoked, so that
	// open streams check their token again at once.
	changed chan struct{}
}

type authEntry struct {
	tok     store.Token
	actor   Actor
	fetched time.Time
}

const authTTL = 5 * time.Second

func (a *authCache) init() {
	a.m = map[store.TokenHash]authEntry{}
	a.changed = make(chan struct{})
}

// TokensChanged returns a channel that is closed when a token is next
// revoked: whoever holds a connection open on a token (the event and live
// streams) checks it again then, so a revocation ends them at once.
func (c *Controller) TokensChanged() <-chan struct{} {
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	return c.auth.changed
}

// forgetTokens drops the cached tokens and wakes whoever waits on
// TokensChanged.
func (c *Controller) forgetTokens() {
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	clear(c.auth.m)
	close(c.auth.changed)
	c.auth.changed = make(chan struct{})
}

// Authenticate returns the actor a token belongs to, or an error matching
// ErrUnauthorized that says why (unknown, expired, revoked).
func (c *Controller) Authenticate(ctx context.Context, token string) (Actor, error) {
	if token == "" {
		return Actor{}, unauthorized("no token: send Authorization: Bearer TOKEN")
	}
	h := store.HashToken(token)
	now := c.now()
	c.auth.mu.Lock()
	e, ok := c.auth.m[h]
	c.auth.mu.Unlock()
	if !ok || now.Sub(e.fetched) > authTTL {
		t, err := c.st.TokenByHash(ctx, h)
		if errors.Is(err, reserve.ErrNotFound) {
			return Actor{}, unauthorized("unknown token")
		} else if err != nil {
			return Actor{}, fmt.Errorf("look up token: %w", err)
		}
		u, err := c.st.GetUser(ctx, t.User)
		if err != nil {
			return Actor{}, fmt.Errorf("look up token's user: %w", err)
		}
		e = authEntry{tok: t, actor: Actor{Name: u.Name, Role: u.Role, Projects: u.Projects, Node: boundNode(u, t),
			TokenID: t.ID, TokenExpires: t.ExpiresAt}, fetched: now}
		c.auth.mu.Lock()
		if len(c.auth.m) > 10000 {
			clear(c.auth.m)
		}
		c.auth.m[h] = e
		c.auth.mu.Unlock()
	}
	switch {
	case !e.tok.RevokedAt.IsZero():
		return Actor{}, unauthorized("token %s was revoked at %s", e.tok.ID, e.tok.RevokedAt.Format(time.RFC3339))
	case !e.tok.ExpiresAt.IsZero() && !now.Before(e.tok.ExpiresAt):
		return Actor{}, unauthorized("token %s expired at %s", e.tok.ID, e.tok.ExpiresAt.Format(time.RFC3339))
	}
	return e.actor, nil
}

// BootstrapAdmin makes sure an admin can log in: if file holds a token the
// database knows and that works, it is kept; otherwise the user "admin" is
// created when missing and a new token is written to file (mode 0600).
// It reports whether it wrote a token.
func (c *Controller) BootstrapAdmin(ctx context.Context, file string) (bool, error) {
	if b, err := os.ReadFile(file); err == nil {
		tok := strings.TrimSpace(string(b))
		if tok != "" {
			if a, err := c.Authenticate(ctx, tok); err == nil && a.Role == reserve.RoleAdmin {
				// A secret kept in a file others may read is no secret:
				// an older controller's file is made private.
				if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 {
					if err := os.Chmod(file, 0o600); err != nil {
						return false, fmt.Errorf("make the admin token file private: %w", err)
					}
					c.log.Warn("the admin token file was readable by other users: made it 0600", "file", file, "was", fi.Mode().Perm().String())
				}
				return false, nil
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("read admin token: %w", err)
	}
	now := c.now()
	secret, h, err := store.NewToken()
	if err != nil {
		return false, err
	}
	err = c.st.Tx(ctx, func(tx store.Store) error {
		if _, err := tx.GetUser(ctx, AdminUser); errors.Is(err, reserve.ErrNotFound) {
			if err := tx.CreateUser(ctx, store.User{Name: AdminUser, Role: reserve.RoleAdmin, CreatedAt: now}); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if err := tx.CreateToken(ctx, store.Token{ID: newID("t-"), User: AdminUser, Hash: h, CreatedAt: now}); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, store.AuditEntry{At: now, Who: reserve.ActorController, What: "bootstrap admin token", Detail: file})
	})
	if err != nil {
		return false, fmt.Errorf("create admin token: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return false, fmt.Errorf("write admin token: %w", err)
	}
	if err := WriteSecretFile(file, secret); err != nil {
		return false, fmt.Errorf("write admin token: %w", err)
	}
	return true, nil
}

// WriteSecretFile writes a token to file with mode 0600, whole or not at
// all: a new temporary file beside it (created 0600, never one left
// there before), synced, then renamed over it.
func WriteSecretFile(file, secret string) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(secret + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// AddUser creates a user (admins only).
// An agent may be bound to node: every token of it then acts for that
// node alone (agentbind.go).
func (c *Controller) AddUser(ctx context.Context, a Actor, name string, role reserve.Role, projects []string, node string) (store.User, error) {
	if a.Role != reserve.RoleAdmin {
		return store.User{}, forbidden("only an admin may add users")
	}
	if !namePattern.MatchString(name) || name == reserve.ActorController {
		return store.User{}, &reserve.RequestError{Field: "name", Message: fmt.Sprintf("user name %q: use 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit (and not %q)", name, reserve.ActorController)}
	}
	if !slices.Contains(reserve.Roles, role) {
		return store.User{}, &reserve.RequestError{Field: "role", Message: fmt.Sprintf("role %q: want one of user, operator, admin, agent", role)}
	}
	for _, p := range projects {
		if !namePattern.MatchString(p) {
			return store.User{}, &reserve.RequestError{Field: "projects", Message: fmt.Sprintf("project name %q: use lower-case letters, digits, '.', '_' or '-'", p)}
		}
	}
	if err := c.checkUserNode(role, node); err != nil {
		return store.User{}, err
	}
	projects = slices.Compact(slices.Sorted(slices.Values(projects)))
	u := store.User{Name: name, Role: role, Projects: projects, CreatedAt: c.now(), Node: node}
	err := c.commit(ctx, func(tx store.Store) error { return tx.CreateUser(ctx, u) },
		store.AuditEntry{At: u.CreatedAt, Who: a.Name, What: "add user " + name, Detail: fmt.Sprintf("role %s, projects %s%s", role, strings.Join(projects, ","), nodeDetail(node))})
	if errors.Is(err, reserve.ErrConflict) {
		return store.User{}, fmt.Errorf("%w: user %q already exists", reserve.ErrConflict, name)
	}
	return u, err
}

// ListUsers lists users (admins only).
func (c *Controller) ListUsers(ctx context.Context, a Actor) ([]store.User, error) {
	if a.Role != reserve.RoleAdmin {
		return nil, forbidden("only an admin may list users")
	}
	return c.st.ListUsers(ctx)
}

// CreateToken makes a token for user (an admin for anyone, a user for
// themself), returning the secret, which is never stored. node, for an
// agent's token, binds it to that node (agentbind.go).
func (c *Controller) CreateToken(ctx context.Context, a Actor, user string, expiresIn time.Duration, node string) (string, store.Token, error) {
	if a.Role != reserve.RoleAdmin && a.Name != user {
		return "", store.Token{}, forbidden("only an admin may create tokens for another user")
	}
	if expiresIn < 0 {
		return "", store.Token{}, &reserve.RequestError{Field: "expires_in", Message: "expires_in must not be negative"}
	}
	node, err := c.tokenNode(ctx, a, user, node)
	if err != nil {
		return "", store.Token{}, err
	}
	secret, h, err := store.NewToken()
	if err != nil {
		return "", store.Token{}, err
	}
	now := c.now()
	t := store.Token{ID: newID("t-"), User: user, Hash: h, CreatedAt: now, Node: node}
	if expiresIn > 0 {
		t.ExpiresAt = now.Add(expiresIn)
	}
	if err := outlives(a, t.ExpiresAt, now); err != nil {
		return "", store.Token{}, err
	}
	err = c.commit(ctx, func(tx store.Store) error {
		if err := c.checkTokenLimit(ctx, tx, user, now); err != nil {
			return err
		}
		if err := c.liveNodeToken(ctx, tx, a, user, node); err != nil {
			return err
		}
		return tx.CreateToken(ctx, t)
	}, store.AuditEntry{At: now, Who: a.Name, What: "create token " + t.ID, Detail: "for " + user + nodeDetail(node)})
	if errors.Is(err, reserve.ErrNotFound) {
		return "", store.Token{}, notFound("user", user)
	}
	if err != nil {
		return "", store.Token{}, err
	}
	return secret, t, nil
}

// RevokeUserTokens revokes every live token of user (an admin's, or the
// user's own: signing out everywhere), returning them: the user is locked
// out at once, and their open streams end, until a new token is made.
func (c *Controller) RevokeUserTokens(ctx context.Context, a Actor, user string) ([]store.Token, error) {
	if a.Role != reserve.RoleAdmin && a.Name != user {
		return nil, forbidden("only an admin may revoke another user's tokens")
	}
	u, err := c.st.GetUser(ctx, user)
	if errors.Is(err, reserve.ErrNotFound) {
		return nil, notFound("user", user)
	} else if err != nil {
		return nil, err
	}
	now := c.now()
	var revoked []store.Token
	err = c.st.Tx(ctx, func(tx store.Store) error {
		revoked = revoked[:0]
		ts, err := tx.ListTokens(ctx, user)
		if err != nil {
			return err
		}
		var ids []string
		for _, t := range ts {
			// An agent's token revokes only what it may revoke one by
			// one: not the tokens of the nodes it does not act for.
			if !t.RevokedAt.IsZero() || a.Role == reserve.RoleAgent && !revocable(a, u, t) {
				continue
			}
			if err := tx.RevokeToken(ctx, t.ID, now); err != nil {
				return err
			}
			t.RevokedAt = now
			revoked = append(revoked, t)
			ids = append(ids, t.ID)
		}
		return tx.AppendAudit(ctx, store.AuditEntry{At: now, Who: a.Name, What: "revoke every token of " + user, Detail: strings.Join(ids, ",")})
	})
	if err != nil {
		return nil, err
	}
	c.forgetTokens()
	return revoked, nil
}

// outlives refuses a token that would outlive the token of the request
// minting it: otherwise a stolen short-lived token could be turned into a
// permanent one.
func outlives(a Actor, expires, now time.Time) error {
	if a.TokenExpires.IsZero() || (!expires.IsZero() && !expires.After(a.TokenExpires)) {
		return nil
	}
	left := a.TokenExpires.Sub(now).Truncate(time.Second)
	want := "a token that never expires"
	if !expires.IsZero() {
		want = "one expiring at " + expires.UTC().Format(time.RFC3339)
	}
	return &reserve.RequestError{Field: "expires_in", Message: fmt.Sprintf("the token of this request (%s) expires at %s, so it cannot create %s: give an expires_in of at most %s, or use a token that lives longer",
		a.TokenID, a.TokenExpires.UTC().Format(time.RFC3339), want, left)}
}

// ListTokens lists a user's tokens (an admin's or the user's own).
func (c *Controller) ListTokens(ctx context.Context, a Actor, user string) ([]store.Token, error) {
	if a.Role != reserve.RoleAdmin && a.Name != user {
		return nil, forbidden("only an admin may list another user's tokens")
	}
	if _, err := c.st.GetUser(ctx, user); err != nil {
		return nil, err
	}
	return c.st.ListTokens(ctx, user)
}

// RevokeToken revokes a token (an admin's or its user's own). It stops
// working at once.
func (c *Controller) RevokeToken(ctx context.Context, a Actor, id string) error {
	if a.Role != reserve.RoleAdmin {
		mine, err := c.st.ListTokens(ctx, a.Name)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(mine, func(t store.Token) bool { return t.ID == id })
		if i < 0 {
			return notFound("token", id)
		}
		if !c.revocableBy(ctx, a, mine[i]) {
			if a.Role == reserve.RoleAgent && a.Node == "" {
				return forbidden(fmt.Sprintf("token %s acts for node %s: an agent's token bound to no node cannot revoke it (an admin does: lightpath user token revoke %s)", id, mine[i].Node, id))
			}
			return notFound("token", id)
		}
	}
	now := c.now()
	if err := c.commit(ctx, func(tx store.Store) error { return tx.RevokeToken(ctx, id, now) },
		store.AuditEntry{At: now, Who: a.Name, What: "revoke token " + id}); err != nil {
		return err
	}
	c.forgetTokens()
	return nil
}
