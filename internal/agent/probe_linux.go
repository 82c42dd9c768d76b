//go:build linux

package agent

import (
	"context"
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
		go p.listen(x)
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
			if err := rc.Control(func(fd uintptr) { serr = markSocket(int(fd), t.Addr.Is6(), t.DSCP) }); err != nil {
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

// listen reads the echoes of x's probes until its socket closes.
func (p *prober) listen(x *probed) {
	buf := make([]byte, 256)
	for {
		n, err := x.conn.Read(buf)
		at := time.Now()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // ECONNREFUSED: no agent answers there (yet)
		}
		m, err := parseProbe(buf[:n])
		if err != nil || m.Kind != probeEcho || m.Token != x.token || m.DSCP != x.target.DSCP {
			continue
		}
		p.mu.Lock()
		tr := x.det.Echo(m.Seq, at)
		p.note(x, tr, at)
		p.mu.Unlock()
		p.signal(tr)
	}
}

// run sends a probe on every path each ProbePeriod, and judges the
// probes out four times as often, so a probe is judged lost at most a
// quarter period after its deadline.
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
		out = append(out, pathState{probeTarget: x.target, Down: x.det.Down(), Answered: x.det.Answered(), Since: x.since})
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
