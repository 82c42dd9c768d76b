// Package plan is the transfer service's pure planning: which node pairs
// a job runs on and what each can carry (Pairs), how a dataset with a
// deadline is split over them and booked (Deadline, through the
// scheduler the caller passes in as an Ask), how bytes are shared out
// (Split), how files are cut into tasks (Batches) and where a listed
// file lands (DestPath). It does no I/O and keeps no state, so the
// controller calls it inside its transactions and tests call it with
// tables.
package plan

import (
	"math"
	"path"
	"slices"
	"strings"

	"github.com/lightpath/lightpath/internal/transfer"
)

// Node is one live data node of an endpoint, as the planner sees it.
type Node struct {
	Name string
	// AccessBps is the capacity of the node's access link toward the
	// other site, in bits per second; 0 when unknown.
	AccessBps uint64
	// MaxRateBps is the node's `serve --max-rate`; 0 when it has none.
	MaxRateBps uint64
}

// PairCap is a source node and a destination node a job moves files
// between, with the most the pair may carry.
type PairCap struct {
	From, To string
	// CapBps is the least of the known limits of the pair's share of
	// both nodes' access links and max rates, in bits per second; 0 when
	// none is known.
	CapBps uint64
}

// Pairs spreads a job over every node of both endpoints: with the nodes
// of each side sorted by name, k = max(len(src), len(dst)) pairs, the
// i-th being (src[i % len(src)], dst[i % len(dst)]). A node in u pairs
// gives each of them 1/u of its access capacity and of its max rate, so
// the pairs of a node never add up to more than it has. Either side
// empty: no pairs.
func Pairs(src, dst []Node) []PairCap {
	if len(src) == 0 || len(dst) == 0 {
		return nil
	}
	s, d := sortedNodes(src), sortedNodes(dst)
	k := max(len(s), len(d))
	out := make([]PairCap, k)
	for i := range k {
		a, b := s[i%len(s)], d[i%len(d)]
		ua, ub := uses(k, len(s), i%len(s)), uses(k, len(d), i%len(d))
		out[i] = PairCap{From: a.Name, To: b.Name, CapBps: leastKnown(
			part(a.AccessBps, ua), part(a.MaxRateBps, ua),
			part(b.AccessBps, ub), part(b.MaxRateBps, ub))}
	}
	return out
}

func sortedNodes(n []Node) []Node {
	s := slices.Clone(n)
	slices.SortStableFunc(s, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// uses is how many of k pairs, dealt round-robin over n nodes, node i is
// in.
func uses(k, n, i int) uint64 {
	u := k / n
	if i < k%n {
		u++
	}
	return uint64(u)
}

// part is a known limit shared u ways; it stays known (at least 1 bit/s)
// however small.
func part(limit, u uint64) uint64 {
	if limit == 0 {
		return 0
	}
	return max(limit/u, 1)
}

// leastKnown is the smallest non-zero value, or 0 when all are 0.
func leastKnown(v ...uint64) uint64 {
	var m uint64
	for _, x := range v {
		if x != 0 && (m == 0 || x < m) {
			m = x
		}
	}
	return m
}

// Split shares size out in proportion to weights, exactly: the shares
// sum to size, none is negative, and each is within one of its exact
// proportion. A zero (or negative, or NaN) weight gets 0 unless every
// weight is zero, when size is shared evenly (the first ones get the
// remainder). An infinite weight takes everything (shared evenly among
// the infinite ones). A size ≤ 0 gives all zeros.
func Split(size int64, weights []float64) []int64 {
	out := make([]int64, len(weights))
	if size <= 0 || len(weights) == 0 {
		return out
	}
	// Scale the usable weights to at most 1 so that their sum cannot
	// overflow; infinite ones become 1 and the finite ones then 0.
	w := make([]float64, len(weights))
	var top float64
	for i, x := range weights {
		if x > 0 { // false for NaN
			w[i] = x
			top = max(top, x)
		}
	}
	if top == 0 {
		each, rest := size/int64(len(w)), size%int64(len(w))
		for i := range out {
			out[i] = each
			if int64(i) < rest {
				out[i]++
			}
		}
		return out
	}
	var total float64
	last := 0
	for i, x := range w {
		switch {
		case math.IsInf(top, 1):
			w[i] = 0
			if math.IsInf(x, 1) {
				w[i] = 1
			}
		default:
			w[i] = x / top
		}
		if w[i] > 0 {
			last = i
		}
		total += w[i]
	}
	// Cumulative rounding: share i runs from round(size·C(i-1)/total) to
	// round(size·C(i)/total), C(i) the running sum. The bounds never go
	// down, so no share is negative, and the last one is size, so the
	// shares add up.
	var cum float64
	var prev int64
	for i, x := range w {
		if x == 0 {
			continue
		}
		cum += x
		bound := size
		if i != last {
			if f := math.Round(float64(size) * (cum / total)); f < float64(size) { // also keeps int64 from overflowing
				bound = max(int64(f), prev)
			}
		}
		out[i] = bound - prev
		prev = bound
	}
	return out
}

// Batches cuts files, in order, into consecutive batches (one copy task
// each) of at most maxFiles files and maxBytes bytes; a file larger than
// maxBytes on its own goes alone in its batch. A limit ≤ 0 is no limit.
// The batches share files' array; each is capped, so appending to one
// cannot overwrite the next.
func Batches(files []transfer.JobFile, maxFiles int, maxBytes int64) [][]transfer.JobFile {
	var out [][]transfer.JobFile
	start := 0
	var bytes int64
	for i, f := range files {
		n := i - start
		if n > 0 && ((maxFiles > 0 && n >= maxFiles) || (maxBytes > 0 && bytes+f.Size > maxBytes)) {
			out = append(out, files[start:i:i])
			start, bytes = i, 0
		}
		bytes += f.Size
	}
	if start < len(files) {
		out = append(out, files[start:len(files):len(files)])
	}
	return out
}

// DestPath is where a listed file lands under the destination endpoint's
// root: the source's last element goes into dest, as cp puts a file or a
// tree into a directory. Source "run1" (a tree) with file "run1/a/b.dat"
// into dest "in" gives "in/run1/a/b.dat"; source and file "x/y.dat" give
// "in/y.dat"; a source "." (the endpoint's root) puts its contents
// straight into dest, and dest "." is the root. All three are taken under
// their root (leading "/" and ".." cannot lead out) and the result is
// clean and relative. A file that is not under source lands as its own
// last element.
func DestPath(source, file, dest string) string {
	source, file, dest = underRoot(source), underRoot(file), underRoot(dest)
	var rel string
	switch {
	case source == ".":
		rel = file
	case file == source:
		rel = path.Base(source)
	case strings.HasPrefix(file, source+"/"):
		rel = path.Join(path.Base(source), file[len(source)+1:])
	default:
		rel = path.Base(file)
	}
	return path.Join(dest, rel)
}

// underRoot cleans p as a path under a root: relative, no "..", "." for
// the root itself.
func underRoot(p string) string {
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" {
		return "."
	}
	return c
}
