package mover

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/wire"
)

// ErrAuth is wrapped by errors that come from a wrong or missing token or
// certificate; retrying does not help with them (retry.IsPermanent).
var ErrAuth = retry.Permanent(errors.New("authentication failed"))

// ErrRefused is wrapped by errors where the server refused the request
// itself (a bad path, read-only, ...); retrying does not help either
// (retry.IsPermanent, as for wire.ErrMalformed).
var ErrRefused = retry.Permanent(errors.New("refused"))

// ctrl is one end of a control connection: a framed reader and a
// mutex-guarded writer whose flushes coalesce, so that many small messages
// (file ends, verdicts) sent from several goroutines share write calls.
type ctrl struct {
	conn net.Conn
	r    *wire.Reader
	mu   sync.Mutex
	w    *wire.Writer
	kick chan struct{}
	werr error
	// version is the protocol version the handshake agreed on.
	version uint16
}

func newCtrl(c net.Conn, r *wire.Reader) *ctrl {
	if r == nil {
		r = wire.NewReader(c)
	}
	return &ctrl{conn: c, r: r, w: wire.NewWriter(c), kick: make(chan struct{}, 1), version: r.Version}
}

// send writes and flushes at once.
func (c *ctrl) send(m wire.Msg) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	if err := c.w.Write(m); err != nil {
		c.werr = err
		return err
	}
	c.werr = c.w.Flush()
	return c.werr
}

// queue buffers m and asks the flusher to send it soon.
func (c *ctrl) queue(m wire.Msg) error {
	c.mu.Lock()
	if c.werr == nil {
		c.werr = c.w.Write(m)
	}
	err := c.werr
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return err
}

// flusher sends queued messages until done is closed. A short pause lets a
// burst of messages share one write.
func (c *ctrl) flusher(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-c.kick:
		}
		time.Sleep(200 * time.Microsecond)
		c.mu.Lock()
		if c.werr == nil && c.w.Buffered() > 0 {
			c.werr = c.w.Flush()
		}
		c.mu.Unlock()
	}
}

func (c *ctrl) read() (wire.Msg, error) {
	m, err := c.r.Read()
	if err != nil {
		return nil, err
	}
	if e, ok := m.(*wire.Error); ok {
		return nil, peerError(e)
	}
	return m, nil
}

// peerError turns an Error frame from the peer into a Go error of the right
// class.
//
// Its class is the peer's word (Error.Fault, from version VersionFault on);
// from an older peer, the code's: a wrong token is a refused permission, a
// busy server the network's, anything else internal.
func peerError(e *wire.Error) error {
	var err error
	fault := retry.FaultInternal
	switch e.Code {
	case wire.CodeAuth:
		err, fault = fmt.Errorf("%w: %s", ErrAuth, e.Msg), retry.FaultPermission
	case wire.CodeRefused, wire.CodeVersion:
		err = fmt.Errorf("%w: %s", ErrRefused, e.Msg)
	case wire.CodeBusy:
		err, fault = fmt.Errorf("peer: %s", e.Msg), retry.FaultNetwork
	default:
		err = fmt.Errorf("peer: %s", e.Msg)
	}
	if f := wire.FaultOfCode(e.Fault); f != "" {
		fault = f
	}
	return classed(fault, err)
}

