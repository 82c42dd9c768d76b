// Package apiv1 is the contract of the REST API under /api/v1: the JSON
// bodies and the constants that the server (package api), the client
// (package client), the web UI and the OpenAPI document share. It links
// nothing of the server: the client and the agent import it, never the
// controller, the store or the server's metrics.
//
// Bandwidths are integers of bits per second in fields ending _bps, sizes
// integers of bytes in fields ending _bytes, times RFC 3339 strings and
// durations Go duration strings ("90m", "2h"). Reservations and exclusive
// holds are sent as reserve.Reservation and reserve.Exclusive.
package apiv1

import (
	"encoding/json"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/transfer"
)

// ErrorBody is every error response: {"error":{"code":...,"message":...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// Error codes, one per HTTP status class the API answers with.
const (
	CodeInvalid          = "invalid"            // 400: the request is malformed or self-contradictory
	CodeUnauthorized     = "unauthorized"       // 401: no token, or an unknown, expired or revoked one
	CodeForbidden        = "forbidden"          // 403: policy or role does not allow it
	CodeNotFound         = "not_found"          // 404
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeConflict         = "conflict"           // 409: stale version, wrong state, DSCP pool full, exclusive hold
	CodeCapacity         = "capacity"           // 409: the bandwidth does not fit; see Alternatives
	CodeTooLarge         = "too_large"          // 413: a body over the server's bound (api.MaxBodyBytes)
	CodeLimit            = "limit"              // 429: a per-user limit is reached; the message names it and its controller flag
	CodeUnsupportedMedia = "unsupported_media"  // 415: a body that is not application/json
	CodeTooMany          = "too_many"           // 429: too many open streams for one user
	CodeInternal         = "internal"           // 500
	CodeUnavailable      = "unavailable"        // 503: shutting down
	CodeStandby          = "standby"            // 503: this controller is a standby; another leads on its database
)

// Roles a controller answers with in Health.Role.
const (
	RoleLeader  = "leader"  // it holds the database's leader lock and serves
	RoleStandby = "standby" // it waits for the lock; every route but health answers 503 "standby"
)

// ErrorDetail says what went wrong. Field names the request field at fault
// where there is one. A capacity refusal carries the nearest alternatives;
// a refused topology reload lists the reservations it would strand.
type ErrorDetail struct {
	Code         string        `json:"code"`
	Message      string        `json:"message"`
	Field        string        `json:"field,omitempty"`
	Alternatives *Alternatives `json:"alternatives,omitempty"`
	Stranded     []string      `json:"stranded,omitempty"`
	// Deadline, with code "capacity" on POST /api/v1/jobs, is the
	// earliest completion a deadline job that cannot be met could have.
	Deadline *JobRefusal `json:"deadline,omitempty"`
}

// Alternatives are offered with a refused create: the earliest slot of the
// same bandwidth and duration at or after the requested start, and the
// widest bandwidth free over the requested slot. Either may be absent.
type Alternatives struct {
	Earliest *Slot `json:"earliest,omitempty"`
	Widest   *Slot `json:"widest,omitempty"`
}

// Slot is a scheduler's answer: a path, a bandwidth and a window, with the
// algorithm that produced it. Windows lists every feasible start window
// (find --all) instead of one slot.
type Slot struct {
	Algorithm string            `json:"algorithm"`
	Path      []reserve.PathHop `json:"path,omitempty"`
	Bandwidth uint64            `json:"bandwidth_bps,omitempty"`
	Start     time.Time         `json:"start,omitzero"`
	End       time.Time         `json:"end,omitzero"`
	Windows   []Window          `json:"windows,omitempty"`
}

