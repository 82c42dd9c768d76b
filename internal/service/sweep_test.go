package service_test

import (
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// TestCancelResumes: a cancel interrupted after its first step (the
// controller gone, another started on the same database) leaves its
// job's other files PENDING; the new controller's clock ends them all,
// one step of at most ListingBatch files a tick, read a step at a time
// (issue 28, finding 7).
func TestCancelResumes(t *testing.T) { eachStore(t, testCancelResumes) }

func testCancelResumes(t *testing.T, db string) {
	e := newEnvAt(t, db)
	req := transfer.JobRequest{Sources: []string{"src:data"}, Destination: "dst:in"}
	all := manyListed(0, 3*service.ListingBatch+500)
	// Another job, cancelled whole: its sweep is gone, so the clock has
	// only the first one's to carry on.
	other := e.listJob(req, manyListed(100000, 10))
	if _, err := e.s.Cancel(e.ctx, alice, other.ID, ""); err != nil {
		t.Fatal(err)
	}
	j, w := e.claimList(req)
	for i, at := 0, 0; at < len(all); i++ {
		end := min(at+service.MaxListingFiles, len(all))
		if ans := e.page(w, i, end < len(all), all[at:end]); ans.Cancel {
			t.Fatalf("page %d: %+v", i, ans)
		}
		at = end
	}
	if err := e.s.CancelInterrupted(e.ctx, alice, j.ID); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		c, err := e.st.CountJobFiles(e.ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return c[transfer.FileCancelled].Files
	}
	if n := count(); n != service.ListingBatch {
		t.Fatalf("%d files cancelled after the first step; want %d", n, service.ListingBatch)
	}

	e.restart()
	reads := service.CountReads(e.s)
	done, ticks := count(), 0
	for done < len(all) {
		if ticks++; ticks > len(all)/service.ListingBatch+1 {
			t.Fatalf("%d of %d files cancelled after %d ticks", done, len(all), ticks-1)
		}
		e.clk.Add(time.Second)
		e.s.Tick(e.ctx)
		n := count()
		if n-done > service.ListingBatch || n == done {
			t.Fatalf("tick %d ended %d files; want 1 to %d", ticks, n-done, service.ListingBatch)
		}
		if m := reads.Most(); m > service.ListingBatch {
			t.Fatalf("tick %d read %d rows at once; steps of %d", ticks, m, service.ListingBatch)
		}
		done = n
	}
	if c, err := e.st.CountJobFiles(e.ctx, j.ID); err != nil || len(c) != 1 {
		t.Fatalf("files after the ticks: %v %v", c, err)
	}
	if ps, err := e.st.ListFileParts(e.ctx, store.FilePartFilter{Job: j.ID, States: []string{transfer.FilePending, transfer.FileActive}, Limit: 1}); err != nil || len(ps) != 0 {
		t.Fatalf("parts open after the ticks: %d %v", len(ps), err)
	}
	if ws, err := e.st.ListJobSweeps(e.ctx, 0); err != nil || len(ws) != 0 {
		t.Fatalf("sweeps left: %+v %v", ws, err)
	}
	// Nothing left to sweep: a tick reads no file.
	reads.Most()
	e.s.Tick(e.ctx)
	if m := reads.Most(); m > 10 {
		t.Errorf("an idle tick read %d rows at once", m)
	}
}
