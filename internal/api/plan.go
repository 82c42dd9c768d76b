package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
)

func (s *Server) plan(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	var in apiv1.PlanRequest
	if err := decode(w, r, &in); err != nil {
		return err
	}
	p, err := planJoint(r.Context(), s.c, a, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// planJoint is POST /api/v1/plan on the controller, for the route and
// for the in-process Booker.
func planJoint(ctx context.Context, c *controller.Controller, a controller.Actor, in apiv1.PlanRequest) (apiv1.Plan, error) {
	startUp, err := parseDuration("start_up", in.StartUp)
	if err != nil {
		return apiv1.Plan{}, err
	}
	minDur, err := parseDuration("min_duration", in.MinDuration)
	if err != nil {
		return apiv1.Plan{}, err
	}
	goodput := in.Goodput
	if goodput == 0 {
		goodput = 1
	}
	q := reserve.JointQuery{Size: in.SizeBytes, Goodput: goodput, StartUp: startUp, MinDuration: minDur, Deadline: in.Deadline}
	for _, e := range in.Sources {
		q.Sources = append(q.Sources, reserve.Endpoint{Node: e.Node, MaxRate: e.MaxRate})
	}
	for _, e := range in.Destinations {
		q.Destinations = append(q.Destinations, reserve.Endpoint{Node: e.Node, MaxRate: e.MaxRate})
	}
	p, err := c.PlanJoint(ctx, a, controller.PlanInput{Query: q, Project: in.Project})
	var inf *reserve.InfeasibleError
	if err != nil && !errors.As(err, &inf) {
		return apiv1.Plan{}, err
	}
	out := apiv1.Plan{Algorithm: p.Algorithm, Start: p.Start.UTC(), End: p.End.UTC(), Rate: p.Rate,
		Flows: []apiv1.PlanFlow{}, MeetsDeadline: inf == nil}
	for _, f := range p.Flows {
		pf := apiv1.PlanFlow{From: f.From, To: f.To, Rate: f.Rate}
		for _, h := range f.Path {
			pf.Path = append(pf.Path, reserve.PathHop(h))
		}
		out.Flows = append(out.Flows, pf)
	}
	return out, nil
}
