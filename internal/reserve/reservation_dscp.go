package reserve

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DSCPPool is the set of DSCP values the controller may give reservations
// that steer flows. It is kept sorted, without duplicates and without 0
// (see Reservation.DSCP), which its constructors enforce.
type DSCPPool struct {
	values []uint8
}

// dscpNames are the standard codepoint names (RFC 2474 class selectors,
// RFC 2597 assured forwarding, RFC 3246 EF, RFC 5865 VOICE-ADMIT, RFC 8622
// lower effort), in the lower case that nftables uses too.
var dscpNames = map[string]uint8{
	"le":  1,
	"cs1": 8, "cs2": 16, "cs3": 24, "cs4": 32, "cs5": 40, "cs6": 48, "cs7": 56,
	"af11": 10, "af12": 12, "af13": 14,
	"af21": 18, "af22": 20, "af23": 22,
	"af31": 26, "af32": 28, "af33": 30,
	"af41": 34, "af42": 36, "af43": 38,
	"va": 44, "ef": 46,
}

// DefaultDSCPPool returns the pool used when none is configured: the twelve
// assured-forwarding codepoints (AF11-AF43, whose meaning, "forwarding
// assured up to a rate", is what a reservation gives) and CS1-CS5, 17 in
// all. Left out: CS0 (everyone's default), CS6 and CS7 (routing protocols
// use them), EF and VOICE-ADMIT (hosts mark voice with them), and LE
// (scavenger traffic, the opposite of a guarantee).
func DefaultDSCPPool() DSCPPool {
	p, _ := ParseDSCPPool("af11,af12,af13,af21,af22,af23,af31,af32,af33,af41,af42,af43,cs1,cs2,cs3,cs4,cs5")
	return p
}

// NewDSCPPool builds a pool from values, each from 1 to 63, none twice.
func NewDSCPPool(values ...uint8) (DSCPPool, error) {
	seen := map[uint8]bool{}
	for _, v := range values {
		switch {
		case v == 0:
			return DSCPPool{}, &RequestError{Field: "dscp_pool", Message: "DSCP pool: 0 (CS0) is the default class of all unsteered traffic and cannot identify a reservation"}
		case v > 63:
			return DSCPPool{}, &RequestError{Field: "dscp_pool", Message: fmt.Sprintf("DSCP pool: %d is out of range 1-63", v)}
		case seen[v]:
			return DSCPPool{}, &RequestError{Field: "dscp_pool", Message: fmt.Sprintf("DSCP pool: %s is listed twice", DSCPName(v))}
		}
		seen[v] = true
	}
	if len(values) == 0 {
		return DSCPPool{}, &RequestError{Field: "dscp_pool", Message: "DSCP pool is empty"}
	}
	vs := slices.Clone(values)
	slices.Sort(vs)
	return DSCPPool{values: vs}, nil
}

// ParseDSCPPool parses a pool as configured: values separated by ",", each
// a name (af11, cs1, ef, ...; any case), a number from 1 to 63, or a range
// of numbers "40-47".
func ParseDSCPPool(s string) (DSCPPool, error) {
	var values []uint8
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if v, ok := dscpNames[strings.ToLower(item)]; ok {
			values = append(values, v)
			continue
		}
		lo, hi, isRange := strings.Cut(item, "-")
		a, errA := dscpNumber(lo)
		b, errB := a, error(nil)
		if isRange {
			b, errB = dscpNumber(hi)
		}
		if errA != nil || errB != nil || b < a {
			return DSCPPool{}, &RequestError{Field: "dscp_pool", Message: fmt.Sprintf("DSCP pool %q: %q is not a codepoint: want a name like af11, cs1 or ef, a number from 1 to 63, or a range like 40-47", s, item)}
		}
		for v := a; v <= b; v++ {
			values = append(values, v)
		}
	}
	return NewDSCPPool(values...)
}

func dscpNumber(s string) (uint8, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, strconv.ErrSyntax
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil || n > 63 {
		return 0, strconv.ErrRange
	}
	return uint8(n), nil
}

// DSCPName returns the standard name of a codepoint ("af11", "ef"), or its
// number when it has none.
func DSCPName(v uint8) string {
	for name, x := range dscpNames {
		if x == v {
			return name
		}
	}
	return strconv.Itoa(int(v))
}

// Values returns the pool's values in ascending order.
func (p DSCPPool) Values() []uint8 { return slices.Clone(p.values) }

// Contains reports whether v is in the pool.
func (p DSCPPool) Contains(v uint8) bool {
	_, ok := slices.BinarySearch(p.values, v)
	return ok
}

// String prints the pool in the form ParseDSCPPool reads, by name where a
// value has one.
func (p DSCPPool) String() string {
	s := make([]string, len(p.values))
	for i, v := range p.values {
		s[i] = DSCPName(v)
	}
	return strings.Join(s, ",")
}

// AllocateDSCP picks the DSCP value for r from pool: the lowest value that
// no conflicting reservation holds, where a conflict is another live
// reservation that overlaps r in time and shares any node with it (DESIGN.md:
// each hop maps the value to one class and one routing table, so two such
// reservations must differ, while disjoint ones may reuse a value). Others
// may include r itself (same ID), which is skipped, so a modify can
// re-allocate; if r already holds a value that is still free it keeps it,
// sparing the agents a re-marking. None free is a *DSCPExhaustedError (409).
func AllocateDSCP(pool DSCPPool, r Reservation, others []Reservation) (uint8, error) {
	nodes := r.Nodes()
	used := map[uint8]bool{}
	var by []string
	for _, o := range others {
		if (r.ID != "" && o.ID == r.ID) || !o.State.Live() || o.DSCP == 0 || !o.Overlaps(r) {
			continue
		}
		if !dscpShareNode(nodes, o.Nodes()) {
			continue
		}
		if pool.Contains(o.DSCP) && !used[o.DSCP] {
			by = append(by, o.ID)
		}
		used[o.DSCP] = true
	}
	if r.DSCP != 0 && pool.Contains(r.DSCP) && !used[r.DSCP] {
		return r.DSCP, nil
	}
	for _, v := range pool.values {
		if !used[v] {
			return v, nil
		}
	}
	return 0, &DSCPExhaustedError{PoolSize: len(pool.values), HeldBy: by}
}

// dscpShareNode reports whether sorted node sets a and b meet.
func dscpShareNode(a, b []string) bool {
	for _, n := range a {
		if _, ok := slices.BinarySearch(b, n); ok {
			return true
		}
	}
	return false
}

// DSCPExhaustedError says that every value of the pool is taken by
// reservations that overlap the request in time and share a node with it
// (409: it may succeed at another time or on another path).
type DSCPExhaustedError struct {
	PoolSize int
	// HeldBy lists the IDs of reservations holding the pool's values, one
	// per value.
	HeldBy []string
}

// Error names up to five of the reservations holding the pool, which is
// what an operator needs to see who is using it.
func (e *DSCPExhaustedError) Error() string {
	ids := e.HeldBy
	more := ""
	if len(ids) > 5 {
		ids, more = ids[:5], fmt.Sprintf(" and %d more", len(e.HeldBy)-5)
	}
	return fmt.Sprintf("no DSCP value is free: all %d in the pool are held by reservations that overlap this one in time and share a node with it (%s%s)",
		e.PoolSize, strings.Join(ids, ", "), more)
}

// Unwrap makes a DSCPExhaustedError match ErrConflict.
func (e *DSCPExhaustedError) Unwrap() error { return ErrConflict }
