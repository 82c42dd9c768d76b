package report

import (
	"maps"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/transfer"
)

// TestOutcome checks the last report of a copy: succeeded when verified,
// interrupted when stopped before that, failed with its first error
// otherwise.
func TestOutcome(t *testing.T) {
	byPath := map[string]int64{"routed": 10, "reserved": 90}
	ok := Result{Verified: true, BytesSent: 100, ThroughputBps: 800, Bottleneck: "network", BottleneckWhy: "w"}
	rep := Outcome(ok, byPath, "r-1", "stopped")
	if rep.State != transfer.Succeeded || rep.BytesDone != 100 || rep.ThroughputBps != 800 || rep.Bottleneck != "network" || rep.BottleneckWhy != "w" || rep.Reservation != "r-1" || rep.BytesByPath["reserved"] != 90 {
		t.Errorf("verified: %+v", rep)
	}
	rep = Outcome(Result{Interrupted: true, Errors: []string{"context canceled"}}, nil, "", "stopped")
	if rep.State != transfer.Interrupted || rep.Error != "stopped" {
		t.Errorf("interrupted: %+v", rep)
	}
	// Interrupted after the last file was verified: it succeeded.
	done := ok
	done.Interrupted = true
	if rep = Outcome(done, nil, "", "stopped"); rep.State != transfer.Succeeded {
		t.Errorf("interrupted once verified: %+v", rep)
	}
	rep = Outcome(Result{Errors: []string{"a: refused", "b: refused"}}, nil, "", "stopped")
	if rep.State != transfer.Failed || rep.Error != "a: refused" {
		t.Errorf("failed: %+v", rep)
	}
}

// TestRunning checks a running copy's report: its streams in seconds and
// bits per second, and its bytes split between the paths, the reserved
// share never below zero nor above what was sent.
func TestRunning(t *testing.T) {
	streams := []Stream{{RTT: 20 * time.Millisecond, MinRTT: 10 * time.Millisecond, Cwnd: 40, Retransmits: 3, PacingRate: 1000, DeliveryRate: 500, BytesAcked: 7}}
	for _, tc := range []struct {
		name     string
		reserved func() int64
		want     map[string]int64
	}{
		{"no reservation", nil, map[string]int64{"routed": 100}},
		{"part reserved", func() int64 { return 60 }, map[string]int64{"routed": 40, "reserved": 60}},
		{"more than sent", func() int64 { return 500 }, map[string]int64{"routed": 0, "reserved": 100}},
		{"negative", func() int64 { return -5 }, map[string]int64{"routed": 100, "reserved": 0}},
	} {
		rep := Running(Progress{Sent: 100, Total: 1000, Streams: streams}, tc.reserved)
		if rep.BytesDone != 100 || rep.BytesTotal != 1000 || rep.State != "" || !maps.Equal(rep.BytesByPath, tc.want) {
			t.Errorf("%s: %+v, want bytes by path %v", tc.name, rep, tc.want)
		}
		want := transfer.Stream{RTTSeconds: 0.02, MinRTTSeconds: 0.01, Cwnd: 40, Retransmits: 3, PacingBps: 8000, DeliveryBps: 4000, BytesAcked: 7}
		if len(rep.Streams) != 1 || rep.Streams[0] != want {
			t.Errorf("%s: streams %+v, want %+v", tc.name, rep.Streams, want)
		}
	}
}
