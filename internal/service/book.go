package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/booking"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/plan"
	"github.com/lightpath/lightpath/internal/units"
)

// The joint plan's priors (Config.Goodput, Config.StartUp,
// Config.MinWindow).
const (
	// DefaultGoodput is η: the share of a booked rate that carries the
	// dataset's bytes (headers, slow start after each part's session,
	// verification and the reports' cadence take the rest). A window sized
	// at η finishes inside itself where one sized at the full rate needs
	// an extension.
	DefaultGoodput = 0.85
	// DefaultStartUp is σ: from the plan to the window's start, the holds
	// made and committed (the agents put their part in place from the
	// start; ProvisionGrace bounds the wait for them). bench/service.sh's
	// timeline: booked 0.1 s after the listing, first byte 0.5 s after
	// the window opened. A longer σ only delays every job by as much.
	DefaultStartUp = time.Second
	// DefaultMinWindow is the shortest window a job is booked for: a tiny
	// dataset's window would otherwise end before booking it had finished
	// (a hold's version moving under its commit refused one-file jobs).
	DefaultMinWindow = 15 * time.Second
)

// pendingBooking says whether job j waits for BookPending: a deadline
// job (or a dry run) listed (its list task SUCCEEDED) and not yet booked.
func (s *Service) pendingBooking(ctx context.Context, j transfer.Job) bool {
	if j.State != transfer.JobQueued || (j.Deadline.IsZero() && !j.DryRun) || len(j.Pairs) > 0 {
		return false
	}
	lists, err := s.st.ListTasks(ctx, store.TaskFilter{Job: j.ID, Kind: transfer.TaskList, States: []string{transfer.TaskSucceeded}})
	return err == nil && len(lists) > 0
}

// kickBooking wakes Run's booking of listed jobs.
func (s *Service) kickBooking() {
	s.bookDue.Store(true)
	select {
	case s.bookKick <- struct{}{}:
	default:
	}
}

// BookPending books every listed deadline job that waits for its booking,
// one after the other, each seeing what the ones before it booked. It
// runs outside mu (planning and booking never hold up heartbeats, claims
// or reports); mu is taken only to store each job's outcome, and a job
// cancelled meanwhile has its new reservations released. Run calls it as
// listings complete and at every tick (a restart, a booking that could
// not be stored).
func (s *Service) BookPending(ctx context.Context) {
	s.bookMu.Lock()
	defer s.bookMu.Unlock()
	// Only when a listing completed since (or at start): the QUEUED jobs,
	// however many wait for their listing, are not read at every tick.
	if !s.bookDue.Swap(false) {
		return
	}
	js, err := s.st.ListJobs(ctx, store.JobFilter{States: []string{transfer.JobQueued}})
	if err != nil {
		s.log.Warn("list the jobs waiting for their booking", "err", err)
		s.bookDue.Store(true)
		return
	}
	for _, j := range js {
		if ctx.Err() != nil {
			return
		}
		if !s.pendingBooking(ctx, j) {
			continue
		}
		s.bookJob(ctx, j)
	}
	s.lock()
	ids := make([]string, 0, len(s.rebook))
	for id := range s.rebook {
		ids = append(ids, id)
		s.rebooking[id] = true
	}
	clear(s.rebook)
	s.unlock()
	slices.Sort(ids)
	defer func() {
		s.lock()
		for _, id := range ids {
			delete(s.rebooking, id)
		}
		s.notify() // the requeued tasks that waited may be claimed
		s.unlock()
	}()
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		s.rebookLost(ctx, id)
	}
}

