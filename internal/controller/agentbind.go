package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// Agents are bound to their nodes. An agent's identity names one node:
// its user's (lightpath user add NAME --role agent --node N binds every
// token of the user) or its token's (lightpath user token create NAME
// --node N). Everything an agent says is checked against that node:
// heartbeats and part reports for that node only, link reports only for
// the links that end at it, metric pushes only as that node.
//
// An agent identity bound to no node (every agent user and token made
// before version 4 of the schema, and a new agent user without --node)
// may do none of that: it may only create node-bound tokens for itself.
// That is what lightpath agent does on its first start when given such a
// token (it keeps the node's token beside its spool), so testbed up
// --agents, which hands one agent token to every node's agent, goes on
// working while each running agent holds a token for its own node alone.
// The unbound token is then an enrolment secret, to be kept off nodes in a
// real deployment, where each node gets its own bound token. Admins are
// bound to no node and act for any.

// boundNode is the node a token of user u acts for: the user's binding,
// else the token's.
func boundNode(u store.User, t store.Token) string {
	if u.Node != "" {
		return u.Node
	}
	return t.Node
}

// checkLinkEnd refuses a report by node's agent on a link that does not
// end at node, unless node probes a live reservation's path over it
// (probes); the caller holds mu and has checked the link exists.
func (c *Controller) checkLinkEnd(a Actor, node, link string) error {
	l, _ := c.topo.Graph.Link(link)
	if a.Role != reserve.RoleAdmin && l.A != node && l.B != node && !c.probes(node, link) {
		return forbidden(fmt.Sprintf("link %s joins %s and %s: node %s does not end it, so its agent cannot report it", link, l.A, l.B, node))
	}
	return nil
}

// probes reports whether node is on the path of an ACTIVE reservation
// that crosses link: its agent probes that path (docs/agent.md) and
// reports the link it blames for a blackhole, or back up; the caller holds
// mu. (Such a report moves every reservation off the link, not only that
// one: the agents of a path's nodes are trusted with its links.)
func (c *Controller) probes(node, link string) bool {
	for _, r := range c.live {
		if r.State == reserve.StateActive && slices.Contains(r.Nodes(), node) &&
			slices.ContainsFunc(r.Path, func(h reserve.PathHop) bool { return h.Link == link }) {
			return true
		}
	}
	return false
}

// checkUserNode checks a new user's node binding: agents only, and a
// node of the topology when there is one.
func (c *Controller) checkUserNode(role reserve.Role, node string) error {
	if node == "" {
		return nil
	}
	if role != reserve.RoleAgent {
		return &reserve.RequestError{Field: "node", Message: fmt.Sprintf("node %q: only an agent is bound to a node, not a user of role %s", node, role)}
	}
	return c.checkKnownNode(node)
}

// checkKnownNode checks node against the topology, when there is one; a
// controller without a topology yet takes any well-formed name.
func (c *Controller) checkKnownNode(node string) error {
	if len(node) > 64 || strings.ContainsAny(node, "\x00\n\r/ ") {
		return &reserve.RequestError{Field: "node", Message: fmt.Sprintf("node %q: want a node name of the topology", node)}
	}
	if t := c.Topology(); t != nil {
		return t.checkNode("node", node)
	}
	return nil
}

// tokenNode decides the node a new token of user is bound to: the one
// asked for (an agent's only, a node of the topology), and for a caller
// that is itself bound, its own node whatever was asked, so a bound token
// never mints one that acts for another node or for none.
func (c *Controller) tokenNode(ctx context.Context, a Actor, user, node string) (string, error) {
	u, err := c.st.GetUser(ctx, user)
	if errors.Is(err, reserve.ErrNotFound) {
		return "", notFound("user", user)
	} else if err != nil {
		return "", err
	}
	if a.Node != "" && a.Name == user {
		if node != "" && node != a.Node {
			return "", forbidden(fmt.Sprintf("this token of %s is bound to node %s: it cannot create one for node %s", a.Name, a.Node, node))
		}
		node = a.Node
	}
	if node == "" {
		return "", nil
	}
	if u.Role != reserve.RoleAgent {
		return "", &reserve.RequestError{Field: "node", Message: fmt.Sprintf("node %q: only an agent's token is bound to a node, and %s is of role %s", node, user, u.Role)}
	}
	if u.Node != "" && u.Node != node {
		return "", &reserve.RequestError{Field: "node", Message: fmt.Sprintf("node %q: agent %s is bound to node %s, and so is every token of it", node, user, u.Node)}
	}
	if err := c.checkKnownNode(node); err != nil {
		return "", err
	}
	return node, nil
}

func nodeDetail(node string) string {
	if node == "" {
		return ""
	}
	return ", node " + node
}

// revocableBy reports whether a, revoking one of its own user's tokens,
// may revoke t: a token bound to a node revokes only the tokens that act
// for that node, so one node's agent cannot cut off the others.
func (c *Controller) revocableBy(ctx context.Context, a Actor, t store.Token) bool {
	u, err := c.st.GetUser(ctx, t.User)
	return err == nil && revocable(a, u, t)
}

// revocable is revocableBy with t's user u read.
func revocable(a Actor, u store.User, t store.Token) bool {
	if t.Node == a.Node && a.Node != "" {
		return true
	}
	if a.Node == "" {
		// An agent's token bound to no node (one handed to every node)
		// cuts off no node: revoking a node's token and enrolling in its
		// place would take the node over.
		return a.Role != reserve.RoleAgent || boundNode(u, t) == ""
	}
	return boundNode(u, t) == a.Node
}

// liveNodeToken refuses an agent's token bound to no node that creates a
// token for node while its user holds a live one bound to node: the node
// is enrolled already, and a second enrolment (a copy of the shared token
// on another host) would act for it beside the real one. An admin
// enrols it again (revoking the old token, or creating one bound to it).
func (c *Controller) liveNodeToken(ctx context.Context, tx store.Store, a Actor, user, node string) error {
	if a.Role != reserve.RoleAgent || a.Node != "" || node == "" {
		return nil
	}
	ts, err := tx.ListTokens(ctx, user)
	if err != nil {
		return err
	}
	now := c.now()
	for _, t := range ts {
		if t.Node == node && t.Active(now) {
			return fmt.Errorf("%w: node %s is enrolled already (token %s of %s is bound to it): enrolling it again needs an admin (lightpath user token revoke %s; or give the node a token bound to it: lightpath user token create %s --node %s)",
				reserve.ErrConflict, node, t.ID, user, t.ID, user, node)
		}
	}
	return nil
}
