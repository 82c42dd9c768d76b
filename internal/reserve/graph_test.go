package reserve

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

const (
	mbps = 1_000_000
	gbps = 1_000_000_000
)

// twoSite is the hand-made topology of the scheduling tests:
//
//	a1 ── ra ══ wan (routed, 1G, 90%) ══ rb ── b1
//	       ║ ═ ded (dedicated, 2G, 100%) ═ ║
//	       ├── rc ──── rd ──────────────── ┤   (the long way: 10G links)
//	       └── x (a host, 100G links) ─────┘   (never a way)
//
// a1, b1 and x are hosts, the r* routers. Host links are 10G at 90%.
func twoSite(t testing.TB) *Graph {
	t.Helper()
	g, err := NewGraph(map[string]string{
		"a1": NodeHost, "b1": NodeHost, "x": NodeHost,
		"ra": NodeRouter, "rb": NodeRouter, "rc": NodeRouter, "rd": NodeRouter,
	}, []Link{
		{Name: "a1-ra", A: "a1", B: "ra", Capacity: 10 * gbps, Reservable: 0.9, Delay: time.Millisecond},
		{Name: "b1-rb", A: "b1", B: "rb", Capacity: 10 * gbps, Reservable: 0.9, Delay: time.Millisecond},
		{Name: "wan", A: "ra", B: "rb", Capacity: 1 * gbps, Reservable: 0.9, Delay: 25 * time.Millisecond},
		{Name: "ded", A: "ra", B: "rb", Capacity: 2 * gbps, Reservable: 1, Delay: 25 * time.Millisecond, Role: LinkDedicated},
		{Name: "ra-rc", A: "ra", B: "rc", Capacity: 10 * gbps, Reservable: 0.9, Delay: 10 * time.Millisecond},
		{Name: "rc-rd", A: "rc", B: "rd", Capacity: 10 * gbps, Reservable: 0.9, Delay: 10 * time.Millisecond},
		{Name: "rd-rb", A: "rd", B: "rb", Capacity: 10 * gbps, Reservable: 0.9, Delay: 10 * time.Millisecond},
		{Name: "ra-x", A: "ra", B: "x", Capacity: 100 * gbps, Reservable: 1, Delay: time.Millisecond},
		{Name: "x-rb", A: "x", B: "rb", Capacity: 100 * gbps, Reservable: 1, Delay: time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// path builds hops from a node and link/node pairs: path("a1", "a1-ra",
// "ra", "wan", "rb").
func path(from string, linkNode ...string) []Hop {
	var p []Hop
	for i := 0; i+1 < len(linkNode); i += 2 {
		p = append(p, Hop{Link: linkNode[i], From: from, To: linkNode[i+1]})
		from = linkNode[i+1]
	}
	return p
}

var (
	viaWan  = path("a1", "a1-ra", "ra", "wan", "rb", "b1-rb", "b1")
	viaDed  = path("a1", "a1-ra", "ra", "ded", "rb", "b1-rb", "b1")
	viaLong = path("a1", "a1-ra", "ra", "ra-rc", "rc", "rc-rd", "rd", "rd-rb", "rb", "b1-rb", "b1")
	viaX    = path("a1", "a1-ra", "ra", "ra-x", "x", "x-rb", "rb", "b1-rb", "b1")
)

func TestNewGraphErrors(t *testing.T) {
	ok := Link{Name: "l", A: "a", B: "b", Capacity: gbps, Reservable: 0.9}
	with := func(f func(*Link)) []Link { l := ok; f(&l); return []Link{l} }
	nodes := map[string]string{"a": NodeHost, "b": NodeRouter}
	for _, tc := range []struct {
		name  string
		nodes map[string]string
		links []Link
		want  string
	}{
		{"unknown role", map[string]string{"a": "switch"}, nil, `node a: unknown role "switch"`},
		{"empty node name", map[string]string{"": NodeHost}, nil, "empty name"},
		{"unknown end", nodes, with(func(l *Link) { l.B = "c" }), `link l: unknown node "c"`},
		{"loop", nodes, with(func(l *Link) { l.B = "a" }), "both ends are a"},
		{"no name", nodes, with(func(l *Link) { l.Name = "" }), "empty name"},
		{"zero capacity", nodes, with(func(l *Link) { l.Capacity = 0 }), "capacity must be above zero"},
		{"reservable zero", nodes, with(func(l *Link) { l.Reservable = 0 }), "reservable fraction 0"},
		{"reservable above one", nodes, with(func(l *Link) { l.Reservable = 1.5 }), "reservable fraction 1.5"},
		{"reservable NaN", nodes, with(func(l *Link) { l.Reservable = math.NaN() }), "reservable fraction NaN"},
		{"negative delay", nodes, with(func(l *Link) { l.Delay = -time.Millisecond }), "negative delay"},
		{"unknown link role", nodes, with(func(l *Link) { l.Role = "fast" }), `unknown role "fast"`},
		{"duplicate name", nodes, []Link{ok, ok}, "used twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewGraph(tc.nodes, tc.links)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestGraph(t *testing.T) {
	g := twoSite(t)
	for _, tc := range []struct {
		hop  Hop
		want uint64
	}{
		{Hop{"wan", "ra", "rb"}, 900 * mbps},
		{Hop{"wan", "rb", "ra"}, 900 * mbps},
		{Hop{"ded", "ra", "rb"}, 2 * gbps},
		{Hop{"a1-ra", "a1", "ra"}, 9 * gbps},
	} {
		if got, err := g.ReservableCapacity(tc.hop); err != nil || got != tc.want {
			t.Errorf("ReservableCapacity(%v) = %d, %v; want %d", tc.hop, got, err, tc.want)
		}
	}
	if r, ok := g.Role("x"); !ok || r != NodeHost {
		t.Errorf("Role(x) = %q, %v", r, ok)
	}
	if l, ok := g.Link("wan"); !ok || l.Role != LinkRouted {
		t.Errorf("Link(wan) = %+v, %v: the role should default to routed", l, ok)
	}
	if n := len(g.Nodes()); n != 7 {
		t.Errorf("%d nodes, want 7", n)
	}
}

func TestValidatePath(t *testing.T) {
	g := twoSite(t)
	for _, tc := range []struct {
		name     string
		from, to string
		path     []Hop
		want     error
		msg      string
	}{
		{"routed", "a1", "b1", viaWan, nil, ""},
		{"long", "", "", viaLong, nil, ""},
		{"router to router", "ra", "rb", path("ra", "wan", "rb"), nil, ""},
		{"empty", "", "", nil, ErrInvalidPath, "no hops"},
		{"unknown link", "", "", path("a1", "nope", "ra"), ErrUnknownLink, `"nope"`},
		{"wrong ends", "", "", path("a1", "wan", "rb"), ErrInvalidPath, "joins ra and rb"},
		{"broken chain", "", "", append(path("a1", "a1-ra", "ra"), path("rb", "b1-rb", "b1")...), ErrInvalidPath, "starts at rb"},
		{"host in the middle", "", "", viaX, ErrInvalidPath, "passes through x, a host"},
		{"loop", "", "", path("ra", "wan", "rb", "ded", "ra"), ErrInvalidPath, "visits ra twice"},
		{"wrong source", "b1", "", viaWan, ErrInvalidPath, "starts at a1, not at b1"},
		{"wrong destination", "", "a1", viaWan, ErrInvalidPath, "ends at b1, not at a1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := g.ValidatePath(tc.from, tc.to, tc.path)
			if !errors.Is(err, tc.want) || err != nil && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}
