package mover

import (
	"bytes"
	"context"
	"errors"
	"hash/adler32"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/checksum"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/wire"
)

// pushPart pushes part of the local file to remote, telling its verdicts
// to results.
func pushPart(ctx context.Context, t *testing.T, cfg ClientConfig, file, remote string, part *Part, opts Options, results *partResults) (Summary, error) {
	t.Helper()
	src := sourceOf(t, file, false)
	var onFile func(FileResult)
	if results != nil {
		onFile = results.add
	}
	return Copy(ctx, Job{Config: cfg, Options: opts, Direction: Push, Source: src, Remote: remote, Part: part, OnFile: onFile})
}

// partResults gathers verdicts from several copies.
type partResults struct {
	mu  sync.Mutex
	all []FileResult
}

func (p *partResults) add(fr FileResult) {
	p.mu.Lock()
	p.all = append(p.all, fr)
	p.mu.Unlock()
}

func (p *partResults) complete() []FileResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []FileResult
	for _, fr := range p.all {
		if fr.Complete {
			out = append(out, fr)
		}
	}
	return out
}

// noWorkFiles fails if a partial file or journal is left in dir.
func noWorkFiles(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if isWorkFile(e.Name()) {
			t.Errorf("%s left behind", e.Name())
		}
	}
}

// TestPartPushConcurrent: two parts of one file pushed at once by two
// copies to one server fill one partial file; exactly one verdict says
// Complete, with the whole file's checksums, and each part's checksum is
// its bytes'.
func TestPartPushConcurrent(t *testing.T) {
	for _, adler := range []bool{false, true} {
		t.Run(map[bool]string{false: "crc32c", true: "adler32"}[adler], func(t *testing.T) {
			root, local := t.TempDir(), t.TempDir()
			addr := serveLoopback(t, root)
			const bs = 256 << 10
			data := makeTree(t, local, map[string]int{"big.bin": 5<<20 + 123})["big.bin"]
			file := filepath.Join(local, "big.bin")
			cfg := ClientConfig{Addr: addr, Streams: 2, BlockSize: bs, Tuning: Tuning{DSCP: -1}}
			parts := []*Part{{Offset: 0, Length: 3 << 20}, {Offset: 3 << 20, Length: int64(len(data)) - 3<<20}}
			var res partResults
			var wg sync.WaitGroup
			errs := make([]error, len(parts))
			sums := make([]Summary, len(parts))
			for i, p := range parts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sums[i], errs[i] = pushPart(context.Background(), t, cfg, file, "in/big.bin", p, Options{Adler32: adler}, &res)
				}()
			}
			wg.Wait()
			for i := range parts {
				if errs[i] != nil || !sums[i].Verified || sums[i].Bytes != parts[i].Length || sums[i].BytesSent != parts[i].Length {
					t.Errorf("part %d: %v, %+v", i, errs[i], sums[i])
				}
			}
			got, err := os.ReadFile(filepath.Join(root, "in", "big.bin"))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("the file at the server differs (%v)", err)
			}
			noWorkFiles(t, filepath.Join(root, "in"))
			c := res.complete()
			if len(c) != 1 {
				t.Fatalf("%d verdicts say Complete, want 1: %+v", len(c), res.all)
			}
			if c[0].FileCRC32C != checksum.CRC32C(data) {
				t.Errorf("whole-file crc32c %08x, want %08x", c[0].FileCRC32C, checksum.CRC32C(data))
			}
			if adler && c[0].FileAdler32 != adler32.Checksum(data) {
				t.Errorf("whole-file adler32 %08x, want %08x", c[0].FileAdler32, adler32.Checksum(data))
			}
			for _, fr := range res.all {
				if fr.Part == nil || !fr.OK || fr.Skipped {
					t.Errorf("verdict %+v", fr)
					continue
				}
				b := data[fr.Part.Offset : fr.Part.Offset+fr.Part.Length]
				if fr.CRC32C != checksum.CRC32C(b) || fr.Size != fr.Part.Length {
					t.Errorf("part %+v: crc32c %08x, size %d; want %08x, %d", *fr.Part, fr.CRC32C, fr.Size, checksum.CRC32C(b), len(b))
				}
				if adler && fr.Adler32 != adler32.Checksum(b) {
					t.Errorf("part %+v: adler32 %08x, want %08x", *fr.Part, fr.Adler32, adler32.Checksum(b))
				}
			}
		})
	}
}

