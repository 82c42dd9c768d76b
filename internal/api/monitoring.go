package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/derive"
	"github.com/lightpath/lightpath/internal/monitor/expose"
	"github.com/lightpath/lightpath/internal/monitor/repo"
	"github.com/lightpath/lightpath/internal/reserve"
)

// MaxPushBytes bounds one push: 50,000 samples of a few labels each, with
// room to spare. The agents' pusher sends at most that many per batch.
const MaxPushBytes = 32 << 20

// WithRepository makes the server take agents' pushes into r, answer
// metric queries from it and expose its latest samples on /metrics.
func (s *Server) WithRepository(r *repo.Repo) *Server {
	s.repo = r
	s.metrics.reg.MustRegister(pushedCount{r})
	s.metrics.extra = pushed(r)
	return s
}

func (s *Server) needRepo() (*repo.Repo, error) {
	if s.repo == nil {
		return nil, &httpError{status: http.StatusNotFound, code: apiv1.CodeNotFound, msg: "this controller keeps no metrics (started without a repository)"}
	}
	return s.repo, nil
}

// pushMetrics takes one batch from an agent.
func (s *Server) pushMetrics(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	rp, err := s.needRepo()
	if err != nil {
		return err
	}
	if a.Role != reserve.RoleAgent && a.Role != reserve.RoleAdmin {
		return fmt.Errorf("%w: only agents push metrics", reserve.ErrForbidden)
	}
	var b monitor.Batch
	if err := decodeLimit(w, r, &b, MaxPushBytes); err != nil {
		return err
	}
	t := s.c.Topology()
	if t == nil || t.Site[b.Node] == "" {
		if err := a.ActsFor(b.Node); err != nil {
			return err
		}
		return invalid("node", "node %q is not in the topology", b.Node)
	}
	if err := checkPush(a, t, &b); err != nil {
		return err
	}
	res, err := rp.Append(r.Context(), &b)
	if errors.Is(err, monitor.ErrInvalid) {
		return invalid("groups", "%v", err)
	}
	if err != nil {
		return fmt.Errorf("store samples: %w", err)
	}
	s.observe(r, &b)
	writeJSON(w, http.StatusOK, apiv1.PushResult{Stored: res.Stored, Duplicate: res.Duplicate})
	return nil
}

