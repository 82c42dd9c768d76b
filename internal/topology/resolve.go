package topology

// Resolution: cross-references between entries, then every value the file
// may leave out (indexes, addresses, device names, queues). The scheme is
// documented in docs/testbed.md ("Addresses and device names").

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// check verifies names are unique and every reference resolves.
func (p *parser) check() {
	t := p.t
	if len(t.Sites) > maxSites {
		p.errorf(t.Sites[maxSites].Line, "site %q: more than %d sites (the site is one octet of the node addresses)", t.Sites[maxSites].Name, maxSites)
	}
	if len(t.Links) > maxLinks {
		p.errorf(t.Links[maxLinks].Line, "link %q: more than %d links (each takes a /30 of %s)", t.Links[maxLinks].Name, maxLinks, linkRange4)
	}
	sites := map[string]int{}
	var siteNames []string
	for i, s := range t.Sites {
		if j, dup := sites[s.Name]; dup {
			p.errorf(s.Line, "duplicate site name %q (first at line %d)", s.Name, t.Sites[j].Line)
			continue
		}
		sites[s.Name] = i
		siteNames = append(siteNames, s.Name)
	}
	nodes := map[string]int{}
	var nodeNames []string
	perSite := map[string]int{}
	for i, n := range t.Nodes {
		if j, dup := nodes[n.Name]; dup {
			p.errorf(n.Line, "duplicate node name %q (first at line %d)", n.Name, t.Nodes[j].Line)
		} else {
			nodes[n.Name] = i
			nodeNames = append(nodeNames, n.Name)
		}
		if _, ok := sites[n.Site]; !ok {
			p.errorf(p.nodes[i].siteLine, "node %q: unknown site %q%s", n.Name, n.Site, didYouMean(n.Site, siteNames))
			continue
		}
		if perSite[n.Site]++; perSite[n.Site] == maxNodesPerSite+1 {
			p.errorf(n.Line, "node %q: more than %d nodes in site %q (the index is one octet of the node addresses)", n.Name, maxNodesPerSite, n.Site)
		}
	}
	links := map[string]int{}
	var linkNames []string
	for i, l := range t.Links {
		if j, dup := links[l.Name]; dup {
			p.errorf(l.Line, "duplicate link name %q (first at line %d)", l.Name, t.Links[j].Line)
		} else {
			links[l.Name] = i
			linkNames = append(linkNames, l.Name)
		}
		src := p.links[i]
		known := true
		for e, name := range src.ends {
			if _, ok := nodes[name]; !ok {
				p.errorf(src.endLines[e], "link %q: unknown node %q%s", l.Name, name, didYouMean(name, nodeNames))
				known = false
			}
		}
		if known && src.ends[0] == src.ends[1] {
			p.errorf(src.endLines[1], "link %q: both ends are node %q: a link joins two different nodes", l.Name, src.ends[0])
		}
	}
	p.checkRoutes(names{sites, siteNames}, names{nodes, nodeNames}, names{links, linkNames})
}

// names indexes one kind of entry by name; list holds the names in file
// order, for suggestions.
type names struct {
	index map[string]int
	list  []string
}

// checkRoutes resolves the routes in the file into the next hops they
// give (p.given). A route at node N to node D gives N's next hop towards
// D; a route to site S gives N's next hop towards every node of S but N,
// and towards the subnets of every link with both ends in S that N is not
// on. A route to a node wins over a route to its site, as a longer prefix
// does in the kernel; two routes at one node to the same node or site are
// an error, even when they agree.
func (p *parser) checkRoutes(sites, nodes, links names) {
	t := p.t
	type key struct{ node, to string }
	seen := map[key]int{} // → index in p.routes
	var bySite, byNode []givenRoute
	for i, r := range p.routes {
		label := fmt.Sprintf("route #%d", i+1)
		x, nodeOK := nodes.index[r.node]
		if !nodeOK {
			p.errorf(r.nodeLn, "%s: unknown node %q%s", label, r.node, didYouMean(r.node, nodes.list))
		}
		d, isNode := nodes.index[r.to]
		s, isSite := sites.index[r.to]
		switch {
		case isNode && isSite:
			p.errorf(r.toLn, "%s: to: %q is both a node and a site: rename one of them", label, r.to)
		case !isNode && !isSite:
			p.errorf(r.toLn, "%s: unknown node or site %q%s", label, r.to, didYouMean(r.to, append(slices.Clone(nodes.list), sites.list...)))
		case isNode && r.to == r.node:
			p.errorf(r.toLn, "%s: a route from node %q to itself", label, r.node)
			isNode = false
		}
		k, linkOK := links.index[r.via]
		if !linkOK {
			p.errorf(r.viaLn, "%s: unknown link %q%s", label, r.via, didYouMean(r.via, links.list))
		}
		if !nodeOK || !linkOK || isNode == isSite {
			continue
		}
		if l := &t.Links[k]; l.A.Node != r.node && l.B.Node != r.node {
			var mine []string
			for _, m := range t.Links {
				if m.A.Node == r.node || m.B.Node == r.node {
					mine = append(mine, m.Name)
				}
			}
			p.errorf(r.viaLn, "%s: link %q does not touch node %q (it joins %q and %q; %q's links: %s)",
				label, r.via, r.node, l.A.Node, l.B.Node, r.node, strings.Join(mine, ", "))
			continue
		}
		if j, dup := seen[key{r.node, r.to}]; dup {
			q := p.routes[j]
			if q.via == r.via {
				p.errorf(r.line, "%s: duplicate route at node %q to %q (first at line %d)", label, r.node, r.to, q.line)
			} else {
				p.errorf(r.line, "%s: node %q already has a route to %q, via %q at line %d: give one", label, r.node, r.to, q.via, q.line)
			}
			continue
		}
		seen[key{r.node, r.to}] = i
		g := givenRoute{node: x, link: k, line: r.line}
		if isNode {
			g.to = []int{d}
			byNode = append(byNode, g)
			continue
		}
		for j, n := range t.Nodes {
			if n.Site == r.to && j != x {
				g.to = append(g.to, j)
			}
		}
		if len(g.to) == 0 {
			p.errorf(r.toLn, "%s: node %q is the only node of site %q: there is nothing to route to", label, r.node, r.to)
			continue
		}
		for j, l := range t.Links {
			if l.A.Node == r.node || l.B.Node == r.node {
				continue // on the link: the kernel's connected route covers it
			}
			if a, b := nodes.index[l.A.Node], nodes.index[l.B.Node]; t.Nodes[a].Site == t.Nodes[b].Site && t.Nodes[a].Site == t.Sites[s].Name {
				g.subnets = append(g.subnets, j)
			}
		}
		bySite = append(bySite, g)
	}
	// Routes to sites first, so that routes to nodes replace them.
	for _, g := range append(bySite, byNode...) {
		p.given.add(g)
	}
}

