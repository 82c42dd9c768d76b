package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/topology"
)

// What marks an object as the agent's: the table below, and the numbers
// of its classes, filters, marks, rules and routing tables
// (topology.ClassBase and the rest), all derived from the reservation's
// DSCP.
const (
	// NftTable is the nftables table (family inet) that only the agent owns.
	NftTable = "lightpath"
)

// The agent's nftables chains, one per job, so the order of rules inside
// a chain never matters and the hooks run in a fixed order: marking (which
// sets the DSCP) before steering (which reads it).
const (
	ChainMark     = "mark"      // filter, output, -150: set the DSCP of a flow's packets
	ChainSteerOut = "steer-out" // route, output, -140: DSCP → firewall mark, local packets
	ChainSteerIn  = "steer-in"  // filter, prerouting, -150: DSCP → firewall mark, forwarded packets
)

// ClassPrio is the htb priority of every reservation class. The testbed's
// default class 1:2, which carries the traffic that holds no reservation,
// keeps priority 0: htb serves every class its rate first, then lends
// spare capacity to the classes of the lowest priority number, so what is
// left goes to unreserved traffic before reservations borrow beyond their
// rate.
const ClassPrio = 1

// Plan is what one node's kernel holds of the agent's: a plain value that
// Desired computes, Fetch reads back and Diff compares. Every list is
// sorted and free of duplicates.
type Plan struct {
	Classes []Class
	Filters []Filter
	Routes  []Route
	Rules   []IPRule
	// NftTable says the table exists; Nft are its rules.
	NftTable bool
	Nft      []NftRule
}

// Class is an htb class of a reservation under 1:1 on an egress device.
type Class struct {
	Dev   string
	Minor uint16 // topology.ClassBase + DSCP
	Rate  uint64 // bits/s guaranteed (a multiple of 8: the kernel keeps bytes)
	Ceil  uint64 // bits/s it may borrow up to: the link rate
	Prio  uint32 // htb priority when borrowing: ClassPrio
}

// Filter is a u32 filter on root 1: that sends packets whose DSCP matches
// to a class: "match ip tos (dscp<<2) 0xfc" for IPv4, the traffic class
// in the first word of the IPv6 header for IPv6. A probe's filter matches
// UDP packets to or from a port instead ("match ip protocol 17 0xff match
// ip dport PORT 0xffff", the header taken as 20 bytes, 40 for IPv6).
type Filter struct {
	Dev   string
	IPv6  bool
	Prio  uint16
	Minor uint16 // the class
	Val   uint32 // the key on the header's first 32-bit word (offset 0)
	Mask  uint32
	// SPort or DPort, when set, match UDP packets from or to that port.
	SPort, DPort uint16
}

// Route is a route in a reservation's routing table.
type Route struct {
	Table int
	Dst   netip.Prefix
	Via   netip.Addr
	Dev   string
	// Src, on an end host's route, is the host's own address, the source
	// a socket not bound to one gets (as on the host's routed routes).
	Src netip.Addr
	// MTU, on an end host's route to the far end, is the reserved path's
	// (0: the device's). TCP takes its MSS from it, so connections the
	// host's rules steer here send segments as large as the path carries.
	MTU int
}

// IPRule sends the packets (or route lookups) it matches to a
// reservation's table: those with its firewall mark, and on an end host
// those of a flow's selectors, which a socket's own route lookup matches.
// Zero fields match anything.
type IPRule struct {
	IPv6     bool
	Priority int
	Mark     uint32       // fwmark
	Dst      netip.Prefix // to PREFIX
	Proto    uint8        // ipproto (IPPROTO_TCP, IPPROTO_UDP)
	DPort    reserve.PortRange
	SPort    reserve.PortRange
	ByUID    bool // uidrange UID-UID
	UID      uint32
	Table    int
}

// IP protocol numbers of IPRule.Proto.
const (
	protoTCP = 6
	protoUDP = 17
)

