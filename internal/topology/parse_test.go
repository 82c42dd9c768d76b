package topology

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/units"
)

// loadExample parses one of the files in examples/.
func loadExample(t *testing.T, name string) *Topology {
	t.Helper()
	topo, err := Load(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatalf("Load %s: %v", name, err)
	}
	return topo
}

func TestExamplesParse(t *testing.T) {
	for _, tc := range []struct {
		file                 string
		sites, nodes, links  int
		routers, dedicated   int
		wantRoutesPerNodeMin int
	}{
		{"two-site.yaml", 2, 6, 6, 2, 1, 10},
		{"triangle.yaml", 3, 8, 9, 3, 1, 14},
		{"service.yaml", 2, 8, 8, 2, 1, 14},
		{"shared-wan.yaml", 2, 8, 8, 2, 1, 14},
	} {
		t.Run(tc.file, func(t *testing.T) {
			topo := loadExample(t, tc.file)
			if len(topo.Sites) != tc.sites || len(topo.Nodes) != tc.nodes || len(topo.Links) != tc.links {
				t.Errorf("got %d sites, %d nodes, %d links; want %d, %d, %d",
					len(topo.Sites), len(topo.Nodes), len(topo.Links), tc.sites, tc.nodes, tc.links)
			}
			routers, dedicated := 0, 0
			for _, n := range topo.Nodes {
				if n.Role == RoleRouter {
					routers++
				}
			}
			for _, l := range topo.Links {
				if l.Role == LinkDedicated {
					dedicated++
				}
			}
			if routers != tc.routers || dedicated != tc.dedicated {
				t.Errorf("got %d routers and %d dedicated links, want %d and %d", routers, dedicated, tc.routers, tc.dedicated)
			}
			perNode := map[string]int{}
			for _, r := range topo.Routes {
				perNode[r.Node]++
			}
			for _, n := range topo.Nodes {
				// Two families × (other nodes + links the node is not on).
				if perNode[n.Name] < tc.wantRoutesPerNodeMin {
					t.Errorf("node %s has %d routes, want at least %d", n.Name, perNode[n.Name], tc.wantRoutesPerNodeMin)
				}
			}
		})
	}
}

func TestTwoSiteValues(t *testing.T) {
	topo := loadExample(t, "two-site.yaml")
	for _, tc := range []struct {
		link       string
		rate       uint64
		delay      time.Duration
		mtu        int
		queue      int64
		role       string
		loss       Loss
		reservable float64
	}{
		// No delay: a millisecond at 10 Gbit/s.
		{"a1-ra", 10e9, 0, 9000, 1_250_000, LinkRouted, Loss{}, 0.9},
		// Merged from the anchor.
		{"b2-rb", 10e9, 0, 9000, 1_250_000, LinkRouted, Loss{}, 0.9},
		// One BDP: 1 Gbit/s / 8 × 50 ms.
		{"wan", 1e9, 25 * time.Millisecond, 1500, 6_250_000, LinkRouted, Loss{Model: LossRandom, Rate: 0.0001}, 0.9},
		{"dedicated", 2e9, 25 * time.Millisecond, 9000, 12_500_000, LinkDedicated, Loss{}, 0.9},
	} {
		t.Run(tc.link, func(t *testing.T) {
			l, ok := topo.Link(tc.link)
			if !ok {
				t.Fatalf("no link %q", tc.link)
			}
			if l.Params.Rate != tc.rate || l.Params.Delay != tc.delay || l.MTU != tc.mtu || l.Queue != tc.queue ||
				l.Role != tc.role || l.Reservable != tc.reservable {
				t.Errorf("got rate %d delay %v mtu %d queue %d role %s reservable %g; want %d %v %d %d %s %g",
					l.Params.Rate, l.Params.Delay, l.MTU, l.Queue, l.Role, l.Reservable,
					tc.rate, tc.delay, tc.mtu, tc.queue, tc.role, tc.reservable)
			}
			if l.Params.Loss.Model != tc.loss.Model || math.Abs(l.Params.Loss.Rate-tc.loss.Rate) > 1e-12 {
				t.Errorf("loss %+v, want %+v", l.Params.Loss, tc.loss)
			}
		})
	}
}

