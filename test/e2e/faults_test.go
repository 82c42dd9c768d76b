//go:build linux

package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/roottest"
)

func TestMissingSource(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	writeFile(t, filepath.Join(root, "here.txt"), "present\n", 0o644)
	srv := startServer(t, root)
	local := mkdir(t, dir, "local")

	t.Run("local", func(t *testing.T) {
		out, errs, code := runCp(t, filepath.Join(dir, "nope.bin"), srv.URL("x.bin"))
		checkFailure(t, "push of a missing file", result{out, errs, code}, "nope.bin", "no such file")
		if _, err := os.Lstat(filepath.Join(root, "x.bin")); err == nil {
			t.Errorf("x.bin was created on the server")
		}
	})
	t.Run("local, -r", func(t *testing.T) {
		out, errs, code := runCp(t, "-r", filepath.Join(dir, "nodir"), srv.URL("x/"))
		checkFailure(t, "push of a missing tree", result{out, errs, code}, "nodir", "no such file")
	})
	t.Run("remote", func(t *testing.T) {
		out, errs, code := runCp(t, "--json", srv.URL("nope.bin"), filepath.Join(local, "nope.bin"))
		checkFailure(t, "pull of a missing file", result{out, errs, code}, "nope.bin", "no such file")
		if s := parseSummary(t, out); s.Verified || len(s.Errors) == 0 {
			t.Errorf("summary: verified %v, errors %q; want false and the reason", s.Verified, s.Errors)
		}
		if _, err := os.Lstat(filepath.Join(local, "nope.bin")); err == nil {
			t.Errorf("nope.bin was created locally")
		}
	})
	t.Run("remote, -r", func(t *testing.T) {
		out, errs, code := runCp(t, "-r", srv.URL("nodir"), filepath.Join(local, "nodir"))
		checkFailure(t, "pull of a missing tree", result{out, errs, code}, "nodir", "no such file")
	})
	t.Run("remote, one of two", func(t *testing.T) {
		into := mkdir(t, local, "two")
		out, errs, code := runCp(t, srv.URL("here.txt"), srv.URL("gone.txt"), into)
		checkFailure(t, "pull of a present and a missing file", result{out, errs, code}, "gone.txt")
		sameFile(t, filepath.Join(root, "here.txt"), filepath.Join(into, "here.txt"))
	})
}

