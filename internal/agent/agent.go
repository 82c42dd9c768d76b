// Package agent is Lightpath's node agent: it runs in one node's network
// namespace, registers with the controller and keeps a lease, and makes
// the node's kernel hold exactly its part of the live reservations that
// cross it (rate classes, DSCP marking by flow, user or cgroup, policy
// routing, routes that carry the reserved path's MTU on the end hosts):
// computed as a plan (plan.go, pure), compared with what the kernel holds
// (Fetch) and mended (Apply), then reported to the controller. It probes
// the paths of the ACTIVE reservations it ends (probe.go) and withdraws
// its steering from a path that drops everything.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/topology"
)

// Config is what an agent runs with.
type Config struct {
	Client *client.Client
	// Node is the node whose kernel this agent owns.
	Node string
	// Lease is how long a heartbeat keeps the agent alive at the
	// controller; Interval how often it reconciles and heartbeats (at
	// most a third of the lease).
	Lease, Interval time.Duration
	// NetNS is the network namespace to manage (a path such as
	// /run/netns/NAME); empty means the agent's own.
	NetNS string
	Log   *slog.Logger
	Now   func() time.Time
	// Monitor, when set, collects metrics and pushes them to the
	// controller's repository.
	Monitor *Monitoring
}

// Defaults.
const (
	DefaultLease    = 15 * time.Second
	DefaultInterval = 2 * time.Second
)

type agent struct {
	cfg      Config
	nsFd     int
	topo     *topology.Topology
	topoHash string
	devs     []string
	devLink  map[string]string // device → its link
	// linkDown is what the controller was last told of each link here.
	linkDown map[string]bool
	// reported remembers the reports sent, by reservation and version of
	// its path, so each is sent once.
	reported map[string]string
	watched  *Watched
	// probes probes the reservations' paths (nil: not probed); holes
	// remembers, by path (probeTarget.Key), the link reported down for
	// it, and ups the links reported up (by path and link) for a
	// reservation degraded for a blackhole that this agent did not report.
	probes *prober
	holes  map[string]string
	ups    map[[2]string]bool
}

// Run reconciles until ctx ends: at every interval, at every start and
// end of a reservation it serves, and whenever the event stream says a
// reservation changed. On the way out it leaves the kernel as it is: a
// restarted agent takes over what it finds, and the controller's lease
// tells everyone the agent is gone.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Node == "" || cfg.Client == nil {
		return errors.New("agent: a node and a controller are required")
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	cfg.Interval = min(cfg.Interval, cfg.Lease/3)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ns := cfg.NetNS
	if ns == "" {
		ns = "/proc/self/ns/net"
	}
	f, err := os.Open(ns)
	if err != nil {
		return fmt.Errorf("agent: open network namespace: %w", err)
	}
	defer f.Close()
	a := &agent{cfg: cfg, nsFd: int(f.Fd()), reported: map[string]string{}, linkDown: map[string]bool{}, holes: map[string]string{}, ups: map[[2]string]bool{}}

	changed := make(chan struct{}, 1)
	go a.watch(ctx, changed)
	a.watched = &Watched{}
	if cfg.Monitor != nil {
		if cfg.Monitor.Watched != nil {
			a.watched = cfg.Monitor.Watched
		}
		if cfg.Monitor.Listen != "" {
			if err := cfg.Monitor.serve(ctx, cfg.Log); err != nil {
				return fmt.Errorf("agent: %w", err)
			}
		}
		done := make(chan struct{})
		defer func() { <-done }()
		go func() { defer close(done); a.monitor(ctx) }()
	}
	if err := watchLinks(ctx, a.nsFd, changed); err != nil {
		cfg.Log.Warn("links are checked at every round only", "err", err)
	}
	if p, err := startProber(ctx, cfg.NetNS, cfg.Node, cfg.Log, changed); err != nil {
		cfg.Log.Warn("paths are not probed: a blackhole goes unnoticed", "err", err)
	} else {
		a.probes = p
	}
	for {
		next, err := a.reconcile(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// A token revoked or expired stays so: an admin enrols the
			// node again, and an agent whose token went elsewhere stops.
			if ae := (*client.APIError)(nil); errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
				return fmt.Errorf("the controller no longer takes node %s's token (revoked or expired; an admin enrols the node again): %w", cfg.Node, err)
			}
			cfg.Log.Warn("reconcile", "err", err)
		}
		wait := cfg.Interval
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(cfg.Now()), 10*time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// watch follows the event stream and signals changed on every event, so a
// reservation created or cancelled in the window is acted on at once;
// the interval covers a broken stream.
func (a *agent) watch(ctx context.Context, changed chan<- struct{}) {
	a.cfg.Client.FollowEvents(ctx, client.Follow{
		Persist: true,
		Event: func(apiv1.Event) (bool, error) {
			select {
			case changed <- struct{}{}:
			default:
			}
			return false, nil
		},
	})
}

