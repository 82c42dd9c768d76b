package reserve

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

const rsvGbps = 1_000_000_000

// rsvReq is a request at rsvT0 for 1 Gbit/s in project cms, starting in an
// hour and lasting d.
func rsvReq(d time.Duration) Reservation {
	r := rsvDraft(false)
	r.ID = ""
	r.End = r.Start.Add(d)
	return r
}

// rsvLive is an existing live reservation of project for bw Gbit/s over
// [rsvT0+from, rsvT0+to).
func rsvLive(id, project string, bw uint64, from, to time.Duration) Reservation {
	return Reservation{ID: id, Project: project, From: "h1", To: "h2", State: StateReserved,
		Bandwidth: bw * rsvGbps, Start: rsvT0.Add(from), End: rsvT0.Add(to)}
}

func TestValidateRequest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		change    func(*Reservation)
		wantField string // "" means valid
	}{
		{"valid", func(*Reservation) {}, ""},
		{"no from", func(r *Reservation) { r.From = "" }, "from"},
		{"no to", func(r *Reservation) { r.To = "" }, "to"},
		{"from = to", func(r *Reservation) { r.To = r.From }, "to"},
		{"zero bandwidth", func(r *Reservation) { r.Bandwidth = 0 }, "bandwidth_bps"},
		{"no start", func(r *Reservation) { r.Start = time.Time{} }, "start"},
		{"no end", func(r *Reservation) { r.End = time.Time{} }, "end"},
		{"end = start", func(r *Reservation) { r.End = r.Start }, "end"},
		{"end before start", func(r *Reservation) { r.End = r.Start.Add(-time.Second) }, "end"},
		{"start now", func(r *Reservation) { r.Start = rsvT0 }, ""},
		{"start just within the grace", func(r *Reservation) { r.Start = rsvT0.Add(-StartGrace) }, ""},
		{"start just past the grace", func(r *Reservation) { r.Start = rsvT0.Add(-StartGrace - time.Nanosecond) }, "start"},
		{"start an hour ago", func(r *Reservation) { r.Start = rsvT0.Add(-time.Hour) }, "start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rsvReq(time.Hour)
			tc.change(&r)
			err := ValidateRequest(r, rsvT0)
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			var re *RequestError
			if !errors.As(err, &re) || re.Field != tc.wantField || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v, want a RequestError on %s", err, tc.wantField)
			}
		})
	}
}

