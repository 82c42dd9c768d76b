package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
)

// One method per route of docs/controller.md, in its order.

// Health is GET /api/v1/health (no token needed).
func (c *Client) Health(ctx context.Context) (apiv1.Health, error) {
	return get[apiv1.Health](ctx, c, "/health", nil)
}

// OpenAPI is GET /api/v1/openapi.json: the API's OpenAPI 3.1 document.
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	return get[json.RawMessage](ctx, c, "/openapi.json", nil)
}

// Whoami is GET /api/v1/whoami: the caller's user, role and projects.
func (c *Client) Whoami(ctx context.Context) (apiv1.Whoami, error) {
	return get[apiv1.Whoami](ctx, c, "/whoami", nil)
}

// Topology is GET /api/v1/topology.
func (c *Client) Topology(ctx context.Context) (apiv1.Topology, error) {
	return get[apiv1.Topology](ctx, c, "/topology", nil)
}

// ReloadTopology is PUT /api/v1/topology (admin): a refusal that would
// strand reservations is an *APIError with Detail.Stranded.
func (c *Client) ReloadTopology(ctx context.Context, yaml string) (apiv1.Topology, error) {
	return call[apiv1.Topology](ctx, c, http.MethodPut, "/topology", nil, apiv1.TopologyReload{YAML: yaml})
}

// Timeline is GET /api/v1/timeline: booked steps per link direction over
// [from, to), of one link when link is not empty.
func (c *Client) Timeline(ctx context.Context, from, to time.Time, link string) (apiv1.Timeline, error) {
	q := url.Values{}
	setTime(q, "from", from)
	setTime(q, "to", to)
	setString(q, "link", link)
	return get[apiv1.Timeline](ctx, c, "/timeline", q)
}

// Find is POST /api/v1/find: the scheduler's answer without booking. When
// nothing fits, the error is an *APIError with code "capacity".
func (c *Client) Find(ctx context.Context, req apiv1.FindRequest) (apiv1.Slot, error) {
	return post[apiv1.Slot](ctx, c, "/find", req)
}

// ListOptions filters ListReservations (and Exclusives, which take Owner,
// Node and States); empty fields do not filter. States keeps those in any
// of them; From and To keep those whose window overlaps [From, To).
type ListOptions struct {
	Owner, Project, Node string
	States               []string
	From, To             time.Time
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	setString(q, "owner", o.Owner)
	setString(q, "project", o.Project)
	setString(q, "node", o.Node)
	for _, s := range o.States {
		q.Add("state", s)
	}
	setTime(q, "from", o.From)
	setTime(q, "to", o.To)
	return q
}

// ListReservations is GET /api/v1/reservations: the caller's own, or
// everyone's for an operator.
func (c *Client) ListReservations(ctx context.Context, o ListOptions) ([]reserve.Reservation, error) {
	l, err := get[apiv1.ReservationList](ctx, c, "/reservations", o.query())
	return l.Reservations, err
}

// CreateReservation is POST /api/v1/reservations. Created is false in the
// answer when the idempotency key had already booked it. A refusal for
// capacity is an *APIError with code "capacity" and the alternatives.
func (c *Client) CreateReservation(ctx context.Context, req apiv1.ReservationRequest) (apiv1.ReservationResponse, error) {
	return post[apiv1.ReservationResponse](ctx, c, "/reservations", req)
}

// reservationBody reads an answer that is a reservation, whether the
// controller wraps it ({"reservation":{...}}, as a create does) or not.
type reservationBody struct {
	apiv1.ReservationResponse
}

