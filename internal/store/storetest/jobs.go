package storetest

import (
	"errors"
	"reflect"
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
		ID: id, Owner: owner, Project: "atlas",
		JobRequest: transfer.JobRequest{
			Sources: []string{"cern:/data/run1", "cern:/data/ünï \x00file"}, Destination: "fnal:/in",
			Deadline: at.Add(time.Hour), Priority: 3, Key: key, Checksum: transfer.ChecksumAdler32,
			Expected: map[string]string{"cern:/data/run1/a": "0a0b0c0d"}, Policy: transfer.PolicyOverwrite,
			Project: "atlas-request",
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
		MTime: base.Add(-time.Hour), State: state, Attempts: 1, Error: "timeout \x00", Checksum: "0a0b0c0d",
		Expected: "0a0b0c0d", Task: "", From: "h1", To: "h2"}
}

func sampleTask(id, job, kind string, offset time.Duration) transfer.Task {
	at := base.Add(offset)
	return transfer.Task{ID: id, Job: job, Kind: kind, State: transfer.TaskActive, Attempt: 2, From: "h1", To: "h2",
		Files: []string{"a", "b"}, Bytes: 2000, BytesDone: 1000, Reservation: "r-1", RateBps: 1e9, Streams: 4,
		CreatedAt: at, ClaimedAt: at.Add(time.Second), LeaseExpires: at.Add(time.Minute), Error: "x"}
}

func testJobsSmoke(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	j := sampleJob("j-1", "alice", "k1", 0)
	if err := s.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetJob(ctx, "j-1")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "job", got, j)
	if got, err := s.GetJobByKey(ctx, "alice", "k1"); err != nil || got.ID != "j-1" {
		t.Errorf("by key: %v %v", got.ID, err)
	}
	var dup *store.DuplicateJobError
	if err := s.CreateJob(ctx, sampleJob("j-2", "alice", "k1", 0)); !errors.As(err, &dup) || !errors.Is(err, store.ErrDuplicateKey) || dup.Existing.ID != "j-1" {
		t.Errorf("duplicate key: %v", err)
	}
	up := got
	up.State, up.Version = transfer.JobSucceeded, 2
	if err := s.UpdateJob(ctx, up, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateJob(ctx, up, 1); !errors.Is(err, reserve.ErrConflict) {
		t.Errorf("stale update: %v", err)
	}
	if js, err := s.ListJobs(ctx, store.JobFilter{Owner: "alice"}); err != nil || len(js) != 1 || js[0].State != transfer.JobSucceeded {
		t.Errorf("list jobs: %v %v", js, err)
	}
	var files []transfer.JobFile
	for i := range 1234 {
		files = append(files, sampleFile("j-1", string(rune('a'+i%26))+"/"+string(rune('0'+i%10))+"/"+time.Duration(i).String(), transfer.FilePending))
	}
	if err := s.AddJobFiles(ctx, files); err != nil {
		t.Fatal(err)
	}
	files[0].State = transfer.FileSucceeded
	if err := s.UpdateJobFiles(ctx, files[:600]); err != nil {
		t.Fatal(err)
	}
	fs, err := s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-1", Limit: 10, After: "b"})
	if err != nil || len(fs) != 10 {
		t.Fatalf("list files: %d %v", len(fs), err)
	}
	n, err := s.CountJobFiles(ctx, "j-1")
	if err != nil || n[transfer.FileSucceeded].Files != 1 || n[transfer.FilePending].Files != 1233 {
		t.Errorf("count: %v %v", n, err)
	}
	tk := sampleTask("k-1", "j-1", transfer.TaskCopy, 0)
	if err := s.CreateTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetTask(ctx, "k-1"); err != nil {
		t.Fatal(err)
	} else {
		same(t, "task", got, tk)
	}
	tk.State = transfer.TaskSucceeded
	if err := s.UpdateTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if ts, err := s.ListTasks(ctx, store.TaskFilter{Node: "h2"}); err != nil || len(ts) != 1 {
		t.Errorf("list tasks: %v %v", ts, err)
	}
	if err := s.PutEndpoint(ctx, transfer.Endpoint{Name: "cern", Site: "geneva", CreatedAt: base}); err != nil {
		t.Fatal(err)
	}
	if e, err := s.GetEndpoint(ctx, "cern"); err != nil || e.Site != "geneva" {
		t.Errorf("endpoint: %v %v", e, err)
	}
	if err := s.PutDataNode(ctx, transfer.DataNode{Node: "h1", Endpoint: "cern", Address: "127.0.0.1:1", LeaseExpires: base}); err != nil {
		t.Fatal(err)
	}
	if ns, err := s.ListDataNodes(ctx); err != nil || len(ns) != 1 {
		t.Errorf("data nodes: %v %v", ns, err)
	}
	if err := s.AppendDecision(ctx, transfer.Decision{Job: "j-1", From: "h1", To: "h2", At: base, Reason: "up"}); err != nil {
		t.Fatal(err)
	}
	if ds, err := s.ListDecisions(ctx, "j-1", 5); err != nil || len(ds) != 1 {
		t.Errorf("decisions: %v %v", ds, err)
	}
	if err := s.DeleteJob(ctx, "j-1"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountJobFiles(ctx, "j-1"); err != nil || len(n) != 0 {
		t.Errorf("count after delete: %v %v", n, err)
	}
}