// NftRule is one rule of the agent's table: a match and one action.
type NftRule struct {
	Chain string
	IPv6  bool
	// Flow matches protocol, addresses and ports (zero: any packet).
	// A flow with a cgroup matches the sockets of that cgroup (or one
	// below it) by its id, CgroupID, which is the kernel's: Desired leaves
	// it 0, WithCgroups sets it, Fetch reads it from the rule.
	Flow     reserve.Flow
	CgroupID uint64
	DSCP     uint8 // match this DSCP (0: any)
	// The action: exactly one is set.
	SetDSCP uint8
	SetMark uint32
	// Stale marks a rule Fetch found in the agent's table but could not
	// recognise (no tag of the agent's, or expressions that differ from
	// what the tag describes): never desired, so Diff removes it.
	Stale bool
	// Handle is the kernel's, on rules Fetch read; never compared.
	Handle uint64
}

// Changes turn one plan into another: Remove what is there and should
// not be, Add (or replace in place) what should be and is not.
type Changes struct {
	Add, Remove Plan
}

// Empty reports whether nothing needs doing.
func (c Changes) Empty() bool { return c.Add.empty() && c.Remove.empty() }

func (p Plan) empty() bool {
	return len(p.Classes)+len(p.Filters)+len(p.Routes)+len(p.Rules)+len(p.Nft) == 0 && !p.NftTable
}

// String counts the changes, for logs.
func (c Changes) String() string {
	count := func(p Plan) string {
		s := fmt.Sprintf("%d classes, %d filters, %d routes, %d rules, %d nft rules",
			len(p.Classes), len(p.Filters), len(p.Routes), len(p.Rules), len(p.Nft))
		if p.NftTable {
			s += ", the nft table"
		}
		return s
	}
	return "add " + count(c.Add) + "; remove " + count(c.Remove)
}

// Desired computes what node's kernel must hold for the live reservations
// rs that it is part of, on topology t, at time now: only reservations
// whose window contains now and whose state is RESERVED or ACTIVE are
// provisioned (HELD ones are not), and only those with a DSCP, since it is
// what every hop matches.
func Desired(t *topology.Topology, node string, rs []reserve.Reservation, now time.Time) (Plan, error) {
	if _, ok := t.Node(node); !ok {
		return Plan{}, fmt.Errorf("topology has no node %q", node)
	}
	var p Plan
	byDSCP := map[uint8]string{}
	for _, r := range rs {
		if r.State != reserve.StateReserved && r.State != reserve.StateActive ||
			now.Before(r.Start) || !now.Before(r.End) || r.DSCP == 0 || !slices.Contains(r.Nodes(), node) {
			continue
		}
		if r.DSCP > 63 {
			return Plan{}, fmt.Errorf("reservation %s: DSCP %d is out of range", r.ID, r.DSCP)
		}
		if other, dup := byDSCP[r.DSCP]; dup {
			return Plan{}, fmt.Errorf("reservations %s and %s both hold DSCP %d at node %s", other, r.ID, r.DSCP, node)
		}
		byDSCP[r.DSCP] = r.ID
		if err := p.addReservation(t, node, r); err != nil {
			return Plan{}, fmt.Errorf("reservation %s: %w", r.ID, err)
		}
	}
	p.NftTable = len(p.Nft) > 0
	p.normalize()
	return p, nil
}

// hop is a path hop resolved on the topology.
type hop struct {
	reserve.PathHop
	link *topology.Link
}

func resolvePath(t *topology.Topology, path []reserve.PathHop) ([]hop, error) {
	out := make([]hop, len(path))
	for i, h := range path {
		l, ok := t.Link(h.Link)
		if !ok {
			return nil, fmt.Errorf("hop %d: topology has no link %q", i+1, h.Link)
		}
		if _, ok := l.End(h.From); !ok {
			return nil, fmt.Errorf("hop %d: link %s has no end at %q", i+1, h.Link, h.From)
		}
		if p, ok := l.Peer(h.From); !ok || p.Node != h.To {
			return nil, fmt.Errorf("hop %d: link %s does not join %s to %s", i+1, h.Link, h.From, h.To)
		}
		out[i] = hop{h, l}
	}
	return out, nil
}

