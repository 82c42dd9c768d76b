package plan

import (
	"path"
	"strings"
	"testing"
)

// FuzzDestPath: whatever the source, file and destination (they come
// from users and from a data node's listing), a file lands under the
// destination, on a clean relative path that cannot lead out of it.
func FuzzDestPath(f *testing.F) {
	f.Add("run1", "run1/a/b.dat", "in")
	f.Add("x/y.dat", "x/y.dat", ".")
	f.Add(".", "a/../../b", "/in/../..")
	f.Add("/", "//", "")
	f.Fuzz(func(t *testing.T, source, file, dest string) {
		got := DestPath(source, file, dest)
		d := underRoot(dest)
		switch {
		case got != path.Clean(got) || strings.HasPrefix(got, "/") || got == "":
			t.Fatalf("DestPath(%q, %q, %q) = %q: not clean and relative", source, file, dest, got)
		case got == ".." || strings.HasPrefix(got, "../") || strings.Contains(got, "/../") || strings.HasSuffix(got, "/.."):
			t.Fatalf("DestPath(%q, %q, %q) = %q: leads out", source, file, dest, got)
		case d != "." && got != d && !strings.HasPrefix(got, d+"/"):
			t.Fatalf("DestPath(%q, %q, %q) = %q: not under %q", source, file, dest, got, d)
		}
	})
}

// FuzzSplit: shares add up, none is negative, zero weights get nothing
// unless all are zero.
func FuzzSplit(f *testing.F) {
	f.Add(int64(10), 1.0, 1.0, 1.0)
	f.Add(int64(1<<62), 1e308, 1e-308, 0.0)
	f.Fuzz(func(t *testing.T, size int64, a, b, c float64) {
		w := []float64{a, b, c}
		got := Split(size, w)
		var sum int64
		some := false
		for _, x := range w {
			some = some || x > 0
		}
		for i, s := range got {
			if s < 0 || (some && !(w[i] > 0) && s != 0) {
				t.Fatalf("Split(%d, %v) = %v", size, w, got)
			}
			sum += s
		}
		if size > 0 && sum != size || size <= 0 && sum != 0 {
			t.Fatalf("Split(%d, %v) = %v: sums to %d", size, w, got, sum)
		}
	})
}
