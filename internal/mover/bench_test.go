//go:build linux

package mover

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/wire"
)

// checkDirection checks one direction's account is whole and consistent:
// payload delivered, the sender's wire account at least that, the sending
// rate at least the goodput, and the streams adding up.
func checkDirection(t *testing.T, what string, d BenchDirection, send bool, streams int) {
	t.Helper()
	var sum int64
	for _, s := range d.PerStream {
		sum += s.Bytes
	}
	switch {
	case d.Send != send:
		t.Errorf("%s: direction send=%v, want %v", what, d.Send, send)
	case d.Bytes <= 0 || d.Elapsed <= 0:
		t.Errorf("%s: %d bytes in %v", what, d.Bytes, d.Elapsed)
	case len(d.PerStream) != streams || sum != d.Bytes:
		t.Errorf("%s: %d streams adding up to %d bytes, want %d adding up to %d", what, len(d.PerStream), sum, streams, d.Bytes)
	case !d.HasWire:
		t.Errorf("%s: the sender did not say what it put on the wire", what)
	case d.WireBytes < uint64(d.Bytes) || d.ResentBytes > d.WireBytes:
		t.Errorf("%s: %d bytes on the wire, %d of them again, for %d delivered", what, d.WireBytes, d.ResentBytes, d.Bytes)
	case d.SendingRateBps() < d.GoodputBps():
		t.Errorf("%s: sending rate %.0f below the goodput %.0f", what, d.SendingRateBps(), d.GoodputBps())
	}
}

// TestBenchModes runs each mode against a real server on loopback:
// memory to memory each way and both ways at once, and disk to memory
// from the client's file and from the server's. A file is sent once,
// whole, when the duration allows.
func TestBenchModes(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr := serveConfig(t, ServerConfig{Root: root})
	write := func(path string, n int) {
		b := make([]byte, n)
		rand.Read(b)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const serverSize, localSize = 9<<20 + 123, 5<<20 + 7
	write(filepath.Join(root, "srv.bin"), serverSize)
	write(filepath.Join(local, "local.bin"), localSize)
	open := func(direct bool) *os.File {
		f, err := OpenBenchFile(filepath.Join(local, "local.bin"), direct)
		if errors.Is(err, syscall.EINVAL) {
			return nil // the file system cannot read around its cache
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	direct := open(true)
	cfg := ClientConfig{Addr: addr, Streams: 2, Tuning: Tuning{DSCP: -1}}
	short, long := 300*time.Millisecond, time.Minute
	for _, tc := range []struct {
		name  string
		o     BenchOptions
		sends []bool // the directions, in order
		bytes []int64
	}{
		{"memory, client sends", BenchOptions{Duration: short}, []bool{true}, nil},
		{"memory, server sends", BenchOptions{Duration: short, Reverse: true}, []bool{false}, nil},
		{"memory, both ways", BenchOptions{Duration: short, Bidir: true}, []bool{true, false}, nil},
		{"the client's file", BenchOptions{Duration: long, LocalFile: open(false)}, []bool{true}, []int64{localSize}},
		{"the server's file", BenchOptions{Duration: long, Reverse: true, ServerFile: "/srv.bin"}, []bool{false}, []int64{serverSize}},
		{"both ways, the client's file", BenchOptions{Duration: short, Bidir: true, LocalFile: open(false)}, []bool{true, false}, []int64{localSize, 0}},
		{"the client's file, direct", BenchOptions{Duration: long, LocalFile: direct, Direct: true}, []bool{true}, []int64{localSize}},
		{"the server's file, direct", BenchOptions{Duration: long, Reverse: true, ServerFile: "srv.bin", Direct: true}, []bool{false}, []int64{serverSize}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.o.Direct && direct == nil {
				t.Skip("the temporary directory's file system cannot read around its cache (O_DIRECT)")
			}
			res, err := Bench(context.Background(), cfg, tc.o, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Streams != 2 || len(res.Directions) != len(tc.sends) {
				t.Fatalf("%d streams, %d directions; want 2 and %d", res.Streams, len(res.Directions), len(tc.sends))
			}
			for i, d := range res.Directions {
				checkDirection(t, tc.name, d, tc.sends[i], 2)
				if i < len(tc.bytes) && tc.bytes[i] != 0 && d.Bytes != tc.bytes[i] {
					t.Errorf("direction %d: %d bytes, want the file's %d", i, d.Bytes, tc.bytes[i])
				}
			}
		})
	}
}

// A server sends only a regular, non-empty file under its root; anything
// else is refused before the session starts, in words. Modes that mean
// nothing are refused before connecting.
func TestBenchRefusals(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.bin")
	for path, data := range map[string]string{filepath.Join(root, "empty.bin"): "", outside: "secret"} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "out.bin")); err != nil {
		t.Fatal(err)
	}
	// A FIFO with no writer: opening it must not wait for one.
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := serveConfig(t, ServerConfig{Root: root})
	cfg := ClientConfig{Addr: addr, Streams: 1, Tuning: Tuning{DSCP: -1}}
	for _, tc := range []struct {
		name string
		o    BenchOptions
		want string
	}{
		{"above the root", BenchOptions{Reverse: true, ServerFile: "../secret.bin"}, "leads outside the served directory"},
		{"a link leading out", BenchOptions{Reverse: true, ServerFile: "out.bin"}, "bench file out.bin: path leads outside the served directory"},
		{"missing", BenchOptions{Reverse: true, ServerFile: "nope.bin"}, "bench file nope.bin: no such file or directory"},
		{"a directory", BenchOptions{Reverse: true, ServerFile: "d"}, "d is a directory"},
		{"empty", BenchOptions{Reverse: true, ServerFile: "empty.bin"}, "empty.bin is empty"},
		{"a FIFO", BenchOptions{Reverse: true, ServerFile: "fifo"}, "fifo is not a regular file"},
		{"the server's file, not reversed", BenchOptions{ServerFile: "x"}, "only in a reverse bench"},
		{"both ways reversed", BenchOptions{Bidir: true, Reverse: true}, "has no --reverse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Duration = time.Second
			_, err := Bench(context.Background(), cfg, tc.o, nil)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want a refusal with %q", err, tc.want)
			}
		})
	}
}

