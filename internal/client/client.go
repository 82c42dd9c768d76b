// Package client is a Go client of the controller's REST API (docs/controller.md):
// one method per route, the request and response bodies of package apiv1, and
// errors decoded into *APIError. It reaches the controller over TCP
// (http://HOST:PORT), TLS (https://HOST:PORT, optionally against a private
// CA) or a unix socket (unix:PATH), which is how processes inside a
// testbed's network namespaces reach it.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/retry"
)

// DefaultTimeout bounds every request but the event stream.
const DefaultTimeout = 30 * time.Second

// maxBody bounds what is read of a response: the API's bodies are small,
// and a list of many reservations with their histories stays well below.
const maxBody = 64 << 20

// Client talks to a controller, or to the first that answers as the
// leader of several on one database (see New). It is safe for concurrent
// use.
type Client struct {
	url   string // what the user gave, for messages
	eps   []endpoint
	cur   *atomic.Int32 // index into eps of the controller last found leading
	token string
	agent string
}

// endpoint is one controller URL.
type endpoint struct {
	url    string       // as given
	base   string       // scheme://host[/prefix], without a trailing slash
	hc     *http.Client // with a timeout
	stream *http.Client // without one, for the event stream
}

type options struct {
	caFile  string
	timeout time.Duration
	agent   string
	tls     *tls.Config
}

// Option configures New.
type Option func(*options)

// WithCAFile verifies an https controller against the PEM certificates in
// file instead of the system's roots.
func WithCAFile(file string) Option { return func(o *options) { o.caFile = file } }

// WithTLSConfig uses cfg for https controllers (tests; WithCAFile is the
// usual way).
func WithTLSConfig(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithTimeout bounds each request (not the event stream); zero means no
// bound. The default is DefaultTimeout.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(s string) Option { return func(o *options) { o.agent = s } }

// New returns a client of the controller at controllerURL: http://HOST:PORT,
// https://HOST:PORT or unix:PATH. token, when not empty, is sent as a
// bearer token with every request.
//
// controllerURL may name several controllers, comma-separated: a leader
// and its standbys on one database. Each request goes to the one last
// found leading, and moves on to the next when that one cannot be reached
// or answers 503 "standby". A request is sent again to the next only when
// that cannot do it twice: when the connection could not be made, on a
// standby's answer (it did nothing), for a GET, or for a create with an
// idempotency key (the store answers a known key with what it booked); a
// change whose connection broke returns the error, and the next request
// starts on the next controller.
func New(controllerURL, token string, opts ...Option) (*Client, error) {
	o := options{timeout: DefaultTimeout, agent: "lightpath-client"}
	for _, f := range opts {
		f(&o)
	}
	raw := strings.TrimSpace(controllerURL)
	c := &Client{url: raw, cur: new(atomic.Int32), token: token, agent: o.agent}
	for part := range strings.SplitSeq(raw, ",") {
		part = strings.TrimSpace(part)
		if part == "" && strings.Contains(raw, ",") {
			return nil, fmt.Errorf("controller URLs %q: an empty one between commas", controllerURL)
		}
		ep, err := newEndpoint(part, o)
		if err != nil {
			return nil, err
		}
		c.eps = append(c.eps, ep)
	}
	return c, nil
}

func newEndpoint(raw string, o options) (endpoint, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the controller is ours to reach directly; HTTP_PROXY would send tokens elsewhere
	var base string
	switch {
	case strings.HasPrefix(raw, "unix:"):
		path := strings.TrimPrefix(strings.TrimPrefix(raw, "unix:"), "//")
		if path == "" {
			return endpoint{}, fmt.Errorf("controller URL %q: want unix:PATH, the path of the controller's socket", raw)
		}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		tr.DialTLSContext = nil
		base = "http://unix"
	default:
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return endpoint{}, fmt.Errorf("controller URL %q: want http://HOST:PORT, https://HOST:PORT or unix:PATH", raw)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return endpoint{}, fmt.Errorf("controller URL %q: want no user, query or fragment", raw)
		}
		if u.Scheme == "https" {
			cfg := o.tls
			if cfg == nil {
				cfg = &tls.Config{MinVersion: tls.VersionTLS12}
			} else {
				cfg = cfg.Clone()
			}
			if o.caFile != "" {
				pem, err := os.ReadFile(o.caFile)
				if err != nil {
					return endpoint{}, fmt.Errorf("read controller CA: %w", err)
				}
				pool := x509.NewCertPool()
				if !pool.AppendCertsFromPEM(pem) {
					return endpoint{}, fmt.Errorf("read controller CA: %s holds no PEM certificate", o.caFile)
				}
				cfg.RootCAs = pool
			}
			tr.TLSClientConfig = cfg
		} else if o.caFile != "" {
			return endpoint{}, fmt.Errorf("controller URL %q: a CA file is for https:// controllers", raw)
		}
		base = u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")
	}
	return endpoint{url: raw, base: base,
		hc:     &http.Client{Transport: tr, Timeout: o.timeout, CheckRedirect: noRedirect},
		stream: &http.Client{Transport: tr, CheckRedirect: noRedirect},
	}, nil
}

