// Package udp is the mover's second transport: reliable, ordered,
// authenticated byte streams over UDP, paced in user space at a rate the
// stream's rate control (fixed, fast or aimd) sets, with the receiver's
// flow control so that a slow reader never turns into loss. It implements
// transport.Transport; docs/udp.md describes the protocol, the datagram
// format and the rate controls.
//
// A dialled stream has a connected socket of its own; a listener reads
// every stream it accepted from its one socket and hands each datagram to
// its stream by session and stream id. Every datagram carries the session
// id and a MAC under a key derived from the session's secret (which the
// mover's control channel, over TCP, hands to both ends): forged, replayed,
// truncated and garbage datagrams are dropped, counted, and never answered.
package udp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lightpath/lightpath/internal/transport"
)

// Transport is the UDP transport. The zero value dials (with Options.Auth)
// but cannot listen: a listener needs Keys.
type Transport struct {
	// Keys gives the secret of a session a listener sees datagrams for;
	// ok false (an unknown or ended session) drops them. The mover answers
	// from its sessions (Accept.Session, Accept.Secret).
	Keys func(session [16]byte) (key []byte, ok bool)
	// Auth authenticates a dialled stream whose Options carry no Auth.
	Auth *transport.Auth
	// Streams says how many streams a session may open at a listener: the
	// count its control channel agreed on (the mover's Accept.Streams).
	// SYNs for more are dropped. Nil, or 0 for a session: DefaultStreams.
	Streams func(session [16]byte) int
	// MaxHalfOpen and MaxHalfOpenPerClient bound a listener's streams
	// whose handshake is under way, overall and from one client address
	// (0: DefaultMaxHalfOpen, DefaultMaxHalfOpenPerClient). A SYN past
	// them is dropped; the dialler sends it again.
	MaxHalfOpen, MaxHalfOpenPerClient int
	// Tuning are the rate controls' parameters.
	Tuning Tuning
}

// Bounds of a listener's streams when the Transport sets none.
const (
	// DefaultStreams: the most streams a mover session asks for (cp -P).
	DefaultStreams = 256
	// DefaultMaxHalfOpen and DefaultMaxHalfOpenPerClient: a half-open
	// stream holds a socket and a goroutine (its buffers come when it
	// joins), for up to the handshake's 15 s. A client opening more
	// streams at once than its share waits a SYN retry for the rest.
	DefaultMaxHalfOpen          = 1024
	DefaultMaxHalfOpenPerClient = 64
)

// Name is "udp".
func (*Transport) Name() string { return "udp" }

var _ transport.Transport = (*Transport)(nil)

// Dial opens a stream to addr under o.Auth (or t.Auth): a SYN with the dialler's random,
// sent again with backoff until the listener's SYNACK, a refusal (the port
// is closed: ICMP) or the end of ctx or 15 s.
func (t *Transport) Dial(ctx context.Context, addr string, o transport.Options) (transport.Conn, error) {
	auth := o.Auth
	if auth == nil {
		auth = t.Auth
	}
	if auth == nil || len(auth.Key) == 0 {
		return nil, fmt.Errorf("udp dial %s: no session key (transport.Options.Auth)", addr)
	}
	if o.DSCP > 63 {
		return nil, fmt.Errorf("udp dial %s: DSCP %d out of range 0..63", addr, o.DSCP)
	}
	if _, err := newController(o.CC, o.PacingRate, t.Tuning); err != nil {
		return nil, fmt.Errorf("udp dial %s: %w", addr, err)
	}
	d := net.Dialer{Control: func(network, _ string, rc syscall.RawConn) error {
		return setupSocket(rc, network == "udp6", tosFor(o.DSCP))
	}}
	if o.LocalAddr != "" {
		ip, err := netip.ParseAddr(o.LocalAddr)
		if err != nil {
			return nil, fmt.Errorf("udp dial %s: local address %q: %w", addr, o.LocalAddr, err)
		}
		d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0))
	}
	nc, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	uc := nc.(*net.UDPConn)
	rc, err := uc.SyscallConn()
	if err != nil {
		uc.Close()
		return nil, err
	}
	ep := &dialEndpoint{uc: uc, rc: rc}
	random := randomBytes()
	stream := streamID.Add(1)
	keys, err := keysFor(auth.Key, auth.Session, stream, random, true)
	if err != nil {
		uc.Close()
		return nil, err
	}
	c, err := newConn(ep, uc.LocalAddr(), uc.RemoteAddr(), auth.Session, stream, true, keys, o, t.Tuning, 0)
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("udp dial %s: %w", addr, err)
	}
	ep.v6 = c.v6
	c.setMTU(pathMTU(rc, c.v6))
	c.random = random
	go ep.readLoop(c)
	if err := c.handshake(ctx); err != nil {
		c.mu.Lock()
		c.fail(err)
		c.mu.Unlock()
		return nil, fmt.Errorf("udp dial %s: %w", addr, err)
	}
	go c.run()
	return c, nil
}

