package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
)

// HTTPOptions bounds what one connection may hold of the controller: a
// client that is slow to send its request or body, or that keeps an idle
// connection open, is cut off, so that no one can pile up connections
// until the process runs out of descriptors.
type HTTPOptions struct {
	ReadHeaderTimeout time.Duration // the request's header
	ReadTimeout       time.Duration // the whole request, body included
	WriteTimeout      time.Duration // the answer; each stream frame gets it anew
	IdleTimeout       time.Duration // a keep-alive connection between requests
	// UnauthTimeout is how long a connection that has not yet
	// authenticated (no request of it carried a valid token) may sit
	// idle or take to send a request's header, from when it opened or its
	// last answer: anyone can open such connections, so they are let go
	// quickly. 0: no such bound. Only connections of a ConnLimit's
	// listener are tracked.
	UnauthTimeout time.Duration
	MaxStreams    int // open event/live streams per identity (0: DefaultMaxStreams)
}

// DefaultUnauthTimeout is the controller's bound on connections that have
// not authenticated: a health check or a sign-in needs far less.
const DefaultUnauthTimeout = 5 * time.Second

// DefaultHTTPOptions are the controller's bounds: a 1 MiB body arrives in
// a minute even at 150 kbit/s.
func DefaultHTTPOptions() HTTPOptions {
	return HTTPOptions{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, UnauthTimeout: DefaultUnauthTimeout, MaxStreams: DefaultMaxStreams}
}

// HTTPServer returns an http.Server that serves s within o's bounds; ctx
// is every request's base context.
func (s *Server) HTTPServer(ctx context.Context, o HTTPOptions) *http.Server {
	s.bound(o)
	return httpServer(ctx, o, s)
}

// bound applies o's per-request bounds to s.
func (s *Server) bound(o HTTPOptions) {
	s.writeTimeout = o.WriteTimeout
	s.slots.mu.Lock()
	s.slots.max = o.MaxStreams
	s.slots.mu.Unlock()
}

func httpServer(ctx context.Context, o HTTPOptions, h http.Handler) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
		WriteTimeout: o.WriteTimeout, IdleTimeout: o.IdleTimeout,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if lc := limitConnOf(c); lc != nil {
			return context.WithValue(ctx, limitConnKey{}, lc)
		}
		return ctx
	}
	if d := o.UnauthTimeout; d > 0 {
		srv.ConnState = func(c net.Conn, st http.ConnState) {
			if lc := limitConnOf(c); lc != nil {
				lc.state(st, d)
			}
		}
	}
	return srv
}

// authenticated notes that the connection of a request authenticated (a
// valid token): it leaves its client address's count of connections not
// yet authenticated, and the short timeout for those.
func authenticated(ctx context.Context) {
	if lc, ok := ctx.Value(limitConnKey{}).(*limitConn); ok {
		lc.authenticated()
	}
}

type limitConnKey struct{}

// limitConnOf finds a ConnLimit's connection under c (a TLS one wraps it).
func limitConnOf(c net.Conn) *limitConn {
	for {
		switch cc := c.(type) {
		case *limitConn:
			return cc
		case interface{ NetConn() net.Conn }:
			c = cc.NetConn()
		default:
			return nil
		}
	}
}

// ConnLimit caps the connections open at once across the listeners it
// wraps, and those not yet authenticated from one client address (TCP
// listeners: the peer's IP address). A connection over a cap is answered
// 503 (on a plain listener) and closed at once, so it holds no descriptor
// for longer than that.
type ConnLimit struct {
	slots chan struct{}
	// refusing bounds the connections being answered 503 at once; past
	// it, excess connections are closed without an answer.
	refusing  chan struct{}
	perClient int
	mu        sync.Mutex
	clients   map[netip.Addr]int // connections not yet authenticated, by client address
}

// DefaultMaxConnsPerClient is the controller's cap on the connections not
// yet authenticated from one client address: more than a host's agent,
// data node and command-line clients open at once.
const DefaultMaxConnsPerClient = 64

// NewConnLimit returns a cap of n connections, and of perClient not yet
// authenticated from one client address (0: no such cap).
func NewConnLimit(n, perClient int) *ConnLimit {
	return &ConnLimit{slots: make(chan struct{}, n), refusing: make(chan struct{}, 16),
		perClient: perClient, clients: map[netip.Addr]int{}}
}

