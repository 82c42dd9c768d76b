package service

import (
	"context"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// CutParts is cutParts of a service cutting files of at least min bytes
// into parts of size bytes.
func CutParts(min, size int64, files []transfer.JobFile) []transfer.FilePart {
	s := &Service{partMin: min, partBytes: size}
	return s.cutParts(files)
}

// DivideRates is divideRates, for the table test.
var DivideRates = divideRates

// FlowSpec and SourceAddr are flowSpec and sourceAddr, for the table test.
var (
	FlowSpec   = flowSpec
	SourceAddr = sourceAddr
)

// Reads counts the store's reads a service makes (queries, and the rows
// or documents they return), so a test asserts that some work does not
// grow with the jobs waiting: counts, not durations.
type Reads struct {
	store.Store
	n *readCount
}

type readCount struct {
	mu            sync.Mutex
	queries, rows int
	most          int // the most rows one read returned
}

// Counts returns the queries and rows read so far.
func (r *Reads) Counts() (queries, rows int) {
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	return r.n.queries, r.n.rows
}

func (r *Reads) add(rows int) {
	r.n.mu.Lock()
	r.n.queries++
	r.n.rows += rows
	r.n.most = max(r.n.most, rows)
	r.n.mu.Unlock()
}

// Most returns the most rows one read returned so far, and starts again.
func (r *Reads) Most() int {
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	m := r.n.most
	r.n.most = 0
	return m
}

// Stall holds the service's lock while advance moves the clock by d: the
// controller busy for d, as a long request would keep it.
func (s *Service) Stall(d time.Duration, advance func(time.Duration)) {
	s.lock()
	defer s.unlock()
	advance(d)
}

// ListedFiles is listedFiles, for the table test and the fuzz target.
var ListedFiles = listedFiles

// CountReads makes s read its store through a Reads, from now on.
func CountReads(s *Service) *Reads {
	r := &Reads{Store: s.st, n: &readCount{}}
	s.st = r
	return r
}

func (r *Reads) Tx(ctx context.Context, fn func(store.Store) error) error {
	return r.Store.Tx(ctx, func(tx store.Store) error { return fn(&Reads{Store: tx, n: r.n}) })
}

func (r *Reads) GetJob(ctx context.Context, id string) (transfer.Job, error) {
	r.add(1)
	return r.Store.GetJob(ctx, id)
}

func (r *Reads) GetJobByKey(ctx context.Context, owner, key string) (transfer.Job, error) {
	r.add(1)
	return r.Store.GetJobByKey(ctx, owner, key)
}

func (r *Reads) ListJobs(ctx context.Context, f store.JobFilter) ([]transfer.Job, error) {
	js, err := r.Store.ListJobs(ctx, f)
	r.add(len(js))
	return js, err
}

func (r *Reads) GetTask(ctx context.Context, id string) (transfer.Task, error) {
	r.add(1)
	return r.Store.GetTask(ctx, id)
}

func (r *Reads) ListTasks(ctx context.Context, f store.TaskFilter) ([]transfer.Task, error) {
	ts, err := r.Store.ListTasks(ctx, f)
	r.add(len(ts))
	return ts, err
}

func (r *Reads) ListJobFiles(ctx context.Context, f store.JobFileFilter) ([]transfer.JobFile, error) {
	fs, err := r.Store.ListJobFiles(ctx, f)
	r.add(len(fs))
	return fs, err
}

func (r *Reads) CountJobFiles(ctx context.Context, job string) (map[string]store.FileCount, error) {
	r.add(1)
	return r.Store.CountJobFiles(ctx, job)
}

func (r *Reads) ListFileParts(ctx context.Context, f store.FilePartFilter) ([]transfer.FilePart, error) {
	ps, err := r.Store.ListFileParts(ctx, f)
	r.add(len(ps))
	return ps, err
}

func (r *Reads) GetEndpoint(ctx context.Context, name string) (transfer.Endpoint, error) {
	r.add(1)
	return r.Store.GetEndpoint(ctx, name)
}

func (r *Reads) ListDataNodes(ctx context.Context) ([]transfer.DataNode, error) {
	ns, err := r.Store.ListDataNodes(ctx)
	r.add(len(ns))
	return ns, err
}

func (r *Reads) ListDecisions(ctx context.Context, job string, limit int) ([]transfer.Decision, error) {
	ds, err := r.Store.ListDecisions(ctx, job, limit)
	r.add(len(ds))
	return ds, err
}

// CancelInterrupted cancels a job as Cancel does but stops after the
// first step of its files, as a controller that dies (or is deposed)
// right after it would: the rest is the clock's to carry on.
func (s *Service) CancelInterrupted(ctx context.Context, a controller.Actor, id string) error {
	_, w, err := s.cancelJob(ctx, a, id, "")
	if err != nil {
		return err
	}
	_, err = s.driveSweep(ctx, w, 1)
	return err
}

func (r *Reads) CountJobFilesUpTo(ctx context.Context, job string, states []string, limit int) (int, error) {
	r.add(1)
	return r.Store.CountJobFilesUpTo(ctx, job, states, limit)
}
