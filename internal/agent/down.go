package agent

import "slices"

// WithoutDown returns want without the policy routing that would send
// packets out of a device whose carrier is gone (a reserved hop that is
// down): its routes, and the ip rules whose table is left empty. The
// packets then follow the main table, the routed path, and the flows go on
// there until the hop is back or the controller moves the reservation.
// Classes and marks stay: they are harmless on a dead device, and in place
// again the moment it returns.
func WithoutDown(want Plan, down []string) Plan {
	if len(down) == 0 {
		return want
	}
	out := want
	out.Routes = nil
	left := map[int]bool{}
	for _, r := range want.Routes {
		if slices.Contains(down, r.Dev) {
			continue
		}
		out.Routes = append(out.Routes, r)
		left[r.Table] = true
	}
	out.Rules = nil
	for _, r := range want.Rules {
		if left[r.Table] {
			out.Rules = append(out.Rules, r)
		}
	}
	return out
}
