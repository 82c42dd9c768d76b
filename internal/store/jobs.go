package store

import (
	"context"
	"fmt"
	"time"

	"github.com/lightpath/lightpath/internal/transfer"
)

// Jobs is the transfer service's part of the store (schema versions 6
// and 7):
// endpoints and their data nodes, jobs, their files, the tasks data nodes
// run, and the optimizer's decisions. The contract of Store holds for
// every method (errors, concurrency, copies, times in UTC); storetest
// checks it on both backends. Text holding invalid UTF-8 or a NUL byte is
// refused with reserve.ErrInvalid on both backends alike. Names, IDs and
// paths sort byte by byte (Go's string order) on both backends.
type Jobs interface {
	// CreateJob stores a new job. The ID must be new (reserve.ErrConflict),
	// ID, Owner and State not empty (reserve.ErrInvalid). A non-empty Key
	// is unique per owner: when the owner has a job under that key already,
	// nothing is stored and the error is a *DuplicateJobError carrying the
	// stored job (it matches ErrDuplicateKey).
	CreateJob(ctx context.Context, j transfer.Job) error
	// GetJob returns a job, or an error wrapping reserve.ErrNotFound.
	GetJob(ctx context.Context, id string) (transfer.Job, error)
	// GetJobByKey returns the owner's job created under a key, or an error
	// wrapping reserve.ErrNotFound.
	GetJobByKey(ctx context.Context, owner, key string) (transfer.Job, error)
	// UpdateJob replaces the stored job j.ID with j if the stored version
	// is still expectedVersion (a compare-and-swap); otherwise it changes
	// nothing and returns a *reserve.StaleVersionError (matching
	// reserve.ErrConflict). j.Version must be greater than expectedVersion
	// (reserve.ErrInvalid). ID, Owner, Key and CreatedAt are fixed at
	// creation and not changed. An unknown ID is reserve.ErrNotFound.
	UpdateJob(ctx context.Context, j transfer.Job, expectedVersion uint64) error
	// ListJobs returns the jobs matching every set field of f, newest
	// first (CreatedAt descending, then ID descending).
	ListJobs(ctx context.Context, f JobFilter) ([]transfer.Job, error)
	// DeleteJob removes a job with its files, their parts, tasks and
	// decisions (a
	// deadline job refused at submission leaves nothing behind); an
	// unknown ID is reserve.ErrNotFound.
	DeleteJob(ctx context.Context, id string) error

	// AddJobFiles stores new files, of jobs that exist (reserve.ErrNotFound
	// otherwise). (Job, Path) is unique: a file stored already, or given
	// twice, is reserve.ErrConflict and nothing of the call is stored. Job,
	// Path and State must not be empty (reserve.ErrInvalid). However many
	// files, the call is one transaction of a few multi-row statements.
	AddJobFiles(ctx context.Context, files []transfer.JobFile) error
	// UpdateJobFiles replaces each stored file (Job, Path) with the one
	// given (a file given twice ends as given last); one unknown is
	// reserve.ErrNotFound and nothing of the call is stored.
	UpdateJobFiles(ctx context.Context, files []transfer.JobFile) error
	// ListJobFiles returns the files matching every set field of f,
	// ordered by Job then Path (byte order): page through a job's files
	// with After set to the last Path of the previous page.
	ListJobFiles(ctx context.Context, f JobFileFilter) ([]transfer.JobFile, error)
	// CountJobFiles returns a job's files and their bytes by state (states
	// without files are absent; an unknown job has none).
	CountJobFiles(ctx context.Context, job string) (map[string]FileCount, error)
	// CountJobFilesUpTo returns how many of a job's files are in one of
	// states, counted up to limit (positive, reserve.ErrInvalid
	// otherwise): by the (job, state) index alone, so its cost is bounded
	// by limit however many files the job has.
	CountJobFilesUpTo(ctx context.Context, job string, states []string, limit int) (int, error)
	// CountJobs returns how many jobs are in each state (the states with
	// none left out), by the state index.
	CountJobs(ctx context.Context) (map[string]int, error)
	// DeleteJobFiles deletes at most limit of a job's files (the first by
	// Path) with their parts, in one short transaction, and returns how
	// many it deleted: a caller clears a job's files of any number in
	// bounded steps, 0 saying none is left (an unknown job has none).
	// limit must be positive (reserve.ErrInvalid).
	DeleteJobFiles(ctx context.Context, job string, limit int) (int, error)

	// AddFileParts stores the parts of files cut in parts, of jobs that
	// exist (reserve.ErrNotFound otherwise). (Job, Path, Index) is unique:
	// a part stored already, or given twice, is reserve.ErrConflict and
	// nothing of the call is stored. Job, Path and State must not be empty
	// and Index not negative (reserve.ErrInvalid). One transaction.
	AddFileParts(ctx context.Context, parts []transfer.FilePart) error
	// UpdateFileParts replaces each stored part (Job, Path, Index) with the
	// one given; one unknown is reserve.ErrNotFound and nothing of the
	// call is stored.
	UpdateFileParts(ctx context.Context, parts []transfer.FilePart) error
	// ListFileParts returns the parts matching every set field of f,
	// ordered by Job, Path (byte order), then Index.
	ListFileParts(ctx context.Context, f FilePartFilter) ([]transfer.FilePart, error)

	// CreateTask stores a new task of a job that exists (reserve.ErrNotFound
	// otherwise); the ID must be new (reserve.ErrConflict), ID, Job, Kind
	// and State not empty (reserve.ErrInvalid).
	CreateTask(ctx context.Context, t transfer.Task) error
	// UpdateTask replaces the stored task t.ID; Job, Kind and CreatedAt
	// are fixed at creation, and so is Endpoint once set. An unknown ID is reserve.ErrNotFound.
	UpdateTask(ctx context.Context, t transfer.Task) error
	// GetTask returns a task, or an error wrapping reserve.ErrNotFound.
	GetTask(ctx context.Context, id string) (transfer.Task, error)
	// ListTasks returns the tasks matching every set field of f, oldest
	// first (CreatedAt, then ID).
	ListTasks(ctx context.Context, f TaskFilter) ([]transfer.Task, error)

	// PutEndpoint creates or replaces an endpoint by name (its Nodes are
	// not stored: they are the data nodes registered for it). The name must
	// not be empty (reserve.ErrInvalid).
	PutEndpoint(ctx context.Context, e transfer.Endpoint) error
	// GetEndpoint returns an endpoint (Nodes empty), or an error wrapping
	// reserve.ErrNotFound.
	GetEndpoint(ctx context.Context, name string) (transfer.Endpoint, error)
	// ListEndpoints returns every endpoint ordered by name (Nodes empty).
	ListEndpoints(ctx context.Context) ([]transfer.Endpoint, error)
	// DeleteEndpoint removes an endpoint and the registrations of its data
	// nodes, or returns an error wrapping reserve.ErrNotFound.
	DeleteEndpoint(ctx context.Context, name string) error
	// PutDataNode registers a data node or renews its lease (an upsert by
	// Node: a node serves one endpoint at a time). A node registered for
	// another endpoint is refused (reserve.ErrConflict): it moves only
	// once its registration is deleted. Node and Endpoint must not be
	// empty (reserve.ErrInvalid).
	PutDataNode(ctx context.Context, n transfer.DataNode) error
	// DeleteDataNode removes a node's registration, or returns an error
	// wrapping reserve.ErrNotFound.
	DeleteDataNode(ctx context.Context, node string) error
	// ListDataNodes returns every registered data node ordered by node,
	// lapsed leases included (Alive is the caller's to set).
	ListDataNodes(ctx context.Context) ([]transfer.DataNode, error)

	// PutJobSweep records, or replaces, the sweep of an ended job (one a
	// job), of a job that exists (reserve.ErrNotFound otherwise); Job must
	// not be empty (reserve.ErrInvalid).
	PutJobSweep(ctx context.Context, w JobSweep) error
	// ListJobSweeps returns the sweeps by At, then Job (the one stepped
	// longest ago first), at most limit when positive: found by an index,
	// however many jobs there are.
	ListJobSweeps(ctx context.Context, limit int) ([]JobSweep, error)
	// DeleteJobSweep forgets a job's sweep; a job without one is no
	// error. DeleteJob deletes its job's too.
	DeleteJobSweep(ctx context.Context, job string) error

	// AppendDecision stores one optimizer decision, of a job that exists
	// (reserve.ErrNotFound otherwise).
	AppendDecision(ctx context.Context, d transfer.Decision) error
	// ListDecisions returns a job's decisions, newest first (At descending),
	// at most limit when positive.
	ListDecisions(ctx context.Context, job string, limit int) ([]transfer.Decision, error)
}

