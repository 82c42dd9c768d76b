// Package service is the transfer service on the controller's side: data
// nodes and their endpoints, jobs, the tasks data nodes claim and report
// on, deadline jobs booked through a booking.Booker (the controller's
// scheduler, in process), and the optimizer's decisions. It never imports
// the controller: what it needs of it comes in its Config. Data nodes
// call it (heartbeat, claim, listing, report); it never calls them.
// Every piece of a job's state lives in the store: a controller killed or
// replaced by its standby carries on from there (what it keeps in memory,
// the optimizer's pairs and the running rates, is rebuilt from the store
// or from the next reports). Package api serves it over HTTP.
package service

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/booking"
	"github.com/lightpath/lightpath/internal/identity"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/transfer/optimize"
)

// Defaults and bounds.
const (
	DefaultLease = 15 * time.Second // a data node's lease when it asks for none
	MaxLease     = 5 * time.Minute
	// MaxAttempts is how often a file is tried before it fails.
	MaxAttempts = 3
	// BatchFiles and BatchBytes bound a copy task. A task is one mover
	// session, whose opening and closing cost a few round trips and its
	// ramp-up: small tasks of small files spend more time on that than on
	// data (64 files a task moved 8 MB in 0.6 s on a 270 Mbit/s pair).
	// A task is also what a lost node's successor takes over, but the
	// mover's resume sends only what is missing of it.
	BatchFiles = 1000
	BatchBytes = 1 << 30
	// GrantTTL is how long a task's grant holds at most. It is not what
	// ends a grant: a destination asks the controller at the start of
	// every session whether the grant's attempt is still current, and
	// fences the sessions of one that ended (CheckGrant, Heartbeat's
	// Granted), so a grant dies with its task whatever its expiry. The
	// expiry bounds it where that cannot be asked (a mover server with
	// grants but no controller to ask), and it is long because a grant is
	// not renewed: a task's resumed sessions present it again.
	GrantTTL = time.Hour
	// MaxGranted bounds the attempts a heartbeat names as granted.
	MaxGranted = 4096
	// ListTimeout bounds a list task on its node.
	ListTimeout = 5 * time.Minute
	// MaxListingFiles bounds a page of a listing (apiv1.Listing): a
	// listing of any size comes in pages, each stored in a transaction
	// of its own under a short hold of mu, so the controller never holds
	// a whole large listing (issue 28, finding 7).
	MaxListingFiles = apiv1.MaxListingPage
	// ListingBatch is how many files one step deletes when a job's files
	// go (an earlier attempt's listing, a cancel): a bounded hold of mu
	// and of the store's write lock a step.
	ListingBatch = 1000
	// DefaultFilesPage and MaxFilesPage bound the files of one job page
	// (GET /api/v1/jobs/{id}?limit=&after=); the rest come by its Next.
	DefaultFilesPage = 1000
	MaxFilesPage     = 10000
	// MaxPageTasks bounds the tasks of a job's page, the oldest first.
	MaxPageTasks = 500
	// MaxClaim bounds the tasks one claim hands out.
	MaxClaim = 16
	// MaxClaimWait bounds how long a claim waits for something to hand
	// out (apiv1.ClaimRequest.Wait).
	MaxClaimWait = 30 * time.Second
	// MaxJobWait bounds how long a job's page waits for the job to end
	// (GET /api/v1/jobs/{id}?wait=, WaitEnded).
	MaxJobWait = 30 * time.Second

	settingGrantKey = "service.grant_key"
	// settingReceiptKey is the key the data nodes' receipt secrets are
	// derived from (grant.NodeSecret).
	settingReceiptKey = "service.receipt_key"
)

