package apiv1

// The transfer service's bodies: jobs (/api/v1/jobs), endpoints
// (/api/v1/endpoints) and what data nodes say and are told
// (/api/v1/datanodes/{node}/..., /api/v1/tasks/{id}/...). Jobs, files,
// tasks, endpoints and data nodes travel as package transfer's types.

import (
	"time"

	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transfer"
)

// JobResponse answers a submission: Created is false when a repeated
// submission (same Key, same request) returned the job made the first
// time.
type JobResponse struct {
	Job     transfer.Job `json:"job"`
	Created bool         `json:"created"`
}

// JobList answers GET /api/v1/jobs.
type JobList struct {
	Jobs []transfer.Job `json:"jobs"`
}

// JobPage answers GET /api/v1/jobs/{id}: the job, a page of its files
// (all states, or those in ?files=STATE) in path order, at most ?limit=
// (1000 by default, at most 10,000) after the path ?after=, with Next the
// after= of the next page (empty on the last), the job's files counted by
// state, its tasks (at most 500, the oldest first), and with
// ?optimizer=1 the optimizer's decisions for its pairs, newest first.
type JobPage struct {
	Job   transfer.Job       `json:"job"`
	Files []transfer.JobFile `json:"files"`
	// Next is the ?after= of the next page of files; empty on the last.
	Next string `json:"next,omitempty"`
	// FileCounts counts all the job's files by state (states without
	// files left out), whatever the page holds; on the first page (no
	// ?after=) only.
	FileCounts map[string]int      `json:"file_counts,omitempty"`
	Tasks      []transfer.Task     `json:"tasks"`
	Decisions  []transfer.Decision `json:"decisions,omitempty"`
}

// JobRefusal is the Detail a deadline job that cannot be met is refused
// with (409 "capacity"): the earliest completion the network can give,
// and how.
type JobRefusal struct {
	EarliestCompletion time.Time `json:"earliest_completion,omitzero"`
	Algorithm          string    `json:"algorithm,omitempty"`
}

// EndpointList answers GET /api/v1/endpoints: every endpoint with its data
// nodes, alive or gone.
type EndpointList struct {
	Endpoints []transfer.Endpoint `json:"endpoints"`
}

// EndpointAllow says who may use an endpoint
// (POST /api/v1/endpoints/{name}/allow, admin): the users and projects
// added. Remove takes them away instead.
type EndpointAllow struct {
	Users    []string `json:"users,omitempty"`
	Projects []string `json:"projects,omitempty"`
	Remove   bool     `json:"remove,omitempty"`
}

// EndpointAdd creates an endpoint at a site, or adds data nodes to one
// (POST /api/v1/endpoints, admin). Nodes are the topology nodes that may
// register as its data nodes; a node of an agent's or a data node's token
// registers for no other endpoint.
type EndpointAdd struct {
	Name  string   `json:"name"`
	Site  string   `json:"site"`
	Nodes []string `json:"nodes,omitempty"`
}

// DataNodeHeartbeat registers a data node or renews its lease
// (POST /api/v1/datanodes/{node}/heartbeat, a token of role agent bound to
// the node, or an admin's). Lease defaults to 15s, at most 5m. Tasks are
// the tasks the node runs, with their progress: their leases are renewed
// with the node's.
type DataNodeHeartbeat struct {
	Endpoint   string         `json:"endpoint"`
	Address    string         `json:"address"`
	MaxRateBps uint64         `json:"max_rate_bps,omitempty"`
	Lease      string         `json:"lease,omitempty"`
	Tasks      []TaskProgress `json:"tasks,omitempty"`
	// Parts says the node pushes parts of large files and its server
	// takes them (mover protocol 4): only such nodes are handed part
	// tasks, as source or destination.
	Parts bool `json:"parts,omitempty"`
	// Granted are the attempts under which the node's server runs
	// sessions now (pushes it takes): the answer fences each that is no
	// longer current (its task ended, failed, was cancelled or
	// re-attempted), which ends them.
	Granted []Fence `json:"granted,omitempty"`
	// Broken are the attempts under which a session the node's server
	// took ended broken since its last heartbeat (the pushing node went
	// away or failed mid-session) and none runs again: the controller
	// suspects the pushing node, and takes its tasks back as soon as it
	// has stayed silent a few seconds more, without waiting for its
	// lease to lapse. The node sends a heartbeat at once when one breaks.
	Broken []Fence `json:"broken,omitempty"`
	// FreeBytes is the free space of the node's root (statfs), for the
	// controller to tell whether a job fits its destination; absent where
	// the node has no root of its own (one fronting a storage system) or
	// cannot say.
	FreeBytes *int64 `json:"free_bytes,omitempty"`
}

