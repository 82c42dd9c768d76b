package testbed

// Parsing and validation of the topology file. The format is documented in
// docs/testbed.md ("The topology file"); keep the two in step.
//
// The parser walks yaml.Node trees instead of decoding into structs so that
// every message can name the line it is about, and so that unknown keys,
// duplicate keys and values of the wrong kind are errors rather than being
// silently ignored or zeroed.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/lightpath/lightpath/internal/units"
)

// Error is one problem in a topology file. It prints as "FILE:LINE: what
// is wrong", the form editors and terminals turn into a link to the line.
type Error struct {
	File string
	Line int
	Err  error
}

// Error formats the problem as FILE:LINE: message.
func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the problem without its location, so that callers can
// match units.ErrSyntax and units.ErrRange with errors.Is.
func (e *Error) Unwrap() error { return e.Err }

// Limits of the file format.
const (
	// MaxNodeName keeps namespace names (lp-<testbed>-<node>) short enough
	// to read in `ip netns` listings and prompts.
	MaxNodeName = 24
	// MaxLinkName bounds link names; device names are shortened from them
	// anyway (see devName), so this only keeps messages and tables tidy.
	MaxLinkName = 32
	// MaxSiteName bounds site names, for the same reason.
	MaxSiteName = 32

	minMTU     = 576   // the least IPv4 datagram every host must accept (RFC 791)
	minMTUv6   = 1280  // the least IPv6 link MTU (RFC 8200); every node has IPv6
	maxMTU     = 65535 // the largest IP packet
	defaultMTU = 1500

	defaultRate       = 10e9
	maxRate           = 1e12 // far beyond what one host can emulate; keeps the arithmetic in range
	defaultReservable = 0.9
	minQueue          = 64 << 10
	maxQueue          = 1 << 30 // the emulator and htb hold at most this much per direction
	maxDelay          = 10 * time.Second

	maxSites        = 254   // the site is one octet of 198.18.<site>.<index>
	maxNodesPerSite = 254   // the index is the other one
	maxLinks        = 16384 // /30s in 198.19.0.0/16

	// maxErrors bounds one report: past this many problems the rest are
	// most likely consequences of the first ones.
	maxErrors = 20
)

var entityNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// checkName says what is wrong with a site, node or link name, or
// returns nil. The names become parts of namespace and device names, so
// they are kept to characters that need no quoting anywhere.
func checkName(kind, name string, maxLen int) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name is empty", kind)
	case !entityNameRE.MatchString(name):
		return fmt.Errorf("%s name %q: use lower-case letters, digits and \"-\", starting with a letter or digit", kind, name)
	case len(name) > maxLen:
		return fmt.Errorf("%s name %q is %d characters long: at most %d", kind, name, len(name), maxLen)
	}
	return nil
}

// Load reads and parses the topology file at path. Messages name the file
// as path is written.
func Load(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	return Parse(path, data)
}

// Parse parses, validates and resolves a topology file; name is what
// messages call the file. On failure the error lists the problems found
// (each an *Error, joined with errors.Join when there are several), in the
// order of the file as far as possible.
func Parse(name string, data []byte) (*Topology, error) {
	p := &parser{t: &Topology{File: name}}
	root, ok := p.document(data)
	if !ok {
		return nil, p.err()
	}
	// Each stage relies on the one before being clean: there is no point
	// in reporting a link to an unknown node whose name was misspelt.
	for _, stage := range []func(){
		func() { p.top(root) },
		p.check,
		p.resolve,
		p.connect,
		p.forward,
	} {
		stage()
		if err := p.err(); err != nil {
			return nil, err
		}
	}
	p.t.Routes = computeRoutes(p.t, p.given)
	return p.t, nil
}

// parser holds the state of one Parse.
type parser struct {
	t    *Topology
	errs []error
	// Parallel to t.Nodes and t.Links: what only validation needs.
	nodes []nodeSrc
	links []linkSrc
	// The routes in the file, and the next hops they give (checkRoutes).
	routes []routeSrc
	given  givenHops
}

type nodeSrc struct {
	siteLine       int
	ipv4Ln, ipv6Ln int // lines of addresses given in the file, else 0
}

// routeSrc is a route as the file gives it.
type routeSrc struct {
	node, to, via       string
	line                int // the entry
	nodeLn, toLn, viaLn int
}

