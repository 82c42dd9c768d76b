// Package datanode is the transfer service's worker on a data node, the
// part of `lightpath serve --controller` beside the mover's server: it
// keeps the node registered with the controller (a heartbeat that renews
// its lease and its tasks' leases, and brings back the controller's grant
// key, the fences of the attempts pushed to this node and the tasks to
// stop), claims tasks, and runs them: a listing of a job's sources under
// the endpoint's root, or a batch of files pushed to a destination node's
// server with the task's grant. Data nodes call the controller; the
// controller never calls them. A controller that cannot be reached (a
// restart, a failover to its standby) is waited for, never a reason to
// stop.
package datanode

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/transport"
)

// Defaults of Config.
const (
	DefaultLease       = 15 * time.Second
	DefaultMaxTasks    = 4
	DefaultRetries     = 3
	DefaultListTimeout = 5 * time.Minute
	DefaultReportEvery = time.Second
	// DefaultClaimWait is how long an idle node's claim waits at the
	// controller for something to hand out (apiv1.ClaimRequest.Wait): a
	// job's tasks are handed out as soon as they are claimable, with no
	// polling between.
	DefaultClaimWait = 10 * time.Second
	// idleClaim is the least time between two claims that came back
	// empty: a controller that does not know Wait (older) answers at
	// once, and is then asked at most this often (or at the next
	// heartbeat, or when a task of its own ends).
	idleClaim = 250 * time.Millisecond
	// maxBackoff bounds the wait between attempts while the controller
	// cannot be reached.
	maxBackoff = 15 * time.Second
)

// Config says who the data node is and how it works.
type Config struct {
	Client *client.Client // acts for Node (client.Enrol)
	// Node is its topology node, Endpoint the endpoint it serves, Root the
	// directory its server serves (the endpoint's root on this node), and
	// Address the HOST:PORT other nodes push to.
	Node, Endpoint, Root, Address string
	MaxRateBps                    uint64
	Lease                         time.Duration // default DefaultLease
	MaxTasks                      int           // tasks at once; default DefaultMaxTasks
	// Verifier is the node's server's: the heartbeat sets its key and
	// raises its fences.
	Verifier *grant.Verifier
	Logger   *slog.Logger
	// Token and TLS are what the destination servers ask of a push besides
	// its grant (their --token-file, TLS); Transport carries the pushes
	// (nil: TCP).
	Token     []byte
	TLS       *tls.Config
	Transport transport.Transport
	// CC is the congestion control of pushes whose job names none (serve
	// --cc); "" leaves the transport's default.
	CC string
	// Retries is how often a copy's failed session is resumed before the
	// task reports its error (default DefaultRetries; negative: never).
	Retries int
	// ReportEvery is how often a copy task reports its files' verdicts
	// (default DefaultReportEvery).
	ReportEvery time.Duration
	// ClaimWait is how long an idle claim waits at the controller
	// (default DefaultClaimWait, at most 30s); keep it well under the
	// client's request timeout.
	ClaimWait time.Duration
}

