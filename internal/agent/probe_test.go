package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
)

// TestDetector feeds the detector scripts of probes sent, echoes and clock
// ticks (times in milliseconds) and checks each transition.
func TestDetector(t *testing.T) {
	type ev struct {
		kind string // "send", "echo", "tick"
		seq  uint64
		ms   int
		want Transition
	}
	// every sends probe seq at 200·seq ms and, if answered, its echo 30
	// ms later; then ticks just past its period.
	every := func(from, to uint64, answered bool, last Transition) []ev {
		var out []ev
		for s := from; s <= to; s++ {
			out = append(out, ev{"send", s, int(200 * s), Unchanged})
			if answered {
				out = append(out, ev{"echo", s, int(200*s) + 30, Unchanged})
			}
			out = append(out, ev{"tick", 0, int(200*s) + 200, Unchanged})
		}
		if last != Unchanged {
			if answered {
				out[len(out)-2].want = last
			} else {
				out[len(out)-1].want = last
			}
		}
		return out
	}
	cat := func(ls ...[]ev) []ev {
		var out []ev
		for _, l := range ls {
			out = append(out, l...)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		script   []ev
		down     bool
		lost     int
		answered bool
	}{
		{"all answered", every(1, 20, true, Unchanged), false, 0, true},
		{"four lost are not five", cat(every(1, 3, true, Unchanged), every(4, 7, false, Unchanged), every(8, 9, true, Unchanged)), false, 0, true},
		{"five lost in a row: down at the fifth's deadline", cat(every(1, 3, true, Unchanged), every(4, 8, false, WentDown)), true, 5, false},
		{"lost on and on: down once", cat(every(1, 5, false, WentDown), every(6, 20, false, Unchanged)), true, 20, false},
		{"losses with an answer between never add up", cat(every(1, 4, false, Unchanged), every(5, 5, true, Unchanged), every(6, 9, false, Unchanged)), false, 4, false},
		{"down, then three answered: up", cat(every(1, 5, false, WentDown), every(6, 7, true, Unchanged), every(8, 8, true, WentUp)), false, 0, true},
		{"down, two answered and a loss: still down", cat(every(1, 5, false, WentDown), every(6, 7, true, Unchanged), every(8, 8, false, Unchanged), every(9, 10, true, Unchanged)), true, 0, true},
		{"a late echo (after its timeout) is a loss", cat(every(1, 4, false, Unchanged), []ev{
			{"send", 5, 1000, Unchanged}, {"tick", 0, 1200, WentDown}, {"echo", 5, 1201, Unchanged}}), true, 5, false},
		{"an echo past its timeout, before any tick, is a loss too", cat(every(1, 4, false, Unchanged), []ev{
			{"send", 5, 1000, Unchanged}, {"echo", 5, 1201, WentDown}}), true, 5, false},
		{"an echo of a probe it never sent does not count", cat(every(1, 4, false, Unchanged), []ev{
			{"send", 5, 1000, Unchanged}, {"echo", 99, 1010, Unchanged}, {"tick", 0, 1200, WentDown}}), true, 5, false},
		{"a late echo ends the run of losses, and lengthens the timeout", cat(every(1, 4, false, Unchanged), []ev{
			// 210 ms: srtt 210, rttvar 105, timeout 630 ms
			{"send", 5, 1000, Unchanged}, {"echo", 4, 1010, Unchanged}, {"tick", 0, 1629, Unchanged}, {"tick", 0, 1630, Unchanged}}), false, 1, false},
		{"down, late echoes do not bring it up", cat(every(1, 5, false, WentDown), []ev{
			{"echo", 1, 1250, Unchanged}, {"echo", 5, 1260, Unchanged}}, every(7, 9, false, Unchanged)), true, 5, false},
		{"down, late echoes, then three in time: up", cat(every(1, 5, false, WentDown), []ev{
			{"echo", 4, 1250, Unchanged}, {"echo", 5, 1260, Unchanged}}, every(7, 8, true, Unchanged), every(9, 9, true, WentUp)), false, 0, true},
		{"the echo of a probe lost long ago (past LateLimit) does not count", cat(every(1, 1, false, Unchanged), every(2, 30, true, Unchanged), every(31, 34, false, Unchanged), []ev{
			{"echo", 1, 6900, Unchanged}}, every(35, 35, false, WentDown)), true, 5, false},
		{"without ticks, probes are judged when the next are sent", []ev{
			{"send", 1, 0, Unchanged}, {"send", 2, 190, Unchanged}, {"send", 3, 380, Unchanged}, {"send", 4, 570, Unchanged},
			{"send", 5, 760, Unchanged}, {"send", 6, 950, Unchanged}, {"send", 7, 1140, WentDown}}, true, 5, false},
		{"echoes out of order: each counts", []ev{
			{"send", 1, 0, Unchanged}, {"send", 2, 100, Unchanged}, {"echo", 2, 150, Unchanged}, {"echo", 1, 160, Unchanged},
			{"tick", 0, 400, Unchanged}}, false, 0, true},
		{"a tick before the period judges nothing", []ev{
			{"send", 1, 0, Unchanged}, {"tick", 0, 199, Unchanged}, {"echo", 1, 199, Unchanged}, {"tick", 0, 400, Unchanged}}, false, 0, true},
		{"an echo twice counts once", cat(every(1, 5, false, WentDown), []ev{
			{"send", 6, 1200, Unchanged}, {"echo", 6, 1210, Unchanged}, {"echo", 6, 1220, Unchanged}, {"echo", 6, 1230, Unchanged}}), true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDetector(ProbePeriod)
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, e := range tc.script {
				at := base.Add(time.Duration(e.ms) * time.Millisecond)
				var got Transition
				switch e.kind {
				case "send":
					got = d.Sent(e.seq, at)
				case "echo":
					got = d.Echo(e.seq, at)
				case "tick":
					got = d.Tick(at)
				}
				if got != e.want {
					t.Fatalf("event %d (%s %d at %d ms): %v, want %v", i, e.kind, e.seq, e.ms, got, e.want)
				}
			}
			if d.Down() != tc.down || d.Lost() != tc.lost || d.Answered() != tc.answered {
				t.Errorf("at the end: down %v lost %d answered %v, want %v %d %v", d.Down(), d.Lost(), d.Answered(), tc.down, tc.lost, tc.answered)
			}
		})
	}
}

