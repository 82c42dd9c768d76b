package reserve

import (
	"slices"
	"testing"
	"time"
)

// TestPrefers: Prefers ranks paths as the path search does: under each
// preference, the path FixedSlot picks in an empty schedule comes before
// every other path between the same nodes, and a path never before
// itself; a path not of the graph is an error.
func TestPrefers(t *testing.T) {
	g := twoSite(t)
	paths := map[string][]Hop{"wan": viaWan, "ded": viaDed, "long": viaLong}
	for _, tc := range []struct {
		pref PathPreference
		best string
	}{
		{PreferDedicated, "ded"},
		{PreferRouted, "wan"},
		{PreferShortest, "ded"}, // as short as wan: the names decide
	} {
		t.Run(string(tc.pref), func(t *testing.T) {
			s := prefSchedule(t, g, tc.pref)
			t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			res, err := s.FixedSlot(Request{From: "a1", To: "b1", Bandwidth: 1e6, Start: t0, End: t0.Add(time.Hour)})
			if err != nil || !slices.Equal(res.Path, paths[tc.best]) {
				t.Fatalf("FixedSlot: %v %v; want the %s path", res.Path, err, tc.best)
			}
			for name, p := range paths {
				if ok, err := s.Prefers(p, p); ok || err != nil {
					t.Errorf("the %s path before itself: %v %v", name, ok, err)
				}
				if name == tc.best {
					continue
				}
				if ok, err := s.Prefers(paths[tc.best], p); !ok || err != nil {
					t.Errorf("the %s path not before the %s path: %v", tc.best, name, err)
				}
				if ok, err := s.Prefers(p, paths[tc.best]); ok || err != nil {
					t.Errorf("the %s path before the %s path: %v", name, tc.best, err)
				}
			}
			if _, err := s.Prefers(path("a1", "nope", "b1"), viaWan); err == nil {
				t.Error("a path of an unknown link ranked")
			}
		})
	}
}
