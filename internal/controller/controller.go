// Package controller is Lightpath's reservation service without its HTTP
// face: it holds the topology, the schedule of live bookings, the
// reservations' state machine driven by requests and by the clock, users
// and their tokens, policies and the audit log, and it publishes every
// change to subscribers. Package api serves it over HTTP.
//
// Every change runs under one lock, in one store transaction that also
// appends the audit entry, and is applied to the in-memory schedule only
// once the transaction has committed. Queries take the lock shared, so
// many run at once between changes. This is what makes admission exact
// under concurrency: the capacity a create checks is the capacity it books.
// One controller serves a database at a time.
package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// Settings keys under which the controller keeps its configuration.
const (
	settingTopology     = "topology"
	settingTopologyName = "topology_name"
	settingPolicy       = "policy"
	// settingLinksDown is the links agents found down, with why (a JSON
	// object), kept so that a restarted controller (or a standby taking
	// over) still routes around them: an agent reports a link only when
	// it changes.
	settingLinksDown = "links_down"
)

// DefaultMaxHold is the longest hold a client may ask for, and OSCARS's
// hold time.
const DefaultMaxHold = 15 * time.Minute

// Config is what a controller is started with.
type Config struct {
	Store store.Store
	// StoreKind names the backend for health reports ("sqlite", "postgres").
	StoreKind string
	// Topology, when not nil, is the topology given on the command line:
	// the stored one is replaced by it (a reload, refused if it would strand
	// reservations). Nil keeps the stored topology.
	Topology *Topo
	// DSCPPool is the pool of DSCP values for reservations that steer
	// flows; the zero pool means reserve.DefaultDSCPPool.
	DSCPPool reserve.DSCPPool
	// MaxHold bounds holds; zero means DefaultMaxHold.
	MaxHold time.Duration
	// PathPreference is which of the paths with room the scheduler picks
	// (DESIGN.md, "Path choice"); empty means reserve.PreferDedicated.
	PathPreference reserve.PathPreference
	// Limits bound what each user may keep (limits.go); zero: none.
	Limits Limits
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Actor is who makes a request.
type Actor struct {
	Name     string
	Role     reserve.Role
	Projects []string
	// Node is the one node an agent identity acts for (its token's or
	// its user's binding); empty for everyone else and for an unbound
	// agent (agentbind.go).
	Node string
	// TokenID and TokenExpires name the token the request came with (zero
	// when none, e.g. inside the controller): a token may not mint one
	// that outlives it.
	TokenID      string
	TokenExpires time.Time
}

// Sees reports whether a may see and act on what owner owns.
func (a Actor) Sees(owner string) bool { return a.sees(owner) }

// SeesAll reports whether a sees what every owner owns (an operator or an
// admin), so a list need not be filtered by owner.
func (a Actor) SeesAll() bool { return a.privileged() }

// sees reports whether a may see and act on what owner owns.
func (a Actor) sees(owner string) bool {
	return a.Name == owner || a.Role == reserve.RoleOperator || a.Role == reserve.RoleAdmin
}

func (a Actor) privileged() bool {
	return a.Role == reserve.RoleOperator || a.Role == reserve.RoleAdmin
}

// Controller is the reservation service. Create it with Open, run its
// clock with Run, and close it with Close.
type Controller struct {
	st      store.Store
	kind    string
	log     *slog.Logger
	now     func() time.Time
	pool    reserve.DSCPPool
	maxHold time.Duration
	limits  Limits
	pref    reserve.PathPreference

	mu     sync.RWMutex // serialises changes; queries hold it shared
	topo   *Topo
	sched  *reserve.Schedule
	live   map[string]reserve.Reservation // live reservations by ID (setLive, dropLive)
	idx    liveIndex                      // indexes of live (liveset.go)
	excl   map[string]reserve.Exclusive   // standing exclusive holds by ID
	policy reserve.Policy
	agents map[string]*agentLease // node → its agent's lease (agents.go)
	// agentSince is when each agent's current run of heartbeats began, and
	// lapsed which agents' leases the clock has found lapsed.
	agentSince map[string]time.Time
	lapsed     map[string]bool
	// linkDown holds the links agents found down, with why, until they
	// report them up: new paths avoid them.
	linkDown map[string]string
	// movedOff holds the reservations a dead link moved off their path,
	// by ID, until they are back on the preferred path (moveback.go).
	movedOff map[string]movedOff
	due      dueHeap

	auth authCache

	wake   chan struct{}
	events *broker
}

// PathPreference returns which of the paths with room the controller's
// scheduler picks.
func (c *Controller) PathPreference() reserve.PathPreference { return c.pref }

// ErrNoTopology is a request that needs a topology when none was given.
var ErrNoTopology = fmt.Errorf("%w: the controller has no topology yet: start it with --topology FILE or PUT /api/v1/topology", reserve.ErrConflict)

// Open starts a controller on cfg's store: it loads the topology and
// policy, loads the live reservations and catches up every timed event
// they missed while no controller ran, so nothing is served from a stale
// state.
func Open(ctx context.Context, cfg Config) (*Controller, error) {
	c, err := open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Agents whose leases lapsed while no controller ran leave their
	// reservations degraded; those back since recover.
	c.mu.Lock()
	c.checkLeases(ctx, c.now())
	c.rejudge(ctx, c.now())
	c.mu.Unlock()
	return c, nil
}

func open(ctx context.Context, cfg Config) (*Controller, error) {
	c := &Controller{
		st:         cfg.Store,
		kind:       cfg.StoreKind,
		log:        cfg.Log,
		now:        cfg.Now,
		pool:       cfg.DSCPPool,
		maxHold:    cfg.MaxHold,
		limits:     cfg.Limits,
		live:       map[string]reserve.Reservation{},
		idx:        newLiveIndex(),
		excl:       map[string]reserve.Exclusive{},
		agents:     map[string]*agentLease{},
		agentSince: map[string]time.Time{},
		lapsed:     map[string]bool{},
		linkDown:   map[string]string{},
		movedOff:   map[string]movedOff{},
		wake:       make(chan struct{}, 1),
		events:     newBroker(),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	// The controller's instants are whole milliseconds: a start it picks
	// ("now", an alternative, an earliest slot) then survives a round trip
	// through a JavaScript Date unchanged, and a client that sends it back
	// gets what it was offered.
	clock := c.now
	c.now = func() time.Time { return clock().Truncate(time.Millisecond) }
	if len(c.pool.Values()) == 0 {
		c.pool = reserve.DefaultDSCPPool()
	}
	if c.maxHold <= 0 {
		c.maxHold = DefaultMaxHold
	}
	pref, err := reserve.ParsePathPreference(string(cfg.PathPreference))
	if err != nil {
		return nil, err
	}
	c.pref = pref
	c.auth.init()

	if s, err := c.st.GetSetting(ctx, settingPolicy); err == nil {
		if err := json.Unmarshal([]byte(s), &c.policy); err != nil {
			return nil, fmt.Errorf("load policy: %w", err)
		}
	} else if !errors.Is(err, reserve.ErrNotFound) {
		return nil, fmt.Errorf("load policy: %w", err)
	}
	if s, err := c.st.GetSetting(ctx, settingLinksDown); err == nil {
		if err := json.Unmarshal([]byte(s), &c.linkDown); err != nil {
			return nil, fmt.Errorf("load the links found down: %w", err)
		}
	} else if !errors.Is(err, reserve.ErrNotFound) {
		return nil, fmt.Errorf("load the links found down: %w", err)
	}
	if err := c.loadMovedOff(ctx); err != nil {
		return nil, err
	}
	if s, err := c.st.GetSetting(ctx, settingTopology); err == nil {
		name, _ := c.st.GetSetting(ctx, settingTopologyName)
		if name == "" {
			name = "stored"
		}
		t, err := ParseTopology(name, []byte(s))
		if err != nil {
			return nil, fmt.Errorf("load stored topology: %w", err)
		}
		c.topo = t
	} else if !errors.Is(err, reserve.ErrNotFound) {
		return nil, fmt.Errorf("load topology: %w", err)
	}

	agents, err := c.st.ListAgents(ctx)
	if err != nil {
		return nil, fmt.Errorf("load agents: %w", err)
	}
	for _, a := range agents {
		c.agents[a.Node] = newAgentLease(a.LeaseExpires)
		c.agentSince[a.Node] = a.RegisteredAt
		c.lapsed[a.Node] = !c.now().Before(a.LeaseExpires)
	}
	xs, err := c.st.ListExclusives(ctx, store.Filter{States: []reserve.State{reserve.StateReserved}, From: c.now()})
	if err != nil {
		return nil, fmt.Errorf("load exclusive holds: %w", err)
	}
	for _, x := range xs {
		c.excl[x.ID] = x
	}
	if err := c.restore(ctx); err != nil {
		return nil, err
	}
	// Book the live reservations on the topology: the stored one, or the
	// one given, which must take every one of them (a reload).
	stored := c.topo
	if cfg.Topology != nil && (stored == nil || stored.YAML == "" || stored.YAML != cfg.Topology.YAML) {
		c.topo = nil
		if _, err := c.reload(ctx, Actor{Name: reserve.ActorController, Role: reserve.RoleAdmin}, cfg.Topology); err != nil {
			return nil, fmt.Errorf("load topology %s: %w", cfg.Topology.Name, err)
		}
		return c, nil
	}
	if stored == nil {
		if len(c.live) > 0 {
			return nil, fmt.Errorf("the database holds %d live reservations but no topology: give --topology", len(c.live))
		}
		return c, nil
	}
	sched, stranded := c.admitAll(stored)
	for _, s := range stranded {
		// The database holds more than its own topology admits: edited
		// behind the controller's back. Serve anyway so an operator can
		// see and fix it, but say so.
		c.log.Error("stored reservation does not fit the stored topology", "what", s)
	}
	c.sched = sched
	return c, nil
}

// restore loads the live reservations and replays what they missed; Open
// then books the ones still live on the topology.
func (c *Controller) restore(ctx context.Context) error {
	rs, err := c.st.ListLive(ctx)
	if err != nil {
		return fmt.Errorf("load reservations: %w", err)
	}
	now := c.now()
	caught := 0
	for _, r := range rs {
		n, trs, err := reserve.CatchUp(r, now)
		if err != nil {
			return fmt.Errorf("catch up reservation %s: %w", r.ID, err)
		}
		if len(trs) > 0 {
			caught++
			if err := c.st.Tx(ctx, func(tx store.Store) error {
				if err := tx.UpdateReservation(ctx, n, r.Version); err != nil {
					return err
				}
				return tx.AppendAudit(ctx, store.AuditEntry{At: now, Who: reserve.ActorController, What: "catch-up " + n.ID, Detail: describeTransitions(trs)})
			}); err != nil {
				return fmt.Errorf("catch up reservation %s: %w", r.ID, err)
			}
		}
		if !n.State.Live() {
			continue
		}
		c.setLive(n)
		c.pushDue(n)
	}
	c.log.Info("restored", "live", len(c.live), "caught_up", caught, "exclusive_holds", len(c.excl))
	return nil
}

func describeTransitions(trs []reserve.Transition) string {
	s := ""
	for i, t := range trs {
		if i > 0 {
			s += "; "
		}
		s += fmt.Sprintf("%s→%s (%s)", t.From, t.To, t.Why)
	}
	return s
}

// Close stops the event stream's subscribers. The store is the caller's.
func (c *Controller) Close() { c.events.close() }

// MaxHold returns the longest hold a client may ask for.
func (c *Controller) MaxHold() time.Duration { return c.maxHold }

// StoreKind names the backend.
func (c *Controller) StoreKind() string { return c.kind }

// Store returns the controller's store (for health reports).
func (c *Controller) Store() store.Store { return c.st }

// Now returns the controller's clock.
func (c *Controller) Now() time.Time { return c.now() }

// LiveCount returns how many reservations are live.
func (c *Controller) LiveCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.live)
}

