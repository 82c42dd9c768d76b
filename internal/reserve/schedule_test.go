package reserve

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// book adds bookings to s or fails the test.
func book(t testing.TB, s *Schedule, bs ...Booking) {
	t.Helper()
	for i, b := range bs {
		if b.ID == "" {
			b.ID = fmt.Sprintf("b%d-%d", s.Len(), i)
		}
		if err := s.Add(b); err != nil {
			t.Fatal(err)
		}
	}
}

// prefSchedule returns an empty schedule of g under preference pref.
func prefSchedule(t testing.TB, g *Graph, pref PathPreference) *Schedule {
	t.Helper()
	s := NewSchedule(g)
	if err := s.SetPathPreference(pref); err != nil {
		t.Fatal(err)
	}
	return s
}

// under is a path a test expects under some preferences only: the
// preferences not named expect the row's own path.
type under map[PathPreference][]Hop

// expect returns the path expected under pref.
func (u under) expect(want []Hop, pref PathPreference) []Hop {
	if p, ok := u[pref]; ok {
		return p
	}
	return want
}

func TestPathPreferenceParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want PathPreference
		ok   bool
	}{
		{"", PreferDedicated, true}, {"dedicated", PreferDedicated, true}, {"routed", PreferRouted, true},
		{"shortest", PreferShortest, true}, {"Dedicated", "", false}, {"widest", "", false},
	} {
		got, err := ParsePathPreference(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParsePathPreference(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	s := NewSchedule(twoSite(t))
	if s.PathPreference() != PreferDedicated {
		t.Errorf("a new schedule prefers %q, want dedicated", s.PathPreference())
	}
	if err := s.SetPathPreference("widest"); err == nil || s.PathPreference() != PreferDedicated {
		t.Errorf("SetPathPreference(widest) = %v, now %q", err, s.PathPreference())
	}
}

func TestFixedSlot(t *testing.T) {
	// fullLong books the long way (rc-rd) solid, leaving the host x as the
	// only way with capacity.
	fullLong := Booking{Path: path("rc", "rc-rd", "rd"), Bandwidth: 9 * gbps, Start: at(-600), End: at(600)}
	// fits: wan and ded both have room for 500M; ded is as short and as
	// slow as wan, so shortest takes it by name.
	fits := under{PreferRouted: viaWan}
	back := under{PreferRouted: reverse(viaWan)}
	for _, tc := range []struct {
		name  string
		books []Booking
		req   Request
		want  []Hop // under every preference, but those in pref
		pref  under
		err   error
	}{
		{"dedicated before routed", nil, Request{"a1", "b1", 500 * mbps, at(0), at(60)}, viaDed, fits, nil},
		{"dedicated full: routed for what does not fit", []Booking{{Path: viaDed, Bandwidth: 1800 * mbps, Start: at(0), End: at(60)}},
			Request{"a1", "b1", 500 * mbps, at(0), at(60)}, viaWan, nil, nil},
		{"dedicated only", nil, Request{"a1", "b1", 1500 * mbps, at(0), at(60)}, viaDed, nil, nil},
		{"the long way", nil, Request{"a1", "b1", 5 * gbps, at(0), at(60)}, viaLong, nil, nil},
		{"host in the middle refused", []Booking{fullLong}, Request{"a1", "b1", 5 * gbps, at(0), at(60)}, nil, nil, ErrNoPath},
		{"above every capacity", nil, Request{"a1", "b1", 10 * gbps, at(0), at(60)}, nil, nil, ErrNoPath},
		{"the other direction", nil, Request{"b1", "a1", 500 * mbps, at(0), at(60)}, reverse(viaDed), back, nil},
		{"to a host", nil, Request{"a1", "x", gbps, at(0), at(60)}, path("a1", "a1-ra", "ra", "ra-x", "x"), nil, nil},
		{"from a host", nil, Request{"x", "b1", gbps, at(0), at(60)}, path("x", "x-rb", "rb", "b1-rb", "b1"), nil, nil},
		{"router to router", nil, Request{"ra", "rb", gbps, at(0), at(60)}, path("ra", "ded", "rb"), nil, nil},
		{"wan taken: dedicated", []Booking{{Path: viaWan, Bandwidth: 500 * mbps, Start: at(30), End: at(90)}},
			Request{"a1", "b1", 500 * mbps, at(0), at(60)}, viaDed, nil, nil},
		{"wan taken, but only after the slot", []Booking{{Path: viaWan, Bandwidth: 900 * mbps, Start: at(60), End: at(90)}},
			Request{"a1", "b1", 500 * mbps, at(0), at(60)}, viaDed, fits, nil},
		{"only the reverse direction taken", []Booking{{Path: reverse(viaWan), Bandwidth: 900 * mbps, Start: at(0), End: at(90)}},
			Request{"a1", "b1", 500 * mbps, at(0), at(60)}, viaDed, fits, nil},
		{"two at the same instant fill dedicated", []Booking{
			{Path: viaDed, Bandwidth: gbps, Start: at(0), End: at(60)},
			{Path: viaDed, Bandwidth: gbps, Start: at(0), End: at(60)}},
			Request{"a1", "b1", 1500 * mbps, at(0), at(60)}, viaLong, nil, nil},
		{"unknown node", nil, Request{"a1", "zz", 1, at(0), at(60)}, nil, nil, ErrUnknownNode},
		{"no source", nil, Request{"", "b1", 1, at(0), at(60)}, nil, nil, ErrInvalidQuery},
		{"same ends", nil, Request{"a1", "a1", 1, at(0), at(60)}, nil, nil, ErrInvalidQuery},
		{"zero bandwidth", nil, Request{"a1", "b1", 0, at(0), at(60)}, nil, nil, ErrInvalidQuery},
		{"end before start", nil, Request{"a1", "b1", 1, at(60), at(0)}, nil, nil, ErrInvalidQuery},
		{"zero length", nil, Request{"a1", "b1", 1, at(60), at(60)}, nil, nil, ErrInvalidQuery},
		{"no start", nil, Request{"a1", "b1", 1, time.Time{}, at(60)}, nil, nil, ErrInvalidQuery},
	} {
		for _, pref := range PathPreferences {
			t.Run(string(pref)+"/"+tc.name, func(t *testing.T) {
				s := prefSchedule(t, twoSite(t), pref)
				book(t, s, tc.books...)
				r, err := s.FixedSlot(tc.req)
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				if err != nil {
					return
				}
				want := tc.pref.expect(tc.want, pref)
				if r.Algorithm != AlgFixedSlot || !slices.Equal(r.Path, want) || r.Bandwidth != tc.req.Bandwidth ||
					!r.Start.Equal(tc.req.Start) || !r.End.Equal(tc.req.End) {
					t.Errorf("got %+v, want path %v", r, want)
				}
				if err := s.Admit(r.Path, r.Bandwidth, r.Start, r.End); err != nil {
					t.Errorf("the answer is not admitted: %v", err)
				}
			})
		}
	}
}

// TestFixedSlotTies checks the order among paths under each preference:
// under dedicated, the fewest routed hops, then hops, then delay; under
// routed, hops, delay, the fewest dedicated hops; under shortest, hops and
// delay; and then link names in sequence under all three. A link's Prefer
// counts it as dedicated (true) or routed (false) whatever its role.
func TestFixedSlotTies(t *testing.T) {
	ms := time.Millisecond
	yes, no := true, false // a link's Prefer
	type names map[PathPreference][]string
	for _, tc := range []struct {
		name  string
		links []Link
		want  []string // link names, under every preference but those in pref
		pref  names
	}{
		{"least delay", []Link{{Name: "a", A: "p", B: "q", Delay: 5 * ms}, {Name: "b", A: "p", B: "q", Delay: 3 * ms}}, []string{"b"}, nil},
		{"same delay: by name", []Link{{Name: "b", A: "p", B: "q", Delay: 3 * ms}, {Name: "a", A: "p", B: "q", Delay: 3 * ms}}, []string{"a"}, nil},
		{"dedicated or routed, else by name", []Link{{Name: "a", A: "p", B: "q", Delay: 3 * ms, Role: LinkDedicated}, {Name: "z", A: "p", B: "q", Delay: 3 * ms}},
			[]string{"a"}, names{PreferRouted: {"z"}}},
		{"dedicated or routed, by name the other way", []Link{{Name: "z", A: "p", B: "q", Delay: 3 * ms, Role: LinkDedicated}, {Name: "a", A: "p", B: "q", Delay: 3 * ms}},
			[]string{"z"}, names{PreferRouted: {"a"}, PreferShortest: {"a"}}},
		{"delay over routed", []Link{{Name: "a", A: "p", B: "q", Delay: 2 * ms, Role: LinkDedicated}, {Name: "z", A: "p", B: "q", Delay: 3 * ms}}, []string{"a"}, nil},
		{"dedicated over delay", []Link{{Name: "a", A: "p", B: "q", Delay: 2 * ms}, {Name: "z", A: "p", B: "q", Delay: 3 * ms, Role: LinkDedicated}},
			[]string{"z"}, names{PreferRouted: {"a"}, PreferShortest: {"a"}}},
		{"hops over delay", []Link{{Name: "slow", A: "p", B: "q", Delay: 50 * ms}, {Name: "f1", A: "p", B: "m1"}, {Name: "f2", A: "m1", B: "q"}}, []string{"slow"}, nil},
		{"dedicated over hops", []Link{
			{Name: "z", A: "p", B: "q"},
			{Name: "d1", A: "p", B: "m1", Role: LinkDedicated}, {Name: "d2", A: "m1", B: "q", Role: LinkDedicated}},
			[]string{"d1", "d2"}, names{PreferRouted: {"z"}, PreferShortest: {"z"}}},
		{"as many routed hops: fewer hops", []Link{
			{Name: "z", A: "p", B: "q", Delay: 9 * ms},
			{Name: "d1", A: "p", B: "m1", Role: LinkDedicated}, {Name: "r2", A: "m1", B: "q"}},
			[]string{"z"}, nil},
		{"the fewest routed hops, whatever the hops", []Link{
			{Name: "r1", A: "p", B: "m1"}, {Name: "r2", A: "m1", B: "q"},
			{Name: "d1", A: "p", B: "m2", Role: LinkDedicated}, {Name: "d2", A: "m2", B: "m3", Role: LinkDedicated}, {Name: "r3", A: "m3", B: "q"}},
			[]string{"d1", "d2", "r3"}, names{PreferRouted: {"r1", "r2"}, PreferShortest: {"r1", "r2"}}},
		{"a routed link preferred", []Link{{Name: "a", A: "p", B: "q"}, {Name: "z", A: "p", B: "q", Prefer: &yes}},
			[]string{"z"}, names{PreferRouted: {"a"}, PreferShortest: {"a"}}},
		{"a dedicated link not preferred", []Link{{Name: "a", A: "p", B: "q", Role: LinkDedicated, Prefer: &no}, {Name: "z", A: "p", B: "q", Role: LinkDedicated}},
			[]string{"z"}, names{PreferRouted: {"a"}, PreferShortest: {"a"}}},
		{"name sequence, not last name", []Link{
			{Name: "l1", A: "p", B: "m1", Delay: ms}, {Name: "l4", A: "m1", B: "q", Delay: ms},
			{Name: "l2", A: "p", B: "m2", Delay: ms}, {Name: "l3", A: "m2", B: "q", Delay: ms}}, []string{"l1", "l4"}, nil},
		{"name sequence, deeper", []Link{
			{Name: "a", A: "p", B: "m1"}, {Name: "b", A: "p", B: "m2"},
			{Name: "y", A: "m1", B: "n1"}, {Name: "c", A: "m2", B: "n2"},
			{Name: "z", A: "n1", B: "q"}, {Name: "d", A: "n2", B: "q"}}, []string{"a", "y", "z"}, nil},
		{"name sequence, deeper, all dedicated", []Link{
			{Name: "a", A: "p", B: "m1", Role: LinkDedicated}, {Name: "b", A: "p", B: "m2", Role: LinkDedicated},
			{Name: "y", A: "m1", B: "n1", Role: LinkDedicated}, {Name: "c", A: "m2", B: "n2", Role: LinkDedicated},
			{Name: "z", A: "n1", B: "q", Role: LinkDedicated}, {Name: "d", A: "n2", B: "q", Role: LinkDedicated}}, []string{"a", "y", "z"}, nil},
	} {
		for _, pref := range PathPreferences {
			t.Run(string(pref)+"/"+tc.name, func(t *testing.T) {
				nodes := map[string]string{"p": NodeRouter, "q": NodeRouter}
				links := slices.Clone(tc.links)
				for i := range links {
					links[i].Capacity, links[i].Reservable = gbps, 1
					nodes[links[i].A], nodes[links[i].B] = NodeRouter, NodeRouter
				}
				g, err := NewGraph(nodes, links)
				if err != nil {
					t.Fatal(err)
				}
				r, err := prefSchedule(t, g, pref).FixedSlot(Request{"p", "q", gbps, at(0), at(1)})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, h := range r.Path {
					got = append(got, h.Link)
				}
				want := tc.want
				if w, ok := tc.pref[pref]; ok {
					want = w
				}
				if !slices.Equal(got, want) {
					t.Errorf("path %v, want %v", got, want)
				}
			})
		}
	}
}

func TestWidestPath(t *testing.T) {
	for _, tc := range []struct {
		name     string
		books    []Booking
		from, to string
		want     []Hop
		pref     under
		width    uint64
		err      error
	}{
		{"the long way is widest", nil, "a1", "b1", viaLong, nil, 9 * gbps, nil},
		{"the long way taken: dedicated", []Booking{{Path: path("rc", "rc-rd", "rd"), Bandwidth: 8 * gbps, Start: at(50), End: at(70)}},
			"a1", "b1", viaDed, nil, 2 * gbps, nil},
		{"taken after the slot only", []Booking{{Path: path("rc", "rc-rd", "rd"), Bandwidth: 8 * gbps, Start: at(60), End: at(70)}},
			"a1", "b1", viaLong, nil, 9 * gbps, nil},
		{"equal widths: by preference", []Booking{
			{Path: path("rc", "rc-rd", "rd"), Bandwidth: 8100 * mbps, Start: at(0), End: at(60)},
			{Path: viaDed, Bandwidth: 1100 * mbps, Start: at(0), End: at(60)}},
			"a1", "b1", viaDed, under{PreferRouted: viaWan}, 900 * mbps, nil},
		{"equal widths, dedicated full: the fewest routed hops", []Booking{
			{Path: path("rc", "rc-rd", "rd"), Bandwidth: 8100 * mbps, Start: at(0), End: at(60)},
			{Path: viaDed, Bandwidth: 2 * gbps, Start: at(0), End: at(60)}},
			"a1", "b1", viaWan, nil, 900 * mbps, nil},
		{"host in the middle refused", []Booking{
			{Path: path("rc", "rc-rd", "rd"), Bandwidth: 9 * gbps, Start: at(0), End: at(60)},
			{Path: viaDed, Bandwidth: 2 * gbps, Start: at(0), End: at(60)},
			{Path: viaWan, Bandwidth: 900 * mbps, Start: at(0), End: at(60)}},
			"a1", "b1", nil, nil, 0, ErrNoPath},
		{"unknown node", nil, "a1", "zz", nil, nil, 0, ErrUnknownNode},
	} {
		for _, pref := range PathPreferences {
			t.Run(string(pref)+"/"+tc.name, func(t *testing.T) {
				s := prefSchedule(t, twoSite(t), pref)
				book(t, s, tc.books...)
				r, err := s.WidestPath(tc.from, tc.to, at(0), at(60))
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				want := tc.pref.expect(tc.want, pref)
				if err == nil && (r.Algorithm != AlgWidestPath || !slices.Equal(r.Path, want) || r.Bandwidth != tc.width) {
					t.Errorf("got %+v, want %v of width %d", r, want, tc.width)
				}
			})
		}
	}
}

// wanBusy: on wan from ra to rb, 500M over [60, 120) and 300M over
// [120, 240) minutes: 0.5, 0.8 and 0.3 of its 0.9 Gbit/s from 60, 120, 180.
// Dedicated is full over [0, 300) and the long way over [0, 600).
var wanBusy = []Booking{
	{Path: viaWan, Bandwidth: 500 * mbps, Start: at(60), End: at(180)},
	{Path: viaWan, Bandwidth: 300 * mbps, Start: at(120), End: at(240)},
	{Path: viaDed, Bandwidth: 2 * gbps, Start: at(0), End: at(300)},
	{Path: path("rc", "rc-rd", "rd"), Bandwidth: 9 * gbps, Start: at(0), End: at(600)},
}

func TestEarliestStart(t *testing.T) {
	h := func(n int) time.Duration { return time.Duration(n) * time.Hour }
	for _, tc := range []struct {
		name  string
		q     StartQuery
		start int // minutes
		path  []Hop
		alg   string
		err   error
		pref  under // the path under other preferences
	}{
		{"fits before the first", StartQuery{Path: viaWan, Bandwidth: 500 * mbps, Duration: h(1), NotBefore: at(0)}, 0, viaWan, AlgEarliestStartPath, nil, nil},
		{"after the peak", StartQuery{Path: viaWan, Bandwidth: 500 * mbps, Duration: h(2), NotBefore: at(0)}, 180, viaWan, AlgEarliestStartPath, nil, nil},
		{"small enough for the middle", StartQuery{Path: viaWan, Bandwidth: 100 * mbps, Duration: h(2), NotBefore: at(30)}, 30, viaWan, AlgEarliestStartPath, nil, nil},
		{"just before the peak", StartQuery{Path: viaWan, Bandwidth: 200 * mbps, Duration: h(1), NotBefore: at(55)}, 55, viaWan, AlgEarliestStartPath, nil, nil},
		{"inside the peak: after it", StartQuery{Path: viaWan, Bandwidth: 200 * mbps, Duration: h(1), NotBefore: at(61)}, 180, viaWan, AlgEarliestStartPath, nil, nil},
		{"all of it, before everything", StartQuery{Path: viaWan, Bandwidth: 900 * mbps, Duration: h(1), NotBefore: at(0)}, 0, viaWan, AlgEarliestStartPath, nil, nil},
		{"all of it, after everything", StartQuery{Path: viaWan, Bandwidth: 900 * mbps, Duration: h(1), NotBefore: at(1)}, 240, viaWan, AlgEarliestStartPath, nil, nil},
		{"the horizon is too near", StartQuery{Path: viaWan, Bandwidth: 900 * mbps, Duration: h(1), NotBefore: at(1), Horizon: at(299)}, 0, nil, "", ErrNoSlot, nil},
		{"the horizon is just enough", StartQuery{Path: viaWan, Bandwidth: 900 * mbps, Duration: h(1), NotBefore: at(1), Horizon: at(300)}, 240, viaWan, AlgEarliestStartPath, nil, nil},
		{"above capacity", StartQuery{Path: viaWan, Bandwidth: gbps, Duration: h(1), NotBefore: at(0)}, 0, nil, "", ErrNoSlot, nil},
		{"any path, all free: by preference", StartQuery{From: "a1", To: "b1", Bandwidth: 500 * mbps, Duration: h(1), NotBefore: at(-600)}, -600, viaDed, AlgEarliestStart, nil,
			under{PreferRouted: viaWan}},
		{"any path: wan first", StartQuery{From: "a1", To: "b1", Bandwidth: 500 * mbps, Duration: h(2), NotBefore: at(0)}, 180, viaWan, AlgEarliestStart, nil, nil},
		{"any path: dedicated first", StartQuery{From: "a1", To: "b1", Bandwidth: gbps, Duration: h(2), NotBefore: at(0)}, 300, viaDed, AlgEarliestStart, nil, nil},
		{"any path: the long way at last", StartQuery{From: "a1", To: "b1", Bandwidth: 3 * gbps, Duration: h(2), NotBefore: at(0)}, 600, viaLong, AlgEarliestStart, nil, nil},
		{"any path: now", StartQuery{From: "b1", To: "a1", Bandwidth: 3 * gbps, Duration: h(2), NotBefore: at(0)}, 0, reverse(viaLong), AlgEarliestStart, nil, nil},
		{"any path: never", StartQuery{From: "a1", To: "b1", Bandwidth: 10 * gbps, Duration: h(2), NotBefore: at(0)}, 0, nil, "", ErrNoSlot, nil},
		{"any path: far future", StartQuery{From: "a1", To: "b1", Bandwidth: 3 * gbps, Duration: h(2), NotBefore: at(100000)}, 100000, viaLong, AlgEarliestStart, nil, nil},
		{"host in the middle refused", StartQuery{Path: viaX, Bandwidth: 1, Duration: h(1), NotBefore: at(0)}, 0, nil, "", ErrInvalidPath, nil},
		{"path and ends disagree", StartQuery{From: "b1", Path: viaWan, Bandwidth: 1, Duration: h(1), NotBefore: at(0)}, 0, nil, "", ErrInvalidPath, nil},
		{"zero bandwidth", StartQuery{Path: viaWan, Duration: h(1), NotBefore: at(0)}, 0, nil, "", ErrInvalidQuery, nil},
		{"zero duration", StartQuery{Path: viaWan, Bandwidth: 1, NotBefore: at(0)}, 0, nil, "", ErrInvalidQuery, nil},
		{"negative duration", StartQuery{Path: viaWan, Bandwidth: 1, Duration: -h(1), NotBefore: at(0)}, 0, nil, "", ErrInvalidQuery, nil},
		{"no not-before", StartQuery{Path: viaWan, Bandwidth: 1, Duration: h(1)}, 0, nil, "", ErrInvalidQuery, nil},
		{"horizon before not-before", StartQuery{Path: viaWan, Bandwidth: 1, Duration: h(1), NotBefore: at(0), Horizon: at(-60)}, 0, nil, "", ErrNoSlot, nil},
	} {
		for _, pref := range PathPreferences {
			t.Run(string(pref)+"/"+tc.name, func(t *testing.T) {
				s := prefSchedule(t, twoSite(t), pref)
				book(t, s, wanBusy...)
				r, err := s.EarliestStart(tc.q)
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				if err != nil {
					return
				}
				want := tc.pref.expect(tc.path, pref)
				if r.Algorithm != tc.alg || !r.Start.Equal(at(tc.start)) || !r.End.Equal(at(tc.start).Add(tc.q.Duration)) ||
					!slices.Equal(r.Path, want) || r.Bandwidth != tc.q.Bandwidth {
					t.Errorf("got %+v, want start %s on %v by %s", r, at(tc.start), want, tc.alg)
				}
				if err := s.Admit(r.Path, r.Bandwidth, r.Start, r.End); err != nil {
					t.Errorf("the answer is not admitted: %v", err)
				}
			})
		}
	}
}

func TestAllStarts(t *testing.T) {
	type w struct{ first, last int } // minutes
	h := func(n int) time.Duration { return time.Duration(n) * time.Hour }
	never := Forever.Add(-h(2))
	for _, tc := range []struct {
		name string
		q    StartQuery
		want []w
		open bool // the last window never closes
		alg  string
		err  error
	}{
		{"before and after the peak", StartQuery{Path: viaWan, Bandwidth: 500 * mbps, Duration: h(2), NotBefore: at(-180), Horizon: at(600)},
			[]w{{-180, -60}, {180, 480}}, false, AlgAllStartsPath, nil},
		{"no horizon", StartQuery{Path: viaWan, Bandwidth: 500 * mbps, Duration: h(2), NotBefore: at(-180)},
			[]w{{-180, -60}}, true, AlgAllStartsPath, nil},
		{"any path", StartQuery{From: "a1", To: "b1", Bandwidth: 500 * mbps, Duration: h(2), NotBefore: at(-180), Horizon: at(600)},
			[]w{{-180, -60}, {180, 480}}, false, AlgAllStarts, nil},
		{"any path, no horizon", StartQuery{From: "a1", To: "b1", Bandwidth: 500 * mbps, Duration: h(2), NotBefore: at(-180)},
			[]w{{-180, -60}}, true, AlgAllStarts, nil},
		{"any path, dedicated", StartQuery{From: "a1", To: "b1", Bandwidth: gbps, Duration: h(2), NotBefore: at(-180), Horizon: at(720)},
			[]w{{-180, -120}, {300, 600}}, false, AlgAllStarts, nil},
		{"any path, the other way is free", StartQuery{From: "b1", To: "a1", Bandwidth: gbps, Duration: h(2), NotBefore: at(-180), Horizon: at(720)},
			[]w{{-180, 600}}, false, AlgAllStarts, nil},
		{"none", StartQuery{Path: viaWan, Bandwidth: 900 * mbps, Duration: h(2), NotBefore: at(0), Horizon: at(300)}, nil, false, "", ErrNoSlot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSchedule(twoSite(t))
			book(t, s, wanBusy...)
			r, err := s.AllStarts(tc.q)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			var want []Window
			for _, x := range tc.want {
				want = append(want, Window{at(x.first), at(x.last)})
			}
			if tc.open {
				want = append(want, Window{at(180), never})
			}
			if r.Algorithm != tc.alg || !slices.EqualFunc(r.Windows, want, func(a, b Window) bool {
				return a.First.Equal(b.First) && a.Last.Equal(b.Last)
			}) {
				t.Errorf("%s: %v, want %s: %v", r.Algorithm, r.Windows, tc.alg, want)
			}
		})
	}
}

func TestEarliestCompletion(t *testing.T) {
	oneHour := uint64(900*mbps/8) * 3600 // bytes: one hour at 900 Mbit/s
	for _, tc := range []struct {
		name       string
		books      []Booking
		q          CompletionQuery
		start, end time.Duration // from t0
		bw         uint64
		path       []Hop
		alg        string
		err        error
		pref       under // the path under other preferences
	}{
		{"at full rate before a booking", []Booking{{Path: viaWan, Bandwidth: 500 * mbps, Start: at(60), End: at(120)}},
			CompletionQuery{Path: viaWan, Size: oneHour, NotBefore: at(0)}, 0, time.Hour, 900 * mbps, viaWan, AlgEarliestCompletionPath, nil, nil},
		{"capped: slower but sooner than waiting", []Booking{{Path: viaWan, Bandwidth: 500 * mbps, Start: at(60), End: at(120)}},
			CompletionQuery{Path: viaWan, Size: oneHour, MaxRate: 450 * mbps, NotBefore: at(0)}, 0, 2*time.Hour + 15*time.Minute, 400 * mbps, viaWan, AlgEarliestCompletionPath, nil, nil},
		{"waiting is sooner", []Booking{{Path: viaWan, Bandwidth: 800 * mbps, Start: at(0), End: at(30)}},
			CompletionQuery{Path: viaWan, Size: oneHour, NotBefore: at(0)}, 30 * time.Minute, 90 * time.Minute, 900 * mbps, viaWan, AlgEarliestCompletionPath, nil, nil},
		{"any path: the long way at 9G", nil,
			CompletionQuery{From: "a1", To: "b1", Size: oneHour, NotBefore: at(0)}, 0, 6 * time.Minute, 9 * gbps, viaLong, AlgEarliestCompletion, nil, nil},
		{"any path: capped, by preference", nil,
			CompletionQuery{From: "a1", To: "b1", Size: oneHour, MaxRate: 900 * mbps, NotBefore: at(0)}, 0, time.Hour, 900 * mbps, viaDed, AlgEarliestCompletion, nil,
			under{PreferRouted: viaWan}},
		{"any path: capped, dedicated full", []Booking{{Path: viaDed, Bandwidth: 2 * gbps, Start: at(0), End: at(60)}},
			CompletionQuery{From: "a1", To: "b1", Size: oneHour, MaxRate: 900 * mbps, NotBefore: at(0)}, 0, time.Hour, 900 * mbps, viaWan, AlgEarliestCompletion, nil, nil},
		{"any path: once dedicated frees", wanBusy,
			CompletionQuery{From: "a1", To: "b1", Size: 10 * oneHour, NotBefore: at(0)}, 300 * time.Minute, 570 * time.Minute, 2 * gbps, viaDed, AlgEarliestCompletion, nil, nil},
		{"any path: once the long way frees", wanBusy,
			CompletionQuery{From: "a1", To: "b1", Size: 30 * oneHour, NotBefore: at(0)}, 600 * time.Minute, 780 * time.Minute, 9 * gbps, viaLong, AlgEarliestCompletion, nil, nil},
		{"horizon too near", wanBusy,
			CompletionQuery{From: "a1", To: "b1", Size: 10 * oneHour, NotBefore: at(0), Horizon: at(300)}, 0, 0, 0, nil, "", ErrNoSlot, nil},
		{"zero size", nil, CompletionQuery{Path: viaWan, NotBefore: at(0)}, 0, 0, 0, nil, "", ErrInvalidQuery, nil},
		{"host in the middle", nil, CompletionQuery{Path: viaX, Size: 1, NotBefore: at(0)}, 0, 0, 0, nil, "", ErrInvalidPath, nil},
	} {
		for _, pref := range PathPreferences {
			t.Run(string(pref)+"/"+tc.name, func(t *testing.T) {
				s := prefSchedule(t, twoSite(t), pref)
				book(t, s, tc.books...)
				r, err := s.EarliestCompletion(tc.q)
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				if err != nil {
					return
				}
				want := tc.pref.expect(tc.path, pref)
				if r.Algorithm != tc.alg || !r.Start.Equal(t0.Add(tc.start)) || !r.End.Equal(t0.Add(tc.end)) || r.Bandwidth != tc.bw || !slices.Equal(r.Path, want) {
					t.Errorf("got %s [%s, %s) at %d on %v, want %s [%s, %s) at %d on %v", r.Algorithm, r.Start.Sub(t0), r.End.Sub(t0), r.Bandwidth, r.Path,
						tc.alg, tc.start, tc.end, tc.bw, want)
				}
				if err := s.Admit(r.Path, r.Bandwidth, r.Start, r.End); err != nil {
					t.Errorf("the answer is not admitted: %v", err)
				}
			})
		}
	}
}

// TestAlternatives checks the alternatives offered on a refusal, under
// each preference: the earliest slot's path follows the preference.
func TestAlternatives(t *testing.T) {
	for _, pref := range PathPreferences {
		t.Run(string(pref), func(t *testing.T) {
			s := prefSchedule(t, twoSite(t), pref)
			book(t, s,
				Booking{Path: viaWan, Bandwidth: 900 * mbps, Start: at(0), End: at(120)},
				Booking{Path: viaDed, Bandwidth: 2 * gbps, Start: at(0), End: at(120)},
				Booking{Path: path("rc", "rc-rd", "rd"), Bandwidth: 8500 * mbps, Start: at(0), End: at(120)})
			req := Request{From: "a1", To: "b1", Bandwidth: gbps, Start: at(0), End: at(60)}
			if _, err := s.FixedSlot(req); !errors.Is(err, ErrNoPath) {
				t.Fatalf("FixedSlot: %v, want ErrNoPath", err)
			}
			alt, err := s.Alternatives(req, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if e := alt.Earliest; e == nil || !e.Start.Equal(at(120)) || !e.End.Equal(at(180)) || !slices.Equal(e.Path, viaDed) || e.Algorithm != AlgEarliestStart {
				t.Errorf("earliest: %+v, want [120, 180) minutes on dedicated", e)
			}
			if w := alt.Widest; w == nil || w.Bandwidth != 500*mbps || !slices.Equal(w.Path, viaLong) || w.Algorithm != AlgWidestPath {
				t.Errorf("widest: %+v, want 500M the long way", w)
			}
			alt, err = s.Alternatives(Request{From: "a1", To: "b1", Bandwidth: 20 * gbps, Start: at(0), End: at(60)}, at(600))
			if err != nil || alt.Earliest != nil || alt.Widest == nil {
				t.Errorf("for 20G: %+v, %v; want no earliest slot and a widest path", alt, err)
			}
			if _, err := s.Alternatives(Request{From: "a1", To: "b1", Start: at(0), End: at(60)}, time.Time{}); !errors.Is(err, ErrInvalidQuery) {
				t.Errorf("zero bandwidth: %v", err)
			}
		})
	}
	// With wan and ded both free after the refused slot, the earliest slot
	// goes where the preference says.
	for _, pref := range PathPreferences {
		s := prefSchedule(t, twoSite(t), pref)
		book(t, s,
			Booking{Path: viaWan, Bandwidth: 900 * mbps, Start: at(0), End: at(60)},
			Booking{Path: viaDed, Bandwidth: 2 * gbps, Start: at(0), End: at(60)},
			Booking{Path: path("rc", "rc-rd", "rd"), Bandwidth: 9 * gbps, Start: at(0), End: at(600)})
		alt, err := s.Alternatives(Request{From: "a1", To: "b1", Bandwidth: 500 * mbps, Start: at(0), End: at(60)}, time.Time{})
		want := under{PreferRouted: viaWan}.expect(viaDed, pref)
		if err != nil || alt.Earliest == nil || !alt.Earliest.Start.Equal(at(60)) || !slices.Equal(alt.Earliest.Path, want) {
			t.Errorf("%s: earliest %+v, %v; want [60, 120) minutes on %v", pref, alt.Earliest, err, want)
		}
	}
}

// TestSchedulingRandom checks FixedSlot, WidestPath, EarliestStart (on a
// fixed path and on any) and AllStarts against brute forces over every
// simple path, on random workloads on random small topologies, under each
// path preference.
func TestSchedulingRandom(t *testing.T) {
	for _, pref := range PathPreferences {
		t.Run(string(pref), func(t *testing.T) { schedulingRandom(t, pref) })
	}
}

func schedulingRandom(t *testing.T, pref PathPreference) {
	rng := rand.New(rand.NewPCG(7, 8))
	var found, missed int
	for round := range 120 {
		g, hosts := randomGraph(rng)
		s := prefSchedule(t, g, pref)
		books := randomBookings(t, rng, s, hosts, 20)
		nodes := g.Nodes()
		for range 10 {
			a, b := nodes[rng.IntN(len(nodes))], nodes[rng.IntN(len(nodes))]
			if a == b {
				continue
			}
			paths := allPaths(g, a, b)
			bw := uint64(1 + rng.IntN(10))
			m := rng.IntN(70) - 5
			st, en := at(m), at(m+1+rng.IntN(20))
			where := fmt.Sprintf("round %d: %s to %s, %d over [%d, %s)", round, a, b, bw, m, en.Sub(st))
			best := func(bw uint64) []Hop {
				var want []Hop
				for _, p := range paths {
					if pathFits(g, books, p, bw, st, en) && (want == nil || bruteKeyOf(g, p, pref).compare(bruteKeyOf(g, want, pref)) < 0) {
						want = p
					}
				}
				return want
			}

			// (i) FixedSlot: the best fitting path in the preference's order.
			want := best(bw)
			r, err := s.FixedSlot(Request{a, b, bw, st, en})
			switch {
			case want == nil && !errors.Is(err, ErrNoPath):
				t.Fatalf("%s: FixedSlot %+v, %v; brute force: no path", where, r, err)
			case want != nil && (err != nil || !slices.Equal(r.Path, want)):
				t.Fatalf("%s: FixedSlot %+v, %v; brute force: %v", where, r.Path, err, want)
			}
			if want != nil {
				found++
			} else {
				missed++
			}

			// (ii) WidestPath: the largest width, on the best path of that width.
			var width uint64
			for _, p := range paths {
				width = max(width, pathWidth(g, books, p, st, en))
			}
			r, err = s.WidestPath(a, b, st, en)
			switch {
			case width == 0 && !errors.Is(err, ErrNoPath):
				t.Fatalf("%s: WidestPath %+v, %v; brute force: nothing free", where, r, err)
			case width > 0 && (err != nil || r.Bandwidth != width || !slices.Equal(r.Path, best(width))):
				t.Fatalf("%s: WidestPath %+v, %v; brute force: width %d on %v", where, r, err, width, best(width))
			}

			// (iii) and (iv): earliest and all starts, on any path and on each path.
			d := time.Duration(1+rng.IntN(25)) * time.Minute
			lo := at(rng.IntN(60) - 5)
			hz := lo.Add(time.Duration(rng.IntN(120)) * time.Minute)
			if rng.IntN(4) == 0 {
				hz = time.Time{}
			}
			q := StartQuery{From: a, To: b, Bandwidth: bw, Duration: d, NotBefore: lo, Horizon: hz}
			checkStarts(t, where, s, g, books, q, paths)
			if len(paths) > 0 {
				q.From, q.To, q.Path = "", "", paths[rng.IntN(len(paths))]
				checkStarts(t, where+" on "+fmt.Sprint(q.Path), s, g, books, q, [][]Hop{q.Path})
			}
		}
	}
	if found < 300 || missed < 100 {
		t.Errorf("the workloads are too easy or too hard: %d slots found, %d not", found, missed)
	}
}

// checkStarts checks EarliestStart and AllStarts for q against a brute
// force over paths.
func checkStarts(t *testing.T, where string, s *Schedule, g *Graph, books []Booking, q StartQuery, paths [][]Hop) {
	t.Helper()
	hi := Forever.Add(-q.Duration)
	if !q.Horizon.IsZero() {
		hi = q.Horizon.Add(-q.Duration)
	}
	feasible := func(x time.Time) bool {
		for _, p := range paths {
			if pathFits(g, books, p, q.Bandwidth, x, x.Add(q.Duration)) {
				return true
			}
		}
		return false
	}
	// The earliest start is NotBefore or a breakpoint (the end of a step
	// that had too little free).
	cands := []time.Time{q.NotBefore}
	var samples []time.Time
	for _, b := range books {
		for _, x := range []time.Time{b.Start, b.End} {
			if x.After(q.NotBefore) && !x.After(hi) {
				cands = append(cands, x)
			}
			for _, y := range []time.Time{x, x.Add(-q.Duration)} {
				for _, dt := range []time.Duration{-1, 0, 1} {
					samples = append(samples, y.Add(dt))
				}
			}
		}
	}
	slices.SortFunc(cands, time.Time.Compare)
	var earliest time.Time
	for _, c := range cands {
		if !c.After(hi) && feasible(c) {
			earliest = c
			break
		}
	}
	r, err := s.EarliestStart(q)
	switch {
	case earliest.IsZero() && !errors.Is(err, ErrNoSlot):
		t.Fatalf("%s: EarliestStart(%+v) = %+v, %v; brute force: none", where, q, r, err)
	case !earliest.IsZero() && (err != nil || !r.Start.Equal(earliest)):
		t.Fatalf("%s: EarliestStart(%+v) = %+v, %v; brute force: %s", where, q, r, err, earliest.Sub(t0))
	case err == nil && !pathFits(g, books, r.Path, q.Bandwidth, r.Start, r.End):
		t.Fatalf("%s: EarliestStart(%+v) = %+v does not fit", where, q, r)
	}

	all, err := s.AllStarts(q)
	if earliest.IsZero() {
		if !errors.Is(err, ErrNoSlot) {
			t.Fatalf("%s: AllStarts(%+v) = %+v, %v; brute force: none", where, q, all, err)
		}
		return
	}
	if err != nil || !all.Windows[0].First.Equal(earliest) {
		t.Fatalf("%s: AllStarts(%+v) = %+v, %v; brute force: first %s", where, q, all, err, earliest.Sub(t0))
	}
	samples = append(samples, q.NotBefore, hi)
	for _, w := range all.Windows {
		samples = append(samples, w.First, w.First.Add(-1), w.Last, w.Last.Add(1))
	}
	for _, x := range samples {
		if x.Before(q.NotBefore) || x.After(hi) {
			continue
		}
		in := false
		for _, w := range all.Windows {
			in = in || !x.Before(w.First) && !x.After(w.Last)
		}
		if in != feasible(x) {
			t.Fatalf("%s: AllStarts(%+v) = %v: start %s in a window: %v, brute force: %v", where, q, all.Windows, x.Sub(t0), in, !in)
		}
	}
}

// TestEarliestCompletionRandom checks EarliestCompletion (fixed path and
// any path) against a brute force that tries every start breakpoint, every
// path and every end breakpoint.
func TestEarliestCompletionRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var found, none, later int
	for round := range 60 {
		g, hosts := randomGraph(rng)
		s := NewSchedule(g)
		books := randomBookings(t, rng, s, hosts, 12)
		var breaks []time.Time
		for _, b := range books {
			breaks = append(breaks, b.Start, b.End)
		}
		nodes := g.Nodes()
		for range 6 {
			a, b := nodes[rng.IntN(len(nodes))], nodes[rng.IntN(len(nodes))]
			paths := allPaths(g, a, b)
			if a == b || len(paths) == 0 {
				continue
			}
			lo := at(rng.IntN(50) - 5)
			q := CompletionQuery{From: a, To: b, Size: uint64(1 + rng.IntN(4000)), MaxRate: uint64(rng.IntN(12)), NotBefore: lo, Horizon: lo.Add(90 * time.Minute)}
			where := fmt.Sprintf("round %d: %+v", round, q)
			check := func(paths [][]Hop) {
				t.Helper()
				rate := q.MaxRate
				if rate == 0 {
					rate = 1<<64 - 1
				}
				starts := []time.Time{lo}
				ends := []time.Time{q.Horizon}
				for _, x := range breaks {
					if x.After(lo) && x.Before(q.Horizon) {
						starts = append(starts, x)
						ends = append(ends, x)
					}
				}
				var bestStart, bestEnd time.Time
				for _, st := range starts {
					for _, p := range paths {
						for _, e := range ends {
							if !e.After(st) {
								continue
							}
							bw := min(rate, pathWidth(g, books, p, st, e))
							dur, ok := transferTime(q.Size, bw)
							end := st.Add(time.Duration(dur))
							if ok && !end.After(e) && (bestEnd.IsZero() || end.Before(bestEnd) || end.Equal(bestEnd) && st.Before(bestStart)) {
								bestStart, bestEnd = st, end
							}
						}
					}
				}
				r, err := s.EarliestCompletion(q)
				switch {
				case bestEnd.IsZero() && !errors.Is(err, ErrNoSlot):
					t.Fatalf("%s: %+v, %v; brute force: none", where, r, err)
				case bestEnd.IsZero():
					none++
				case err != nil || !r.Start.Equal(bestStart) || !r.End.Equal(bestEnd):
					t.Fatalf("%s: %+v, %v; brute force: [%s, %s)", where, r, err, bestStart.Sub(t0), bestEnd.Sub(t0))
				case r.Bandwidth > rate || !pathFits(g, books, r.Path, r.Bandwidth, r.Start, r.End):
					t.Fatalf("%s: %+v does not fit or is too fast", where, r)
				default:
					found++
					if r.Start.After(lo) {
						later++
					}
				}
			}
			check(paths)
			q.From, q.To, q.Path = "", "", paths[rng.IntN(len(paths))]
			where += fmt.Sprintf(" on %v", q.Path)
			check([][]Hop{q.Path})
		}
	}
	if found < 200 || none < 20 || later < 20 {
		t.Errorf("the workloads are too easy or too hard: %d found (%d starting later than asked), %d not", found, later, none)
	}
}

func TestTransferTime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size, bw uint64
		want     int64
		ok       bool
	}{
		{"one second", 125_000_000, gbps, int64(time.Second), true},
		{"rounded up", 1, 3, 2_666_666_667, true},
		{"no bandwidth", 1, 0, 0, false},
		{"longer than an int64 of nanoseconds", 1 << 40, 1, 0, false},
		{"no limit", 1 << 40, 1<<64 - 1, 477, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := transferTime(tc.size, tc.bw); got != tc.want || ok != tc.ok {
				t.Errorf("transferTime(%d, %d) = %d, %v; want %d, %v", tc.size, tc.bw, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestFixedSlotAvoid moves a request off a link known to be down.
func TestFixedSlotAvoid(t *testing.T) {
	g, err := NewGraph(map[string]string{"a": NodeHost, "r1": NodeRouter, "r2": NodeRouter, "b": NodeHost}, []Link{
		{Name: "a-r1", A: "a", B: "r1", Capacity: 10e9, Reservable: 1},
		{Name: "fast", A: "r1", B: "r2", Capacity: 1e9, Reservable: 1, Role: LinkDedicated},
		{Name: "slow", A: "r1", B: "r2", Capacity: 1e9, Reservable: 1, Delay: time.Millisecond},
		{Name: "r2-b", A: "r2", B: "b", Capacity: 10e9, Reservable: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSchedule(g)
	t0 := WorkloadEpoch
	req := Request{From: "a", To: "b", Bandwidth: 1e8, Start: t0, End: t0.Add(time.Hour)}
	res, err := s.FixedSlot(req)
	if err != nil || res.Path[1].Link != "fast" {
		t.Fatalf("without avoid: %v %v", res.Path, err)
	}
	if res, err = s.FixedSlotAvoiding(req, []string{"fast"}); err != nil || res.Path[1].Link != "slow" {
		t.Fatalf("avoiding fast: %v %v", res.Path, err)
	}
	if _, err = s.FixedSlotAvoiding(req, []string{"fast", "slow"}); !errors.Is(err, ErrNoPath) {
		t.Fatalf("avoiding both: %v", err)
	}
	if _, err = s.FixedSlotAvoiding(req, []string{"nope"}); !errors.Is(err, ErrUnknownLink) {
		t.Fatalf("avoiding an unknown link: %v", err)
	}
}

// TestEarliestCompletionNoSlotSaysRate checks a size that cannot be moved
// before the horizon, with no rate asked for, is refused with the most the
// path has free (it said "at up to 18.4 Ebit/s", the unbounded rate tried).
func TestEarliestCompletionNoSlotSaysRate(t *testing.T) {
	s := NewSchedule(twoSite(t))
	_, err := s.EarliestCompletion(CompletionQuery{From: "a1", To: "b1", Size: 1 << 50, NotBefore: at(0), Horizon: at(30)})
	if !errors.Is(err, ErrNoSlot) {
		t.Fatalf("error %v, want %v", err, ErrNoSlot)
	}
	for _, want := range []string{"at up to 9.00 Gbit/s (the most it has free)", "ending by " + at(30).Format(time.RFC3339)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
