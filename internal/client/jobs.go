package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/transfer"
)

// The transfer service's routes: jobs for users, endpoints for users and
// admins, heartbeats, claims and reports for data nodes.

// SubmitJob is POST /api/v1/jobs. Created is false in the answer when
// req.Key had already made the job. A deadline that cannot be met is an
// *APIError with code "capacity" whose message names the earliest
// completion.
func (c *Client) SubmitJob(ctx context.Context, req transfer.JobRequest) (apiv1.JobResponse, error) {
	return post[apiv1.JobResponse](ctx, c, "/jobs", req)
}

// JobOptions filters Jobs; empty fields do not filter.
type JobOptions struct {
	Owner  string
	States []string
	Limit  int
}

// Jobs is GET /api/v1/jobs: the caller's own, or everyone's for an
// operator, newest first.
func (c *Client) Jobs(ctx context.Context, o JobOptions) ([]transfer.Job, error) {
	q := url.Values{}
	setString(q, "owner", o.Owner)
	for _, s := range o.States {
		q.Add("state", s)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	l, err := get[apiv1.JobList](ctx, c, "/jobs", q)
	return l.Jobs, err
}

// JobPageOptions says what GET /api/v1/jobs/{id} carries besides the job:
// its files in those states (none given: every file), and the optimizer's
// decisions. With Wait, the answer waits up to that long (at most 30s)
// for the job to end; a controller older than Wait answers at once.
type JobPageOptions struct {
	Files     []string
	NoFiles   bool
	Optimizer bool
	Wait      time.Duration
	// Limit and After page through the files: at most Limit (the
	// controller's default when 0) after the path After (a page's Next).
	Limit int
	After string
}

// Job is GET /api/v1/jobs/{id}.
func (c *Client) Job(ctx context.Context, id string, o JobPageOptions) (apiv1.JobPage, error) {
	q := url.Values{}
	for _, s := range o.Files {
		q.Add("files", s)
	}
	if o.NoFiles {
		q.Set("files", "none")
	}
	if o.Optimizer {
		q.Set("optimizer", "1")
	}
	if o.Wait > 0 {
		q.Set("wait", o.Wait.String())
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	setString(q, "after", o.After)
	return get[apiv1.JobPage](ctx, c, "/jobs/"+escape(id), q)
}

// JobFiles follows a job's pages of files in those states (none given:
// every file) and calls each with every page's files in turn, until the
// last page or an error (each's included).
func (c *Client) JobFiles(ctx context.Context, id string, states []string, each func([]transfer.JobFile) error) error {
	after := ""
	for {
		p, err := c.Job(ctx, id, JobPageOptions{Files: states, Limit: 10000, After: after})
		if err != nil {
			return err
		}
		if err := each(p.Files); err != nil {
			return err
		}
		if p.Next == "" || p.Next == after {
			return nil
		}
		after = p.Next
	}
}

// CancelJob is POST /api/v1/jobs/{id}/cancel: its tasks stop, its
// reservations are released, files that arrived stay.
func (c *Client) CancelJob(ctx context.Context, id string, req apiv1.ActionRequest) (transfer.Job, error) {
	return post[transfer.Job](ctx, c, "/jobs/"+escape(id)+"/cancel", req)
}

// Endpoints is GET /api/v1/endpoints.
func (c *Client) Endpoints(ctx context.Context) ([]transfer.Endpoint, error) {
	l, err := get[apiv1.EndpointList](ctx, c, "/endpoints", nil)
	return l.Endpoints, err
}

// AllowEndpoint is POST /api/v1/endpoints/{name}/allow (admin).
func (c *Client) AllowEndpoint(ctx context.Context, name string, req apiv1.EndpointAllow) (transfer.Endpoint, error) {
	return post[transfer.Endpoint](ctx, c, "/endpoints/"+escape(name)+"/allow", req)
}

// AddEndpoint is POST /api/v1/endpoints (admins): creates an endpoint at
// a site with the nodes that may serve it, or adds nodes to one.
func (c *Client) AddEndpoint(ctx context.Context, req apiv1.EndpointAdd) (transfer.Endpoint, error) {
	return post[transfer.Endpoint](ctx, c, "/endpoints", req)
}

// RemoveEndpoint is DELETE /api/v1/endpoints/{name} (admins).
func (c *Client) RemoveEndpoint(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/endpoints/"+escape(name), nil, nil, nil)
}

// RemoveEndpointNode is DELETE /api/v1/endpoints/{name}/nodes/{node}
// (admins): the node no longer serves the endpoint.
func (c *Client) RemoveEndpointNode(ctx context.Context, name, node string) (transfer.Endpoint, error) {
	return call[transfer.Endpoint](ctx, c, http.MethodDelete, "/endpoints/"+escape(name)+"/nodes/"+escape(node), nil, nil)
}

// DataNodeHeartbeat is POST /api/v1/datanodes/{node}/heartbeat: registers
// the data node or renews its lease, and its tasks' leases with it.
func (c *Client) DataNodeHeartbeat(ctx context.Context, node string, req apiv1.DataNodeHeartbeat) (apiv1.DataNodeWork, error) {
	return post[apiv1.DataNodeWork](ctx, c, "/datanodes/"+escape(node)+"/heartbeat", req)
}

// Claim is POST /api/v1/datanodes/{node}/claim: tasks for the node to run.
func (c *Client) Claim(ctx context.Context, node string, req apiv1.ClaimRequest) (apiv1.Claim, error) {
	return post[apiv1.Claim](ctx, c, "/datanodes/"+escape(node)+"/claim", req)
}

// CheckGrant is POST /api/v1/datanodes/{node}/grants/check: whether an
// attempt of a task pushed to the node is still current.
func (c *Client) CheckGrant(ctx context.Context, node string, req apiv1.GrantCheck) (apiv1.GrantStatus, error) {
	return post[apiv1.GrantStatus](ctx, c, "/datanodes/"+escape(node)+"/grants/check", req)
}

// ReportListing is POST /api/v1/tasks/{id}/listing.
func (c *Client) ReportListing(ctx context.Context, task string, l apiv1.Listing) (apiv1.TaskAnswer, error) {
	return post[apiv1.TaskAnswer](ctx, c, "/tasks/"+escape(task)+"/listing", l)
}

// ReportTask is POST /api/v1/tasks/{id}/report.
func (c *Client) ReportTask(ctx context.Context, task string, r apiv1.TaskReport) (apiv1.TaskAnswer, error) {
	return post[apiv1.TaskAnswer](ctx, c, "/tasks/"+escape(task)+"/report", r)
}
