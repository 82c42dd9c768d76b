package heapq

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

type kv struct {
	k int
	n int // push order
}

// TestHeapOrder pushes, pops and replaces the top at random against a
// sorted reference: keys come out least first and equal keys in push
// order, whether the heap was built by Push or by Add and Heapify, and
// also across the wrap of the push counter.
func TestHeapOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 400 {
		var h Heap[int, int]
		if round%2 == 1 {
			h.seq = math.MaxUint32 - 150 // wraps within the round
		}
		var ref []kv
		n := 0
		bulk := r.IntN(20)
		for range bulk {
			k := r.IntN(8)
			h.Add(k, n)
			ref = append(ref, kv{k, n})
			n++
		}
		h.Heapify()
		for range 300 {
			if r.IntN(3) > 0 || len(ref) == 0 {
				k := r.IntN(8)
				h.Push(k, n)
				ref = append(ref, kv{k, n})
				n++
				continue
			}
			slices.SortStableFunc(ref, func(a, b kv) int { return cmp.Compare(a.k, b.k) })
			if tk, tv := h.Top(); tk != ref[0].k || tv != ref[0].n {
				t.Fatalf("round %d: top %d/%d, want %v", round, tk, tv, ref[0])
			}
			if r.IntN(2) == 0 {
				k := r.IntN(8)
				h.ReplaceTop(k, n)
				ref = append(ref[1:], kv{k, n})
				n++
				continue
			}
			k, v := h.Pop()
			if k != ref[0].k || v != ref[0].n {
				t.Fatalf("round %d: popped %d/%d, want %v", round, k, v, ref[0])
			}
			ref = ref[1:]
			if h.Len() != len(ref) {
				t.Fatalf("Len %d, want %d", h.Len(), len(ref))
			}
		}
	}
}

// TestAnyTies: with AnyTies the keys still come out least first.
func TestAnyTies(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := Heap[int, int]{AnyTies: true}
	var ref []int
	for range 2000 {
		if r.IntN(3) > 0 || h.Len() == 0 {
			k := r.IntN(16)
			h.Push(k, k)
			ref = append(ref, k)
			continue
		}
		slices.Sort(ref)
		k, v := h.Pop()
		if k != ref[0] || v != k {
			t.Fatalf("popped %d/%d, want %d", k, v, ref[0])
		}
		ref = ref[1:]
	}
}

// TestMaxHeap: reversed keys make a max-heap; Reset empties it and Pop
// leaves no reference behind in the vacated slot.
func TestMaxHeap(t *testing.T) {
	var h Heap[uint64, *int]
	for _, w := range []uint64{3, 9, 1, 7} {
		x := int(w)
		h.Push(^w, &x)
	}
	var got []int
	for h.Len() > 1 {
		_, p := h.Pop()
		got = append(got, *p)
	}
	if !slices.Equal(got, []int{9, 7, 3}) {
		t.Fatalf("max-heap order %v", got)
	}
	if s := h.items[:cap(h.items)]; s[1].val != nil {
		t.Fatal("a popped slot still holds its value")
	}
	h.Reset()
	if h.Len() != 0 {
		t.Fatal("Reset left elements")
	}
}