// TestPartPushSequence: parts pushed one after the other; nothing is
// under the final name until the last part is in; the same part again
// finds the file complete and equal (Skipped and Complete) under update,
// the default and skip.
func TestPartPushSequence(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr := serveLoopback(t, root)
	const bs = 64 << 10
	data := makeTree(t, local, map[string]int{"f.bin": 10*bs + 5})["f.bin"]
	file := filepath.Join(local, "f.bin")
	cfg := ClientConfig{Addr: addr, Streams: 2, BlockSize: bs, Tuning: Tuning{DSCP: -1}}
	final := filepath.Join(root, "in", "f.bin")
	// Last part first, then the middle, then the first.
	parts := []*Part{{Offset: 8 * bs, Length: 2*bs + 5}, {Offset: 3 * bs, Length: 5 * bs}, {Offset: 0, Length: 3 * bs}}
	for i, p := range parts {
		var res partResults
		sum, err := pushPart(context.Background(), t, cfg, file, "in/f.bin", p, Options{}, &res)
		if err != nil || !sum.Verified || len(res.all) != 1 {
			t.Fatalf("part %d: %v, %+v, %+v", i, err, sum, res.all)
		}
		fr := res.all[0]
		last := i == len(parts)-1
		if fr.Complete != last {
			t.Errorf("part %d: Complete %v, want %v", i, fr.Complete, last)
		}
		if _, err := os.Stat(final); (err == nil) != last {
			t.Errorf("after part %d the final name exists: %v", i, err == nil)
		}
		if last && fr.FileCRC32C != checksum.CRC32C(data) {
			t.Errorf("whole-file crc32c %08x, want %08x", fr.FileCRC32C, checksum.CRC32C(data))
		}
	}
	if got, _ := os.ReadFile(final); !bytes.Equal(got, data) {
		t.Fatal("the file at the server differs")
	}
	noWorkFiles(t, filepath.Join(root, "in"))
	for _, pol := range []Policy{Update, Refuse, Skip} {
		var res partResults
		sum, err := pushPart(context.Background(), t, cfg, file, "in/f.bin", parts[1], Options{Policy: pol}, &res)
		if err != nil || sum.BytesSent != 0 || len(res.all) != 1 {
			t.Fatalf("policy %d: %v, %+v", pol, err, sum)
		}
		fr := res.all[0]
		if !fr.OK || !fr.Skipped || !fr.Complete {
			t.Errorf("policy %d: %+v, want skipped and complete", pol, fr)
		}
		if pol != Skip && (fr.FileCRC32C != checksum.CRC32C(data) || fr.CRC32C != checksum.CRC32C(data[3*bs:8*bs])) {
			t.Errorf("policy %d: crc32c %08x of the file, %08x of the part", pol, fr.FileCRC32C, fr.CRC32C)
		}
	}
	noWorkFiles(t, filepath.Join(root, "in"))
}

// journalRecords counts the blocks a journal records.
func journalRecords(path string) int {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() < journalHeader {
		return 0
	}
	return int(fi.Size()-journalHeader) / 8
}