func didYouMean(word string, candidates []string) string {
	if s := suggest(word, candidates); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// resolve fills in indexes, addresses, device names and default queues.
func (p *parser) resolve() {
	t := p.t
	siteIndex := map[string]int{}
	for i := range t.Sites {
		t.Sites[i].Index = i + 1
		siteIndex[t.Sites[i].Name] = i + 1
	}
	next := map[string]int{}
	owner := map[netip.Addr]int{} // node address → index in t.Nodes
	for i := range t.Nodes {
		n := &t.Nodes[i]
		site := siteIndex[n.Site]
		next[n.Site]++
		n.Index = next[n.Site]
		if !n.IPv4.IsValid() {
			n.IPv4 = NodeIPv4(site, n.Index)
		}
		if !n.IPv6.IsValid() {
			n.IPv6 = NodeIPv6(site, n.Index)
		}
		for _, a := range []struct {
			addr        netip.Addr
			key, scheme string
			line        int
		}{
			{n.IPv4, "ipv4", "198.18.<site>.<index>", p.nodes[i].ipv4Ln},
			{n.IPv6, "ipv6", "2001:2:0:<site>::<index>", p.nodes[i].ipv6Ln},
		} {
			j, taken := owner[a.addr]
			if !taken {
				owner[a.addr] = i
				continue
			}
			if a.line != 0 { // given here
				p.errorf(a.line, "node %q: %s %s is node %q's address already", n.Name, a.key, a.addr, t.Nodes[j].Name)
				continue
			}
			// Computed addresses never clash with each other, so node j
			// gave this one in the file; that is the line to change.
			line := p.nodes[j].ipv4Ln
			if a.key == "ipv6" {
				line = p.nodes[j].ipv6Ln
			}
			p.errorf(line, "node %q: %s %s is the address node %q gets by default (%s): choose another",
				t.Nodes[j].Name, a.key, a.addr, n.Name, a.scheme)
		}
	}
	for k := range t.Links {
		l := &t.Links[k]
		l.A.IPv4, l.B.IPv4 = LinkIPv4(k + 1)
		l.A.IPv6, l.B.IPv6 = LinkIPv6(k + 1)
		if !p.links[k].queueGiven {
			l.Queue = defaultQueue(l.Params.Rate, l.Params.Delay)
		}
	}
	assignDevs(t)
}

// NodeIPv4 returns the default IPv4 address of node index (1-based) of
// site (1-based): 198.18.<site>.<index>.
func NodeIPv4(site, index int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18, byte(site), byte(index)})
}

// NodeIPv6 returns the default IPv6 address of node index of site:
// 2001:2:0:<site>::<index>, the numbers written in hexadecimal as IPv6
// groups always are (site 10, node 12 is 2001:2:0:a::c).
func NodeIPv6(site, index int) netip.Addr {
	var b [16]byte
	b[0], b[1], b[3] = 0x20, 0x01, 0x02
	binary.BigEndian.PutUint16(b[6:], uint16(site))
	binary.BigEndian.PutUint16(b[14:], uint16(index))
	return netip.AddrFrom16(b)
}