// bookJob plans and books one listed job and stores the outcome:
// SCHEDULED with its pairs, FAILED with the refusal (nothing booked), or
// for a dry run CANCELLED with the plan.
func (s *Service) bookJob(ctx context.Context, j transfer.Job) {
	pairs, algorithm, err := s.book(ctx, j)
	// The refused or planned job's files are ended here, in steps, each
	// under its own hold of mu, once the outcome is stored (this loop
	// drives them itself: nothing is left running behind it).
	var w store.JobSweep
	defer func() {
		if w.Job != "" {
			if _, derr := s.driveSweep(context.WithoutCancel(ctx), w, 0); derr != nil {
				s.log.Warn("end the files of a job refused or planned", "job", w.Job, "err", derr)
			}
		}
	}()
	s.lock()
	defer s.unlock()
	now := s.now()
	cur, gerr := s.st.GetJob(ctx, j.ID)
	if gerr != nil || !s.pendingBooking(ctx, cur) {
		// Cancelled (or failed) while it was being booked: what was
		// booked for it goes.
		s.release(ctx, transfer.Job{ID: j.ID, Owner: j.Owner, Pairs: pairs}, "the job ended while it was being booked")
		return
	}
	serr := s.tx(ctx, func(tx store.Store) error {
		j := cur
		switch {
		case err != nil:
			var err2 error
			w, err2 = s.endQueued(ctx, tx, &j, oneLine(err.Error()), now)
			return err2
		case j.DryRun:
			j.Pairs, j.Algorithm = pairs, algorithm
			why := "dry run: " + plannedReason(j)
			w = endSweep(j.ID, []string{transfer.FilePending}, transfer.FileCancelled, why, why, now)
			if err := tx.PutJobSweep(ctx, w); err != nil {
				return err
			}
			j.State, j.Reason, j.EndedAt = transfer.JobCancelled, why, now
			return s.saveJob(ctx, tx, &j, now)
		case len(pairs) == 0:
			// Nothing to book (its files are empty): it runs at once, as a
			// job without a deadline.
			j.State, j.StartedAt = transfer.JobActive, now
			j.Reason = movingReason(j)
			return s.saveJob(ctx, tx, &j, now)
		default:
			j.Pairs, j.Algorithm, j.State = pairs, algorithm, transfer.JobScheduled
			j.Reason = scheduledReason(j)
			return s.saveJob(ctx, tx, &j, now)
		}
	})
	if serr != nil {
		w = store.JobSweep{}
		s.log.Error("store a job's booking", "job", j.ID, "err", serr)
		s.bookDue.Store(true) // tried again at the next tick
		if err == nil {
			s.release(ctx, transfer.Job{ID: j.ID, Owner: j.Owner, Pairs: pairs}, "the job's booking could not be stored")
		}
	}
}

// plannedReason words a plan that was not booked.
func plannedReason(j transfer.Job) string {
	var start, end time.Time
	var rate uint64
	for _, p := range j.Pairs {
		if start.IsZero() || p.Start.Before(start) {
			start = p.Start
		}
		end = maxTime(end, lastEnd(p))
		rate += p.RateBps
	}
	return fmt.Sprintf("the plan starts at %s on %d pairs at %s in all and completes at %s (algorithm %s); nothing was booked",
		start.UTC().Format(time.RFC3339), len(j.Pairs), units.FormatRate(float64(rate)), end.UTC().Format(time.RFC3339), j.Algorithm)
}

