package service

import (
	"math/rand/v2"
	"testing"
	"time"
)

// consecutive cuts a window into contiguous reservations, each within the
// policy's longest and no shorter than its shortest (where the whole is
// longer than that), on seeded random windows and policies.
func TestConsecutive(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 5))
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5000 {
		longest := time.Duration(1+rng.IntN(10_000)) * time.Second
		shortest := time.Duration(rng.Int64N(int64(longest/2) + 1))
		total := time.Duration(1 + rng.Int64N(int64(50*longest)))
		if i%7 == 0 {
			longest = 0 // no policy
		}
		ws := consecutive(t0, t0.Add(total), longest, shortest)
		at := t0
		for k, w := range ws {
			if !w[0].Equal(at) || !w[1].After(w[0]) {
				t.Fatalf("case %d: window %d %v does not follow %v", i, k, w, at)
			}
			d := w[1].Sub(w[0])
			if longest > 0 && d > longest {
				t.Fatalf("case %d (total %s, longest %s): window %d is %s", i, total, longest, k, d)
			}
			if total >= shortest && d < shortest {
				t.Fatalf("case %d (total %s, longest %s, shortest %s): window %d is %s", i, total, longest, shortest, k, d)
			}
			at = w[1]
		}
		if !at.Equal(t0.Add(total)) {
			t.Fatalf("case %d: the windows end at %v, not %v", i, at, t0.Add(total))
		}
	}
}
