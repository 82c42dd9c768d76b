// Package testbed builds emulated wide-area sites on one Linux host: a
// network namespace per node, TUN devices for the two ends of each link,
// an htb tree on every egress device for the link's rate, and a user-space
// emulator daemon (package emu) for delay, jitter and loss.
//
// This file holds the model every part shares: a parsed and resolved
// topology. Parsing and resolution are pure (topology.go, resolve.go); the
// kernel side lives in the _linux.go files.
package testbed

import (
	"net/netip"
	"time"

	"github.com/lightpath/lightpath/internal/testbed/emu"
)

// Roles of nodes and links.
const (
	RoleHost   = "host"
	RoleRouter = "router"

	LinkRouted    = "routed"
	LinkDedicated = "dedicated"
)

// Loss models: those of the emulator, which applies them.
const (
	LossNone           = emu.LossNone
	LossRandom         = emu.LossRandom         // Bernoulli: each segment lost with Rate
	LossGilbertElliott = emu.LossGilbertElliott // two-state Markov chain, per segment
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

// Loss is a link direction's loss model, the emulator's own: Model is
// LossNone, LossRandom (each segment lost with probability Rate) or
// LossGilbertElliott (P = P(good→bad) and R = P(bad→good) per segment, H
// the loss probability in the bad state, K in the good one).
type Loss = emu.Loss

// Params are what the emulator applies to one direction of a link, and
// what `link set` changes.
type Params struct {
	Rate    uint64        // bits per second (htb, not the emulator)
	Delay   time.Duration // one way
	Jitter  time.Duration // uniform in [-Jitter, +Jitter] around Delay, floored at 0
	Reorder bool          // jitter may reorder packets (default: it does not)
	Loss    Loss
	Down    bool
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
	Line       int
}

// Route is one static route in one node: packets to Dst leave by Dev (the
// node's end of Link) towards the peer address Via, with Src as the
// preferred source (the node's own address).
type Route struct {
	Node string
	Dst  netip.Prefix
	Link string
	Dev  string
	Via  netip.Addr
	Src  netip.Addr
}

// Hop is one directed step of a path.
type Hop struct {
	Link     string
	From, To string
}