type linkSrc struct {
	ends       [2]string
	endLines   [2]int
	queueGiven bool // else the queue defaults to one bandwidth-delay product
}

// errorf records a problem at line. Formats may use %w.
func (p *parser) errorf(line int, format string, args ...any) {
	if line < 1 {
		line = 1
	}
	p.errs = append(p.errs, &Error{File: p.t.File, Line: line, Err: fmt.Errorf(format, args...)})
}

// err returns the problems recorded so far in file order, or nil.
func (p *parser) err() error {
	slices.SortStableFunc(p.errs, func(a, b error) int {
		return a.(*Error).Line - b.(*Error).Line
	})
	switch n := len(p.errs); {
	case n == 0:
		return nil
	case n == 1:
		return p.errs[0]
	case n > maxErrors:
		errs := append(p.errs[:maxErrors:maxErrors], fmt.Errorf("%s: %d more problems not shown", p.t.File, n-maxErrors))
		return errors.Join(errs...)
	default:
		return errors.Join(p.errs...)
	}
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document decodes data into one YAML document and returns its root.
func (p *parser) document(data []byte) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf(1, "empty topology file: want sites, nodes and links")
		} else {
			p.yamlError(err)
		}
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errorf(extra.Line, "a second YAML document: a topology file holds one")
		return nil, false
	} else if !errors.Is(err, io.EOF) {
		p.yamlError(err)
		return nil, false
	}
	if len(doc.Content) != 1 || isNull(doc.Content[0]) {
		p.errorf(doc.Line, "empty topology file: want sites, nodes and links")
		return nil, false
	}
	return doc.Content[0], true
}

// yamlError turns a syntax error from the YAML package, "yaml: line N:
// problem", into this package's form. The YAML package leaves the line out
// for problems on the first line.
func (p *parser) yamlError(err error) {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		p.errorf(n, "YAML syntax: %s", m[2])
		return
	}
	p.errorf(1, "YAML syntax: %s", strings.TrimPrefix(msg, "yaml: "))
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// deref follows aliases to the node they name. Anchors and aliases are
// plain YAML, and with merge keys (<<) they let a file share settings
// between links.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// fields is one YAML mapping by key, with the line of every key.
type fields struct {
	line  int
	keys  []string // in file order, for deterministic messages
	vals  map[string]*yaml.Node
	lines map[string]int
}

func (f fields) has(k string) bool { return f.vals[k] != nil }

// lineOf returns the line of key k's value, or of the mapping when k is
// absent (a problem about a missing key belongs to the mapping).
func (f fields) lineOf(k string) int {
	if v := f.vals[k]; v != nil {
		return v.Line
	}
	return f.line
}

// fields reads mapping n. Duplicate keys are errors (YAML forbids them, but
// the YAML package keeps them in its node tree). Merge keys are expanded:
// keys written in the mapping win over merged ones, and earlier merged
// mappings win over later ones, as the YAML merge key type specifies.
func (p *parser) fields(n *yaml.Node, what string) (fields, bool) {
	n = deref(n)
	f := fields{line: n.Line, vals: map[string]*yaml.Node{}, lines: map[string]int{}}
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, "%s: want a mapping of keys to values, not %s", what, describe(n))
		return f, false
	}
	ok := p.collect(&f, n, what, 0, true, map[*yaml.Node]bool{n: true})
	return f, ok
}

