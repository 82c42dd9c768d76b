package reserve

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// at returns t0 plus m minutes.
func at(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

type iv struct{ s, e int } // minutes from t0, [s, e)

func TestTimelineSteps(t *testing.T) {
	type add struct {
		iv
		bw uint64
	}
	for _, tc := range []struct {
		name   string
		adds   []add
		breaks []int    // minutes
		used   []uint64 // from each breakpoint on
	}{
		{"empty", nil, nil, nil},
		{"one", []add{{iv{0, 10}, 3}}, []int{0, 10}, []uint64{3, 0}},
		{"same start counts twice (OSCARS overbooked here)", []add{{iv{0, 10}, 3}, {iv{0, 10}, 3}}, []int{0, 10}, []uint64{6, 0}},
		{"same start, different ends", []add{{iv{0, 10}, 3}, {iv{0, 5}, 4}}, []int{0, 5, 10}, []uint64{7, 3, 0}},
		{"end is exclusive", []add{{iv{0, 10}, 3}, {iv{10, 20}, 4}}, []int{0, 10, 20}, []uint64{3, 4, 0}},
		{"back to back, equal: one step", []add{{iv{0, 10}, 3}, {iv{10, 20}, 3}}, []int{0, 20}, []uint64{3, 0}},
		{"nested", []add{{iv{0, 30}, 1}, {iv{10, 20}, 2}}, []int{0, 10, 20, 30}, []uint64{1, 3, 1, 0}},
		{"gap", []add{{iv{0, 10}, 1}, {iv{20, 30}, 2}}, []int{0, 10, 20, 30}, []uint64{1, 0, 2, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := NewTimeline(10)
			for _, a := range tc.adds {
				if err := tl.Add(at(a.s), at(a.e), a.bw); err != nil {
					t.Fatal(err)
				}
			}
			var breaks []time.Time
			for _, m := range tc.breaks {
				breaks = append(breaks, at(m))
			}
			if got := tl.Breakpoints(at(-100), at(100)); !slices.EqualFunc(got, breaks, time.Time.Equal) {
				t.Errorf("breakpoints %v, want %v", got, breaks)
			}
			if !slices.Equal(tl.used, tc.used) {
				t.Errorf("used %v, want %v", tl.used, tc.used)
			}
			// Removing everything leaves nothing behind.
			for _, a := range tc.adds {
				if err := tl.Remove(at(a.s), at(a.e), a.bw); err != nil {
					t.Fatal(err)
				}
			}
			if tl.Len() != 0 {
				t.Errorf("after removing everything: %d breakpoints left", tl.Len())
			}
		})
	}
}

// TestTimelineSameInstant is the OSCARS regression: two equal reservations
// that start at the same instant must both count from that instant, so a
// third that would fit beside one of them does not fit beside both.
func TestTimelineSameInstant(t *testing.T) {
	tl := NewTimeline(10_000)
	for range 2 {
		if !tl.Fits(at(0), at(60), 4_000) {
			t.Fatal("4000 of 10000 does not fit")
		}
		if err := tl.Add(at(0), at(60), 4_000); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		iv
		bw   uint64
		fits bool
	}{
		{"at the shared start", iv{0, 1}, 2_001, false},
		{"spanning the start", iv{-10, 10}, 2_001, false},
		{"exactly what is left", iv{0, 60}, 2_000, true},
		{"after both end", iv{60, 120}, 10_000, true},
		{"before both start", iv{-60, 0}, 10_000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tl.Fits(at(tc.s), at(tc.e), tc.bw); got != tc.fits {
				t.Errorf("Fits %v, want %v (max used %d)", got, tc.fits, tl.MaxUsed(at(tc.s), at(tc.e)))
			}
		})
	}
}

