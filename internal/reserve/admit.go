package reserve

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/lightpath/lightpath/internal/units"
)

// Errors of admission and of the book of bookings, for errors.Is.
var (
	// ErrCapacity: the bandwidth does not fit (see CapacityError).
	ErrCapacity = errors.New("not enough reservable capacity")
	// ErrDuplicateBooking: a booking of that ID is already in the schedule.
	ErrDuplicateBooking = errors.New("duplicate booking")
	// ErrUnknownBooking: no booking of that ID is in the schedule.
	ErrUnknownBooking = errors.New("unknown booking")
)

// Booking is bandwidth held on a directed path over a half-open interval of
// time [Start, End): what the scheduler counts, whatever the reservation's
// state (held or committed) or other attributes.
type Booking struct {
	ID        string
	Path      []Hop
	Bandwidth uint64 // bits per second
	Start     time.Time
	End       time.Time
}

// CapacityError says why a booking was not admitted: at instant At, in the
// direction Hop of one link of the path, Used bits per second were already
// booked and Requested more would exceed the reservable Capacity. At is the
// first such instant (of the first such hop). It matches ErrCapacity.
type CapacityError struct {
	Hop       Hop
	At        time.Time
	Used      uint64
	Requested uint64
	Capacity  uint64
}

// Error says where, when and by how much the booking does not fit.
func (e *CapacityError) Error() string {
	if e.Requested > e.Capacity {
		return fmt.Sprintf("link %s from %s to %s: %s requested is more than the %s reservable", e.Hop.Link, e.Hop.From, e.Hop.To,
			units.FormatRate(float64(e.Requested)), units.FormatRate(float64(e.Capacity)))
	}
	return fmt.Sprintf("link %s from %s to %s at %s: %s booked and %s requested exceed the %s reservable", e.Hop.Link, e.Hop.From, e.Hop.To,
		e.At.Format(time.RFC3339Nano), units.FormatRate(float64(e.Used)), units.FormatRate(float64(e.Requested)), units.FormatRate(float64(e.Capacity)))
}

// Is makes a CapacityError match ErrCapacity.
func (e *CapacityError) Is(target error) bool { return target == ErrCapacity }

// Schedule is a Graph with the bookings made on it: one Timeline per link
// direction. It answers admission (Admit) and the scheduling queries
// (schedule.go). Queries never modify it, so any number may run at once;
// Add and Remove must be serialised against everything else by the caller.
type Schedule struct {
	g        *Graph
	tl       []Timeline // per direction of the graph
	bookings map[string]booked
	pref     PathPreference // "" is PreferDedicated
}

// booked is a Booking with its directions.
type booked struct {
	b    Booking
	dirs []int32
	s, e int64
}

// NewSchedule returns a Schedule of g with nothing booked.
func NewSchedule(g *Graph) *Schedule {
	s := &Schedule{g: g, tl: make([]Timeline, len(g.dirs)), bookings: make(map[string]booked)}
	for i := range s.tl {
		s.tl[i].capacity = g.dirs[i].capacity
	}
	return s
}

// Graph returns the graph the schedule is on.
func (s *Schedule) Graph() *Graph { return s.g }

// Len returns the number of bookings.
func (s *Schedule) Len() int { return len(s.bookings) }

// Booking returns the booking of that ID, and whether there is one.
func (s *Schedule) Booking(id string) (Booking, bool) {
	b, ok := s.bookings[id]
	if !ok {
		return Booking{}, false
	}
	c := b.b
	c.Path = slices.Clone(c.Path)
	return c, true
}

