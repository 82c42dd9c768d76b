package repo

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/testclock"
)

var t0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

func open(t *testing.T, path string, c *testclock.Clock, mod func(*Options)) *Repo {
	t.Helper()
	o := Options{Path: path, Now: c.Now, Checkpoint: time.Hour}
	if mod != nil {
		mod(&o)
	}
	r, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return r
}

func batch(node string, ts int64, pts ...monitor.Point) *monitor.Batch {
	return &monitor.Batch{Node: node, Meta: map[string]monitor.Meta{"m": {Type: monitor.Gauge, Help: "h"}},
		Groups: []monitor.Group{{T: ts, Points: pts}}}
}

func pt(name string, v float64, kv ...string) monitor.Point {
	return monitor.Point{Name: name, Labels: monitor.L(kv...), V: v}
}

func query(t *testing.T, r *Repo, q Query) []Series {
	t.Helper()
	ss, err := r.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("query %+v: %v", q, err)
	}
	return ss
}

func raw(name string, m map[string]string, from, to time.Time) Query {
	return Query{Name: name, Match: m, Start: from, End: to, Tier: -1}
}

func TestRoundTripAndDuplicates(t *testing.T) {
	dir := t.TempDir()
	c := testclock.New(t0.Add(time.Hour))
	r := open(t, filepath.Join(dir, "m.db"), c, nil)
	ctx := context.Background()
	for i := range 100 {
		ts := t0.Add(time.Duration(i) * 10 * time.Second).UnixMilli()
		res, err := r.Append(ctx, batch("n1", ts, pt("m", float64(i)/10, "if", "eth0"), pt("m", math.NaN(), "if", "eth1", "node", "spoofed")))
		if err != nil || res.Stored != 2 || res.Duplicate != 0 {
			t.Fatalf("append %d: %+v %v", i, res, err)
		}
	}
	// A batch re-sent (its acknowledgement lost) is stored once.
	res, err := r.Append(ctx, batch("n1", t0.Add(990*time.Second).UnixMilli(), pt("m", 9.9, "if", "eth0")))
	if err != nil || res.Stored != 0 || res.Duplicate != 1 {
		t.Fatalf("re-sent: %+v %v", res, err)
	}
	check := func(r *Repo) {
		ss := query(t, r, raw("m", map[string]string{"if": "eth0"}, t0, t0.Add(time.Hour)))
		if len(ss) != 1 || len(ss[0].Points) != 100 || ss[0].Labels.Get("node") != "n1" {
			t.Fatalf("got %+v", ss)
		}
		for i, p := range ss[0].Points {
			if p.T != t0.Add(time.Duration(i)*10*time.Second).UnixMilli() || p.V != float64(i)/10 {
				t.Fatalf("point %d: %+v", i, p)
			}
		}
		ss = query(t, r, raw("m", map[string]string{"node": "n1"}, t0, t0.Add(time.Hour)))
		if len(ss) != 2 || ss[1].Labels.Get("node") != "n1" || !math.IsNaN(ss[1].Points[5].V) {
			t.Fatalf("node override / NaN: %+v", ss)
		}
		if m, ok := r.Meta("m"); !ok || m.Type != monitor.Gauge {
			t.Fatalf("meta %+v %v", m, ok)
		}
	}
	check(r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = open(t, filepath.Join(dir, "m.db"), c, nil)
	defer r.Close()
	check(r)
	res, err = r.Append(ctx, batch("n1", t0.Add(990*time.Second).UnixMilli(), pt("m", 9.9, "if", "eth0")))
	if err != nil || res.Duplicate != 1 {
		t.Fatalf("re-sent after reopen: %+v %v", res, err)
	}
	if st := r.Stats(); st.Series != 2 || st.Tiers[0].Samples != 200 {
		t.Fatalf("stats %+v", st)
	}
}

func TestInvalidBatchStoresNothing(t *testing.T) {
	c := testclock.New(t0)
	r := open(t, filepath.Join(t.TempDir(), "m.db"), c, nil)
	defer r.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		b    *monitor.Batch
	}{
		{"bad name", batch("n1", 1000, pt("ok", 1), pt("1bad", 2))},
		{"bad label", batch("n1", 1000, pt("ok", 1), pt("ok2", 2, "__x", "1"))},
		{"unsorted", batch("n1", 1000, pt("ok", 1), monitor.Point{Name: "ok3", Labels: monitor.Labels{{Name: "b", Value: "1"}, {Name: "a", Value: "2"}}})},
		{"no node", batch("", 1000, pt("ok", 1))},
		{"bad meta", &monitor.Batch{Node: "n", Meta: map[string]monitor.Meta{"x": {Type: "histogram"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Append(ctx, tc.b)
			if !errors.Is(err, monitor.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if n := r.Names(); len(n) != 0 {
				t.Fatalf("names after a refused batch: %v", n)
			}
		})
	}
}