// streamID numbers a process's dialled streams. The listener tells streams
// apart by session and stream id; the dialler's random keeps keys apart.
var streamID atomic.Uint32

// handshake sends the SYN until the SYNACK comes.
func (c *conn) handshake(ctx context.Context) error {
	wait := 200 * time.Millisecond
	deadline := time.NewTimer(handshakeTimeout)
	defer deadline.Stop()
	for {
		pn := c.nextPN()
		b := make([]byte, hdrLen, 128)
		putHeader(b, header{typ: tSYN, stream: c.stream, session: c.session, pn: pn})
		c.mu.Lock()
		mtu := c.pathMTU()
		c.mu.Unlock()
		b = syn{random: c.random, window: uint64(len(c.rbuf)), mtu: uint16(mtu)}.put(b)
		c.mu.Lock()
		c.synPN = pn
		c.noteSent(pn, c.now())
		c.mu.Unlock()
		if err := c.sendRaw(b); err != nil && isRefused(err) {
			return syscall.ECONNREFUSED
		}
		t := time.NewTimer(wait)
		select {
		case <-c.estab:
			t.Stop()
			return nil
		case <-c.done:
			t.Stop()
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return err
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-deadline.C:
			t.Stop()
			return syscall.ETIMEDOUT
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// dialEndpoint is a dialled stream's own connected socket.
type dialEndpoint struct {
	uc    *net.UDPConn
	rc    syscall.RawConn
	v6    bool
	once  sync.Once
	nogso atomic.Bool
	batch batcher
}

func (e *dialEndpoint) send(b []byte) error {
	_, err := e.uc.Write(b)
	return err
}

func (e *dialEndpoint) sendMany(bs [][]byte) (int, error) {
	return e.batch.write(e.uc, e.v6, bs, nil, nil)
}

func (e *dialEndpoint) sendSegments(b []byte, size int) error {
	var oob [32]byte
	_, _, err := e.uc.WriteMsgUDP(b, segmentOOB(oob[:0], size), nil)
	return err
}

func (e *dialEndpoint) gso() bool { return !e.nogso.Load() }
func (e *dialEndpoint) noGSO()    { e.nogso.Store(true) }

func (e *dialEndpoint) mtu() int { return pathMTU(e.rc, e.v6) }

func (e *dialEndpoint) setTOS(tos int) error { return setTOS(e.rc, e.v6, tos) }

func (e *dialEndpoint) release() { e.once.Do(func() { e.uc.Close() }) }

// readLoop reads the dialled stream's datagrams until its socket closes.
func (e *dialEndpoint) readLoop(c *conn) {
	enableGRO(e.rc)
	rb := newReadBatch(e.uc, e.v6)
	refused := 0
	for {
		msgs, err := rb.read()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if isRefused(err) {
				// The peer's port is closed: the listener is gone (it keeps
				// its socket while any stream it accepted lives).
				refused++
				if refused >= 3 || !c.isEstablished() {
					c.mu.Lock()
					c.fail(syscall.ECONNREFUSED)
					c.mu.Unlock()
					return
				}
				continue
			}
			continue
		}
		ackNow := false
		for _, m := range msgs {
			oob := m.OOB[:m.NN]
			tos, _ := tosOf(oob)
			for b := range datagrams(m.Buffers[0][:m.N], groSize(oob)) {
				h, body, perr := parseHeader(b)
				if perr != nil || h.session != c.session || h.stream != c.stream {
					atomic.AddUint64(&c.stats.dropped, 1)
					continue
				}
				ok, ack := c.input(b, h, body, tos)
				if ok {
					refused = 0
				}
				ackNow = ackNow || ack
			}
		}
		// one ACK for all a read brought in
		if ackNow {
			c.sendAck()
		}
	}
}

// datagrams yields the datagrams of a read: b itself, or the pieces of
// size bytes that GRO coalesced into it (the last possibly shorter).
func datagrams(b []byte, size int) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		if size <= 0 || size >= len(b) {
			yield(b)
			return
		}
		for len(b) > 0 {
			k := min(size, len(b))
			if !yield(b[:k]) {
				return
			}
			b = b[k:]
		}
	}
}

