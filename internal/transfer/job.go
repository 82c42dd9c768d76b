package transfer

// The transfer service's records: endpoints and their data nodes, jobs,
// the files of a job, the tasks data nodes run, and the optimizer's
// decisions. The controller keeps them in its store; the API carries them
// as they are; data nodes and the command line read them.

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Job states, spelled as reservations spell theirs.
const (
	// JobQueued: accepted, its dataset being listed or waiting for live
	// data nodes or for its turn (Reason says which).
	JobQueued = "QUEUED"
	// JobScheduled: its reservations are booked; it waits for their window.
	JobScheduled = "SCHEDULED"
	// JobActive: data nodes are moving its files.
	JobActive    = "ACTIVE"
	JobSucceeded = "SUCCEEDED" // every file arrived verified
	JobFailed    = "FAILED"    // some files failed after their retries; Reason names the first
	JobCancelled = "CANCELLED"
)

// JobEnded reports whether a job state is final.
func JobEnded(state string) bool {
	return state == JobSucceeded || state == JobFailed || state == JobCancelled
}

// File states.
const (
	FilePending   = "PENDING"   // waiting for a task
	FileActive    = "ACTIVE"    // in a running task
	FileSucceeded = "SUCCEEDED" // arrived and verified (or left alone, already there)
	FileFailed    = "FAILED"    // given up: a permanent error, or its retries spent
	FileCancelled = "CANCELLED" // its job was cancelled before it arrived
)

// Task kinds and states.
const (
	TaskList = "list" // list a job's sources on a source data node
	TaskCopy = "copy" // push a batch of files from a source node to a destination node

	TaskQueued    = "QUEUED"    // waiting for a data node to claim it (again, after a lost attempt)
	TaskActive    = "ACTIVE"    // claimed; its lease runs with its node's
	TaskSucceeded = "SUCCEEDED" // every file of it verified (a list: the listing stored)
	TaskFailed    = "FAILED"    // ended with an error; its files went back to the queue or failed
	TaskCancelled = "CANCELLED"
)

// Checksum algorithms a job may ask for: crc32c is always computed per
// block and per file; adler32 end to end as well when asked.
const (
	ChecksumCRC32C  = "crc32c"
	ChecksumAdler32 = "adler32"
)

// Policies for a destination file that exists already.
const (
	PolicyUpdate    = "update"        // leave it when size, time and checksum match; replace it otherwise (the default)
	PolicyOverwrite = "overwrite"     // replace it
	PolicySkip      = "skip-existing" // leave it alone
)

// JobRequest is a job as submitted (POST /api/v1/jobs).
type JobRequest struct {
	// Sources are ENDPOINT:PATH, files or trees, all on one endpoint;
	// Destination is ENDPOINT:PATH, a directory the sources land in.
	Sources     []string  `json:"sources"`
	Destination string    `json:"destination"`
	Deadline    time.Time `json:"deadline,omitzero"`
	// Priority orders jobs without a deadline: higher first (default 0).
	Priority int `json:"priority,omitempty"`
	// Key, when set, makes the submission idempotent per owner: the same
	// key returns the first job, or a conflict when the request differs.
	Key      string `json:"key,omitempty"`
	Checksum string `json:"checksum,omitempty"` // crc32c (default) or adler32
	// Expected maps a source path (as given in Sources, or a file under a
	// tree given there, ENDPOINT:PATH) to the checksum the file must have,
	// in hex, of the job's algorithm: a file that arrives with another
	// fails.
	Expected map[string]string `json:"expected_checksums,omitempty"`
	Policy   string            `json:"policy,omitempty"` // update (default), overwrite or skip-existing
	Project  string            `json:"project,omitempty"`
	// CC is the congestion control of the job's data streams (bbr, cubic,
	// reno, fast, ...: any the data nodes' kernels offer; see CheckCC);
	// "" leaves each data node's own.
	CC string `json:"cc,omitempty"`
	// Transport carries the job's data streams: "" or tcp, or udp (the
	// reliable UDP transport; CC is then fixed, fast or aimd: see
	// CheckTransport).
	Transport string `json:"transport,omitempty"`
	// DryRun plans a deadline job without booking: the job is listed and
	// planned, its pairs show the plan and its reason the earliest
	// completion, and it ends CANCELLED with nothing booked.
	DryRun bool `json:"dry_run,omitempty"`
	// OnConflict says what happens to a listed file whose destination
	// another live job is writing already (one writer per destination
	// file): refuse (the default) fails this job at its listing, naming
	// the other; wait leaves the file unclaimed until the other job's
	// file has ended.
	OnConflict string `json:"on_conflict,omitempty"`
}

