//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/lpbin"
	"github.com/lightpath/lightpath/internal/store/pgtest"
)

// lpBin is the lightpath binary built once for the whole package.
var lpBin string

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	// The permission test runs the server as an unprivileged user: Build
	// leaves the binary's directory open to others.
	built, err := lpbin.Build("lightpath-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer built.RemoveAll()
	if err := built.Setenv(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	lpBin = built.Bin
	// Tests write only under their temporary directories: anything new in
	// this package's directory afterwards fails the run, named.
	before := dirEntries(".")
	// A PostgreSQL for the controller tests that run on both stores.
	code := pgtest.Main(m, filepath.Join("..", ".."))
	// Every process the tests ran was built with -race: a race any of them
	// found fails the run, whichever test started it.
	if reports, err := built.Reports(); err != nil || reports != "" {
		fmt.Fprintf(os.Stderr, "e2e: the lightpath processes the tests ran found data races (%v):\n%s", err, reports)
		code = 1
	}
	wd, _ := os.Getwd()
	for name := range dirEntries(".") {
		if !before[name] {
			fmt.Fprintf(os.Stderr, "e2e: a test left %s in %s: write under t.TempDir()\n", name, wd)
			code = 1
		}
	}
	return code
}

// dirEntries names what dir holds.
func dirEntries(dir string) map[string]bool {
	es, _ := os.ReadDir(dir)
	names := make(map[string]bool, len(es))
	for _, e := range es {
		names[e.Name()] = true
	}
	return names
}

// scratchDir returns a fresh directory removed after the test, on tmpfs
// (/dev/shm) where there is one, to keep disk I/O out of the tests' time.
// It is world-readable so a server running as another user can reach it.
func scratchDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "lightpath-e2e-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	d := t.TempDir()
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func mkdir(t *testing.T, parts ...string) string {
	t.Helper()
	d := filepath.Join(parts...)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// cleanEnv is the test's environment without any LIGHTPATH_ variable but
// the emulator's binary (lpbin.Setenv), plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LIGHTPATH_") || strings.HasPrefix(kv, lpbin.EmulatorEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// freePort finds a port that is free on host right now, for a server a
// test starts. Tests run side by side, so it hands out ports below the
// kernel's ephemeral range, each once per test binary: a port found by
// listening on port 0 is an ephemeral one, which any outgoing connection
// of another test may take before the server binds it. The port is free
// for TCP and UDP alike (the mover's UDP transport listens on the same
// number).
func freePort(t *testing.T, host string) int {
	t.Helper()
	lo, hi := portsFrom, ephemeralStart()
	for range hi - lo {
		p := lo + int(nextPort.Add(1))%(hi-lo)
		addr := net.JoinHostPort(host, strconv.Itoa(p))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		if pc, err := net.ListenPacket("udp", addr); err == nil {
			pc.Close()
			return p
		}
	}
	t.Fatalf("no free port on %s in [%d, %d)", host, lo, hi)
	return 0
}

// portsFrom is the lowest port freePort hands out; nextPort counts from a
// random place so that two test binaries rarely walk the same ports.
const portsFrom = 10000

var nextPort atomic.Int64

func init() { nextPort.Store(rand.Int64N(1 << 20)) }

// ephemeralStart is where the kernel's ephemeral ports begin
// (net.ipv4.ip_local_port_range), 32768 when it cannot be read.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	if n, err := strconv.Atoi(f[0]); err == nil && n > portsFrom+1000 {
		return n
	}
	return 32768
}

// ---------------------------------------------------------------------------
// The server.

type serverOpts struct {
	host string              // default 127.0.0.1
	port int                 // 0: pick a free one
	cred *syscall.Credential // run as this user
	env  []string
}

// server is a running `lightpath serve`. Its stdout (the transfer log unless
// --transfer-log is given) and stderr (its log) go to files outside the root.
type server struct {
	t      *testing.T
	addr   string // HOST:PORT, IPv6 in brackets
	root   string
	args   []string
	opts   serverOpts
	stdout string
	stderr string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// startServer serves root on a free loopback port with extra serve flags.
// It is stopped (SIGTERM) when the test ends.
func startServer(t *testing.T, root string, args ...string) *server {
	t.Helper()
	return startServerOpts(t, serverOpts{}, root, args...)
}

func startServerOpts(t *testing.T, o serverOpts, root string, args ...string) *server {
	t.Helper()
	if o.host == "" {
		o.host = "127.0.0.1"
	}
	if o.port == 0 {
		o.port = freePort(t, o.host)
	}
	logs, err := os.MkdirTemp("", "lightpath-e2e-serve-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(logs) })
	s := &server{
		t: t, addr: net.JoinHostPort(o.host, strconv.Itoa(o.port)), root: root, args: args, opts: o,
		stdout: filepath.Join(logs, "stdout"), stderr: filepath.Join(logs, "stderr"),
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("server %s stderr:\n%s", s.addr, s.Stderr())
		}
	})
	s.Start()
	return s
}