// Window is a range of feasible start times, both ends included.
type Window struct {
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// ReservationRequest creates a reservation (POST /api/v1/reservations).
//
// The window is Start (RFC 3339; absent means now) and End or Duration.
// With SizeBytes, the controller books the earliest completion instead:
// Bandwidth is then the highest rate wanted (zero: whatever the network
// can give), End/Duration are not given, and Deadline, when set, is when
// the data must have arrived (refused if it cannot).
type ReservationRequest struct {
	From      string    `json:"from"`
	To        string    `json:"to"`
	Bandwidth uint64    `json:"bandwidth_bps"`
	Start     time.Time `json:"start,omitzero"`
	End       time.Time `json:"end,omitzero"`
	Duration  string    `json:"duration,omitempty"`
	SizeBytes uint64    `json:"size_bytes,omitempty"`
	Deadline  time.Time `json:"deadline,omitzero"`
	Project   string    `json:"project,omitempty"`
	FlowSpec  string    `json:"flow_spec,omitempty"`
	// Path, when given, is the list of link names to take from From to To;
	// otherwise the controller picks the path (fixed-slot BFS).
	Path []string `json:"path,omitempty"`
	// Hold, when set, books the reservation HELD for that long: it is
	// released unless committed (POST .../commit) before then.
	Hold           string `json:"hold,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Owner lets an operator or admin book on someone's behalf.
	Owner string `json:"owner,omitempty"`
}

// ReservationResponse is a reservation with the scheduler's word on it.
// Created is false when a retried create (same idempotency key) returned
// the reservation booked the first time.
type ReservationResponse struct {
	Reservation reserve.Reservation `json:"reservation"`
	Algorithm   string              `json:"algorithm,omitempty"`
	Created     bool                `json:"created"`
}

// ReservationList is GET /api/v1/reservations.
type ReservationList struct {
	Reservations []reserve.Reservation `json:"reservations"`
}

// ModifyRequest changes a reservation (PATCH /api/v1/reservations/{id}).
// Version is required: the version the client read. Absent fields stay.
// Path moves it to the named links; Reroute lets the controller choose a
// new path for the (possibly changed) slot and bandwidth; FlowSpec
// replaces the flows steered.
type ModifyRequest struct {
	Version   uint64    `json:"version"`
	Start     time.Time `json:"start,omitzero"`
	End       time.Time `json:"end,omitzero"`
	Bandwidth uint64    `json:"bandwidth_bps,omitempty"`
	Path      []string  `json:"path,omitempty"`
	Reroute   bool      `json:"reroute,omitempty"`
	// FlowSpec replaces the flow spec of a reservation booked with one
	// (`lightpath run` adds the connections of a pull this way).
	FlowSpec string `json:"flow_spec,omitempty"`
}

// ActionRequest is the body of commit and cancel. Version, when not zero,
// must match; Reason is recorded in the history.
type ActionRequest struct {
	Version uint64 `json:"version,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// FindRequest asks the scheduler without booking (POST /api/v1/find).
// Mode is one of FindFixed (a path for the slot), FindWidest (the widest
// path in the slot), FindEarliest (the earliest start for the bandwidth
// and duration), FindAll (every feasible start window) and FindCompletion
// (the earliest completion of SizeBytes at up to Bandwidth). Path, when
// given, fixes the links. Horizon bounds how late the slot may end
// (default: the booking horizon of the caller's policy).
type FindRequest struct {
	Mode      string    `json:"mode"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Bandwidth uint64    `json:"bandwidth_bps,omitempty"`
	Start     time.Time `json:"start,omitzero"`
	End       time.Time `json:"end,omitzero"`
	Duration  string    `json:"duration,omitempty"`
	SizeBytes uint64    `json:"size_bytes,omitempty"`
	Path      []string  `json:"path,omitempty"`
	Horizon   time.Time `json:"horizon,omitzero"`
	Project   string    `json:"project,omitempty"`
}

// The find modes.
const (
	FindFixed      = "fixed"
	FindWidest     = "widest"
	FindEarliest   = "earliest"
	FindAll        = "all"
	FindCompletion = "completion"
)

// ExclusiveRequest holds a node or a whole site exclusively
// (POST /api/v1/exclusives): exactly one of Node and Site.
type ExclusiveRequest struct {
	Node     string    `json:"node,omitempty"`
	Site     string    `json:"site,omitempty"`
	Start    time.Time `json:"start,omitzero"`
	End      time.Time `json:"end,omitzero"`
	Duration string    `json:"duration,omitempty"`
	Project  string    `json:"project,omitempty"`
}

// ExclusiveList is GET /api/v1/exclusives.
type ExclusiveList struct {
	Exclusives []reserve.Exclusive `json:"exclusives"`
}

// Topology is GET /api/v1/topology: what the controller schedules on.
type Topology struct {
	Name  string     `json:"name"`
	Sites []TopoSite `json:"sites"`
	Nodes []TopoNode `json:"nodes"`
	Links []TopoLink `json:"links"`
	YAML  string     `json:"yaml,omitempty"`
	// SHA256 is the hash of YAML: agents read the topology again when the
	// hash in their heartbeat's answer changes.
	SHA256 string         `json:"sha256"`
	Stats  TopologyCounts `json:"counts"`
}

// TopologyCounts sums up a topology.
type TopologyCounts struct {
	Sites int `json:"sites"`
	Nodes int `json:"nodes"`
	Links int `json:"links"`
}

// TopoSite is one site and its nodes.
type TopoSite struct {
	Name  string   `json:"name"`
	Nodes []string `json:"nodes"`
}

// TopoNode is one node with the addresses it owns.
type TopoNode struct {
	Name      string   `json:"name"`
	Site      string   `json:"site"`
	Role      string   `json:"role"`
	Addresses []string `json:"addresses"`
	Managed   bool     `json:"managed"`
}

// TopoLink is one link: its ends, its rate in each direction and the part
// of it that may be reserved.
type TopoLink struct {
	Name          string  `json:"name"`
	A             string  `json:"a"`
	B             string  `json:"b"`
	Role          string  `json:"role"`
	Capacity      uint64  `json:"capacity_bps"`
	Reservable    float64 `json:"reservable"`
	ReservableBps uint64  `json:"reservable_bps"`
	Delay         string  `json:"delay"`
}

// TopologyReload replaces the topology (PUT /api/v1/topology, admin):
// YAML is a testbed topology file's text. Refused (409, with Stranded)
// when a live reservation would lose a node or link it uses, or the
// bandwidth it holds.
type TopologyReload struct {
	YAML string `json:"yaml" text:"long"`
}

// Timeline is GET /api/v1/timeline?from=T&to=T[&link=NAME]: for every link
// direction, what is booked when and by whom, over [From, To).
type Timeline struct {
	From  time.Time      `json:"from"`
	To    time.Time      `json:"to"`
	Links []LinkTimeline `json:"links"`
}

// LinkTimeline is one link's two directions.
type LinkTimeline struct {
	Link       string              `json:"link"`
	Directions []DirectionTimeline `json:"directions"`
}

// DirectionTimeline is one direction of a link: its reservable capacity,
// the booked bandwidth as steps, and the live reservations crossing it.
type DirectionTimeline struct {
	From          string        `json:"from"`
	To            string        `json:"to"`
	ReservableBps uint64        `json:"reservable_bps"`
	Steps         []Step        `json:"steps"`
	Bookings      []BookingInfo `json:"bookings"`
}

// Step is the booked and free bandwidth over [Start, End).
type Step struct {
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Used     uint64    `json:"used_bps"`
	Residual uint64    `json:"residual_bps"`
}

// BookingInfo is a live reservation as the timeline shows it.
type BookingInfo struct {
	ID        string        `json:"id"`
	Owner     string        `json:"owner"`
	Project   string        `json:"project,omitempty"`
	Bandwidth uint64        `json:"bandwidth_bps"`
	Start     time.Time     `json:"start"`
	End       time.Time     `json:"end"`
	State     reserve.State `json:"state"`
}

// UserRequest adds a user (POST /api/v1/users, admin).
type UserRequest struct {
	Name     string   `json:"name"`
	Role     string   `json:"role"`
	Projects []string `json:"projects,omitempty"`
	// Node binds an agent to one node: all its tokens act for it alone.
	Node string `json:"node,omitempty"`
}

// User is a user as the API shows it.
type User struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	Projects  []string  `json:"projects"`
	CreatedAt time.Time `json:"created_at"`
	Node      string    `json:"node,omitempty"`
}

// UserList is GET /api/v1/users.
type UserList struct {
	Users []User `json:"users"`
}

// TokenRequest creates a token for a user (POST /api/v1/users/{name}/tokens):
// ExpiresIn is a duration ("720h"); absent means the token never expires.
type TokenRequest struct {
	ExpiresIn string `json:"expires_in,omitempty"`
	// Node binds an agent's token to one node.
	Node string `json:"node,omitempty"`
}

// Token describes a token. Secret is the token itself, present only in the
// answer that created it: the controller keeps its hash alone.
type Token struct {
	ID        string    `json:"id"`
	User      string    `json:"user"`
	Secret    string    `json:"token,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	Node      string    `json:"node,omitempty"`
}

// TokenList is GET /api/v1/users/{name}/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// Whoami is GET /api/v1/whoami.
type Whoami struct {
	User     string   `json:"user"`
	Role     string   `json:"role"`
	Projects []string `json:"projects"`
	// Node is the node an agent's token acts for.
	Node string `json:"node,omitempty"`
}

// Health is GET /api/v1/health, which needs no token.
type Health struct {
	Status        string    `json:"status"`
	Version       string    `json:"version"`
	SchemaVersion int       `json:"schema_version"`
	Store         string    `json:"store"`
	Now           time.Time `json:"now"`
	Reservations  int       `json:"live_reservations"`
	// Role is RoleLeader or RoleStandby: a second controller on the same
	// database waits as a standby until the leader dies.
	Role string `json:"role"`
}

// AuditEntry is one line of the audit log (GET /api/v1/audit, operator).
type AuditEntry struct {
	Seq    int64     `json:"seq"`
	At     time.Time `json:"at"`
	Who    string    `json:"who"`
	What   string    `json:"what"`
	Detail string    `json:"detail,omitempty"`
}

// AuditList is GET /api/v1/audit.
type AuditList struct {
	Entries []AuditEntry `json:"entries"`
}

// Event is one message of the event stream (GET /api/v1/events, SSE with
// "event: reservation" or "event: exclusive"): the object after the
// change and the transition that made it.
type Event struct {
	Seq         uint64               `json:"seq"`
	Kind        string               `json:"kind"`
	Reservation *reserve.Reservation `json:"reservation,omitempty"`
	Exclusive   *reserve.Exclusive   `json:"exclusive,omitempty"`
	Transition  *reserve.Transition  `json:"transition,omitempty"`
}

// Policy is GET/PUT /api/v1/policy: the limits per role and per project
// (admins change it). Each field of the effective limits comes from the
// most specific level that sets it: the project, then the role, then
// Default, then the built-in defaults (8h, 4416h, the rest unlimited).
type Policy struct {
	Default  Limits            `json:"default"`
	Roles    map[string]Limits `json:"roles,omitempty"`
	Projects map[string]Limits `json:"projects,omitempty"`
}

// Limits bounds what may be booked; an absent field inherits.
type Limits struct {
	MaxDuration         string `json:"max_duration,omitempty"`
	MinDuration         string `json:"min_duration,omitempty"`
	Horizon             string `json:"horizon,omitempty"`
	MaxBandwidth        uint64 `json:"max_bandwidth_bps,omitempty"`
	MaxProjectBandwidth uint64 `json:"max_project_bandwidth_bps,omitempty"`
	// MaxJobs bounds a user's unfinished transfer jobs, MaxProjectJobs a
	// project's (every member's together).
	MaxJobs        int `json:"max_jobs,omitempty"`
	MaxProjectJobs int `json:"max_project_jobs,omitempty"`
}

// Agent is a node agent as the controller sees it (GET /api/v1/agents).
type Agent struct {
	Node         string    `json:"node"`
	RegisteredAt time.Time `json:"registered_at"`
	LeaseExpires time.Time `json:"lease_expires"`
	Alive        bool      `json:"alive"`
}

// AgentList is GET /api/v1/agents.
type AgentList struct {
	Agents []Agent `json:"agents"`
}

// HeartbeatRequest registers a node's agent or renews its lease
// (POST /api/v1/agents/{node}/heartbeat, role agent): Lease is how long
// the heartbeat keeps it alive (default 15s, at most 5m).
type HeartbeatRequest struct {
	Lease string `json:"lease,omitempty"`
}

// AgentWork answers a heartbeat: the lease, the topology's hash, and the
// live reservations that touch the node.
type AgentWork struct {
	Node           string                `json:"node"`
	LeaseExpires   time.Time             `json:"lease_expires"`
	TopologySHA256 string                `json:"topology_sha256"`
	Reservations   []reserve.Reservation `json:"reservations"`
}

// NodeReport is an agent's word on its part of a reservation
// (POST /api/v1/reservations/{id}/nodes/{node}): Status "provisioned" or
// "failed"; Reason is required for a failure.
type NodeReport struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// LinkReport is an agent's word on a link at its node
// (POST /api/v1/agents/{node}/links/{link}): Status "down" (its carrier is
// gone) or "up". A link down moves the reservations crossing it to another
// admissible path, or flags them degraded until it is up again.
type LinkReport struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// LinkReportResult says what a link report changed: the reservations that
// were moved or degraded.
type LinkReportResult struct {
	Link         string                `json:"link"`
	Status       string                `json:"status"`
	Reservations []reserve.Reservation `json:"reservations"`
}

// PushResult answers an agent's push (POST /api/v1/metrics/push, body a
// monitor.Batch): samples stored, and samples skipped because the
// repository already held them (a batch sent again).
type PushResult struct {
	Stored    int `json:"stored"`
	Duplicate int `json:"duplicate"`
}

// QueryResult answers GET /api/v1/metrics/query: every matching series with
// its points as [milliseconds since the epoch, value] (null for a value JSON
// cannot hold).
type QueryResult struct {
	Series []QuerySeries `json:"series"`
	// Step, when the query gave none and its range was too long for raw
	// samples, is the step the controller chose (a Go duration).
	Step string `json:"step,omitempty"`
}

// QuerySeries is one series of a query's answer.
type QuerySeries struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Points [][2]any          `json:"points"`
}

// MetricNames answers GET /api/v1/metrics/names.
type MetricNames struct {
	Names []MetricName `json:"names"`
}

// MetricName is one metric name the repository holds, with its type and
// help as the agents declared them.
type MetricName struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
	Help string `json:"help,omitempty"`
}

