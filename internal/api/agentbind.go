package api

import (
	"fmt"
	"strings"

	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/reserve"
)

// controllerSeries are the prefixes of the series the controller makes
// itself (link rates derived from the agents' counters, transfers' series,
// its own): no push may forge them, since rules act on them.
var controllerSeries = []string{"lightpath_link_", "lightpath_transfer_", "lightpath_controller_"}

// checkPush checks that a batch speaks for its pusher's node alone: the
// pusher acts for the batch's node (controller.Actor.ActsFor), and no
// point names another node, a link that does not end at the node, or a
// series the controller makes. A forged label would let one node's agent
// fire a rule whose action moves other users' reservations.
func checkPush(a controller.Actor, t *controller.Topo, b *monitor.Batch) error {
	if err := a.ActsFor(b.Node); err != nil {
		return err
	}
	for _, g := range b.Groups {
		for _, p := range g.Points {
			for _, pre := range controllerSeries {
				if strings.HasPrefix(p.Name, pre) {
					return refuse("series %s is the controller's own (%s*): no agent pushes it", p.Name, pre)
				}
			}
			for _, k := range []string{"node", "from"} {
				if v := p.Labels.Get(k); v != "" && v != b.Node {
					return refuse("a point of %s is labelled %s=%s in a push of node %s: a node pushes only its own series", p.Name, k, v, b.Node)
				}
			}
			if v := p.Labels.Get("link"); v != "" {
				if l, ok := t.Graph.Link(v); ok && l.A != b.Node && l.B != b.Node {
					return refuse("a point of %s is labelled link=%s, which joins %s and %s, in a push of node %s: a node pushes only the series of the links that end at it", p.Name, v, l.A, l.B, b.Node)
				}
			}
		}
	}
	return nil
}

// refuse is a 403 whose message is the whole reason.
func refuse(format string, args ...any) error {
	return &reserve.PolicyError{Rule: reserve.RuleRole, Message: fmt.Sprintf(format, args...)}
}
