package reserve

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
)

// Protocol is the transport protocol a flow matches.
type Protocol string

// The protocols of a flow spec. "any" matches every IP packet between the
// two ends and takes no ports, since not every protocol has them; it is
// spelled "any" rather than "ip" because "ip" reads as IPv4 in nftables,
// and a flow may be IPv6.
const (
	ProtoTCP Protocol = "tcp"
	ProtoUDP Protocol = "udp"
	ProtoAny Protocol = "any"
)

// MaxFlows bounds how many flows one flow spec may list. Every flow becomes
// rules on every hop of the path, so a spec of thousands of flows would be a
// way to fill routers' rule tables; a mover session needs one.
const MaxFlows = 64

// PortRange is an inclusive range of ports; the zero value means every
// port (no ports written), and Lo == Hi a single port. Port 0 is never
// part of a written range: it cannot be listened on or connected to.
type PortRange struct {
	Lo, Hi uint16
}

// IsZero reports whether r is "every port".
func (r PortRange) IsZero() bool { return r == PortRange{} }

// String prints r as written in a flow spec: "7070" or "7000-7010", or ""
// for every port.
func (r PortRange) String() string {
	switch {
	case r.IsZero():
		return ""
	case r.Lo == r.Hi:
		return strconv.Itoa(int(r.Lo))
	}
	return strconv.Itoa(int(r.Lo)) + "-" + strconv.Itoa(int(r.Hi))
}

// overlaps reports whether some port is in both ranges.
func (r PortRange) overlaps(o PortRange) bool {
	if r.IsZero() || o.IsZero() {
		return true
	}
	return r.Lo <= o.Hi && o.Lo <= r.Hi
}

// FlowEndpoint is one end of a flow: an address or prefix and its ports.
// A single address is kept as a full-length prefix (/32 or /128), so every
// end is matched the same way.
type FlowEndpoint struct {
	Prefix netip.Prefix
	Ports  PortRange
}

// String prints e in canonical form: a single address without its length,
// and IPv6 in brackets when ports follow ("[2001:2::1]:7070").
func (e FlowEndpoint) String() string {
	a := e.Prefix.String()
	if e.Prefix.IsSingleIP() {
		a = e.Prefix.Addr().String()
	}
	if e.Ports.IsZero() {
		return a
	}
	if e.Prefix.Addr().Is6() {
		a = "[" + a + "]"
	}
	return a + ":" + e.Ports.String()
}

// Flow is one entry of a flow spec: packets of Proto from Src to Dst, in
// the reservation's direction (From → To). The reverse packets of the same
// connections (acknowledgements) follow the same path without a guarantee.
type Flow struct {
	Proto Protocol
	Src   FlowEndpoint
	Dst   FlowEndpoint
	// ByUID, when set, narrows the flow to the packets that local user UID
	// sends from the from node (Lambda Station marked by UID): other users'
	// connections between the same addresses and ports are not steered.
	ByUID bool
	UID   uint32
	// Cgroup, when set, narrows the flow to the packets of sockets created
	// in that cgroup (or one below it) on the from node: a path under the
	// cgroup2 hierarchy's root, without a leading slash
	// ("lightpath/run-42"), as `lightpath run` makes one per command.
	Cgroup string
}

// MaxCgroupPath bounds a flow's cgroup path.
const MaxCgroupPath = 255

// String prints f in canonical form, such as "tcp 198.18.1.2 > 198.18.2.2:7070"
// or "tcp 198.18.1.2 > 198.18.2.2:7070 uid 1000 cgroup lightpath/run-42".
func (f Flow) String() string {
	s := string(f.Proto) + " " + f.Src.String() + " > " + f.Dst.String()
	if f.ByUID {
		s += " uid " + strconv.FormatUint(uint64(f.UID), 10)
	}
	if f.Cgroup != "" {
		s += " cgroup " + f.Cgroup
	}
	return s
}

// cgroupsOverlap reports whether a socket could be in both cgroups (one
// holds the other, or either is every cgroup).
func cgroupsOverlap(a, b string) bool {
	if a == "" || b == "" || a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	return strings.HasPrefix(b, a+"/")
}