// collect adds the keys of mapping n to f. Each mapping is merged at most
// once (seen): merging it again adds nothing, and without the check nested
// merge lists of aliases would blow up exponentially, like the "billion
// laughs".
func (p *parser) collect(f *fields, n *yaml.Node, what string, depth int, own bool, seen map[*yaml.Node]bool) bool {
	if depth > 10 {
		p.errorf(n.Line, "%s: merge keys nested too deeply", what)
		return false
	}
	ok := true
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k.Line, "%s: a key must be a plain word, not %s", what, describe(k))
			ok = false
			continue
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if prev, dup := f.lines[k.Value]; dup {
			if own {
				p.errorf(k.Line, "%s: duplicate key %q (first at line %d)", what, k.Value, prev)
				ok = false
			}
			continue
		}
		f.keys = append(f.keys, k.Value)
		f.vals[k.Value] = v
		f.lines[k.Value] = k.Line
	}
	for _, m := range merges {
		m = deref(m)
		var srcs []*yaml.Node
		switch m.Kind {
		case yaml.MappingNode:
			srcs = []*yaml.Node{m}
		case yaml.SequenceNode:
			srcs = m.Content
		}
		for _, s := range srcs {
			s = deref(s)
			if seen[s] {
				continue
			}
			seen[s] = true
			if s.Kind != yaml.MappingNode {
				p.errorf(s.Line, "%s: a merge key (<<) takes a mapping or a list of mappings, not %s", what, describe(s))
				ok = false
				continue
			}
			ok = p.collect(f, s, what, depth+1, false, seen) && ok
		}
		if len(srcs) == 0 {
			p.errorf(m.Line, "%s: a merge key (<<) takes a mapping or a list of mappings, not %s", what, describe(m))
			ok = false
		}
	}
	return ok
}

// allow reports every key of f not in allowed, listing the allowed ones.
func (p *parser) allow(f fields, what string, allowed ...string) bool {
	ok := true
	for _, k := range f.keys {
		if slices.Contains(allowed, k) {
			continue
		}
		msg := fmt.Sprintf("%s: unknown key %q (allowed: %s)", what, k, strings.Join(allowed, ", "))
		if s := suggest(k, allowed); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		p.errorf(f.lines[k], "%s", msg)
		ok = false
	}
	return ok
}

// require reports every key of keys missing from f.
func (p *parser) require(f fields, what string, keys ...string) bool {
	ok := true
	for _, k := range keys {
		if !f.has(k) {
			p.errorf(f.line, "%s: missing key %q", what, k)
			ok = false
		}
	}
	return ok
}

// describe names the kind of a node for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "that"
}

