package service

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/booking"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/plan"
)

// A node lost is a plan changed (issue 29, item 7): a booked job whose
// pair lost its source or destination node has that pair's reservations
// released (nothing can use them: the node is gone) and what was left of
// its share planned again over the job's live nodes, jointly, against
// everything booked (the job's own live reservations included, so the
// new flows take what the dead pair gave back, or what else is free). A
// new flow on a pair the job has already is added to its reservation when
// it takes the same path (a modify, admitted or not as a whole); flows
// that would put one pair on two paths are left out. The clock finds such
// pairs under mu (lostPairs); the booking runs outside it, in
// BookPending's pass.

// lostPairs notes the booked jobs with a live reservation on a pair one
// of whose nodes is gone, for BookPending. The caller holds mu.
func (s *Service) lostPairs(j transfer.Job, live map[string][]transfer.DataNode) {
	alive := func(ep, node string) bool {
		return slices.ContainsFunc(live[ep], func(n transfer.DataNode) bool { return n.Node == node })
	}
	src, dst := srcEndpoint(j), dstLocation(j).Endpoint
	for _, p := range j.Pairs {
		if p.Reservation != "" && p.Routed == "" && (!alive(src, p.From) || !alive(dst, p.To)) {
			s.rebook[j.ID] = true
			s.bookDue.Store(true)
			return
		}
	}
}

// rebookLost moves the shares of job id's lost pairs onto live ones, as
// the comment above says, and records the change in the job. Outside mu.
func (s *Service) rebookLost(ctx context.Context, id string) {
	j, err := s.st.GetJob(ctx, id)
	if err != nil || (j.State != transfer.JobScheduled && j.State != transfer.JobActive) {
		return
	}
	topo := s.network()
	if topo == nil {
		return
	}
	now := s.now()
	_, live, err := s.liveNodes(ctx, s.st, now)
	if err != nil {
		s.log.Warn("rebook a lost pair's share", "job", id, "err", err)
		return
	}
	srcEP, dstEP := srcEndpoint(j), dstLocation(j).Endpoint
	isLive := func(ep, node string) bool {
		return slices.ContainsFunc(live[ep], func(n transfer.DataNode) bool { return n.Node == node })
	}
	// Without a booker (the owner gone) the lost pairs are still given
	// up, so their tasks go on unbooked rather than wait for a booking.
	b, berr := s.booker(ctx, j.Owner)
	if berr != nil {
		s.log.Warn("rebook a lost pair's share", "job", id, "err", berr)
	}
	var lost []lostPair // the pairs given up
	var left int64      // their shares not yet moved
	for _, p := range j.Pairs {
		if p.Reservation == "" || p.Routed != "" || (isLive(srcEP, p.From) && isLive(dstEP, p.To)) {
			continue
		}
		lost = append(lost, lostPair{p.From, p.To})
		left += max(p.ShareBytes-p.BytesDone, 0)
		for _, r := range append([]string{p.Reservation}, laterIDs(p)...) {
			if b == nil {
				break
			}
			if _, err := b.CancelReservation(ctx, r, apiv1.ActionRequest{Reason: "data node lost: the pair's share moves to live pairs"}); err != nil {
				s.log.Debug("release a lost pair's reservation", "job", id, "reservation", r, "err", err)
			}
		}
	}
	if len(lost) == 0 {
		return
	}
	var added []transfer.Pair
	var grown map[string]uint64 // pair "from>to" → rate added to its reservation
	why := ""
	if berr != nil {
		why = "; not booked again: " + oneLine(berr.Error())
	}
	if b != nil && left > 0 && len(live[srcEP]) > 0 && len(live[dstEP]) > 0 {
		rest := j // the lost pairs count for nothing in the new plan
		rest.Pairs = slices.Clone(j.Pairs)
		for i, p := range rest.Pairs {
			if slices.Contains(lost, lostPair{p.From, p.To}) {
				rest.Pairs[i].Routed = "lost"
			}
		}
		added, grown, why = s.replan(ctx, b, rest, topo, anchored(live[srcEP], lost, true), anchored(live[dstEP], lost, false), left)
	}
	s.lock()
	defer s.unlock()
	err = s.tx(ctx, func(tx store.Store) error {
		cur, err := tx.GetJob(ctx, id)
		if err != nil {
			return err
		}
		for i := range cur.Pairs {
			p := &cur.Pairs[i]
			if slices.Contains(lost, lostPair{p.From, p.To}) && p.Routed == "" {
				p.Routed = oneLine("a data node of the pair was lost: its reservations were released and its share planned again over the live pairs" + why)
				p.ShareBytes = p.BytesDone
			}
			if r, ok := grown[p.From+">"+p.To]; ok {
				p.RateBps += r
			}
		}
		var shares []int64
		if len(added) > 0 {
			w := make([]float64, len(added))
			for i, p := range added {
				w[i] = float64(p.RateBps)
			}
			shares = plan.Split(left, w)
		}
		for i, p := range added {
			p.ShareBytes = shares[i]
			cur.Pairs = append(cur.Pairs, p)
		}
		cur.Reason = oneLine(fmt.Sprintf("data node lost on %s: its share (%d bytes) moved to %d live pairs%s", lostNames(lost), left, len(added)+len(grown), why))
		return s.saveJob(ctx, tx, &cur, s.now())
	})
	if err != nil {
		s.log.Warn("record a lost pair's rebooking", "job", id, "err", err)
		return
	}
	s.notify() // the new pairs' copies may be claimed
}

