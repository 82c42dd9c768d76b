package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/identity"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/transfer/plan"
)

// srcEndpoint is the endpoint a job reads from.
func srcEndpoint(j transfer.Job) string {
	if len(j.Sources) == 0 {
		return ""
	}
	l, _ := transfer.ParseLocation(j.Sources[0])
	return l.Endpoint
}

// dstLocation is where a job writes.
func dstLocation(j transfer.Job) transfer.Location {
	l, _ := transfer.ParseLocation(j.Destination)
	return l
}

// claimRun is one claim's view, inside its transaction.
type claimRun struct {
	s     *Service
	ctx   context.Context
	tx    store.Store
	now   time.Time
	me    transfer.DataNode
	live  map[string][]transfer.DataNode
	topo  Network
	jobs  map[string]*transfer.Job
	dirty map[string]bool
	max   int
	out   []apiv1.TaskWork
	// rates are the current rates of the node's running copy tasks that a
	// claimed task's pair shares, by task.
	rates map[string]apiv1.TaskRate
}

func (r *claimRun) job(id string) (*transfer.Job, error) {
	if j, ok := r.jobs[id]; ok {
		return j, nil
	}
	j, err := r.tx.GetJob(r.ctx, id)
	if err != nil {
		return nil, err
	}
	r.jobs[id] = &j
	return &j, nil
}

// Claim hands a data node the tasks it is to run now, at most req.Max:
// first a listing of its endpoint's jobs, then copy tasks whose attempt
// was lost, then new copy tasks of the ACTIVE jobs whose source is its
// endpoint, by priority then age, over the pairs where it is the source,
// while each pair runs fewer tasks than its optimizer's concurrency.
func (s *Service) Claim(ctx context.Context, a identity.Actor, node string, req apiv1.ClaimRequest) (apiv1.Claim, error) {
	if err := a.ActsFor(node); err != nil {
		return apiv1.Claim{}, err
	}
	s.alive.heard(node, s.now())
	n := req.Max
	if n <= 0 {
		n = 1
	}
	n = min(n, MaxClaim)
	var wait time.Duration
	if req.Wait != "" {
		d, err := time.ParseDuration(req.Wait)
		if err != nil || d < 0 || d > MaxClaimWait {
			return apiv1.Claim{}, invalid("wait", "wait %q: want a duration from 0s to %s", req.Wait, MaxClaimWait)
		}
		wait = d
	}
	topo := s.network()
	if topo == nil {
		return apiv1.Claim{}, reserve.ErrNoTopology
	}
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		cl, changed, err := s.claimOnce(ctx, node, n, topo)
		if err != nil {
			return apiv1.Claim{}, err
		}
		if len(cl.Tasks) > 0 || len(cl.Rates) > 0 || timeout == nil {
			return cl, nil
		}
		s.parked.Add(1)
		select {
		case <-changed:
		case <-timeout:
			return cl, nil
		case <-ctx.Done():
			return apiv1.Claim{}, ctx.Err()
		}
	}
}

// claimOnce is one claim; it returns the tasks handed out (never nil) with
// the rates of the node's other running tasks the claim lowered, and the
// channel that closes at the next change, taken under the same hold of
// mu, so that no change between this claim and the wait is missed.
func (s *Service) claimOnce(ctx context.Context, node string, n int, topo Network) (apiv1.Claim, <-chan struct{}, error) {
	s.lock()
	defer s.unlock()
	var out []apiv1.TaskWork
	var rates []apiv1.TaskRate
	err := s.tx(ctx, func(tx store.Store) error {
		now := s.now()
		all, live, err := s.liveNodes(ctx, tx, now)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(all, func(d transfer.DataNode) bool { return d.Node == node })
		if i < 0 || !all[i].Alive {
			return conflict("data node %s has no live registration: it heartbeats first", node)
		}
		r := &claimRun{s: s, ctx: ctx, tx: tx, now: now, me: all[i], live: live, topo: topo, jobs: map[string]*transfer.Job{}, dirty: map[string]bool{}, max: n, rates: map[string]apiv1.TaskRate{}}
		if err := r.lists(); err != nil {
			return err
		}
		if err := r.requeued(); err != nil {
			return err
		}
		if err := r.fresh(); err != nil {
			return err
		}
		for id := range r.dirty {
			if err := s.saveJob(ctx, tx, r.jobs[id], now); err != nil {
				return err
			}
		}
		out = r.out
		for _, tr := range r.rates {
			if !slices.ContainsFunc(out, func(w apiv1.TaskWork) bool { return w.Task.ID == tr.Task }) {
				rates = append(rates, tr)
			}
		}
		return nil
	})
	if err != nil {
		return apiv1.Claim{}, nil, err
	}
	if out == nil {
		out = []apiv1.TaskWork{}
	}
	slices.SortFunc(rates, func(a, b apiv1.TaskRate) int { return cmp.Compare(a.Task, b.Task) })
	return apiv1.Claim{Tasks: out, Rates: rates}, s.changed, nil
}

// lists claims the queued listings of the node's endpoint, reading no
// more of them than it may hand out: the oldest first, by the index, so a
// claim's cost does not grow with the jobs waiting.
func (r *claimRun) lists() error {
	if len(r.out) >= r.max {
		return nil
	}
	ts, err := r.tx.ListTasks(r.ctx, store.TaskFilter{Kind: transfer.TaskList, States: []string{transfer.TaskQueued},
		Endpoint: r.me.Endpoint, Limit: r.max - len(r.out)})
	if err != nil {
		return err
	}
	for _, t := range ts {
		if len(r.out) >= r.max {
			return nil
		}
		j, err := r.job(t.Job)
		if err != nil {
			return err
		}
		if transfer.JobEnded(j.State) {
			// Out of the queue, where it would hold a place of the
			// claims' window for good.
			t.State, t.EndedAt, t.Error = transfer.TaskCancelled, r.now, "its job has ended ("+j.State+")"
			if err := r.tx.UpdateTask(r.ctx, t); err != nil {
				return err
			}
			continue
		}
		if srcEndpoint(*j) != r.me.Endpoint {
			continue
		}
		t.State, t.Attempt, t.ClaimedAt, t.LeaseExpires = transfer.TaskActive, t.Attempt+1, r.now, r.me.LeaseExpires
		t.From, t.Error, t.Pages = r.me.Node, "", 0
		if err := r.tx.UpdateTask(r.ctx, t); err != nil {
			return err
		}
		if why := listReason(r.me.Endpoint, true); j.Reason != why {
			j.Reason = why
			r.dirty[j.ID] = true
		}
		var srcs []string
		for _, s := range j.Sources {
			l, _ := transfer.ParseLocation(s)
			srcs = append(srcs, l.Path)
		}
		r.out = append(r.out, apiv1.TaskWork{Task: t, Sources: srcs, Timeout: ListTimeout.String()})
	}
	return nil
}

