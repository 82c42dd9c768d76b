//go:build linux

package agent

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/topology"
)

var nftTable = &nftables.Table{Name: NftTable, Family: nftables.TableFamilyINet}

// nftChains are the agent's chains. Marking and steering of local packets
// are route chains, so the kernel routes a packet again once its DSCP or
// mark changed.
var nftChains = map[string]*nftables.Chain{
	// Marking needs no new route lookup of its own: what routing looks
	// at, the firewall mark, is set by steer-out, a route chain, after it.
	ChainMark:     {Name: ChainMark, Table: nftTable, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityRef(-150)},
	ChainSteerOut: {Name: ChainSteerOut, Table: nftTable, Type: nftables.ChainTypeRoute, Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityRef(-140)},
	ChainSteerIn:  {Name: ChainSteerIn, Table: nftTable, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(-150)},
}

// retiredChains are chains of the agent's table that earlier versions
// used: "clamp" set the MSS of steered SYNs, before end hosts' routes
// carried the reserved path's MTU. An upgraded agent finds their rules
// stale and removes them, then the chains.
var retiredChains = []string{"clamp"}

// Fetch reads the agent-owned objects from the kernel of the namespace
// behind nsFd: htb classes from 1:100 up and their filters on devs, the
// "lightpath" nftables table, the ip rules in the agent's priority range
// and the routes of its tables.
func Fetch(nsFd int, devs []string) (Plan, error) {
	h, err := netlink.NewHandleAt(netns.NsHandle(nsFd))
	if err != nil {
		return Plan{}, fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	var p Plan
	for _, dev := range devs {
		link, err := h.LinkByName(dev)
		var gone netlink.LinkNotFoundError
		if errors.As(err, &gone) {
			continue // nothing of the agent's can be on it; Apply will say
		} else if err != nil {
			return Plan{}, fmt.Errorf("device %s: %w", dev, err)
		}
		cs, err := h.ClassList(link, 0)
		if err != nil {
			return Plan{}, fmt.Errorf("classes of %s: %w", dev, err)
		}
		for _, c := range cs {
			hc, ok := c.(*netlink.HtbClass)
			if maj, minor := netlink.MajorMinor(c.Attrs().Handle); ok && maj == 1 && (minor >= topology.ClassBase || minor == topology.ProbeMinor) {
				p.Classes = append(p.Classes, Class{Dev: dev, Minor: minor, Rate: hc.Rate * 8, Ceil: hc.Ceil * 8, Prio: hc.Prio})
			}
		}
		fs, err := h.FilterList(link, topology.HTBRoot)
		if err != nil {
			return Plan{}, fmt.Errorf("filters of %s: %w", dev, err)
		}
		for _, f := range fs {
			u, ok := f.(*netlink.U32)
			if !ok {
				continue
			}
			a := f.Attrs()
			maj, minor := netlink.MajorMinor(u.ClassId)
			if !(maj == 1 && (minor >= topology.ClassBase || minor == topology.ProbeMinor) ||
				a.Priority >= topology.ProbeFilterPrio && a.Priority < topology.FilterPrio6+64) {
				continue
			}
			x := Filter{Dev: dev, IPv6: a.Protocol == unix.ETH_P_IPV6, Prio: a.Priority, Minor: minor}
			if u.Sel != nil {
				filterKeys(&x, u.Sel.Keys)
			}
			p.Filters = append(p.Filters, x)
		}
	}
	links, err := h.LinkList()
	if err != nil {
		return Plan{}, fmt.Errorf("devices: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := h.RuleList(fam)
		if err != nil {
			return Plan{}, fmt.Errorf("ip rules: %w", err)
		}
		for _, r := range rules {
			if r.Priority >= topology.ProbeRulePrio && r.Priority < topology.RulePrio+64 {
				p.Rules = append(p.Rules, ipRule(r, fam == netlink.FAMILY_V6))
			}
		}
		routes, err := h.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return Plan{}, fmt.Errorf("routes: %w", err)
		}
		for _, r := range routes {
			if r.Table < topology.TableBase || r.Table >= topology.TableBase+64 || r.Dst == nil {
				continue
			}
			x := Route{Table: r.Table, Dev: names[r.LinkIndex], MTU: r.MTU}
			if a, ok := netip.AddrFromSlice(r.Dst.IP); ok {
				ones, _ := r.Dst.Mask.Size()
				x.Dst = netip.PrefixFrom(a.Unmap(), ones)
			}
			if a, ok := netip.AddrFromSlice(r.Gw); ok {
				x.Via = a.Unmap()
			}
			if a, ok := netip.AddrFromSlice(r.Src); ok {
				x.Src = a.Unmap()
			}
			p.Routes = append(p.Routes, x)
		}
	}
	c, err := nftables.New(nftables.WithNetNSFd(nsFd))
	if err != nil {
		return Plan{}, fmt.Errorf("nftables: %w", err)
	}
	if p.NftTable, p.Nft, err = fetchNft(c); err != nil {
		return Plan{}, err
	}
	p.normalize()
	return p, nil
}

// fetchNft reads the agent's table. A rule whose comment is not the
// agent's, or whose expressions differ from what its comment describes
// (edited by hand), comes back Stale, so that Diff removes it.
func fetchNft(c *nftables.Conn) (bool, []NftRule, error) {
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, nil, fmt.Errorf("nftables tables: %w", err)
	}
	found := false
	for _, t := range tables {
		found = found || t.Name == NftTable
	}
	if !found {
		return false, nil, nil
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, nil, fmt.Errorf("nftables chains: %w", err)
	}
	var out []NftRule
	for _, ch := range chains {
		if ch.Table.Name != NftTable {
			continue
		}
		rules, err := c.GetRules(nftTable, ch)
		if err != nil {
			return false, nil, fmt.Errorf("nftables rules of %s: %w", ch.Name, err)
		}
		for _, r := range rules {
			comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
			x, err := parseTag(comment)
			if err == nil && x.Flow.Cgroup != "" {
				x.CgroupID = cgroupIDOf(r.Exprs)
			}
			if k := marshalExprs(r.Exprs); err != nil || x.Chain != ch.Name || k == nil || !bytes.Equal(k, marshalExprs(readable(ruleExprs(x)))) {
				x = NftRule{Chain: ch.Name, Stale: true}
			}
			x.Handle = r.Handle
			out = append(out, x)
		}
	}
	return true, out, nil
}