// Start (re)starts the server with the same address, root and flags, and
// waits until its port accepts connections.
func (s *server) Start() {
	s.t.Helper()
	args := append([]string{"serve", "--listen", s.addr, "--root", s.root}, s.args...)
	cmd := exec.Command(lpBin, args...)
	cmd.Env = cleanEnv(s.opts.env...)
	out, err := os.OpenFile(s.stdout, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.OpenFile(s.stderr, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer errf.Close()
	cmd.Stdout, cmd.Stderr = out, errf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.opts.cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start lightpath serve: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, 500*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-done:
			s.t.Fatalf("lightpath serve exited at start (%v):\n%s", cmd.ProcessState, s.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("lightpath serve does not accept on %s after 15s:\n%s", s.addr, s.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop sends SIGTERM and waits for a clean exit (SIGKILL after 10s).
func (s *server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.t.Errorf("lightpath serve did not exit within 10s of SIGTERM")
		cmd.Process.Kill()
		<-done
	}
}

// Kill ends the server at once, as a crash would.
func (s *server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	cmd.Process.Kill()
	<-done
}

// Running reports whether the server process is still alive.
func (s *server) Running() bool {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// URL is lp://HOST:PORT/p.
func (s *server) URL(p string) string { return "lp://" + s.addr + "/" + p }

func (s *server) Stderr() string {
	b, _ := os.ReadFile(s.stderr)
	return string(b)
}

// TransferLog parses the JSON lines the server wrote to stdout.
func (s *server) TransferLog() []map[string]any { return readJSONLines(s.t, s.stdout) }

func readJSONLines(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("transfer log line is not JSON: %q: %v", l, err)
			continue
		}
		out = append(out, m)
	}
	return out
}

// ---------------------------------------------------------------------------
// Running the client.

type result struct {
	stdout, stderr string
	code           int
}

type runOpts struct {
	env     []string
	timeout time.Duration // default 90s
}

// runLP runs the binary with args and waits, failing the test if it does not
// end within the timeout.
func runLP(t *testing.T, o runOpts, args ...string) result {
	t.Helper()
	p := startLP(t, o, args...)
	return p.Wait()
}

// runCp runs `lightpath cp args...` and returns its stdout, stderr and exit
// status.
func runCp(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	r := runLP(t, runOpts{}, append([]string{"cp"}, args...)...)
	return r.stdout, r.stderr, r.code
}

// proc is a client started in the background.
type proc struct {
	t        *testing.T
	args     []string
	cmd      *exec.Cmd
	out, err lockedBuffer
	done     chan struct{}
	timeout  time.Duration
}

func startLP(t *testing.T, o runOpts, args ...string) *proc {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 90 * time.Second
	}
	p := &proc{t: t, args: args, done: make(chan struct{}), timeout: o.timeout}
	p.cmd = exec.Command(lpBin, args...)
	p.cmd.Env = cleanEnv(o.env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start lightpath %s: %v", strings.Join(args, " "), err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			p.cmd.Process.Signal(syscall.SIGCONT)
			<-p.done
		}
	})
	return p
}

func (p *proc) Signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to lightpath %s: %v", sig, strings.Join(p.args, " "), err)
	}
}

func (p *proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process (killing it and failing the test after its
// timeout) and returns what it printed.
func (p *proc) Wait() result {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(p.timeout):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("lightpath %s: still running after %s, killed\nstdout:\n%s\nstderr:\n%s",
			strings.Join(p.args, " "), p.timeout, p.out.String(), p.err.String())
	}
	return result{stdout: p.out.String(), stderr: p.err.String(), code: p.cmd.ProcessState.ExitCode()}
}

// mustSucceed fails the test unless r is a clean exit.
func mustSucceed(t *testing.T, what string, r result) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit status %d\nstdout:\n%s\nstderr:\n%s", what, r.code, r.stdout, r.stderr)
	}
}

// cpOK runs cp --json args and fails the test unless it succeeds with a
// verified summary.
func cpOK(t *testing.T, args ...string) summary {
	t.Helper()
	out, errs, code := runCp(t, append([]string{"--json"}, args...)...)
	r := result{out, errs, code}
	mustSucceed(t, "cp "+strings.Join(args, " "), r)
	s := parseSummary(t, out)
	if !s.Verified || s.FilesFailed != 0 {
		t.Fatalf("cp %s: summary not verified or with failures: %+v", strings.Join(args, " "), s)
	}
	return s
}