func (c *Config) defaults() error {
	switch {
	case c.Client == nil:
		return errors.New("datanode: no controller client")
	case c.Node == "" || c.Endpoint == "":
		return errors.New("datanode: the node and the endpoint are required")
	case c.Root == "":
		return errors.New("datanode: no root")
	case c.Address == "":
		return errors.New("datanode: no address to advertise")
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.MaxTasks <= 0 {
		c.MaxTasks = DefaultMaxTasks
	}
	if c.Retries == 0 {
		c.Retries = DefaultRetries
	} else if c.Retries < 0 {
		c.Retries = 0
	}
	if c.ReportEvery <= 0 {
		c.ReportEvery = DefaultReportEvery
	}
	if c.ClaimWait <= 0 {
		c.ClaimWait = DefaultClaimWait
	}
	c.ClaimWait = min(c.ClaimWait, 30*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// node is a running data node.
type node struct {
	cfg  Config
	root *os.Root
	log  *slog.Logger

	mu    sync.Mutex
	tasks map[string]*running
	// beat is signalled after every heartbeat the controller answered;
	// freed after every task that ends; ended too, for the heartbeat
	// loop, which then sends one at once: the controller divides an
	// ended task's share of its pair's booking among the pair's other
	// tasks, and they speed up within a round trip.
	beat, freed, ended chan struct{}
	// paceMu orders the re-pacing of the tasks. claimed, under it,
	// counts the claim answers that changed the tasks' rates: a heartbeat
	// answer computed before such a claim but read after it would undo
	// the claim's lower rates, so its rates are not applied when the
	// count moved while it was asked, and another heartbeat goes at once.
	paceMu  sync.Mutex
	claimed uint64
	wg      sync.WaitGroup
	// oldController logs once that the controller cannot confirm grants.
	oldController sync.Once
}

// running is a task the node runs.
type running struct {
	work   apiv1.TaskWork
	cancel context.CancelCauseFunc
	prog   progress

	paceMu sync.Mutex
	// booked is the controller's current rate for the task, bits/s (its
	// share of its pair's booking; 0 unbooked).
	booked uint64
	// rate is the pace the task runs at now (taskRate), meter its
	// running push's, through which it is re-paced.
	rate  uint64
	meter *mover.Meter
}

// pace sets the task's pace, re-pacing its running push if it changed.
func (t *running) pace(rate uint64, log *slog.Logger) {
	t.paceMu.Lock()
	defer t.paceMu.Unlock()
	if rate == t.rate {
		return
	}
	t.rate = rate
	if t.meter != nil {
		if err := t.meter.SetRate(rate); err != nil {
			log.Debug("re-pace a push", "task", t.work.Task.ID, "err", err)
		}
	}
}

// setMeter makes m, the meter of a push about to start, the one the task
// is re-paced through, at the task's pace of now.
func (t *running) setMeter(m *mover.Meter) {
	t.paceMu.Lock()
	defer t.paceMu.Unlock()
	t.meter = m
	if m != nil {
		m.SetRate(t.rate) // before the push starts: nothing to fail
	}
}

// setBooked takes the controller's rate for the task's attempt.
func (t *running) setBooked(r apiv1.TaskRate) {
	if r.Attempt != t.work.Task.Attempt {
		return
	}
	t.paceMu.Lock()
	t.booked = r.RateBps
	t.paceMu.Unlock()
}

// repace sets every running task's pace from its booked rate and the
// node's --max-rate shared among the tasks running now.
func (n *node) repace() {
	n.paceMu.Lock()
	defer n.paceMu.Unlock()
	n.repaceLocked()
}

// takeRates applies the controller's rates for the node's tasks and
// re-paces them: a claim answer's always, a heartbeat's (asked when the
// count of claims was since) only when no claim answer came meanwhile.
// It reports whether it applied them.
func (n *node) takeRates(rs []apiv1.TaskRate, claim bool, since uint64) bool {
	n.paceMu.Lock()
	defer n.paceMu.Unlock()
	if claim {
		n.claimed++
	} else if n.claimed != since {
		return false
	}
	n.setRates(rs)
	n.repaceLocked()
	return true
}

// claimsSoFar is the count of claim answers that brought rates or tasks.
func (n *node) claimsSoFar() uint64 {
	n.paceMu.Lock()
	defer n.paceMu.Unlock()
	return n.claimed
}

func (n *node) repaceLocked() {
	n.mu.Lock()
	ts := make([]*running, 0, len(n.tasks))
	for _, t := range n.tasks {
		ts = append(ts, t)
	}
	n.mu.Unlock()
	for _, t := range ts {
		t.paceMu.Lock()
		booked := t.booked
		t.paceMu.Unlock()
		t.pace(taskRate(booked, n.cfg.MaxRateBps, len(ts)), n.log)
	}
}

// setRates takes the controller's rates for the node's tasks.
func (n *node) setRates(rs []apiv1.TaskRate) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range rs {
		if t := n.tasks[r.Task]; t != nil {
			t.setBooked(r)
		}
	}
}

// errCancelled is the cause of a task the controller said to stop.
var errCancelled = errors.New("the controller cancelled the task")

// Run registers the data node and runs its tasks until ctx ends; then it
// stops its tasks (their last reports say so) and returns nil.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	root, err := os.OpenRoot(cfg.Root)
	if err != nil {
		return fmt.Errorf("datanode: open the root: %w", err)
	}
	defer root.Close()
	n := &node{cfg: cfg, root: root, log: cfg.Logger, tasks: map[string]*running{},
		beat: make(chan struct{}, 1), freed: make(chan struct{}, 1), ended: make(chan struct{}, 1)}
	if cfg.Verifier != nil {
		cfg.Verifier.SetConfirm(n.confirmGrant)
	}
	n.log.Info("data node starting", "node", cfg.Node, "endpoint", cfg.Endpoint, "address", cfg.Address,
		"root", cfg.Root, "max_tasks", cfg.MaxTasks, "lease", cfg.Lease)
	registered := make(chan struct{})
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var loops sync.WaitGroup
	loops.Add(1)
	go func() {
		defer loops.Done()
		if err := n.heartbeats(ctx, registered); err != nil {
			stop(err)
		}
	}()
	n.claims(ctx, registered)
	loops.Wait()
	refused := context.Cause(ctx)
	if errors.Is(refused, context.Canceled) {
		refused = nil
	}
	n.mu.Lock()
	for _, t := range n.tasks {
		t.cancel(errors.New("the data node is stopping"))
	}
	n.mu.Unlock()
	n.wg.Wait()
	if refused != nil {
		return refused
	}
	n.log.Info("data node stopped")
	return nil
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// heartbeats renews the node's lease every lease/3 until ctx ends, and at
// once after a task ends, and applies what each answer says. registered is closed after the first
// answer. A first heartbeat the controller refuses (a node that is not a
// host of its topology, an endpoint of another site, a token that does
// not act for the node) is returned: that is a configuration to mend,
// not an outage to wait out. Once registered, a refused token (revoked,
// expired) or registration is returned too; every other failure is
// waited out.
// freeBytes is the free space of the node's root, for its heartbeat; nil
// where the system cannot say (the controller then knows none).
func (n *node) freeBytes() *int64 {
	free, err := mover.FreeSpace(n.root, ".")
	if err != nil {
		return nil
	}
	return &free
}

func (n *node) heartbeats(ctx context.Context, registered chan struct{}) error {
	every := n.cfg.Lease / 3
	first := true
	var lastErr string
	for {
		req := apiv1.DataNodeHeartbeat{Endpoint: n.cfg.Endpoint, Address: n.cfg.Address, Parts: true,
			MaxRateBps: n.cfg.MaxRateBps, Lease: n.cfg.Lease.String(), Tasks: n.progress(), Granted: n.granted(),
			Broken: n.broken(), FreeBytes: n.freeBytes()}
		claimed := n.claimsSoFar()
		work, err := n.cfg.Client.DataNodeHeartbeat(ctx, n.cfg.Node, req)
		again := false
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && first && refusal(err):
			return fmt.Errorf("the controller refuses to register data node %s of endpoint %s: %w", n.cfg.Node, n.cfg.Endpoint, err)
		case err != nil && dismissed(err):
			// Its token revoked or expired, or the node taken off its
			// endpoint: an admin's decision, which waiting does not
			// change (and a node whose token went to another host must
			// not keep serving).
			return fmt.Errorf("the controller no longer takes data node %s of endpoint %s (an admin enrols it again or lists it): %w", n.cfg.Node, n.cfg.Endpoint, err)
		case err != nil:
			n.unbroken(req.Broken)
			if msg := err.Error(); msg != lastErr {
				n.log.Warn("heartbeat failed; trying again", "err", err, "every", every)
				lastErr = msg
			}
		default:
			if lastErr != "" || first {
				n.log.Info("registered with the controller", "lease_expires", work.LeaseExpires)
				lastErr = ""
			}
			n.apply(work, req.Tasks)
			if work.Rates != nil && !n.takeRates(work.Rates, false, claimed) {
				again = true // a claim's rates are newer: ask again
			}
			if first {
				close(registered)
				first = false
			}
			signal(n.beat)
		}
		if again {
			continue
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-n.ended:
			t.Stop()
		case <-n.brokenCh():
			t.Stop()
		}
	}
}

// dismissed reports whether the controller refused the node's token (401)
// or its registration (403).
func dismissed(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && (ae.Status == 401 || ae.Status == 403)
}

// refusal reports whether the controller answered a request with a
// refusal that asking again will not change (4xx other than 408 and 429).
func refusal(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != 408 && ae.Status != 429
}

// apply takes a heartbeat's answer: the grant key, receipt secret and fences go to the
// server's verifier, the tasks to cancel are stopped. (Its rates are the
// heartbeat loop's to apply, with takeRates.) The fences go first: a
// server that has no key yet (just started) takes no session, and takes
// none under a fenced attempt once it has one.
func (n *node) apply(w apiv1.DataNodeWork, sent []apiv1.TaskProgress) {
	if v := n.cfg.Verifier; v != nil {
		for _, f := range w.Fences {
			v.Fence(f.Task, f.Attempt)
		}
		if w.GrantKey != "" {
			if k, err := grant.DecodeKey(w.GrantKey); err == nil {
				v.SetKey(k)
			} else {
				n.log.Warn("the controller's grant key", "err", err)
			}
		}
		if w.ReceiptKey != "" {
			// The server signs with it the receipts of what it writes
			// under grants, without which the controller counts no file.
			if k, err := base64.StdEncoding.DecodeString(w.ReceiptKey); err == nil && len(k) > 0 {
				v.SetReceiptKey(k)
			} else {
				n.log.Warn("the controller's receipt key", "err", "not base64")
			}
		}
	}
	for _, id := range w.Cancel {
		// The attempt the heartbeat reported, if it did: the controller's
		// word is about that one.
		attempt := 0
		for _, p := range sent {
			if p.Task == id {
				attempt = p.Attempt
			}
		}
		n.stopAttempt(id, attempt, errCancelled)
	}
}

// confirmTimeout bounds the question a session's start waits on.
const confirmTimeout = 10 * time.Second

// confirmGrant asks the controller whether an attempt of a task pushed
// to this node is still current: the server's verifier asks it before it
// takes a session under the attempt's grant (grant.Verifier.Confirm).
// Not current is grant.ErrOver with the controller's reason; a
// controller that cannot be asked is an error of its own, which the
// server answers as busy (the pushing node tries again).
func (n *node) confirmGrant(ctx context.Context, task string, attempt int) error {
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	st, err := n.cfg.Client.CheckGrant(ctx, n.cfg.Node, apiv1.GrantCheck{Task: task, Attempt: attempt})
	var ae *client.APIError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound && strings.HasPrefix(ae.Detail.Message, "no route"):
		// A controller older than the route: it cannot be asked, and
		// its fences are all there is (as before it).
		n.oldController.Do(func() {
			n.log.Warn("the controller cannot confirm grants (it is older than this data node): pushes are checked against its fences only")
		})
		return nil
	case err != nil:
		return err
	case !st.Current:
		return fmt.Errorf("%w: %s", grant.ErrOver, orWord(st.Reason, fmt.Sprintf("attempt %d of task %s is no longer current", attempt, task)))
	}
	return nil
}

