package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/identity"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// Which data nodes serve an endpoint is an admin's decision: a node's
// files receive other users' data, so a node that named an endpoint
// would be handed its jobs' files. An admin creates an endpoint and lists
// its nodes (AddEndpoint); a node then registers for it with a token
// bound to it (Heartbeat), and only for it.

// AddEndpoint creates an endpoint at a site with the nodes that may serve
// it, or adds nodes to an endpoint of that site (admins only). created
// says it is new.
func (s *Service) AddEndpoint(ctx context.Context, a identity.Actor, req apiv1.EndpointAdd) (ep transfer.Endpoint, created bool, err error) {
	if a.Role != reserve.RoleAdmin {
		return transfer.Endpoint{}, false, forbidden("only admins add endpoints and say which data nodes serve them")
	}
	if err := checkName("name", req.Name); err != nil {
		return transfer.Endpoint{}, false, err
	}
	topo := s.network()
	if topo == nil {
		return transfer.Endpoint{}, false, reserve.ErrNoTopology
	}
	if req.Site == "" || !slices.Contains(topo.SiteNames(), req.Site) {
		return transfer.Endpoint{}, false, invalid("site", "site %q is not in the topology (sites: %s)", req.Site, strings.Join(topo.SiteNames(), ", "))
	}
	for _, n := range req.Nodes {
		role, ok := topo.NodeRole(n)
		switch {
		case !ok:
			return transfer.Endpoint{}, false, invalid("nodes", "node %q is not in the topology", n)
		case role != reserve.NodeHost:
			return transfer.Endpoint{}, false, invalid("nodes", "node %s is a %s: a data node runs on a host", n, role)
		case topo.NodeSite(n) != req.Site:
			return transfer.Endpoint{}, false, invalid("nodes", "node %s is at site %s, not %s: the data nodes of an endpoint see the same files, so they are of its site", n, topo.NodeSite(n), req.Site)
		}
	}
	s.lock()
	defer s.unlock()
	now := s.now()
	err = s.tx(ctx, func(tx store.Store) error {
		var err error
		ep, err = tx.GetEndpoint(ctx, req.Name)
		switch {
		case errors.Is(err, reserve.ErrNotFound):
			ep, created = transfer.Endpoint{Name: req.Name, Site: req.Site, CreatedAt: now}, true
		case err != nil:
			return err
		case ep.Site != "" && ep.Site != req.Site:
			return conflict("endpoint %s exists at site %s, not %s", ep.Name, ep.Site, req.Site)
		default:
			ep.Site = req.Site
		}
		ep.Members = members(ep.Members, req.Nodes...)
		if err := tx.PutEndpoint(ctx, ep); err != nil {
			return err
		}
		what := "add endpoint "
		if !created {
			what = "add data nodes to endpoint "
		}
		return tx.AppendAudit(ctx, store.AuditEntry{At: now, Who: a.Name, What: what + ep.Name, Detail: "site " + ep.Site + ", nodes " + strings.Join(ep.Members, ",")})
	})
	return ep, created, err
}

