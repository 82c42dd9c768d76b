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

	// While maxFlowCheapest runs: the cost of each edge pair, and each
	// node's distance from the source in the residual network under those
	// costs; augmenting paths then keep to edges on shortest paths. Nil
	// otherwise.
	cost []int64
	dist []int64
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
	f.reset()
	return f.blocking(s, t)
}

// reset gives every edge its whole capacity back.
func (f *flowNet) reset() {
	for i, c := range f.orig {
		f.res[2*i], f.res[2*i+1] = c, 0
	}
}

// blocking augments along Dinic's level graphs (of the edges levels
// admits) until t is no longer reachable, and returns what it added.
func (f *flowNet) blocking(s, t int32) uint64 {
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

// maxFlowCheapest computes afresh a maximum flow from s to t of least
// total cost, cost[i] ≥ 0 being the cost per unit of flow on the i-th edge
// added, and returns its value: the same value maxFlow returns.
//
// Formulation (primal-dual): the distances from s in the residual network
// (a reverse edge costing minus its edge) by Bellman-Ford, which is exact
// because a flow built along shortest paths leaves no negative cycle; then
// Dinic's blocking flows on the edges that lie on shortest paths, until
// none is left; repeated until t is unreachable. Each round lengthens the
// shortest path to t, so with integer costs there are at most as many
// rounds as the most a simple path can cost, plus one.
func (f *flowNet) maxFlowCheapest(s, t int32, cost []int64) uint64 {
	f.reset()
	f.cost = cost
	f.dist = make([]int64, len(f.head))
	defer func() { f.cost, f.dist = nil, nil }()
	in := make([]bool, len(f.head))
	var total uint64
	for {
		for i := range f.dist {
			f.dist[i] = math.MaxInt64
		}
		f.dist[s] = 0
		q := []int32{s}
		in[s] = true
		for len(q) > 0 {
			u := q[0]
			q = q[1:]
			in[u] = false
			for _, e := range f.head[u] {
				if f.res[e] == 0 {
					continue
				}
				if v, d := f.to[e], f.dist[u]+f.edgeCost(e); d < f.dist[v] {
					f.dist[v] = d
					if !in[v] {
						in[v] = true
						q = append(q, v)
					}
				}
			}
		}
		if f.dist[t] == math.MaxInt64 {
			return total
		}
		total += f.blocking(s, t)
	}
}

// edgeCost is the cost of a unit of flow on edge e: its pair's cost, or
// minus it on the reverse edge.
func (f *flowNet) edgeCost(e int32) int64 {
	if e%2 == 1 {
		return -f.cost[e/2]
	}
	return f.cost[e/2]
}

// usable reports whether an augmenting path may take edge e from u: always
// for maxFlow; for maxFlowCheapest, only if e is on a shortest path.
func (f *flowNet) usable(u int32, e int32) bool {
	return f.dist == nil || f.dist[u] != math.MaxInt64 && f.dist[f.to[e]] == f.dist[u]+f.edgeCost(e)
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
			if v := f.to[e]; f.res[e] > 0 && f.level[v] < 0 && f.usable(u, e) {
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
		if f.res[e] == 0 || f.level[v] != f.level[u]+1 || !f.usable(u, e) {
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