// TransferList answers GET /api/v1/transfers.
type TransferList struct {
	Transfers []transfer.Transfer `json:"transfers"`
}

// TransferPage answers GET /api/v1/transfers/{id}: the transfer, its
// reservation, the links and nodes of its path, and the alert state
// changes on them (or on the transfer itself) while it ran, newest first.
type TransferPage struct {
	Transfer    transfer.Transfer    `json:"transfer"`
	Reservation *reserve.Reservation `json:"reservation,omitempty"`
	Links       []string             `json:"links"`
	Nodes       []string             `json:"nodes"`
	Alerts      []json.RawMessage    `json:"alerts"`
}

// Live is one frame of GET /api/v1/metrics/live (an event stream).
type Live struct {
	T         int64          `json:"t"`
	Links     []LiveLink     `json:"links"`
	Transfers []LiveTransfer `json:"transfers"`
}

// LiveLink is one link direction in a live frame.
type LiveLink struct {
	Link        string  `json:"link"`
	From        string  `json:"from"`
	To          string  `json:"to"`
	T           int64   `json:"t,omitempty"`
	Bps         float64 `json:"bps"`
	Utilisation float64 `json:"utilisation"`
	CapacityBps uint64  `json:"capacity_bps"`
	ReservedBps uint64  `json:"reserved_bps"`
}