// noRedirect keeps the bearer token from following a redirect elsewhere:
// the API never redirects.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// URL is the controller's address as given to New (every one of them,
// comma-separated, when it was given several).
func (c *Client) URL() string { return c.url }

// HasToken reports whether the client sends a token.
func (c *Client) HasToken() bool { return c.token != "" }

// WithToken returns a client of the same controller that sends token
// instead (sharing the connections, and which controller leads).
func (c *Client) WithToken(token string) *Client {
	n := *c
	n.token = token
	return &n
}

// APIError is an error the controller answered with: the HTTP status and
// the body's {"error":{...}}.
type APIError struct {
	Status int
	Detail apiv1.ErrorDetail
}

// Error is the controller's message; a capacity refusal adds one line per
// alternative it offered.
func (e *APIError) Error() string {
	msg := e.Detail.Message
	if msg == "" {
		msg = fmt.Sprintf("the controller answered %d %s", e.Status, http.StatusText(e.Status))
	}
	for _, a := range e.Alternatives() {
		msg += "\n" + a
	}
	if len(e.Detail.Stranded) > 0 {
		msg += "\nstranded: " + strings.Join(e.Detail.Stranded, ", ")
	}
	return msg
}

// Alternatives describes the alternatives a capacity refusal offered, one
// sentence each, such as "earliest at that bandwidth: 2026-05-01T14:00:00Z
// → 2026-05-01T16:00:00Z via l1,wan,l2".
func (e *APIError) Alternatives() []string {
	if e.Detail.Alternatives == nil {
		return nil
	}
	var out []string
	if s := e.Detail.Alternatives.Earliest; s != nil {
		out = append(out, "earliest at that bandwidth: "+describeWindow(*s))
	}
	if s := e.Detail.Alternatives.Widest; s != nil {
		d := "widest in that slot: " + formatBps(s.Bandwidth)
		if len(s.Path) > 0 {
			d += " via " + PathString(s.Path)
		}
		out = append(out, d)
	}
	return out
}

func describeWindow(s apiv1.Slot) string {
	d := s.Start.Format(time.RFC3339) + " → " + s.End.Format(time.RFC3339)
	if len(s.Path) > 0 {
		d += " via " + PathString(s.Path)
	}
	return d
}

// formatBps prints a rate as the CLI does; the client keeps its own tiny
// copy so that it depends on package api alone.
func formatBps(bps uint64) string {
	units := []string{"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s", "Pbit/s", "Ebit/s"}
	v, i := float64(bps), 0
	for i < len(units)-1 && v >= 999.5 {
		v /= 1000
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%d bit/s", bps)
	case v < 9.995:
		return fmt.Sprintf("%.2f %s", v, units[i])
	case v < 99.95:
		return fmt.Sprintf("%.1f %s", v, units[i])
	}
	return fmt.Sprintf("%.0f %s", v, units[i])
}

