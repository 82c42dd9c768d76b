package testbed

import (
	"fmt"
	"strings"

	"github.com/lightpath/lightpath/internal/topology"
)

// HTB is the shaping of one direction of a link, on its egress device.
type HTB struct {
	Node    string
	Dev     string
	Rate    uint64 // bits/s: class 1:1's rate and ceil, and 1:2's ceil
	Floor   uint64 // bits/s: class 1:2's guaranteed rate
	Quantum uint32 // bytes per round when classes borrow
	Limit   uint32 // bytes: the FIFO under 1:2
	// Prio is class 1:2's htb priority, DefaultPrio: agents give their
	// reservation classes a larger number (a lower priority), so that htb
	// lends spare capacity to unreserved traffic first and to reservations
	// beyond their rate only after it.
	Prio uint32
}

// DefaultPrio is the htb priority of class 1:2, the highest htb has.
const DefaultPrio = 0

// minFloor keeps class 1:2 valid when a link is entirely reservable: htb
// refuses a zero rate, and untagged traffic still needs a trickle (routing
// protocols, probes) before it borrows.
const minFloor = 1_000_000

// PlanHTB computes the htb tree of one direction of l, leaving from node,
// at rate (the link's configured rate, or one set at run time).
func PlanHTB(l *topology.Link, node string, rate uint64) (HTB, error) {
	e, ok := l.End(node)
	if !ok {
		return HTB{}, fmt.Errorf("link %q has no end at node %q", l.Name, node)
	}
	floor := uint64(float64(rate) * (1 - l.Reservable))
	floor = max(floor, min(minFloor, rate))
	// A millisecond of the class's rate, within htb's sensible range: large
	// enough for a jumbo frame, small enough to share fairly.
	q := min(max(floor/8/1000, uint64(2*l.MTU)), 200_000)
	limit := min(max(l.Queue, int64(2*l.MTU)), 1<<31)
	return HTB{Node: node, Dev: e.Dev, Rate: rate, Floor: floor, Quantum: uint32(q), Limit: uint32(limit), Prio: DefaultPrio}, nil
}

// Sysctl is one setting of a node's namespace, by its dotted name.
type Sysctl struct {
	Key, Value string
}

// Path is the setting's file under /proc/sys.
func (s Sysctl) Path() string { return "/proc/sys/" + strings.ReplaceAll(s.Key, ".", "/") }

// NodeSysctls are the settings of one node's namespace: forwarding on
// routers; no reverse-path filter (steered traffic comes back by another
// link); no duplicate address detection (addresses work at once); TCP
// buffers large enough for the node's longest bandwidth-delay product; no
// TCP metrics carried from one connection to the next, so that each test
// starts alike; no TCP MTU probing, so that a connection's segments follow
// the MTU of its route (the routed path's, or a steered path's) and
// nothing else.
func NodeSysctls(t *topology.Topology, n *topology.Node) []Sysctl {
	fwd := "0"
	if n.Role == topology.RoleRouter {
		fwd = "1"
	}
	maxBuf := fmt.Sprint(t.TCPBufferMax(n.Name))
	return []Sysctl{
		{"net.ipv4.ip_forward", fwd},
		{"net.ipv6.conf.all.forwarding", fwd},
		{"net.ipv4.conf.all.rp_filter", "0"},
		{"net.ipv4.conf.default.rp_filter", "0"},
		{"net.ipv6.conf.all.accept_dad", "0"},
		{"net.ipv6.conf.default.accept_dad", "0"},
		{"net.ipv4.tcp_rmem", "4096 131072 " + maxBuf},
		{"net.ipv4.tcp_wmem", "4096 16384 " + maxBuf},
		{"net.ipv4.tcp_no_metrics_save", "1"},
		{"net.ipv4.tcp_mtu_probing", "0"},
	}
}

// HostBufferMax is what the host-wide net.core.rmem_max and wmem_max must
// reach for the namespaces' TCP buffers (and SO_RCVBUF/SO_SNDBUF requests
// such as cp --window) to take effect.
func HostBufferMax(t *topology.Topology) int64 {
	var m int64
	for i := range t.Nodes {
		m = max(m, t.TCPBufferMax(t.Nodes[i].Name))
	}
	return m
}
