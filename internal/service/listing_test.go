package service_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// manyListed is n files under data/, numbered from first, of sizes that
// vary (every 97th large enough to be cut in parts).
func manyListed(first, n int) []apiv1.ListedFile {
	out := make([]apiv1.ListedFile, 0, n)
	for i := first; i < first+n; i++ {
		size := int64(1000 + i)
		if i%97 == 0 {
			size = 3<<30 + int64(i)
		}
		out = append(out, apiv1.ListedFile{Path: fmt.Sprintf("data/f%06d", i), Source: "data", Size: size, MTime: t0})
	}
	return out
}

// claimList submits a job and has a1 claim its listing.
func (e *env) claimList(req transfer.JobRequest) (transfer.Job, apiv1.TaskWork) {
	e.t.Helper()
	j, _, err := e.s.Submit(e.ctx, alice, req)
	if err != nil {
		e.t.Fatal(err)
	}
	ws := e.claim("a1", 1)
	if len(ws) != 1 || ws[0].Task.Kind != transfer.TaskList {
		e.t.Fatalf("list claim: %+v", ws)
	}
	return j, ws[0]
}

func (e *env) page(w apiv1.TaskWork, page int, more bool, files []apiv1.ListedFile) apiv1.TaskAnswer {
	e.t.Helper()
	ans, err := e.s.Listing(e.ctx, agent("a1"), w.Task.ID, apiv1.Listing{Attempt: w.Task.Attempt, Page: page, More: more, Files: files})
	if err != nil {
		e.t.Fatalf("page %d: %v", page, err)
	}
	return ans
}

// TestListingPages: a listing sent in pages ends as the same listing sent
// whole (files, totals, parts), a page sent again is taken once, each
// read of the store returns at most a page, and the job's files page by
// Next, every file once (issue 28, finding 7).
func TestListingPages(t *testing.T) { eachStore(t, testListingPages) }