// reconcile runs one round: heartbeat, plan, compare, mend, report. It
// returns the next instant at which the plan changes by itself (a start
// or an end), or the zero time.
func (a *agent) reconcile(ctx context.Context) (time.Time, error) {
	work, err := a.cfg.Client.Heartbeat(ctx, a.cfg.Node, a.cfg.Lease)
	if err != nil {
		return time.Time{}, fmt.Errorf("heartbeat: %w", err)
	}
	if work.TopologySHA256 != a.topoHash || a.topo == nil {
		tp, err := a.cfg.Client.Topology(ctx)
		if err != nil {
			return time.Time{}, fmt.Errorf("read topology: %w", err)
		}
		t, err := topology.Parse(tp.Name, []byte(tp.YAML))
		if err != nil {
			return time.Time{}, fmt.Errorf("parse topology: %w", err)
		}
		a.topo, a.topoHash = t, work.TopologySHA256
		a.devs, a.devLink = nodeDevs(t, a.cfg.Node)
		a.cfg.Log.Info("topology", "name", tp.Name, "devices", a.devs)
	}
	a.watched.set(a.topo, work.Reservations)
	now := a.cfg.Now()
	want, err := Desired(a.topo, a.cfg.Node, work.Reservations, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("plan: %w", err)
	}
	down, err := carrierDown(a.nsFd, a.devs)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the links: %w", err)
	}
	want = WithoutDown(want, down)
	var paths []pathState
	if a.probes != nil {
		a.probes.set(probeTargets(a.topo, a.cfg.Node, work.Reservations, now))
		paths = a.probes.states()
	}
	want = WithoutBroken(want, brokenDSCPs(paths))
	want, cgErrs := WithCgroups(want)
	for dscp, err := range cgErrs {
		a.cfg.Log.Warn("marking by cgroup", "dscp", dscp, "err", err)
	}
	a.reportLinks(ctx, down)
	have, err := Fetch(a.nsFd, a.devs)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the kernel: %w", err)
	}
	ch := Diff(have, want)
	applyErr := error(nil)
	if !ch.Empty() {
		a.cfg.Log.Info("mend", "changes", ch.String())
		applyErr = Apply(a.nsFd, ch)
		if applyErr != nil {
			a.cfg.Log.Error("apply", "err", applyErr)
		}
	}
	a.reportPaths(ctx, paths, work.Reservations)
	var next time.Time
	for _, r := range work.Reservations {
		for _, t := range []time.Time{r.Start, r.End} {
			if t.After(now) && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
		err := applyErr
		if e := cgErrs[r.DSCP]; e != nil && r.From == a.cfg.Node {
			err = errors.Join(err, e)
		}
		a.report(ctx, r, now, err)
	}
	return next, nil
}

// report tells the controller this node's part of r is in place (or
// failed), once per path of r, when r is in its window and waits for this
// node.
func (a *agent) report(ctx context.Context, r reserve.Reservation, now time.Time, applyErr error) {
	node := a.cfg.Node
	if !slices.Contains(r.ManagedNodes, node) || slices.Contains(r.Provisioned, node) {
		return
	}
	if (r.State != reserve.StateReserved && r.State != reserve.StateActive) || now.Before(r.Start) || !now.Before(r.End) {
		return
	}
	key := fmt.Sprint(r.Path)
	if a.reported[r.ID] == key {
		return
	}
	failure := ""
	if applyErr != nil {
		failure = applyErr.Error()
	}
	if _, err := a.cfg.Client.ReportNode(ctx, r.ID, node, failure); err != nil {
		a.cfg.Log.Warn("report", "id", r.ID, "err", err)
		return
	}
	a.reported[r.ID] = key
	a.cfg.Log.Info("reported", "id", r.ID, "provisioned", failure == "")
}