func (p *Plan) addReservation(t *topology.Topology, node string, r reserve.Reservation) error {
	fwd, err := resolvePath(t, r.Path)
	if err != nil {
		return err
	}
	rev := make([]hop, len(fwd))
	for i, h := range fwd {
		rev[len(fwd)-1-i] = hop{reserve.PathHop{Link: h.Link, From: h.To, To: h.From}, h.link}
	}
	minor := uint16(topology.ClassBase + int(r.DSCP))
	// The guarantee: a class on every egress of the reservation's
	// direction; the reverse traffic is steered but not guaranteed.
	for _, h := range fwd {
		if h.From != node {
			continue
		}
		end, _ := h.link.End(node)
		ceil := h.link.Params.Rate / 8 * 8
		rate := min(r.Bandwidth/8*8, ceil)
		p.Classes = append(p.Classes, Class{Dev: end.Dev, Minor: minor, Rate: rate, Ceil: ceil, Prio: ClassPrio})
		p.Filters = append(p.Filters,
			Filter{Dev: end.Dev, Prio: topology.FilterPrio4 + uint16(r.DSCP), Minor: minor, Val: uint32(r.DSCP) << 18, Mask: 0x00fc0000},
			Filter{Dev: end.Dev, IPv6: true, Prio: topology.FilterPrio6 + uint16(r.DSCP), Minor: minor, Val: uint32(r.DSCP) << 22, Mask: 0x0fc00000})
	}
	// The probes of the path (probe.go) have a class of their own on
	// every egress of either direction, so that neither a full
	// reservation nor unreserved traffic can starve them.
	for _, h := range append(slices.Clone(fwd), rev...) {
		if h.From != node {
			continue
		}
		end, _ := h.link.End(node)
		p.addProbeClass(end.Dev, h.link.Params.Rate)
	}
	// The route of an end host to the far end carries the reserved path's
	// MTU; while the reservation is degraded (a link of its path down, or
	// an agent on it gone), the smaller of that and the routed path's, so
	// no segment is ever larger than the path the packets may take.
	mtu := pathMTU(fwd)
	if r.Degraded {
		mtu = min(mtu, routedMTU(t, r.From, r.To), routedMTU(t, r.To, r.From))
	}
	var selFwd, selRev []IPRule
	for _, f := range r.FlowSpec.Flows {
		// A flow of one cgroup is steered on the from node by the mark
		// its sockets carry: an ip rule cannot match a cgroup.
		if f.Cgroup == "" {
			selFwd = append(selFwd, selector(f.Dst, f.Src, f.Proto, f.ByUID, f.UID))
		}
		selRev = append(selRev, selector(f.Src, f.Dst, f.Proto, false, 0))
	}
	if err := p.addSteer(t, node, r.DSCP, fwd, r.From, r.To, mtu, selFwd); err != nil {
		return err
	}
	if err := p.addSteer(t, node, r.DSCP, rev, r.To, r.From, mtu, selRev); err != nil {
		return err
	}
	if node != r.From && node != r.To {
		return nil
	}
	for _, f := range r.FlowSpec.Flows {
		m := f
		if node == r.To {
			m = reserve.Flow{Proto: f.Proto, Src: f.Dst, Dst: f.Src}
		}
		v6 := m.Src.Prefix.Addr().Is6()
		p.Nft = append(p.Nft, NftRule{Chain: ChainMark, IPv6: v6, Flow: m, SetDSCP: r.DSCP})
	}
	return nil
}

