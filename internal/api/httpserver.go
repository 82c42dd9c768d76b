package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
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
	MaxStreams        int           // open event/live streams per identity (0: DefaultMaxStreams)
}

// DefaultHTTPOptions are the controller's bounds: a 1 MiB body arrives in
// a minute even at 150 kbit/s.
func DefaultHTTPOptions() HTTPOptions {
	return HTTPOptions{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, MaxStreams: DefaultMaxStreams}
}

// HTTPServer returns an http.Server that serves s within o's bounds; ctx
// is every request's base context.
func (s *Server) HTTPServer(ctx context.Context, o HTTPOptions) *http.Server {
	s.writeTimeout = o.WriteTimeout
	s.slots.mu.Lock()
	s.slots.max = o.MaxStreams
	s.slots.mu.Unlock()
	return &http.Server{Handler: s, ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
		WriteTimeout: o.WriteTimeout, IdleTimeout: o.IdleTimeout,
		BaseContext: func(net.Listener) context.Context { return ctx }}
}

// ConnLimit caps the connections open at once across the listeners it
// wraps. A connection over the cap is answered 503 (on a plain listener)
// and closed at once, so it holds no descriptor for longer than that.
type ConnLimit struct {
	slots chan struct{}
	// refusing bounds the connections being answered 503 at once; past
	// it, excess connections are closed without an answer.
	refusing chan struct{}
}

// NewConnLimit returns a cap of n connections.
func NewConnLimit(n int) *ConnLimit {
	return &ConnLimit{slots: make(chan struct{}, n), refusing: make(chan struct{}, 16)}
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

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case ll.l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-ll.l.slots }}, nil
		default:
		}
		if !ll.plain {
			c.Close()
			continue
		}
		select {
		case ll.l.refusing <- struct{}{}:
			go func() {
				defer func() { <-ll.l.refusing }()
				refuse(c, cap(ll.l.slots))
			}()
		default:
			c.Close()
		}
	}
}

// refuse answers a connection over the cap with a 503 and closes it,
// reading what the client sent first so that the close does not reset
// the answer away.
func refuse(c net.Conn, max int) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	body := fmt.Sprintf(`{"error":{"code":%q,"message":"the controller has %d connections open, the most it takes (--max-conns): try again shortly"}}`+"\n", CodeUnavailable, max)
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s", len(body), body)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
