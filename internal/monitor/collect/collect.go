// Package collect holds the agents' metric collectors and the registry
// that runs them, in the manner of node_exporter's collector package: each
// collector has a name and its own --collector.<name> flag, and every
// round the registry reports, besides the collectors' own series, how long
// each took and whether it succeeded. Collectors read the kernel of the
// agent's network namespace (netlink, inet_diag), /proc and the network
// itself (probes); a collector kept elsewhere joins them through a Maker
// (the testbed emulator's, package collect/emulator, which the command
// line adds: so neither this package nor the agent links the testbed).
// None of them adds a node label, which the controller adds when it stores
// a push.
package collect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/topology"
)

// Env is what collectors may use.
type Env struct {
	Node    string // the node this agent runs for
	Testbed string // testbed name, "" outside a testbed (for the emulator's collector)
	// NetNS is the path of the network namespace to collect in (such as
	// /run/netns/lp-two-site-ra); "" is the caller's own.
	NetNS string
	Topo  *topology.Topology // may be nil
	// Topology, when set, is read at every round instead of Topo: an
	// agent learns its topology from the controller after it starts.
	Topology func() *topology.Topology
	// Flows returns the flows of the live reservations on this node (set
	// by the agent); it may be nil.
	Flows func() []FlowMatch
	Log   *slog.Logger
}

// topo returns the topology in force, or nil.
func (e Env) topo() *topology.Topology {
	if e.Topology != nil {
		return e.Topology()
	}
	return e.Topo
}

// FlowMatch is one flow of a live reservation, as the tcp collector needs
// it: the reservation's DSCP and the server ports its flow spec names.
type FlowMatch struct {
	Reservation string
	DSCP        int
	Spec        string // the flow spec text
	Ports       []int  // server ports the spec names
}

// Collector is one source of metrics. Collect emits the points of one
// round and returns an error if the round failed (points emitted before
// the error are kept); it must return soon after ctx is done.
type Collector interface {
	Name() string
	Collect(ctx context.Context, emit func(monitor.Point)) error
}

// The registry's own series.
const (
	MetricDuration = "lightpath_agent_collector_duration_seconds"
	MetricSuccess  = "lightpath_agent_collector_success"
)

// DefaultTimeout bounds one collector's round.
const DefaultTimeout = 5 * time.Second

// entry is a collector with what the registry knows of it.
type entry struct {
	c       Collector
	help    string
	enabled bool
	meta    map[string]monitor.Meta
	// failed is the state last logged: a failing collector is logged once
	// when it starts failing and once when it recovers.
	failed bool
	closer func() error
}

// Registry holds every known collector and runs the enabled ones.
type Registry struct {
	// Timeout bounds each collector's round (DefaultTimeout if zero).
	Timeout time.Duration

	env     Env
	log     *slog.Logger
	mu      sync.Mutex // serialises Collect and guards entries' failed
	entries []*entry
}

// NewRegistry returns a registry of every built-in collector and those
// more makes (after them, in order), each enabled by its default: host,
// interfaces, htb and tcp always; probe when env.Topo or env.Topology is
// given; the others as their Definition says.
func NewRegistry(env Env, more ...Maker) *Registry {
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{env: env, log: env.Log.With("component", "collect"), Timeout: DefaultTimeout}
	for _, d := range builtins(env) {
		r.add(d)
	}
	for _, m := range more {
		r.add(m(env))
	}
	return r
}

// Definition is how a collector describes itself to the registry.
type Definition struct {
	Collector Collector
	// Help is said by its --collector.NAME flag.
	Help string
	// Enabled is its default.
	Enabled bool
	// Meta is the type and help of every series it emits.
	Meta map[string]monitor.Meta
	// Close, when set, releases what it holds between rounds.
	Close func() error
}

// Maker makes the Definition of a collector kept outside this package for
// the agent's Env.
type Maker func(Env) Definition

func (r *Registry) add(d Definition) {
	r.entries = append(r.entries, &entry{c: d.Collector, help: d.Help, enabled: d.Enabled, meta: d.Meta, closer: d.Close})
}

func builtins(env Env) []Definition {
	return []Definition{
		newHost(env),
		newInterfaces(env),
		newHTB(env),
		newTCP(env),
		newProbe(env),
	}
}

// Flags registers one --collector.<name> flag per collector, defaulting
// to its enablement.
func (r *Registry) Flags(fs *pflag.FlagSet) {
	for _, e := range r.entries {
		fs.BoolVar(&e.enabled, "collector."+e.c.Name(), e.enabled, "collector "+e.c.Name()+": "+e.help)
	}
}

