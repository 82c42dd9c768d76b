package plan

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lightpath/lightpath/internal/transfer"
)

func TestPairs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src, dst []Node
		want     []PairCap
	}{
		{name: "no source node", dst: []Node{{Name: "b1"}}},
		{name: "no destination node", src: []Node{{Name: "a1"}}},
		{
			name: "one pair: the least known limit",
			src:  []Node{{Name: "a1", AccessBps: 1000, MaxRateBps: 600}},
			dst:  []Node{{Name: "b1", AccessBps: 800}},
			want: []PairCap{{From: "a1", To: "b1", CapBps: 600}},
		},
		{
			name: "nothing known",
			src:  []Node{{Name: "a1"}},
			dst:  []Node{{Name: "b1"}},
			want: []PairCap{{From: "a1", To: "b1"}},
		},
		{
			name: "2x2, sorted by name, each node in one pair",
			src:  []Node{{Name: "a2", AccessBps: 300}, {Name: "a1", AccessBps: 100}},
			dst:  []Node{{Name: "b2", AccessBps: 200}, {Name: "b1", AccessBps: 500}},
			want: []PairCap{{From: "a1", To: "b1", CapBps: 100}, {From: "a2", To: "b2", CapBps: 200}},
		},
		{
			name: "3x2: the destination node in two pairs gives each half",
			src:  []Node{{Name: "c", AccessBps: 300}, {Name: "a", AccessBps: 300}, {Name: "b", AccessBps: 300}},
			dst:  []Node{{Name: "y", AccessBps: 300}, {Name: "x", AccessBps: 300}},
			want: []PairCap{
				{From: "a", To: "x", CapBps: 150},
				{From: "b", To: "y", CapBps: 300},
				{From: "c", To: "x", CapBps: 150},
			},
		},
		{
			name: "1x3: the source's max rate shared three ways, an unknown access ignored",
			src:  []Node{{Name: "a", MaxRateBps: 900}},
			dst:  []Node{{Name: "x", AccessBps: 1000}, {Name: "y"}, {Name: "z", AccessBps: 200}},
			want: []PairCap{
				{From: "a", To: "x", CapBps: 300},
				{From: "a", To: "y", CapBps: 300},
				{From: "a", To: "z", CapBps: 200},
			},
		},
		{
			name: "a tiny limit shared stays known",
			src:  []Node{{Name: "a", AccessBps: 1}},
			dst:  []Node{{Name: "x"}, {Name: "y"}},
			want: []PairCap{{From: "a", To: "x", CapBps: 1}, {From: "a", To: "y", CapBps: 1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := slices.Clone(tc.src)
			got := Pairs(tc.src, tc.dst)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Pairs = %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(src, tc.src) {
				t.Errorf("Pairs reordered its input: %+v", tc.src)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		size    int64
		weights []float64
		want    []int64
	}{
		{"no weights", 10, nil, []int64{}},
		{"zero size", 0, []float64{1, 2}, []int64{0, 0}},
		{"negative size", -5, []float64{1, 2}, []int64{0, 0}},
		{"one weight takes all", 7, []float64{0.3}, []int64{7}},
		{"proportional", 400, []float64{100, 300}, []int64{100, 300}},
		{"rounding: thirds", 10, []float64{1, 1, 1}, []int64{3, 4, 3}},
		{"rounding: one byte over three", 1, []float64{1, 1, 1}, []int64{0, 1, 0}},
		{"rounding: two bytes over three", 2, []float64{1, 1, 1}, []int64{1, 0, 1}},
		{"a zero weight gets nothing", 5, []float64{0, 1, 1}, []int64{0, 3, 2}},
		{"all zero: even, the first get the rest", 10, []float64{0, 0, 0}, []int64{4, 3, 3}},
		{"negative and NaN count as zero", 9, []float64{-4, math.NaN(), 3}, []int64{0, 0, 9}},
		{"only negative: even", 4, []float64{-1, -1}, []int64{2, 2}},
		{"an infinite weight takes all", 6, []float64{5, math.Inf(1), 7}, []int64{0, 6, 0}},
		{"huge weights do not overflow", 100, []float64{math.MaxFloat64, math.MaxFloat64}, []int64{50, 50}},
		{"the largest size", math.MaxInt64, []float64{1, 1}, []int64{math.MaxInt64/2 + 1, math.MaxInt64 / 2}},
		{"tiny weight next to a large one", 1000, []float64{1e-12, 1}, []int64{0, 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Split(tc.size, tc.weights); !slices.Equal(got, tc.want) {
				t.Errorf("Split(%d, %v) = %v, want %v", tc.size, tc.weights, got, tc.want)
			}
		})
	}
}

// TestSplitProperty: random sizes and weights; the shares add up, none
// is negative, a zero weight gets nothing (unless all are zero), and each
// is within one of its exact proportion.
func TestSplitProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		n := 1 + r.IntN(8)
		w := make([]float64, n)
		var total float64
		for i := range w {
			if r.IntN(4) > 0 {
				w[i] = r.Float64() * math.Pow(10, float64(r.IntN(12)))
			}
			total += w[i]
		}
		size := r.Int64N(1 << uint(1+r.IntN(50)))
		got := Split(size, w)
		var sum int64
		for i, s := range got {
			sum += s
			if s < 0 {
				t.Fatalf("Split(%d, %v) = %v: a negative share", size, w, got)
			}
			if total > 0 && w[i] == 0 && s != 0 {
				t.Fatalf("Split(%d, %v) = %v: a zero weight got %d", size, w, got, s)
			}
			if total > 0 {
				exact := float64(size) * w[i] / total
				if math.Abs(float64(s)-exact) > 1+exact*1e-9 {
					t.Fatalf("Split(%d, %v) = %v: share %d is %d, exactly %.3f", size, w, got, i, s, exact)
				}
			}
		}
		if sum != size {
			t.Fatalf("Split(%d, %v) = %v: sums to %d", size, w, got, sum)
		}
	}
}

func files(sizes ...int64) []transfer.JobFile {
	f := make([]transfer.JobFile, len(sizes))
	for i, s := range sizes {
		f[i] = transfer.JobFile{Path: string(rune('a' + i)), Size: s}
	}
	return f
}

func TestBatches(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sizes    []int64
		maxFiles int
		maxBytes int64
		want     [][]string // paths per batch
	}{
		{name: "no files", maxFiles: 2, maxBytes: 10},
		{name: "by count", sizes: []int64{1, 1, 1, 1, 1}, maxFiles: 2, maxBytes: 100, want: [][]string{{"a", "b"}, {"c", "d"}, {"e"}}},
		{name: "by bytes", sizes: []int64{4, 4, 4, 2, 9}, maxFiles: 10, maxBytes: 10, want: [][]string{{"a", "b"}, {"c", "d"}, {"e"}}},
		{name: "exactly the byte limit", sizes: []int64{5, 5, 5}, maxFiles: 10, maxBytes: 10, want: [][]string{{"a", "b"}, {"c"}}},
		{name: "a large file alone", sizes: []int64{1, 50, 1, 1}, maxFiles: 10, maxBytes: 10, want: [][]string{{"a"}, {"b"}, {"c", "d"}}},
		{name: "large files first and last", sizes: []int64{50, 60, 1}, maxFiles: 10, maxBytes: 10, want: [][]string{{"a"}, {"b"}, {"c"}}},
		{name: "no limits", sizes: []int64{1, 2, 3}, want: [][]string{{"a", "b", "c"}}},
		{name: "empty files count by number", sizes: []int64{0, 0, 0}, maxFiles: 2, maxBytes: 1, want: [][]string{{"a", "b"}, {"c"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Batches(files(tc.sizes...), tc.maxFiles, tc.maxBytes)
			var paths [][]string
			for _, b := range got {
				var p []string
				for _, f := range b {
					p = append(p, f.Path)
				}
				paths = append(paths, p)
			}
			if !slices.EqualFunc(paths, tc.want, slices.Equal) {
				t.Errorf("Batches = %v, want %v", paths, tc.want)
			}
		})
	}
	t.Run("appending to a batch leaves the next alone", func(t *testing.T) {
		b := Batches(files(1, 1, 1), 1, 0)
		_ = append(b[0], transfer.JobFile{Path: "x"})
		if b[1][0].Path != "b" {
			t.Errorf("the second batch became %v", b[1])
		}
	})
}

func TestDestPath(t *testing.T) {
	for _, tc := range []struct{ source, file, dest, want string }{
		{"run1", "run1/a/b.dat", "in", "in/run1/a/b.dat"},
		{"x/y.dat", "x/y.dat", "in", "in/y.dat"},
		{"run1", "run1/a/b.dat", ".", "run1/a/b.dat"},
		{"x/y.dat", "x/y.dat", ".", "y.dat"},
		{"data/run1", "data/run1/f", "in/2026", "in/2026/run1/f"},
		{"/data/run1/", "/data/run1/f", "/in/", "in/run1/f"},
		{".", "a/b.dat", "in", "in/a/b.dat"},
		{".", "a/b.dat", ".", "a/b.dat"},
		{"run1", "run10/f", "in", "in/f"},          // not under run1: lands as its own name
		{"run1", "run1/../../etc/f", "in", "in/f"}, // cannot lead out
		{"../run1", "run1/f", "../../in", "in/run1/f"},
		{"run1", "run1/./a//b", "in", "in/run1/a/b"},
	} {
		if got := DestPath(tc.source, tc.file, tc.dest); got != tc.want {
			t.Errorf("DestPath(%q, %q, %q) = %q, want %q", tc.source, tc.file, tc.dest, got, tc.want)
		}
	}
}