func TestCheckPolicy(t *testing.T) {
	userMax := Policy{Roles: map[Role]Limits{RoleUser: {MaxDuration: 8 * time.Hour}}}
	cmsLong := Policy{
		Roles:    map[Role]Limits{RoleUser: {MaxDuration: 8 * time.Hour}, RoleAdmin: {MaxDuration: UnlimitedDuration, Horizon: UnlimitedDuration}},
		Projects: map[string]Limits{"cms": {MaxDuration: 24 * time.Hour}},
	}
	minimum := Policy{Default: Limits{MinDuration: 5 * time.Minute}}
	bw := Policy{Default: Limits{MaxBandwidth: 10 * rsvGbps}}
	quota := Policy{Projects: map[string]Limits{"cms": {MaxProjectBandwidth: 10 * rsvGbps}}}
	gbps := func(n uint64) func(*Reservation) { return func(r *Reservation) { r.Bandwidth = n * rsvGbps } }

	// Two equal reservations that start at the same instant: OSCARS counted
	// them once.
	sameInstant := []Reservation{rsvLive("a", "cms", 4, time.Hour, 2*time.Hour), rsvLive("b", "cms", 4, time.Hour, 2*time.Hour)}
	// Staggered: A [0,2h) and B [1h,3h) overlap on [1h,2h), B and C [2h,4h)
	// on [2h,3h); A ends as C starts, so no instant has all three (12 Gbit/s).
	staggered := []Reservation{
		rsvLive("a", "cms", 4, 0, 2*time.Hour),
		rsvLive("b", "cms", 4, time.Hour, 3*time.Hour),
		rsvLive("c", "cms", 4, 2*time.Hour, 4*time.Hour),
	}
	// Ones that must not count: another project, over, touching the window
	// at either end, and the request itself.
	ignored := []Reservation{
		rsvLive("x", "atlas", 9, time.Hour, 2*time.Hour),
		func() Reservation {
			r := rsvLive("y", "cms", 9, time.Hour, 2*time.Hour)
			r.State = StateCancelled
			return r
		}(),
		rsvLive("z", "cms", 9, 0, time.Hour),
		rsvLive("w", "cms", 9, 2*time.Hour, 3*time.Hour),
	}
	held := []Reservation{func() Reservation { r := rsvLive("h", "cms", 9, time.Hour, 2*time.Hour); r.State = StateHeld; return r }()}

	for _, tc := range []struct {
		name     string
		p        Policy
		role     Role
		d        time.Duration
		change   func(*Reservation)
		existing []Reservation
		wantRule PolicyRule // "" means allowed
		wantMsg  string
	}{
		{name: "defaults allow 8h", role: RoleUser, d: 8 * time.Hour},
		{name: "defaults refuse 8h and a nanosecond", role: RoleUser, d: 8*time.Hour + time.Nanosecond, wantRule: RuleMaxDuration, wantMsg: "for everyone"},
		{name: "user 9h", p: userMax, role: RoleUser, d: 9 * time.Hour, wantRule: RuleMaxDuration, wantMsg: "duration 9h exceeds the 8h maximum for role user"},
		{name: "operator falls back to the default", p: userMax, role: RoleOperator, d: 9 * time.Hour, wantRule: RuleMaxDuration, wantMsg: "maximum for everyone"},
		{name: "project beats role", p: cmsLong, role: RoleUser, d: 24 * time.Hour},
		{name: "project's own maximum", p: cmsLong, role: RoleUser, d: 25 * time.Hour, wantRule: RuleMaxDuration, wantMsg: "duration 25h exceeds the 24h maximum for project cms"},
		{name: "role applies outside the project", p: cmsLong, role: RoleUser, d: 9 * time.Hour, change: func(r *Reservation) { r.Project = "atlas" }, wantRule: RuleMaxDuration, wantMsg: "role user"},
		{name: "unlimited admin", p: cmsLong, role: RoleAdmin, d: 200 * time.Hour, change: func(r *Reservation) { r.Project = "" }},
		{name: "unlimited horizon", p: cmsLong, role: RoleAdmin, d: time.Hour, change: func(r *Reservation) {
			r.Project, r.Start = "", rsvT0.AddDate(10, 0, 0)
			r.End = r.Start.Add(time.Hour)
		}},
		{name: "minimum met", p: minimum, role: RoleUser, d: 5 * time.Minute},
		{name: "below the minimum", p: minimum, role: RoleUser, d: 5*time.Minute - time.Second, wantRule: RuleMinDuration, wantMsg: "duration 4m59s is below the 5m minimum"},
		{name: "end at the horizon", role: RoleUser, d: time.Hour, change: func(r *Reservation) {
			r.End = rsvT0.Add(DefaultHorizon)
			r.Start = r.End.Add(-time.Hour)
		}},
		{name: "end past the horizon", role: RoleUser, d: time.Hour, change: func(r *Reservation) {
			r.End = rsvT0.Add(DefaultHorizon + time.Second)
			r.Start = r.End.Add(-time.Hour)
		}, wantRule: RuleHorizon, wantMsg: "booking horizon of 184 days for everyone"},
		{name: "bandwidth at the maximum", p: bw, role: RoleUser, d: time.Hour, change: gbps(10)},
		{name: "bandwidth over the maximum", p: bw, role: RoleUser, d: time.Hour, change: func(r *Reservation) { r.Bandwidth = 10*rsvGbps + 1 },
			wantRule: RuleMaxBandwidth, wantMsg: "bandwidth 10000000001 bit/s exceeds the 10000000000 bit/s maximum per reservation for everyone"},
		{name: "bandwidth far over the maximum", p: bw, role: RoleUser, d: time.Hour, change: gbps(40),
			wantRule: RuleMaxBandwidth, wantMsg: "bandwidth 40.0 Gbit/s exceeds the 10.0 Gbit/s maximum per reservation for everyone"},
		{name: "project quota filled exactly", p: quota, role: RoleUser, d: time.Hour, change: gbps(2), existing: sameInstant},
		{name: "project quota, two starting at the same instant", p: quota, role: RoleUser, d: time.Hour, change: gbps(3), existing: sameInstant,
			wantRule: RuleMaxProjectBandwidth, wantMsg: "project cms would have 11.0 Gbit/s reserved at 2026-03-01T11:00:00Z, over the 10.0 Gbit/s limit for project cms: 8.00 Gbit/s is already reserved then"},
		{name: "project quota, staggered, fits", p: quota, role: RoleUser, d: 4 * time.Hour, change: func(r *Reservation) {
			r.Start, r.End, r.Bandwidth = rsvT0, rsvT0.Add(4*time.Hour), 2*rsvGbps
		}, existing: staggered},
		{name: "project quota, staggered, over", p: quota, role: RoleUser, d: 4 * time.Hour, change: func(r *Reservation) {
			r.Start, r.End, r.Bandwidth = rsvT0, rsvT0.Add(4*time.Hour), 3*rsvGbps
		}, existing: staggered, wantRule: RuleMaxProjectBandwidth, wantMsg: "at 2026-03-01T11:00:00Z"},
		{name: "project quota ignores others, the over and the adjacent", p: quota, role: RoleUser, d: time.Hour, change: gbps(10), existing: ignored},
		{name: "project quota counts holds", p: quota, role: RoleUser, d: time.Hour, change: gbps(2), existing: held, wantRule: RuleMaxProjectBandwidth},
		{name: "project quota alone too big", p: quota, role: RoleUser, d: time.Hour, change: gbps(11), wantRule: RuleMaxProjectBandwidth},
		{name: "no project, no quota", p: quota, role: RoleUser, d: time.Hour, change: func(r *Reservation) { r.Project, r.Bandwidth = "", 50*rsvGbps }, existing: sameInstant},
		{name: "huge reservations do not wrap around", p: quota, role: RoleUser, d: time.Hour, change: gbps(1), existing: []Reservation{
			{ID: "m1", Project: "cms", State: StateActive, Bandwidth: 1 << 63, Start: rsvT0, End: rsvT0.Add(5 * time.Hour)},
			{ID: "m2", Project: "cms", State: StateActive, Bandwidth: 1 << 63, Start: rsvT0, End: rsvT0.Add(5 * time.Hour)},
		}, wantRule: RuleMaxProjectBandwidth},
		{name: "agents do not book", role: RoleAgent, d: time.Hour, wantRule: RuleRole},
		{name: "unknown role", role: "guest", d: time.Hour, wantRule: RuleRole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rsvReq(tc.d)
			if tc.change != nil {
				tc.change(&r)
			}
			err := CheckPolicy(tc.p, tc.role, r, tc.existing, rsvT0)
			if tc.wantRule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Rule != tc.wantRule || !errors.Is(err, ErrForbidden) {
				t.Fatalf("error %v, want a PolicyError for %s", err, tc.wantRule)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("message %q, want it to contain %q", err, tc.wantMsg)
			}
		})
	}
}