// What a job does when another live job writes one of its destination
// files (JobRequest.OnConflict).
const (
	ConflictRefuse = "refuse"
	ConflictWait   = "wait"
)

// CheckOnConflict checks a job's OnConflict: "" (refuse), refuse or wait.
func CheckOnConflict(v string) error {
	switch v {
	case "", ConflictRefuse, ConflictWait:
		return nil
	}
	return fmt.Errorf("on-conflict %q: want refuse or wait", v)
}

// The transports a job's data may take (JobRequest.Transport).
const (
	TransportTCP = "tcp"
	TransportUDP = "udp"
)

// UDPRateControls are the rate controls of a UDP job (JobRequest.CC).
var UDPRateControls = []string{"fixed", "fast", "aimd"}

// CheckTransport checks a job's transport and, for udp, that its CC is
// one of the UDP transport's rate controls (or none: fixed at the booked
// rate where the job books one, fast otherwise).
func CheckTransport(transport, cc string) error {
	switch transport {
	case "", TransportTCP:
		return nil
	case TransportUDP:
		if cc != "" && !slices.Contains(UDPRateControls, cc) {
			return fmt.Errorf("rate control %q with transport udp: want fixed, fast or aimd", cc)
		}
		return nil
	}
	return fmt.Errorf("transport %q: want tcp or udp", transport)
}

// MaxCCName bounds a congestion control's name: the kernel's
// TCP_CA_NAME_MAX is 16 bytes with the terminating zero.
const MaxCCName = 15

// CheckCC checks that a job's congestion control is a name a kernel could
// offer: short, lower-case letters, digits, - and _. Whether the data
// nodes' kernels offer it, each says when it runs the job's tasks.
func CheckCC(name string) error {
	if name == "" {
		return nil
	}
	if len(name) > MaxCCName {
		return fmt.Errorf("congestion control %q: want at most %d bytes", name, MaxCCName)
	}
	for _, r := range name {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("congestion control %q: want lower-case letters, digits, - and _ (such as bbr, cubic, reno, fast)", name)
		}
	}
	return nil
}

// Job is a dataset moved between two endpoints.
type Job struct {
	ID    string `json:"id"` // j-…
	Owner string `json:"owner"`
	// JobRequest is the job as submitted; its Project is the job's.
	JobRequest
	State string `json:"state"`
	// Reason says in one line what the job waits for, or why it failed.
	Reason string `json:"reason,omitempty"`
	// Storage is, once a file failed for want of room at the
	// destination, that file and why: the job's reason then starts with
	// "storage: no space" and goes on with it.
	Storage     string    `json:"storage,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	FilesTotal  int       `json:"files_total"`
	FilesDone   int       `json:"files_done"`
	FilesFailed int       `json:"files_failed"`
	BytesTotal  int64     `json:"bytes_total"`
	BytesDone   int64     `json:"bytes_done"`
	// ThroughputBps is the job's bits moved per second, summed over its
	// running tasks (while ACTIVE) or over its whole run (once ended).
	ThroughputBps float64 `json:"throughput_bps"`
	// Algorithm is the scheduler algorithm that booked a deadline job.
	Algorithm string `json:"algorithm,omitempty"`
	// Pairs are the node pairs the job runs on, with their bookings.
	Pairs   []Pair `json:"pairs,omitempty"`
	Version uint64 `json:"version"`
}

// Pair is one source node and one destination node a job moves files
// between, with the reservation that carries them (none: the routed path).
type Pair struct {
	From        string    `json:"from"`
	To          string    `json:"to"`
	Reservation string    `json:"reservation,omitempty"`
	RateBps     uint64    `json:"rate_bps,omitempty"` // booked rate; tasks go above it only on the job's own idle bookings over the same links
	Start       time.Time `json:"start,omitzero"`
	End         time.Time `json:"end,omitzero"`
	ShareBytes  int64     `json:"share_bytes,omitempty"` // what the plan gave this pair
	BytesDone   int64     `json:"bytes_done"`
	// Concurrency and Streams are the optimizer's current choice: tasks
	// at once on this pair, and streams per task.
	Concurrency int `json:"concurrency,omitempty"`
	Streams     int `json:"streams,omitempty"`
	// Routed says the pair left (or never had) its reservation and its
	// tasks run on the routed path, and why.
	Routed string `json:"routed,omitempty"`
	// Path is the links the pair's reservation takes, in order.
	Path []string `json:"path,omitempty"`
	// Later are the pair's reservations after the current one, in order:
	// a window longer than the policy's longest reservation is booked as
	// consecutive reservations, and the pair moves to the next as one ends.
	Later []Booked `json:"later,omitempty"`
}

// Booked is one reservation of a pair's window.
type Booked struct {
	Reservation string    `json:"reservation"`
	RateBps     uint64    `json:"rate_bps"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
}