// scalar returns the text of a scalar value, as written (so that "1500"
// and "10G" read the same whatever type YAML would give them).
func (p *parser) scalar(n *yaml.Node, what string) (string, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.errorf(n.Line, "%s: want a single value, not %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}

// sequence returns the items of a list value.
func (p *parser) sequence(n *yaml.Node, what string) ([]*yaml.Node, bool) {
	n = deref(n)
	if isNull(n) {
		return nil, true // "links:" with nothing under it is an empty list
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n.Line, "%s: want a list, not %s", what, describe(n))
		return nil, false
	}
	return n.Content, true
}

// top reads the top-level mapping.
func (p *parser) top(root *yaml.Node) {
	f, ok := p.fields(root, "topology")
	if !ok {
		return
	}
	p.allow(f, "topology", "sites", "nodes", "links", "routes")
	if f.has("sites") {
		items, _ := p.sequence(f.vals["sites"], "sites")
		for i, it := range items {
			p.site(i, it)
		}
	}
	if f.has("nodes") {
		items, _ := p.sequence(f.vals["nodes"], "nodes")
		for i, it := range items {
			p.node(i, it)
		}
	}
	if f.has("links") {
		items, _ := p.sequence(f.vals["links"], "links")
		for i, it := range items {
			p.link(i, it)
		}
	}
	if f.has("routes") {
		items, _ := p.sequence(f.vals["routes"], "routes")
		for i, it := range items {
			p.route(i, it)
		}
	}
	if len(p.t.Sites) == 0 && len(p.errs) == 0 {
		p.errorf(f.lineOf("sites"), "no sites: a topology needs at least one site, and every node belongs to one")
	}
	if len(p.t.Nodes) == 0 && len(p.errs) == 0 {
		p.errorf(f.lineOf("nodes"), "no nodes: a topology needs at least one node")
	}
}

// name reads the "name" key of an entry, returning a label for messages
// ("node \"a1\"" or "node #3" when the name is unusable).
func (p *parser) name(f fields, kind string, i, maxLen int) (name, label string) {
	label = fmt.Sprintf("%s #%d", kind, i+1)
	if !p.require(f, label, "name") {
		return "", label
	}
	s, ok := p.scalar(f.vals["name"], label+": name")
	if !ok {
		return "", label
	}
	if err := checkName(kind, s, maxLen); err != nil {
		p.errorf(f.lineOf("name"), "%w", err)
	}
	return s, fmt.Sprintf("%s %q", kind, s)
}

func (p *parser) site(i int, n *yaml.Node) {
	f, ok := p.fields(n, fmt.Sprintf("site #%d", i+1))
	if !ok {
		return
	}
	name, label := p.name(f, "site", i, MaxSiteName)
	p.allow(f, label, "name")
	p.t.Sites = append(p.t.Sites, Site{Name: name, Line: f.line})
}

func (p *parser) node(i int, n *yaml.Node) {
	f, ok := p.fields(n, fmt.Sprintf("node #%d", i+1))
	if !ok {
		return
	}
	name, label := p.name(f, "node", i, MaxNodeName)
	p.allow(f, label, "name", "site", "role", "ipv4", "ipv6")
	node := Node{Name: name, Role: RoleHost, Line: f.line}
	var src nodeSrc
	if p.require(f, label, "site") {
		node.Site, _ = p.scalar(f.vals["site"], label+": site")
		src.siteLine = f.lineOf("site")
	}
	if f.has("role") {
		if s, ok := p.scalar(f.vals["role"], label+": role"); ok {
			node.Role = s
			if roles := []string{RoleHost, RoleRouter}; !slices.Contains(roles, s) {
				p.errorf(f.lineOf("role"), "%s: unknown role %q (want %s or %s)", label, s, RoleHost, RoleRouter)
			}
		}
	}
	if f.has("ipv4") {
		src.ipv4Ln = f.lineOf("ipv4")
		node.IPv4 = p.addr(f.vals["ipv4"], label+": ipv4", false)
	}
	if f.has("ipv6") {
		src.ipv6Ln = f.lineOf("ipv6")
		node.IPv6 = p.addr(f.vals["ipv6"], label+": ipv6", true)
	}
	p.t.Nodes = append(p.t.Nodes, node)
	p.nodes = append(p.nodes, src)
}

// Address ranges. Node addresses come from the benchmarking ranges
// (RFC 2544, RFC 5180) minus the parts links use.
var (
	nodeRange4 = netip.MustParsePrefix("198.18.0.0/15")
	linkRange4 = netip.MustParsePrefix("198.19.0.0/16")
	nodeRange6 = netip.MustParsePrefix("2001:2::/48")
	linkRange6 = netip.MustParsePrefix("2001:2:0:8000::/49")
)

// addr reads a node address given in the file.
func (p *parser) addr(n *yaml.Node, what string, v6 bool) netip.Addr {
	s, ok := p.scalar(n, what)
	if !ok {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(s)
	family, in, links := "IPv4", nodeRange4, linkRange4
	if v6 {
		family, in, links = "IPv6", nodeRange6, linkRange6
	}
	switch {
	case err != nil:
		p.errorf(n.Line, "%s: %w", what, err)
	case a.Zone() != "" || a.Is4() == v6 || a.Is4In6():
		p.errorf(n.Line, "%s: %s is not an %s address", what, s, family)
	case !in.Contains(a):
		p.errorf(n.Line, "%s: %s is outside %s, the range set aside for network benchmarks", what, s, in)
	case links.Contains(a):
		p.errorf(n.Line, "%s: %s is inside %s, which link addresses use", what, s, links)
	default:
		return a
	}
	return netip.Addr{}
}

func (p *parser) link(i int, n *yaml.Node) {
	f, ok := p.fields(n, fmt.Sprintf("link #%d", i+1))
	if !ok {
		return
	}
	name, label := p.name(f, "link", i, MaxLinkName)
	p.allow(f, label, "name", "ends", "role", "rate", "delay", "jitter", "reorder", "loss", "mtu", "queue", "reservable")
	l := Link{
		Name:       name,
		Role:       LinkRouted,
		Params:     Params{Rate: defaultRate},
		MTU:        defaultMTU,
		Reservable: defaultReservable,
		Line:       f.line,
	}
	var src linkSrc
	defer func() {
		p.t.Links = append(p.t.Links, l)
		p.links = append(p.links, src)
	}()

	if p.require(f, label, "ends") {
		p.ends(f.vals["ends"], label, &src)
		l.A.Node, l.B.Node = src.ends[0], src.ends[1]
	}
	if f.has("role") {
		if s, ok := p.scalar(f.vals["role"], label+": role"); ok {
			l.Role = s
			if s != LinkRouted && s != LinkDedicated {
				p.errorf(f.lineOf("role"), "%s: unknown role %q (want %s or %s)", label, s, LinkRouted, LinkDedicated)
			}
		}
	}
	if f.has("rate") {
		if s, ok := p.scalar(f.vals["rate"], label+": rate"); ok {
			r, err := units.ParseRate(s)
			switch {
			case err != nil:
				p.errorf(f.lineOf("rate"), "%s: rate: %w", label, err)
			case r == 0:
				p.errorf(f.lineOf("rate"), "%s: rate must be above zero", label)
			case r > maxRate:
				p.errorf(f.lineOf("rate"), "%s: rate %s is more than %s", label, s, units.FormatRate(maxRate))
			default:
				l.Params.Rate = r
			}
		}
	}
	delayOK, jitterOK := true, true
	if f.has("delay") {
		l.Params.Delay, delayOK = p.duration(f, "delay", label)
	}
	if f.has("jitter") {
		l.Params.Jitter, jitterOK = p.duration(f, "jitter", label)
	}
	if f.has("reorder") {
		l.Params.Reorder = p.boolean(f.vals["reorder"], label+": reorder")
	}
	if delayOK && jitterOK && l.Params.Jitter > l.Params.Delay && !l.Params.Reorder {
		// Delays are floored at zero, so jitter beyond the delay no longer
		// spreads evenly around it; that is rarely what was meant.
		p.errorf(f.lineOf("jitter"), "%s: jitter %v is more than the delay %v (delays would be cut off at zero); set reorder: true to allow it",
			label, l.Params.Jitter, l.Params.Delay)
	}
	if f.has("loss") {
		l.Params.Loss, _ = p.loss(f.vals["loss"], label+": loss")
	}
	mtuOK := true
	if f.has("mtu") {
		mtuOK = false
		if s, ok := p.scalar(f.vals["mtu"], label+": mtu"); ok {
			m, err := strconv.Atoi(s)
			switch {
			case err != nil:
				p.errorf(f.lineOf("mtu"), "%s: mtu %q: want a whole number of bytes", label, s)
			case m < minMTU || m > maxMTU:
				p.errorf(f.lineOf("mtu"), "%s: mtu %d is out of range [%d, %d]", label, m, minMTU, maxMTU)
			case m < minMTUv6:
				p.errorf(f.lineOf("mtu"), "%s: mtu %d is below %d, the least IPv6 allows (every node has an IPv6 address)", label, m, minMTUv6)
			default:
				l.MTU, mtuOK = m, true
			}
		}
	}
	if f.has("queue") {
		p.queue(f, label, &l, &src, mtuOK)
	}
	if f.has("reservable") {
		if s, ok := p.scalar(f.vals["reservable"], label+": reservable"); ok {
			v, err := units.ParseFraction(s)
			switch {
			case err != nil:
				p.errorf(f.lineOf("reservable"), "%s: reservable: %w", label, err)
			case v == 0:
				p.errorf(f.lineOf("reservable"), "%s: reservable must be above zero (a link nobody may reserve is a routed link with nothing to give)", label)
			default:
				l.Reservable = v
			}
		}
	}
}

// route reads one static route: from node, traffic to a node or to every
// node of a site leaves by link via. References are checked later
// (checkRoutes), once every name is known.
func (p *parser) route(i int, n *yaml.Node) {
	label := fmt.Sprintf("route #%d", i+1)
	f, ok := p.fields(n, label)
	if !ok {
		return
	}
	p.allow(f, label, "node", "to", "via")
	if !p.require(f, label, "node", "to", "via") {
		return
	}
	r := routeSrc{line: f.line, nodeLn: f.lineOf("node"), toLn: f.lineOf("to"), viaLn: f.lineOf("via")}
	var nok, tok, vok bool
	r.node, nok = p.scalar(f.vals["node"], label+": node")
	r.to, tok = p.scalar(f.vals["to"], label+": to")
	r.via, vok = p.scalar(f.vals["via"], label+": via")
	if nok && tok && vok {
		p.routes = append(p.routes, r)
	}
}

// ends reads a link's two ends, a list of two node names.
func (p *parser) ends(n *yaml.Node, label string, src *linkSrc) {
	items, ok := p.sequence(n, label+": ends")
	if !ok {
		return
	}
	if len(items) != 2 {
		p.errorf(deref(n).Line, "%s: ends: want two node names, like [a1, ra], not %d", label, len(items))
		return
	}
	for i, it := range items {
		s, ok := p.scalar(it, label+": ends")
		if !ok {
			return
		}
		src.ends[i], src.endLines[i] = s, deref(it).Line
	}
}

// duration reads a non-negative Go duration such as 25ms.
func (p *parser) duration(f fields, key, label string) (time.Duration, bool) {
	s, ok := p.scalar(f.vals[key], label+": "+key)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.errorf(f.lineOf(key), "%s: %s %q: want a duration like 25ms or 1.5s", label, key, s)
	case d < 0:
		p.errorf(f.lineOf(key), "%s: %s %v is negative", label, key, d)
	case d > maxDelay:
		p.errorf(f.lineOf(key), "%s: %s %v is more than %v", label, key, d, maxDelay)
	default:
		return d, true
	}
	return 0, false
}

func (p *parser) boolean(n *yaml.Node, what string) bool {
	n = deref(n)
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		p.errorf(n.Line, "%s: want true or false, not %s", what, describe(n))
	}
	return b
}