func nonce() (n [wire.NonceSize]byte) {
	if _, err := rand.Read(n[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func mac(key []byte, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, key)
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// Labels keep the two directions' proofs and the session key apart.
var (
	labelClient  = []byte("lightpath v1 client proof")
	labelServer  = []byte("lightpath v1 server proof")
	labelSession = []byte("lightpath v1 session key")
	labelJoin    = []byte("lightpath v1 join")
	labelUDP     = []byte("lightpath v1 udp key")
)

// clientHandshake runs the opening of a connection from the client's side:
// hello, version, and the token challenge. It returns the reader to go on
// with and the two nonces (for the session key).
func clientHandshake(c net.Conn, kind wire.Kind, token []byte, maxVersion uint16) (*wire.Reader, [wire.NonceSize]byte, [wire.NonceSize]byte, error) {
	cn := nonce()
	// The hello ends a line, so that an HTTP server (a controller's port
	// given by mistake) answers it at once with a 400 instead of waiting
	// for the rest of a request; 248 random bits are left.
	cn[wire.NonceSize-1] = '\n'
	var sn [wire.NonceSize]byte
	hello := wire.AppendHello(nil, wire.Hello{MinVersion: wire.MinVersion, MaxVersion: maxVersion, Kind: kind, Nonce: cn})
	if _, err := c.Write(hello); err != nil {
		return nil, cn, sn, fmt.Errorf("send hello: %w", err)
	}
	br := bufio.NewReaderSize(c, 64<<10)
	// A TLS server answers a plain hello with a TLS alert record (0x15).
	if b, err := br.Peek(1); err == nil && b[0] == 0x15 {
		return nil, cn, sn, fmt.Errorf("%w: the server speaks TLS: give --tls-ca with its certificate authority", ErrRefused)
	}
	if b, _ := br.Peek(4); string(b) == "HTTP" {
		return nil, cn, sn, errSpeaksHTTP
	}
	r := wire.NewReader(br)
	m, err := r.Read()
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, cn, sn, fmt.Errorf("the server closed the connection during the handshake (does it need TLS? give --tls-ca)")
		}
		return nil, cn, sn, fmt.Errorf("read hello answer: %w", err)
	}
	switch m := m.(type) {
	case *wire.Error:
		return nil, cn, sn, peerError(m)
	case *wire.HelloOK:
		sn = m.Nonce
		if m.Version < wire.MinVersion || m.Version > maxVersion {
			return nil, cn, sn, fmt.Errorf("%w: the server chose protocol version %d, this client speaks %d..%d", wire.ErrMalformed, m.Version, wire.MinVersion, maxVersion)
		}
		r.Version = m.Version
		if !m.AuthRequired {
			return r, cn, sn, nil
		}
		if len(token) == 0 {
			return nil, cn, sn, fmt.Errorf("%w: the server requires a token: give --token-file F or set LIGHTPATH_TOKEN", ErrAuth)
		}
		w := wire.NewWriter(c)
		if err := w.Send(&wire.Auth{MAC: mac(token, labelClient, cn[:], sn[:])}); err != nil {
			return nil, cn, sn, fmt.Errorf("send token proof: %w", err)
		}
		a, err := r.Read()
		if err != nil {
			return nil, cn, sn, fmt.Errorf("read token answer: %w", err)
		}
		switch a := a.(type) {
		case *wire.Error:
			return nil, cn, sn, peerError(a)
		case *wire.AuthOK:
			if !hmac.Equal(a.MAC, mac(token, labelServer, sn[:], cn[:])) {
				return nil, cn, sn, fmt.Errorf("%w: the server could not prove it holds the same token", ErrAuth)
			}
			return r, cn, sn, nil
		default:
			return nil, cn, sn, fmt.Errorf("%w: unexpected %s during authentication", wire.ErrMalformed, a.Type())
		}
	default:
		return nil, cn, sn, fmt.Errorf("%w: unexpected %s in answer to hello", wire.ErrMalformed, m.Type())
	}
}

// serverHandshake runs the opening from the server's side. It returns the
// client's hello, the reader and the server's nonce.
func serverHandshake(c net.Conn, token []byte) (wire.Hello, *wire.Reader, [wire.NonceSize]byte, error) {
	sn := nonce()
	br := bufio.NewReaderSize(c, 64<<10)
	h, err := wire.ReadHello(br)
	if err != nil {
		if errors.Is(err, wire.ErrMalformed) {
			sendError(c, wire.CodeProtocol, err.Error())
		}
		return h, nil, sn, fmt.Errorf("read hello: %w", err)
	}
	if h.MaxVersion < wire.MinVersion || h.MinVersion > wire.MaxVersion {
		msg := fmt.Sprintf("unsupported protocol version %d..%d: this server speaks %d..%d", h.MinVersion, h.MaxVersion, wire.MinVersion, wire.MaxVersion)
		sendError(c, wire.CodeVersion, msg)
		return h, nil, sn, fmt.Errorf("%w: %s", wire.ErrMalformed, msg)
	}
	v := min(h.MaxVersion, wire.MaxVersion)
	w := wire.NewWriter(c)
	if err := w.Send(&wire.HelloOK{Version: v, Nonce: sn, AuthRequired: len(token) > 0}); err != nil {
		return h, nil, sn, fmt.Errorf("send hello: %w", err)
	}
	r := wire.NewReader(br)
	r.Version = v
	if len(token) == 0 {
		return h, r, sn, nil
	}
	m, err := r.Read()
	if err != nil {
		return h, nil, sn, fmt.Errorf("read token proof: %w", err)
	}
	a, ok := m.(*wire.Auth)
	if !ok {
		sendError(c, wire.CodeProtocol, "expected a token proof")
		return h, nil, sn, fmt.Errorf("%w: expected auth, got %s", wire.ErrMalformed, m.Type())
	}
	if !hmac.Equal(a.MAC, mac(token, labelClient, h.Nonce[:], sn[:])) {
		sendError(c, wire.CodeAuth, "wrong token")
		return h, nil, sn, fmt.Errorf("%w: wrong token", ErrAuth)
	}
	if err := w.Send(&wire.AuthOK{MAC: mac(token, labelServer, sn[:], h.Nonce[:])}); err != nil {
		return h, nil, sn, fmt.Errorf("send token answer: %w", err)
	}
	return h, r, sn, nil
}

// refuse ends a request with an error frame of code, carrying the class of
// err (a busy server's: the network's) to a peer of protocol version
// VersionFault or later.
func refuse(c net.Conn, version uint16, code uint8, err error) {
	e := &wire.Error{Code: code, Msg: err.Error()}
	if version >= wire.VersionFault {
		f := faultOrInternal(FaultOf(err))
		if code == wire.CodeBusy {
			f = retry.FaultNetwork
		}
		e.Fault = wire.FaultCode(f)
	}
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_ = wire.NewWriter(c).Send(e)
}

func sendError(c net.Conn, code uint8, msg string) {
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	w := wire.NewWriter(c)
	_ = w.Send(&wire.Error{Code: code, Msg: msg})
}

// sessionKey derives the key data connections prove they hold. With a token
// both ends derive it; without one the server makes it up and sends it.
func sessionKey(token []byte, cn, sn [wire.NonceSize]byte) []byte {
	return mac(token, labelSession, cn[:], sn[:])
}

func joinMAC(key []byte, session [16]byte, stream uint16, cn, sn [wire.NonceSize]byte) []byte {
	return mac(key, labelJoin, session[:], []byte{byte(stream >> 8), byte(stream)}, cn[:], sn[:])
}

// udpKey is the secret a UDP session's data streams derive their keys
// from (transport.Auth.Key): the session key under a label of its own, so
// the join proofs and the datagrams' MACs never share a key.
func udpKey(key []byte, session [16]byte) []byte {
	return mac(key, labelUDP, session[:])
}