// DataNodeWork answers a heartbeat.
type DataNodeWork struct {
	Node         string    `json:"node"`
	LeaseExpires time.Time `json:"lease_expires"`
	// GrantKey is the controller's public key (ed25519, base64), with
	// which the node's server checks the grants of the pushes it takes.
	GrantKey string `json:"grant_key"`
	// ReceiptKey is this node's receipt secret (base64), told to it alone:
	// its server signs with it a receipt of each file it writes under a
	// grant, which the pushing node hands on in its report
	// (FileReport.Receipt). Whoever holds it can confirm files in this
	// node's name; it is derived from the controller's receipt key.
	ReceiptKey string `json:"receipt_key,omitempty"`
	// Fences are, for the tasks whose destination is this node, the
	// current attempt: the server refuses (and cuts) any older one. For
	// an attempt in the heartbeat's Granted that is no longer current, a
	// fence one past it: it is refused, and cut.
	Fences []Fence `json:"fences,omitempty"`
	// Cancel lists the node's tasks to stop: their job was cancelled or
	// their attempt is no longer current.
	Cancel []string `json:"cancel,omitempty"`
	// Rates are the current pace of the node's running copy tasks: a
	// booked pair's rate shared evenly among the pair's running tasks,
	// divided again as its tasks end and start. The node re-paces their
	// pushes at once. RateBps 0 is an unbooked task (the node shares its
	// --max-rate among its tasks).
	Rates []TaskRate `json:"rates,omitempty"`
}

// TaskRate is a running task's current pace, in bits per second.
type TaskRate struct {
	Task    string `json:"task"`
	Attempt int    `json:"attempt"`
	RateBps uint64 `json:"rate_bps"`
}

// Fence is a task's current attempt.
type Fence struct {
	Task    string `json:"task"`
	Attempt int    `json:"attempt"`
}

// GrantCheck asks whether an attempt of a task pushed to the node is still
// current (POST /api/v1/datanodes/{node}/grants/check): the node's server
// asks before it takes a session under the attempt's grant.
type GrantCheck struct {
	Task    string `json:"task"`
	Attempt int    `json:"attempt"`
}

// GrantStatus answers a GrantCheck. Current is true only while the task
// is ACTIVE at that attempt, pushing to the node, and its job has not
// ended; otherwise Reason says why not (for a task that is not the
// node's, without its details).
type GrantStatus struct {
	Current bool   `json:"current"`
	Reason  string `json:"reason,omitempty"`
}

// TaskProgress is a running task's word in a heartbeat.
type TaskProgress struct {
	Task          string  `json:"task"`
	Attempt       int     `json:"attempt"`
	BytesDone     int64   `json:"bytes_done"`
	ThroughputBps float64 `json:"throughput_bps"`
}

// ClaimRequest asks for work (POST /api/v1/datanodes/{node}/claim): at
// most Max tasks (default 1). Wait (a Go duration, at most 30s) makes a
// claim that finds nothing to hand out wait until something could be
// (a job listed or started, a task ended or requeued, a lease lapsed, a
// cancel) or Wait passes; it then answers, maybe with no task. A
// controller that does not know Wait answers at once.
type ClaimRequest struct {
	Max  int    `json:"max,omitempty"`
	Wait string `json:"wait,omitempty"`
}

// Claim answers a claim: the tasks the node now holds (none: nothing to
// do for it now).
type Claim struct {
	Tasks []TaskWork `json:"tasks"`
	// Rates are the new pace of tasks the node already runs whose booked
	// pair the claimed tasks now share: the node applies them before it
	// starts the claimed ones, so the pair never runs above its booking.
	Rates []TaskRate `json:"rates,omitempty"`
}

// TaskWork is a claimed task with everything the node needs to run it.
type TaskWork struct {
	Task transfer.Task `json:"task"`
	// Sources are the paths to list (a list task), under the endpoint's
	// root, as the job gave them.
	Sources []string `json:"sources,omitempty"`
	// Files are a copy task's files: source path, destination path,
	// size, and the expected checksum when the job gave one.
	Files []transfer.JobFile `json:"files,omitempty"`
	// Address is the destination node's server; Grant the capability it
	// takes for this task and attempt.
	Address string `json:"address,omitempty"`
	Grant   string `json:"grant,omitempty"`
	// SourceAddr, when set, is the address the push must leave from: the
	// source of the pair's flow spec, so a booked pair's packets match its
	// reservation whatever address the kernel would pick.
	SourceAddr string `json:"source_addr,omitempty"`
	Checksum   string `json:"checksum,omitempty"`
	Policy     string `json:"policy,omitempty"`
	// CC is the congestion control the job asks its pushes to run (its
	// JobRequest.CC); "" leaves the data node's own (serve --cc, or the
	// transport's default).
	CC string `json:"cc,omitempty"`
	// Transport carries the pushes' data streams (the job's
	// JobRequest.Transport): "" or tcp, or udp.
	Transport string `json:"transport,omitempty"`
	// Timeout bounds a list task.
	Timeout string `json:"timeout,omitempty"`
}