// JobFilter selects jobs; zero fields match everything.
type JobFilter struct {
	Owner string
	// States, when not empty, keeps those in one of them.
	States []string
	// Since keeps those created at or after it.
	Since time.Time
	// Limit, when positive, keeps the first Limit matches.
	Limit int
}

// JobFileFilter selects files; zero fields match everything.
type JobFileFilter struct {
	Job    string
	States []string
	Task   string
	// Paths, when not empty, keeps those whose Path is one of them.
	Paths []string
	// Dests, when not empty, keeps those whose Dest is one of them (by an
	// index: a listing's pages are checked against the stored ones, of
	// its job, or with Job empty of every job).
	Dests []string
	// After keeps those whose Path sorts after it (paging).
	After string
	Limit int
}

// FilePartFilter selects parts; zero fields match everything.
type FilePartFilter struct {
	Job string
	// Paths, when not empty, keeps the parts of those files.
	Paths  []string
	States []string
	Task   string
	// To, when not empty, keeps those whose To is one of them ("" for a
	// part of a file without an owner yet).
	To    []string
	Limit int
}

// TaskFilter selects tasks; zero fields match everything.
type TaskFilter struct {
	Job    string
	Kind   string
	States []string
	// Node keeps those whose From or To is it.
	Node string
	// Endpoint keeps those that read from it (Task.Endpoint).
	Endpoint string
	Limit    int
}