// PathString writes a path as the link names joined by commas, the form
// --path takes.
func PathString(p []reserve.PathHop) string {
	names := make([]string, len(p))
	for i, h := range p {
		names[i] = h.Link
	}
	return strings.Join(names, ",")
}

// Code returns the API error code of err ("capacity", "not_found", ...),
// or "" when err is not an *APIError.
func Code(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Detail.Code
	}
	return ""
}

// UnreachableError is a request that got no answer from the controller:
// it could not connect, the connection broke, or the request timed out.
// The request may or may not have been carried out.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("controller %s: %v", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// RetryClass makes an unreachable controller transient for retry: the
// same request may get an answer later, unless the caller gave up.
func (e *UnreachableError) RetryClass() retry.Class {
	if errors.Is(e.Err, context.Canceled) {
		return retry.Unknown
	}
	return retry.TransientClass
}

// RetryClass makes a controller that is shutting down or behind a failing
// proxy (502, 503, 504) transient for retry; other answers do not say.
// Only idempotent requests, or creates with an idempotency key, should be
// retried (retry.IsTransient).
func (e *APIError) RetryClass() retry.Class {
	switch e.Status {
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return retry.TransientClass
	}
	return retry.Unknown
}

// statusCodes are the error codes of the statuses the API answers with,
// for an answer whose body did not say (a proxy's answer, or a server that
// died mid-way).
var statusCodes = map[int]string{
	http.StatusBadRequest:            apiv1.CodeInvalid,
	http.StatusUnauthorized:          apiv1.CodeUnauthorized,
	http.StatusForbidden:             apiv1.CodeForbidden,
	http.StatusNotFound:              apiv1.CodeNotFound,
	http.StatusMethodNotAllowed:      apiv1.CodeMethodNotAllowed,
	http.StatusConflict:              apiv1.CodeConflict,
	http.StatusRequestEntityTooLarge: apiv1.CodeTooLarge,
	http.StatusUnsupportedMediaType:  apiv1.CodeUnsupportedMedia,
	http.StatusServiceUnavailable:    apiv1.CodeUnavailable,
}

// codeForStatus names the error code of a status the body did not explain.
func codeForStatus(status int) string {
	if code, ok := statusCodes[status]; ok {
		return code
	}
	return apiv1.CodeInternal
}