// overlaps reports whether a packet could match both f and o.
func (f Flow) overlaps(o Flow) bool {
	if f.Proto != ProtoAny && o.Proto != ProtoAny && f.Proto != o.Proto {
		return false
	}
	if f.ByUID && o.ByUID && f.UID != o.UID {
		return false
	}
	if !cgroupsOverlap(f.Cgroup, o.Cgroup) {
		return false
	}
	return f.Src.Prefix.Overlaps(o.Src.Prefix) && f.Dst.Prefix.Overlaps(o.Dst.Prefix) &&
		f.Src.Ports.overlaps(o.Src.Ports) && f.Dst.Ports.overlaps(o.Dst.Ports)
}

// FlowSpec names the packets a reservation steers onto its path, in the
// grammar of DESIGN.md: `PROTO SRC[:PORTS] > DST[:PORTS]`, several joined by
// ",". The zero FlowSpec (no flows) means the reservation steers nothing by
// itself.
type FlowSpec struct {
	Flows []Flow
}

// ParseFlowSpec parses a flow spec:
//
//	spec     = flow { "," flow }
//	flow     = proto SP endpoint ">" endpoint [ SP "uid" SP number ] [ SP "cgroup" SP path ]
//	proto    = "tcp" | "udp" | "any"            (any case; "any" takes no ports)
//	endpoint = addr [ ":" ports ]               (IPv4)
//	         | addr6                            (IPv6 without ports)
//	         | "[" addr6 "]" [ ":" ports ]      (IPv6, with ports)
//	addr     = an address, or a prefix with no host bits set (198.18.1.0/24)
//	ports    = port [ "-" port ]                (1-65535, low to high)
//	number   = a local user id, 0 to 4294967294 (the sender's, on the from node)
//	path     = a cgroup under the cgroup2 root, on the from node: names of
//	           letters, digits, '.', '_', '-', '@' and ':' joined by '/'
//	           (a leading '/' is dropped; no '.' or '..' names), at most
//	           255 bytes
//
// Spaces may surround every token. Source and destination must be of the
// same address family, and a flow may not be listed twice. Errors are
// *FlowSpecError, naming the column and what was expected there. The
// result's String is the canonical form, which parses back to an equal
// FlowSpec.
func ParseFlowSpec(s string) (FlowSpec, error) {
	p := fsParser{in: s}
	var fs FlowSpec
	for start := 0; ; {
		end := strings.IndexByte(s[start:], ',')
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		col := fsSkipSpace(s, start, end)
		f, err := p.flow(start, end)
		if err != nil {
			return FlowSpec{}, err
		}
		for i, g := range fs.Flows {
			if g == f {
				return FlowSpec{}, p.fail(col, fmt.Sprintf("each flow once (this repeats flow %d)", i+1), strings.TrimSpace(s[start:end]))
			}
		}
		if len(fs.Flows) == MaxFlows {
			return FlowSpec{}, p.fail(col, fmt.Sprintf("at most %d flows", MaxFlows), strings.TrimSpace(s[start:end]))
		}
		fs.Flows = append(fs.Flows, f)
		if end == len(s) {
			return fs, nil
		}
		start = end + 1
	}
}

// String prints fs in canonical form: lower-case protocols, canonical
// addresses, single addresses without a length, flows joined by ", ".
// The zero FlowSpec prints as "".
func (fs FlowSpec) String() string {
	parts := make([]string, len(fs.Flows))
	for i, f := range fs.Flows {
		parts[i] = f.String()
	}
	return strings.Join(parts, ", ")
}

// IsZero reports whether fs lists no flows (the reservation has no flow
// spec); JSON's omitzero uses it.
func (fs FlowSpec) IsZero() bool { return len(fs.Flows) == 0 }

// Equal reports whether fs and o list the same flows in the same order.
func (fs FlowSpec) Equal(o FlowSpec) bool {
	if len(fs.Flows) != len(o.Flows) {
		return false
	}
	for i := range fs.Flows {
		if fs.Flows[i] != o.Flows[i] {
			return false
		}
	}
	return true
}

// MarshalText writes the canonical form, so a FlowSpec is a plain string in
// JSON and in the store.
func (fs FlowSpec) MarshalText() ([]byte, error) { return []byte(fs.String()), nil }

// UnmarshalText parses a flow spec; empty text is the zero FlowSpec, so a
// reservation without one round-trips.
func (fs *FlowSpec) UnmarshalText(b []byte) error {
	if strings.TrimSpace(string(b)) == "" {
		*fs = FlowSpec{}
		return nil
	}
	v, err := ParseFlowSpec(string(b))
	if err != nil {
		return err
	}
	*fs = v
	return nil
}