// JobSweep is an ended job's files still to be ended or deleted, in
// bounded steps after the answer that ended the job: a cancel, a failure
// before any file moved, a refused listing. Kept in the store so that the
// service's clock carries it on whoever leads (issue 28, finding 7).
type JobSweep struct {
	Job string `json:"job"`
	// Drop: the job's files are deleted (a refused listing leaves none);
	// with DeleteJob the job goes too once they are (a refused deadline
	// submission leaves nothing). Otherwise its files in States end in
	// State, with Error (when set), and its parts not ended with
	// PartError.
	Drop      bool     `json:"drop,omitempty"`
	DeleteJob bool     `json:"delete_job,omitempty"`
	States    []string `json:"states,omitempty"`
	State     string   `json:"state,omitempty"`
	Error     string   `json:"error,omitempty"`
	PartError string   `json:"part_error,omitempty"`
	// After is the path the next step goes on after.
	After string `json:"after,omitempty"`
	// At is when it was recorded or last stepped: the clock steps the
	// oldest first, so sweeps take turns.
	At time.Time `json:"at"`
}

// FileCount is how many files, and their bytes.
type FileCount struct {
	Files int
	Bytes int64
}

// DuplicateJobError is CreateJob's answer to a key the owner used before.
type DuplicateJobError struct {
	Existing transfer.Job
}

func (e *DuplicateJobError) Error() string {
	return fmt.Sprintf("job id %q of %s already used for job %s", e.Existing.Key, e.Existing.Owner, e.Existing.ID)
}

// Unwrap makes a DuplicateJobError match ErrDuplicateKey.
func (e *DuplicateJobError) Unwrap() error { return ErrDuplicateKey }
