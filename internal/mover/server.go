package mover

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lightpath/lightpath/internal/cc/fast"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/transport/udp"
	"github.com/lightpath/lightpath/internal/wire"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	Root     string
	Token    []byte      // empty: no authentication
	TLS      *tls.Config // nil: plain TCP
	ReadOnly bool
	Logger   *slog.Logger
	// TransferLog receives one JSON line per file and per session.
	TransferLog io.Writer
	// IdleTimeout bounds a handshake and the wait for a session's data
	// connections (10 s when 0).
	IdleTimeout time.Duration
	// StallTimeout frees a session whose connections make no progress
	// (a client that stopped reading or writing, or an idle one; 30 s when
	// 0).
	StallTimeout time.Duration
	MaxSessions  int
	// MaxSessionsPerClient caps the sessions one client address holds at
	// once (pending or running; 16 when 0), so one client cannot take every
	// slot.
	MaxSessionsPerClient int
	// MaxHandshakes caps the connections not yet part of a session (from
	// accept to a control connection's session being counted, or a data
	// connection joining its session), overall (DefaultMaxHandshakes when
	// 0); MaxHandshakesPerClient caps them per client address
	// (DefaultMaxHandshakesPerClient when 0). One past either is closed
	// at once, so idle connections cannot hold the server's descriptors;
	// those limits act before any token is checked.
	MaxHandshakes          int
	MaxHandshakesPerClient int
	// HandshakeTimeout bounds how long a connection may take from accept
	// to its request or join (DefaultHandshakeTimeout when 0; never more
	// than IdleTimeout).
	HandshakeTimeout time.Duration
	// MaxFileSize bounds the size of one file a client may push
	// (DefaultMaxFileSize when 0).
	MaxFileSize int64
	// PartialTTL is how long a partial file and its journal may lie
	// untouched before the server removes them as abandoned (at start and
	// then periodically); 0 means DefaultPartialTTL, negative never.
	PartialTTL time.Duration
	// CC is the congestion control of the server's sockets in a session
	// whose client names none (the client's choice wins): what the server
	// sends, in a pull or a reverse bench, runs under it. "" leaves the
	// transport's default. NewServer checks the kernel offers it.
	CC string
	// Grants, when set, makes the server a data node of the transfer
	// service: every session must present a grant the verifier accepts
	// (signed by the controller for this node, not expired, not of an
	// attempt older than the newest of its task), a push may write and a
	// pull read only paths it covers, and a session whose attempt stops
	// being current (a newer one arrived, or the controller raised the
	// fence) is ended at once. The token (Token) is checked as well.
	Grants *grant.Verifier
}

// DefaultPartialTTL is how long an untouched partial file is kept for a
// resume.
const DefaultPartialTTL = 24 * time.Hour

// The defaults of the limits on connections not yet in a session. A
// client opens a session's control connection and then all its data
// connections at once (up to 256 streams), so one address needs room for
// that and a little more; the overall cap keeps the server's descriptors
// for sessions whatever the number of addresses.
const (
	DefaultMaxHandshakes          = 1024
	DefaultMaxHandshakesPerClient = 320
	DefaultHandshakeTimeout       = 5 * time.Second
)

// Server serves a directory to Lightpath clients.
type Server struct {
	cfg  ServerConfig
	root *os.Root
	log  *slog.Logger

	locks *PathLocks
	space *Space

	mu      sync.Mutex
	pending map[[16]byte]*session
	active  map[*session]bool
	granted map[*session]bool // sessions under a grant, from its check to their engine's end
	// udpKeys are the keys of the UDP sessions under way (pending or
	// running), which the UDP listener's streams authenticate with, and
	// udpStreams how many streams each agreed on: the listener opens no
	// more for it.
	udpKeys    map[[16]byte][]byte
	udpStreams map[[16]byte]int
	// udpOn: ListenUDP opened a UDP port, so sessions may ask for UDP.
	udpOn    atomic.Bool
	logMu    sync.Mutex
	conns    sync.WaitGroup
	hs       handshakes
	shutdown bool
}

type session struct {
	client  string // the peer's address, without the port
	id      [16]byte
	key     []byte
	streams int
	tuning  wire.Tuning
	udp     bool        // the data connections are UDP streams
	fast    fast.Params // the client's FAST parameters for the UDP streams this end sends on (zero: the transport's)
	joins   chan joined
	link    *link

	// grant is what the session may do, nil on a server without grants.
	grant *grant.Grant
	// cut is closed when the grant's attempt stops being current.
	cut     chan struct{}
	cutOnce sync.Once
	// released is closed when the session holds nothing more (its engine
	// ended, or it never started): a newer attempt waits for it.
	released chan struct{}
	relOnce  sync.Once
	// unhold ends the verifier's record of the session under its attempt
	// (grant.Verifier.Hold), which the data node's heartbeat names.
	unhold func()
}

func (ss *session) fence() { ss.cutOnce.Do(func() { close(ss.cut) }) }