// Prefixes returns the distinct source and destination prefixes of fs, in
// order of first appearance, for the controller to check against the
// addresses of the reservation's from and to nodes (or use Within).
func (fs FlowSpec) Prefixes() (src, dst []netip.Prefix) {
	seen := map[netip.Prefix]bool{}
	add := func(list []netip.Prefix, p netip.Prefix) []netip.Prefix {
		if seen[p] {
			return list
		}
		seen[p] = true
		return append(list, p)
	}
	for _, f := range fs.Flows {
		src = add(src, f.Src.Prefix)
	}
	clear(seen)
	for _, f := range fs.Flows {
		dst = add(dst, f.Dst.Prefix)
	}
	return src, dst
}

// Within checks that every flow runs from the reservation's from node to
// its to node: each source prefix must lie inside one of src (the from
// node's addresses or subnets) and each destination inside one of dst.
// Otherwise the spec would steer someone else's traffic onto the path, or
// traffic in the direction without a guarantee. The error is a
// *RequestError (400) naming the first flow that strays.
func (fs FlowSpec) Within(src, dst []netip.Prefix) error {
	for i, f := range fs.Flows {
		if !fsInside(f.Src.Prefix, src) {
			return &RequestError{Field: "flow_spec", Message: fmt.Sprintf("flow %d (%s): source %s is not an address of the reservation's from node (%s)", i+1, f, fsPrefixString(f.Src.Prefix), fsPrefixList(src))}
		}
		if !fsInside(f.Dst.Prefix, dst) {
			return &RequestError{Field: "flow_spec", Message: fmt.Sprintf("flow %d (%s): destination %s is not an address of the reservation's to node (%s)", i+1, f, fsPrefixString(f.Dst.Prefix), fsPrefixList(dst))}
		}
	}
	return nil
}

// Overlaps reports whether a packet could match a flow of fs and a flow of
// o. Hosts mark packets by the first rule that matches, so two live
// reservations from the same host with overlapping specs would fight over
// the same packets; the controller can refuse the second.
func (fs FlowSpec) Overlaps(o FlowSpec) bool {
	for _, f := range fs.Flows {
		for _, g := range o.Flows {
			if f.overlaps(g) {
				return true
			}
		}
	}
	return false
}

