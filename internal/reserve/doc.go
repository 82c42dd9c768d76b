// Package reserve is the domain of Lightpath's reservation service: the
// topology as the scheduler sees it, the bandwidth booked on it over time,
// exact admission control, and the scheduling algorithms that answer "which
// path, when, and how fast" (DESIGN.md, "controller"). It is pure: no I/O,
// no clocks (every time is a parameter), no goroutines, so everything here
// is table-tested.
//
// The scheduling core:
//
//   - Graph: nodes (hosts and routers; only routers forward) and links, each
//     link being two directions with their own reservable capacity in bit/s
//     (the link's rate times its reservable fraction). Reservations are
//     directed: a booking is counted against the direction its data flows.
//   - Timeline: per link direction, the bandwidth in use as a step function
//     of time (sorted breakpoints), with half-open intervals [start, end).
//   - Schedule: a Graph plus one Timeline per direction and the Bookings
//     that fill them; Admit is exact (at every instant, in every direction
//     of every link of the path, the sum of bookings stays within the
//     reservable capacity), and Add books only what Admit accepts.
//   - The algorithms of the UltraScience Net line of work, each Result
//     naming the one that produced it: FixedSlot (BFS), WidestPath (max-min
//     Dijkstra), EarliestStart and AllStarts (interval labels, intersected
//     along a fixed path or propagated Bellman-Ford style over the graph),
//     EarliestCompletion (slot extension) and Alternatives for a request
//     that was refused.
//   - The joint planner: JointEarliestCompletion moves a dataset from a
//     set of source nodes to a set of destination nodes over every path
//     between them at once (a maximum flow per window, decomposed into
//     paths), for the earliest completion; JointFixedSlot is the same flow
//     over a given window.
//   - The path preference (prefer.go; DESIGN.md, "Path choice"): which of
//     the paths with room every algorithm picks. By default the dedicated
//     links first and the routed ones only for what does not fit; routed
//     and shortest are the alternatives a controller may configure.
//
// Beside the scheduling core, the package holds the reservations themselves:
// their state machine, the policies they are checked against and the flow
// specs they steer.
//
// A Schedule may be queried from many goroutines at once as long as nothing
// mutates it meanwhile (Add and Remove need the caller's exclusive lock).
package reserve
