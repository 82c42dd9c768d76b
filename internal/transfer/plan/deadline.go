package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Offer is what the scheduler answers for one pair: the window and rate
// that complete the bytes asked for earliest, and the algorithm that
// found it.
type Offer struct {
	Start, End time.Time
	RateBps    uint64
	Algorithm  string
}

// Ask asks the scheduler for the earliest completion of bytes on the
// pair's path at up to p.CapBps (no cap when 0). An error refuses the
// pair for those bytes.
type Ask func(p PairCap, bytes int64) (Offer, error)

// Booking is a pair's share of a dataset and the offer that carries it.
type Booking struct {
	Pair  PairCap
	Share int64
	Offer Offer
}

// ErrInfeasible matches an *InfeasibleError.
var ErrInfeasible = errors.New("the deadline cannot be met")

// InfeasibleError says a deadline cannot be met, and when the dataset
// could be done at the earliest.
type InfeasibleError struct {
	Deadline time.Time
	// Earliest is the earliest completion the planner found, with the
	// scheduler algorithm(s) that answered.
	Earliest  time.Time
	Algorithm string
	// Refused are the pairs the scheduler refused, which carry nothing.
	Refused []Refusal
}

func (e *InfeasibleError) Error() string {
	msg := fmt.Sprintf("deadline %s cannot be met: the earliest completion is %s (algorithm %s)",
		e.Deadline.UTC().Format(time.RFC3339), e.Earliest.UTC().Format(time.RFC3339), e.Algorithm)
	if len(e.Refused) > 0 {
		msg += "; not used: " + refusals(e.Refused)
	}
	return msg
}

// Is makes errors.Is(err, ErrInfeasible) true.
func (e *InfeasibleError) Is(target error) bool { return target == ErrInfeasible }

// Refusal is a pair the scheduler refused, and why.
type Refusal struct {
	Pair PairCap
	Err  error
}

func refusals(r []Refusal) string {
	var b strings.Builder
	for i, x := range r {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s → %s: %v", x.Pair.From, x.Pair.To, x.Err)
	}
	return b.String()
}

// ErrRefused matches a *RefusedError.
var ErrRefused = errors.New("every node pair was refused")

// RefusedError is every pair refused, each with the scheduler's reason.
type RefusedError struct {
	Refused []Refusal
}