// book plans job j jointly over every live node pair of its two
// endpoints and every path between them (the controller's joint planner,
// against everything booked), for its earliest completion with the
// goodput and start-up priors; a deadline is only a bound. Feasibility is
// decided before any hold is made, so a refusal books nothing. Each
// flow of the plan is one reservation on its path as the job's owner
// (consecutive reservations where the window is longer than the owner's
// policy allows one to be), all held then committed, or all released.
func (s *Service) book(ctx context.Context, j transfer.Job) ([]transfer.Pair, string, error) {
	refuse := func(format string, a ...any) ([]transfer.Pair, string, error) {
		return nil, "", &DeadlineError{Deadline: j.Deadline, Why: fmt.Sprintf(format, a...)}
	}
	topo := s.network()
	if topo == nil {
		return nil, "", reserve.ErrNoTopology
	}
	b, err := s.booker(ctx, j.Owner)
	if err != nil {
		return nil, "", err
	}
	_, live, err := s.liveNodes(ctx, s.st, s.now())
	if err != nil {
		return nil, "", err
	}
	srcEP, dstEP := srcEndpoint(j), dstLocation(j).Endpoint
	srcs, dsts := live[srcEP], live[dstEP]
	for _, ep := range []string{srcEP, dstEP} {
		if len(live[ep]) == 0 {
			return refuse("no data node of endpoint %s is alive", ep)
		}
	}
	// The destination's room, as its data nodes last reported it, before
	// anything is planned or held: a job that cannot fit is refused naming
	// the space, rather than booked at full rate to fail at the end.
	if free, known, err := s.FreeBytes(ctx, dstEP); err == nil && known && free < j.BytesTotal {
		return refuse("storage: no space: the destination %s has %s free, the job needs %s", dstEP,
			units.FormatSize(free), units.FormatSize(j.BytesTotal))
	}
	if j.BytesTotal == 0 {
		return nil, "", nil // empty files only: nothing to book (bookJob starts it)
	}
	req := s.planRequest(j, j.BytesTotal, srcs, dsts, nil)
	var (
		p     apiv1.Plan
		flows []apiv1.PlanFlow
		end   time.Time
	)
	for try := 0; ; try++ {
		if p, err = b.Plan(ctx, req); err != nil {
			return refuse("%s", oneLine(err.Error()))
		}
		flows, end = onePathPerPair(p, j.BytesTotal, req.Goodput)
		flows, end = fitToWork(flows, p.Start, end, j.BytesTotal, s.spreadable(ctx, j, len(flows)), req.Goodput)
		var busyUntil time.Time
		if flows, end, busyUntil, err = s.steerable(ctx, topo, dsts, flows, p.Start, end, j, req.Goodput); err != nil {
			return nil, "", err
		}
		if len(flows) > 0 || busyUntil.IsZero() || try == 3 {
			break
		}
		// Every pair the plan chose is someone else's until busyUntil:
		// plan again from then.
		req.StartUp = (busyUntil.Sub(s.now()) + s.startUp).String()
	}
	if len(flows) == 0 {
		return refuse("every node pair the plan could use carries another reservation's flows over the window (the same addresses cannot be steered onto two reservations)")
	}
	if !p.MeetsDeadline || (!j.Deadline.IsZero() && end.After(j.Deadline)) {
		return nil, "", &DeadlineError{Deadline: j.Deadline, Earliest: end, Algorithm: p.Algorithm}
	}
	u, err := s.st.GetUser(ctx, j.Owner)
	if err != nil {
		return nil, "", fmt.Errorf("look up the job's owner %s: %w", j.Owner, err)
	}
	limits, _ := s.currentPolicy().Resolve(u.Role, j.Project)
	if limits.MaxBandwidth > 0 {
		// One reservation may not exceed the policy's bandwidth: a flow
		// faster than that is booked at it, the window lengthened for the
		// rate given up (less than the plan's rate always fits where it did).
		capped := false
		for i := range flows {
			if flows[i].Rate > limits.MaxBandwidth {
				flows[i].Rate, capped = limits.MaxBandwidth, true
			}
		}
		if capped {
			end = maxTime(end, windowEnd(p.Start, j.BytesTotal, req.Goodput, sumRates(flows)))
			if !j.Deadline.IsZero() && end.After(j.Deadline) {
				return nil, "", &DeadlineError{Deadline: j.Deadline, Earliest: end, Algorithm: p.Algorithm + " within the policy's max_bandwidth"}
			}
		}
	}
	windows := consecutive(p.Start, end, limits.MaxDuration, max(limits.MinDuration, s.minWindow))
	rates := make([]float64, len(flows))
	for i, f := range flows {
		rates[i] = float64(f.Rate)
	}
	shares := plan.Split(j.BytesTotal, rates)
	udp := j.Transport == transfer.TransportUDP
	var reqs []apiv1.ReservationRequest
	for _, f := range flows {
		to, _ := findNode(dsts, f.To)
		fs, err := pushFlow(topo, f.From, to, udp)
		if err != nil {
			return nil, "", fmt.Errorf("book %s → %s: the flow: %w", f.From, f.To, err)
		}
		links := make([]string, len(f.Path))
		for i, h := range f.Path {
			links[i] = h.Link
		}
		for k, w := range windows {
			reqs = append(reqs, apiv1.ReservationRequest{From: f.From, To: f.To, Bandwidth: f.Rate, Start: w[0], End: w[1],
				Project: j.Project, FlowSpec: fs, Path: links,
				IdempotencyKey: j.ID + ":" + f.From + ">" + f.To + ":" + strconv.Itoa(k)})
		}
	}
	pairs := make([]transfer.Pair, len(flows))
	for i, f := range flows {
		pairs[i] = transfer.Pair{From: f.From, To: f.To, RateBps: f.Rate, Start: windows[0][0], End: windows[0][1], ShareBytes: shares[i]}
		for _, h := range f.Path {
			pairs[i].Path = append(pairs[i].Path, h.Link)
		}
		for _, w := range windows[1:] {
			pairs[i].Later = append(pairs[i].Later, transfer.Booked{RateBps: f.Rate, Start: w[0], End: w[1]})
		}
	}
	if j.DryRun {
		return pairs, p.Algorithm, nil
	}
	made, err := booking.HoldAll(ctx, b, reqs, s.maxHold, "the job could not be booked")
	if err != nil {
		return nil, "", err
	}
	for i := range pairs {
		rs := made[i*len(windows) : (i+1)*len(windows)]
		pairs[i].Reservation = rs[0].ID
		for k := range pairs[i].Later {
			pairs[i].Later[k].Reservation = rs[k+1].ID
		}
	}
	return pairs, p.Algorithm, nil
}