// JobFile is one file of a job.
type JobFile struct {
	Job string `json:"job"`
	// Path is the file under the source endpoint's root; Dest under the
	// destination endpoint's root.
	Path     string    `json:"path"`
	Dest     string    `json:"dest"`
	Size     int64     `json:"size"`
	MTime    time.Time `json:"mtime,omitzero"`
	State    string    `json:"state"`
	Attempts int       `json:"attempts"`
	Error    string    `json:"error,omitempty"` // the last one
	// Class is the class of Error (apiv1.FailureClasses: not-found,
	// permission, no-space, refused-by-grant, network, checksum,
	// internal), on which the controller decided what became of the
	// file; empty when it has none.
	Class    string `json:"class,omitempty"`
	Checksum string `json:"checksum,omitempty"`
	Expected string `json:"expected,omitempty"`
	Task     string `json:"task,omitempty"` // the task it is in, or last was
	From     string `json:"from,omitempty"` // the pair that moved it
	// To is the destination node; for a file cut in parts, its owner: the
	// node whose partial file and resume journal every part fills, fixed
	// by the first part claimed (cleared when the owner is lost).
	To string `json:"to,omitempty"`
	// Parts is how many parts the file is cut into (0: it moves whole,
	// in one task); PartsDone how many of them arrived verified.
	Parts     int `json:"parts,omitempty"`
	PartsDone int `json:"parts_done,omitempty"`
	// WaitsFor are the other jobs that were writing Dest when this file
	// was listed (its job chose on_conflict wait): it is not claimed
	// while any of them is live and its file there not ended.
	WaitsFor []string `json:"waits_for,omitempty"`
}

