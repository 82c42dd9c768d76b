package push

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/retry"
)

// sink records what it is sent, or fails while down.
type sink struct {
	mu      sync.Mutex
	down    bool
	refuse  bool
	batches []*monitor.Batch
}

func (s *sink) Push(_ context.Context, b *monitor.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errors.New("connection refused")
	}
	if s.refuse {
		return retry.Permanent(errors.New("bad series"))
	}
	s.batches = append(s.batches, b)
	return nil
}

func (s *sink) times() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ts []int64
	for _, b := range s.batches {
		for _, g := range b.Groups {
			ts = append(ts, g.T)
		}
	}
	return ts
}

func group(t int64, n int) monitor.Group {
	g := monitor.Group{T: t}
	for i := range n {
		g.Points = append(g.Points, monitor.Point{Name: "lightpath_x_total", Labels: monitor.L("i", fmt.Sprint(i)), V: float64(t)})
	}
	return g
}

var meta = map[string]monitor.Meta{"lightpath_x_total": {Type: monitor.Counter, Help: "x"}}

func TestSpoolWhileDown(t *testing.T) {
	for _, dir := range []bool{false, true} {
		t.Run(fmt.Sprintf("disk=%v", dir), func(t *testing.T) {
			o := Options{Node: "ra", MaxSamples: 10}
			if dir {
				o.Dir = t.TempDir()
			}
			s := &sink{down: true}
			p, err := New(o, s)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := range 7 {
				if err := p.Add(group(int64(1000*(i+1)), 4), meta); err != nil {
					t.Fatal(err)
				}
				if err := p.Flush(ctx); err == nil {
					t.Fatal("flush to a down controller succeeded")
				}
			}
			if g, _, _ := p.Stats(); g != 7 {
				t.Fatalf("spooled %d groups, want 7", g)
			}
			s.down = false
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			want := []int64{1000, 2000, 3000, 4000, 5000, 6000, 7000}
			if got := s.times(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("sent %v, want %v in order", got, want)
			}
			// 4 samples a group, at most 10 a batch: 2 groups a batch.
			if len(s.batches) != 4 {
				t.Errorf("%d batches, want 4", len(s.batches))
			}
			for i, b := range s.batches {
				if b.Node != "ra" || b.Seq == 0 || b.Meta["lightpath_x_total"].Type != monitor.Counter {
					t.Errorf("batch %d: node %q seq %d meta %v", i, b.Node, b.Seq, b.Meta)
				}
			}
			if g, bytes, dropped := p.Stats(); g != 0 || bytes != 0 || dropped != 0 {
				t.Errorf("after flush: %d groups, %d bytes, %d dropped", g, bytes, dropped)
			}
			if dir {
				ents, _ := os.ReadDir(o.Dir)
				for _, e := range ents {
					if e.Name() != "meta.json" {
						t.Errorf("spool still holds %s", e.Name())
					}
				}
			}
		})
	}
}

func TestSpoolSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s := &sink{down: true}
	p, err := New(Options{Node: "ra", Dir: dir}, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := p.Add(group(int64(i+1), 2), meta); err != nil {
			t.Fatal(err)
		}
	}
	// A write cut short by a crash leaves a .tmp file: ignored.
	if err := os.WriteFile(dir+"/0000000000000009.json.tmp", []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.down = false
	p2, err := New(Options{Node: "ra", Dir: dir}, s)
	if err != nil {
		t.Fatal(err)
	}
	if g, _, _ := p2.Stats(); g != 3 {
		t.Fatalf("resumed %d groups, want 3", g)
	}
	if err := p2.Add(group(4, 2), nil); err != nil {
		t.Fatal(err)
	}
	if err := p2.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.times()); got != "[1 2 3 4]" {
		t.Fatalf("sent %s, want [1 2 3 4]", got)
	}
	if s.batches[0].Meta["lightpath_x_total"].Help != "x" {
		t.Errorf("metadata not resumed: %v", s.batches[0].Meta)
	}
}

func TestSpoolBound(t *testing.T) {
	s := &sink{down: true}
	one := group(1, 5)
	size := int64(len(mustJSON(one)))
	p, err := New(Options{Node: "ra", Dir: t.TempDir(), MaxBytes: 3*size + size/2}, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := p.Add(group(int64(i+1), 5), meta); err != nil {
			t.Fatal(err)
		}
	}
	g, bytes, dropped := p.Stats()
	if g != 3 || bytes > 3*size+size/2 || dropped != 15 {
		t.Fatalf("bounded spool: %d groups, %d bytes, %d dropped; want 3 groups, 15 dropped", g, bytes, dropped)
	}
	s.down = false
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.times()); got != "[4 5 6]" {
		t.Fatalf("sent %s, want the newest [4 5 6]", got)
	}
}

func TestPermanentRefusalDrops(t *testing.T) {
	s := &sink{refuse: true}
	p, err := New(Options{Node: "ra"}, s)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Add(group(1, 3), meta)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatalf("a permanent refusal should drop, not fail: %v", err)
	}
	if g, _, dropped := p.Stats(); g != 0 || dropped != 3 {
		t.Fatalf("%d groups left, %d dropped; want 0 and 3", g, dropped)
	}
}