// readable drops from es what google/nftables cannot read back from the
// kernel (it skips the socket expression), so a rule read back compares
// with what was written: a cgroup's rule is still checked for its id,
// which the comparison after the socket expression holds.
func readable(es []expr.Any) []expr.Any {
	return slices.DeleteFunc(slices.Clone(es), func(e expr.Any) bool { _, ok := e.(*expr.Socket); return ok })
}

func marshalExprs(es []expr.Any) []byte {
	var b []byte
	for _, e := range es {
		m, err := expr.Marshal(byte(nftables.TableFamilyINet), e)
		if err != nil {
			return nil
		}
		b = append(b, m...)
	}
	return b
}

// Apply makes the changes: first what steers is removed (nftables, ip
// rules, routes) and then what shapes (filters before their classes, which
// the kernel keeps while filters point at them); then classes, filters,
// routes, rules and nftables are added, so a packet is steered only onto a
// path that is ready. Adding what is there already, or removing what is
// gone, is not an error, and nothing outside the agent's ranges is touched.
func Apply(nsFd int, c Changes) error {
	h, err := netlink.NewHandleAt(netns.NsHandle(nsFd))
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	nc, err := nftables.New(nftables.WithNetNSFd(nsFd))
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	var errs []error
	check := func(err error, what string, x any, ignore ...error) {
		for _, e := range ignore {
			if errors.Is(err, e) {
				return
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %+v: %w", what, x, err))
		}
	}
	ifindex := map[string]int{}
	dev := func(name string) int {
		if i, ok := ifindex[name]; ok {
			return i
		}
		l, err := h.LinkByName(name)
		if err != nil {
			check(err, "device", name)
			return 0
		}
		ifindex[name] = l.Attrs().Index
		return ifindex[name]
	}

	check(removeNft(nc, c.Remove), "remove nftables rules", len(c.Remove.Nft))
	for _, r := range c.Remove.Rules {
		check(h.RuleDel(nlRule(r)), "remove ip rule", r, unix.ENOENT)
	}
	for _, r := range c.Remove.Routes {
		i := 0
		if r.Dev != "" {
			if i = dev(r.Dev); i == 0 {
				continue
			}
		}
		check(h.RouteDel(nlRoute(r, i)), "remove route", r, unix.ESRCH, unix.ENOENT)
	}
	for _, f := range c.Remove.Filters {
		if i := dev(f.Dev); i != 0 {
			check(delFilter(h, f, i), "remove filter", f, unix.ENOENT)
		}
	}
	for _, cl := range c.Remove.Classes {
		if i := dev(cl.Dev); i != 0 {
			check(h.ClassDel(nlClass(cl, i)), "remove class", cl, unix.ENOENT)
		}
	}

	for _, cl := range c.Add.Classes {
		if i := dev(cl.Dev); i != 0 {
			check(h.ClassReplace(nlClass(cl, i)), "add class", cl)
		}
	}
	for _, f := range c.Add.Filters {
		if i := dev(f.Dev); i != 0 {
			// u32 numbers its hash tables across priorities, so a filter has
			// no handle of its own to replace: its priority (the agent's, and
			// holding this filter alone) is emptied first.
			if err := delFilter(h, f, i); err != nil && !errors.Is(err, unix.ENOENT) {
				check(err, "replace filter", f)
				continue
			}
			check(h.FilterAdd(nlFilter(f, i)), "add filter", f)
		}
	}
	for _, r := range c.Add.Routes {
		if i := dev(r.Dev); i != 0 {
			check(h.RouteReplace(nlRoute(r, i)), "add route", r)
		}
	}
	for _, r := range c.Add.Rules {
		check(h.RuleAdd(nlRule(r)), "add ip rule", r, unix.EEXIST)
	}
	check(addNft(nc, c.Add), "add nftables rules", len(c.Add.Nft))
	check(pruneChains(nc), "remove empty chains", NftTable)
	return errors.Join(errs...)
}

// pruneChains deletes the agent's chains that hold no rule, so a node
// pays for no hook it does not use (a host has nothing to steer in).
func pruneChains(c *nftables.Conn) error {
	found, rules, err := fetchNft(c)
	if err != nil || !found {
		return err
	}
	used := map[string]bool{}
	for _, r := range rules {
		used[r.Chain] = true
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("nftables chains: %w", err)
	}
	n := 0
	for _, ch := range chains {
		if ch.Table.Name == NftTable && !used[ch.Name] {
			if _, ours := nftChains[ch.Name]; ours || slices.Contains(retiredChains, ch.Name) {
				c.DelChain(ch)
				n++
			}
		}
	}
	if n == 0 {
		return nil
	}
	return c.Flush()
}

func removeNft(c *nftables.Conn, p Plan) error {
	if p.NftTable {
		c.DelTable(nftTable)
		return c.Flush()
	}
	if len(p.Nft) == 0 {
		return nil
	}
	for _, r := range p.Nft {
		ch := &nftables.Chain{Name: r.Chain, Table: nftTable}
		if err := c.DelRule(&nftables.Rule{Table: nftTable, Chain: ch, Handle: r.Handle}); err != nil {
			return fmt.Errorf("rule %s: %w", r.tag(), err)
		}
	}
	return c.Flush()
}

// addNft adds the rules not there yet, with the table and chains they
// need, in one transaction.
func addNft(c *nftables.Conn, p Plan) error {
	if len(p.Nft) == 0 && !p.NftTable {
		return nil
	}
	_, have, err := fetchNft(c)
	if err != nil {
		return err
	}
	there := map[NftRule]bool{}
	for _, r := range have {
		r.Handle = 0
		there[r] = true
	}
	c.AddTable(nftTable)
	// Only the chains the rules use: every base chain costs every packet
	// through its hook an evaluation, rules or not (pruneChains removes
	// those left empty).
	added := map[string]bool{}
	for _, r := range p.Nft {
		if ch, ok := nftChains[r.Chain]; ok && !added[r.Chain] {
			c.AddChain(ch)
			added[r.Chain] = true
		}
	}
	for _, r := range p.Nft {
		ch, ok := nftChains[r.Chain]
		if !ok {
			return fmt.Errorf("no chain %q", r.Chain)
		}
		r.Handle = 0
		if !there[r] {
			c.AddRule(&nftables.Rule{Table: nftTable, Chain: ch, Exprs: ruleExprs(r),
				UserData: userdata.AppendString(nil, userdata.TypeComment, r.tag())})
		}
	}
	return c.Flush()
}

func nlClass(c Class, ifindex int) *netlink.HtbClass {
	// Bursts and quantum as the testbed's own classes: 5 ms at the rate
	// (at least 128 KiB) and a millisecond of it per round.
	burst := func(r uint64) uint32 { return uint32(min(max(r/8/200, 128<<10), 64<<20)) }
	quantum := uint32(min(max(c.Rate/8/1000, 18000), 200_000))
	return netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: ifindex, Parent: topology.HTBLink, Handle: netlink.MakeHandle(1, c.Minor)},
		netlink.HtbClassAttrs{Rate: c.Rate, Ceil: c.Ceil, Prio: c.Prio, Quantum: quantum, Buffer: burst(c.Rate), Cbuffer: burst(c.Ceil)})
}

