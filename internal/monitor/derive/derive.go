// Package derive turns the counters agents push into the series people
// look at: each link direction's throughput in bits per second and its
// utilisation of the link's capacity. A node's transmit counter on the
// device at its end of a link counts what it sent into that link, so it
// measures the direction from that node to the other end. The controller
// derives these at ingest, stores them beside the raw counters (so rules
// and charts read them like any series) and keeps the latest per
// direction for the live dashboard.
package derive

import (
	"slices"
	"strings"
	"sync"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/reserve"
)

// The derived series.
const (
	Throughput  = "lightpath_link_throughput_bytes_per_second"
	Utilisation = "lightpath_link_utilisation_ratio"
	// txBytes is the interface collector's transmit counter.
	txBytes = "lightpath_interface_transmit_bytes_total"
)

// Meta describes the derived series.
var Meta = map[string]monitor.Meta{
	Throughput:  {Type: monitor.Gauge, Help: "Bytes per second sent into a link direction (link, from, to), from the transmit counter of the from node's device on the link, over the last push interval (×8 for bit/s)."},
	Utilisation: {Type: monitor.Gauge, Help: "A link direction's throughput as a fraction of the link's capacity."},
}

// Rate is the latest measurement of one link direction.
type Rate struct {
	Link, From, To string
	T              int64 // milliseconds since the epoch
	BitsPerSecond  float64
	Capacity       uint64
}

// Utilisation is the rate over the capacity (0 when the capacity is not
// known).
func (r Rate) Utilisation() float64 {
	if r.Capacity == 0 {
		return 0
	}
	return r.BitsPerSecond / float64(r.Capacity)
}

type counter struct {
	t int64
	v float64
}

// Deriver keeps the previous counter of every (node, device) and the
// latest rate of every link direction. It is safe for concurrent use.
type Deriver struct {
	mu     sync.Mutex
	prev   map[string]counter
	latest map[string]Rate // "link\x00from" → rate
}

// New returns an empty Deriver.
func New() *Deriver {
	return &Deriver{prev: map[string]counter{}, latest: map[string]Rate{}}
}

// Observe reads the transmit counters in a batch pushed by node and
// returns the derived series, one group per group of the batch that gave
// any (same timestamps). link looks a link up by name in the topology
// (reserve.Graph.Link); a device whose link it does not know, or whose
// link does not end at node, is skipped.
func (d *Deriver) Observe(link func(name string) (reserve.Link, bool), b *monitor.Batch) []monitor.Group {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []monitor.Group
	for _, g := range b.Groups {
		var pts []monitor.Point
		for _, p := range g.Points {
			if p.Name != txBytes {
				continue
			}
			ln := p.Labels.Get("link")
			l, ok := link(ln)
			if !ok || (l.A != b.Node && l.B != b.Node) {
				continue
			}
			to := l.B
			if l.B == b.Node {
				to = l.A
			}
			key := b.Node + "\x00" + p.Labels.Get("device")
			prev, seen := d.prev[key]
			if seen && g.T <= prev.t {
				continue // an old group sent again
			}
			d.prev[key] = counter{g.T, p.V}
			if !seen || p.V < prev.v {
				continue // the first sample, or the counter was reset
			}
			bps := (p.V - prev.v) * 8 / (float64(g.T-prev.t) / 1000)
			r := Rate{Link: ln, From: b.Node, To: to, T: g.T, BitsPerSecond: bps, Capacity: l.Capacity}
			dk := ln + "\x00" + b.Node
			if cur, ok := d.latest[dk]; !ok || cur.T <= g.T {
				d.latest[dk] = r
			}
			ls := monitor.L("link", ln, "from", b.Node, "to", to)
			pts = append(pts, monitor.Point{Name: Throughput, Labels: ls, V: bps / 8})
			if l.Capacity > 0 {
				pts = append(pts, monitor.Point{Name: Utilisation, Labels: ls, V: r.Utilisation()})
			}
		}
		if len(pts) > 0 {
			out = append(out, monitor.Group{T: g.T, Points: pts})
		}
	}
	return out
}

// Latest returns the latest rate of every link direction measured since
// notBefore (milliseconds), by link then from.
func (d *Deriver) Latest(notBefore int64) []Rate {
	d.mu.Lock()
	out := make([]Rate, 0, len(d.latest))
	for _, r := range d.latest {
		if r.T >= notBefore {
			out = append(out, r)
		}
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b Rate) int {
		if c := strings.Compare(a.Link, b.Link); c != 0 {
			return c
		}
		return strings.Compare(a.From, b.From)
	})
	return out
}