// TestDiskFull copies into a small filesystem. A file larger than its free
// space is refused before any block travels, saying how much it needs and
// how much is free; nothing is left behind, so the next smaller copy
// succeeds. A file that fits when accepted but meets a full disk midway
// (something else filled it) fails saying so, and its partial file is
// removed rather than left to keep the disk full.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	roottest.Require(t, "mounts a tmpfs or runs the server as another user")
	dir := scratchDir(t)
	mnt := mkdir(t, dir, "small")
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	// Registered before the server starts, so it runs after the server stops.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	srv := startServer(t, mnt)
	src := filepath.Join(dir, "big.bin")
	writeRandom(t, src, 32<<20, 71)
	small := filepath.Join(dir, "small.bin")
	writeRandom(t, small, 1<<20, 72)

	args := []string{"cp", "--json", "-P", "2", "--block-size", "64KiB", src, srv.URL("big.bin")}
	r := runLP(t, runOpts{}, args...)
	t.Logf("%s", strings.TrimSpace(r.stderr))
	checkFailure(t, "push of 32 MiB into 8 MiB", r, "not enough space", "free", "needs 32.0 MiB", "free space there")
	checkNoWorkFiles(t, mnt)
	if _, err := os.Lstat(filepath.Join(mnt, "big.bin")); err == nil {
		t.Errorf("big.bin appeared though it does not fit")
	}
	if !srv.Running() {
		t.Fatalf("the server exited after a full disk")
	}
	cpOK(t, small, srv.URL("small.bin"))
	sameFile(t, small, filepath.Join(mnt, "small.bin"))

	t.Run("pull", func(t *testing.T) {
		// The client's receiver checks its own disk the same way.
		other := mkdir(t, dir, "root2")
		writeRandom(t, filepath.Join(other, "big.bin"), 32<<20, 74)
		srv2 := startServer(t, other)
		r := runLP(t, runOpts{}, "cp", "--json", srv2.URL("big.bin"), filepath.Join(mnt, "pulled.bin"))
		checkFailure(t, "pull of 32 MiB into what is left of 8 MiB", r, "not enough space", "needs 32.0 MiB")
		checkNoWorkFiles(t, mnt)
	})
	t.Run("full midway", func(t *testing.T) {
		mid := filepath.Join(dir, "mid.bin")
		writeRandom(t, mid, 5<<20, 73)
		args := []string{"cp", "--json", "-P", "2", "--block-size", "64KiB", "--rate", "8M", mid, srv.URL("mid.bin")}
		p := startLP(t, runOpts{}, args...)
		// Once the copy is under way, hold the client still while what is
		// left of the disk fills, so that it cannot finish first however
		// the machine schedules it.
		waitJournaled(t, p, filepath.Join(mnt, ".mid.bin.lightpath-journal"), 1)
		p.Signal(syscall.SIGSTOP)
		if p.Exited() {
			t.Fatalf("the copy finished before the disk could fill: %+v", p.Wait())
		}
		filler := filepath.Join(mnt, "filler")
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 64<<10)
		for {
			if _, err := f.Write(chunk); err != nil {
				break
			}
		}
		f.Close()
		p.Signal(syscall.SIGCONT)
		r := p.Wait()
		t.Logf("%s", strings.TrimSpace(r.stderr))
		checkFailure(t, "push into a disk that fills up", r, "no space left", "needs 5.00 MiB", "free space there and run the same command again")
		checkNoWorkFiles(t, mnt)
		// Room again: the same command succeeds.
		os.Remove(filler)
		r = runLP(t, runOpts{}, args...)
		mustSucceed(t, "the same cp once there is room", r)
		sameFile(t, mid, filepath.Join(mnt, "mid.bin"))
		checkNoWorkFiles(t, mnt)
	})
}

// TestPartialTTL starts a server on a root holding partial files and
// journals: those nobody wrote for --partial-ttl go at start, fresh ones
// (a copy to be resumed) stay.
func TestPartialTTL(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	old := time.Now().Add(-3 * time.Hour)
	var stale, fresh []string
	for _, name := range []string{"a/.old.bin.lightpath-part", "a/.old.bin.lightpath-journal", ".top.lightpath-part"} {
		p := filepath.Join(root, name)
		writeFile(t, p, "partial data", 0o600)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		stale = append(stale, p)
	}
	for _, name := range []string{"a/.new.bin.lightpath-part", "a/.new.bin.lightpath-journal"} {
		p := filepath.Join(root, name)
		writeFile(t, p, "partial data", 0o600)
		fresh = append(fresh, p)
	}
	keep := filepath.Join(root, "a", "old-but-complete.bin")
	writeFile(t, keep, "a finished file, however old", 0o644)
	os.Chtimes(keep, old, old)
	srv := startServer(t, root, "--partial-ttl", "2h")
	if !waitFor(2*time.Minute, func() bool { return strings.Contains(srv.Stderr(), "removed abandoned partial files") }) {
		t.Errorf("the server did not report removing abandoned partial files:\n%s", srv.Stderr())
	}
	for _, p := range stale {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s (3 h old) is still there", p)
		}
	}
	for _, p := range append(fresh, keep) {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// interruption says how a copy in progress is cut short.
type interruption int

const (
	killServer interruption = iota // SIGKILL the server, as a crash
	termServer                     // SIGTERM the server, a clean shutdown
	intClient                      // SIGINT the client, as Ctrl-C
)

// interruptedCopy starts a rate-limited copy (args without "cp"), cuts it
// short as how says once its journal records a few blocks, and checks the
// partial file and journal are left in dstDir for a resume. It returns the
// cp arguments for running the same command again; the server is left
// stopped unless the client was the one interrupted.
func interruptedCopy(t *testing.T, srv *server, how interruption, dstDir, dstName string, args ...string) []string {
	t.Helper()
	args = append([]string{"cp", "--json", "-P", "2", "--block-size", "64KiB", "--rate", "40M"}, args...)
	p := startLP(t, runOpts{}, args...)
	waitJournaled(t, p, filepath.Join(dstDir, "."+dstName+".lightpath-journal"), 8)
	if p.Exited() {
		t.Fatalf("cp finished before it could be interrupted: %+v", p.Wait())
	}
	switch how {
	case killServer:
		srv.Kill()
	case termServer:
		srv.Stop()
	case intClient:
		p.Signal(syscall.SIGINT)
	}
	r := p.Wait()
	checkFailure(t, "cp interrupted", r)
	for _, name := range []string{"." + dstName + ".lightpath-part", "." + dstName + ".lightpath-journal"} {
		if _, err := os.Lstat(filepath.Join(dstDir, name)); err != nil {
			t.Errorf("%s not left for a resume: %v", name, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dstDir, dstName)); err == nil {
		t.Fatalf("%s appeared under its final name though incomplete", dstName)
	}
	return args
}

// waitJournaled waits until the journal at path records at least blocks
// blocks (each record 8 bytes after the header), so that a copy cut short
// now has something to resume, however slowly it started. At 40 Mbit/s
// the files these tests copy take seconds more to finish, which is what
// lets the caller interrupt it.
func waitJournaled(t *testing.T, p *proc, path string, blocks int64) {
	t.Helper()
	const header = 4 + 8 + 8 + 4 // magic, size, mtime, block size
	if !waitFor(2*time.Minute, func() bool {
		fi, err := os.Stat(path)
		return (err == nil && fi.Size() >= header+8*blocks) || p.Exited()
	}) {
		t.Fatalf("%s did not record %d blocks:\n%s", path, blocks, p.err.String())
	}
}

func checkNoWorkFiles(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".lightpath-") {
			t.Errorf("%s left behind after a completed copy", e.Name())
		}
	}
}