// queue reads a link's queue: a size in bytes ("4MiB") or a bare integer
// meaning that many packets of the link's MTU.
func (p *parser) queue(f fields, label string, l *Link, src *linkSrc, mtuOK bool) {
	s, ok := p.scalar(f.vals["queue"], label+": queue")
	if !ok {
		return
	}
	line := f.lineOf("queue")
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n <= 0 {
			p.errorf(line, "%s: queue of %d packets: want at least one", label, n)
			return
		}
		if n > maxQueue/minMTU {
			p.errorf(line, "%s: queue of %d packets is more than %s", label, n, units.FormatSize(maxQueue))
			return
		}
		src.queueGiven = true
		if mtuOK {
			p.queueBytes(line, label, l, n*int64(l.MTU))
		}
		return
	}
	b, err := units.ParseSize(s)
	if err != nil {
		p.errorf(line, "%s: queue: %w (or a bare number of packets)", label, err)
		return
	}
	src.queueGiven = true
	if mtuOK {
		p.queueBytes(line, label, l, b)
	}
}

func (p *parser) queueBytes(line int, label string, l *Link, b int64) {
	switch {
	case b < int64(l.MTU):
		p.errorf(line, "%s: queue of %d bytes cannot hold one %d-byte packet", label, b, l.MTU)
	case b > maxQueue:
		p.errorf(line, "%s: queue of %s is more than %s", label, units.FormatSize(b), units.FormatSize(maxQueue))
	default:
		l.Queue = b
	}
}