// Bookings returns every booking, sorted by ID.
func (s *Schedule) Bookings() []Booking {
	out := make([]Booking, 0, len(s.bookings))
	for _, b := range s.bookings {
		c := b.b
		c.Path = slices.Clone(c.Path)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Booking) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// check validates a path, a bandwidth and an interval.
func (s *Schedule) check(path []Hop, bw uint64, start, end time.Time) (dirs []int32, st, en int64, err error) {
	if dirs, err = s.g.pathDirs("", "", path); err != nil {
		return nil, 0, 0, err
	}
	if bw == 0 {
		return nil, 0, 0, fmt.Errorf("%w: the bandwidth is zero", ErrInvalidQuery)
	}
	if st, en, err = span(start, end); err != nil {
		return nil, 0, 0, err
	}
	return dirs, st, en, nil
}

// Admit decides exactly whether bw bits per second fit along path over
// [start, end): in each direction of every link of the path, at every
// instant, the bookings plus bw stay within the reservable capacity. It
// returns nil if so, a *CapacityError (matching ErrCapacity) saying where
// and when it does not, or an error for an invalid path or query.
//
// Cost: per hop a binary search and a walk over the breakpoints inside the
// interval, O(hops · (log K + k)).
func (s *Schedule) Admit(path []Hop, bw uint64, start, end time.Time) error {
	dirs, st, en, err := s.check(path, bw, start, end)
	if err != nil {
		return err
	}
	return s.admit(dirs, bw, st, en)
}

func (s *Schedule) admit(dirs []int32, bw uint64, st, en int64) error {
	for _, d := range dirs {
		t := &s.tl[d]
		if at, used, over := t.overflow(st, en, bw); over {
			return &CapacityError{Hop: s.g.hop(d), At: timeOf(at), Used: used, Requested: bw, Capacity: t.capacity}
		}
	}
	return nil
}

// Add books b if Admit accepts it: the booking's ID must be new (and not
// empty). Nothing is booked on an error.
func (s *Schedule) Add(b Booking) error {
	if b.ID == "" {
		return fmt.Errorf("%w: the booking has no ID", ErrInvalidQuery)
	}
	if _, dup := s.bookings[b.ID]; dup {
		return fmt.Errorf("%w %q", ErrDuplicateBooking, b.ID)
	}
	dirs, st, en, err := s.check(b.Path, b.Bandwidth, b.Start, b.End)
	if err != nil {
		return fmt.Errorf("booking %s: %w", b.ID, err)
	}
	if err := s.admit(dirs, b.Bandwidth, st, en); err != nil {
		return fmt.Errorf("booking %s: %w", b.ID, err)
	}
	for _, d := range dirs {
		s.tl[d].add(st, en, b.Bandwidth)
	}
	b.Path = slices.Clone(b.Path)
	s.bookings[b.ID] = booked{b: b, dirs: dirs, s: st, e: en}
	return nil
}

// Remove releases the booking of that ID and returns it.
func (s *Schedule) Remove(id string) (Booking, error) {
	b, ok := s.bookings[id]
	if !ok {
		return Booking{}, fmt.Errorf("%w %q", ErrUnknownBooking, id)
	}
	for _, d := range b.dirs {
		s.tl[d].sub(b.s, b.e, b.b.Bandwidth)
	}
	delete(s.bookings, id)
	return b.b, nil
}

// timeline returns the timeline of direction h.
func (s *Schedule) timeline(h Hop) (*Timeline, error) {
	d, err := s.g.dirOf(h)
	if err != nil {
		return nil, err
	}
	return &s.tl[d], nil
}

// MinResidual returns the bandwidth free throughout [start, end) in the
// direction h of its link.
func (s *Schedule) MinResidual(h Hop, start, end time.Time) (uint64, error) {
	t, err := s.timeline(h)
	if err != nil {
		return 0, err
	}
	st, en, err := span(start, end)
	if err != nil {
		return 0, err
	}
	return t.residual(st, en), nil
}

// Steps returns what is booked and free in the direction h of its link over
// [start, end), as consecutive steps (a link's timeline, for display).
func (s *Schedule) Steps(h Hop, start, end time.Time) ([]Step, error) {
	t, err := s.timeline(h)
	if err != nil {
		return nil, err
	}
	if _, _, err := span(start, end); err != nil {
		return nil, err
	}
	return t.Steps(start, end), nil
}

// Breakpoints returns the instants in [start, end) at which the booked
// bandwidth changes in the direction h of its link.
func (s *Schedule) Breakpoints(h Hop, start, end time.Time) ([]time.Time, error) {
	t, err := s.timeline(h)
	if err != nil {
		return nil, err
	}
	if _, _, err := span(start, end); err != nil {
		return nil, err
	}
	return t.Breakpoints(start, end), nil
}

// lastBreak returns the last breakpoint of any direction: from it on,
// nothing is booked anywhere.
func (s *Schedule) lastBreak() int64 {
	n := int64(math.MinInt64)
	for i := range s.tl {
		n = max(n, s.tl[i].last())
	}
	return n
}
