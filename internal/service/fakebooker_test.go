package service_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/booking"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// fakeBooker is a booking.Booker that books nothing anywhere: it answers
// Plan with the plan it is given, records every hold, commit and cancel,
// and refuses the create it is told to. The service books only through
// its Booker, so what it records is everything the service booked.
type fakeBooker struct {
	mu sync.Mutex
	// plan and planErr are Plan's answer.
	plan    apiv1.Plan
	planErr error
	// refuse is the create refused (1 for the first), 0 for none.
	refuse int
	// as are the users it was asked to book as; plans counts Plan's
	// calls; creates are the requests' pairs, each "FROM>TO"; holds,
	// commits and cancels are reservation ids.
	as                      []string
	plans                   int
	creates                 []string
	holds, commits, cancels []string
	rs                      map[string]reserve.Reservation
}

var _ booking.Booker = (*fakeBooker)(nil)

var errFakeRefused = fmt.Errorf("%w: the fake refuses this hold", reserve.ErrCapacity)

// bookerAs is Config.Booker over the fake.
func (f *fakeBooker) bookerAs(_ context.Context, user string) (booking.Booker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.as = append(f.as, user)
	return f, nil
}

func (f *fakeBooker) Topology(context.Context) (apiv1.Topology, error) {
	return apiv1.Topology{}, errors.New("the fake has no topology")
}

func (f *fakeBooker) Find(context.Context, apiv1.FindRequest) (apiv1.Slot, error) {
	return apiv1.Slot{}, errors.New("the fake finds nothing")
}

func (f *fakeBooker) Plan(context.Context, apiv1.PlanRequest) (apiv1.Plan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plans++
	return f.plan, f.planErr
}

func (f *fakeBooker) CreateReservationRetrying(_ context.Context, req apiv1.ReservationRequest, _ bool) (apiv1.ReservationResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, req.From+">"+req.To)
	if len(f.creates) == f.refuse {
		return apiv1.ReservationResponse{}, errFakeRefused
	}
	if req.Hold == "" || req.Hold == "0s" {
		return apiv1.ReservationResponse{}, fmt.Errorf("%w: the fake books holds only, not %q", reserve.ErrInvalid, req.Hold)
	}
	r := reserve.Reservation{ID: fmt.Sprintf("fake-%d", len(f.creates)), Version: 1, State: reserve.StateHeld,
		From: req.From, To: req.To, Bandwidth: req.Bandwidth, Start: req.Start, End: req.End}
	if f.rs == nil {
		f.rs = map[string]reserve.Reservation{}
	}
	f.rs[r.ID] = r
	f.holds = append(f.holds, r.ID)
	return apiv1.ReservationResponse{Reservation: r, Created: true}, nil
}

// change moves reservation id to state, as long as it is live.
func (f *fakeBooker) change(id string, version uint64, state reserve.State, log *[]string) (reserve.Reservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rs[id]
	switch {
	case !ok:
		return reserve.Reservation{}, fmt.Errorf("%w: reservation %q", reserve.ErrNotFound, id)
	case version != 0 && version != r.Version:
		return reserve.Reservation{}, &reserve.StaleVersionError{Current: r.Version}
	case !r.State.Live():
		return reserve.Reservation{}, fmt.Errorf("%w: reservation %s is %s", reserve.ErrConflict, id, r.State)
	}
	r.State = state
	r.Version++
	f.rs[id] = r
	*log = append(*log, id)
	return r, nil
}

func (f *fakeBooker) CommitReservation(_ context.Context, id string, req apiv1.ActionRequest) (reserve.Reservation, error) {
	return f.change(id, req.Version, reserve.StateReserved, &f.commits)
}

func (f *fakeBooker) CancelReservation(_ context.Context, id string, req apiv1.ActionRequest) (reserve.Reservation, error) {
	return f.change(id, req.Version, reserve.StateCancelled, &f.cancels)
}

