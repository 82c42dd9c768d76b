package storetest

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// inUTC returns v with every time in it in UTC, as the store gives it
// back (the instant kept).
func inUTC[T any](v T) T {
	p := reflect.New(reflect.TypeOf(v))
	p.Elem().Set(reflect.ValueOf(v))
	setUTC(p.Elem())
	return p.Elem().Interface().(T)
}

func setUTC(v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(v.Interface().(time.Time).UTC()))
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setUTC(v.Field(i))
			}
		}
	case v.Kind() == reflect.Slice:
		// A copy: the caller's slice stays as it was.
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		for i := range c.Len() {
			setUTC(c.Index(i))
		}
		if !v.IsNil() {
			v.Set(c)
		}
	}
}

func same[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if want = inUTC(want); !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// sampleJob returns a job with every field set, created at base plus
// offset.
func sampleJob(id, owner, key string, offset time.Duration) transfer.Job {
	at := base.Add(offset)
	return transfer.Job{
		ID: id, Owner: owner,
		JobRequest: transfer.JobRequest{
			Sources: []string{"cern:/data/run1", "cern:/data/ünï file"}, Destination: "fnal:/in",
			Deadline: at.Add(time.Hour), Priority: 3, Key: key, Checksum: transfer.ChecksumAdler32,
			Expected: map[string]string{"cern:/data/run1/a": "0a0b0c0d"}, Policy: transfer.PolicyOverwrite,
			Project: "atlas", CC: "fast",
		},
		State: transfer.JobActive, Reason: "moving", CreatedAt: at, UpdatedAt: at.Add(time.Minute),
		StartedAt: at.Add(time.Second), FilesTotal: 10, FilesDone: 4, FilesFailed: 1,
		BytesTotal: 1 << 40, BytesDone: 1 << 30, ThroughputBps: 9.5e9, Algorithm: "edf",
		Pairs: []transfer.Pair{{From: "h1", To: "h2", Reservation: "r-1", RateBps: 10_000_000_000,
			Start: at, End: at.Add(time.Hour), ShareBytes: 1 << 39, BytesDone: 1 << 29, Concurrency: 4, Streams: 8,
			Routed: "the reservation failed"}},
		Version: 1,
	}
}

func sampleFile(job, path, state string) transfer.JobFile {
	return transfer.JobFile{Job: job, Path: path, Dest: "in/" + path, Size: int64(len(path)) * 1000,
		MTime: base.Add(-time.Hour), State: state, Attempts: 1, Error: "timeout ü", Checksum: "0a0b0c0d",
		Expected: "0a0b0c0d", Task: "", From: "h1", To: "h2", Parts: 4, PartsDone: 1}
}

func samplePart(job, path string, idx int, state string) transfer.FilePart {
	return transfer.FilePart{Job: job, Path: path, Part: transfer.Part{Index: idx, Offset: int64(idx) << 26, Length: 1 << 26},
		State: state, Attempts: 2, Error: "reset ü", Checksum: "01020304", Task: "k-" + path, From: "h1", To: "h2",
		Complete: true, FileChecksum: "0a0b0c0d"}
}

func sampleTask(id, job, kind string, offset time.Duration) transfer.Task {
	at := base.Add(offset)
	return transfer.Task{ID: id, Job: job, Kind: kind, State: transfer.TaskActive, Attempt: 2, From: "h1", To: "h2",
		Files: []string{"a", "b"}, Part: &transfer.Part{Index: 1, Offset: 1 << 22, Length: 1000}, Bytes: 2000, BytesDone: 1000, Reservation: "r-1", RateBps: 1e9, Streams: 4,
		CreatedAt: at, ClaimedAt: at.Add(time.Second), LeaseExpires: at.Add(time.Minute), Error: "x"}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: %v, want %v", what, err, target)
	}
}

func jobIDs(js []transfer.Job) []string {
	ids := []string{}
	for _, j := range js {
		ids = append(ids, j.ID)
	}
	return ids
}

func filePaths(fs []transfer.JobFile) []string {
	ps := []string{}
	for _, f := range fs {
		ps = append(ps, f.Job+":"+f.Path)
	}
	return ps
}

func taskIDs(ts []transfer.Task) []string {
	ids := []string{}
	for _, t := range ts {
		ids = append(ids, t.ID)
	}
	return ids
}

func mustJob(t *testing.T, s store.Store, j transfer.Job) {
	t.Helper()
	if err := s.CreateJob(ctxFor(t), j); err != nil {
		t.Fatal(err)
	}
}

func testJobRoundTrip(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	j := sampleJob("j-1", "alice", "k1", 0)
	mustJob(t, s, j)
	got, err := s.GetJob(ctx, "j-1")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "job", got, j)
	if got.CreatedAt.Location() != time.UTC || got.Pairs[0].Start.Location() != time.UTC || got.Deadline.Location() != time.UTC {
		t.Errorf("times not in UTC: %v %v %v", got.CreatedAt, got.Pairs[0].Start, got.Deadline)
	}
	if got, err := s.GetJobByKey(ctx, "alice", "k1"); err != nil {
		t.Fatal(err)
	} else {
		same(t, "job by key", got, j)
	}
	if l, err := s.ListJobs(ctx, store.JobFilter{}); err != nil || len(l) != 1 {
		t.Fatalf("list jobs: %v, %v", jobIDs(l), err)
	} else {
		same(t, "listed job", l[0], j)
	}
	// Copies: changing what was given or returned changes nothing stored.
	got.Sources[0], got.Expected["cern:/data/run1/a"], got.Pairs[0].From = "x", "x", "x"
	j2 := sampleJob("j-2", "alice", "", time.Minute)
	want2 := sampleJob("j-2", "alice", "", time.Minute)
	mustJob(t, s, j2)
	j2.Sources[0], j2.Expected["cern:/data/run1/a"], j2.Pairs[0].To = "y", "y", "y"
	if again, err := s.GetJob(ctx, "j-1"); err != nil {
		t.Fatal(err)
	} else {
		same(t, "job after changing a copy", again, sampleJob("j-1", "alice", "k1", 0))
	}
	if again, err := s.GetJob(ctx, "j-2"); err != nil {
		t.Fatal(err)
	} else {
		same(t, "job after changing what was given", again, want2)
	}
	// A job with nothing but what is required comes back as it was.
	min := transfer.Job{ID: "j-min", Owner: "bob", State: transfer.JobQueued}
	mustJob(t, s, min)
	if got, err := s.GetJob(ctx, "j-min"); err != nil {
		t.Fatal(err)
	} else {
		same(t, "minimal job", got, min)
	}
	other := sampleJob("j-1", "bob", "", 0)
	wantErr(t, "create a taken id", s.CreateJob(ctx, other), reserve.ErrConflict)
	_, err = s.GetJob(ctx, "j-none")
	wantErr(t, "get a missing job", err, reserve.ErrNotFound)
	_, err = s.GetJobByKey(ctx, "alice", "k-none")
	wantErr(t, "get a missing key", err, reserve.ErrNotFound)
	_, err = s.GetJobByKey(ctx, "alice", "")
	wantErr(t, "get by the empty key", err, reserve.ErrNotFound)
}

// badJobs are the jobs CreateJob and UpdateJob refuse with
// reserve.ErrInvalid, on both backends alike.
func badJobs() []struct {
	name string
	j    transfer.Job
} {
	mod := func(f func(j *transfer.Job)) transfer.Job {
		j := sampleJob("j-bad", "alice", "k-bad", 0)
		f(&j)
		return j
	}
	return []struct {
		name string
		j    transfer.Job
	}{
		{"no id", mod(func(j *transfer.Job) { j.ID = "" })},
		{"no owner", mod(func(j *transfer.Job) { j.Owner = "" })},
		{"no state", mod(func(j *transfer.Job) { j.State = "" })},
		{"NUL in the id", mod(func(j *transfer.Job) { j.ID = "j-\x00" })},
		{"NUL in the owner", mod(func(j *transfer.Job) { j.Owner = "al\x00ice" })},
		{"NUL in the key", mod(func(j *transfer.Job) { j.Key = "k\x00" })},
		{"NUL in the state", mod(func(j *transfer.Job) { j.State = "ACTIVE\x00" })},
		{"NUL in a source", mod(func(j *transfer.Job) { j.Sources[0] = "cern:/a\x00b" })},
		{"NUL in the reason", mod(func(j *transfer.Job) { j.Reason = "\x00" })},
		{"NUL in an expected path", mod(func(j *transfer.Job) { j.Expected = map[string]string{"cern:/\x00": "00"} })},
		{"NUL in a pair's reservation", mod(func(j *transfer.Job) { j.Pairs[0].Reservation = "r\x00" })},
		{"invalid UTF-8 in the id", mod(func(j *transfer.Job) { j.ID = "j-\xff" })},
		{"invalid UTF-8 in the key", mod(func(j *transfer.Job) { j.Key = "k\xff" })},
		{"invalid UTF-8 in the reason", mod(func(j *transfer.Job) { j.Reason = "\xffwaiting" })},
		{"invalid UTF-8 in a source", mod(func(j *transfer.Job) { j.Sources[1] = "cern:/\xfe" })},
		{"invalid UTF-8 in an expected path", mod(func(j *transfer.Job) { j.Expected = map[string]string{"cern:/\xff": "00"} })},
		{"invalid UTF-8 in an expected sum", mod(func(j *transfer.Job) { j.Expected = map[string]string{"cern:/a": "\xff"} })},
		{"invalid UTF-8 in the request's project", mod(func(j *transfer.Job) { j.JobRequest.Project = "\xff" })},
		{"invalid UTF-8 in a pair", mod(func(j *transfer.Job) { j.Pairs[0].Routed = "\xff" })},
		{"a NaN throughput", mod(func(j *transfer.Job) { j.ThroughputBps = math.NaN() })},
		{"an infinite throughput", mod(func(j *transfer.Job) { j.ThroughputBps = math.Inf(1) })},
		{"created in 1500", mod(func(j *transfer.Job) { j.CreatedAt = time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC) })},
		{"a deadline in 3000", mod(func(j *transfer.Job) { j.Deadline = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) })},
	}
}

