package optimize

import (
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/transfer"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// bytesAt is what a minute at bps carries.
func bytesAt(bps float64) int64 { return int64(bps * 60 / 8) }

func TestWithDefaults(t *testing.T) {
	got := Config{}.WithDefaults()
	want := Config{Interval: time.Minute, MinConcurrency: 1, MaxConcurrency: 8, MaxStreams: 16, SuccessFloor: 0.97}
	if got != want {
		t.Errorf("Config{}.WithDefaults() = %+v, want %+v", got, want)
	}
	kept := Config{Interval: time.Second, MinConcurrency: 2, MaxConcurrency: 4, MaxStreams: 8, SuccessFloor: 0.9}
	if got := kept.WithDefaults(); got != kept {
		t.Errorf("WithDefaults changed %+v into %+v", kept, got)
	}
	if got := (Config{MinConcurrency: 10, MaxConcurrency: 3, SuccessFloor: 1.5}).WithDefaults(); got.MaxConcurrency != 10 || got.SuccessFloor != 0.97 {
		t.Errorf("a maximum below the minimum and a floor above 1 became %+v", got)
	}
}

func TestStart(t *testing.T) {
	for _, tc := range []struct {
		name           string
		queued, active int
		streams        int
		reason         string
	}{
		{"a long queue: one stream each", 10, 0, 1, "start: concurrency 1, 1 stream per task"},
		{"one task: all four connections", 1, 0, 4, "start: concurrency 1, 4 streams per task"},
		{"nothing yet: shared over the concurrency", 0, 0, 4, "start: concurrency 1, 4 streams per task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{}, 0)
			d, ok := p.Decide(t0, tc.queued, tc.active)
			if !ok || d.Concurrency != 1 || d.Streams != tc.streams || d.Reason != tc.reason || !d.At.Equal(t0) || d.SuccessRate != 1 {
				t.Errorf("first decision %+v, %v", d, ok)
			}
			// within the interval: the same decision, not to be stored
			d2, ok := p.Decide(t0.Add(59*time.Second), 5, 5)
			if ok || d2 != d {
				t.Errorf("within the interval: %+v, %v; want %+v, false", d2, ok, d)
			}
		})
	}
}

