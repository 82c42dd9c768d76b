// Package api serves the controller over HTTP: the REST API under
// /api/v1 (described by the OpenAPI document it serves), token
// authentication, the server-sent event stream, and the web UI's files.
// It decodes, authorises and encodes; the controller decides.
package api

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/monitor/alert"
	"github.com/lightpath/lightpath/internal/monitor/derive"
	"github.com/lightpath/lightpath/internal/monitor/repo"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer/registry"
)

// MaxBodyBytes bounds a request body: the largest legitimate one, a
// topology file, is far smaller.
const MaxBodyBytes = 1 << 20

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the API's OpenAPI document.
func OpenAPI() []byte { return bytes.Clone(openAPI) }

// Server is the HTTP face of a controller.
type Server struct {
	c       *controller.Controller
	log     *slog.Logger
	mux     *http.ServeMux
	ui      fs.FS
	signin  signIns // one-time sign-in codes (signin.go)
	version string
	metrics *metrics
	repo    *repo.Repo
	derive  *derive.Deriver

	transfers *registry.Registry
	svc       *service.Service // the transfer service (jobs.go)
	alerts    *alert.Evaluator
	history   *alert.History

	metricsAuth bool // /metrics wants a token (RequireMetricsToken)

	// slots bounds the open streams per identity; writeTimeout is the
	// server's, which each stream write extends (httpserver.go).
	slots        streamSlots
	writeTimeout time.Duration
}

// Route is one route of the API: what the OpenAPI document must describe.
type Route struct {
	Method, Path string
	h            handler
	open         bool // no token needed
}

type handler func(w http.ResponseWriter, r *http.Request, a controller.Actor) error

// NewServer returns a handler serving c. ui, when not nil, is served at /.
func NewServer(c *controller.Controller, ui fs.FS, version string, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{c: c, log: log, mux: http.NewServeMux(), ui: ui, version: version, metrics: newMetrics(c), derive: derive.New()}
	for _, rt := range s.Routes() {
		s.mux.HandleFunc(rt.Method+" "+rt.Path, s.wrap(rt))
	}
	// Prometheus scrapes without a token unless RequireMetricsToken: the
	// series are counts, no names or IDs, no connections or transfers.
	s.mux.Handle("GET /metrics", s.metricsGate(s.metrics.handler()))
	if ui != nil {
		s.mux.Handle("GET /", uiHandler(ui))
	}
	return s
}

// noRoute answers a request no route takes, in the API's error shape:
// 405 with Allow when the path exists under other methods, else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pat := s.mux.Handler(probe); pat != "" && strings.HasPrefix(pat, m+" /api/") {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, &httpError{status: http.StatusMethodNotAllowed, code: apiv1.CodeMethodNotAllowed, msg: fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(allow, " or "))})
		return
	}
	writeError(w, &httpError{status: http.StatusNotFound, code: apiv1.CodeNotFound, msg: fmt.Sprintf("no route %s %s (see /api/v1/openapi.json)", r.Method, r.URL.Path)})
}