// Part is a byte range of one file that a copy task pushes on its own:
// the Index-th part of the file, Length bytes from Offset (Offset a
// multiple of the mover's block size; Length too, but for the last).
type Part struct {
	Index  int   `json:"index"`
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

// FilePart is one part of a file cut in parts (JobFile.Parts > 0), with
// the same life as a file: PENDING, ACTIVE in one task, SUCCEEDED or
// FAILED. A part's task runs on a pair whose To is the file's owner.
type FilePart struct {
	Job  string `json:"job"`
	Path string `json:"path"` // the file's source path
	Part
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error,omitempty"` // the last one
	Class    string `json:"class,omitempty"` // Error's, as JobFile.Class
	// Checksum is the part's bytes' checksum, in hex, of the job's
	// algorithm, as sender and receiver agreed on it.
	Checksum string `json:"checksum,omitempty"`
	Task     string `json:"task,omitempty"` // the task it is in, or last was
	From     string `json:"from,omitempty"` // the source node that moved it
	// To is the file's owner, on every part of the file from its first
	// part's claim (empty until then, and again once the file starts
	// afresh).
	To string `json:"to,omitempty"`
	// Complete says its push completed the file at the destination
	// (every block there, verified, renamed to its final name), and
	// FileChecksum is then the whole file's checksum (hex, the job's
	// algorithm) as the destination computed it.
	Complete     bool   `json:"complete,omitempty"`
	FileChecksum string `json:"file_checksum,omitempty"`
}

// Task is a piece of a job a data node runs: a listing, or a batch of
// files for one node pair.
type Task struct {
	ID      string `json:"id"` // k-…
	Job     string `json:"job"`
	Kind    string `json:"kind"`
	State   string `json:"state"`
	Attempt int    `json:"attempt"` // 1 on the first claim, one more on each
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	// Endpoint is the endpoint the task reads from (its job's source), so
	// that a claim fetches only its own endpoint's tasks. Empty in tasks
	// stored before it was kept, which the service fills in at start.
	Endpoint string `json:"endpoint,omitempty"`
	// Files are the source paths of a copy task.
	Files []string `json:"files,omitempty"`
	// Part, when set, makes the task push only this part of its one file.
	Part *Part `json:"part,omitempty"`
	// Pages counts the pages of its listing the current attempt of a list
	// task stored (apiv1.Listing.Page), so a page sent again is taken once.
	Pages        int       `json:"pages,omitempty"`
	Bytes        int64     `json:"bytes"`
	BytesDone    int64     `json:"bytes_done"`
	Reservation  string    `json:"reservation,omitempty"`
	RateBps      uint64    `json:"rate_bps,omitempty"`
	Streams      int       `json:"streams,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	ClaimedAt    time.Time `json:"claimed_at,omitzero"`
	LeaseExpires time.Time `json:"lease_expires,omitzero"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
	Error        string    `json:"error,omitempty"`
}

// Endpoint is one site's storage, served by its data nodes, which see the
// same files.
type Endpoint struct {
	Name string `json:"name"`
	// Site is the topology site of its data nodes.
	Site string `json:"site,omitempty"`
	// Users and Projects may use it; both empty: admins and operators only.
	Users    []string `json:"users,omitempty"`
	Projects []string `json:"projects,omitempty"`
	// Members are the topology nodes an admin listed as its data nodes:
	// only they may register for it (an admin's token aside).
	Members   []string   `json:"members,omitempty"`
	Nodes     []DataNode `json:"nodes,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
}

// DataNode is a `lightpath serve --controller` registered for an
// endpoint.
type DataNode struct {
	Node     string `json:"node"` // its topology node
	Endpoint string `json:"endpoint"`
	// Address is HOST:PORT where its server takes pushes from other nodes.
	Address    string `json:"address"`
	MaxRateBps uint64 `json:"max_rate_bps,omitempty"`
	// Parts says it pushes and takes parts of large files.
	Parts bool `json:"parts,omitempty"`
	// FreeBytes is the free space of its root as it last said, at
	// FreeBytesAt (zero when it never said: a node fronting a storage
	// system has no root of its own).
	FreeBytes    int64     `json:"free_bytes,omitempty"`
	FreeBytesAt  time.Time `json:"free_bytes_at,omitzero"`
	RegisteredAt time.Time `json:"registered_at"`
	LeaseExpires time.Time `json:"lease_expires"`
	Alive        bool      `json:"alive"`
}

// Decision is one of the optimizer's choices for a pair, with its reason.
type Decision struct {
	Job         string    `json:"job"`
	From        string    `json:"from"`
	To          string    `json:"to"`
	At          time.Time `json:"at"`
	Concurrency int       `json:"concurrency"`
	Streams     int       `json:"streams"`
	// ThroughputBps and SuccessRate are what it measured over the last
	// interval.
	ThroughputBps float64 `json:"throughput_bps"`
	SuccessRate   float64 `json:"success_rate"`
	Reason        string  `json:"reason"`
}

// Location is ENDPOINT:PATH.
type Location struct {
	Endpoint string
	Path     string // clean, relative to the endpoint's root; "." for the root
}

func (l Location) String() string { return l.Endpoint + ":" + l.Path }

// ErrLocation is a malformed ENDPOINT:PATH.
var ErrLocation = errors.New("malformed location")

// ParseLocation reads ENDPOINT:PATH. PATH is taken under the endpoint's
// root whether or not it starts with /; one that leads out of the root
// (..) is refused, as is an empty endpoint name.
func ParseLocation(s string) (Location, error) {
	ep, p, ok := strings.Cut(s, ":")
	switch {
	case !ok:
		return Location{}, fmt.Errorf("%w %q: want ENDPOINT:PATH", ErrLocation, s)
	case ep == "":
		return Location{}, fmt.Errorf("%w %q: the endpoint name is empty", ErrLocation, s)
	case strings.ContainsAny(ep, "/\\ \t\n\x00"):
		return Location{}, fmt.Errorf("%w %q: %q is not an endpoint name", ErrLocation, s, ep)
	case strings.ContainsRune(p, 0):
		return Location{}, fmt.Errorf("%w %q: the path holds a NUL byte", ErrLocation, s)
	}
	c := path.Clean("/" + p)
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return Location{}, fmt.Errorf("%w %q: the path leads out of the endpoint's root", ErrLocation, s)
		}
	}
	rel := strings.TrimPrefix(c, "/")
	if rel == "" {
		rel = "."
	}
	return Location{Endpoint: ep, Path: rel}, nil
}