// loss reads a loss model: a fraction or percentage (random loss), or a
// mapping for the other forms (see docs/testbed.md).
func (p *parser) loss(n *yaml.Node, what string) (Loss, bool) {
	n = deref(n)
	if isNull(n) {
		p.errorf(n.Line, "%s: want a fraction like 0.01%% or a mapping like {rate: 1%%, burst: 4}", what)
		return Loss{}, false
	}
	if n.Kind == yaml.ScalarNode {
		v, ok := p.lossRate(n, what)
		if !ok || v == 0 {
			return Loss{}, ok
		}
		return Loss{Model: LossRandom, Rate: v}, true
	}
	f, ok := p.fields(n, what)
	if !ok {
		return Loss{}, false
	}
	model := ""
	if f.has("model") {
		if model, ok = p.scalar(f.vals["model"], what+": model"); !ok {
			return Loss{}, false
		}
	}
	switch model {
	case "":
		// The shortcut: a mean loss rate and, for bursty loss, a mean
		// burst length.
		if !p.allow(f, what, "rate", "burst") || !p.require(f, what, "rate") {
			return Loss{}, false
		}
		rate, ok := p.lossRate(f.vals["rate"], what+": rate")
		if !ok {
			return Loss{}, false
		}
		if !f.has("burst") {
			if rate == 0 {
				return Loss{}, true
			}
			return Loss{Model: LossRandom, Rate: rate}, true
		}
		s, ok := p.scalar(f.vals["burst"], what+": burst")
		if !ok {
			return Loss{}, false
		}
		b, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(b) || math.IsInf(b, 0) || b < 1 {
			p.errorf(f.lineOf("burst"), "%s: burst %q: want the mean number of packets lost in a row, at least 1", what, s)
			return Loss{}, false
		}
		l, err := GilbertElliott(rate, b)
		if err != nil {
			p.errorf(f.lineOf("rate"), "%s: %w", what, err)
			return Loss{}, false
		}
		return l, true
	case LossRandom:
		if !p.allow(f, what, "model", "rate") || !p.require(f, what, "rate") {
			return Loss{}, false
		}
		rate, ok := p.lossRate(f.vals["rate"], what+": rate")
		if !ok || rate == 0 {
			return Loss{}, ok
		}
		return Loss{Model: LossRandom, Rate: rate}, true
	case LossGilbertElliott:
		if !p.allow(f, what, "model", "p", "r", "h", "k") || !p.require(f, what, "p", "r") {
			return Loss{}, false
		}
		l := Loss{Model: LossGilbertElliott, H: 1}
		ok := true
		for _, k := range []struct {
			key string
			v   *float64
		}{{"p", &l.P}, {"r", &l.R}, {"h", &l.H}, {"k", &l.K}} {
			if !f.has(k.key) {
				continue
			}
			s, sok := p.scalar(f.vals[k.key], what+": "+k.key)
			if !sok {
				ok = false
				continue
			}
			v, err := units.ParseFraction(s)
			if err != nil {
				p.errorf(f.lineOf(k.key), "%s: %s: %w", what, k.key, err)
				ok = false
				continue
			}
			*k.v = v
		}
		if !ok {
			return Loss{}, false
		}
		if l.R == 0 {
			p.errorf(f.lineOf("r"), "%s: r is zero: the chain would never leave the bad state", what)
			return Loss{}, false
		}
		if l.MeanLoss() >= 1 {
			p.errorf(f.line, "%s: the mean loss is 100%%: the link would carry nothing", what)
			return Loss{}, false
		}
		return l, true
	default:
		p.errorf(f.lineOf("model"), "%s: unknown model %q (want %s or %s)", what, model, LossRandom, LossGilbertElliott)
		return Loss{}, false
	}
}