// EnableFrom takes from flags, a registry whose Flags were registered on
// fs and parsed, the setting of every --collector.NAME flag given on the
// command line; the others keep this registry's defaults (which depend on
// its Env: the emulator collector needs a testbed).
func (r *Registry) EnableFrom(flags *Registry, fs *pflag.FlagSet) {
	for _, fe := range flags.entries {
		if !fs.Changed("collector." + fe.c.Name()) {
			continue
		}
		for _, e := range r.entries {
			if e.c.Name() == fe.c.Name() {
				e.enabled = fe.enabled
			}
		}
	}
}

// Enabled lists the names of the enabled collectors.
func (r *Registry) Enabled() []string {
	var out []string
	for _, e := range r.entries {
		if e.enabled {
			out = append(out, e.c.Name())
		}
	}
	return out
}

// Collect runs every enabled collector concurrently, each within the
// registry's timeout, and returns their points and the registry's own in
// one group stamped now. A collector that fails or overruns reports
// success 0 (with what it emitted before failing); the others are not
// held up. One that ignores its context is abandoned, not waited for.
func (r *Registry) Collect(ctx context.Context, now time.Time) monitor.Group {
	r.mu.Lock()
	defer r.mu.Unlock()
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	type result struct {
		points []monitor.Point
		err    error
		took   time.Duration
	}
	var run []*entry
	for _, e := range r.entries {
		if e.enabled {
			run = append(run, e)
		}
	}
	done := make([]chan result, len(run))
	for i, e := range run {
		done[i] = make(chan result, 1)
		go func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var pts []monitor.Point
			start := time.Now()
			err := safeCollect(cctx, e.c, func(p monitor.Point) { pts = append(pts, p) })
			if err == nil && cctx.Err() != nil {
				err = fmt.Errorf("timed out after %v: %w", timeout, cctx.Err())
			}
			done[i] <- result{pts, err, time.Since(start)}
		}()
	}
	g := monitor.Group{T: now.UnixMilli()}
	// Grace beyond the timeout for a collector to notice its context.
	deadline := time.NewTimer(timeout + time.Second)
	defer deadline.Stop()
	for i, e := range run {
		var res result
		select {
		case res = <-done[i]:
		case <-deadline.C:
			res = result{err: fmt.Errorf("did not return within %v", timeout), took: timeout}
			// Every later collector that has not answered by now is abandoned too.
			deadline.Reset(0)
		}
		name := e.c.Name()
		g.Points = append(g.Points, res.points...)
		ok := 1.0
		if res.err != nil {
			ok = 0
		}
		g.Points = append(g.Points,
			monitor.Point{Name: MetricDuration, Labels: monitor.L("collector", name), V: res.took.Seconds()},
			monitor.Point{Name: MetricSuccess, Labels: monitor.L("collector", name), V: ok})
		switch {
		case res.err != nil && !e.failed:
			r.log.Warn("collector failed", "collector", name, "err", res.err)
		case res.err == nil && e.failed:
			r.log.Info("collector recovered", "collector", name)
		}
		e.failed = res.err != nil
	}
	return g
}

// safeCollect turns a collector's panic into its error, so that one bad
// collector cannot take the agent down.
func safeCollect(ctx context.Context, c Collector, emit func(monitor.Point)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return c.Collect(ctx, emit)
}

// Meta returns the type and help of every metric name the collectors
// (enabled or not) and the registry emit.
func (r *Registry) Meta() map[string]monitor.Meta {
	m := map[string]monitor.Meta{
		MetricDuration: {Type: monitor.Gauge, Help: "Seconds the collector's last round took."},
		MetricSuccess:  {Type: monitor.Gauge, Help: "1 if the collector's last round succeeded, 0 if it failed or timed out."},
	}
	for _, e := range r.entries {
		for k, v := range e.meta {
			m[k] = v
		}
	}
	return m
}

// Close releases what collectors hold between rounds (the probe's echo
// responder and sink).
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, e := range r.entries {
		if e.closer != nil {
			if err := e.closer(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", e.c.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// names lists the collectors' names, for tests and messages.
func (r *Registry) names() []string {
	var out []string
	for _, e := range r.entries {
		out = append(out, e.c.Name())
	}
	return slices.Clip(out)
}

// linkOfDev maps the node's link-end devices to their links, as the agent
// does.
func linkOfDev(t *topology.Topology, node string) map[string]string {
	m := map[string]string{}
	if t == nil {
		return m
	}
	for _, l := range t.Links {
		for _, e := range []topology.End{l.A, l.B} {
			if e.Node == node {
				m[e.Dev] = l.Name
			}
		}
	}
	return m
}

func counter(help string) monitor.Meta { return monitor.Meta{Type: monitor.Counter, Help: help} }
func gauge(help string) monitor.Meta   { return monitor.Meta{Type: monitor.Gauge, Help: help} }