// requeued claims copy tasks whose attempt was lost, keeping their
// destination while it lives (its server fences the old attempt).
func (r *claimRun) requeued() error {
	if len(r.out) >= r.max {
		return nil
	}
	ts, err := r.tx.ListTasks(r.ctx, store.TaskFilter{Kind: transfer.TaskCopy, States: []string{transfer.TaskQueued}, Endpoint: r.me.Endpoint})
	if err != nil {
		return err
	}
	for _, t := range ts {
		if len(r.out) >= r.max {
			return nil
		}
		j, err := r.job(t.Job)
		if err != nil {
			return err
		}
		if j.State != transfer.JobActive || srcEndpoint(*j) != r.me.Endpoint {
			continue
		}
		if t.Part != nil {
			if err := r.requeuedPart(j, t); err != nil {
				return err
			}
			continue
		}
		dsts := r.live[dstLocation(*j).Endpoint]
		to, ok := findNode(dsts, t.To)
		if !ok {
			if len(dsts) == 0 {
				continue
			}
			to = dsts[0]
			for _, d := range dsts {
				if r.load(d.Node) < r.load(to.Node) {
					to = d
				}
			}
		}
		if r.leaveToBooked(j, to.Node) {
			continue
		}
		files, err := r.tx.ListJobFiles(r.ctx, store.JobFileFilter{Job: j.ID, Task: t.ID, States: []string{transfer.FileActive}})
		if err != nil {
			return err
		}
		pr := r.pairOf(j, r.me.Node, to.Node)
		if files, err = r.keepShare(j, t, files, pr); err != nil {
			return err
		}
		if len(files) == 0 {
			continue
		}
		if err := r.claim(j, t, files, nil, to, pr, false); err != nil {
			return err
		}
	}
	return nil
}

// keepShare splits a requeued task of a booked job among the job's
// pairs: this pair keeps the files that fit what is left of its share
// (fitBatch), the others go back PENDING, for the pairs with share left
// to claim afresh. A lost pair's task holds the lost pair's whole share,
// and its replan (rebook.go) spreads that share over several live pairs:
// the first to claim the task whole would carry it all while the other
// new reservations idle (the node-kill benchmark: 814 MB over one new
// pair, none over the other). A file larger than every pair's share left
// goes to the pair into the task's destination with the most left (it
// keeps its destination while that lives); none kept: the task waits for
// that pair's claim.
func (r *claimRun) keepShare(j *transfer.Job, t transfer.Task, files []transfer.JobFile, pr pairRun) ([]transfer.JobFile, error) {
	if !pr.reserved || pr.share <= 0 || len(files) == 0 {
		return files, nil
	}
	tasks, err := r.tx.ListTasks(r.ctx, store.TaskFilter{Job: j.ID, Kind: transfer.TaskCopy})
	if err != nil {
		return nil, err
	}
	var assigned int64
	for _, o := range tasks {
		if o.ID != t.ID && o.From == pr.from && o.To == pr.to && o.State != transfer.TaskCancelled {
			assigned += o.Bytes
		}
	}
	shareLeft := max(pr.share-assigned, 1)
	var total int64
	for _, f := range files {
		total += f.Size
	}
	if total <= shareLeft {
		return files, nil
	}
	keep := fitBatch(files, len(files), total, shareLeft)
	if len(keep) == 0 {
		// Only a pair into the task's destination can take it; one with
		// strictly more left does (equal ones: whoever asks first, so that
		// two pairs never leave it to each other).
		if r.othersLeft(j, pr, tasks, pr.to) > shareLeft {
			return nil, nil
		}
		keep = files[:1]
	}
	kept := map[string]bool{}
	for _, f := range keep {
		kept[f.Path] = true
	}
	var back []transfer.JobFile
	for _, f := range files {
		if !kept[f.Path] {
			f.State = transfer.FilePending
			back = append(back, f)
		}
	}
	if err := r.tx.UpdateJobFiles(r.ctx, back); err != nil {
		return nil, err
	}
	return keep, nil
}

// leaveToBooked says whether this node should leave a requeued task of
// booked job j into node to to another: while the job's lost pairs are
// being booked again (rebook.go) the task waits for the new pairs, and
// once they are, a live source with a booked pair into to takes it rather
// than this node without one (which would run it unbooked while the new
// reservation idles). With no booked pair into to at all, this node takes
// it on the routed path.
func (r *claimRun) leaveToBooked(j *transfer.Job, to string) bool {
	if !slices.ContainsFunc(j.Pairs, func(p transfer.Pair) bool { return p.Reservation != "" }) {
		return false
	}
	if r.s.rebook[j.ID] || r.s.rebooking[j.ID] {
		return true
	}
	booked := func(p transfer.Pair) bool { return p.To == to && p.Reservation != "" && p.Routed == "" }
	for _, p := range j.Pairs {
		if booked(p) && p.From == r.me.Node {
			return false
		}
	}
	for _, p := range j.Pairs {
		if booked(p) {
			if _, ok := findNode(r.live[r.me.Endpoint], p.From); ok {
				return true
			}
		}
	}
	return false
}

// load counts the tasks a node runs or is to run as a destination.
func (r *claimRun) load(node string) int {
	ts, _ := r.tx.ListTasks(r.ctx, store.TaskFilter{Node: node, States: []string{transfer.TaskActive, transfer.TaskQueued}})
	return len(ts)
}

func findNode(ns []transfer.DataNode, name string) (transfer.DataNode, bool) {
	for _, n := range ns {
		if n.Node == name {
			return n, true
		}
	}
	return transfer.DataNode{}, false
}

// pairRun is what a claim needs of a job's pair.
type pairRun struct {
	from, to     string
	reservation  string
	rateBps      uint64 // booked rate, 0 unreserved
	share        int64  // bytes the plan gave the pair, 0: no limit
	concurrency  int
	streams      int
	reserved     bool
	notYetBooked bool // its window has not started, or its reservation is not in place yet
}

// pairOf finds (or makes) the job's pair from → to, with the optimizer's
// current choice.
func (r *claimRun) pairOf(j *transfer.Job, from, to string) pairRun {
	pr := pairRun{from: from, to: to}
	i := slices.IndexFunc(j.Pairs, func(p transfer.Pair) bool { return p.From == from && p.To == to })
	if i < 0 {
		j.Pairs = append(j.Pairs, transfer.Pair{From: from, To: to})
		i = len(j.Pairs) - 1
		r.dirty[j.ID] = true
	}
	p := &j.Pairs[i]
	if p.Reservation != "" && p.Routed == "" {
		pr.reservation, pr.rateBps, pr.reserved = p.Reservation, p.RateBps, true
		pr.notYetBooked = r.now.Before(p.Start) || r.s.provisioning(r.ctx, r.tx, *p, r.now)
	}
	pr.share = p.ShareBytes
	d := r.s.decision(r.ctx, r.tx, *j, from, to, pr.rateBps, r.now)
	pr.concurrency, pr.streams = max(d.Concurrency, 1), max(d.Streams, 1)
	if pr.reserved {
		pr.concurrency = max(pr.concurrency, r.s.bookedConcurrency)
	}
	if p.Concurrency != pr.concurrency || p.Streams != pr.streams {
		p.Concurrency, p.Streams = pr.concurrency, pr.streams
		r.dirty[j.ID] = true
	}
	return pr
}

// fresh makes new copy tasks for the ACTIVE jobs the node is a source of.
func (r *claimRun) fresh() error {
	if len(r.out) >= r.max {
		return nil
	}
	js, err := r.tx.ListJobs(r.ctx, store.JobFilter{States: []string{transfer.JobActive}})
	if err != nil {
		return err
	}
	r.s.pruneWaitScan(js)
	slices.SortStableFunc(js, func(a, b transfer.Job) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		return a.CreatedAt.Compare(b.CreatedAt)
	})
	for _, jj := range js {
		if len(r.out) >= r.max {
			return nil
		}
		if srcEndpoint(jj) != r.me.Endpoint {
			continue
		}
		j, err := r.job(jj.ID)
		if err != nil {
			return err
		}
		if err := r.freshJob(j); err != nil {
			return err
		}
	}
	return nil
}

