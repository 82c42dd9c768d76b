package plan

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// slot is capacity a pair's path has free from At on, at RateBps.
type slot struct {
	At      time.Time
	RateBps uint64
}

// sched is a scheduler for the tests: each pair's path has free slots;
// the earliest completion of some bytes is the slot that ends them
// first at min(its rate, the pair's cap). It remembers what it was asked
// and answered.
type sched struct {
	slots map[string][]slot  // by "from>to"
	limit map[string]int64   // refuses shares larger than this
	ask   map[string][]int64 // shares asked, by pair
	given map[string]map[int64]Offer
	// refused: pairs refused at least once
	refused map[string]bool
}

func newSched() *sched {
	return &sched{slots: map[string][]slot{}, limit: map[string]int64{}, ask: map[string][]int64{}, given: map[string]map[int64]Offer{}, refused: map[string]bool{}}
}

func key(p PairCap) string { return p.From + ">" + p.To }

func (s *sched) Ask(p PairCap, bytes int64) (Offer, error) {
	k := key(p)
	s.ask[k] = append(s.ask[k], bytes)
	if l, ok := s.limit[k]; ok && bytes > l {
		s.refused[k] = true
		return Offer{}, fmt.Errorf("no capacity for %d bytes between %s and %s", bytes, p.From, p.To)
	}
	var best Offer
	for _, sl := range s.slots[k] {
		rate := sl.RateBps
		if p.CapBps != 0 {
			rate = min(rate, p.CapBps)
		}
		d := time.Duration(math.Ceil(float64(bytes) * 8 / float64(rate) * 1e9))
		o := Offer{Start: sl.At, End: sl.At.Add(d), RateBps: rate, Algorithm: "earliest-completion"}
		if best.End.IsZero() || o.End.Before(best.End) {
			best = o
		}
	}
	if best.End.IsZero() {
		s.refused[k] = true
		return Offer{}, fmt.Errorf("no path between %s and %s", p.From, p.To)
	}
	if s.given[k] == nil {
		s.given[k] = map[int64]Offer{}
	}
	s.given[k][bytes] = best
	return best, nil
}

