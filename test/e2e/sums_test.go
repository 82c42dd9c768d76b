//go:build linux

package e2e

import (
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// TestSparseSums copies a sparse file with --adler32 both ways with small
// blocks, so most blocks travel as holes: the whole-file CRC32C and adler32
// each end joins (holes included, whose sums the receiver does not keep)
// must be those of the file.
func TestSparseSums(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	src := filepath.Join(dir, "sparse.img")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	const size = 40<<20 + 1234 // a short last block
	for _, off := range []int64{0, 9<<20 + 77, size - 100} {
		if _, err := f.WriteAt([]byte("some data in a sea of zeros"), off); err != nil {
			t.Fatal(err)
		}
	}
	f.Truncate(size)
	f.Close()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	wantCRC := fmt.Sprintf("%08x", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	wantAdler := fmt.Sprintf("%08x", adler32.Checksum(b))
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)
	check := func(what string, args ...string) {
		t.Helper()
		out, errs, code := runCp(t, append([]string{"--json", "--adler32", "--block-size", "64KiB"}, args...)...)
		mustSucceed(t, what, result{out, errs, code})
		_, lines := parseNDJSON(t, out, cpSummaryFields...)
		found := false
		for _, l := range lines {
			if l["type"] != "file" {
				continue
			}
			found = true
			if l["crc32c"] != wantCRC || l["adler32"] != wantAdler {
				t.Errorf("%s: crc32c %v adler32 %v, want %s %s", what, l["crc32c"], l["adler32"], wantCRC, wantAdler)
			}
		}
		if !found {
			t.Errorf("%s: no file line", what)
		}
	}
	check("push", src, srv.URL("sparse.img"))
	sameFile(t, src, filepath.Join(root, "sparse.img"))
	check("pull", srv.URL("sparse.img"), filepath.Join(dir, "back.img"))
	sameFile(t, src, filepath.Join(dir, "back.img"))
}
