package topology

// Parsing and validation of the topology file. The format is documented in
// docs/testbed.md ("The topology file"); keep the two in step.
//
// The parser walks yaml.Node trees with internal/yamlfile instead of
// decoding into structs so that every message can name the line it is
// about, and so that unknown keys, duplicate keys and values of the wrong
// kind are errors rather than being silently ignored or zeroed.

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/lightpath/lightpath/internal/units"
	"github.com/lightpath/lightpath/internal/yamlfile"
)

// Error is one problem in a topology file. It prints as "FILE:LINE: what
// is wrong", the form editors and terminals turn into a link to the line.
// Unwrap returns the problem without its location, so that callers can
// match units.ErrSyntax and units.ErrRange with errors.Is.
type Error = yamlfile.Error

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
	p.Reader = yamlfile.Reader{File: name, Errs: &p.errs}
	root := p.Document(data, "topology file", "empty topology file: want sites, nodes and links")
	if root == nil {
		return nil, p.Err()
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
		if err := p.Err(); err != nil {
			return nil, err
		}
	}
	p.t.Routes = computeRoutes(p.t, p.given)
	return p.t, nil
}

// parser holds the state of one Parse.
type parser struct {
	yamlfile.Reader
	t *Topology
	// The problems found (Reader.Errs points here), each an *Error; the
	// later stages count them.
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
func (p *parser) errorf(line int, format string, args ...any) { p.Errorf(line, format, args...) }

// top reads the top-level mapping.
func (p *parser) top(root *yaml.Node) {
	f, ok := p.Fields(root, "topology", false)
	if !ok {
		return
	}
	p.Allow(f, "topology", "sites", "nodes", "links", "routes")
	if f.Has("sites") {
		items, _ := p.Sequence(f.Vals["sites"], "sites")
		for i, it := range items {
			p.site(i, it)
		}
	}
	if f.Has("nodes") {
		items, _ := p.Sequence(f.Vals["nodes"], "nodes")
		for i, it := range items {
			p.node(i, it)
		}
	}
	if f.Has("links") {
		items, _ := p.Sequence(f.Vals["links"], "links")
		for i, it := range items {
			p.link(i, it)
		}
	}
	if f.Has("routes") {
		items, _ := p.Sequence(f.Vals["routes"], "routes")
		for i, it := range items {
			p.route(i, it)
		}
	}
	if len(p.t.Sites) == 0 && len(p.errs) == 0 {
		p.errorf(f.LineOf("sites"), "no sites: a topology needs at least one site, and every node belongs to one")
	}
	if len(p.t.Nodes) == 0 && len(p.errs) == 0 {
		p.errorf(f.LineOf("nodes"), "no nodes: a topology needs at least one node")
	}
}

// name reads the "name" key of an entry, returning a label for messages
// ("node \"a1\"" or "node #3" when the name is unusable).
func (p *parser) name(f yamlfile.Fields, kind string, i, maxLen int) (name, label string) {
	label = fmt.Sprintf("%s #%d", kind, i+1)
	if !p.Require(f, label, "name") {
		return "", label
	}
	s, ok := p.Scalar(f.Vals["name"], label+": name")
	if !ok {
		return "", label
	}
	if err := checkName(kind, s, maxLen); err != nil {
		p.errorf(f.LineOf("name"), "%w", err)
	}
	return s, fmt.Sprintf("%s %q", kind, s)
}

func (p *parser) site(i int, n *yaml.Node) {
	f, ok := p.Fields(n, fmt.Sprintf("site #%d", i+1), false)
	if !ok {
		return
	}
	name, label := p.name(f, "site", i, MaxSiteName)
	p.Allow(f, label, "name")
	p.t.Sites = append(p.t.Sites, Site{Name: name, Line: f.Line})
}

func (p *parser) node(i int, n *yaml.Node) {
	f, ok := p.Fields(n, fmt.Sprintf("node #%d", i+1), false)
	if !ok {
		return
	}
	name, label := p.name(f, "node", i, MaxNodeName)
	p.Allow(f, label, "name", "site", "role", "ipv4", "ipv6")
	node := Node{Name: name, Role: RoleHost, Line: f.Line}
	var src nodeSrc
	if p.Require(f, label, "site") {
		node.Site, _ = p.Scalar(f.Vals["site"], label+": site")
		src.siteLine = f.LineOf("site")
	}
	if f.Has("role") {
		if s, ok := p.Scalar(f.Vals["role"], label+": role"); ok {
			node.Role = s
			if roles := []string{RoleHost, RoleRouter}; !slices.Contains(roles, s) {
				p.errorf(f.LineOf("role"), "%s: unknown role %q (want %s or %s)", label, s, RoleHost, RoleRouter)
			}
		}
	}
	if f.Has("ipv4") {
		src.ipv4Ln = f.LineOf("ipv4")
		node.IPv4 = p.addr(f.Vals["ipv4"], label+": ipv4", false)
	}
	if f.Has("ipv6") {
		src.ipv6Ln = f.LineOf("ipv6")
		node.IPv6 = p.addr(f.Vals["ipv6"], label+": ipv6", true)
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
	s, ok := p.Scalar(n, what)
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
	f, ok := p.Fields(n, fmt.Sprintf("link #%d", i+1), false)
	if !ok {
		return
	}
	name, label := p.name(f, "link", i, MaxLinkName)
	p.Allow(f, label, "name", "ends", "role", "rate", "delay", "jitter", "reorder", "loss", "duplicate", "mtu", "queue", "reservable", "prefer")
	l := Link{
		Name:       name,
		Role:       LinkRouted,
		Params:     Params{Rate: defaultRate},
		MTU:        defaultMTU,
		Reservable: defaultReservable,
		Line:       f.Line,
	}
	var src linkSrc
	defer func() {
		p.t.Links = append(p.t.Links, l)
		p.links = append(p.links, src)
	}()

	if p.Require(f, label, "ends") {
		p.ends(f.Vals["ends"], label, &src)
		l.A.Node, l.B.Node = src.ends[0], src.ends[1]
	}
	if f.Has("role") {
		if s, ok := p.Scalar(f.Vals["role"], label+": role"); ok {
			l.Role = s
			if s != LinkRouted && s != LinkDedicated {
				p.errorf(f.LineOf("role"), "%s: unknown role %q (want %s or %s)", label, s, LinkRouted, LinkDedicated)
			}
		}
	}
	if f.Has("rate") {
		if s, ok := p.Scalar(f.Vals["rate"], label+": rate"); ok {
			r, err := units.ParseRate(s)
			switch {
			case err != nil:
				p.errorf(f.LineOf("rate"), "%s: rate: %w", label, err)
			case r == 0:
				p.errorf(f.LineOf("rate"), "%s: rate must be above zero", label)
			case r > maxRate:
				p.errorf(f.LineOf("rate"), "%s: rate %s is more than %s", label, s, units.FormatRate(maxRate))
			default:
				l.Params.Rate = r
			}
		}
	}
	delayOK, jitterOK := true, true
	if f.Has("delay") {
		l.Params.Delay, delayOK = p.Duration(f, "delay", label, "25ms or 1.5s", maxDelay)
	}
	if f.Has("jitter") {
		l.Params.Jitter, jitterOK = p.Duration(f, "jitter", label, "25ms or 1.5s", maxDelay)
	}
	if f.Has("reorder") {
		l.Params.Reorder = p.boolean(f.Vals["reorder"], label+": reorder")
	}
	if delayOK && jitterOK && l.Params.Jitter > l.Params.Delay && !l.Params.Reorder {
		// Delays are floored at zero, so jitter beyond the delay no longer
		// spreads evenly around it; that is rarely what was meant.
		p.errorf(f.LineOf("jitter"), "%s: jitter %v is more than the delay %v (delays would be cut off at zero); set reorder: true to allow it",
			label, l.Params.Jitter, l.Params.Delay)
	}
	if f.Has("loss") {
		l.Params.Loss, _ = p.loss(f.Vals["loss"], label+": loss")
	}
	if f.Has("duplicate") {
		if s, ok := p.Scalar(f.Vals["duplicate"], label+": duplicate"); ok {
			if v, err := units.ParseFraction(s); err != nil {
				p.errorf(f.LineOf("duplicate"), "%s: duplicate: %w", label, err)
			} else {
				l.Params.Duplicate = v
			}
		}
	}
	mtuOK := true
	if f.Has("mtu") {
		mtuOK = false
		if s, ok := p.Scalar(f.Vals["mtu"], label+": mtu"); ok {
			m, err := strconv.Atoi(s)
			switch {
			case err != nil:
				p.errorf(f.LineOf("mtu"), "%s: mtu %q: want a whole number of bytes", label, s)
			case m < minMTU || m > maxMTU:
				p.errorf(f.LineOf("mtu"), "%s: mtu %d is out of range [%d, %d]", label, m, minMTU, maxMTU)
			case m < minMTUv6:
				p.errorf(f.LineOf("mtu"), "%s: mtu %d is below %d, the least IPv6 allows (every node has an IPv6 address)", label, m, minMTUv6)
			default:
				l.MTU, mtuOK = m, true
			}
		}
	}
	if f.Has("queue") {
		p.queue(f, label, &l, &src, mtuOK)
	}
	if f.Has("reservable") {
		if s, ok := p.Scalar(f.Vals["reservable"], label+": reservable"); ok {
			v, err := units.ParseFraction(s)
			switch {
			case err != nil:
				p.errorf(f.LineOf("reservable"), "%s: reservable: %w", label, err)
			case v == 0:
				p.errorf(f.LineOf("reservable"), "%s: reservable must be above zero (a link nobody may reserve is a routed link with nothing to give)", label)
			default:
				l.Reservable = v
			}
		}
	}
	if f.Has("prefer") {
		v := p.boolean(f.Vals["prefer"], label+": prefer")
		l.Prefer = &v
	}
}

// route reads one static route: from node, traffic to a node or to every
// node of a site leaves by link via. References are checked later
// (checkRoutes), once every name is known.
func (p *parser) route(i int, n *yaml.Node) {
	label := fmt.Sprintf("route #%d", i+1)
	f, ok := p.Fields(n, label, false)
	if !ok {
		return
	}
	p.Allow(f, label, "node", "to", "via")
	if !p.Require(f, label, "node", "to", "via") {
		return
	}
	r := routeSrc{line: f.Line, nodeLn: f.LineOf("node"), toLn: f.LineOf("to"), viaLn: f.LineOf("via")}
	var nok, tok, vok bool
	r.node, nok = p.Scalar(f.Vals["node"], label+": node")
	r.to, tok = p.Scalar(f.Vals["to"], label+": to")
	r.via, vok = p.Scalar(f.Vals["via"], label+": via")
	if nok && tok && vok {
		p.routes = append(p.routes, r)
	}
}

// ends reads a link's two ends, a list of two node names.
func (p *parser) ends(n *yaml.Node, label string, src *linkSrc) {
	items, ok := p.Sequence(n, label+": ends")
	if !ok {
		return
	}
	if len(items) != 2 {
		p.errorf(yamlfile.Deref(n).Line, "%s: ends: want two node names, like [a1, ra], not %d", label, len(items))
		return
	}
	for i, it := range items {
		s, ok := p.Scalar(it, label+": ends")
		if !ok {
			return
		}
		src.ends[i], src.endLines[i] = s, yamlfile.Deref(it).Line
	}
}

func (p *parser) boolean(n *yaml.Node, what string) bool {
	n = yamlfile.Deref(n)
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		p.errorf(n.Line, "%s: want true or false, not %s", what, yamlfile.Describe(n))
	}
	return b
}

// queue reads a link's queue: a size in bytes ("4MiB") or a bare integer
// meaning that many packets of the link's MTU.
func (p *parser) queue(f yamlfile.Fields, label string, l *Link, src *linkSrc, mtuOK bool) {
	s, ok := p.Scalar(f.Vals["queue"], label+": queue")
	if !ok {
		return
	}
	line := f.LineOf("queue")
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
	n = yamlfile.Deref(n)
	if yamlfile.IsNull(n) {
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
	f, ok := p.Fields(n, what, false)
	if !ok {
		return Loss{}, false
	}
	model := ""
	if f.Has("model") {
		if model, ok = p.Scalar(f.Vals["model"], what+": model"); !ok {
			return Loss{}, false
		}
	}
	switch model {
	case "":
		// The shortcut: a mean loss rate and, for bursty loss, a mean
		// burst length.
		if !p.Allow(f, what, "rate", "burst") || !p.Require(f, what, "rate") {
			return Loss{}, false
		}
		rate, ok := p.lossRate(f.Vals["rate"], what+": rate")
		if !ok {
			return Loss{}, false
		}
		if !f.Has("burst") {
			if rate == 0 {
				return Loss{}, true
			}
			return Loss{Model: LossRandom, Rate: rate}, true
		}
		s, ok := p.Scalar(f.Vals["burst"], what+": burst")
		if !ok {
			return Loss{}, false
		}
		b, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(b) || math.IsInf(b, 0) || b < 1 {
			p.errorf(f.LineOf("burst"), "%s: burst %q: want the mean number of packets lost in a row, at least 1", what, s)
			return Loss{}, false
		}
		l, err := GilbertElliott(rate, b)
		if err != nil {
			p.errorf(f.LineOf("rate"), "%s: %w", what, err)
			return Loss{}, false
		}
		return l, true
	case LossRandom:
		if !p.Allow(f, what, "model", "rate") || !p.Require(f, what, "rate") {
			return Loss{}, false
		}
		rate, ok := p.lossRate(f.Vals["rate"], what+": rate")
		if !ok || rate == 0 {
			return Loss{}, ok
		}
		return Loss{Model: LossRandom, Rate: rate}, true
	case LossGilbertElliott:
		if !p.Allow(f, what, "model", "p", "r", "h", "k") || !p.Require(f, what, "p", "r") {
			return Loss{}, false
		}
		l := Loss{Model: LossGilbertElliott, H: 1}
		ok := true
		for _, k := range []struct {
			key string
			v   *float64
		}{{"p", &l.P}, {"r", &l.R}, {"h", &l.H}, {"k", &l.K}} {
			if !f.Has(k.key) {
				continue
			}
			s, sok := p.Scalar(f.Vals[k.key], what+": "+k.key)
			if !sok {
				ok = false
				continue
			}
			v, err := units.ParseFraction(s)
			if err != nil {
				p.errorf(f.LineOf(k.key), "%s: %s: %w", what, k.key, err)
				ok = false
				continue
			}
			*k.v = v
		}
		if !ok {
			return Loss{}, false
		}
		if l.R == 0 {
			p.errorf(f.LineOf("r"), "%s: r is zero: the chain would never leave the bad state", what)
			return Loss{}, false
		}
		if l.MeanLoss() >= 1 {
			p.errorf(f.Line, "%s: the mean loss is 100%%: the link would carry nothing", what)
			return Loss{}, false
		}
		return l, true
	default:
		p.errorf(f.LineOf("model"), "%s: unknown model %q (want %s or %s)", what, model, LossRandom, LossGilbertElliott)
		return Loss{}, false
	}
}

// lossRate reads a loss probability, which must stay below 1: a link that
// drops everything is a link that is down, which `link set --down` says.
func (p *parser) lossRate(n *yaml.Node, what string) (float64, bool) {
	s, ok := p.Scalar(n, what)
	if !ok {
		return 0, false
	}
	v, err := units.ParseFraction(s)
	switch {
	case err != nil:
		p.errorf(yamlfile.Deref(n).Line, "%s: %w", what, err)
	case v >= 1:
		p.errorf(yamlfile.Deref(n).Line, "%s: %s would lose every packet: want below 100%% (take the link down instead)", what, s)
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
func suggest(word string, candidates []string) string { return yamlfile.Suggest(word, candidates) }
