// Package store persists the controller's state: reservations with their
// history, exclusive holds, users and their API tokens, the audit log, the
// agents' registrations, the controller's settings, the data transfers
// recorded by cp, the alert history of the rules, and the transfer
// service's endpoints, data nodes, jobs, files, tasks and optimizer
// decisions (Jobs). One interface,
// Store, has two implementations, SQLite (the default, embedded, pure Go)
// and PostgreSQL, and one conformance suite (package storetest) that both
// run, so the controller cannot tell them apart.
//
// Times are stored as int64 nanoseconds since the Unix epoch, in UTC, on
// both backends: it keeps the nanosecond precision of time.Time (PostgreSQL's
// timestamptz has microseconds), sorts and compares as integers in SQL, and
// needs no parsing. The zero time.Time is stored as 0 and read back as the
// zero time, so the instant 1970-01-01T00:00:00Z itself cannot be stored;
// representable instants run from 1678 to 2262.
package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/transfer"
)

// Store is the controller's persistence. The contract every implementation
// keeps, and storetest checks:
//
//   - Errors wrap the reserve error classes, so the API maps them with
//     errors.Is: a missing row is reserve.ErrNotFound, a stale version or a
//     duplicate name reserve.ErrConflict, a value the store cannot hold
//     reserve.ErrInvalid. Anything else is a database failure.
//   - Every method is safe for concurrent use. Each write is atomic on its
//     own; Tx makes several atomic together.
//   - Write transactions are serialised: at most one runs at a time against
//     a database, across processes too, and each sees everything committed
//     before it began. That is what lets the controller read the booked
//     capacity and insert a reservation in one Tx without overbooking.
//     Reads outside Tx never wait for writers.
//   - Times come back in UTC with the same instant (nanoseconds kept).
//   - Values returned are copies: changing them changes nothing stored.
type Store interface {
	// Migrate brings the schema up to the version this code knows, applying
	// each missing migration in order, and records it in the schema_version
	// table. Running it on an up-to-date database changes nothing. A
	// database whose schema is newer than the code is refused with an error
	// wrapping ErrSchemaTooNew, since old code could corrupt it. Open calls
	// it, so a controller's database is migrated forward on start.
	Migrate(ctx context.Context) error
	// SchemaVersion returns the schema version the database is at.
	SchemaVersion(ctx context.Context) (int, error)

	// CreateReservation stores a new reservation with its History. The ID
	// must be new (reserve.ErrConflict otherwise). A non-empty
	// IdempotencyKey is unique per owner: when the owner already has a
	// reservation under that key, nothing is stored and the error is a
	// *DuplicateKeyError carrying the stored reservation (it matches
	// ErrDuplicateKey), which the controller compares with
	// reserve.IdempotentMatch to answer a retried create.
	CreateReservation(ctx context.Context, r reserve.Reservation) error
	// GetReservation returns the reservation with its full History, or an
	// error wrapping reserve.ErrNotFound.
	GetReservation(ctx context.Context, id string) (reserve.Reservation, error)
	// GetReservationByKey returns the owner's reservation created under an
	// idempotency key, or an error wrapping reserve.ErrNotFound.
	GetReservationByKey(ctx context.Context, owner, key string) (reserve.Reservation, error)
	// UpdateReservation replaces the stored reservation r.ID with r if the
	// stored version is still expectedVersion (a compare-and-swap); otherwise
	// it changes nothing and returns a *reserve.StaleVersionError (matching
	// reserve.ErrConflict) naming the current version. r.Version must be
	// greater than expectedVersion. History is append-only: the entries of
	// r.History beyond those already stored are appended, and a History
	// shorter than the stored one is refused (reserve.ErrInvalid). Owner and
	// IdempotencyKey are fixed at creation and not changed.
	UpdateReservation(ctx context.Context, r reserve.Reservation, expectedVersion uint64) error
	// ListReservations returns the reservations matching every set field of
	// f, with their History, ordered by start then ID.
	ListReservations(ctx context.Context, f Filter) ([]reserve.Reservation, error)
	// ListLive returns every reservation in a live state (HELD, RESERVED,
	// ACTIVE), with History, ordered by start then ID: what the controller
	// loads into its scheduler on start before catching up timed events.
	ListLive(ctx context.Context) ([]reserve.Reservation, error)

	// CreateUser stores a new user; a taken name is reserve.ErrConflict.
	CreateUser(ctx context.Context, u User) error
	// GetUser returns a user or an error wrapping reserve.ErrNotFound.
	GetUser(ctx context.Context, name string) (User, error)
	// ListUsers returns every user ordered by name.
	ListUsers(ctx context.Context) ([]User, error)

	// CreateToken stores an API token by its hash: the token itself is
	// never given to the store (see NewToken). The user must exist
	// (reserve.ErrNotFound) and the ID and hash must be new
	// (reserve.ErrConflict).
	CreateToken(ctx context.Context, t Token) error
	// TokenByHash returns the token with that hash, revoked and expired ones
	// included (the caller checks Token.Active), or reserve.ErrNotFound.
	TokenByHash(ctx context.Context, h TokenHash) (Token, error)
	// ListTokens returns a user's tokens, oldest first.
	ListTokens(ctx context.Context, user string) ([]Token, error)
	// RevokeToken marks a token revoked at the given time. Revoking a
	// revoked token keeps the first time; an unknown ID is
	// reserve.ErrNotFound.
	RevokeToken(ctx context.Context, id string, at time.Time) error

	// AppendAudit appends one entry to the audit log, which is never
	// changed or shortened. The store assigns Seq.
	AppendAudit(ctx context.Context, e AuditEntry) error
	// ListAudit returns the entries matching f, oldest first.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)

	// PutAgent registers an agent or renews its lease (an upsert by node).
	PutAgent(ctx context.Context, a Agent) error
	// ListAgents returns every registered agent ordered by node, expired
	// leases included (the caller compares LeaseExpires with its clock).
	ListAgents(ctx context.Context) ([]Agent, error)

	// GetSetting returns a named setting, or an error wrapping
	// reserve.ErrNotFound. Settings are what the controller configures at
	// run time and must find again after a restart (its topology YAML and
	// its policy JSON), kept here so a controller on PostgreSQL has no
	// state on its own disk.
	GetSetting(ctx context.Context, key string) (string, error)
	// PutSetting creates or replaces a setting. The key must not be empty,
	// and neither key nor value may hold a NUL byte or invalid UTF-8
	// (reserve.ErrInvalid), which PostgreSQL's text cannot store: both
	// backends refuse them alike.
	PutSetting(ctx context.Context, key, value string) error

	// CreateExclusive stores a new exclusive hold. The ID must be new
	// (reserve.ErrConflict otherwise), and Nodes a sorted set without empty
	// names (reserve.ErrInvalid), since they come back sorted; an empty
	// Nodes comes back nil. The store does not check holds against each
	// other or against reservations: the controller does, in the same Tx.
	CreateExclusive(ctx context.Context, x reserve.Exclusive) error
	// GetExclusive returns a hold, or an error wrapping reserve.ErrNotFound.
	GetExclusive(ctx context.Context, id string) (reserve.Exclusive, error)
	// UpdateExclusive replaces the stored hold x.ID with x if the stored
	// version is still expectedVersion (a compare-and-swap); otherwise it
	// changes nothing and returns a *reserve.StaleVersionError (matching
	// reserve.ErrConflict) naming the current version, or an error wrapping
	// reserve.ErrNotFound when there is no such hold. x.Version must be
	// greater than expectedVersion (reserve.ErrInvalid). Owner is fixed at
	// creation and not changed.
	UpdateExclusive(ctx context.Context, x reserve.Exclusive, expectedVersion uint64) error
	// ListExclusives returns the holds matching every set field of f
	// (Owner, Project, States, From and To, and Node among the nodes
	// covered), ordered by start then ID. The live holds that may conflict
	// with a window from now on are Filter{States: RESERVED, From: now}.
	ListExclusives(ctx context.Context, f Filter) ([]reserve.Exclusive, error)

	// CreateTransfer stores a new transfer record. The ID must be new
	// (reserve.ErrConflict), and ID, Owner and State not empty
	// (reserve.ErrInvalid). Every field comes back as it was given, times
	// in UTC; text holding invalid UTF-8, and a NUL byte in ID, Owner or
	// State, is refused (reserve.ErrInvalid) on both backends alike.
	CreateTransfer(ctx context.Context, t transfer.Transfer) error
	// UpdateTransfer replaces the stored transfer t.ID with t; an unknown
	// ID is reserve.ErrNotFound. Owner and StartedAt are fixed at creation
	// and not changed. There is no version: the caller that must read,
	// change and write one transfer atomically does it in Tx.
	UpdateTransfer(ctx context.Context, t transfer.Transfer) error
	// GetTransfer returns a transfer as stored (the stalled state is the
	// caller's view, never stored), or an error wrapping
	// reserve.ErrNotFound.
	GetTransfer(ctx context.Context, id string) (transfer.Transfer, error)
	// ListTransfers returns the transfers matching every set field of f,
	// newest first (StartedAt descending, then ID).
	ListTransfers(ctx context.Context, f TransferFilter) ([]transfer.Transfer, error)
	// CountTransfers returns how many transfers match f, Limit ignored:
	// with States running and UpdatedSince, an owner's live transfers.
	CountTransfers(ctx context.Context, f TransferFilter) (int, error)

	// AppendAlert stores one alert record and returns the ID the store
	// assigned it (increasing). Labels come back as a map (nil when there
	// are none); a NaN Value comes back NaN; text holding invalid UTF-8 or
	// a NUL byte is refused (reserve.ErrInvalid).
	AppendAlert(ctx context.Context, r AlertRecord) (int64, error)
	// SetAlertActions records what a record's actions did, replacing what
	// was recorded before; an unknown ID is reserve.ErrNotFound.
	SetAlertActions(ctx context.Context, id int64, actions []AlertAction) error
	// ListAlerts returns the records matching f, newest first (At
	// descending, then ID descending).
	ListAlerts(ctx context.Context, f AlertFilter) ([]AlertRecord, error)

	// Jobs is the transfer service's part (schema versions 6 and 7).
	Jobs

	// Tx runs fn in one write transaction: fn's Store sees its own writes,
	// and they are committed together when fn returns nil or all discarded
	// when it returns an error (returned as is) or panics. Write
	// transactions are serialised (see the type's contract), so a check
	// made in fn still holds when fn's writes commit. Calling Tx on fn's
	// Store runs the inner fn in the same transaction. fn must not use the
	// outer Store, and must not keep its Store after returning.
	Tx(ctx context.Context, fn func(Store) error) error

	// Close releases the database. The Store must not be used afterwards.
	Close() error
}