// TestPartResume: a part push killed midway leaves its blocks journaled;
// the same part pushed again sends only the blocks the journal lacks, and
// the other part then completes the file.
func TestPartResume(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr := serveLoopback(t, root)
	const bs = 1 << 20
	data := makeTree(t, local, map[string]int{"big.bin": 26 << 20})["big.bin"]
	file := filepath.Join(local, "big.bin")
	part := &Part{Offset: 2 << 20, Length: 24 << 20}
	journal := filepath.Join(root, "in", ".big.bin"+journalSuffix)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow := ClientConfig{Addr: addr, Streams: 2, BlockSize: bs, Tuning: Tuning{DSCP: -1, Rate: 40e6}}
	done := make(chan error, 1)
	go func() {
		_, err := pushPart(ctx, t, slow, file, "in/big.bin", part, Options{}, nil)
		done <- err
	}()
	deadline := time.After(2 * time.Minute)
	for journalRecords(journal) < 2 {
		select {
		case err := <-done:
			t.Fatalf("the paced part ended before it was killed: %v", err)
		case <-deadline:
			t.Fatal("no block of the part arrived")
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the killed part push succeeded")
	}
	// Pushed again: the blocks the journal holds are offered and not sent.
	cfg := ClientConfig{Addr: addr, Streams: 2, BlockSize: bs, Tuning: Tuning{DSCP: -1}}
	var res partResults
	sum, err := pushPart(context.Background(), t, cfg, file, "in/big.bin", part, Options{}, &res)
	if err != nil || !sum.Verified {
		t.Fatalf("resumed part: %v, %+v", err, sum)
	}
	if sum.BytesSkipped < 2*bs || sum.BytesSent+sum.BytesSkipped != part.Length {
		t.Errorf("resumed part sent %d bytes and found %d there; want at least 2 blocks there and the rest of the %d sent",
			sum.BytesSent, sum.BytesSkipped, part.Length)
	}
	if len(res.all) != 1 || res.all[0].Complete || res.all[0].CRC32C != checksum.CRC32C(data[part.Offset:part.Offset+part.Length]) {
		t.Errorf("resumed part's verdict: %+v", res.all)
	}
	res = partResults{}
	sum, err = pushPart(context.Background(), t, cfg, file, "in/big.bin", &Part{Offset: 0, Length: 2 << 20}, Options{}, &res)
	if err != nil || sum.BytesSent != 2<<20 || len(res.complete()) != 1 || res.complete()[0].FileCRC32C != checksum.CRC32C(data) {
		t.Fatalf("first part: %v, %+v, %+v", err, sum, res.all)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "in", "big.bin")); !bytes.Equal(got, data) {
		t.Fatal("the file at the server differs")
	}
	noWorkFiles(t, filepath.Join(root, "in"))
}