// replan books left bytes over the live nodes for job j, for their
// earliest completion (a plan past the job's deadline is booked all the
// same, the reason saying so). It returns the new
// pairs (booked), the rate added to pairs the job had (modified), and a
// note for the reason when less than all could be done.
func (s *Service) replan(ctx context.Context, b booking.Booker, j transfer.Job, topo Network, srcs, dsts []transfer.DataNode, left int64) ([]transfer.Pair, map[string]uint64, string) {
	// A node's --max-rate is shared with the job's pairs it is in already.
	used := map[string]uint64{}
	for _, q := range j.Pairs {
		if q.Reservation != "" && q.Routed == "" {
			used[q.From] += q.RateBps
			used[q.To] += q.RateBps
		}
	}
	req := s.planRequest(j, left, srcs, dsts, used)
	if len(req.Sources) == 0 || len(req.Destinations) == 0 {
		return nil, nil, "; no live node has a rate to spare"
	}
	p, err := b.Plan(ctx, req)
	if err != nil {
		return nil, nil, "; no new booking: " + oneLine(err.Error())
	}
	flows, end := onePathPerPair(p, left, req.Goodput)
	note := ""
	if !p.MeetsDeadline {
		note = "; the rest cannot be done by the deadline: the earliest completion is " + end.UTC().Format(time.RFC3339)
	}
	udp := j.Transport == transfer.TransportUDP
	grown := map[string]uint64{}
	var reqs []apiv1.ReservationRequest
	var pairs []transfer.Pair
	for _, f := range flows {
		links := make([]string, len(f.Path))
		for i, h := range f.Path {
			links[i] = h.Link
		}
		if k := slices.IndexFunc(j.Pairs, func(q transfer.Pair) bool { return q.From == f.From && q.To == f.To }); k >= 0 {
			q := j.Pairs[k]
			if q.Routed != "" || q.Reservation == "" || !slices.Equal(q.Path, links) || len(q.Later) > 0 {
				continue // one pair, one path (and its window as booked)
			}
			r, err := b.Reservation(ctx, q.Reservation)
			if err != nil || !r.State.Live() {
				continue
			}
			upd := apiv1.ModifyRequest{Version: r.Version, Bandwidth: r.Bandwidth + f.Rate, End: maxTime(r.End, end)}
			if _, err := b.ModifyReservation(ctx, r.ID, upd); err == nil {
				grown[f.From+">"+f.To] += f.Rate
			}
			continue
		}
		to, _ := findNode(dsts, f.To)
		fs, err := pushFlow(topo, f.From, to, udp)
		if err != nil {
			continue
		}
		reqs = append(reqs, apiv1.ReservationRequest{From: f.From, To: f.To, Bandwidth: f.Rate, Start: p.Start, End: end,
			Project: j.Project, FlowSpec: fs, Path: links,
			IdempotencyKey: j.ID + ":" + f.From + ">" + f.To + ":lost-" + strconv.FormatInt(s.now().UnixNano(), 36)})
		pairs = append(pairs, transfer.Pair{From: f.From, To: f.To, RateBps: f.Rate, Start: p.Start, End: end, Path: links})
	}
	if len(reqs) > 0 {
		made, err := booking.HoldAll(ctx, b, reqs, s.maxHold, "the lost pair's share could not be booked")
		if err != nil {
			return nil, grown, note + "; new pairs not booked: " + oneLine(err.Error())
		}
		for i := range pairs {
			pairs[i].Reservation = made[i].ID
		}
	}
	return pairs, grown, note
}

// lastEnd is the end of a pair's last reservation.
func lastEnd(p transfer.Pair) time.Time {
	if n := len(p.Later); n > 0 {
		return p.Later[n-1].End
	}
	return p.End
}

// laterIDs are the ids of a pair's later consecutive reservations.
func laterIDs(p transfer.Pair) []string {
	out := make([]string, 0, len(p.Later))
	for _, l := range p.Later {
		if l.Reservation != "" {
			out = append(out, l.Reservation)
		}
	}
	return out
}

// lostPair is a pair of nodes given up because one of them was lost.
type lostPair struct{ from, to string }

// lostNames words the lost pairs for a reason.
func lostNames(lost []lostPair) string {
	names := make([]string, len(lost))
	for i, l := range lost {
		names[i] = l.from + " > " + l.to
	}
	return strings.Join(names, ", ")
}

// anchored keeps, of the live nodes ns, those of a lost pair that still
// live: the lost pair's work stays with them (a lost source's tasks keep
// their destination, which resumes their partial files), so the new
// bookings must be into (or out of) them; all of ns when none of them
// lives.
func anchored(ns []transfer.DataNode, lost []lostPair, source bool) []transfer.DataNode {
	var out []transfer.DataNode
	for _, n := range ns {
		if slices.ContainsFunc(lost, func(l lostPair) bool { return source && l.from == n.Node || !source && l.to == n.Node }) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return ns
	}
	return out
}