// onePathPerPair keeps one path per pair of nodes: two paths between the
// same two nodes cannot be told apart by a flow spec (the joint planner
// avoids it where an exchange of end hosts allows; one node per site with
// two paths cannot), so such a pair keeps its fastest path and the window
// is lengthened for the rate given up: the bytes at goodput over the rate
// that is left. The holds then check that the longer window fits.
func onePathPerPair(p apiv1.Plan, size int64, goodput float64) ([]apiv1.PlanFlow, time.Time) {
	var out []apiv1.PlanFlow
	dropped := false
	for _, f := range p.Flows {
		i := slices.IndexFunc(out, func(o apiv1.PlanFlow) bool { return o.From == f.From && o.To == f.To })
		switch {
		case i < 0:
			out = append(out, f)
		case f.Rate > out[i].Rate:
			out[i], dropped = f, true
		default:
			dropped = true
		}
	}
	if !dropped {
		return out, p.End
	}
	return out, maxTime(p.End, windowEnd(p.Start, size, goodput, sumRates(out)))
}

// fitToWork trims a plan to what the job can use: no more pairs than it
// has files to spread (a file moves over one pair; the largest flows are
// kept, the window lengthened for the rate given up). The rates are kept
// even where the window is longer than the bytes need (a small job's
// shortest window): the job ends as early as they allow, and its
// reservations are released as it ends.
func fitToWork(flows []apiv1.PlanFlow, start, end time.Time, size int64, files int, goodput float64) ([]apiv1.PlanFlow, time.Time) {
	if files <= 0 || len(flows) <= files {
		return flows, end
	}
	flows = slices.Clone(flows)
	slices.SortStableFunc(flows, func(a, b apiv1.PlanFlow) int { return cmp.Compare(b.Rate, a.Rate) })
	flows = flows[:files]
	return flows, maxTime(end, windowEnd(start, size, goodput, sumRates(flows)))
}

func sumRates(flows []apiv1.PlanFlow) uint64 {
	var r uint64
	for _, f := range flows {
		r += f.Rate
	}
	return r
}

// windowEnd is when size bytes at goodput over rate, from start, are
// done: ⌈8·size·10⁹ / (η·rate)⌉ nanoseconds after it, exactly (the far
// future when that does not fit a time).
func windowEnd(start time.Time, size int64, goodput float64, rate uint64) time.Time {
	if rate == 0 {
		return start.Add(math.MaxInt64 / 2)
	}
	num := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(size), big.NewInt(8*int64(time.Second))), big.NewInt(1))
	den := new(big.Rat).Mul(new(big.Rat).SetFloat64(goodput), new(big.Rat).SetInt(new(big.Int).SetUint64(rate)))
	q := new(big.Rat).Quo(num, den)
	d := new(big.Int).Quo(q.Num(), q.Denom())
	if new(big.Int).Mul(d, q.Denom()).Cmp(q.Num()) != 0 {
		d.Add(d, big.NewInt(1))
	}
	if !d.IsInt64() || d.Int64() >= math.MaxInt64/2 {
		return start.Add(math.MaxInt64 / 2)
	}
	return start.Add(time.Duration(d.Int64()))
}

// consecutive cuts [start, end) into windows of at most longest (none:
// zero), as even as they can be and none shorter than shortest where the
// whole is longer than it.
func consecutive(start, end time.Time, longest, shortest time.Duration) [][2]time.Time {
	total := end.Sub(start)
	if longest <= 0 || total <= longest {
		return [][2]time.Time{{start, end}}
	}
	n := int64((total + longest - 1) / longest)
	step := total / time.Duration(n)
	if step < shortest {
		step = shortest
	}
	var out [][2]time.Time
	for at := start; at.Before(end); {
		next := at.Add(step)
		if !next.Before(end) || end.Sub(next) < shortest {
			next = end
		}
		if next.Sub(at) > longest { // the remainder folded in made it too long: cut once more
			next = at.Add(longest)
		}
		out = append(out, [2]time.Time{at, next})
		at = next
	}
	return out
}

