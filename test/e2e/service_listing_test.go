//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/transfer"
)

// bigListing is how many files TestServiceBigListing lists.
const bigListing = 30000

// TestServiceBigListing (issue 28, findings 7 and 4) through the real
// controller, the test playing siteA's data node a1 with a token bound to
// it (startFakeSource): a listing of 30,000 files goes in pages of at
// most 10,000, a page sent again is taken once, and the job's totals come
// out right; the job's page holds at most its limit with a next cursor,
// which yields every file once; transfer status and cancel work on it. A
// page that names a path outside its source, a path an earlier page
// listed, a file landing where an earlier page's does, or a body over the
// bound fails its job with the reason, the earlier pages' files are taken
// back, and nothing is written.
func TestServiceBigListing(t *testing.T) {
	t.Parallel()
	s := startSvc(t, svcOpts{without: []string{"a1", "a2"}})
	f := startFakeSource(t, s)
	alice := s.apiClient(readTok(t, s.alice))
	ctx := context.Background()

	id := s.submit("siteA:data", "siteB:in").Job.ID
	l := f.claim(t, transfer.TaskList)
	var files []apiv1.ListedFile
	var bytes int64
	for i := range bigListing {
		files = append(files, apiv1.ListedFile{Path: fmt.Sprintf("data/d%03d/f%06d", i%500, i), Source: "data", Size: int64(i%4096 + 1)})
		bytes += int64(i%4096 + 1)
	}
	pages := 0
	for at := 0; at < len(files); at += apiv1.MaxListingPage {
		end := min(at+apiv1.MaxListingPage, len(files))
		page := apiv1.Listing{Attempt: l.Task.Attempt, Page: pages, More: end < len(files), Files: files[at:end]}
		ans, err := f.c.ReportListing(ctx, l.Task.ID, page)
		if err != nil || ans.Cancel || ans.Task.Pages != pages+1 {
			t.Fatalf("page %d: %v %+v", pages, err, ans)
		}
		if pages == 1 || !page.More {
			// Its answer lost: sent again, taken once.
			if ans, err := f.c.ReportListing(ctx, l.Task.ID, page); err != nil || ans.Cancel || ans.Task.Pages != pages+1 {
				t.Fatalf("page %d again: %v %+v", pages, err, ans)
			}
		}
		pages++
	}
	f.forget(l.Task.ID)
	if pages != bigListing/apiv1.MaxListingPage {
		t.Fatalf("%d pages", pages)
	}
	p, err := alice.Job(ctx, id, client.JobPageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Job.State != transfer.JobActive || p.Job.FilesTotal != bigListing || p.Job.BytesTotal != bytes || p.FileCounts[transfer.FilePending] != bigListing {
		t.Fatalf("job %s %q: %d files, %d bytes, counts %v; want ACTIVE, %d files, %d bytes",
			p.Job.State, p.Job.Reason, p.Job.FilesTotal, p.Job.BytesTotal, p.FileCounts, bigListing, bytes)
	}
	if len(p.Files) != 1000 || p.Next != p.Files[999].Path {
		t.Fatalf("the job's first page: %d files, next %q", len(p.Files), p.Next)
	}
	// Every file once, by the cursor, 10,000 a page.
	seen := make(map[string]bool, bigListing)
	reads := 0
	err = alice.JobFiles(ctx, id, nil, func(fs []transfer.JobFile) error {
		reads++
		if len(fs) > 10000 {
			return fmt.Errorf("a page of %d files", len(fs))
		}
		for _, f := range fs {
			if seen[f.Path] {
				return fmt.Errorf("%s twice", f.Path)
			}
			seen[f.Path] = true
		}
		return nil
	})
	if err != nil || len(seen) != bigListing || reads != bigListing/10000 {
		t.Fatalf("following the pages: %v; %d files in %d pages", err, len(seen), reads)
	}
	if _, err := alice.Job(ctx, id, client.JobPageOptions{Limit: 10001}); !isStatus(err, 400) {
		t.Fatalf("a page of 10,001: %v", err)
	}
	st := s.ok(s.alice, "transfer", "status", id)
	if !strings.Contains(st.stdout, fmt.Sprintf("files: PENDING %d", bigListing)) {
		t.Fatalf("transfer status:\n%s", st.stdout)
	}
	s.ok(s.alice, "transfer", "cancel", id, "--reason", "too big")
	// Its files end a step at a time, the first before the answer.
	if !waitFor(10*time.Minute, func() bool {
		p, err = alice.Job(ctx, id, client.JobPageOptions{NoFiles: true})
		return err == nil && p.FileCounts[transfer.FileCancelled] == bigListing
	}) || p.Job.State != transfer.JobCancelled || len(p.FileCounts) != 1 {
		t.Fatalf("after cancel: %v %s, counts %v", err, p.Job.State, p.FileCounts)
	}

	// Refused pages fail their job; the pages before them are taken
	// back.
	fl := func(p, src string) apiv1.ListedFile { return apiv1.ListedFile{Path: p, Source: src, Size: 10} }
	var over []apiv1.ListedFile
	for i := range apiv1.MaxListingPage {
		over = append(over, fl(fmt.Sprintf("data/%s/%05d", strings.Repeat("x", 1000), i), "data"))
	}
	for _, tc := range []struct {
		name    string
		sources []string
		pages   [][]apiv1.ListedFile
		status  int // of the last page
		says    string
	}{
		{"outside its source", []string{"siteA:data"}, [][]apiv1.ListedFile{{fl("data/a", "data")}, {fl("private/key", "data")}}, 200,
			`the listing was refused: listed file private/key is not under its source "data"`},
		{"listed twice", []string{"siteA:data"}, [][]apiv1.ListedFile{{fl("data/a", "data")}, {fl("data/a", "data")}}, 200,
			"the listing was refused: file data/a is listed twice"},
		{"one destination", []string{"siteA:x/run1", "siteA:y/run1"}, [][]apiv1.ListedFile{{fl("x/run1/f1.dat", "x/run1")}, {fl("y/run1/f1.dat", "y/run1")}}, 200,
			"the listing was refused: files x/run1/f1.dat and y/run1/f1.dat would both land at siteB:in/run1/f1.dat"},
		{"over the bound", []string{"siteA:data"}, [][]apiv1.ListedFile{{fl("data/a", "data")}, over}, 413,
			"the listing was refused: the body is over 8388608 bytes"},
	} {
		id := s.submit(append(tc.sources, "siteB:in")...).Job.ID
		l := f.claim(t, transfer.TaskList)
		if l.Task.Job != id {
			t.Fatalf("%s: listing of job %s, want %s", tc.name, l.Task.Job, id)
		}
		for i, files := range tc.pages {
			ans, err := f.c.ReportListing(ctx, l.Task.ID, apiv1.Listing{Attempt: l.Task.Attempt, Page: i, More: true, Files: files})
			switch {
			case i < len(tc.pages)-1 && (err != nil || ans.Cancel):
				t.Fatalf("%s: page %d: %v %+v", tc.name, i, err, ans)
			case i == len(tc.pages)-1 && tc.status == 200 && (err != nil || ans.Task.State != transfer.TaskFailed):
				t.Fatalf("%s: the refused page: %v %+v", tc.name, err, ans)
			case i == len(tc.pages)-1 && tc.status != 200 && !isStatus(err, tc.status):
				t.Fatalf("%s: the refused page: %v; want %d", tc.name, err, tc.status)
			}
		}
		f.forget(l.Task.ID)
		p, err := alice.Job(ctx, id, client.JobPageOptions{})
		if err != nil || p.Job.State != transfer.JobFailed || !strings.HasPrefix(p.Job.Reason, tc.says) {
			t.Fatalf("%s: job %v %s %q; want FAILED %q", tc.name, err, p.Job.State, p.Job.Reason, tc.says)
		}
		if len(p.FileCounts) != 0 || len(p.Files) != 0 || p.Job.FilesTotal != 0 {
			t.Fatalf("%s: files stored %v, total %d; want the first page's taken back", tc.name, p.FileCounts, p.Job.FilesTotal)
		}
	}
	if _, err := os.Stat(filepath.Join(s.dstRoot, "in")); !os.IsNotExist(err) {
		t.Errorf("the destination was written: %v", err)
	}
}

// isStatus reports whether err is the API's answer of status.
func isStatus(err error, status int) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == status
}