// addProbeClass adds the probes' class on dev, a link of rate bits/s,
// and its filters: ProbeRate guaranteed and at most, priority 0.
func (p *Plan) addProbeClass(dev string, rate uint64) {
	r := min(ProbeRate, rate/8*8)
	p.Classes = append(p.Classes, Class{Dev: dev, Minor: topology.ProbeMinor, Rate: r, Ceil: r, Prio: 0})
	prio := uint16(topology.ProbeFilterPrio)
	for _, v6 := range []bool{false, true} {
		p.Filters = append(p.Filters,
			Filter{Dev: dev, IPv6: v6, Prio: prio, Minor: topology.ProbeMinor, DPort: ProbePort},
			Filter{Dev: dev, IPv6: v6, Prio: prio + 1, Minor: topology.ProbeMinor, SPort: ProbePort})
		prio += 2
	}
}

// probeRules are the ip rules that send a reservation's probes and their
// echoes (UDP to or from ProbePort, with the reservation's mark) to its
// table.
func probeRules(v6 bool, prio int, mark uint32, table int) []IPRule {
	port := reserve.PortRange{Lo: ProbePort, Hi: ProbePort}
	return []IPRule{
		{IPv6: v6, Priority: prio, Mark: mark, Proto: protoUDP, DPort: port, Table: table},
		{IPv6: v6, Priority: prio, Mark: mark, Proto: protoUDP, SPort: port, Table: table},
	}
}

// selector is the ip rule that a socket's own route lookup for the
// packets from src to dst matches: destination, protocol, ports and the
// sending user. The source address is left out: a socket not bound to one
// looks its route up without it.
func selector(dst, src reserve.FlowEndpoint, proto reserve.Protocol, byUID bool, uid uint32) IPRule {
	r := IPRule{IPv6: dst.Prefix.Addr().Is6(), Dst: dst.Prefix.Masked(), DPort: dst.Ports, SPort: src.Ports, ByUID: byUID, UID: uid}
	switch proto {
	case reserve.ProtoTCP:
		r.Proto = protoTCP
	case reserve.ProtoUDP:
		r.Proto = protoUDP
	}
	return r
}

// cgroupLevel is the depth of a cgroup path below the hierarchy's root
// ("lightpath/run-42": 2), the level nftables' socket cgroupv2 compares
// at.
func cgroupLevel(path string) int { return strings.Count(strings.Trim(path, "/"), "/") + 1 }

// pathMTU is the smallest MTU of the links of path.
func pathMTU(path []hop) int {
	mtu := 65535
	for _, h := range path {
		mtu = min(mtu, h.link.MTU)
	}
	return mtu
}

// routedMTU is the MTU of from's route to to's address, the smallest
// along the routed path (topology.Route.MTU, which the testbed gives the
// route); 65535 when there is none.
func routedMTU(t *topology.Topology, from, to string) int {
	far, ok := t.Node(to)
	if !ok {
		return 65535
	}
	for _, r := range t.Routes {
		if r.Node == from && r.Dst == netip.PrefixFrom(far.IPv4, 32) && r.MTU > 0 {
			return r.MTU
		}
	}
	return 65535
}

