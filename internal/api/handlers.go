package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

func (s *Server) health(w http.ResponseWriter, r *http.Request, _ controller.Actor) error {
	v, err := s.c.Store().SchemaVersion(r.Context())
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	writeJSON(w, http.StatusOK, apiv1.Health{Status: "ok", Version: s.version, SchemaVersion: v, Store: s.c.StoreKind(), Now: s.c.Now().UTC(), Reservations: s.c.LiveCount(), Role: apiv1.RoleLeader})
	return nil
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request, _ controller.Actor) error {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
	return nil
}

func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, a controller.Actor) error {
	writeJSON(w, http.StatusOK, apiv1.Whoami{User: a.Name, Role: string(a.Role), Projects: nonNil(a.Projects), Node: a.Node})
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) getTopology(w http.ResponseWriter, r *http.Request, _ controller.Actor) error {
	out, err := topologyOf(s.c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// topologyOf is GET /api/v1/topology's answer.
func topologyOf(c *controller.Controller) (apiv1.Topology, error) {
	t := c.Topology()
	if t == nil {
		return apiv1.Topology{}, controller.ErrNoTopology
	}
	out := apiv1.Topology{Name: t.Name, YAML: t.YAML, SHA256: t.TopologyHash()}
	for _, name := range t.SiteNames() {
		out.Sites = append(out.Sites, apiv1.TopoSite{Name: name, Nodes: nonNil(t.Sites[name])})
	}
	for _, n := range t.Graph.Nodes() {
		role, _ := t.Graph.Role(n)
		tn := apiv1.TopoNode{Name: n, Site: t.Site[n], Role: role, Addresses: []string{}, Managed: c.Managed(n)}
		for _, p := range t.Addrs[n] {
			tn.Addresses = append(tn.Addresses, p.Addr().String())
		}
		out.Nodes = append(out.Nodes, tn)
	}
	for _, l := range t.Graph.Links() {
		rc, _ := t.Graph.ReservableCapacity(reserve.Hop{Link: l.Name, From: l.A, To: l.B})
		out.Links = append(out.Links, apiv1.TopoLink{Name: l.Name, A: l.A, B: l.B, Role: l.Role, Capacity: l.Capacity,
			Reservable: l.Reservable, ReservableBps: rc, Delay: l.Delay.String()})
	}
	out.Stats = apiv1.TopologyCounts{Sites: len(out.Sites), Nodes: len(out.Nodes), Links: len(out.Links)}
	return out, nil
}

func (s *Server) putTopology(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var in apiv1.TopologyReload
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if a.Role != reserve.RoleAdmin {
		return &reserve.PolicyError{Rule: reserve.RuleRole, Message: "only an admin may change the topology"}
	}
	t, err := controller.ParseTopology("uploaded", []byte(in.YAML))
	if err != nil {
		return invalid("yaml", "%v", err)
	}
	if _, err := s.c.ReloadTopology(r.Context(), a, t); err != nil {
		return err
	}
	return s.getTopology(w, r, a)
}

func (s *Server) timeline(w http.ResponseWriter, r *http.Request, _ controller.Actor) error {
	from, err := parseTimeParam(r, "from")
	if err != nil {
		return err
	}
	to, err := parseTimeParam(r, "to")
	if err != nil {
		return err
	}
	now := s.c.Now()
	if from.IsZero() {
		from = now
	}
	if to.IsZero() {
		to = from.Add(24 * time.Hour)
	}
	dirs, err := s.c.Timeline(from, to, r.URL.Query().Get("link"))
	if err != nil {
		return err
	}
	out := apiv1.Timeline{From: from.UTC(), To: to.UTC(), Links: []apiv1.LinkTimeline{}}
	for _, d := range dirs {
		if len(out.Links) == 0 || out.Links[len(out.Links)-1].Link != d.Hop.Link {
			out.Links = append(out.Links, apiv1.LinkTimeline{Link: d.Hop.Link})
		}
		dt := apiv1.DirectionTimeline{From: d.Hop.From, To: d.Hop.To, ReservableBps: d.Reservable, Steps: []apiv1.Step{}, Bookings: []apiv1.BookingInfo{}}
		for _, st := range d.Steps {
			dt.Steps = append(dt.Steps, apiv1.Step{Start: st.Start.UTC(), End: st.End.UTC(), Used: st.Used, Residual: st.Residual})
		}
		for _, b := range d.Bookings {
			dt.Bookings = append(dt.Bookings, apiv1.BookingInfo{ID: b.ID, Owner: b.Owner, Project: b.Project, Bandwidth: b.Bandwidth, Start: b.Start.UTC(), End: b.End.UTC(), State: b.State})
		}
		l := &out.Links[len(out.Links)-1]
		l.Directions = append(l.Directions, dt)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) find(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var in apiv1.FindRequest
	if err := decode(w, r, &in); err != nil {
		return err
	}
	res, err := findSlot(r.Context(), s.c, a, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// findSlot is POST /api/v1/find on the controller.
func findSlot(ctx context.Context, c *controller.Controller, a controller.Actor, in apiv1.FindRequest) (apiv1.Slot, error) {
	dur, err := parseDuration("duration", in.Duration)
	if err != nil {
		return apiv1.Slot{}, err
	}
	res, err := c.Find(ctx, a, controller.FindInput{Mode: in.Mode, From: in.From, To: in.To, Bandwidth: in.Bandwidth,
		Start: in.Start, End: in.End, Duration: dur, SizeBytes: in.SizeBytes, Path: in.Path, Horizon: in.Horizon, Project: in.Project})
	if err != nil {
		return apiv1.Slot{}, err
	}
	return slot(res), nil
}

func (s *Server) listReservations(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	q := r.URL.Query()
	f := store.Filter{Owner: q.Get("owner"), Project: q.Get("project"), Node: q.Get("node")}
	for _, v := range q["state"] {
		st, err := reserve.ParseState(v)
		if err != nil {
			return invalid("state", "%v", err)
		}
		f.States = append(f.States, st)
	}
	var err error
	if f.From, err = parseTimeParam(r, "from"); err != nil {
		return err
	}
	if f.To, err = parseTimeParam(r, "to"); err != nil {
		return err
	}
	rs, err := s.c.List(r.Context(), a, f)
	if err != nil {
		return err
	}
	if rs == nil {
		rs = []reserve.Reservation{}
	}
	writeJSON(w, http.StatusOK, apiv1.ReservationList{Reservations: rs})
	return nil
}

func (s *Server) createReservation(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var in apiv1.ReservationRequest
	if err := decode(w, r, &in); err != nil {
		return err
	}
	res, err := createReservation(r.Context(), s.c, a, in)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !res.Created {
		status = http.StatusOK
	} else {
		w.Header().Set("Location", "/api/v1/reservations/"+res.Reservation.ID)
	}
	writeJSON(w, status, res)
	return nil
}

// createReservation is POST /api/v1/reservations on the controller.
func createReservation(ctx context.Context, c *controller.Controller, a controller.Actor, in apiv1.ReservationRequest) (apiv1.ReservationResponse, error) {
	dur, err := parseDuration("duration", in.Duration)
	if err != nil {
		return apiv1.ReservationResponse{}, err
	}
	if dur > 0 && !in.End.IsZero() {
		return apiv1.ReservationResponse{}, invalid("duration", "give an end or a duration, not both")
	}
	var hold time.Duration
	if in.Hold == "max" {
		hold = c.MaxHold()
	} else if hold, err = parseDuration("hold", in.Hold); err != nil {
		return apiv1.ReservationResponse{}, err
	}
	if in.SizeBytes == 0 && in.End.IsZero() && dur == 0 {
		return apiv1.ReservationResponse{}, invalid("end", "give an end or a duration (or a size_bytes to book the earliest completion)")
	}
	if in.SizeBytes > 0 && dur > 0 {
		return apiv1.ReservationResponse{}, invalid("duration", "with size_bytes the controller chooses the window: give a deadline, not a duration")
	}
	if len(in.IdempotencyKey) > 128 {
		return apiv1.ReservationResponse{}, invalid("idempotency_key", "idempotency_key is over 128 characters")
	}
	res, err := c.Create(ctx, a, controller.CreateInput{Owner: in.Owner, Project: in.Project, From: in.From, To: in.To,
		Bandwidth: in.Bandwidth, Start: in.Start, End: in.End, Duration: dur, SizeBytes: in.SizeBytes, Deadline: in.Deadline,
		FlowSpec: in.FlowSpec, Path: in.Path, Hold: hold, Key: in.IdempotencyKey})
	if err != nil {
		return apiv1.ReservationResponse{}, err
	}
	return apiv1.ReservationResponse{Reservation: res.Reservation, Algorithm: res.Algorithm, Created: res.New}, nil
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	res, err := s.c.Get(r.Context(), a, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.ReservationResponse{Reservation: res})
	return nil
}

func (s *Server) modifyReservation(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var in apiv1.ModifyRequest
	if err := decode(w, r, &in); err != nil {
		return err
	}
	res, err := s.c.Modify(r.Context(), a, r.PathValue("id"), controller.ModifyInput{Version: in.Version, Start: in.Start, End: in.End,
		Bandwidth: in.Bandwidth, Path: in.Path, Reroute: in.Reroute, FlowSpec: in.FlowSpec})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.ReservationResponse{Reservation: res.Reservation, Algorithm: res.Algorithm})
	return nil
}

// action decodes an optional ActionRequest: commit and cancel may be sent
// with no body at all.
func action(w http.ResponseWriter, r *http.Request) (apiv1.ActionRequest, error) {
	var in apiv1.ActionRequest
	if r.ContentLength == 0 {
		return in, nil
	}
	err := decode(w, r, &in)
	return in, err
}

func (s *Server) commitReservation(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	in, err := action(w, r)
	if err != nil {
		return err
	}
	res, err := s.c.Commit(r.Context(), a, r.PathValue("id"), in.Version)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.ReservationResponse{Reservation: res})
	return nil
}

func (s *Server) cancelReservation(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	in, err := action(w, r)
	if err != nil {
		return err
	}
	res, err := s.c.Cancel(r.Context(), a, r.PathValue("id"), in.Version, in.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.ReservationResponse{Reservation: res})
	return nil
}

func (s *Server) listExclusives(w http.ResponseWriter, r *http.Request, _ controller.Actor) error {
	q := r.URL.Query()
	f := store.Filter{Owner: q.Get("owner"), Node: q.Get("node")}
	for _, v := range q["state"] {
		st, err := reserve.ParseState(v)
		if err != nil {
			return invalid("state", "%v", err)
		}
		f.States = append(f.States, st)
	}
	xs, err := s.c.ListExclusives(r.Context(), f)
	if err != nil {
		return err
	}
	if xs == nil {
		xs = []reserve.Exclusive{}
	}
	writeJSON(w, http.StatusOK, apiv1.ExclusiveList{Exclusives: xs})
	return nil
}

func (s *Server) createExclusive(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var in apiv1.ExclusiveRequest
	if err := decode(w, r, &in); err != nil {
		return err
	}
	dur, err := parseDuration("duration", in.Duration)
	if err != nil {
		return err
	}
	if in.End.IsZero() && dur == 0 {
		return invalid("end", "give an end or a duration")
	}
	x, err := s.c.CreateExclusive(r.Context(), a, controller.ExclusiveInput{Node: in.Node, Site: in.Site, Start: in.Start, End: in.End, Duration: dur, Project: in.Project})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, x)
	return nil
}

func (s *Server) cancelExclusive(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	in, err := action(w, r)
	if err != nil {
		return err
	}
	x, err := s.c.CancelExclusive(r.Context(), a, r.PathValue("id"), in.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, x)
	return nil
}

// eventStream serves server-sent events until the client goes away or its
// token stops working: a comment every 15 s keeps proxies from closing an
// idle stream.
func (s *Server) eventStream(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var after uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return invalid("Last-Event-ID", "Last-Event-ID %q: want the id of an event", v)
		}
		after = n
	}
	st, err := s.openStream(w, r, a, "/api/v1/events")
	if err != nil {
		return err
	}
	defer st.close()
	ch, cancel, missed := s.c.Subscribe(a, r.URL.Query().Get("id"), after)
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	head := fmt.Sprintf(": lightpath events for %s\n\n", a.Name)
	if missed {
		// Say so in the stream, so a client knows to re-read what it
		// follows rather than trust the replay.
		head += "event: missed\ndata: {}\n\n"
	}
	if err := st.send("%s", head); err != nil {
		return nil
	}
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-st.ctx.Done():
			return nil
		case <-tick.C:
			if err := st.send(": keep-alive\n\n"); err != nil {
				return nil
			}
		case ev, ok := <-ch:
			if !ok {
				return nil
			}
			b, err := json.Marshal(apiv1.Event{Seq: ev.Seq, Kind: ev.Kind, Reservation: ev.Reservation, Exclusive: ev.Exclusive, Transition: ev.Transition})
			if err != nil {
				return err
			}
			if err := st.send("id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Kind, b); err != nil {
				return nil
			}
		}
	}
}