// checkResumed checks the summary of a resumed copy of size bytes.
func checkResumed(t *testing.T, s summary, size int64) {
	t.Helper()
	if !s.Verified {
		t.Errorf("not verified: %+v", s)
	}
	if s.BytesSkipped <= 0 || s.BytesSent >= size {
		t.Errorf("bytes_skipped %d, bytes_sent %d: want a resume (skipped > 0, sent < %d)", s.BytesSkipped, s.BytesSent, size)
	}
	if s.BytesSkipped+s.BytesSent < size {
		t.Errorf("bytes_skipped %d + bytes_sent %d < %d", s.BytesSkipped, s.BytesSent, size)
	}
}

func TestServerKilledResume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		push bool
		how  interruption
		size int64
	}{
		{"push, server killed", true, killServer, 48 << 20},
		{"push, server terminated", true, termServer, 24 << 20},
		{"push, client interrupted", true, intClient, 24 << 20},
		{"pull, server killed", false, killServer, 24 << 20},
		{"pull, client interrupted", false, intClient, 24 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := scratchDir(t)
			root := mkdir(t, dir, "root")
			local := mkdir(t, dir, "local")
			srv := startServer(t, root)
			var src, dstDir, dst string
			if tc.push {
				src, dstDir = filepath.Join(local, "big.bin"), root
				dst = srv.URL("big.bin")
			} else {
				src, dstDir = filepath.Join(root, "big.bin"), local
				dst = filepath.Join(local, "big.bin")
			}
			writeRandom(t, src, tc.size, 81)
			srcArg := src
			if !tc.push {
				srcArg = srv.URL("big.bin")
			}
			args := interruptedCopy(t, srv, tc.how, dstDir, "big.bin", srcArg, dst)
			if tc.how != intClient {
				srv.Start() // same port, same root
			}
			r := runLP(t, runOpts{}, args...)
			mustSucceed(t, "the same cp again", r)
			checkResumed(t, parseSummary(t, r.stdout), tc.size)
			compareEntry(t, src, filepath.Join(dstDir, "big.bin"), "big.bin")
			checkNoWorkFiles(t, dstDir)
		})
	}
}