// newRequest builds a request for an API path ("/reservations") with an
// optional JSON body, to the controller at base.
func (c *Client) newRequest(ctx context.Context, base, method, path string, query url.Values, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	u := base + "/api/v1" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if k := idempotencyKey(body); k != "" {
		// Marks the request as safe to send again: net/http then retries
		// it on a fresh connection when a kept-alive one turns out dead,
		// and roundTrip on the next controller.
		req.Header.Set("Idempotency-Key", k)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.agent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// unreachable wraps a transport error, keeping its cause readable: the
// *url.Error's "Post \"http://...\":" prefix repeats what the message says.
func unreachable(ctx context.Context, at string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		err = fmt.Errorf("%w (is a controller running there?)", err)
	}
	return &UnreachableError{URL: at, Err: err}
}

// idempotencyKey is the key a create carries, if any.
func idempotencyKey(body any) string {
	switch b := body.(type) {
	case apiv1.ReservationRequest:
		return b.IdempotencyKey
	case *apiv1.ReservationRequest:
		return b.IdempotencyKey
	}
	return ""
}

// notSent reports whether a transport error happened before the request
// left: the connection could not be made.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// roundTrip sends the request mk builds for a controller's base URL to
// the controller last found leading, moving on to the next as New says,
// and returns the answer with the URL of the controller that gave it.
// stream selects the client without a timeout.
func (c *Client) roundTrip(ctx context.Context, method string, stream bool, mk func(base string) (*http.Request, error)) (*http.Response, string, error) {
	n := len(c.eps)
	start := int(c.cur.Load())
	var last error
	for i := range n {
		k := (start + i) % n
		ep := &c.eps[k]
		req, err := mk(ep.base)
		if err != nil {
			return nil, ep.url, err
		}
		hc := ep.hc
		if stream {
			hc = ep.stream
		}
		resp, err := hc.Do(req)
		if err != nil {
			uerr := unreachable(ctx, ep.url, err)
			if n == 1 || ctx.Err() != nil {
				return nil, ep.url, uerr
			}
			// Whatever happens to this request, the next starts on the
			// next controller.
			c.cur.CompareAndSwap(int32(k), int32((k+1)%n))
			if !notSent(err) && method != http.MethodGet && method != http.MethodHead && req.Header.Get("Idempotency-Key") == "" {
				return nil, ep.url, uerr
			}
			last = uerr
			continue
		}
		if resp.StatusCode == http.StatusServiceUnavailable && n > 1 {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
			resp.Body.Close()
			if ae := decodeError(resp.StatusCode, data); ae.Detail.Code == apiv1.CodeStandby {
				c.cur.CompareAndSwap(int32(k), int32((k+1)%n))
				last = ae
				continue
			}
			resp.Body = io.NopCloser(bytes.NewReader(data))
		}
		c.cur.Store(int32(k))
		return resp, ep.url, nil
	}
	return nil, c.url, last
}

// do sends a request and decodes a 2xx answer's JSON body into out (when
// out is not nil and the body is not empty); any other status becomes an
// *APIError.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, at, err := c.roundTrip(ctx, method, false, func(base string) (*http.Request, error) {
		return c.newRequest(ctx, base, method, path, query, body)
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return unreachable(ctx, at, fmt.Errorf("read the answer to %s %s: %w", method, path, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp.StatusCode, data)
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode the answer to %s %s: %w", method, path, err)
	}
	return nil
}

// decodeError turns an error answer into an *APIError, whatever its body.
func decodeError(status int, data []byte) *APIError {
	var eb apiv1.ErrorBody
	if err := json.Unmarshal(data, &eb); err == nil && eb.Error.Message != "" {
		if eb.Error.Code == "" {
			eb.Error.Code = codeForStatus(status)
		}
		return &APIError{Status: status, Detail: eb.Error}
	}
	msg := fmt.Sprintf("the controller answered %d %s", status, http.StatusText(status))
	if s := strings.TrimSpace(string(data)); s != "" {
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		msg += ": " + strings.Join(strings.Fields(s), " ")
	}
	return &APIError{Status: status, Detail: apiv1.ErrorDetail{Code: codeForStatus(status), Message: msg}}
}

// call sends a request and returns its answer decoded as a T: the one
// shape of every route that answers with a body.
func call[T any](ctx context.Context, c *Client, method, path string, query url.Values, body any) (T, error) {
	var v T
	err := c.do(ctx, method, path, query, body, &v)
	return v, err
}

func get[T any](ctx context.Context, c *Client, path string, query url.Values) (T, error) {
	return call[T](ctx, c, http.MethodGet, path, query, nil)
}

// post sends body as JSON, an empty object when it is nil.
func post[T any](ctx context.Context, c *Client, path string, body any) (T, error) {
	if body == nil {
		body = struct{}{}
	}
	return call[T](ctx, c, http.MethodPost, path, nil, body)
}

func escape(s string) string { return url.PathEscape(s) }

// setTime adds a time to a query when it is not zero.
func setTime(q url.Values, key string, t time.Time) {
	if !t.IsZero() {
		q.Set(key, t.Format(time.RFC3339Nano))
	}
}

func setString(q url.Values, key, v string) {
	if v != "" {
		q.Set(key, v)
	}
}
