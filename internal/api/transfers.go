package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/alert"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/registry"
)

// WithTransfers makes the server keep transfers in t (their series go to
// the repository, when there is one).
func (s *Server) WithTransfers(t *registry.Registry) *Server {
	s.transfers = t
	return s
}

// WithAlerts makes the server show the rules' state and history, and adds
// the pending and firing alerts to /metrics (lightpath_alerts).
func (s *Server) WithAlerts(e *alert.Evaluator, h *alert.History) *Server {
	s.alerts, s.history = e, h
	if e != nil {
		s.metrics.reg.MustRegister(alertGauges{e})
	}
	return s
}

func (s *Server) needTransfers() (*registry.Registry, error) {
	if s.transfers == nil {
		return nil, &httpError{status: http.StatusNotFound, code: apiv1.CodeNotFound, msg: "this controller keeps no transfers (started without a repository)"}
	}
	return s.transfers, nil
}

// transferErr maps the registry's errors to the API's.
func transferErr(err error) error {
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return &httpError{status: http.StatusNotFound, code: apiv1.CodeNotFound, msg: err.Error()}
	case errors.Is(err, registry.ErrInvalid):
		return invalid("", "%v", err)
	case errors.Is(err, registry.ErrLimit):
		return &httpError{status: http.StatusTooManyRequests, code: apiv1.CodeLimit, msg: err.Error()}
	}
	return err
}

func (s *Server) createTransfer(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	reg, err := s.needTransfers()
	if err != nil {
		return err
	}
	var in transfer.Registration
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if in.Reservation != "" {
		if _, err := s.c.Get(r.Context(), a, in.Reservation); err != nil {
			return err
		}
	}
	t, err := reg.Create(r.Context(), a.Name, in)
	if err != nil {
		return transferErr(err)
	}
	writeJSON(w, http.StatusCreated, t)
	return nil
}

func (s *Server) reportTransfer(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	reg, err := s.needTransfers()
	if err != nil {
		return err
	}
	var rep transfer.Report
	if err := decode(w, r, &rep); err != nil {
		return err
	}
	if rep.Reservation != "" {
		// The same rule as GET /api/v1/reservations/{id}: no attaching
		// (and so no reading, on the transfer's page) what one may not see.
		if _, err := s.c.Get(r.Context(), a, rep.Reservation); err != nil {
			return err
		}
	}
	t, g, err := reg.Report(r.Context(), r.PathValue("id"), a.Name, rep)
	if err != nil {
		return transferErr(err)
	}
	if s.repo != nil && len(g.Points) > 0 {
		if _, err := s.repo.Append(r.Context(), &monitor.Batch{Node: transferNode(t), Meta: registry.Meta, Groups: []monitor.Group{g}}); err != nil {
			s.log.Warn("store a transfer's samples", "id", t.ID, "err", err)
		}
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// transferNode is the node a transfer's series are labelled with: where
// its data leaves, else "controller".
func transferNode(t transfer.Transfer) string {
	if t.From != "" {
		return t.From
	}
	return "controller"
}

func (s *Server) listTransfers(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	reg, err := s.needTransfers()
	if err != nil {
		return err
	}
	since, err := parseTimeParam(r, "since")
	if err != nil {
		return err
	}
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit <= 0 {
			return invalid("limit", "limit=%q: want a positive number", v)
		}
	}
	owner := a.Name
	if a.SeesAll() {
		owner = ""
	}
	ts, err := reg.List(r.Context(), since, limit, owner)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.TransferList{Transfers: ts})
	return nil
}