// planNodes are data nodes as the planner sees them.
func planNodes(topo Network, ns []transfer.DataNode) []plan.Node {
	out := make([]plan.Node, 0, len(ns))
	for _, n := range ns {
		out = append(out, plan.Node{Name: n.Node, AccessBps: topo.AccessBps(n.Node), MaxRateBps: n.MaxRateBps})
	}
	return out
}

func (r *claimRun) freshJob(j *transfer.Job) error {
	srcs := r.live[r.me.Endpoint]
	dsts := r.live[dstLocation(*j).Endpoint]
	if len(dsts) == 0 {
		return nil
	}
	var mine []string // destinations this node pushes to
	pairs := 0        // the pairs the job runs on now
	booked := slices.ContainsFunc(j.Pairs, func(p transfer.Pair) bool { return p.Reservation != "" })
	if booked {
		for _, p := range j.Pairs {
			_, fromOK := findNode(srcs, p.From)
			_, toOK := findNode(dsts, p.To)
			if p.Reservation == "" || !fromOK || !toOK {
				continue
			}
			pairs++
			if p.From == r.me.Node {
				mine = append(mine, p.To)
			}
		}
	}
	// A job without a booking, or whose booked pairs lost their nodes,
	// runs on the pairs over the live nodes.
	if pairs == 0 {
		for _, p := range plan.Pairs(planNodes(r.topo, srcs), planNodes(r.topo, dsts)) {
			pairs++
			if p.From == r.me.Node {
				mine = append(mine, p.To)
			}
		}
	}
	if len(mine) == 0 {
		return nil
	}
	// A task holds at most its pair's part of the dataset, so a small
	// one still spreads over every pair.
	maxFiles := min(BatchFiles, max(1, (j.FilesTotal+pairs-1)/pairs))
	maxBytes := min(int64(BatchBytes), max(1, (j.BytesTotal+int64(pairs)-1)/int64(pairs)))
	tasks, err := r.tx.ListTasks(r.ctx, store.TaskFilter{Job: j.ID, Kind: transfer.TaskCopy})
	if err != nil {
		return err
	}
	for _, toName := range mine {
		to, _ := findNode(dsts, toName)
		pr := r.pairOf(j, r.me.Node, toName)
		if pr.notYetBooked {
			continue
		}
		running := 0
		var assigned int64
		for _, t := range tasks {
			if t.From != pr.from || t.To != pr.to {
				continue
			}
			if t.State == transfer.TaskActive || t.State == transfer.TaskQueued {
				running++
			}
			if t.State != transfer.TaskCancelled {
				assigned += t.Bytes
			}
		}
		for running < pr.concurrency && len(r.out) < r.max {
			var shareLeft int64 // 0: no share to keep to
			if pr.reserved && pr.share > 0 {
				shareLeft = max(pr.share-assigned, 1)
			}
			// The parts of large files first: one part a task. A pair
			// past its share still takes the parts only it and the
			// pairs to the same owner can carry (freshPart).
			took, err := r.freshPart(j, to, pr, tasks, shareLeft)
			if err != nil {
				return err
			}
			if took {
				tasks = append(tasks, r.out[len(r.out)-1].Task)
				running++
				assigned += r.out[len(r.out)-1].Task.Bytes
				continue
			}
			if pr.reserved && pr.share > 0 && assigned >= pr.share && r.othersCanCarry(j, pr, tasks, 1, "") {
				break
			}
			files, err := r.pendingFiles(j) // whole, none waiting for another writer
			if err != nil {
				return err
			}
			if len(files) == 0 {
				break
			}
			batch := fitClass(files, maxFiles, maxBytes, shareLeft)
			if len(batch) == 0 {
				// Every pending file is larger than what is left of the
				// pair's share: another pair with room for the first
				// carries it; if none has, this pair takes it.
				// When none can carry it whole, the pair with the most of
				// its share left takes it, not the first to ask: that one
				// would end as far past its share as the file is large
				// while another idles (the demo moved 768 MiB over one
				// pair and 272 over the other, shares of 520 each).
				if left := r.othersLeft(j, pr, tasks, ""); left >= files[0].Size || left > shareLeft {
					break
				}
				batch = files[:1]
			}
			t := transfer.Task{ID: newID("k-"), Job: j.ID, Kind: transfer.TaskCopy, State: transfer.TaskQueued, Endpoint: r.me.Endpoint, CreatedAt: r.now}
			for _, f := range batch {
				t.Bytes += f.Size
			}
			if err := r.tx.CreateTask(r.ctx, t); err != nil {
				return err
			}
			if err := r.claim(j, t, batch, nil, to, pr, true); err != nil {
				return err
			}
			tasks = append(tasks, r.out[len(r.out)-1].Task)
			running++
			assigned += t.Bytes
		}
	}
	return nil
}

// SmallFile is the size under which a file is small: less than one of
// the mover's blocks (mover.DefaultBlockSize), moved at the pace of its
// round trips rather than of the link.
const SmallFile = 4 << 20

// fitClass is fitBatch over one class of files, the largest first: large
// files (at least SmallFile), or, when none of them fits, small ones. A
// task's files go in one session, one after the other, so a batch that
// mixed them would send the small files (bound by round trips) and the
// large ones (bound by the rate) in turn; in tasks of their own they run
// side by side, and a pair's first task carries its largest files from
// the first second (the demo's pairs started with 500 small files while
// their large ones waited behind them; the longest first also evens the
// pairs' ends).
func fitClass(files []transfer.JobFile, maxFiles int, maxBytes, shareLeft int64) []transfer.JobFile {
	var large, small []transfer.JobFile
	for _, f := range files {
		if f.Size >= SmallFile {
			large = append(large, f)
		} else {
			small = append(small, f)
		}
	}
	slices.SortStableFunc(large, func(a, b transfer.JobFile) int { return cmp.Compare(b.Size, a.Size) })
	if batch := fitBatch(large, maxFiles, maxBytes, shareLeft); len(batch) > 0 {
		return batch
	}
	return fitBatch(small, maxFiles, maxBytes, shareLeft)
}

// fitBatch takes, in order, the files that fit together in maxFiles,
// maxBytes and what is left of the pair's share (shareLeft; 0 for none),
// passing over those that would not fit, so a pair near the end of its
// share takes the small files and leaves a large one to a pair with room
// for it. A file larger than maxBytes goes alone, when it is the first
// that fits the share. None when no file fits: the caller decides who
// takes a file larger than what is left.
func fitBatch(files []transfer.JobFile, maxFiles int, maxBytes, shareLeft int64) []transfer.JobFile {
	limit := maxBytes
	if shareLeft > 0 {
		limit = min(limit, shareLeft)
	}
	var out []transfer.JobFile
	var bytes int64
	for _, f := range files {
		if len(out) >= maxFiles {
			break
		}
		if len(out) == 0 && f.Size > maxBytes && (shareLeft == 0 || f.Size <= shareLeft) {
			return []transfer.JobFile{f}
		}
		if bytes+f.Size <= limit {
			out = append(out, f)
			bytes += f.Size
		}
	}
	return out
}