func (ss *session) release() {
	if ss.released != nil {
		ss.relOnce.Do(func() { close(ss.released) })
	}
	if ss.unhold != nil {
		ss.unhold()
	}
}

// stale is the reason a fenced session ends with.
func (ss *session) stale() string {
	return fmt.Sprintf("attempt %d of task %s is no longer current", ss.grant.Attempt, ss.grant.Task)
}

type joined struct {
	index int
	conn  *dataConn
}

// NewServer opens the root and checks the configuration.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := transport.CheckCC(cfg.CC); err != nil {
		return nil, err
	}
	fi, err := os.Stat(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", cfg.Root, cleanPathError(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("root %s: not a directory", cfg.Root)
	}
	root, err := os.OpenRoot(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("open root: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Second
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = 30 * time.Second
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 64
	}
	if cfg.MaxSessionsPerClient <= 0 {
		cfg.MaxSessionsPerClient = 16
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = DefaultMaxHandshakes
	}
	if cfg.MaxHandshakesPerClient <= 0 {
		cfg.MaxHandshakesPerClient = DefaultMaxHandshakesPerClient
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	cfg.HandshakeTimeout = min(cfg.HandshakeTimeout, cfg.IdleTimeout)
	if cfg.PartialTTL == 0 {
		cfg.PartialTTL = DefaultPartialTTL
	}
	return &Server{cfg: cfg, root: root, log: cfg.Logger.With("component", "server"), locks: NewPathLocks(), space: NewSpace(),
		pending: map[[16]byte]*session{}, active: map[*session]bool{}, granted: map[*session]bool{},
		udpKeys: map[[16]byte][]byte{}, udpStreams: map[[16]byte]int{}}, nil
}

// ListenUDP opens the server's UDP port at addr (HOST:PORT, the port of
// its TCP listener) for the data streams of the sessions that ask for
// UDP; Serve then serves it beside the TCP listener. Its streams are
// authenticated with the keys of the sessions under way (udpKey), and a
// datagram of any other session is dropped.
func (s *Server) ListenUDP(ctx context.Context, addr string) (net.Listener, error) {
	tr := &udp.Transport{Keys: s.sessionUDPKey, Streams: s.sessionUDPStreams}
	ln, err := tr.Listen(ctx, addr, transport.Options{DSCP: -1})
	if err != nil {
		return nil, err
	}
	s.udpOn.Store(true)
	return ln, nil
}

// sessionUDPKey is the UDP listener's Keys: the key of a UDP session
// under way, none for any other.
func (s *Server) sessionUDPKey(id [16]byte) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.udpKeys[id]
	return k, ok
}

// sessionUDPStreams is the UDP listener's Streams: the streams a UDP
// session agreed on.
func (s *Server) sessionUDPStreams(id [16]byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.udpStreams[id]
}

// Serve accepts connections on ln until ctx ends, then closes every session
// (receivers keep their partial files and journals for a later resume) and
// returns once all connection handlers have finished.
//
// more are further listeners served alike: the UDP one of ListenUDP. A
// listener that fails closes the others, and Serve returns its error.
func (s *Server) Serve(ctx context.Context, ln net.Listener, more ...net.Listener) error {
	if s.cfg.PartialTTL > 0 {
		go s.sweepPartials(ctx)
	}
	lns := append([]net.Listener{ln}, more...)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var failed atomic.Pointer[error]
	errc := make(chan error, len(lns))
	for _, l := range lns {
		go func() {
			err := s.accept(ctx, l)
			if err != nil && failed.CompareAndSwap(nil, &err) {
				cancel() // the others stop too
			}
			errc <- err
		}()
	}
	for range lns {
		<-errc
	}
	s.conns.Wait()
	if p := failed.Load(); p != nil {
		return *p
	}
	return nil
}

// accept serves one listener until ctx ends (nil) or it fails.
func (s *Server) accept(ctx context.Context, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		ln.Close()
		s.mu.Lock()
		s.shutdown = true
		for ss := range s.active {
			if ss.link != nil {
				ss.link.close()
			}
		}
		for _, ss := range s.pending {
			close(ss.joins)
		}
		s.pending = map[[16]byte]*session{}
		s.mu.Unlock()
	}()
	var tempDelay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				tempDelay = min(max(2*tempDelay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept", "err", err, "retry_in", tempDelay)
				time.Sleep(tempDelay)
				continue
			}
			return fmt.Errorf("accept %s: %w", ln.Addr().Network(), err)
		}
		tempDelay = 0
		release, why := s.hs.admit(clientHost(c.RemoteAddr()), s.cfg.MaxHandshakes, s.cfg.MaxHandshakesPerClient)
		if why != "" {
			s.refuseConn(c, why)
			continue
		}
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			defer release()
			s.handle(ctx, c, release)
		}()
	}
}

// Close releases the root.
func (s *Server) Close() error { return s.root.Close() }