// Config is what a service is started with.
//
// The service never calls the controller: it books through Booker and
// learns the rest of the controller's state through Store, Now, MaxHold,
// Policy, Topology and Events, which internal/api's ServiceConfig fills
// from the controller in process (and a test from whatever it likes).
type Config struct {
	// Store is the controller's store: every piece of the service's
	// state lives there (required).
	Store store.Store
	// Now is the controller's clock (time.Now when nil).
	Now func() time.Time
	// MaxHold is how long a HELD reservation waits for its commit (the
	// controller's; the controller's default when zero).
	MaxHold time.Duration
	// Policy is the controller's policy as it is now: the job limits
	// (no limits when nil).
	Policy func() reserve.Policy
	// Topology is the controller's topology as it is now, nil when it has
	// none (then what needs one is refused with reserve.ErrNoTopology).
	Topology func() Network
	// Events follows the controller's reservation events until stop is
	// called or ctx ends; the channel closes when the subscription drops
	// (Run subscribes again at its next tick). Nil: Run starts booked
	// jobs at its ticks only.
	Events func(ctx context.Context) (events <-chan apiv1.Event, stop func())
	// Booker books as a user (the job's owner; "" is the service itself,
	// an admin, which releases the reservations of a job whose owner is
	// gone): the controller in process (internal/api's ServiceConfig) or
	// a fake in tests.
	Booker func(ctx context.Context, user string) (booking.Booker, error)
	// Goodput (η), StartUp (σ) and MinWindow are the joint plan's priors
	// (DefaultGoodput, DefaultStartUp, DefaultMinWindow when zero).
	Goodput   float64
	StartUp   time.Duration
	MinWindow time.Duration
	// Optimizer configures the per-pair optimizers (its defaults when
	// zero).
	Optimizer optimize.Config
	// BookedConcurrency is the fewest tasks at once on a booked pair
	// (DefaultBookedConcurrency when zero); its optimizer may run more.
	// A second task keeps the pipeline free of gaps: while one task opens
	// its session or reports its last files, the other moves data. The
	// booked rate is shared among the running tasks (divideRates), so two
	// tasks never send above the booking.
	BookedConcurrency int
	// PartMinBytes and PartBytes cut large files into parts: a file of at
	// least PartMinBytes is moved in parts of PartBytes (rounded up to the
	// mover's block size; the last part takes the remainder), each its own
	// task, so the parts of one file come from several source nodes into
	// one destination node. Zero takes DefaultPartMinBytes and
	// DefaultPartBytes; a negative PartMinBytes never cuts.
	PartMinBytes int64
	PartBytes    int64
	// Tick is the period of the service's clock (Run; DefaultTick when
	// zero).
	Tick time.Duration
	Log  *slog.Logger
}

// Config.PartMinBytes's and Config.PartBytes's defaults. Each part is a
// mover session of its own, whose set-up (handshakes, slow start: about
// 0.3 s over the bench's 20 ms paths) is paid again per part: 64 MiB
// parts ran bench/service.sh at 0.86 of the booking, whole files at 0.91,
// so parts are large and only files that make several of them are cut.
const (
	DefaultPartMinBytes = 1 << 30
	DefaultPartBytes    = 256 << 20
)

// DefaultMaxHold is Config.MaxHold's default: the controller's own
// default (its --hold-timeout), which a hold may not exceed.
const DefaultMaxHold = 15 * time.Minute

// DefaultTick is Config.Tick's default.
const DefaultTick = time.Second

// DefaultBookedConcurrency is Config.BookedConcurrency's default.
const DefaultBookedConcurrency = 2

