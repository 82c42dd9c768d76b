//go:build linux

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Filesystems on which a copy must stay sparse.
const (
	tmpfsMagic = 0x01021994
	ext4Magic  = 0xEF53
)

// checkSparse checks name still occupies little space on disk, where its
// filesystem keeps holes.
func checkSparse(t *testing.T, name string) {
	t.Helper()
	var fsst syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(name), &fsst); err != nil {
		t.Fatal(err)
	}
	if fsst.Type != tmpfsMagic && fsst.Type != ext4Magic {
		t.Logf("%s: filesystem type %#x: sparseness not checked", name, fsst.Type)
		return
	}
	var st syscall.Stat_t
	if err := syscall.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > 1<<20 {
		t.Errorf("%s: %d bytes allocated for %d apparent: the holes were filled in", name, used, st.Size)
	}
}

func TestPushPullMixedTree(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	src := mkdir(t, dir, "src")
	mt := makeMixedTree(t, src)
	checkSparse(t, filepath.Join(src, mt.sparse)) // the source itself, or the test means nothing
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)

	// Push the tree under a new name: the copy takes that name.
	s := cpOK(t, "-r", "-P", "2", "--block-size", "64KiB", src, srv.URL("tree"))
	if s.Direction != "push" {
		t.Errorf("direction %q, want push", s.Direction)
	}
	if want := mt.files + mt.symlinks; s.Files != want {
		t.Errorf("push summary: files %d, want %d (files and symlinks)", s.Files, want)
	}
	if s.Bytes != mt.bytes {
		t.Errorf("push summary: bytes %d, want %d", s.Bytes, mt.bytes)
	}
	if s.BytesSent >= mt.sparseSize {
		t.Errorf("push summary: bytes_sent %d: the sparse file's holes were sent as data", s.BytesSent)
	}
	compareTrees(t, src, filepath.Join(root, "tree"))
	checkSparse(t, filepath.Join(root, "tree", mt.sparse))

	// The server's transfer log: one line per file, one for the session.
	var files, sessions int
	for _, l := range srv.TransferLog() {
		switch l["kind"] {
		case "file":
			files++
			if l["status"] != "ok" || l["op"] != "put" {
				t.Errorf("transfer log: %v", l)
			}
		case "session":
			sessions++
			if l["status"] != "ok" || l["op"] != "put" {
				t.Errorf("transfer log: %v", l)
			}
		}
	}
	if files < mt.files || sessions != 1 {
		t.Errorf("transfer log: %d file lines, %d session lines; want at least %d and 1", files, sessions, mt.files)
	}

	// Pull it back under a new local name.
	local := mkdir(t, dir, "local")
	s = cpOK(t, "-r", "-P", "2", "--block-size", "64KiB", srv.URL("tree"), filepath.Join(local, "pulled"))
	if s.Direction != "pull" {
		t.Errorf("direction %q, want pull", s.Direction)
	}
	if want := mt.files + mt.symlinks; s.Files != want {
		t.Errorf("pull summary: files %d, want %d", s.Files, want)
	}
	compareTrees(t, src, filepath.Join(local, "pulled"))
	checkSparse(t, filepath.Join(local, "pulled", mt.sparse))

	// Pull into an existing directory: the tree lands inside it.
	s = cpOK(t, "-r", srv.URL("tree"), local)
	compareTrees(t, src, filepath.Join(local, "tree"))
}

