package service

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// MaxPriority bounds a job's priority either way.
const MaxPriority = 1000

// MaxSources bounds a job's sources: a dataset of more is given as its
// directories, and a bound keeps a submission's cost (its validation, its
// row, every listing's lookups) small whatever a client sends.
const MaxSources = 10000

// ErrTooLarge is matched by a request over one of the service's size
// bounds (413 "too_large").
var ErrTooLarge = errors.New("too large")

// TooLargeError refuses a request over a size bound, naming the field.
type TooLargeError struct {
	Field   string
	Message string
}

func (e *TooLargeError) Error() string { return e.Message }

// Unwrap makes a TooLargeError match ErrTooLarge.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// CheckSources refuses more than MaxSources sources (a *TooLargeError); the
// API checks it as soon as the body is read, the service again.
func CheckSources(n int) error {
	if n > MaxSources {
		return &TooLargeError{Field: "sources", Message: fmt.Sprintf(
			"%d sources: a job takes at most %d (give their directories, or split the job)", n, MaxSources)}
	}
	return nil
}

// normalize checks a request's own fields and fills its defaults; it
// returns the source and destination locations.
func normalize(req *transfer.JobRequest, now time.Time) ([]transfer.Location, transfer.Location, error) {
	if len(req.Sources) == 0 {
		return nil, transfer.Location{}, invalid("sources", "give at least one source ENDPOINT:PATH")
	}
	if err := CheckSources(len(req.Sources)); err != nil {
		return nil, transfer.Location{}, err
	}
	srcs := make([]transfer.Location, 0, len(req.Sources))
	given := make(map[transfer.Location]bool, len(req.Sources))
	for i, s := range req.Sources {
		l, err := transfer.ParseLocation(s)
		if err != nil {
			return nil, transfer.Location{}, invalid("sources", "source %s", err)
		}
		if i > 0 && l.Endpoint != srcs[0].Endpoint {
			return nil, transfer.Location{}, invalid("sources", "sources %s and %s are on two endpoints: a job moves from one endpoint", req.Sources[0], s)
		}
		if given[l] {
			return nil, transfer.Location{}, invalid("sources", "source %s is given twice", s)
		}
		given[l] = true
		srcs = append(srcs, l)
		req.Sources[i] = l.String()
	}
	dst, err := transfer.ParseLocation(req.Destination)
	if err != nil {
		return nil, transfer.Location{}, invalid("destination", "destination %s", err)
	}
	req.Destination = dst.String()
	if !req.Deadline.IsZero() {
		req.Deadline = req.Deadline.UTC().Truncate(time.Millisecond)
		if !req.Deadline.After(now) {
			return nil, transfer.Location{}, invalid("deadline", "deadline %s is in the past (it is %s now)", req.Deadline.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
	}
	switch req.Checksum {
	case "":
		req.Checksum = transfer.ChecksumCRC32C
	case transfer.ChecksumCRC32C, transfer.ChecksumAdler32:
	default:
		return nil, transfer.Location{}, invalid("checksum", "checksum %q: want crc32c or adler32", req.Checksum)
	}
	switch req.Policy {
	case "":
		req.Policy = transfer.PolicyUpdate
	case transfer.PolicyUpdate, transfer.PolicyOverwrite, transfer.PolicySkip:
	default:
		return nil, transfer.Location{}, invalid("policy", "policy %q: want update, overwrite or skip-existing", req.Policy)
	}
	if err := transfer.CheckCC(req.CC); err != nil {
		return nil, transfer.Location{}, invalid("cc", "%s", err)
	}
	if err := transfer.CheckTransport(req.Transport, req.CC); err != nil {
		return nil, transfer.Location{}, invalid("transport", "%s", err)
	}
	if err := normalizeOnConflict(req); err != nil {
		return nil, transfer.Location{}, err
	}
	if req.Priority < -MaxPriority || req.Priority > MaxPriority {
		return nil, transfer.Location{}, invalid("priority", "priority %d: want -%d to %d", req.Priority, MaxPriority, MaxPriority)
	}
	if len(req.Key) > 128 || strings.ContainsAny(req.Key, "\x00\r\n") {
		return nil, transfer.Location{}, invalid("id", "id %q: want at most 128 bytes on one line", req.Key)
	}
	if len(req.Expected) > 0 {
		exp := make(map[string]string, len(req.Expected))
		for k, v := range req.Expected {
			l, err := transfer.ParseLocation(k)
			if err != nil {
				return nil, transfer.Location{}, invalid("expected_checksums", "expected checksum of %s", err)
			}
			if l.Endpoint != srcs[0].Endpoint {
				return nil, transfer.Location{}, invalid("expected_checksums", "expected checksum of %s: not on the source endpoint %s", k, srcs[0].Endpoint)
			}
			v = strings.ToLower(strings.TrimSpace(v))
			if b, err := hex.DecodeString(v); err != nil || len(b) == 0 || len(b) > 64 {
				return nil, transfer.Location{}, invalid("expected_checksums", "expected checksum of %s: %q is not hex", k, v)
			}
			exp[l.String()] = v
		}
		req.Expected = exp
	}
	return srcs, dst, nil
}

// sameRequest reports whether two normalized requests ask for the same.
func sameRequest(a, b transfer.JobRequest) bool {
	return slices.Equal(a.Sources, b.Sources) && a.Destination == b.Destination &&
		a.Deadline.Equal(b.Deadline) && a.Priority == b.Priority && a.Key == b.Key &&
		a.Checksum == b.Checksum && a.Policy == b.Policy && a.Project == b.Project && a.CC == b.CC && a.Transport == b.Transport && a.DryRun == b.DryRun && a.OnConflict == b.OnConflict &&
		maps.Equal(a.Expected, b.Expected)
}

// Submit makes a job, answered at once QUEUED: its listing and, with a
// deadline, its booking run in the service's own loop (BookPending), never
// in this request. A repeated submission (same Key, same request) returns
// the first job with created false; a different request under a used Key
// is a conflict. A deadline that cannot be met ends the job FAILED with
// the refusal and the earliest completion as its reason, nothing booked.
func (s *Service) Submit(ctx context.Context, a controller.Actor, req transfer.JobRequest) (transfer.Job, bool, error) {
	if a.Role == reserve.RoleAgent {
		return transfer.Job{}, false, forbidden("agents do not submit jobs")
	}
	if err := CheckSources(len(req.Sources)); err != nil {
		return transfer.Job{}, false, err
	}
	if req.Project != "" && !a.SeesAll() && !slices.Contains(a.Projects, req.Project) {
		return transfer.Job{}, false, forbidden("you are not a member of project %q", req.Project)
	}
	// Permission before the request's validation, whose cost grows with
	// the request: someone allowed on neither endpoint costs two lookups.
	if err := s.mayUseNamed(ctx, a, req); err != nil {
		return transfer.Job{}, false, err
	}
	req.Sources = slices.Clone(req.Sources)
	now := s.now()
	srcs, dst, err := normalize(&req, now)
	if err != nil {
		return transfer.Job{}, false, err
	}
	if req.Key != "" {
		j, err := s.st.GetJobByKey(ctx, a.Name, req.Key)
		if err == nil {
			if !sameRequest(j.JobRequest, req) {
				return transfer.Job{}, false, conflict("job id %q was used for job %s with another request", req.Key, j.ID)
			}
			return j, false, nil
		} else if !errors.Is(err, reserve.ErrNotFound) {
			return transfer.Job{}, false, err
		}
	}
	for _, l := range []transfer.Location{srcs[0], dst} {
		field := "sources"
		if l == dst {
			field = "destination"
		}
		ep, err := s.st.GetEndpoint(ctx, l.Endpoint)
		if errors.Is(err, reserve.ErrNotFound) {
			return transfer.Job{}, false, invalid(field, "endpoint %s is not known (lightpath endpoint list shows them)", l.Endpoint)
		} else if err != nil {
			return transfer.Job{}, false, err
		}
		if err := mayUse(a, ep, req.Project); err != nil {
			return transfer.Job{}, false, err
		}
	}
	if srcs[0].Endpoint == dst.Endpoint {
		for _, l := range srcs {
			if l.Path == "." || strings.HasPrefix(dst.Path+"/", l.Path+"/") || path.Dir(l.Path) == dst.Path {
				return transfer.Job{}, false, invalid("destination", "destination %s would copy the source %s onto itself", dst, l)
			}
		}
	}

	s.lock()
	now = s.now()
	j := transfer.Job{
		ID: newID("j-"), Owner: a.Name, JobRequest: req,
		State: transfer.JobQueued, CreatedAt: now, UpdatedAt: now, Version: 1,
	}
	if err := s.checkJobLimits(ctx, a, req.Project); err != nil {
		s.unlock()
		return transfer.Job{}, false, err
	}
	_, live, err := s.liveNodes(ctx, s.st, now)
	if err != nil {
		s.unlock()
		return transfer.Job{}, false, err
	}
	j.Reason = listReason(srcs[0].Endpoint, len(live[srcs[0].Endpoint]) > 0)
	list := transfer.Task{ID: newID("k-"), Job: j.ID, Kind: transfer.TaskList, State: transfer.TaskQueued, Endpoint: srcs[0].Endpoint, CreatedAt: now}
	err = s.tx(ctx, func(tx store.Store) error {
		if err := tx.CreateJob(ctx, j); err != nil {
			return err
		}
		return tx.CreateTask(ctx, list)
	})
	if err != nil {
		s.unlock()
		var dup *store.DuplicateJobError
		if errors.As(err, &dup) {
			if !sameRequest(dup.Existing.JobRequest, req) {
				return transfer.Job{}, false, conflict("job id %q was used for job %s with another request", req.Key, dup.Existing.ID)
			}
			return dup.Existing, false, nil
		}
		return transfer.Job{}, false, err
	}
	s.notify() // its list task is claimable
	s.unlock()
	return j, true, nil
}

// mayUseNamed refuses a request whose first source's or destination's
// endpoint exists and may not be used by a, reading only those two names:
// a malformed or unknown name is left to normalize and the full check.
func (s *Service) mayUseNamed(ctx context.Context, a controller.Actor, req transfer.JobRequest) error {
	var names []string
	if len(req.Sources) > 0 {
		names = append(names, req.Sources[0])
	}
	names = append(names, req.Destination)
	for _, n := range names {
		ep, _, ok := strings.Cut(n, ":")
		if !ok || ep == "" {
			continue
		}
		e, err := s.st.GetEndpoint(ctx, ep)
		if errors.Is(err, reserve.ErrNotFound) || errors.Is(err, reserve.ErrInvalid) {
			continue
		} else if err != nil {
			return err
		}
		if err := mayUse(a, e, req.Project); err != nil {
			return err
		}
	}
	return nil
}

// checkJobLimits refuses a new job of a in project when the policy's
// max_jobs or max_project_jobs is reached (a *controller.LimitError, 429
// "limit"); the caller holds mu, so two submissions cannot both take the
// last place.
func (s *Service) checkJobLimits(ctx context.Context, a controller.Actor, project string) error {
	lim, _ := s.c.Policy().Resolve(a.Role, project)
	open := []string{transfer.JobQueued, transfer.JobScheduled, transfer.JobActive}
	// Counted up to the limit: the rows read are bounded by it, however
	// many jobs there are.
	mine := 0
	if lim.MaxJobs != 0 && lim.MaxJobs < reserve.UnlimitedJobs {
		js, err := s.st.ListJobs(ctx, store.JobFilter{Owner: a.Name, States: open, Limit: lim.MaxJobs})
		if err != nil {
			return err
		}
		mine = len(js)
	}
	theirs := 0
	if project != "" && lim.MaxProjectJobs != 0 && lim.MaxProjectJobs < reserve.UnlimitedJobs {
		js, err := s.st.ListJobs(ctx, store.JobFilter{States: open})
		if err != nil {
			return err
		}
		for _, j := range js {
			if j.Project == project {
				theirs++
			}
		}
	}
	if l := reserve.CheckJobs(s.c.Policy(), a.Role, a.Name, project, mine, theirs); l != nil {
		return &controller.LimitError{Limit: l.Rule, Max: l.Max, Message: l.Message}
	}
	return nil
}

func listReason(ep string, live bool) string {
	if live {
		return "listing the dataset on endpoint " + ep
	}
	return "waiting for a live data node of endpoint " + ep
}

// Get returns a job the actor may see with the first page of its files
// (those in states, all when empty; none when noFiles), its tasks, and
// with optimizer its optimizer's decisions (GetPage with the default
// page).
func (s *Service) Get(ctx context.Context, a controller.Actor, id string, states []string, noFiles, optimizer bool) (apiv1.JobPage, error) {
	return s.GetPage(ctx, a, id, JobQuery{States: states, NoFiles: noFiles, Optimizer: optimizer})
}

// JobQuery says what a job's page carries: its files in States (all when
// empty; none with NoFiles), at most Limit of them (DefaultFilesPage when
// 0, at most MaxFilesPage) after the path After, and with Optimizer the
// optimizer's decisions.
type JobQuery struct {
	States    []string
	NoFiles   bool
	Optimizer bool
	Limit     int
	After     string
}

// GetPage returns a job the actor may see with one page of its files, in
// path order, and on the first page (no After) its files counted by
// state; Next is the After of the next page, empty on the last. However many files a job has, a page
// reads and holds at most MaxFilesPage of them, and without mu (issue
// 28, finding 7).
func (s *Service) GetPage(ctx context.Context, a controller.Actor, id string, q JobQuery) (apiv1.JobPage, error) {
	switch {
	case q.Limit < 0 || q.Limit > MaxFilesPage:
		return apiv1.JobPage{}, invalid("limit", "limit %d: want 1 to %d files a page", q.Limit, MaxFilesPage)
	case q.Limit == 0:
		q.Limit = DefaultFilesPage
	}
	j, err := s.job(ctx, a, id)
	if err != nil {
		return apiv1.JobPage{}, err
	}
	one := []transfer.Job{j}
	if err := s.queuedReasons(ctx, one); err != nil {
		return apiv1.JobPage{}, err
	}
	p := apiv1.JobPage{Job: one[0], Files: []transfer.JobFile{}}
	if !q.NoFiles {
		// One more than the page tells whether another follows.
		files, err := s.st.ListJobFiles(ctx, store.JobFileFilter{Job: id, States: q.States, After: q.After, Limit: q.Limit + 1})
		if err != nil {
			return apiv1.JobPage{}, err
		}
		if len(files) > q.Limit {
			files = files[:q.Limit]
			p.Next = files[len(files)-1].Path
		}
		if files != nil {
			p.Files = files
		}
	}
	if q.After == "" {
		// Counted on the first page only: a count reads every file of
		// the job, which following the pages need not repeat.
		counts, err := s.st.CountJobFiles(ctx, id)
		if err != nil {
			return apiv1.JobPage{}, err
		}
		p.FileCounts = map[string]int{}
		for st, c := range counts {
			p.FileCounts[st] = c.Files
		}
	}
	// A copy task names up to BatchFiles files: the page's tasks are
	// bounded too, the oldest first.
	if p.Tasks, err = s.st.ListTasks(ctx, store.TaskFilter{Job: id, Limit: MaxPageTasks}); err != nil {
		return apiv1.JobPage{}, err
	}
	if p.Tasks == nil {
		p.Tasks = []transfer.Task{}
	}
	if q.Optimizer {
		if p.Decisions, err = s.st.ListDecisions(ctx, id, 200); err != nil {
			return apiv1.JobPage{}, err
		}
	}
	return p, nil
}

// job returns a job the actor may see; another user's is not found.
func (s *Service) job(ctx context.Context, a controller.Actor, id string) (transfer.Job, error) {
	j, err := s.st.GetJob(ctx, id)
	if errors.Is(err, reserve.ErrNotFound) || (err == nil && !a.Sees(j.Owner)) {
		return transfer.Job{}, notFound("job", id)
	}
	return j, err
}

// List lists the jobs the actor may see that match f.
func (s *Service) List(ctx context.Context, a controller.Actor, f store.JobFilter) ([]transfer.Job, error) {
	if !a.SeesAll() {
		if f.Owner != "" && f.Owner != a.Name {
			return nil, forbidden("only operators and admins may list someone else's jobs")
		}
		f.Owner = a.Name
	}
	js, err := s.st.ListJobs(ctx, f)
	if err != nil {
		return nil, err
	}
	if js == nil {
		js = []transfer.Job{}
	}
	return js, s.queuedReasons(ctx, js)
}

// Cancel cancels a job: its tasks stop, its files not yet arrived are
// cancelled, its reservations are released. The job and its tasks end in
// one short transaction, which records the sweep of its files (sweep.go);
// its files and parts then end ListingBatch at a time, each step under its
// own short hold of mu, so a cancel of any size never keeps heartbeats
// waiting long (issue 28, finding 7): the first cancelSteps steps before
// the answer, the rest of a larger job's after it, and what a restart or
// a takeover interrupts at the clock's ticks.
func (s *Service) Cancel(ctx context.Context, a controller.Actor, id, why string) (transfer.Job, error) {
	if a.Role == reserve.RoleAgent {
		return transfer.Job{}, forbidden("agents do not cancel jobs")
	}
	j, w, err := s.cancelJob(ctx, a, id, why)
	if err != nil {
		return j, err
	}
	s.release(ctx, j, "job "+id+" cancelled")
	// A job of up to cancelSteps steps of files is answered with its
	// files ended; a larger one's go on ending after the answer.
	done, err := s.driveSweep(ctx, w, cancelSteps)
	if err != nil {
		return transfer.Job{}, err
	}
	if !done {
		s.goSweep(ctx, w)
	}
	return j, nil
}

// cancelSteps is how many steps of ListingBatch files a cancel takes
// before it answers.
const cancelSteps = 10

// cancelJob ends a job CANCELLED with its open tasks, recording the
// sweep of its files.
func (s *Service) cancelJob(ctx context.Context, a controller.Actor, id, why string) (transfer.Job, store.JobSweep, error) {
	s.lock()
	defer s.unlock()
	j, err := s.job(ctx, a, id)
	if err != nil {
		return j, store.JobSweep{}, err
	}
	if transfer.JobEnded(j.State) {
		return j, store.JobSweep{}, conflict("job %s has ended (%s)", id, j.State)
	}
	now := s.now()
	w := endSweep(id, []string{transfer.FilePending, transfer.FileActive}, transfer.FileCancelled, "", "the job was cancelled", now)
	err = s.tx(ctx, func(tx store.Store) error {
		tasks, err := tx.ListTasks(ctx, store.TaskFilter{Job: id, States: []string{transfer.TaskQueued, transfer.TaskActive}})
		if err != nil {
			return err
		}
		for _, t := range tasks {
			t.State, t.EndedAt, t.Error = transfer.TaskCancelled, now, "the job was cancelled"
			if err := tx.UpdateTask(ctx, t); err != nil {
				return err
			}
			delete(s.rates, t.ID)
		}
		j.State, j.EndedAt = transfer.JobCancelled, now
		j.Reason = "cancelled by " + a.Name
		if why = oneLine(why); why != "" {
			j.Reason += ": " + why
		}
		j.ThroughputBps = runThroughput(j, now)
		if err := tx.PutJobSweep(ctx, w); err != nil {
			return err
		}
		return s.saveJob(ctx, tx, &j, now)
	})
	if err != nil {
		return transfer.Job{}, store.JobSweep{}, err
	}
	return j, w, nil
}

// runThroughput is an ended job's bits per second over its run.
func runThroughput(j transfer.Job, now time.Time) float64 {
	if j.StartedAt.IsZero() || !now.After(j.StartedAt) {
		return 0
	}
	return float64(j.BytesDone) * 8 / now.Sub(j.StartedAt).Seconds()
}

// owner is the actor a job's owner is, for the scheduler's policies.
func (s *Service) owner(ctx context.Context, j transfer.Job) (controller.Actor, error) {
	u, err := s.st.GetUser(ctx, j.Owner)
	if err != nil {
		return controller.Actor{}, fmt.Errorf("look up the job's owner %s: %w", j.Owner, err)
	}
	return controller.Actor{Name: u.Name, Role: u.Role, Projects: u.Projects}, nil
}

// release cancels a job's reservations that are still live.
func (s *Service) release(ctx context.Context, j transfer.Job, why string) {
	own, err := s.owner(ctx, j)
	if err != nil {
		own = controller.Actor{Name: "lightpath-service", Role: reserve.RoleAdmin}
	}
	for _, p := range j.Pairs {
		if p.Reservation != "" {
			s.cancelReservation(ctx, own, j.ID, p.Reservation, why)
		}
		for _, l := range p.Later {
			if l.Reservation != "" {
				s.cancelReservation(ctx, own, j.ID, l.Reservation, why)
			}
		}
	}
}

// cancelReservation cancels a reservation of a job unless it has ended,
// following a version changed by the controller's clock meanwhile.
func (s *Service) cancelReservation(ctx context.Context, own controller.Actor, job, id, why string) {
	r, err := s.c.Get(ctx, own, id)
	if err != nil {
		return
	}
	version := r.Version
	for range 3 {
		if !r.State.Live() {
			return
		}
		_, err = s.c.Cancel(ctx, own, id, version, why)
		var stale *reserve.StaleVersionError
		if !errors.As(err, &stale) {
			break
		}
		version = stale.Current
	}
	if err != nil && !errors.Is(err, reserve.ErrConflict) {
		s.log.Warn("release a job's reservation", "job", job, "reservation", id, "err", err)
	}
}