func testJobInvalid(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	for _, tc := range badJobs() {
		wantErr(t, "create a job with "+tc.name, s.CreateJob(ctx, tc.j), reserve.ErrInvalid)
	}
	if l, err := s.ListJobs(ctx, store.JobFilter{}); err != nil || len(l) != 0 {
		t.Errorf("jobs stored after refusals: %v, %v", jobIDs(l), err)
	}
	j := sampleJob("j-bad", "alice", "k-bad", 0)
	mustJob(t, s, j)
	for _, tc := range badJobs() {
		u := tc.j
		if u.ID != j.ID || tc.name == "no owner" || tc.name == "NUL in the owner" || tc.name == "NUL in the key" || tc.name == "invalid UTF-8 in the key" || tc.name == "created in 1500" {
			continue // an ID that names no job, or a field an update leaves as it was
		}
		u.Version = 2
		wantErr(t, "update a job with "+tc.name, s.UpdateJob(ctx, u, 1), reserve.ErrInvalid)
	}
	if got, err := s.GetJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	} else {
		same(t, "job after refused updates", got, j)
	}
}

func testJobIdempotency(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	j1 := sampleJob("j-1", "alice", "k1", 0)
	mustJob(t, s, j1)
	err := s.CreateJob(ctx, sampleJob("j-2", "alice", "k1", time.Minute))
	var dup *store.DuplicateJobError
	if !errors.As(err, &dup) || !errors.Is(err, store.ErrDuplicateKey) {
		t.Fatalf("create under a used key: %v, want a *DuplicateJobError matching ErrDuplicateKey", err)
	}
	same(t, "the job a duplicate carries", dup.Existing, j1)
	if dup.Error() == "" {
		t.Error("a duplicate's message is empty")
	}
	_, err = s.GetJob(ctx, "j-2")
	wantErr(t, "the duplicate was stored", err, reserve.ErrNotFound)
	// Inside Tx the duplicate comes back as it is.
	err = s.Tx(ctx, func(tx store.Store) error { return tx.CreateJob(ctx, sampleJob("j-2", "alice", "k1", 0)) })
	if !errors.As(err, &dup) || dup.Existing.ID != "j-1" {
		t.Errorf("a duplicate in Tx: %v", err)
	}
	// The key is per owner; the empty key is no key.
	mustJob(t, s, sampleJob("j-3", "bob", "k1", 0))
	mustJob(t, s, sampleJob("j-4", "alice", "", 0))
	mustJob(t, s, sampleJob("j-5", "alice", "", 0))
	for _, c := range []struct{ owner, key, want string }{{"alice", "k1", "j-1"}, {"bob", "k1", "j-3"}} {
		if got, err := s.GetJobByKey(ctx, c.owner, c.key); err != nil || got.ID != c.want {
			t.Errorf("job of %s under %s: %s, %v; want %s", c.owner, c.key, got.ID, err, c.want)
		}
	}
	_, err = s.GetJobByKey(ctx, "carol", "k1")
	wantErr(t, "a key of another owner", err, reserve.ErrNotFound)
	// A taken ID under a new key stores nothing, the key included.
	wantErr(t, "create a taken id under a new key", s.CreateJob(ctx, sampleJob("j-1", "alice", "k2", 0)), reserve.ErrConflict)
	_, err = s.GetJobByKey(ctx, "alice", "k2")
	wantErr(t, "the key of a refused job", err, reserve.ErrNotFound)
	if l, err := s.ListJobs(ctx, store.JobFilter{}); err != nil || len(l) != 4 {
		t.Errorf("jobs: %v, %v; want 4", jobIDs(l), err)
	}
}

func testJobCAS(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	j := sampleJob("j-1", "alice", "k1", 0)
	mustJob(t, s, j)
	up := j
	up.Version = 3
	err := s.UpdateJob(ctx, up, 2)
	var stale *reserve.StaleVersionError
	if !errors.As(err, &stale) || !errors.Is(err, reserve.ErrConflict) || stale.Current != 1 || stale.Given != 2 || stale.ID != "j-1" {
		t.Errorf("update from a stale version: %v, want a StaleVersionError (current 1, given 2)", err)
	}
	up.Version = 1
	wantErr(t, "update to a version not after the expected", s.UpdateJob(ctx, up, 1), reserve.ErrInvalid)
	none := sampleJob("j-none", "alice", "", 0)
	none.Version = 2
	wantErr(t, "update a missing job", s.UpdateJob(ctx, none, 1), reserve.ErrNotFound)
	if got, err := s.GetJob(ctx, "j-1"); err != nil {
		t.Fatal(err)
	} else {
		same(t, "job after refused updates", got, j)
	}
	// Everything changes but ID, Owner, Key and CreatedAt.
	up = sampleJob("j-1", "mallory", "k-other", time.Hour)
	up.State, up.Reason, up.Pairs, up.Sources, up.Expected = transfer.JobSucceeded, "", nil, []string{"cern:/x"}, nil
	up.EndedAt, up.FilesDone, up.JobRequest.Project, up.Version = base.Add(2*time.Hour), 10, "", 2
	if err := s.UpdateJob(ctx, up, 1); err != nil {
		t.Fatal(err)
	}
	want := up
	want.Owner, want.Key, want.CreatedAt = j.Owner, j.Key, j.CreatedAt
	got, err := s.GetJob(ctx, "j-1")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "updated job", got, want)
	if got, err := s.GetJobByKey(ctx, "alice", "k1"); err != nil || got.Version != 2 {
		t.Errorf("job by its key after the update: version %d, %v", got.Version, err)
	}
	_, err = s.GetJobByKey(ctx, "mallory", "k-other")
	wantErr(t, "the key an update tried", err, reserve.ErrNotFound)
	if l, err := s.ListJobs(ctx, store.JobFilter{States: []string{transfer.JobSucceeded}}); err != nil || len(l) != 1 {
		t.Errorf("jobs by the updated state: %v, %v", jobIDs(l), err)
	}
	if err := s.UpdateJob(ctx, up, 1); !errors.As(err, &stale) || stale.Current != 2 {
		t.Errorf("update from the old version again: %v, want current 2", err)
	}
}

func testJobFilters(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	for _, j := range []transfer.Job{
		{ID: "j-a", Owner: "alice", State: transfer.JobActive, CreatedAt: base.Add(time.Minute)},
		{ID: "j-b", Owner: "alice", State: transfer.JobSucceeded, CreatedAt: base.Add(2 * time.Minute)},
		{ID: "j-c", Owner: "bob", State: transfer.JobQueued, CreatedAt: base.Add(3 * time.Minute)},
		{ID: "j-d", Owner: "bob", State: transfer.JobActive, CreatedAt: base.Add(3 * time.Minute)},
		{ID: "j-e", Owner: "alice", State: transfer.JobQueued, CreatedAt: base},
	} {
		mustJob(t, s, j)
	}
	for _, tc := range []struct {
		name string
		f    store.JobFilter
		want []string
	}{
		{"all, newest first, then by ID descending", store.JobFilter{}, []string{"j-d", "j-c", "j-b", "j-a", "j-e"}},
		{"owner", store.JobFilter{Owner: "alice"}, []string{"j-b", "j-a", "j-e"}},
		{"states", store.JobFilter{States: []string{transfer.JobActive, transfer.JobQueued}}, []string{"j-d", "j-c", "j-a", "j-e"}},
		{"since (inclusive)", store.JobFilter{Since: base.Add(2 * time.Minute)}, []string{"j-d", "j-c", "j-b"}},
		{"limit", store.JobFilter{Limit: 2}, []string{"j-d", "j-c"}},
		{"owner and state", store.JobFilter{Owner: "bob", States: []string{transfer.JobActive}}, []string{"j-d"}},
		{"owner, since and limit", store.JobFilter{Owner: "alice", Since: base.Add(time.Second), Limit: 1}, []string{"j-b"}},
		{"no match", store.JobFilter{Owner: "carol"}, []string{}},
	} {
		got, err := s.ListJobs(ctx, tc.f)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if ids := jobIDs(got); !reflect.DeepEqual(ids, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, ids, tc.want)
		}
	}
	want := map[string]int{transfer.JobActive: 2, transfer.JobQueued: 2, transfer.JobSucceeded: 1}
	if n, err := s.CountJobs(ctx); err != nil || !reflect.DeepEqual(n, want) {
		t.Errorf("jobs by state: %v, %v; want %v", n, err, want)
	}
}