// Service is the transfer service. Create it with New and run its clock
// with Run while the controller leads.
type Service struct {
	st  store.Store
	now func() time.Time
	log *slog.Logger
	key ed25519.PrivateKey
	pub string
	// receiptKey is what each data node's receipt secret is derived
	// from; only the controller and, for its own secret, each node hold it.
	receiptKey []byte
	ocfg       optimize.Config
	// bookedConcurrency is Config.BookedConcurrency.
	bookedConcurrency int
	// partMin and partBytes are Config.PartMinBytes and Config.PartBytes.
	partMin, partBytes int64
	tick               time.Duration

	// mu serialises the service's changes: each is one store transaction
	// made under it.
	mu sync.Mutex
	// heldSince is when mu was last taken (lock); stalled remembers the
	// holds of mu, and the clock's waits for it, that kept heartbeats
	// out for longer than StallHold (stall.go).
	heldSince time.Time
	stalled   stalls
	// alive remembers when each data node was last heard and which are
	// suspected of being dead (liveness.go); lostWhy, under mu, why a
	// node taken for dead before its lease lapsed was, for lapse's reasons.
	alive   liveness
	lostWhy map[string]string
	// ownersScanned is the ownersKey at lapseOwners' last full reading
	// of the open parts (under mu).
	ownersScanned string
	// maxHold, policy, topology, events, bookerAs, goodput, startUp and
	// minWindow are Config's MaxHold, Policy, Topology, Events, Booker,
	// Goodput, StartUp and MinWindow.
	maxHold  time.Duration
	policy   func() reserve.Policy
	topology func() Network
	events   func(ctx context.Context) (<-chan apiv1.Event, func())
	bookerAs func(ctx context.Context, user string) (booking.Booker, error)
	goodput  float64
	// measured is the running estimate of η from finished booked jobs
	// (goodput.go), as float64 bits; zero until the first.
	measured  atomic.Uint64
	startUp   time.Duration
	minWindow time.Duration
	// bookMu serialises BookPending: each job is planned against what the
	// ones before it booked. bookKick wakes Run's booking as a listing
	// completes.
	bookMu   sync.Mutex
	bookKick chan struct{}
	// bookDue says a listing completed (or the service started, or a
	// booked pair lost a node) since BookPending last looked.
	bookDue atomic.Bool
	// rebook holds the booked jobs with a pair whose node was lost
	// (rebook.go), for BookPending. Under mu.
	rebook map[string]bool
	// rebooking holds the jobs BookPending is booking again now: their
	// requeued tasks wait for the new pairs. Under mu.
	rebooking map[string]bool
	// driving holds the jobs whose sweep a request or goroutine steps
	// (sweep.go): the clock leaves them to it. Under mu.
	driving map[string]int
	// opt holds one optimizer per (job, from, to), rebuilt from the last
	// stored decision after a restart.
	opt  map[pairKey]*optimize.Pair
	last map[pairKey]transfer.Decision
	// rates are the running tasks' last reported throughput (metrics).
	rates map[string]taskRate
	// moved is the running total of bytes moved by the service's jobs,
	// read from the store at start and counted on since.
	moved int64
	// changed is closed, and replaced, at every change that may give a
	// waiting claim something to hand out (see notify).
	changed chan struct{}
	// waitScan is where the next claim's scan of a job's pending files
	// goes on after, for a job whose files wait for other writers
	// (writers.go). Under mu.
	waitScan map[string]string
	// parked counts the times a claim or a job wait found nothing and
	// began waiting for the next change (see Parked).
	parked atomic.Uint64
}

type pairKey struct{ job, from, to string }

type taskRate struct {
	bps              float64
	fromSite, toSite string
	until            time.Time
}