// fsInside reports whether prefix p lies wholly inside one of outer.
func fsInside(p netip.Prefix, outer []netip.Prefix) bool {
	for _, q := range outer {
		if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

func fsPrefixString(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

func fsPrefixList(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "none known"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fsPrefixString(p)
	}
	return strings.Join(s, ", ")
}

// FlowSpecError is a flow spec that does not parse (400). Column is the
// 1-based byte position in Input where the parser found Got instead of
// Want, so a user sees where their spec went wrong and what fits there.
type FlowSpecError struct {
	Input  string
	Column int
	Want   string
	Got    string
}

// Error quotes the input and says where it went wrong and what fits there.
func (e *FlowSpecError) Error() string {
	got := "nothing"
	if e.Got != "" {
		got = strconv.Quote(e.Got)
	}
	return fmt.Sprintf("invalid flow spec %q at column %d: want %s, got %s", e.Input, e.Column, e.Want, got)
}

// Unwrap makes a FlowSpecError match ErrInvalid.
func (e *FlowSpecError) Unwrap() error { return ErrInvalid }

const (
	fsWantFlow  = "a flow like tcp 198.18.1.2 > 198.18.2.2:7070"
	fsWantProto = "a protocol: tcp, udp or any"
	fsWantAddr  = "an IPv4 or IPv6 address or prefix, like 198.18.1.2, 198.18.1.0/24 or 2001:2::/64"
	fsWantPorts = "a port or a port range, like 7070 or 7000-7010"
)

// fsParser parses one flow spec; in is kept whole for error messages and
// every position is a byte offset into it.
type fsParser struct {
	in string
}

func (p *fsParser) fail(off int, want, got string) error {
	return &FlowSpecError{Input: p.in, Column: off + 1, Want: want, Got: got}
}

// fsSkipSpace returns the first offset in [i, end) that is not a space or
// tab, or end.
func fsSkipSpace(s string, i, end int) int {
	for i < end && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// fsToken returns the end of the token starting at i: the first space,
// tab or stop byte, or end.
func fsToken(s string, i, end int, stop byte) int {
	for i < end && s[i] != ' ' && s[i] != '\t' && s[i] != stop {
		i++
	}
	return i
}

// flow parses the flow in p.in[start:end].
func (p *fsParser) flow(start, end int) (Flow, error) {
	s := p.in
	i := fsSkipSpace(s, start, end)
	if i == end {
		return Flow{}, p.fail(i, fsWantFlow, "")
	}
	j := fsToken(s, i, end, '>')
	var f Flow
	switch Protocol(strings.ToLower(s[i:j])) {
	case ProtoTCP:
		f.Proto = ProtoTCP
	case ProtoUDP:
		f.Proto = ProtoUDP
	case ProtoAny:
		f.Proto = ProtoAny
	default:
		return Flow{}, p.fail(i, fsWantProto, s[i:j])
	}
	k := fsSkipSpace(s, j, end)
	if k == j || k == end || s[k] == '>' {
		got := ""
		if k < end {
			got = s[k:fsToken(s, k+1, end, 0)]
		}
		return Flow{}, p.fail(k, "a space and the source address after the protocol", got)
	}
	// The source: one token, then ">".
	srcEnd := fsToken(s, k, end, '>')
	gt := fsSkipSpace(s, srcEnd, end)
	if gt == end || s[gt] != '>' {
		return Flow{}, p.fail(gt, "'>' and the destination after the source", s[gt:fsToken(s, gt, end, '>')])
	}
	var err error
	if f.Src, err = p.endpoint(k, srcEnd, f.Proto); err != nil {
		return Flow{}, err
	}
	// The destination: one token, then the end of the flow.
	m := fsSkipSpace(s, gt+1, end)
	if m == end {
		return Flow{}, p.fail(m, "the destination address after '>'", "")
	}
	dstEnd := fsToken(s, m, end, '>')
	if dstEnd == m { // a second '>'
		return Flow{}, p.fail(m, "the destination address after '>'", s[m:fsToken(s, m+1, end, 0)])
	}
	// The options: "uid N", then "cgroup PATH", each at most once.
	for rest := fsSkipSpace(s, dstEnd, end); rest != end; {
		kw := fsToken(s, rest, end, 0)
		word := strings.ToLower(s[rest:kw])
		switch {
		case word == "uid" && !f.ByUID && f.Cgroup == "":
		case word == "cgroup" && f.Cgroup == "":
		default:
			want := "',', \"uid N\", \"cgroup PATH\" or the end of the spec after the destination"
			switch {
			case f.Cgroup != "":
				want = "',' or the end of the spec after the cgroup"
			case f.ByUID:
				want = "',', \"cgroup PATH\" or the end of the spec after the user id"
			}
			return Flow{}, p.fail(rest, want, s[rest:fsToken(s, rest+1, end, 0)])
		}
		n := fsSkipSpace(s, kw, end)
		ne := fsToken(s, n, end, 0)
		if word == "uid" {
			if n == kw || n == end {
				return Flow{}, p.fail(n, "a space and a user id after \"uid\"", "")
			}
			uid, err := strconv.ParseUint(s[n:ne], 10, 32)
			if err != nil || uid == math.MaxUint32 {
				return Flow{}, p.fail(n, "a user id from 0 to 4294967294", s[n:ne])
			}
			f.ByUID, f.UID = true, uint32(uid)
		} else {
			if n == kw || n == end {
				return Flow{}, p.fail(n, "a space and a cgroup path after \"cgroup\"", "")
			}
			cg, at, ok := cleanCgroup(s[n:ne])
			if !ok {
				return Flow{}, p.fail(n+at, "a cgroup path: names of letters, digits, '.', '_', '-', '@' and ':' joined by '/' (no '.' or '..'), at most 255 bytes", s[n:ne])
			}
			f.Cgroup = cg
		}
		rest = fsSkipSpace(s, ne, end)
	}
	if f.Dst, err = p.endpoint(m, dstEnd, f.Proto); err != nil {
		return Flow{}, err
	}
	if f.Src.Prefix.Addr().Is4() != f.Dst.Prefix.Addr().Is4() {
		fam := "an IPv6 destination, as the source is IPv6"
		if f.Src.Prefix.Addr().Is4() {
			fam = "an IPv4 destination, as the source is IPv4"
		}
		return Flow{}, p.fail(m, fam, s[m:dstEnd])
	}
	return f, nil
}

// cleanCgroup checks a flow's cgroup path and drops a leading '/'; when
// it is not one, at is the offset of what is wrong.
func cleanCgroup(p string) (cg string, at int, ok bool) {
	start := 0
	if strings.HasPrefix(p, "/") {
		start = 1
	}
	cg = p[start:]
	if cg == "" || len(cg) > MaxCgroupPath {
		return "", 0, false
	}
	name := start
	for i := start; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if n := p[name:i]; n == "" || n == "." || n == ".." {
				return "", name, false
			}
			name = i + 1
			continue
		}
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-@:", c) >= 0) {
			return "", i, false
		}
	}
	return cg, 0, true
}

