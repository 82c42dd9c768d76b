package report

import (
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/transfer"
)

// TestOutcome checks the last report of a copy: succeeded when verified,
// interrupted when stopped before that, failed with its first error
// otherwise.
func TestOutcome(t *testing.T) {
	byPath := map[string]int64{"routed": 10, "reserved": 90}
	ok := mover.Summary{Verified: true, BytesSent: 100, Elapsed: time.Second, Bottleneck: mover.Bottleneck{What: "network", Why: "w"}}
	rep := Outcome(ok, byPath, "r-1", "stopped")
	if rep.State != transfer.Succeeded || rep.BytesDone != 100 || rep.ThroughputBps != 800 || rep.Bottleneck != "network" || rep.Reservation != "r-1" || rep.BytesByPath["reserved"] != 90 {
		t.Errorf("verified: %+v", rep)
	}
	rep = Outcome(mover.Summary{Interrupted: true, Errors: []string{"context canceled"}}, nil, "", "stopped")
	if rep.State != transfer.Interrupted || rep.Error != "stopped" {
		t.Errorf("interrupted: %+v", rep)
	}
	// Interrupted after the last file was verified: it succeeded.
	done := ok
	done.Interrupted = true
	if rep = Outcome(done, nil, "", "stopped"); rep.State != transfer.Succeeded {
		t.Errorf("interrupted once verified: %+v", rep)
	}
	rep = Outcome(mover.Summary{Errors: []string{"a: refused", "b: refused"}}, nil, "", "stopped")
	if rep.State != transfer.Failed || rep.Error != "a: refused" {
		t.Errorf("failed: %+v", rep)
	}
}