func TestSingleFile(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	src := filepath.Join(dir, "data.bin")
	writeRandom(t, src, 1<<20+17, 11)
	mt := time.Date(2020, 1, 2, 3, 4, 5, 600000000, time.UTC)
	os.Chmod(src, 0o640)
	os.Chtimes(src, mt, mt)
	root := mkdir(t, dir, "root")
	mkdir(t, root, "existing")
	srv := startServer(t, root)

	cases := []struct {
		name     string
		args     []string
		wantFile string // the path the copy must take
	}{
		{"push to a new name", []string{src, srv.URL("b")}, filepath.Join(root, "b")},
		{"push into an existing dir", []string{src, srv.URL("existing")}, filepath.Join(root, "existing", "data.bin")},
		{"push into a new dir named with /", []string{src, srv.URL("fresh/")}, filepath.Join(root, "fresh", "data.bin")},
		{"push to a new name in new dirs", []string{src, srv.URL("x/y/z.bin")}, filepath.Join(root, "x", "y", "z.bin")},
		{"pull to a new name", []string{srv.URL("b"), filepath.Join(dir, "pulled.bin")}, filepath.Join(dir, "pulled.bin")},
		{"pull into an existing dir", []string{srv.URL("existing/data.bin"), mkdir(t, dir, "into")}, filepath.Join(dir, "into", "data.bin")},
		{"pull into a new dir named with /", []string{srv.URL("b"), filepath.Join(dir, "newdir") + "/"}, filepath.Join(dir, "newdir", "b")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := cpOK(t, tc.args...)
			if s.Files != 1 || s.Bytes != 1<<20+17 {
				t.Errorf("summary: files %d bytes %d, want 1 file of %d bytes", s.Files, s.Bytes, 1<<20+17)
			}
			compareEntry(t, src, tc.wantFile, tc.name)
		})
	}
	t.Run("several sources into a new dir", func(t *testing.T) {
		other := filepath.Join(dir, "other.txt")
		writeFile(t, other, "another source\n", 0o600)
		s := cpOK(t, src, other, srv.URL("multi"))
		if s.Files != 2 {
			t.Errorf("summary: files %d, want 2", s.Files)
		}
		compareEntry(t, src, filepath.Join(root, "multi", "data.bin"), "multi/data.bin")
		compareEntry(t, other, filepath.Join(root, "multi", "other.txt"), "multi/other.txt")
		s = cpOK(t, srv.URL("multi/data.bin"), srv.URL("multi/other.txt"), filepath.Join(dir, "multi-back"))
		compareEntry(t, src, filepath.Join(dir, "multi-back", "data.bin"), "multi-back/data.bin")
		compareEntry(t, other, filepath.Join(dir, "multi-back", "other.txt"), "multi-back/other.txt")
	})
	t.Run("onto an identical file named as the destination", func(t *testing.T) {
		// What an earlier run delivered is already there, not refused.
		s := cpOK(t, src, srv.URL("b"))
		if s.FilesSkipped != 1 || s.BytesSent != 0 {
			t.Errorf("summary: files_skipped %d bytes_sent %d; want 1, 0", s.FilesSkipped, s.BytesSent)
		}
	})
	t.Run("onto an existing file named as the destination", func(t *testing.T) {
		// cp SRC DST where DST is another file: refused without --overwrite,
		// whether its size differs or only its content.
		for _, size := range []int64{1 << 20, 1<<20 + 17} {
			writeRandom(t, filepath.Join(root, "b"), size, 12)
			before := stateOf(t, filepath.Join(root, "b"))
			out, errs, code := runCp(t, src, srv.URL("b"))
			checkFailure(t, "push onto an existing file", result{out, errs, code}, "--overwrite")
			checkUntouched(t, filepath.Join(root, "b"), before)
		}
	})
}

func TestIPv6(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	ln.Close()
	dir := scratchDir(t)
	src := mkdir(t, dir, "src")
	writeRandom(t, filepath.Join(src, "a"), 300<<10, 21)
	writeRandom(t, filepath.Join(src, "sub", "b"), 5<<20, 22)
	setTimes(t, src, time.Date(2022, 5, 6, 7, 8, 9, 0, time.UTC))
	root := mkdir(t, dir, "root")
	srv := startServerOpts(t, serverOpts{host: "::1"}, root)
	if !strings.HasPrefix(srv.URL(""), "lp://[::1]:") {
		t.Fatalf("URL %s", srv.URL(""))
	}
	cpOK(t, "-r", "-P", "2", src, srv.URL("v6"))
	compareTrees(t, src, filepath.Join(root, "v6"))
	cpOK(t, "-r", srv.URL("v6"), filepath.Join(dir, "back"))
	compareTrees(t, src, filepath.Join(dir, "back"))
	s, _ := parseNDJSON(t, runLP(t, runOpts{}, "bench", srv.URL(""), "-t", "300ms", "--json").stdout)
	if s.ThroughputBps <= 0 {
		t.Errorf("bench over IPv6: throughput %v", s.ThroughputBps)
	}
}