func (f *fakeBooker) Reservation(_ context.Context, id string) (reserve.Reservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rs[id]
	if !ok {
		return reserve.Reservation{}, fmt.Errorf("%w: reservation %q", reserve.ErrNotFound, id)
	}
	return r, nil
}

func (f *fakeBooker) ModifyReservation(context.Context, string, apiv1.ModifyRequest) (reserve.Reservation, error) {
	return reserve.Reservation{}, fmt.Errorf("%w: the fake modifies nothing", reserve.ErrConflict)
}

func (f *fakeBooker) Watch(context.Context, string, string, func(error), func(reserve.Reservation) (bool, error), func(apiv1.Event) (bool, error)) (bool, error) {
	return true, errors.New("the fake has no events")
}

func (f *fakeBooker) Explain(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// record is what the fake recorded, read under its lock.
func (f *fakeBooker) record() (creates, holds, commits, cancels []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.creates), slices.Clone(f.holds), slices.Clone(f.commits), slices.Clone(f.cancels)
}

// twoPairPlan is a plan that meets an hour's deadline over the pairs
// a1 → b1 and a2 → b2.
func twoPairPlan() apiv1.Plan {
	return apiv1.Plan{Algorithm: "fake", Start: t0, End: t0.Add(30 * time.Minute), Rate: 800_000_000, MeetsDeadline: true,
		Flows: []apiv1.PlanFlow{
			{From: "a1", To: "b1", Rate: 400_000_000},
			{From: "a2", To: "b2", Rate: 400_000_000},
		}}
}

// newFakeEnv is the usual environment with the service booking through
// fb: the controller under it only keeps the store, the users and the
// topology, and must never see a reservation.
func newFakeEnv(t *testing.T, fb *fakeBooker) *env {
	t.Helper()
	return newEnv(t, func(c *service.Config) { c.Booker = fb.bookerAs })
}

func (e *env) noControllerReservations() {
	e.t.Helper()
	if rs, err := e.c.List(e.ctx, admin, store.Filter{}); err != nil || len(rs) != 0 {
		e.t.Fatalf("the controller has %d reservations (%v): the service booked around its Booker", len(rs), err)
	}
}

var deadlineReq = transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in", Deadline: t0.Add(time.Hour)}

// TestFakeBookerHoldRefused: a deadline job whose second hold is refused
// ends FAILED with the refusal as its reason, and the hold it made before
// is cancelled, never committed (HoldAll is all or nothing).
func TestFakeBookerHoldRefused(t *testing.T) {
	fb := &fakeBooker{plan: twoPairPlan(), refuse: 2}
	e := newFakeEnv(t, fb)
	j, err := e.submitDeadline(deadlineReq, listed(40, 100_000_000))
	if err == nil || j.State != transfer.JobFailed {
		t.Fatalf("a job whose second hold is refused: %s %q", j.State, j.Reason)
	}
	if !strings.Contains(j.Reason, "book a2 → b2 at 400000000 bit/s") || !strings.Contains(j.Reason, "the fake refuses this hold") {
		t.Fatalf("reason %q", j.Reason)
	}
	creates, holds, commits, cancels := fb.record()
	if !slices.Equal(creates, []string{"a1>b1", "a2>b2"}) || !slices.Equal(holds, []string{"fake-1"}) {
		t.Fatalf("creates %v, holds %v", creates, holds)
	}
	if len(commits) != 0 || !slices.Equal(cancels, holds) {
		t.Fatalf("commits %v, cancels %v of holds %v: every hold made is cancelled, none committed", commits, cancels, holds)
	}
	if len(j.Pairs) != 0 {
		t.Fatalf("a refused job keeps pairs %+v", j.Pairs)
	}
	if !slices.Contains(fb.as, "alice") {
		t.Fatalf("booked as %v, not as the job's owner", fb.as)
	}
	e.noControllerReservations()
}

