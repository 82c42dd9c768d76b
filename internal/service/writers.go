package service

// One writer per destination file (issue 29): two live jobs never both
// write one file of one destination endpoint. A listing's page is checked
// against the other jobs' files landing at its paths, by the store's
// (dest, state) index and under mu, so that of two listings arriving at
// once the second sees the first's stored pages. The job that lists a
// path second is refused (on_conflict refuse, the default) or its file
// records the jobs writing there (WaitsFor) and is not claimed while any
// of them still does (on_conflict wait). A job that ends, however it
// ends, stops writing: no claim of its paths outlives it.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// MaxWaitPages bounds the pages of a job's pending files one claim reads
// past files that wait for other writers; the next claim goes on where it
// stopped, so every pending file is looked at in turn without a claim
// reading the whole job.
const MaxWaitPages = 4

// normalizeOnConflict checks a request's on_conflict and fills its
// default, refuse.
func normalizeOnConflict(req *transfer.JobRequest) error {
	if err := transfer.CheckOnConflict(req.OnConflict); err != nil {
		return invalid("on_conflict", "%s", err)
	}
	if req.OnConflict == "" {
		req.OnConflict = transfer.ConflictRefuse
	}
	return nil
}

// liveJob reports whether a job may still write its files.
func liveJob(state string) bool {
	return state == transfer.JobQueued || state == transfer.JobScheduled || state == transfer.JobActive
}

// checkWriters checks a listing's page of job j against the other live
// jobs writing any of its destination files: with on_conflict wait, each
// such file records them (WaitsFor); otherwise the page is refused naming
// the first. One read of the files landing at the page's paths (by the
// index, a few statements for 10,000 paths) and one of each job found.
// The caller holds mu, so no other page is stored meanwhile.
func (s *Service) checkWriters(ctx context.Context, j transfer.Job, files []transfer.JobFile) error {
	if len(files) == 0 || j.DryRun {
		return nil // a dry run writes nothing
	}
	dests := make([]string, 0, len(files))
	for _, f := range files {
		dests = append(dests, f.Dest)
	}
	found, err := s.st.ListJobFiles(ctx, store.JobFileFilter{Dests: dests, States: []string{transfer.FilePending, transfer.FileActive}})
	if err != nil {
		return fmt.Errorf("find the writers of the listed files: %w", err)
	}
	dst := dstLocation(j)
	jobs := map[string]bool{} // live jobs writing to j's endpoint
	writers := map[string][]string{}
	for _, f := range found {
		if f.Job == j.ID || f.State == transfer.FilePending && slices.Contains(f.WaitsFor, j.ID) {
			// A file waiting for j defers to it: j listing again
			// (another attempt) is not its second writer.
			continue
		}
		live, ok := jobs[f.Job]
		if !ok {
			o, err := s.st.GetJob(ctx, f.Job)
			if err != nil {
				return fmt.Errorf("find the writers of the listed files: %w", err)
			}
			live = liveJob(o.State) && !o.DryRun && dstLocation(o).Endpoint == dst.Endpoint
			jobs[f.Job] = live
		}
		if live && !slices.Contains(writers[f.Dest], f.Job) {
			writers[f.Dest] = append(writers[f.Dest], f.Job)
		}
	}
	if len(writers) == 0 {
		return nil
	}
	if j.OnConflict != transfer.ConflictWait {
		// The page's first file by path that another job writes.
		for _, f := range files {
			if w := writers[f.Dest]; len(w) > 0 {
				slices.Sort(w)
				return invalid("files", "destination %s:%s is being written by job %s (another writer): resubmit when it ends, or with --on-conflict wait",
					dst.Endpoint, f.Dest, w[0])
			}
		}
	}
	for i := range files {
		if w := writers[files[i].Dest]; len(w) > 0 {
			slices.Sort(w)
			files[i].WaitsFor = w
		}
	}
	return nil
}