// TestRules: each rule, from a resumed decision (concurrency c, the
// throughput of its interval prev), one interval of samples, then a
// decision.
func TestRules(t *testing.T) {
	const M = 1e6
	type in struct {
		c              int
		prev           float64 // bit/s
		booked         uint64
		bps            float64 // measured over the next minute; <0: no report at all
		ok, failed     int
		queued, active int
	}
	for _, tc := range []struct {
		name    string
		in      in
		want    int
		streams int
		reason  string
	}{
		{"success below the floor lowers by one", in{c: 4, prev: 100 * M, bps: 150 * M, ok: 91, failed: 9, queued: 20, active: 4}, 3, 1,
			"success 91% < 97%: concurrency 4 → 3"},
		{"success below the floor at the minimum", in{c: 1, prev: 100 * M, bps: 100 * M, ok: 1, failed: 1, queued: 20, active: 1}, 1, 1,
			"success 50% < 97%: concurrency stays at its minimum 1"},
		{"success below the floor, one decimal", in{c: 3, prev: 100 * M, bps: 100 * M, ok: 193, failed: 7, queued: 20, active: 3}, 2, 1,
			"success 96.5% < 97%: concurrency 3 → 2"},
		{"success at the floor is fine", in{c: 4, prev: 100 * M, bps: 100 * M, ok: 97, failed: 3, queued: 20, active: 4}, 4, 1,
			"throughput flat (+0%): hold at 4"},
		{"no file ended: success counts as whole", in{c: 4, prev: 100 * M, bps: 100 * M, queued: 20, active: 4}, 4, 1,
			"throughput flat (+0%): hold at 4"},
		{"throughput up 8%: one more", in{c: 4, prev: 100 * M, bps: 108 * M, ok: 10, queued: 20, active: 4}, 5, 1,
			"throughput up 8%: concurrency 4 → 5"},
		{"throughput up 30%: two more", in{c: 4, prev: 100 * M, bps: 130 * M, ok: 10, queued: 6, active: 4}, 6, 2,
			"throughput up 30%: concurrency 4 → 6"},
		{"two more, capped at the maximum", in{c: 7, prev: 100 * M, bps: 130 * M, queued: 20, active: 7}, 8, 1,
			"throughput up 30%: concurrency 7 → 8"},
		{"at the maximum", in{c: 8, prev: 100 * M, bps: 130 * M, queued: 20, active: 8}, 8, 1,
			"throughput up 30%: concurrency stays at its maximum 8"},
		{"throughput rose from nothing", in{c: 1, prev: 0, bps: 50 * M, queued: 20, active: 1}, 3, 1,
			"throughput rose from nothing: concurrency 1 → 3"},
		{"flat holds", in{c: 4, prev: 100 * M, bps: 103 * M, queued: 20, active: 4}, 4, 1,
			"throughput flat (+3%): hold at 4"},
		{"falling holds", in{c: 4, prev: 100 * M, bps: 88 * M, queued: 20, active: 4}, 4, 1,
			"throughput down 12%: hold at 4"},
		{"nothing moved holds", in{c: 4, prev: 100 * M, bps: 0, queued: 20, active: 4}, 4, 1,
			"throughput down 100%: hold at 4"},
		{"a short queue holds", in{c: 4, prev: 100 * M, bps: 130 * M, queued: 2, active: 4}, 4, 2,
			"short queue (2 queued, 4 running): hold at 4"},
		{"queue as long as the running tasks holds", in{c: 2, prev: 100 * M, bps: 130 * M, queued: 2, active: 2}, 2, 2,
			"short queue (2 queued, 2 running): hold at 2"},
		{"at the booked rate holds", in{c: 4, prev: 50 * M, booked: 100 * M, bps: 96 * M, queued: 20, active: 4}, 4, 1,
			"at the booked rate: hold at 4"},
		{"below 95% of the booked rate may raise", in{c: 4, prev: 50 * M, booked: 100 * M, bps: 90 * M, queued: 20, active: 4}, 6, 1,
			"throughput up 80%: concurrency 4 → 6"},
		{"failures lower even at the booked rate", in{c: 4, prev: 50 * M, booked: 100 * M, bps: 99 * M, ok: 1, failed: 1, queued: 20, active: 4}, 3, 1,
			"success 50% < 97%: concurrency 4 → 3"},
		{"idle holds", in{c: 4, prev: 100 * M, bps: 0}, 4, 4,
			"idle, nothing running or queued: hold at 4"},
		{"no report since the restart holds", in{c: 4, prev: 100 * M, bps: -1, queued: 20, active: 4}, 4, 1,
			"no report since the controller restarted: hold at 4"},
		{"streams: connections over the tasks", in{c: 4, prev: 100 * M, bps: 100 * M, queued: 3, active: 1}, 4, 4,
			"throughput flat (+0%): hold at 4"},
		{"streams: at most MaxStreams", in{c: 8, prev: 100 * M, bps: 100 * M, queued: 0, active: 1}, 8, 16,
			"short queue (0 queued, 1 running): hold at 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{}, tc.in.booked)
			p.Resume(transfer.Decision{Job: "j-1", From: "a1", To: "b1", At: t0, Concurrency: tc.in.c, Streams: 4, ThroughputBps: tc.in.prev, SuccessRate: 1, Reason: "before"})
			if tc.in.bps >= 0 {
				p.Observe(Sample{At: t0, Bytes: 1 << 40}) // opens the interval; its bytes are from before
				p.Observe(Sample{At: t0.Add(30 * time.Second), Bytes: bytesAt(tc.in.bps) / 2, FilesOK: tc.in.ok})
				p.Observe(Sample{At: t0.Add(60 * time.Second), Bytes: bytesAt(tc.in.bps) - bytesAt(tc.in.bps)/2, FilesFailed: tc.in.failed})
			}
			if d, ok := p.Decide(t0.Add(30*time.Second), tc.in.queued, tc.in.active); ok || d.Reason != "before" {
				t.Fatalf("within the interval: %+v, %v", d, ok)
			}
			now := t0.Add(time.Minute)
			d, ok := p.Decide(now, tc.in.queued, tc.in.active)
			if !ok {
				t.Fatal("no new decision after an interval")
			}
			if d.Concurrency != tc.want || d.Streams != tc.streams || d.Reason != tc.reason {
				t.Errorf("decision: concurrency %d, streams %d, %q; want %d, %d, %q", d.Concurrency, d.Streams, d.Reason, tc.want, tc.streams, tc.reason)
			}
			if d.Job != "j-1" || d.From != "a1" || d.To != "b1" || !d.At.Equal(now) {
				t.Errorf("decision %+v: lost its pair or time", d)
			}
			if tc.in.bps > 0 && (d.ThroughputBps < tc.in.bps*0.999 || d.ThroughputBps > tc.in.bps*1.001) {
				t.Errorf("throughput %.0f, want %.0f", d.ThroughputBps, tc.in.bps)
			}
			if ended := tc.in.ok + tc.in.failed; ended > 0 && d.SuccessRate != float64(tc.in.ok)/float64(ended) {
				t.Errorf("success rate %v", d.SuccessRate)
			}
		})
	}
}