func (b *reservationBody) UnmarshalJSON(data []byte) error {
	var probe struct {
		Reservation json.RawMessage `json:"reservation"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return err
	}
	if len(probe.Reservation) > 0 && string(probe.Reservation) != "null" {
		return json.Unmarshal(data, &b.ReservationResponse)
	}
	return json.Unmarshal(data, &b.Reservation)
}

// Reservation is GET /api/v1/reservations/{id}: one, with its history.
func (c *Client) Reservation(ctx context.Context, id string) (reserve.Reservation, error) {
	b, err := get[reservationBody](ctx, c, "/reservations/"+escape(id), nil)
	return b.Reservation, err
}

// ModifyReservation is PATCH /api/v1/reservations/{id}: req.Version must be
// the version read, or the answer is a conflict.
func (c *Client) ModifyReservation(ctx context.Context, id string, req apiv1.ModifyRequest) (reserve.Reservation, error) {
	b, err := call[reservationBody](ctx, c, http.MethodPatch, "/reservations/"+escape(id), nil, req)
	return b.Reservation, err
}

// CommitReservation is POST /api/v1/reservations/{id}/commit.
func (c *Client) CommitReservation(ctx context.Context, id string, req apiv1.ActionRequest) (reserve.Reservation, error) {
	b, err := post[reservationBody](ctx, c, "/reservations/"+escape(id)+"/commit", req)
	return b.Reservation, err
}

// CancelReservation is POST /api/v1/reservations/{id}/cancel.
func (c *Client) CancelReservation(ctx context.Context, id string, req apiv1.ActionRequest) (reserve.Reservation, error) {
	b, err := post[reservationBody](ctx, c, "/reservations/"+escape(id)+"/cancel", req)
	return b.Reservation, err
}

// exclusiveBody reads an answer that is an exclusive hold, wrapped
// ({"exclusive":{...}}) or not.
type exclusiveBody struct {
	reserve.Exclusive
}

func (b *exclusiveBody) UnmarshalJSON(data []byte) error {
	var probe struct {
		Exclusive json.RawMessage `json:"exclusive"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return err
	}
	if len(probe.Exclusive) > 0 && string(probe.Exclusive) != "null" {
		return json.Unmarshal(probe.Exclusive, &b.Exclusive)
	}
	return json.Unmarshal(data, &b.Exclusive)
}

// Exclusives is GET /api/v1/exclusives, filtered by o's Owner, Node and
// States.
func (c *Client) Exclusives(ctx context.Context, o ListOptions) ([]reserve.Exclusive, error) {
	l, err := get[apiv1.ExclusiveList](ctx, c, "/exclusives", o.query())
	return l.Exclusives, err
}

// CreateExclusive is POST /api/v1/exclusives: hold a node or a site.
func (c *Client) CreateExclusive(ctx context.Context, req apiv1.ExclusiveRequest) (reserve.Exclusive, error) {
	b, err := post[exclusiveBody](ctx, c, "/exclusives", req)
	return b.Exclusive, err
}

// CancelExclusive is POST /api/v1/exclusives/{id}/cancel.
func (c *Client) CancelExclusive(ctx context.Context, id string, req apiv1.ActionRequest) (reserve.Exclusive, error) {
	b, err := post[exclusiveBody](ctx, c, "/exclusives/"+escape(id)+"/cancel", req)
	return b.Exclusive, err
}

// Users is GET /api/v1/users (admin).
func (c *Client) Users(ctx context.Context) ([]apiv1.User, error) {
	l, err := get[apiv1.UserList](ctx, c, "/users", nil)
	return l.Users, err
}

// AddUser is POST /api/v1/users (admin).
func (c *Client) AddUser(ctx context.Context, req apiv1.UserRequest) (apiv1.User, error) {
	return post[apiv1.User](ctx, c, "/users", req)
}

// CreateToken is POST /api/v1/users/{name}/tokens: the answer's Secret is
// the token, shown this once.
func (c *Client) CreateToken(ctx context.Context, user string, req apiv1.TokenRequest) (apiv1.Token, error) {
	return post[apiv1.Token](ctx, c, "/users/"+escape(user)+"/tokens", req)
}