// othersCanCarry reports whether another pair of a booked job with live
// nodes still has at least need bytes of its share left: then a pair past
// its share (need 1), or without room for a file of need bytes, leaves it.
// With to set, only the pairs to that destination node count (the owner
// of a file cut in parts). A part's bytes count in its task's.
func (r *claimRun) othersCanCarry(j *transfer.Job, pr pairRun, tasks []transfer.Task, need int64, to string) bool {
	return r.othersLeft(j, pr, tasks, to) >= need
}

// othersLeft is the most share left (its share less the bytes of its
// tasks) among the booked job's other pairs with live nodes (with to
// set, those into that node); 0 when none has any.
func (r *claimRun) othersLeft(j *transfer.Job, pr pairRun, tasks []transfer.Task, to string) int64 {
	var most int64
	for _, p := range j.Pairs {
		if p.From == pr.from && p.To == pr.to || p.ShareBytes == 0 || to != "" && p.To != to {
			continue
		}
		if _, ok := findNode(r.live[r.me.Endpoint], p.From); !ok {
			continue
		}
		if _, ok := findNode(r.live[dstLocation(*j).Endpoint], p.To); !ok {
			continue
		}
		var assigned int64
		for _, t := range tasks {
			if t.From == p.From && t.To == p.To && t.State != transfer.TaskCancelled {
				assigned += t.Bytes
			}
		}
		most = max(most, p.ShareBytes-assigned)
	}
	return most
}

// claim gives task t with files to this node, pushing to to; with part
// set, t pushes that part of its one file, whose owner to becomes.
func (r *claimRun) claim(j *transfer.Job, t transfer.Task, files []transfer.JobFile, part *transfer.FilePart, to transfer.DataNode, pr pairRun, fresh bool) error {
	t.State, t.Attempt, t.ClaimedAt, t.LeaseExpires = transfer.TaskActive, t.Attempt+1, r.now, r.me.LeaseExpires
	t.From, t.To, t.Error, t.BytesDone = r.me.Node, to.Node, "", 0
	t.Reservation, t.RateBps, t.Streams = pr.reservation, 0, pr.streams
	t.Files = t.Files[:0]
	t.Bytes = 0
	if part != nil {
		f := &files[0]
		part.State, part.Task, part.From, part.To = transfer.FileActive, t.ID, t.From, t.To
		if fresh {
			part.Attempts++
		}
		pp := part.Part
		t.Files, t.Bytes, t.Part = []string{f.Path}, part.Length, &pp
		if err := r.tx.UpdateFileParts(r.ctx, []transfer.FilePart{*part}); err != nil {
			return err
		}
		if f.To != to.Node {
			// The owner is fixed: every part of the file goes to it.
			if err := r.s.setOwner(r.ctx, r.tx, *f, to.Node); err != nil {
				return err
			}
		}
		if f.State != transfer.FileActive || f.To != to.Node {
			if f.State == transfer.FilePending {
				f.Attempts++ // the file is sent (again) to a new owner
			}
			f.State, f.To = transfer.FileActive, to.Node
			if err := r.tx.UpdateJobFiles(r.ctx, files); err != nil {
				return err
			}
		}
	}
	for i := range files {
		if part != nil {
			break
		}
		f := &files[i]
		f.State, f.Task, f.From, f.To = transfer.FileActive, t.ID, t.From, t.To
		if fresh {
			f.Attempts++
		}
		t.Files = append(t.Files, f.Path)
		t.Bytes += f.Size
	}
	if len(files) > 0 && part == nil {
		if err := r.tx.UpdateJobFiles(r.ctx, files); err != nil {
			return err
		}
	}
	if err := r.tx.UpdateTask(r.ctx, t); err != nil {
		return err
	}
	// The pair's booked rate is divided again among its running tasks,
	// this one included. The others' lower rates go back in this answer
	// (they all run on this node, the pair's source), and the node applies
	// them before it starts this task: the pair never runs above its
	// booking, not even until the next heartbeat. Raising the rates when a
	// task ends is the heartbeat's (the node sends one as a task ends).
	rates, err := r.s.repace(r.ctx, r.tx, *j, r.me.Node)
	if err != nil {
		return err
	}
	for _, tr := range rates {
		if tr.Task == t.ID {
			t.RateBps = tr.RateBps
		}
		r.rates[tr.Task] = tr
		for i := range r.out {
			if r.out[i].Task.ID == tr.Task {
				r.out[i].Task.RateBps = tr.RateBps
			}
		}
	}
	g, err := grant.Sign(r.s.key, grant.Grant{
		User: j.Owner, Job: j.ID, Task: t.ID, Attempt: t.Attempt, Node: to.Node,
		Mode: grant.Write, Paths: []string{dstLocation(*j).Path}, Expires: r.now.Add(GrantTTL),
	})
	if err != nil {
		return fmt.Errorf("sign the grant of task %s: %w", t.ID, err)
	}
	r.s.noteRate(r.topo, t, 0, t.LeaseExpires)
	if why := movingReason(*j); j.Reason != why {
		j.Reason = why
		r.dirty[j.ID] = true
	}
	r.out = append(r.out, apiv1.TaskWork{Task: t, Files: files, Address: to.Address, Grant: g, Checksum: j.Checksum, Policy: j.Policy,
		CC: j.CC, Transport: j.Transport, SourceAddr: sourceAddr(r.topo, t.From, to)})
	return nil
}

func movingReason(j transfer.Job) string {
	why := fmt.Sprintf("moving: %d of %d files", j.FilesDone, j.FilesTotal)
	if j.Storage != "" {
		// The destination is full for some: said first, the rest goes on.
		why = oneLine(storagePrefix + j.Storage + "; " + why)
	}
	return why
}

// staleAnswer tells a node that its attempt of t is no longer current.
func staleAnswer(t transfer.Task, attempt int, j transfer.Job) apiv1.TaskAnswer {
	why := fmt.Sprintf("attempt %d of task %s is no longer current", attempt, t.ID)
	switch {
	case j.State == transfer.JobCancelled:
		why = fmt.Sprintf("job %s was cancelled", j.ID)
	case transfer.JobEnded(j.State):
		why = fmt.Sprintf("job %s has ended (%s)", j.ID, j.State)
	case t.Attempt != attempt:
		why += fmt.Sprintf(" (attempt %d is)", t.Attempt)
	case t.State != transfer.TaskActive:
		why += fmt.Sprintf(" (the task is %s)", t.State)
	}
	return apiv1.TaskAnswer{Task: t, Cancel: true, Reason: why}
}

// task returns a task for its holder's word. Only the node holding the
// task (the one its current attempt, or its last, was handed to) or an
// admin is heard; any other is refused before anything of the task is
// read out, not even its kind: a node learns of a task what it was handed
// with it, and a stale report must not be a way to read another node's
// tasks (their files, their job, their destination). A holder whose
// attempt is no longer current is told to stop by the caller
// (staleAnswer); a node whose attempt was taken over by another node is
// refused here, and stops at the refusal (or at its heartbeat's cancel).
func (s *Service) task(ctx context.Context, a identity.Actor, id, kind string) (transfer.Task, transfer.Job, error) {
	if a.Role != reserve.RoleAdmin && a.Role != reserve.RoleAgent {
		return transfer.Task{}, transfer.Job{}, forbidden("only the data node running task %s reports on it", id)
	}
	if err := a.ActsFor(a.Node); err != nil {
		return transfer.Task{}, transfer.Job{}, err // an agent bound to no node
	}
	t, err := s.st.GetTask(ctx, id)
	if errors.Is(err, reserve.ErrNotFound) {
		return transfer.Task{}, transfer.Job{}, notFound("task", id)
	} else if err != nil {
		return transfer.Task{}, transfer.Job{}, err
	}
	if t.From == "" || a.ActsFor(t.From) != nil {
		return transfer.Task{}, transfer.Job{}, forbidden("task %s is not held by node %s: only the data node running a task reports on it", id, cmp.Or(a.Node, a.Name))
	}
	if t.Kind != kind {
		return transfer.Task{}, transfer.Job{}, invalid("task", "task %s is a %s task, not a %s task", id, t.Kind, kind)
	}
	j, err := s.st.GetJob(ctx, t.Job)
	return t, j, err
}