func TestExistingDestination(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)
	src := filepath.Join(dir, "f.dat")
	dst := filepath.Join(root, "f.dat")
	old := time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)
	writeFile(t, dst, "the old content, which must survive", 0o600)
	os.Chtimes(dst, old, old)
	writeRandom(t, src, 200<<10, 31)
	srcTime := time.Date(2023, 7, 8, 9, 10, 11, 120000000, time.UTC)
	os.Chtimes(src, srcTime, srcTime)

	t.Run("refused by default", func(t *testing.T) {
		before := stateOf(t, dst)
		out, errs, code := runCp(t, "--json", src, srv.URL("f.dat"))
		checkFailure(t, "cp onto an existing file", result{out, errs, code}, "--overwrite", "--skip-existing", "--update")
		if s := parseSummary(t, out); s.Verified || s.FilesFailed != 1 {
			t.Errorf("summary: verified %v, files_failed %d; want false, 1", s.Verified, s.FilesFailed)
		}
		checkUntouched(t, dst, before)
	})
	t.Run("refused by default on pull too", func(t *testing.T) {
		local := filepath.Join(dir, "local.dat")
		writeFile(t, local, "local content", 0o644)
		before := stateOf(t, local)
		out, errs, code := runCp(t, srv.URL("f.dat"), local)
		checkFailure(t, "pull onto an existing file", result{out, errs, code}, "--overwrite", "--skip-existing", "--update")
		checkUntouched(t, local, before)
	})
	t.Run("skip-existing leaves it", func(t *testing.T) {
		before := stateOf(t, dst)
		s := cpOK(t, "--skip-existing", src, srv.URL("f.dat"))
		if s.FilesSkipped != 1 || s.BytesSent != 0 {
			t.Errorf("summary: files_skipped %d bytes_sent %d; want 1, 0", s.FilesSkipped, s.BytesSent)
		}
		checkUntouched(t, dst, before)
	})
	t.Run("overwrite replaces it", func(t *testing.T) {
		cpOK(t, "--overwrite", src, srv.URL("f.dat"))
		compareEntry(t, src, dst, "f.dat")
	})
	t.Run("update skips an identical file", func(t *testing.T) {
		before := stateOf(t, dst)
		s := cpOK(t, "--update", src, srv.URL("f.dat"))
		if s.FilesSkipped != 1 || s.BytesSent != 0 {
			t.Errorf("summary: files_skipped %d bytes_sent %d; want 1, 0", s.FilesSkipped, s.BytesSent)
		}
		checkUntouched(t, dst, before)
	})
	t.Run("update replaces a file whose content differs", func(t *testing.T) {
		// Same size and mtime, other content: only the checksum tells.
		writeRandom(t, src, 200<<10, 32)
		os.Chtimes(src, srcTime, srcTime)
		s := cpOK(t, "--update", src, srv.URL("f.dat"))
		if s.FilesSkipped != 0 {
			t.Errorf("summary: files_skipped %d, want 0", s.FilesSkipped)
		}
		compareEntry(t, src, dst, "f.dat")
	})
	t.Run("update replaces a file whose time differs", func(t *testing.T) {
		newer := srcTime.Add(time.Hour)
		writeRandom(t, src, 200<<10, 33)
		os.Chtimes(src, newer, newer)
		cpOK(t, "--update", src, srv.URL("f.dat"))
		compareEntry(t, src, dst, "f.dat")
	})
	t.Run("flags exclude each other", func(t *testing.T) {
		out, errs, code := runCp(t, "--overwrite", "--update", src, srv.URL("f.dat"))
		checkFailure(t, "cp --overwrite --update", result{out, errs, code}, "exclude")
	})
}

func TestManySmallFiles(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	src := mkdir(t, dir, "small")
	const n = 2000
	for i := range n {
		size := int64(1024 + (i*7919)%(7*1024+1))
		writeRandom(t, filepath.Join(src, fmt.Sprintf("d%02d", i%40), fmt.Sprintf("f%04d.dat", i)), size, uint64(1000+i))
	}
	setTimes(t, src, time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC))
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)
	s := cpOK(t, "-r", src, srv.URL(""))
	if s.Files != n {
		t.Errorf("summary: files %d, want %d", s.Files, n)
	}
	compareTrees(t, src, filepath.Join(root, "small"))
}

func TestBench(t *testing.T) {
	t.Parallel()
	root := scratchDir(t)
	srv := startServer(t, root)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"send", nil},
		{"reverse", []string{"--reverse"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"bench", srv.URL(""), "-P", "2", "-t", "1s", "--json"}, tc.args...)
			r := runLP(t, runOpts{timeout: 2 * time.Minute}, args...)
			mustSucceed(t, strings.Join(args, " "), r)
			s, lines := parseNDJSON(t, r.stdout, "throughput_bps", "streams", "per_stream", "seconds", "bytes")
			if s.ThroughputBps <= 0 || s.Bytes <= 0 {
				t.Errorf("throughput %v bytes %d, want > 0", s.ThroughputBps, s.Bytes)
			}
			if len(s.PerStream) != 2 {
				t.Fatalf("per_stream has %d entries, want 2", len(s.PerStream))
			}
			for i, ps := range s.PerStream {
				if ps.RTTMs == nil || ps.Cwnd == nil {
					t.Errorf("per_stream[%d] lacks rtt_ms or cwnd: %s", i, r.stdout)
				} else if *ps.Cwnd == 0 {
					t.Errorf("per_stream[%d]: cwnd 0", i)
				}
			}
			t.Logf("%s: %.2f Gbit/s, %d lines", tc.name, s.ThroughputBps/1e9, len(lines))
		})
	}
}