func sec(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func TestDeadline(t *testing.T) {
	ab := PairCap{From: "a1", To: "b1", CapBps: 100}
	cd := PairCap{From: "a2", To: "b2", CapBps: 300}
	type want struct {
		shares     map[string]int64 // by pair; pairs left out have no booking
		completion time.Time
		infeasible bool
		refused    bool
		asks       int // rounds that asked every pair (0: not checked)
	}
	for _, tc := range []struct {
		name     string
		size     int64
		pairs    []PairCap
		slots    map[string][]slot
		limit    map[string]int64
		deadline time.Time
		want     want
	}{
		{
			name:  "one pair",
			size:  1000,
			pairs: []PairCap{{From: "a1", To: "b1", CapBps: 800}},
			slots: map[string][]slot{"a1>b1": {{t0, 1000}}},
			want:  want{shares: map[string]int64{"a1>b1": 1000}, completion: sec(10), asks: 1},
		},
		{
			name:  "zero size books nothing",
			size:  0,
			pairs: []PairCap{ab},
			slots: map[string][]slot{"a1>b1": {{t0, 1000}}},
			want:  want{shares: map[string]int64{}},
		},
		{
			name:  "split by cap, already even ends",
			size:  400,
			pairs: []PairCap{ab, cd},
			slots: map[string][]slot{"a1>b1": {{t0, 1000}}, "a2>b2": {{t0, 1000}}},
			want:  want{shares: map[string]int64{"a1>b1": 100, "a2>b2": 300}, completion: sec(8), asks: 1},
		},
		{
			name:  "unknown caps: even",
			size:  300,
			pairs: []PairCap{{From: "a1", To: "b1"}, {From: "a2", To: "b2"}},
			slots: map[string][]slot{"a1>b1": {{t0, 100}}, "a2>b2": {{t0, 100}}},
			want:  want{shares: map[string]int64{"a1>b1": 150, "a2>b2": 150}, completion: sec(12), asks: 1},
		},
		{
			// b2's path is free only 10 s later: the first split (by
			// cap, 100 : 300) ends at 18 s; re-splitting by rate ×
			// (latest end − start) moves bytes to a1→b1: 16.11 s, 15.68
			// s, then 15.55 s in the fourth and last round (the optimum,
			// both ending together, is 15.5 s).
			name:  "re-split toward the earliest completion, no deadline",
			size:  400,
			pairs: []PairCap{ab, cd},
			slots: map[string][]slot{"a1>b1": {{t0, 1000}}, "a2>b2": {{sec(10), 1000}}},
			want:  want{shares: map[string]int64{"a1>b1": 192, "a2>b2": 208}, completion: sec(15.55), asks: 4},
		},
		{
			// With a deadline at 30 s the re-split is by rate ×
			// (deadline − start): 3000 : 6000.
			name:     "re-split by what each pair carries by the deadline",
			size:     400,
			pairs:    []PairCap{ab, cd},
			slots:    map[string][]slot{"a1>b1": {{t0, 1000}}, "a2>b2": {{sec(10), 1000}}},
			deadline: sec(30),
			want:     want{shares: map[string]int64{"a1>b1": 133, "a2>b2": 267}, completion: sec(17.12), asks: 2},
		},
		{
			name:     "infeasible deadline: the earliest completion, bookings kept",
			size:     400,
			pairs:    []PairCap{ab, cd},
			slots:    map[string][]slot{"a1>b1": {{t0, 1000}}, "a2>b2": {{sec(10), 1000}}},
			deadline: sec(12),
			want:     want{shares: map[string]int64{"a1>b1": 192, "a2>b2": 208}, completion: sec(15.55), infeasible: true, asks: 4},
		},
		{
			name:  "a pair refused: the other carries it all",
			size:  400,
			pairs: []PairCap{ab, cd},
			slots: map[string][]slot{"a1>b1": {{t0, 1000}}},
			want:  want{shares: map[string]int64{"a1>b1": 400}, completion: sec(32)},
		},
		{
			name:  "every pair refused",
			size:  400,
			pairs: []PairCap{ab, cd},
			slots: map[string][]slot{},
			want:  want{refused: true},
		},
		{
			// a2→b2 takes at most 225 bytes: the first round (by cap)
			// gives it exactly that and ends at 26 s; the second would
			// give it 279 and is refused, so the first round stands.
			name:  "a pair refused for a larger share keeps the round before",
			size:  300,
			pairs: []PairCap{{From: "a1", To: "b1", CapBps: 100}, {From: "a2", To: "b2", CapBps: 300}},
			slots: map[string][]slot{"a1>b1": {{sec(20), 1000}}, "a2>b2": {{t0, 1000}}},
			limit: map[string]int64{"a2>b2": 225},
			want:  want{shares: map[string]int64{"a1>b1": 75, "a2>b2": 225}, completion: sec(26)},
		},
		{
			// 3 source nodes × 2 destination nodes: x is in two pairs,
			// which get half of its 300 each.
			name:  "3x2 nodes",
			size:  6000,
			pairs: Pairs([]Node{{"a", 300, 0}, {"b", 300, 0}, {"c", 300, 0}}, []Node{{"x", 300, 0}, {"y", 300, 0}}),
			slots: map[string][]slot{"a>x": {{t0, 1e6}}, "b>y": {{t0, 1e6}}, "c>x": {{t0, 1e6}}},
			want:  want{shares: map[string]int64{"a>x": 1500, "b>y": 3000, "c>x": 1500}, completion: sec(80), asks: 1},
		},
		{
			name:  "a later, faster slot is taken when it ends first",
			size:  1000,
			pairs: []PairCap{{From: "a1", To: "b1"}},
			slots: map[string][]slot{"a1>b1": {{t0, 100}, {sec(10), 8000}}},
			want:  want{shares: map[string]int64{"a1>b1": 1000}, completion: sec(11), asks: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSched()
			s.slots, s.limit = tc.slots, tc.limit
			if s.limit == nil {
				s.limit = map[string]int64{}
			}
			called := time.Now()
			books, end, err := Deadline(tc.size, tc.pairs, tc.deadline, s.Ask)
			returned := time.Now()
			switch {
			case tc.want.refused:
				var re *RefusedError
				if !errors.Is(err, ErrRefused) || !errors.As(err, &re) {
					t.Fatalf("err = %v, want a *RefusedError", err)
				}
				for _, p := range tc.pairs {
					if !strings.Contains(err.Error(), p.From+" → "+p.To+": no path between") {
						t.Errorf("%q does not name %s → %s and its reason", err, p.From, p.To)
					}
				}
				if books != nil {
					t.Errorf("bookings %+v with the error", books)
				}
				return
			case tc.want.infeasible:
				var ie *InfeasibleError
				if !errors.Is(err, ErrInfeasible) || !errors.As(err, &ie) {
					t.Fatalf("err = %v, want an *InfeasibleError", err)
				}
				if !ie.Earliest.Equal(end) || !ie.Deadline.Equal(tc.deadline) || ie.Algorithm != "earliest-completion" {
					t.Errorf("InfeasibleError %+v, completion %s", ie, end)
				}
				want := fmt.Sprintf("deadline %s cannot be met: the earliest completion is %s (algorithm earliest-completion)",
					tc.deadline.Format(time.RFC3339), end.Format(time.RFC3339))
				if err.Error() != want {
					t.Errorf("err = %q, want %q", err, want)
				}
			case err != nil:
				t.Fatalf("Deadline: %v", err)
			}
			got := map[string]int64{}
			var sum int64
			for _, b := range books {
				got[key(b.Pair)] = b.Share
				sum += b.Share
				if o := s.given[key(b.Pair)][b.Share]; o != b.Offer {
					t.Errorf("%s: booked %+v for %d bytes, the scheduler offered %+v", key(b.Pair), b.Offer, b.Share, o)
				}
			}
			if sum != tc.size {
				t.Errorf("shares sum to %d, want %d", sum, tc.size)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want.shares) {
				t.Errorf("shares %v, want %v (asked %v)", got, tc.want.shares, s.ask)
			}
			if tc.size == 0 {
				// Nothing to move completes now: during the call.
				if end.Before(called) || end.After(returned) || len(s.ask) > 0 {
					t.Errorf("zero size: completion %s, asked %v", end, s.ask)
				}
				return
			}
			if !end.Round(10 * time.Millisecond).Equal(tc.want.completion) {
				t.Errorf("completion %s, want %s", end, tc.want.completion)
			}
			if tc.want.asks > 0 {
				for k, a := range s.ask {
					if len(a) != tc.want.asks {
						t.Errorf("%s asked %d times (%v), want %d", k, len(a), a, tc.want.asks)
					}
				}
			}
		})
	}
}

func TestDeadlineNoPairs(t *testing.T) {
	if _, _, err := Deadline(10, nil, time.Time{}, newSched().Ask); err == nil {
		t.Error("no pairs, no error")
	}
	if _, _, err := Deadline(-1, []PairCap{{From: "a", To: "b"}}, time.Time{}, newSched().Ask); err == nil {
		t.Error("a negative size, no error")
	}
}

// TestDeadlineProperty: random pairs, paths, sizes, deadlines and
// refusals. Either every pair was refused, or the shares add up to the
// size, each booking is the scheduler's offer for exactly its share and
// carries it (rate × window ≥ its bits), the completion is the latest end,
// and the completion is after the deadline exactly when the error says
// the deadline cannot be met.
func TestDeadlineProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var refused, infeasible, met, partial int
	defer func() {
		t.Logf("refused %d, infeasible %d, met %d, with a pair left out %d", refused, infeasible, met, partial)
		if refused == 0 || infeasible == 0 || met == 0 || partial == 0 {
			t.Error("the random cases miss a kind")
		}
	}()
	for n := range 3000 {
		s := newSched()
		var pairs []PairCap
		for i := range 1 + r.IntN(6) {
			p := PairCap{From: fmt.Sprintf("a%d", i), To: fmt.Sprintf("b%d", i)}
			if r.IntN(3) > 0 {
				p.CapBps = 1000 + r.Uint64N(1e10)
			}
			pairs = append(pairs, p)
			if r.IntN(6) == 0 {
				continue // no path: refused
			}
			for range 1 + r.IntN(3) {
				s.slots[key(p)] = append(s.slots[key(p)], slot{t0.Add(time.Duration(r.Int64N(int64(48 * time.Hour)))), 1000 + r.Uint64N(1e10)})
			}
			if r.IntN(5) == 0 {
				s.limit[key(p)] = r.Int64N(1e11)
			}
		}
		size := r.Int64N(1e11)
		var deadline time.Time
		if r.IntN(2) == 0 {
			deadline = t0.Add(time.Duration(r.Int64N(int64(96 * time.Hour))))
		}
		books, end, err := Deadline(size, pairs, deadline, s.Ask)
		if errors.Is(err, ErrRefused) {
			refused++
			for _, p := range pairs {
				if !s.refused[key(p)] {
					t.Fatalf("case %d: %s was never refused, yet all were: %v", n, key(p), err)
				}
			}
			continue
		}
		if err != nil && !errors.Is(err, ErrInfeasible) {
			t.Fatalf("case %d: %v", n, err)
		}
		var sum int64
		for _, b := range books {
			if b.Share <= 0 {
				t.Fatalf("case %d: booking %+v without bytes", n, b)
			}
			sum += b.Share
			if o := s.given[key(b.Pair)][b.Share]; o != b.Offer {
				t.Fatalf("case %d: %s booked %+v for %d bytes, offered %+v", n, key(b.Pair), b.Offer, b.Share, o)
			}
			bits := float64(b.Share) * 8
			if carry := float64(b.Offer.RateBps) * b.Offer.End.Sub(b.Offer.Start).Seconds(); carry < bits*(1-1e-9) {
				t.Fatalf("case %d: %s: %d bytes do not fit %+v", n, key(b.Pair), b.Share, b.Offer)
			}
			if b.Pair.CapBps != 0 && b.Offer.RateBps > b.Pair.CapBps {
				t.Fatalf("case %d: %s offered above its cap: %+v", n, key(b.Pair), b)
			}
		}
		var latest time.Time
		for _, b := range books {
			if b.Offer.End.After(latest) {
				latest = b.Offer.End
			}
		}
		if sum != size || !latest.Equal(end) && size > 0 {
			t.Fatalf("case %d: shares sum to %d of %d; completion %s, latest end %s", n, sum, size, end, latest)
		}
		if len(books) < len(pairs) && size >= int64(len(pairs)) {
			partial++
		}
		if errors.Is(err, ErrInfeasible) {
			infeasible++
		} else if !deadline.IsZero() {
			met++
		}
		late := !deadline.IsZero() && end.After(deadline)
		if late != errors.Is(err, ErrInfeasible) {
			t.Fatalf("case %d: completion %s, deadline %s, err %v", n, end, deadline, err)
		}
	}
}