// CheckGrant says whether an attempt of a copy task pushed to node is
// still current, for node's server before it takes a session under the
// attempt's grant (grant.Verifier.Confirm). Only the node's own agent
// token (or an admin) asks; a task that does not push to node is answered
// "not current" without a word of its details.
func (s *Service) CheckGrant(ctx context.Context, a identity.Actor, node string, c apiv1.GrantCheck) (apiv1.GrantStatus, error) {
	if err := a.ActsFor(node); err != nil {
		return apiv1.GrantStatus{}, err
	}
	s.alive.heard(node, s.now())
	if c.Task == "" || c.Attempt < 1 {
		return apiv1.GrantStatus{}, invalid("task", "give the task and its attempt (at least 1)")
	}
	return s.grantStatus(ctx, s.st, node, c.Task, c.Attempt)
}

// grantStatus is CheckGrant's answer, read from st. Reading without mu is
// enough: an attempt that ends just after it was said current is fenced
// at the destination's next heartbeat (Granted), which cuts its sessions.
func (s *Service) grantStatus(ctx context.Context, st store.Store, node, task string, attempt int) (apiv1.GrantStatus, error) {
	notCurrent := func(why string) (apiv1.GrantStatus, error) {
		return apiv1.GrantStatus{Reason: fmt.Sprintf("attempt %d of task %s is no longer current: %s", attempt, task, why)}, nil
	}
	t, err := st.GetTask(ctx, task)
	if errors.Is(err, reserve.ErrNotFound) {
		return notCurrent("no such task pushes to node " + node)
	} else if err != nil {
		return apiv1.GrantStatus{}, err
	}
	if t.Kind != transfer.TaskCopy || t.To != node {
		// Said like an unknown task: whether it exists elsewhere is not
		// this node's to learn.
		return notCurrent("no such task pushes to node " + node)
	}
	j, err := st.GetJob(ctx, t.Job)
	if errors.Is(err, reserve.ErrNotFound) {
		return notCurrent("its job is gone")
	} else if err != nil {
		return apiv1.GrantStatus{}, err
	}
	switch {
	case j.State == transfer.JobCancelled:
		return notCurrent(fmt.Sprintf("job %s was cancelled", j.ID))
	case transfer.JobEnded(j.State):
		return notCurrent(fmt.Sprintf("job %s has ended (%s)", j.ID, j.State))
	case t.Attempt != attempt:
		return notCurrent(fmt.Sprintf("attempt %d is", t.Attempt))
	case t.State != transfer.TaskActive:
		return notCurrent(fmt.Sprintf("the task is %s", t.State))
	}
	return apiv1.GrantStatus{Current: true}, nil
}

// Listing takes a page of a list task's result. The node sends a large
// listing in pages (Page 0, 1, ... with More on every page but the last;
// an older node sends one page); each page is checked against the pages
// before it by the store's indexes and stored in its own short
// transaction, so neither the controller's memory nor its hold of mu grows
// with the listing (issue 28, finding 7). A page sent again after a lost
// answer is taken once. With the last page the job goes ACTIVE (no
// deadline), SCHEDULED (booked for its deadline) or SUCCEEDED (nothing to
// move); a failed or refused listing fails it.
func (s *Service) Listing(ctx context.Context, a identity.Actor, id string, l apiv1.Listing) (apiv1.TaskAnswer, error) {
	if l.Page == 0 && l.Error == "" {
		// Files an earlier attempt stored go first, a bounded step at a
		// time, so that the pages of this one are checked against each
		// other only.
		if err := s.clearListing(ctx, a, id, l.Attempt); err != nil {
			return apiv1.TaskAnswer{}, err
		}
	}
	ans, err := s.listing(ctx, a, id, l, s.checkPage(ctx, a, id, l))
	if err == nil && ans.Task.State == transfer.TaskFailed && ans.Task.Attempt == l.Attempt {
		s.dropListing(ctx, ans.Task.Job)
	}
	return ans, err
}

// dropListing deletes the files the pages of a failed listing stored,
// ListingBatch at a time under short holds of mu (the sweep failListing
// recorded: the clock carries on what is interrupted): a refused listing
// leaves nothing of it behind. Nothing else touches the files of an ended
// job meanwhile.
func (s *Service) dropListing(ctx context.Context, job string) {
	if _, err := s.driveSweep(ctx, store.JobSweep{Job: job, Drop: true}, 0); err != nil {
		s.log.Warn("delete the files of a refused listing", "job", job, "err", err)
	}
}

// checkedPage is a listing's page checked before mu is taken: its files,
// cut in parts, or why it is refused, for the page Page of the attempt
// Attempt.
type checkedPage struct {
	ok            bool
	attempt, page int
	files         []transfer.JobFile
	parts         []transfer.FilePart
	refused       error
}

// checkPage checks a page without mu: alone (listedFiles), then against
// the pages stored before it (listedBefore), and cuts its large files.
// Only the page a current attempt is to store next is checked; listing
// checks again under mu that it still is (the node sends its pages one
// after another, so none is stored meanwhile but this one, sent twice),
// and the job's sources and destination never change.
func (s *Service) checkPage(ctx context.Context, a identity.Actor, id string, l apiv1.Listing) checkedPage {
	t, j, err := s.task(ctx, a, id, transfer.TaskList)
	if err != nil || l.Error != "" || t.State != transfer.TaskActive || t.Attempt != l.Attempt || l.Page != t.Pages || transfer.JobEnded(j.State) {
		return checkedPage{}
	}
	c := checkedPage{ok: true, attempt: l.Attempt, page: l.Page}
	c.files, c.refused = listedFiles(j, l.Files)
	if c.refused == nil {
		if err := s.listedBefore(ctx, j, c.files); err != nil {
			var re *reserve.RequestError
			if !errors.As(err, &re) {
				return checkedPage{} // a store's error: checked again under mu
			}
			c.refused = err
		}
	}
	if c.refused == nil && s.doesParts(ctx, t.From) {
		// A listing by an older data node (one that pushes no parts)
		// leaves every file whole, for nodes of its kind to move.
		c.parts = s.cutParts(c.files)
	}
	return c
}