// delFilter removes the whole priority of f, which only the agent uses.
func delFilter(h *netlink.Handle, f Filter, ifindex int) error {
	u := nlFilter(f, ifindex)
	u.Sel, u.ClassId = nil, 0
	return h.FilterDel(u)
}

func nlFilter(f Filter, ifindex int) *netlink.U32 {
	proto := uint16(unix.ETH_P_IP)
	if f.IPv6 {
		proto = unix.ETH_P_IPV6
	}
	return &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: topology.HTBRoot, Priority: f.Prio, Protocol: proto},
		ClassId:     netlink.MakeHandle(1, f.Minor),
		Sel:         &netlink.TcU32Sel{Flags: netlink.TC_U32_TERMINAL, Keys: u32Keys(f)},
	}
}

// Where a u32 key looks, from the network header: the word holding the
// protocol (IPv4's byte 9, IPv6's next header, byte 6) and the word of the
// UDP ports after a header without options or extensions.
const (
	protoOff4, protoOff6 = 8, 4
	portsOff4, portsOff6 = 20, 40
)

// u32Keys are f's keys: the first word's (the DSCP), then for a probe's
// filter the protocol (UDP) and the port.
func u32Keys(f Filter) []netlink.TcU32Key {
	var keys []netlink.TcU32Key
	if f.Mask != 0 || f.SPort == 0 && f.DPort == 0 {
		keys = append(keys, netlink.TcU32Key{Val: f.Val, Mask: f.Mask})
	}
	if f.SPort == 0 && f.DPort == 0 {
		return keys
	}
	pk, po := netlink.TcU32Key{Val: protoUDP << 16, Mask: 0x00ff0000, Off: protoOff4}, int32(portsOff4)
	if f.IPv6 {
		pk, po = netlink.TcU32Key{Val: protoUDP << 8, Mask: 0x0000ff00, Off: protoOff6}, portsOff6
	}
	keys = append(keys, pk)
	if f.SPort != 0 {
		keys = append(keys, netlink.TcU32Key{Val: uint32(f.SPort) << 16, Mask: 0xffff0000, Off: po})
	}
	if f.DPort != 0 {
		keys = append(keys, netlink.TcU32Key{Val: uint32(f.DPort), Mask: 0x0000ffff, Off: po})
	}
	return keys
}

