package collect

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/topology"
)

// ProbePort is the port of every agent's probe responder: UDP echo for
// RTT and loss, TCP discard sink for Throughput.
const ProbePort = 7301

// Probing: Count datagrams Spacing apart to each neighbour, then wait up to
// Wait for the last answers.
const (
	ProbeCount   = 5
	ProbeSpacing = 10 * time.Millisecond
	ProbeWait    = time.Second
)

// An echo datagram: magic, round token, sequence number, padding. The
// responder answers only datagrams that start with the magic, with the
// same bytes, so it reflects no more than it is sent and nothing else.
const (
	probeMagic = "LPP1"
	probeSize  = 64
)

// Responder is an agent's probe responder: a UDP echo and a TCP discard
// sink on ProbePort of each of its addresses.
type Responder struct {
	log   *slog.Logger
	udp   []net.PacketConn
	tcp   []net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
}

// maxSinkConns bounds the throughput tests served at once.
const maxSinkConns = 4

// StartResponder opens the responder's sockets in the network namespace
// at netNS ("" for the caller's own) on port of each address in addrs
// (port 0 is ProbePort), and serves them until Close. Addresses may be
// bound before they are configured (IP_FREEBIND on Linux), so an agent
// may start before its links are up.
func StartResponder(netNS string, addrs []netip.Addr, port int, log *slog.Logger) (*Responder, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if port == 0 {
		port = ProbePort
	}
	r := &Responder{log: log, conns: map[net.Conn]struct{}{}}
	err := netns.Do(netNS, func() error {
		lc := net.ListenConfig{Control: freebind}
		for _, a := range addrs {
			ap := netip.AddrPortFrom(a, uint16(port)).String()
			pc, err := lc.ListenPacket(context.Background(), "udp", ap)
			if err != nil {
				return fmt.Errorf("listen udp %s: %w", ap, err)
			}
			r.udp = append(r.udp, pc)
			l, err := lc.Listen(context.Background(), "tcp", ap)
			if err != nil {
				return fmt.Errorf("listen tcp %s: %w", ap, err)
			}
			r.tcp = append(r.tcp, l)
		}
		return nil
	})
	if err != nil {
		r.Close()
		return nil, err
	}
	for _, pc := range r.udp {
		r.wg.Add(1)
		go r.echo(pc)
	}
	for _, l := range r.tcp {
		r.wg.Add(1)
		go r.sink(l)
	}
	return r, nil
}

func (r *Responder) echo(pc net.PacketConn) {
	defer r.wg.Done()
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.log.Warn("probe echo", "addr", pc.LocalAddr(), "err", err)
			}
			return
		}
		if n < len(probeMagic) || string(buf[:len(probeMagic)]) != probeMagic {
			continue
		}
		if _, err := pc.WriteTo(buf[:n], from); err != nil {
			r.log.Debug("probe echo reply", "to", from, "err", err)
		}
	}
}

// sink serves throughput tests: it counts what a connection sends until
// the sender shuts its side, then answers the count (8 bytes, big
// endian) and closes.
func (r *Responder) sink(l net.Listener) {
	defer r.wg.Done()
	sem := make(chan struct{}, maxSinkConns)
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.log.Warn("throughput sink", "addr", l.Addr(), "err", err)
			}
			return
		}
		select {
		case sem <- struct{}{}:
		default:
			c.Close() // busy: a throughput test at a time is plenty
			continue
		}
		r.mu.Lock()
		if r.done {
			r.mu.Unlock()
			c.Close()
			return
		}
		r.conns[c] = struct{}{}
		r.mu.Unlock()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() { <-sem }()
			n, err := io.Copy(io.Discard, idleReader{c, 30 * time.Second})
			if err == nil {
				var b [8]byte
				binary.BigEndian.PutUint64(b[:], uint64(n))
				c.Write(b[:])
			}
			r.mu.Lock()
			delete(r.conns, c)
			r.mu.Unlock()
			c.Close()
		}()
	}
}

// idleReader fails a read that waits longer than idle, so a sender that
// vanished does not hold the sink.
type idleReader struct {
	c    net.Conn
	idle time.Duration
}

func (r idleReader) Read(b []byte) (int, error) {
	r.c.SetReadDeadline(time.Now().Add(r.idle))
	return r.c.Read(b)
}