func testListingPages(t *testing.T, db string) {
	e := newEnvAt(t, db)
	reads := service.CountReads(e.s)
	req := transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}
	all := manyListed(0, 2*service.MaxListingFiles+500)

	whole, w := e.claimList(req)
	e.page(w, 0, false, all[:service.MaxListingFiles])
	whole = e.job(whole.ID)

	req.Destination = "dst:in2" // its own files: one writer per destination file
	paged, w := e.claimList(req)
	reads.Most()
	for i, at := 0, 0; at < len(all); i++ {
		end := min(at+service.MaxListingFiles, len(all))
		more := end < len(all)
		if ans := e.page(w, i, more, all[at:end]); ans.Cancel || ans.Task.Pages != i+1 {
			t.Fatalf("page %d: %+v", i, ans)
		}
		// Its answer lost: sent again, taken once.
		if ans := e.page(w, i, more, all[at:end]); ans.Cancel || ans.Task.Pages != i+1 {
			t.Fatalf("page %d again: %+v", i, ans)
		}
		at = end
	}
	if m := reads.Most(); m > service.MaxListingFiles {
		t.Errorf("a read of %d rows while storing pages of %d", m, service.MaxListingFiles)
	}
	paged = e.job(paged.ID)
	var wantBytes int64
	for _, f := range all {
		wantBytes += f.Size
	}
	if paged.State != transfer.JobActive || paged.FilesTotal != len(all) || paged.BytesTotal != wantBytes {
		t.Fatalf("paged job: %s %q, %d files, %d bytes; want ACTIVE, %d files, %d bytes", paged.State, paged.Reason, paged.FilesTotal, paged.BytesTotal, len(all), wantBytes)
	}
	// The first page's worth, listed whole, cut as in pages.
	for _, id := range []string{whole.ID, paged.ID} {
		fs, err := e.st.ListJobFiles(e.ctx, store.JobFileFilter{Job: id, Limit: service.MaxListingFiles})
		if err != nil {
			t.Fatal(err)
		}
		parts, err := e.st.ListFileParts(e.ctx, store.FilePartFilter{Job: id, Paths: []string{all[0].Path, all[97].Path, all[1].Path}})
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != service.MaxListingFiles || fs[0].Parts == 0 || fs[1].Parts != 0 || len(parts) != fs[0].Parts+fs[97].Parts {
			t.Errorf("job %s: %d files, parts %d/%d/%d, %d parts stored", id, len(fs), fs[0].Parts, fs[1].Parts, fs[97].Parts, len(parts))
		}
	}
	if whole.FilesTotal != service.MaxListingFiles {
		t.Errorf("whole listing: %d files", whole.FilesTotal)
	}

	// Its page: at most the limit, and by Next every file once.
	seen := map[string]int{}
	after := ""
	pages := 0
	for {
		p, err := e.s.GetPage(e.ctx, alice, paged.ID, service.JobQuery{After: after})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(p.Files) > service.DefaultFilesPage || after == "" && p.FileCounts[transfer.FilePending]+p.FileCounts[transfer.FileActive] != len(all) ||
			after != "" && p.FileCounts != nil {
			t.Fatalf("page %d: %d files, counts %v", pages, len(p.Files), p.FileCounts)
		}
		for _, f := range p.Files {
			seen[f.Path]++
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if len(seen) != len(all) || pages != (len(all)+service.DefaultFilesPage-1)/service.DefaultFilesPage {
		t.Fatalf("%d files in %d pages; want %d", len(seen), pages, len(all))
	}
	for p, n := range seen {
		if n != 1 {
			t.Fatalf("%s on %d pages", p, n)
		}
	}
	if m := reads.Most(); m > service.DefaultFilesPage+1 {
		t.Errorf("a read of %d rows for pages of %d", m, service.DefaultFilesPage)
	}
	for _, bad := range []int{-1, service.MaxFilesPage + 1} {
		if _, err := e.s.GetPage(e.ctx, alice, paged.ID, service.JobQuery{Limit: bad}); err == nil {
			t.Errorf("limit %d taken", bad)
		}
	}

	// The last page sent again after the job went on: taken once, no
	// cancel.
	if ans := e.page(w, 2, false, all[2*service.MaxListingFiles:]); ans.Cancel || ans.Task.State != transfer.TaskSucceeded {
		t.Fatalf("the last page again: %+v", ans)
	}
	if j := e.job(paged.ID); j.FilesTotal != len(all) {
		t.Fatalf("after the last page again: %d files", j.FilesTotal)
	}

	// Cancelled: every file ends CANCELLED, read a step at a time.
	reads.Most()
	j, err := e.s.Cancel(e.ctx, alice, paged.ID, "")
	if err != nil || j.State != transfer.JobCancelled {
		t.Fatalf("cancel: %v %s", err, j.State)
	}
	if c, err := e.st.CountJobFiles(e.ctx, paged.ID); err != nil || c[transfer.FileCancelled].Files < 10*service.ListingBatch {
		t.Fatalf("files cancelled when cancel answers: %v %v; want at least %d", c, err, 10*service.ListingBatch)
	}
	if m := reads.Most(); m > service.ListingBatch {
		t.Errorf("cancel read %d rows at once; steps of %d", m, service.ListingBatch)
	}
	// The first 10,000 before the answer, the rest after it.
	var c map[string]store.FileCount
	for deadline := time.Now().Add(time.Minute); ; {
		if c, err = e.st.CountJobFiles(e.ctx, paged.ID); err != nil || c[transfer.FileCancelled].Files == len(all) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || c[transfer.FileCancelled].Files != len(all) || len(c) != 1 {
		t.Fatalf("files after cancel: %v %v", c, err)
	}
	if ps, err := e.st.ListFileParts(e.ctx, store.FilePartFilter{Job: paged.ID, States: []string{transfer.FilePending, transfer.FileActive}, Limit: 1}); err != nil || len(ps) != 0 {
		t.Fatalf("parts open after cancel: %d %v", len(ps), err)
	}
}

// TestListingRefused: a page that names a path outside its source, a path
// an earlier page listed, a file landing where an earlier page's does, or
// that comes out of order, fails the job saying why, and nothing of the
// listing stays stored (issue 28, findings 4, 7 and 11).
func TestListingRefused(t *testing.T) {
	two := transfer.JobRequest{Sources: []string{"src:x/run1", "src:y/run1"}, Destination: "dst:in"}
	one := transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}
	f := func(p, src string) apiv1.ListedFile { return apiv1.ListedFile{Path: p, Source: src, Size: 10} }
	for _, tc := range []struct {
		name  string
		req   transfer.JobRequest
		pages [][]apiv1.ListedFile
		first int // the first page's number
		says  string
	}{
		{"outside its source", one, [][]apiv1.ListedFile{{f("data/a", "data"), f("private/key", "data")}}, 0, "listed file private/key is not under its source \"data\""},
		{"a sibling named like it", one, [][]apiv1.ListedFile{{f("data2/a", "data")}}, 0, "listed file data2/a is not under its source \"data\""},
		{"listed twice in a page", one, [][]apiv1.ListedFile{{f("data/a", "data"), f("data/a", "data")}}, 0, "file data/a is listed twice"},
		{"listed twice across pages", one, [][]apiv1.ListedFile{{f("data/a", "data")}, {f("data/b", "data"), f("data/a", "data")}}, 0, "file data/a is listed twice"},
		{"one destination across pages", two, [][]apiv1.ListedFile{{f("x/run1/f1.dat", "x/run1")}, {f("y/run1/f1.dat", "y/run1")}}, 0, "files x/run1/f1.dat and y/run1/f1.dat would both land at dst:in/run1/f1.dat"},
		{"a page before its turn", one, [][]apiv1.ListedFile{{f("data/a", "data")}}, 1, "page 1 came before page 0"},
		{"a page too large", one, [][]apiv1.ListedFile{manyListed(0, service.MaxListingFiles+1)}, 0, "a page of 10001 files, at most 10000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			j, w := e.claimList(tc.req)
			var ans apiv1.TaskAnswer
			for i, p := range tc.pages {
				ans = e.page(w, tc.first+i, i < len(tc.pages)-1, p)
			}
			j = e.job(j.ID)
			if j.State != transfer.JobFailed || !strings.Contains(j.Reason, "the listing was refused: "+tc.says) || ans.Task.State != transfer.TaskFailed {
				t.Fatalf("job %s %q, task %s; want FAILED saying %q", j.State, j.Reason, ans.Task.State, tc.says)
			}
			// The pages before it taken back: a refused listing leaves
			// nothing.
			c, err := e.st.CountJobFiles(e.ctx, j.ID)
			if err != nil || len(c) != 0 || j.FilesTotal != 0 || j.BytesTotal != 0 {
				t.Fatalf("files stored: %v %v, job's totals %d, %d; want none", c, err, j.FilesTotal, j.BytesTotal)
			}
			if ws := e.claim("a1", 4); len(ws) != 0 {
				t.Fatalf("listed again: %+v", ws)
			}
		})
	}
}