func (e *RefusedError) Error() string {
	return "no node pair can carry the dataset: " + refusals(e.Refused)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Unwrap gives the pairs' errors, so errors.Is and errors.As see them.
func (e *RefusedError) Unwrap() []error {
	errs := make([]error, len(e.Refused))
	for i, r := range e.Refused {
		errs[i] = r.Err
	}
	return errs
}

// MaxRounds bounds how many times Deadline asks every pair.
const MaxRounds = 4

// Deadline books size bytes over pairs to finish by deadline (zero: as
// early as it can). It splits size in proportion to the pairs' CapBps
// (an unknown cap counts as the largest known one; evenly when none is
// known) and asks each pair for its share. Then, up to MaxRounds rounds
// in all and while the completion (the latest End) improves, it splits
// again in proportion to what each pair's offer can carry by the
// deadline, its rate × (deadline − its start), and asks again; when the
// deadline is zero or already missed, rate × (latest end − start)
// instead, which evens the ends out and so brings the completion
// forward. It keeps the round with the earliest completion.
//
// A pair refused in the first round (an error from ask, or an offer with
// an empty window or no rate) gets a share of 0 and no booking, and the
// others share its bytes; every pair refused is a *RefusedError naming
// each with its reason. A pair refused in a later round ends the rounds
// at the last one every pair accepted.
//
// It returns the bookings (in pair order; their shares sum to size
// exactly), the completion and, when the completion is after a non-zero
// deadline, an *InfeasibleError with the earliest completion found and
// the pairs refused; the bookings come with it, so the caller can say
// how. A size of 0 needs no booking and completes now.
func Deadline(size int64, pairs []PairCap, deadline time.Time, ask Ask) ([]Booking, time.Time, error) {
	switch {
	case size == 0:
		return nil, time.Now(), nil
	case size < 0:
		return nil, time.Time{}, fmt.Errorf("negative dataset size %d", size)
	case len(pairs) == 0:
		return nil, time.Time{}, errors.New("no node pair to carry the dataset")
	}
	weights := capWeights(pairs)
	shares := Split(size, weights)
	refused := make([]error, len(pairs))
	var best []Booking
	var bestEnd time.Time
	for round := 0; round < MaxRounds; {
		books, at, errs := askAll(pairs, shares, ask)
		if errs != nil {
			if best != nil {
				break // keep the last round every pair accepted
			}
			left := false
			for i, err := range errs {
				if err != nil {
					refused[i], weights[i] = err, 0
				}
				if refused[i] == nil {
					left = true
				}
			}
			if !left {
				return nil, time.Time{}, &RefusedError{Refused: refusedPairs(pairs, refused)}
			}
			shares = splitAmong(size, weights, refused)
			continue // the same round again, without the refused pairs
		}
		end := completion(books)
		if best != nil && !end.Before(bestEnd) {
			break
		}
		best, bestEnd = books, end
		if round++; round == MaxRounds {
			break
		}
		horizon := deadline
		if deadline.IsZero() || end.After(deadline) {
			horizon = end
		}
		carry := make([]float64, len(pairs))
		for j, b := range books {
			i := at[j]
			if d := horizon.Sub(b.Offer.Start).Seconds(); d > 0 {
				carry[i] = float64(b.Offer.RateBps) * d
			}
		}
		next := splitAmong(size, carry, refused)
		if slices.Equal(next, shares) {
			break
		}
		shares = next
	}
	if !deadline.IsZero() && bestEnd.After(deadline) {
		return best, bestEnd, &InfeasibleError{Deadline: deadline, Earliest: bestEnd, Algorithm: Algorithm(best),
			Refused: refusedPairs(pairs, refused)}
	}
	return best, bestEnd, nil
}

func refusedPairs(pairs []PairCap, errs []error) []Refusal {
	var r []Refusal
	for i, err := range errs {
		if err != nil {
			r = append(r, Refusal{Pair: pairs[i], Err: err})
		}
	}
	return r
}

// capWeights are the pairs' caps, an unknown one counted as the largest
// known.
func capWeights(pairs []PairCap) []float64 {
	var top uint64
	for _, p := range pairs {
		top = max(top, p.CapBps)
	}
	w := make([]float64, len(pairs))
	for i, p := range pairs {
		w[i] = float64(p.CapBps)
		if p.CapBps == 0 {
			w[i] = float64(top)
		}
	}
	return w
}

// splitAmong splits size by weights among the pairs not refused, evenly
// among them when all their weights are zero.
func splitAmong(size int64, weights []float64, refused []error) []int64 {
	w := make([]float64, len(weights))
	some := false
	for i, x := range weights {
		if refused[i] == nil && x > 0 {
			w[i], some = x, true
		}
	}
	if !some {
		for i := range w {
			if refused[i] == nil {
				w[i] = 1
			}
		}
	}
	return Split(size, w)
}

// askAll asks every pair with a share; at[j] is the index of books[j]'s
// pair; errs is nil when all accepted, else it holds each refusal at its
// pair's index.
func askAll(pairs []PairCap, shares []int64, ask Ask) (books []Booking, at []int, errs []error) {
	for i, p := range pairs {
		if shares[i] == 0 {
			continue
		}
		o, err := ask(p, shares[i])
		switch {
		case err != nil:
		case !o.End.After(o.Start):
			err = fmt.Errorf("the scheduler offered an empty window (%s to %s)", o.Start.UTC().Format(time.RFC3339), o.End.UTC().Format(time.RFC3339))
		case o.RateBps == 0:
			err = errors.New("the scheduler offered no bandwidth")
		}
		if err != nil {
			if errs == nil {
				errs = make([]error, len(pairs))
			}
			errs[i] = err
			continue
		}
		books = append(books, Booking{Pair: p, Share: shares[i], Offer: o})
		at = append(at, i)
	}
	return books, at, errs
}

func completion(books []Booking) time.Time {
	var end time.Time
	for _, b := range books {
		if b.Offer.End.After(end) {
			end = b.Offer.End
		}
	}
	return end
}

// Algorithm names the scheduler algorithm(s) behind bookings: the
// distinct ones in booking order, joined by ", ".
func Algorithm(books []Booking) string {
	var names []string
	for _, b := range books {
		if b.Offer.Algorithm != "" && !slices.Contains(names, b.Offer.Algorithm) {
			names = append(names, b.Offer.Algorithm)
		}
	}
	return strings.Join(names, ", ")
}