func (c *conn) isEstablished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.established
}

// Listen accepts streams on addr (one UDP socket).
func (t *Transport) Listen(ctx context.Context, addr string, o transport.Options) (net.Listener, error) {
	if t.Keys == nil {
		return nil, fmt.Errorf("udp listen %s: no session keys (udp.Transport.Keys)", addr)
	}
	if o.DSCP > 63 {
		return nil, fmt.Errorf("udp listen %s: DSCP %d out of range 0..63", addr, o.DSCP)
	}
	// Streams get sockets of their own only where the listener's socket
	// is in the process's namespace (see peerSocket): its goroutines open
	// them from any thread.
	reuse := threadInProcessNetns()
	lc := net.ListenConfig{Control: func(network, _ string, rc syscall.RawConn) error {
		if reuse && reusePort(rc) != nil {
			reuse = false
		}
		return setupSocket(rc, network == "udp6", tosFor(o.DSCP))
	}}
	pc, err := lc.ListenPacket(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	uc := pc.(*net.UDPConn)
	l := &Listener{
		tr:       t,
		uc:       uc,
		opts:     o,
		conns:    map[connID]*conn{},
		tombs:    map[tombID]struct{}{},
		opened:   map[[16]byte]int{},
		halfOpen: map[netip.Addr]int{},
		acceptq:  make(chan *conn, 128),
		done:     make(chan struct{}),
		refs:     1,
	}
	l.reuse.Store(reuse)
	if a, ok := uc.LocalAddr().(*net.UDPAddr); ok {
		l.v6 = a.IP.To4() == nil
	}
	if rc, err := uc.SyscallConn(); err == nil {
		enableGRO(rc)
		enablePktinfo(rc, l.v6)
	}
	go l.readLoop()
	return l, nil
}

type connID struct {
	session [16]byte
	stream  uint32
}

type tombID struct {
	connID
	random [16]byte
}

// Listener is a UDP listener: a socket, the streams it accepted, those
// waiting to be accepted.
type Listener struct {
	tr    *Transport
	uc    *net.UDPConn
	opts  transport.Options
	v6    bool
	mu    sync.Mutex
	conns map[connID]*conn
	tombs map[tombID]struct{} // streams over; their SYNs are replays
	// opened counts each session's streams, over and live, against the
	// session's Streams; halfOpen the streams whose handshake is under
	// way by client address, halfTotal all of them.
	opened    map[[16]byte]int
	halfOpen  map[netip.Addr]int
	halfTotal int
	acceptq   chan *conn
	closed    bool
	done      chan struct{}
	refs      int // the listener and its live streams hold the socket
	dropped   atomic.Uint64
	swept     time.Time
	reuse     atomic.Bool // SO_REUSEPORT: streams get sockets of their own
	// relayed counts the datagrams the listener's socket read for streams
	// that have sockets of their own (those that came before the stream's
	// socket was connected)
	relayed atomic.Uint64
	refused atomic.Uint64
	// judged counts the datagrams of no stream the listener has handled
	// (SYNs opened a stream or were dropped): tests wait on it
	judged atomic.Uint64
}

// Accept returns the next established stream.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		select {
		case c := <-l.acceptq:
			return c, nil
		case <-l.done:
			return nil, &net.OpError{Op: "accept", Net: "udp", Addr: l.uc.LocalAddr(), Err: net.ErrClosed}
		}
	}
}

