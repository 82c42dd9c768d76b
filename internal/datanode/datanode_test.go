package datanode

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/transfer/plan"
	"github.com/lightpath/lightpath/internal/transport"
)

func write(t *testing.T, root, rel string, data []byte) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestListSources walks real trees under a root: files and nested
// directories are listed with their sizes; work files are left out; a
// symlink to a file inside the root is listed, one leading out of the
// root (or to a directory) is not followed; a missing source is an error
// naming the endpoint; a source given twice lists its files once.
func TestListSources(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	write(t, root, "run1/a.dat", []byte("aaaa"))
	write(t, root, "run1/sub/b.dat", []byte("bb"))
	write(t, root, "run1/sub/c.dat.lightpath-part", []byte("partial"))
	write(t, root, "run1/sub/c.dat.lightpath-journal", []byte("journal"))
	write(t, root, "run1/empty", nil)
	write(t, root, "other/x.dat", []byte("xxx"))
	write(t, outside, "secret", []byte("secret data"))
	if err := os.Symlink("../other/x.dat", filepath.Join(root, "run1/link-in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "run1/link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../outside", filepath.Join(root, "run1/dir-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(root, "run1/dir-in")); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()

	got, err := listSources(ctx, r, "siteA", []string{"run1", "/other/x.dat", "run1/sub"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]any{ // path -> source, size
		"run1/a.dat":     {"run1", int64(4)},
		"run1/sub/b.dat": {"run1", int64(2)},
		"run1/empty":     {"run1", int64(0)},
		"run1/link-in":   {"run1", int64(3)},
		"other/x.dat":    {"/other/x.dat", int64(3)},
	}
	if len(got) != len(want) {
		t.Errorf("listed %d files, want %d: %+v", len(got), len(want), got)
	}
	for _, f := range got {
		w, ok := want[f.Path]
		if !ok {
			t.Errorf("listed %s, which is not part of the dataset", f.Path)
			continue
		}
		if f.Source != w[0] || f.Size != w[1] {
			t.Errorf("%s: source %q size %d, want %q %d", f.Path, f.Source, f.Size, w[0], w[1])
		}
		if f.MTime.IsZero() {
			t.Errorf("%s: no mtime", f.Path)
		}
	}

	for _, tc := range []struct {
		src, want string
	}{
		{"run7", "run7: no such file or directory under endpoint siteA's root"},
		{"run1/link-out", "run1/link-out: leads outside the root under endpoint siteA's root"},
		{"../outside", "../outside: the path leads out of the endpoint's root"},
	} {
		_, err := listSources(ctx, r, "siteA", []string{tc.src})
		if err == nil || err.Error() != tc.want {
			t.Errorf("list %s: %v, want %q", tc.src, err, tc.want)
		}
	}

	// The timeout stops a walk.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := listSources(cctx, r, "siteA", []string{"run1"}); err == nil {
		t.Error("a listing whose context ended succeeded")
	}
	// The root itself.
	all, err := listSources(ctx, r, "siteA", []string{"."})
	if err != nil || len(all) != 5 {
		t.Errorf("listing the root: %d files, %v; want 5", len(all), err)
	}
}

// TestGroupPushes cuts files into pushes: a tree lands with one push
// whose names keep their directories; files going elsewhere, or renamed,
// make pushes of their own; a path leading out is refused.
func TestGroupPushes(t *testing.T) {
	f := func(src, dst string) transfer.JobFile { return transfer.JobFile{Path: src, Dest: dst} }
	tests := []struct {
		name  string
		files []transfer.JobFile
		want  map[string][]string // remote -> names
		err   string
	}{
		{"tree into a directory", []transfer.JobFile{f("run1/a/b.dat", "in/run1/a/b.dat"), f("run1/c.dat", "in/run1/c.dat"), f("run1/a/d/e", "in/run1/a/d/e")},
			map[string][]string{"in/": {"run1/a/b.dat", "run1/a/d/e", "run1/c.dat"}}, ""},
		{"into the root", []transfer.JobFile{f("data/run1/x", "run1/x"), f("data/run1/y/z", "run1/y/z")},
			map[string][]string{"": {"run1/x", "run1/y/z"}}, ""},
		{"same path", []transfer.JobFile{f("a/b", "a/b")}, map[string][]string{"": {"a/b"}}, ""},
		{"renamed file", []transfer.JobFile{f("raw/one.dat", "in/two.dat")}, map[string][]string{"in/": {"two.dat"}}, ""},
		{"two destinations", []transfer.JobFile{f("a/x", "p/a/x"), f("b/y", "q/r/b/y")},
			map[string][]string{"p/": {"a/x"}, "q/r/": {"b/y"}}, ""},
		{"leading slash", []transfer.JobFile{f("/a/x", "/in/a/x")}, map[string][]string{"in/": {"a/x"}}, ""},
		{"out of the root", []transfer.JobFile{f("../etc/passwd", "in/passwd")}, nil, "not a file path"},
		{"destination out of the root", []transfer.JobFile{f("a", "../a")}, nil, "not a file path"},
		{"the root as a file", []transfer.JobFile{f("a", ".")}, nil, "not a file path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := groupPushes(tc.files)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for _, p := range ps {
				for _, it := range p.Items {
					got[p.Remote] = append(got[p.Remote], it.Name)
				}
				slices.Sort(got[p.Remote])
			}
			if len(got) != len(tc.want) {
				t.Fatalf("pushes %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if !slices.Equal(got[k], v) {
					t.Errorf("remote %q: names %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

// TestChecksumHex words a verdict's checksum in the job's algorithm.
func TestChecksumHex(t *testing.T) {
	tests := []struct {
		algo string
		fr   mover.FileResult
		want string
	}{
		{"", mover.FileResult{OK: true, Size: 3, CRC32C: 0xdeadbeef}, "deadbeef"},
		{transfer.ChecksumCRC32C, mover.FileResult{OK: true, Size: 3, CRC32C: 0x1}, "00000001"},
		{transfer.ChecksumCRC32C, mover.FileResult{OK: true, Size: 0}, "00000000"},
		{transfer.ChecksumCRC32C, mover.FileResult{OK: true, Skipped: true, Size: 9}, ""},
		{transfer.ChecksumAdler32, mover.FileResult{OK: true, Size: 3, CRC32C: 7, Adler32: 0x024d0127, HasAdler: true}, "024d0127"},
		{transfer.ChecksumAdler32, mover.FileResult{OK: true, Size: 3, CRC32C: 7}, ""},
		{transfer.ChecksumAdler32, mover.FileResult{OK: true, Skipped: true, Size: 3, HasAdler: true}, ""},
	}
	for _, tc := range tests {
		if got := checksumHex(tc.algo, tc.fr); got != tc.want {
			t.Errorf("checksumHex(%q, %+v) = %q, want %q", tc.algo, tc.fr, got, tc.want)
		}
	}
}

// TestClassOf: a failure's class as the mover found it, internal where a
// destination older than protocol version 10 did not say, and the
// Permanent older controllers decide by: final for a file not there, a
// refused permission and a full destination; never from the reason's
// words.
func TestClassOf(t *testing.T) {
	for _, tc := range []struct {
		fault     retry.Fault
		class     string
		permanent bool
	}{
		{retry.FaultNotFound, apiv1.ClassNotFound, true},
		{retry.FaultPermission, apiv1.ClassPermission, true},
		{retry.FaultNoSpace, apiv1.ClassNoSpace, true},
		{retry.FaultGrant, apiv1.ClassGrant, false},
		{retry.FaultNetwork, apiv1.ClassNetwork, false},
		{retry.FaultChecksum, apiv1.ClassChecksum, false},
		{retry.FaultInternal, apiv1.ClassInternal, false},
		{"", apiv1.ClassInternal, false},
	} {
		c := classOf(tc.fault)
		if c != tc.class || permanentClass(c) != tc.permanent {
			t.Errorf("fault %q: class %q permanent %v, want %q %v", tc.fault, c, permanentClass(c), tc.class, tc.permanent)
		}
	}
}

// TestReportUnread: a source the push could not read is reported failed
// with its class, by its source path; one that got a verdict is not.
func TestReportUnread(t *testing.T) {
	p := push{Remote: "in/", Items: []pushItem{{Path: "run1/a", Name: "run1/a"}, {Path: "run1/b", Name: "run1/b"}, {Path: "run1/c", Name: "run1/c"}}}
	b := &batcher{}
	reportUnread(p, []mover.SourceError{
		{Path: "run1/a", Reason: "no such file or directory", Fault: retry.FaultNotFound},
		{Path: "run1/b", Reason: "permission denied", Fault: retry.FaultPermission},
	}, map[string]bool{"run1/b": true}, b)
	got := b.take()
	if len(got) != 1 || got[0].Path != "run1/a" || got[0].Class != apiv1.ClassNotFound || !got[0].Permanent || got[0].Error != "no such file or directory" {
		t.Fatalf("reported %+v, want run1/a not-found", got)
	}
}

// TestBatcher gathers verdicts, hands them out once, and takes back a
// batch that could not be sent ahead of what came since.
func TestBatcher(t *testing.T) {
	b := &batcher{}
	b.add(apiv1.FileReport{Path: "a", OK: true, Bytes: 10})
	b.add(apiv1.FileReport{Path: "b", Error: "x"})
	first := b.take()
	if len(first) != 2 || len(b.take()) != 0 {
		t.Fatalf("take: %v", first)
	}
	b.add(apiv1.FileReport{Path: "c", OK: true, Bytes: 5})
	b.putBack(first)
	got := b.take()
	if len(got) != 3 || got[0].Path != "a" || got[1].Path != "b" || got[2].Path != "c" {
		t.Errorf("after putBack: %v", got)
	}
	if b.done != 15 {
		t.Errorf("done %d, want 15", b.done)
	}
}

// serve runs a mover server over root on loopback until the test ends.
func serve(t *testing.T, cfg mover.ServerConfig) string {
	t.Helper()
	srv, err := mover.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := transport.TCP.Listen(context.Background(), "127.0.0.1:0", transport.Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return ln.Addr().String()
}

// TestPushAll runs a copy task's pushes against a real server: a tree of
// nested files lands under its destination paths (names of several
// components), a renamed file under its own name, each verdict carries
// the job's checksum of the file's content, and a missing source file is
// reported failed, permanently, while the others arrive.
func TestPushAll(t *testing.T) {
	for _, algo := range []string{transfer.ChecksumCRC32C, transfer.ChecksumAdler32} {
		t.Run(algo, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			addr := serve(t, mover.ServerConfig{Root: dst})
			contents := map[string][]byte{
				"run1/a/b.dat":   randomBytes(3<<20+5, 1),
				"run1/c.dat":     randomBytes(1000, 2),
				"run1/a/d/e.dat": randomBytes(0, 3),
				"raw/one.dat":    randomBytes(70_000, 4),
			}
			dests := map[string]string{
				"run1/a/b.dat": "in/run1/a/b.dat", "run1/c.dat": "in/run1/c.dat",
				"run1/a/d/e.dat": "in/run1/a/d/e.dat", "raw/one.dat": "elsewhere/two.dat",
				"run1/gone.dat": "in/run1/gone.dat",
			}
			var files []transfer.JobFile
			for p, d := range dests {
				if c, ok := contents[p]; ok {
					write(t, src, p, c)
				}
				files = append(files, transfer.JobFile{Path: p, Dest: d})
			}
			slices.SortFunc(files, func(a, b transfer.JobFile) int { return strings.Compare(a.Path, b.Path) })
			root, err := os.OpenRoot(src)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			n := &node{cfg: Config{Retries: 1}, root: root, log: slog.New(slog.DiscardHandler)}
			w := apiv1.TaskWork{Task: transfer.Task{ID: "k-1", Attempt: 1}, Files: files, Address: addr, Checksum: algo}
			b := &batcher{}
			var meters int
			err = n.pushAll(context.Background(), w, b, func(m *mover.Meter, _ int64) {
				if m != nil {
					meters++
				}
			})
			var ff *mover.FilesFailedError
			if err == nil || !errors.As(err, &ff) {
				t.Fatalf("pushAll: %v, want one file failed", err)
			}
			if meters != 2 {
				t.Errorf("%d pushes, want 2 (in/ and elsewhere/)", meters)
			}
			got := map[string]apiv1.FileReport{}
			for _, r := range b.take() {
				got[r.Path] = r
			}
			for p, c := range contents {
				r, ok := got[p]
				if !ok || !r.OK {
					t.Errorf("%s: verdict %+v", p, r)
					continue
				}
				have, err := os.ReadFile(filepath.Join(dst, dests[p]))
				if err != nil || !bytes.Equal(have, c) {
					t.Errorf("%s at %s: differs (%v)", p, dests[p], err)
				}
				sum := crc32.Checksum(c, crc32.MakeTable(crc32.Castagnoli))
				if algo == transfer.ChecksumAdler32 {
					sum = adler32.Checksum(c)
				}
				if want := hex8(sum); r.Checksum != want {
					t.Errorf("%s: checksum %s, want %s", p, r.Checksum, want)
				}
				if r.Bytes != int64(len(c)) {
					t.Errorf("%s: bytes %d, want %d", p, r.Bytes, len(c))
				}
			}
			if r := got["run1/gone.dat"]; r.OK || !r.Permanent || r.Error == "" {
				t.Errorf("missing source: %+v, want a permanent failure", r)
			}
			if _, err := os.Stat(filepath.Join(dst, "in/run1/gone.dat")); err == nil {
				t.Error("a file that was never sent exists at the destination")
			}
		})
	}
}

func hex8(v uint32) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return string(b)
}

// TestPushAllStops: a task whose context ends stops its push.
func TestPushAllStops(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	addr := serve(t, mover.ServerConfig{Root: dst})
	write(t, src, "big/a.dat", randomBytes(8<<20, 9))
	root, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	n := &node{cfg: Config{Retries: 3}, root: root, log: slog.New(slog.DiscardHandler)}
	w := apiv1.TaskWork{Task: transfer.Task{ID: "k-2", Attempt: 1, RateBps: 8 << 20},
		Files: []transfer.JobFile{{Path: "big/a.dat", Dest: "in/big/a.dat"}}, Address: addr}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = n.pushAll(ctx, w, &batcher{}, func(*mover.Meter, int64) {})
	if err == nil {
		t.Fatal("a push at 1 MB/s of 8 MiB finished within 300ms")
	}
	if _, err := os.Stat(filepath.Join(dst, "in/big/a.dat")); err == nil {
		t.Error("a stopped push left its file under its final name")
	}
}

// TestTaskRate paces a booked task at its booked rate, an unbooked one at
// its share of --max-rate among the running tasks.
func TestTaskRate(t *testing.T) {
	for _, tc := range []struct {
		booked, nodeMax uint64
		running         int
		want            uint64
	}{
		{0, 0, 4, 0},
		{500, 0, 4, 500},
		{0, 1000, 4, 250},
		{0, 1000, 1, 1000},
		{100, 1000, 4, 100},
		{900, 1000, 4, 900},
		{0, 1000, 0, 1000},
	} {
		if got := taskRate(tc.booked, tc.nodeMax, tc.running); got != tc.want {
			t.Errorf("taskRate(%d, %d, %d) = %d, want %d", tc.booked, tc.nodeMax, tc.running, got, tc.want)
		}
	}
}

// TestClientConfigTransport: a task's transport and rate control become
// its pushes' tuning: a UDP job's rate control, fixed at the booked rate
// when it names none and the task has one, fast otherwise; never serve
// --cc, a kernel's, for UDP.
func TestClientConfigTransport(t *testing.T) {
	n := &node{cfg: Config{CC: "cubic", MaxRateBps: 1000}, log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		name          string
		w             apiv1.TaskWork
		transport, cc string
		rate          uint64
	}{
		{"tcp, the node's cc", apiv1.TaskWork{}, "", "cubic", 1000},
		{"tcp, the job's cc", apiv1.TaskWork{CC: "reno"}, "", "reno", 1000},
		{"udp booked", apiv1.TaskWork{Transport: "udp", Task: transfer.Task{RateBps: 500}}, "udp", "fixed", 500},
		{"udp unbooked", apiv1.TaskWork{Transport: "udp"}, "udp", "fast", 1000},
		{"udp, the job's control", apiv1.TaskWork{Transport: "udp", CC: "aimd", Task: transfer.Task{RateBps: 500}}, "udp", "aimd", 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tu := n.clientConfig(tc.w).Tuning
			if tu.Transport != tc.transport || tu.CC != tc.cc || tu.Rate != tc.rate {
				t.Errorf("tuning %+v, want transport %q cc %q rate %d", tu, tc.transport, tc.cc, tc.rate)
			}
		})
	}
}

// TestGrants: a heartbeat's answer gives the server's verifier the
// controller's key and raises its fences, and stops the tasks it names; a
// push carries the task's grant, which the destination checks: a valid
// one lands, a fenced (older) attempt is refused for good.
func TestGrants(t *testing.T) {
	key, err := grant.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	v := grant.NewVerifier("b1", nil)
	src, dst := t.TempDir(), t.TempDir()
	addr := serve(t, mover.ServerConfig{Root: dst, Grants: v})
	write(t, src, "run1/a/x.dat", randomBytes(100_000, 5))
	root, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	// The heartbeat's answer: the key, a fence, a task to stop.
	n := &node{cfg: Config{Retries: 1, Verifier: v}, root: root, log: slog.New(slog.DiscardHandler), tasks: map[string]*running{}}
	ctx, cancel := context.WithCancelCause(context.Background())
	n.tasks["k-old"] = &running{cancel: cancel}
	secret := []byte("b1's receipt secret")
	n.apply(apiv1.DataNodeWork{GrantKey: grant.EncodeKey(pub), ReceiptKey: base64.StdEncoding.EncodeToString(secret),
		Fences: []apiv1.Fence{{Task: "k-1", Attempt: 2}}, Cancel: []string{"k-old"}}, nil)
	if !errors.Is(context.Cause(ctx), errCancelled) {
		t.Errorf("the task named in Cancel was not stopped: %v", context.Cause(ctx))
	}
	// A word about an attempt that is over does not stop the next attempt
	// of the same task, claimed by this node since the heartbeat went.
	next, stopNext := context.WithCancelCause(context.Background())
	n.tasks["k-again"] = &running{cancel: stopNext, work: apiv1.TaskWork{Task: transfer.Task{ID: "k-again", Attempt: 3}}}
	n.apply(apiv1.DataNodeWork{Cancel: []string{"k-again"}}, []apiv1.TaskProgress{{Task: "k-again", Attempt: 2}})
	if context.Cause(next) != nil {
		t.Errorf("attempt 3 was stopped by the answer about attempt 2: %v", context.Cause(next))
	}
	n.apply(apiv1.DataNodeWork{Cancel: []string{"k-again"}}, []apiv1.TaskProgress{{Task: "k-again", Attempt: 3}})
	if !errors.Is(context.Cause(next), errCancelled) {
		t.Errorf("attempt 3 named by the heartbeat was not stopped: %v", context.Cause(next))
	}
	if v.Current("k-1", 1) || !v.Current("k-1", 2) {
		t.Error("the fence of k-1 was not raised to attempt 2")
	}

	sign := func(attempt int) string {
		tok, err := grant.Sign(key, grant.Grant{User: "alice", Job: "j-1", Task: "k-1", Attempt: attempt, Node: "b1",
			Mode: grant.Write, Paths: []string{"in"}, Expires: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	files := []transfer.JobFile{{Path: "run1/a/x.dat", Dest: "in/run1/a/x.dat"}}
	// Attempt 1 is fenced: refused, permanently, nothing written.
	err = n.pushAll(context.Background(), apiv1.TaskWork{Task: transfer.Task{ID: "k-1", Attempt: 1}, Files: files, Address: addr, Grant: sign(1)},
		&batcher{}, func(*mover.Meter, int64) {})
	if err == nil || !retry.IsPermanent(err) {
		t.Errorf("a push of a fenced attempt: %v, want a permanent refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "in/run1/a/x.dat")); err == nil {
		t.Error("a fenced attempt wrote its file")
	}
	// Attempt 2 lands.
	b := &batcher{}
	if err := n.pushAll(context.Background(), apiv1.TaskWork{Task: transfer.Task{ID: "k-1", Attempt: 2}, Files: files, Address: addr, Grant: sign(2)},
		b, func(*mover.Meter, int64) {}); err != nil {
		t.Fatalf("a push with a valid grant: %v", err)
	}
	rs := b.take()
	if len(rs) != 1 || !rs[0].OK {
		t.Fatalf("verdicts %+v", rs)
	}
	// Its verdict carries the destination's receipt, over its own
	// checksum of what it wrote, signed with the secret the heartbeat
	// answer gave its server.
	data, _ := os.ReadFile(filepath.Join(dst, "in/run1/a/x.dat"))
	rc := grant.Receipt{Task: "k-1", Attempt: 2, Path: "in/run1/a/x.dat", Size: int64(len(data)), Algo: transfer.ChecksumCRC32C,
		Sum: fmt.Sprintf("%08x", crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))}
	if rs[0].Checksum != rc.Sum || !rc.Verify(secret, rs[0].Receipt) {
		t.Errorf("verdict %+v: checksum want %s, its receipt does not verify", rs[0], rc.Sum)
	}
	// No grant at all: refused.
	err = n.pushAll(context.Background(), apiv1.TaskWork{Task: transfer.Task{ID: "k-1", Attempt: 2}, Files: files, Address: addr},
		&batcher{}, func(*mover.Meter, int64) {})
	if err == nil || !retry.IsPermanent(err) {
		t.Errorf("a push without a grant: %v, want a permanent refusal", err)
	}
}

// TestRefusal tells a controller's refusal (a configuration to mend)
// from an outage to wait out.
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&client.APIError{Status: 400}, true},
		{&client.APIError{Status: 403}, true},
		{&client.APIError{Status: 404}, true},
		{&client.APIError{Status: 408}, false},
		{&client.APIError{Status: 429}, false},
		{&client.APIError{Status: 503}, false},
		{fmt.Errorf("heartbeat: %w", &client.APIError{Status: 409}), true},
		{errors.New("dial tcp: connection refused"), false},
	} {
		if got := refusal(tc.err); got != tc.want {
			t.Errorf("refusal(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestRepace re-paces a running push from the controller's rates: each
// data stream's pacing cap, read back from its socket, follows a
// heartbeat's rate for the task (shared among the push's streams), a
// claim answer's, and the node's --max-rate shared among its running
// tasks as one ends; a heartbeat answer asked before a claim answer but
// read after it does not undo the claim's rates.
func TestRepace(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	addr := serve(t, mover.ServerConfig{Root: dst})
	data := randomBytes(8<<20, 11)
	write(t, src, "big/a.dat", data)
	root, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	n := &node{cfg: Config{Retries: 1}, root: root, log: slog.New(slog.DiscardHandler), tasks: map[string]*running{}}
	const streams = 2
	w := apiv1.TaskWork{Task: transfer.Task{ID: "k-1", Attempt: 1, RateBps: 8e6, Streams: streams},
		Files: []transfer.JobFile{{Path: "big/a.dat", Dest: "in/big/a.dat"}}, Address: addr}
	task := &running{work: w, booked: w.Task.RateBps}
	n.tasks["k-1"] = task
	n.repace()

	var mu sync.Mutex
	var meter *mover.Meter
	done := make(chan error, 1)
	go func() {
		done <- n.pushAll(context.Background(), w, &batcher{}, func(m *mover.Meter, _ int64) {
			mu.Lock()
			meter = m
			mu.Unlock()
			task.setMeter(m)
		})
	}()
	caps := func() []uint64 {
		mu.Lock()
		m := meter
		mu.Unlock()
		var out []uint64
		if m != nil {
			for _, st := range m.Streams() {
				out = append(out, st.MaxPacingRate)
			}
		}
		return out
	}
	// expect waits until both streams are capped at bps/8/streams bytes/s;
	// a push that ends first fails the test.
	expect := func(what string, bps uint64) {
		t.Helper()
		want := bps / 8 / streams
		for {
			got := caps()
			if len(got) == streams && got[0] == want && got[1] == want {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("%s: the push ended (%v) with its streams capped at %v, want %d each", what, err, got, want)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	now := func(what string, bps uint64) {
		t.Helper()
		want := bps / 8 / streams
		if got := caps(); len(got) != streams || got[0] != want || got[1] != want {
			t.Fatalf("%s: the streams are capped at %v, want %d each", what, got, want)
		}
	}
	expect("claimed at 8 Mbit/s", 8e6)

	// A heartbeat's answer raises it.
	if !n.takeRates([]apiv1.TaskRate{{Task: "k-1", Attempt: 1, RateBps: 64e6}}, false, n.claimsSoFar()) {
		t.Fatal("a heartbeat's rates were not taken")
	}
	now("after a heartbeat's 64 Mbit/s", 64e6)
	// Rates for another attempt are not this one's.
	n.takeRates([]apiv1.TaskRate{{Task: "k-1", Attempt: 2, RateBps: 1e6}}, false, n.claimsSoFar())
	now("after a rate for another attempt", 64e6)

	// A claim answer lowers it; a heartbeat asked before that claim and
	// read after it is not applied.
	since := n.claimsSoFar()
	n.takeRates([]apiv1.TaskRate{{Task: "k-1", Attempt: 1, RateBps: 16e6}}, true, 0)
	now("after a claim's 16 Mbit/s", 16e6)
	if n.takeRates([]apiv1.TaskRate{{Task: "k-1", Attempt: 1, RateBps: 64e6}}, false, since) {
		t.Error("a heartbeat asked before a claim undid the claim's rates")
	}
	now("after a stale heartbeat", 16e6)

	// Unbooked: the node's --max-rate shared among its running tasks, and
	// again when one ends.
	n.cfg.MaxRateBps = 32e6
	n.mu.Lock()
	n.tasks["k-2"] = &running{work: apiv1.TaskWork{Task: transfer.Task{ID: "k-2", Attempt: 1}}}
	n.mu.Unlock()
	n.takeRates([]apiv1.TaskRate{{Task: "k-1", Attempt: 1, RateBps: 0}}, true, 0)
	now("unbooked, one of two tasks", 16e6)
	n.mu.Lock()
	delete(n.tasks, "k-2")
	n.mu.Unlock()
	n.repace()
	now("unbooked, alone", 32e6)

	// No cap at all: the push finishes.
	n.cfg.MaxRateBps = 0
	n.repace()
	now("no cap", 0)
	if err := <-done; err != nil {
		t.Fatalf("push: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "in/big/a.dat")); !bytes.Equal(got, data) {
		t.Fatal("the file differs at the destination")
	}
}

// TestPushAllParts: the parts of one file, pushed by the tasks of two
// source nodes (two roots holding the same file) at once into one server,
// land as the one file; every verdict names its part and carries the
// part's checksum, and exactly one says it completed the file, with the
// whole file's checksum. A job's overwrite policy pushes parts as update.
func TestPushAllParts(t *testing.T) {
	if plan.BlockAlign != mover.DefaultBlockSize {
		t.Fatalf("the service cuts parts on %d-byte blocks, the mover pushes %d-byte ones", plan.BlockAlign, mover.DefaultBlockSize)
	}
	for _, algo := range []string{transfer.ChecksumCRC32C, transfer.ChecksumAdler32} {
		t.Run(algo, func(t *testing.T) {
			dst := t.TempDir()
			addr := serve(t, mover.ServerConfig{Root: dst})
			data := randomBytes(10<<20+5, 7)
			var nodes []*node
			for range 2 {
				src := t.TempDir()
				write(t, src, "run/big.dat", data)
				root, err := os.OpenRoot(src)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { root.Close() })
				nodes = append(nodes, &node{cfg: Config{Retries: 1}, root: root, log: slog.New(slog.DiscardHandler)})
			}
			mtime := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
			for _, n := range nodes {
				if err := n.root.Chtimes("run/big.dat", mtime, mtime); err != nil {
					t.Fatal(err)
				}
			}
			sum := func(b []byte) string {
				if algo == transfer.ChecksumAdler32 {
					return hex8(adler32.Checksum(b))
				}
				return hex8(crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
			}
			parts := plan.Parts(int64(len(data)), 1, 4<<20)
			if len(parts) != 3 {
				t.Fatalf("parts: %+v", parts)
			}
			file := transfer.JobFile{Path: "run/big.dat", Dest: "in/run/big.dat", Size: int64(len(data)), MTime: mtime}
			var wg sync.WaitGroup
			reports := make([][]apiv1.FileReport, len(parts))
			errs := make([]error, len(parts))
			for i, p := range parts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w := apiv1.TaskWork{Task: transfer.Task{ID: fmt.Sprintf("k-%d", i), Attempt: 1, Part: &p},
						Files: []transfer.JobFile{file}, Address: addr, Checksum: algo, Policy: transfer.PolicyOverwrite}
					b := &batcher{}
					errs[i] = nodes[i%2].pushAll(context.Background(), w, b, func(*mover.Meter, int64) {})
					reports[i] = b.take()
				}()
			}
			wg.Wait()
			complete := 0
			for i, p := range parts {
				if errs[i] != nil || len(reports[i]) != 1 {
					t.Fatalf("part %d: %v, reports %+v", i, errs[i], reports[i])
				}
				r := reports[i][0]
				if !r.OK || r.Path != "run/big.dat" || r.Part == nil || *r.Part != p || r.Bytes != p.Length {
					t.Fatalf("part %d's verdict: %+v", i, r)
				}
				if want := sum(data[p.Offset : p.Offset+p.Length]); r.Checksum != want {
					t.Errorf("part %d: checksum %s, want %s", i, r.Checksum, want)
				}
				if r.Complete {
					complete++
					if want := sum(data); r.FileChecksum != want {
						t.Errorf("part %d completed the file with checksum %s, want %s", i, r.FileChecksum, want)
					}
				} else if r.FileChecksum != "" {
					t.Errorf("part %d: a file checksum %s without completing it", i, r.FileChecksum)
				}
			}
			if complete != 1 {
				t.Errorf("%d parts completed the file, want 1", complete)
			}
			have, err := os.ReadFile(filepath.Join(dst, "in/run/big.dat"))
			if err != nil || !bytes.Equal(have, data) {
				t.Fatalf("the file at the destination differs (%v)", err)
			}
			// A part pushed again finds the file there: skipped, complete.
			w := apiv1.TaskWork{Task: transfer.Task{ID: "k-again", Attempt: 1, Part: &parts[1]},
				Files: []transfer.JobFile{file}, Address: addr, Checksum: algo}
			b := &batcher{}
			if err := nodes[0].pushAll(context.Background(), w, b, func(*mover.Meter, int64) {}); err != nil {
				t.Fatal(err)
			}
			if rs := b.take(); len(rs) != 1 || !rs[0].OK || !rs[0].Complete || rs[0].FileChecksum != sum(data) {
				t.Errorf("a part pushed again: %+v", rs)
			}
		})
	}
}

func TestPartJob(t *testing.T) {
	f := transfer.JobFile{Path: "a", Dest: "b"}
	if p, err := partJob(apiv1.TaskWork{Files: []transfer.JobFile{f, f}}); p != nil || err != nil {
		t.Errorf("a task of whole files: %v, %v", p, err)
	}
	w := apiv1.TaskWork{Task: transfer.Task{Part: &transfer.Part{Index: 2, Offset: 8 << 20, Length: 5}}, Files: []transfer.JobFile{f}}
	if p, err := partJob(w); err != nil || *p != (mover.Part{Offset: 8 << 20, Length: 5}) {
		t.Errorf("a part task: %v, %v", p, err)
	}
	w.Files = append(w.Files, f)
	if _, err := partJob(w); err == nil {
		t.Error("a part task of two files accepted")
	}
}

// TestConfirmGrant: the verifier's question to the controller, through
// the route, and what each answer becomes: current, over (with the
// controller's reason), an older controller without the route (not asked:
// fences only), and a controller that cannot answer now.
func TestConfirmGrant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   error  // matched with errors.Is; nil: accepted
		saying string // in the error
	}{
		{name: "current", status: 200, body: `{"current":true}`},
		{name: "over", status: 200, body: `{"current":false,"reason":"attempt 1 of task k-1 is no longer current: job j-1 was cancelled"}`,
			want: grant.ErrOver, saying: "grant: its task's attempt is over: attempt 1 of task k-1 is no longer current: job j-1 was cancelled"},
		{name: "older controller", status: 404, body: `{"error":{"code":"not_found","message":"no route POST /api/v1/datanodes/b1/grants/check (see /api/v1/openapi.json)"}}`},
		{name: "standby", status: 503, body: `{"error":{"code":"unavailable","message":"a standby"}}`, saying: "a standby"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got apiv1.GrantCheck
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != "POST" || r.URL.Path != "/api/v1/datanodes/b1/grants/check" {
					t.Errorf("%s %s", r.Method, r.URL.Path)
				}
				json.NewDecoder(r.Body).Decode(&got)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c, err := client.New(srv.URL, "tok", client.WithTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			n := &node{cfg: Config{Client: c, Node: "b1"}, log: slog.New(slog.DiscardHandler)}
			err = n.confirmGrant(context.Background(), "k-1", 1)
			if got != (apiv1.GrantCheck{Task: "k-1", Attempt: 1}) {
				t.Errorf("asked %+v", got)
			}
			switch {
			case tc.saying == "" && err != nil:
				t.Fatalf("confirm: %v, want accepted", err)
			case tc.saying != "" && (err == nil || !strings.Contains(err.Error(), tc.saying)):
				t.Fatalf("confirm: %v, want %q", err, tc.saying)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("confirm: %v, want %v", err, tc.want)
			case tc.want == nil && errors.Is(err, grant.ErrOver):
				t.Fatalf("confirm: %v: a controller that cannot answer is not a refusal", err)
			}
		})
	}
	// The heartbeat names the attempts the server's sessions hold.
	v := grant.NewVerifier("b1", nil)
	release := v.Hold("k-2", 3)
	n := &node{cfg: Config{Verifier: v}}
	if g := n.granted(); len(g) != 1 || g[0] != (apiv1.Fence{Task: "k-2", Attempt: 3}) {
		t.Errorf("granted %+v", g)
	}
	release()
	if g := n.granted(); len(g) != 0 {
		t.Errorf("granted after the session: %+v", g)
	}
}

// TestFreeBytes: the heartbeat carries its root's free space where the
// system says it (Linux: statfs), and none where it cannot.
func TestFreeBytes(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	n := &node{root: root}
	free := n.freeBytes()
	if runtime.GOOS == "linux" && (free == nil || *free <= 0) {
		t.Fatalf("free bytes of a temporary directory: %v", free)
	}
	if runtime.GOOS != "linux" && free != nil {
		t.Fatalf("free bytes where statfs is not asked: %d", *free)
	}
}

// TestBrokenForHeartbeat: the broken sessions the server recorded go in
// the next heartbeat once; a heartbeat that failed keeps them for the
// one after without waking the loop again (it would spin while the
// controller is away).
func TestBrokenForHeartbeat(t *testing.T) {
	v := grant.NewVerifier("b1", nil)
	n := &node{cfg: Config{Verifier: v}}
	v.Broke("k-1", 2)
	select {
	case <-n.brokenCh():
	default:
		t.Fatal("a broken session did not wake the heartbeat loop")
	}
	got := n.broken()
	if len(got) != 1 || got[0] != (apiv1.Fence{Task: "k-1", Attempt: 2}) {
		t.Fatalf("broken: %+v", got)
	}
	n.unbroken(got)
	select {
	case <-n.brokenCh():
		t.Fatal("a failed heartbeat's broken sessions woke the loop")
	default:
	}
	if again := n.broken(); len(again) != 1 || again[0] != got[0] {
		t.Fatalf("after a failed heartbeat: %+v", again)
	}
	if len(n.broken()) != 0 {
		t.Fatal("named twice")
	}
	if (&node{}).broken() != nil || (&node{}).brokenCh() != nil {
		t.Fatal("a node without a verifier has broken sessions")
	}
}