// TestPartExclusion: while parts of a file are being written, a whole push
// of it is refused, and so is a part of it with another block size; the
// room the file needs is set aside once for all its parts, and given back
// when they are done.
func TestPartExclusion(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	srv, addr := serveServer(t, ServerConfig{Root: root})
	const bs = 1 << 20
	const size = 24 << 20
	data := makeTree(t, local, map[string]int{"big.bin": size})["big.bin"]
	file := filepath.Join(local, "big.bin")
	journal := filepath.Join(root, "in", ".big.bin"+journalSuffix)
	slow := ClientConfig{Addr: addr, Streams: 2, BlockSize: bs, Tuning: Tuning{DSCP: -1, Rate: 40e6}}
	var res partResults
	done := make(chan error, 2)
	push := func(p *Part) {
		_, err := pushPart(context.Background(), t, slow, file, "in/big.bin", p, Options{}, &res)
		done <- err
	}
	waitRecords := func(n int) {
		deadline := time.After(2 * time.Minute)
		for journalRecords(journal) < n {
			select {
			case <-deadline:
				t.Fatalf("the journal holds %d blocks, want %d", journalRecords(journal), n)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	go push(&Part{Offset: 0, Length: size / 2})
	waitRecords(1)
	cfg := ClientConfig{Addr: addr, Streams: 1, BlockSize: bs, Tuning: Tuning{DSCP: -1}}
	_, err := pushPart(context.Background(), t, cfg, file, "in/big.bin", nil, Options{Policy: Overwrite}, nil)
	var ff *FilesFailedError
	if !errors.As(err, &ff) || !strings.Contains(ff.First, "another transfer is writing it now") || !PartRetryable(ff.First) {
		t.Errorf("whole push during a part: %v", err)
	}
	cfg.BlockSize = bs / 2
	_, err = pushPart(context.Background(), t, cfg, file, "in/big.bin", &Part{Offset: size / 2, Length: size / 2}, Options{}, nil)
	if !errors.As(err, &ff) || !strings.Contains(ff.First, errPartOther.Error()) || !PartRetryable(ff.First) {
		t.Errorf("part of another block size during a part: %v", err)
	}
	go push(&Part{Offset: size / 2, Length: size / 2})
	waitRecords(journalRecords(journal) + 2)
	srv.space.mu.Lock()
	reserved := srv.space.reserved
	srv.space.mu.Unlock()
	if reserved > size {
		t.Errorf("%d bytes set aside for a file of %d being received in two parts", reserved, size)
	}
	if _, err := os.Stat(filepath.Join(root, "in", "big.bin")); err == nil {
		t.Error("half a file is under its final name")
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("a part: %v", err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(root, "in", "big.bin")); !bytes.Equal(got, data) || len(res.complete()) != 1 {
		t.Fatalf("the file at the server differs, or not one verdict says complete: %+v", res.all)
	}
	if srv.space.reserved != 0 {
		t.Errorf("%d bytes still set aside after the parts", srv.space.reserved)
	}
}

// TestPartRefused: parts that cannot work are refused before connecting
// (nothing listens at the address), with permanent errors.
func TestPartRefused(t *testing.T) {
	local := t.TempDir()
	makeTree(t, local, map[string]int{"f.bin": 3 << 20, "g.bin": 10})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := ClientConfig{Addr: addr, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}}
	open := func(p string) SourceItem {
		it, err := OpenSource(filepath.Join(local, p), true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { it.Root.Close() })
		return it
	}
	one := Source{Items: []SourceItem{open("f.bin")}}
	for _, tc := range []struct {
		name string
		job  Job
		want string
	}{
		{"unaligned offset", Job{Source: one, Part: &Part{Offset: 4096, Length: 1 << 20}}, "not a multiple of the block size"},
		{"unaligned end", Job{Source: one, Part: &Part{Offset: 0, Length: 1<<20 + 1}}, "neither on a block boundary"},
		{"beyond the size", Job{Source: one, Part: &Part{Offset: 2 << 20, Length: 2 << 20}}, "outside its"},
		{"empty", Job{Source: one, Part: &Part{Offset: 1 << 20, Length: 0}}, "outside its"},
		{"directory", Job{Source: Source{Items: []SourceItem{open(".")}}, Part: &Part{Offset: 0, Length: 1 << 20}}, "not a regular file"},
		{"several sources", Job{Source: Source{Items: []SourceItem{open("f.bin"), open("g.bin")}}, Part: &Part{Offset: 0, Length: 1 << 20}}, "exactly one source"},
		{"pull", Job{Direction: Pull, Paths: []string{"f.bin"}, Part: &Part{Offset: 0, Length: 1 << 20}}, "never pulled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := tc.job
			j.Config, j.Remote, j.Retries = cfg, "in/f.bin", 3
			if j.Direction == "" {
				j.Direction = Push
			}
			sum, err := Copy(context.Background(), j)
			if err == nil || !errors.Is(err, ErrRefused) || !retry.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) || sum.Attempts > 1 {
				t.Errorf("err = %v (attempts %d), want a permanent refusal saying %q", err, sum.Attempts, tc.want)
			}
		})
	}
}

// TestPartOldServer: a part push to a server of protocol version 3 fails
// with a permanent error before any request is sent.
func TestPartOldServer(t *testing.T) {
	addr, after := oldServer(t, 3)
	local := t.TempDir()
	makeTree(t, local, map[string]int{"f.bin": 100})
	cfg := ClientConfig{Addr: addr, Streams: 1, Tuning: Tuning{DSCP: -1}}
	_, err := pushPart(context.Background(), t, cfg, filepath.Join(local, "f.bin"), "in/f.bin", &Part{Offset: 0, Length: 100}, Options{}, nil)
	if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), "protocol version 3, and a part push needs 4") {
		t.Fatalf("part push to a version 3 server: %v", err)
	}
	if m := <-after; m.err == nil {
		t.Errorf("the old server was sent %v", m.m)
	}
}

