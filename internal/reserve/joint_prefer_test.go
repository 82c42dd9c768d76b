package reserve

import (
	"testing"
	"time"
)

// onLinks sums a plan's flows by the links they cross.
func onLinks(p JointPlan) map[string]uint64 {
	m := map[string]uint64{}
	for _, f := range p.Flows {
		for _, h := range f.Path {
			m[h.Link] += f.Rate
		}
	}
	return m
}

// TestJointPathPreference checks that the preference changes how the joint
// planner's maximum flow splits over paths, never its value: the rate is
// the same under every preference (the maximum flow with no preference,
// which the reference test checks against a linear program), and under
// dedicated the circuits carry all they can before a routed link carries
// anything.
func TestJointPathPreference(t *testing.T) {
	type split map[string]uint64 // bit/s on some links; links not named are not checked
	for _, tc := range []struct {
		name       string
		g          func(*testing.T) *Graph
		books      []Booking
		src, dst   []Endpoint
		rate       uint64
		want       map[PathPreference]split
		completion bool // JointEarliestCompletion rather than JointFixedSlot
	}{
		{
			name: "shared WAN, the sources cap it below the circuit",
			g:    sharedWAN,
			src:  []Endpoint{{Node: "e1", MaxRate: 300e6}, {Node: "e2", MaxRate: 300e6}, {Node: "e3", MaxRate: 300e6}},
			dst:  eps("w1", "w2", "w3"),
			rate: 900e6,
			want: map[PathPreference]split{
				PreferDedicated: {"circuit": 900e6, "wan": 0},
				PreferRouted:    {"circuit": 450e6, "wan": 450e6},
			},
		},
		{
			name: "shared WAN, more than the circuit: routed for the rest",
			g:    sharedWAN,
			src:  []Endpoint{{Node: "e1", MaxRate: 1200e6}},
			dst:  eps("w1", "w2"),
			rate: 1200e6,
			want: map[PathPreference]split{
				PreferDedicated: {"circuit": 1e9, "wan": 200e6},
				PreferRouted:    {"circuit": 750e6, "wan": 450e6},
			},
		},
		{
			name: "shared WAN, everything",
			g:    sharedWAN,
			src:  eps("e1", "e2", "e3"),
			dst:  eps("w1", "w2", "w3"),
			rate: 1450e6,
			want: map[PathPreference]split{
				PreferDedicated: {"circuit": 1e9, "wan": 450e6},
				PreferRouted:    {"circuit": 1e9, "wan": 450e6},
				PreferShortest:  {"circuit": 1e9, "wan": 450e6},
			},
		},
		{
			name:  "shared WAN, circuit partly booked",
			g:     sharedWAN,
			books: []Booking{{Path: []Hop{{"circuit", "er", "wr"}}, Bandwidth: 700e6, Start: jt0, End: jt0.Add(2 * time.Hour)}},
			src:   []Endpoint{{Node: "e1", MaxRate: 400e6}},
			dst:   eps("w1"),
			rate:  400e6,
			want: map[PathPreference]split{
				PreferDedicated: {"circuit": 300e6, "wan": 100e6},
				PreferRouted:    {"circuit": 0, "wan": 400e6},
			},
		},
		{
			name: "two sites: dedicated, then the short routed path, then the long way",
			g:    func(t *testing.T) *Graph { return twoSite(t) },
			src:  []Endpoint{{Node: "a1", MaxRate: 2500e6}},
			dst:  eps("b1"),
			rate: 2500e6,
			want: map[PathPreference]split{
				PreferDedicated: {"ded": 2e9, "wan": 500e6, "ra-rc": 0},
				PreferRouted:    {"ded": 0, "wan": 900e6, "ra-rc": 1600e6},
				PreferShortest:  {"ra-rc": 0},
			},
		},
		{
			name: "two sites, everything the access link takes",
			g:    func(t *testing.T) *Graph { return twoSite(t) },
			src:  eps("a1"),
			dst:  eps("b1"),
			rate: 9e9,
			want: map[PathPreference]split{
				PreferDedicated: {"ded": 2e9, "wan": 900e6, "ra-rc": 6100e6},
				PreferRouted:    {"ded": 0, "wan": 900e6, "ra-rc": 8100e6},
				PreferShortest:  {"ded": 2e9, "wan": 900e6, "ra-rc": 6100e6},
			},
		},
		{
			name: "shared WAN, prefer swapped: the wan first",
			g: func(t *testing.T) *Graph {
				yes, no := true, false
				links := sharedWAN(t).Links()
				for i := range links {
					switch links[i].Name {
					case "wan":
						links[i].Prefer = &yes
					case "circuit":
						links[i].Prefer = &no
					}
				}
				nodes := map[string]string{}
				g := sharedWAN(t)
				for _, n := range g.Nodes() {
					nodes[n], _ = g.Role(n)
				}
				g, err := NewGraph(nodes, links)
				if err != nil {
					t.Fatal(err)
				}
				return g
			},
			src:  []Endpoint{{Node: "e1", MaxRate: 600e6}},
			dst:  eps("w1"),
			rate: 600e6,
			want: map[PathPreference]split{
				PreferDedicated: {"circuit": 150e6, "wan": 450e6},
				PreferRouted:    {"circuit": 600e6, "wan": 0},
			},
		},
		{
			name:       "earliest completion: the same window, the circuit first",
			g:          sharedWAN,
			src:        []Endpoint{{Node: "e1", MaxRate: 800e6}},
			dst:        eps("w1", "w2"),
			rate:       800e6,
			completion: true,
			want: map[PathPreference]split{
				PreferDedicated: {"circuit": 800e6, "wan": 0},
				PreferRouted:    {"circuit": 350e6, "wan": 450e6},
			},
		},
	} {
		var first JointPlan
		for i, pref := range PathPreferences {
			t.Run(string(pref)+"/"+tc.name, func(t *testing.T) {
				s := prefSchedule(t, tc.g(t), pref)
				book(t, s, tc.books...)
				q := JointQuery{Sources: tc.src, Destinations: tc.dst, Size: 2_400_000_000, Goodput: 1, Submitted: jt0}
				var p JointPlan
				var err error
				if tc.completion {
					p, err = s.JointEarliestCompletion(q)
				} else {
					p, err = s.JointFixedSlot(tc.src, tc.dst, jt0, jt0.Add(time.Hour))
					q.Size = 0
				}
				if err != nil {
					t.Fatal(err)
				}
				checkPlan(t, s, q, p)
				if p.Rate != tc.rate {
					t.Errorf("rate %d bit/s, want %d", p.Rate, tc.rate)
				}
				if i == 0 {
					first = p
				} else if p.Rate != first.Rate || !p.Start.Equal(first.Start) || !p.End.Equal(first.End) || p.Algorithm != first.Algorithm {
					t.Errorf("%s [%s, %s) at %d; under %s: %s [%s, %s) at %d: only the split may change", p.Algorithm, p.Start, p.End, p.Rate,
						PathPreferences[0], first.Algorithm, first.Start, first.End, first.Rate)
				}
				got := onLinks(p)
				for link, r := range tc.want[pref] {
					if got[link] != r {
						t.Errorf("%s carries %d bit/s, want %d (all: %v)", link, got[link], r, got)
					}
				}
			})
		}
	}
}
