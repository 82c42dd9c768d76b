//go:build linux

package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/topology"
)

// prober probes the paths of one node's agent (probe.go) and answers the
// probes of the other agents, on sockets of the node's namespace.
type prober struct {
	ns, node string
	log      *slog.Logger
	changed  chan<- struct{}

	mu    sync.Mutex
	paths map[string]*probed // by probeTarget.Key
	done  bool
}

// probed is one path under probe.
type probed struct {
	target probeTarget
	conn   *net.UDPConn
	token  uint64
	seq    uint64
	det    *Detector
	since  time.Time // when it went down or up
}

// startProber opens the echo responder (UDP ProbePort, IPv4 and, when the
// namespace has it, IPv6) in the namespace at ns ("" is the agent's own)
// and starts probing every ProbePeriod; it signals changed whenever a path
// goes down or comes back. Everything closes when ctx ends.
func startProber(ctx context.Context, ns, node string, log *slog.Logger, changed chan<- struct{}) (*prober, error) {
	p := &prober{ns: ns, node: node, log: log, changed: changed, paths: map[string]*probed{}}
	var conns []*net.UDPConn
	err := netns.Do(ns, func() error {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{Port: ProbePort})
		if err != nil {
			return fmt.Errorf("answer probes on UDP port %d: %w", ProbePort, err)
		}
		conns = append(conns, c)
		if c6, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified, Port: ProbePort}); err == nil {
			conns = append(conns, c6)
		} else {
			log.Warn("probes are answered over IPv4 only", "err", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, c := range conns {
		go p.answer(c)
	}
	go func() {
		<-ctx.Done()
		for _, c := range conns {
			c.Close()
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.done = true
		for k, x := range p.paths {
			x.conn.Close()
			delete(p.paths, k)
		}
	}()
	go p.run(ctx)
	return p, nil
}

// answer echoes every probe that reaches c, marked as it came (the
// reservation's DSCP and firewall mark), so the echo takes the reserved
// path back.
func (p *prober) answer(c *net.UDPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		p.log.Error("probe responder", "err", err)
		return
	}
	v6 := c.LocalAddr().(*net.UDPAddr).IP.To4() == nil
	buf := make([]byte, 256)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		m, err := parseProbe(buf[:n])
		if err != nil || m.Kind != probeAsk {
			continue
		}
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = markSocket(int(fd), v6, m.DSCP) }); err != nil || serr != nil {
			p.log.Warn("mark an echo", "err", errors.Join(err, serr))
			continue
		}
		m.Kind = probeEcho
		c.WriteToUDPAddrPort(m.marshal(), from)
	}
}

// markSocket marks what fd sends like the flows of the reservation with
// dscp: the DSCP, and the firewall mark that its ip rules look for.
func markSocket(fd int, v6 bool, dscp uint8) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, topology.MarkBase+int(dscp)); err != nil {
		return fmt.Errorf("SO_MARK: %w", err)
	}
	if v6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(dscp)<<2); err != nil {
			return fmt.Errorf("IPV6_TCLASS: %w", err)
		}
		return nil
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_TOS, int(dscp)<<2); err != nil {
		return fmt.Errorf("IP_TOS: %w", err)
	}
	return nil
}

// set makes the paths probed those of ts: new ones get a socket, marked
// for the reservation and connected to the far agent, and a fresh
// Detector; the others are closed.
func (p *prober) set(ts []probeTarget) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	keep := map[string]bool{}
	for _, t := range ts {
		keep[t.Key] = true
		if _, ok := p.paths[t.Key]; ok {
			continue
		}
		c, err := p.dial(t)
		if err != nil {
			p.log.Warn("probe a path", "id", t.ID, "path", pathString(t.Path), "err", err)
			continue
		}
		x := &probed{target: t, conn: c, token: rand.Uint64(), det: NewDetector(t.Timeout)}
		p.paths[t.Key] = x
	}
	for k, x := range p.paths {
		if !keep[k] {
			x.conn.Close()
			delete(p.paths, k)
		}
	}
}

func (p *prober) dial(t probeTarget) (*net.UDPConn, error) {
	network := "udp4"
	if t.Addr.Is6() {
		network = "udp6"
	}
	var c *net.UDPConn
	err := netns.Do(p.ns, func() error {
		// Marked before it connects: the route it connects by is the
		// reservation's.
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = markSocket(int(fd), t.Addr.Is6(), t.DSCP)
				if serr == nil {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
				}
			}); err != nil {
				return err
			}
			return serr
		}}
		conn, err := d.Dial(network, netip.AddrPortFrom(t.Addr, ProbePort).String())
		if err != nil {
			return err
		}
		c = conn.(*net.UDPConn)
		return nil
	})
	return c, err
}