// TestDeadlineRefusals: an infeasible deadline names the pairs refused;
// a scheduler's empty or rateless offer refuses a pair.
func TestDeadlineRefusals(t *testing.T) {
	ab := PairCap{From: "a1", To: "b1", CapBps: 100}
	cd := PairCap{From: "a2", To: "b2", CapBps: 100}
	s := newSched()
	s.slots["a1>b1"] = []slot{{t0, 100}}
	books, end, err := Deadline(100, []PairCap{ab, cd}, sec(4), s.Ask)
	want := "deadline 2026-11-25T12:00:04Z cannot be met: the earliest completion is 2026-11-25T12:00:08Z (algorithm earliest-completion); not used: a2 → b2: no path between a2 and b2"
	if !errors.Is(err, ErrInfeasible) || err.Error() != want || len(books) != 1 || !end.Equal(sec(8)) {
		t.Errorf("Deadline = %+v, %s, %v; want one booking, 8 s, %q", books, end, err, want)
	}
	var ie *InfeasibleError
	if !errors.As(err, &ie) || len(ie.Refused) != 1 || ie.Refused[0].Pair != cd {
		t.Errorf("InfeasibleError %+v", ie)
	}

	for _, tc := range []struct {
		name  string
		offer Offer
		why   string
	}{
		{"no rate", Offer{Start: t0, End: sec(10), Algorithm: "x"}, "the scheduler offered no bandwidth"},
		{"an empty window", Offer{Start: sec(10), End: sec(10), RateBps: 100, Algorithm: "x"}, "the scheduler offered an empty window (2026-11-25T12:00:10Z to 2026-11-25T12:00:10Z)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ask := func(p PairCap, bytes int64) (Offer, error) { return tc.offer, nil }
			_, _, err := Deadline(100, []PairCap{ab}, time.Time{}, ask)
			var re *RefusedError
			if !errors.As(err, &re) || len(re.Refused) != 1 || re.Refused[0].Err.Error() != tc.why {
				t.Errorf("err = %v, want a *RefusedError: %s", err, tc.why)
			}
		})
	}

	// errors.Is sees through a RefusedError to the scheduler's errors.
	errFull := errors.New("full")
	_, _, err = Deadline(100, []PairCap{ab, cd}, time.Time{}, func(PairCap, int64) (Offer, error) { return Offer{}, errFull })
	if !errors.Is(err, errFull) || !errors.Is(err, ErrRefused) {
		t.Errorf("err = %v: not ErrRefused wrapping the scheduler's error", err)
	}
}