// TestListingAttemptAgain: the pages an attempt stored before its node
// was lost go when the next attempt sends its first page.
func TestListingAttemptAgain(t *testing.T) {
	e := newEnv(t)
	j, w := e.claimList(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	e.page(w, 0, true, manyListed(0, 3*service.ListingBatch+1))
	for range 2 {
		e.clk.Add(10 * time.Second)
		for _, n := range []string{"a2", "b1", "b2"} {
			e.beat(n, nil)
		}
	}
	e.s.Tick(e.ctx)
	ws := e.claim("a2", 1)
	if len(ws) != 1 || ws[0].Task.ID != w.Task.ID || ws[0].Task.Attempt != 2 || ws[0].Task.Pages != 0 {
		t.Fatalf("the listing again: %+v", ws)
	}
	if _, err := e.s.Listing(e.ctx, agent("a1"), w.Task.ID, apiv1.Listing{Attempt: 1, Page: 1, Files: manyListed(50000, 1)}); err == nil {
		t.Fatal("the lost node's next page taken")
	}
	ans, err := e.s.Listing(e.ctx, agent("a2"), w.Task.ID, apiv1.Listing{Attempt: 2, Files: manyListed(10, 5)})
	if err != nil || ans.Cancel {
		t.Fatalf("attempt 2: %v %+v", err, ans)
	}
	j = e.job(j.ID)
	c, err := e.st.CountJobFiles(e.ctx, j.ID)
	if err != nil || j.State != transfer.JobActive || j.FilesTotal != 5 || c[transfer.FilePending].Files != 5 || len(c) != 1 {
		t.Fatalf("job %s, %d files, stored %v %v; want attempt 2's 5", j.State, j.FilesTotal, c, err)
	}
}

// TestLeaseOutlivesAStall: a lease never lapses because the controller
// was busy. The controller held its lock for 40 s (a 15 s lease) while no
// heartbeat could come in: its next tick lapses nothing, and a node that
// stays silent after it loses its lease at most the stalled time later.
func TestLeaseOutlivesAStall(t *testing.T) {
	e := newEnv(t)
	j := e.listJob(transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}, listed(10, 1000))
	w := e.claim("a1", 1)[0]
	e.s.Stall(40*time.Second, e.clk.Add)
	e.s.Tick(e.ctx)
	got, err := e.st.GetTask(e.ctx, w.Task.ID)
	if err != nil || got.State != transfer.TaskActive || got.Attempt != 1 {
		t.Fatalf("after the stall: %s attempt %d, %v; want still ACTIVE", got.State, got.Attempt, err)
	}
	e.claim("a1", 1) // a1 is still live: a lapsed node's claim is refused
	// a2, b1 and b2 beat after the stall; a1 stays silent: its lease ran
	// 15 s, given back the 40 s stalled, so it lapses 55 s after it began.
	for range 2 {
		e.clk.Add(7 * time.Second)
		for _, n := range []string{"a2", "b1", "b2"} {
			e.beat(n, nil)
		}
		e.s.Tick(e.ctx)
	}
	if got, _ := e.st.GetTask(e.ctx, w.Task.ID); got.State != transfer.TaskActive {
		t.Fatalf("54 s on: %s; want ACTIVE", got.State)
	}
	e.clk.Add(2 * time.Second)
	for _, n := range []string{"a2", "b1", "b2"} {
		e.beat(n, nil)
	}
	e.s.Tick(e.ctx)
	if got, _ := e.st.GetTask(e.ctx, w.Task.ID); got.State != transfer.TaskQueued {
		t.Fatalf("56 s on: %s; want QUEUED (a1 lost)", got.State)
	}
	if j = e.job(j.ID); !strings.Contains(j.Reason, "data node a1 lost") {
		t.Fatalf("reason: %q", j.Reason)
	}
}