func TestCheckPolicyInvalidFirst(t *testing.T) {
	r := rsvReq(20 * time.Hour)
	r.Bandwidth = 0
	if err := CheckPolicy(Policy{}, RoleUser, r, nil, rsvT0); !errors.Is(err, ErrInvalid) || errors.Is(err, ErrForbidden) {
		t.Fatalf("error %v, want invalid (400) before forbidden (403)", err)
	}
}

func TestCheckModify(t *testing.T) {
	quota := Policy{Projects: map[string]Limits{"cms": {MaxProjectBandwidth: 10 * rsvGbps}}}
	old := rsvLive("me", "cms", 6, -time.Hour, time.Hour) // active, started an hour ago
	old.State = StateActive
	other := rsvLive("o", "cms", 4, 0, 2*time.Hour)
	for _, tc := range []struct {
		name    string
		change  func(*Reservation)
		wantErr error
	}{
		{"extend keeping a passed start", func(r *Reservation) { r.End = rsvT0.Add(2 * time.Hour) }, nil},
		{"move the start into the past", func(r *Reservation) { r.Start = rsvT0.Add(-30 * time.Minute) }, ErrInvalid},
		{"at the quota, not counting itself", func(r *Reservation) { r.Bandwidth = 6 * rsvGbps }, nil},
		{"grow past the quota", func(r *Reservation) { r.Bandwidth = 7 * rsvGbps }, ErrForbidden},
		{"extend past the maximum duration", func(r *Reservation) { r.End = rsvT0.Add(8 * time.Hour) }, ErrForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			upd := old
			tc.change(&upd)
			err := CheckModify(quota, RoleUser, old, upd, []Reservation{old, other}, rsvT0)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestPolicyResolveAndValidate(t *testing.T) {
	p := Policy{
		Default:  Limits{MaxBandwidth: 40 * rsvGbps},
		Roles:    map[Role]Limits{RoleOperator: {MaxDuration: 72 * time.Hour, MaxBandwidth: 100 * rsvGbps}},
		Projects: map[string]Limits{"cms": {MaxBandwidth: 20 * rsvGbps, MaxProjectBandwidth: 50 * rsvGbps}},
	}
	lim, src := p.Resolve(RoleOperator, "cms")
	want := Limits{MaxDuration: 72 * time.Hour, Horizon: DefaultHorizon, MaxBandwidth: 20 * rsvGbps, MaxProjectBandwidth: 50 * rsvGbps,
		MaxJobs: DefaultMaxJobs, MaxProjectJobs: DefaultMaxProjectJobs}
	wantSrc := LimitSources{MaxDuration: "role operator", MinDuration: "default", Horizon: "default", MaxBandwidth: "project cms", MaxProjectBandwidth: "project cms", MaxJobs: "default", MaxProjectJobs: "default"}
	if lim != want || src != wantSrc {
		t.Errorf("Resolve = %+v %+v\nwant %+v %+v", lim, src, want, wantSrc)
	}
	if lim, _ := (Policy{}).Resolve(RoleUser, ""); lim != (Limits{MaxDuration: DefaultMaxDuration, Horizon: DefaultHorizon, MaxJobs: DefaultMaxJobs, MaxProjectJobs: DefaultMaxProjectJobs}) {
		t.Errorf("zero policy resolves to %+v", lim)
	}

	for _, tc := range []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"zero", Policy{}, true},
		{"example", p, true},
		{"negative", Policy{Default: Limits{Horizon: -time.Hour}}, false},
		{"min over max", Policy{Projects: map[string]Limits{"x": {MinDuration: 2 * time.Hour, MaxDuration: time.Hour}}}, false},
		{"unknown role", Policy{Roles: map[Role]Limits{"root": {}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}

	for _, r := range Roles {
		if got, err := ParseRole(string(r)); got != r || err != nil {
			t.Errorf("ParseRole(%q) = %q, %v", r, got, err)
		}
	}
	if _, err := ParseRole("root"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseRole(root) = %v", err)
	}
}

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{8 * time.Hour, "8h"},
		{90 * time.Minute, "1h30m"},
		{15 * time.Minute, "15m"},
		{299 * time.Second, "4m59s"},
		{DefaultHorizon, "184 days"},
		{25 * time.Hour, "25h"},
	} {
		if got := stFormatDuration(tc.d); got != tc.want {
			t.Errorf("stFormatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// The job limits: read from a policy's JSON as an admin writes it,
// inherited field by field, and checked with a message that names the
// limit, its source and how to raise it.
func TestPolicyJobLimits(t *testing.T) {
	var p Policy
	raw := `{"default":{"max_jobs":2},"roles":{"operator":{"max_jobs":2147483647}},"projects":{"cms":{"max_jobs":3,"max_project_jobs":4},"atlas":{"max_bandwidth_bps":1000}}}`
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		role             Role
		project          string
		jobs, projJobs   int
		srcJobs, srcProj string
	}{
		{RoleUser, "", 2, DefaultMaxProjectJobs, "default", "default"},
		{RoleUser, "atlas", 2, DefaultMaxProjectJobs, "default", "default"},
		{RoleUser, "cms", 3, 4, "project cms", "project cms"},
		{RoleOperator, "", UnlimitedJobs, DefaultMaxProjectJobs, "role operator", "default"},
		{RoleOperator, "cms", 3, 4, "project cms", "project cms"},
	} {
		lim, src := p.Resolve(tc.role, tc.project)
		if lim.MaxJobs != tc.jobs || lim.MaxProjectJobs != tc.projJobs || src.MaxJobs != tc.srcJobs || src.MaxProjectJobs != tc.srcProj {
			t.Errorf("%s in %q: max_jobs %d (%s), max_project_jobs %d (%s)", tc.role, tc.project, lim.MaxJobs, src.MaxJobs, lim.MaxProjectJobs, src.MaxProjectJobs)
		}
	}
	for _, tc := range []struct {
		name           string
		role           Role
		project        string
		mine, theirs   int
		wantRule, want string
	}{
		{"below the default", RoleUser, "", 1, 0, "", ""},
		{"at the default", RoleUser, "", 2, 0, "max_jobs", "user alice has 2 unfinished jobs, the most allowed (max_jobs 2 for everyone): wait for one to end or cancel one (lightpath transfer cancel ID), or an admin raises it in the policy's default max_jobs (PUT /api/v1/policy)"},
		{"the project's own max_jobs", RoleUser, "cms", 2, 0, "", ""},
		{"at the project's max_jobs", RoleUser, "cms", 3, 0, "max_jobs", "(max_jobs 3 for project cms)"},
		{"at the project's total", RoleUser, "cms", 0, 4, "max_project_jobs", "project cms has 4 unfinished jobs, the most allowed (max_project_jobs 4 for project cms): wait for one to end, or an admin raises it in the policy's project cms max_project_jobs (PUT /api/v1/policy)"},
		{"no project, no project limit", RoleUser, "", 0, 100, "", ""},
		{"an operator lifted", RoleOperator, "", 1000, 0, "", ""},
	} {
		l := CheckJobs(p, tc.role, "alice", tc.project, tc.mine, tc.theirs)
		switch {
		case tc.wantRule == "" && l != nil:
			t.Errorf("%s: refused: %s", tc.name, l.Message)
		case tc.wantRule != "" && (l == nil || l.Rule != tc.wantRule || !strings.Contains(l.Message, tc.want)):
			t.Errorf("%s: got %+v, want %s %q", tc.name, l, tc.wantRule, tc.want)
		}
	}
	if err := (Policy{Projects: map[string]Limits{"x": {MaxProjectJobs: -1}}}).Validate(); err == nil {
		t.Error("a negative job limit was accepted")
	}
}
