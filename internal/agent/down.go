package agent

import (
	"slices"

	"github.com/lightpath/lightpath/internal/topology"
)

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

// WithoutBroken returns want without the steering of the reservations
// whose paths the probes found broken (by DSCP), as WithoutDown does for a
// dead device: the marking of their flows (so no router steers their
// packets by the DSCP), the ip rules that send their packets and their
// sockets' route lookups to the reservation's table, and the rules that
// turn the DSCP into that mark. The flows then take the routed path. What
// the probes need stays, so they go on testing the path: the table's
// routes, the probes' rules (ProbeRulePrio) and the classes.
func WithoutBroken(want Plan, broken []uint8) Plan {
	if len(broken) == 0 {
		return want
	}
	out := want
	out.Rules = nil
	for _, r := range want.Rules {
		d := r.Priority - topology.RulePrio
		if d >= 0 && d <= topology.MaxDSCP && slices.Contains(broken, uint8(d)) {
			continue
		}
		out.Rules = append(out.Rules, r)
	}
	out.Nft = nil
	for _, r := range want.Nft {
		if slices.Contains(broken, r.SetDSCP) || r.DSCP != 0 && slices.Contains(broken, r.DSCP) {
			continue
		}
		out.Nft = append(out.Nft, r)
	}
	out.NftTable = len(out.Nft) > 0
	return out
}