// Topology returns the current topology, or nil.
func (c *Controller) Topology() *Topo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.topo
}

// Managed reports whether a node has an agent whose lease holds.
func (c *Controller) Managed(node string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	exp, ok := c.leaseOf(node)
	return ok && c.now().Before(exp)
}

// Policy returns the policy in force.
func (c *Controller) Policy() reserve.Policy {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.policy
}

// SetPolicy replaces the policy (admin only). It applies to requests from
// now on; reservations already made stand.
func (c *Controller) SetPolicy(ctx context.Context, a Actor, p reserve.Policy) error {
	if a.Role != reserve.RoleAdmin {
		return forbidden("only an admin may change the policy")
	}
	if err := p.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode policy: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.st.Tx(ctx, func(tx store.Store) error {
		if err := tx.PutSetting(ctx, settingPolicy, string(b)); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, store.AuditEntry{At: c.now(), Who: a.Name, What: "set policy", Detail: string(b)})
	}); err != nil {
		return fmt.Errorf("store policy: %w", err)
	}
	c.policy = p
	return nil
}

// Audit lists the audit log (operators and admins).
func (c *Controller) Audit(ctx context.Context, a Actor, f store.AuditFilter) ([]store.AuditEntry, error) {
	if !a.privileged() {
		return nil, forbidden("only operators and admins may read the audit log")
	}
	return c.st.ListAudit(ctx, f)
}