// listing is Listing's page, under mu; pre is the page as checked before.
func (s *Service) listing(ctx context.Context, a identity.Actor, id string, l apiv1.Listing, pre checkedPage) (apiv1.TaskAnswer, error) {
	s.lock()
	defer s.unlock()
	t, j, err := s.task(ctx, a, id, transfer.TaskList)
	if err != nil {
		return apiv1.TaskAnswer{}, err
	}
	if t.State == transfer.TaskSucceeded && t.Attempt == l.Attempt && l.Error == "" && l.Page >= 0 && l.Page < t.Pages {
		// The last page, or one before it, sent again: taken already.
		return apiv1.TaskAnswer{Task: t}, nil
	}
	if t.State != transfer.TaskActive || t.Attempt != l.Attempt || transfer.JobEnded(j.State) {
		return staleAnswer(t, l.Attempt, j), nil
	}
	now := s.now()
	if l.Error != "" {
		return s.failListing(ctx, t, j, oneLine(l.Error), now)
	}
	switch {
	case l.Page < 0:
		return s.failListing(ctx, t, j, fmt.Sprintf("the listing was refused: page %d", l.Page), now)
	case l.Page < t.Pages:
		// Stored already: its answer was lost on the way back.
		return apiv1.TaskAnswer{Task: t}, nil
	case l.Page > t.Pages:
		return s.failListing(ctx, t, j, fmt.Sprintf("the listing was refused: page %d came before page %d", l.Page, t.Pages), now)
	}
	if !pre.ok || pre.attempt != t.Attempt || pre.page != t.Pages {
		pre = checkedPage{}
		pre.files, pre.refused = listedFiles(j, l.Files)
		if pre.refused == nil {
			pre.refused = s.listedBefore(ctx, j, pre.files)
		}
		if pre.refused == nil && s.doesParts(ctx, t.From) {
			pre.parts = s.cutParts(pre.files)
		}
	}
	if pre.refused == nil {
		pre.refused = s.checkWriters(ctx, j, pre.files) // one writer per destination file
	}
	if err := pre.refused; err != nil {
		var re *reserve.RequestError
		if !errors.As(err, &re) {
			return apiv1.TaskAnswer{}, err
		}
		// A listing refused for what it holds would be refused again at
		// every attempt: the job fails saying why (issue 28, finding 11).
		return s.failListing(ctx, t, j, "the listing was refused: "+oneLine(err.Error()), now)
	}
	files, parts := pre.files, pre.parts
	var bytes int64
	for _, f := range files {
		bytes += f.Size // at most 10,000 × MaxFileSize < 2^63: no overflow
	}
	before := j.BytesTotal
	if t.Pages == 0 {
		before = 0 // a new attempt's first page starts the count again
	}
	if before > MaxJobBytes-bytes {
		return s.failListing(ctx, t, j, fmt.Sprintf("the listing was refused: its files add up to more than %d bytes", int64(MaxJobBytes)), now)
	}
	t0, j0 := t, j // the transaction may run again: it starts from them
	err = s.tx(ctx, func(tx store.Store) error {
		t, j = t0, j0
		if err := tx.AddJobFiles(ctx, files); err != nil {
			return err
		}
		if err := tx.AddFileParts(ctx, parts); err != nil {
			return err
		}
		if t.Pages == 0 {
			j.FilesTotal, j.BytesTotal = 0, 0
		}
		t.Pages++
		j.FilesTotal += len(files)
		j.BytesTotal += bytes
		if l.More {
			if err := tx.UpdateTask(ctx, t); err != nil {
				return err
			}
			return s.saveJob(ctx, tx, &j, now)
		}
		t.State, t.EndedAt, t.Bytes = transfer.TaskSucceeded, now, 0
		if err := tx.UpdateTask(ctx, t); err != nil {
			return err
		}
		switch {
		case j.FilesTotal == 0:
			j.State, j.Reason, j.StartedAt, j.EndedAt = transfer.JobSucceeded, "", now, now
		case j.Deadline.IsZero() && !j.DryRun:
			j.State, j.StartedAt = transfer.JobActive, now
			j.Reason = movingReason(j)
		default:
			j.Reason = "booking the network for the deadline"
		}
		return s.saveJob(ctx, tx, &j, now)
	})
	if err != nil {
		return apiv1.TaskAnswer{}, err
	}
	if l.More {
		return apiv1.TaskAnswer{Task: t}, nil
	}
	if j.State == transfer.JobQueued {
		s.kickBooking() // booked by Run's loop, outside mu
	}
	return apiv1.TaskAnswer{Task: t}, nil
}

// clearListing deletes the files an earlier attempt of list task id
// stored, ListingBatch at a time, each step under its own short hold of
// mu, before attempt stores its first page. Only the holder of the
// current attempt, before it stored a page, clears; anything else is left
// to Listing to answer.
func (s *Service) clearListing(ctx context.Context, a identity.Actor, id string, attempt int) error {
	for {
		n, err := func() (int, error) {
			s.lock()
			defer s.unlock()
			t, j, err := s.task(ctx, a, id, transfer.TaskList)
			if err != nil || t.State != transfer.TaskActive || t.Attempt != attempt || t.Pages > 0 || transfer.JobEnded(j.State) {
				return 0, nil
			}
			return s.st.DeleteJobFiles(ctx, j.ID, ListingBatch)
		}()
		if err != nil || n < ListingBatch {
			return err
		}
	}
}

// listedBefore refuses files of a listing's page that an earlier page
// listed, or that would land where a file of an earlier page does: looked
// up by the store's indexes, a page's worth at a time.
func (s *Service) listedBefore(ctx context.Context, j transfer.Job, files []transfer.JobFile) error {
	if len(files) == 0 {
		return nil
	}
	paths := make([]string, len(files))
	dests := make([]string, len(files))
	for i, f := range files {
		paths[i], dests[i] = f.Path, f.Dest
	}
	dst := dstLocation(j)
	same, err := s.st.ListJobFiles(ctx, store.JobFileFilter{Job: j.ID, Paths: paths, Limit: 1})
	if err != nil {
		return err
	}
	if len(same) > 0 {
		return invalid("files", "file %s is listed twice", same[0].Path)
	}
	other, err := s.st.ListJobFiles(ctx, store.JobFileFilter{Job: j.ID, Dests: dests, Limit: 1})
	if err != nil {
		return err
	}
	if len(other) > 0 {
		i := slices.IndexFunc(files, func(f transfer.JobFile) bool { return f.Dest == other[0].Dest })
		return invalid("files", "files %s and %s would both land at %s:%s", other[0].Path, files[i].Path, dst.Endpoint, other[0].Dest)
	}
	return nil
}

// failListing ends a list task that failed for good with its job, FAILED
// with the reason. The caller holds mu.
func (s *Service) failListing(ctx context.Context, t transfer.Task, j transfer.Job, why string, now time.Time) (apiv1.TaskAnswer, error) {
	t.State, t.Error, t.EndedAt = transfer.TaskFailed, why, now
	err := s.tx(ctx, func(tx store.Store) error {
		if err := tx.UpdateTask(ctx, t); err != nil {
			return err
		}
		// The files its earlier pages stored go in steps (dropListing),
		// the sweep carried on by the clock if they are interrupted.
		if err := tx.PutJobSweep(ctx, store.JobSweep{Job: j.ID, Drop: true, At: now}); err != nil {
			return err
		}
		j.State, j.Reason, j.EndedAt = transfer.JobFailed, why, now
		j.FilesTotal, j.BytesTotal = 0, 0
		return s.saveJob(ctx, tx, &j, now)
	})
	return apiv1.TaskAnswer{Task: t}, err
}

