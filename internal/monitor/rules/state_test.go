package rules

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func wanRule(forDur time.Duration) Rule {
	return Rule{
		Name:      "wan",
		Expr:      Expr{Series: "link_utilisation", Labels: map[string]string{"link": "wan"}, Fn: FnAvg, Window: 30 * time.Second},
		Op:        OpGT,
		Threshold: 0.9,
		For:       forDur,
	}
}

// eval is one evaluation: at second s, a value (or none), and the
// transition expected ("" for none) and the state after.
type eval struct {
	s     int
	v     float64
	ok    bool
	trans string // "from->to"
	state State
}

func TestStep(t *testing.T) {
	for _, tc := range []struct {
		name  string
		for_  time.Duration
		evals []eval
	}{
		{"stays ok below", 30 * time.Second, []eval{
			{0, 0.5, true, "", StateOK},
			{10, 0.9, true, "", StateOK}, // not > 0.9
		}},
		{"ok to pending to firing at for exactly", 30 * time.Second, []eval{
			{0, 0.95, true, "ok->pending", StatePending},
			{29, 0.95, true, "", StatePending},
			{30, 0.95, true, "pending->firing", StateFiring},
			{40, 0.97, true, "", StateFiring},
		}},
		{"for 0 fires at once", 0, []eval{
			{0, 0.95, true, "ok->firing", StateFiring},
			{10, 0.5, true, "firing->ok", StateOK},
		}},
		{"pending back to ok", 30 * time.Second, []eval{
			{0, 0.95, true, "ok->pending", StatePending},
			{10, 0.5, true, "pending->ok", StateOK},
		}},
		{"firing resolves", 10 * time.Second, []eval{
			{0, 0.95, true, "ok->pending", StatePending},
			{10, 0.95, true, "pending->firing", StateFiring},
			{20, 0.1, true, "firing->ok", StateOK},
		}},
		{"missing values keep the state", 10 * time.Second, []eval{
			{0, 0, false, "", StateOK},
			{5, 0.95, true, "ok->pending", StatePending},
			{10, 0, false, "", StatePending},
			{15, 0.95, true, "pending->firing", StateFiring}, // held since 5 s across the gap
			{20, 0, false, "", StateFiring},
			{25, 0, false, "", StateFiring},
			{30, 0.2, true, "firing->ok", StateOK},
		}},
		{"flapping restarts the for clock", 20 * time.Second, []eval{
			{0, 0.95, true, "ok->pending", StatePending},
			{10, 0.5, true, "pending->ok", StateOK},
			{15, 0.95, true, "ok->pending", StatePending},
			{25, 0.5, true, "pending->ok", StateOK},
			{30, 0.95, true, "ok->pending", StatePending},
			{45, 0.95, true, "", StatePending}, // 15 s since 30 s: not 20
			{50, 0.95, true, "pending->firing", StateFiring},
			{55, 0.5, true, "firing->ok", StateOK},
			{60, 0.95, true, "ok->pending", StatePending},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := wanRule(tc.for_)
			var st Status
			for _, e := range tc.evals {
				var tr *Transition
				st, tr = Step(r, st, e.v, e.ok, at(e.s))
				got := ""
				if tr != nil {
					got = string(tr.From) + "->" + string(tr.To)
					if tr.At != at(e.s) || tr.Value != e.v || tr.Threshold != 0.9 || tr.Rule != "wan" || tr.Reason == "" {
						t.Errorf("at %ds: transition %+v", e.s, tr)
					}
					if tr.Resolved != (tr.From == StateFiring && tr.To == StateOK) {
						t.Errorf("at %ds: Resolved = %v", e.s, tr.Resolved)
					}
					if st.Changed != at(e.s) {
						t.Errorf("at %ds: Changed = %v", e.s, st.Changed)
					}
				}
				if got != e.trans || st.State != e.state {
					t.Fatalf("at %ds (%v, %v): got %q, state %s; want %q, state %s", e.s, e.v, e.ok, got, st.State, e.trans, e.state)
				}
			}
		})
	}
}