// filterKeys reads a filter's keys back into x. Keys that are not the
// agent's leave x so that it differs from any filter the agent wants
// (Diff then replaces it).
func filterKeys(x *Filter, keys []netlink.TcU32Key) {
	y := *x
	y.Val, y.Mask = 0, 0
	for _, k := range keys {
		switch {
		case k.Off == 0 && k.OffMask == 0:
			y.Val, y.Mask = k.Val, k.Mask
		case (k.Off == portsOff4 && !y.IPv6 || k.Off == portsOff6 && y.IPv6) && k.Mask == 0xffff0000:
			y.SPort = uint16(k.Val >> 16)
		case (k.Off == portsOff4 && !y.IPv6 || k.Off == portsOff6 && y.IPv6) && k.Mask == 0x0000ffff:
			y.DPort = uint16(k.Val)
		}
	}
	if !slices.Equal(keys, u32Keys(y)) {
		y.Mask = ^uint32(0) // not what it seems: never equal to a wanted filter
	}
	*x = y
}

func nlRoute(r Route, ifindex int) *netlink.Route {
	x := &netlink.Route{Table: r.Table, LinkIndex: ifindex, Gw: r.Via.AsSlice(), MTU: r.MTU, Dst: ipNet(r.Dst)}
	if r.Src.IsValid() {
		x.Src = r.Src.AsSlice()
	}
	return x
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func nlRule(r IPRule) *netlink.Rule {
	x := netlink.NewRule()
	x.Family, x.Priority, x.Mark, x.Table = netlink.FAMILY_V4, r.Priority, r.Mark, r.Table
	if r.IPv6 {
		x.Family = netlink.FAMILY_V6
	}
	if r.Dst.IsValid() {
		x.Dst = ipNet(r.Dst)
	}
	x.IPProto = int(r.Proto)
	if !r.DPort.IsZero() {
		x.Dport = netlink.NewRulePortRange(r.DPort.Lo, r.DPort.Hi)
	}
	if !r.SPort.IsZero() {
		x.Sport = netlink.NewRulePortRange(r.SPort.Lo, r.SPort.Hi)
	}
	if r.ByUID {
		x.UIDRange = netlink.NewRuleUIDRange(r.UID, r.UID)
	}
	return x
}

// ipRule is the IPRule of a rule the kernel holds.
func ipRule(r netlink.Rule, v6 bool) IPRule {
	x := IPRule{IPv6: v6, Priority: r.Priority, Mark: r.Mark, Proto: uint8(r.IPProto), Table: r.Table}
	if r.Dst != nil {
		if a, ok := netip.AddrFromSlice(r.Dst.IP); ok {
			ones, _ := r.Dst.Mask.Size()
			x.Dst = netip.PrefixFrom(a.Unmap(), ones)
		}
	}
	if r.Dport != nil {
		x.DPort = reserve.PortRange{Lo: r.Dport.Start, Hi: r.Dport.End}
	}
	if r.Sport != nil {
		x.SPort = reserve.PortRange{Lo: r.Sport.Start, Hi: r.Sport.End}
	}
	if r.UIDRange != nil {
		x.ByUID, x.UID = true, r.UIDRange.Start // one user: the only range the agent writes
	}
	return x
}

// ruleExprs is the nftables program of a rule, as nft(8) would compile it.
func ruleExprs(r NftRule) []expr.Any {
	nh, th := expr.PayloadBaseNetworkHeader, expr.PayloadBaseTransportHeader
	load := func(base expr.PayloadBase, off, n uint32) expr.Any {
		return &expr.Payload{DestRegister: 1, Base: base, Offset: off, Len: n}
	}
	eq := func(b []byte) expr.Any { return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b} }
	and := func(mask []byte) expr.Any {
		return &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(len(mask)), Mask: mask, Xor: make([]byte, len(mask))}
	}
	fam, addrOff, addrLen := byte(unix.NFPROTO_IPV4), uint32(12), uint32(4)
	if r.IPv6 {
		fam, addrOff, addrLen = unix.NFPROTO_IPV6, 8, 16
	}
	e := []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, eq([]byte{fam})}
	switch r.Flow.Proto {
	case reserve.ProtoTCP:
		e = append(e, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, eq([]byte{unix.IPPROTO_TCP}))
	case reserve.ProtoUDP:
		e = append(e, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, eq([]byte{unix.IPPROTO_UDP}))
	}
	for i, pfx := range []netip.Prefix{r.Flow.Src.Prefix, r.Flow.Dst.Prefix} {
		if !pfx.IsValid() {
			continue
		}
		e = append(e, load(nh, addrOff+uint32(i)*addrLen, addrLen))
		if pfx.Bits() < pfx.Addr().BitLen() {
			e = append(e, and(net.CIDRMask(pfx.Bits(), pfx.Addr().BitLen())))
		}
		e = append(e, eq(pfx.Masked().Addr().AsSlice()))
	}
	for i, pr := range []reserve.PortRange{r.Flow.Src.Ports, r.Flow.Dst.Ports} {
		switch {
		case pr.IsZero():
		case pr.Lo == pr.Hi:
			e = append(e, load(th, uint32(i)*2, 2), eq(binaryutil.BigEndian.PutUint16(pr.Lo)))
		default:
			e = append(e, load(th, uint32(i)*2, 2), &expr.Range{Op: expr.CmpOpEq, Register: 1,
				FromData: binaryutil.BigEndian.PutUint16(pr.Lo), ToData: binaryutil.BigEndian.PutUint16(pr.Hi)})
		}
	}
	if r.Flow.ByUID {
		// The sending socket's owner: only meaningful for packets this node
		// sends, which is where marks by user are put (the output hook).
		e = append(e, &expr.Meta{Key: expr.MetaKeySKUID, Register: 1}, eq(binaryutil.NativeEndian.PutUint32(r.Flow.UID)))
	}
	if r.Flow.Cgroup != "" {
		// nft's "socket cgroupv2 level N PATH": the sending socket's
		// cgroup, or its ancestor at the path's depth, is the one with the
		// id resolved by WithCgroups (a cgroup's id is its inode number).
		e = append(e, &expr.Socket{Key: expr.SocketKeyCgroupv2, Level: uint32(cgroupLevel(r.Flow.Cgroup)), Register: 1},
			eq(binaryutil.NativeEndian.PutUint64(r.CgroupID)))
	}
	// DSCP: the top six bits of IPv4's second byte, or bits 4-9 of IPv6's
	// first two bytes.
	dscpOf := func(d uint8) []byte {
		if r.IPv6 {
			return []byte{d >> 2, (d & 3) << 6}
		}
		return []byte{d << 2}
	}
	dscpLoad := func() expr.Any {
		if r.IPv6 {
			return load(nh, 0, 2)
		}
		return load(nh, 1, 1)
	}
	dscpMask := []byte{0xfc}
	if r.IPv6 {
		dscpMask = []byte{0x0f, 0xc0}
	}
	if r.DSCP != 0 {
		e = append(e, dscpLoad(), and(dscpMask), eq(dscpOf(r.DSCP)))
	}
	switch {
	case r.SetDSCP != 0:
		// Rewritten as a whole 16-bit word, as nft(8) does: the kernel
		// updates IPv4's header checksum word by word.
		keep, set := []byte{0xff, 0x03}, []byte{0, r.SetDSCP << 2}
		w := &expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: 1, Base: nh, Offset: 0, Len: 2,
			CsumType: expr.CsumTypeInet, CsumOffset: 10}
		if r.IPv6 {
			keep, set = []byte{0xf0, 0x3f}, dscpOf(r.SetDSCP)
			w.CsumType, w.CsumOffset = expr.CsumTypeNone, 0
		}
		e = append(e, load(nh, 0, 2), &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 2, Mask: keep, Xor: set}, w)
	case r.SetMark != 0:
		e = append(e, &expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(r.SetMark)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
	}
	return e
}