func apiUser(u store.User) apiv1.User {
	return apiv1.User{Name: u.Name, Role: string(u.Role), Projects: nonNil(u.Projects), CreatedAt: u.CreatedAt.UTC(), Node: u.Node}
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	us, err := s.c.ListUsers(r.Context(), a)
	if err != nil {
		return err
	}
	out := apiv1.UserList{Users: []apiv1.User{}}
	for _, u := range us {
		out.Users = append(out.Users, apiUser(u))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) addUser(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var in apiv1.UserRequest
	if err := decode(w, r, &in); err != nil {
		return err
	}
	role, err := reserve.ParseRole(in.Role)
	if err != nil {
		return invalid("role", "%v", err)
	}
	u, err := s.c.AddUser(r.Context(), a, in.Name, role, in.Projects, in.Node)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, apiUser(u))
	return nil
}

func apiToken(t store.Token) apiv1.Token {
	return apiv1.Token{ID: t.ID, User: t.User, CreatedAt: t.CreatedAt.UTC(), ExpiresAt: t.ExpiresAt.UTC(), RevokedAt: t.RevokedAt.UTC(), Node: t.Node}
}

func apiTokens(ts []store.Token) apiv1.TokenList {
	out := apiv1.TokenList{Tokens: []apiv1.Token{}}
	for _, t := range ts {
		out.Tokens = append(out.Tokens, apiToken(t))
	}
	return out
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	ts, err := s.c.ListTokens(r.Context(), a, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiTokens(ts))
	return nil
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	in, err := func() (apiv1.TokenRequest, error) {
		var in apiv1.TokenRequest
		if r.ContentLength == 0 {
			return in, nil
		}
		return in, decode(w, r, &in)
	}()
	if err != nil {
		return err
	}
	exp, err := parseDuration("expires_in", in.ExpiresIn)
	if err != nil {
		return err
	}
	secret, t, err := s.c.CreateToken(r.Context(), a, r.PathValue("name"), exp, in.Node)
	if err != nil {
		return err
	}
	out := apiToken(t)
	out.Secret = secret
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	if err := s.c.RevokeToken(r.Context(), a, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// revokeUserTokens revokes every token of a user at once, answering with
// the tokens it revoked.
func (s *Server) revokeUserTokens(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	ts, err := s.c.RevokeUserTokens(r.Context(), a, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiTokens(ts))
	return nil
}

func (s *Server) getPolicy(w http.ResponseWriter, _ *http.Request, _ controller.Actor) error {
	writeJSON(w, http.StatusOK, policyOut(s.c.Policy()))
	return nil
}

func (s *Server) putPolicy(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var in apiv1.Policy
	if err := decode(w, r, &in); err != nil {
		return err
	}
	p, err := policyIn(in)
	if err != nil {
		return err
	}
	if err := s.c.SetPolicy(r.Context(), a, p); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, policyOut(p))
	return nil
}

func policyOut(p reserve.Policy) apiv1.Policy {
	conv := func(l reserve.Limits) apiv1.Limits {
		d := func(v time.Duration) string {
			if v == 0 {
				return ""
			}
			if v == reserve.UnlimitedDuration {
				return "unlimited"
			}
			return v.String()
		}
		return apiv1.Limits{MaxDuration: d(l.MaxDuration), MinDuration: d(l.MinDuration), Horizon: d(l.Horizon), MaxBandwidth: l.MaxBandwidth, MaxProjectBandwidth: l.MaxProjectBandwidth, MaxJobs: l.MaxJobs, MaxProjectJobs: l.MaxProjectJobs}
	}
	out := apiv1.Policy{Default: conv(p.Default), Roles: map[string]apiv1.Limits{}, Projects: map[string]apiv1.Limits{}}
	for r, l := range p.Roles {
		out.Roles[string(r)] = conv(l)
	}
	for n, l := range p.Projects {
		out.Projects[n] = conv(l)
	}
	return out
}

func policyIn(in apiv1.Policy) (reserve.Policy, error) {
	conv := func(where string, l apiv1.Limits) (reserve.Limits, error) {
		d := func(field, s string) (time.Duration, error) {
			if s == "" {
				return 0, nil
			}
			if s == "unlimited" {
				return reserve.UnlimitedDuration, nil
			}
			v, err := time.ParseDuration(s)
			if err != nil || v < 0 {
				return 0, invalid(field, "%s.%s %q: want a duration like 8h, or \"unlimited\"", where, field, s)
			}
			return v, nil
		}
		var out reserve.Limits
		var err error
		if out.MaxDuration, err = d("max_duration", l.MaxDuration); err != nil {
			return out, err
		}
		if out.MinDuration, err = d("min_duration", l.MinDuration); err != nil {
			return out, err
		}
		if out.Horizon, err = d("horizon", l.Horizon); err != nil {
			return out, err
		}
		out.MaxBandwidth, out.MaxProjectBandwidth = l.MaxBandwidth, l.MaxProjectBandwidth
		out.MaxJobs, out.MaxProjectJobs = l.MaxJobs, l.MaxProjectJobs
		return out, nil
	}
	var p reserve.Policy
	var err error
	if p.Default, err = conv("default", in.Default); err != nil {
		return p, err
	}
	for r, l := range in.Roles {
		role, err := reserve.ParseRole(r)
		if err != nil {
			return p, invalid("roles", "%v", err)
		}
		if p.Roles == nil {
			p.Roles = map[reserve.Role]reserve.Limits{}
		}
		if p.Roles[role], err = conv("roles."+r, l); err != nil {
			return p, err
		}
	}
	for n, l := range in.Projects {
		if p.Projects == nil {
			p.Projects = map[string]reserve.Limits{}
		}
		if p.Projects[n], err = conv("projects."+n, l); err != nil {
			return p, err
		}
	}
	return p, nil
}

func (s *Server) audit(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	q := r.URL.Query()
	f := store.AuditFilter{Who: q.Get("who")}
	var err error
	if f.Since, err = parseTimeParam(r, "since"); err != nil {
		return err
	}
	if f.Until, err = parseTimeParam(r, "until"); err != nil {
		return err
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 0 {
			return invalid("limit", "limit=%q: want a non-negative number", v)
		}
	}
	es, err := s.c.Audit(r.Context(), a, f)
	if err != nil {
		return err
	}
	out := apiv1.AuditList{Entries: []apiv1.AuditEntry{}}
	for _, e := range es {
		out.Entries = append(out.Entries, apiv1.AuditEntry{Seq: e.Seq, At: e.At.UTC(), Who: e.Who, What: e.What, Detail: e.Detail})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listAgents(w http.ResponseWriter, _ *http.Request, _ controller.Actor) error {
	out := apiv1.AgentList{Agents: []apiv1.Agent{}}
	for _, a := range s.c.Agents() {
		out.Agents = append(out.Agents, apiv1.Agent{Node: a.Node, RegisteredAt: a.RegisteredAt.UTC(), LeaseExpires: a.LeaseExpires.UTC(), Alive: a.Alive})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var in apiv1.HeartbeatRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &in); err != nil {
			return err
		}
	}
	lease, err := parseDuration("lease", in.Lease)
	if err != nil {
		return err
	}
	work, err := s.c.Heartbeat(r.Context(), a, r.PathValue("node"), lease)
	if err != nil {
		return err
	}
	rs := work.Reservations
	if rs == nil {
		rs = []reserve.Reservation{}
	}
	writeJSON(w, http.StatusOK, apiv1.AgentWork{Node: work.Node, LeaseExpires: work.LeaseExpires.UTC(), TopologySHA256: work.TopologySHA256, Reservations: rs})
	return nil
}

func (s *Server) nodeReport(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var in apiv1.NodeReport
	if err := decode(w, r, &in); err != nil {
		return err
	}
	var ok bool
	switch in.Status {
	case "provisioned":
		ok = true
	case "failed":
		if in.Reason == "" {
			return invalid("reason", "a failure needs a reason")
		}
	default:
		return invalid("status", "status %q: want provisioned or failed", in.Status)
	}
	res, err := s.c.Report(r.Context(), a, r.PathValue("id"), r.PathValue("node"), ok, in.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.ReservationResponse{Reservation: res})
	return nil
}

func (s *Server) linkReport(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var in apiv1.LinkReport
	if err := decode(w, r, &in); err != nil {
		return err
	}
	node, link := r.PathValue("node"), r.PathValue("link")
	out := apiv1.LinkReportResult{Link: link, Status: in.Status, Reservations: []reserve.Reservation{}}
	switch in.Status {
	case "down":
		rs, err := s.c.LinkDown(r.Context(), a, node, link, in.Reason)
		if err != nil {
			return err
		}
		if rs != nil {
			out.Reservations = rs
		}
	case "up":
		if err := s.c.LinkUp(r.Context(), a, node, link); err != nil {
			return err
		}
	default:
		return invalid("status", "status %q: want down or up", in.Status)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
