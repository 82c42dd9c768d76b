package service

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/identity"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// checkName checks an endpoint's name.
func checkName(field, name string) error {
	if name == "" || len(name) > 64 || strings.ContainsAny(name, ":/\\ \t\r\n\x00") {
		return invalid(field, "%s %q: want a name without spaces, colons or slashes, at most 64 bytes", field, name)
	}
	return nil
}

// Heartbeat registers a data node of an endpoint or renews its lease, and
// its running tasks' leases with it. A node registers only for an
// endpoint that lists it (endpoints.go) and for no other while it is
// registered; a node of another site is refused. A node presenting an
// admin's token acts for the admin: it may create its endpoint at its
// site, join it and move to it (the testbed and scripts start nodes so).
func (s *Service) Heartbeat(ctx context.Context, a identity.Actor, node string, hb apiv1.DataNodeHeartbeat) (apiv1.DataNodeWork, error) {
	if err := a.ActsFor(node); err != nil {
		return apiv1.DataNodeWork{}, err
	}
	topo := s.network()
	if topo == nil {
		return apiv1.DataNodeWork{}, reserve.ErrNoTopology
	}
	if role, ok := topo.NodeRole(node); !ok {
		return apiv1.DataNodeWork{}, invalid("node", "node %q is not in the topology", node)
	} else if role != reserve.NodeHost {
		return apiv1.DataNodeWork{}, invalid("node", "node %s is a %s: a data node runs on a host", node, role)
	}
	if err := checkName("endpoint", hb.Endpoint); err != nil {
		return apiv1.DataNodeWork{}, err
	}
	if _, port, err := net.SplitHostPort(hb.Address); err != nil || port == "" || port == "0" {
		return apiv1.DataNodeWork{}, invalid("address", "address %q: want HOST:PORT where the node's server listens", hb.Address)
	}
	lease := DefaultLease
	if hb.Lease != "" {
		d, err := time.ParseDuration(hb.Lease)
		if err != nil || d <= 0 || d > MaxLease {
			return apiv1.DataNodeWork{}, invalid("lease", "lease %q: want a duration up to %s", hb.Lease, MaxLease)
		}
		lease = d
	}
	if len(hb.Granted) > MaxGranted {
		return apiv1.DataNodeWork{}, invalid("granted", "%d attempts granted, at most %d", len(hb.Granted), MaxGranted)
	}
	if len(hb.Broken) > MaxGranted {
		return apiv1.DataNodeWork{}, invalid("broken", "%d broken attempts, at most %d", len(hb.Broken), MaxGranted)
	}
	if hb.FreeBytes != nil && *hb.FreeBytes < 0 {
		return apiv1.DataNodeWork{}, invalid("free_bytes", "free_bytes %d: want 0 or more", *hb.FreeBytes)
	}
	site := topo.NodeSite(node)

	s.alive.heard(node, s.now())
	s.alive.beats(node, lease/3)
	s.lock()
	defer s.unlock()
	delete(s.lostWhy, node)
	now := s.now()
	exp := now.Add(lease)
	work := apiv1.DataNodeWork{Node: node, LeaseExpires: exp, GrantKey: s.pub,
		ReceiptKey: base64.StdEncoding.EncodeToString(s.nodeSecret(node))}
	joined := false // a node new or back: its pairs may take tasks
	err := s.tx(ctx, func(tx store.Store) error {
		admin := a.Role == reserve.RoleAdmin
		ep, err := tx.GetEndpoint(ctx, hb.Endpoint)
		switch {
		case errors.Is(err, reserve.ErrNotFound) && !admin:
			return forbidden("endpoint %s does not exist: an admin creates it and lists its data nodes (lightpath endpoint add %s --site %s --node %s)", hb.Endpoint, hb.Endpoint, site, node)
		case errors.Is(err, reserve.ErrNotFound):
			ep = transfer.Endpoint{Name: hb.Endpoint, Site: site, CreatedAt: now, Members: []string{node}}
			if err := tx.PutEndpoint(ctx, ep); err != nil {
				return err
			}
			if err := tx.AppendAudit(ctx, store.AuditEntry{At: now, Who: a.Name, What: "add endpoint " + ep.Name, Detail: "site " + site + ", nodes " + node + " (by its data node's heartbeat)"}); err != nil {
				return err
			}
		case err != nil:
			return err
		case ep.Site != "" && ep.Site != site:
			return forbidden("node %s is at site %s, and endpoint %s at site %s: the data nodes of an endpoint see the same files, so they are of one site", node, site, ep.Name, ep.Site)
		case !slices.Contains(ep.Members, node) && !admin:
			return forbidden("endpoint %s does not list node %s as a data node: an admin adds it (lightpath endpoint add %s --site %s --node %s)", ep.Name, node, ep.Name, ep.Site, node)
		case !slices.Contains(ep.Members, node):
			ep.Members = members(ep.Members, node)
			if err := tx.PutEndpoint(ctx, ep); err != nil {
				return err
			}
			if err := tx.AppendAudit(ctx, store.AuditEntry{At: now, Who: a.Name, What: "add data nodes to endpoint " + ep.Name, Detail: node + " (by its heartbeat)"}); err != nil {
				return err
			}
		}
		dn := transfer.DataNode{Node: node, Endpoint: hb.Endpoint, Address: hb.Address, MaxRateBps: hb.MaxRateBps, Parts: hb.Parts, RegisteredAt: now, LeaseExpires: exp}
		if hb.FreeBytes != nil {
			dn.FreeBytes, dn.FreeBytesAt = *hb.FreeBytes, now
		}
		nodes, err := tx.ListDataNodes(ctx)
		if err != nil {
			return err
		}
		joined = true
		for _, n := range nodes {
			if n.Node != node {
				continue
			}
			if n.Endpoint != hb.Endpoint {
				if !admin {
					return forbidden("node %s is a data node of endpoint %s: it does not move to %s by itself (an admin removes it first: lightpath endpoint remove %s --node %s)", node, n.Endpoint, hb.Endpoint, n.Endpoint, node)
				}
				if err := s.moveOut(ctx, tx, n, a.Name, now); err != nil {
					return err
				}
				continue
			}
			if now.Before(n.LeaseExpires) {
				dn.RegisteredAt = n.RegisteredAt
				joined = false
			}
			if hb.FreeBytes == nil {
				// A heartbeat that could not say keeps the last word.
				dn.FreeBytes, dn.FreeBytesAt = n.FreeBytes, n.FreeBytesAt
			}
		}
		if err := tx.PutDataNode(ctx, dn); err != nil {
			return err
		}
		tasks, err := tx.ListTasks(ctx, store.TaskFilter{Node: node, States: []string{transfer.TaskActive, transfer.TaskQueued}})
		if err != nil {
			return err
		}
		progress := map[string]apiv1.TaskProgress{}
		for _, p := range hb.Tasks {
			progress[p.Task] = p
		}
		for _, t := range tasks {
			if t.Kind == transfer.TaskCopy && t.To == node && t.Attempt > 0 {
				work.Fences = append(work.Fences, apiv1.Fence{Task: t.ID, Attempt: t.Attempt})
			}
			if t.State != transfer.TaskActive || t.From != node {
				continue
			}
			// A task the node no longer runs (it restarted and lost it)
			// is left to lapse and go to another node; one claimed
			// within the lease may not be in this heartbeat yet.
			p, ok := progress[t.ID]
			if (!ok || p.Attempt != t.Attempt) && t.ClaimedAt.Before(now.Add(-lease)) {
				continue
			}
			t.LeaseExpires = exp
			if ok && p.Attempt == t.Attempt {
				// Bounded by the task, as a report's figures are.
				if p.BytesDone, p.ThroughputBps, err = checkFigures("tasks", p.BytesDone, p.ThroughputBps, boundsOf(topo, t)); err != nil {
					return err
				}
				if p.BytesDone > t.BytesDone {
					if j, err := tx.GetJob(ctx, t.Job); err == nil {
						s.observe(ctx, tx, j, t, p.BytesDone-t.BytesDone, 0, 0, now)
					}
					t.BytesDone = p.BytesDone
				}
				s.noteRate(topo, t, p.ThroughputBps, exp)
			}
			if err := tx.UpdateTask(ctx, t); err != nil {
				return err
			}
		}
		// The node's running copy tasks at their current share of their
		// pair's booking (a task of the pair may have ended since).
		repaced := map[string]bool{}
		for _, t := range tasks {
			if t.Kind != transfer.TaskCopy || t.State != transfer.TaskActive || t.From != node || repaced[t.Job] {
				continue
			}
			repaced[t.Job] = true
			j, err := tx.GetJob(ctx, t.Job)
			if err != nil {
				return err
			}
			rates, err := s.repace(ctx, tx, j, node)
			if err != nil {
				return err
			}
			work.Rates = append(work.Rates, rates...)
		}
		// The attempts the node's server runs sessions under that are no
		// longer current are fenced one past, which cuts those sessions:
		// their task ended, failed, was cancelled or re-attempted since
		// the server confirmed them (grant.Verifier.Confirm).
		for _, g := range hb.Granted {
			if g.Task == "" || g.Attempt < 1 {
				continue
			}
			st, err := s.grantStatus(ctx, tx, node, g.Task, g.Attempt)
			if err != nil {
				return err
			}
			if !st.Current {
				work.Fences = append(work.Fences, apiv1.Fence{Task: g.Task, Attempt: g.Attempt + 1})
			}
		}
		// The pushing nodes of the attempts whose sessions broke here
		// are suspected of being dead (liveness.go).
		for _, b := range hb.Broken {
			t, err := tx.GetTask(ctx, b.Task)
			if errors.Is(err, reserve.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			if t.Kind == transfer.TaskCopy && t.State == transfer.TaskActive && t.Attempt == b.Attempt && t.To == node && t.From != "" && t.From != node {
				s.alive.suspectNode(t.From, now, SourceQuiet, "its push of task "+t.ID+" to "+node+" broke")
			}
		}
		for _, p := range hb.Tasks {
			t, err := tx.GetTask(ctx, p.Task)
			if errors.Is(err, reserve.ErrNotFound) {
				work.Cancel = append(work.Cancel, p.Task)
				continue
			} else if err != nil {
				return err
			}
			if t.State != transfer.TaskActive || t.From != node || t.Attempt != p.Attempt {
				work.Cancel = append(work.Cancel, p.Task)
				delete(s.rates, t.ID)
			}
		}
		return nil
	})
	if err != nil {
		return apiv1.DataNodeWork{}, err
	}
	if joined {
		s.notify()
	}
	return work, nil
}

// noteRate keeps a running task's throughput for the aggregates.
func (s *Service) noteRate(topo Network, t transfer.Task, bps float64, until time.Time) {
	if bps < 0 {
		bps = 0
	}
	s.rates[t.ID] = taskRate{bps: bps, fromSite: topo.NodeSite(t.From), toSite: topo.NodeSite(t.To), until: until}
}

// liveNodes returns the data nodes with their Alive set, by endpoint.
func (s *Service) liveNodes(ctx context.Context, st store.Store, now time.Time) (all []transfer.DataNode, live map[string][]transfer.DataNode, err error) {
	all, err = st.ListDataNodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	live = map[string][]transfer.DataNode{}
	for i := range all {
		all[i].Alive = s.leaseLive(all[i].LeaseExpires, now)
		if all[i].Alive {
			live[all[i].Endpoint] = append(live[all[i].Endpoint], all[i])
		}
	}
	return all, live, nil
}

// Endpoints lists every endpoint with its data nodes, alive or gone.
func (s *Service) Endpoints(ctx context.Context, a identity.Actor) ([]transfer.Endpoint, error) {
	eps, err := s.st.ListEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	all, _, err := s.liveNodes(ctx, s.st, s.now())
	if err != nil {
		return nil, err
	}
	for i := range eps {
		for _, n := range all {
			if n.Endpoint == eps[i].Name {
				eps[i].Nodes = append(eps[i].Nodes, n)
			}
		}
	}
	if eps == nil {
		eps = []transfer.Endpoint{}
	}
	return eps, nil
}

// Allow changes who may use an endpoint (admins only).
func (s *Service) Allow(ctx context.Context, a identity.Actor, name string, req apiv1.EndpointAllow) (transfer.Endpoint, error) {
	if a.Role != reserve.RoleAdmin {
		return transfer.Endpoint{}, forbidden("only admins say who may use an endpoint")
	}
	if len(req.Users) == 0 && len(req.Projects) == 0 {
		return transfer.Endpoint{}, invalid("users", "give the users or projects to allow (or to remove)")
	}
	for _, u := range append(slices.Clone(req.Users), req.Projects...) {
		if u == "" || len(u) > 64 || strings.ContainsAny(u, " \t\r\n\x00,") {
			return transfer.Endpoint{}, invalid("users", "%q is not a user or project name", u)
		}
	}
	return s.changeEndpoint(ctx, name, func(tx store.Store, ep *transfer.Endpoint) error {
		edit := func(have, change []string) []string {
			for _, x := range change {
				i := slices.Index(have, x)
				switch {
				case req.Remove && i >= 0:
					have = slices.Delete(have, i, i+1)
				case !req.Remove && i < 0:
					have = append(have, x)
				}
			}
			slices.Sort(have)
			return have
		}
		ep.Users = edit(ep.Users, req.Users)
		ep.Projects = edit(ep.Projects, req.Projects)
		if err := tx.PutEndpoint(ctx, *ep); err != nil {
			return err
		}
		who := strings.Join(append(slices.Clone(req.Users), req.Projects...), ", ")
		verb := "allow "
		if req.Remove {
			verb = "disallow "
		}
		return tx.AppendAudit(ctx, store.AuditEntry{At: s.now(), Who: a.Name, What: verb + "endpoint " + name, Detail: who})
	})
}

// mayUse reports whether a may use an endpoint for a job of project.
func mayUse(a identity.Actor, ep transfer.Endpoint, project string) error {
	if a.SeesAll() || slices.Contains(ep.Users, a.Name) {
		return nil
	}
	for _, p := range a.Projects {
		if slices.Contains(ep.Projects, p) && (project == "" || project == p) {
			return nil
		}
	}
	return forbidden("%s may not use endpoint %s (an admin allows it: lightpath endpoint allow %s --user %s)", a.Name, ep.Name, ep.Name, a.Name)
}

// pushEnds are the two ends of a push from node from to data node to, as
// the topology knows them: src is from's address of dst's family, dst the
// destination server's host when it is one of its node's addresses (else
// the node's first IPv4 address). exact says the server's host is its
// node's address, so a push that leaves from src matches a flow spec of
// src and dst.
type pushEnds struct {
	src, dst, port string
	v6, exact      bool
}

func endsOf(topo Network, from string, to transfer.DataNode) (pushEnds, error) {
	host, port, err := net.SplitHostPort(to.Address)
	if err != nil {
		return pushEnds{}, err
	}
	if _, err := strconv.Atoi(port); err != nil {
		return pushEnds{}, fmt.Errorf("port %q", port)
	}
	e := pushEnds{dst: host, port: port, v6: strings.Contains(host, ":")}
	for _, p := range topo.NodeAddrs(to.Node) {
		if p.Addr().String() == host {
			e.exact = true
		}
	}
	if !e.exact {
		e.dst = ""
		for _, p := range topo.NodeAddrs(to.Node) {
			if p.Addr().Is4() {
				e.dst, e.v6 = p.Addr().String(), false
				break
			}
		}
	}
	if e.dst == "" {
		return pushEnds{}, fmt.Errorf("node %s has no IPv4 address in the topology", to.Node)
	}
	for _, p := range topo.NodeAddrs(from) {
		if p.Addr().Is6() == e.v6 {
			e.src = p.Addr().String()
			break
		}
	}
	if e.src == "" {
		return pushEnds{}, fmt.Errorf("node %s has no address of the family of %s", from, e.dst)
	}
	return e, nil
}

// flowSpec is the flow of a push from node from to data node to: from
// the source's topology address to the destination server's address; with
// udp, the data's udp flow to the same port as well.
func flowSpec(topo Network, from string, to transfer.DataNode, udp bool) (string, error) {
	e, err := endsOf(topo, from, to)
	if err != nil {
		return "", err
	}
	dst := e.dst + ":" + e.port
	if e.v6 {
		dst = "[" + e.dst + "]:" + e.port
	}
	fs := fmt.Sprintf("tcp %s > %s", e.src, dst)
	if udp {
		fs += fmt.Sprintf(", udp %s > %s", e.src, dst)
	}
	return fs, nil
}

// sourceAddr is the address a push from node from to data node to must
// leave from for its pair's flow spec to match it, or "" when the spec
// cannot name the push exactly (the server is reached at an address the
// topology does not give its node) and the kernel may choose.
func sourceAddr(topo Network, from string, to transfer.DataNode) string {
	if topo == nil {
		return ""
	}
	e, err := endsOf(topo, from, to)
	if err != nil || !e.exact {
		return ""
	}
	return e.src
}
