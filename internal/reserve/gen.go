package reserve

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Workload is a generated topology with bookings on it, for benchmarks (the
// package's own and bench/scheduler.sh's): the plain values, and the Graph
// and Schedule built from them.
type Workload struct {
	Nodes    map[string]string // name → NodeHost or NodeRouter
	Links    []Link
	Bookings []Booking // in the order they were admitted
	// Start and End bound the bookings' start times; every booking ends
	// within 8 hours of End.
	Start, End time.Time
	Graph      *Graph
	Schedule   *Schedule
}

// WorkloadEpoch is when generated workloads begin: a fixed instant, so that
// a workload depends on its arguments only.
var WorkloadEpoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// GenerateWorkload generates, deterministically from seed, a topology of
// nodes nodes and links links with bookings bookings, all admitted.
//
// Half the nodes (at least two) are routers ("r0001", ...), joined by a
// random spanning tree and then random extra links, a fifth of them
// dedicated; every other node is a host ("h0001", ...) with one uplink to a
// random router. Host uplinks are 10 Gbit/s, router links 10, 40 or
// 100 Gbit/s (dedicated ones 10), with one-way delays of 1 to 30 ms; routed
// links are 90% reservable, dedicated ones 100%. Each booking goes between
// two random hosts on a shortest path (ties broken at random, one path per
// pair), with 100 Mbit/s to 2 Gbit/s, for 10 minutes to 8 hours, starting
// on a whole minute within a week of WorkloadEpoch (whole minutes, so that
// many bookings start or end at the same instant); a booking that Admit
// refuses is drawn again.
func GenerateWorkload(seed int64, nodes, links, bookings int) (*Workload, error) {
	routers := max(nodes/2, 2)
	hosts := nodes - routers
	if hosts < 2 {
		return nil, fmt.Errorf("%d nodes: want at least 4 (two hosts and two routers)", nodes)
	}
	if links < hosts+routers-1 {
		return nil, fmt.Errorf("%d links cannot connect %d nodes: want at least %d", links, nodes, nodes-1)
	}
	if bookings < 0 {
		return nil, fmt.Errorf("%d bookings: want at least 0", bookings)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6c69676874706174)) // "lightpat"
	w := &Workload{Nodes: make(map[string]string, nodes), Start: WorkloadEpoch, End: WorkloadEpoch.Add(7 * 24 * time.Hour)}
	rname := func(i int) string { return fmt.Sprintf("r%04d", i+1) }
	hname := func(i int) string { return fmt.Sprintf("h%04d", i+1) }
	for i := range routers {
		w.Nodes[rname(i)] = NodeRouter
	}
	for i := range hosts {
		w.Nodes[hname(i)] = NodeHost
	}
	delay := func() time.Duration { return time.Duration(1+rng.IntN(30)) * time.Millisecond }
	link := func(a, b string, capacity uint64, dedicated bool) {
		l := Link{Name: fmt.Sprintf("l%05d", len(w.Links)+1), A: a, B: b, Capacity: capacity, Reservable: 0.9, Delay: delay(), Role: LinkRouted}
		if dedicated {
			l.Reservable, l.Role = 1, LinkDedicated
		}
		w.Links = append(w.Links, l)
	}
	const g = 1_000_000_000
	routerRate := func() uint64 { return []uint64{10 * g, 40 * g, 100 * g}[rng.IntN(3)] }
	for i := range hosts {
		link(hname(i), rname(rng.IntN(routers)), 10*g, false)
	}
	perm := rng.Perm(routers)
	for i := 1; i < routers; i++ {
		link(rname(perm[i]), rname(perm[rng.IntN(i)]), routerRate(), false)
	}
	for len(w.Links) < links {
		a, b := rng.IntN(routers), rng.IntN(routers)
		if a == b {
			continue
		}
		if rng.IntN(5) == 0 {
			link(rname(a), rname(b), 10*g, true)
		} else {
			link(rname(a), rname(b), routerRate(), false)
		}
	}
	gr, err := NewGraph(w.Nodes, w.Links)
	if err != nil {
		return nil, err
	}
	w.Graph, w.Schedule = gr, NewSchedule(gr)

	// One BFS tree per source host, neighbours shuffled: pred[v] is the
	// direction v is reached by.
	trees := make(map[int][]int32)
	tree := func(src int) []int32 {
		if t, ok := trees[src]; ok {
			return t
		}
		pred := make([]int32, len(gr.names))
		for i := range pred {
			pred[i] = -1
		}
		seen := make([]bool, len(gr.names))
		seen[src] = true
		queue := []int{src}
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			if u != src && !gr.router[u] {
				continue
			}
			adj := append([]int32(nil), gr.adj[u]...)
			rng.Shuffle(len(adj), func(i, j int) { adj[i], adj[j] = adj[j], adj[i] })
			for _, e := range adj {
				v := int(gr.dirs[e].to)
				if !seen[v] {
					seen[v], pred[v] = true, e
					queue = append(queue, v)
				}
			}
		}
		trees[src] = pred
		return pred
	}
	hostIdx := make([]int, hosts)
	for i := range hosts {
		hostIdx[i] = gr.index[hname(i)]
	}
	bws := []uint64{100_000_000, 200_000_000, 500_000_000, 1 * g, 2 * g}
	durs := []time.Duration{10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour}
	minutes := int(w.End.Sub(w.Start) / time.Minute)
	for tries := 0; len(w.Bookings) < bookings; tries++ {
		if tries > 20*bookings+1000 {
			return nil, fmt.Errorf("only %d of %d bookings fit after %d tries", len(w.Bookings), bookings, tries)
		}
		src, dst := hostIdx[rng.IntN(hosts)], hostIdx[rng.IntN(hosts)]
		if src == dst {
			continue
		}
		pred := tree(src)
		if pred[dst] < 0 {
			continue
		}
		var dirs []int32
		for v := dst; v != src; v = int(gr.dirs[pred[v]].from) {
			dirs = append(dirs, pred[v])
		}
		for i, j := 0, len(dirs)-1; i < j; i, j = i+1, j-1 {
			dirs[i], dirs[j] = dirs[j], dirs[i]
		}
		start := w.Start.Add(time.Duration(rng.IntN(minutes)) * time.Minute)
		b := Booking{
			ID:        fmt.Sprintf("b%06d", len(w.Bookings)+1),
			Path:      gr.hops(dirs),
			Bandwidth: bws[rng.IntN(len(bws))],
			Start:     start,
			End:       start.Add(durs[rng.IntN(len(durs))]),
		}
		if err := w.Schedule.Add(b); err != nil {
			continue
		}
		w.Bookings = append(w.Bookings, b)
	}
	return w, nil
}