func TestTimelineQueries(t *testing.T) {
	tl := NewTimeline(10)
	for _, a := range []struct {
		iv
		bw uint64
	}{{iv{0, 30}, 1}, {iv{10, 20}, 2}, {iv{40, 50}, 9}} {
		if err := tl.Add(at(a.s), at(a.e), a.bw); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		iv       iv
		maxUsed  uint64
		residual uint64
		breaks   int
	}{
		{"before", iv{-10, 0}, 0, 10, 0},
		{"first step", iv{0, 10}, 1, 9, 1},
		{"into the peak", iv{5, 11}, 3, 7, 1},
		{"peak ends exactly", iv{20, 40}, 1, 9, 2},
		{"everything", iv{-100, 100}, 9, 1, 6},
		{"after", iv{50, 60}, 0, 10, 1},
		{"one nanosecond inside", iv{49, 50}, 9, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, e := at(tc.iv.s), at(tc.iv.e)
			if got := tl.MaxUsed(s, e); got != tc.maxUsed {
				t.Errorf("MaxUsed %d, want %d", got, tc.maxUsed)
			}
			if got := tl.MinResidual(s, e); got != tc.residual {
				t.Errorf("MinResidual %d, want %d", got, tc.residual)
			}
			if got := len(tl.Breakpoints(s, e)); got != tc.breaks {
				t.Errorf("%d breakpoints, want %d", got, tc.breaks)
			}
			steps := tl.Steps(s, e)
			if len(steps) == 0 || !steps[0].Start.Equal(s) || !steps[len(steps)-1].End.Equal(e) {
				t.Fatalf("steps %v do not cover [%s, %s)", steps, s, e)
			}
			for i, st := range steps {
				if i > 0 && !st.Start.Equal(steps[i-1].End) {
					t.Errorf("steps %d and %d are not contiguous", i-1, i)
				}
				if st.Used != tl.MaxUsed(st.Start, st.End) || st.Used+st.Residual != 10 {
					t.Errorf("step %d %+v is wrong", i, st)
				}
			}
		})
	}
}

func TestTimelineErrors(t *testing.T) {
	tl := NewTimeline(10)
	if err := tl.Add(at(0), at(10), 5); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func() error
	}{
		{"add: end before start", func() error { return tl.Add(at(10), at(0), 1) }},
		{"add: zero length", func() error { return tl.Add(at(10), at(10), 1) }},
		{"add: zero bandwidth", func() error { return tl.Add(at(0), at(10), 0) }},
		{"add: zero time", func() error { return tl.Add(time.Time{}, at(10), 1) }},
		{"add: past 2262", func() error { return tl.Add(at(0), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), 1) }},
		{"add: overflow", func() error { return tl.Add(at(0), at(10), 1<<64-3) }},
		{"remove: more than booked", func() error { return tl.Remove(at(0), at(10), 6) }},
		{"remove: outside", func() error { return tl.Remove(at(5), at(15), 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f(); !errors.Is(err, ErrInvalidQuery) {
				t.Errorf("error %v, want ErrInvalidQuery", err)
			}
		})
	}
	if got := tl.MaxUsed(at(-10), at(20)); got != 5 {
		t.Errorf("after the refused calls: %d used, want 5", got)
	}
}

