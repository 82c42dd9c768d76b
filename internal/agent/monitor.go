package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/expose"

	"github.com/lightpath/lightpath/internal/monitor/collect"
	"github.com/lightpath/lightpath/internal/monitor/push"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/topology"
)

// Monitoring is an agent's collection of metrics and their push to the
// controller's repository.
type Monitoring struct {
	// Registry's Env should read Topology and Flows from Watched.
	Registry *collect.Registry
	Watched  *Watched
	Pusher   *push.Pusher
	// Interval is how often the collectors run; default 1s, so the
	// dashboard's charts move every second.
	Interval time.Duration
	// Listen, when set, is where the agent serves its own /metrics: the
	// latest collection, for a Prometheus that scrapes agents directly.
	Listen string

	mu   sync.Mutex
	last monitor.Group
}

// Handler serves the latest collection in the Prometheus text format.
func (m *Monitoring) Handler() http.Handler {
	return expose.Handler(expose.Gatherer(func() []expose.Sample {
		m.mu.Lock()
		g := m.last
		m.mu.Unlock()
		meta := m.Registry.Meta()
		out := make([]expose.Sample, 0, len(g.Points))
		for _, p := range g.Points {
			out = append(out, expose.Sample{Name: p.Name, Labels: p.Labels, Meta: meta[p.Name], T: g.T, V: p.V})
		}
		return out
	}))
}

// serve serves Handler at Listen until ctx ends.
func (m *Monitoring) serve(ctx context.Context, log *slog.Logger) error {
	ln, err := net.Listen("tcp", m.Listen)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	go srv.Serve(ln)
	return nil
}

// DefaultCollectInterval is how often an agent collects by default.
const DefaultCollectInterval = time.Second

// Watched is what the collectors need from the reconciling loop: the
// topology and the flows of the live reservations at this node. The zero
// value is ready to use.
type Watched struct {
	mu    sync.Mutex
	topo  *topology.Topology
	flows []collect.FlowMatch
}

func (w *Watched) set(t *topology.Topology, rs []reserve.Reservation) {
	var fl []collect.FlowMatch
	for _, r := range rs {
		if len(r.FlowSpec.Flows) == 0 {
			continue
		}
		fm := collect.FlowMatch{Reservation: r.ID, DSCP: int(r.DSCP), Spec: r.FlowSpec.String()}
		for _, f := range r.FlowSpec.Flows {
			for _, pr := range []reserve.PortRange{f.Dst.Ports, f.Src.Ports} {
				// Only ranges narrow enough to name a service: a flow
				// spec with no ports would match every socket.
				if !pr.IsZero() && int(pr.Hi)-int(pr.Lo) < 64 {
					for p := int(pr.Lo); p <= int(pr.Hi); p++ {
						fm.Ports = append(fm.Ports, p)
					}
				}
			}
		}
		fl = append(fl, fm)
	}
	w.mu.Lock()
	w.topo, w.flows = t, fl
	w.mu.Unlock()
}

// Topology returns the topology the agent works on, or nil before the
// first round.
func (w *Watched) Topology() *topology.Topology {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.topo
}

// Flows returns the flows of the live reservations at the node.
func (w *Watched) Flows() []collect.FlowMatch {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flows
}

// monitor collects every interval and, apart, pushes: a push that is slow
// (a backlog going out after the controller was away) never delays a
// collection. A push that fails leaves the samples in the spool for the
// next try; the failure is logged when it starts and when it ends, not
// every second.
func (a *agent) monitor(ctx context.Context) {
	m := a.cfg.Monitor
	iv := m.Interval
	if iv <= 0 {
		iv = DefaultCollectInterval
	}
	kick := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.pushLoop(ctx, kick)
	}()
	tick := time.NewTicker(iv)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			<-done
			// One last try, so a clean stop sends what it holds.
			fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = m.Pusher.Flush(fctx)
			cancel()
			return
		case <-tick.C:
		}
		g := m.Registry.Collect(ctx, a.cfg.Now())
		m.mu.Lock()
		m.last = g
		m.mu.Unlock()
		if err := m.Pusher.Add(g, m.Registry.Meta()); err != nil {
			a.cfg.Log.Error("spool", "err", err)
		}
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// pushLoop sends the spool each time it is kicked.
func (a *agent) pushLoop(ctx context.Context, kick <-chan struct{}) {
	m := a.cfg.Monitor
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		err := m.Pusher.Flush(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			groups, bytes, _ := m.Pusher.Stats()
			a.cfg.Log.Warn("push failed: spooling until the controller is back", "err", err, "groups", groups, "bytes", bytes)
			failing = true
		case err == nil && failing:
			_, _, dropped := m.Pusher.Stats()
			a.cfg.Log.Info("push resumed: spool sent", "dropped_samples", dropped)
			failing = false
		}
	}
}
