package topology

// Numbers of the kernel objects built on a topology's link ends. The
// testbed builds the htb tree below on every egress device; the agent adds
// one class, two filters, a firewall mark, an ip rule and a routing table
// per reservation, all numbered from the reservation's DSCP (1-63, unique
// per node among overlapping reservations), so that two reservations never
// share an object and nothing outside these ranges is ever touched. The
// collectors read the same numbers back. docs/testbed.md and docs/agent.md
// describe them.

// Handles of the htb tree every link end gets: root 1:, class 1:1 at the
// link rate, default class 1:2 at the unreservable floor, its leaf a byte
// FIFO 2: holding the link's queue. Agents add their classes under 1:1 and
// leave these alone.
const (
	HTBRoot     = 0x10000             // 1:
	HTBLink     = 0x10001             // 1:1
	HTBDefault  = 0x10002             // 1:2
	HTBLeaf     = 0x20000             // 2:, the FIFO under 1:2
	HTBFirstRes = HTBRoot | ClassBase // 1:100 (tc's hexadecimal), the first class an agent may use
)

// The agent's numbering.
const (
	// ClassBase + DSCP is the minor of the reservation's htb class under
	// 1:1 ("1:1xx" in tc's hexadecimal); the testbed uses only 1:1 and 1:2.
	ClassBase = 0x100
	// FilterPrio4 + DSCP and FilterPrio6 + DSCP are the priorities of the
	// u32 filters (IPv4, IPv6) that send the DSCP to the class. A priority
	// holds one protocol only, hence two ranges.
	FilterPrio4 = 0x100
	FilterPrio6 = 0x200
	// MarkBase + DSCP is the firewall mark the steering rules set.
	MarkBase = 0x100
	// TableBase + DSCP is the routing table that mark looks up.
	TableBase = 100
	// RulePrio + DSCP is the priority of that ip rule (both families).
	RulePrio = 10000
	// ProbeMinor is the htb class (1:ff) of the agents' path probes, one
	// per egress device that carries a reservation, and ProbeFilterPrio
	// to ProbeFilterPrio+3 the priorities of the u32 filters that send the
	// probes (UDP to or from ProbePort, IPv4 and IPv6) to it, ahead of the
	// reservations' filters.
	ProbeMinor      = 0xff
	ProbeFilterPrio = 0xfc
	// ProbeRulePrio + DSCP is the priority of the ip rules that send the
	// probes of the reservation (UDP to or from ProbePort, with its mark)
	// to its table: apart from RulePrio's, so that either can be deleted
	// without the other (the kernel deletes the first rule that matches
	// what a request names).
	ProbeRulePrio = RulePrio - 64
	// MaxDSCP is the largest DSCP, so each range above holds MaxDSCP+1
	// numbers from its base.
	MaxDSCP = 63
)
