package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/reserve"
)

// Issue 12, attacker 2: one agent token spoke for any node. Each attempt
// of the agent of a1 to speak for another node, or for a link a1 does not
// end, is refused with 403 and a message that says why, and nothing of
// anyone else's reservation changes.
func TestAgentBoundToNode(t *testing.T) {
	e := newMonEnv(t, twoSite, "")
	ra, rb := e.agent("agent-ra", "ra"), e.agent("agent-rb", "rb")
	evil := e.agent("agent-a1", "a1")
	alice := e.user("alice", "user")
	for node, tok := range map[string]string{"ra": ra, "rb": rb} {
		if st, raw := e.do("POST", "/api/v1/agents/"+node+"/heartbeat", tok, apiv1.HeartbeatRequest{Lease: "5m"}, nil); st != 200 {
			t.Fatalf("heartbeat of %s by its own agent: %d %s", node, st, raw)
		}
	}
	st, res, raw := e.create(alice, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 100 * mbps, Start: t0.Add(time.Minute), Duration: "1h", Path: []string{"a1-ra", "wan", "b1-rb"}})
	if st != 201 {
		t.Fatalf("create: %d %s", st, raw)
	}
	r := res.Reservation
	get := func() reserve.Reservation {
		var got apiv1.ReservationResponse
		e.do("GET", "/api/v1/reservations/"+r.ID, alice, nil, &got)
		return got.Reservation
	}

	push := func(node string, p monitor.Point) monitor.Batch {
		return monitor.Batch{Node: node, Seq: 1, Groups: []monitor.Group{{T: t0.UnixMilli(), Points: []monitor.Point{p}}}}
	}
	tx := func(ls monitor.Labels) monitor.Point {
		return monitor.Point{Name: "lightpath_interface_transmit_bytes_total", Labels: ls, V: 1}
	}
	for _, tc := range []struct {
		name, method, path string
		body               any
		msg                string
	}{
		{"heartbeat as another node", "POST", "/api/v1/agents/rb/heartbeat", apiv1.HeartbeatRequest{}, "agent agent-a1 is bound to node a1: it cannot act for node rb"},
		{"another node's part failed", "POST", "/api/v1/reservations/" + r.ID + "/nodes/rb", apiv1.NodeReport{Status: "failed", Reason: "forged"}, "bound to node a1: it cannot act for node rb"},
		{"another node's part in place", "POST", "/api/v1/reservations/" + r.ID + "/nodes/ra", apiv1.NodeReport{Status: "provisioned"}, "cannot act for node ra"},
		{"a link the node does not end, as itself", "POST", "/api/v1/agents/a1/links/wan", apiv1.LinkReport{Status: "down", Reason: "forged"}, "link wan joins ra and rb: node a1 does not end it, so its agent cannot report it"},
		{"a link the node does not end, as an end", "POST", "/api/v1/agents/rb/links/wan", apiv1.LinkReport{Status: "down", Reason: "forged"}, "cannot act for node rb"},
		{"a link up the node does not end", "POST", "/api/v1/agents/a1/links/wan", apiv1.LinkReport{Status: "up"}, "node a1 does not end it"},
		{"heartbeat of a node that does not exist", "POST", "/api/v1/agents/ghost/heartbeat", apiv1.HeartbeatRequest{}, "cannot act for node ghost"},
		{"report of a node that does not exist", "POST", "/api/v1/reservations/" + r.ID + "/nodes/ghost", apiv1.NodeReport{Status: "failed", Reason: "forged"}, "cannot act for node ghost"},
		{"push as another node", "POST", "/api/v1/metrics/push", txBatch("rb", "eth1", "wan", t0, 1), "cannot act for node rb"},
		{"push as a node that does not exist", "POST", "/api/v1/metrics/push", txBatch("ghost", "eth1", "", t0, 1), "cannot act for node ghost"},
		{"points labelled node=other", "POST", "/api/v1/metrics/push", push("a1", tx(monitor.L("device", "eth0", "node", "rb"))), "labelled node=rb in a push of node a1"},
		{"points of a link the node does not end", "POST", "/api/v1/metrics/push", push("a1", tx(monitor.L("device", "eth0", "link", "wan"))), "labelled link=wan, which joins ra and rb, in a push of node a1"},
		{"points labelled from=other", "POST", "/api/v1/metrics/push", push("a1", monitor.Point{Name: "lightpath_probe_loss_ratio", Labels: monitor.L("from", "ra"), V: 1}), "labelled from=ra"},
		{"the controller's own series", "POST", "/api/v1/metrics/push", push("a1", monitor.Point{Name: "lightpath_link_utilisation_ratio", Labels: monitor.L("link", "a1-ra", "from", "a1", "to", "ra"), V: 1}), "is the controller's own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, raw := e.do(tc.method, tc.path, evil, tc.body, nil)
			if st != http.StatusForbidden || !strings.Contains(string(raw), tc.msg) {
				t.Fatalf("%d %s, want 403 with %q", st, raw, tc.msg)
			}
		})
	}
	if g := get(); g.State != reserve.StateReserved || g.Degraded || g.Path[1].Link != "wan" || len(g.Provisioned) != 0 {
		t.Errorf("alice's reservation after the attempts: %s degraded=%v path %v provisioned %v", g.State, g.Degraded, g.Path, g.Provisioned)
	}
	var agents apiv1.AgentList
	e.do("GET", "/api/v1/agents", alice, nil, &agents)
	for _, a := range agents.Agents {
		if a.Node != "ra" && a.Node != "rb" {
			t.Errorf("an agent registered for %s", a.Node)
		}
	}
	// What a1's agent says of itself and its own links is taken.
	if st, raw := e.do("POST", "/api/v1/agents/a1/heartbeat", evil, apiv1.HeartbeatRequest{}, nil); st != 200 {
		t.Errorf("a1's own heartbeat: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/metrics/push", evil, txBatch("a1", "eth0", "a1-ra", t0, 1), nil); st != 200 {
		t.Errorf("a1's own push: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/reservations/"+r.ID+"/nodes/rb", rb, apiv1.NodeReport{Status: "provisioned"}, nil); st != 200 {
		t.Errorf("rb's own report: %d %s", st, raw)
	}
}

// An agent bound to no node (every agent made before node bindings) may
// report nothing, only create tokens bound to a node for itself; a bound
// token only creates tokens for its own node.
func TestUnboundAgentEnrols(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	fleet := e.user("agents", "agent")
	if st, raw := e.do("POST", "/api/v1/agents/ra/heartbeat", fleet, apiv1.HeartbeatRequest{}, nil); st != 403 || !strings.Contains(string(raw), "agent agents is bound to no node: create a token bound to each of its nodes (lightpath user token create agents --node NODE") {
		t.Errorf("an unbound agent's heartbeat: %d %s", st, raw)
	}
	var tok apiv1.Token
	if st, raw := e.do("POST", "/api/v1/users/agents/tokens", fleet, apiv1.TokenRequest{Node: "ra"}, &tok); st != 201 || tok.Node != "ra" {
		t.Fatalf("an unbound agent's token for ra: %d %s", st, raw)
	}
	var who apiv1.Whoami
	if st, raw := e.do("GET", "/api/v1/whoami", tok.Secret, nil, &who); st != 200 || who.Node != "ra" || who.Role != "agent" {
		t.Errorf("whoami of ra's token: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/agents/ra/heartbeat", tok.Secret, apiv1.HeartbeatRequest{}, nil); st != 200 {
		t.Errorf("ra's token's heartbeat: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/agents/rb/heartbeat", tok.Secret, apiv1.HeartbeatRequest{}, nil); st != 403 {
		t.Errorf("ra's token's heartbeat as rb: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/users/agents/tokens", tok.Secret, apiv1.TokenRequest{Node: "rb"}, nil); st != 403 || !strings.Contains(string(raw), "bound to node ra: it cannot create one for node rb") {
		t.Errorf("ra's token creating one for rb: %d %s", st, raw)
	}
	var child apiv1.Token
	if st, raw := e.do("POST", "/api/v1/users/agents/tokens", tok.Secret, apiv1.TokenRequest{}, &child); st != 201 || child.Node != "ra" {
		t.Errorf("ra's token creating one without a node: %d %s (want it bound to ra)", st, raw)
	}
	// A node's token revokes only tokens of its node: not rb's, nor the
	// unbound one.
	var rbTok apiv1.Token
	if st, raw := e.do("POST", "/api/v1/users/agents/tokens", fleet, apiv1.TokenRequest{Node: "rb"}, &rbTok); st != 201 {
		t.Fatalf("rb's token: %d %s", st, raw)
	}
	var all apiv1.TokenList
	e.do("GET", "/api/v1/users/agents/tokens", fleet, nil, &all)
	for _, tk := range all.Tokens {
		want := 404
		if tk.Node == "ra" {
			continue // ra's own, revoked below
		}
		if st, raw := e.do("DELETE", "/api/v1/tokens/"+tk.ID, tok.Secret, nil, nil); st != want {
			t.Errorf("ra's token revoking %s (node %q): %d %s", tk.ID, tk.Node, st, raw)
		}
	}
	if st, raw := e.do("DELETE", "/api/v1/tokens/"+child.ID, tok.Secret, nil, nil); st != 204 {
		t.Errorf("ra's token revoking another of ra's: %d %s", st, raw)
	}
	if st, raw := e.do("POST", "/api/v1/agents/rb/heartbeat", rbTok.Secret, apiv1.HeartbeatRequest{}, nil); st != 200 {
		t.Errorf("rb's token after ra's attempts: %d %s", st, raw)
	}
	for _, tc := range []struct {
		name string
		path string
		body any
		msg  string
	}{
		{"a node for a user", "/api/v1/users", apiv1.UserRequest{Name: "bob", Role: "user", Node: "ra"}, "only an agent is bound to a node"},
		{"an unknown node", "/api/v1/users", apiv1.UserRequest{Name: "agent-x", Role: "agent", Node: "ghost"}, "not in the topology"},
		{"a user's token with a node", "/api/v1/users/admin/tokens", apiv1.TokenRequest{Node: "ra"}, "only an agent's token is bound to a node"},
	} {
		if st, raw := e.do("POST", tc.path, e.admin, tc.body, nil); st != 400 || !strings.Contains(string(raw), tc.msg) {
			t.Errorf("%s: %d %s, want 400 with %q", tc.name, st, raw, tc.msg)
		}
	}
	// An agent user bound to a node binds all its tokens.
	rb := e.agent("agent-rb", "rb")
	if st, raw := e.do("POST", "/api/v1/users/agent-rb/tokens", e.admin, apiv1.TokenRequest{Node: "ra"}, nil); st != 400 || !strings.Contains(string(raw), "agent agent-rb is bound to node rb") {
		t.Errorf("a token of rb's agent for ra: %d %s", st, raw)
	}
	if st, raw := e.do("GET", "/api/v1/whoami", rb, nil, &who); st != 200 || who.Node != "rb" {
		t.Errorf("whoami of rb's agent: %d %s", st, raw)
	}
}

// lightpath agent enrols with an unbound agent token: one token bound to
// its node, kept and reused; enrolling again needs an admin.
func TestAgentEnrol(t *testing.T) {
	e := newEnv(t, sqliteURL(t), twoSite)
	fleet := e.user("agents", "agent")
	ctx := context.Background()
	c, err := client.New(e.srv.URL, fleet)
	if err != nil {
		t.Fatal(err)
	}
	ra, minted, err := client.Enrol(ctx, c, "ra", "", nil)
	if err != nil || minted == "" {
		t.Fatalf("enrol: %q, %v", minted, err)
	}
	if _, err := ra.Heartbeat(ctx, "ra", time.Minute); err != nil {
		t.Errorf("heartbeat with the enrolled token: %v", err)
	}
	if _, err := ra.Heartbeat(ctx, "rb", time.Minute); err == nil || !strings.Contains(err.Error(), "bound to node ra") {
		t.Errorf("heartbeat as rb with ra's token: %v", err)
	}
	// Kept: reused, nothing minted.
	if _, again, err := client.Enrol(ctx, c, "ra", minted, nil); err != nil || again != "" {
		t.Errorf("enrol with the kept token: minted %q, %v", again, err)
	}
	// Lost: the shared token does not enrol ra again while ra's token
	// lives (a copy of it elsewhere would take ra over, issue 28), nor
	// revoke ra's token; the old one keeps working. Once an admin revokes
	// it, enrolment makes a new one.
	if _, again, err := client.Enrol(ctx, c, "ra", "", nil); err == nil || again != "" || !strings.Contains(err.Error(), "enrol as node ra: conflict: node ra is enrolled already") || !strings.Contains(err.Error(), "needs an admin") {
		t.Fatalf("enrol again while ra's token lives: %q, %v", again, err)
	}
	var toks apiv1.TokenList
	e.do("GET", "/api/v1/users/agents/tokens", e.admin, nil, &toks)
	var raID string
	for _, tk := range toks.Tokens {
		if tk.Node == "ra" {
			raID = tk.ID
		}
	}
	if st, raw := e.do("DELETE", "/api/v1/tokens/"+raID, fleet, nil, nil); st != 403 || !strings.Contains(string(raw), "bound to no node cannot revoke it") {
		t.Errorf("the shared token revoking ra's: %d %s", st, raw)
	}
	if st, raw := e.do("DELETE", "/api/v1/users/agents/tokens", fleet, nil, nil); st != 200 {
		t.Errorf("the shared token revoking every token of agents: %d %s", st, raw)
	}
	if st, raw := e.do("GET", "/api/v1/whoami", minted, nil, nil); st != 200 {
		t.Errorf("ra's token after the shared one's attempts: %d %s", st, raw)
	}
	if st, raw := e.do("DELETE", "/api/v1/tokens/"+raID, e.admin, nil, nil); st != 204 {
		t.Fatalf("an admin revokes ra's token: %d %s", st, raw)
	}
	fleet = e.token("agents", e.admin, "").Secret // the shared one revoked itself above
	c = c.WithToken(fleet)
	_, second, err := client.Enrol(ctx, c, "ra", "", nil)
	if err != nil || second == "" || second == minted {
		t.Fatalf("enrol again after an admin revoked ra's token: %q, %v", second, err)
	}
	// A token kept for another node is not used: enrolment starts over.
	if _, third, err := client.Enrol(ctx, c, "rb", second, nil); err != nil || third == "" {
		t.Errorf("enrol rb with ra's kept token: %q, %v", third, err)
	}
	// Bound elsewhere, or no agent at all: said clearly.
	if _, _, err := client.Enrol(ctx, c.WithToken(second), "rb", "", nil); err == nil || !strings.Contains(err.Error(), "bound to node ra, not rb") {
		t.Errorf("enrol rb with ra's token: %v", err)
	}
	if _, _, err := client.Enrol(ctx, c.WithToken(e.user("alice", "user")), "ra", "", nil); err == nil || !strings.Contains(err.Error(), "of role user") {
		t.Errorf("enrol with a user's token: %v", err)
	}
}