func testJobDelete(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	for _, id := range []string{"j-1", "j-2"} {
		mustJob(t, s, sampleJob(id, "alice", "key-"+id, 0))
		files := []transfer.JobFile{sampleFile(id, "a", transfer.FilePending), sampleFile(id, "b", transfer.FileActive)}
		if err := errors.Join(
			s.AddJobFiles(ctx, files),
			s.AddFileParts(ctx, []transfer.FilePart{samplePart(id, "b", 0, transfer.FileActive)}),
			s.CreateTask(ctx, sampleTask("k-"+id, id, transfer.TaskCopy, 0)),
			s.AppendDecision(ctx, transfer.Decision{Job: id, From: "h1", To: "h2", At: base, Reason: "start"}),
		); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteJob(ctx, "j-1"); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetJob(ctx, "j-1")
	wantErr(t, "get a deleted job", err, reserve.ErrNotFound)
	_, err = s.GetTask(ctx, "k-j-1")
	wantErr(t, "get a deleted job's task", err, reserve.ErrNotFound)
	if fs, err := s.ListJobFiles(ctx, store.JobFileFilter{}); err != nil || !reflect.DeepEqual(filePaths(fs), []string{"j-2:a", "j-2:b"}) {
		t.Errorf("files after deleting j-1: %v, %v", filePaths(fs), err)
	}
	if n, err := s.CountJobFiles(ctx, "j-1"); err != nil || len(n) != 0 {
		t.Errorf("count of a deleted job's files: %v, %v", n, err)
	}
	if ps, err := s.ListFileParts(ctx, store.FilePartFilter{}); err != nil || len(ps) != 1 || ps[0].Job != "j-2" {
		t.Errorf("parts after deleting j-1: %+v, %v", ps, err)
	}
	if ts, err := s.ListTasks(ctx, store.TaskFilter{}); err != nil || !reflect.DeepEqual(taskIDs(ts), []string{"k-j-2"}) {
		t.Errorf("tasks after deleting j-1: %v, %v", taskIDs(ts), err)
	}
	if ds, err := s.ListDecisions(ctx, "j-1", 0); err != nil || len(ds) != 0 {
		t.Errorf("decisions of a deleted job: %v, %v", ds, err)
	}
	if ds, err := s.ListDecisions(ctx, "j-2", 0); err != nil || len(ds) != 1 {
		t.Errorf("decisions of the other job: %v, %v", ds, err)
	}
	wantErr(t, "delete a deleted job", s.DeleteJob(ctx, "j-1"), reserve.ErrNotFound)
	wantErr(t, "delete a missing job", s.DeleteJob(ctx, "j-none"), reserve.ErrNotFound)
	// Its key and its files' paths are free again.
	mustJob(t, s, sampleJob("j-1", "alice", "key-j-1", 0))
	if err := s.AddJobFiles(ctx, []transfer.JobFile{sampleFile("j-1", "a", transfer.FilePending)}); err != nil {
		t.Errorf("add a file of a recreated job: %v", err)
	}
}

func testJobFiles(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	mustJob(t, s, sampleJob("j-1", "alice", "", 0))
	mustJob(t, s, sampleJob("j-2", "alice", "", 0))
	if err := s.AddJobFiles(ctx, nil); err != nil {
		t.Errorf("add no files: %v", err)
	}
	a := sampleFile("j-1", "dir/a", transfer.FilePending)
	b := sampleFile("j-1", "dir/b", transfer.FileActive)
	b.Task, b.Error, b.Checksum, b.Expected, b.From, b.To, b.MTime = "k-1", "", "", "", "", "", time.Time{}
	c := sampleFile("j-2", "c", transfer.FilePending)
	given := []transfer.JobFile{a, b, c}
	if err := s.AddJobFiles(ctx, given); err != nil {
		t.Fatal(err)
	}
	given[0].Path = "changed" // what was given is the caller's
	got, err := s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-1"})
	if err != nil || len(got) != 2 {
		t.Fatalf("files of j-1: %v, %v", filePaths(got), err)
	}
	same(t, "file a", got[0], a)
	same(t, "file b", got[1], b)
	if got[0].MTime.Location() != time.UTC {
		t.Errorf("mtime %v not in UTC", got[0].MTime)
	}
	got[0].State = "changed"
	if again, _ := s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-1", Paths: []string{"dir/a"}}); len(again) != 1 || again[0].State != transfer.FilePending {
		t.Errorf("a file after changing a copy: %+v", again)
	}

	// Refused calls store nothing.
	wantErr(t, "add a file of a missing job", s.AddJobFiles(ctx, []transfer.JobFile{sampleFile("j-none", "x", transfer.FilePending)}), reserve.ErrNotFound)
	wantErr(t, "add files, one of a missing job", s.AddJobFiles(ctx, []transfer.JobFile{
		sampleFile("j-1", "new", transfer.FilePending), sampleFile("j-none", "x", transfer.FilePending)}), reserve.ErrNotFound)
	wantErr(t, "add a stored file", s.AddJobFiles(ctx, []transfer.JobFile{
		sampleFile("j-1", "new", transfer.FilePending), sampleFile("j-1", "dir/a", transfer.FilePending)}), reserve.ErrConflict)
	wantErr(t, "add a file twice", s.AddJobFiles(ctx, []transfer.JobFile{
		sampleFile("j-1", "new", transfer.FilePending), sampleFile("j-1", "new", transfer.FilePending)}), reserve.ErrConflict)
	bad := func(f func(*transfer.JobFile)) transfer.JobFile {
		jf := sampleFile("j-1", "new-bad", transfer.FilePending)
		f(&jf)
		return jf
	}
	for _, tc := range []struct {
		name string
		f    transfer.JobFile
	}{
		{"no job", bad(func(f *transfer.JobFile) { f.Job = "" })},
		{"no path", bad(func(f *transfer.JobFile) { f.Path = "" })},
		{"no state", bad(func(f *transfer.JobFile) { f.State = "" })},
		{"NUL in the path", bad(func(f *transfer.JobFile) { f.Path = "a\x00b" })},
		{"NUL in the task", bad(func(f *transfer.JobFile) { f.Task = "k\x00" })},
		{"NUL in the state", bad(func(f *transfer.JobFile) { f.State = "P\x00" })},
		{"invalid UTF-8 in the path", bad(func(f *transfer.JobFile) { f.Path = "a\xffb" })},
		{"NUL in the destination", bad(func(f *transfer.JobFile) { f.Dest = "a\x00b" })},
		{"NUL in the error", bad(func(f *transfer.JobFile) { f.Error = "\x00" })},
		{"invalid UTF-8 in the destination", bad(func(f *transfer.JobFile) { f.Dest = "a\xffb" })},
		{"invalid UTF-8 in the error", bad(func(f *transfer.JobFile) { f.Error = "\xc3" })},
		{"an mtime in 1000", bad(func(f *transfer.JobFile) { f.MTime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC) })},
	} {
		wantErr(t, "add a file with "+tc.name, s.AddJobFiles(ctx, []transfer.JobFile{sampleFile("j-1", "new", transfer.FilePending), tc.f}), reserve.ErrInvalid)
		wantErr(t, "update a file with "+tc.name, s.UpdateJobFiles(ctx, []transfer.JobFile{tc.f}), reserve.ErrInvalid)
	}
	if fs, err := s.ListJobFiles(ctx, store.JobFileFilter{}); err != nil || !reflect.DeepEqual(filePaths(fs), []string{"j-1:dir/a", "j-1:dir/b", "j-2:c"}) {
		t.Errorf("files after refused adds: %v, %v", filePaths(fs), err)
	}

	// Updates replace every field; a file given twice ends as given last.
	ua := a
	ua.State, ua.Task, ua.Size, ua.Attempts, ua.Error = transfer.FileActive, "k-1", 5, 2, ""
	ub := b
	ub.State = transfer.FileFailed
	ub2 := b
	ub2.State, ub2.Error = transfer.FileSucceeded, "verified"
	if err := s.UpdateJobFiles(ctx, []transfer.JobFile{ub, ua, ub2}); err != nil {
		t.Fatal(err)
	}
	got, err = s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-1"})
	if err != nil || len(got) != 2 {
		t.Fatalf("files of j-1 after the update: %v, %v", filePaths(got), err)
	}
	same(t, "updated file a", got[0], ua)
	same(t, "updated file b", got[1], ub2)
	// One unknown file: nothing of the call is stored.
	ua2 := ua
	ua2.State = transfer.FileFailed
	wantErr(t, "update files, one unknown", s.UpdateJobFiles(ctx, []transfer.JobFile{ua2, sampleFile("j-1", "none", transfer.FileFailed)}), reserve.ErrNotFound)
	wantErr(t, "update a file of a missing job", s.UpdateJobFiles(ctx, []transfer.JobFile{sampleFile("j-none", "dir/a", transfer.FileFailed)}), reserve.ErrNotFound)
	if got, err := s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-1", Paths: []string{"dir/a"}}); err != nil || len(got) != 1 {
		t.Fatalf("file a: %v, %v", filePaths(got), err)
	} else {
		same(t, "file a after a refused update", got[0], ua)
	}
	if err := s.UpdateJobFiles(ctx, nil); err != nil {
		t.Errorf("update no files: %v", err)
	}

	for _, tc := range []struct {
		name string
		f    store.JobFileFilter
		want []string
	}{
		{"all, by job then path", store.JobFileFilter{}, []string{"j-1:dir/a", "j-1:dir/b", "j-2:c"}},
		{"job", store.JobFileFilter{Job: "j-2"}, []string{"j-2:c"}},
		{"states", store.JobFileFilter{States: []string{transfer.FileActive, transfer.FilePending}}, []string{"j-1:dir/a", "j-2:c"}},
		{"task", store.JobFileFilter{Task: "k-1"}, []string{"j-1:dir/a", "j-1:dir/b"}},
		{"paths", store.JobFileFilter{Paths: []string{"c", "dir/b", "none"}}, []string{"j-1:dir/b", "j-2:c"}},
		{"job and state", store.JobFileFilter{Job: "j-1", States: []string{transfer.FileSucceeded}}, []string{"j-1:dir/b"}},
		{"after", store.JobFileFilter{Job: "j-1", After: "dir/a"}, []string{"j-1:dir/b"}},
		{"limit", store.JobFileFilter{Limit: 2}, []string{"j-1:dir/a", "j-1:dir/b"}},
		{"no match", store.JobFileFilter{Job: "j-none"}, []string{}},
	} {
		got, err := s.ListJobFiles(ctx, tc.f)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if ps := filePaths(got); !reflect.DeepEqual(ps, tc.want) {
			t.Errorf("files by %s: %v, want %v", tc.name, ps, tc.want)
		}
	}
	want := map[string]store.FileCount{
		transfer.FileActive:    {Files: 1, Bytes: ua.Size},
		transfer.FileSucceeded: {Files: 1, Bytes: ub2.Size},
	}
	if n, err := s.CountJobFiles(ctx, "j-1"); err != nil || !reflect.DeepEqual(n, want) {
		t.Errorf("count of j-1's files: %v, %v; want %v", n, err, want)
	}
	if n, err := s.CountJobFiles(ctx, "j-none"); err != nil || len(n) != 0 {
		t.Errorf("count of a missing job's files: %v, %v", n, err)
	}
}