// TestSharedWANValues: examples/shared-wan.yaml keeps the shape its
// users and the benchmark rely on: every access link faster than both
// inter-site paths together, and the circuit twice the routed path.
func TestSharedWANValues(t *testing.T) {
	topo := loadExample(t, "shared-wan.yaml")
	for _, tc := range []struct {
		link string
		rate uint64
		role string
	}{
		{"a1-ra", 4e9, LinkRouted}, {"a2-ra", 4e9, LinkRouted}, {"a3-ra", 4e9, LinkRouted},
		{"b1-rb", 4e9, LinkRouted}, {"b2-rb", 4e9, LinkRouted}, {"b3-rb", 4e9, LinkRouted},
		{"wan", 500e6, LinkRouted}, {"dedicated", 1e9, LinkDedicated},
	} {
		l, ok := topo.Link(tc.link)
		if !ok {
			t.Errorf("no link %q", tc.link)
			continue
		}
		if l.Params.Rate != tc.rate || l.Role != tc.role {
			t.Errorf("%s: rate %d, role %s; want %d, %s", tc.link, l.Params.Rate, l.Role, tc.rate, tc.role)
		}
	}
}

// base is a small valid topology; cases append link keys at line 10.
const base = `sites:
  - name: a
  - name: b
nodes:
  - {name: r1, site: a, role: router}
  - {name: r2, site: b, role: router}
links:
  - name: l1
    ends: [r1, r2]
`

func TestParseValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra string // link keys appended to base
		check func(*Link) bool
	}{
		{"defaults", "", func(l *Link) bool {
			return l.Params.Rate == 10e9 && l.MTU == 1500 && l.Reservable == 0.9 && l.Role == LinkRouted &&
				l.Queue == 1_250_000 && l.Params.Loss == (Loss{})
		}},
		{"rate words", "    rate: 10Gbit\n", func(l *Link) bool { return l.Params.Rate == 10e9 }},
		{"rate number", "    rate: 500000000\n", func(l *Link) bool { return l.Params.Rate == 500e6 }},
		{"loss percent", "    loss: 0.01%\n", func(l *Link) bool { return l.Params.Loss.Model == LossRandom && near(l.Params.Loss.Rate, 1e-4) }},
		{"loss fraction", "    loss: 0.0001\n", func(l *Link) bool { return l.Params.Loss.Model == LossRandom && near(l.Params.Loss.Rate, 1e-4) }},
		{"loss zero", "    loss: 0\n", func(l *Link) bool { return l.Params.Loss == (Loss{}) }},
		{"loss random map", "    loss: {model: random, rate: 1%}\n", func(l *Link) bool { return l.Params.Loss == Loss{Model: LossRandom, Rate: 0.01} }},
		{"loss rate only", "    loss: {rate: 1%}\n", func(l *Link) bool { return l.Params.Loss == Loss{Model: LossRandom, Rate: 0.01} }},
		{"loss gilbert-elliott", "    loss: {model: gilbert-elliott, p: 0.001, r: 0.2}\n", func(l *Link) bool {
			return l.Params.Loss == Loss{Model: LossGilbertElliott, P: 0.001, R: 0.2, H: 1, K: 0}
		}},
		{"loss gilbert-elliott full", "    loss: {model: gilbert-elliott, p: 0.001, r: 0.2, h: 0.5, k: 0.0001}\n", func(l *Link) bool {
			return l.Params.Loss == Loss{Model: LossGilbertElliott, P: 0.001, R: 0.2, H: 0.5, K: 0.0001}
		}},
		{"loss burst", "    loss: {rate: 1%, burst: 4}\n", func(l *Link) bool {
			return l.Params.Loss.Model == LossGilbertElliott && near(l.Params.Loss.R, 0.25) && near(l.Params.Loss.P, 0.25*0.01/0.99)
		}},
		{"duplicate percent", "    duplicate: 0.5%\n", func(l *Link) bool { return near(l.Params.Duplicate, 0.005) }},
		{"duplicate fraction", "    duplicate: 0.02\n", func(l *Link) bool { return near(l.Params.Duplicate, 0.02) }},
		{"duplicate zero", "    duplicate: 0\n", func(l *Link) bool { return l.Params.Duplicate == 0 }},
		{"duplicate all", "    duplicate: 100%\n", func(l *Link) bool { return l.Params.Duplicate == 1 }},
		{"duplicate with loss", "    loss: 1%\n    duplicate: 1%\n", func(l *Link) bool {
			return near(l.Params.Duplicate, 0.01) && l.Params.Loss == Loss{Model: LossRandom, Rate: 0.01}
		}},
		{"no duplicate by default", "    loss: 1%\n", func(l *Link) bool { return l.Params.Duplicate == 0 }},
		{"queue bytes", "    queue: 4MiB\n", func(l *Link) bool { return l.Queue == 4<<20 }},
		{"queue packets", "    mtu: 9000\n    queue: 100\n", func(l *Link) bool { return l.Queue == 900_000 }},
		{"queue packets before mtu", "    queue: 100\n    mtu: 9000\n", func(l *Link) bool { return l.Queue == 900_000 }},
		{"queue default bdp", "    rate: 1G\n    delay: 10ms\n", func(l *Link) bool { return l.Queue == 2_500_000 }},
		{"jitter with reorder", "    delay: 1ms\n    jitter: 5ms\n    reorder: true\n", func(l *Link) bool {
			return l.Params.Jitter == 5*time.Millisecond && l.Params.Reorder
		}},
		{"jitter equal delay", "    delay: 5ms\n    jitter: 5ms\n", func(l *Link) bool { return l.Params.Jitter == 5*time.Millisecond }},
		{"reservable percent", "    reservable: 50%\n", func(l *Link) bool { return l.Reservable == 0.5 }},
		{"mtu jumbo", "    mtu: 65535\n", func(l *Link) bool { return l.MTU == 65535 }},
		{"dedicated", "    role: dedicated\n", func(l *Link) bool { return l.Role == LinkDedicated }},
		{"prefer unset", "", func(l *Link) bool { return l.Prefer == nil }},
		{"prefer true", "    prefer: true\n", func(l *Link) bool { return l.Prefer != nil && *l.Prefer && l.Role == LinkRouted }},
		{"dedicated, prefer false", "    role: dedicated\n    prefer: false\n", func(l *Link) bool {
			return l.Prefer != nil && !*l.Prefer && l.Role == LinkDedicated
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := Parse("t.yaml", []byte(base+tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			if l := &topo.Links[0]; !tc.check(l) {
				t.Errorf("unexpected link: %+v", *l)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestParseErrors(t *testing.T) {
	twoComponents := `sites: [{name: a}]
nodes:
  - {name: r1, site: a, role: router}
  - {name: r2, site: a, role: router}
  - {name: r3, site: a, role: router}
  - {name: r4, site: a, role: router}
links:
  - {name: x, ends: [r1, r2]}
  - {name: y, ends: [r3, r4]}
`
	hostInMiddle := `sites: [{name: a}]
nodes:
  - {name: h1, site: a}
  - {name: h2, site: a}
  - {name: h3, site: a}
links:
  - {name: x, ends: [h1, h2]}
  - {name: y, ends: [h2, h3]}
`
	for _, tc := range []struct {
		name   string
		in     string
		line   string // ":N:"
		phrase string
	}{
		{"empty file", "", ":1:", "empty topology file"},
		{"only comments", "# nothing here\n\n", ":1:", "empty topology file"},
		{"null document", "---\n", ":1:", "empty topology file"},
		{"not a mapping", "- a\n- b\n", ":1:", "want a mapping"},
		{"bad YAML syntax", "sites:\n  - name: a\n nodes: x\n", ":2:", "YAML syntax"},
		{"two documents", base + "---\nsites: []\n", ":10:", "second YAML document"},
		{"no nodes", "sites: [{name: a}]\nnodes: []\n", ":2:", "no nodes"},
		{"no sites", "nodes: [{name: r1, site: a}]\n", ":1:", "no sites"},
		{"unknown top key", base + "extra: 1\n", ":10:", `unknown key "extra" (allowed: sites, nodes, links, routes)`},
		{"no routes", base + "routes: []\n", "", ""},
		{"routes not a list", base + "routes: {node: r1}\n", ":10:", "routes: want a list, not a mapping"},
		{"route not a mapping", base + "routes:\n  - r1\n", ":11:", "route #1: want a mapping"},
		{"route given", base + "routes:\n  - {node: r1, to: r2, via: l1}\n", "", ""},
		{"route to a site", base + "routes:\n  - {node: r1, to: b, via: l1}\n", "", ""},
		{"unknown link key", base + "    rat: 1G\n", ":10:", `unknown key "rat" (allowed: name, ends, role, rate`},
		{"unknown key suggestion", base + "    rat: 1G\n", ":10:", `did you mean "rate"?`},
		{"unknown node key", strings.Replace(base, "role: router}", "rol: router}", 1), ":5:", `node "r1": unknown key "rol"`},
		{"duplicate key", base + "    rate: 1G\n    rate: 2G\n", ":11:", `duplicate key "rate" (first at line 10)`},
		{"unknown node", strings.Replace(base, "[r1, r2]", "[r1, r3]", 1), ":9:", `link "l1": unknown node "r3"`},
		{"unknown node suggestion", strings.Replace(base, "[r1, r2]", "[r1, r3]", 1), ":9:", `did you mean "r1"?`},
		{"self loop", strings.Replace(base, "[r1, r2]", "[r1, r1]", 1), ":9:", "both ends are node"},
		{"three ends", strings.Replace(base, "[r1, r2]", "[r1, r2, r1]", 1), ":9:", "want two node names"},
		{"missing ends", strings.Replace(base, "    ends: [r1, r2]\n", "", 1), ":8:", `missing key "ends"`},
		{"unknown site", strings.Replace(base, "site: b", "site: c", 1), ":6:", `unknown site "c"`},
		{"duplicate node", strings.Replace(base, "name: r2, site", "name: r1, site", 1), ":6:", `duplicate node name "r1" (first at line 5)`},
		{"duplicate site", strings.Replace(base, "name: b", "name: a", 1) + "", ":3:", `duplicate site name "a"`},
		{"duplicate link", base + "  - {name: l1, ends: [r2, r1]}\n", ":10:", `duplicate link name "l1"`},
		{"bad node name", strings.Replace(base, "name: r1, site", "name: R1, site", 1), ":5:", "lower-case letters"},
		{"long node name", strings.Replace(base, "r1", strings.Repeat("n", 25), -1), ":5:", "at most 24"},
		{"long link name", strings.Replace(base, "name: l1", "name: "+strings.Repeat("l", 33), 1), ":8:", "at most 32"},
		{"unknown node role", strings.Replace(base, "role: router", "role: switch", 1), ":5:", `unknown role "switch" (want host or router)`},
		{"unknown link role", base + "    role: shared\n", ":10:", `unknown role "shared" (want routed or dedicated)`},
		{"bad rate", base + "    rate: 10GB\n", ":10:", "invalid rate"},
		{"bad rate word", base + "    rate: fast\n", ":10:", "invalid rate"},
		{"zero rate", base + "    rate: 0\n", ":10:", "above zero"},
		{"bad loss", base + "    loss: lots\n", ":10:", "invalid fraction"},
		{"loss 100%", base + "    loss: 100%\n", ":10:", "want below 100%"},
		{"loss 1", base + "    loss: 1\n", ":10:", "want below 100%"},
		{"loss above 1", base + "    loss: 5\n", ":10:", "did you mean 5%?"},
		{"loss unknown model", base + "    loss: {model: bursty, rate: 1%}\n", ":10:", `unknown model "bursty"`},
		{"loss model key", base + "    loss: {model: random, p: 1%}\n", ":10:", `unknown key "p"`},
		{"loss GE missing r", base + "    loss: {model: gilbert-elliott, p: 1%}\n", ":10:", `missing key "r"`},
		{"loss GE r zero", base + "    loss: {model: gilbert-elliott, p: 1%, r: 0}\n", ":10:", "never leave the bad state"},
		{"loss burst below 1", base + "    loss: {rate: 1%, burst: 0.5}\n", ":10:", "at least 1"},
		{"loss burst too lossy", base + "    loss: {rate: 60%, burst: 1}\n", ":10:", "too high for bursts"},
		{"loss null", base + "    loss:\n", ":10:", "want a fraction"},
		{"bad duplicate", base + "    duplicate: often\n", ":10:", `link "l1": duplicate: invalid fraction`},
		{"duplicate above 100%", base + "    duplicate: 150%\n", ":10:", "duplicate"},
		{"duplicate above 1", base + "    duplicate: 5\n", ":10:", "did you mean 5%?"},
		{"negative duplicate", base + "    duplicate: -1%\n", ":10:", "duplicate"},
		{"duplicate line", base + "    loss: 1%\n    duplicate: x\n", ":11:", "duplicate"},
		{"duplicate null", base + "    duplicate:\n", ":10:", "duplicate"},
		{"duplicate list", base + "    duplicate: [1%]\n", ":10:", "duplicate"},
		{"duplicate typo", base + "    duplicat: 1%\n", ":10:", `did you mean "duplicate"?`},
		{"mtu too big", base + "    mtu: 70000\n", ":10:", "out of range [576, 65535]"},
		{"mtu too small", base + "    mtu: 500\n", ":10:", "out of range [576, 65535]"},
		{"mtu below ipv6", base + "    mtu: 1000\n", ":10:", "IPv6"},
		{"mtu not a number", base + "    mtu: 1.5k\n", ":10:", "whole number"},
		{"bad delay", base + "    delay: 25\n", ":10:", "want a duration"},
		{"negative delay", base + "    delay: -5ms\n", ":10:", "negative"},
		{"huge delay", base + "    delay: 1h\n", ":10:", "more than 10s"},
		{"jitter above delay", base + "    delay: 5ms\n    jitter: 10ms\n", ":11:", "set reorder: true"},
		{"jitter without delay", base + "    jitter: 1ms\n", ":10:", "more than the delay"},
		{"reorder not bool", base + "    reorder: yes\n", ":10:", "want true or false"},
		{"prefer not bool", base + "    prefer: dedicated\n", ":10:", "prefer: want true or false"},
		{"queue too small", base + "    queue: 100B\n", ":10:", "cannot hold one"},
		{"queue zero packets", base + "    queue: 0\n", ":10:", "at least one"},
		{"queue bad", base + "    queue: big\n", ":10:", "invalid size"},
		{"queue too big", base + "    queue: 2GiB\n", ":10:", "more than"},
		{"reservable zero", base + "    reservable: 0\n", ":10:", "above zero"},
		{"reservable above 1", base + "    reservable: 1.5\n", ":10:", "invalid fraction"},
		{"rate list", base + "    rate: [1G]\n", ":10:", "want a single value"},
		{"link not mapping", base + "  - just-a-name\n", ":10:", "want a mapping"},
		{"node no links", base + "  - {name: l2, ends: [r1, r2]}\n", "", ""}, // valid: parallel links
		{"isolated node", strings.Replace(base, "links:", "  - {name: r3, site: b}\nlinks:", 1), ":7:", `node "r3" has no links`},
		{"disconnected graph", twoComponents, ":3:", `node "r1" cannot reach node "r3"`},
		{"host does not forward", hostInMiddle, ":3:", "only routers forward"},
		{"ipv4 outside range", strings.Replace(base, "role: router}", "role: router, ipv4: 10.0.0.1}", 1), ":5:", "outside 198.18.0.0/15"},
		{"ipv4 in link range", strings.Replace(base, "role: router}", "role: router, ipv4: 198.19.0.1}", 1), ":5:", "link addresses use"},
		{"ipv4 not v4", strings.Replace(base, "role: router}", "role: router, ipv4: '2001:2::1'}", 1), ":5:", "not an IPv4 address"},
		{"ipv6 outside range", strings.Replace(base, "role: router}", "role: router, ipv6: '2001:db8::1'}", 1), ":5:", "outside 2001:2::/48"},
		{"ipv4 duplicate", strings.Replace(base, "site: b, role: router}", "site: b, role: router, ipv4: 198.18.1.1}", 1), ":6:", `node "r1"'s address already`},
		{"ipv4 takes a default", strings.Replace(base, "site: a, role: router}", "site: a, role: router, ipv4: 198.18.2.1}", 1), ":5:", `node "r2" gets by default`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.in))
			if tc.line == "" {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error with %q, got none", tc.phrase)
			}
			msg := err.Error()
			if !strings.Contains(msg, "t.yaml"+tc.line) || !strings.Contains(msg, tc.phrase) {
				t.Errorf("error %q\nwant t.yaml%s and %q", msg, tc.line, tc.phrase)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Errorf("error %T is not an *Error", err)
			}
		})
	}
}

func TestErrorUnwraps(t *testing.T) {
	_, err := Parse("t.yaml", []byte(base+"    rate: 10GB\n"))
	if !errors.Is(err, units.ErrSyntax) {
		t.Errorf("errors.Is(%v, units.ErrSyntax) = false", err)
	}
}

func TestManyErrors(t *testing.T) {
	// Several independent problems are reported together, in file order.
	in := base + "    rate: fast\n    mtu: 9\n    delay: soon\n"
	_, err := Parse("t.yaml", []byte(in))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	i, j, k := strings.Index(msg, "t.yaml:10:"), strings.Index(msg, "t.yaml:11:"), strings.Index(msg, "t.yaml:12:")
	if i < 0 || j < i || k < j {
		t.Errorf("want lines 10, 11 and 12 in order, got:\n%s", msg)
	}
}

func TestGilbertElliott(t *testing.T) {
	for _, tc := range []struct {
		rate, burst float64
		wantErr     string
	}{
		{0.01, 4, ""},
		{0.0001, 1, ""},
		{0.3, 10, ""},
		{0.5, 1, ""}, // P = 1: the largest rate for bursts of one
		{0, 3, ""},
		{0.6, 1, "too high"},
		{1, 4, "below 1"},
		{-0.1, 4, "below 1"},
		{0.01, 0.5, "at least 1"},
		{0.01, math.NaN(), "at least 1"},
	} {
		l, err := GilbertElliott(tc.rate, tc.burst)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("GilbertElliott(%g, %g) error %v, want %q", tc.rate, tc.burst, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("GilbertElliott(%g, %g): %v", tc.rate, tc.burst, err)
			continue
		}
		if tc.rate == 0 {
			if l != (Loss{}) {
				t.Errorf("GilbertElliott(0, %g) = %+v, want no loss", tc.burst, l)
			}
			continue
		}
		// The mean loss is the rate; the mean bad run, 1/R, is the burst.
		if !near(l.MeanLoss(), tc.rate) || !near(1/l.R, tc.burst) || l.H != 1 || l.K != 0 || l.Model != LossGilbertElliott {
			t.Errorf("GilbertElliott(%g, %g) = %+v: mean %g, burst %g", tc.rate, tc.burst, l, l.MeanLoss(), 1/l.R)
		}
	}
}

func TestLoadMissing(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "read topology") {
		t.Errorf("Load of a missing file: %v", err)
	}
}