// Close stops accepting; streams accepted stay open, and the socket with
// them until the last ends.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return &net.OpError{Op: "close", Net: "udp", Addr: l.uc.LocalAddr(), Err: net.ErrClosed}
	}
	l.closed = true
	close(l.done)
	var pending []*conn
	for _, c := range l.conns {
		c.mu.Lock()
		if !c.established {
			pending = append(pending, c)
		}
		c.mu.Unlock()
	}
	l.mu.Unlock()
	// streams established but never accepted are nobody's: end them
	for {
		select {
		case c := <-l.acceptq:
			pending = append(pending, c)
			continue
		default:
		}
		break
	}
	for _, c := range pending {
		c.Close()
	}
	l.release()
	return nil
}

func (l *Listener) release() {
	l.mu.Lock()
	l.refs--
	last := l.refs == 0
	l.mu.Unlock()
	if last {
		l.uc.Close()
	}
}

// Addr is the listening socket's address.
func (l *Listener) Addr() net.Addr { return l.uc.LocalAddr() }

// Dropped counts the datagrams the listener threw away before they reached
// a stream: garbage, unknown sessions, bad MACs on SYNs, replayed SYNs.
// Each stream counts those it drops in its Stats.
func (l *Listener) Dropped() uint64 { return l.dropped.Load() }

func (l *Listener) readLoop() {
	buf := make([]byte, 65536)
	oob := make([]byte, oobSize)
	for {
		n, oobn, _, from, err := l.uc.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		tos, _ := tosOf(oob[:oobn])
		var acks *conn // GRO coalesces one flow's datagrams: one stream
		for b := range datagrams(buf[:n], groSize(oob[:oobn])) {
			h, body, err := parseHeader(b)
			if err != nil {
				l.dropped.Add(1)
				continue
			}
			id := connID{h.session, h.stream}
			l.mu.Lock()
			c := l.conns[id]
			l.mu.Unlock()
			if c != nil {
				if from != c.peer {
					l.dropped.Add(1)
					continue
				}
				if _, own := c.ep.(*dialEndpoint); own {
					l.relayed.Add(1)
				}
				ok, ackNow := c.input(b, h, body, tos)
				if !ok {
					l.dropped.Add(1)
				}
				if ackNow {
					if acks != nil && acks != c {
						acks.sendAck()
					}
					acks = c
				}
				continue
			}
			if h.typ != tSYN || !l.syn(b, h, body, from, dstOf(oob[:oobn])) {
				l.dropped.Add(1)
			}
			l.judged.Add(1)
		}
		if acks != nil {
			acks.sendAck()
		}
	}
}

