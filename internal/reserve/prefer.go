package reserve

import (
	"fmt"
	"slices"
)

// PathPreference says which of the paths with room for a reservation the
// scheduler picks (DESIGN.md, "Path choice"). Every path-choosing
// algorithm of the package follows it: the single-path ones in their order
// of paths, the joint planner in how its maximum flow splits over paths.
// "Dedicated" and "routed" are a link's role, or its Prefer where set.
type PathPreference string

// The path preferences. The zero value means PreferDedicated.
const (
	// PreferDedicated: the fewest routed link directions first, then the
	// fewest hops, the least delay, the link names in sequence. Reserved
	// flows belong on the circuits; the routed path is everyone's, so it
	// takes only what the dedicated links cannot. The joint planner puts
	// as little of its flow on routed directions as its maximum allows.
	PreferDedicated PathPreference = "dedicated"
	// PreferRouted: the fewest hops, the least delay, the fewest
	// dedicated links, the names (the order before issue 29, which keeps
	// circuits for whoever asks for them by name). The joint planner puts
	// as little as it can on dedicated directions.
	PreferRouted PathPreference = "routed"
	// PreferShortest: the fewest hops, the least delay, the names, the
	// links' roles playing no part. The joint planner's split minimises
	// the hops its flow crosses (the sum over directions of their flow).
	PreferShortest PathPreference = "shortest"
)

// PathPreferences lists the preferences in the order help texts name them.
var PathPreferences = []PathPreference{PreferDedicated, PreferRouted, PreferShortest}

// ParsePathPreference returns the preference spelled s: "dedicated",
// "routed" or "shortest"; the empty string is the default, dedicated.
func ParsePathPreference(s string) (PathPreference, error) {
	switch p := PathPreference(s); p {
	case "":
		return PreferDedicated, nil
	case PreferDedicated, PreferRouted, PreferShortest:
		return p, nil
	}
	return "", fmt.Errorf("unknown path preference %q (want %s, %s or %s)", s, PreferDedicated, PreferRouted, PreferShortest)
}

// SetPathPreference sets the order in which the schedule's queries choose
// paths. Like Add, it must be serialised against everything else; the
// controller sets it once, when it builds the schedule.
func (s *Schedule) SetPathPreference(p PathPreference) error {
	p, err := ParsePathPreference(string(p))
	if err != nil {
		return err
	}
	s.pref = p
	return nil
}

// PathPreference returns the schedule's path preference.
func (s *Schedule) PathPreference() PathPreference {
	if s.pref == "" {
		return PreferDedicated
	}
	return s.pref
}

// pathKey is how a path ranks under a preference, before its link names:
// lexicographically by a, then b, then c (smaller is better). Under
// dedicated, a counts routed hops and b hops (c is the delay); otherwise
// a counts hops. Either way (a, b) grows with every hop, which lets the
// search (bfs) order its frontier by those two small integers alone.
type pathKey struct {
	a, b int64
	c    int64
}

// order returns the search's frontier order of a key: a and, under
// dedicated, b (both below 2³¹: at most one per direction).
func (s *Schedule) order(k pathKey) uint64 {
	if s.PathPreference() == PreferDedicated {
		return uint64(k.a)<<32 | uint64(k.b)
	}
	return uint64(k.a)
}

func (k pathKey) less(o pathKey) bool {
	if k.a != o.a {
		return k.a < o.a
	}
	if k.b != o.b {
		return k.b < o.b
	}
	return k.c < o.c
}

// step returns the key of a path of key k extended by direction x, under
// s's preference.
func (s *Schedule) step(k pathKey, x *dir) pathKey {
	switch s.PathPreference() {
	case PreferRouted:
		k.a++
		k.b += int64(x.delay)
		if x.dedicated {
			k.c++
		}
	case PreferShortest:
		k.a++
		k.b += int64(x.delay)
	default: // dedicated
		if !x.dedicated {
			k.a++
		}
		k.b++
		k.c += int64(x.delay)
	}
	return k
}

// flowCost returns the cost per bit/s of flow in direction x for the joint
// planner's split under s's preference.
func (s *Schedule) flowCost(x *dir) int64 {
	switch s.PathPreference() {
	case PreferRouted:
		if x.dedicated {
			return 1
		}
		return 0
	case PreferShortest:
		return 1
	default:
		if x.dedicated {
			return 0
		}
		return 1
	}
}

// Prefers reports whether path a comes before path b in the order the
// schedule's path choice ranks paths: by its preference, then by the link
// names in sequence. A search with room on both takes a. Both must be
// paths of the graph.
func (s *Schedule) Prefers(a, b []Hop) (bool, error) {
	da, err := s.g.pathDirs("", "", a)
	if err != nil {
		return false, err
	}
	db, err := s.g.pathDirs("", "", b)
	if err != nil {
		return false, err
	}
	ka, kb := s.keyOf(da), s.keyOf(db)
	switch {
	case ka.less(kb):
		return true, nil
	case kb.less(ka):
		return false, nil
	}
	return slices.CompareFunc(da, db, func(x, y int32) int { return int(s.g.dirs[x].link) - int(s.g.dirs[y].link) }) < 0, nil
}

// keyOf is the key of the path along directions ds.
func (s *Schedule) keyOf(ds []int32) pathKey {
	var k pathKey
	for _, d := range ds {
		k = s.step(k, &s.g.dirs[d])
	}
	return k
}