// TestDetectorLongPath: on a path whose round trip is longer than the
// period, several probes are out at once; each has its timeout.
func TestDetectorLongPath(t *testing.T) {
	d := NewDetector(500 * time.Millisecond)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	// Answered 450 ms after each probe, every 200 ms: never down.
	for s := 0; s < 20; s++ {
		d.Tick(at(200 * s))
		if tr := d.Sent(uint64(s), at(200*s)); tr != Unchanged {
			t.Fatalf("probe %d: %v", s, tr)
		}
		if s >= 2 {
			if tr := d.Echo(uint64(s-2), at(200*s+50)); tr != Unchanged {
				t.Fatalf("echo %d: %v", s-2, tr)
			}
		}
	}
	if d.Down() || d.Lost() != 0 || !d.Healthy() {
		t.Fatalf("answered in time: down %v lost %d healthy %v", d.Down(), d.Lost(), d.Healthy())
	}
	// Then nothing comes back: probes 18 and 19 (sent at 3.6 and 3.8 s)
	// and 20-22 (from 4 s) are lost; the fifth, sent at 4.4 s, at its
	// deadline 4.9 s, which the tick at 5 s finds.
	var downAt time.Time
	for ms := 4000; ms <= 6000; ms += 200 {
		if tr := d.Tick(at(ms)); tr == WentDown && downAt.IsZero() {
			downAt = at(ms)
		}
		d.Sent(uint64(ms/200), at(ms))
	}
	if !d.Down() || downAt.Sub(base) != 5000*time.Millisecond || d.Healthy() {
		t.Fatalf("down %v at %v (healthy %v), want down at 5 s", d.Down(), downAt.Sub(base), d.Healthy())
	}
	// Back: healthy only once Ups in a row are answered.
	for i, s := range []uint64{100, 101, 102} {
		ms := 7000 + 200*i
		d.Sent(s, at(ms))
		d.Echo(s, at(ms+100))
		if want := i == 2; d.Healthy() != want || d.Down() == want {
			t.Fatalf("after %d answered: healthy %v down %v", i+1, d.Healthy(), d.Down())
		}
	}
}

