package reserve

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAdmit(t *testing.T) {
	s := NewSchedule(twoSite(t))
	for _, b := range []Booking{
		{ID: "half", Path: viaWan, Bandwidth: 450 * mbps, Start: at(0), End: at(60)},
		{ID: "back", Path: reverse(viaWan), Bandwidth: 900 * mbps, Start: at(0), End: at(60)},
	} {
		if err := s.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		path []Hop
		bw   uint64
		s, e time.Time
		want error
		msg  string
	}{
		{"the other half", viaWan, 450 * mbps, at(0), at(60), nil, ""},
		{"a bit more", viaWan, 450*mbps + 1, at(0), at(60), ErrCapacity, "link wan from ra to rb at 2030-06-01T12:00:00Z"},
		{"overlapping its last nanosecond", viaWan, 900 * mbps, at(59), at(61), ErrCapacity, "12:59:00Z"},
		{"right after it (end is exclusive)", viaWan, 900 * mbps, at(60), at(120), nil, ""},
		{"right before it", viaWan, 900 * mbps, at(-60), at(0), nil, ""},
		{"the reverse direction is full", reverse(viaWan), 1, at(30), at(31), ErrCapacity, "from rb to ra"},
		{"the reverse direction is free after", reverse(viaWan), 900 * mbps, at(60), at(61), nil, ""},
		{"dedicated is free", viaDed, 2 * gbps, at(0), at(60), nil, ""},
		{"above any capacity", viaDed, 2*gbps + 1, at(0), at(60), ErrCapacity, "more than the 2.00 Gbit/s reservable"},
		{"zero bandwidth", viaWan, 0, at(0), at(60), ErrInvalidQuery, "bandwidth is zero"},
		{"end before start", viaWan, 1, at(60), at(0), ErrInvalidQuery, "not after the start"},
		{"zero length", viaWan, 1, at(60), at(60), ErrInvalidQuery, "not after the start"},
		{"host in the middle", viaX, 1, at(0), at(60), ErrInvalidPath, "a host"},
		{"no path", nil, 1, at(0), at(60), ErrInvalidPath, "no hops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Admit(tc.path, tc.bw, tc.s, tc.e)
			if !errors.Is(err, tc.want) || err != nil && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Admit: %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
	var ce *CapacityError
	if err := s.Admit(viaWan, 500*mbps, at(-10), at(10)); !errors.As(err, &ce) ||
		ce.Hop != (Hop{"wan", "ra", "rb"}) || !ce.At.Equal(at(0)) || ce.Used != 450*mbps || ce.Capacity != 900*mbps {
		t.Errorf("Admit: %#v, want a CapacityError on wan at %s", err, at(0))
	}
}

func reverse(p []Hop) []Hop {
	r := make([]Hop, len(p))
	for i, h := range p {
		r[len(p)-1-i] = Hop{h.Link, h.To, h.From}
	}
	return r
}

// TestAdmitSameInstant is the OSCARS regression on a schedule: two equal
// reservations starting at the same instant both count there.
func TestAdmitSameInstant(t *testing.T) {
	s := NewSchedule(twoSite(t))
	for _, id := range []string{"first", "second"} {
		if err := s.Add(Booking{ID: id, Path: viaDed, Bandwidth: gbps, Start: at(0), End: at(60)}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	err := s.Add(Booking{ID: "third", Path: viaDed, Bandwidth: gbps, Start: at(0), End: at(60)})
	if !errors.Is(err, ErrCapacity) {
		t.Fatalf("a third equal booking at the same instant: %v, want ErrCapacity", err)
	}
	r, err := s.FixedSlot(Request{From: "a1", To: "b1", Bandwidth: 1500 * mbps, Start: at(0), End: at(1)})
	if err != nil || !slices.Equal(r.Path, viaLong) {
		t.Errorf("FixedSlot: %v, %v; want the long way round the full dedicated link", r.Path, err)
	}
}

func TestAddRemove(t *testing.T) {
	s := NewSchedule(twoSite(t))
	b := Booking{ID: "one", Path: viaWan, Bandwidth: 900 * mbps, Start: at(0), End: at(60)}
	if err := s.Add(b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    Booking
		want error
	}{
		{"duplicate", b, ErrDuplicateBooking},
		{"no ID", Booking{Path: viaDed, Bandwidth: 1, Start: at(0), End: at(1)}, ErrInvalidQuery},
		{"full", Booking{ID: "two", Path: viaWan, Bandwidth: 1, Start: at(30), End: at(90)}, ErrCapacity},
		{"bad path", Booking{ID: "two", Path: viaX, Bandwidth: 1, Start: at(0), End: at(1)}, ErrInvalidPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Add(tc.b); !errors.Is(err, tc.want) {
				t.Errorf("Add: %v, want %v", err, tc.want)
			}
		})
	}
	if s.Len() != 1 {
		t.Fatalf("%d bookings after refused ones, want 1", s.Len())
	}
	if got, ok := s.Booking("one"); !ok || !slices.Equal(got.Path, viaWan) {
		t.Errorf("Booking(one) = %+v, %v", got, ok)
	}
	steps, err := s.Steps(Hop{"wan", "ra", "rb"}, at(-30), at(90))
	if err != nil || len(steps) != 3 || steps[1].Used != 900*mbps || steps[1].Residual != 0 {
		t.Errorf("Steps: %+v, %v", steps, err)
	}
	if _, err := s.Remove("nope"); !errors.Is(err, ErrUnknownBooking) {
		t.Errorf("Remove(nope): %v", err)
	}
	if _, err := s.Remove("one"); err != nil {
		t.Fatal(err)
	}
	if r, err := s.MinResidual(Hop{"wan", "ra", "rb"}, at(0), at(60)); err != nil || r != 900*mbps {
		t.Errorf("after Remove: residual %d, %v", r, err)
	}
	if err := s.Add(Booking{ID: "two", Path: viaWan, Bandwidth: 1, Start: at(30), End: at(90)}); err != nil {
		t.Errorf("after Remove: %v", err)
	}
}

// TestAdmitRandom checks Admit (and Add, inside randomBookings) against a
// brute force that sums the bookings at every breakpoint, on random
// workloads on random small topologies, with removals in between.
func TestAdmitRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	checks := 0
	for range 150 {
		g, hosts := randomGraph(rng)
		s := NewSchedule(g)
		books := randomBookings(t, rng, s, hosts, 25)
		for round := range 3 {
			if round > 0 && len(books) > 0 { // remove a few, then check again
				for range 1 + rng.IntN(len(books)) {
					i := rng.IntN(len(books))
					if _, err := s.Remove(books[i].ID); err != nil {
						t.Fatal(err)
					}
					books = slices.Delete(books, i, i+1)
				}
			}
			for range 20 {
				ends := g.Nodes()
				a, b := ends[rng.IntN(len(ends))], ends[rng.IntN(len(ends))]
				paths := allPaths(g, a, b)
				if a == b || len(paths) == 0 {
					continue
				}
				p := paths[rng.IntN(len(paths))]
				m := rng.IntN(70) - 5
				bw := uint64(1 + rng.IntN(12))
				st, en := at(m), at(m+1+rng.IntN(25))
				err := s.Admit(p, bw, st, en)
				if err != nil && !errors.Is(err, ErrCapacity) {
					t.Fatal(err)
				}
				if want := bruteAdmit(g, books, p, bw, st, en); (err == nil) != want {
					t.Fatalf("Admit(%v, %d, [%d, +%s)) = %v, brute force: %v", p, bw, m, en.Sub(st), err, want)
				}
				for _, h := range p {
					if got, _ := s.MinResidual(h, st, en); got != bruteResidual(g, books, h, st, en) {
						t.Fatalf("MinResidual(%v) = %d, brute force %d", h, got, bruteResidual(g, books, h, st, en))
					}
				}
				checks++
			}
		}
	}
	if checks < 1000 {
		t.Errorf("only %d checks ran", checks)
	}
}

func TestScheduleViews(t *testing.T) {
	s := NewSchedule(twoSite(t))
	book(t, s,
		Booking{ID: "z", Path: viaWan, Bandwidth: 100 * mbps, Start: at(0), End: at(60)},
		Booking{ID: "a", Path: viaWan, Bandwidth: 200 * mbps, Start: at(30), End: at(90)})
	if got := s.Bookings(); len(got) != 2 || got[0].ID != "a" || got[1].ID != "z" {
		t.Errorf("Bookings: %+v, want a then z", got)
	}
	wan := Hop{"wan", "ra", "rb"}
	bp, err := s.Breakpoints(wan, at(0), at(90))
	if want := []time.Time{at(0), at(30), at(60)}; err != nil || !slices.EqualFunc(bp, want, time.Time.Equal) {
		t.Errorf("Breakpoints: %v, %v; want %v", bp, err, want)
	}
	for _, tc := range []struct {
		name string
		f    func() error
		want error
	}{
		{"steps: unknown link", func() error { _, err := s.Steps(Hop{"nope", "ra", "rb"}, at(0), at(1)); return err }, ErrUnknownLink},
		{"steps: wrong ends", func() error { _, err := s.Steps(Hop{"wan", "a1", "rb"}, at(0), at(1)); return err }, ErrInvalidPath},
		{"steps: empty interval", func() error { _, err := s.Steps(wan, at(1), at(1)); return err }, ErrInvalidQuery},
		{"breakpoints: end before start", func() error { _, err := s.Breakpoints(wan, at(1), at(0)); return err }, ErrInvalidQuery},
		{"residual: unknown link", func() error { _, err := s.MinResidual(Hop{"nope", "ra", "rb"}, at(0), at(1)); return err }, ErrUnknownLink},
		{"residual: empty interval", func() error { _, err := s.MinResidual(wan, at(1), at(1)); return err }, ErrInvalidQuery},
		{"capacity: wrong ends", func() error { _, err := s.Graph().ReservableCapacity(Hop{"wan", "rb", "rb"}); return err }, ErrInvalidPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f(); !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}
