package reserve

import (
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/lightpath/lightpath/internal/units"
)

// Role is what a user of the controller is allowed to do. The API decides
// who may call what; policy decides how much each may book.
type Role string

// The roles (issue 4, item 6).
const (
	RoleUser     Role = "user"     // books and manages their own reservations
	RoleOperator Role = "operator" // sees and manages everyone's
	RoleAdmin    Role = "admin"    // also manages topology, users and policies
	RoleAgent    Role = "agent"    // a node agent: reports provisioning, never books
)

// Roles lists every role.
var Roles = []Role{RoleUser, RoleOperator, RoleAdmin, RoleAgent}

// ParseRole parses a lower-case role name as it appears in the API and CLI.
func ParseRole(s string) (Role, error) {
	if r := Role(s); slices.Contains(Roles, r) {
		return r, nil
	}
	return "", resvErrorf(ErrInvalid, "unknown role %q: want user, operator, admin or agent", s)
}

// Built-in limits, used wherever a Policy leaves a field unset.
const (
	// DefaultMaxDuration is DataTAG's rule: at most 8 hours in a row.
	DefaultMaxDuration = 8 * time.Hour
	// DefaultHorizon is six months ahead: 184 days, the longest run of six
	// calendar months, so "the same day six months from now" always fits.
	DefaultHorizon = 184 * 24 * time.Hour
	// StartGrace is how far in the past a start may lie and still count as
	// "now": a client resolves "now" before its request travels, and its
	// clock may be a little behind the controller's.
	StartGrace = 10 * time.Second
	// DefaultMaxJobs and DefaultMaxProjectJobs bound the unfinished
	// transfer jobs of a user and of a project where no level of the
	// Policy sets them: every waiting job is a row the service keeps and
	// answers for, so none is unbounded by default (issue 28).
	DefaultMaxJobs        = 500
	DefaultMaxProjectJobs = 2000
)

// UnlimitedDuration and UnlimitedBandwidth set a limit to "none" where a
// less specific level of the Policy has one (zero would mean "inherit").
// They are the largest values, so comparisons need no special case.
const (
	UnlimitedDuration  = time.Duration(math.MaxInt64)
	UnlimitedBandwidth = uint64(math.MaxUint64)
)

// Limits bounds what may be booked. A zero field is unset: it inherits from
// the less specific level (see Policy). MinDuration can be lifted to
// "none" with 1ns.
type Limits struct {
	MaxDuration time.Duration `json:"max_duration,omitempty"`
	MinDuration time.Duration `json:"min_duration,omitempty"`
	// Horizon is how far ahead a reservation may end. It bounds the end,
	// not the start, so the bookings the scheduler keeps never reach past
	// now + Horizon.
	Horizon time.Duration `json:"horizon,omitempty"`
	// MaxBandwidth bounds one reservation, in bits per second.
	MaxBandwidth uint64 `json:"max_bandwidth_bps,omitempty"`
	// MaxProjectBandwidth bounds the sum of a project's live reservations
	// at any instant, in bits per second.
	MaxProjectBandwidth uint64 `json:"max_project_bandwidth_bps,omitempty"`
	// MaxJobs bounds the unfinished transfer jobs (QUEUED, SCHEDULED or
	// ACTIVE) one user may have at once, whatever their project
	// (DefaultMaxJobs when no level sets it). UnlimitedJobs lifts an
	// inherited limit.
	MaxJobs int `json:"max_jobs,omitempty"`
	// MaxProjectJobs bounds a project's unfinished transfer jobs, every
	// member's together (DefaultMaxProjectJobs when no level sets it).
	MaxProjectJobs int `json:"max_project_jobs,omitempty"`
}

// UnlimitedJobs sets MaxJobs or MaxProjectJobs to "none" where a less
// specific level of the Policy has one.
const UnlimitedJobs = math.MaxInt32