// Routes lists every route of the API.
func (s *Server) Routes() []Route {
	return []Route{
		{Method: "GET", Path: "/api/v1/health", h: s.health, open: true},
		{Method: "GET", Path: "/api/v1/openapi.json", h: s.openapi, open: true},
		{Method: "GET", Path: "/api/v1/whoami", h: s.whoami},
		{Method: "GET", Path: "/api/v1/signin", h: s.signInHint, open: true},
		{Method: "POST", Path: "/api/v1/signin", h: s.signInByCode, open: true},
		{Method: "GET", Path: "/api/v1/topology", h: s.getTopology},
		{Method: "PUT", Path: "/api/v1/topology", h: s.putTopology},
		{Method: "GET", Path: "/api/v1/timeline", h: s.timeline},
		{Method: "POST", Path: "/api/v1/find", h: s.find},
		{Method: "POST", Path: "/api/v1/plan", h: s.plan},
		{Method: "GET", Path: "/api/v1/reservations", h: s.listReservations},
		{Method: "POST", Path: "/api/v1/reservations", h: s.createReservation},
		{Method: "GET", Path: "/api/v1/reservations/{id}", h: s.getReservation},
		{Method: "PATCH", Path: "/api/v1/reservations/{id}", h: s.modifyReservation},
		{Method: "POST", Path: "/api/v1/reservations/{id}/commit", h: s.commitReservation},
		{Method: "POST", Path: "/api/v1/reservations/{id}/cancel", h: s.cancelReservation},
		{Method: "GET", Path: "/api/v1/exclusives", h: s.listExclusives},
		{Method: "POST", Path: "/api/v1/exclusives", h: s.createExclusive},
		{Method: "POST", Path: "/api/v1/exclusives/{id}/cancel", h: s.cancelExclusive},
		{Method: "GET", Path: "/api/v1/events", h: s.eventStream},
		{Method: "GET", Path: "/api/v1/users", h: s.listUsers},
		{Method: "POST", Path: "/api/v1/users", h: s.addUser},
		{Method: "GET", Path: "/api/v1/users/{name}/tokens", h: s.listTokens},
		{Method: "POST", Path: "/api/v1/users/{name}/tokens", h: s.createToken},
		{Method: "DELETE", Path: "/api/v1/tokens/{id}", h: s.revokeToken},
		{Method: "DELETE", Path: "/api/v1/users/{name}/tokens", h: s.revokeUserTokens},
		{Method: "GET", Path: "/api/v1/policy", h: s.getPolicy},
		{Method: "PUT", Path: "/api/v1/policy", h: s.putPolicy},
		{Method: "GET", Path: "/api/v1/audit", h: s.audit},
		{Method: "GET", Path: "/api/v1/agents", h: s.listAgents},
		{Method: "POST", Path: "/api/v1/agents/{node}/heartbeat", h: s.heartbeat},
		{Method: "POST", Path: "/api/v1/agents/{node}/links/{link}", h: s.linkReport},
		{Method: "POST", Path: "/api/v1/reservations/{id}/nodes/{node}", h: s.nodeReport},
		{Method: "POST", Path: "/api/v1/metrics/push", h: s.pushMetrics},
		{Method: "GET", Path: "/api/v1/metrics/query", h: s.queryMetrics},
		{Method: "GET", Path: "/api/v1/metrics/names", h: s.metricNames},
		{Method: "GET", Path: "/api/v1/metrics/live", h: s.liveStream},
		{Method: "GET", Path: "/api/v1/transfers", h: s.listTransfers},
		{Method: "POST", Path: "/api/v1/transfers", h: s.createTransfer},
		{Method: "GET", Path: "/api/v1/transfers/{id}", h: s.getTransfer},
		{Method: "POST", Path: "/api/v1/transfers/{id}/progress", h: s.reportTransfer},
		{Method: "GET", Path: "/api/v1/alerts", h: s.getAlerts},
		{Method: "GET", Path: "/api/v1/jobs", h: s.listJobs},
		{Method: "POST", Path: "/api/v1/jobs", h: s.submitJob},
		{Method: "GET", Path: "/api/v1/jobs/{id}", h: s.getJob},
		{Method: "POST", Path: "/api/v1/jobs/{id}/cancel", h: s.cancelJob},
		{Method: "GET", Path: "/api/v1/endpoints", h: s.listEndpoints},
		{Method: "POST", Path: "/api/v1/endpoints", h: s.addEndpoint},
		{Method: "DELETE", Path: "/api/v1/endpoints/{name}", h: s.removeEndpoint},
		{Method: "DELETE", Path: "/api/v1/endpoints/{name}/nodes/{node}", h: s.removeEndpointNode},
		{Method: "POST", Path: "/api/v1/endpoints/{name}/allow", h: s.allowEndpoint},
		{Method: "POST", Path: "/api/v1/datanodes/{node}/heartbeat", h: s.dataNodeHeartbeat},
		{Method: "POST", Path: "/api/v1/datanodes/{node}/claim", h: s.claim},
		{Method: "POST", Path: "/api/v1/datanodes/{node}/grants/check", h: s.grantCheck},
		{Method: "POST", Path: "/api/v1/tasks/{id}/listing", h: s.taskListing},
		{Method: "POST", Path: "/api/v1/tasks/{id}/report", h: s.taskReport},
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if strings.HasPrefix(r.URL.Path, "/api/") {
		if _, pat := s.mux.Handler(r); !strings.Contains(pat, " /api/") {
			s.noRoute(w, r)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) wrap(rt Route) http.HandlerFunc {
	return func(hw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &statusWriter{ResponseWriter: hw}
		defer func() { s.metrics.observe(rt, r.Method, w.code, time.Since(start)) }()
		var a controller.Actor
		err := func() error {
			if !rt.open {
				var err error
				if a, err = s.c.Authenticate(r.Context(), requestToken(r, rt.Path)); err != nil {
					return err
				}
				authenticated(r.Context())
			}
			return rt.h(w, r, a)
		}()
		if err != nil {
			writeError(w, err)
			status := statusOf(err)
			lvl := slog.LevelDebug
			if status >= 500 {
				lvl = slog.LevelError
			}
			s.log.Log(r.Context(), lvl, "request failed", "method", r.Method, "path", r.URL.Path, "user", a.Name, "status", status, "err", err, "seconds", time.Since(start).Seconds())
		}
	}
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// httpError is an error the API itself raises (bad JSON, wrong media type).
type httpError struct {
	status int
	code   string
	msg    string
	field  string
}

func (e *httpError) Error() string { return e.msg }

func invalid(field, format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, code: apiv1.CodeInvalid, msg: fmt.Sprintf(format, args...), field: field}
}

func statusOf(err error) int {
	var he *httpError
	var ref *controller.Refusal
	switch {
	case errors.As(err, &he):
		return he.status
	case errors.Is(err, controller.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, store.ErrDeposed):
		// Another controller took the database over: this one is
		// stepping down, and the client should ask the new leader.
		return http.StatusServiceUnavailable
	case errors.Is(err, controller.ErrLimit):
		return http.StatusTooManyRequests
	case errors.Is(err, service.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.As(err, &ref), errors.Is(err, reserve.ErrCapacity), errors.Is(err, reserve.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, reserve.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, reserve.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, reserve.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, context.Canceled):
		return 499
	}
	return http.StatusInternalServerError
}

// writeError answers with the error's status and {"error":{...}}.
func writeError(w http.ResponseWriter, err error) {
	status := statusOf(err)
	d := apiv1.ErrorDetail{Message: err.Error()}
	var he *httpError
	var ref *controller.Refusal
	var re *reserve.RequestError
	var se *controller.StrandError
	var tl *service.TooLargeError
	switch {
	case errors.As(err, &he):
		d.Code, d.Field = he.code, he.field
	case errors.As(err, &tl):
		d.Code, d.Field = apiv1.CodeTooLarge, tl.Field
	case errors.As(err, &ref):
		d.Code = apiv1.CodeCapacity
		d.Alternatives = alternatives(ref.Alternatives)
	case errors.Is(err, reserve.ErrCapacity):
		d.Code = apiv1.CodeCapacity
		d.Deadline = jobRefusal(err)
	case errors.Is(err, store.ErrDeposed):
		d.Code = apiv1.CodeStandby
		w.Header().Set("Retry-After", strconv.Itoa(StandbyRetryAfter))
	case status == http.StatusUnauthorized:
		d.Code = apiv1.CodeUnauthorized
	case status == http.StatusTooManyRequests:
		d.Code = apiv1.CodeLimit
	case status == http.StatusConflict:
		d.Code = apiv1.CodeConflict
		if errors.As(err, &se) {
			d.Stranded = se.Stranded
		}
	case status == http.StatusBadRequest:
		d.Code = apiv1.CodeInvalid
		if errors.As(err, &re) {
			d.Field = re.Field
		}
	case status == http.StatusForbidden:
		d.Code = apiv1.CodeForbidden
	case status == http.StatusNotFound:
		d.Code = apiv1.CodeNotFound
	default:
		d.Code = apiv1.CodeInternal
	}
	writeJSON(w, status, apiv1.ErrorBody{Error: d})
}

func alternatives(a reserve.Alternatives) *apiv1.Alternatives {
	if a.Earliest == nil && a.Widest == nil {
		return nil
	}
	out := &apiv1.Alternatives{}
	if a.Earliest != nil {
		s := slot(*a.Earliest)
		out.Earliest = &s
	}
	if a.Widest != nil {
		s := slot(*a.Widest)
		out.Widest = &s
	}
	return out
}

func slot(r reserve.Result) apiv1.Slot {
	s := apiv1.Slot{Algorithm: r.Algorithm, Bandwidth: r.Bandwidth, Start: r.Start.UTC(), End: r.End.UTC()}
	for _, h := range r.Path {
		s.Path = append(s.Path, reserve.PathHop(h))
	}
	for _, w := range r.Windows {
		s.Windows = append(s.Windows, apiv1.Window{First: w.First.UTC(), Last: w.Last.UTC()})
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"encode response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads a JSON body strictly: application/json only, at most
// MaxBodyBytes, no unknown fields, exactly one value, types checked, no
// string over MaxTextBytes. Each failure says which field and what was
// wrong.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if err := decodeLimit(w, r, v, MaxBodyBytes); err != nil {
		return err
	}
	return checkText(v)
}

// decodeLimit is decode with another bound on the body.
func decodeLimit(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return &httpError{status: http.StatusUnsupportedMediaType, code: apiv1.CodeUnsupportedMedia, msg: fmt.Sprintf("send the body as application/json, not %q", ct)}
		}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		var tpe *time.ParseError
		switch {
		case errors.As(err, &mbe):
			return &httpError{status: http.StatusRequestEntityTooLarge, code: apiv1.CodeTooLarge, msg: fmt.Sprintf("the body is over %d bytes", limit)}
		case errors.Is(err, io.EOF):
			return invalid("", "the body is empty: send a JSON object")
		case errors.As(err, &se):
			return invalid("", "malformed JSON at byte %d: %v", se.Offset, se)
		case errors.As(err, &te):
			return invalid(te.Field, "field %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
		case errors.As(err, &tpe):
			return invalid("", "a time is not RFC 3339 (like 2026-11-22T15:04:05Z): %q", tpe.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return invalid(f, "unknown field %q", f)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return invalid("", "malformed JSON: the body ends early")
		}
		return invalid("", "malformed body: %v", err)
	}
	if dec.More() {
		return invalid("", "the body holds more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &httpError{status: http.StatusRequestEntityTooLarge, code: apiv1.CodeTooLarge, msg: fmt.Sprintf("the body is over %d bytes", limit)}
		}
		return invalid("", "the body holds more than one JSON value")
	}
	return nil
}

// parseDuration parses an optional Go duration field.
func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, invalid(field, "%s %q: want a positive duration like 90m or 2h", field, s)
	}
	return d, nil
}

func parseTimeParam(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalid(name, "query parameter %s=%q: want an RFC 3339 time", name, v)
	}
	return t, nil
}