func TestServerRestartWithRetries(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	const size = 48 << 20
	src := filepath.Join(dir, "big.bin")
	writeRandom(t, src, size, 82)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)

	p := startLP(t, runOpts{}, "cp", "--json", "--retries", "5", "-P", "2", "--block-size", "64KiB", "--rate", "40M", src, srv.URL("big.bin"))
	waitJournaled(t, p, filepath.Join(root, ".big.bin.lightpath-journal"), 8)
	if p.Exited() {
		t.Fatalf("cp finished before the server was killed: %+v", p.Wait())
	}
	// The kill closes the client's connections, so its attempt fails
	// whenever the server is back: no pause is needed between the two.
	srv.Kill()
	srv.Start()
	r := p.Wait()
	mustSucceed(t, "cp --retries 5 across a server restart", r)
	s := parseSummary(t, r.stdout)
	if !s.Verified {
		t.Errorf("not verified: %+v", s)
	}
	if s.Attempts < 2 {
		t.Errorf("attempts %d, want at least 2", s.Attempts)
	}
	if s.BytesSkipped <= 0 {
		t.Errorf("bytes_skipped %d: the retry did not resume", s.BytesSkipped)
	}
	// Whatever was in flight at the kill may go twice, not the whole file.
	if s.BytesSent >= size+size/2 {
		t.Errorf("bytes_sent %d for a %d-byte file: the retry started over", s.BytesSent, size)
	}
	compareEntry(t, src, filepath.Join(root, "big.bin"), "big.bin")
	checkNoWorkFiles(t, root)
}

func TestSourceChangedBetweenRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		sameTime bool // keep the old mtime: only the checksums tell
	}{
		{"new content and time", false},
		{"new content, same time", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := scratchDir(t)
			const size = 24 << 20
			src := filepath.Join(dir, "data.bin")
			writeRandom(t, src, size, 91)
			old := time.Date(2022, 2, 2, 2, 2, 2, 0, time.UTC)
			os.Chtimes(src, old, old)
			root := mkdir(t, dir, "root")
			srv := startServer(t, root)

			args := interruptedCopy(t, srv, killServer, root, "data.bin", src, srv.URL("data.bin"))
			writeRandom(t, src, size, 92)
			newer := old.Add(time.Hour)
			if tc.sameTime {
				newer = old
			}
			os.Chtimes(src, newer, newer)
			srv.Start()
			r := runLP(t, runOpts{}, args...)
			mustSucceed(t, "cp after the source changed", r)
			s := parseSummary(t, r.stdout)
			if !s.Verified {
				t.Errorf("not verified: %+v", s)
			}
			if s.BytesSkipped != 0 || s.BytesSent != size {
				t.Errorf("bytes_skipped %d, bytes_sent %d: want a fresh start (0, %d)", s.BytesSkipped, s.BytesSent, size)
			}
			compareEntry(t, src, filepath.Join(root, "data.bin"), "data.bin")
			checkNoWorkFiles(t, root)
		})
	}
}

// flipOnce returns a tamper function that flips one byte at offset at of the
// first connection whose data, in the chosen direction, passes it.
func flipOnce(up bool, at int64, flipped *atomic.Bool) tamperFunc {
	return func(conn int, dirUp bool, off int64, b []byte) {
		if dirUp != up || off > at || off+int64(len(b)) <= at {
			return
		}
		if flipped.CompareAndSwap(false, true) {
			b[at-off] ^= 0x5a
		}
	}
}

func TestCorruptedBlock(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	const size = 16 << 20
	src := filepath.Join(dir, "data.bin")
	writeRandom(t, src, size, 101)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)

	for _, tc := range []struct {
		name string
		push bool
	}{
		{"push", true},
		{"pull", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var flipped atomic.Bool
			p := startProxy(t, srv.addr, false, flipOnce(tc.push, 1<<20, &flipped))
			var s summary
			var got string
			if tc.push {
				got = filepath.Join(root, "pushed.bin")
				s = cpOK(t, "-P", "2", src, p.URL("pushed.bin"))
			} else {
				got = filepath.Join(dir, "pulled.bin")
				s = cpOK(t, "-P", "2", p.URL("pushed.bin"), got)
			}
			if !flipped.Load() {
				t.Fatalf("the proxy never flipped a byte")
			}
			sameFile(t, src, got)
			if s.BytesSent <= size {
				t.Errorf("bytes_sent %d for a %d-byte file: was the damaged block sent again?", s.BytesSent, size)
			}
		})
	}
}