// LinkIPv4 returns the addresses of the two ends of link k (1-based, in
// file order): the /30 at 198.19.0.0 + 4·(k−1), end A the first host
// address and end B the second.
func LinkIPv4(k int) (a, b netip.Prefix) {
	base := uint32(198)<<24 | uint32(19)<<16 + uint32(4*(k-1))
	addr := func(off uint32) netip.Prefix {
		var x [4]byte
		binary.BigEndian.PutUint32(x[:], base+off)
		return netip.PrefixFrom(netip.AddrFrom4(x), 30)
	}
	return addr(1), addr(2)
}

// LinkIPv6 returns the addresses of the two ends of link k: the /64
// 2001:2:0:<0x8000+k>::/64, end A ::1 and end B ::2.
func LinkIPv6(k int) (a, b netip.Prefix) {
	addr := func(host byte) netip.Prefix {
		var x [16]byte
		x[0], x[1], x[3] = 0x20, 0x01, 0x02
		binary.BigEndian.PutUint16(x[6:], uint16(0x8000+k))
		x[15] = host
		return netip.PrefixFrom(netip.AddrFrom16(x), 64)
	}
	return addr(1), addr(2)
}

// defaultQueue is one bandwidth-delay product of the link (rate × the
// round trip over it alone), enough for one TCP flow to fill it; and at
// least a millisecond at the link rate (and 64 KiB), so that links with
// little delay still absorb the bursts of a fast sender, as a switch's
// buffer does.
func defaultQueue(rate uint64, delay time.Duration) int64 {
	bdp := math.Ceil(float64(rate) / 8 * 2 * delay.Seconds())
	ms := math.Ceil(float64(rate) / 8 / 1000)
	return int64(min(max(bdp, ms, minQueue), maxQueue))
}

// maxDev is the longest network device name Linux accepts (IFNAMSIZ − 1).
const maxDev = 15

// devName is the device name for a link: its name when it fits, else its
// first 10 bytes, "-" and 4 hex digits of a hash of the whole name, so
// that long names sharing a prefix still differ. salt > 0 picks another
// hash, to resolve the rare clash within a node.
func devName(link string, salt int) string {
	if salt == 0 && len(link) <= maxDev {
		return link
	}
	h := link
	if salt > 0 {
		h += "#" + strconv.Itoa(salt)
	}
	sum := sha256.Sum256([]byte(h))
	return link[:min(len(link), 10)] + "-" + hex.EncodeToString(sum[:2])
}

// assignDevs names both ends of every link. Both ends get the same name,
// which must be unique among the devices of each of the two nodes
// (including "lo"); links are taken in file order, so a clash renames the
// later link, always the same way.
func assignDevs(t *Topology) {
	used := map[string]map[string]bool{}
	for _, n := range t.Nodes {
		used[n.Name] = map[string]bool{"lo": true}
	}
	for k := range t.Links {
		l := &t.Links[k]
		a, b := used[l.A.Node], used[l.B.Node]
		var dev string
		for salt := 0; ; salt++ {
			dev = devName(l.Name, salt)
			if !a[dev] && !b[dev] {
				break
			}
		}
		a[dev], b[dev] = true, true
		l.A.Dev, l.B.Dev = dev, dev
	}
}

// Site returns the site called name.
func (t *Topology) Site(name string) (*Site, bool) {
	for i := range t.Sites {
		if t.Sites[i].Name == name {
			return &t.Sites[i], true
		}
	}
	return nil, false
}

// Node returns the node called name.
func (t *Topology) Node(name string) (*Node, bool) {
	for i := range t.Nodes {
		if t.Nodes[i].Name == name {
			return &t.Nodes[i], true
		}
	}
	return nil, false
}

// Link returns the link called name.
func (t *Topology) Link(name string) (*Link, bool) {
	for i := range t.Links {
		if t.Links[i].Name == name {
			return &t.Links[i], true
		}
	}
	return nil, false
}

// NodeByAddr returns the node that owns addr: its own address or the
// address of one of its link ends. IPv4-mapped IPv6 addresses match their
// IPv4 address, as a dual-stack socket reports them.
func (t *Topology) NodeByAddr(addr netip.Addr) (*Node, bool) {
	addr = addr.Unmap().WithZone("")
	for i := range t.Nodes {
		if t.Nodes[i].IPv4 == addr || t.Nodes[i].IPv6 == addr {
			return &t.Nodes[i], true
		}
	}
	for _, l := range t.Links {
		for _, e := range []End{l.A, l.B} {
			if e.IPv4.Addr() == addr || e.IPv6.Addr() == addr {
				return t.Node(e.Node)
			}
		}
	}
	return nil, false
}

// End returns the end of l at node.
func (l *Link) End(node string) (*End, bool) {
	switch node {
	case l.A.Node:
		return &l.A, true
	case l.B.Node:
		return &l.B, true
	}
	return nil, false
}

// Peer returns the end of l opposite node.
func (l *Link) Peer(node string) (*End, bool) {
	switch node {
	case l.A.Node:
		return &l.B, true
	case l.B.Node:
		return &l.A, true
	}
	return nil, false
}