// testJobFilesAtomic: a job's files come by the thousand, each call
// storing all of them or none, across the statements it takes (eight
// here: 4,000 files, batchRows 500; ten thousand took 17 s under the race
// detector on a busy machine and taught nothing more).
func testJobFilesAtomic(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	mustJob(t, s, sampleJob("j-1", "alice", "", 0))
	const n = 4_000
	files := make([]transfer.JobFile, n)
	var bytes int64
	for i := range files {
		files[i] = transfer.JobFile{Job: "j-1", Path: fmt.Sprintf("d%02d/f%05d", i%37, i), Size: int64(i), State: transfer.FilePending}
		bytes += int64(i)
	}
	if err := s.AddJobFiles(ctx, files); err != nil {
		t.Fatal(err)
	}
	count := func(what string, want map[string]store.FileCount) {
		t.Helper()
		if got, err := s.CountJobFiles(ctx, "j-1"); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, %v; want %v", what, got, err, want)
		}
	}
	count("after adding 4,000 files", map[string]store.FileCount{transfer.FilePending: {Files: n, Bytes: bytes}})

	// A stored file late in a long call: nothing of the call is stored.
	more := make([]transfer.JobFile, 1200)
	for i := range more {
		more[i] = transfer.JobFile{Job: "j-1", Path: fmt.Sprintf("more/%05d", i), Size: 1, State: transfer.FilePending}
	}
	more[1100] = files[7]
	wantErr(t, "add 1,200 files, the 1,101st stored", s.AddJobFiles(ctx, more), reserve.ErrConflict)
	more[1100] = more[3]
	wantErr(t, "add 1,200 files, one twice", s.AddJobFiles(ctx, more), reserve.ErrConflict)
	count("after refused adds", map[string]store.FileCount{transfer.FilePending: {Files: n, Bytes: bytes}})

	// An unknown file late in a long update: nothing of the call is stored.
	up := make([]transfer.JobFile, 1200)
	for i := range up {
		up[i] = files[i]
		up[i].State = transfer.FileActive
	}
	up[1100].Path = "none"
	wantErr(t, "update 1,200 files, the 1,101st unknown", s.UpdateJobFiles(ctx, up), reserve.ErrNotFound)
	count("after a refused update", map[string]store.FileCount{transfer.FilePending: {Files: n, Bytes: bytes}})

	for i := range files {
		files[i].State, files[i].Task = transfer.FileActive, fmt.Sprintf("k-%d", i%3)
	}
	if err := s.UpdateJobFiles(ctx, files); err != nil {
		t.Fatal(err)
	}
	count("after updating 4,000 files", map[string]store.FileCount{transfer.FileActive: {Files: n, Bytes: bytes}})
	if got, err := s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-1", Task: "k-1"}); err != nil || len(got) != n/3 {
		t.Errorf("files of task k-1: %d, %v; want %d", len(got), err, n/3)
	}

	// Many paths at once, paged.
	var paths []string
	for i := 0; i < n; i += 4 {
		paths = append(paths, files[i].Path)
	}
	paths = append(paths, "none")
	sorted := slices.Clone(paths[:len(paths)-1])
	slices.Sort(sorted)
	after := sorted[100]
	got, err := s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-1", Paths: paths, After: after, Limit: 700})
	if err != nil {
		t.Fatal(err)
	}
	var gotPaths []string
	for _, f := range got {
		gotPaths = append(gotPaths, f.Path)
	}
	if want := sorted[101:801]; !reflect.DeepEqual(gotPaths, want) {
		t.Errorf("1,000 paths after the 101st, 700 at most: %d paths from %v, want %d from %v", len(gotPaths), gotPaths[:1], len(want), want[:1])
	}
}

// testJobFilesPaging: After and Limit page through a job's files in byte
// order of their paths, whatever the database's collation.
func testJobFilesPaging(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	paths := []string{"b", "B", "a", "A", "a b", "a-b", "a.b", "a/b", "a/B", "ä", "é", "z", "Z", "_x", "1", "10", "9", "ab", "aB", "日本"}
	for _, job := range []string{"j-a", "j-B"} {
		mustJob(t, s, sampleJob(job, "alice", "", 0))
		var files []transfer.JobFile
		for i, p := range paths {
			state := transfer.FilePending
			if i%2 == 1 {
				state = transfer.FileActive
			}
			files = append(files, sampleFile(job, p, state))
		}
		if err := s.AddJobFiles(ctx, files); err != nil {
			t.Fatal(err)
		}
	}
	sorted := slices.Clone(paths)
	slices.Sort(sorted)
	var want []string
	for _, job := range []string{"j-B", "j-a"} { // byte order
		for _, p := range sorted {
			want = append(want, job+":"+p)
		}
	}
	all, err := s.ListJobFiles(ctx, store.JobFileFilter{})
	if err != nil || !reflect.DeepEqual(filePaths(all), want) {
		t.Errorf("every file: %v, %v; want %v", filePaths(all), err, want)
	}
	var paged []string
	after := ""
	for range len(paths) {
		page, err := s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-a", After: after, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, f := range page {
			paged = append(paged, f.Path)
		}
		after = page[len(page)-1].Path
	}
	if !reflect.DeepEqual(paged, sorted) {
		t.Errorf("j-a's files three at a time: %q, want %q", paged, sorted)
	}
	// Paging a state: the pending ones, two at a time.
	var pending, wantPending []string
	for i, p := range paths {
		if i%2 == 0 {
			wantPending = append(wantPending, p)
		}
	}
	slices.Sort(wantPending)
	after = ""
	for range len(paths) {
		page, err := s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-B", States: []string{transfer.FilePending}, After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, f := range page {
			pending = append(pending, f.Path)
		}
		after = page[len(page)-1].Path
	}
	if !reflect.DeepEqual(pending, wantPending) {
		t.Errorf("j-B's pending files two at a time: %q, want %q", pending, wantPending)
	}
}