// LiveTransfer is one running transfer in a live frame.
type LiveTransfer struct {
	ID          string  `json:"id"`
	Owner       string  `json:"owner"`
	T           int64   `json:"t"`
	Bps         float64 `json:"bps"`
	BytesDone   int64   `json:"bytes_done"`
	BytesTotal  int64   `json:"bytes_total"`
	Reservation string  `json:"reservation,omitempty"`
	From        string  `json:"from,omitempty"`
	To          string  `json:"to,omitempty"`
	Streams     int     `json:"streams"`
}

// StreamEnd is the last frame of a stream whose token stopped working
// ("event: end"): the reason, as a 401 would give it.
type StreamEnd struct {
	Reason string `json:"reason"`
}

// SignInHint is GET /api/v1/signin, which needs no token: where a new
// user finds a token to sign in with.
type SignInHint struct {
	// AdminTokenFile is the file the controller keeps the admin's token
	// in (--admin-token-file), when it was given one.
	AdminTokenFile string `json:"admin_token_file,omitempty"`
}

// SignInRequest is POST /api/v1/signin.
type SignInRequest struct {
	Code string `json:"code"`
}

// SignIn answers a sign-in by code: a token of User that expires.
type SignIn struct {
	Token     string    `json:"token"`
	User      string    `json:"user"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PlanRequest asks the joint planner, without booking (POST
// /api/v1/plan): the earliest window in which SizeBytes can move from the
// source nodes to the destination nodes over every path between them at
// once, against what is booked. Goodput (η, in (0, 1]; 1 when absent) is
// the fraction of a booked rate that carries the data; the window starts
// no earlier than now plus StartUp; MinDuration is the shortest window
// (and the policy's shortest reservation); Deadline, when set, is only a
// bound: the answer is the earliest completion, and MeetsDeadline says
// whether it is in time.
type PlanRequest struct {
	Sources      []PlanEndpoint `json:"sources"`
	Destinations []PlanEndpoint `json:"destinations"`
	SizeBytes    uint64         `json:"size_bytes"`
	Goodput      float64        `json:"goodput,omitempty"`
	StartUp      string         `json:"start_up,omitempty"`
	MinDuration  string         `json:"min_duration,omitempty"`
	Deadline     time.Time      `json:"deadline,omitzero"`
	Project      string         `json:"project,omitempty"`
}

// PlanEndpoint is a node of a joint plan and the most it may send or
// receive in all (zero: what its links carry).
type PlanEndpoint struct {
	Node    string `json:"node"`
	MaxRate uint64 `json:"max_rate_bps,omitempty"`
}

// Plan is the joint planner's answer: every flow held at its rate over
// one window; Rate is their sum. Each flow is a reservation to book on
// its path.
type Plan struct {
	Algorithm     string     `json:"algorithm"`
	Start         time.Time  `json:"start"`
	End           time.Time  `json:"end"`
	Rate          uint64     `json:"rate_bps"`
	Flows         []PlanFlow `json:"flows"`
	MeetsDeadline bool       `json:"meets_deadline"`
}

// PlanFlow is one path of a plan.
type PlanFlow struct {
	From string            `json:"from"`
	To   string            `json:"to"`
	Path []reserve.PathHop `json:"path"`
	Rate uint64            `json:"rate_bps"`
}
