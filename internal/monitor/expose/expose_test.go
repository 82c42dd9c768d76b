package expose

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lightpath/lightpath/internal/monitor"
)

// Handler answers byte for byte as promhttp.HandlerFor with
// ContinueOnError (what the agent served before it stopped linking
// promhttp): the same headers and the same body, for the formats and
// encodings scrapers ask for.
func TestHandlerAnswersAsPromhttp(t *testing.T) {
	g := Gatherer(func() []Sample {
		return []Sample{
			{Name: "lightpath_link_bytes_total", Labels: monitor.L("link", "l1", "dir", "a>b"), Meta: monitor.Meta{Type: monitor.Counter, Help: "Bytes."}, T: 1700000000000, V: 12345},
			{Name: "lightpath_link_bytes_total", Labels: monitor.L("dir", "b>a"), Meta: monitor.Meta{Type: monitor.Counter, Help: "Bytes."}, T: 1700000000000, V: 6789},
			{Name: "lightpath_rtt_seconds", Labels: monitor.L("node", "n\"1\n"), Meta: monitor.Meta{Type: monitor.Gauge}, V: 0.0125},
			{Name: "lightpath_odd", V: math.Inf(1)},
			{Name: "lightpath_nan", Meta: monitor.Meta{Type: monitor.Gauge, Help: "back\\slash"}, V: math.NaN()},
		}
	})
	ours := Handler(g)
	theirs := promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	for _, tc := range []struct{ name, url, accept, encoding string }{
		{"plain", "/metrics", "", ""},
		{"prometheus scrape", "/metrics", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2", "gzip"},
		{"text", "/metrics", "text/plain;version=0.0.4", ""},
		{"protobuf", "/metrics", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", ""},
		{"openmetrics asked, not offered", "/metrics", "application/openmetrics-text;version=1.0.0", ""},
		{"gzip and deflate", "/metrics", "", "gzip, deflate"},
		{"identity first", "/metrics", "", "identity, gzip"},
		{"gzip refused", "/metrics", "", "gzip;q=0"},
		{"gzip preferred", "/metrics", "", "identity;q=0.5, gzip"},
		{"star", "/metrics", "", "*"},
		{"br then gzip", "/metrics", "", "br, gzip;q=0.5"},
		{"name filter", "/metrics?name[]=lightpath_rtt_seconds&name[]=lightpath_odd", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serve := func(h http.Handler) *httptest.ResponseRecorder {
				req := httptest.NewRequest("GET", tc.url, nil)
				if tc.accept != "" {
					req.Header.Set("Accept", tc.accept)
				}
				if tc.encoding != "" {
					req.Header.Set("Accept-Encoding", tc.encoding)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			g, w := serve(ours), serve(theirs)
			if g.Code != w.Code {
				t.Errorf("status %d, promhttp %d", g.Code, w.Code)
			}
			for _, k := range []string{"Content-Type", "Content-Encoding"} {
				if g.Header().Get(k) != w.Header().Get(k) {
					t.Errorf("%s %q, promhttp %q", k, g.Header().Get(k), w.Header().Get(k))
				}
			}
			if gv, wv := g.Header().Values("Vary"), w.Header().Values("Vary"); !slices.Equal(gv, wv) {
				t.Errorf("Vary %q, promhttp %q", gv, wv)
			}
			gb, wb := body(t, g), body(t, w)
			if !bytes.Equal(gb, wb) {
				t.Errorf("body differs:\n%q\npromhttp:\n%q", gb, wb)
			}
			if len(gb) == 0 {
				t.Error("empty body")
			}
		})
	}
}

func body(t *testing.T, rec *httptest.ResponseRecorder) []byte {
	t.Helper()
	if rec.Header().Get("Content-Encoding") != "gzip" {
		return rec.Body.Bytes()
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