// handle serves one connection; release gives up its place among the
// connections not yet in a session, once it is in one.
func (s *Server) handle(ctx context.Context, c net.Conn, release func()) {
	peer := c.RemoteAddr().String()
	log := s.log.With("peer", peer)
	c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	st := transport.StreamOf(c) // a plain listener's connection becomes a stream
	if st != nil {
		c = st
	}
	if s.cfg.TLS != nil {
		tc := tls.Server(c, s.cfg.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			log.Info("connection dropped", "reason", fmt.Sprintf("TLS handshake: %v", err))
			c.Close()
			return
		}
		c = tc
	}
	h, r, sn, err := serverHandshake(c, s.cfg.Token)
	if err != nil {
		log.Info("connection dropped", "reason", err.Error())
		c.Close()
		return
	}
	switch h.Kind {
	case wire.KindData:
		s.handleJoin(c, r, h, sn, log, release)
	case wire.KindControl:
		s.handleControl(ctx, c, st, r, h, sn, log, release)
	}
}

func (s *Server) handleJoin(c net.Conn, r *wire.Reader, h wire.Hello, sn [wire.NonceSize]byte, log *slog.Logger, release func()) {
	m, err := r.Read()
	if err != nil {
		log.Info("connection dropped", "reason", fmt.Sprintf("read join: %v", err))
		c.Close()
		return
	}
	j, ok := m.(*wire.Join)
	if !ok {
		sendError(c, wire.CodeProtocol, "expected join")
		log.Info("connection dropped", "reason", "expected join, got "+m.Type().String())
		c.Close()
		return
	}
	s.mu.Lock()
	ss := s.pending[j.Session]
	s.mu.Unlock()
	if ss == nil || !hmac.Equal(j.MAC, joinMAC(ss.key, j.Session, j.Stream, h.Nonce, sn)) || int(j.Stream) >= ss.streams ||
		ss.udp != isUDP(c) {
		sendError(c, wire.CodeAuth, "unknown session or bad session proof")
		log.Info("connection dropped", "reason", "join refused: unknown session or bad proof")
		c.Close()
		return
	}
	if st := transport.StreamOf(c); st != nil {
		if err := st.Tune(ss.dataOptions()); err != nil {
			log.Warn("tune data connection", "err", err)
		}
	}
	if err := wire.NewWriter(c).Send(&wire.Joined{}); err != nil {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	release() // a proven stream of a session: the session's limits hold it
	defer func() {
		if recover() != nil { // the session was torn down meanwhile
			c.Close()
		}
	}()
	select {
	case ss.joins <- joined{index: int(j.Stream), conn: newDataConn(c, r.Buffered())}:
	case <-time.After(s.cfg.IdleTimeout): // more joins than the session has streams
		c.Close()
	}
}

// isUDP says a connection runs over a UDP stream (under TLS or not).
func isUDP(c net.Conn) bool {
	st := transport.StreamOf(c)
	return st != nil && st.LocalAddr().Network() == "udp"
}

// checkUDPCC refuses a rate control the UDP transport lacks.
func checkUDPCC(name string) error {
	if udp.CheckCC(name) == nil {
		return nil
	}
	return fmt.Errorf("rate control %q: the UDP transport takes %s", name, strings.Join(udp.Names, ", "))
}

// dataOptions are the options of the session's data connections: its
// tuning, and over UDP the client's FAST parameters.
func (ss *session) dataOptions() transport.Options {
	o := tuningOptions(ss.tuning, ss.streams)
	if ss.udp {
		o.FASTAlpha, o.FASTGamma = ss.fast.Alpha, ss.fast.Gamma
	}
	return o
}

// checkFASTParams refuses FAST parameters a client sent out of range; zero
// ones take the transport's.
func checkFASTParams(p fast.Params) error {
	if p == (fast.Params{}) {
		return nil
	}
	q := fast.DefaultParams
	if p.Alpha != 0 {
		q.Alpha = p.Alpha
	}
	if p.Gamma != 0 {
		q.Gamma = p.Gamma
	}
	if err := q.Check(); err != nil {
		return fmt.Errorf("fast alpha %d, gamma %s: %w", q.Alpha, fast.GammaString(q.Gamma), err)
	}
	return nil
}

// tuningOptions turns a session's tuning into per-socket options: the rate
// is shared among the streams.
func tuningOptions(t wire.Tuning, streams int) transport.Options {
	o := transport.Options{CC: t.CC, Window: int(t.Window), DSCP: int(t.DSCP), NotSentLowat: transport.DefaultNotSentLowat}
	if t.Rate > 0 && streams > 0 {
		o.PacingRate = max(t.Rate/8/uint64(streams), 1)
	}
	return o
}

func (s *Server) handleControl(ctx context.Context, c net.Conn, st transport.Conn, r *wire.Reader, h wire.Hello, sn [wire.NonceSize]byte, log *slog.Logger, release func()) {
	defer c.Close()
	m, err := r.Read()
	// A grant comes first, then the request: both are read before any
	// answer, so a refusal never leaves the request unread (a close with
	// unread bytes resets the connection, and the reset can overtake the
	// refusal).
	var token, trName string
	var fastP fast.Params
	if g, ok := m.(*wire.Grant); ok && err == nil {
		token = g.Token
		m, err = r.Read()
	}
	if t, ok := m.(*wire.Transport); ok && err == nil {
		trName = t.Name
		fastP = fast.Params{Alpha: t.FASTAlpha, Gamma: t.FASTGamma}
		m, err = r.Read()
	}
	if err != nil {
		if errors.Is(err, wire.ErrMalformed) {
			sendError(c, wire.CodeProtocol, fmt.Sprintf("bad request: %v", err))
		}
		log.Info("connection dropped", "reason", fmt.Sprintf("read request: %v", err))
		return
	}
	var streams int
	var tuning wire.Tuning
	var op string
	switch m := m.(type) {
	case *wire.Put:
		streams, tuning, op = int(m.Streams), m.Tuning, "put"
		if s.cfg.ReadOnly {
			refuse(c, r.Version, wire.CodeRefused, classed(retry.FaultPermission, errors.New("the server is read-only")))
			log.Info("request refused", "op", op, "reason", "read-only")
			return
		}
	case *wire.Get:
		streams, tuning, op = int(m.Streams), m.Tuning, "get"
	case *wire.Bench:
		streams, tuning, op = int(m.Streams), m.Tuning, "bench"
	default:
		sendError(c, wire.CodeProtocol, "expected a request")
		log.Info("connection dropped", "reason", "expected a request, got "+m.Type().String())
		return
	}
	ctrlTuning := tuning
	switch trName {
	case "":
		if tuning.CC == "" {
			tuning.CC = s.cfg.CC
		}
		ctrlTuning = tuning
	case TransportUDP:
		if !s.udpOn.Load() {
			refuse(c, r.Version, wire.CodeRefused, errors.New("this server does not listen for UDP: use --transport tcp"))
			log.Info("request refused", "op", op, "reason", "no UDP listener")
			return
		}
		if err := checkUDPCC(tuning.CC); err != nil {
			refuse(c, r.Version, wire.CodeRefused, err)
			log.Info("request refused", "op", op, "reason", err.Error())
			return
		}
		if err := checkFASTParams(fastP); err != nil {
			refuse(c, r.Version, wire.CodeRefused, err)
			log.Info("request refused", "op", op, "reason", err.Error())
			return
		}
		// The control connection is TCP: the kernel's congestion control
		// (serve --cc), unpaced; the rate control is the data streams'.
		ctrlTuning.CC, ctrlTuning.Rate = s.cfg.CC, 0
	default:
		msg := fmt.Sprintf("unknown transport %q: this server carries tcp and udp", trName)
		refuse(c, r.Version, wire.CodeRefused, errors.New(msg))
		log.Info("request refused", "op", op, "reason", msg)
		return
	}
	if st != nil {
		if err := st.Tune(tuningOptions(ctrlTuning, streams)); err != nil {
			refuse(c, r.Version, wire.CodeRefused, err)
			log.Info("request refused", "op", op, "reason", err.Error())
			return
		}
	}
	ss := &session{client: clientHost(c.RemoteAddr()), streams: streams, tuning: tuning, joins: make(chan joined, streams),
		udp: trName == TransportUDP, fast: fastP}
	if s.cfg.Grants != nil {
		code, err := s.admitGrant(ctx, ss, token, m, r.Version)
		if err != nil {
			refuse(c, r.Version, code, err)
			log.Info("request refused", "op", op, "reason", err.Error())
			return
		}
		defer s.releaseGrant(ss)
		log = log.With("task", ss.grant.Task, "attempt", ss.grant.Attempt)
		c.SetDeadline(time.Now().Add(s.cfg.IdleTimeout)) // the wait for an older attempt took from it
	}
	rand.Read(ss.id[:])
	acc := &wire.Accept{Session: ss.id, Streams: uint16(streams)}
	if len(s.cfg.Token) > 0 {
		ss.key = sessionKey(s.cfg.Token, h.Nonce, sn)
	} else {
		ss.key = make([]byte, 32)
		rand.Read(ss.key)
		acc.Secret = ss.key
	}
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		refuse(c, r.Version, wire.CodeBusy, errors.New("the server is shutting down"))
		return
	}
	if len(s.active)+len(s.pending) >= s.cfg.MaxSessions {
		s.mu.Unlock()
		refuse(c, r.Version, wire.CodeBusy, fmt.Errorf("too many sessions (%d): try again later", s.cfg.MaxSessions))
		log.Info("request refused", "op", op, "reason", "too many sessions")
		return
	}
	if n := s.sessionsOf(ss.client); n >= s.cfg.MaxSessionsPerClient {
		s.mu.Unlock()
		refuse(c, r.Version, wire.CodeBusy, fmt.Errorf("too many sessions from %s (%d at once): wait for one to end", ss.client, s.cfg.MaxSessionsPerClient))
		log.Info("request refused", "op", op, "reason", "too many sessions from this client", "sessions", n)
		return
	}
	s.pending[ss.id] = ss
	if ss.udp {
		s.udpKeys[ss.id] = udpKey(ss.key, ss.id)
		s.udpStreams[ss.id] = ss.streams
	}
	s.mu.Unlock()
	release() // a session now: --max-sessions and its per-client cap hold it
	c.SetDeadline(time.Now().Add(s.cfg.IdleTimeout))
	defer func() {
		// The session's UDP streams are refused from now on.
		s.mu.Lock()
		delete(s.udpKeys, ss.id)
		delete(s.udpStreams, ss.id)
		s.mu.Unlock()
	}()
	unpend := func() {
		s.mu.Lock()
		delete(s.pending, ss.id)
		s.mu.Unlock()
	}

	// Check the request before any data connection opens.
	var src Source
	var dst Dest
	var benchFile *os.File
	var prepErr error
	switch m := m.(type) {
	case *wire.Put:
		dst, prepErr = s.putDest(m, ss.grant)
		dst.Grant = ss.grant
		if ss.grant != nil {
			dst.ReceiptKey = s.cfg.Grants.ReceiptKey()
		}
		if m.Part != nil && prepErr == nil && (m.Sources != 1 || m.Select.DryRun) {
			prepErr = errors.New("a part push carries exactly one file and is no dry run")
		}
	case *wire.Get:
		src, prepErr = s.getSource(m)
	case *wire.Bench:
		if m.File != "" {
			benchFile, prepErr = s.benchFile(m.File, m.Direct)
		}
	}
	if benchFile != nil {
		defer benchFile.Close()
	}
	if prepErr != nil {
		unpend()
		refuse(c, r.Version, wire.CodeRefused, prepErr)
		log.Info("request refused", "op", op, "reason", prepErr.Error())
		return
	}
	w := wire.NewWriter(c)
	if err := w.Send(acc); err != nil {
		unpend()
		return
	}
	data := make([]*dataConn, streams)
	timeout := time.NewTimer(s.cfg.IdleTimeout)
	defer timeout.Stop()
	for got := 0; got < streams; {
		select {
		case j, ok := <-ss.joins:
			if !ok {
				closeData(data)
				return
			}
			if data[j.index] != nil {
				j.conn.conn.Close()
				continue
			}
			data[j.index] = j.conn
			got++
		case <-timeout.C:
			unpend()
			closeData(data)
			log.Info("session dropped", "op", op, "reason", "data connections did not arrive in time")
			return
		case <-ss.cut:
			unpend()
			closeData(data)
			refuse(c, r.Version, wire.CodeRefused, classed(retry.FaultGrant, errors.New(ss.stale())))
			log.Info("session dropped", "op", op, "reason", ss.stale())
			return
		}
	}
	unpend()
	c.SetDeadline(time.Time{})
	l := &link{ctrl: newCtrl(c, r), data: data, stall: s.cfg.StallTimeout, prog: &Progress{}, udp: ss.udp}
	ss.link = l
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		l.close()
		return
	}
	s.active[ss] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.active, ss)
		s.mu.Unlock()
		l.close()
	}()

	sid := fmt.Sprintf("%x", ss.id[:6])
	peer := c.RemoteAddr().String()
	l.onFile = func(fr FileResult) { s.logFile(sid, peer, op, fr) }
	start := time.Now()
	var runErr error
	var bytes int64
	var srcErrs int
	var cc string // what the session's sending sockets ran
	engineDone := make(chan struct{})
	if ss.grant != nil {
		go func() {
			select {
			case <-ss.cut:
				log.Info("session fenced", "session", sid, "reason", ss.stale())
				l.cut(ss.stale())
			case <-engineDone:
			}
		}()
	}
	switch m := m.(type) {
	case *wire.Put:
		l.blockSize, l.opts, l.part = int64(m.BlockSize), m.Transfer, m.Part
		var res RecvResult
		res, runErr = runReceiver(ctx, l, dst)
		bytes = res.Local.Bytes
		streams, _ := streamSummaries(res.Remote, res.Local)
		cc = StreamsCC(streams)
	case *wire.Get:
		l.blockSize, l.opts = int64(m.BlockSize), m.Transfer
		var res SendResult
		res, runErr = runSender(ctx, l, src)
		bytes, srcErrs = res.Local.Bytes, len(res.Errors)
		streams, _ := streamSummaries(res.Local, res.Remote)
		cc = StreamsCC(streams)
	case *wire.Bench:
		bytes, runErr = serveBench(ctx, l, m, benchFile)
	}
	close(engineDone)
	ss.release()
	cutMsg := l.cutReason()
	if ss.grant != nil && runErr != nil && cutMsg == "" && ctx.Err() == nil && !s.stopping() {
		// Its pushing node gone or failing mid-session: the data node
		// tells the controller at once (grant.Verifier.Broke).
		s.cfg.Grants.Broke(ss.grant.Task, ss.grant.Attempt)
	}
	if cutMsg != "" {
		runErr = errors.New(cutMsg)
	}
	s.logSession(sid, peer, op, l.prog, bytes, srcErrs, cc, ss.udp, time.Since(start), runErr)
	if runErr != nil {
		log.Info("session ended", "session", sid, "op", op, "err", runErr)
	}
}