// Filter selects reservations, or exclusive holds; zero fields match
// everything.
type Filter struct {
	Owner   string
	Project string
	// States, when not empty, keeps those in one of them.
	States []reserve.State
	// From and To keep those whose window [Start, End) overlaps [From,
	// To); a zero bound is open.
	From, To time.Time
	// Node keeps reservations that touch the node, an end or a hop of the
	// path (reserve.Reservation.Nodes), and holds that cover it
	// (reserve.Exclusive.Nodes).
	Node string
}

// TransferFilter selects transfers; zero fields match everything. It is
// transfer.Filter, so that the registry (package transfer/registry) takes
// the store as it is without importing it.
type TransferFilter = transfer.Filter

// AlertRecord, AlertAction and AlertFilter are the alert history's
// (monitor.AlertRecord and its kin), so that the history (package
// monitor/alert) takes the store as it is without importing it.
type (
	AlertRecord = monitor.AlertRecord
	AlertAction = monitor.AlertAction
	AlertFilter = monitor.AlertFilter
)

// User is a person or agent known to the controller.
type User struct {
	Name      string
	Role      reserve.Role
	Projects  []string
	CreatedAt time.Time
	// Node, for a user of role agent, is the node all its tokens act for;
	// empty binds none.
	Node string
}

// TokenHash is the SHA-256 of an API token, which is all the store keeps.
type TokenHash [sha256.Size]byte

