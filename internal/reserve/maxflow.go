package reserve

import "math"

// flowNet is a directed network for Dinic's max-flow, with integer
// capacities (bits per second): integer capacities give an integer
// maximum flow, so nothing is rounded and no capacity is ever exceeded.
//
// Edges are kept in pairs: edge 2·i is the i-th edge added and 2·i+1 its
// residual reverse. The network is built once per query and run on many
// windows, each with its own capacities (setCap, then maxFlow).
type flowNet struct {
	head  [][]int32 // per node, its edges (both kinds) in the order added
	to    []int32
	res   []uint64 // residual capacity
	orig  []uint64 // per edge pair, the capacity set
	level []int32
	iter  []int
	queue []int32
}

func newFlowNet(n int) *flowNet {
	return &flowNet{head: make([][]int32, n), level: make([]int32, n), iter: make([]int, n)}
}

// addEdge adds an edge from u to v and returns its index (even).
func (f *flowNet) addEdge(u, v int32) int32 {
	e := int32(len(f.to))
	f.head[u] = append(f.head[u], e)
	f.head[v] = append(f.head[v], e+1)
	f.to = append(f.to, v, u)
	f.res = append(f.res, 0, 0)
	f.orig = append(f.orig, 0)
	return e
}

// setCap sets the capacity of edge e (as addEdge returned it); the flow
// is then cleared by the next maxFlow.
func (f *flowNet) setCap(e int32, c uint64) { f.orig[e/2] = c }

// flow returns the flow on edge e after maxFlow.
func (f *flowNet) flow(e int32) uint64 { return f.orig[e/2] - f.res[e] }

// maxFlow computes a maximum flow from s to t afresh and returns its value.
// The sum of the capacities out of s must fit in a uint64, so that the
// value does.
func (f *flowNet) maxFlow(s, t int32) uint64 {
	for i, c := range f.orig {
		f.res[2*i], f.res[2*i+1] = c, 0
	}
	var total uint64
	for f.levels(s, t) {
		for i := range f.iter {
			f.iter[i] = 0
		}
		for {
			d := f.augment(s, t, math.MaxUint64)
			if d == 0 {
				break
			}
			total += d
		}
	}
	return total
}

// levels numbers the nodes by their distance from s in the residual
// network and reports whether t is reachable.
func (f *flowNet) levels(s, t int32) bool {
	for i := range f.level {
		f.level[i] = -1
	}
	f.level[s] = 0
	q := append(f.queue[:0], s)
	for i := 0; i < len(q); i++ {
		u := q[i]
		for _, e := range f.head[u] {
			if v := f.to[e]; f.res[e] > 0 && f.level[v] < 0 {
				f.level[v] = f.level[u] + 1
				q = append(q, v)
			}
		}
	}
	f.queue = q
	return f.level[t] >= 0
}

// augment pushes up to limit along one shortest augmenting path from u to
// t and returns how much. The per-node edge cursors (iter) skip edges that
// are saturated or lead nowhere, so a phase costs O(V·E).
func (f *flowNet) augment(u, t int32, limit uint64) uint64 {
	if u == t {
		return limit
	}
	for ; f.iter[u] < len(f.head[u]); f.iter[u]++ {
		e := f.head[u][f.iter[u]]
		v := f.to[e]
		if f.res[e] == 0 || f.level[v] != f.level[u]+1 {
			continue
		}
		if d := f.augment(v, t, min(limit, f.res[e])); d > 0 {
			f.res[e] -= d
			f.res[e^1] += d
			return d
		}
	}
	return 0
}