// Policy holds the limits per role and per project. Each field of the
// effective limits comes from the most specific level that sets it:
// the project, then the requester's role, then Default, then the built-in
// defaults (8 h, 6 months, the rest unlimited). Projects beat roles because
// a project's limits are its negotiated share (a project bandwidth quota
// only makes sense per project), while a role's are the general rule; an
// admin who wants operators exempt from a project's cap lifts it in the
// project. The zero Policy is usable: it is the built-in defaults.
type Policy struct {
	Default  Limits            `json:"default"`
	Roles    map[Role]Limits   `json:"roles,omitempty"`
	Projects map[string]Limits `json:"projects,omitempty"`
}

// LimitSources says where each effective limit came from ("project cms",
// "role user", "default"), so a refusal can tell the user whom to ask.
type LimitSources struct {
	MaxDuration, MinDuration, Horizon, MaxBandwidth, MaxProjectBandwidth string
	MaxJobs, MaxProjectJobs                                              string
}

// Validate checks a policy an admin submits: known roles, no negative
// durations, and no level whose minimum duration exceeds its maximum.
func (p Policy) Validate() error {
	check := func(where string, l Limits) error {
		switch {
		case l.MaxDuration < 0 || l.MinDuration < 0 || l.Horizon < 0:
			return &RequestError{Field: "policy", Message: fmt.Sprintf("%s: durations must not be negative", where)}
		case l.MaxJobs < 0 || l.MaxProjectJobs < 0:
			return &RequestError{Field: "policy", Message: fmt.Sprintf("%s: job limits must not be negative", where)}
		case l.MaxDuration != 0 && l.MinDuration > l.MaxDuration:
			return &RequestError{Field: "policy", Message: fmt.Sprintf("%s: minimum duration %s exceeds maximum %s", where, stFormatDuration(l.MinDuration), stFormatDuration(l.MaxDuration))}
		}
		return nil
	}
	if err := check("default", p.Default); err != nil {
		return err
	}
	for _, r := range slices.Sorted(maps.Keys(p.Roles)) {
		if !slices.Contains(Roles, r) {
			return &RequestError{Field: "policy", Message: fmt.Sprintf("unknown role %q", r)}
		}
		if err := check("role "+string(r), p.Roles[r]); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Projects)) {
		if err := check("project "+name, p.Projects[name]); err != nil {
			return err
		}
	}
	return nil
}

// Resolve returns the effective limits for a request by role in project
// (which may be empty), and where each came from.
func (p Policy) Resolve(role Role, project string) (Limits, LimitSources) {
	type level struct {
		name string
		l    Limits
	}
	levels := []level{{"default", p.Default}}
	if l, ok := p.Roles[role]; ok {
		levels = append(levels, level{"role " + string(role), l})
	}
	if l, ok := p.Projects[project]; ok && project != "" {
		levels = append(levels, level{"project " + project, l})
	}
	eff := Limits{MaxDuration: DefaultMaxDuration, Horizon: DefaultHorizon, MaxJobs: DefaultMaxJobs, MaxProjectJobs: DefaultMaxProjectJobs}
	src := LimitSources{"default", "default", "default", "default", "default", "default", "default"}
	for _, lv := range levels { // least specific first, so later levels win
		if lv.l.MaxDuration != 0 {
			eff.MaxDuration, src.MaxDuration = lv.l.MaxDuration, lv.name
		}
		if lv.l.MinDuration != 0 {
			eff.MinDuration, src.MinDuration = lv.l.MinDuration, lv.name
		}
		if lv.l.Horizon != 0 {
			eff.Horizon, src.Horizon = lv.l.Horizon, lv.name
		}
		if lv.l.MaxBandwidth != 0 {
			eff.MaxBandwidth, src.MaxBandwidth = lv.l.MaxBandwidth, lv.name
		}
		if lv.l.MaxProjectBandwidth != 0 {
			eff.MaxProjectBandwidth, src.MaxProjectBandwidth = lv.l.MaxProjectBandwidth, lv.name
		}
		if lv.l.MaxJobs != 0 {
			eff.MaxJobs, src.MaxJobs = lv.l.MaxJobs, lv.name
		}
		if lv.l.MaxProjectJobs != 0 {
			eff.MaxProjectJobs, src.MaxProjectJobs = lv.l.MaxProjectJobs, lv.name
		}
	}
	return eff, src
}