// stopping reports whether the server is shutting down.
func (s *Server) stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutdown
}

// sessionsOf counts the sessions, pending or running, of one client; s.mu
// is held.
func (s *Server) sessionsOf(client string) int {
	n := 0
	for _, ss := range s.pending {
		if ss.client == client {
			n++
		}
	}
	for ss := range s.active {
		if ss.client == client {
			n++
		}
	}
	return n
}

// clientHost is who a connection comes from, for the per-client cap: its
// address without the port.
func clientHost(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

func closeData(d []*dataConn) {
	for _, c := range d {
		if c != nil {
			c.conn.Close()
		}
	}
}

// clientPath turns a path from a client into one relative to the root,
// refusing what could lead out of it.
func clientPath(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("invalid path %q", p)
	}
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return ".", nil
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", fmt.Errorf("path %q leads outside the served directory", p)
		}
	}
	return path.Clean(p), nil
}

// benchFile opens the file a reverse bench sends: a regular file under
// the root (os.Root keeps it there, symbolic links included).
func (s *Server) benchFile(raw string, direct bool) (*os.File, error) {
	p, err := clientPath(raw)
	if err != nil {
		return nil, err
	}
	flags, err := benchOpenFlags(direct)
	if err != nil {
		return nil, err
	}
	f, err := s.root.OpenFile(p, flags, 0)
	if err != nil {
		return nil, fmt.Errorf("bench file %s: %w", p, directOpenError(cleanPathError(err), direct))
	}
	if err := checkBenchFile(f, p); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench file: %w", err)
	}
	return f, nil
}

