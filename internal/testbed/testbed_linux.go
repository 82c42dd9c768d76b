//go:build linux

package testbed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/testbed/emu"
	"github.com/lightpath/lightpath/internal/topology"
)

// Up builds a testbed: namespaces, TUN devices, the emulator daemon,
// addresses, htb trees and routes. On failure it removes what it made, so
// that a failed up leaves nothing behind; a crashed one is cleaned by Down.
func Up(ctx context.Context, o UpOptions) (res *UpResult, err error) {
	t0 := time.Now()
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := CheckName(o.Name); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root: it creates network namespaces, devices and queueing disciplines")
	}
	t, err := topology.Parse(o.File, o.Data)
	if err != nil {
		return nil, err
	}
	if hasState(o.Name) {
		return nil, fmt.Errorf("testbed %q exists, or an earlier up stopped half-way: run 'lightpath testbed down --name %s' first", o.Name, o.Name)
	}
	for i := range t.Nodes {
		if _, err := os.Stat(NamespacePath(o.Name, t.Nodes[i].Name)); err == nil {
			return nil, fmt.Errorf("namespace %s exists already (another testbed, or made by hand): choose another --name", NamespaceName(o.Name, t.Nodes[i].Name))
		}
	}
	if err := os.MkdirAll(Dir(o.Name), 0o755); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	// From here on, anything made is undone on failure. The topology goes
	// first so that Down can always find what to remove.
	defer func() {
		if err != nil {
			if _, derr := Down(o.Name, nil); derr != nil {
				err = fmt.Errorf("%w (and cleaning up failed: %v)", err, derr)
			}
		}
	}()
	if err := os.WriteFile(filepath.Join(Dir(o.Name), topologyFile), o.Data, 0o644); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	abs, _ := filepath.Abs(o.File)
	st := &State{Name: o.Name, File: abs, Created: time.Now().UTC(), Phase: PhaseBuilding}
	if err := writeState(st); err != nil {
		return nil, err
	}

	want := HostBufferMax(t)
	for _, key := range []string{"net.core.rmem_max", "net.core.wmem_max"} {
		raised, err := raiseHostMax(key, want)
		if err != nil {
			return nil, err
		}
		if raised {
			st.RaisedHost = append(st.RaisedHost, fmt.Sprintf("%s=%d", key, want))
			logf("raised %s to %d (host-wide; down leaves it)", key, want)
		}
	}

	for i := range t.Nodes {
		n := &t.Nodes[i]
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := netns.Create(NamespaceName(o.Name, n.Name)); err != nil {
			return nil, err
		}
		if err := setupNode(t, n, NamespacePath(o.Name, n.Name)); err != nil {
			return nil, err
		}
	}
	logf("%d namespaces", len(t.Nodes))
	for i := range t.Links {
		l := &t.Links[i]
		for _, e := range []*topology.End{&l.A, &l.B} {
			if err := emu.CreateTun(NamespacePath(o.Name, e.Node), e.Dev, l.MTU); err != nil {
				return nil, fmt.Errorf("link %s: %w", l.Name, err)
			}
		}
	}
	pid, err := startEmulator(ctx, o.Name, o.Exe)
	if err != nil {
		return nil, err
	}
	logf("emulator running (pid %d, log %s)", pid, LogPath(o.Name))
	for i := range t.Links {
		l := &t.Links[i]
		for _, e := range []*topology.End{&l.A, &l.B} {
			if err := setupEnd(l, e, NamespacePath(o.Name, e.Node)); err != nil {
				return nil, fmt.Errorf("link %s: %w", l.Name, err)
			}
		}
	}
	logf("%d links", len(t.Links))
	for i := range t.Nodes {
		if err := addRoutes(t, t.Nodes[i].Name, NamespacePath(o.Name, t.Nodes[i].Name)); err != nil {
			return nil, err
		}
	}
	st.Phase = PhaseUp
	if err := writeState(st); err != nil {
		return nil, err
	}
	return &UpResult{Name: o.Name, Nodes: len(t.Nodes), Links: len(t.Links), RaisedHost: st.RaisedHost,
		Seconds: time.Since(t0).Seconds(), EmulatorPID: pid}, nil
}