// PolicyRule names the rule a PolicyError broke, for clients that react to
// one in particular (a CLI that offers to split a long transfer, say).
type PolicyRule string

// The rules CheckPolicy enforces.
const (
	RuleRole                PolicyRule = "role"
	RuleMaxDuration         PolicyRule = "max_duration"
	RuleMinDuration         PolicyRule = "min_duration"
	RuleHorizon             PolicyRule = "horizon"
	RuleMaxBandwidth        PolicyRule = "max_bandwidth"
	RuleMaxProjectBandwidth PolicyRule = "max_project_bandwidth"
)

// PolicyError is a well-formed request that policy does not allow (403).
// Message is complete and names the limit and where it comes from.
type PolicyError struct {
	Rule    PolicyRule
	Message string
}

// Error returns the message alone: it already names the limit and its source.
func (e *PolicyError) Error() string { return e.Message }

// Unwrap makes a PolicyError match ErrForbidden.
func (e *PolicyError) Unwrap() error { return ErrForbidden }

// ValidateRequest checks what every new reservation request must satisfy
// whatever the policy (400): both ends named and different, bandwidth
// above zero, an end after the start, and a start not in the past (give
// or take StartGrace).
func ValidateRequest(req Reservation, now time.Time) error {
	return polValidate(req, now, false)
}

// polValidate is ValidateRequest; startKept skips the "not in the past"
// rule for a modification that leaves an already passed start alone.
func polValidate(req Reservation, now time.Time, startKept bool) error {
	switch {
	case req.From == "":
		return &RequestError{Field: "from", Message: "from: a node is required"}
	case req.To == "":
		return &RequestError{Field: "to", Message: "to: a node is required"}
	case req.From == req.To:
		return &RequestError{Field: "to", Message: fmt.Sprintf("from and to are the same node %q: a reservation joins two nodes", req.From)}
	case req.Bandwidth == 0:
		return &RequestError{Field: "bandwidth_bps", Message: "bandwidth must be greater than zero"}
	case req.Start.IsZero():
		return &RequestError{Field: "start", Message: "start: a time is required"}
	case req.End.IsZero():
		return &RequestError{Field: "end", Message: "end: a time (or a duration) is required"}
	case !req.End.After(req.Start):
		return &RequestError{Field: "end", Message: fmt.Sprintf("end %s is not after start %s", stFormatTime(req.End), stFormatTime(req.Start))}
	case !startKept && req.Start.Before(now.Add(-StartGrace)):
		return &RequestError{Field: "start", Message: fmt.Sprintf("start %s is in the past (it is now %s)", stFormatTime(req.Start), stFormatTime(now))}
	}
	return nil
}

// CheckPolicy checks a new reservation request by a requester with role
// against policy p, given the other reservations that exist (any project,
// any state: only the live ones of req's project count). It first runs
// ValidateRequest, so one call answers both "is it well-formed" (a
// *RequestError, 400) and "is it allowed" (a *PolicyError, 403). Capacity
// is not its concern: admission is checked on the schedule.
func CheckPolicy(p Policy, role Role, req Reservation, existing []Reservation, now time.Time) error {
	if err := ValidateRequest(req, now); err != nil {
		return err
	}
	return polCheck(p, role, req, existing, now)
}

// CheckModify is CheckPolicy for a modification of old into updated by a
// requester with role: the start may stay where it is even though it has
// passed, and old itself is not counted against its project's limit
// (updated replaces it).
func CheckModify(p Policy, role Role, old, updated Reservation, existing []Reservation, now time.Time) error {
	if err := polValidate(updated, now, updated.Start.Equal(old.Start)); err != nil {
		return err
	}
	if updated.ID == "" {
		updated.ID = old.ID
	}
	return polCheck(p, role, updated, existing, now)
}

