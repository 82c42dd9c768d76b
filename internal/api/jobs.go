package api

// The transfer service's routes: jobs for users (their own; operators
// and admins everyone's), endpoints for everyone signed in (admins say who
// may use them), and heartbeats, claims, listings and reports for data
// nodes (agent tokens bound to the node, or admins). The service decides
// (package service); this decodes, calls and encodes.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// MaxListingBytes bounds a task report's body.
const MaxListingBytes = 64 << 20

// MaxListingPageBytes bounds a page of a listing: a listing comes in
// pages of at most service.MaxListingFiles files, which a data node keeps
// under half of this, so the controller holds one page at a time
// whatever the dataset (issue 28, finding 7).
const MaxListingPageBytes = 8 << 20

// WithService makes the server answer the transfer service's routes, and
// adds the service's aggregates to /metrics.
func (s *Server) WithService(svc *service.Service) *Server {
	s.svc = svc
	s.metrics.reg.MustRegister(serviceGauges{svc})
	return s
}

func (s *Server) needService() (*service.Service, error) {
	if s.svc == nil {
		return nil, &httpError{status: http.StatusNotFound, code: apiv1.CodeNotFound, msg: "this controller runs no transfer service"}
	}
	return s.svc, nil
}

func (s *Server) submitJob(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	var in transfer.JobRequest
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if err := service.CheckSources(len(in.Sources)); err != nil {
		return err
	}
	j, created, err := svc.Submit(r.Context(), a, in)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, apiv1.JobResponse{Job: j, Created: created})
	return nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.JobFilter{Owner: q.Get("owner")}
	for _, v := range q["state"] {
		v = strings.ToUpper(v)
		switch v {
		case transfer.JobQueued, transfer.JobScheduled, transfer.JobActive, transfer.JobSucceeded, transfer.JobFailed, transfer.JobCancelled:
		default:
			return invalid("state", "state %q: want QUEUED, SCHEDULED, ACTIVE, SUCCEEDED, FAILED or CANCELLED", v)
		}
		f.States = append(f.States, v)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return invalid("limit", "limit %q: want a positive number", v)
		}
		f.Limit = n
	}
	js, err := svc.List(r.Context(), a, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.JobList{Jobs: js})
	return nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var states []string
	noFiles := false
	for _, v := range q["files"] {
		if v == "none" {
			noFiles = true
			continue
		}
		v = strings.ToUpper(v)
		switch v {
		case transfer.FilePending, transfer.FileActive, transfer.FileSucceeded, transfer.FileFailed, transfer.FileCancelled:
		default:
			return invalid("files", "files=%q: want a file state (PENDING, ACTIVE, SUCCEEDED, FAILED, CANCELLED) or none", v)
		}
		states = append(states, v)
	}
	opt := false
	switch v := q.Get("optimizer"); v {
	case "", "0", "false":
	case "1", "true":
		opt = true
	default:
		return invalid("optimizer", "optimizer=%q: want 1 or 0", v)
	}
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > service.MaxJobWait {
			return invalid("wait", "wait=%q: want a duration from 0s to %s", v, service.MaxJobWait)
		}
		if err := svc.WaitEnded(r.Context(), a, r.PathValue("id"), d); err != nil {
			return err
		}
	}
	jq := service.JobQuery{States: states, NoFiles: noFiles, Optimizer: opt, After: q.Get("after")}
	if !utf8.ValidString(jq.After) || strings.ContainsRune(jq.After, 0) || len(jq.After) > 4096 {
		return invalid("after", "after=: want the path a page ended at (its next)")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > service.MaxFilesPage {
			return invalid("limit", "limit=%q: want 1 to %d files a page", v, service.MaxFilesPage)
		}
		jq.Limit = n
	}
	p, err := svc.GetPage(r.Context(), a, r.PathValue("id"), jq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	var in apiv1.ActionRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &in); err != nil {
			return err
		}
	}
	j, err := svc.Cancel(r.Context(), a, r.PathValue("id"), in.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

func (s *Server) listEndpoints(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	eps, err := svc.Endpoints(r.Context(), a)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.EndpointList{Endpoints: eps})
	return nil
}

func (s *Server) allowEndpoint(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	var in apiv1.EndpointAllow
	if err := decode(w, r, &in); err != nil {
		return err
	}
	ep, err := svc.Allow(r.Context(), a, r.PathValue("name"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ep)
	return nil
}

func (s *Server) addEndpoint(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	var in apiv1.EndpointAdd
	if err := decode(w, r, &in); err != nil {
		return err
	}
	ep, created, err := svc.AddEndpoint(r.Context(), a, in)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, ep)
	return nil
}

func (s *Server) removeEndpoint(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	if _, err := svc.RemoveEndpoint(r.Context(), a, r.PathValue("name"), nil); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) removeEndpointNode(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	ep, err := svc.RemoveEndpoint(r.Context(), a, r.PathValue("name"), []string{r.PathValue("node")})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ep)
	return nil
}