// TestListedFiles: what a page of a listing may hold, checked alone.
func TestListedFiles(t *testing.T) {
	j := transfer.Job{ID: "j-1", JobRequest: transfer.JobRequest{Sources: []string{"src:data", "src:x/run1", "src:."}, Destination: "dst:in"}}
	root := transfer.Job{ID: "j-2", JobRequest: transfer.JobRequest{Sources: []string{"src:."}, Destination: "dst:in"}}
	f := func(p, src string) apiv1.ListedFile { return apiv1.ListedFile{Path: p, Source: src, Size: 1} }
	for _, tc := range []struct {
		name  string
		job   transfer.Job
		files []apiv1.ListedFile
		says  string // "" taken
		dests []string
	}{
		{"under their sources", j, []apiv1.ListedFile{f("data/a", "data"), f("x/run1/b", "x/run1"), f("data", "data")}, "", []string{"in/data", "in/data/a", "in/run1/b"}},
		{"a file source", transfer.Job{ID: "j", JobRequest: transfer.JobRequest{Sources: []string{"src:data/a"}, Destination: "dst:in"}}, []apiv1.ListedFile{f("data/a", "data/a")}, "", []string{"in/a"}},
		{"anything under the root", root, []apiv1.ListedFile{f("a/b/c", ".")}, "", []string{"in/a/b/c"}},
		{"empty", j, nil, "", nil},
		{"outside", j, []apiv1.ListedFile{f("etc/passwd", "data")}, `listed file etc/passwd is not under its source "data"`, nil},
		{"a prefix, not a parent", j, []apiv1.ListedFile{f("database", "data")}, "not under its source", nil},
		{"not a source", j, []apiv1.ListedFile{f("y/a", "y")}, `source "y" is not one of the job's`, nil},
		{"absolute", j, []apiv1.ListedFile{f("/data/a", "data")}, "is not clean and relative", nil},
		{"up", j, []apiv1.ListedFile{f("data/../x", "data")}, "is not clean and relative", nil},
		{"dot", root, []apiv1.ListedFile{f(".", ".")}, "is not clean and relative", nil},
		{"negative", j, []apiv1.ListedFile{{Path: "data/a", Source: "data", Size: -1}}, "size -1", nil},
		{"past 512 TiB", j, []apiv1.ListedFile{{Path: "data/a", Source: "data", Size: service.MaxFileSize + 1}}, "size 562949953421313 (from 0 to 562949953421312)", nil},
		{"twice", j, []apiv1.ListedFile{f("data/a", "data"), f("data/a", "data")}, "file data/a is listed twice", nil},
		{"nested sources", j, []apiv1.ListedFile{f("data/f", "data"), f("data", ".")}, "", []string{"in/data", "in/data/f"}},
		{"one destination, two sources", transfer.Job{ID: "j", JobRequest: transfer.JobRequest{Sources: []string{"src:x/run1", "src:y/run1"}, Destination: "dst:in"}},
			[]apiv1.ListedFile{f("x/run1/f", "x/run1"), f("y/run1/f", "y/run1")}, "would both land at dst:in/run1/f", nil},
	} {
		got, err := service.ListedFiles(tc.job, tc.files)
		if tc.says != "" {
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: %v; want %q", tc.name, err, tc.says)
			}
			continue
		}
		var dests []string
		for _, f := range got {
			dests = append(dests, f.Dest)
		}
		if err != nil || strings.Join(dests, " ") != strings.Join(tc.dests, " ") {
			t.Errorf("%s: %v %v; want %v", tc.name, dests, err, tc.dests)
		}
	}
}