// MaxListingPage bounds the files of one page of a listing.
const MaxListingPage = 10000

// Listing is a page of a list task's result (POST
// /api/v1/tasks/{id}/listing): files under the sources, or the error that
// stopped the listing. A listing comes in pages of at most 10,000 files:
// Page counts from 0, and More is set on every page but the last. A page
// sent again (its answer lost) is taken once. A Listing without Page and
// More is a whole listing in one page, as older data nodes send it.
type Listing struct {
	Attempt int           `json:"attempt"`
	Page    int           `json:"page,omitempty"`
	More    bool          `json:"more,omitempty"`
	Files   []ListedFile  `json:"files,omitempty"`
	Error   string        `json:"error,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns,omitempty"`
}

// ListedFile is one file found by a listing: its path under the source
// endpoint's root and the source it was found under (one of the job's).
type ListedFile struct {
	Path   string    `json:"path"`
	Source string    `json:"source"`
	Size   int64     `json:"size"`
	MTime  time.Time `json:"mtime,omitzero"`
}

// TaskReport is a copy task's word (POST /api/v1/tasks/{id}/report): each
// file's verdict as it comes, and Done with the last report. Files of the
// task not reported by then go back to the queue.
type TaskReport struct {
	Attempt       int          `json:"attempt"`
	Files         []FileReport `json:"files,omitempty"`
	BytesDone     int64        `json:"bytes_done"`
	ThroughputBps float64      `json:"throughput_bps,omitempty"`
	Done          bool         `json:"done,omitempty"`
	Error         string       `json:"error,omitempty"`
	// Permanent says the task's error will not go away by retrying (a
	// refused path, a refused grant). The controller decides by Class;
	// Permanent is for controllers older than it.
	Permanent bool `json:"permanent,omitempty"`
	// Class is the class of Error, the failure of the task's files that
	// have no verdict of their own: FailureClasses. Missing or unknown
	// (an older data node): internal.
	Class string `json:"class,omitempty"`
}

// The classes of a failure (FileReport.Class, TaskReport.Class,
// transfer.JobFile.Class), on which the controller decides what to do
// with the file: not-found, permission and no-space fail it at once;
// refused-by-grant (the destination refused a stale attempt) sends it
// again without counting the attempt; network, checksum and internal send
// it again, up to its attempts.
// They are retry's faults (the one classification), spelled out here for
// the API's clients.
const (
	ClassNotFound   = string(retry.FaultNotFound)   // "not-found"
	ClassPermission = string(retry.FaultPermission) // "permission"
	ClassNoSpace    = string(retry.FaultNoSpace)    // "no-space"
	ClassGrant      = string(retry.FaultGrant)      // "refused-by-grant"
	ClassNetwork    = string(retry.FaultNetwork)    // "network"
	ClassChecksum   = string(retry.FaultChecksum)   // "checksum"
	ClassInternal   = string(retry.FaultInternal)   // "internal"
)

// FailureClasses are the classes, in the order above.
var FailureClasses = []string{ClassNotFound, ClassPermission, ClassNoSpace, ClassGrant, ClassNetwork, ClassChecksum, ClassInternal}

// FileReport is one file's verdict in a task report.
type FileReport struct {
	Path      string `json:"path"` // its source path
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
	Permanent bool   `json:"permanent,omitempty"` // for controllers older than Class
	// Class is the class of a failed file's Error (FailureClasses), found
	// where the error was made; missing or unknown (an older data node):
	// internal.
	Class    string `json:"class,omitempty"`
	Checksum string `json:"checksum,omitempty"` // hex, of the job's algorithm
	Bytes    int64  `json:"bytes,omitempty"`
	// Part is the part of the file this verdict is about, in a part
	// task (Task.Part); Checksum is then the part's bytes'. Complete says
	// the push completed the file at the destination (every part there,
	// verified, under its final name), and FileChecksum is then the whole
	// file's checksum (hex, the job's algorithm) as the destination
	// computed it.
	Part         *transfer.Part `json:"part,omitempty"`
	Complete     bool           `json:"complete,omitempty"`
	FileChecksum string         `json:"file_checksum,omitempty"`
	// Receipt is the destination node's receipt of an OK verdict, as its
	// server handed it to the pushing node (base64url): an HMAC with the
	// destination's secret over the task, its attempt, the file's
	// destination path and size, and Checksum (with a part's range,
	// Complete and FileChecksum). A file counts as arrived only with a
	// receipt that checks: the source node's word alone is not enough.
	Receipt string `json:"receipt,omitempty"`
}

// TaskAnswer answers a task's report or listing: Cancel says stop (the
// job was cancelled, or the attempt is no longer current).
type TaskAnswer struct {
	Task   transfer.Task `json:"task"`
	Cancel bool          `json:"cancel,omitempty"`
	Reason string        `json:"reason,omitempty"`
}
