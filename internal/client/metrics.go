package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transfer"
)

// PushMetrics is POST /api/v1/metrics/push: one batch of an agent's
// samples. A refusal of the batch itself (400: a malformed series) is a
// permanent error (retry.Permanent), so the pusher drops it instead of retrying forever.
func (c *Client) PushMetrics(ctx context.Context, b *monitor.Batch) (apiv1.PushResult, error) {
	res, err := post[apiv1.PushResult](ctx, c, "/metrics/push", b)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
		return res, retry.Permanent(err)
	}
	return res, err
}

// Push makes the client a push.Sender.
func (c *Client) Push(ctx context.Context, b *monitor.Batch) error {
	_, err := c.PushMetrics(ctx, b)
	return err
}

// MetricQuery is what QueryMetrics asks for; zero times and step take the
// controller's defaults (the last hour, raw samples).
type MetricQuery struct {
	Name       string
	Match      map[string]string
	Start, End time.Time
	Step       time.Duration
}

// QueryMetrics is GET /api/v1/metrics/query.
func (c *Client) QueryMetrics(ctx context.Context, q MetricQuery) (apiv1.QueryResult, error) {
	v := url.Values{"name": {q.Name}}
	for k, val := range q.Match {
		v.Add("match", k+"="+val)
	}
	setTime(v, "start", q.Start)
	setTime(v, "end", q.End)
	if q.Step > 0 {
		v.Set("step", q.Step.String())
	}
	return get[apiv1.QueryResult](ctx, c, "/metrics/query", v)
}

// MetricNames is GET /api/v1/metrics/names.
func (c *Client) MetricNames(ctx context.Context) (apiv1.MetricNames, error) {
	return get[apiv1.MetricNames](ctx, c, "/metrics/names", nil)
}

// CreateTransfer is POST /api/v1/transfers: register a transfer.
func (c *Client) CreateTransfer(ctx context.Context, r transfer.Registration) (transfer.Transfer, error) {
	return post[transfer.Transfer](ctx, c, "/transfers", r)
}

// ReportTransfer is POST /api/v1/transfers/{id}/progress.
func (c *Client) ReportTransfer(ctx context.Context, id string, r transfer.Report) (transfer.Transfer, error) {
	return post[transfer.Transfer](ctx, c, "/transfers/"+escape(id)+"/progress", r)
}

// Transfer is GET /api/v1/transfers/{id}: the transfer's page.
func (c *Client) Transfer(ctx context.Context, id string) (apiv1.TransferPage, error) {
	return get[apiv1.TransferPage](ctx, c, "/transfers/"+escape(id), nil)
}

// Transfers is GET /api/v1/transfers.
func (c *Client) Transfers(ctx context.Context) ([]transfer.Transfer, error) {
	l, err := get[apiv1.TransferList](ctx, c, "/transfers", nil)
	return l.Transfers, err
}