func (s *Server) dataNodeHeartbeat(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	var in apiv1.DataNodeHeartbeat
	if err := decode(w, r, &in); err != nil {
		return err
	}
	work, err := svc.Heartbeat(r.Context(), a, r.PathValue("node"), in)
	if err != nil {
		return err
	}
	work.LeaseExpires = work.LeaseExpires.UTC()
	writeJSON(w, http.StatusOK, work)
	return nil
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	var in apiv1.ClaimRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &in); err != nil {
			return err
		}
	}
	c, err := svc.Claim(r.Context(), a, r.PathValue("node"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) grantCheck(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	var in apiv1.GrantCheck
	if err := decode(w, r, &in); err != nil {
		return err
	}
	st, err := svc.CheckGrant(r.Context(), a, r.PathValue("node"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) taskListing(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	var in apiv1.Listing
	if err := decodeLimit(w, r, &in, MaxListingPageBytes); err != nil {
		var he *httpError
		if errors.As(err, &he) && he.status == http.StatusRequestEntityTooLarge {
			// Sent again it would be refused again: the job fails.
			if ferr := svc.RefuseListing(r.Context(), a, r.PathValue("id"), he.msg+fmt.Sprintf(": send the listing in pages of at most %d files", service.MaxListingFiles)); ferr != nil {
				return ferr
			}
		}
		return err
	}
	if err := checkText(in); err != nil {
		return err
	}
	ans, err := svc.Listing(r.Context(), a, r.PathValue("id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}

func (s *Server) taskReport(w http.ResponseWriter, r *http.Request, a controller.Actor) error {
	svc, err := s.needService()
	if err != nil {
		return err
	}
	var in apiv1.TaskReport
	if err := decodeLimit(w, r, &in, MaxListingBytes); err != nil {
		return err
	}
	if err := checkText(in); err != nil {
		return err
	}
	ans, err := svc.Report(r.Context(), a, r.PathValue("id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}

// jobRefusal is the detail of a deadline refused at submission.
func jobRefusal(err error) *apiv1.JobRefusal {
	var de *service.DeadlineError
	if !errors.As(err, &de) || de.Earliest.IsZero() {
		return nil
	}
	return &apiv1.JobRefusal{EarliestCompletion: de.Earliest.UTC(), Algorithm: de.Algorithm}
}

// serviceGauges reads the service's aggregates at every scrape.
type serviceGauges struct{ s *service.Service }

var (
	serviceThroughputDesc = prometheus.NewDesc("lightpath_service_throughput_bytes_per_second",
		"Throughput summed over every running task of the transfer service, as the data nodes last reported it.", nil, nil)
	serviceSiteDesc = prometheus.NewDesc("lightpath_service_site_throughput_bytes_per_second",
		"Throughput of the transfer service's running tasks per site, into it (in) and out of it (out).", []string{"site", "direction"}, nil)
	serviceBytesDesc = prometheus.NewDesc("lightpath_service_moved_bytes_total",
		"Bytes of files the transfer service's jobs moved and verified.", nil, nil)
	serviceTasksDesc = prometheus.NewDesc("lightpath_service_running_tasks",
		"Copy tasks data nodes are running.", nil, nil)
	serviceJobsDesc = prometheus.NewDesc("lightpath_service_jobs",
		"Jobs of the transfer service in each state (every state, 0 when none).", []string{"state"}, nil)
)

func (g serviceGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- serviceThroughputDesc
	ch <- serviceSiteDesc
	ch <- serviceBytesDesc
	ch <- serviceTasksDesc
	ch <- serviceJobsDesc
}

func (g serviceGauges) Collect(ch chan<- prometheus.Metric) {
	a := g.s.Aggregates()
	ch <- prometheus.MustNewConstMetric(serviceThroughputDesc, prometheus.GaugeValue, a.ThroughputBps/8)
	for site, v := range a.SiteInBps {
		ch <- prometheus.MustNewConstMetric(serviceSiteDesc, prometheus.GaugeValue, v/8, site, "in")
	}
	for site, v := range a.SiteOutBps {
		ch <- prometheus.MustNewConstMetric(serviceSiteDesc, prometheus.GaugeValue, v/8, site, "out")
	}
	ch <- prometheus.MustNewConstMetric(serviceBytesDesc, prometheus.CounterValue, float64(a.BytesMoved))
	ch <- prometheus.MustNewConstMetric(serviceTasksDesc, prometheus.GaugeValue, float64(a.RunningTasks))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := g.s.JobsByState(ctx); err == nil {
		for _, st := range service.JobStates {
			ch <- prometheus.MustNewConstMetric(serviceJobsDesc, prometheus.GaugeValue, float64(n[st]), st)
		}
	}
}