// Tokens is GET /api/v1/users/{name}/tokens (never the secrets).
func (c *Client) Tokens(ctx context.Context, user string) ([]apiv1.Token, error) {
	l, err := get[apiv1.TokenList](ctx, c, "/users/"+escape(user)+"/tokens", nil)
	return l.Tokens, err
}

// RevokeToken is DELETE /api/v1/tokens/{id}.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/tokens/"+escape(id), nil, nil, nil)
}

// RevokeUserTokens is DELETE /api/v1/users/{name}/tokens: every token of
// the user, revoked at once; it returns them.
func (c *Client) RevokeUserTokens(ctx context.Context, user string) ([]apiv1.Token, error) {
	l, err := call[apiv1.TokenList](ctx, c, http.MethodDelete, "/users/"+escape(user)+"/tokens", nil, nil)
	return l.Tokens, err
}

// Policy is GET /api/v1/policy.
func (c *Client) Policy(ctx context.Context) (apiv1.Policy, error) {
	return get[apiv1.Policy](ctx, c, "/policy", nil)
}

// SetPolicy is PUT /api/v1/policy (admin).
func (c *Client) SetPolicy(ctx context.Context, p apiv1.Policy) (apiv1.Policy, error) {
	return call[apiv1.Policy](ctx, c, http.MethodPut, "/policy", nil, p)
}

// AuditOptions filters Audit; zero fields do not filter.
type AuditOptions struct {
	Who   string
	Since time.Time
	Limit int
}

// Audit is GET /api/v1/audit (operator).
func (c *Client) Audit(ctx context.Context, o AuditOptions) ([]apiv1.AuditEntry, error) {
	q := url.Values{}
	setString(q, "who", o.Who)
	setTime(q, "since", o.Since)
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	l, err := get[apiv1.AuditList](ctx, c, "/audit", q)
	return l.Entries, err
}

// Agents is GET /api/v1/agents.
func (c *Client) Agents(ctx context.Context) ([]apiv1.Agent, error) {
	l, err := get[apiv1.AgentList](ctx, c, "/agents", nil)
	return l.Agents, err
}

// Heartbeat is POST /api/v1/agents/{node}/heartbeat (role agent): it
// registers the node's agent or renews its lease (zero: the controller's
// default) and returns its work.
func (c *Client) Heartbeat(ctx context.Context, node string, lease time.Duration) (apiv1.AgentWork, error) {
	req := apiv1.HeartbeatRequest{}
	if lease > 0 {
		req.Lease = lease.String()
	}
	return post[apiv1.AgentWork](ctx, c, "/agents/"+escape(node)+"/heartbeat", req)
}

// ReportNode is POST /api/v1/reservations/{id}/nodes/{node}: the agent's
// word on its node's part, provisioned (failure "") or failed.
func (c *Client) ReportNode(ctx context.Context, id, node, failure string) (reserve.Reservation, error) {
	rep := apiv1.NodeReport{Status: "provisioned"}
	if failure != "" {
		rep = apiv1.NodeReport{Status: "failed", Reason: failure}
	}
	b, err := post[reservationBody](ctx, c, "/reservations/"+escape(id)+"/nodes/"+escape(node), rep)
	return b.Reservation, err
}

// ReportLink is POST /api/v1/agents/{node}/links/{link}: the agent's word
// that a link at its node is down (carrier gone) or up again.
func (c *Client) ReportLink(ctx context.Context, node, link string, up bool, reason string) (apiv1.LinkReportResult, error) {
	rep := apiv1.LinkReport{Status: "down", Reason: reason}
	if up {
		rep = apiv1.LinkReport{Status: "up"}
	}
	return post[apiv1.LinkReportResult](ctx, c, "/agents/"+escape(node)+"/links/"+escape(link), rep)
}

// Plan asks the joint planner without booking (POST /api/v1/plan).
func (c *Client) Plan(ctx context.Context, req apiv1.PlanRequest) (apiv1.Plan, error) {
	return post[apiv1.Plan](ctx, c, "/plan", req)
}
