package mover

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/transport/udp"
	"github.com/lightpath/lightpath/internal/wire"
)

// errSpeaksHTTP is a server that answered the hello with an HTTP response.
var errSpeaksHTTP = errors.New("the server speaks HTTP")

// refusal is an ErrRefused (not worth retrying) that says all in its own words.
type refusal string

func (r refusal) Error() string        { return string(r) }
func (r refusal) Is(target error) bool { return target == ErrRefused }

// RetryClass makes a refusal permanent for retry, as ErrRefused is.
func (refusal) RetryClass() retry.Class { return retry.PermanentClass }

// ClientConfig configures a client's connections.
type ClientConfig struct {
	Addr   string // HOST:PORT
	Token  []byte
	TLS    *tls.Config // nil: plain TCP
	Tuning Tuning
	// Streams is the number of data connections; 0 chooses from the
	// measured round-trip time and the rate.
	Streams   int
	BlockSize int64
	Stall     time.Duration
	// Transport carries the session's connections; nil means TCP. With
	// Tuning.Transport "udp" it carries the control connection only.
	Transport transport.Transport
	// Grant is the capability the controller signed for this session (a
	// data node of the transfer service pushing to another one's server);
	// sent before the request to a server that speaks protocol version 3
	// or later, and left out for an older one, which checks no grants.
	Grant string
	// LocalAddr, when set, is the IP address every connection of the
	// session leaves from (transport.Options.LocalAddr).
	LocalAddr string
	// maxVersion, when set, is the highest protocol version offered: the
	// tests play an older client with it.
	maxVersion uint16
}

func (c *ClientConfig) options(streams int) transport.Options {
	o := tuningOptions(c.Tuning.wire(), streams)
	o.LocalAddr = c.LocalAddr
	if c.udpData() {
		o.FASTAlpha, o.FASTGamma = c.Tuning.FASTAlpha, c.Tuning.FASTGamma
	}
	return o
}

// serverSends says whether the server sends data in the session a request
// opens (a pull, a reverse bench or one both ways).
func serverSends(m wire.Msg) bool {
	switch m := m.(type) {
	case *wire.Get:
		return true
	case *wire.Bench:
		return m.Reverse || m.Bidir
	}
	return false
}

// udpData says the session's data connections are UDP streams.
func (c *ClientConfig) udpData() bool { return c.Tuning.Transport == TransportUDP }

// ctrlOptions are the control connection's options: a UDP session's
// control connection is TCP, under the kernel's congestion control (the
// session's rate control names a UDP one).
func (c *ClientConfig) ctrlOptions(streams int) transport.Options {
	o := c.options(streams)
	if c.udpData() {
		o.CC, o.PacingRate = "", 0
		o.FASTAlpha, o.FASTGamma = 0, 0
	}
	return o
}

// udpTransport dials the data streams of UDP sessions; each dial carries
// its session's key (transport.Options.Auth).
var udpTransport = &udp.Transport{}

// dial opens a connection and runs its handshake: the control
// connection, or a data connection (over UDP under auth, when set).
func (c *ClientConfig) dial(ctx context.Context, kind wire.Kind, streams int, auth *transport.Auth) (net.Conn, *wire.Reader, [wire.NonceSize]byte, [wire.NonceSize]byte, error) {
	return c.dialThen(ctx, kind, streams, auth, nil)
}

// dialThen is dial, calling connected (when set) once the transport's
// connection is up, before its TLS and hello.
func (c *ClientConfig) dialThen(ctx context.Context, kind wire.Kind, streams int, auth *transport.Auth, connected func()) (net.Conn, *wire.Reader, [wire.NonceSize]byte, [wire.NonceSize]byte, error) {
	var cn, sn [wire.NonceSize]byte
	tr := c.Transport
	if tr == nil {
		tr = transport.TCP
	}
	o := c.ctrlOptions(streams)
	if kind == wire.KindData {
		o = c.options(streams)
	}
	if auth != nil {
		tr, o.Auth = udpTransport, auth
	}
	tc, err := tr.Dial(ctx, c.Addr, o)
	if errors.Is(err, syscall.ECONNREFUSED) {
		if auth != nil {
			return nil, nil, cn, sn, fmt.Errorf("connect to %s over UDP: %w: does a firewall close the server's UDP port?", c.Addr, syscall.ECONNREFUSED)
		}
		return nil, nil, cn, sn, fmt.Errorf("connect to %s: %w: is `lightpath serve` running there?", c.Addr, syscall.ECONNREFUSED)
	}
	if err != nil {
		return nil, nil, cn, sn, fmt.Errorf("connect to %s: %w", c.Addr, err)
	}
	if connected != nil {
		connected()
	}
	var conn net.Conn = tc
	if c.TLS != nil {
		tlc := tls.Client(tc, c.TLS)
		hctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := tlc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			tc.Close()
			return nil, nil, cn, sn, fmt.Errorf("%w: TLS handshake with %s: %v", ErrAuth, c.Addr, err)
		}
		conn = tlc
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	maxVersion := wire.MaxVersion
	if c.maxVersion != 0 {
		maxVersion = c.maxVersion
	}
	r, cn, sn, err := clientHandshake(conn, kind, c.Token, maxVersion)
	if errors.Is(err, errSpeaksHTTP) {
		conn.Close()
		return nil, nil, cn, sn, refusal(fmt.Sprintf("lp://%s speaks HTTP, not the Lightpath mover protocol: is it the controller's port? the mover listens where `lightpath serve --listen` says", c.Addr))
	}
	if err != nil {
		conn.Close()
		return nil, nil, cn, sn, err
	}
	return conn, r, cn, sn, nil
}

