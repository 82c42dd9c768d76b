// Package heapq is the one priority queue of lightpath: a binary min-heap
// of values under ordered keys, ties popped in the order they were pushed
// (or, when asked, in any order, which is cheaper when many keys tie).
// A max-heap is a min-heap of reversed keys (for example ^width). The
// controller's clock, the scheduler's widest-path search and release merge,
// the topology's shortest paths and the emulator's delay lines use it.
//
// Keys are cmp.Ordered so the comparisons compile to plain machine
// comparisons: a heap ordered through a function value was a quarter
// slower on the scheduler's searches.
package heapq

import "cmp"

// Heap is a binary min-heap of V by K; among equal keys the one pushed
// first is on top, unless AnyTies. The zero Heap is empty and ready to use.
type Heap[K cmp.Ordered, V any] struct {
	// AnyTies, set before the first push, lets equal keys come out in any
	// order. Keeping the push order makes a sift go past every equal key;
	// a widest-path search, where many paths share a width, ran a third
	// more instructions for an order it does not need.
	AnyTies bool
	items   []item[K, V]
	seq     uint32
}

type item[K cmp.Ordered, V any] struct {
	key K
	// seq is the push order, for ties: compared as serial numbers
	// (RFC 1982), so it may wrap as long as the elements in the heap span
	// fewer than 2^31 pushes. Four bytes keep a heap of 8-byte keys and
	// 4-byte values at 16 bytes an element.
	seq uint32
	val V
}

func (h *Heap[K, V]) less(a, b *item[K, V]) bool {
	return a.key < b.key || !h.AnyTies && a.key == b.key && int32(a.seq-b.seq) < 0
}

// Len is the number of elements.
func (h *Heap[K, V]) Len() int { return len(h.items) }

// Top returns the least key and its value; the heap must not be empty.
func (h *Heap[K, V]) Top() (K, V) { return h.items[0].key, h.items[0].val }

// Push adds v under key k.
func (h *Heap[K, V]) Push(k K, v V) {
	h.Add(k, v)
	h.up(len(h.items) - 1)
}

// Add appends v under key k without restoring the order, for building a
// heap in linear time: call Heapify after the last Add, before anything
// but Len and Add.
func (h *Heap[K, V]) Add(k K, v V) {
	h.seq++
	h.items = append(h.items, item[K, V]{k, h.seq, v})
}

// Heapify restores the order after Add.
func (h *Heap[K, V]) Heapify() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// Pop removes and returns the least key and its value; the heap must not
// be empty. The vacated slot is zeroed, so the heap keeps no reference
// from it.
func (h *Heap[K, V]) Pop() (K, V) {
	q := h.items
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = item[K, V]{}
	h.items = q[:last]
	h.down(0)
	return top.key, top.val
}

// ReplaceTop replaces the least element by v under key k: a Pop then a
// Push in one sift, for a merge that takes the next element of the list
// it just popped from. The heap must not be empty.
func (h *Heap[K, V]) ReplaceTop(k K, v V) {
	h.seq++
	h.items[0] = item[K, V]{k, h.seq, v}
	h.down(0)
}

// Reset empties the heap, keeping its storage.
func (h *Heap[K, V]) Reset() {
	clear(h.items)
	h.items = h.items[:0]
}

func (h *Heap[K, V]) up(i int) {
	q := h.items
	x := q[i]
	// The element moves once, to the hole left as its parents move down.
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(&x, &q[p]) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = x
}

func (h *Heap[K, V]) down(i int) {
	q := h.items
	n := len(q)
	if i >= n {
		return
	}
	x := q[i]
	// The element moves once, to the hole left as its children move up.
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(&q[r], &q[l]) {
			m = r
		}
		if !h.less(&q[m], &x) {
			break
		}
		q[i] = q[m]
		i = m
	}
	q[i] = x
}