// queryMetrics answers GET /api/v1/metrics/query.
func (s *Server) queryMetrics(w http.ResponseWriter, r *http.Request, _ controller.Actor) error {
	rp, err := s.needRepo()
	if err != nil {
		return err
	}
	q, err := parseQuery(r, s.c.Now())
	if err != nil {
		return err
	}
	// A range too long for the samples it would return gets a step,
	// which the answer states, rather than reading them all to refuse.
	auto := rp.AutoStep(q)
	if auto > 0 {
		q.Step = auto
	}
	series, err := rp.Query(r.Context(), q)
	if errors.Is(err, monitor.ErrInvalid) {
		return invalid("", "%v", err)
	}
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	out := apiv1.QueryResult{Series: make([]apiv1.QuerySeries, 0, len(series))}
	if auto > 0 {
		out.Step = auto.String()
	}
	for _, sr := range series {
		qs := apiv1.QuerySeries{Name: sr.Name, Labels: sr.Labels.Map(), Points: make([][2]any, len(sr.Points))}
		for i, p := range sr.Points {
			var v any = p.V
			if math.IsNaN(p.V) || math.IsInf(p.V, 0) {
				v = nil
			}
			qs.Points[i] = [2]any{p.T, v}
		}
		out.Series = append(out.Series, qs)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// parseQuery reads name, match (repeatable LABEL=VALUE), start, end (RFC
// 3339, or a duration before now such as 1h), step (a duration) and tier.
func parseQuery(r *http.Request, now time.Time) (repo.Query, error) {
	v := r.URL.Query()
	q := repo.Query{Name: v.Get("name"), Match: map[string]string{}, Tier: -1}
	if q.Name == "" {
		return q, invalid("name", "query parameter name is required (a metric name, see /api/v1/metrics/names)")
	}
	for _, m := range v["match"] {
		k, val, ok := strings.Cut(m, "=")
		if !ok || k == "" {
			return q, invalid("match", "match=%q: want LABEL=VALUE", m)
		}
		q.Match[k] = val
	}
	var err error
	if q.End, err = timeParam(v.Get("end"), "end", now, now); err != nil {
		return q, err
	}
	if q.Start, err = timeParam(v.Get("start"), "start", now, q.End.Add(-time.Hour)); err != nil {
		return q, err
	}
	if s := v.Get("step"); s != "" {
		if q.Step, err = time.ParseDuration(s); err != nil || q.Step < 0 {
			return q, invalid("step", "step=%q: want a duration like 10s or 5m", s)
		}
	}
	if s := v.Get("tier"); s != "" {
		if q.Tier, err = strconv.Atoi(s); err != nil || q.Tier < 0 {
			return q, invalid("tier", "tier=%q: want a tier index (0 is raw)", s)
		}
	}
	return q, nil
}

func timeParam(s, name string, now, def time.Time) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, invalid(name, "%s=%q: want an RFC 3339 time or a duration before now (like 1h)", name, s)
}

// metricNames lists the metric names the repository holds.
func (s *Server) metricNames(w http.ResponseWriter, _ *http.Request, _ controller.Actor) error {
	rp, err := s.needRepo()
	if err != nil {
		return err
	}
	out := apiv1.MetricNames{Names: []apiv1.MetricName{}}
	for _, n := range rp.Names() {
		m, _ := rp.Meta(n)
		out.Names = append(out.Names, apiv1.MetricName{Name: n, Type: string(m.Type), Help: m.Help})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pushed exposes the latest sample of every series the agents pushed, as
// Prometheus metric families labelled by node (package expose), but for
// the series of single connections and transfers (expose.Shared).
func pushed(r *repo.Repo) expose.Gatherer {
	return func() []expose.Sample {
		var out []expose.Sample
		r.Latest(func(name string, ls monitor.Labels, meta monitor.Meta, t int64, v float64) {
			if expose.Shared(ls) {
				out = append(out, expose.Sample{Name: name, Labels: ls, Meta: meta, T: t, V: v})
			}
		})
		return out
	}
}

// pushedCount is the repository's own state as controller series.
type pushedCount struct{ r *repo.Repo }

var (
	repoSeriesDesc = prometheus.NewDesc("lightpath_controller_repository_series",
		"Series held by the monitoring repository.", nil, nil)
	repoSamplesDesc = prometheus.NewDesc("lightpath_controller_repository_samples_total",
		"Samples the monitoring repository has stored since the controller started.", nil, nil)
	repoDupDesc = prometheus.NewDesc("lightpath_controller_repository_duplicate_samples_total",
		"Samples pushed again after they were stored (skipped), since the controller started.", nil, nil)
	repoDiskDesc = prometheus.NewDesc("lightpath_controller_repository_disk_bytes",
		"Bytes the monitoring repository uses on disk.", nil, nil)
)

func (p pushedCount) Describe(ch chan<- *prometheus.Desc) {
	ch <- repoSeriesDesc
	ch <- repoSamplesDesc
	ch <- repoDupDesc
	ch <- repoDiskDesc
}

func (p pushedCount) Collect(ch chan<- prometheus.Metric) {
	st := p.r.Stats()
	ch <- prometheus.MustNewConstMetric(repoSeriesDesc, prometheus.GaugeValue, float64(st.Series))
	ch <- prometheus.MustNewConstMetric(repoSamplesDesc, prometheus.CounterValue, float64(st.Stored))
	ch <- prometheus.MustNewConstMetric(repoDupDesc, prometheus.CounterValue, float64(st.Duplicates))
	ch <- prometheus.MustNewConstMetric(repoDiskDesc, prometheus.GaugeValue, float64(st.DiskBytes))
}

// observe derives link rates from a push and stores them.
func (s *Server) observe(r *http.Request, b *monitor.Batch) {
	t := s.c.Topology()
	if t == nil {
		return
	}
	gs := s.derive.Observe(t.Graph.Link, b)
	if len(gs) == 0 {
		return
	}
	if _, err := s.repo.Append(r.Context(), &monitor.Batch{Node: b.Node, Meta: derive.Meta, Groups: gs}); err != nil {
		s.log.Warn("store derived link rates", "node", b.Node, "err", err)
	}
}