// getTransfer answers with a transfer's page: the transfer, its
// reservation and path, and the alerts that changed state on its path
// while it ran: the answer to "why is my transfer slow".
func (s *Server) getTransfer(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	reg, err := s.needTransfers()
	if err != nil {
		return err
	}
	t, err := reg.Get(r.Context(), r.PathValue("id"), a.Sees)
	if err != nil {
		return transferErr(err)
	}
	page := apiv1.TransferPage{Transfer: t, Alerts: []json.RawMessage{}}
	links, nodes := []string{}, []string{}
	if t.Reservation != "" {
		if res, err := s.c.Get(r.Context(), a, t.Reservation); err == nil {
			page.Reservation = &res
			for _, h := range res.Path {
				links = append(links, h.Link)
				nodes = append(nodes, h.From, h.To)
			}
		}
	}
	for _, n := range []string{t.From, t.To} {
		if n != "" {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	page.Links, page.Nodes = links, nodes
	if s.history != nil && (len(links) > 0 || len(nodes) > 0) {
		until := t.EndedAt
		if until.IsZero() {
			until = s.c.Now()
		}
		recs, err := s.history.List(r.Context(), alert.Filter{Since: t.StartedAt.Add(-time.Minute), Until: until,
			Any: map[string][]string{"link": links, "node": nodes, "transfer": {t.ID}}})
		if err != nil {
			return err
		}
		for _, rec := range recs {
			b, _ := json.Marshal(rec)
			page.Alerts = append(page.Alerts, b)
		}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// getAlerts answers with the rules in force, each series' state, and the
// latest state changes.
func (s *Server) getAlerts(w http.ResponseWriter, r *http.Request, _ controller.Actor) error {
	if s.alerts == nil {
		return &httpError{status: http.StatusNotFound, code: apiv1.CodeNotFound, msg: "this controller evaluates no rules (start it with --rules FILE)"}
	}
	out := AlertsResult{Status: s.alerts.Status(), History: []alert.Record{}}
	if s.history != nil {
		f := alert.Filter{Limit: 100}
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return invalid("limit", "limit=%q: want a positive number", v)
			}
			f.Limit = n
		}
		recs, err := s.history.List(r.Context(), f)
		if err != nil {
			return err
		}
		out.History = recs
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// liveView is one frame of the live stream.
func (s *Server) liveView(r *http.Request, a controller.Actor) apiv1.Live {
	now := s.c.Now()
	lv := apiv1.Live{T: now.UnixMilli(), Links: []apiv1.LiveLink{}, Transfers: []apiv1.LiveTransfer{}}
	reserved := s.c.ReservedNow()
	seen := map[[2]string]bool{}
	for _, rt := range s.derive.Latest(now.Add(-10 * time.Second).UnixMilli()) {
		k := [2]string{rt.Link, rt.From}
		seen[k] = true
		lv.Links = append(lv.Links, apiv1.LiveLink{Link: rt.Link, From: rt.From, To: rt.To, T: rt.T, Bps: rt.BitsPerSecond,
			Utilisation: rt.Utilisation(), CapacityBps: rt.Capacity, ReservedBps: reserved[k]})
	}
	if t := s.c.Topology(); t != nil {
		// Directions with a reservation but no measurement yet.
		for k, bw := range reserved {
			if seen[k] {
				continue
			}
			if l, ok := t.Graph.Link(k[0]); ok {
				to := l.B
				if l.B == k[1] {
					to = l.A
				}
				lv.Links = append(lv.Links, apiv1.LiveLink{Link: k[0], From: k[1], To: to, CapacityBps: l.Capacity, ReservedBps: bw})
			}
		}
	}
	if s.transfers != nil {
		if ts, err := s.transfers.Running(r.Context()); err == nil {
			for _, t := range ts {
				if a.Sees(t.Owner) {
					lv.Transfers = append(lv.Transfers, apiv1.LiveTransfer{ID: t.ID, Owner: t.Owner, Bps: t.ThroughputBps, BytesDone: t.BytesDone,
						BytesTotal: t.BytesTotal, Reservation: t.Reservation, From: t.From, To: t.To, Streams: t.Streams, T: t.UpdatedAt.UnixMilli()})
				}
			}
		}
	}
	return lv
}

// liveStream sends a frame every second: each link direction's measured
// throughput, utilisation and reserved bandwidth, and the running
// transfers' throughput. The dashboard's map and charts follow it.
func (s *Server) liveStream(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	every := time.Second
	if v := r.URL.Query().Get("every"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 200*time.Millisecond || d > time.Minute {
			return invalid("every", "every=%q: want a duration from 200ms to 1m", v)
		}
		every = d
	}
	st, err := s.openStream(w, r, a, "/api/v1/metrics/live")
	if err != nil {
		return err
	}
	defer st.close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		b, err := json.Marshal(s.liveView(r, a))
		if err != nil {
			return err
		}
		if err := st.send("event: live\ndata: %s\n\n", b); err != nil {
			return nil
		}
		select {
		case <-st.ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