// errLine is the one-line error format: lightpath: <what failed>: <why>.
var errLine = regexp.MustCompile(`^lightpath: [^:\n]+: \S.*$`)

// checkFailure checks a failed run: a non-zero exit and, as its last line on
// stderr, one error line that mentions every one of want (ignoring case).
// Lines before it are only allowed when the run retried.
func checkFailure(t *testing.T, what string, r result, want ...string) {
	t.Helper()
	if r.code == 0 {
		t.Errorf("%s: exit status 0, want a failure\nstdout:\n%s\nstderr:\n%s", what, r.stdout, r.stderr)
		return
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	if len(lines) != 1 {
		t.Errorf("%s: stderr has %d lines, want one:\n%s", what, len(lines), r.stderr)
	}
	if !errLine.MatchString(last) {
		t.Errorf("%s: error line %q is not of the form 'lightpath: <what failed>: <why>'", what, last)
	}
	for _, w := range want {
		if !strings.Contains(strings.ToLower(last), strings.ToLower(w)) {
			t.Errorf("%s: error line %q does not mention %q", what, last, w)
		}
	}
}

// ---------------------------------------------------------------------------
// NDJSON output.

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

type streamReport struct {
	CC      string   `json:"cc"`
	Bytes   int64    `json:"bytes"`
	RTTMs   *float64 `json:"rtt_ms"`
	Cwnd    *uint32  `json:"cwnd"`
	Retrans uint32   `json:"retransmits"`
}

type summary struct {
	Type          string         `json:"type"`
	Direction     string         `json:"direction"`
	Bytes         int64          `json:"bytes"`
	Files         int            `json:"files"`
	FilesFailed   int            `json:"files_failed"`
	FilesSkipped  int            `json:"files_skipped"`
	Seconds       float64        `json:"seconds"`
	ThroughputBps float64        `json:"throughput_bps"`
	Streams       int            `json:"streams"`
	Verified      bool           `json:"verified"`
	BytesSent     int64          `json:"bytes_sent"`
	BytesSkipped  int64          `json:"bytes_skipped"`
	BytesSparse   int64          `json:"bytes_sparse"`
	Attempts      int            `json:"attempts"`
	Bottleneck    string         `json:"bottleneck"`
	PerStream     []streamReport `json:"per_stream"`
	CC            string         `json:"cc"`
	Errors        []string       `json:"errors"`
}

// cpSummaryFields are the summary fields DESIGN.md promises.
var cpSummaryFields = []string{"bytes", "files", "seconds", "throughput_bps", "streams", "verified",
	"bytes_sent", "bytes_skipped", "bottleneck", "per_stream"}

// parseSummary checks that stdout is NDJSON and returns its last line, the
// summary.
func parseSummary(t *testing.T, stdout string) summary {
	t.Helper()
	s, _ := parseNDJSON(t, stdout, cpSummaryFields...)
	return s
}

// parseNDJSON checks every line of stdout is a JSON object, that the last one
// is a summary holding every one of fields, and returns it with all lines.
func parseNDJSON(t *testing.T, stdout string, fields ...string) (summary, []map[string]any) {
	t.Helper()
	var lines []map[string]any
	var last string
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.TrimSpace(l) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("--json output line is not a JSON object: %q: %v", l, err)
		}
		lines = append(lines, m)
		last = l
	}
	if len(lines) == 0 {
		t.Fatalf("--json printed nothing")
	}
	final := lines[len(lines)-1]
	if final["type"] != "summary" {
		t.Fatalf("last --json line is not the summary: %s", last)
	}
	for _, f := range fields {
		if _, ok := final[f]; !ok {
			t.Errorf("summary lacks field %q: %s", f, last)
		}
	}
	var s summary
	if err := json.Unmarshal([]byte(last), &s); err != nil {
		t.Fatalf("summary %s: %v", last, err)
	}
	return s, lines
}

// ---------------------------------------------------------------------------
// Data sets.