// blocked returns, by path, those pending files (of one job) that wait
// for another job still writing their destination, with the job: one read
// of each job waited for, and one of its files landing at those paths. A
// file claimed once waits no more: its writers had ended.
func (r *claimRun) blocked(files []transfer.JobFile) (map[string]string, error) {
	dests := map[string][]string{} // job waited for → destinations
	for _, f := range files {
		if f.State != transfer.FilePending {
			continue
		}
		for _, w := range f.WaitsFor {
			dests[w] = append(dests[w], f.Dest)
		}
	}
	if len(dests) == 0 {
		return nil, nil
	}
	busy := map[string]bool{} // destinations still being written
	for _, w := range slices.Sorted(maps.Keys(dests)) {
		o, err := r.writer(w)
		if err != nil {
			return nil, err
		}
		if o == nil || !liveJob(o.State) {
			continue
		}
		if o.State == transfer.JobQueued {
			// Its listing may be under way again (another attempt
			// clears the files of the one before): every file
			// waiting for it waits on.
			for _, d := range dests[w] {
				busy[w+"\x00"+d] = true
			}
			continue
		}
		fs, err := r.tx.ListJobFiles(r.ctx, store.JobFileFilter{Job: w, Dests: dests[w], States: []string{transfer.FilePending, transfer.FileActive}})
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			busy[w+"\x00"+f.Dest] = true
		}
	}
	out := map[string]string{}
	for _, f := range files {
		if f.State != transfer.FilePending {
			continue
		}
		if i := slices.IndexFunc(f.WaitsFor, func(w string) bool { return busy[w+"\x00"+f.Dest] }); i >= 0 {
			out[f.Path] = f.WaitsFor[i]
		}
	}
	return out, nil
}

// writer is the job a file waits for, or nil when it is gone (a refused
// submission deletes its job).
func (r *claimRun) writer(id string) (*transfer.Job, error) {
	o, err := r.job(id)
	if err != nil {
		if errors.Is(err, reserve.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return o, nil
}

// pendingFiles returns up to BatchFiles of job j's pending files that move
// whole, leaving out those that wait for another writer. When a page's
// files all wait, the pages after it are read, at most MaxWaitPages in
// one claim, and the next claim goes on after the last one read (from
// the first again once past the last), so the files a job can move are
// found however many of it wait, without a claim reading all of it.
func (r *claimRun) pendingFiles(j *transfer.Job) ([]transfer.JobFile, error) {
	if r.s.waitScan == nil {
		r.s.waitScan = map[string]string{}
	}
	after := r.s.waitScan[j.ID]
	for i := 0; ; i++ {
		page, err := r.tx.ListJobFiles(r.ctx, store.JobFileFilter{Job: j.ID, States: []string{transfer.FilePending}, After: after, Limit: BatchFiles})
		if err != nil {
			return nil, err
		}
		files := slices.DeleteFunc(slices.Clone(page), partedFile) // freshPart's
		held, err := r.blocked(files)
		if err != nil {
			return nil, err
		}
		free := slices.DeleteFunc(slices.Clone(files), func(f transfer.JobFile) bool { return held[f.Path] != "" })
		if len(held) == 0 && after == "" {
			delete(r.s.waitScan, j.ID)
			return free, nil
		}
		if len(free) > 0 || i+1 >= MaxWaitPages {
			r.s.waitScan[j.ID] = after
			if len(free) == 0 {
				r.waiting(j, files, held)
			}
			return free, nil
		}
		switch {
		case len(page) == BatchFiles:
			after = page[len(page)-1].Path
		case after != "":
			after = "" // past the last: from the first again
		default:
			// Every pending file of the job read: they all wait.
			r.s.waitScan[j.ID] = ""
			r.waiting(j, files, held)
			return nil, nil
		}
	}
}

// waiting says in the job's reason which writer the first of its files
// that wait (held, by path) waits for.
func (r *claimRun) waiting(j *transfer.Job, files []transfer.JobFile, held map[string]string) {
	i := slices.IndexFunc(files, func(f transfer.JobFile) bool { return held[f.Path] != "" })
	if i < 0 {
		return
	}
	why := fmt.Sprintf("waiting for job %s to end writing %s:%s (on_conflict wait)", held[files[i].Path], dstLocation(*j).Endpoint, files[i].Dest)
	if j.Reason != why {
		j.Reason = why
		r.dirty[j.ID] = true
	}
}

// pruneWaitScan forgets where the scans of the jobs no longer ACTIVE
// stopped; active are the ACTIVE jobs.
func (s *Service) pruneWaitScan(active []transfer.Job) {
	if len(s.waitScan) == 0 {
		return
	}
	ids := make(map[string]bool, len(active))
	for _, j := range active {
		ids[j.ID] = true
	}
	for id := range s.waitScan {
		if !ids[id] {
			delete(s.waitScan, id)
		}
	}
}