// startEmulator starts the daemon in a session of its own and waits until
// its control socket answers.
func startEmulator(ctx context.Context, name, exe string) (int, error) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return 0, fmt.Errorf("find the lightpath binary: %w", err)
		}
	}
	logf, err := os.OpenFile(LogPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("emulator log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, "testbed", "emulator", "--name", name)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start emulator: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(15 * time.Second)
	for {
		if c, err := emu.Dial(SocketPath(name)); err == nil {
			_, serr := c.Status()
			c.Close()
			if serr == nil {
				return cmd.Process.Pid, nil
			}
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("emulator exited (%v): %s", err, lastLine(LogPath(name)))
		case <-deadline:
			cmd.Process.Kill()
			return 0, fmt.Errorf("emulator did not answer on %s within 15 s: %s", SocketPath(name), lastLine(LogPath(name)))
		case <-ctx.Done():
			cmd.Process.Kill()
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// Down removes a testbed: the emulator, every process inside its
// namespaces, its TUN devices, its namespaces and its state directory. It
// is idempotent, and it cleans up after an up that stopped half-way.
// Host-wide settings that up raised stay raised.
func Down(name string, logf func(string, ...any)) (*DownResult, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	res := &DownResult{Name: name}
	if !hasState(name) {
		// Nothing of an up here: an absent directory, or one holding
		// only what others put there (a controller's socket).
		return res, nil
	}
	res.Existed = true
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root: it removes network namespaces and devices")
	}
	var errs []error
	if pid := emulatorPID(name); pid > 0 {
		stopProcess(pid)
		res.Processes++
	}
	var nodes []string
	if t, err := loadCopy(name); err == nil {
		for i := range t.Nodes {
			nodes = append(nodes, t.Nodes[i].Name)
		}
	} else if _, serr := os.Stat(filepath.Join(Dir(name), topologyFile)); serr == nil {
		// The copy is there but unreadable: fall back on the names.
		matches, _ := filepath.Glob(filepath.Join("/run/netns", NamespaceName(name, "*")))
		for _, m := range matches {
			nodes = append(nodes, strings.TrimPrefix(filepath.Base(m), NamespaceName(name, "")))
		}
	}
	inodes := map[uint64]bool{}
	for _, n := range nodes {
		if ino, err := namespaceInode(NamespacePath(name, n)); err == nil {
			inodes[ino] = true
		}
	}
	if len(inodes) > 0 {
		pids := killInNamespaces(inodes)
		for _, pid := range pids {
			waitGone(pid, 2*time.Second)
		}
		res.Processes += len(pids)
	}
	for _, n := range nodes {
		p := NamespacePath(name, n)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		k, err := deleteTuns(p)
		res.Devices += k
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", NamespaceName(name, n), err))
		}
		if err := netns.Delete(NamespaceName(name, n)); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Namespaces++
	}
	if len(errs) > 0 {
		return res, errors.Join(errs...)
	}
	kept, err := removeMade(name)
	if err != nil {
		return res, fmt.Errorf("remove %s: %w", Dir(name), err)
	}
	if res.Kept = kept; len(kept) > 0 {
		logf("left %s in %s: up did not make them", strings.Join(kept, ", "), Dir(name))
	}
	logf("removed %d namespaces, %d devices, %d processes", res.Namespaces, res.Devices, res.Processes)
	return res, nil
}

// emulatorPID reads the daemon's pid, and checks that the process is still
// this testbed's emulator (a pid may be reused after a crash).
func emulatorPID(name string) int {
	b, err := os.ReadFile(filepath.Join(Dir(name), pidFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) < 5 || args[1] != "testbed" || args[2] != "emulator" || args[len(args)-1] != name {
		return 0
	}
	return pid
}

func stopProcess(pid int) {
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	if !waitGone(pid, 3*time.Second) {
		syscall.Kill(pid, syscall.SIGKILL)
		waitGone(pid, time.Second)
	}
}

// waitGone waits for a process to end, then kills it if it has not.
func waitGone(pid int, d time.Duration) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if syscall.Kill(pid, 0) != nil {
			return true
		}
		// A zombie child of ours counts as gone.
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	return false
}

// RunEmulator is the emulator daemon of a testbed: it opens both ends of
// every link, carries packets between them with each link's delay, jitter
// and loss, and answers on its control socket until ctx ends.
func RunEmulator(ctx context.Context, name string, log *slog.Logger) error {
	_, t, err := Open(name)
	if err != nil {
		return err
	}
	e := emu.New(log)
	defer e.Close()
	for i := range t.Links {
		l := &t.Links[i]
		for _, d := range [][2]*topology.End{{&l.A, &l.B}, {&l.B, &l.A}} {
			spec := emu.PipeSpec{
				Link: l.Name, From: d[0].Node, To: d[1].Node,
				FromNS: NamespacePath(name, d[0].Node), FromDev: d[0].Dev,
				ToNS: NamespacePath(name, d[1].Node), ToDev: d[1].Dev,
				Params: EmuParams(l.Params),
			}
			if err := e.Add(spec); err != nil {
				return fmt.Errorf("link %s from %s: %w", l.Name, d[0].Node, err)
			}
		}
	}
	sock := SocketPath(name)
	os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	defer os.Remove(sock)
	pidPath := filepath.Join(Dir(name), pidFile)
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	defer os.Remove(pidPath)
	log.Info("emulator up", "testbed", name, "links", len(t.Links), "socket", sock)
	err = e.Serve(ctx, ln)
	if ctx.Err() != nil {
		log.Info("emulator stopping", "testbed", name)
		return nil
	}
	return err
}

// EmuParams converts a link's parameters to the emulator's.
func EmuParams(p topology.Params) emu.Params {
	return emu.Params{
		Delay: p.Delay, Jitter: p.Jitter, Reorder: p.Reorder, Down: p.Down,
		Loss: p.Loss, Duplicate: p.Duplicate,
	}
}

// Exec runs argv inside a node's namespace, replacing this process, with
// LIGHTPATH_TESTBED and LIGHTPATH_NODE set.
func Exec(name, node string, argv []string) error {
	_, t, err := Open(name)
	if err != nil {
		return err
	}
	if _, ok := t.Node(node); !ok {
		return fmt.Errorf("testbed %s has no node %q (nodes: %s)", name, node, nodeNames(t))
	}
	if len(argv) == 0 {
		return errors.New("no command given (lightpath testbed exec NODE -- CMD...)")
	}
	env := append(os.Environ(), "LIGHTPATH_TESTBED="+name, "LIGHTPATH_NODE="+node)
	return execIn(NamespacePath(name, node), argv, env)
}

func nodeNames(t *topology.Topology) string {
	var s []string
	for i := range t.Nodes {
		s = append(s, t.Nodes[i].Name)
	}
	return strings.Join(s, ", ")
}

func lookPath(file string) (string, error) {
	p, err := exec.LookPath(file)
	if err != nil {
		return "", fmt.Errorf("command %q: %w", file, err)
	}
	return p, nil
}

// egressStats reads the queueing numbers of one link end's egress device:
// the htb root's backlog and drops, and the rate of class 1:1.
func egressStats(name string, e *topology.End) (EgressStats, error) {
	var s EgressStats
	h, err := netns.Handle(NamespacePath(name, e.Node))
	if err != nil {
		return s, err
	}
	defer h.Close()
	dev, err := h.LinkByName(e.Dev)
	if err != nil {
		return s, fmt.Errorf("device %s: %w", e.Dev, err)
	}
	a := dev.Attrs()
	s.Up = a.Flags&net.FlagUp != 0                // administratively up
	s.Carrier = a.RawFlags&unix.IFF_LOWER_UP != 0 // the emulator holds it and the link is not down
	qs, err := h.QdiscList(dev)
	if err != nil {
		return s, fmt.Errorf("qdiscs of %s: %w", e.Dev, err)
	}
	for _, q := range qs {
		if q.Attrs().Handle == topology.HTBRoot && q.Attrs().Statistics != nil {
			st := q.Attrs().Statistics
			s.QueueDrops = uint64(st.Queue.Drops)
			s.BacklogBytes = uint64(st.Queue.Backlog)
			s.BacklogPackets = uint64(st.Queue.Qlen)
			s.SentBytes = st.Basic.Bytes
			s.SentPackets = uint64(st.Basic.Packets)
		}
	}
	cs, err := h.ClassList(dev, topology.HTBRoot)
	if err != nil {
		return s, fmt.Errorf("classes of %s: %w", e.Dev, err)
	}
	for _, c := range cs {
		if hc, ok := c.(*netlink.HtbClass); ok && hc.Handle == topology.HTBLink {
			s.RateBPS = hc.Rate * 8
		}
		if c.Attrs().Handle >= topology.HTBFirstRes && c.Attrs().Handle&0xffff0000 == topology.HTBRoot {
			s.ReservationClasses++
		}
	}
	return s, nil
}

// setEgressRate rescales one link end's htb tree.
func setEgressRate(name string, l *topology.Link, e *topology.End, rate uint64) error {
	h, err := netns.Handle(NamespacePath(name, e.Node))
	if err != nil {
		return err
	}
	defer h.Close()
	dev, err := h.LinkByName(e.Dev)
	if err != nil {
		return fmt.Errorf("device %s: %w", e.Dev, err)
	}
	p, err := PlanHTB(l, e.Node, rate)
	if err != nil {
		return err
	}
	return setRate(h, dev.Attrs().Index, p)
}

// Status reports a testbed as built, with the live numbers of every link.
func Status(name string) (*StatusReport, error) {
	st, t, err := Open(name)
	if err != nil {
		return nil, err
	}
	r := &StatusReport{Testbed: name, File: st.File, Phase: st.Phase, Created: st.Created,
		Emulator: EmulatorStatus{Socket: SocketPath(name), Log: LogPath(name), PID: emulatorPID(name)}}
	stats := map[[2]string]emu.PipeStats{}
	if c, err := emu.Dial(SocketPath(name)); err != nil {
		r.Emulator.Error = err.Error()
	} else {
		ps, err := c.Status()
		c.Close()
		if err != nil {
			r.Emulator.Error = err.Error()
		} else {
			r.Emulator.Running = true
			for _, p := range ps {
				stats[[2]string{p.Link, p.From}] = p
			}
		}
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		r.Nodes = append(r.Nodes, NodeStatus{Name: n.Name, Site: n.Site, Role: n.Role,
			Namespace: NamespaceName(name, n.Name), IPv4: n.IPv4.String(), IPv6: n.IPv6.String()})
	}
	for i := range t.Links {
		l := &t.Links[i]
		ls := LinkStatus{Name: l.Name, Role: l.Role, MTU: l.MTU, Reservable: l.Reservable}
		for _, e := range []*topology.End{&l.A, &l.B} {
			ls.Ends = append(ls.Ends, EndStatus{Node: e.Node, Device: e.Dev, IPv4: e.IPv4.String(), IPv6: e.IPv6.String()})
		}
		for _, d := range [][2]*topology.End{{&l.A, &l.B}, {&l.B, &l.A}} {
			ds := DirStatus{From: d[0].Node, To: d[1].Node, Device: d[0].Dev}
			if ps, ok := stats[[2]string{l.Name, d[0].Node}]; ok {
				p := ps.Params
				ds.DelayNS, ds.JitterNS, ds.Reorder, ds.Down, ds.Blackhole = int64(p.Delay), int64(p.Jitter), p.Reorder, p.Down, p.Blackhole
				ds.LossModel, ds.Loss, ds.Duplicate = p.Loss.Model, p.Loss.MeanLoss(), p.Duplicate
				ds.PacketsIn, ds.BytesIn, ds.SuperPacketsIn = ps.PacketsIn, ps.BytesIn, ps.SuperPacketsIn
				ds.Duplicated = ps.Duplicated
				ds.Packets, ds.Bytes = ps.PacketsOut, ps.BytesOut
				ds.DropsLoss, ds.DropsDown, ds.DropsBlackhole = ps.DropsLoss, ps.DropsDown, ps.DropsBlackhole
				ds.MaxSegmentBytes, ds.MaxPacketBytes = ps.MaxSegmentBytes, ps.MaxPacketBytes
				ds.DelayPackets, ds.DelayBytes = ps.QueuedPackets, ps.QueuedBytes
			}
			if eg, err := egressStats(name, d[0]); err != nil {
				ds.Error = err.Error()
			} else {
				ds.Egress = &eg
				ds.RateBPS = eg.RateBPS
				ds.DropsQueue, ds.QueuePackets, ds.QueueBytes = eg.QueueDrops, eg.BacklogPackets, eg.BacklogBytes
			}
			ls.Directions = append(ls.Directions, ds)
		}
		r.Links = append(r.Links, ls)
	}
	return r, nil
}

// LinkSet changes a link while traffic flows: the rate in the kernel (htb
// classes 1:1 and 1:2 of each direction; agents' classes are left alone),
// the rest in the emulator.
func LinkSet(name, link string, c LinkChange) error {
	_, t, err := Open(name)
	if err != nil {
		return err
	}
	l, ok := t.Link(link)
	if !ok {
		var names []string
		for i := range t.Links {
			names = append(names, t.Links[i].Name)
		}
		return fmt.Errorf("testbed %s has no link %q (links: %s)", name, link, strings.Join(names, ", "))
	}
	if c.Down != nil && *c.Down && c.Blackhole != nil && *c.Blackhole {
		return errors.New("a link is down or a blackhole, not both")
	}
	ends := []*topology.End{&l.A, &l.B}
	if c.From != "" {
		e, ok := l.End(c.From)
		if !ok {
			return fmt.Errorf("link %s has no end at %q (its ends: %s, %s)", link, c.From, l.A.Node, l.B.Node)
		}
		ends = []*topology.End{e}
	}
	if c.Rate != nil {
		if *c.Rate == 0 {
			return errors.New("a rate of 0: use --down to cut a link")
		}
		for _, e := range ends {
			if err := setEgressRate(name, l, e, *c.Rate); err != nil {
				return fmt.Errorf("rate of %s from %s: %w", link, e.Node, err)
			}
		}
	}
	if c.Delay == nil && c.Jitter == nil && c.Loss == nil && c.Duplicate == nil && c.Down == nil && c.Blackhole == nil {
		return nil
	}
	cl, err := emu.Dial(SocketPath(name))
	if err != nil {
		return fmt.Errorf("emulator: %w", err)
	}
	defer cl.Close()
	ps, err := cl.Status()
	if err != nil {
		return fmt.Errorf("emulator: %w", err)
	}
	for _, e := range ends {
		var p *emu.Params
		for i := range ps {
			if ps[i].Link == link && ps[i].From == e.Node {
				p = &ps[i].Params
			}
		}
		if p == nil {
			return fmt.Errorf("emulator does not carry link %s from %s", link, e.Node)
		}
		if c.Delay != nil {
			p.Delay = *c.Delay
		}
		if c.Jitter != nil {
			p.Jitter = *c.Jitter
		}
		if p.Jitter > p.Delay && !p.Reorder {
			return fmt.Errorf("jitter %v is more than the delay %v: packets would have to be reordered, which link %s does not allow", p.Jitter, p.Delay, link)
		}
		if c.Loss != nil {
			p.Loss = *c.Loss
		}
		if c.Duplicate != nil {
			p.Duplicate = *c.Duplicate
		}
		if c.Down != nil {
			p.Down, p.Blackhole = *c.Down, false
		}
		if c.Blackhole != nil {
			p.Blackhole = *c.Blackhole
			if p.Blackhole {
				p.Down = false
			}
		}
		if err := cl.Set(link, e.Node, *p); err != nil {
			return fmt.Errorf("emulator: %w", err)
		}
	}
	return nil
}