// granted is what the heartbeat says of the sessions the node's server
// runs: the attempts they run under, each of which the answer fences if
// it is no longer current.
func (n *node) granted() []apiv1.Fence {
	return n.attempts((*grant.Verifier).Held)
}

// broken lists the attempts whose sessions broke on the node's server
// since the last heartbeat (grant.Verifier.TakeBroken).
func (n *node) broken() []apiv1.Fence {
	return n.attempts((*grant.Verifier).TakeBroken)
}

// attempts lists what list says of the node's server's verifier as the
// heartbeat's fences (none without a verifier).
func (n *node) attempts(list func(*grant.Verifier) []grant.Held) []apiv1.Fence {
	v := n.cfg.Verifier
	if v == nil {
		return nil
	}
	var out []apiv1.Fence
	for _, h := range list(v) {
		out = append(out, apiv1.Fence{Task: h.Task, Attempt: h.Attempt})
	}
	return out
}

// unbroken keeps for the next heartbeat the broken attempts one that
// failed carried, without waking the loop again (it waits its interval
// while the controller cannot be reached).
func (n *node) unbroken(fs []apiv1.Fence) {
	if len(fs) == 0 {
		return
	}
	for _, f := range fs {
		n.cfg.Verifier.Broke(f.Task, f.Attempt)
	}
	select {
	case <-n.cfg.Verifier.Broken():
	default:
	}
}

