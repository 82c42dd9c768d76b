package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/units"
)

// CreateInput is a reservation request as the API hands it over, already
// decoded (times set, durations parsed).
type CreateInput struct {
	Owner     string // empty: the actor
	Project   string
	From, To  string
	Bandwidth uint64
	Start     time.Time // zero: now
	End       time.Time
	Duration  time.Duration // used when End is zero
	SizeBytes uint64        // earliest completion: Bandwidth is the highest rate
	Deadline  time.Time
	FlowSpec  string
	Path      []string
	Hold      time.Duration
	Key       string
}

// Refusal is a create refused for want of capacity, with the nearest
// alternatives. It matches reserve.ErrCapacity or reserve.ErrNoPath.
type Refusal struct {
	Err          error
	Alternatives reserve.Alternatives

	// pending, when set, is the request whose alternatives are still to
	// be found: Create looks for them after releasing its write lock, so
	// a refusal does not hold up other creates for the milliseconds the
	// search takes.
	pending *reserve.Request
	horizon time.Time
}

func (e *Refusal) Error() string { return e.Err.Error() }
func (e *Refusal) Unwrap() error { return e.Err }

// Created is the answer to a create.
type Created struct {
	Reservation reserve.Reservation
	Algorithm   string
	New         bool // false: a retried create returned the first booking
}

// Create books a reservation: it validates the request, checks policy,
// finds a path (or admits the one given), allocates a DSCP value when the
// reservation steers flows, and stores it with its audit entry, all under
// the controller's lock, so concurrent creates can never overbook.
func (c *Controller) Create(ctx context.Context, a Actor, in CreateInput) (Created, error) {
	res, err := c.create(ctx, a, in)
	var ref *Refusal
	if errors.As(err, &ref) && ref.pending != nil {
		c.mu.RLock()
		alt, aerr := c.sched.Alternatives(*ref.pending, ref.horizon)
		c.mu.RUnlock()
		if aerr == nil {
			ref.Alternatives = alt
		}
		ref.pending = nil
	}
	return res, err
}