// maxSizeHint tells a client that pushed too large a file which limit it met.
const maxSizeHint = " (serve --max-file-size)"

// putDest resolves where a push lands, as cp does: into an existing
// directory (or one named with a trailing slash, or with several sources),
// or under the destination's own name.
//
// Under a grant g, the destination is looked at and made as the session's
// writes are (destFS): beneath the grant's directory, never through a link
// out of it.
func (s *Server) putDest(m *wire.Put, g *grant.Grant) (Dest, error) {
	p, err := clientPath(m.Dest)
	if err != nil {
		return Dest{}, err
	}
	dfs := newDestFS(s.root, g)
	defer dfs.close()
	fi, err := dfs.Stat(p)
	switch {
	case err == nil && fi.IsDir():
		return Dest{Root: s.root, Base: p, Locks: s.locks, MaxFileSize: s.cfg.MaxFileSize, LimitHint: maxSizeHint, Space: s.space}, nil
	case err == nil && (m.Sources > 1 || m.DirSlash):
		return Dest{}, classed(retry.FaultPermission, fmt.Errorf("destination %s is not a directory", m.Dest))
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return Dest{}, fmt.Errorf("destination %s: %w", m.Dest, cleanPathError(err))
	case m.Sources > 1 || m.DirSlash:
		if m.Select.DryRun {
			return Dest{Root: s.root, Base: p, Locks: s.locks}, nil // a dry run creates nothing
		}
		if err := dfs.MkdirAll(p, 0o755); err != nil {
			return Dest{}, fmt.Errorf("create %s: %w", m.Dest, cleanPathError(err))
		}
		return Dest{Root: s.root, Base: p, Locks: s.locks, MaxFileSize: s.cfg.MaxFileSize, LimitHint: maxSizeHint, Space: s.space}, nil
	}
	if p == "." {
		return Dest{Root: s.root, Base: ".", Locks: s.locks, MaxFileSize: s.cfg.MaxFileSize, LimitHint: maxSizeHint, Space: s.space}, nil
	}
	dir := path.Dir(p)
	if m.Select.DryRun {
		return Dest{Root: s.root, Base: dir, Rename: path.Base(p), Locks: s.locks}, nil
	}
	if err := dfs.MkdirAll(dir, 0o755); err != nil {
		return Dest{}, fmt.Errorf("create %s: %w", dir, cleanPathError(err))
	}
	return Dest{Root: s.root, Base: dir, Rename: path.Base(p), Locks: s.locks, MaxFileSize: s.cfg.MaxFileSize, LimitHint: maxSizeHint, Space: s.space}, nil
}