// HashToken returns the hash under which a token is stored and looked up.
func HashToken(token string) TokenHash { return sha256.Sum256([]byte(token)) }

// String returns the hash in hex.
func (h TokenHash) String() string { return hex.EncodeToString(h[:]) }

// NewToken returns a fresh random API token, to be shown to its user once,
// and its hash, to be stored. The token has 256 bits from crypto/rand, so a
// plain hash is enough: there is nothing to guess that a slow hash would
// protect.
func NewToken() (token string, hash TokenHash, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", TokenHash{}, fmt.Errorf("new token: %w", err)
	}
	token = "lp_" + hex.EncodeToString(b[:])
	return token, HashToken(token), nil
}

// Token is a stored API token: its hash, never the token.
type Token struct {
	// ID names the token for listing and revocation without revealing it.
	ID        string
	User      string
	Hash      TokenHash
	CreatedAt time.Time
	// ExpiresAt is when the token stops working; zero means never.
	ExpiresAt time.Time
	// RevokedAt is when it was revoked; zero while it is not.
	RevokedAt time.Time
	// Node, when set, is the one node the token acts for (an agent's).
	Node string
}

// Active reports whether the token may be used at now: not revoked and not
// expired.
func (t Token) Active(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// AuditEntry is one line of the audit log: who did what, when.
type AuditEntry struct {
	Seq    int64 // assigned by the store, increasing
	At     time.Time
	Who    string
	What   string
	Detail string
}

// AuditFilter selects audit entries; zero fields match everything.
type AuditFilter struct {
	Who string
	// Since and Until keep entries with Since <= At < Until.
	Since, Until time.Time
	// Limit, when positive, keeps the first Limit matches.
	Limit int
}

// Agent is a node agent's registration.
type Agent struct {
	Node         string
	RegisteredAt time.Time
	LeaseExpires time.Time
}

// ErrSchemaTooNew is a database migrated by newer code than this.
var ErrSchemaTooNew = errors.New("database schema is newer than this program")

// ErrDuplicateKey is a create under an idempotency key the owner already
// used; the error is a *DuplicateKeyError.
var ErrDuplicateKey = errors.New("idempotency key already used")

// DuplicateKeyError is returned by CreateReservation when the owner already
// has a reservation under the key: Existing is that reservation.
type DuplicateKeyError struct {
	Existing reserve.Reservation
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("idempotency key %q of %s already used for reservation %s", e.Existing.IdempotencyKey, e.Existing.Owner, e.Existing.ID)
}

// Unwrap makes a DuplicateKeyError match ErrDuplicateKey.
func (e *DuplicateKeyError) Unwrap() error { return ErrDuplicateKey }

// Open opens the database named by url and migrates it forward:
// "sqlite:PATH" (a file, created when missing; "sqlite::memory:" is a
// private in-memory database, gone on Close) or "postgres://..." /
// "postgresql://..." (a pgx connection string).
func Open(ctx context.Context, url string) (Store, error) {
	s, err := openURL(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return s, nil
}

// openURL opens the database named by url without migrating it.
func openURL(ctx context.Context, url string) (*sqlStore, error) {
	switch {
	case strings.HasPrefix(url, "sqlite:"):
		return openSQLite(strings.TrimPrefix(url, "sqlite:"))
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return openPostgres(ctx, url)
	}
	return nil, fmt.Errorf("%w: database URL %q (want sqlite:PATH or postgres://...)", reserve.ErrInvalid, redact(url))
}

// redact hides a password in a URL so it never lands in an error message.
func redact(url string) string {
	at := strings.LastIndex(url, "@")
	scheme := strings.Index(url, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return url
	}
	userinfo := url[scheme+3 : at]
	if i := strings.Index(userinfo, ":"); i >= 0 {
		return url[:scheme+3] + userinfo[:i] + ":xxxxx" + url[at:]
	}
	return url
}
