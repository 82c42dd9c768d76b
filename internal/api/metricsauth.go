package api

import "net/http"

// RequireMetricsToken makes /metrics answer only requests that carry a
// valid token of any user ("Authorization: Bearer TOKEN", which
// Prometheus sends with authorization.credentials_file); without it,
// /metrics is open, as scrapers expect by default.
func (s *Server) RequireMetricsToken(on bool) *Server {
	s.metricsAuth = on
	return s
}

// metricsGate checks the token of a scrape when RequireMetricsToken is on.
func (s *Server) metricsGate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.metricsAuth {
			if _, err := s.c.Authenticate(r.Context(), bearer(r)); err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="lightpath"`)
				writeError(w, err)
				return
			}
			authenticated(r.Context())
		}
		h.ServeHTTP(w, r)
	})
}
