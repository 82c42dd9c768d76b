package rules

import (
	"math"
	"testing"
	"time"
)

func nan() float64 { return math.NaN() }

func samples(pairs ...float64) []Sample {
	var out []Sample
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Sample{T: at(int(pairs[i])), V: pairs[i+1]})
	}
	return out
}

func TestWindow(t *testing.T) {
	w := 30 * time.Second
	now := at(100)
	for _, tc := range []struct {
		name string
		fn   Fn
		in   []Sample
		want float64
		ok   bool
	}{
		{"avg empty", FnAvg, nil, 0, false},
		{"last empty", FnLast, nil, 0, false},
		{"rate empty", FnRate, nil, 0, false},
		{"all outside", FnAvg, samples(10, 1, 69, 2, 101, 3), 0, false},
		{"avg one", FnAvg, samples(80, 4), 4, true},
		{"max one", FnMax, samples(80, 4), 4, true},
		{"min one", FnMin, samples(80, 4), 4, true},
		{"last one", FnLast, samples(80, 4), 4, true},
		{"rate one", FnRate, samples(80, 4), 0, false},
		{"rate same time", FnRate, []Sample{{at(80), 1}, {at(80), 5}}, 0, false},
		{"avg edges included", FnAvg, samples(69, 100, 70, 1, 85, 2, 100, 3, 101, 100), 2, true},
		{"max", FnMax, samples(70, 1, 80, 7, 90, -2), 7, true},
		{"min", FnMin, samples(70, 1, 80, 7, 90, -2), -2, true},
		{"last", FnLast, samples(70, 1, 80, 7, 90, -2), -2, true},
		{"last unsorted", FnLast, samples(90, -2, 70, 1, 80, 7), -2, true},
		{"rate", FnRate, samples(70, 0, 80, 100, 90, 300), 15, true},
		{"rate reset", FnRate, samples(70, 100, 80, 200, 90, 50), 150.0 / 20, true},      // 100, then 50 after the reset
		{"rate reset to zero", FnRate, samples(70, 100, 80, 0, 90, 60), 60.0 / 20, true}, // 0 + 60
		{"rate flat", FnRate, samples(70, 5, 100, 5), 0, true},
		{"NaN skipped", FnAvg, []Sample{{at(80), 2}, {at(85), math.NaN()}, {at(90), 4}}, 3, true},
		{"only NaN", FnMax, []Sample{{at(80), math.NaN()}}, 0, false},
		{"unknown fn", Fn("median"), samples(80, 4), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Window(tc.fn, tc.in, now, w)
			if ok != tc.ok || (ok && math.Abs(got-tc.want) > 1e-9) {
				t.Errorf("Window(%s) = %v, %v; want %v, %v", tc.fn, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestWindowDoesNotReorderInput(t *testing.T) {
	in := samples(90, 1, 80, 2)
	Window(FnLast, in, at(100), time.Minute)
	if in[0].T != at(90) {
		t.Error("Window sorted the caller's slice")
	}
}

func TestWindowAvgLarge(t *testing.T) {
	big := math.MaxFloat64 / 2
	got, ok := Window(FnAvg, []Sample{{at(90), big}, {at(95), big}, {at(99), big}}, at(100), time.Minute)
	if !ok || math.IsInf(got, 0) || math.Abs(got-big)/big > 1e-12 {
		t.Errorf("avg of large values = %v, %v", got, ok)
	}
}