// RemoveEndpoint removes an endpoint, or with nodes only those nodes from
// it (admins only): their registrations go, so they take no more tasks,
// and their next heartbeats are refused. An endpoint that unfinished jobs
// use is kept.
func (s *Service) RemoveEndpoint(ctx context.Context, a identity.Actor, name string, nodes []string) (transfer.Endpoint, error) {
	if a.Role != reserve.RoleAdmin {
		return transfer.Endpoint{}, forbidden("only admins remove endpoints or their data nodes")
	}
	return s.changeEndpoint(ctx, name, func(tx store.Store, ep *transfer.Endpoint) error {
		now := s.now()
		if len(nodes) > 0 {
			for _, n := range nodes {
				if !slices.Contains(ep.Members, n) {
					return invalid("nodes", "endpoint %s does not list node %s (it lists %s)", name, n, orNone(ep.Members))
				}
			}
			ep.Members = slices.DeleteFunc(ep.Members, func(n string) bool { return slices.Contains(nodes, n) })
			if err := tx.PutEndpoint(ctx, *ep); err != nil {
				return err
			}
			if err := s.unregister(ctx, tx, name, nodes); err != nil {
				return err
			}
			return tx.AppendAudit(ctx, store.AuditEntry{At: now, Who: a.Name, What: "remove data nodes from endpoint " + name, Detail: strings.Join(nodes, ",")})
		}
		if busy, err := jobsUsing(ctx, tx, name); err != nil {
			return err
		} else if len(busy) > 0 {
			return conflict("endpoint %s is used by %d unfinished jobs (%s): cancel them or let them end first", name, len(busy), strings.Join(busy[:min(len(busy), 3)], ", "))
		}
		if err := tx.DeleteEndpoint(ctx, name); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, store.AuditEntry{At: now, Who: a.Name, What: "remove endpoint " + name})
	})
}

// changeEndpoint runs change on endpoint name, read in a transaction
// under mu (404 when there is none), and returns it as change left it.
func (s *Service) changeEndpoint(ctx context.Context, name string, change func(tx store.Store, ep *transfer.Endpoint) error) (transfer.Endpoint, error) {
	s.lock()
	defer s.unlock()
	var ep transfer.Endpoint
	err := s.tx(ctx, func(tx store.Store) error {
		var err error
		ep, err = tx.GetEndpoint(ctx, name)
		if errors.Is(err, reserve.ErrNotFound) {
			return notFound("endpoint", name)
		} else if err != nil {
			return err
		}
		return change(tx, &ep)
	})
	return ep, err
}

// moveOut takes node n out of its endpoint for an admin's data node that
// registers for another: its registration and its place in the list.
func (s *Service) moveOut(ctx context.Context, tx store.Store, n transfer.DataNode, who string, now time.Time) error {
	if err := tx.DeleteDataNode(ctx, n.Node); err != nil {
		return err
	}
	if ep, err := tx.GetEndpoint(ctx, n.Endpoint); err == nil {
		ep.Members = slices.DeleteFunc(ep.Members, func(m string) bool { return m == n.Node })
		if err := tx.PutEndpoint(ctx, ep); err != nil {
			return err
		}
	} else if !errors.Is(err, reserve.ErrNotFound) {
		return err
	}
	return tx.AppendAudit(ctx, store.AuditEntry{At: now, Who: who, What: "remove data nodes from endpoint " + n.Endpoint, Detail: n.Node + " (it registered for another endpoint with an admin's token)"})
}

// unregister deletes the registrations of nodes for endpoint ep.
func (s *Service) unregister(ctx context.Context, tx store.Store, ep string, nodes []string) error {
	all, err := tx.ListDataNodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range all {
		if n.Endpoint == ep && slices.Contains(nodes, n.Node) {
			if err := tx.DeleteDataNode(ctx, n.Node); err != nil {
				return err
			}
		}
	}
	return nil
}

// jobsUsing returns the unfinished jobs with endpoint name as a source or
// the destination.
func jobsUsing(ctx context.Context, tx store.Store, name string) ([]string, error) {
	js, err := tx.ListJobs(ctx, store.JobFilter{States: []string{transfer.JobQueued, transfer.JobScheduled, transfer.JobActive}})
	if err != nil {
		return nil, fmt.Errorf("list unfinished jobs: %w", err)
	}
	var out []string
	for _, j := range js {
		for _, l := range append(slices.Clone(j.Sources), j.Destination) {
			if ep, _, _ := strings.Cut(l, ":"); ep == name {
				out = append(out, j.ID)
				break
			}
		}
	}
	return out, nil
}

// members adds nodes to a list of members, sorted and without repeats.
func members(have []string, nodes ...string) []string {
	out := append(slices.Clone(have), nodes...)
	slices.Sort(out)
	return slices.Compact(out)
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ",")
}
