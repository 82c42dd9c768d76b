package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/push"
)

// PushMetrics is POST /api/v1/metrics/push: one batch of an agent's
// samples. A refusal of the batch itself (400: a malformed series) is a
// push.Permanent error, so the pusher drops it instead of retrying forever.
func (c *Client) PushMetrics(ctx context.Context, b *monitor.Batch) (api.PushResult, error) {
	res, err := post[api.PushResult](ctx, c, "/metrics/push", b)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
		return res, &push.Permanent{Err: err}
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
func (c *Client) QueryMetrics(ctx context.Context, q MetricQuery) (api.QueryResult, error) {
	v := url.Values{"name": {q.Name}}
	for k, val := range q.Match {
		v.Add("match", k+"="+val)
	}
	setTime(v, "start", q.Start)
	setTime(v, "end", q.End)
	if q.Step > 0 {
		v.Set("step", q.Step.String())
	}
	return get[api.QueryResult](ctx, c, "/metrics/query", v)
}

// MetricNames is GET /api/v1/metrics/names.
func (c *Client) MetricNames(ctx context.Context) (api.MetricNames, error) {
	return get[api.MetricNames](ctx, c, "/metrics/names", nil)
}