// syn opens a stream on a SYN that authenticates under its session's key.
func (l *Listener) syn(b []byte, h header, body []byte, from netip.AddrPort, to netip.Addr) bool {
	random, ok := synRandom(body)
	if !ok {
		return false
	}
	id := connID{h.session, h.stream}
	l.sweep()
	l.mu.Lock()
	_, tomb := l.tombs[tombID{id, random}]
	closed := l.closed
	l.mu.Unlock()
	if tomb || closed {
		return false
	}
	secret, ok := l.tr.Keys(h.session)
	if !ok {
		return false
	}
	keys, err := keysFor(secret, h.session, h.stream, random, false)
	if err != nil || !verify(keys.recv, b) {
		return false
	}
	s, err := parseSyn(body)
	if err != nil {
		return false
	}
	client := from.Addr().Unmap()
	if !l.admit(h.session, client) {
		return false
	}
	admitted := true
	defer func() {
		if admitted {
			l.halfDone(h.session, client, true)
		}
	}()
	// Answer from the address the SYN came to (a wildcard listener on a
	// host of several addresses), as the dialler's connected socket
	// expects.
	laddr := l.uc.LocalAddr()
	if to.IsValid() && !to.IsUnspecified() && !to.IsLinkLocalUnicast() { // a link-local address would need its zone too
		laddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, uint16(laddr.(*net.UDPAddr).Port)))
	} else {
		to = netip.Addr{}
	}
	v4 := from.Addr().Unmap().Is4()
	// The stream's own socket, connected to the peer, when the kernel
	// lets one share the port (SO_REUSEPORT): its datagrams then come to
	// it, read by a goroutine of its own; the shared socket otherwise.
	var ep endpoint
	pe := l.peerSocket(from, to, v4)
	if pe != nil {
		ep = pe
		laddr = pe.uc.LocalAddr()
	} else {
		le := &listenEndpoint{l: l, peer: from, src: to, v4: v4}
		le.setTOS(tosFor(l.opts.DSCP))
		ep = le
	}
	o := l.opts
	o.CC, o.PacingRate = "", 0
	c, err := newConn(ep, laddr, net.UDPAddrFromAddrPort(from), h.session, h.stream, false, keys, o, l.tr.Tuning, 0)
	if err != nil {
		ep.release()
		return false
	}
	c.v6 = !v4
	c.peer = from
	c.random = random
	mtu := int(s.mtu)
	if pe != nil {
		pe.v6 = c.v6
		if m := pathMTU(pe.rc, c.v6); m > 0 && (mtu <= 0 || m < mtu) {
			mtu = m
		}
	}
	c.setMTU(mtu)
	c.replay.mark(h.pn)
	c.peerLimit = s.window
	c.noteEcho(h.pn, c.now())
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		ep.release()
		return false
	}
	l.conns[id] = c
	if pe == nil {
		l.refs++
	}
	admitted = false // the stream holds its place from now on
	l.mu.Unlock()
	if pe != nil {
		go pe.readLoop(c)
	}
	c.onDead = func() {
		l.mu.Lock()
		if l.conns[id] == c {
			delete(l.conns, id)
		}
		l.tombs[tombID{id, random}] = struct{}{}
		l.mu.Unlock()
	}
	go func() {
		select {
		case <-c.estab:
			l.halfDone(h.session, client, false)
			select {
			case l.acceptq <- c:
			case <-l.done:
				c.Close()
			}
		case <-c.done:
			l.halfDone(h.session, client, false)
		}
	}()
	c.mu.Lock()
	c.synAckAt = c.now()
	c.mu.Unlock()
	c.sendSynAck()
	go c.run()
	return true
}

// admit takes a half-open place for a SYN of session from client, and
// one of the session's streams; false when the session has opened all it
// agreed on, or client or the listener has too many handshakes under way.
func (l *Listener) admit(session [16]byte, client netip.Addr) bool {
	limit := DefaultStreams
	if l.tr.Streams != nil {
		if n := l.tr.Streams(session); n > 0 {
			limit = n
		}
	}
	maxHalf, perClient := l.tr.MaxHalfOpen, l.tr.MaxHalfOpenPerClient
	if maxHalf <= 0 {
		maxHalf = DefaultMaxHalfOpen
	}
	if perClient <= 0 {
		perClient = DefaultMaxHalfOpenPerClient
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opened[session] >= limit || l.halfTotal >= maxHalf || l.halfOpen[client] >= perClient {
		l.refused.Add(1)
		return false
	}
	l.opened[session]++
	l.halfOpen[client]++
	l.halfTotal++
	return true
}

// halfDone gives back a half-open place: the stream joined or ended
// (undo: it never opened, and gives the session's stream back too).
func (l *Listener) halfDone(session [16]byte, client netip.Addr, undo bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if undo {
		l.opened[session]--
	}
	l.halfTotal--
	if l.halfOpen[client]--; l.halfOpen[client] <= 0 {
		delete(l.halfOpen, client)
	}
}

// Refused counts the SYNs dropped for the listener's bounds: a session's
// streams beyond what it agreed on, handshakes beyond the half-open caps.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// peerSocket opens a socket for a stream, bound to the address and port
// the SYN came to and connected to its peer, beside the listener's
// (SO_REUSEPORT on both). The kernel hands a connected socket the
// datagrams of its peer before an unconnected one; those that came to the
// listener's socket first still reach the stream through it. nil when the
// address the SYN came to is unknown or the kernel refuses.
func (l *Listener) peerSocket(from netip.AddrPort, to netip.Addr, v4 bool) *dialEndpoint {
	if !l.reuse.Load() {
		return nil
	}
	local := to
	if !local.IsValid() {
		la := l.uc.LocalAddr().(*net.UDPAddr).AddrPort().Addr()
		if la.IsUnspecified() {
			return nil
		}
		local = la
	}
	network := "udp6"
	peer := from.Addr()
	if v4 {
		network, peer, local = "udp4", peer.Unmap(), local.Unmap()
	} else if local.Unmap().Is4() {
		return nil
	}
	port := l.uc.LocalAddr().(*net.UDPAddr).Port
	d := net.Dialer{
		LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, uint16(port))),
		Control: func(network, _ string, rc syscall.RawConn) error {
			if err := reusePort(rc); err != nil {
				return err
			}
			return setupSocket(rc, network == "udp6", tosFor(l.opts.DSCP))
		},
	}
	nc, err := d.Dial(network, netip.AddrPortFrom(peer, from.Port()).String())
	if err != nil {
		return nil
	}
	uc := nc.(*net.UDPConn)
	rc, err := uc.SyscallConn()
	if err != nil {
		uc.Close()
		return nil
	}
	return &dialEndpoint{uc: uc, rc: rc}
}