func TestStepForBoundaryNanosecond(t *testing.T) {
	r := wanRule(30 * time.Second)
	st, _ := Step(r, Status{}, 1, true, t0)
	st, tr := Step(r, st, 1, true, t0.Add(30*time.Second-1))
	if tr != nil || st.State != StatePending {
		t.Fatalf("1ns before for: %v, %+v", st.State, tr)
	}
	st, tr = Step(r, st, 1, true, t0.Add(30*time.Second))
	if tr == nil || st.State != StateFiring {
		t.Fatalf("at for: %v, %+v", st.State, tr)
	}
}

func TestStepMissing(t *testing.T) {
	r := wanRule(0)
	st, tr := Step(r, Status{}, 0, false, t0)
	if tr != nil || st.State != StateOK || st.Missing != 1 || st.HasValue {
		t.Fatalf("first missing: %+v %+v", st, tr)
	}
	st, _ = Step(r, st, nan(), true, at(1)) // NaN counts as missing
	if st.Missing != 2 {
		t.Errorf("NaN: Missing = %d, want 2", st.Missing)
	}
	st, _ = Step(r, st, 0.95, true, at(2))
	if st.Missing != 0 || !st.HasValue || st.Value != 0.95 || st.State != StateFiring {
		t.Errorf("after a value: %+v", st)
	}
	st, tr = Step(r, st, 0, false, at(3))
	if tr != nil || st.State != StateFiring || st.Missing != 1 || st.Value != 0.95 {
		t.Errorf("missing while firing: %+v %+v", st, tr)
	}
}

func TestStepOps(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		v    float64
		fire bool
	}{
		{OpGT, 1, false}, {OpGT, 1.1, true},
		{OpGE, 1, true}, {OpGE, 0.9, false},
		{OpLT, 1, false}, {OpLT, 0.9, true},
		{OpLE, 1, true}, {OpLE, 1.1, false},
	} {
		r := Rule{Name: "x", Expr: Expr{Series: "x", Fn: FnLast, Window: time.Second}, Op: tc.op, Threshold: 1}
		st, _ := Step(r, Status{}, tc.v, true, t0)
		if (st.State == StateFiring) != tc.fire {
			t.Errorf("%v %s 1: state %s", tc.v, tc.op, st.State)
		}
	}
}

func TestReason(t *testing.T) {
	r := wanRule(30 * time.Second)
	st, tr := Step(r, Status{}, 0.97, true, t0)
	if want := "link_utilisation{link=wan} avg over 30s = 0.97 > 0.9, pending until it holds for 30s"; tr.Reason != want {
		t.Errorf("pending reason %q, want %q", tr.Reason, want)
	}
	st, tr = Step(r, st, 0.97, true, at(30))
	if want := "link_utilisation{link=wan} avg over 30s = 0.97 > 0.9 for 30s"; tr.Reason != want {
		t.Errorf("firing reason %q, want %q", tr.Reason, want)
	}
	_, tr = Step(r, st, 0.5, true, at(45))
	if want := "link_utilisation{link=wan} avg over 30s = 0.5, no longer > 0.9 after 45s: resolved"; tr.Reason != want {
		t.Errorf("resolved reason %q, want %q", tr.Reason, want)
	}

	p := Rule{Name: "p", Expr: Expr{Series: "loss", Fn: FnMax, Window: time.Minute}, Op: OpGE, Threshold: 0.01, Unit: "%"}
	_, tr = Step(p, Status{}, 0.0125, true, t0)
	if want := "loss max over 1m0s = 1.25% >= 1%"; tr.Reason != want {
		t.Errorf("percent reason %q, want %q", tr.Reason, want)
	}
	m := Rule{Name: "m", Expr: Expr{Series: "rate", Fn: FnRate, Window: time.Minute}, Op: OpLT, Threshold: 500e6, Unit: "M"}
	_, tr = Step(m, Status{}, 123456789, true, t0)
	if want := "rate rate over 1m0s = 123.5M < 500M"; tr.Reason != want {
		t.Errorf("SI reason %q, want %q", tr.Reason, want)
	}
}
