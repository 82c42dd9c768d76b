package reserve

import (
	"slices"
	"testing"
)

func TestGenerateWorkload(t *testing.T) {
	w, err := GenerateWorkload(1, 40, 90, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Nodes) != 40 || len(w.Links) != 90 || len(w.Bookings) != 500 || w.Schedule.Len() != 500 {
		t.Fatalf("%d nodes, %d links, %d bookings (%d in the schedule); want 40, 90, 500", len(w.Nodes), len(w.Links), len(w.Bookings), w.Schedule.Len())
	}
	// Every booking is admitted on a valid path, so all of them together
	// rebuild the same schedule on a fresh graph.
	g, err := NewGraph(w.Nodes, w.Links)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSchedule(g)
	for _, b := range w.Bookings {
		if err := s.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	// Deterministic: the same seed gives the same workload.
	again, err := GenerateWorkload(1, 40, 90, 500)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range again.Bookings {
		c := w.Bookings[i]
		if b.ID != c.ID || !slices.Equal(b.Path, c.Path) || b.Bandwidth != c.Bandwidth || !b.Start.Equal(c.Start) || !b.End.Equal(c.End) {
			t.Fatalf("booking %d differs between two runs: %+v and %+v", i, b, c)
		}
	}
	for _, tc := range []struct {
		name                  string
		nodes, links, tickets int
	}{
		{"too few nodes", 3, 10, 0},
		{"too few links", 10, 8, 0},
		{"negative bookings", 10, 20, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := GenerateWorkload(1, tc.nodes, tc.links, tc.tickets); err == nil {
				t.Error("no error")
			}
		})
	}
}