// writeRandom writes size pseudo-random bytes (seeded, so reproducible) to
// name, creating its directory.
func writeRandom(t *testing.T, name string, size int64, seed uint64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	var key [32]byte
	copy(key[:], fmt.Sprintf("lightpath-e2e-%d", seed))
	rng := rand.NewChaCha8(key)
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := int(min(left, int64(len(buf))))
		rng.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
		left -= int64(n)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, name, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

// mixedTree describes what makeMixedTree made.
type mixedTree struct {
	files, symlinks int
	bytes           int64 // apparent size of all regular files
	sparse          string
	sparseSize      int64
}

// makeMixedTree fills dir with what a real data set holds: nested and empty
// directories, empty files, names with spaces and non-ASCII, symlinks inside
// the tree, varied modes and mtimes, a sparse file and files of many blocks.
func makeMixedTree(t *testing.T, dir string) mixedTree {
	t.Helper()
	var mt mixedTree
	add := func(rel string, size int64, mode fs.FileMode, seed uint64) {
		p := filepath.Join(dir, rel)
		writeRandom(t, p, size, seed)
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		mt.files++
		mt.bytes += size
	}
	add("a.txt", 1234, 0o644, 1)
	add("run.sh", 300, 0o755, 2)
	add("secret.dat", 4096, 0o640, 3)
	add("empty", 0, 0o600, 4)
	add("dir with space/file with space.txt", 777, 0o644, 5)
	add("ünïcødé 目录/数据 ñ.bin", 65536+1, 0o644, 6)
	add("nested/deeper/deepest/leaf", 10, 0o444, 7)
	add("nested/deeper/empty-too", 0, 0o644, 8)
	// Many 64 KiB blocks with a short last one.
	add("big.bin", 3<<20+12345, 0o644, 9)
	mkdir(t, dir, "empty dir")
	mkdir(t, dir, "nested", "empty", "nested-empty")

	// A sparse file: 256 MiB apparent, a few KiB of data.
	mt.sparse = "sparse.img"
	mt.sparseSize = 256 << 20
	sp := filepath.Join(dir, mt.sparse)
	f, err := os.Create(sp)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 100<<20 + 4321, mt.sparseSize - 2048} {
		if _, err := f.WriteAt(bytes.Repeat([]byte("sparse data! "), 150), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(mt.sparseSize); err != nil {
		t.Fatal(err)
	}
	f.Close()
	mt.files++
	mt.bytes += mt.sparseSize

	for _, l := range [][2]string{
		{"nested/link-to-a", "../a.txt"},
		{"link-to-dir", "nested/deeper"},
		{"dir with space/link to ünïcødé", "../ünïcødé 目录/数据 ñ.bin"},
	} {
		if err := os.Symlink(l[1], filepath.Join(dir, l[0])); err != nil {
			t.Fatal(err)
		}
		mt.symlinks++
	}

	// Modes and mtimes of directories last, deepest first, so creating
	// their children does not move them. Nanoseconds are set on purpose.
	if err := os.Chmod(filepath.Join(dir, "nested"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "empty dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	setTimes(t, dir, time.Date(2021, 3, 4, 5, 6, 7, 123456789, time.UTC))
	return mt
}

// setTimes gives every file and directory under dir (and dir) a distinct
// mtime from base on, directories after their contents.
func setTimes(t *testing.T, dir string, base time.Time) {
	t.Helper()
	var paths []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if d.Type()&fs.ModeSymlink == 0 {
			paths = append(paths, p)
		}
		return nil
	})
	for i := len(paths) - 1; i >= 0; i-- { // children before parents
		mt := base.Add(time.Duration(i) * 1111 * time.Second)
		if err := os.Chtimes(paths[i], mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

// ---------------------------------------------------------------------------
// Comparing trees.

// compareTrees checks got is want byte for byte: the same entries, types,
// permission bits, mtimes (files and directories), symlink targets and
// contents, and nothing more (no partial files or journals left).
func compareTrees(t *testing.T, want, got string) {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		seen[rel] = true
		compareEntry(t, p, filepath.Join(got, rel), rel)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", want, err)
	}
	filepath.WalkDir(got, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(got, p)
		if !seen[rel] {
			t.Errorf("%s: in the copy but not in the source", rel)
		}
		return nil
	})
}

// compareEntry compares one entry (Lstat, symlinks not followed).
func compareEntry(t *testing.T, want, got, label string) {
	t.Helper()
	wi, err := os.Lstat(want)
	if err != nil {
		t.Fatal(err)
	}
	gi, err := os.Lstat(got)
	if err != nil {
		t.Errorf("%s: missing from the copy: %v", label, err)
		return
	}
	if wi.Mode().Type() != gi.Mode().Type() {
		t.Errorf("%s: type %v, want %v", label, gi.Mode().Type(), wi.Mode().Type())
		return
	}
	if wi.Mode().Type() == fs.ModeSymlink {
		wt, _ := os.Readlink(want)
		gt, _ := os.Readlink(got)
		if wt != gt {
			t.Errorf("%s: symlink to %q, want %q", label, gt, wt)
		}
		return
	}
	const bits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
	if wi.Mode()&bits != gi.Mode()&bits {
		t.Errorf("%s: mode %v, want %v", label, gi.Mode()&bits, wi.Mode()&bits)
	}
	if !wi.ModTime().Equal(gi.ModTime()) {
		t.Errorf("%s: mtime %v, want %v", label, gi.ModTime().UTC(), wi.ModTime().UTC())
	}
	if wi.Mode().IsRegular() {
		if wi.Size() != gi.Size() {
			t.Errorf("%s: size %d, want %d", label, gi.Size(), wi.Size())
			return
		}
		if !sameContent(t, want, got) {
			t.Errorf("%s: content differs", label)
		}
	}
}

// sameFile checks got holds want's content (and size); no metadata.
func sameFile(t *testing.T, want, got string) {
	t.Helper()
	wi, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	gi, err := os.Stat(got)
	if err != nil {
		t.Errorf("%s: %v", got, err)
		return
	}
	if wi.Size() != gi.Size() {
		t.Errorf("%s: size %d, want %d", got, gi.Size(), wi.Size())
		return
	}
	if !sameContent(t, want, got) {
		t.Errorf("%s: content differs from %s", got, want)
	}
}

func sameContent(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return (ea == io.EOF || ea == io.ErrUnexpectedEOF) && (eb == io.EOF || eb == io.ErrUnexpectedEOF)
		}
	}
}

// fileState is what must not change about a file that must be left alone.
type fileState struct {
	content []byte
	mode    fs.FileMode
	mtime   time.Time
}

func stateOf(t *testing.T, name string) fileState {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fileState{b, fi.Mode(), fi.ModTime()}
}

func checkUntouched(t *testing.T, name string, before fileState) {
	t.Helper()
	after := stateOf(t, name)
	if !bytes.Equal(after.content, before.content) || after.mode != before.mode || !after.mtime.Equal(before.mtime) {
		t.Errorf("%s was changed (mode %v→%v, mtime %v→%v, content equal %v)", name, before.mode, after.mode,
			before.mtime, after.mtime, bytes.Equal(after.content, before.content))
	}
}

// noFileContaining fails if any regular file under dir holds secret.
func noFileContaining(t *testing.T, dir string, secret []byte) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, secret) {
			t.Errorf("%s holds the content of a file outside the served root", p)
		}
		return nil
	})
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// A TCP proxy that records or tampers with what passes.