// farEnd models the far end of a path as the prober sees it: a probe
// sent at ms reaches the far agent 25 ms later (two-site's dedicated
// link), which answers at once unless it is stalled (starved of CPU, as
// the agent or a software data plane is on a busy host: it answers what
// queued up when the stall ends); the echo takes 25 ms back. From
// blackhole on (if not 0), nothing crosses the path. slow delays echoes
// further (a queue on the way back).
type farEnd struct {
	stalls    [][2]int           // [from, to) in ms
	slow      func(sent int) int // more ms on the way back, if not nil
	blackhole int
}

func (f farEnd) echo(sent int) (int, bool) {
	at := sent + 25
	if f.blackhole > 0 && at >= f.blackhole {
		return 0, false
	}
	for _, s := range f.stalls {
		if at >= s[0] && at < s[1] {
			at = s[1]
		}
	}
	if f.blackhole > 0 && at >= f.blackhole {
		return 0, false
	}
	if f.slow != nil {
		at += f.slow(sent)
	}
	return at + 25, true
}

// run drives d as the prober does for ms milliseconds: every 50 ms it
// reads the echoes arrived (at the kernel's time), judges (Tick) and,
// every 200 ms, sends a probe. It returns the times of the transitions.
func (f farEnd) run(d *Detector, ms int) (downs, ups []int) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	type echo struct {
		at  int
		seq uint64
	}
	var inFlight []echo
	note := func(tr Transition, ms int) {
		switch tr {
		case WentDown:
			downs = append(downs, ms)
		case WentUp:
			ups = append(ups, ms)
		}
	}
	for now := 0; now <= ms; now += 50 {
		slices.SortStableFunc(inFlight, func(a, b echo) int { return a.at - b.at })
		for len(inFlight) > 0 && inFlight[0].at <= now {
			note(d.Echo(inFlight[0].seq, at(inFlight[0].at)), inFlight[0].at)
			inFlight = inFlight[1:]
		}
		note(d.Tick(at(now)), now)
		if now%200 == 0 {
			seq := uint64(now/200 + 1)
			note(d.Sent(seq, at(now)), now)
			if e, ok := f.echo(now); ok {
				inFlight = append(inFlight, echo{e, seq})
			}
		}
	}
	return downs, ups
}