// addSteer adds the policy routing of one direction (path from origin to
// dst) at node. A router sends the packets that carry the reservation's
// DSCP (as a firewall mark) through the reserved next hop. The origin, an
// end host, sends there what its sockets' own route lookups match (sel:
// the flows' selectors, and the mark a socket may carry), by a route that
// carries the reserved path's MTU (mtu), so TCP's MSS is the path's; when
// the path leaves it by another link than its routes would, packets that
// carry the DSCP are marked and routed again too.
func (p *Plan) addSteer(t *topology.Topology, node string, dscp uint8, path []hop, origin, dst string, mtu int, sel []IPRule) error {
	n, _ := t.Node(node)
	far, ok := t.Node(dst)
	if !ok {
		return fmt.Errorf("topology has no node %q", dst)
	}
	for _, h := range path {
		if h.From != node {
			continue
		}
		local := node == origin
		router := n.Role == topology.RoleRouter
		if !router && !local {
			continue
		}
		elsewhere := local
		if !router {
			routed, err := t.Path(node, dst)
			elsewhere = err != nil || len(routed) == 0 || routed[0].Link != h.Link
		}
		end, _ := h.link.End(node)
		peer, _ := h.link.Peer(node)
		table, mark := topology.TableBase+int(dscp), uint32(topology.MarkBase)+uint32(dscp)
		prio := topology.RulePrio + int(dscp)
		for _, v6 := range []bool{false, true} {
			dstAddr, via, src := far.IPv4, peer.IPv4.Addr(), n.IPv4
			if v6 {
				dstAddr, via, src = far.IPv6, peer.IPv6.Addr(), n.IPv6
			}
			if !dstAddr.IsValid() || !via.IsValid() {
				continue
			}
			rt := Route{Table: table, Dst: netip.PrefixFrom(dstAddr, dstAddr.BitLen()), Via: via, Dev: end.Dev}
			if !router {
				rt.MTU, rt.Src = mtu, src
				for _, s := range sel {
					if s.IPv6 == v6 {
						s.Priority, s.Table = prio, table
						p.Rules = append(p.Rules, s)
					}
				}
			}
			p.Routes = append(p.Routes, rt)
			p.Rules = append(p.Rules, IPRule{IPv6: v6, Priority: prio, Mark: mark, Table: table})
			// The probes carry the mark too, and keep their way onto the
			// path by these rules while the flows' steering is withdrawn
			// (WithoutBroken): probes go to ProbePort, echoes come from it.
			p.Rules = append(p.Rules, probeRules(v6, topology.ProbeRulePrio+int(dscp), mark, table)...)
			if router {
				p.Nft = append(p.Nft, NftRule{Chain: ChainSteerIn, IPv6: v6, DSCP: dscp, SetMark: mark})
			}
			if local && elsewhere {
				p.Nft = append(p.Nft, NftRule{Chain: ChainSteerOut, IPv6: v6, DSCP: dscp, SetMark: mark})
			}
		}
	}
	return nil
}

// normalize sorts every list and drops duplicates, so equal plans are
// equal values.
func (p *Plan) normalize() {
	p.Classes = sortUniq(p.Classes)
	p.Filters = sortUniq(p.Filters)
	p.Routes = sortUniq(p.Routes)
	p.Rules = sortUniq(p.Rules)
	p.Nft = sortUniq(p.Nft)
}