// tamperFunc may change b in place: the bytes at offset off of direction
// up (client to server) or down of connection conn (numbered from 0 in
// accept order).
type tamperFunc func(conn int, up bool, off int64, b []byte)

type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string
	tamper tamperFunc
	record bool

	mu    sync.Mutex
	rec   bytes.Buffer
	conns []net.Conn
	n     atomic.Int32
	wg    sync.WaitGroup
}

// startProxy listens on loopback and forwards every connection to target.
func startProxy(t *testing.T, target string, record bool, tamper tamperFunc) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target, tamper: tamper, record: record}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) Addr() string           { return p.ln.Addr().String() }
func (p *proxy) URL(path string) string { return "lp://" + p.Addr() + "/" + path }

// Recording returns every byte that passed, both directions.
func (p *proxy) Recording() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.rec.Bytes())
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		id := int(p.n.Add(1) - 1)
		var both sync.WaitGroup
		both.Add(2)
		p.wg.Add(3)
		go func() { defer p.wg.Done(); defer both.Done(); p.pipe(id, true, c, s) }()
		go func() { defer p.wg.Done(); defer both.Done(); p.pipe(id, false, s, c) }()
		go func() { defer p.wg.Done(); both.Wait(); c.Close(); s.Close() }()
	}
}

func (p *proxy) pipe(id int, up bool, from, to net.Conn) {
	buf := make([]byte, 32<<10)
	var off int64
	for {
		n, err := from.Read(buf)
		if n > 0 {
			b := buf[:n]
			if p.tamper != nil {
				p.tamper(id, up, off, b)
			}
			if p.record {
				p.mu.Lock()
				p.rec.Write(b)
				p.mu.Unlock()
			}
			off += int64(n)
			if _, werr := to.Write(b); werr != nil {
				from.Close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				to.(*net.TCPConn).CloseWrite()
			} else {
				to.Close()
			}
			return
		}
	}
}

// dialCtx is a dial bounded in time, for the hostile-peer tests.
func dialCtx(t *testing.T, addr string) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