// TestDetectorBusyHost: a path whose echoes come late in bursts, as on a
// busy host, stays up; a blackhole is found as promptly as ever on a
// quiet path, and within (Losses-1) periods plus MaxTimeout on a busy one.
func TestDetectorBusyHost(t *testing.T) {
	// stalls of d ms every gap ms from start on
	stalls := func(start, gap int, ds ...int) [][2]int {
		var out [][2]int
		for _, d := range ds {
			out = append(out, [2]int{start, start + d})
			start += d + gap
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		far   farEnd
		busy  bool // five echoes in a row late, at least
		ms    int
		downs []int // when it went down, exactly
		ups   []int
		check func(t *testing.T, d *Detector, downs []int)
	}{
		{name: "quiet", far: farEnd{}, ms: 20000},
		{name: "a blackhole on a quiet path: down at the fifth lost probe's deadline, as before",
			// the probe sent at 5000 ms is the first lost; the fifth,
			// sent at 5800, is judged at its deadline, 250 ms later.
			far: farEnd{blackhole: 5000}, ms: 10000, downs: []int{6050}},
		{name: "stalls of 300 ms to 900 ms, far apart (each on a quiet path)",
			far: farEnd{stalls: stalls(2000, 5000, 300, 500, 700, 900, 900, 600)}, ms: 40000},
		{name: "a busy host: stalls growing to 1.5 s, 2 s apart", busy: true,
			far: farEnd{stalls: stalls(2000, 2000, 400, 700, 1000, 1300, 1500, 1500, 1200, 1500)}, ms: 30000},
		{name: "a busy host: stalls of 1-1.5 s, 1 s apart, after a first of 900 ms", busy: true,
			far: farEnd{stalls: stalls(2000, 1000, 900, 1500, 1000, 1500, 1500, 1200, 1500, 1000)}, ms: 30000},
		{name: "a slow queue: from 2 s on, every echo 300-900 ms late", busy: true,
			far: farEnd{slow: func(sent int) int {
				if sent < 2000 {
					return 0
				}
				return 300 + sent*7919%601
			}}, ms: 20000},
		{name: "a blackhole on a busy host: down within 4 periods and MaxTimeout of its first lost probe",
			far: farEnd{stalls: stalls(2000, 1000, 900, 1500, 1500), blackhole: 10000}, ms: 20000,
			check: func(t *testing.T, d *Detector, downs []int) {
				if len(downs) != 1 || downs[0] > 10000+800+int(probeMaxTimeout/time.Millisecond)+50 {
					t.Errorf("down at %v, want once, by %d ms", downs, 10000+800+probeMaxTimeout.Milliseconds()+50)
				}
			}},
		{name: "a first stall longer than the detection time on a quiet path looks like a blackhole; the echoes bring it back",
			// The first lost probe is sent at 2000 ms; nothing comes
			// back until 3525, past the fifth's deadline (3050): no
			// detector that is as prompt as before can tell this from
			// a blackhole. The burst of late echoes lengthens the
			// timeout; then three echoes in time bring the path up.
			far: farEnd{stalls: [][2]int{{2000, 3500}}}, ms: 6000, downs: []int{3050}, ups: []int{3850}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDetector(250 * time.Millisecond)
			if tc.busy {
				// The scenario is one a fixed 250 ms timeout takes
				// for a blackhole: five echoes in a row late.
				worst, run := 0, 0
				for ms := 0; ms <= tc.ms; ms += 200 {
					if e, _ := tc.far.echo(ms); e-ms > 250 {
						run++
					} else {
						run = 0
					}
					worst = max(worst, run)
				}
				if worst < ProbeLosses {
					t.Fatalf("at most %d echoes in a row late: not a busy host", worst)
				}
			}
			downs, ups := tc.far.run(d, tc.ms)
			if tc.check != nil {
				tc.check(t, d, downs)
				return
			}
			if !slices.Equal(downs, tc.downs) || !slices.Equal(ups, tc.ups) {
				t.Errorf("down at %v, up at %v (ms); want down at %v, up at %v", downs, ups, tc.downs, tc.ups)
			}
			if len(tc.downs) == 0 && d.Lost() != 0 {
				t.Errorf("at the end: %d lost in a row", d.Lost())
			}
		})
	}
}

func TestProbeTimeout(t *testing.T) {
	tp := loadTopo(t, "../../examples/two-site.yaml")
	r := resv("r", "a1", "b1", 1, 1, "", "a1-ra:a1>ra", "dedicated:ra>rb", "b1-rb:rb>b1")
	if got := probeTimeout(tp, r.Path); got != 250*time.Millisecond {
		t.Errorf("two-site over dedicated (25 ms one way): timeout %v, want 250ms", got)
	}
	local := resv("r", "a1", "a2", 1, 1, "", "a1-ra:a1>ra", "a2-ra:ra>a2")
	if got := probeTimeout(tp, local.Path); got != ProbePeriod {
		t.Errorf("within a site: timeout %v, want the period", got)
	}
}

