package service

import (
	"net/netip"

	"github.com/lightpath/lightpath/internal/reserve"
)

// Network is what the service needs of the controller's topology: where
// a data node is (its site, its addresses, for a push's flow spec and the
// running rates by site) and what its access links may carry (the pairs'
// shares, the bounds of a report). The controller's *Topo satisfies it;
// heartbeats and claims ask it often, so its answers are lookups, not
// computations.
type Network interface {
	// NodeRole is a node's role (reserve.NodeHost or reserve.NodeRouter),
	// false when the topology has no such node.
	NodeRole(node string) (string, bool)
	// NodeSite is the site of a node, "" when it has none.
	NodeSite(node string) string
	// SiteNames are the topology's sites, sorted.
	SiteNames() []string
	// NodeAddrs are a node's addresses, each a prefix of one address.
	NodeAddrs(node string) []netip.Prefix
	// AccessBps is the reservable capacity of a host's access links,
	// summed: the pairs sharing a node (two source nodes pushing to one
	// destination node) share what may be booked on its link, not its
	// whole rate.
	AccessBps(node string) uint64
}

// network is the controller's current topology, nil when it has none.
func (s *Service) network() Network {
	if s.topology == nil {
		return nil
	}
	return s.topology()
}

// currentPolicy is the controller's policy as it is now.
func (s *Service) currentPolicy() reserve.Policy {
	if s.policy == nil {
		return reserve.Policy{}
	}
	return s.policy()
}