// connect opens a session: the control connection, the request, and the
// data connections, all to the server's one port.
func (c *ClientConfig) connect(ctx context.Context, req func(streams int) wire.Msg) (*link, error) {
	return c.connectVersion(ctx, 0, "", req)
}

// connectVersion is connect for a request that needs protocol version
// minVersion at least (what names it, for the refusal).
func (c *ClientConfig) connectVersion(ctx context.Context, minVersion uint16, what string, req func(streams int) wire.Msg) (*link, error) {
	switch c.Tuning.Transport {
	case "", TransportTCP, TransportUDP:
	default:
		return nil, refusal(fmt.Sprintf("unknown transport %q: want tcp or udp", c.Tuning.Transport))
	}
	// The data connections of a TCP session are dialled beside the
	// control connection once its TCP connection is up (when the stream
	// count is known), or beside the request (when it is chosen from the
	// control connection's RTT): their TCP and hello round trips overlap
	// the control's hello and request, and only their joins wait for the
	// answer. Two round trips fewer before the first byte, which on a
	// wide-area path is most of a small job's start. The server still
	// accepts the control connection first.
	var spec *dataDials
	var early func()
	if !c.udpData() && c.Streams > 0 {
		early = func() { spec = c.dialData(ctx, c.Streams) }
	}
	defer func() { spec.close() }() // what the session did not take
	conn, r, cn, sn, err := c.dialThen(ctx, wire.KindControl, max(c.Streams, 1), nil, early)
	if err != nil {
		return nil, err
	}
	if r.Version < minVersion {
		conn.Close()
		return nil, refusal(fmt.Sprintf("the server at %s speaks protocol version %d, and %s needs %d or later: upgrade its lightpath", c.Addr, r.Version, what, minVersion))
	}
	if c.udpData() && r.Version < wire.VersionUDP {
		conn.Close()
		return nil, refusal(fmt.Sprintf("the server at %s speaks protocol version %d, and --transport udp needs %d or later: upgrade its lightpath, or use --transport tcp", c.Addr, r.Version, wire.VersionUDP))
	}
	streams := c.Streams
	if streams <= 0 {
		if c.udpData() {
			streams = ChooseUDPStreams(conn, c.Tuning.Rate)
		} else {
			streams = ChooseStreams(conn, c.Tuning.Rate)
		}
		if st := transport.StreamOf(conn); st != nil {
			st.Tune(c.ctrlOptions(streams))
		}
		if !c.udpData() {
			spec = c.dialData(ctx, streams)
		}
	}
	w := wire.NewWriter(conn)
	if c.Grant != "" && r.Version >= wire.VersionGrant {
		if len(c.Grant) > wire.MaxGrant {
			conn.Close()
			return nil, refusal(fmt.Sprintf("the grant is %d bytes long, at most %d", len(c.Grant), wire.MaxGrant))
		}
		// Sent with the request, in one write: no round trip of its own.
		if err := w.Write(&wire.Grant{Token: c.Grant}); err != nil {
			conn.Close()
			return nil, fmt.Errorf("send grant: %w", err)
		}
	}
	request := req(streams)
	if c.udpData() {
		// With the request, in one write, as the grant. FAST's parameters
		// go along for the streams the server sends on, where its version
		// carries them.
		t := &wire.Transport{Name: TransportUDP}
		if c.Tuning.FASTAlpha != 0 || c.Tuning.FASTGamma != 0 {
			if r.Version >= wire.VersionFAST {
				t.FASTAlpha, t.FASTGamma = c.Tuning.FASTAlpha, c.Tuning.FASTGamma
			} else if serverSends(request) {
				conn.Close()
				return nil, refusal(fmt.Sprintf("the server speaks protocol version %d, which does not carry --fast-alpha and --fast-gamma to the streams it sends on (version %d does): upgrade it, or leave them out", r.Version, wire.VersionFAST))
			}
		}
		if err := w.Write(t); err != nil {
			conn.Close()
			return nil, fmt.Errorf("send transport: %w", err)
		}
	}
	if err := w.Send(request); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send request: %w", err)
	}
	m, err := r.Read()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("read answer: %w", err)
	}
	var acc *wire.Accept
	switch m := m.(type) {
	case *wire.Error:
		conn.Close()
		return nil, peerError(m)
	case *wire.Accept:
		acc = m
	default:
		conn.Close()
		return nil, fmt.Errorf("%w: unexpected %s in answer to the request", wire.ErrMalformed, m.Type())
	}
	key := acc.Secret
	if len(key) == 0 {
		key = sessionKey(c.Token, cn, sn)
	}
	var auth *transport.Auth
	if c.udpData() {
		auth = &transport.Auth{Session: acc.Session, Key: udpKey(key, acc.Session)}
	}
	data := make([]*dataConn, acc.Streams)
	errs := make([]error, acc.Streams)
	var wg sync.WaitGroup
	for i := range data {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A connection dialled ahead that the server closed meanwhile
			// (its handshake timeout, while the request waited on the
			// controller or an older attempt) is dialled again, once.
			d, early := spec.take(i)
			for {
				if !early {
					d.conn, d.r, d.cn, d.sn, d.err = c.dial(ctx, wire.KindData, int(acc.Streams), auth)
				}
				if d.err != nil {
					if early && ctx.Err() == nil {
						early = false
						continue
					}
					errs[i] = d.err
					return
				}
				dc, answered, err := join(d, acc.Session, uint16(i), key)
				if err != nil && early && ctx.Err() == nil && !answered {
					early = false
					continue
				}
				if err != nil {
					errs[i] = err
					return
				}
				data[i] = dc
				return
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			conn.Close()
			closeData(data)
			return nil, fmt.Errorf("open data connection: %w", err)
		}
	}
	conn.SetDeadline(time.Time{})
	return &link{ctrl: newCtrl(conn, r), data: data, stall: c.Stall, prog: &Progress{}, udp: c.udpData()}, nil
}