// TestOddNames copies names that are legal on POSIX filesystems but trip up
// path handling: each must arrive as it is, both ways.
func TestOddNames(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)
	deep := strings.Repeat("level-of-a-deep-tree/", 30) + "leaf"
	for i, tc := range []struct{ name, file string }{
		{"backslash", `back\slash.txt`},
		{"newline", "new\nline"},
		{"tab and quotes", "tab\t\"quoted\" 'single'"},
		{"leading dash", "-rf"},
		{"colon and percent", "c:%2e%2e%2fescape"},
		{"not UTF-8", "latin1-\xe9\xff"},
		{"hidden", ".hidden"},
		{"dots only in name", "..."},
		{"255 bytes", strings.Repeat("n", 255)},
		{"deep", deep},
		{"suffix like ours but not ours", "x.lightpath-partial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := mkdir(t, dir, fmt.Sprintf("src%d", i))
			writeRandom(t, filepath.Join(src, tc.file), 1000+int64(i), uint64(200+i))
			setTimes(t, src, time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC))
			cpOK(t, "-r", src, srv.URL(fmt.Sprintf("t%d", i)))
			compareTrees(t, src, filepath.Join(root, fmt.Sprintf("t%d", i)))
			back := filepath.Join(dir, fmt.Sprintf("back%d", i))
			cpOK(t, "-r", srv.URL(fmt.Sprintf("t%d", i)), back)
			compareTrees(t, src, back)
		})
	}
}

// TestVeryLargeSparseFile pushes and pulls a 64 GiB file that holds three
// small data regions: the holes must travel as holes (nothing like 64 GiB
// may cross the wire), and the copies must have the same data at the same
// offsets and the same size.
func TestVeryLargeSparseFile(t *testing.T) {
	t.Parallel()
	src := scratchDir(t)
	root := scratchDir(t)
	local := scratchDir(t)
	const size = 64 << 30
	name := filepath.Join(src, "huge.img")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	regions := []int64{0, 17<<30 + 12345, size - 4096}
	for i, off := range regions {
		if _, err := f.WriteAt([]byte(strings.Repeat(string(rune('a'+i)), 4096)), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// This kernel may back a small write with a large folio (4 MiB here), so
	// "sparse" means a tiny fraction of the size, not a few pages.
	mostlyHoles := func(name string) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(name, &st); err != nil {
			t.Fatal(err)
		}
		if used := st.Blocks * 512; used > 64<<20 {
			t.Errorf("%s: %d bytes allocated for %d apparent: the holes were filled in", name, used, st.Size)
		}
	}
	mostlyHoles(name)
	srv := startServer(t, root)

	check := func(what, got string) {
		t.Helper()
		fi, err := os.Stat(got)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != size {
			t.Fatalf("%s: size %d, want %d", what, fi.Size(), size)
		}
		mostlyHoles(got)
		g, err := os.Open(got)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for i, off := range regions {
			b := make([]byte, 4096)
			if _, err := g.ReadAt(b, off); err != nil {
				t.Fatal(err)
			}
			if want := strings.Repeat(string(rune('a'+i)), 4096); string(b) != want {
				t.Fatalf("%s: data at %d differs", what, off)
			}
		}
		// Between the regions: zeros.
		b := make([]byte, 1<<20)
		if _, err := g.ReadAt(b, 40<<30); err != nil {
			t.Fatal(err)
		}
		for _, c := range b {
			if c != 0 {
				t.Fatalf("%s: non-zero byte inside a hole", what)
			}
		}
	}
	s := cpOK(t, name, srv.URL("huge.img"))
	if s.BytesSent > 64<<20 || s.BytesSparse < size-64<<20 {
		t.Errorf("push: bytes_sent %d, bytes_sparse %d: the holes were sent as data", s.BytesSent, s.BytesSparse)
	}
	check("push", filepath.Join(root, "huge.img"))
	s = cpOK(t, srv.URL("huge.img"), filepath.Join(local, "huge.img"))
	if s.BytesSent > 64<<20 {
		t.Errorf("pull: bytes_sent %d: the holes were sent as data", s.BytesSent)
	}
	check("pull", filepath.Join(local, "huge.img"))
}
