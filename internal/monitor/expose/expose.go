// Package expose renders samples as Prometheus metric families, for the
// controller's /metrics (the agents' pushed series) and an agent's own
// /metrics. A family's series may carry different label names (a device
// mapped to a link has a link label, another not); the exposition fills
// the missing ones with "", which Prometheus reads as absent, so every
// family is consistent as client_golang and promtool require.
//
// It links the exposition format (prometheus/common/expfmt) but neither
// client_golang's registry nor promhttp: an agent serves its /metrics with
// Handler and links nothing of the controller's server side.
package expose

import (
	"compress/gzip"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/lightpath/lightpath/internal/monitor"
)

// Sample is one series' latest value, with its metric's metadata. T, when
// not 0, is sent as the sample's timestamp (milliseconds).
type Sample struct {
	Name   string
	Labels monitor.Labels
	Meta   monitor.Meta
	T      int64
	V      float64
}

type family struct {
	meta   monitor.Meta
	labels map[string]bool
	rows   []Sample
}

// Families groups samples into metric families, sorted by name.
func Families(samples []Sample) []*dto.MetricFamily {
	fams := map[string]*family{}
	for _, s := range samples {
		f := fams[s.Name]
		if f == nil {
			f = &family{meta: s.Meta, labels: map[string]bool{}}
			fams[s.Name] = f
		}
		for _, l := range s.Labels {
			f.labels[l.Name] = true
		}
		f.rows = append(f.rows, s)
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*dto.MetricFamily, 0, len(names))
	for _, n := range names {
		f := fams[n]
		lnames := make([]string, 0, len(f.labels))
		for l := range f.labels {
			lnames = append(lnames, l)
		}
		slices.Sort(lnames)
		help := f.meta.Help
		if help == "" {
			help = "Collected by the agents."
		}
		typ := dto.MetricType_UNTYPED
		switch f.meta.Type {
		case monitor.Counter:
			typ = dto.MetricType_COUNTER
		case monitor.Gauge:
			typ = dto.MetricType_GAUGE
		}
		mf := &dto.MetricFamily{Name: proto.String(n), Help: proto.String(help), Type: typ.Enum()}
		for _, s := range f.rows {
			m := &dto.Metric{}
			if s.T != 0 {
				m.TimestampMs = proto.Int64(s.T)
			}
			for _, l := range lnames {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(l), Value: proto.String(s.Labels.Get(l))})
			}
			switch typ {
			case dto.MetricType_COUNTER:
				m.Counter = &dto.Counter{Value: proto.Float64(s.V)}
			case dto.MetricType_GAUGE:
				m.Gauge = &dto.Gauge{Value: proto.Float64(s.V)}
			default:
				m.Untyped = &dto.Untyped{Value: proto.Float64(s.V)}
			}
			mf.Metric = append(mf.Metric, m)
		}
		out = append(out, mf)
	}
	return out
}

// PerConnection are the labels whose values name one connection (flow,
// with its ephemeral port), one transfer or one of its streams: each
// connection or transfer makes new series, so a shared /metrics that
// carried them would grow with every copy anyone runs. Their series stay
// in the repository (the query API, a transfer's page).
var PerConnection = []string{"flow", "transfer", "stream"}

// Shared reports whether a series may go on a shared /metrics: it has
// none of the PerConnection labels.
func Shared(ls monitor.Labels) bool {
	for _, l := range ls {
		if l.Value != "" && slices.Contains(PerConnection, l.Name) {
			return false
		}
	}
	return true
}

// Gatherer makes a prometheus.Gatherer of a function returning samples.
type Gatherer func() []Sample

// Gather implements prometheus.Gatherer.
func (g Gatherer) Gather() ([]*dto.MetricFamily, error) { return Families(g()), nil }

// Handler serves what g gathers as promhttp.HandlerFor does with its
// default options: the format the scraper's Accept asks for (the text
// format by default, or protocol buffers), gzip when its Accept-Encoding
// prefers it, and only the families named by name[] parameters when there
// are any.
func Handler(g Gatherer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mfs := Families(g())
		format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
		w.Header().Add("Vary", "Accept")
		w.Header().Add("Vary", "Accept-Encoding")
		w.Header().Set("Content-Type", string(format))
		var out io.Writer = w
		if gzipWanted(strings.Join(r.Header.Values("Accept-Encoding"), ",")) {
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			defer gz.Close()
			out = gz
		}
		var only map[string]bool
		if names := r.URL.Query()["name[]"]; len(names) > 0 {
			only = map[string]bool{}
			for _, n := range names {
				only[n] = true
			}
		}
		enc := expfmt.NewEncoder(out, format)
		for _, mf := range mfs {
			if only != nil && !only[mf.GetName()] {
				continue
			}
			// As promhttp with ContinueOnError: a family that does not
			// encode is left out, the others still go.
			_ = enc.Encode(mf)
		}
		if c, ok := enc.(expfmt.Closer); ok {
			c.Close()
		}
	})
}

// gzipWanted reads an Accept-Encoding as promhttp does, choosing between
// identity and gzip (offered in that order): the first offer that a value
// of the highest quality names, or "*", wins.
func gzipWanted(accept string) bool {
	best, bestQ := "identity", -1.0
	for _, offer := range []string{"identity", "gzip"} {
		for _, part := range strings.Split(accept, ",") {
			value, params, _ := strings.Cut(part, ";")
			value = strings.TrimSpace(value)
			q := 1.0
			if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.TrimSpace(k) == "q" {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				} else {
					continue
				}
			}
			if q > bestQ && (value == "*" || value == offer) {
				best, bestQ = offer, q
			}
		}
	}
	return best == "gzip" && bestQ > 0
}
