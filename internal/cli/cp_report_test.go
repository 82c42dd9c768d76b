package cli

import (
	"slices"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/mover"
)

// TestCopyResult: the copy's summary reaches its last report whole (the
// report package takes its own Result, not the mover's Summary).
func TestCopyResult(t *testing.T) {
	s := mover.Summary{BytesSent: 1000, Elapsed: 2 * time.Second, Verified: true, Interrupted: true,
		Bottleneck: mover.Bottleneck{What: "network", Why: "the path is full"}, Errors: []string{"a: refused"}}
	r := copyResult(s)
	if r.BytesSent != 1000 || !r.Verified || !r.Interrupted || r.Bottleneck != "network" || r.BottleneckWhy != "the path is full" ||
		r.ThroughputBps != s.ThroughputBps() || r.ThroughputBps == 0 || !slices.Equal(r.Errors, s.Errors) {
		t.Errorf("copyResult(%+v) = %+v", s, r)
	}
}