func (c *Controller) create(ctx context.Context, a Actor, in CreateInput) (Created, error) {
	if a.Role == reserve.RoleAgent {
		return Created{}, forbidden("agents do not book reservations")
	}
	owner := a.Name
	if in.Owner != "" && in.Owner != a.Name {
		if !a.SeesAll() {
			return Created{}, forbidden("only operators and admins may book for someone else")
		}
		if _, err := c.st.GetUser(ctx, in.Owner); errors.Is(err, reserve.ErrNotFound) {
			return Created{}, &reserve.RequestError{Field: "owner", Message: fmt.Sprintf("owner %q is not a user (GET /api/v1/users lists them)", in.Owner)}
		} else if err != nil {
			return Created{}, fmt.Errorf("look up owner: %w", err)
		}
		owner = in.Owner
	}
	if in.Project != "" && !a.SeesAll() && !slices.Contains(a.Projects, in.Project) {
		return Created{}, forbidden(fmt.Sprintf("you are not a member of project %q", in.Project))
	}
	if in.Hold < 0 || in.Hold > c.maxHold {
		return Created{}, &reserve.RequestError{Field: "hold", Message: fmt.Sprintf("hold %s: want a duration up to %s", in.Hold, c.maxHold)}
	}
	var fs reserve.FlowSpec
	if in.FlowSpec != "" {
		var err error
		if fs, err = reserve.ParseFlowSpec(in.FlowSpec); err != nil {
			return Created{}, err
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return Created{}, ErrNoTopology
	}
	now := c.now()
	if err := c.topo.checkNode("from", in.From); err != nil {
		return Created{}, err
	}
	if err := c.topo.checkNode("to", in.To); err != nil {
		return Created{}, err
	}
	start := in.Start
	if start.IsZero() {
		start = now
	}
	req := reserve.Reservation{
		ID: newID("r-"), Owner: owner, Project: in.Project,
		From: in.From, To: in.To, Bandwidth: in.Bandwidth,
		Start: start, End: in.End, FlowSpec: fs, IdempotencyKey: in.Key,
	}
	if req.End.IsZero() && in.Duration > 0 {
		req.End = start.Add(in.Duration)
	}
	if in.SizeBytes > 0 && !in.End.IsZero() {
		return Created{}, &reserve.RequestError{Field: "end", Message: "give a size and an optional deadline, or a window, not both"}
	}

	if in.Key != "" {
		stored, err := c.st.GetReservationByKey(ctx, owner, in.Key)
		if err == nil {
			if in.Start.IsZero() {
				// "Now" was the controller's choice, made on the first
				// try: a retry's now is later.
				req.Start = stored.Start
				if in.End.IsZero() && in.Duration > 0 {
					req.End = stored.Start.Add(in.Duration)
				}
			}
			if in.SizeBytes > 0 {
				// The window was the scheduler's choice: compare only
				// what the client chose.
				req.Bandwidth, req.Start, req.End = stored.Bandwidth, stored.Start, stored.End
			}
			if err := reserve.IdempotentMatch(stored, req); err != nil {
				return Created{}, err
			}
			return Created{Reservation: stored, New: false}, nil
		} else if !errors.Is(err, reserve.ErrNotFound) {
			return Created{}, fmt.Errorf("look up idempotency key: %w", err)
		}
	}

	if err := c.checkReservationLimit(a, owner); err != nil {
		return Created{}, err
	}
	limits, _ := c.policy.Resolve(a.Role, in.Project)
	horizon := now.Add(limits.Horizon)
	var hops []reserve.Hop
	if len(in.Path) > 0 {
		var err error
		if hops, err = c.topo.hops(in.From, in.Path); err != nil {
			return Created{}, err
		}
		if err := c.topo.Graph.ValidatePath(in.From, in.To, hops); err != nil {
			return Created{}, &reserve.RequestError{Field: "path", Message: err.Error()}
		}
	}

	algorithm := ""
	if in.SizeBytes > 0 {
		maxRate := in.Bandwidth
		if limits.MaxBandwidth > 0 && (maxRate == 0 || maxRate > limits.MaxBandwidth) {
			maxRate = limits.MaxBandwidth
		}
		dl := horizon
		if !in.Deadline.IsZero() && in.Deadline.Before(dl) {
			dl = in.Deadline
		}
		res, err := c.sched.EarliestCompletion(reserve.CompletionQuery{From: in.From, To: in.To, Path: hops, Size: in.SizeBytes, MaxRate: maxRate, NotBefore: start, Horizon: dl})
		if err != nil {
			if errors.Is(err, reserve.ErrNoSlot) {
				msg := fmt.Sprintf("%s from %s to %s cannot arrive by %s", units.FormatSize(int64(in.SizeBytes)), in.From, in.To, dl.Format(time.RFC3339))
				if !in.Deadline.IsZero() {
					msg += " (the deadline)"
					// Say when it can arrive, as reserve find would.
					q := reserve.CompletionQuery{From: in.From, To: in.To, Path: hops, Size: in.SizeBytes, MaxRate: maxRate, NotBefore: start, Horizon: horizon}
					if e, err := c.sched.EarliestCompletion(q); err == nil {
						msg += fmt.Sprintf("; the earliest it can arrive is %s (at %s from %s)", e.End.Format(time.RFC3339),
							units.FormatRate(float64(e.Bandwidth)), e.Start.Format(time.RFC3339))
					}
				}
				return Created{}, &Refusal{Err: fmt.Errorf("%w: %s", reserve.ErrCapacity, msg)}
			}
			return Created{}, queryError(err)
		}
		req.Bandwidth, req.Start, req.End, hops, algorithm = res.Bandwidth, res.Start, res.End, res.Path, res.Algorithm
	}

	if err := reserve.CheckPolicy(c.policy, a.Role, req, c.projectLive(req.Project), now); err != nil {
		return Created{}, err
	}
	if hops == nil {
		res, err := c.sched.FixedSlotAvoiding(reserve.Request{From: req.From, To: req.To, Bandwidth: req.Bandwidth, Start: req.Start, End: req.End}, c.downLinks())
		if err != nil {
			return Created{}, c.refuseLater(err, req, horizon)
		}
		hops, algorithm = res.Path, res.Algorithm
	} else if err := c.sched.Admit(hops, req.Bandwidth, req.Start, req.End); err != nil {
		return Created{}, c.refuseLater(err, req, horizon)
	}
	if algorithm == "" {
		algorithm = "admission-given-path"
	}
	req.Path = toPathHops(hops)
	if err := c.checkFlows(req); err != nil {
		return Created{}, err
	}
	if xs := reserve.ExclusiveConflicts(owner, req.Nodes(), req.Start, req.End, c.exclusives(), now); len(xs) > 0 {
		return Created{}, &reserve.ExclusiveConflictError{Holds: xs, Message: "the path crosses nodes held exclusively by others then"}
	}
	req.ManagedNodes = c.managedOn(req.From, req.To, req.Path, now)
	if !req.FlowSpec.IsZero() {
		v, err := reserve.AllocateDSCP(c.pool, req, c.overlapping(req.Nodes(), req.Start, req.End))
		if err != nil {
			return Created{}, err
		}
		req.DSCP = v
	}
	r, tr, err := reserve.Next(req, reserve.Event{Kind: reserve.EventCreate, By: a.Name, Hold: in.Hold}, now)
	if err != nil {
		return Created{}, err
	}
	err = c.commit(ctx, func(tx store.Store) error { return tx.CreateReservation(ctx, r) },
		store.AuditEntry{At: now, Who: a.Name, What: "create " + r.ID, Detail: describe(r)})
	if err != nil {
		var dup *store.DuplicateKeyError
		if errors.As(err, &dup) {
			if err := reserve.IdempotentMatch(dup.Existing, req); err != nil {
				return Created{}, err
			}
			return Created{Reservation: dup.Existing}, nil
		}
		return Created{}, fmt.Errorf("store reservation: %w", err)
	}
	c.apply(r)
	c.publishReservation(reserve.Reservation{}, r, tr)
	c.kick()
	return Created{Reservation: r, Algorithm: algorithm, New: true}, nil
}

// refuse turns a failed admission into a Refusal with alternatives.
func (c *Controller) refuse(err error, req reserve.Reservation, horizon time.Time) error {
	r := c.refuseLater(err, req, horizon)
	if ref, ok := r.(*Refusal); ok {
		if alt, aerr := c.sched.Alternatives(*ref.pending, horizon); aerr == nil {
			ref.Alternatives = alt
		}
		ref.pending = nil
	}
	return r
}

// refuseLater is refuse leaving the alternatives to be found (see
// Refusal.pending).
func (c *Controller) refuseLater(err error, req reserve.Reservation, horizon time.Time) error {
	if !errors.Is(err, reserve.ErrCapacity) && !errors.Is(err, reserve.ErrNoPath) {
		return queryError(err)
	}
	msg := fmt.Sprintf("%s from %s to %s over %s to %s does not fit: %v",
		units.FormatRate(float64(req.Bandwidth)), req.From, req.To, req.Start.Format(time.RFC3339), req.End.Format(time.RFC3339), err)
	if errors.Is(err, reserve.ErrNoPath) {
		msg = fmt.Sprintf("no path carries %s from %s to %s over %s to %s",
			units.FormatRate(float64(req.Bandwidth)), req.From, req.To, req.Start.Format(time.RFC3339), req.End.Format(time.RFC3339))
	}
	return &Refusal{Err: fmt.Errorf("%w: %s", reserve.ErrCapacity, msg),
		pending: &reserve.Request{From: req.From, To: req.To, Bandwidth: req.Bandwidth, Start: req.Start, End: req.End}, horizon: horizon}
}

// queryError classes the scheduler's argument errors as invalid requests.
func queryError(err error) error {
	if errors.Is(err, reserve.ErrInvalidQuery) || errors.Is(err, reserve.ErrInvalidPath) ||
		errors.Is(err, reserve.ErrUnknownNode) || errors.Is(err, reserve.ErrUnknownLink) {
		return &reserve.RequestError{Message: err.Error()}
	}
	return err
}

// checkFlows checks that a flow spec runs from the reservation's from node
// to its to node: it would otherwise steer someone else's traffic.
func (c *Controller) checkFlows(r reserve.Reservation) error {
	if r.FlowSpec.IsZero() {
		return nil
	}
	return r.FlowSpec.Within(c.topo.Addrs[r.From], c.topo.Addrs[r.To])
}

func describe(r reserve.Reservation) string {
	p := ""
	for i, h := range r.Path {
		if i > 0 {
			p += ","
		}
		p += h.Link
	}
	return fmt.Sprintf("%s %s>%s %s %s..%s via %s", r.State, r.From, r.To, units.FormatRate(float64(r.Bandwidth)),
		r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339), p)
}

