// Package heapq is the one priority queue of lightpath: a binary min-heap
// of values under ordered keys, ties popped in the order they were pushed.
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
// first is on top. The zero Heap is empty and ready to use.
type Heap[K cmp.Ordered, V any] struct {
	items []item[K, V]
	seq   uint64
}

type item[K cmp.Ordered, V any] struct {
	key K
	seq uint64 // the push order: ties by arrival
	val V
}

func (a *item[K, V]) less(b *item[K, V]) bool {
	return a.key < b.key || a.key == b.key && a.seq < b.seq
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

// Reset empties the heap, keeping its storage.
func (h *Heap[K, V]) Reset() {
	clear(h.items)
	h.items = h.items[:0]
}

func (h *Heap[K, V]) up(i int) {
	q := h.items
	for i > 0 {
		p := (i - 1) / 2
		if !q[i].less(&q[p]) {
			return
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *Heap[K, V]) down(i int) {
	q := h.items
	n := len(q)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q[r].less(&q[l]) {
			m = r
		}
		if !q[m].less(&q[i]) {
			return
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
}