// brokenCh is signalled when a session on the node's server breaks (nil,
// never, without a verifier).
func (n *node) brokenCh() <-chan struct{} {
	if n.cfg.Verifier == nil {
		return nil
	}
	return n.cfg.Verifier.Broken()
}

// stop cancels a running task.
// stopAttempt stops task id only while it runs attempt (0: whichever): a
// word about an attempt that is over (a heartbeat's answer, a report's)
// must not stop the next attempt of the same task, claimed meanwhile by
// this node (a stopped node's task handed back to it).
func (n *node) stopAttempt(id string, attempt int, cause error) {
	n.mu.Lock()
	t := n.tasks[id]
	n.mu.Unlock()
	if t != nil && (attempt == 0 || t.work.Task.Attempt == attempt) {
		n.log.Info("stopping task", "task", id, "attempt", t.work.Task.Attempt, "why", cause)
		t.cancel(cause)
	}
}

// progress is what the heartbeat says of the running tasks.
func (n *node) progress() []apiv1.TaskProgress {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]apiv1.TaskProgress, 0, len(n.tasks))
	for id, t := range n.tasks {
		done, bps := t.prog.read()
		out = append(out, apiv1.TaskProgress{Task: id, Attempt: t.work.Task.Attempt, BytesDone: done, ThroughputBps: bps})
	}
	return out
}