// TestFakeBookerPlanRefused: a plan the scheduler refuses, or one that
// misses the deadline, fails the job without a single hold.
func TestFakeBookerPlanRefused(t *testing.T) {
	late := twoPairPlan()
	late.End, late.MeetsDeadline = t0.Add(2*time.Hour), false
	for _, c := range []struct {
		name    string
		plan    apiv1.Plan
		planErr error
		reason  string
	}{
		{"refused", apiv1.Plan{}, fmt.Errorf("%w: no path from s1 to s2", reserve.ErrCapacity), "no path from s1 to s2"},
		{"late", late, nil, "the earliest completion is 2031-05-04T12:00:00Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fb := &fakeBooker{plan: c.plan, planErr: c.planErr}
			e := newFakeEnv(t, fb)
			j, err := e.submitDeadline(deadlineReq, listed(40, 100_000_000))
			if err == nil || j.State != transfer.JobFailed || !strings.Contains(j.Reason, c.reason) {
				t.Fatalf("job %s %q, want FAILED with %q", j.State, j.Reason, c.reason)
			}
			creates, holds, commits, cancels := fb.record()
			if fb.plans != 1 || len(creates)+len(holds)+len(commits)+len(cancels) != 0 {
				t.Fatalf("plans %d, creates %v, holds %v, commits %v, cancels %v: a refused plan books nothing", fb.plans, creates, holds, commits, cancels)
			}
			e.noControllerReservations()
		})
	}
}

// TestFakeBookerBookedAndReleased: both holds are made, then both
// committed, the job SCHEDULED on them; its cancel releases both through
// the same Booker.
func TestFakeBookerBookedAndReleased(t *testing.T) {
	fb := &fakeBooker{plan: twoPairPlan()}
	e := newFakeEnv(t, fb)
	j, err := e.submitDeadline(deadlineReq, listed(40, 100_000_000))
	if err != nil || j.State != transfer.JobScheduled {
		t.Fatalf("booked job: %s %q %v", j.State, j.Reason, err)
	}
	_, holds, commits, cancels := fb.record()
	if !slices.Equal(holds, []string{"fake-1", "fake-2"}) || !slices.Equal(commits, holds) || len(cancels) != 0 {
		t.Fatalf("holds %v, commits %v, cancels %v", holds, commits, cancels)
	}
	var got []string
	for _, p := range j.Pairs {
		got = append(got, p.Reservation)
	}
	if !slices.Equal(got, holds) {
		t.Fatalf("the pairs' reservations %v, the holds %v", got, holds)
	}
	if _, err := e.s.Cancel(e.ctx, alice, j.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, _, cancels = fb.record(); !slices.Equal(cancels, holds) {
		t.Fatalf("the job's cancel released %v of %v", cancels, holds)
	}
	e.noControllerReservations()
}

// TestServiceNeedsNoController: a service is built from a store alone
// (no controller anywhere), refuses to be built without one, and refuses
// what needs a topology with reserve.ErrNoTopology when it is handed none.
func TestServiceNeedsNoController(t *testing.T) {
	ctx := context.Background()
	if _, err := service.New(ctx, service.Config{}); err == nil {
		t.Fatal("a service without a store was built")
	}
	st, err := store.Open(ctx, sqliteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := service.New(ctx, service.Config{Store: st, Booker: (&fakeBooker{}).bookerAs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Heartbeat(ctx, agent("a1"), "a1", apiv1.DataNodeHeartbeat{Endpoint: "src", Address: "127.0.0.1:7000"}); !errors.Is(err, reserve.ErrNoTopology) || !errors.Is(err, reserve.ErrConflict) {
		t.Fatalf("a heartbeat without a topology: %v", err)
	}
	if _, err := s.Claim(ctx, agent("a1"), "a1", apiv1.ClaimRequest{Max: 1}); !errors.Is(err, reserve.ErrNoTopology) {
		t.Fatalf("a claim without a topology: %v", err)
	}
}
