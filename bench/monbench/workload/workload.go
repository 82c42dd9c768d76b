// Package workload generates the samples of the monitoring benchmark
// (bench/monbench) so that other programs (a peer benchmark on another
// store, an HTTP push benchmark) can feed the identical workload.
//
// The workload: nSeries distinct series from Nodes (50) nodes; per node 20
// metrics x (nSeries/50/20) interfaces, of which 10 counters (10 to 10,000
// packets/s, drifting, with Poisson-like noise), 7 utilisation gauges (3
// decimals such as 0.734, random walk) and 3 constants; one sample of every
// series per Interval (10 s) of synthetic time starting at Start, each
// node's push stamped with its collection time plus uniform jitter of
// -5..+5 ms.
//
// Use:
//
//	w, err := workload.New(250_000, 1)
//	for step := 0; ; step++ {
//		for i := range w.Nodes() {
//			t, pts := w.Next(i) // push number step of node i
//			...
//		}
//	}
//
// Every node has its own random state, so nodes may be advanced from
// different goroutines (one goroutine per node at a time); for a given
// (nSeries, seed) the k-th push of node i is always the same timestamp and
// values, whatever the order the nodes are advanced in.
package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
)

const (
	// Nodes is the number of nodes (agents) pushing.
	Nodes = 50
	// Interval is the synthetic time between two pushes of a node.
	Interval = 10 * time.Second
	// PerCard is the number of interfaces per card (label "card").
	PerCard = 10
	// Jitter is the bound of the uniform jitter added to a push's
	// timestamp: -Jitter..+Jitter ms.
	Jitter = 5
)

// Start is the synthetic time of every node's first push.
var Start = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

// Kind is a metric's kind.
type Kind int

const (
	// Counter grows by jittery amounts (packets at a drifting rate).
	Counter Kind = iota
	// Gauge moves like 0.734 (utilisation, 3 decimals, random walk).
	Gauge
	// Constant stays.
	Constant
)

// Metric is one metric name of the workload and its kind.
type Metric struct {
	Name string
	Kind Kind
}

// Metrics are the workload's 20 metric names, in the order of a node's
// points (for each metric, all interfaces).
var Metrics = []Metric{
	{"node_network_receive_bytes_total", Counter}, {"node_network_transmit_bytes_total", Counter},
	{"node_network_receive_packets_total", Counter}, {"node_network_transmit_packets_total", Counter},
	{"node_network_receive_errs_total", Counter}, {"node_network_transmit_drop_total", Counter},
	{"lightpath_class_sent_bytes_total", Counter}, {"lightpath_class_dropped_packets_total", Counter},
	{"lightpath_flow_bytes_total", Counter}, {"lightpath_tcp_retransmits_total", Counter},
	{"lightpath_link_utilisation_ratio", Gauge}, {"lightpath_queue_occupancy_ratio", Gauge},
	{"lightpath_rtt_seconds", Gauge}, {"node_cpu_busy_ratio", Gauge}, {"lightpath_class_rate_ratio", Gauge},
	{"node_memory_used_ratio", Gauge}, {"lightpath_loss_ratio", Gauge},
	{"node_network_speed_bytes", Constant}, {"node_network_mtu_bytes", Constant}, {"lightpath_link_up", Constant},
}

// Meta is the metadata of the workload's names, as a node's first push
// carries it (counters monitor.Counter, the rest monitor.Gauge).
func Meta() map[string]monitor.Meta {
	m := make(map[string]monitor.Meta, len(Metrics))
	for _, x := range Metrics {
		t := monitor.Gauge
		if x.Kind == Counter {
			t = monitor.Counter
		}
		m[x.Name] = monitor.Meta{Type: t}
	}
	return m
}

type serie struct {
	k    Kind
	v    float64
	rate float64
}

// node is one agent: its points (reused for every push) and their state.
type node struct {
	name  string
	pts   []monitor.Point
	st    []serie
	rng   *rand.Rand // values
	jr    *rand.Rand // timestamp jitter
	steps int64      // pushes generated
}

// Workload is the benchmark's generator. Make one with New.
type Workload struct {
	nodes []*node
	ifs   int
}

// Check reports whether nSeries is a valid workload size: a multiple of
// Nodes*len(Metrics)*PerCard (10,000).
func Check(nSeries int) error {
	perNode := nSeries / Nodes
	if nSeries <= 0 || perNode*Nodes != nSeries || perNode%len(Metrics) != 0 || (perNode/len(Metrics))%PerCard != 0 {
		return fmt.Errorf("the number of series must be a positive multiple of %d, not %d", Nodes*len(Metrics)*PerCard, nSeries)
	}
	return nil
}