// sweep forgets, every half minute at most, the ended streams of
// sessions that are over (Keys no longer knows them): their SYNs are
// dropped as of an unknown session from then on.
func (l *Listener) sweep() {
	l.mu.Lock()
	if time.Since(l.swept) < 30*time.Second {
		l.mu.Unlock()
		return
	}
	l.swept = time.Now()
	sessions := map[[16]byte]bool{}
	for t := range l.tombs {
		sessions[t.session] = true
	}
	for s := range l.opened {
		sessions[s] = true
	}
	l.mu.Unlock()
	for s := range sessions {
		_, sessions[s] = l.tr.Keys(s)
	}
	l.mu.Lock()
	for t := range l.tombs {
		if !sessions[t.session] {
			delete(l.tombs, t)
		}
	}
	for s := range l.opened {
		if !sessions[s] {
			delete(l.opened, s)
		}
	}
	l.mu.Unlock()
}

// listenEndpoint sends a listener's stream's datagrams from the listener's
// socket.
type listenEndpoint struct {
	l     *Listener
	peer  netip.AddrPort
	src   netip.Addr // the address to answer from; invalid: the kernel's choice
	v4    bool       // the peer is IPv4 (perhaps mapped on a dual-stack socket)
	mu    sync.Mutex
	oob   []byte // the control messages of every send: TOS, source
	once  sync.Once
	nogso atomic.Bool
	batch batcher
}

func (e *listenEndpoint) sendMany(bs [][]byte) (int, error) {
	e.mu.Lock()
	oob := e.oob
	e.mu.Unlock()
	return e.batch.write(e.l.uc, e.l.v6, bs, net.UDPAddrFromAddrPort(e.peer), oob)
}

func (e *listenEndpoint) sendSegments(b []byte, size int) error {
	var buf [128]byte
	e.mu.Lock()
	oob := append(buf[:0], e.oob...)
	e.mu.Unlock()
	_, _, err := e.l.uc.WriteMsgUDPAddrPort(b, segmentOOB(oob, size), e.peer)
	return err
}

func (e *listenEndpoint) gso() bool { return !e.nogso.Load() }
func (e *listenEndpoint) noGSO()    { e.nogso.Store(true) }

func (e *listenEndpoint) send(b []byte) error {
	e.mu.Lock()
	oob := e.oob
	e.mu.Unlock()
	_, _, err := e.l.uc.WriteMsgUDPAddrPort(b, oob, e.peer)
	return err
}

// mtu: the listener's socket is not connected, so the kernel cannot say
// per peer; a stream steps down on EMSGSIZE instead.
func (e *listenEndpoint) mtu() int { return 0 }

func (e *listenEndpoint) setTOS(tos int) error {
	oob := tosOOB(nil, e.v4, tos)
	if e.src.IsValid() {
		oob = srcOOB(oob, e.src)
	}
	e.mu.Lock()
	e.oob = oob
	e.mu.Unlock()
	return nil
}

func (e *listenEndpoint) release() { e.once.Do(e.l.release) }

func errorsIs(err, target error) bool { return errors.Is(err, target) }