// lossRate reads a loss probability, which must stay below 1: a link that
// drops everything is a link that is down, which `link set --down` says.
func (p *parser) lossRate(n *yaml.Node, what string) (float64, bool) {
	s, ok := p.scalar(n, what)
	if !ok {
		return 0, false
	}
	v, err := units.ParseFraction(s)
	switch {
	case err != nil:
		p.errorf(deref(n).Line, "%s: %w", what, err)
	case v >= 1:
		p.errorf(deref(n).Line, "%s: %s would lose every packet: want below 100%% (take the link down instead)", what, s)
	default:
		return v, true
	}
	return 0, false
}

// GilbertElliott returns the two-state loss chain with mean loss rate and
// mean burst length burst (in packets): losses happen only in the bad
// state (H = 1, K = 0), the chain leaves the bad state with R = 1/burst,
// so bad runs last burst packets on average, and enters it with
// P = R·rate/(1−rate), so that the share of time in the bad state,
// P/(P+R), is rate. It fails when rate is not in [0, 1), when burst is
// below 1, or when rate is too high for the burst (P would exceed 1, which
// needs rate ≤ burst/(burst+1)).
func GilbertElliott(rate, burst float64) (Loss, error) {
	switch {
	case !(rate >= 0 && rate < 1):
		return Loss{}, fmt.Errorf("rate %g: want at least 0 and below 1", rate)
	case !(burst >= 1) || math.IsInf(burst, 0):
		return Loss{}, fmt.Errorf("burst %g: want at least 1 packet", burst)
	case rate == 0:
		return Loss{}, nil
	}
	r := 1 / burst
	pr := r * rate / (1 - rate)
	if pr > 1 {
		return Loss{}, fmt.Errorf("rate %g is too high for bursts of %g packets: at most %.4g", rate, burst, burst/(burst+1))
	}
	return Loss{Model: LossGilbertElliott, P: pr, R: r, H: 1, K: 0}, nil
}

// suggest returns the candidate closest to word when it is close enough to
// be a likely typo, or "".
func suggest(word string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD && d < len(c) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt32 // names are short; do not spend time on junk
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