// drain reads the echoes waiting on x's socket without blocking, each at
// the time the kernel received it (SO_TIMESTAMPNS), so an agent slow to
// run (a busy host) never takes an echo that came in time for a lost
// probe; the caller holds mu and judges right after.
func (p *prober) drain(x *probed) Transition {
	rc, err := x.conn.SyscallConn()
	if err != nil {
		return Unchanged
	}
	tr := Unchanged
	buf, oob := make([]byte, 64), make([]byte, 128)
	for range 1024 {
		var n, oobn int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_DONTWAIT)
			return true
		}); err != nil || errors.Is(rerr, unix.EAGAIN) {
			break
		}
		if rerr != nil {
			continue // ECONNREFUSED: no agent answered there (yet)
		}
		m, err := parseProbe(buf[:n])
		if err != nil || m.Kind != probeEcho || m.Token != x.token || m.DSCP != x.target.DSCP {
			continue
		}
		at := received(oob[:oobn])
		late, run := x.det.late, x.det.Lost()
		t := x.det.Echo(m.Seq, at)
		if x.det.late > late && run > 0 && !x.det.Down() {
			// Worth a line once a run: it says the host (or the data
			// plane) is slow, which an operator wants to know.
			p.log.Info(fmt.Sprintf("late probe echo on path %s: %d probes lost in a row, but the path carries packets", pathString(x.target.Path), run),
				"id", x.target.ID, "far", x.target.Far, "rtt", x.det.lateRTT.Round(time.Millisecond).String(), "timeout", x.det.CurrentTimeout().Round(time.Millisecond).String())
		}
		if t != Unchanged {
			p.note(x, t, at)
			tr = t
		}
	}
	return tr
}

// received is the kernel's receive time in a datagram's control
// messages (SCM_TIMESTAMPNS), or now if it has none.
func received(oob []byte) time.Time {
	cms, _ := unix.ParseSocketControlMessage(oob)
	for _, c := range cms {
		if c.Header.Level != unix.SOL_SOCKET || c.Header.Type != unix.SCM_TIMESTAMPNS {
			continue
		}
		switch len(c.Data) { // struct timespec: two longs
		case 16:
			return time.Unix(int64(binary.NativeEndian.Uint64(c.Data)), int64(binary.NativeEndian.Uint64(c.Data[8:])))
		case 8:
			return time.Unix(int64(int32(binary.NativeEndian.Uint32(c.Data))), int64(int32(binary.NativeEndian.Uint32(c.Data[4:]))))
		}
	}
	return time.Now()
}

// run sends a probe on every path each ProbePeriod, and reads the echoes
// and judges the probes out four times as often, so a probe is judged
// lost at most a quarter period after its deadline.
func (p *prober) run(ctx context.Context) {
	const judges = 4
	t := time.NewTicker(ProbePeriod / judges)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		changed := Unchanged
		for _, x := range p.paths {
			if tr := p.drain(x); tr != Unchanged {
				changed = tr
			}
			now := time.Now()
			if tr := x.det.Tick(now); tr != Unchanged {
				p.note(x, tr, now)
				changed = tr
			}
			if n%judges != 0 {
				continue
			}
			x.seq++
			x.conn.Write(probeMsg{Kind: probeAsk, DSCP: x.target.DSCP, Token: x.token, Seq: x.seq}.marshal())
			if tr := x.det.Sent(x.seq, now); tr != Unchanged {
				p.note(x, tr, now)
				changed = tr
			}
		}
		p.mu.Unlock()
		p.signal(changed)
	}
}

// note logs a transition of x; the caller holds mu.
func (p *prober) note(x *probed, tr Transition, at time.Time) {
	switch tr {
	case WentDown:
		x.since = at
		p.log.Warn(blackholeReason(x.target, p.node), "id", x.target.ID, "dscp", x.target.DSCP, "far", x.target.Far)
	case WentUp:
		p.log.Info(fmt.Sprintf("path up: %d probes answered on path %s", ProbeUps, pathString(x.target.Path)),
			"id", x.target.ID, "dscp", x.target.DSCP, "far", x.target.Far, "down", at.Sub(x.since).Round(time.Millisecond).String())
		x.since = at
	}
}

func (p *prober) signal(tr Transition) {
	if tr == Unchanged {
		return
	}
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// states reads the paths probed, sorted by key.
func (p *prober) states() []pathState {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]pathState, 0, len(p.paths))
	for _, x := range p.paths {
		out = append(out, pathState{probeTarget: x.target, Down: x.det.Down(), Answered: x.det.Answered(), Healthy: x.det.Healthy(), Since: x.since})
	}
	slices.SortFunc(out, func(a, b pathState) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	})
	return out
}
