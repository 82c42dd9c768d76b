package api

import (
	"github.com/lightpath/lightpath/internal/monitor/alert"
)

// AlertsResult answers GET /api/v1/alerts. It stays beside the server,
// not in package apiv1: its types are the alert evaluator's own (package
// alert links the SQLite history), and no Go client reads it.
type AlertsResult struct {
	Status  alert.Status   `json:"status"`
	History []alert.Record `json:"history"`
}