// endpoint parses the endpoint in p.in[i:end] (no spaces inside).
func (p *fsParser) endpoint(i, end int, proto Protocol) (FlowEndpoint, error) {
	s := p.in
	tok := s[i:end]
	var e FlowEndpoint
	addrEnd, portsAt := end, -1 // portsAt: offset of the ports, after ':'
	if tok[0] == '[' {
		closing := strings.IndexByte(tok, ']')
		if closing < 0 {
			return e, p.fail(end, "']' closing the IPv6 address", "")
		}
		addrEnd = i + closing
		if after := addrEnd + 1; after < end {
			if s[after] != ':' {
				return e, p.fail(after, "':' and ports after ']'", s[after:end])
			}
			portsAt = after + 1
		}
		var err error
		if e.Prefix, err = p.addr(i+1, addrEnd); err != nil {
			return e, err
		}
		if !e.Prefix.Addr().Is6() {
			return e, p.fail(i, "an IPv4 address without brackets (they are for IPv6)", tok)
		}
	} else {
		switch strings.Count(tok, ":") {
		case 0:
		case 1: // IPv4 with ports: IPv6 always has two colons or more.
			addrEnd = i + strings.IndexByte(tok, ':')
			portsAt = addrEnd + 1
		}
		var err error
		if e.Prefix, err = p.addr(i, addrEnd); err != nil {
			return e, err
		}
		if portsAt >= 0 && !e.Prefix.Addr().Is4() {
			return e, p.fail(i, "an IPv4 address before ':' (write IPv6 with ports as [addr]:port)", tok)
		}
	}
	if portsAt < 0 {
		return e, nil
	}
	if proto == ProtoAny {
		return e, p.fail(portsAt-1, "no ports with protocol any (ports need tcp or udp)", s[portsAt-1:end])
	}
	var err error
	e.Ports, err = p.ports(portsAt, end)
	return e, err
}

// addr parses an address or prefix in p.in[i:end].
func (p *fsParser) addr(i, end int) (netip.Prefix, error) {
	a := p.in[i:end]
	if strings.Contains(a, "/") {
		pre, err := netip.ParsePrefix(a)
		if err != nil {
			return pre, p.fail(i, fsWantAddr, a)
		}
		if pre.Addr().Is4In6() {
			return pre, p.fail(i, "an IPv4 prefix written as IPv4, not as IPv4-mapped IPv6", a)
		}
		if m := pre.Masked(); m != pre {
			return pre, p.fail(i, "a prefix without host bits set, like "+m.String(), a)
		}
		return pre, nil
	}
	addr, err := netip.ParseAddr(a)
	switch {
	case err != nil:
		want := fsWantAddr
		if strings.Count(a, ":") > 1 {
			want += " (IPv6 with ports is written [addr]:port)"
		}
		return netip.Prefix{}, p.fail(i, want, a)
	case addr.Zone() != "":
		return netip.Prefix{}, p.fail(i, "an address without a zone", a)
	case addr.Is4In6():
		return netip.Prefix{}, p.fail(i, "an IPv4 address written as IPv4, not as IPv4-mapped IPv6", a)
	}
	return netip.PrefixFrom(addr, addr.BitLen()), nil
}

// ports parses a port or range in p.in[i:end].
func (p *fsParser) ports(i, end int) (PortRange, error) {
	s := p.in[i:end]
	lo, hi, isRange := strings.Cut(s, "-")
	parse := func(v string, off int) (uint16, error) {
		if v == "" || len(v) > 5 || strings.Trim(v, "0123456789") != "" {
			return 0, p.fail(off, fsWantPorts, v)
		}
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil || n == 0 {
			return 0, p.fail(off, "a port from 1 to 65535", v)
		}
		return uint16(n), nil
	}
	l, err := parse(lo, i)
	if err != nil {
		return PortRange{}, err
	}
	if !isRange {
		return PortRange{Lo: l, Hi: l}, nil
	}
	h, err := parse(hi, i+len(lo)+1)
	if err != nil {
		return PortRange{}, err
	}
	if h < l {
		return PortRange{}, p.fail(i, "a port range from low to high", s)
	}
	return PortRange{Lo: l, Hi: h}, nil
}