// Wrap returns ln with the cap applied. plain says the connections speak
// HTTP directly (not TLS), so an excess one can be told why it is closed.
func (l *ConnLimit) Wrap(ln net.Listener, plain bool) net.Listener {
	return &limitListener{Listener: ln, l: l, plain: plain}
}

type limitListener struct {
	net.Listener
	l     *ConnLimit
	plain bool
}

// clientOf is the address a connection counts against (invalid: none, as
// a unix socket's peers).
func clientOf(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// takeClient counts a connection from client; false when client holds
// the most connections not yet authenticated already.
func (l *ConnLimit) takeClient(client netip.Addr) bool {
	if l.perClient <= 0 || !client.IsValid() {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients[client] >= l.perClient {
		return false
	}
	l.clients[client]++
	return true
}

func (l *ConnLimit) releaseClient(client netip.Addr) {
	if l.perClient <= 0 || !client.IsValid() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients[client]--; l.clients[client] <= 0 {
		delete(l.clients, client)
	}
}

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientOf(c)
		var msg string
		select {
		case ll.l.slots <- struct{}{}:
			if ll.l.takeClient(client) {
				return &limitConn{Conn: c, l: ll.l, client: client}, nil
			}
			<-ll.l.slots
			msg = fmt.Sprintf("the controller has %d connections open from %s that have not authenticated, the most one client address may hold (--max-conns-per-client): close some, or try again shortly", ll.l.perClient, client)
		default:
			msg = fmt.Sprintf("the controller has %d connections open, the most it takes (--max-conns): try again shortly", cap(ll.l.slots))
		}
		if !ll.plain {
			c.Close()
			continue
		}
		select {
		case ll.l.refusing <- struct{}{}:
			go func() {
				defer func() { <-ll.l.refusing }()
				refuseConn(c, msg)
			}()
		default:
			c.Close()
		}
	}
}

// refuseConn answers a connection over the cap with a 503 and closes it. It
// reads the request's header first (a client takes no answer before it
// has asked), and what follows before closing, so that the close does not
// reset the answer away; a client that sends nothing within 2 s is closed.
func refuseConn(c net.Conn, msg string) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	br := bufio.NewReaderSize(c, 4096)
	for lines := 0; ; lines++ {
		line, err := br.ReadSlice('\n')
		if err != nil || lines > 100 {
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			break
		}
	}
	b, _ := json.Marshal(apiv1.ErrorBody{Error: apiv1.ErrorDetail{Code: apiv1.CodeUnavailable, Message: msg}})
	body := string(b) + "\n"
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s", len(body), body)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(br, 1<<20))
}

type limitConn struct {
	net.Conn
	l      *ConnLimit
	client netip.Addr
	once   sync.Once
	mu     sync.Mutex
	authed bool        // a request of it carried a valid token
	left   bool        // off its client address's count
	timer  *time.Timer // closes it while it waits unauthenticated
}

// state follows the server's view of the connection: while it waits for
// a request (new, or idle after an answer) and has not authenticated, it
// is closed after d.
func (c *limitConn) state(st http.ConnState, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.authed || (st != http.StateNew && st != http.StateIdle) {
		return
	}
	c.timer = time.AfterFunc(d, func() { c.Close() })
}

func (c *limitConn) authenticated() {
	c.mu.Lock()
	c.authed = true
	c.mu.Unlock()
	c.leaveClient()
}

// leaveClient takes the connection off its client address's count, once.
func (c *limitConn) leaveClient() {
	c.mu.Lock()
	left := c.left
	c.left = true
	c.mu.Unlock()
	if !left {
		c.l.releaseClient(c.client)
	}
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		<-c.l.slots
		c.mu.Lock()
		if c.timer != nil {
			c.timer.Stop()
		}
		c.mu.Unlock()
		c.leaveClient()
	})
	return err
}

// uiCSP is the web UI's Content-Security-Policy: its scripts, styles and
// images come from the controller alone (no inline script or style, no
// eval), it talks only to the controller, and no other site may frame it.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// uiHandler serves the web UI's files with the UI's security headers, and
// answers 404 for a directory (other than the root, which is index.html)
// instead of listing it.
func uiHandler(ui fs.FS) http.Handler {
	files := http.FileServerFS(ui)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", uiCSP)
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		if name := strings.Trim(path.Clean("/"+r.URL.Path), "/"); name != "" {
			if fi, err := fs.Stat(ui, name); err == nil && fi.IsDir() {
				http.NotFound(w, r)
				return
			}
		}
		files.ServeHTTP(w, r)
	})
}