// testJobFilesBatches: a listing stored a page at a time is checked by
// destination (Dests, chunked past one statement's rows), and a job's
// files are deleted a bounded number at a time with their parts, the
// other jobs' untouched (issue 28, finding 7).
func testJobFilesBatches(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	for _, job := range []string{"j-a", "j-b"} {
		mustJob(t, s, sampleJob(job, "alice", "", 0))
		var files []transfer.JobFile
		for i := range 1200 {
			files = append(files, sampleFile(job, fmt.Sprintf("f%04d", i), transfer.FilePending))
		}
		if err := s.AddJobFiles(ctx, files); err != nil {
			t.Fatal(err)
		}
		if err := s.AddFileParts(ctx, []transfer.FilePart{samplePart(job, "f0000", 0, transfer.FilePending), samplePart(job, "f1100", 0, transfer.FilePending)}); err != nil {
			t.Fatal(err)
		}
	}
	// By destination: one, none, and 1,100 asked at once (three chunks).
	got, err := s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-a", Dests: []string{"in/f0007", "in/nothing"}})
	if err != nil || len(got) != 1 || got[0].Path != "f0007" || got[0].Dest != "in/f0007" {
		t.Errorf("j-a's file landing at in/f0007: %v, %v", filePaths(got), err)
	}
	var dests []string
	for i := 100; i < 1200; i++ {
		dests = append(dests, fmt.Sprintf("in/f%04d", i))
	}
	got, err = s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-b", Dests: dests, Limit: 1050})
	if err != nil || len(got) != 1050 || got[0].Path != "f0100" || got[1049].Path != "f1149" {
		t.Errorf("j-b's files landing at 1,100 destinations, at most 1,050: %d, %v", len(got), err)
	}
	got, err = s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-b", Dests: dests, Paths: []string{"f0050", "f0150", "f1199"}})
	if err != nil || !reflect.DeepEqual(filePaths(got), []string{"j-b:f0150", "j-b:f1199"}) {
		t.Errorf("j-b's files by path and destination: %v, %v", filePaths(got), err)
	}
	// By destination across jobs (Job empty), in one state: every job's
	// file landing there, by the (dest, state) index (issue 29).
	if err := s.UpdateJobFiles(ctx, []transfer.JobFile{sampleFile("j-a", "f0007", transfer.FileActive)}); err != nil {
		t.Fatal(err)
	}
	got, err = s.ListJobFiles(ctx, store.JobFileFilter{Dests: []string{"in/f0007", "in/f0008"}, States: []string{transfer.FilePending}})
	if err != nil || !reflect.DeepEqual(filePaths(got), []string{"j-a:f0008", "j-b:f0007", "j-b:f0008"}) {
		t.Errorf("every job's pending files landing at in/f0007 and in/f0008: %v, %v", filePaths(got), err)
	}
	got, err = s.ListJobFiles(ctx, store.JobFileFilter{Dests: dests, States: []string{transfer.FilePending, transfer.FileActive}, Limit: 3})
	if err != nil || !reflect.DeepEqual(filePaths(got), []string{"j-a:f0100", "j-a:f0101", "j-a:f0102"}) {
		t.Errorf("the first 3 files of every job landing at 1,100 destinations: %v, %v", filePaths(got), err)
	}
	// Deleted 500 at a time: 500, 500, 200, then none.
	for _, want := range []int{500, 500, 200, 0} {
		n, err := s.DeleteJobFiles(ctx, "j-a", 500)
		if err != nil || n != want {
			t.Fatalf("delete 500 of j-a's files: %d, %v; want %d", n, err, want)
		}
	}
	if c, err := s.CountJobFiles(ctx, "j-a"); err != nil || len(c) != 0 {
		t.Errorf("j-a's files after the deletes: %v, %v", c, err)
	}
	if ps, err := s.ListFileParts(ctx, store.FilePartFilter{Job: "j-a"}); err != nil || len(ps) != 0 {
		t.Errorf("j-a's parts after its files went: %d, %v", len(ps), err)
	}
	if c, err := s.CountJobFiles(ctx, "j-b"); err != nil || c[transfer.FilePending].Files != 1200 {
		t.Errorf("j-b's files: %v, %v; want its 1,200 untouched", c, err)
	}
	if ps, err := s.ListFileParts(ctx, store.FilePartFilter{Job: "j-b"}); err != nil || len(ps) != 2 {
		t.Errorf("j-b's parts: %d, %v; want its 2", len(ps), err)
	}
	// The first by path go first: j-b's first 10 leave f0010 first.
	if n, err := s.DeleteJobFiles(ctx, "j-b", 10); err != nil || n != 10 {
		t.Fatalf("delete 10 of j-b's files: %d, %v", n, err)
	}
	got, err = s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-b", Limit: 1})
	if err != nil || len(got) != 1 || got[0].Path != "f0010" {
		t.Errorf("j-b's first file after 10 deleted: %v, %v", filePaths(got), err)
	}
	if ps, err := s.ListFileParts(ctx, store.FilePartFilter{Job: "j-b"}); err != nil || len(ps) != 1 || ps[0].Path != "f1100" {
		t.Errorf("j-b's parts after f0000 went: %v, %v", ps, err)
	}
	if n, err := s.DeleteJobFiles(ctx, "j-none", 10); err != nil || n != 0 {
		t.Errorf("delete the files of a missing job: %d, %v; want 0, nil", n, err)
	}
	wantErr(t, "delete files with limit 0", func() error { _, err := s.DeleteJobFiles(ctx, "j-b", 0); return err }(), reserve.ErrInvalid)
}

func testTasks(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	mustJob(t, s, sampleJob("j-1", "alice", "", 0))
	mustJob(t, s, sampleJob("j-2", "alice", "", 0))
	k := sampleTask("k-1", "j-1", transfer.TaskCopy, 0)
	if err := s.CreateTask(ctx, k); err != nil {
		t.Fatal(err)
	}
	k.Files[0] = "changed" // what was given is the caller's
	k = sampleTask("k-1", "j-1", transfer.TaskCopy, 0)
	got, err := s.GetTask(ctx, "k-1")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "task", got, k)
	if got.CreatedAt.Location() != time.UTC || got.LeaseExpires.Location() != time.UTC {
		t.Errorf("task times not in UTC: %v %v", got.CreatedAt, got.LeaseExpires)
	}
	got.Files[0] = "changed"
	if again, err := s.GetTask(ctx, "k-1"); err != nil || again.Files[0] != "a" {
		t.Errorf("task after changing a copy: %v, %v", again.Files, err)
	}
	wantErr(t, "create a taken task id", s.CreateTask(ctx, sampleTask("k-1", "j-2", transfer.TaskList, 0)), reserve.ErrConflict)
	wantErr(t, "create a task of a missing job", s.CreateTask(ctx, sampleTask("k-x", "j-none", transfer.TaskList, 0)), reserve.ErrNotFound)
	_, err = s.GetTask(ctx, "k-none")
	wantErr(t, "get a missing task", err, reserve.ErrNotFound)
	bad := func(f func(*transfer.Task)) transfer.Task {
		k := sampleTask("k-1", "j-1", transfer.TaskCopy, 0)
		f(&k)
		return k
	}
	for _, tc := range []struct {
		name string
		k    transfer.Task
	}{
		{"no id", bad(func(k *transfer.Task) { k.ID = "" })},
		{"no job", bad(func(k *transfer.Task) { k.Job = "" })},
		{"no kind", bad(func(k *transfer.Task) { k.Kind = "" })},
		{"no state", bad(func(k *transfer.Task) { k.State = "" })},
		{"NUL in the id", bad(func(k *transfer.Task) { k.ID = "k\x00" })},
		{"NUL in the source node", bad(func(k *transfer.Task) { k.From = "h\x001" })},
		{"invalid UTF-8 in the destination node", bad(func(k *transfer.Task) { k.To = "h\xff" })},
		{"invalid UTF-8 in a file", bad(func(k *transfer.Task) { k.Files = []string{"ok", "\xff"} })},
		{"NUL in a file", bad(func(k *transfer.Task) { k.Files = []string{"ok", "a\x00"} })},
		{"NUL in the error", bad(func(k *transfer.Task) { k.Error = "\x00" })},
		{"invalid UTF-8 in the error", bad(func(k *transfer.Task) { k.Error = "\xff" })},
		{"a lease to 2300", bad(func(k *transfer.Task) { k.LeaseExpires = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC) })},
	} {
		c := tc.k
		if c.ID == "k-1" {
			c.ID = "k-new"
		}
		wantErr(t, "create a task with "+tc.name, s.CreateTask(ctx, c), reserve.ErrInvalid)
		if tc.k.ID == "k-1" && tc.k.Job != "" && tc.k.Kind != "" {
			wantErr(t, "update a task with "+tc.name, s.UpdateTask(ctx, tc.k), reserve.ErrInvalid)
		}
	}
	if got, err := s.GetTask(ctx, "k-1"); err != nil {
		t.Fatal(err)
	} else {
		same(t, "task after refused updates", got, k)
	}
	// Updates change everything but Job, Kind and CreatedAt.
	up := sampleTask("k-1", "j-2", transfer.TaskList, time.Hour)
	up.State, up.Attempt, up.From, up.To, up.Files, up.EndedAt, up.Error = transfer.TaskSucceeded, 3, "h3", "h4", nil, base.Add(2*time.Hour), ""
	if err := s.UpdateTask(ctx, up); err != nil {
		t.Fatal(err)
	}
	want := up
	want.Job, want.Kind, want.CreatedAt = k.Job, k.Kind, k.CreatedAt
	if got, err := s.GetTask(ctx, "k-1"); err != nil {
		t.Fatal(err)
	} else {
		same(t, "updated task", got, want)
	}
	wantErr(t, "update a missing task", s.UpdateTask(ctx, sampleTask("k-none", "j-1", transfer.TaskCopy, 0)), reserve.ErrNotFound)
	// A task's endpoint is set once: kept by later updates, given to a
	// task stored without one.
	up.Endpoint = "cern"
	if err := s.UpdateTask(ctx, up); err != nil {
		t.Fatal(err)
	}
	up.Endpoint = "fnal"
	if err := s.UpdateTask(ctx, up); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetTask(ctx, "k-1"); err != nil || got.Endpoint != "cern" {
		t.Fatalf("endpoint after updates: %q %v, want cern", got.Endpoint, err)
	}
	if got, err := s.ListTasks(ctx, store.TaskFilter{Endpoint: "cern"}); err != nil || len(got) != 1 {
		t.Fatalf("tasks of endpoint cern: %v %v", taskIDs(got), err)
	}

	for _, k := range []transfer.Task{
		{ID: "k-2", Job: "j-1", Kind: transfer.TaskCopy, State: transfer.TaskQueued, From: "h1", To: "h2", Endpoint: "cern", CreatedAt: base.Add(time.Minute)},
		{ID: "k-3", Job: "j-2", Kind: transfer.TaskCopy, State: transfer.TaskActive, From: "h2", To: "h5", CreatedAt: base.Add(time.Minute)},
		{ID: "k-0", Job: "j-2", Kind: transfer.TaskList, State: transfer.TaskQueued, From: "h6", Endpoint: "fnal", CreatedAt: base.Add(time.Minute)},
		{ID: "k-4", Job: "j-1", Kind: transfer.TaskCopy, State: transfer.TaskFailed, From: "h1", To: "h2", CreatedAt: base.Add(-time.Minute)},
	} {
		if err := s.CreateTask(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		f    store.TaskFilter
		want []string
	}{
		{"all, oldest first, then by ID", store.TaskFilter{}, []string{"k-4", "k-1", "k-0", "k-2", "k-3"}},
		{"job", store.TaskFilter{Job: "j-2"}, []string{"k-0", "k-3"}},
		{"kind (k-1 keeps its own)", store.TaskFilter{Kind: transfer.TaskList}, []string{"k-0"}},
		{"states", store.TaskFilter{States: []string{transfer.TaskQueued, transfer.TaskActive}}, []string{"k-0", "k-2", "k-3"}},
		{"node, source or destination", store.TaskFilter{Node: "h2"}, []string{"k-4", "k-2", "k-3"}},
		{"node and state", store.TaskFilter{Node: "h2", States: []string{transfer.TaskQueued}}, []string{"k-2"}},
		{"job, kind and limit", store.TaskFilter{Job: "j-1", Kind: transfer.TaskCopy, Limit: 1}, []string{"k-4"}},
		{"no match", store.TaskFilter{Node: "h9"}, []string{}},
		{"endpoint", store.TaskFilter{Endpoint: "fnal"}, []string{"k-0"}},
		{"endpoint (k-1 got its own by an update)", store.TaskFilter{Endpoint: "cern"}, []string{"k-1", "k-2"}},
		{"endpoint, kind, state and limit", store.TaskFilter{Endpoint: "cern", Kind: transfer.TaskCopy, States: []string{transfer.TaskQueued}, Limit: 1}, []string{"k-2"}},
	} {
		got, err := s.ListTasks(ctx, tc.f)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if ids := taskIDs(got); !reflect.DeepEqual(ids, tc.want) {
			t.Errorf("tasks by %s: %v, want %v", tc.name, ids, tc.want)
		}
	}
}

