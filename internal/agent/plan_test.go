package agent

import (
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/topology"
)

func loadTopo(t *testing.T, file string) *topology.Topology {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := topology.Parse(file, data)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// resv is a reservation live from t0 to t0+1h along the given hops
// ("link:from>to").
func resv(id, from, to string, dscp uint8, bw uint64, spec string, hops ...string) reserve.Reservation {
	r := reserve.Reservation{ID: id, From: from, To: to, DSCP: dscp, Bandwidth: bw, State: reserve.StateActive,
		Start: t0, End: t0.Add(time.Hour)}
	if spec != "" {
		fs, err := reserve.ParseFlowSpec(spec)
		if err != nil {
			panic(err)
		}
		r.FlowSpec = fs
	}
	for _, h := range hops {
		link, ends, _ := strings.Cut(h, ":")
		f, to, _ := strings.Cut(ends, ">")
		r.Path = append(r.Path, reserve.PathHop{Link: link, From: f, To: to})
	}
	return r
}

// summary prints a plan one object a line, sorted, for readable tables.
func summary(p Plan) []string {
	var out []string
	fam := func(v6 bool) string {
		if v6 {
			return "ip6"
		}
		return "ip"
	}
	for _, c := range p.Classes {
		out = append(out, fmt.Sprintf("class %s 1:%x prio %d rate %dM ceil %dM", c.Dev, c.Minor, c.Prio, c.Rate/1e6, c.Ceil/1e6))
	}
	for _, f := range p.Filters {
		l := fmt.Sprintf("filter %s %s 1:%x", f.Dev, fam(f.IPv6), f.Minor)
		if f.SPort != 0 {
			l += fmt.Sprintf(" udp sport %d", f.SPort)
		}
		if f.DPort != 0 {
			l += fmt.Sprintf(" udp dport %d", f.DPort)
		}
		out = append(out, l)
	}
	for _, r := range p.Routes {
		s := fmt.Sprintf("route %d %s via %s dev %s", r.Table, r.Dst, r.Via, r.Dev)
		if r.Src.IsValid() {
			s += " src " + r.Src.String()
		}
		if r.MTU != 0 {
			s += fmt.Sprintf(" mtu %d", r.MTU)
		}
		out = append(out, s)
	}
	for _, r := range p.Rules {
		out = append(out, "rule "+fam(r.IPv6)+" "+ruleString(r))
	}
	for _, r := range p.Nft {
		s := "nft " + r.Chain + " " + fam(r.IPv6)
		if r.Flow.Proto != "" {
			s += " " + r.Flow.String()
		}
		if r.DSCP != 0 {
			s += fmt.Sprintf(" dscp %d", r.DSCP)
		}
		switch {
		case r.SetDSCP != 0:
			s += fmt.Sprintf(" set dscp %d", r.SetDSCP)
		case r.SetMark != 0:
			s += fmt.Sprintf(" set mark %#x", r.SetMark)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// ruleString prints an ip rule as ip-rule(8) would take it.
func ruleString(r IPRule) string {
	s := fmt.Sprint(r.Priority)
	if r.Mark != 0 {
		s += fmt.Sprintf(" fwmark %#x", r.Mark)
	}
	if r.Dst.IsValid() {
		s += " to " + r.Dst.String()
	}
	switch r.Proto {
	case 0:
	case protoTCP:
		s += " ipproto tcp"
	case protoUDP:
		s += " ipproto udp"
	default:
		s += fmt.Sprintf(" ipproto %d", r.Proto)
	}
	if !r.SPort.IsZero() {
		s += " sport " + r.SPort.String()
	}
	if !r.DPort.IsZero() {
		s += " dport " + r.DPort.String()
	}
	if r.ByUID {
		s += fmt.Sprintf(" uidrange %d-%d", r.UID, r.UID)
	}
	return s + fmt.Sprintf(" lookup %d", r.Table)
}

func TestDesired(t *testing.T) {
	twoSite := loadTopo(t, "../../examples/two-site.yaml")
	triangle := loadTopo(t, "../../examples/triangle.yaml")
	dualHomed, err := topology.Parse("dual.yaml", []byte(`
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: h, site: s1}
  - {name: r1, site: s1, role: router}
  - {name: r2, site: s2, role: router}
  - {name: x, site: s2}
links:
  - {name: h-r1, ends: [h, r1]}
  - {name: r1-r2, ends: [r1, r2], mtu: 1500}
  - {name: r2-x, ends: [r2, x]}
  - {name: h-r2, ends: [h, r2], role: dedicated, rate: 1G}
`))
	if err != nil {
		t.Fatal(err)
	}

	viaDedicated := resv("r1", "a1", "b1", 10, 500e6, "tcp 198.18.1.1 > 198.18.2.1:7070",
		"a1-ra:a1>ra", "dedicated:ra>rb", "b1-rb:rb>b1")
	held, ended, early, noDSCP, finished := viaDedicated, viaDedicated, viaDedicated, viaDedicated, viaDedicated
	held.State = reserve.StateHeld
	ended.Start, ended.End = t0.Add(-2*time.Hour), t0 // half open: over at t0
	early.Start = t0.Add(time.Second)
	noDSCP.DSCP = 0
	finished.State = reserve.StateFinished
	degraded := viaDedicated
	degraded.Degraded, degraded.DegradedReason = true, "link dedicated down"
	many := resv("r5", "a1", "b1", 10, 500e6, "tcp 198.18.1.1 > 198.18.2.1:7070 uid 1000, any 198.18.1.1 > 198.18.2.1 cgroup lightpath/run-1, "+
		"udp 198.18.1.1:5000-5010 > 198.18.2.0/24, tcp [2001:2:0:1::1] > [2001:2:0:2::1]:7000-7010 uid 0 cgroup a/b/c",
		"a1-ra:a1>ra", "dedicated:ra>rb", "b1-rb:rb>b1")
	second := resv("r2", "a2", "b2", 12, 1e9, "udp 198.18.1.2 > 198.18.2.2:9000-9010",
		"a2-ra:a2>ra", "dedicated:ra>rb", "b2-rb:rb>b2")

	classes := func(dev string, minor, rate, ceil string) []string {
		return []string{"class " + dev + " " + minor + " prio 1 rate " + rate + " ceil " + ceil,
			"filter " + dev + " ip " + minor, "filter " + dev + " ip6 " + minor}
	}
	steerIn := func(dscp int) []string {
		return []string{fmt.Sprintf("nft steer-in ip dscp %d set mark %#x", dscp, 0x100+dscp),
			fmt.Sprintf("nft steer-in ip6 dscp %d set mark %#x", dscp, 0x100+dscp)}
	}
	// Wherever a mark is steered, the probes are too (by their port).
	rules := func(dscp int) []string {
		var out []string
		for _, fam := range []string{"ip", "ip6"} {
			for _, sel := range []string{"", " ipproto udp dport 7471", " ipproto udp sport 7471"} {
				prio := 10000 + dscp
				if sel != "" {
					prio -= 64
				}
				out = append(out, fmt.Sprintf("rule %s %d fwmark %#x%s lookup %d", fam, prio, 0x100+dscp, sel, 100+dscp))
			}
		}
		return out
	}
	// The probes' class on every egress of the path, either way.
	probe := func(devs ...string) []string {
		var out []string
		for _, dev := range devs {
			out = append(out, "class "+dev+" 1:ff prio 0 rate 1M ceil 1M")
			for _, fam := range []string{"ip", "ip6"} {
				for _, m := range []string{"sport", "dport"} {
					out = append(out, "filter "+dev+" "+fam+" 1:ff udp "+m+" 7471")
				}
			}
		}
		return out
	}
	replace := func(l []string, old, new string) []string {
		var out []string
		for _, x := range l {
			out = append(out, strings.Replace(x, old, new, 1))
		}
		return out
	}
	cat := func(ls ...[]string) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l...)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	ra := cat(probe("dedicated", "a1-ra"), classes("dedicated", "1:10a", "500M", "2000M"), steerIn(10), rules(10), []string{
		"route 110 198.18.2.1/32 via 198.19.0.22 dev dedicated",
		"route 110 2001:2:0:2::1/128 via 2001:2:0:8006::2 dev dedicated",
		"route 110 198.18.1.1/32 via 198.19.0.1 dev a1-ra",
		"route 110 2001:2:0:1::1/128 via 2001:2:0:8001::1 dev a1-ra",
	})
	rb := cat(probe("b1-rb", "dedicated"), classes("b1-rb", "1:10a", "500M", "10000M"), steerIn(10), rules(10), []string{
		"route 110 198.18.2.1/32 via 198.19.0.9 dev b1-rb",
		"route 110 2001:2:0:2::1/128 via 2001:2:0:8003::1 dev b1-rb",
		"route 110 198.18.1.1/32 via 198.19.0.21 dev dedicated",
		"route 110 2001:2:0:1::1/128 via 2001:2:0:8006::1 dev dedicated",
	})
	// The end hosts: the flows' packets get the DSCP, and the sockets'
	// own route lookups (by the flow's selectors, or a socket's mark) a
	// route of the reserved path's MTU: 9000 all along.
	a1 := cat(probe("a1-ra"), classes("a1-ra", "1:10a", "500M", "10000M"), rules(10), []string{
		"nft mark ip tcp 198.18.1.1 > 198.18.2.1:7070 set dscp 10",
		"route 110 198.18.2.1/32 via 198.19.0.2 dev a1-ra src 198.18.1.1 mtu 9000",
		"route 110 2001:2:0:2::1/128 via 2001:2:0:8001::2 dev a1-ra src 2001:2:0:1::1 mtu 9000",
		"rule ip 10010 to 198.18.2.1/32 ipproto tcp dport 7070 lookup 110",
	})
	b1 := cat(probe("b1-rb"), rules(10), []string{
		"nft mark ip tcp 198.18.2.1:7070 > 198.18.1.1 set dscp 10",
		"route 110 198.18.1.1/32 via 198.19.0.10 dev b1-rb src 198.18.2.1 mtu 9000",
		"route 110 2001:2:0:1::1/128 via 2001:2:0:8003::2 dev b1-rb src 2001:2:0:2::1 mtu 9000",
		"rule ip 10010 to 198.18.1.1/32 ipproto tcp sport 7070 lookup 110",
	})

	for _, tc := range []struct {
		name string
		topo *topology.Topology
		rs   []reserve.Reservation
		want map[string][]string // by node; nodes not named get nothing
	}{
		{"a1 to b1 via dedicated", twoSite, []reserve.Reservation{viaDedicated},
			map[string][]string{"a1": a1, "ra": ra, "rb": rb, "b1": b1}},
		{"held", twoSite, []reserve.Reservation{held}, nil},
		{"ended", twoSite, []reserve.Reservation{ended}, nil},
		{"not started", twoSite, []reserve.Reservation{early}, nil},
		{"finished", twoSite, []reserve.Reservation{finished}, nil},
		{"no DSCP", twoSite, []reserve.Reservation{noDSCP}, nil},
		{"degraded: no segment larger than the routed path takes", twoSite, []reserve.Reservation{degraded},
			map[string][]string{"ra": ra, "rb": rb,
				"a1": replace(a1, " mtu 9000", " mtu 1500"),
				"b1": replace(b1, " mtu 9000", " mtu 1500")}},
		{"by user, by cgroup, by ports and prefixes", twoSite, []reserve.Reservation{many},
			map[string][]string{"ra": ra, "rb": rb,
				// On a1, the selectors of the flows without a cgroup: a
				// cgroup's sockets are steered by the mark they carry
				// (the fwmark rule). The uid goes into the ip rule too.
				"a1": cat(probe("a1-ra"), classes("a1-ra", "1:10a", "500M", "10000M"), rules(10), []string{
					"nft mark ip tcp 198.18.1.1 > 198.18.2.1:7070 uid 1000 set dscp 10",
					"nft mark ip any 198.18.1.1 > 198.18.2.1 cgroup lightpath/run-1 set dscp 10",
					"nft mark ip udp 198.18.1.1:5000-5010 > 198.18.2.0/24 set dscp 10",
					"nft mark ip6 tcp 2001:2:0:1::1 > [2001:2:0:2::1]:7000-7010 uid 0 cgroup a/b/c set dscp 10",
					"route 110 198.18.2.1/32 via 198.19.0.2 dev a1-ra src 198.18.1.1 mtu 9000",
					"route 110 2001:2:0:2::1/128 via 2001:2:0:8001::2 dev a1-ra src 2001:2:0:1::1 mtu 9000",
					"rule ip 10010 to 198.18.2.1/32 ipproto tcp dport 7070 uidrange 1000-1000 lookup 110",
					"rule ip 10010 to 198.18.2.0/24 ipproto udp sport 5000-5010 lookup 110",
				}),
				// On b1, every flow's reverse, whoever sends it.
				"b1": cat(probe("b1-rb"), rules(10), []string{
					"nft mark ip tcp 198.18.2.1:7070 > 198.18.1.1 set dscp 10",
					"nft mark ip any 198.18.2.1 > 198.18.1.1 set dscp 10",
					"nft mark ip udp 198.18.2.0/24 > 198.18.1.1:5000-5010 set dscp 10",
					"nft mark ip6 tcp [2001:2:0:2::1]:7000-7010 > 2001:2:0:1::1 set dscp 10",
					"route 110 198.18.1.1/32 via 198.19.0.10 dev b1-rb src 198.18.2.1 mtu 9000",
					"route 110 2001:2:0:1::1/128 via 2001:2:0:8003::2 dev b1-rb src 2001:2:0:2::1 mtu 9000",
					"rule ip 10010 to 198.18.1.1/32 ipproto tcp sport 7070 lookup 110",
					"rule ip 10010 to 198.18.1.1/32 lookup 110",
					"rule ip 10010 to 198.18.1.1/32 ipproto udp dport 5000-5010 lookup 110",
					"rule ip6 10010 to 2001:2:0:1::1/128 ipproto tcp sport 7000-7010 lookup 110",
				}),
			}},
		{"two reservations, two ids", twoSite, []reserve.Reservation{viaDedicated, second},
			map[string][]string{"a1": a1, "b1": b1,
				"ra": cat(ra, probe("a2-ra"), classes("dedicated", "1:10c", "1000M", "2000M"), steerIn(12), rules(12), []string{
					"route 112 198.18.2.2/32 via 198.19.0.22 dev dedicated",
					"route 112 2001:2:0:2::2/128 via 2001:2:0:8006::2 dev dedicated",
					"route 112 198.18.1.2/32 via 198.19.0.5 dev a2-ra",
					"route 112 2001:2:0:1::2/128 via 2001:2:0:8002::1 dev a2-ra",
				}),
				"rb": cat(rb, probe("b2-rb"), classes("b2-rb", "1:10c", "1000M", "10000M"), steerIn(12), rules(12), []string{
					"route 112 198.18.2.2/32 via 198.19.0.13 dev b2-rb",
					"route 112 2001:2:0:2::2/128 via 2001:2:0:8004::1 dev b2-rb",
					"route 112 198.18.1.2/32 via 198.19.0.21 dev dedicated",
					"route 112 2001:2:0:1::2/128 via 2001:2:0:8006::1 dev dedicated",
				}),
				"a2": cat(probe("a2-ra"), classes("a2-ra", "1:10c", "1000M", "10000M"), rules(12), []string{
					"nft mark ip udp 198.18.1.2 > 198.18.2.2:9000-9010 set dscp 12",
					"route 112 198.18.2.2/32 via 198.19.0.6 dev a2-ra src 198.18.1.2 mtu 9000",
					"route 112 2001:2:0:2::2/128 via 2001:2:0:8002::2 dev a2-ra src 2001:2:0:1::2 mtu 9000",
					"rule ip 10012 to 198.18.2.2/32 ipproto udp dport 9000-9010 lookup 112",
				}),
				"b2": cat(probe("b2-rb"), rules(12), []string{
					"nft mark ip udp 198.18.2.2:9000-9010 > 198.18.1.2 set dscp 12",
					"route 112 198.18.1.2/32 via 198.19.0.14 dev b2-rb src 198.18.2.2 mtu 9000",
					"route 112 2001:2:0:1::2/128 via 2001:2:0:8004::2 dev b2-rb src 2001:2:0:2::2 mtu 9000",
					"rule ip 10012 to 198.18.1.2/32 ipproto udp sport 9000-9010 lookup 112",
				}),
			}},
		{"triangle: round by Amsterdam, IPv6 flow", triangle, []reserve.Reservation{
			resv("r3", "gva1", "chi1", 20, 2e9, "tcp [2001:2:0:1::2] > [2001:2:0:3::2]:7070",
				"gva1-gva:gva1>gva", "gva-ams:gva>ams", "ams-chi:ams>chi", "chi1-chi:chi>chi1")},
			map[string][]string{
				// gva-chi, the routed path, has a 1500 MTU; the reserved
				// one 9000 all along. An IPv6 flow: its selector is IPv6.
				"gva1": cat(probe("gva1-gva"), classes("gva1-gva", "1:114", "2000M", "10000M"), rules(20), []string{
					"nft mark ip6 tcp 2001:2:0:1::2 > [2001:2:0:3::2]:7070 set dscp 20",
					"route 120 198.18.3.2/32 via 198.19.0.2 dev gva1-gva src 198.18.1.2 mtu 9000",
					"route 120 2001:2:0:3::2/128 via 2001:2:0:8001::2 dev gva1-gva src 2001:2:0:1::2 mtu 9000",
					"rule ip6 10020 to 2001:2:0:3::2/128 ipproto tcp dport 7070 lookup 120",
				}),
				"gva": cat(probe("gva-ams", "gva1-gva"), classes("gva-ams", "1:114", "2000M", "2500M"), steerIn(20), rules(20), []string{
					"route 120 198.18.3.2/32 via 198.19.0.22 dev gva-ams",
					"route 120 2001:2:0:3::2/128 via 2001:2:0:8006::2 dev gva-ams",
					"route 120 198.18.1.2/32 via 198.19.0.1 dev gva1-gva",
					"route 120 2001:2:0:1::2/128 via 2001:2:0:8001::1 dev gva1-gva",
				}),
				"ams": cat(probe("ams-chi", "gva-ams"), classes("ams-chi", "1:114", "2000M", "2500M"), steerIn(20), rules(20), []string{
					"route 120 198.18.3.2/32 via 198.19.0.26 dev ams-chi",
					"route 120 2001:2:0:3::2/128 via 2001:2:0:8007::2 dev ams-chi",
					"route 120 198.18.1.2/32 via 198.19.0.21 dev gva-ams",
					"route 120 2001:2:0:1::2/128 via 2001:2:0:8006::1 dev gva-ams",
				}),
				"chi": cat(probe("chi1-chi", "ams-chi"), classes("chi1-chi", "1:114", "2000M", "10000M"), steerIn(20), rules(20), []string{
					"route 120 198.18.3.2/32 via 198.19.0.13 dev chi1-chi",
					"route 120 2001:2:0:3::2/128 via 2001:2:0:8004::1 dev chi1-chi",
					"route 120 198.18.1.2/32 via 198.19.0.25 dev ams-chi",
					"route 120 2001:2:0:1::2/128 via 2001:2:0:8007::1 dev ams-chi",
				}),
				"chi1": cat(probe("chi1-chi"), rules(20), []string{
					"nft mark ip6 tcp [2001:2:0:3::2]:7070 > 2001:2:0:1::2 set dscp 20",
					"route 120 198.18.1.2/32 via 198.19.0.14 dev chi1-chi src 198.18.3.2 mtu 9000",
					"route 120 2001:2:0:1::2/128 via 2001:2:0:8004::2 dev chi1-chi src 2001:2:0:3::2 mtu 9000",
					"rule ip6 10020 to 2001:2:0:1::2/128 ipproto tcp sport 7070 lookup 120",
				}),
			}},
		{"a host whose routes leave by another link is steered too", dualHomed, []reserve.Reservation{
			resv("r4", "h", "x", 30, 2e9, "any 198.18.1.1 > 198.18.2.2", "h-r2:h>r2", "r2-x:r2>x")},
			map[string][]string{
				// The rate is cut to the dedicated link's 1G.
				// A flow of any protocol: its selector has none.
				"h": cat(probe("h-r2"), classes("h-r2", "1:11e", "1000M", "1000M"), rules(30), []string{
					"nft mark ip any 198.18.1.1 > 198.18.2.2 set dscp 30",
					"nft steer-out ip dscp 30 set mark 0x11e",
					"nft steer-out ip6 dscp 30 set mark 0x11e",
					"route 130 198.18.2.2/32 via 198.19.0.14 dev h-r2 src 198.18.1.1 mtu 1500",
					"route 130 2001:2:0:2::2/128 via 2001:2:0:8004::2 dev h-r2 src 2001:2:0:1::1 mtu 1500",
					"rule ip 10030 to 198.18.2.2/32 lookup 130",
				}),
				"r2": cat(probe("r2-x", "h-r2"), classes("r2-x", "1:11e", "2000M", "10000M"), steerIn(30), rules(30), []string{
					"route 130 198.18.2.2/32 via 198.19.0.10 dev r2-x",
					"route 130 2001:2:0:2::2/128 via 2001:2:0:8003::2 dev r2-x",
					"route 130 198.18.1.1/32 via 198.19.0.13 dev h-r2",
					"route 130 2001:2:0:1::1/128 via 2001:2:0:8004::1 dev h-r2",
				}),
				// x's routes to h leave by r2-x, as the reverse path does.
				// The reverse path's MTU: r2-x is 1500.
				"x": cat(probe("r2-x"), rules(30), []string{
					"nft mark ip any 198.18.2.2 > 198.18.1.1 set dscp 30",
					"route 130 198.18.1.1/32 via 198.19.0.9 dev r2-x src 198.18.2.2 mtu 1500",
					"route 130 2001:2:0:1::1/128 via 2001:2:0:8003::1 dev r2-x src 2001:2:0:2::2 mtu 1500",
					"rule ip 10030 to 198.18.1.1/32 lookup 130",
				}),
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range tc.topo.Nodes {
				p, err := Desired(tc.topo, n.Name, tc.rs, t0)
				if err != nil {
					t.Fatalf("%s: %v", n.Name, err)
				}
				want := slices.Clone(tc.want[n.Name])
				slices.Sort(want)
				if got := summary(p); !slices.Equal(got, want) {
					t.Errorf("%s:\n got %s\nwant %s", n.Name, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
				}
				if p.NftTable != (len(p.Nft) > 0) {
					t.Errorf("%s: NftTable %v with %d rules", n.Name, p.NftTable, len(p.Nft))
				}
				for _, r := range p.Nft {
					back, err := parseTag(r.tag())
					if err != nil || back != r {
						t.Errorf("%s: tag %q reads back as %+v, %v", n.Name, r.tag(), back, err)
					}
					if len(r.tag()) > 200 {
						t.Errorf("%s: tag %q is too long for a rule comment", n.Name, r.tag())
					}
				}
			}
		})
	}
}

func TestDesiredFilters(t *testing.T) {
	tp := loadTopo(t, "../../examples/two-site.yaml")
	p, err := Desired(tp, "ra", []reserve.Reservation{resv("r", "a1", "b1", 46, 1e8, "", "a1-ra:a1>ra", "wan:ra>rb", "b1-rb:rb>b1")}, t0)
	if err != nil {
		t.Fatal(err)
	}
	// tc's "match ip tos 0xb8 0xfc" for EF (46), and its IPv6 equivalent
	// on the first word of the header (traffic class bits 20-27).
	var want []Filter
	for _, dev := range []string{"a1-ra", "wan"} {
		// The probes' filters, ahead of the reservations': "match ip
		// protocol 17 0xff match ip dport 7471 0xffff" and the like.
		want = append(want,
			Filter{Dev: dev, Prio: topology.ProbeFilterPrio, Minor: topology.ProbeMinor, DPort: ProbePort},
			Filter{Dev: dev, Prio: topology.ProbeFilterPrio + 1, Minor: topology.ProbeMinor, SPort: ProbePort},
			Filter{Dev: dev, IPv6: true, Prio: topology.ProbeFilterPrio + 2, Minor: topology.ProbeMinor, DPort: ProbePort},
			Filter{Dev: dev, IPv6: true, Prio: topology.ProbeFilterPrio + 3, Minor: topology.ProbeMinor, SPort: ProbePort})
	}
	want = append(want, []Filter{
		{Dev: "wan", Prio: topology.FilterPrio4 + 46, Minor: topology.ClassBase + 46, Val: 0x00b80000, Mask: 0x00fc0000},
		{Dev: "wan", IPv6: true, Prio: topology.FilterPrio6 + 46, Minor: topology.ClassBase + 46, Val: 0x0b800000, Mask: 0x0fc00000},
	}...)
	want = sortUniq(want)
	if !reflect.DeepEqual(p.Filters, want) {
		t.Errorf("filters\n got %+v\nwant %+v", p.Filters, want)
	}
	if len(p.Nft) != 2 || len(p.Routes) != 4 {
		t.Errorf("a reservation without flows still classifies and steers: got %d nft rules, %d routes", len(p.Nft), len(p.Routes))
	}
}

func TestDesiredErrors(t *testing.T) {
	tp := loadTopo(t, "../../examples/two-site.yaml")
	ok := resv("r1", "a1", "b1", 10, 1e8, "", "a1-ra:a1>ra", "dedicated:ra>rb", "b1-rb:rb>b1")
	same := resv("r2", "a2", "b2", 10, 1e8, "", "a2-ra:a2>ra", "dedicated:ra>rb", "b2-rb:rb>b2")
	for _, tc := range []struct {
		name, node string
		rs         []reserve.Reservation
		want       string
	}{
		{"unknown node", "zz", nil, `no node "zz"`},
		{"unknown link", "a1", []reserve.Reservation{resv("r", "a1", "b1", 10, 1e8, "", "nope:a1>b1")}, `no link "nope"`},
		{"hop not on its link", "a1", []reserve.Reservation{resv("r", "a1", "b1", 10, 1e8, "", "wan:a1>b1")}, `no end at "a1"`},
		{"one DSCP twice at a node", "ra", []reserve.Reservation{ok, same}, "both hold DSCP 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Desired(tp, tc.node, tc.rs, t0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	// Disjoint reservations may share a value: a1 sees only its own.
	if _, err := Desired(tp, "a1", []reserve.Reservation{ok, same}, t0); err != nil {
		t.Errorf("a1 is not on r2's path: %v", err)
	}
}

func TestDiff(t *testing.T) {
	cls := Class{Dev: "wan", Minor: 0x10a, Rate: 1e8, Ceil: 1e9, Prio: ClassPrio}
	faster := cls
	faster.Rate = 2e8
	older := cls // an older agent's class: htb priority 0, as unreserved traffic's
	older.Prio = 0
	route9000 := Route{Table: 110, Dst: mustPrefix("198.18.2.1/32"), Via: mustPrefix("198.19.0.2/32").Addr(), Dev: "a1-ra", MTU: 9000}
	route1500 := route9000
	route1500.MTU = 1500
	sel := IPRule{Priority: 10010, Dst: mustPrefix("198.18.2.1/32"), Proto: protoTCP, DPort: reserve.PortRange{Lo: 7070, Hi: 7070}, Table: 110}
	selUser := sel
	selUser.ByUID, selUser.UID = true, 1000
	clamp := NftRule{Chain: "clamp", Stale: true, Handle: 3} // an older agent's MSS clamp, as Fetch reads it
	flt := Filter{Dev: "wan", Prio: 0x10a, Minor: 0x10a, Val: 0x00280000, Mask: 0x00fc0000}
	route := Route{Table: 110, Dst: mustPrefix("198.18.2.1/32"), Via: mustPrefix("198.19.0.18/32").Addr(), Dev: "wan"}
	moved := route
	moved.Via, moved.Dev = mustPrefix("198.19.0.22/32").Addr(), "dedicated"
	rule := IPRule{Priority: 10010, Mark: 0x10a, Table: 110}
	steer := NftRule{Chain: ChainSteerIn, DSCP: 10, SetMark: 0x10a}
	fetched := steer
	fetched.Handle = 7
	twice := steer
	twice.Handle = 9
	stale := NftRule{Chain: ChainMark, Stale: true, Handle: 8}

	for _, tc := range []struct {
		name       string
		have, want Plan
		add, rm    Plan
	}{
		{"nothing", Plan{}, Plan{}, Plan{}, Plan{}},
		{"from scratch", Plan{},
			Plan{Classes: []Class{cls}, Filters: []Filter{flt}, Routes: []Route{route}, Rules: []IPRule{rule}, NftTable: true, Nft: []NftRule{steer}},
			Plan{Classes: []Class{cls}, Filters: []Filter{flt}, Routes: []Route{route}, Rules: []IPRule{rule}, NftTable: true, Nft: []NftRule{steer}},
			Plan{}},
		{"in place: handles are not compared", Plan{Classes: []Class{cls}, NftTable: true, Nft: []NftRule{fetched}},
			Plan{Classes: []Class{cls}, NftTable: true, Nft: []NftRule{steer}}, Plan{}, Plan{}},
		{"a class and a route change in place", Plan{Classes: []Class{cls}, Routes: []Route{route}},
			Plan{Classes: []Class{faster}, Routes: []Route{moved}},
			Plan{Classes: []Class{faster}, Routes: []Route{moved}}, Plan{}},
		{"an older agent's class is refit to priority 1", Plan{Classes: []Class{older}}, Plan{Classes: []Class{cls}},
			Plan{Classes: []Class{cls}}, Plan{}},
		{"a route's MTU changes in place", Plan{Routes: []Route{route9000}}, Plan{Routes: []Route{route1500}},
			Plan{Routes: []Route{route1500}}, Plan{}},
		{"a selector narrowed to a user is another rule", Plan{Rules: []IPRule{sel, rule}}, Plan{Rules: []IPRule{selUser, rule}},
			Plan{Rules: []IPRule{selUser}}, Plan{Rules: []IPRule{sel}}},
		{"an older agent's clamp goes", Plan{NftTable: true, Nft: []NftRule{clamp, fetched}}, Plan{NftTable: true, Nft: []NftRule{steer}},
			Plan{}, Plan{Nft: []NftRule{clamp}}},
		{"stale and repeated rules go", Plan{NftTable: true, Nft: []NftRule{fetched, stale, twice}},
			Plan{NftTable: true, Nft: []NftRule{steer}},
			Plan{}, Plan{Nft: []NftRule{stale, twice}}},
		{"all gone: the table takes its rules with it",
			Plan{Classes: []Class{cls}, Filters: []Filter{flt}, Routes: []Route{route}, Rules: []IPRule{rule}, NftTable: true, Nft: []NftRule{fetched}},
			Plan{}, Plan{},
			Plan{Classes: []Class{cls}, Filters: []Filter{flt}, Routes: []Route{route}, Rules: []IPRule{rule}, NftTable: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Diff(tc.have, tc.want)
			if !reflect.DeepEqual(c.Add, tc.add) || !reflect.DeepEqual(c.Remove, tc.rm) {
				t.Errorf("got\n add %+v\n remove %+v\nwant\n add %+v\n remove %+v", c.Add, c.Remove, tc.add, tc.rm)
			}
			if c.Empty() != (reflect.DeepEqual(tc.add, Plan{}) && reflect.DeepEqual(tc.rm, Plan{})) {
				t.Errorf("Empty() = %v for %s", c.Empty(), c)
			}
		})
	}
}

func TestParseTagRefuses(t *testing.T) {
	for _, s := range []string{"", "a comment of someone else", `lightpath {"c":`, `lightpath {"c":"mark","f":"tcp nonsense"}`} {
		if r, err := parseTag(s); err == nil {
			t.Errorf("parseTag(%q) = %+v, want an error", s, r)
		}
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