func TestProbeWire(t *testing.T) {
	m := probeMsg{Kind: probeAsk, DSCP: 46, Token: 0x0102030405060708, Seq: 42}
	b := m.marshal()
	if len(b) != probeLen || string(b[:4]) != "LPPB" {
		t.Fatalf("marshal: %x", b)
	}
	if got, err := parseProbe(b); err != nil || got != m {
		t.Fatalf("parse: %+v, %v; want %+v", got, err, m)
	}
	for name, bad := range map[string][]byte{
		"short":     b[:23],
		"long":      append(slices.Clone(b), 0),
		"magic":     append([]byte("LPPC"), b[4:]...),
		"kind 3":    append(append([]byte{}, b[:4]...), append([]byte{3}, b[5:]...)...),
		"DSCP 0":    append(append([]byte{}, b[:5]...), append([]byte{0}, b[6:]...)...),
		"DSCP 64":   append(append([]byte{}, b[:5]...), append([]byte{64}, b[6:]...)...),
		"not zeros": append(append([]byte{}, b[:6]...), append([]byte{1}, b[7:]...)...),
	} {
		if _, err := parseProbe(bad); err == nil {
			t.Errorf("%s: %x parsed", name, bad)
		}
	}
}

func FuzzParseProbe(f *testing.F) {
	f.Add(probeMsg{Kind: probeEcho, DSCP: 10, Token: 7, Seq: 9}.marshal())
	f.Add([]byte("LPPB"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseProbe(b)
		if err != nil {
			return
		}
		if back := m.marshal(); string(back) != string(b) {
			t.Fatalf("%x parses as %+v, which marshals as %x", b, m, back)
		}
	})
}

func TestProbeTargets(t *testing.T) {
	tp := loadTopo(t, "../../examples/two-site.yaml")
	all := []string{"a1", "b1", "ra", "rb"}
	r := resv("r1", "a1", "b1", 10, 500e6, "tcp 198.18.1.1 > 198.18.2.1:7070", "a1-ra:a1>ra", "dedicated:ra>rb", "b1-rb:rb>b1")
	r.State, r.ManagedNodes = reserve.StateActive, all
	unmanagedFrom := r
	unmanagedFrom.ManagedNodes = []string{"b1", "ra", "rb"}
	unmanagedTo := r
	unmanagedTo.ManagedNodes = []string{"a1", "ra", "rb"}
	reserved := r
	reserved.State = reserve.StateReserved
	over := r
	over.End = t0
	for _, tc := range []struct {
		name string
		r    reserve.Reservation
		want map[string]string // node → "far address"
	}{
		{"both ends probe each other", r, map[string]string{"a1": "b1 198.18.2.1", "b1": "a1 198.18.1.1"}},
		{"from not managed: the first managed node probes the to node", unmanagedFrom, map[string]string{"ra": "b1 198.18.2.1"}},
		{"to not managed: nobody can answer", unmanagedTo, nil},
		{"not ACTIVE yet", reserved, nil},
		{"over", over, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range tp.Nodes {
				ts := probeTargets(tp, n.Name, []reserve.Reservation{tc.r}, t0)
				var got []string
				for _, x := range ts {
					got = append(got, x.Far+" "+x.Addr.String())
					if x.Key != "r1 10 a1-ra,dedicated,b1-rb" || x.DSCP != 10 || x.ID != "r1" {
						t.Errorf("%s: target %+v", n.Name, x)
					}
				}
				want := tc.want[n.Name]
				if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || got[0] != want) {
					t.Errorf("%s probes %v, want %q", n.Name, got, want)
				}
			}
		})
	}
}

func TestBlame(t *testing.T) {
	tp := loadTopo(t, "../../examples/two-site.yaml")
	path := resv("r", "a1", "b1", 1, 1, "", "a1-ra:a1>ra", "dedicated:ra>rb", "b1-rb:rb>b1").Path
	for _, tc := range []struct {
		cleared []string
		want    string
	}{
		{nil, "dedicated"},
		{[]string{"a1-ra"}, "dedicated"},
		{[]string{"dedicated"}, "a1-ra"},
		{[]string{"dedicated", "a1-ra"}, "b1-rb"},
		{[]string{"dedicated", "a1-ra", "b1-rb"}, "dedicated"},
	} {
		cleared := map[string]bool{}
		for _, l := range tc.cleared {
			cleared[l] = true
		}
		if got := blame(tp, path, cleared); got != tc.want {
			t.Errorf("cleared %v: blame %s, want %s", tc.cleared, got, tc.want)
		}
	}
	local := resv("r", "a1", "a2", 1, 1, "", "a1-ra:a1>ra", "a2-ra:ra>a2").Path
	if got := blame(tp, local, map[string]bool{"a1-ra": true}); got != "a2-ra" {
		t.Errorf("within a site: blame %s, want a2-ra", got)
	}
	tg := probeTarget{ID: "r1", Path: path, Far: "b1"}
	if got, want := blackholeReason(tg, "a1"), "blackhole: 5 probes lost on path a1-ra,dedicated,b1-rb (reservation r1, a1 to b1)"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
}

