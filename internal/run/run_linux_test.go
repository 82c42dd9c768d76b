package run

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/roottest"
)

// The test binary doubles as the command run in the cgroup: with
// LP_RUN_TEST_HELPER set it does what the variable says and exits.
func TestMain(m *testing.M) {
	switch os.Getenv("LP_RUN_TEST_HELPER") {
	case "":
		os.Exit(m.Run())
	case "mark":
		// Print the marks of a TCP, a UDP and an IPv6 socket created here.
		for _, s := range [][2]int{{unix.AF_INET, unix.SOCK_STREAM}, {unix.AF_INET, unix.SOCK_DGRAM}, {unix.AF_INET6, unix.SOCK_STREAM}} {
			m, err := sockMark(s[0], s[1])
			if err != nil {
				fmt.Println("error", err)
				os.Exit(2)
			}
			fmt.Println(m)
		}
		os.Exit(0)
	case "cgroup":
		b, _ := os.ReadFile("/proc/self/cgroup")
		os.Stdout.Write(b)
		os.Exit(0)
	case "connect":
		// Connect to LP_RUN_TEST_ADDR and hold the connection until the
		// far end closes it.
		c, err := net.Dial("tcp", os.Getenv("LP_RUN_TEST_ADDR"))
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		io.Copy(io.Discard, c)
		os.Exit(0)
	case "exit":
		n, _ := strconv.Atoi(os.Getenv("LP_RUN_TEST_CODE"))
		os.Exit(n)
	case "kill":
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		select {}
	}
	os.Exit(3)
}

// sockMark creates a socket and reads its firewall mark back (SO_MARK).
func sockMark(family, typ int) (int, error) {
	fd, err := unix.Socket(family, typ, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK)
}

func testCgroup(t *testing.T) *Cgroup {
	t.Helper()
	roottest.Require(t, "makes a cgroup and attaches a BPF program to it")
	cg, err := NewCgroup()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cg.Remove(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(cg.Dir()); !os.IsNotExist(err) {
			t.Errorf("cgroup %s still there after Remove: %v", cg.Dir(), err)
		}
	})
	return cg
}

func helper(t *testing.T, cg *Cgroup, mode string, env ...string) (string, int) {
	t.Helper()
	t.Setenv("LP_RUN_TEST_HELPER", mode)
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	st, err := cg.Exec([]string{os.Args[0]}, nil, &out, &errb)
	if err != nil {
		t.Fatalf("exec %s: %v (%s)", mode, err, errb.String())
	}
	return out.String(), st
}

// TestMarkSockets: every socket a process in the cgroup creates carries
// the mark; a socket of this process, outside it, does not.
func TestMarkSockets(t *testing.T) {
	cg := testCgroup(t)
	mark := Mark(46)
	if err := cg.MarkSockets(mark); err != nil {
		t.Fatal(err)
	}
	out, st := helper(t, cg, "mark")
	if st != 0 {
		t.Fatalf("helper exited %d: %s", st, out)
	}
	want := strings.Repeat(fmt.Sprintf("%d\n", mark), 3)
	if out != want {
		t.Errorf("marks inside the cgroup (tcp, udp, tcp6):\n%s want %d each", out, mark)
	}
	if m, err := sockMark(unix.AF_INET, unix.SOCK_STREAM); err != nil || m != 0 {
		t.Errorf("a socket outside the cgroup has mark %d (%v): want 0", m, err)
	}
}

// TestExecInCgroup: the command starts inside the cgroup, and its exit
// status comes back, 128+N when signal N ended it.
func TestExecInCgroup(t *testing.T) {
	cg := testCgroup(t)
	out, _ := helper(t, cg, "cgroup")
	if !strings.Contains(out, "0::/"+cg.Path+"\n") {
		t.Errorf("/proc/self/cgroup of the command:\n%s want 0::/%s", out, cg.Path)
	}
	if _, st := helper(t, cg, "exit", "LP_RUN_TEST_CODE=7"); st != 7 {
		t.Errorf("exit 7 came back as %d", st)
	}
	if _, st := helper(t, cg, "kill"); st != 128+int(syscall.SIGTERM) {
		t.Errorf("killed by SIGTERM came back as %d, want %d", st, 128+int(syscall.SIGTERM))
	}
	var errb bytes.Buffer
	if st, err := cg.Exec([]string{filepath.Join(t.TempDir(), "missing")}, nil, nil, &errb); st != 127 || err == nil {
		t.Errorf("a missing command: status %d, error %v; want 127 and an error", st, err)
	}
}

// TestNoWritableCgroup2: a hierarchy that cannot be written is
// ErrNoCgroup2.
func TestNoWritableCgroup2(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// Root writes anywhere: a path under a file cannot be made.
		dir = filepath.Join(t.TempDir(), "file")
		os.WriteFile(dir, nil, 0o644)
	}
	if _, err := newCgroupAt(dir); err == nil || !strings.Contains(err.Error(), ErrNoCgroup2.Error()) {
		t.Errorf("newCgroupAt(%s): %v, want %v", dir, err, ErrNoCgroup2)
	}
}

// TestConns: sock_diag finds the connection a process in the cgroup
// made, and not the test's own sockets outside it.
func TestConns(t *testing.T) {
	cg := testCgroup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	mine, err := net.Dial("tcp", ln.Addr().String()) // outside the cgroup
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	first, _ := ln.Accept()
	defer first.Close()

	t.Setenv("LP_RUN_TEST_HELPER", "connect")
	t.Setenv("LP_RUN_TEST_ADDR", ln.Addr().String())
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		_, err := cg.Exec([]string{os.Args[0]}, nil, &out, &out)
		done <- err
	}()
	theirs, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	conns, err := cg.Conns()
	theirs.Close()
	if err := <-done; err != nil {
		t.Fatalf("helper: %v %s", err, out.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	want := Conn{Proto: reserve.ProtoTCP, Local: netip.MustParseAddrPort(theirs.RemoteAddr().String()), Remote: netip.MustParseAddrPort(ln.Addr().String())}
	if len(conns) != 1 || conns[0] != want {
		t.Errorf("the cgroup's connections: %+v, want only %+v (the test's own is %s)", conns, want, mine.LocalAddr())
	}
}
