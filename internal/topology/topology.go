// Package topology is the model of an emulated or real wide-area network:
// sites, nodes, links, their addresses and device names, the static routes
// of every node, the loss models of links, and the numbering of the kernel
// objects built from it (the testbed's htb tree, and the classes, filters,
// marks, rules and routing tables the agent adds for reservations).
//
// Parse turns a topology file (docs/testbed.md, "The topology file") into
// a validated and resolved Topology: every default filled in and every
// address, device name and route computed, so that the testbed, the
// emulator, the controller, the agent and the collectors only read it.
// The package is pure: it does no I/O besides Load reading the file it is
// given, and it knows nothing of namespaces, netlink or nftables, which is
// why the controller can import it without linking the kernel side.
package topology

import (
	"fmt"
	"math"
	"net/netip"
	"time"
)

// Roles of nodes and links.
const (
	RoleHost   = "host"
	RoleRouter = "router"

	LinkRouted    = "routed"
	LinkDedicated = "dedicated"
)

// Loss models. The emulator applies them, per wire segment.
const (
	LossNone           = ""
	LossRandom         = "random"          // Bernoulli: each segment lost with Rate
	LossGilbertElliott = "gilbert-elliott" // two-state Markov chain, per segment
)

// Topology is a parsed, validated and resolved topology file: every
// default is filled in and every address, device name and route computed,
// so that the kernel side and the emulator only read it.
type Topology struct {
	File  string // the file it came from (for messages)
	Sites []Site
	Nodes []Node
	Links []Link
	// Routes are the static routes of every node: computed (fewer
	// dedicated links first, as those carry only steered traffic, then
	// fewer hops, then less delay), except where the file's routes key
	// gives a node's next hop.
	Routes []Route
}

// Site groups nodes; its 1-based Index numbers its addresses.
type Site struct {
	Name  string
	Index int
	Line  int // line in the file, for messages
}

// Node is a host or a router; it becomes the namespace lp-<testbed>-<name>.
type Node struct {
	Name  string
	Site  string
	Role  string // RoleHost or RoleRouter
	Index int    // 1-based within its site, in file order
	// The node's own addresses (on its loopback device, used as the source
	// of its traffic): 198.18.<site>.<index> and 2001:2:0:<site>::<index>,
	// unless the file gives them.
	IPv4 netip.Addr
	IPv6 netip.Addr
	Line int
}

// Loss is the loss model of one direction of a link. Probabilities apply
// per wire segment (one MTU-sized packet), not per offload super-packet,
// so that a loss rate means on the testbed what it means on a wire. The
// JSON form is that of the emulator's control socket.
type Loss struct {
	Model string  `json:"model,omitempty"` // LossNone, LossRandom or LossGilbertElliott
	Rate  float64 `json:"rate,omitempty"`  // LossRandom: probability that a segment is lost
	// LossGilbertElliott, per segment: first the state moves (good→bad with
	// P, bad→good with R), then the segment is lost with H in the bad
	// state and K in the good one. The mean loss is (P·H + R·K) / (P + R).
	P float64 `json:"p,omitempty"`
	R float64 `json:"r,omitempty"`
	H float64 `json:"h,omitempty"`
	K float64 `json:"k,omitempty"`
}

// MeanLoss is a loss model's long-run loss fraction.
func (l Loss) MeanLoss() float64 {
	switch l.Model {
	case LossRandom:
		return l.Rate
	case LossGilbertElliott:
		if l.P+l.R == 0 {
			return l.K
		}
		return (l.P*l.H + l.R*l.K) / (l.P + l.R)
	}
	return 0
}

// Validate says whether the model is known and its probabilities are
// probabilities.
func (l Loss) Validate() error {
	switch l.Model {
	case LossNone, LossRandom, LossGilbertElliott:
	default:
		return fmt.Errorf("unknown loss model %q", l.Model)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"rate", l.Rate}, {"p", l.P}, {"r", l.R}, {"h", l.H}, {"k", l.K}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			return fmt.Errorf("loss %s %v: not a probability", f.name, f.v)
		}
	}
	return nil
}

// Params are what the emulator applies to one direction of a link, and
// what `link set` changes.
type Params struct {
	Rate    uint64        // bits per second (htb, not the emulator)
	Delay   time.Duration // one way
	Jitter  time.Duration // uniform in [-Jitter, +Jitter] around Delay, floored at 0
	Reorder bool          // jitter may reorder packets (default: it does not)
	Loss    Loss
	// Duplicate is the probability that a packet (a wire segment: a TCP
	// segment or a UDP datagram) that survived Loss arrives twice.
	Duplicate float64
	Down      bool
}

// End is one end of a link: the node, the TUN device in its namespace,
// and the addresses on that device.
type End struct {
	Node string
	Dev  string       // device name in the node's namespace (≤ 15 bytes)
	IPv4 netip.Prefix // a /30 out of 198.19.0.0/16
	IPv6 netip.Prefix // a /64 out of 2001:2:0:8000::/49
}

// Link joins two nodes. Both directions share the configuration in the
// file; `link set` may later change them at run time.
type Link struct {
	Name       string
	Role       string // LinkRouted (default) or LinkDedicated
	A, B       End
	Params     Params // as configured, for both directions
	MTU        int    // bytes, default 1500
	Queue      int64  // bytes in the egress queue (htb class 1:2's leaf), default one BDP, at least 64 KiB
	Reservable float64
	// Prefer, when set, overrides Role for the controller's path choice
	// alone: true, reservations take the link first (as a dedicated one);
	// false, only for what does not fit elsewhere (as a routed one).
	Prefer *bool
	Line   int
}

// Route is one static route in one node: packets to Dst leave by Dev (the
// node's end of Link) towards the peer address Via, with Src as the
// preferred source (the node's own address). MTU is the smallest MTU of
// the links the route's traffic crosses on its way (following every
// node's routes), the link of a destination subnet included: a host that
// sends no larger packets needs no ICMP to learn the path's MTU.
type Route struct {
	Node string
	Dst  netip.Prefix
	Link string
	Dev  string
	Via  netip.Addr
	Src  netip.Addr
	MTU  int
}

// Hop is one directed step of a path.
type Hop struct {
	Link     string
	From, To string
}