func TestBlackholed(t *testing.T) {
	r := resv("r", "a1", "b1", 1, 1, "", "a1-ra:a1>ra", "dedicated:ra>rb", "b1-rb:rb>b1")
	const hole = "link dedicated down at a1 since 2026-11-26T09:09:18Z (blackhole: 5 probes lost on path a1-ra,dedicated,b1-rb (reservation r, a1 to b1))"
	const cut = "link a1-ra down at a1 since 2026-11-26T09:09:18Z (no carrier on a1-ra at a1)"
	const tail = ": no other path has the bandwidth; the flows take the routed path until it returns"
	for _, tc := range []struct {
		degraded bool
		reason   string
		want     []string
	}{
		{false, "", nil},
		{true, hole + tail, []string{"dedicated"}},
		{true, cut + tail, nil},
		{true, cut + "; " + hole + tail, []string{"dedicated"}},
		{true, "the agent of rb is gone", nil},
		{true, "link wan down at a1 since X (blackhole: 5 probes lost on path a1-ra,wan,b1-rb)" + tail, nil}, // not on the path
	} {
		r.Degraded, r.DegradedReason = tc.degraded, tc.reason
		if got := blackholed(r); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.reason, got, tc.want)
		}
	}
}

// TestWithoutBroken: a reservation whose path is broken loses the steering
// of its flows at this node (marking, rules, marks by DSCP) but keeps what
// its probes need (the table's routes, the probes' rules) and its classes;
// another reservation keeps everything.
func TestWithoutBroken(t *testing.T) {
	tp := loadTopo(t, "../../examples/two-site.yaml")
	r1 := resv("r1", "a1", "b1", 10, 500e6, "tcp 198.18.1.1 > 198.18.2.1:7070", "a1-ra:a1>ra", "dedicated:ra>rb", "b1-rb:rb>b1")
	r2 := resv("r2", "a1", "b2", 12, 100e6, "udp 198.18.1.1 > 198.18.2.2:9000", "a1-ra:a1>ra", "wan:ra>rb", "b2-rb:rb>b2")
	for _, node := range []string{"a1", "ra"} {
		want, err := Desired(tp, node, []reserve.Reservation{r1, r2}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if got := WithoutBroken(want, nil); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: nothing broken changed the plan", node)
		}
		got := WithoutBroken(want, []uint8{10})
		has := func(p Plan, s string) bool {
			return slices.ContainsFunc(summary(p), func(l string) bool { return strings.Contains(l, s) })
		}
		for _, s := range []string{"fwmark 0x10a lookup 110", "to 198.18.2.1/32", "set dscp 10", "dscp 10 set mark"} {
			if has(got, s) {
				t.Errorf("%s: %q left with r1's path broken:\n%s", node, s, strings.Join(summary(got), "\n"))
			}
		}
		for _, s := range []string{"9946 fwmark 0x10a ipproto udp dport 7471 lookup 110", "9946 fwmark 0x10a ipproto udp sport 7471 lookup 110",
			"route 110 198.18.2.1/32", "1:10a", "1:ff", "fwmark 0x10c lookup 112"} {
			if has(want, s) && !has(got, s) {
				t.Errorf("%s: %q gone with r1's path broken", node, s)
			}
		}
		if !has(want, "9946 fwmark 0x10a ipproto udp dport 7471") {
			t.Errorf("%s: no probe rule in the plan:\n%s", node, strings.Join(summary(want), "\n"))
		}
		if got.NftTable != (len(got.Nft) > 0) {
			t.Errorf("%s: NftTable %v with %d rules", node, got.NftTable, len(got.Nft))
		}
	}
}