// liveList returns the live reservations, for policy and DSCP checks.
func (c *Controller) liveList() []reserve.Reservation {
	out := make([]reserve.Reservation, 0, len(c.live))
	for _, r := range c.live {
		out = append(out, r)
	}
	return out
}

func (c *Controller) exclusives() []reserve.Exclusive {
	out := make([]reserve.Exclusive, 0, len(c.excl))
	for _, x := range c.excl {
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// managedOn returns the nodes of a path whose agents' leases hold.
func (c *Controller) managedOn(from, to string, path []reserve.PathHop, now time.Time) []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		if exp, ok := c.leaseOf(n); ok && now.Before(exp) {
			out = append(out, n)
		}
	}
	add(from)
	for _, h := range path {
		add(h.From)
		add(h.To)
	}
	add(to)
	sort.Strings(out)
	return out
}

// newID returns a fresh identifier with a prefix saying what it names.
func newID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return prefix + hex.EncodeToString(b[:])
}

func forbidden(msg string) error {
	return &reserve.PolicyError{Rule: reserve.RuleRole, Message: msg}
}

func notFound(what, id string) error {
	return fmt.Errorf("%w: %s %q", reserve.ErrNotFound, what, id)
}

// commit stores a change in one transaction with its audit entry.
func (c *Controller) commit(ctx context.Context, fn func(tx store.Store) error, audit store.AuditEntry) error {
	return c.st.Tx(ctx, func(tx store.Store) error {
		if err := fn(tx); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, audit)
	})
}

// record stores n, the new version of old (a compare-and-swap on old's
// version), in one transaction with its audit entry, then applies it in
// memory and publishes its transitions: every change to a reservation ends
// here. The caller holds mu.
func (c *Controller) record(ctx context.Context, old, n reserve.Reservation, audit store.AuditEntry, trs ...reserve.Transition) error {
	if err := c.commit(ctx, func(tx store.Store) error { return tx.UpdateReservation(ctx, n, old.Version) }, audit); err != nil {
		return fmt.Errorf("store reservation: %w", err)
	}
	c.apply(n)
	for _, t := range trs {
		c.publishReservation(old, n, t)
	}
	c.kick()
	return nil
}

// kick wakes the clock loop: the next due instant may have changed.
func (c *Controller) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Counts returns how many live reservations are in each state, and how
// many agents are alive and gone: the controller's gauges.
func (c *Controller) Counts() (states map[reserve.State]int, alive, gone int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	states = map[reserve.State]int{}
	for _, r := range c.live {
		states[r.State]++
	}
	now := c.now()
	for _, l := range c.agents {
		if now.Before(l.expires()) {
			alive++
		} else {
			gone++
		}
	}
	return states, alive, gone
}