func sortUniq[T comparable](s []T) []T {
	slices.SortFunc(s, func(a, b T) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return slices.Compact(s)
}

// Diff says what to add and remove to turn have into want. Classes and
// routes are keyed (a class by device and id, a route by table and
// destination) and replaced in place when they differ, since a class in
// use cannot be deleted; everything else is removed and added whole.
func Diff(have, want Plan) Changes {
	var c Changes
	type classKey struct {
		dev   string
		minor uint16
	}
	type routeKey struct {
		table int
		dst   netip.Prefix
	}
	c.Add.Classes, c.Remove.Classes = diff(have.Classes, want.Classes, func(x Class) classKey { return classKey{x.Dev, x.Minor} }, true)
	c.Add.Routes, c.Remove.Routes = diff(have.Routes, want.Routes, func(x Route) routeKey { return routeKey{x.Table, x.Dst} }, true)
	c.Add.Filters, c.Remove.Filters = diff(have.Filters, want.Filters, func(x Filter) Filter { return x }, false)
	c.Add.Rules, c.Remove.Rules = diff(have.Rules, want.Rules, func(x IPRule) IPRule { return x }, false)
	c.Add.Nft, c.Remove.Nft = diff(have.Nft, want.Nft, func(x NftRule) NftRule { x.Handle = 0; return x }, false)
	c.Add.NftTable = want.NftTable && !have.NftTable
	c.Remove.NftTable = have.NftTable && !want.NftTable
	if c.Remove.NftTable {
		c.Remove.Nft = nil // they go with the table
	}
	return c
}

// diff returns the items of want that have lacks (by key, or with
// replace by value too: a changed item is replaced in place), and the
// items of have whose key want lacks or that repeat one (a rule added
// twice by hand).
func diff[T comparable, K comparable](have, want []T, key func(T) K, replace bool) (add, remove []T) {
	haveVal, wantKey, kept := map[K]T{}, map[K]bool{}, map[K]bool{}
	for _, x := range have {
		if _, ok := haveVal[key(x)]; !ok {
			haveVal[key(x)] = x
		}
	}
	for _, x := range want {
		wantKey[key(x)] = true
		if v, ok := haveVal[key(x)]; !ok || replace && v != x {
			add = append(add, x)
		}
	}
	for _, x := range have {
		if k := key(x); !wantKey[k] || kept[k] {
			remove = append(remove, x)
		} else {
			kept[k] = true
		}
	}
	return add, remove
}

// nftTag is how a rule is recorded in its comment (nft userdata, at most
// 256 bytes), which Fetch reads back: the kernel's expressions are then
// checked against the ones the tag describes.
type nftTag struct {
	Chain   string `json:"c"`
	IPv6    bool   `json:"6,omitempty"`
	Flow    string `json:"f,omitempty"`
	DSCP    uint8  `json:"d,omitempty"`
	SetDSCP uint8  `json:"sd,omitempty"`
	SetMark uint32 `json:"sm,omitempty"`
}

const tagPrefix = "lightpath "

func (r NftRule) tag() string {
	t := nftTag{Chain: r.Chain, IPv6: r.IPv6, DSCP: r.DSCP, SetDSCP: r.SetDSCP, SetMark: r.SetMark}
	if r.Flow.Proto != "" {
		t.Flow = r.Flow.String()
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep the flow's ">" readable in nft list
	enc.Encode(t)
	return tagPrefix + strings.TrimSpace(b.String())
}

func parseTag(s string) (NftRule, error) {
	rest, ok := strings.CutPrefix(s, tagPrefix)
	if !ok {
		return NftRule{}, fmt.Errorf("not a lightpath rule comment: %q", s)
	}
	var t nftTag
	if err := json.Unmarshal([]byte(rest), &t); err != nil {
		return NftRule{}, fmt.Errorf("rule comment %q: %w", s, err)
	}
	r := NftRule{Chain: t.Chain, IPv6: t.IPv6, DSCP: t.DSCP, SetDSCP: t.SetDSCP, SetMark: t.SetMark}
	if t.Flow != "" {
		fs, err := reserve.ParseFlowSpec(t.Flow)
		if err != nil || len(fs.Flows) != 1 {
			return NftRule{}, fmt.Errorf("rule comment %q: bad flow", s)
		}
		r.Flow = fs.Flows[0]
	}
	return r, nil
}

// withCgroups resolves the cgroups that want's marking rules name, through
// resolve (a cgroup path below the hierarchy's root to its id, which the
// kernel matches). A rule whose cgroup cannot be resolved is left out, and
// the reason is returned under the DSCP it sets, so the agent can report
// it against that reservation.
func withCgroups(want Plan, resolve func(path string) (uint64, error)) (Plan, map[uint8]error) {
	var errs map[uint8]error
	out := want
	out.Nft = nil
	for _, r := range want.Nft {
		if r.Flow.Cgroup == "" {
			out.Nft = append(out.Nft, r)
			continue
		}
		var err error
		if n := len(r.tag()); n > maxTag {
			err = fmt.Errorf("flow %q is too long for a rule's comment (%d bytes of %d): use a shorter cgroup path", r.Flow, n, maxTag)
		} else if r.CgroupID, err = resolve(r.Flow.Cgroup); err != nil {
			err = fmt.Errorf("flow %q: %w", r.Flow, err)
		}
		if err != nil {
			if errs == nil {
				errs = map[uint8]error{}
			}
			errs[r.SetDSCP] = errors.Join(errs[r.SetDSCP], err)
			continue
		}
		out.Nft = append(out.Nft, r)
	}
	out.NftTable = len(out.Nft) > 0
	return out, errs
}

// maxTag is the longest rule comment the kernel keeps (NFT_USERDATA_MAXLEN
// is 256 bytes, with its type and length).
const maxTag = 250
