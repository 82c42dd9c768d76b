package api

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
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
	return &http.Server{Handler: h, ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
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
				refuseConn(c, cap(ll.l.slots))
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
func refuseConn(c net.Conn, max int) {
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
	body := fmt.Sprintf(`{"error":{"code":%q,"message":"the controller has %d connections open, the most it takes (--max-conns): try again shortly"}}`+"\n", apiv1.CodeUnavailable, max)
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s", len(body), body)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(br, 1<<20))
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