// Close stops the responder and waits for its goroutines.
func (r *Responder) Close() error {
	r.mu.Lock()
	r.done = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	for _, pc := range r.udp {
		pc.Close()
	}
	for _, l := range r.tcp {
		l.Close()
	}
	r.wg.Wait()
	return nil
}

// Throughput sends to the throughput sink at addr ("HOST" or
// "HOST:PORT"; the port defaults to ProbePort) for d and returns the rate
// at which the sink received: the bytes it counted over the time from the
// first write to its answer. The connection is made in the caller's
// network namespace.
func Throughput(ctx context.Context, addr string, d time.Duration) (float64, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, strconv.Itoa(ProbePort))
	}
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, fmt.Errorf("dial throughput sink: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	buf := make([]byte, 128<<10)
	start := time.Now()
	end := start.Add(d)
	c.SetWriteDeadline(end)
	for time.Now().Before(end) {
		if _, err := c.Write(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			if ctx.Err() != nil {
				return 0, fmt.Errorf("throughput: %w", ctx.Err())
			}
			return 0, fmt.Errorf("throughput: send: %w", err)
		}
	}
	c.SetWriteDeadline(time.Time{})
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, fmt.Errorf("throughput: not a TCP connection")
	}
	if err := tc.CloseWrite(); err != nil {
		return 0, fmt.Errorf("throughput: shut down sending: %w", err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b [8]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("throughput: %w", ctx.Err())
		}
		return 0, fmt.Errorf("throughput: read the sink's count: %w", err)
	}
	secs := time.Since(start).Seconds()
	return float64(binary.BigEndian.Uint64(b[:])) * 8 / secs, nil
}

// ---- the collector ----

// neighbour is one peer across one link.
type neighbour struct {
	link, peer  string
	local, addr netip.Addr
}

// neighbours lists node's peers across its links (IPv4 addresses).
func neighbours(t *topology.Topology, node string) []neighbour {
	var out []neighbour
	if t == nil {
		return out
	}
	for _, l := range t.Links {
		for _, p := range [][2]topology.End{{l.A, l.B}, {l.B, l.A}} {
			if p[0].Node == node && p[0].IPv4.IsValid() && p[1].IPv4.IsValid() {
				out = append(out, neighbour{link: l.Name, peer: p[1].Node, local: p[0].IPv4.Addr(), addr: p[1].IPv4.Addr()})
			}
		}
	}
	return out
}

type probeCollector struct {
	env   Env
	mu    sync.Mutex
	resp  *Responder
	port  int // ProbePort; tests use another
	count int
	// wait is how long a round waits for its last answers: ProbeWait
	// when 0. Tests that expect every answer lengthen it, so that a
	// busy machine answering late is not counted as loss.
	wait time.Duration
}

func newProbe(env Env) Definition {
	c := &probeCollector{env: env, port: ProbePort, count: ProbeCount}
	return Definition{
		Collector: c,
		Help:      "RTT and loss to each neighbour across each link (UDP echo on port 7301; also serves the peers' probes and throughput tests)",
		Enabled:   env.Topo != nil || env.Topology != nil,
		Close:     c.close,
		Meta: map[string]monitor.Meta{
			"lightpath_probe_rtt_seconds": gauge("Median round-trip time of this round's echo probes to the neighbour across the link; absent when none came back."),
			"lightpath_probe_loss_ratio":  gauge("Fraction of this round's echo probes to the neighbour across the link that did not come back (1: it does not answer)."),
		},
	}
}

func (*probeCollector) Name() string { return "probe" }

func (c *probeCollector) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resp == nil {
		return nil
	}
	err := c.resp.Close()
	c.resp = nil
	return err
}

