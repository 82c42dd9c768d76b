package derive

import (
	"math"
	"testing"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/reserve"
)

func tx(link, dev string, v float64) monitor.Point {
	return monitor.Point{Name: txBytes, Labels: monitor.L("device", dev, "link", link), V: v}
}

func TestObserve(t *testing.T) {
	links := []reserve.Link{{Name: "wan", A: "ra", B: "rb", Capacity: 1e9}, {Name: "lan-a", A: "a1", B: "ra", Capacity: 10e9}}
	byName := map[string]reserve.Link{}
	for _, l := range links {
		byName[l.Name] = l
	}
	link := func(n string) (reserve.Link, bool) { l, ok := byName[n]; return l, ok }
	d := New()
	type want struct {
		bps float64
		to  string
	}
	for _, tc := range []struct {
		name  string
		node  string
		t     int64
		pts   []monitor.Point
		want  want
		count int
	}{
		{"first sample gives nothing", "ra", 1000, []monitor.Point{tx("wan", "wan0", 1000)}, want{}, 0},
		{"125 MB in a second is 1 Gbit/s", "ra", 2000, []monitor.Point{tx("wan", "wan0", 1000+125e6)}, want{1e9, "rb"}, 2},
		{"half a second", "ra", 2500, []monitor.Point{tx("wan", "wan0", 1000+125e6+31.25e6)}, want{500e6, "rb"}, 2},
		{"an old group again is skipped", "ra", 2500, []monitor.Point{tx("wan", "wan0", 1000+125e6+31.25e6)}, want{}, 0},
		{"a reset counter restarts", "ra", 3500, []monitor.Point{tx("wan", "wan0", 10)}, want{}, 0},
		{"other metrics and unknown links are skipped", "ra", 4500, []monitor.Point{
			{Name: "lightpath_interface_receive_bytes_total", Labels: monitor.L("link", "wan"), V: 5},
			tx("nowhere", "x0", 1)}, want{}, 0},
		{"a link not at the node is skipped", "a1", 4500, []monitor.Point{tx("wan", "wan0", 99)}, want{}, 0},
		{"the B end measures B to A", "rb", 1000, []monitor.Point{tx("wan", "wan1", 0)}, want{}, 0},
		{"the B end measures B to A (rate)", "rb", 2000, []monitor.Point{tx("wan", "wan1", 12.5e6)}, want{100e6, "ra"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs := d.Observe(link, &monitor.Batch{Node: tc.node, Groups: []monitor.Group{{T: tc.t, Points: tc.pts}}})
			n := 0
			for _, g := range gs {
				if g.T != tc.t {
					t.Errorf("derived at %d, want %d", g.T, tc.t)
				}
				n += len(g.Points)
				for _, p := range g.Points {
					if err := monitor.CheckSeries(p.Name, p.Labels); err != nil {
						t.Error(err)
					}
					if p.Labels.Get("to") != tc.want.to || p.Labels.Get("from") != tc.node {
						t.Errorf("labels %v, want from %s to %s", p.Labels, tc.node, tc.want.to)
					}
					want := tc.want.bps / 8
					if p.Name == Utilisation {
						want = tc.want.bps / 1e9
					}
					if math.Abs(p.V-want) > 1e-6*want {
						t.Errorf("%s = %g, want %g", p.Name, p.V, want)
					}
				}
			}
			if n != tc.count {
				t.Errorf("%d derived points, want %d", n, tc.count)
			}
		})
	}
	got := d.Latest(0)
	if len(got) != 2 || got[0].From != "ra" || got[0].BitsPerSecond != 500e6 || got[1].From != "rb" || got[1].Utilisation() != 0.1 {
		t.Fatalf("latest = %+v", got)
	}
	if len(d.Latest(2600)) != 0 {
		t.Errorf("latest since 2600 should be empty: the newest rate is at 2500 and 2000")
	}
}