// A client of protocol version 5 still benches with this server, each
// way, and gets no wire account from it (the section it would not
// decode); this client refuses a mode an older server lacks before asking.
func TestBenchOlderPeer(t *testing.T) {
	root := t.TempDir()
	addr := serveConfig(t, ServerConfig{Root: root})
	cfg := ClientConfig{Addr: addr, Streams: 1, Tuning: Tuning{DSCP: -1}, maxVersion: 5}
	res, err := Bench(context.Background(), cfg, BenchOptions{Duration: 200 * time.Millisecond, Reverse: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Directions[0]; d.Bytes <= 0 || d.HasWire || d.SendingRateBps() != 0 || d.PerStream[0].CC == "" {
		t.Errorf("reverse bench at version 5: %+v, want bytes, the cc, and no wire account", d)
	}
	res, err = Bench(context.Background(), cfg, BenchOptions{Duration: 200 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDirection(t, "bench at version 5, the client sending", res.Directions[0], true, 1)
	for _, o := range []BenchOptions{{Bidir: true}, {Reverse: true, ServerFile: "f"}} {
		o.Duration = time.Second
		_, err := Bench(context.Background(), cfg, o, nil)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "speaks protocol version 5") || !strings.Contains(err.Error(), "needs 6") {
			t.Errorf("%+v at version 5: %v, want a refusal naming the versions", o, err)
		}
	}
}

// An account carries to the peer only the sections the version agreed
// has: an older peer's decoder refuses trailing bytes.
func TestBenchOnWire(t *testing.T) {
	full := wire.Stats{Bytes: 1, HasCC: true, HasWire: true}
	for _, tc := range []struct {
		version       uint16
		wantCC, wantW bool
	}{
		{wire.VersionCC - 1, false, false},
		{wire.VersionCC, true, false},
		{wire.VersionBench, true, true},
	} {
		got := onWire(full, tc.version)
		if got.HasCC != tc.wantCC || got.HasWire != tc.wantW {
			t.Errorf("version %d: cc %v, wire %v; want %v, %v", tc.version, got.HasCC, got.HasWire, tc.wantCC, tc.wantW)
		}
	}
	if got := onWire(wire.Stats{HasCC: true}, wire.VersionBench); got.HasWire {
		t.Error("a receiving account gained a wire section")
	}
}