// reportLinks tells the controller of every link at this node whose state
// changed since it last did: down (the controller moves the reservations
// off it) or up again.
func (a *agent) reportLinks(ctx context.Context, down []string) {
	for dev, link := range a.devLink {
		isDown := slices.Contains(down, dev)
		if was, known := a.linkDown[link]; known && was == isDown || !known && !isDown {
			continue
		}
		why := ""
		if isDown {
			why = "no carrier on " + dev + " at " + a.cfg.Node
		}
		if _, err := a.cfg.Client.ReportLink(ctx, a.cfg.Node, link, !isDown, why); err != nil {
			a.cfg.Log.Warn("report link", "link", link, "down", isDown, "err", err)
			continue
		}
		a.linkDown[link] = isDown
		a.cfg.Log.Info("link", "link", link, "down", isDown)
	}
}

// reportPaths tells the controller of the paths whose probes changed
// state: for a path gone down, a link of it (blame) down, with the reason
// "blackhole: ..."; for a path back, that link up again, and so the links
// its reservation (in rs) is degraded for by a blackhole found by probes
// (blackholed) once the path is healthy. A path no longer probed (its
// reservation moved or over) is forgotten.
func (a *agent) reportPaths(ctx context.Context, paths []pathState, rs []reserve.Reservation) {
	cleared := map[string]bool{}
	for _, s := range paths {
		if !s.Down && s.Answered {
			for _, h := range s.Path {
				cleared[h.Link] = true
			}
		}
	}
	probed := map[string]bool{}
	for _, s := range paths {
		probed[s.Key] = true
		link, reported := a.holes[s.Key]
		switch {
		case s.Down && !reported:
			link = blame(a.topo, s.Path, cleared)
			why := blackholeReason(s.probeTarget, a.cfg.Node)
			if _, err := a.cfg.Client.ReportLink(ctx, a.cfg.Node, link, false, why); err != nil {
				a.cfg.Log.Warn("report link", "link", link, "down", true, "err", err)
				continue
			}
			a.holes[s.Key] = link
			a.cfg.Log.Info("link", "link", link, "down", true, "why", why)
		case !s.Down && reported:
			if _, err := a.cfg.Client.ReportLink(ctx, a.cfg.Node, link, true, ""); err != nil {
				a.cfg.Log.Warn("report link", "link", link, "down", false, "err", err)
				continue
			}
			delete(a.holes, s.Key)
			a.cfg.Log.Info("link", "link", link, "down", false, "why", "probes answered on path "+pathString(s.Path))
		case s.Healthy && !reported:
			i := slices.IndexFunc(rs, func(r reserve.Reservation) bool { return r.ID == s.ID })
			if i < 0 {
				continue
			}
			for _, link := range blackholed(rs[i]) {
				if k := [2]string{s.Key, link}; !a.ups[k] {
					if _, err := a.cfg.Client.ReportLink(ctx, a.cfg.Node, link, true, ""); err != nil {
						a.cfg.Log.Warn("report link", "link", link, "down", false, "err", err)
						continue
					}
					a.ups[k] = true
					a.cfg.Log.Info("link", "link", link, "down", false, "why", "probes answered on path "+pathString(s.Path)+", degraded for a blackhole")
				}
			}
		}
	}
	for k := range a.holes {
		if !probed[k] {
			delete(a.holes, k)
		}
	}
	for k := range a.ups {
		if !probed[k[0]] {
			delete(a.ups, k)
		}
	}
}

// brokenDSCPs lists the DSCPs of the paths that are down.
func brokenDSCPs(paths []pathState) []uint8 {
	var out []uint8
	for _, s := range paths {
		if s.Down {
			out = append(out, s.DSCP)
		}
	}
	return out
}

// nodeDevs lists the node's link-end devices (where its classes go) and
// the link of each.
func nodeDevs(t *topology.Topology, node string) ([]string, map[string]string) {
	var out []string
	links := map[string]string{}
	for _, l := range t.Links {
		for _, e := range []topology.End{l.A, l.B} {
			if e.Node == node {
				out = append(out, e.Dev)
				links[e.Dev] = l.Name
			}
		}
	}
	return out, links
}