func (c *probeCollector) Collect(ctx context.Context, emit func(monitor.Point)) error {
	nbs := neighbours(c.env.topo(), c.env.Node)
	var respErr error
	c.mu.Lock()
	started := false
	if c.resp == nil && len(nbs) > 0 {
		started = true
		var addrs []netip.Addr
		for _, n := range nbs {
			if !slices.Contains(addrs, n.local) {
				addrs = append(addrs, n.local)
			}
		}
		c.resp, respErr = StartResponder(c.env.NetNS, addrs, c.port, c.env.Log)
		if respErr != nil {
			respErr = fmt.Errorf("start the responder: %w", respErr)
		}
	}
	c.mu.Unlock()
	if started && respErr == nil {
		// The first round only starts the responder: the neighbours'
		// agents, started about now too, may not answer yet, and a probe
		// sent before they do would read as loss.
		return nil
	}

	type result struct {
		rtts []time.Duration
		err  error
	}
	res := make([]result, len(nbs))
	var wg sync.WaitGroup
	for i, n := range nbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rtts, err := c.probe(ctx, n)
			res[i] = result{rtts, err}
		}()
	}
	wg.Wait()
	var errs []error
	if respErr != nil {
		errs = append(errs, respErr)
	}
	for i, n := range nbs {
		if res[i].err != nil {
			errs = append(errs, fmt.Errorf("probe %s across %s: %w", n.peer, n.link, res[i].err))
			continue
		}
		ls := monitor.L("link", n.link, "peer", n.peer)
		rtt, loss := Summarize(res[i].rtts, c.count)
		emit(monitor.Point{Name: "lightpath_probe_loss_ratio", Labels: ls, V: loss})
		if len(res[i].rtts) > 0 {
			emit(monitor.Point{Name: "lightpath_probe_rtt_seconds", Labels: ls, V: rtt.Seconds()})
		}
	}
	return errors.Join(errs...)
}

// Summarize returns the median of the round-trip times of the answers
// that came back (the mean of the middle two for an even count) and the
// fraction of sent probes that did not.
func Summarize(rtts []time.Duration, sent int) (time.Duration, float64) {
	if sent <= 0 {
		return 0, 0
	}
	loss := 1 - float64(len(rtts))/float64(sent)
	if len(rtts) == 0 {
		return 0, 1
	}
	s := slices.Clone(rtts)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return m, max(loss, 0)
}

// probe sends the round's datagrams to one neighbour and returns the
// round-trip times of those that came back. A datagram the kernel refuses
// to send (no route: our end is down) counts as lost, not as an error; an
// error is a socket that cannot be opened.
func (c *probeCollector) probe(ctx context.Context, n neighbour) ([]time.Duration, error) {
	var pc net.PacketConn
	err := netns.Do(c.env.NetNS, func() error {
		lc := net.ListenConfig{Control: freebind}
		var err error
		pc, err = lc.ListenPacket(ctx, "udp", netip.AddrPortFrom(n.local, 0).String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open socket: %w", err)
	}
	defer pc.Close()
	stop := context.AfterFunc(ctx, func() { pc.SetReadDeadline(time.Now()) })
	defer stop()

	var token [8]byte
	rand.Read(token[:])
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(n.addr, uint16(c.port)))
	sent := make([]time.Time, c.count)
	var mu sync.Mutex
	got := map[uint32]time.Duration{}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 2048)
		for {
			k, _, err := pc.ReadFrom(buf)
			now := time.Now()
			if err != nil {
				return
			}
			if k < 16 || string(buf[:4]) != probeMagic || string(buf[4:12]) != string(token[:]) {
				continue
			}
			seq := binary.BigEndian.Uint32(buf[12:16])
			mu.Lock()
			if int(seq) < len(sent) && !sent[seq].IsZero() {
				if _, dup := got[seq]; !dup {
					got[seq] = now.Sub(sent[seq])
				}
			}
			done := len(got) == len(sent)
			mu.Unlock()
			if done {
				return
			}
		}
	}()
	msg := make([]byte, probeSize)
	copy(msg, probeMagic)
	copy(msg[4:], token[:])
	for i := range c.count {
		if i > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(ProbeSpacing):
			}
		}
		if ctx.Err() != nil {
			break
		}
		binary.BigEndian.PutUint32(msg[12:], uint32(i))
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		if _, err := pc.WriteTo(msg, to); err != nil {
			mu.Lock()
			sent[i] = time.Time{} // not sent: lost
			mu.Unlock()
		}
	}
	wait := ProbeWait
	if c.wait > 0 {
		wait = c.wait
	}
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)-50*time.Millisecond)
	}
	pc.SetReadDeadline(time.Now().Add(max(wait, 0)))
	<-readDone
	mu.Lock()
	defer mu.Unlock()
	out := make([]time.Duration, 0, len(got))
	for _, d := range got {
		out = append(out, d)
	}
	return out, nil
}