func TestStalledClient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		op   string // the server's side of it: get (pull) or put (push)
	}{
		{"pull, client stops reading", "get"},
		{"push, client stops sending", "put"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := scratchDir(t)
			root := mkdir(t, dir, "root")
			local := mkdir(t, dir, "local")
			writeFile(t, filepath.Join(root, "small.txt"), "still serving\n", 0o644)
			tlog := filepath.Join(dir, "transfer.log")
			srv := startServer(t, root, "--stall-timeout", "2s", "--transfer-log", tlog)
			args := []string{"cp", "-q", "-P", "2", "--window", "256KiB", "--rate", "100M"}
			if tc.op == "get" {
				writeRandom(t, filepath.Join(root, "big.bin"), 48<<20, 111)
				args = append(args, srv.URL("big.bin"), filepath.Join(local, "big.bin"))
			} else {
				writeRandom(t, filepath.Join(local, "big.bin"), 48<<20, 112)
				args = append(args, filepath.Join(local, "big.bin"), srv.URL("big.bin"))
			}
			p := startLP(t, runOpts{}, args...)
			dstDir := root
			if tc.op == "get" {
				dstDir = local
			}
			waitJournaled(t, p, filepath.Join(dstDir, ".big.bin.lightpath-journal"), 8)
			if p.Exited() {
				t.Fatalf("cp finished before it could be stopped: %+v", p.Wait())
			}
			p.Signal(syscall.SIGSTOP)
			stopped := time.Now()
			var ended map[string]any
			freed := waitFor(2*time.Minute, func() bool {
				for _, l := range readJSONLines(t, tlog) {
					if l["kind"] == "session" && l["op"] == tc.op {
						ended = l
						return true
					}
				}
				return false
			})
			p.Signal(syscall.SIGKILL) // a stopped process dies of it too
			p.Wait()
			if !freed {
				t.Fatalf("the server did not end the session of a stopped client (--stall-timeout 2s) in 2 min")
			}
			t.Logf("session ended %.1fs after the client stopped: %v", time.Since(stopped).Seconds(), ended)
			if ended["status"] != "failed" {
				t.Errorf("session status %v, want failed", ended["status"])
			}
			if reason, _ := ended["reason"].(string); reason == "" {
				t.Errorf("the session's end gives no reason")
			}
			cpOK(t, srv.URL("small.txt"), filepath.Join(local, "small.txt"))
			sameFile(t, filepath.Join(root, "small.txt"), filepath.Join(local, "small.txt"))
		})
	}
}

// hello is a client's opening: magic, versions, connection kind, nonce.
func hello(minV, maxV uint16, kind byte) []byte {
	b := []byte("LPTH")
	b = binary.BigEndian.AppendUint16(b, minV)
	b = binary.BigEndian.AppendUint16(b, maxV)
	b = append(b, kind)
	return append(b, make([]byte, 32)...)
}

// frame is a control frame: a 4-byte length, the type, the payload.
func frame(typ byte, payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	return append(append(b, typ), payload...)
}

