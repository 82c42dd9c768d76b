package repo

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/testclock"
)

// TestPushCache: pushes whose series change order, number and node, and an
// invalid one, each sample landing in its own series (the push cache finds
// series by the previous push's order, and must never mistake one for
// another).
func TestPushCache(t *testing.T) {
	dir := t.TempDir()
	c := testclock.New(t0.Add(time.Hour))
	r := open(t, filepath.Join(dir, "m.db"), c, nil)
	defer r.Close()
	ctx := context.Background()
	orders := [][]int{{0, 1, 2, 3}, {0, 1, 2, 3}, {0, 2, 1, 3}, {0, 1}, {0, 1, 2, 3, 4}, {1, 0, 3}, {0, 1, 2, 3, 4}}
	want := map[string]map[int64]float64{}
	for step, ord := range orders {
		ts := t0.Add(time.Duration(step) * 10 * time.Second).UnixMilli()
		for _, node := range []string{"a", "b"} {
			var pts []monitor.Point
			for _, i := range ord {
				v := float64(step*100 + i)
				pts = append(pts, pt("m", v, "if", fmt.Sprint(i)))
				k := node + "/" + fmt.Sprint(i)
				if want[k] == nil {
					want[k] = map[int64]float64{}
				}
				want[k][ts] = v
			}
			if res, err := r.Append(ctx, batch(node, ts, pts...)); err != nil || res.Stored != len(ord) {
				t.Fatalf("step %d node %s: %+v %v", step, node, res, err)
			}
		}
		// An invalid push with the same first series stores nothing and
		// leaves no trace.
		bad := batch("a", ts+1, pt("m", 1, "if", "0"), pt("m", 1, "if", "new"), pt("bad name", 1))
		if _, err := r.Append(ctx, bad); err == nil {
			t.Fatalf("step %d: invalid push accepted", step)
		}
	}
	for k, pts := range want {
		var node, i string
		fmt.Sscanf(k, "%1s/%s", &node, &i)
		ss := query(t, r, raw("m", map[string]string{"node": node, "if": i}, t0, t0.Add(time.Hour)))
		if len(ss) != 1 || len(ss[0].Points) != len(pts) {
			t.Fatalf("%s: %+v, want %v", k, ss, pts)
		}
		for _, p := range ss[0].Points {
			if pts[p.T] != p.V {
				t.Fatalf("%s: %d = %v, want %v", k, p.T, p.V, pts[p.T])
			}
		}
	}
	ss := query(t, r, raw("m", nil, t0, t0.Add(time.Hour)))
	if len(ss) != 10 {
		t.Fatalf("%d series, want 10", len(ss))
	}
}
