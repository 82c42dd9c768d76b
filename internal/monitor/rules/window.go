package rules

import (
	"slices"
	"time"
)

// Sample is one value of a series at one time.
type Sample struct {
	T time.Time
	V float64
}

// Window reduces the samples within [now-window, now] (both ends
// included) with fn. ok is false when there is nothing to reduce: no
// sample in the window, an unknown fn, or for rate fewer than two samples
// at different times. NaN samples are skipped, as stale markers are.
//
// rate is the counter's increase per second from the first sample in the
// window to the last; a drop is taken as a counter reset, after which the
// counter counted up from zero to the value seen.
//
// Samples should be in time order; they are sorted (in a copy) when not.
func Window(fn Fn, samples []Sample, now time.Time, window time.Duration) (float64, bool) {
	less := func(a, b Sample) int { return a.T.Compare(b.T) }
	if !slices.IsSortedFunc(samples, less) {
		samples = slices.Clone(samples)
		slices.SortStableFunc(samples, less)
	}
	from := now.Add(-window)
	var in []Sample
	for _, s := range samples {
		if s.T.Before(from) || s.T.After(now) || s.V != s.V {
			continue
		}
		in = append(in, s)
	}
	if len(in) == 0 {
		return 0, false
	}
	switch fn {
	case FnAvg:
		// A running mean: a sum of large counters could overflow to Inf.
		var mean float64
		for i, s := range in {
			mean += (s.V - mean) / float64(i+1)
		}
		return mean, true
	case FnMax:
		m := in[0].V
		for _, s := range in[1:] {
			m = max(m, s.V)
		}
		return m, true
	case FnMin:
		m := in[0].V
		for _, s := range in[1:] {
			m = min(m, s.V)
		}
		return m, true
	case FnLast:
		return in[len(in)-1].V, true
	case FnRate:
		first, last := in[0], in[len(in)-1]
		secs := last.T.Sub(first.T).Seconds()
		if len(in) < 2 || secs <= 0 {
			return 0, false
		}
		var inc float64
		for i := 1; i < len(in); i++ {
			if d := in[i].V - in[i-1].V; d >= 0 {
				inc += d
			} else {
				inc += in[i].V // reset: counted up from zero
			}
		}
		return inc / secs, true
	}
	return 0, false
}