// TestListingLostForGood: a listing whose node was lost at each of its
// attempts fails the job, and the pages its attempts stored go.
func TestListingLostForGood(t *testing.T) {
	e := newEnv(t)
	j, _, err := e.s.Submit(e.ctx, alice, transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= service.MaxAttempts; attempt++ {
		ws := e.claim("a1", 1)
		if len(ws) != 1 || ws[0].Task.Attempt != attempt {
			t.Fatalf("attempt %d: %+v", attempt, ws)
		}
		e.page(ws[0], 0, true, manyListed(0, 2*service.ListingBatch+10))
		// a1 goes silent; the others keep beating.
		for range 2 {
			e.clk.Add(10 * time.Second)
			for _, n := range []string{"a2", "b1", "b2"} {
				e.beat(n, nil)
			}
		}
		e.s.Tick(e.ctx)
		e.beat("a1", nil)
	}
	if j = e.job(j.ID); j.State != transfer.JobFailed || !strings.HasPrefix(j.Reason, "listing the dataset failed 3 times") || j.FilesTotal != 0 {
		t.Fatalf("job %s %q, %d files", j.State, j.Reason, j.FilesTotal)
	}
	var c map[string]store.FileCount
	for deadline := time.Now().Add(time.Minute); ; {
		if c, err = e.st.CountJobFiles(e.ctx, j.ID); err != nil || len(c) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || len(c) != 0 {
		t.Fatalf("files left: %v %v", c, err)
	}
}