// New starts a service on the controller's store. The grant key is
// created once and kept in the store's settings, so a restarted
// controller or its standby signs with the same key.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("service: no store")
	}
	s := &Service{
		st:                cfg.Store,
		now:               cfg.Now,
		log:               cfg.Log,
		maxHold:           cfg.MaxHold,
		policy:            cfg.Policy,
		topology:          cfg.Topology,
		events:            cfg.Events,
		bookerAs:          cfg.Booker,
		goodput:           cfg.Goodput,
		startUp:           cfg.StartUp,
		minWindow:         cfg.MinWindow,
		bookKick:          make(chan struct{}, 1),
		rebook:            map[string]bool{},
		rebooking:         map[string]bool{},
		ocfg:              cfg.Optimizer.WithDefaults(),
		bookedConcurrency: cfg.BookedConcurrency,
		partMin:           cfg.PartMinBytes,
		partBytes:         cfg.PartBytes,
		tick:              cfg.Tick,
		driving:           map[string]int{},
		opt:               map[pairKey]*optimize.Pair{},
		last:              map[pairKey]transfer.Decision{},
		rates:             map[string]taskRate{},
		changed:           make(chan struct{}),
		lostWhy:           map[string]string{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxHold <= 0 {
		s.maxHold = DefaultMaxHold
	}
	s.bookDue.Store(true) // a restart between a listing and its booking
	if s.bookedConcurrency <= 0 {
		s.bookedConcurrency = DefaultBookedConcurrency
	}
	if !(s.goodput > 0 && s.goodput <= 1) {
		s.goodput = DefaultGoodput
	}
	if s.startUp <= 0 {
		s.startUp = DefaultStartUp
	}
	if s.minWindow <= 0 {
		s.minWindow = DefaultMinWindow
	}
	if s.partMin == 0 {
		s.partMin = DefaultPartMinBytes
	}
	if s.partBytes <= 0 {
		s.partBytes = DefaultPartBytes
	}
	if s.tick <= 0 {
		s.tick = DefaultTick
	}
	k, err := s.loadKey(ctx)
	if err != nil {
		return nil, err
	}
	s.key = k
	s.pub = grant.EncodeKey(k.Public().(ed25519.PublicKey))
	s.loadGoodput(ctx)
	if s.receiptKey, err = s.loadReceiptKey(ctx); err != nil {
		return nil, err
	}
	jobs, err := s.st.ListJobs(ctx, store.JobFilter{})
	if err != nil {
		return nil, fmt.Errorf("service: list jobs: %w", err)
	}
	for _, j := range jobs {
		s.moved += j.BytesDone
	}
	if err := s.fillEndpoints(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// fillEndpoints gives the open tasks stored before tasks kept their
// endpoint (schema version 8) their job's source endpoint, which the
// claims select them by. Once at start; none is left after the first.
func (s *Service) fillEndpoints(ctx context.Context) error {
	ts, err := s.st.ListTasks(ctx, store.TaskFilter{States: []string{transfer.TaskQueued, transfer.TaskActive}})
	if err != nil {
		return fmt.Errorf("service: list open tasks: %w", err)
	}
	for _, t := range ts {
		if t.Endpoint != "" {
			continue
		}
		j, err := s.st.GetJob(ctx, t.Job)
		if err != nil {
			return fmt.Errorf("service: the job of task %s: %w", t.ID, err)
		}
		t.Endpoint = srcEndpoint(j)
		if err := s.st.UpdateTask(ctx, t); err != nil {
			return fmt.Errorf("service: keep task %s's endpoint: %w", t.ID, err)
		}
	}
	return nil
}

// loadKey reads the grant key from the store, or makes and keeps one.
func (s *Service) loadKey(ctx context.Context) (ed25519.PrivateKey, error) {
	v, err := s.st.GetSetting(ctx, settingGrantKey)
	if err == nil {
		seed, derr := base64.StdEncoding.DecodeString(v)
		if derr != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("service: setting %s is not an ed25519 seed", settingGrantKey)
		}
		return ed25519.NewKeyFromSeed(seed), nil
	}
	if !errors.Is(err, reserve.ErrNotFound) {
		return nil, fmt.Errorf("service: read the grant key: %w", err)
	}
	k, err := grant.NewKey()
	if err != nil {
		return nil, fmt.Errorf("service: make the grant key: %w", err)
	}
	if err := s.st.PutSetting(ctx, settingGrantKey, base64.StdEncoding.EncodeToString(k.Seed())); err != nil {
		return nil, fmt.Errorf("service: keep the grant key: %w", err)
	}
	return k, nil
}

// loadReceiptKey reads the receipt key from the store, or makes and keeps
// one: a restarted controller or its standby checks the receipts the
// nodes' secrets signed before.
func (s *Service) loadReceiptKey(ctx context.Context) ([]byte, error) {
	v, err := s.st.GetSetting(ctx, settingReceiptKey)
	if err == nil {
		k, derr := base64.StdEncoding.DecodeString(v)
		if derr != nil || len(k) != 32 {
			return nil, fmt.Errorf("service: setting %s is not a 32-byte key", settingReceiptKey)
		}
		return k, nil
	}
	if !errors.Is(err, reserve.ErrNotFound) {
		return nil, fmt.Errorf("service: read the receipt key: %w", err)
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("service: make the receipt key: %w", err)
	}
	if err := s.st.PutSetting(ctx, settingReceiptKey, base64.StdEncoding.EncodeToString(k)); err != nil {
		return nil, fmt.Errorf("service: keep the receipt key: %w", err)
	}
	return k, nil
}

// nodeSecret is data node node's receipt secret.
func (s *Service) nodeSecret(node string) []byte { return grant.NodeSecret(s.receiptKey, node) }

// GrantKey is the public key data nodes check grants with (base64).
func (s *Service) GrantKey() string { return s.pub }

// newID returns a fresh identifier with a prefix saying what it names.
func newID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return prefix + hex.EncodeToString(b[:])
}

func forbidden(format string, args ...any) error {
	return &reserve.PolicyError{Rule: reserve.RuleRole, Message: fmt.Sprintf(format, args...)}
}

func invalid(field, format string, args ...any) error {
	return &reserve.RequestError{Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(what, id string) error {
	return fmt.Errorf("%w: %s %q", reserve.ErrNotFound, what, id)
}

func conflict(format string, args ...any) error {
	return fmt.Errorf("%w: %s", reserve.ErrConflict, fmt.Sprintf(format, args...))
}

// DeadlineError refuses a deadline job that cannot be met: it matches
// reserve.ErrCapacity (409 "capacity").
type DeadlineError struct {
	Deadline  time.Time
	Earliest  time.Time
	Algorithm string
	// Why, when Earliest is zero, says why no completion was found.
	Why string
}

func (e *DeadlineError) Error() string {
	if e.Earliest.IsZero() {
		return fmt.Sprintf("deadline %s cannot be met: %s", e.Deadline.UTC().Format(time.RFC3339), e.Why)
	}
	// Two instants within one second are told apart by their
	// milliseconds.
	layout := time.RFC3339
	if e.Deadline.UTC().Truncate(time.Second).Equal(e.Earliest.UTC().Truncate(time.Second)) {
		layout = "2006-01-02T15:04:05.000Z07:00"
	}
	return fmt.Sprintf("deadline %s cannot be met: the earliest completion is %s (algorithm %s)",
		e.Deadline.UTC().Format(layout), e.Earliest.UTC().Format(layout), e.Algorithm)
}

// Unwrap makes a DeadlineError match reserve.ErrCapacity.
func (e *DeadlineError) Unwrap() error { return reserve.ErrCapacity }

// oneLine keeps the first line of s, trimmed and bounded, for a Reason.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.TrimSpace(s)
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// tx runs fn in one store transaction.
func (s *Service) tx(ctx context.Context, fn func(tx store.Store) error) error {
	return s.st.Tx(ctx, fn)
}

// saveJob stores j as the next version of itself. The caller holds mu.
// Every change to a job that could make a task claimable (listed, started,
// a task ended or requeued, a concurrency raised, cancelled) goes through
// here, so it wakes the waiting claims (notify).
func (s *Service) saveJob(ctx context.Context, tx store.Store, j *transfer.Job, now time.Time) error {
	old := j.Version
	j.Version++
	j.UpdatedAt = now
	if err := tx.UpdateJob(ctx, *j, old); err != nil {
		j.Version = old
		return fmt.Errorf("store job %s: %w", j.ID, err)
	}
	s.notify()
	return nil
}

// notify wakes the waiting claims: they claim again, and wait again when
// there is still nothing for them. The caller holds mu, so a woken claim
// (which claims under mu) sees the change once it is committed; a change
// that is rolled back only costs the waiters one more claim.
func (s *Service) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Parked returns how many times a claim with a wait or a WaitEnded has
// found nothing and begun waiting for the next change. It only grows: a
// caller that sees it pass a value it read before knows a waiter has
// looked since (and, if woken, looked again), which is how the tests know
// that a waiting claim is held rather than merely slow to answer.
func (s *Service) Parked() uint64 { return s.parked.Load() }

// WaitEnded returns once job id has ended (SUCCEEDED, FAILED or
// CANCELLED), d has passed or ctx ended, whichever comes first, so that
// transfer wait learns of the end as it happens rather than at its next
// poll. A job the actor may not see is not found.
func (s *Service) WaitEnded(ctx context.Context, a identity.Actor, id string, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		// The channel first, under mu: every change to the job is made
		// and committed under mu (saveJob), so the read below sees it at
		// least as new as the channel, and a later change closes it.
		s.lock()
		changed := s.changed
		s.unlock()
		j, err := s.job(ctx, a, id)
		if err != nil {
			return err
		}
		if transfer.JobEnded(j.State) {
			return nil
		}
		s.parked.Add(1)
		select {
		case <-changed:
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
