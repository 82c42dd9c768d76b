package controller

import (
	"net/netip"
	"sync"

	"github.com/lightpath/lightpath/internal/reserve"
)

// A Topo answers the transfer service's questions about the network
// (service.Network) through these, so the service needs no Topo.

// NodeRole is a node's role (reserve.NodeHost or reserve.NodeRouter),
// false when the topology has no such node.
func (t *Topo) NodeRole(node string) (string, bool) { return t.Graph.Role(node) }

// NodeSite is the site of a node, "" when it has none.
func (t *Topo) NodeSite(node string) string { return t.Site[node] }

// NodeAddrs are a node's addresses, each a prefix of one address. The
// slice is the Topo's own: read it, do not change it.
func (t *Topo) NodeAddrs(node string) []netip.Prefix { return t.Addrs[node] }

// AccessBps is the reservable capacity of the links that end at node,
// summed (0 for a node no link ends at). Every node's sum is computed at
// the first call and kept, since heartbeats and claims ask often.
func (t *Topo) AccessBps(node string) uint64 {
	t.access.once.Do(func() {
		t.access.bps = map[string]uint64{}
		for _, l := range t.Graph.Links() {
			c, err := t.Graph.ReservableCapacity(reserve.Hop{Link: l.Name, From: l.A, To: l.B})
			if err != nil {
				c = l.Capacity
			}
			t.access.bps[l.A] += c
			if l.B != l.A {
				t.access.bps[l.B] += c
			}
		}
	})
	return t.access.bps[node]
}

// accessOnce is AccessBps's sums, computed once.
type accessOnce struct {
	once sync.Once
	bps  map[string]uint64
}
