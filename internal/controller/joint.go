package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
)

// PlanInput asks for the joint plan of a dataset (reserve.JointQuery)
// on behalf of an actor and project: the policy's horizon bounds its end
// and its shortest reservation its window.
type PlanInput struct {
	Query   reserve.JointQuery
	Project string
}

// PlanJoint answers the joint planner's question against what is booked
// now, without booking anything: the earliest window over every path from
// the sources to the destinations at once, and how its rate splits over
// paths (reserve.Schedule.JointEarliestCompletion). With a deadline that
// cannot be met the plan comes with a *reserve.InfeasibleError carrying
// the earliest completion. A plan past the policy's horizon is refused
// naming the policy.
func (c *Controller) PlanJoint(ctx context.Context, a Actor, in PlanInput) (reserve.JointPlan, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.topo == nil {
		return reserve.JointPlan{}, ErrNoTopology
	}
	for _, set := range []struct {
		what string
		eps  []reserve.Endpoint
	}{{"from", in.Query.Sources}, {"to", in.Query.Destinations}} {
		for _, ep := range set.eps {
			if err := c.topo.checkNode(set.what, ep.Node); err != nil {
				return reserve.JointPlan{}, err
			}
		}
	}
	now := c.now()
	q := in.Query
	if q.Submitted.IsZero() || q.Submitted.Before(now) {
		q.Submitted = now
	}
	limits, _ := c.policy.Resolve(a.Role, in.Project)
	q.MinDuration = max(q.MinDuration, limits.MinDuration)
	p, err := c.sched.JointEarliestCompletion(q)
	var inf *reserve.InfeasibleError
	if err != nil && !errors.As(err, &inf) {
		if errors.Is(err, reserve.ErrInvalidQuery) {
			return p, &reserve.RequestError{Field: "query", Message: err.Error()}
		}
		if errors.Is(err, reserve.ErrNoPath) || errors.Is(err, reserve.ErrNoSlot) {
			return p, &Refusal{Err: fmt.Errorf("%w: %v", reserve.ErrCapacity, err)}
		}
		return p, err
	}
	if limits.Horizon > 0 && p.End.After(now.Add(limits.Horizon)) {
		return p, &reserve.PolicyError{Rule: reserve.RuleHorizon, Message: fmt.Sprintf(
			"the earliest completion, %s, is beyond the booking horizon (%s from now) of %s's policy",
			p.End.UTC().Format(time.RFC3339), limits.Horizon, a.Name)}
	}
	return p, err
}
