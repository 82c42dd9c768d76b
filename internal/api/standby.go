package api

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
)

// Gate is the HTTP face of a controller that starts as a standby: until
// Lead hands it the leader's Server, GET /api/v1/health answers 200 with
// "role": "standby" and every other request 503 with code "standby" and a
// Retry-After, so clients given several controller URLs move on to the
// leader. Afterwards every request goes to the Server. The standby has
// not opened its database (it must not load state another controller is
// changing), so its health carries no schema version or live count.
type Gate struct {
	version, store string
	opts           HTTPOptions
	leader         atomic.Pointer[Server]
}

// StandbyRetryAfter is the Retry-After, in seconds, of a standby's 503.
const StandbyRetryAfter = 2

// NewGate returns a Gate that answers as a standby; version is the
// build's, storeKind the database's kind (sqlite or postgres).
func NewGate(version, storeKind string) *Gate {
	return &Gate{version: version, store: storeKind, opts: DefaultHTTPOptions()}
}

// HTTPServer returns an http.Server that serves g within o's bounds (the
// leader's Server gets them too); ctx is every request's base context.
func (g *Gate) HTTPServer(ctx context.Context, o HTTPOptions) *http.Server {
	g.opts = o
	return httpServer(ctx, o, g)
}

// Lead makes s answer every request from now on.
func (g *Gate) Lead(s *Server) {
	s.bound(g.opts)
	g.leader.Store(s)
}

func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s := g.leader.Load(); s != nil {
		s.ServeHTTP(w, r)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.URL.Path == "/api/v1/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		writeJSON(w, http.StatusOK, apiv1.Health{Status: "ok", Version: g.version, Store: g.store,
			Now: time.Now().UTC(), Role: apiv1.RoleStandby})
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(StandbyRetryAfter))
	writeJSON(w, http.StatusServiceUnavailable, apiv1.ErrorBody{Error: apiv1.ErrorDetail{Code: apiv1.CodeStandby,
		Message: "this controller is a standby: another controller leads on its database; ask the leader (this one takes over when the leader dies)"}})
}