// RefuseListing fails list task id, and its job, for a listing the API
// could not take (its body over the bound): a listing that big would be
// refused at every attempt. Only the node holding the task is heard.
func (s *Service) RefuseListing(ctx context.Context, a identity.Actor, id, why string) error {
	ans, err := func() (apiv1.TaskAnswer, error) {
		s.lock()
		defer s.unlock()
		t, j, err := s.task(ctx, a, id, transfer.TaskList) // refuses any other node
		if err != nil {
			return apiv1.TaskAnswer{}, err
		}
		if t.State != transfer.TaskActive || transfer.JobEnded(j.State) {
			return apiv1.TaskAnswer{}, nil
		}
		return s.failListing(ctx, t, j, "the listing was refused: "+oneLine(why), s.now())
	}()
	if err == nil && ans.Task.State == transfer.TaskFailed {
		s.dropListing(ctx, ans.Task.Job)
	}
	return err
}

// MaxFileSize and MaxJobBytes bound the sizes a listing may claim (a
// file's size is the listing node's word): 512 TiB a file and 1 EiB a
// job, so that a page's and a job's sums never overflow (issue 28,
// finding 7).
const (
	MaxFileSize = 1 << 49
	MaxJobBytes = 1 << 60
)

// listedFiles turns a page of a listing into the job's files, refusing
// the page when a path is not clean and relative, names no source of the
// job or lies outside the source it names (issue 28, finding 4), has a
// negative size, is listed twice, or lands where another file of the page
// does, and when the page holds more than MaxListingFiles. Pure: the
// pages before it are the store's to check (listedBefore).
func listedFiles(j transfer.Job, listed []apiv1.ListedFile) ([]transfer.JobFile, error) {
	if len(listed) > MaxListingFiles {
		return nil, invalid("files", "a page of %d files, at most %d: send the listing in pages", len(listed), MaxListingFiles)
	}
	ep := srcEndpoint(j)
	srcs := make(map[string]bool, len(j.Sources))
	for _, s := range j.Sources {
		l, _ := transfer.ParseLocation(s)
		srcs[l.Path] = true
	}
	dst := dstLocation(j)
	seen := make(map[string]bool, len(listed))
	dests := make(map[string]string, len(listed))
	out := make([]transfer.JobFile, 0, len(listed))
	for _, lf := range listed {
		p := lf.Path
		if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
			return nil, invalid("files", "listed path %q is not clean and relative", p)
		}
		if !srcs[lf.Source] {
			return nil, invalid("files", "listed file %s: source %q is not one of the job's", p, lf.Source)
		}
		if !underSource(p, lf.Source) {
			return nil, invalid("files", "listed file %s is not under its source %q", p, lf.Source)
		}
		if lf.Size < 0 || lf.Size > MaxFileSize {
			return nil, invalid("files", "listed file %s: size %d (from 0 to %d)", p, lf.Size, int64(MaxFileSize))
		}
		if seen[p] {
			return nil, invalid("files", "file %s is listed twice", p)
		}
		seen[p] = true
		d := plan.DestPath(lf.Source, p, dst.Path)
		if other, ok := dests[d]; ok {
			return nil, invalid("files", "files %s and %s would both land at %s:%s", other, p, dst.Endpoint, d)
		}
		dests[d] = p
		out = append(out, transfer.JobFile{
			Job: j.ID, Path: p, Dest: d, Size: lf.Size, MTime: lf.MTime.UTC(),
			State: transfer.FilePending, Expected: j.Expected[ep+":"+p],
		})
	}
	slices.SortFunc(out, func(a, b transfer.JobFile) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// underSource reports whether the clean relative path p is the source
// src (a clean path as ParseLocation leaves it, "." for the root) or lies
// under it.
func underSource(p, src string) bool {
	return src == "." || p == src || strings.HasPrefix(p, src+"/")
}

// Report takes a copy task's word: each file's verdict, and with Done the
// end of the attempt. Only the node holding the current attempt is
// heard; an older attempt is told to stop.
func (s *Service) Report(ctx context.Context, a identity.Actor, id string, rep apiv1.TaskReport) (apiv1.TaskAnswer, error) {
	arrived := s.now()
	s.lock()
	defer s.unlock()
	t, j, err := s.task(ctx, a, id, transfer.TaskCopy)
	if err != nil {
		return apiv1.TaskAnswer{}, err
	}
	s.alive.heard(t.From, arrived)
	if t.State != transfer.TaskActive || t.Attempt != rep.Attempt || transfer.JobEnded(j.State) {
		return staleAnswer(t, rep.Attempt, j), nil
	}
	now := s.now()
	topo := s.network()
	// Its figures bounded by the task before anything is stored or
	// summed: a report is one host's word.
	if rep, err = checkReport(rep, boundsOf(topo, t)); err != nil {
		return apiv1.TaskAnswer{}, err
	}
	prevBytes := t.BytesDone
	var moved, doneBytes int64
	var ok, failed, seenOK, seenBad int
	ended := false
	err = s.tx(ctx, func(tx store.Store) error {
		moved, doneBytes, ok, failed = 0, 0, 0, 0
		if t.Part != nil {
			v, err := s.reportPart(ctx, tx, &j, &t, rep, now)
			if err != nil {
				return err
			}
			moved, doneBytes, ok, failed = v.moved, v.doneBytes, v.filesOK, v.filesBad
			seenOK, seenBad = v.partsOK, v.partsBad
			ended = rep.Done
			if err := s.endReport(ctx, tx, &j, &t, ok, failed, doneBytes, &ended, now); err != nil {
				return err
			}
			return s.paceOf(ctx, tx, j, &t)
		}
		files, err := tx.ListJobFiles(ctx, store.JobFileFilter{Job: j.ID, Task: t.ID})
		if err != nil {
			return err
		}
		byPath := map[string]*transfer.JobFile{}
		for i := range files {
			byPath[files[i].Path] = &files[i]
		}
		var changed []transfer.JobFile
		pi := slices.IndexFunc(j.Pairs, func(p transfer.Pair) bool { return p.From == t.From && p.To == t.To })
		for _, fr := range rep.Files {
			f := byPath[fr.Path]
			if f == nil || f.State != transfer.FileActive {
				continue // not of this task, or reported already
			}
			if fr.OK {
				// Arrived only on the destination's word: without its
				// receipt, a failed attempt of the file (sent again,
				// then FAILED).
				if why := s.unconfirmed(j, t, *f, nil, fr); why != "" {
					fr.OK, fr.Error, fr.Permanent, fr.Class = false, why, false, apiv1.ClassInternal
				}
			}
			switch {
			case fr.OK && f.Expected != "" && !strings.EqualFold(fr.Checksum, f.Expected):
				// Sent again once; a second mismatch is final.
				again := f.Class == apiv1.ClassChecksum || f.Attempts >= MaxAttempts
				f.Error = oneLine(fmt.Sprintf("checksum mismatch: got %s, want %s", fr.Checksum, f.Expected))
				f.Checksum, f.Class = fr.Checksum, apiv1.ClassChecksum
				if again {
					f.State = transfer.FileFailed
					failed++
				} else {
					f.State = transfer.FilePending
				}
			case fr.OK:
				f.State, f.Checksum, f.Error, f.Class = transfer.FileSucceeded, fr.Checksum, "", ""
				moved += f.Size
				ok++
				if pi >= 0 {
					j.Pairs[pi].BytesDone += f.Size
				}
			default:
				f.Error = oneLine(fr.Error)
				if f.Error == "" {
					f.Error = "failed without a reason"
				}
				f.Class = failureClass(fr.Class)
				if failAttempt(f.Class, &f.State, &f.Attempts) {
					failed++
					noteStorage(&j, f.Path, f.Class, f.Error)
				}
			}
			changed = append(changed, *f)
		}
		t.BytesDone = max(t.BytesDone, rep.BytesDone)
		if rep.Done {
			ended = true
			all := true
			for _, f := range files {
				f := byPath[f.Path]
				if f.State == transfer.FileActive {
					f.Error = oneLine(rep.Error)
					if f.Error == "" {
						f.Error = "the task ended without a word on it"
					}
					f.Class = failureClass(rep.Class)
					if failAttempt(f.Class, &f.State, &f.Attempts) {
						failed++
						noteStorage(&j, f.Path, f.Class, f.Error)
					}
					if !slices.ContainsFunc(changed, func(c transfer.JobFile) bool { return c.Path == f.Path }) {
						changed = append(changed, *f)
					}
				}
				if f.State != transfer.FileSucceeded {
					all = false
				}
			}
			t.EndedAt = now
			if all {
				t.State = transfer.TaskSucceeded
			} else {
				t.State, t.Error = transfer.TaskFailed, oneLine(rep.Error)
				if t.Error == "" {
					t.Error = "some files did not arrive"
				}
			}
		}
		if len(changed) > 0 {
			if err := tx.UpdateJobFiles(ctx, changed); err != nil {
				return err
			}
		}
		seenOK, seenBad, doneBytes = ok, failed, moved
		if err := s.endReport(ctx, tx, &j, &t, ok, failed, doneBytes, &ended, now); err != nil {
			return err
		}
		return s.paceOf(ctx, tx, j, &t)
	})
	if err != nil {
		return apiv1.TaskAnswer{}, err
	}
	s.moved += moved
	if rep.Done && rep.Class == apiv1.ClassNetwork && t.To != "" && t.To != t.From {
		// Its push broke on the network: the destination may be dead
		// (liveness.go).
		s.alive.suspectNode(t.To, now, s.alive.heartbeatQuiet(t.To), "a push of task "+t.ID+" from "+t.From+" to it failed on the network")
	}
	if ended {
		delete(s.rates, t.ID)
	} else if topo != nil {
		s.noteRate(topo, t, rep.ThroughputBps, t.LeaseExpires)
	}
	s.observe(ctx, s.st, j, t, t.BytesDone-prevBytes, seenOK, seenBad, now)
	if transfer.JobEnded(j.State) {
		s.release(ctx, j, "job "+j.ID+" "+strings.ToLower(j.State))
		s.forget(j.ID)
	}
	return apiv1.TaskAnswer{Task: t}, nil
}

// lateReason is the reason of a job that succeeds at now after its
// deadline, saying how late (issue 30: a job 48 s late ended SUCCEEDED
// without a word); "" when it has none or met it.
func lateReason(j transfer.Job, now time.Time) string {
	if j.Deadline.IsZero() || !now.After(j.Deadline) {
		return ""
	}
	late := now.Sub(j.Deadline)
	if late >= time.Second {
		late = late.Round(100 * time.Millisecond)
	}
	return fmt.Sprintf("deadline missed: every file arrived verified, %s after the deadline (%s)", late, j.Deadline.UTC().Format(time.RFC3339))
}

// endReport stores a reported task and its job's tallies (files ok and
// failed, the bytes of the files that arrived), and ends the job when
// nothing of it is left; ended is set when the task ended with it.
func (s *Service) endReport(ctx context.Context, tx store.Store, j *transfer.Job, t *transfer.Task, ok, failed int, doneBytes int64, ended *bool, now time.Time) error {
	if err := tx.UpdateTask(ctx, *t); err != nil {
		return err
	}
	j.FilesDone += ok
	j.FilesFailed += failed
	j.BytesDone += doneBytes
	if err := s.finish(ctx, tx, j, now); err != nil {
		return err
	}
	if transfer.JobEnded(j.State) && !*ended {
		got, err := tx.GetTask(ctx, t.ID)
		if err != nil {
			return err
		}
		*t = got
		*ended = true
	}
	return s.saveJob(ctx, tx, j, now)
}

// finish ends a job none of whose files is pending or moving, and sets
// the running job's Reason and throughput. The caller stores it.
func (s *Service) finish(ctx context.Context, tx store.Store, j *transfer.Job, now time.Time) error {
	// Whether a file is left is one row of the (job, state) index: every
	// report asks it, and it must not read every file of a large job
	// (issue 28, finding 7); the files are counted once, as the job ends.
	left, err := tx.CountJobFilesUpTo(ctx, j.ID, []string{transfer.FilePending, transfer.FileActive}, 1)
	if err != nil {
		return err
	}
	if left > 0 {
		if j.State == transfer.JobActive {
			j.Reason = movingReason(*j)
		}
		var bps float64
		tasks, err := tx.ListTasks(ctx, store.TaskFilter{Job: j.ID, States: []string{transfer.TaskActive}})
		if err != nil {
			return err
		}
		for _, t := range tasks {
			bps += s.rates[t.ID].bps
		}
		j.ThroughputBps = bps
		return nil
	}
	// Tasks still open (their files all reported, their end not yet)
	// end with the job.
	open, err := tx.ListTasks(ctx, store.TaskFilter{Job: j.ID, States: []string{transfer.TaskActive, transfer.TaskQueued}})
	if err != nil {
		return err
	}
	for _, t := range open {
		failed, err := tx.ListJobFiles(ctx, store.JobFileFilter{Job: j.ID, Task: t.ID, States: []string{transfer.FileFailed}, Limit: 1})
		if err != nil {
			return err
		}
		t.State, t.EndedAt = transfer.TaskSucceeded, now
		if len(failed) > 0 {
			t.State, t.Error = transfer.TaskFailed, "some files did not arrive"
		}
		if t.Part != nil {
			parts, err := tx.ListFileParts(ctx, store.FilePartFilter{Job: j.ID, Task: t.ID, States: []string{transfer.FileSucceeded}})
			if err != nil {
				return err
			}
			if len(parts) == 0 {
				t.State, t.Error = transfer.TaskFailed, "its part did not arrive"
			}
		}
		if err := tx.UpdateTask(ctx, t); err != nil {
			return err
		}
		delete(s.rates, t.ID)
	}
	counts, err := tx.CountJobFiles(ctx, j.ID)
	if err != nil {
		return err
	}
	j.EndedAt = now
	j.FilesDone = counts[transfer.FileSucceeded].Files
	j.FilesFailed = counts[transfer.FileFailed].Files
	j.BytesDone = counts[transfer.FileSucceeded].Bytes
	j.ThroughputBps = runThroughput(*j, now)
	if j.FilesFailed == 0 {
		j.State, j.Reason = transfer.JobSucceeded, lateReason(*j, now)
		if j.Reason != "" {
			s.log.Warn("a job finished after its deadline", "job", j.ID, "owner", j.Owner, "reason", j.Reason)
		}
		return s.observeGoodput(ctx, tx, *j)
	}
	first, err := tx.ListJobFiles(ctx, store.JobFileFilter{Job: j.ID, States: []string{transfer.FileFailed}, Limit: 1})
	if err != nil {
		return err
	}
	j.State = transfer.JobFailed
	j.Reason = fmt.Sprintf("%d of %d files failed", j.FilesFailed, j.FilesTotal)
	switch {
	case j.Storage != "":
		j.Reason = oneLine(storagePrefix + j.Reason + "; first for want of room: " + j.Storage)
	case len(first) > 0:
		j.Reason = oneLine(j.Reason + fmt.Sprintf("; first: %s: %s", first[0].Path, first[0].Error))
	}
	return nil
}