func polCheck(p Policy, role Role, req Reservation, existing []Reservation, now time.Time) error {
	lim, src, err := polTime(p, role, req.Project, req.Start, req.End, now, "book reservations")
	if err != nil {
		return err
	}
	if lim.MaxBandwidth != 0 && req.Bandwidth > lim.MaxBandwidth {
		got, limit := polRates(req.Bandwidth, lim.MaxBandwidth)
		return &PolicyError{Rule: RuleMaxBandwidth, Message: fmt.Sprintf("bandwidth %s exceeds the %s maximum per reservation for %s", got, limit, polFor(src.MaxBandwidth))}
	}
	if lim.MaxProjectBandwidth != 0 && req.Project != "" {
		peak, at := polProjectPeak(req, existing)
		total := peak
		total.add(req.Bandwidth)
		if total.greater(lim.MaxProjectBandwidth) {
			return &PolicyError{Rule: RuleMaxProjectBandwidth, Message: fmt.Sprintf(
				"project %s would have %s reserved at %s, over the %s limit for %s: %s is already reserved then",
				req.Project, polRate(total.sat()), stFormatTime(at), polRate(lim.MaxProjectBandwidth), polFor(src.MaxProjectBandwidth), polRate(peak.sat()))}
		}
	}
	return nil
}

// polTime checks what every booking, reservation or exclusive hold, must
// keep: a role that may book (what names what it would do), and a window
// within the duration limits and the horizon resolved for role and
// project, which it returns for the checks that follow.
func polTime(p Policy, role Role, project string, start, end, now time.Time, what string) (Limits, LimitSources, error) {
	switch role {
	case RoleUser, RoleOperator, RoleAdmin:
	case RoleAgent:
		return Limits{}, LimitSources{}, &PolicyError{Rule: RuleRole, Message: fmt.Sprintf("role agent cannot %s: agents only report on their nodes", what)}
	default:
		return Limits{}, LimitSources{}, &PolicyError{Rule: RuleRole, Message: fmt.Sprintf("unknown role %q cannot %s", role, what)}
	}
	lim, src := p.Resolve(role, project)
	d := end.Sub(start)
	switch {
	case d > lim.MaxDuration:
		return lim, src, &PolicyError{Rule: RuleMaxDuration, Message: fmt.Sprintf("duration %s exceeds the %s maximum for %s", stFormatDuration(d), stFormatDuration(lim.MaxDuration), polFor(src.MaxDuration))}
	case d < lim.MinDuration:
		return lim, src, &PolicyError{Rule: RuleMinDuration, Message: fmt.Sprintf("duration %s is below the %s minimum for %s", stFormatDuration(d), stFormatDuration(lim.MinDuration), polFor(src.MinDuration))}
	case end.Sub(now) > lim.Horizon:
		return lim, src, &PolicyError{Rule: RuleHorizon, Message: fmt.Sprintf("end %s is beyond the booking horizon of %s for %s: book to end by %s", stFormatTime(end), stFormatDuration(lim.Horizon), polFor(src.Horizon), stFormatTime(now.Add(lim.Horizon)))}
	}
	return lim, src, nil
}

// JobLimit is a job refused by the policy's MaxJobs or MaxProjectJobs:
// Rule is "max_jobs" or "max_project_jobs", Max the limit, Message names
// it, where it comes from, and what to do.
type JobLimit struct {
	Rule    string
	Max     int
	Message string
}