// pushFlow is a pair's flow spec, written by the one builder every booker
// uses (booking.PushFlow).
func pushFlow(topo Network, from string, to transfer.DataNode, udp bool) (string, error) {
	e, err := endsOf(topo, from, to)
	if err != nil {
		return "", err
	}
	src, err := netip.ParseAddr(e.src)
	if err != nil {
		return "", err
	}
	dst, err := netip.ParseAddr(e.dst)
	if err != nil {
		return "", err
	}
	port, err := strconv.ParseUint(e.port, 10, 16)
	if err != nil {
		return "", err
	}
	return booking.PushFlow(src, netip.AddrPortFrom(dst, uint16(port)), udp).String(), nil
}

var errNoBooker = errors.New("the service has no booker")

// booker is the Booker that books as user.
func (s *Service) booker(ctx context.Context, user string) (booking.Booker, error) {
	if s.bookerAs == nil {
		return nil, errNoBooker
	}
	return s.bookerAs(ctx, user)
}

// spreadable is how many pairs job j's files can keep busy at once, up to
// want: a file moves over one pair, a file cut in parts over as many pairs
// as it has parts (counted only when the files alone are too few).
func (s *Service) spreadable(ctx context.Context, j transfer.Job, want int) int {
	n := j.FilesTotal
	if n >= want {
		return want
	}
	parts, err := s.st.ListFileParts(ctx, store.FilePartFilter{Job: j.ID, Limit: want})
	if err != nil {
		return want // not known: no trim
	}
	return min(n+len(parts), want)
}

// planRequest asks for the plan of size bytes of job j from nodes srcs to
// dsts, with the service's priors; used is the rate each node already
// carries for the job (its --max-rate is shared with it; a node with none
// to spare is left out).
func (s *Service) planRequest(j transfer.Job, size int64, srcs, dsts []transfer.DataNode, used map[string]uint64) apiv1.PlanRequest {
	req := apiv1.PlanRequest{SizeBytes: uint64(size), Goodput: s.goodputNow(), StartUp: s.startUp.String(),
		MinDuration: s.minWindow.String(), Deadline: j.Deadline, Project: j.Project}
	add := func(to *[]apiv1.PlanEndpoint, ns []transfer.DataNode) {
		for _, n := range ns {
			m := n.MaxRateBps
			if m > 0 {
				if used[n.Node] >= m {
					continue
				}
				m -= used[n.Node]
			}
			*to = append(*to, apiv1.PlanEndpoint{Node: n.Node, MaxRate: m})
		}
	}
	add(&req.Sources, srcs)
	add(&req.Destinations, dsts)
	return req
}

// steerable drops the flows of a plan that another live reservation's
// flows would shadow: a reservation from the same node to the same node
// whose flow spec overlaps this pair's and whose window overlaps the
// plan's. The agents mark a packet with the first reservation whose flows
// match it, so two such reservations cannot both be steered (on two paths
// they fight over the route: the probes saw the paths blackholed; on one
// only one class gets the packets). The window is lengthened for the rate
// given up; busyUntil is when the last shadowing reservation ends, for a
// plan with nothing left.
func (s *Service) steerable(ctx context.Context, topo Network, dsts []transfer.DataNode, flows []apiv1.PlanFlow, start, end time.Time, j transfer.Job, goodput float64) ([]apiv1.PlanFlow, time.Time, time.Time, error) {
	if len(flows) == 0 {
		return flows, end, time.Time{}, nil
	}
	live, err := s.st.ListReservations(ctx, store.Filter{States: []reserve.State{reserve.StateHeld, reserve.StateReserved, reserve.StateActive},
		From: start, To: end})
	if err != nil {
		return nil, end, time.Time{}, err
	}
	udp := j.Transport == transfer.TransportUDP
	var busyUntil time.Time
	out := flows[:0:0]
	for _, f := range flows {
		to, _ := findNode(dsts, f.To)
		spec, err := pushFlow(topo, f.From, to, udp)
		if err != nil {
			out = append(out, f) // the holds say why
			continue
		}
		fs, err := reserve.ParseFlowSpec(spec)
		if err != nil {
			out = append(out, f)
			continue
		}
		shadowed := false
		for _, r := range live {
			if r.From == f.From && r.To == f.To && !r.FlowSpec.IsZero() && r.FlowSpec.Overlaps(fs) {
				shadowed = true
				busyUntil = maxTime(busyUntil, r.End)
			}
		}
		if !shadowed {
			out = append(out, f)
		}
	}
	if len(out) == len(flows) || len(out) == 0 {
		return out, end, busyUntil, nil
	}
	return out, maxTime(end, windowEnd(start, j.BytesTotal, goodput, sumRates(out))), time.Time{}, nil
}