func testEndpoints(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	cern := transfer.Endpoint{Name: "cern", Site: "geneva", Users: []string{"alice"}, Projects: []string{"atlas"},
		Nodes: []transfer.DataNode{{Node: "h1", Endpoint: "cern"}}, CreatedAt: base}
	for _, e := range []transfer.Endpoint{cern, {Name: "Zeta", CreatedAt: base}, {Name: "fnal", Site: "batavia"}} {
		if err := s.PutEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	want := cern
	want.Nodes = nil
	got, err := s.GetEndpoint(ctx, "cern")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "endpoint", got, want)
	got.Users[0] = "changed"
	if again, err := s.GetEndpoint(ctx, "cern"); err != nil || again.Users[0] != "alice" {
		t.Errorf("endpoint after changing a copy: %v, %v", again.Users, err)
	}
	// A put replaces.
	cern2 := transfer.Endpoint{Name: "cern", Site: "meyrin", CreatedAt: base.Add(time.Hour)}
	if err := s.PutEndpoint(ctx, cern2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetEndpoint(ctx, "cern"); err != nil {
		t.Fatal(err)
	} else {
		same(t, "replaced endpoint", got, cern2)
	}
	if l, err := s.ListEndpoints(ctx); err != nil {
		t.Fatal(err)
	} else {
		var names []string
		for _, e := range l {
			names = append(names, e.Name)
		}
		if want := []string{"Zeta", "cern", "fnal"}; !reflect.DeepEqual(names, want) {
			t.Errorf("endpoints: %v, want %v (byte order)", names, want)
		}
	}
	_, err = s.GetEndpoint(ctx, "none")
	wantErr(t, "get a missing endpoint", err, reserve.ErrNotFound)
	for _, tc := range []struct {
		name string
		e    transfer.Endpoint
	}{
		{"no name", transfer.Endpoint{Site: "x"}},
		{"NUL in the name", transfer.Endpoint{Name: "a\x00"}},
		{"invalid UTF-8 in the name", transfer.Endpoint{Name: "a\xff"}},
		{"invalid UTF-8 in a user", transfer.Endpoint{Name: "cern", Users: []string{"\xff"}}},
		{"NUL in a project", transfer.Endpoint{Name: "cern", Projects: []string{"a\x00"}}},
		{"created in 1600", transfer.Endpoint{Name: "cern", CreatedAt: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)}},
	} {
		wantErr(t, "put an endpoint with "+tc.name, s.PutEndpoint(ctx, tc.e), reserve.ErrInvalid)
	}
	if got, err := s.GetEndpoint(ctx, "cern"); err != nil || got.Site != "meyrin" {
		t.Errorf("endpoint after refused puts: %+v, %v", got, err)
	}

	// Data nodes: an upsert by node, Alive never stored.
	h2 := transfer.DataNode{Node: "h2", Endpoint: "fnal", Address: "198.18.2.2:7071", MaxRateBps: 1e9, Parts: true,
		RegisteredAt: base, LeaseExpires: base.Add(30 * time.Second), Alive: true}
	h1 := transfer.DataNode{Node: "h1", Endpoint: "cern", Address: "198.18.1.2:7071", RegisteredAt: base, LeaseExpires: base.Add(time.Second)}
	H := transfer.DataNode{Node: "H", Endpoint: "cern", Address: "[::1]:1", RegisteredAt: base, LeaseExpires: base}
	for _, n := range []transfer.DataNode{h2, h1, H} {
		if err := s.PutDataNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// A node does not move to another endpoint by registering: only once
	// its registration is deleted.
	h1.LeaseExpires = base.Add(2 * time.Second)
	if err := s.PutDataNode(ctx, h1); err != nil {
		t.Fatalf("renew h1: %v", err)
	}
	moved := h1
	moved.Endpoint, moved.LeaseExpires, moved.Address = "fnal", base.Add(time.Hour), "198.18.1.3:7071"
	wantErr(t, "move h1 to fnal by registering", s.PutDataNode(ctx, moved), reserve.ErrConflict)
	if ns, err := s.ListDataNodes(ctx); err != nil || len(ns) != 3 || ns[1].Endpoint != "cern" || !ns[1].LeaseExpires.Equal(base.Add(2*time.Second)) {
		t.Errorf("data nodes after a refused move: %+v, %v", ns, err)
	}
	wantErr(t, "delete an unregistered data node", s.DeleteDataNode(ctx, "h9"), reserve.ErrNotFound)
	if err := s.DeleteDataNode(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	h1 = moved
	if err := s.PutDataNode(ctx, h1); err != nil {
		t.Fatal(err)
	}
	h2.Alive = false
	ns, err := s.ListDataNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "data nodes", ns, []transfer.DataNode{H, h1, h2})
	for _, tc := range []struct {
		name string
		n    transfer.DataNode
	}{
		{"no node", transfer.DataNode{Endpoint: "cern"}},
		{"no endpoint", transfer.DataNode{Node: "h9"}},
		{"NUL in the node", transfer.DataNode{Node: "h\x00", Endpoint: "cern"}},
		{"NUL in the endpoint", transfer.DataNode{Node: "h9", Endpoint: "c\x00"}},
		{"invalid UTF-8 in the address", transfer.DataNode{Node: "h9", Endpoint: "cern", Address: "\xff"}},
		{"NUL in the address", transfer.DataNode{Node: "h9", Endpoint: "cern", Address: "h\x00:1"}},
		{"a lease to 2400", transfer.DataNode{Node: "h9", Endpoint: "cern", LeaseExpires: time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC)}},
	} {
		wantErr(t, "put a data node with "+tc.name, s.PutDataNode(ctx, tc.n), reserve.ErrInvalid)
	}
	if ns, err := s.ListDataNodes(ctx); err != nil || len(ns) != 3 {
		t.Errorf("data nodes after refused puts: %v, %v", ns, err)
	}

	// Deleting an endpoint deletes its data nodes' registrations, and
	// nothing of the others.
	wantErr(t, "delete an endpoint that does not exist", s.DeleteEndpoint(ctx, "none"), reserve.ErrNotFound)
	if err := s.DeleteEndpoint(ctx, "fnal"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "get a deleted endpoint", func() error { _, err := s.GetEndpoint(ctx, "fnal"); return err }(), reserve.ErrNotFound)
	if ns, err := s.ListDataNodes(ctx); err != nil {
		t.Fatal(err)
	} else {
		same(t, "data nodes after deleting fnal", ns, []transfer.DataNode{H})
	}
	if l, err := s.ListEndpoints(ctx); err != nil || len(l) != 2 {
		t.Errorf("endpoints after deleting fnal: %+v, %v", l, err)
	}
}