func (s *Server) getSource(m *wire.Get) (Source, error) {
	var src Source
	for _, raw := range m.Paths {
		p, err := clientPath(raw)
		if err != nil {
			return src, err
		}
		if p == "." {
			// The whole root: its entries become the top-level items.
			if !m.Recursive {
				return src, errors.New("the served directory itself is a directory (use -r)")
			}
			ents, err := fs.ReadDir(s.root.FS(), ".")
			if err != nil {
				return src, fmt.Errorf("list root: %w", err)
			}
			for _, e := range ents {
				if !isWorkFile(e.Name()) {
					src.Items = append(src.Items, SourceItem{Root: s.root, Path: e.Name(), Name: e.Name()})
				}
			}
			continue
		}
		src.Items = append(src.Items, SourceItem{Root: s.root, Path: p, Name: path.Base(p)})
	}
	return src, nil
}

type logLine struct {
	Time    string  `json:"time"`
	Session string  `json:"session"`
	Peer    string  `json:"peer"`
	Op      string  `json:"op"`
	Kind    string  `json:"kind"`
	Path    string  `json:"path,omitempty"`
	Size    int64   `json:"size,omitempty"`
	Status  string  `json:"status"`
	Reason  string  `json:"reason,omitempty"`
	CRC32C  string  `json:"crc32c,omitempty"`
	Files   int64   `json:"files,omitempty"`
	Bytes   int64   `json:"bytes,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	// CC names the congestion controls the session's sending sockets ran
	// (Summary.CC): the client's in a put (protocol version 5), the
	// server's in a get.
	CC string `json:"cc,omitempty"`
	// Transport is "udp" for a session whose data went over UDP; empty
	// for TCP.
	Transport string `json:"transport,omitempty"`
}

func (s *Server) writeLog(l logLine) {
	if s.cfg.TransferLog == nil {
		return
	}
	l.Time = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(l)
	s.logMu.Lock()
	s.cfg.TransferLog.Write(append(b, '\n'))
	s.logMu.Unlock()
}

func (s *Server) logFile(sid, peer, op string, fr FileResult) {
	l := logLine{Session: sid, Peer: peer, Op: op, Kind: "file", Path: fr.Path, Size: fr.Size, Reason: fr.Reason}
	switch {
	case fr.Skipped:
		l.Status = "skipped"
	case fr.OK:
		l.Status = "ok"
		l.CRC32C = fmt.Sprintf("%08x", fr.CRC32C)
	default:
		l.Status = "failed"
	}
	s.writeLog(l)
}

func (s *Server) logSession(sid, peer, op string, p *Progress, bytes int64, srcErrs int, cc string, udp bool, d time.Duration, err error) {
	l := logLine{Session: sid, Peer: peer, Op: op, Kind: "session", Status: "ok",
		Files: p.FilesDone.Load(), Bytes: bytes, Seconds: d.Seconds(), CC: cc}
	if udp {
		l.Transport = TransportUDP
	}
	if err != nil {
		l.Status, l.Reason = "failed", err.Error()
	} else if n := p.FilesFailed.Load() + int64(srcErrs); n > 0 {
		l.Status = "partial"
		l.Reason = fmt.Sprintf("%d files or sources failed", n)
	}
	s.writeLog(l)
}

// admitGrant checks the grant a session presents against its request and
// binds the session to it: its attempt's fence is watched from now on, and
// the sessions of older attempts of its task are waited for (they are
// being ended) so that this one finds their partial files free to resume.
// It returns the error code to refuse with.
func (s *Server) admitGrant(ctx context.Context, ss *session, token string, m wire.Msg, version uint16) (uint8, error) {
	mode, what := "", "sessions"
	switch m := m.(type) {
	case *wire.Put:
		mode, what = grant.Write, "pushes"
	case *wire.Get:
		mode, what = grant.Read, "pulls"
	case *wire.Bench:
		if m.File != "" {
			mode, what = grant.Read, "benches from a file"
		}
	}
	if token == "" {
		if version < wire.VersionGrant {
			return wire.CodeRefused, classed(retry.FaultPermission, fmt.Errorf("the server takes %s only with a grant from the controller, and this client (protocol version %d) cannot send one", what, version))
		}
		return wire.CodeRefused, classed(retry.FaultPermission, fmt.Errorf("the server takes %s only with a grant from the controller", what))
	}
	g, err := s.cfg.Grants.Verify(token)
	if errors.Is(err, grant.ErrNoKey) {
		return wire.CodeBusy, err // the key comes with the next heartbeat: worth a retry
	}
	if err != nil {
		return wire.CodeRefused, err
	}
	switch m := m.(type) {
	case *wire.Put:
		// The destination must be covered, or lead to what is (a push of
		// a tree into a directory above the covered paths: each entry is
		// checked as it comes). A path clientPath refuses is refused by
		// putDest, in its own words.
		if p, perr := clientPath(m.Dest); perr == nil {
			if err := g.Covers(mode, p); err != nil && !(errors.Is(err, grant.ErrPath) && g.Leads(p)) {
				return wire.CodeRefused, err
			}
		}
	case *wire.Get:
		for _, raw := range m.Paths {
			if p, perr := clientPath(raw); perr == nil {
				if err := g.Covers(mode, p); err != nil {
					return wire.CodeRefused, err
				}
			}
		}
	case *wire.Bench:
		if p, perr := clientPath(m.File); perr == nil && m.File != "" {
			if err := g.Covers(mode, p); err != nil {
				return wire.CodeRefused, err
			}
		}
	}
	// The controller's word that the attempt is still current, asked
	// afresh for every session: a grant is not renewed, and a task that
	// ended (or a restart of this server) leaves no fence behind to
	// refuse it by; see grant.Verifier.Confirm.
	if err := s.cfg.Grants.Confirm(ctx, g); err != nil {
		if errors.Is(err, grant.ErrOver) || errors.Is(err, grant.ErrStale) {
			return wire.CodeRefused, err
		}
		return wire.CodeBusy, fmt.Errorf("ask the controller whether attempt %d of task %s is current: %w", g.Attempt, g.Task, err)
	}
	s.mu.Lock()
	if !s.cfg.Grants.Current(g.Task, g.Attempt) {
		// A newer attempt verified since this one did.
		s.mu.Unlock()
		return wire.CodeRefused, fmt.Errorf("%w: attempt %d of task %s is no longer current", grant.ErrStale, g.Attempt, g.Task)
	}
	ss.grant, ss.cut, ss.released = &g, make(chan struct{}), make(chan struct{})
	ss.unhold = s.cfg.Grants.Hold(g.Task, g.Attempt)
	var older []*session
	for o := range s.granted {
		if o.grant.Task == g.Task && o.grant.Attempt < g.Attempt {
			older = append(older, o)
		}
	}
	s.granted[ss] = true
	s.mu.Unlock()
	go s.watchFence(ss)
	if len(older) == 0 {
		return 0, nil
	}
	t := time.NewTimer(s.cfg.IdleTimeout)
	defer t.Stop()
	for _, o := range older {
		select {
		case <-o.released:
		case <-t.C:
			s.releaseGrant(ss)
			return wire.CodeBusy, fmt.Errorf("attempt %d of task %s still holds its files: try again", o.grant.Attempt, g.Task)
		}
	}
	return 0, nil
}

// releaseGrant forgets a session under a grant.
func (s *Server) releaseGrant(ss *session) {
	ss.release()
	s.mu.Lock()
	delete(s.granted, ss)
	s.mu.Unlock()
}

// watchFence fences the session once its attempt is no longer the newest
// of its task, woken by the verifier at each rise of a fence.
func (s *Server) watchFence(ss *session) {
	v := s.cfg.Grants
	for {
		ch := v.Changed()
		if !v.Current(ss.grant.Task, ss.grant.Attempt) {
			ss.fence()
			return
		}
		select {
		case <-ch:
		case <-ss.released:
			return
		}
	}
}

// handshakes counts the connections not yet in a session, overall and per
// client address.
type handshakes struct {
	mu       sync.Mutex
	total    int
	byClient map[string]int
	// refused since the last log line, and when that was: a flood of
	// refusals is logged once a second, not once a connection.
	refused  int
	loggedAt time.Time
}

// admit takes a place for a connection from client, or says why there is
// none; release gives it back (once, whatever the number of calls).
func (h *handshakes) admit(client string, max, perClient int) (release func(), why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byClient == nil {
		h.byClient = map[string]int{}
	}
	switch {
	case h.byClient[client] >= perClient:
		return nil, fmt.Sprintf("too many connections from %s awaiting their handshake (%d at once): wait for some to finish", client, perClient)
	case h.total >= max:
		return nil, fmt.Sprintf("too many connections awaiting their handshake (%d at once): try again later", max)
	}
	h.total++
	h.byClient[client]++
	return sync.OnceFunc(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.total--
		if h.byClient[client]--; h.byClient[client] <= 0 {
			delete(h.byClient, client)
		}
	}), ""
}

// refuseConn closes a connection over the handshake limits at once, with
// the reason where the connection is not TLS (a TLS client could not read
// it before its own handshake).
func (s *Server) refuseConn(c net.Conn, why string) {
	if s.cfg.TLS == nil {
		// A fresh socket's send buffer is empty: this small write does
		// not wait on the peer.
		c.SetWriteDeadline(time.Now().Add(time.Second))
		wire.NewWriter(c).Send(&wire.Error{Code: wire.CodeBusy, Msg: why})
	}
	c.Close()
	s.hs.mu.Lock()
	s.hs.refused++
	n, now := s.hs.refused, time.Now()
	logIt := now.Sub(s.hs.loggedAt) >= time.Second
	if logIt {
		s.hs.refused, s.hs.loggedAt = 0, now
	}
	s.hs.mu.Unlock()
	if logIt {
		s.log.Warn("connection refused", "peer", c.RemoteAddr().String(), "reason", why, "refused", n)
	}
}