// dataDial is a data connection dialled (TCP and hello), not yet joined.
type dataDial struct {
	conn   net.Conn
	r      *wire.Reader
	cn, sn [wire.NonceSize]byte
	err    error
}

// dataDials are the data connections of a session dialled ahead of its
// answer (connectVersion), each delivered on its own channel.
type dataDials struct {
	ch    []chan dataDial
	taken []bool
}

// dialData starts dialling n data connections.
func (c *ClientConfig) dialData(ctx context.Context, n int) *dataDials {
	d := &dataDials{ch: make([]chan dataDial, n), taken: make([]bool, n)}
	for i := range d.ch {
		d.ch[i] = make(chan dataDial, 1)
		go func() {
			var x dataDial
			x.conn, x.r, x.cn, x.sn, x.err = c.dial(ctx, wire.KindData, n, nil)
			d.ch[i] <- x
		}()
	}
	return d
}

// take waits for the i-th connection dialled ahead; false when there is
// none (fewer were dialled than the server granted streams).
func (d *dataDials) take(i int) (dataDial, bool) {
	if d == nil || i >= len(d.ch) {
		return dataDial{}, false
	}
	d.taken[i] = true
	return <-d.ch[i], true
}

// close closes, as they come, the connections dialled ahead that no
// stream took (a refused request, or fewer streams granted).
func (d *dataDials) close() {
	if d == nil {
		return
	}
	for i, ch := range d.ch {
		if d.taken[i] {
			continue
		}
		go func() {
			if x := <-ch; x.conn != nil {
				x.conn.Close()
			}
		}()
	}
}

// join joins a dialled data connection to session as stream i; answered
// says the server refused the join (rather than the connection failing).
func join(d dataDial, session [16]byte, i uint16, key []byte) (dc *dataConn, answered bool, err error) {
	dw := wire.NewWriter(d.conn)
	if err := dw.Send(&wire.Join{Session: session, Stream: i, MAC: joinMAC(key, session, i, d.cn, d.sn)}); err != nil {
		d.conn.Close()
		return nil, false, fmt.Errorf("join: %w", err)
	}
	jm, err := d.r.Read()
	if err != nil {
		d.conn.Close()
		return nil, false, fmt.Errorf("join: %w", err)
	}
	if e, ok := jm.(*wire.Error); ok {
		d.conn.Close()
		return nil, true, peerError(e)
	}
	d.conn.SetDeadline(time.Time{})
	return newDataConn(d.conn, d.r.Buffered()), false, nil
}