// FindInput is a scheduling question.
type FindInput struct {
	Mode      string
	From, To  string
	Bandwidth uint64
	Start     time.Time
	End       time.Time
	Duration  time.Duration
	SizeBytes uint64
	Path      []string
	Horizon   time.Time
	Project   string
}

// The find modes.
const (
	FindFixed      = "fixed"
	FindWidest     = "widest"
	FindEarliest   = "earliest"
	FindAll        = "all"
	FindCompletion = "completion"
)

// Find answers a scheduling question without booking anything.
func (c *Controller) Find(ctx context.Context, a Actor, in FindInput) (reserve.Result, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.topo == nil {
		return reserve.Result{}, ErrNoTopology
	}
	if err := c.topo.checkNode("from", in.From); err != nil {
		return reserve.Result{}, err
	}
	if err := c.topo.checkNode("to", in.To); err != nil {
		return reserve.Result{}, err
	}
	now := c.now()
	start := in.Start
	if start.IsZero() {
		start = now
	}
	end := in.End
	dur := in.Duration
	if end.IsZero() && dur > 0 {
		end = start.Add(dur)
	}
	if dur == 0 && !end.IsZero() {
		dur = end.Sub(start)
	}
	horizon := in.Horizon
	if horizon.IsZero() {
		limits, _ := c.policy.Resolve(a.Role, in.Project)
		horizon = now.Add(limits.Horizon)
	}
	var hops []reserve.Hop
	if len(in.Path) > 0 {
		var err error
		if hops, err = c.topo.hops(in.From, in.Path); err != nil {
			return reserve.Result{}, err
		}
	}
	needWindow := func() error {
		if end.IsZero() {
			return &reserve.RequestError{Field: "duration", Message: "give a duration or an end"}
		}
		if !end.After(start) {
			return &reserve.RequestError{Field: "end", Message: "the end must be after the start"}
		}
		return nil
	}
	needBW := func() error {
		if in.Bandwidth == 0 {
			return &reserve.RequestError{Field: "bandwidth_bps", Message: "give the bandwidth"}
		}
		return nil
	}
	var (
		res reserve.Result
		err error
	)
	switch in.Mode {
	case FindFixed, "":
		if err := errors.Join(needBW(), needWindow()); err != nil {
			return res, firstErr(err)
		}
		if hops != nil {
			if err = c.sched.Admit(hops, in.Bandwidth, start, end); err == nil {
				res = reserve.Result{Algorithm: "admission-given-path", Path: hops, Bandwidth: in.Bandwidth, Start: start, End: end}
			}
		} else {
			res, err = c.sched.FixedSlot(reserve.Request{From: in.From, To: in.To, Bandwidth: in.Bandwidth, Start: start, End: end})
		}
	case FindWidest:
		if err := needWindow(); err != nil {
			return res, err
		}
		res, err = c.sched.WidestPath(in.From, in.To, start, end)
	case FindEarliest, FindAll:
		if err := errors.Join(needBW(), needWindow()); err != nil {
			return res, firstErr(err)
		}
		q := reserve.StartQuery{From: in.From, To: in.To, Path: hops, Bandwidth: in.Bandwidth, Duration: dur, NotBefore: start, Horizon: horizon}
		if in.Mode == FindEarliest {
			res, err = c.sched.EarliestStart(q)
		} else {
			res, err = c.sched.AllStarts(q)
		}
	case FindCompletion:
		if in.SizeBytes == 0 {
			return res, &reserve.RequestError{Field: "size_bytes", Message: "give the size of the data"}
		}
		res, err = c.sched.EarliestCompletion(reserve.CompletionQuery{From: in.From, To: in.To, Path: hops, Size: in.SizeBytes, MaxRate: in.Bandwidth, NotBefore: start, Horizon: horizon})
	default:
		return res, &reserve.RequestError{Field: "mode", Message: fmt.Sprintf("mode %q: want fixed, widest, earliest, all or completion", in.Mode)}
	}
	if err != nil {
		if in.Mode == FindFixed || in.Mode == "" {
			return res, c.refuse(err, reserve.Reservation{From: in.From, To: in.To, Bandwidth: in.Bandwidth, Start: start, End: end}, horizon)
		}
		if errors.Is(err, reserve.ErrCapacity) || errors.Is(err, reserve.ErrNoPath) || errors.Is(err, reserve.ErrNoSlot) {
			return res, &Refusal{Err: fmt.Errorf("%w: %v", reserve.ErrCapacity, err)}
		}
		return res, queryError(err)
	}
	if in.Mode != FindAll {
		// A slot offered is one create admits: the policy's longest
		// reservation, bandwidth and project limits hold for it too.
		req := reserve.Reservation{Owner: a.Name, Project: in.Project, From: in.From, To: in.To,
			Bandwidth: res.Bandwidth, Start: res.Start, End: res.End}
		if err := reserve.CheckPolicy(c.policy, a.Role, req, c.projectLive(in.Project), now); err != nil {
			return reserve.Result{}, err
		}
	}
	return res, nil
}