// CheckJobs checks a new transfer job of user with role in project (may
// be empty) against p, given how many unfinished jobs the user has
// (userJobs) and the project has (projectJobs, every member's). It
// returns nil when the job fits.
func CheckJobs(p Policy, role Role, user, project string, userJobs, projectJobs int) *JobLimit {
	lim, src := p.Resolve(role, project)
	raise := func(source, field string) string {
		if source == "default" {
			return fmt.Sprintf("an admin raises it in the policy's default %s (PUT /api/v1/policy)", field)
		}
		return fmt.Sprintf("an admin raises it in the policy's %s %s (PUT /api/v1/policy)", source, field)
	}
	if lim.MaxJobs != 0 && userJobs >= lim.MaxJobs {
		return &JobLimit{Rule: "max_jobs", Max: lim.MaxJobs, Message: fmt.Sprintf(
			"user %s has %d unfinished jobs, the most allowed (max_jobs %d for %s): wait for one to end or cancel one (lightpath transfer cancel ID), or %s",
			user, userJobs, lim.MaxJobs, polFor(src.MaxJobs), raise(src.MaxJobs, "max_jobs"))}
	}
	if lim.MaxProjectJobs != 0 && project != "" && projectJobs >= lim.MaxProjectJobs {
		return &JobLimit{Rule: "max_project_jobs", Max: lim.MaxProjectJobs, Message: fmt.Sprintf(
			"project %s has %d unfinished jobs, the most allowed (max_project_jobs %d for %s): wait for one to end, or %s",
			project, projectJobs, lim.MaxProjectJobs, polFor(src.MaxProjectJobs), raise(src.MaxProjectJobs, "max_project_jobs"))}
	}
	return nil
}

// polFor names a limit's source for a message: "role user", "project cms",
// or "everyone" for the defaults.
func polFor(source string) string {
	if source == "default" {
		return "everyone"
	}
	return source
}

func polRate(bps uint64) string { return units.FormatRate(float64(bps)) }

// polRates formats a rate and the limit it broke, exactly when three
// digits would print them the same ("10.0 Gbit/s exceeds 10.0 Gbit/s").
func polRates(got, limit uint64) (string, string) {
	if g, l := polRate(got), polRate(limit); g != l {
		return g, l
	}
	return fmt.Sprintf("%d bit/s", got), fmt.Sprintf("%d bit/s", limit)
}

// polSum is a 128-bit sum of bandwidths, so that many large reservations
// cannot wrap around to a small total and slip under a limit.
type polSum struct{ hi, lo uint64 }

func (s *polSum) add(v uint64) {
	var c uint64
	s.lo, c = bits.Add64(s.lo, v, 0)
	s.hi += c
}

func (s *polSum) sub(v uint64) {
	var b uint64
	s.lo, b = bits.Sub64(s.lo, v, 0)
	s.hi -= b
}

func (s polSum) greater(v uint64) bool { return s.hi > 0 || s.lo > v }

func (s polSum) less(o polSum) bool {
	return s.hi < o.hi || (s.hi == o.hi && s.lo < o.lo)
}

// sat is s as a uint64, saturated, for messages.
func (s polSum) sat() uint64 {
	if s.hi > 0 {
		return math.MaxUint64
	}
	return s.lo
}

// polProjectPeak returns the highest total bandwidth of req's project's
// other live reservations at any instant of req's window, and the first
// instant it is reached (req.Start when the project has none then). It is
// exact: it sums every reservation at every breakpoint, applying all the
// changes of one instant before measuring, so two reservations that start
// at the same instant are both counted (the OSCARS overbooking case), and
// one that ends where another starts is not counted with it (windows are
// half open).
func polProjectPeak(req Reservation, existing []Reservation) (polSum, time.Time) {
	type change struct {
		at    time.Time
		delta uint64
		end   bool
	}
	var changes []change
	for _, o := range existing {
		if o.Project != req.Project || !o.State.Live() || (req.ID != "" && o.ID == req.ID) || !o.Overlaps(req) {
			continue
		}
		s, e := o.Start, o.End
		if s.Before(req.Start) {
			s = req.Start
		}
		if e.After(req.End) {
			e = req.End
		}
		changes = append(changes, change{s, o.Bandwidth, false}, change{e, o.Bandwidth, true})
	}
	slices.SortFunc(changes, func(a, b change) int { return a.at.Compare(b.at) })
	var cur, peak polSum
	at := req.Start
	for i := 0; i < len(changes); {
		t := changes[i].at
		for ; i < len(changes) && changes[i].at.Equal(t); i++ {
			if changes[i].end {
				cur.sub(changes[i].delta)
			} else {
				cur.add(changes[i].delta)
			}
		}
		if peak.less(cur) {
			peak, at = cur, t
		}
	}
	return peak, at
}