// TestTimelineRandom checks the step function, its queries and the feasible
// starts against a brute force over random bookings on a small grid of
// minutes (so that many start or end at the same instant).
func TestTimelineRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const capacity = 10
	for round := range 200 {
		tl := NewTimeline(capacity)
		type bk struct {
			iv
			bw uint64
		}
		var books []bk
		usedAt := func(m int) uint64 { // minute m, at its first nanosecond
			var u uint64
			for _, b := range books {
				if b.s <= m && m < b.e {
					u += b.bw
				}
			}
			return u
		}
		for range 1 + rng.IntN(12) {
			if len(books) > 0 && rng.IntN(4) == 0 {
				i := rng.IntN(len(books))
				if err := tl.Remove(at(books[i].s), at(books[i].e), books[i].bw); err != nil {
					t.Fatal(err)
				}
				books = slices.Delete(books, i, i+1)
				continue
			}
			s := rng.IntN(20)
			b := bk{iv{s, s + 1 + rng.IntN(8)}, uint64(1 + rng.IntN(5))}
			if err := tl.Add(at(b.s), at(b.e), b.bw); err != nil {
				t.Fatal(err)
			}
			books = append(books, b)
		}
		for s := -2; s < 30; s++ {
			for e := s + 1; e < 32; e++ {
				var want uint64
				for m := s; m < e; m++ { // the step function only changes on whole minutes
					want = max(want, usedAt(m))
				}
				if got := tl.MaxUsed(at(s), at(e)); got != want {
					t.Fatalf("round %d: MaxUsed [%d, %d) = %d, want %d (bookings %v)", round, s, e, got, want, books)
				}
			}
		}
		// Feasible starts, in whole minutes: for bandwidth bw and
		// duration d minutes, start m is feasible iff every minute of
		// [m, m+d) has at most capacity−bw in use.
		for range 5 {
			bw := uint64(1 + rng.IntN(capacity+1))
			d := 1 + rng.IntN(6)
			lo, hi := rng.IntN(10)-2, 10+rng.IntN(20)
			got := tl.starts(nil, bw, int64(d)*int64(time.Minute), at(lo).UnixNano(), at(hi).UnixNano())
			in := func(x int64) bool {
				for _, v := range got {
					if v.lo <= x && x <= v.hi {
						return true
					}
				}
				return false
			}
			for m := lo; m <= hi; m++ {
				want := bw <= capacity
				for k := m; k < m+d && want; k++ {
					want = usedAt(k) <= capacity-bw
				}
				x := at(m).UnixNano()
				if in(x) != want {
					t.Fatalf("round %d: start %d (bw %d, %d min) feasible %v, want %v: %v", round, m, bw, d, in(x), want, got)
				}
				// A feasible whole minute stays feasible a nanosecond
				// earlier only if the minute before was feasible too, and
				// is always feasible a nanosecond later up to the next
				// whole minute iff that one is: check both sides.
				if m > lo && in(x-1) != (want && inWhole(tl, bw, d, m-1)) {
					t.Fatalf("round %d: start %d minutes minus 1 ns wrong: %v", round, m, got)
				}
			}
			for i, v := range got {
				if v.lo > v.hi || i > 0 && v.lo <= got[i-1].hi+1 {
					t.Fatalf("round %d: starts %v not sorted, disjoint and apart", round, got)
				}
			}
		}
	}
}

// inWhole reports whether start minute m is feasible, by MaxUsed.
func inWhole(tl *Timeline, bw uint64, d, m int) bool {
	return bw <= tl.capacity && tl.MaxUsed(at(m), at(m+d)) <= tl.capacity-bw
}

// TestIntervalOps checks intersect, union and minus against sets of small
// integers.
func TestIntervalOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 40
	random := func() ([]ival, [n]bool) {
		var set [n]bool
		var l []ival
		for x := 0; x < n; {
			x += rng.IntN(5)
			if x >= n {
				break
			}
			y := min(n-1, x+rng.IntN(6))
			if len(l) > 0 && int64(x) <= l[len(l)-1].hi+1 {
				x = int(l[len(l)-1].hi) + 2
				if x > y {
					continue
				}
			}
			l = append(l, ival{int64(x), int64(y)})
			for k := x; k <= y; k++ {
				set[k] = true
			}
			x = y + 2
		}
		return l, set
	}
	for round := range 2000 {
		a, as := random()
		b, bs := random()
		for _, tc := range []struct {
			name string
			got  []ival
			want func(x, y bool) bool
		}{
			{"intersect", intersect(nil, a, b), func(x, y bool) bool { return x && y }},
			{"union", union(nil, a, b), func(x, y bool) bool { return x || y }},
			{"minus", minus(nil, a, b), func(x, y bool) bool { return x && !y }},
		} {
			var got [n]bool
			for i, v := range tc.got {
				if v.lo > v.hi || i > 0 && v.lo <= tc.got[i-1].hi+1 {
					t.Fatalf("round %d: %s(%v, %v) = %v: not sorted, disjoint and apart", round, tc.name, a, b, tc.got)
				}
				for k := v.lo; k <= v.hi; k++ {
					got[k] = true
				}
			}
			for k := range n {
				if got[k] != tc.want(as[k], bs[k]) {
					t.Fatalf("round %d: %s(%v, %v) = %v: wrong at %d", round, tc.name, a, b, tc.got, k)
				}
			}
		}
	}
	// The ends of time.
	all := []ival{{-1 << 63, forever}}
	if got := union(nil, all, []ival{{0, forever}}); !slices.Equal(got, all) {
		t.Errorf("union with forever: %v", got)
	}
	if got := minus(nil, all, []ival{{0, forever}}); !slices.Equal(got, []ival{{-1 << 63, -1}}) {
		t.Errorf("minus up to forever: %v", got)
	}
}