func testDecisions(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	mustJob(t, s, sampleJob("j-1", "alice", "", 0))
	mustJob(t, s, sampleJob("j-2", "alice", "", 0))
	d := func(job string, at time.Duration, reason string) transfer.Decision {
		return transfer.Decision{Job: job, From: "h1", To: "h2", At: base.Add(at), Concurrency: 4, Streams: 8,
			ThroughputBps: 9.5e9, SuccessRate: 0.75, Reason: reason}
	}
	given := []transfer.Decision{d("j-1", 1, "one"), d("j-1", 3, "three"), d("j-2", 2, "other"), d("j-1", 2, "two"), d("j-1", 3, "three again")}
	for _, x := range given {
		if err := s.AppendDecision(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ListDecisions(ctx, "j-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "decisions, newest first", got, []transfer.Decision{given[4], given[1], given[3], given[0]})
	if got, err := s.ListDecisions(ctx, "j-1", 2); err != nil || len(got) != 2 || got[1].Reason != "three" {
		t.Errorf("the newest two decisions: %+v, %v", got, err)
	}
	if got, err := s.ListDecisions(ctx, "j-none", 0); err != nil || len(got) != 0 {
		t.Errorf("decisions of a missing job: %+v, %v", got, err)
	}
	wantErr(t, "append a decision of a missing job", s.AppendDecision(ctx, d("j-none", 0, "x")), reserve.ErrNotFound)
	for _, tc := range []struct {
		name string
		f    func(*transfer.Decision)
	}{
		{"no job", func(x *transfer.Decision) { x.Job = "" }},
		{"NUL in the job", func(x *transfer.Decision) { x.Job = "j-1\x00" }},
		{"invalid UTF-8 in the reason", func(x *transfer.Decision) { x.Reason = "\xff" }},
		{"NUL in the reason", func(x *transfer.Decision) { x.Reason = "a\x00" }},
		{"a NaN throughput", func(x *transfer.Decision) { x.ThroughputBps = math.NaN() }},
		{"a time in 1200", func(x *transfer.Decision) { x.At = time.Date(1200, 1, 1, 0, 0, 0, 0, time.UTC) }},
	} {
		x := d("j-1", 9, "bad")
		tc.f(&x)
		wantErr(t, "append a decision with "+tc.name, s.AppendDecision(ctx, x), reserve.ErrInvalid)
	}
	if got, err := s.ListDecisions(ctx, "j-1", 0); err != nil || len(got) != 4 {
		t.Errorf("decisions after refusals: %d, %v", len(got), err)
	}
}

// testJobsTxRestart: the transfer service's writes take part in Tx, and
// what was committed is there after the store is opened again.
func testJobsTxRestart(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	boom := errors.New("boom")
	write := func(tx store.Store, id string) error {
		return errors.Join(
			tx.CreateJob(ctx, sampleJob(id, "alice", "key-"+id, 0)),
			tx.AddJobFiles(ctx, []transfer.JobFile{sampleFile(id, "a", transfer.FilePending)}),
			tx.CreateTask(ctx, sampleTask("k-"+id, id, transfer.TaskList, 0)),
			tx.AppendDecision(ctx, transfer.Decision{Job: id, At: base, Reason: "start"}),
			tx.PutEndpoint(ctx, transfer.Endpoint{Name: "ep-" + id}),
			tx.PutDataNode(ctx, transfer.DataNode{Node: "n-" + id, Endpoint: "ep-" + id}),
		)
	}
	err := s.Tx(ctx, func(tx store.Store) error {
		if err := write(tx, "j-1"); err != nil {
			return err
		}
		if n, err := tx.CountJobFiles(ctx, "j-1"); err != nil || n[transfer.FilePending].Files != 1 {
			t.Errorf("a Tx does not see its own file: %v, %v", n, err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Tx: %v, want its fn's error", err)
	}
	_, err = s.GetJob(ctx, "j-1")
	wantErr(t, "a job of a rolled back Tx", err, reserve.ErrNotFound)
	if eps, err := s.ListEndpoints(ctx); err != nil || len(eps) != 0 {
		t.Errorf("endpoints of a rolled back Tx: %v, %v", eps, err)
	}
	if err := s.Tx(ctx, func(tx store.Store) error { return write(tx, "j-2") }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, url)
	if j, err := s.GetJobByKey(ctx, "alice", "key-j-2"); err != nil {
		t.Fatal(err)
	} else {
		same(t, "job after a restart", j, sampleJob("j-2", "alice", "key-j-2", 0))
	}
	fs, err1 := s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-2"})
	k, err2 := s.GetTask(ctx, "k-j-2")
	ds, err3 := s.ListDecisions(ctx, "j-2", 0)
	ep, err4 := s.GetEndpoint(ctx, "ep-j-2")
	ns, err5 := s.ListDataNodes(ctx)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || k.ID != "k-j-2" || len(ds) != 1 || ep.Name != "ep-j-2" || len(ns) != 1 {
		t.Errorf("after a restart: files %v, task %q, decisions %d, endpoint %q, data nodes %d", filePaths(fs), k.ID, len(ds), ep.Name, len(ns))
	}
}

func partKeys(ps []transfer.FilePart) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s:%s:%d", p.Job, p.Path, p.Index))
	}
	return out
}

func testFileParts(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	mustJob(t, s, sampleJob("j-1", "alice", "", 0))
	mustJob(t, s, sampleJob("j-2", "alice", "", 0))
	if err := s.AddFileParts(ctx, nil); err != nil {
		t.Errorf("add no parts: %v", err)
	}
	// Given out of order; listed by job, path (byte order), index.
	given := []transfer.FilePart{
		samplePart("j-1", "big", 1, transfer.FilePending),
		samplePart("j-1", "big", 0, transfer.FileActive),
		samplePart("j-1", "Big", 0, transfer.FilePending),
		samplePart("j-2", "big", 0, transfer.FileSucceeded),
		samplePart("j-1", "big", 10, transfer.FilePending),
	}
	given[2].Task, given[2].Error, given[2].Complete, given[2].FileChecksum, given[2].To = "", "", false, "", ""
	if err := s.AddFileParts(ctx, given); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListFileParts(ctx, store.FilePartFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"j-1:Big:0", "j-1:big:0", "j-1:big:1", "j-1:big:10", "j-2:big:0"}; !reflect.DeepEqual(partKeys(got), want) {
		t.Fatalf("parts: %v, want %v", partKeys(got), want)
	}
	same(t, "part", got[1], given[1])
	same(t, "part without task", got[0], given[2])
	for _, tc := range []struct {
		name string
		f    store.FilePartFilter
		want []string
	}{
		{"job", store.FilePartFilter{Job: "j-2"}, []string{"j-2:big:0"}},
		{"paths", store.FilePartFilter{Job: "j-1", Paths: []string{"big"}}, []string{"j-1:big:0", "j-1:big:1", "j-1:big:10"}},
		{"states", store.FilePartFilter{States: []string{transfer.FilePending}}, []string{"j-1:Big:0", "j-1:big:1", "j-1:big:10"}},
		{"task", store.FilePartFilter{Task: "k-big"}, []string{"j-1:big:0", "j-1:big:1", "j-1:big:10", "j-2:big:0"}},
		{"limit", store.FilePartFilter{Job: "j-1", Limit: 2}, []string{"j-1:Big:0", "j-1:big:0"}},
		{"no owner", store.FilePartFilter{To: []string{""}}, []string{"j-1:Big:0"}},
		{"owner or none", store.FilePartFilter{States: []string{transfer.FilePending}, To: []string{"", "h2"}}, []string{"j-1:Big:0", "j-1:big:1", "j-1:big:10"}},
		{"another owner", store.FilePartFilter{To: []string{"h9"}}, []string{}},
		{"none", store.FilePartFilter{Job: "j-none"}, []string{}},
	} {
		ps, err := s.ListFileParts(ctx, tc.f)
		if err != nil || !reflect.DeepEqual(partKeys(ps), tc.want) {
			t.Errorf("list by %s: %v, %v; want %v", tc.name, partKeys(ps), err, tc.want)
		}
	}

	// An update replaces the whole part (a part given twice ends as
	// given last); an unknown one stores nothing.
	up := got[2]
	up.State, up.Task, up.Attempts, up.Checksum, up.Complete, up.To = transfer.FileActive, "k-9", 3, "", false, "h7"
	first := up
	first.State = transfer.FileFailed
	if err := s.UpdateFileParts(ctx, []transfer.FilePart{first, up}); err != nil {
		t.Fatal(err)
	}
	if ps, err := s.ListFileParts(ctx, store.FilePartFilter{To: []string{"h7"}}); err != nil || len(ps) != 1 {
		t.Fatalf("parts to h7: %+v, %v", ps, err)
	}
	if ps, err := s.ListFileParts(ctx, store.FilePartFilter{Task: "k-9"}); err != nil || len(ps) != 1 {
		t.Fatalf("updated part: %+v, %v", ps, err)
	} else {
		same(t, "updated part", ps[0], up)
	}
	up2 := up
	up2.State = transfer.FileSucceeded
	missing := samplePart("j-1", "nope", 0, transfer.FilePending)
	wantErr(t, "update an unknown part", s.UpdateFileParts(ctx, []transfer.FilePart{up2, missing}), reserve.ErrNotFound)
	if ps, _ := s.ListFileParts(ctx, store.FilePartFilter{Task: "k-9"}); len(ps) != 1 || ps[0].State != transfer.FileActive {
		t.Errorf("a refused update changed a part: %+v", ps)
	}

	// Refused additions store nothing.
	wantErr(t, "add a part of a missing job", s.AddFileParts(ctx, []transfer.FilePart{samplePart("j-none", "x", 0, transfer.FilePending)}), reserve.ErrNotFound)
	wantErr(t, "add a stored part", s.AddFileParts(ctx, []transfer.FilePart{
		samplePart("j-1", "new", 0, transfer.FilePending), samplePart("j-1", "big", 0, transfer.FilePending)}), reserve.ErrConflict)
	wantErr(t, "add a part twice", s.AddFileParts(ctx, []transfer.FilePart{
		samplePart("j-1", "new", 0, transfer.FilePending), samplePart("j-1", "new", 0, transfer.FilePending)}), reserve.ErrConflict)
	bad := func(f func(*transfer.FilePart)) transfer.FilePart {
		p := samplePart("j-1", "new-bad", 0, transfer.FilePending)
		f(&p)
		return p
	}
	for _, tc := range []struct {
		name string
		p    transfer.FilePart
	}{
		{"no job", bad(func(p *transfer.FilePart) { p.Job = "" })},
		{"no path", bad(func(p *transfer.FilePart) { p.Path = "" })},
		{"no state", bad(func(p *transfer.FilePart) { p.State = "" })},
		{"negative index", bad(func(p *transfer.FilePart) { p.Index = -1 })},
		{"NUL in the path", bad(func(p *transfer.FilePart) { p.Path = "a\x00" })},
		{"invalid UTF-8 in the error", bad(func(p *transfer.FilePart) { p.Error = "\xff" })},
		{"NUL in the task", bad(func(p *transfer.FilePart) { p.Task = "k\x00" })},
	} {
		wantErr(t, "add a part with "+tc.name, s.AddFileParts(ctx, []transfer.FilePart{samplePart("j-1", "new", 0, transfer.FilePending), tc.p}), reserve.ErrInvalid)
		wantErr(t, "update a part with "+tc.name, s.UpdateFileParts(ctx, []transfer.FilePart{tc.p}), reserve.ErrInvalid)
	}
	if ps, _ := s.ListFileParts(ctx, store.FilePartFilter{Paths: []string{"new", "new-bad"}}); len(ps) != 0 {
		t.Errorf("refused additions stored %v", partKeys(ps))
	}
	// Many parts (more than one statement's batch) in one call.
	var many []transfer.FilePart
	for i := range 1200 {
		many = append(many, transfer.FilePart{Job: "j-2", Path: "huge", Part: transfer.Part{Index: i, Offset: int64(i) << 22, Length: 1 << 22}, State: transfer.FilePending})
	}
	if err := s.AddFileParts(ctx, many); err != nil {
		t.Fatal(err)
	}
	for i := range many {
		many[i].To = "h3"
	}
	if err := s.UpdateFileParts(ctx, many); err != nil {
		t.Fatal(err)
	}
	if ps, err := s.ListFileParts(ctx, store.FilePartFilter{Job: "j-2", Paths: []string{"huge"}, To: []string{"h3"}}); err != nil || len(ps) != 1200 || ps[1199].Index != 1199 {
		t.Fatalf("many parts updated: %d, %v", len(ps), err)
	}
	many[1100].Path = "none"
	wantErr(t, "update many parts, one unknown", s.UpdateFileParts(ctx, many), reserve.ErrNotFound)

	// Inside a transaction rolled back, nothing stays.
	errBoom := errors.New("boom")
	err = s.Tx(ctx, func(tx store.Store) error {
		if err := tx.AddFileParts(ctx, []transfer.FilePart{samplePart("j-1", "tx", 0, transfer.FilePending)}); err != nil {
			return err
		}
		if ps, err := tx.ListFileParts(ctx, store.FilePartFilter{Paths: []string{"tx"}}); err != nil || len(ps) != 1 {
			t.Errorf("a transaction does not see its part: %v, %v", ps, err)
		}
		return errBoom
	})
	wantErr(t, "rolled back transaction", err, errBoom)
	if ps, _ := s.ListFileParts(ctx, store.FilePartFilter{Paths: []string{"tx"}}); len(ps) != 0 {
		t.Errorf("a rolled back part stayed: %v", partKeys(ps))
	}
}

// testJobSweeps checks the sweeps of ended jobs: one a job (a put
// replaces it), listed oldest first and by a limit, gone with their job.
func testJobSweeps(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	mustJob(t, s, sampleJob("j-1", "alice", "", 0))
	mustJob(t, s, sampleJob("j-2", "alice", "", 0))
	wantErr(t, "sweep of a missing job", s.PutJobSweep(ctx, store.JobSweep{Job: "j-none", At: base}), reserve.ErrNotFound)
	wantErr(t, "sweep of no job", s.PutJobSweep(ctx, store.JobSweep{At: base}), reserve.ErrInvalid)
	a := store.JobSweep{Job: "j-1", States: []string{transfer.FilePending, transfer.FileActive}, State: transfer.FileCancelled, PartError: "cancelled", At: base.Add(time.Second).UTC()}
	b := store.JobSweep{Job: "j-2", Drop: true, DeleteJob: true, At: base}
	for _, w := range []store.JobSweep{a, b} {
		if err := s.PutJobSweep(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if ws, err := s.ListJobSweeps(ctx, 0); err != nil || len(ws) != 2 || ws[0].Job != "j-2" || !reflect.DeepEqual(ws[1], a) {
		t.Errorf("sweeps: %+v, %v; want j-2 then %+v", ws, err, a)
	}
	a.After, a.At = "dir/x", base.Add(-time.Second).UTC()
	if err := s.PutJobSweep(ctx, a); err != nil {
		t.Fatal(err)
	}
	if ws, err := s.ListJobSweeps(ctx, 1); err != nil || len(ws) != 1 || !reflect.DeepEqual(ws[0], a) {
		t.Errorf("first sweep after a step: %+v, %v; want %+v", ws, err, a)
	}
	// The files of a job by state, counted up to a limit.
	files := []transfer.JobFile{sampleFile("j-1", "a", transfer.FilePending), sampleFile("j-1", "b", transfer.FilePending),
		sampleFile("j-1", "c", transfer.FileActive), sampleFile("j-1", "d", transfer.FileSucceeded), sampleFile("j-2", "e", transfer.FilePending)}
	if err := s.AddJobFiles(ctx, files); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		states []string
		limit  int
		want   int
	}{
		{[]string{transfer.FilePending}, 10, 2},
		{[]string{transfer.FilePending}, 1, 1},
		{[]string{transfer.FilePending, transfer.FileActive}, 10, 3},
		{[]string{transfer.FileFailed}, 10, 0},
	} {
		if n, err := s.CountJobFilesUpTo(ctx, "j-1", c.states, c.limit); err != nil || n != c.want {
			t.Errorf("count %v up to %d: %d, %v; want %d", c.states, c.limit, n, err, c.want)
		}
	}
	_, err := s.CountJobFilesUpTo(ctx, "j-1", []string{transfer.FilePending}, 0)
	wantErr(t, "count up to 0", err, reserve.ErrInvalid)
	if err := s.DeleteJobSweep(ctx, "j-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteJobSweep(ctx, "j-1"); err != nil {
		t.Errorf("delete a sweep twice: %v", err)
	}
	if err := s.DeleteJob(ctx, "j-2"); err != nil {
		t.Fatal(err)
	}
	if ws, err := s.ListJobSweeps(ctx, 0); err != nil || len(ws) != 0 {
		t.Errorf("sweeps after their jobs went: %+v, %v", ws, err)
	}
}