// ChooseUDPStreams picks a UDP session's stream count: each UDP stream
// paces itself and holds its window in user space (growing as the path
// needs), so fewer streams fill a path than TCP needs; enough that each
// one's share of the bandwidth-delay product fits half of udpWindow, one at least, two on a short
// path (both cores busy), eight at most (the server reads every stream
// from one socket).
func ChooseUDPStreams(c net.Conn, rate uint64) int {
	st := transport.StreamOf(c)
	if st == nil {
		return 2
	}
	info, err := st.Stats()
	if err != nil || info.RTT <= 0 || info.RTT < time.Millisecond {
		return 2
	}
	if rate == 0 {
		rate = 10e9
	}
	bdp := float64(rate) / 8 * info.RTT.Seconds()
	n := int(bdp/(udpWindow/2)) + 1
	return min(max(n, 1), 8)
}

// udpWindow is the window a UDP stream counts on when the stream count is
// chosen: windows start smaller and grow (docs/udp.md), so this is what one
// stream may be expected to keep in flight, not what it starts with.
const udpWindow = 16 << 20

// ChooseStreams picks a stream count from the control connection's measured
// round-trip time and the requested rate: enough streams that each one's
// share of the bandwidth-delay product fits the window the kernel lets a
// socket grow to, and never fewer than two, so one stream's loss recovery
// does not stall the transfer.
func ChooseStreams(c net.Conn, rate uint64) int {
	const lowRTT = 4 // a LAN or loopback: CPU, not the window, limits; 4 keeps both cores busy
	st := transport.StreamOf(c)
	if st == nil {
		return 4
	}
	info, err := st.Stats()
	if err != nil || info.RTT <= 0 {
		return 4
	}
	if rate == 0 {
		rate = 10e9 // assume a 10 Gbit/s path when none is named
	}
	bdp := float64(rate) / 8 * info.RTT.Seconds()
	window := float64(maxWindow())
	n := int(bdp/(window/2)) + 1
	if info.RTT < time.Millisecond {
		n = max(n, lowRTT)
	}
	return min(max(n, 2), 16)
}

// maxWindow reads how far the kernel lets a receive buffer grow.
func maxWindow() int64 {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_rmem")
	if err != nil {
		return 6 << 20
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 6 << 20
	}
	v, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || v <= 0 {
		return 6 << 20
	}
	return v
}

// TransferStats is a finished session's account.
type TransferStats struct {
	Sender, Receiver wire.Stats
	SourceErrors     []string
	// Unread are the sources a push could not read, with their class.
	Unread []SourceError
}

// pushOnce sends local sources to the server's dest in one session.
func pushOnce(ctx context.Context, cfg ClientConfig, src Source, dest string, dirSlash bool, opts wire.Transfer, part *Part, prog *Progress, onFile func(FileResult)) (TransferStats, error) {
	var wp *wire.Part
	var need uint16
	if part != nil {
		wp, need = &wire.Part{Offset: part.Offset, Length: part.Length}, wire.VersionPart
	}
	l, err := cfg.connectVersion(ctx, need, "a part push", func(streams int) wire.Msg {
		o := opts
		o.Tuning, o.Streams, o.BlockSize = cfg.Tuning.wire(), uint16(streams), uint32(cfg.blockSize())
		return &wire.Put{Transfer: o, Dest: dest, Sources: uint32(len(src.Items)), DirSlash: dirSlash, Part: wp}
	})
	if err != nil {
		return TransferStats{}, err
	}
	defer l.close()
	l.blockSize, l.opts, l.part, l.prog, l.onFile = cfg.blockSize(), opts, wp, prog, onFile
	prog.setStreams(l)
	res, err := runSender(ctx, l, src)
	if err != nil {
		return TransferStats{}, err
	}
	return TransferStats{Sender: res.Local, Receiver: res.Remote, SourceErrors: res.Errors, Unread: res.Unread}, nil
}

// pullOnce fetches the server's paths into a local destination in one
// session.
func pullOnce(ctx context.Context, cfg ClientConfig, paths []string, dst Dest, opts wire.Transfer, prog *Progress, onFile func(FileResult)) (TransferStats, error) {
	l, err := cfg.connect(ctx, func(streams int) wire.Msg {
		o := opts
		o.Tuning, o.Streams, o.BlockSize = cfg.Tuning.wire(), uint16(streams), uint32(cfg.blockSize())
		return &wire.Get{Transfer: o, Paths: paths}
	})
	if err != nil {
		return TransferStats{}, err
	}
	defer l.close()
	l.blockSize, l.opts, l.prog, l.onFile = cfg.blockSize(), opts, prog, onFile
	prog.setStreams(l)
	res, err := runReceiver(ctx, l, dst)
	if err != nil {
		return TransferStats{}, err
	}
	return TransferStats{Sender: res.Remote, Receiver: res.Local, SourceErrors: res.Errors}, nil
}

func (c *ClientConfig) blockSize() int64 {
	if c.BlockSize > 0 {
		return c.BlockSize
	}
	return DefaultBlockSize
}
