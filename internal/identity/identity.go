// Package identity is who a request comes from (Actor) and what that
// lets it see and act for. It sits below the controller and the
// transfer service, which both check callers by it, so the service need
// not import the controller to know who calls it. Standard library and
// internal/reserve only.
package identity

import (
	"fmt"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
)

// Actor is the authenticated caller of a request.
type Actor struct {
	Name     string
	Role     reserve.Role
	Projects []string
	// Node is the one node an agent identity acts for (its token's or
	// its user's binding); empty for everyone else and for an unbound
	// agent (the controller's agentbind.go).
	Node string
	// TokenID and TokenExpires name the token the request came with (zero
	// when none, e.g. inside the controller): a token may not mint one
	// that outlives it.
	TokenID      string
	TokenExpires time.Time
}

// Sees reports whether a may see and act on what owner owns.
func (a Actor) Sees(owner string) bool {
	return a.Name == owner || a.SeesAll()
}

// SeesAll reports whether a sees what every owner owns (an operator or an
// admin), so a list need not be filtered by owner.
func (a Actor) SeesAll() bool {
	return a.Role == reserve.RoleOperator || a.Role == reserve.RoleAdmin
}

// ActsFor returns nil when a may speak for node as its agent (an admin
// for any node, an agent for the node it is bound to), else a 403 that
// says which node the agent is bound to.
func (a Actor) ActsFor(node string) error {
	switch {
	case a.Role == reserve.RoleAdmin:
		return nil
	case a.Role != reserve.RoleAgent:
		return forbidden(fmt.Sprintf("only a node's agent may act for node %s", node))
	case a.Node == "":
		return forbidden(fmt.Sprintf("agent %s is bound to no node: create a token bound to each of its nodes (lightpath user token create %s --node NODE; lightpath agent does so by itself) and use that", a.Name, a.Name))
	case a.Node != node:
		return forbidden(fmt.Sprintf("agent %s is bound to node %s: it cannot act for node %s", a.Name, a.Node, node))
	}
	return nil
}

func forbidden(msg string) error {
	return &reserve.PolicyError{Rule: reserve.RuleRole, Message: msg}
}