func (n *node) running() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.tasks)
}

// claims asks for tasks while fewer than MaxTasks run, until ctx ends.
func (n *node) claims(ctx context.Context, registered chan struct{}) {
	select {
	case <-registered:
	case <-ctx.Done():
		return
	}
	backoff := time.Second
	var lastErr string
	wait := n.cfg.ClaimWait.String()
	for ctx.Err() == nil {
		free := n.cfg.MaxTasks - n.running()
		if free <= 0 {
			select {
			case <-ctx.Done():
			case <-n.freed:
			}
			continue
		}
		asked := time.Now()
		cl, err := n.cfg.Client.Claim(ctx, n.cfg.Node, apiv1.ClaimRequest{Max: free, Wait: wait})
		if ctx.Err() != nil {
			return
		}
		var ae *client.APIError
		if wait != "" && errors.As(err, &ae) && ae.Status == http.StatusBadRequest && ae.Detail.Field == "wait" {
			// A controller older than claims that wait refuses the
			// field: ask it without, every idleClaim at most.
			n.log.Info("the controller does not know claims that wait; asking without", "err", err)
			wait = ""
			continue
		}
		if err != nil {
			if msg := err.Error(); msg != lastErr {
				n.log.Warn("claim failed; trying again", "err", err)
				lastErr = msg
			}
			sleep(ctx, backoff)
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff, lastErr = time.Second, ""
		if len(cl.Tasks) > 0 || len(cl.Rates) > 0 {
			// The running tasks' lower rates first, then the new tasks:
			// their pair never runs above its booking.
			n.takeRates(cl.Rates, true, 0)
		}
		for _, tw := range cl.Tasks {
			n.start(ctx, tw)
		}
		if gap := idleClaim - time.Since(asked); len(cl.Tasks) == 0 && gap > 0 {
			// An empty answer at once: a controller that does not wait.
			// A task that ends frees a place in its pair: ask again at
			// once then, so the pair's next task follows without a gap.
			t := time.NewTimer(gap)
			select {
			case <-ctx.Done():
			case <-t.C:
			case <-n.beat:
			case <-n.freed:
			}
			t.Stop()
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// start runs a claimed task in its own goroutine.
func (n *node) start(ctx context.Context, tw apiv1.TaskWork) {
	id := tw.Task.ID
	tctx, cancel := context.WithCancelCause(ctx)
	t := &running{work: tw, cancel: cancel, booked: tw.Task.RateBps}
	t.prog.start = time.Now()
	n.mu.Lock()
	if old := n.tasks[id]; old != nil {
		// A newer attempt of a task this node still runs: the old one
		// stops (its grant is fenced anyway).
		old.cancel(errors.New("a newer attempt of the task was claimed"))
	}
	n.tasks[id] = t
	n.mu.Unlock()
	// Its pace, and the unbooked tasks' smaller share of --max-rate,
	// before its push starts.
	n.repace()
	n.log.Info("task claimed", "task", id, "job", tw.Task.Job, "kind", tw.Task.Kind, "attempt", tw.Task.Attempt,
		"files", len(tw.Files), "bytes", tw.Task.Bytes, "to", tw.Task.To)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer func() {
			n.mu.Lock()
			if n.tasks[id] == t {
				delete(n.tasks, id)
			}
			n.mu.Unlock()
			cancel(nil)
			n.repace()
			signal(n.freed)
			signal(n.ended)
		}()
		switch tw.Task.Kind {
		case transfer.TaskList:
			n.runList(tctx, t)
		case transfer.TaskCopy:
			n.runCopy(tctx, t)
		default:
			n.log.Warn("a task of an unknown kind", "task", id, "kind", tw.Task.Kind)
			n.deliver(tctx, t, func(c context.Context) (apiv1.TaskAnswer, error) {
				return n.cfg.Client.ReportTask(c, id, apiv1.TaskReport{Attempt: tw.Task.Attempt, Done: true, Permanent: true,
					Error: fmt.Sprintf("this data node does not run tasks of kind %q", tw.Task.Kind)})
			})
		}
	}()
}

// progress is a task's running byte count.
type progress struct {
	mu    sync.Mutex
	start time.Time
	bytes int64
}

func (p *progress) set(b int64) {
	p.mu.Lock()
	p.bytes = b
	p.mu.Unlock()
}

func (p *progress) read() (int64, float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.start).Seconds()
	if el <= 0 {
		return p.bytes, 0
	}
	return p.bytes, float64(p.bytes) * 8 / el
}

// deliver sends a task's last word, trying again while the controller
// cannot be reached (a restart, a failover), for as long as the task's
// lease could still be renewed; a task whose ctx ended (the node stops)
// gets a few seconds. The task stays in the heartbeat meanwhile. It
// returns the controller's answer, and whether one came.
func (n *node) deliver(ctx context.Context, t *running, send func(context.Context) (apiv1.TaskAnswer, error)) (apiv1.TaskAnswer, bool) {
	base := context.WithoutCancel(ctx)
	giveUp := time.Now().Add(2 * time.Minute)
	if ctx.Err() != nil {
		giveUp = time.Now().Add(5 * time.Second)
	}
	backoff := 500 * time.Millisecond
	for {
		if ctx.Err() != nil {
			if soon := time.Now().Add(5 * time.Second); soon.Before(giveUp) {
				giveUp = soon
			}
		}
		c, cancel := context.WithDeadline(base, giveUp)
		ans, err := send(c)
		cancel()
		if err == nil {
			if ans.Cancel {
				n.log.Info("the controller says the task is over", "task", t.work.Task.ID, "reason", ans.Reason)
			}
			return ans, true
		}
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status < 500 || time.Now().Add(backoff).After(giveUp) {
			n.log.Warn("report of a task not taken", "task", t.work.Task.ID, "err", err)
			return apiv1.TaskAnswer{}, false
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			// The node stops: a last few tries, quickly.
			t.Stop()
			time.Sleep(min(backoff, time.Second))
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
