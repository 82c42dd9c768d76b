package workload

import (
	"fmt"
	"hash/fnv"
	"testing"
)

// The values are those monbench generated before the generator moved here
// (the hash of 3 pushes of every node, 250,000 series, seed 1, computed
// with the old code).
func TestSameValuesAsBefore(t *testing.T) {
	w, err := New(250_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	for i := range w.Nodes() {
		for range 3 {
			_, pts := w.Next(i)
			for _, p := range pts {
				fmt.Fprintf(h, "%s %s %s %v\n", w.NodeName(i), p.Name, p.Labels, p.V)
			}
		}
	}
	if got := fmt.Sprintf("%016x", h.Sum64()); got != "9863f53602995ec5" {
		t.Fatalf("hash %s, want 9863f53602995ec5", got)
	}
}

func TestTimestampsAndBatch(t *testing.T) {
	w, err := New(10_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	if w.Nodes() != 50 || w.SeriesPerNode() != 200 || w.Interfaces() != 10 {
		t.Fatalf("nodes %d, per node %d, interfaces %d", w.Nodes(), w.SeriesPerNode(), w.Interfaces())
	}
	w2, _ := New(10_000, 7)
	for k := range int64(5) {
		b := w.NextBatch(3)
		if b.Seq != uint64(k) || (k == 0) != (b.Meta != nil) || b.Node != "n003" {
			t.Fatalf("push %d: seq %d, meta %v, node %s", k, b.Seq, b.Meta != nil, b.Node)
		}
		base := Start.UnixMilli() + k*Interval.Milliseconds()
		if d := b.Groups[0].T - base; d < -Jitter || d > Jitter {
			t.Fatalf("push %d: jitter %d ms", k, d)
		}
		// the same push from another order of nodes
		w2.Next(int(k%3) * 10)
		t2, pts := w2.Next(3)
		if t2 != b.Groups[0].T || pts[17].V != b.Groups[0].Points[17].V {
			t.Fatalf("push %d differs with another node order", k)
		}
	}
	if _, err := New(12_345, 1); err == nil {
		t.Fatal("New accepted 12345 series")
	}
}