// New makes the workload of nSeries series (see Check) from seed.
func New(nSeries int, seed uint64) (*Workload, error) {
	if err := Check(nSeries); err != nil {
		return nil, err
	}
	ifs := nSeries / Nodes / len(Metrics)
	w := &Workload{nodes: make([]*node, Nodes), ifs: ifs}
	for ni := range Nodes {
		n := &node{name: fmt.Sprintf("n%03d", ni), rng: rand.New(rand.NewPCG(seed, uint64(ni))),
			jr: rand.New(rand.NewPCG(seed, 5000+uint64(ni)))}
		for _, m := range Metrics {
			for i := range ifs {
				ls := monitor.L("if", fmt.Sprintf("eth%d", i), "card", fmt.Sprintf("c%d", i/PerCard))
				s := serie{k: m.Kind}
				switch m.Kind {
				case Counter:
					s.v = float64(n.rng.IntN(1 << 32))
					s.rate = math.Pow(10, 1+3*n.rng.Float64()) // 10 to 10,000 packets/s
				case Gauge:
					s.v = math.Round((0.1+0.8*n.rng.Float64())*1000) / 1000
				case Constant:
					s.v = float64(1 + n.rng.IntN(10000))
				}
				n.pts = append(n.pts, monitor.Point{Name: m.Name, Labels: ls})
				n.st = append(n.st, s)
			}
		}
		w.nodes[ni] = n
	}
	return w, nil
}

// Nodes is the number of nodes (Nodes).
func (w *Workload) Nodes() int { return len(w.nodes) }

// Interfaces is the number of interfaces per node.
func (w *Workload) Interfaces() int { return w.ifs }

// SeriesPerNode is the number of series (points per push) of a node.
func (w *Workload) SeriesPerNode() int { return len(w.nodes[0].pts) }

// NodeName is node i's name ("n000".."n049"), the Batch.Node of its pushes
// and the value of the "node" label the repository adds to its series.
func (w *Workload) NodeName(i int) string { return w.nodes[i].name }

// Series are node i's series in the order of its points: name and labels
// as pushed (if, card; without the node label). The values are zero; the
// caller must not modify the result.
func (w *Workload) Series(i int) []monitor.Point { return w.nodes[i].pts }

// Kind is the kind of point j of a node.
func (w *Workload) Kind(j int) Kind { return Metrics[j/w.ifs].Kind }

// Pushes is how many pushes of node i Next has generated.
func (w *Workload) Pushes(i int) int64 { return w.nodes[i].steps }

// Next generates the next push of node i (its k-th, from 0): its
// timestamp, Start + k*Interval plus jitter of -5..+5 ms, in Unix ms, and
// its points. The points slice is node i's own and is overwritten by the
// next call for node i: use it (or copy it) before.
func (w *Workload) Next(i int) (t int64, pts []monitor.Point) {
	n := w.nodes[i]
	n.step()
	base := Start.UnixMilli() + n.steps*Interval.Milliseconds()
	t = base + int64(n.jr.IntN(2*Jitter+1)) - Jitter
	n.steps++
	return t, n.pts
}

// NextBatch is Next as the batch node i pushes: Node its name, Seq the
// push's number k, one group; the first push (k = 0) carries Meta. The
// batch's points are Next's (overwritten by the next call for node i).
func (w *Workload) NextBatch(i int) *monitor.Batch {
	seq := w.nodes[i].steps
	t, pts := w.Next(i)
	b := &monitor.Batch{Node: w.nodes[i].name, Seq: uint64(seq), Groups: []monitor.Group{{T: t, Points: pts}}}
	if seq == 0 {
		b.Meta = Meta()
	}
	return b
}

func (n *node) step() {
	for i := range n.st {
		s := &n.st[i]
		switch s.k {
		case Counter:
			// packets at a drifting mean rate, Poisson-like noise (as in
			// the chunk package's bytes-per-sample test)
			s.rate = math.Max(1, s.rate*(1+n.rng.NormFloat64()*0.002))
			mean := s.rate * Interval.Seconds()
			s.v += math.Max(0, math.Round(mean+n.rng.NormFloat64()*math.Sqrt(mean)))
		case Gauge:
			s.v = math.Min(0.999, math.Max(0.1, s.v+n.rng.NormFloat64()*0.002))
			s.v = math.Round(s.v*1000) / 1000
		}
		n.pts[i].V = s.v
	}
}
