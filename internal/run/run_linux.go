package run

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/cgroup2"
	"github.com/lightpath/lightpath/internal/reserve"
)

// Cgroup is a run's own cgroup under the cgroup2 hierarchy.
type Cgroup struct {
	Mount string // the cgroup2 mount point
	Path  string // relative to Mount: Parent/run-<random>
	ID    uint64 // the cgroup's id (its directory's inode)

	dir  *os.File // the cgroup's directory, for CLONE_INTO_CGROUP
	prog *ebpf.Program
	link link.Link
}

// NewCgroup makes a cgroup of its own for one run: Parent/run-<random>
// under the cgroup2 mount found in /proc/self/mountinfo. A host without
// one this process may write to is ErrNoCgroup2.
func NewCgroup() (*Cgroup, error) {
	mnt, err := cgroup2.Mount()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroup2, err)
	}
	return newCgroupAt(mnt)
}

func newCgroupAt(mnt string) (*Cgroup, error) {
	parent := filepath.Join(mnt, Parent)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroup2, err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	rel := Parent + "/run-" + hex.EncodeToString(rnd[:])
	abs := filepath.Join(mnt, rel)
	if err := os.Mkdir(abs, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroup2, err)
	}
	dir, err := os.Open(abs)
	if err != nil {
		os.Remove(abs)
		return nil, fmt.Errorf("%w: %w", ErrNoCgroup2, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
		dir.Close()
		os.Remove(abs)
		return nil, fmt.Errorf("%w: stat %s: %w", ErrNoCgroup2, abs, err)
	}
	return &Cgroup{Mount: mnt, Path: rel, ID: st.Ino, dir: dir}, nil
}

// Dir is the cgroup's directory.
func (c *Cgroup) Dir() string { return filepath.Join(c.Mount, c.Path) }

// markProgram is the cgroup/sock_create program that gives every socket
// created in the cgroup the firewall mark: struct bpf_sock's mark (the
// fifth __u32, offset 16) is written, and 1 lets the socket be created.
func markProgram(mark uint32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm32(asm.R2, int32(mark)),
		asm.StoreMem(asm.R1, 16, asm.R2, asm.Word),
		asm.Mov.Imm(asm.R0, 1),
		asm.Return(),
	}
}

// MarkSockets attaches to the cgroup a BPF program (cgroup/sock_create)
// that sets mark on every socket created inside it. It stays attached
// while this process holds it (Remove, or the process's end, detaches it).
func (c *Cgroup) MarkSockets(mark uint32) error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "lp_run_mark",
		Type:         ebpf.CGroupSock,
		AttachType:   ebpf.AttachCGroupInetSockCreate,
		License:      "Apache-2.0",
		Instructions: markProgram(mark),
	})
	if err != nil {
		return fmt.Errorf("load the socket-marking BPF program: %w", err)
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: c.Dir(), Attach: ebpf.AttachCGroupInetSockCreate, Program: prog})
	if err != nil {
		prog.Close()
		return fmt.Errorf("attach the socket-marking BPF program to cgroup %s: %w", c.Path, err)
	}
	c.prog, c.link = prog, l
	return nil
}

// Exec runs argv inside the cgroup (placed there by the kernel as it is
// created: CLONE_INTO_CGROUP, so not one of its sockets escapes), with
// the standard streams given, forwarding SIGINT and SIGTERM to it, and
// returns its exit status: 128+N when signal N ended it. The error is set
// when it could not be started (status 127 when it was not found, 126
// otherwise).
func (c *Cgroup) Exec(argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) == 0 {
		return 127, errors.New("no command to run")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(c.dir.Fd())}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127, fmt.Errorf("start %s: %w", argv[0], err)
		}
		return 126, fmt.Errorf("start %s: %w", argv[0], err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && st.Signaled():
		return 128 + int(st.Signal()), nil
	case ok && st.Exited():
		return st.ExitStatus(), nil
	case err != nil:
		return 1, fmt.Errorf("wait for %s: %w", argv[0], err)
	}
	return cmd.ProcessState.ExitCode(), nil
}

// Remove detaches the program and removes the cgroup; processes the
// command left behind in it are killed first (cgroup.kill), since the
// reservation they would use is gone.
func (c *Cgroup) Remove() error {
	if c.link != nil {
		c.link.Close()
		c.link = nil
	}
	if c.prog != nil {
		c.prog.Close()
		c.prog = nil
	}
	if c.dir != nil {
		c.dir.Close()
		c.dir = nil
	}
	dir := c.Dir()
	var err error
	for i := 0; i < 50; i++ {
		if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		if procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs")); strings.TrimSpace(string(procs)) != "" {
			os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", c.Path, err)
}

// LocalAddrs is the addresses of this network namespace's interfaces.
func LocalAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list this host's addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}

// Conns is the TCP and UDP sockets (IPv4 and IPv6) of this network
// namespace that were created in the cgroup, listening ones left out,
// read with sock_diag.
func (c *Cgroup) Conns() ([]Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_INET_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	var out []Conn
	buf := make([]byte, 1<<16)
	seq := uint32(0)
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		for _, p := range []struct {
			num   uint8
			proto reserve.Protocol
		}{{unix.IPPROTO_TCP, reserve.ProtoTCP}, {unix.IPPROTO_UDP, reserve.ProtoUDP}} {
			seq++
			if err := unix.Sendto(fd, diagRequest(seq, family, p.num, c.ID), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
				return nil, fmt.Errorf("sock_diag: %w", err)
			}
			for {
				n, _, err := unix.Recvfrom(fd, buf, 0)
				if err != nil {
					return nil, fmt.Errorf("sock_diag: %w", err)
				}
				conns, done, errno := parseDiag(buf[:n], seq, p.proto, c.ID)
				out = append(out, conns...)
				if errno != 0 {
					return nil, fmt.Errorf("sock_diag: %w", unix.Errno(-errno))
				}
				if done {
					break
				}
			}
		}
	}
	return out, nil
}