func firstErr(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
		return j.Unwrap()[0]
	}
	return err
}

// Get returns a reservation the actor may see.
func (c *Controller) Get(ctx context.Context, a Actor, id string) (reserve.Reservation, error) {
	r, err := c.st.GetReservation(ctx, id)
	if err != nil {
		return r, err
	}
	if !a.Sees(r.Owner) {
		return reserve.Reservation{}, notFound("reservation", id)
	}
	return r, nil
}

// List lists the reservations the actor may see that match f.
func (c *Controller) List(ctx context.Context, a Actor, f store.Filter) ([]reserve.Reservation, error) {
	if !a.SeesAll() {
		if f.Owner != "" && f.Owner != a.Name {
			return nil, forbidden("only operators and admins may list someone else's reservations")
		}
		f.Owner = a.Name
	}
	return c.st.ListReservations(ctx, f)
}

// ModifyInput changes a reservation; zero fields stay as they are.
type ModifyInput struct {
	Version   uint64
	Start     time.Time
	End       time.Time
	Bandwidth uint64
	Path      []string
	Reroute   bool
	// FlowSpec, when set, replaces the flow spec of a reservation that
	// has one (one that steers flows, with a DSCP).
	FlowSpec string
}

// Modify extends, shortens, changes the bandwidth of, or moves a
// reservation, only if the result is still admissible: the reservation's
// own booking is set aside while the new one is checked, and put back
// if the new one does not fit.
func (c *Controller) Modify(ctx context.Context, a Actor, id string, in ModifyInput) (Created, error) {
	if in.Version == 0 {
		return Created{}, &reserve.RequestError{Field: "version", Message: "version is required: send the version you read, so a change made since is not overwritten"}
	}
	if a.Role == reserve.RoleAgent {
		return Created{}, forbidden("agents do not modify reservations")
	}
	if len(in.Path) > 0 && in.Reroute {
		return Created{}, &reserve.RequestError{Field: "reroute", Message: "give a path or ask to reroute, not both"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, err := c.current(ctx, a, id)
	if err != nil {
		return Created{}, err
	}
	if old.Version != in.Version {
		return Created{}, &reserve.StaleVersionError{ID: id, Current: old.Version, Given: in.Version}
	}
	if !old.State.Live() {
		return Created{}, &reserve.TransitionError{ID: id, State: old.State, Event: reserve.EventModify, Reason: "it has ended"}
	}
	now := c.now()
	upd := old
	upd.History = nil
	if !in.Start.IsZero() {
		upd.Start = in.Start
	}
	if !in.End.IsZero() {
		upd.End = in.End
	}
	if in.Bandwidth != 0 {
		upd.Bandwidth = in.Bandwidth
	}
	var flows *reserve.FlowSpec
	if in.FlowSpec != "" {
		fs, err := reserve.ParseFlowSpec(in.FlowSpec)
		if err != nil {
			return Created{}, err
		}
		if old.FlowSpec.IsZero() {
			return Created{}, &reserve.RequestError{Field: "flow_spec", Message: "the reservation steers no flows (it was booked without a flow spec, so it has no DSCP): book one with a flow spec"}
		}
		upd.FlowSpec = fs
		if err := c.checkFlows(upd); err != nil {
			return Created{}, err
		}
		flows = &fs
	}
	role := a.Role
	if err := reserve.CheckModify(c.policy, role, old, upd, c.projectLive(old.Project), now); err != nil {
		return Created{}, err
	}
	limits, _ := c.policy.Resolve(role, old.Project)
	horizon := now.Add(limits.Horizon)

	if _, err := c.sched.Remove(id); err != nil {
		return Created{}, fmt.Errorf("modify %s: %w", id, err)
	}
	restore := func() {
		if err := c.sched.Add(booking(old)); err != nil {
			c.log.Error("restore booking", "id", id, "err", err)
		}
	}
	algorithm := "admission-kept-path"
	hops := toHops(old.Path)
	if len(in.Path) > 0 {
		if hops, err = c.topo.hops(old.From, in.Path); err != nil {
			restore()
			return Created{}, err
		}
		if err := c.topo.Graph.ValidatePath(old.From, old.To, hops); err != nil {
			restore()
			return Created{}, &reserve.RequestError{Field: "path", Message: err.Error()}
		}
		algorithm = "admission-given-path"
	}
	if in.Reroute {
		res, err := c.sched.FixedSlotAvoiding(reserve.Request{From: upd.From, To: upd.To, Bandwidth: upd.Bandwidth, Start: upd.Start, End: upd.End}, c.downLinks())
		if err != nil {
			rerr := c.refuse(err, upd, horizon)
			restore()
			return Created{}, rerr
		}
		hops, algorithm = res.Path, res.Algorithm
	} else if err := c.sched.Admit(hops, upd.Bandwidth, upd.Start, upd.End); err != nil {
		rerr := c.refuse(err, upd, horizon)
		restore()
		return Created{}, rerr
	}
	restore()
	upd.Path = toPathHops(hops)
	if xs := reserve.ExclusiveConflicts(old.Owner, upd.Nodes(), upd.Start, upd.End, c.exclusives(), now); len(xs) > 0 {
		return Created{}, &reserve.ExclusiveConflictError{Holds: xs, Message: "the new path or window crosses nodes held exclusively by others"}
	}
	ch := reserve.Modification{FlowSpec: flows}
	if !upd.Start.Equal(old.Start) {
		ch.Start = upd.Start
	}
	if !upd.End.Equal(old.End) {
		ch.End = upd.End
	}
	if upd.Bandwidth != old.Bandwidth {
		ch.Bandwidth = upd.Bandwidth
	}
	pathChanged := !slices.Equal(upd.Path, old.Path)
	if pathChanged {
		ch.Path = upd.Path
		ch.ManagedNodes = c.managedOn(upd.From, upd.To, upd.Path, now)
	}
	if !old.FlowSpec.IsZero() && (pathChanged || ch.Start != (time.Time{}) || ch.End != (time.Time{})) {
		v, err := reserve.AllocateDSCP(c.pool, upd, c.overlapping(upd.Nodes(), upd.Start, upd.End))
		if err != nil {
			return Created{}, err
		}
		if v != old.DSCP {
			ch.DSCP = v
		}
	}
	n, tr, err := reserve.Next(old, reserve.Event{Kind: reserve.EventModify, By: a.Name, Version: in.Version, Change: ch}, now)
	if err != nil {
		return Created{}, err
	}
	if tr.IsZero() {
		return Created{Reservation: old, Algorithm: algorithm}, nil
	}
	if err := c.record(ctx, old, n, store.AuditEntry{At: now, Who: a.Name, What: "modify " + id, Detail: tr.Why}, tr); err != nil {
		return Created{}, err
	}
	return Created{Reservation: n, Algorithm: algorithm}, nil
}

// current returns the reservation as it stands now for a change by a:
// from memory when live, with any timed event caught up first (the clock
// loop may not have run yet), else from the store. The caller holds mu.
func (c *Controller) current(ctx context.Context, a Actor, id string) (reserve.Reservation, error) {
	r, ok := c.live[id]
	if !ok {
		var err error
		if r, err = c.st.GetReservation(ctx, id); err != nil {
			return r, err
		}
	}
	// Agents report on any reservation; Commit, Cancel and Modify turn
	// them away before this.
	if !a.Sees(r.Owner) && a.Role != reserve.RoleAgent {
		return reserve.Reservation{}, notFound("reservation", id)
	}
	if !ok {
		return r, nil
	}
	return c.catchUp(ctx, r, c.now())
}

// Commit commits a HELD reservation.
func (c *Controller) Commit(ctx context.Context, a Actor, id string, version uint64) (reserve.Reservation, error) {
	if a.Role == reserve.RoleAgent {
		return reserve.Reservation{}, forbidden("agents do not commit reservations")
	}
	return c.event(ctx, a, id, reserve.Event{Kind: reserve.EventCommit, By: a.Name, Version: version})
}

// Cancel cancels a reservation, recording why.
func (c *Controller) Cancel(ctx context.Context, a Actor, id string, version uint64, why string) (reserve.Reservation, error) {
	if a.Role == reserve.RoleAgent {
		return reserve.Reservation{}, forbidden("agents do not cancel reservations")
	}
	return c.event(ctx, a, id, reserve.Event{Kind: reserve.EventCancel, By: a.Name, Version: version, Why: why})
}

func (c *Controller) event(ctx context.Context, a Actor, id string, ev reserve.Event) (reserve.Reservation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.current(ctx, a, id)
	if err != nil {
		return r, err
	}
	return c.change(ctx, r, ev, c.now())
}