func TestGarbage(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	writeRandom(t, filepath.Join(root, "data.bin"), 2<<20, 121)
	srv := startServer(t, root, "--idle-timeout", "2s")

	randomBytes := make([]byte, 4096)
	rand.Read(randomBytes)
	join := append(make([]byte, 16), 0x00, 32) // session, stream 0, MAC length
	join = append(join, make([]byte, 32)...)
	cases := []struct {
		name      string
		send      []byte
		halfClose bool
	}{
		{"random bytes", randomBytes, false},
		{"HTTP request", []byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: e2e\r\n\r\n"), false},
		{"TLS client hello to a plain server", []byte{0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03}, false},
		{"truncated hello, half-closed", []byte("LPTH\x00\x01\x00"), true},
		{"truncated hello, then silence", []byte("LPTH\x00\x01\x00"), false},
		{"nothing at all", nil, false},
		{"unknown connection kind", hello(1, 1, 9), false},
		{"unsupported versions", hello(7, 9, 1), false},
		{"huge frame length", append(hello(1, 1, 1), 0xff, 0xff, 0xff, 0xf0, 5), false},
		{"huge frame length on a data connection", append(hello(1, 1, 2), 0x7f, 0xff, 0xff, 0xff, 9), false},
		{"unknown frame type", append(hello(1, 1, 1), frame(200, []byte("x"))...), false},
		{"malformed request", append(hello(1, 1, 1), frame(5, []byte{0xff, 0xff, 0xff})...), false},
		{"join to an unknown session", append(hello(1, 1, 2), frame(9, join)...), false},
	}
	// dropped lists the server's log lines about dropped connections.
	dropped := func() []string {
		var out []string
		for _, l := range strings.Split(srv.Stderr(), "\n") {
			if strings.Contains(l, "connection dropped") || strings.Contains(l, "request refused") || strings.Contains(l, "session dropped") {
				out = append(out, l)
			}
		}
		return out
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(dropped())
			c := dialCtx(t, srv.addr)
			defer c.Close()
			if len(tc.send) > 0 {
				if _, err := c.Write(tc.send); err != nil {
					t.Fatalf("write: %v", err)
				}
			}
			if tc.halfClose {
				c.(*net.TCPConn).CloseWrite()
			}
			// The server must drop us (after its 2 s idle timeout at
			// worst; the deadline bounds a hang).
			c.SetReadDeadline(time.Now().Add(time.Minute))
			start := time.Now()
			_, err := io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server kept the connection open for a minute")
			}
			t.Logf("dropped after %v", time.Since(start).Round(time.Millisecond))
			if !waitFor(time.Minute, func() bool { return len(dropped()) > before }) {
				t.Errorf("the server did not log why it dropped the connection")
			} else {
				t.Logf("server: %s", dropped()[before])
			}
			if !srv.Running() {
				t.Fatalf("the server exited")
			}
		})
	}
	t.Run("many at once", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", srv.addr, time.Minute)
				if err != nil {
					t.Errorf("dial %d: %v", i, err)
					return
				}
				defer c.Close()
				c.Write(bytes.Repeat([]byte{byte(i)}, 100+i*97))
				c.SetReadDeadline(time.Now().Add(time.Minute))
				io.Copy(io.Discard, c)
			}()
		}
		wg.Wait()
	})
	if !srv.Running() {
		t.Fatalf("the server exited")
	}
	got := filepath.Join(dir, "data.bin")
	cpOK(t, "-P", "2", srv.URL("data.bin"), got)
	sameFile(t, filepath.Join(root, "data.bin"), got)
	cpOK(t, got, srv.URL("again.bin"))
	sameFile(t, got, filepath.Join(root, "again.bin"))
}

// TestConcurrentPushSameDestination pushes two different files to the same
// name at once. Either may win or be refused, but the result must be one of
// them whole (never a mix), and a cp that reports success must have its data
// there unless the other one finished after it.
func TestConcurrentPushSameDestination(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)
	const size = 8 << 20
	a, b := filepath.Join(dir, "A"), filepath.Join(dir, "B")
	writeRandom(t, a, size, 131)
	writeRandom(t, b, size, 132)
	cp := func(src string) *proc {
		return startLP(t, runOpts{}, "cp", "--json", "--overwrite", "--rate", "40M", "--block-size", "64KiB", "-P", "2", src, srv.URL("same.bin"))
	}
	// B starts once A is under way, so that the two overlap.
	pa := cp(a)
	waitJournaled(t, pa, filepath.Join(root, ".same.bin.lightpath-journal"), 1)
	pb := cp(b)
	ra := pa.Wait()
	aDone := time.Now()
	rb := pb.Wait()
	bDone := time.Now()
	t.Logf("A: exit %d %s", ra.code, strings.TrimSpace(ra.stderr))
	t.Logf("B: exit %d %s", rb.code, strings.TrimSpace(rb.stderr))
	if ra.code != 0 && rb.code != 0 {
		t.Errorf("both pushes failed")
	}
	got := filepath.Join(root, "same.bin")
	if _, err := os.Stat(got); err != nil {
		t.Fatalf("no result: %v", err)
	}
	isA, isB := sameContent(t, a, got), sameContent(t, b, got)
	if !isA && !isB {
		t.Errorf("same.bin is neither A nor B: two concurrent pushes mixed their blocks")
	}
	// The last one to report success should be what is there.
	if ra.code == 0 && (rb.code != 0 || aDone.After(bDone)) && !isA {
		t.Errorf("cp A reported success (verified) but same.bin is not A")
	}
	if rb.code == 0 && (ra.code != 0 || bDone.After(aDone)) && !isB {
		t.Errorf("cp B reported success (verified) but same.bin is not B")
	}
}