// TestSequence runs a pair against a path that carries 60 Mbit/s per
// task up to 400 Mbit/s in all, through a restart of the controller.
func TestSequence(t *testing.T) {
	const M = 1e6
	path := func(c int) float64 { return min(float64(c)*60*M, 400*M) }
	p := New(Config{}, 0)
	now := t0
	d, ok := p.Decide(now, 100, 0)
	if !ok || d.Concurrency != 1 {
		t.Fatalf("start: %+v", d)
	}
	step := func(failed int, want int, reason string) {
		t.Helper()
		bps := path(d.Concurrency)
		for i := range 6 {
			p.Observe(Sample{At: now.Add(time.Duration(i+1) * 10 * time.Second), Bytes: bytesAt(bps) / 6, FilesOK: 10 - failed/6, FilesFailed: failed / 6})
		}
		now = now.Add(time.Minute)
		var ok bool
		d, ok = p.Decide(now, 100, d.Concurrency)
		if !ok || d.Concurrency != want || d.Reason != reason {
			t.Fatalf("at %s: concurrency %d, %q; want %d, %q", now.Sub(t0), d.Concurrency, d.Reason, want, reason)
		}
	}
	step(0, 3, "throughput rose from nothing: concurrency 1 → 3")
	step(0, 5, "throughput up 200%: concurrency 3 → 5")
	step(0, 7, "throughput up 67%: concurrency 5 → 7")
	step(0, 8, "throughput up 33%: concurrency 7 → 8")
	step(0, 7, "raising to 8 did not pay (throughput +0%): concurrency 8 → 7")
	step(0, 7, "throughput flat (+0%): hold at 7")
	step(6, 6, "success 90% < 97%: concurrency 7 → 6")

	// The controller restarts 20 s later and resumes from the stored
	// decision: nothing new until its interval is over, then a hold,
	// as no report came since the restart (the first one after it opens
	// the measured interval: its bytes belong to a span not known).
	stored := d
	p = New(Config{}, 0)
	p.Resume(stored)
	if got, ok := p.Decide(now.Add(20*time.Second), 100, 6); ok || got != stored {
		t.Fatalf("after the restart, within the interval: %+v, %v", got, ok)
	}
	now = now.Add(time.Minute)
	if d, ok = p.Decide(now, 100, 6); !ok || d.Concurrency != 6 || d.Reason != "no report since the controller restarted: hold at 6" {
		t.Fatalf("after the restart: %+v, %v", d, ok)
	}
	// The next interval is compared with the last throughput measured
	// before the restart (400 Mbit/s at concurrency 7).
	step(0, 6, "throughput down 10%: hold at 6")
	step(0, 6, "throughput flat (+0%): hold at 6")
}