// TestPartGrant: a part push needs a write grant covering its path, as a
// whole push does.
func TestPartGrant(t *testing.T) {
	gs := serveGranted(t, nil)
	local := t.TempDir()
	data := makeTree(t, local, map[string]int{"f.bin": 2 << 20})["f.bin"]
	file := filepath.Join(local, "f.bin")
	cfg := ClientConfig{Addr: gs.addr, Streams: 1, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}}
	cfg.Grant = gs.sign(t, func(g *grant.Grant) { g.Paths = []string{"other"} })
	_, err := pushPart(context.Background(), t, cfg, file, "in/f.bin", &Part{Offset: 0, Length: 1 << 20}, Options{}, nil)
	if err == nil || !retry.IsPermanent(err) || !errors.Is(err, ErrRefused) {
		t.Fatalf("part push outside the grant: %v", err)
	}
	cfg.Grant = gs.sign(t, nil)
	for _, p := range []*Part{{Offset: 1 << 20, Length: 1 << 20}, {Offset: 0, Length: 1 << 20}} {
		if sum, err := pushPart(context.Background(), t, cfg, file, "in/f.bin", p, Options{}, nil); err != nil || !sum.Verified {
			t.Fatalf("part push within the grant: %v", err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(gs.root, "in", "f.bin")); !bytes.Equal(got, data) {
		t.Fatal("the file at the server differs")
	}
}

func TestPartRetryable(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   bool
	}{
		{"in/f.bin: another transfer is writing it now", true},
		{"in/f.bin: another version of the file is being received in parts (size, time, block size or adler32 differ): try again when they are done", true},
		{"checksum mismatch: received crc32c 00000001, sent 00000002", false},
		{"destination in/f.bin exists (use --overwrite, --skip-existing or --update)", false},
		{"", false},
	} {
		if got := PartRetryable(tc.reason); got != tc.want {
			t.Errorf("PartRetryable(%q) = %v, want %v", tc.reason, got, tc.want)
		}
	}
}

// TestPartFinishesFile: a file whose blocks are all at the server but that
// was never put in place (its sessions died after the last block) is put
// in place by a part push, which sends nothing.
func TestPartFinishesFile(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr := serveLoopback(t, root)
	const bs = 64 << 10
	data := makeTree(t, local, map[string]int{"f.bin": 4 * bs})["f.bin"]
	file := filepath.Join(local, "f.bin")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	// What the sessions left: the partial file and a journal of every block.
	if err := os.MkdirAll(filepath.Join(root, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "in", ".f.bin"+partSuffix), data, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	j, err := createJournal(r, "in/.f.bin"+journalSuffix, wire.Entry{Size: fi.Size(), MTime: fi.ModTime().UnixNano()}, bs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := j.record(uint32(i), checksum.CRC32C(data[i*bs:(i+1)*bs])); err != nil {
			t.Fatal(err)
		}
	}
	j.close()
	cfg := ClientConfig{Addr: addr, Streams: 1, BlockSize: bs, Tuning: Tuning{DSCP: -1}}
	var res partResults
	sum, err := pushPart(context.Background(), t, cfg, file, "in/f.bin", &Part{Offset: 2 * bs, Length: 2 * bs}, Options{Policy: Update}, &res)
	if err != nil || sum.BytesSent != 0 || len(res.complete()) != 1 || res.complete()[0].FileCRC32C != checksum.CRC32C(data) {
		t.Fatalf("part of a file whose blocks are all there: %v, %+v, %+v", err, sum, res.all)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "in", "f.bin")); !bytes.Equal(got, data) {
		t.Fatal("the file at the server differs")
	}
	noWorkFiles(t, filepath.Join(root, "in"))
}