// TestPersistentCorruption damages every megabyte that crosses one
// direction, so every block arrives damaged however often it is sent: cp
// must give up with an error in bounded time, not retry or wait forever.
func TestPersistentCorruption(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	const size = 16 << 20
	src := filepath.Join(dir, "data.bin")
	writeRandom(t, src, size, 141)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)
	p := startProxy(t, srv.addr, false, func(conn int, up bool, off int64, b []byte) {
		if !up {
			return
		}
		for i := range b {
			if o := off + int64(i); o > 4096 && o%(1<<20) == 1000 {
				b[i] ^= 1
			}
		}
	})
	r := runLP(t, runOpts{timeout: 3 * time.Minute}, "cp", "--json", "-P", "2", src, p.URL("data.bin"))
	checkFailure(t, "cp through a link that damages every block", r, "damaged")
	if _, err := os.Lstat(filepath.Join(root, "data.bin")); err == nil {
		t.Errorf("data.bin appeared under its final name")
	}
}

// TestResumeWithOtherBlockSize interrupts a push and runs it again with
// another block size: the journal of the first run must not be misread.
func TestResumeWithOtherBlockSize(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	const size = 24 << 20
	src := filepath.Join(dir, "data.bin")
	writeRandom(t, src, size, 151)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)
	interruptedCopy(t, srv, killServer, root, "data.bin", src, srv.URL("data.bin"))
	srv.Start()
	s := cpOK(t, "-P", "2", "--block-size", "192KiB", src, srv.URL("data.bin"))
	t.Logf("bytes_sent %d, bytes_skipped %d", s.BytesSent, s.BytesSkipped)
	compareEntry(t, src, filepath.Join(root, "data.bin"), "data.bin")
	checkNoWorkFiles(t, root)
}

// TestMaxSessions fills the server's one session slot: another client is
// told to come back later, and with --retries it does so and succeeds.
func TestMaxSessions(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root, "--max-sessions", "1")
	big := filepath.Join(dir, "big.bin")
	writeRandom(t, big, 12<<20, 161)
	small := filepath.Join(dir, "small.txt")
	writeFile(t, small, "small\n", 0o644)

	// The long cp holds the slot: stopped once under way (well within the
	// server's 30 s stall timeout), it cannot finish and free it early
	// however the machine schedules it.
	long := startLP(t, runOpts{}, "cp", "-q", "--block-size", "64KiB", "--rate", "40M", big, srv.URL("big.bin"))
	waitJournaled(t, long, filepath.Join(root, ".big.bin.lightpath-journal"), 1)
	long.Signal(syscall.SIGSTOP)
	if long.Exited() {
		t.Fatalf("the long cp finished too early: %+v", long.Wait())
	}
	out, errs, code := runCp(t, small, srv.URL("refused.txt"))
	checkFailure(t, "cp while the only session is taken", result{out, errs, code}, "too many sessions")
	// Once the retrying cp has been turned away, the long one goes on;
	// the retries' backoff (1, 2, 4, 8, 16 s) outlasts its few seconds.
	retrying := startLP(t, runOpts{}, "cp", "--json", "--retries", "5", small, srv.URL("later.txt"))
	if !waitFor(2*time.Minute, func() bool { return strings.Contains(retrying.out.String(), `"type":"retry"`) || retrying.Exited() }) {
		t.Fatalf("the retrying cp was not turned away: %s", retrying.out.String())
	}
	long.Signal(syscall.SIGCONT)
	r := retrying.Wait()
	mustSucceed(t, "cp --retries 5 while the slot is taken", r)
	if s := parseSummary(t, r.stdout); s.Attempts < 2 {
		t.Errorf("attempts %d: the retry should have waited for the session slot", s.Attempts)
	}
	sameFile(t, small, filepath.Join(root, "later.txt"))
	mustSucceed(t, "the long cp", long.Wait())
	sameFile(t, big, filepath.Join(root, "big.bin"))
}
