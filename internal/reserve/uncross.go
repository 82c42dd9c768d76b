package reserve

import "slices"

// uncross rearranges a plan's flows so that no pair of nodes sends over
// two paths where an exchange of end hosts with another flow avoids it.
// A pair's flows are told apart on the wire only by their ends (a flow
// spec names the two addresses and the server's port), so two paths
// between the same two nodes could not both be steered: the agents would
// put every packet of the pair on one of them.
//
// The exchange: flows g (a → b) and h (c → d), whose last hops both leave
// the same node r, swap what enters their destinations: m = min of their
// rates of g now ends at d over h's last hop, and m of h at b over g's.
// Every link direction carries what it carried (r → b and r → d each lose
// m and gain m), so the plan stays within what is free; sources are
// exchanged the same way over first hops that enter the same node. A swap
// is made only if the pairs it creates have no other path already, so the
// number of pairs with several paths never grows, and the smaller flow of
// a conflict moves whole. What cannot be untangled this way (one node per
// site, two paths) stays as it was.
func uncross(flows []PathFlow) []PathFlow {
	for range 4 * (len(flows) + 1) * (len(flows) + 1) {
		g, ok := conflicted(flows)
		if !ok {
			break
		}
		moved := false
		for _, dst := range []bool{true, false} {
			for h := range flows {
				if h == g || !swappable(flows[g], flows[h], dst) {
					continue
				}
				gp, hp := swapped(flows[g], flows[h], dst)
				if hasOtherPath(flows, gp, g, h) || hasOtherPath(flows, hp, g, h) {
					continue
				}
				m := min(flows[g].Rate, flows[h].Rate)
				gp.Rate, hp.Rate = m, m
				flows[g].Rate -= m
				flows[h].Rate -= m
				flows = append(flows, gp, hp)
				flows = merged(flows)
				moved = true
				break
			}
			if moved {
				break
			}
		}
		if !moved {
			break
		}
	}
	return flows
}

// conflicted returns the smallest flow of a pair that has several paths.
func conflicted(flows []PathFlow) (int, bool) {
	best := -1
	for i, f := range flows {
		for k, o := range flows {
			if k != i && o.From == f.From && o.To == f.To && !slices.Equal(o.Path, f.Path) {
				if best < 0 || f.Rate < flows[best].Rate {
					best = i
				}
				break
			}
		}
	}
	return best, best >= 0
}

// swappable says whether g and h can exchange destinations (dst) or
// sources: different ones, reached over hops that meet at one node.
func swappable(g, h PathFlow, dst bool) bool {
	if len(g.Path) == 0 || len(h.Path) == 0 {
		return false
	}
	if dst {
		return g.To != h.To && g.From != h.To && h.From != g.To &&
			g.Path[len(g.Path)-1].From == h.Path[len(h.Path)-1].From
	}
	return g.From != h.From && g.From != h.To && h.From != g.To && g.Path[0].To == h.Path[0].To
}

// swapped returns g and h with their destinations (dst) or sources
// exchanged, the hops that reach them with them.
func swapped(g, h PathFlow, dst bool) (PathFlow, PathFlow) {
	gp, hp := g, h
	if dst {
		gl, hl := len(g.Path)-1, len(h.Path)-1
		gp.To, hp.To = h.To, g.To
		gp.Path = append(slices.Clone(g.Path[:gl]), h.Path[hl])
		hp.Path = append(slices.Clone(h.Path[:hl]), g.Path[gl])
		return gp, hp
	}
	gp.From, hp.From = h.From, g.From
	gp.Path = append([]Hop{h.Path[0]}, g.Path[1:]...)
	hp.Path = append([]Hop{g.Path[0]}, h.Path[1:]...)
	return gp, hp
}

// hasOtherPath says whether f's pair already sends over another path
// among flows (skipping g and h, the flows being exchanged, unless they
// keep some of their rate).
func hasOtherPath(flows []PathFlow, f PathFlow, g, h int) bool {
	m := min(flows[g].Rate, flows[h].Rate)
	for i, o := range flows {
		if (i == g || i == h) && o.Rate == m {
			continue // moves whole
		}
		if o.From == f.From && o.To == f.To && !slices.Equal(o.Path, f.Path) {
			return true
		}
	}
	return false
}

// merged drops empty flows and adds up flows of one pair on one path.
func merged(flows []PathFlow) []PathFlow {
	out := flows[:0]
	for _, f := range flows {
		if f.Rate == 0 {
			continue
		}
		if i := slices.IndexFunc(out, func(o PathFlow) bool {
			return o.From == f.From && o.To == f.To && slices.Equal(o.Path, f.Path)
		}); i >= 0 {
			out[i].Rate += f.Rate
			continue
		}
		out = append(out, f)
	}
	return out
}
