package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/monitor/alert"
	"github.com/lightpath/lightpath/internal/monitor/rules"
	"github.com/lightpath/lightpath/internal/reserve"
)

// metrics are the controller's own Prometheus series, served at /metrics:
// requests by route (the pattern, never an ID: STYLE.md), their durations,
// and gauges of the reservations by state and the agents alive or gone.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// extra, when set, gathers series from elsewhere (the agents').
	extra prometheus.Gatherer
}

func newMetrics(c *controller.Controller) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lightpath_controller_http_requests_total",
			Help: "HTTP requests answered by the controller's API, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lightpath_controller_http_request_duration_seconds",
			Help:    "Time to answer an API request, by route pattern (the event stream excluded).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
	}
	m.reg.MustRegister(m.requests, m.duration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if c != nil {
		m.reg.MustRegister(gauges{c})
	}
	return m
}

func (m *metrics) handler() http.Handler {
	own := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.extra == nil {
			own.ServeHTTP(w, r)
			return
		}
		promhttp.HandlerFor(prometheus.Gatherers{m.reg, m.extra}, promhttp.HandlerOpts{
			Registry: m.reg, ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	})
}

func (m *metrics) observe(rt Route, method string, code int, took time.Duration) {
	m.requests.WithLabelValues(rt.Path, method, strconv.Itoa(code)).Inc()
	if rt.Path != "/api/v1/events" {
		m.duration.WithLabelValues(rt.Path).Observe(took.Seconds())
	}
}

// gauges reads the controller's counts at every scrape.
type gauges struct{ c *controller.Controller }

var (
	reservationsDesc = prometheus.NewDesc("lightpath_controller_reservations",
		"Live reservations (holding capacity) by state.", []string{"state"}, nil)
	agentsDesc = prometheus.NewDesc("lightpath_controller_agents",
		"Node agents known to the controller, alive (lease held) or gone.", []string{"state"}, nil)
	reservedDesc = prometheus.NewDesc("lightpath_controller_reserved_bytes_per_second",
		"Bandwidth the ACTIVE reservations guarantee over each direction of each link of the topology (0 where none).", []string{"link", "from", "to"}, nil)
)

func (g gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- reservationsDesc
	ch <- agentsDesc
	ch <- reservedDesc
}

func (g gauges) Collect(ch chan<- prometheus.Metric) {
	states, alive, gone := g.c.Counts()
	for _, s := range []reserve.State{reserve.StateHeld, reserve.StateReserved, reserve.StateActive} {
		ch <- prometheus.MustNewConstMetric(reservationsDesc, prometheus.GaugeValue, float64(states[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(agentsDesc, prometheus.GaugeValue, float64(alive), "alive")
	ch <- prometheus.MustNewConstMetric(agentsDesc, prometheus.GaugeValue, float64(gone), "gone")
	if topo := g.c.Topology(); topo != nil {
		reserved := g.c.ReservedNow()
		for _, l := range topo.Graph.Links() {
			for _, d := range [][2]string{{l.A, l.B}, {l.B, l.A}} {
				bps := reserved[[2]string{l.Name, d[0]}]
				ch <- prometheus.MustNewConstMetric(reservedDesc, prometheus.GaugeValue, float64(bps)/8, l.Name, d[0], d[1])
			}
		}
	}
}

// statusWriter remembers the status code a handler wrote, and passes
// Flush through so the event stream still streams.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (the streams
// set their own deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// alertGauges are the alerts as Prometheus' own ALERTS series has them:
// lightpath_alerts{alertname, alertstate, severity, and the series'
// labels} 1 for each series pending or firing under a rule; a series
// back to ok has none. Its label names vary with the series, so it is an
// unchecked collector (Describe sends nothing).
type alertGauges struct{ e *alert.Evaluator }

const alertsHelp = "Alerts pending or firing: 1 for each series in that state under a rule (as Prometheus' ALERTS)."

func (g alertGauges) Describe(chan<- *prometheus.Desc) {}

func (g alertGauges) Collect(ch chan<- prometheus.Metric) {
	for _, in := range g.e.Status().Instances {
		if in.State != string(rules.StatePending) && in.State != string(rules.StateFiring) {
			continue
		}
		names := []string{"alertname", "alertstate", "severity"}
		values := []string{in.Rule, in.State, in.Severity}
		keys := make([]string, 0, len(in.Labels))
		for k := range in.Labels {
			if !slices.Contains(names, k) && labelName(k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			names, values = append(names, k), append(values, in.Labels[k])
		}
		desc := prometheus.NewDesc("lightpath_alerts", alertsHelp, names, nil)
		m, err := prometheus.NewConstMetric(desc, prometheus.GaugeValue, 1, values...)
		if err == nil {
			ch <- m
		}
	}
}

// labelName reports whether k may name a Prometheus label: a letter or _
// first, then letters, digits and _, and not __ first (reserved).
func labelName(k string) bool {
	if k == "" || strings.HasPrefix(k, "__") {
		return false
	}
	for i, r := range k {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
