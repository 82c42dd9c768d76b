package storetest

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// sampleTransfer returns a transfer with every field set, started at
// base plus offset.
func sampleTransfer(id, owner string, offset time.Duration) transfer.Transfer {
	start := base.Add(offset)
	return transfer.Transfer{ID: id, Owner: owner, State: transfer.Running, Direction: "push",
		Source: "/data/ünï \x00file", Destination: "lp://h2:7070/in", From: "h1", To: "h2",
		Flow: "tcp 198.18.1.2 > 198.18.2.2:7070", Reservation: "r1", Streams: 4,
		BytesTotal: 1 << 40, BytesDone: 1 << 30, BytesByPath: map[string]int64{"routed": 1 << 29, "reserved": 1 << 29},
		ThroughputBps: 9.5e9, StartedAt: start, UpdatedAt: start.Add(time.Second), Verified: true,
		Bottleneck: "network", BottleneckWhy: "the link is full", Error: "none"}
}

// utcTransfer is t as the store gives it back: times in UTC.
func utcTransfer(t transfer.Transfer) transfer.Transfer {
	t.StartedAt, t.UpdatedAt = t.StartedAt.UTC(), t.UpdatedAt.UTC()
	if !t.EndedAt.IsZero() {
		t.EndedAt = t.EndedAt.UTC()
	}
	return t
}

func sameTransfer(t *testing.T, got, want transfer.Transfer) {
	t.Helper()
	if want = utcTransfer(want); !reflect.DeepEqual(got, want) {
		t.Errorf("transfer %s:\n got %+v\nwant %+v", want.ID, got, want)
	}
}

func transferIDs(ts []transfer.Transfer) []string {
	ids := []string{}
	for _, t := range ts {
		ids = append(ids, t.ID)
	}
	return ids
}

func testTransferRoundTrip(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	tr := sampleTransfer("t-1", "alice", 0)
	if err := s.CreateTransfer(ctx, tr); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTransfer(ctx, "t-1")
	if err != nil {
		t.Fatal(err)
	}
	sameTransfer(t, got, tr)
	if err := s.CreateTransfer(ctx, tr); !errors.Is(err, reserve.ErrConflict) {
		t.Errorf("create a taken id: %v, want ErrConflict", err)
	}
	if _, err := s.GetTransfer(ctx, "t-none"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("get a missing transfer: %v, want ErrNotFound", err)
	}
	// An update changes everything but the owner and the start.
	up := tr
	up.Owner, up.StartedAt = "mallory", base.Add(time.Hour)
	up.State, up.BytesDone, up.EndedAt, up.UpdatedAt = transfer.Succeeded, 1<<40, base.Add(time.Minute), base.Add(time.Minute)
	up.BytesByPath = nil
	if err := s.UpdateTransfer(ctx, up); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetTransfer(ctx, "t-1")
	if err != nil {
		t.Fatal(err)
	}
	up.Owner, up.StartedAt = tr.Owner, tr.StartedAt
	sameTransfer(t, got, up)
	if err := s.UpdateTransfer(ctx, sampleTransfer("t-none", "alice", 0)); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("update a missing transfer: %v, want ErrNotFound", err)
	}
	// What one backend could hold and the other not is refused by both.
	for _, tc := range []struct {
		name string
		fix  func(*transfer.Transfer)
	}{
		{"no id", func(x *transfer.Transfer) { x.ID = "" }},
		{"no owner", func(x *transfer.Transfer) { x.Owner = "" }},
		{"no state", func(x *transfer.Transfer) { x.State = "" }},
		{"a NUL in the owner", func(x *transfer.Transfer) { x.Owner = "a\x00b" }},
		{"invalid UTF-8 in the error", func(x *transfer.Transfer) { x.Error = "a\xffb" }},
		{"invalid UTF-8 in a path", func(x *transfer.Transfer) { x.BytesByPath = map[string]int64{"\xff": 1} }},
		{"a NaN throughput", func(x *transfer.Transfer) { x.ThroughputBps = math.NaN() }},
		{"a start beyond 2262", func(x *transfer.Transfer) { x.StartedAt = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC) }},
	} {
		x := sampleTransfer("t-bad", "alice", 0)
		tc.fix(&x)
		if err := s.CreateTransfer(ctx, x); !errors.Is(err, reserve.ErrInvalid) {
			t.Errorf("create with %s: %v, want ErrInvalid", tc.name, err)
		}
	}
	if ts, err := s.ListTransfers(ctx, store.TransferFilter{}); err != nil || len(ts) != 1 {
		t.Errorf("after refused creates: %v, %v; want t-1 alone", transferIDs(ts), err)
	}
	// The caller's copy is its own.
	got.BytesByPath = map[string]int64{"x": 1}
	if again, _ := s.GetTransfer(ctx, "t-1"); again.BytesByPath != nil {
		t.Errorf("a change to a returned value was stored: %v", again.BytesByPath)
	}
}

func testTransferFilters(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	mk := func(id, owner, state string, offset, updated time.Duration) transfer.Transfer {
		x := sampleTransfer(id, owner, offset)
		x.State, x.UpdatedAt = state, base.Add(updated)
		return x
	}
	for _, x := range []transfer.Transfer{
		mk("t-a1", "alice", transfer.Running, 0, time.Hour),
		mk("t-a2", "alice", transfer.Running, time.Minute, 10*time.Second),
		mk("t-a3", "alice", transfer.Succeeded, 2*time.Minute, time.Hour),
		mk("t-b1", "bob", transfer.Running, 3*time.Minute, time.Hour),
		mk("t-b2", "bob", transfer.Failed, 3*time.Minute, time.Hour), // same start as t-b1: by ID
	} {
		if err := s.CreateTransfer(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		f     store.TransferFilter
		want  []string
		count int
	}{
		{"all, newest first", store.TransferFilter{}, []string{"t-b1", "t-b2", "t-a3", "t-a2", "t-a1"}, 5},
		{"owner", store.TransferFilter{Owner: "alice"}, []string{"t-a3", "t-a2", "t-a1"}, 3},
		{"since", store.TransferFilter{Since: base.Add(2 * time.Minute)}, []string{"t-b1", "t-b2", "t-a3"}, 3},
		{"limit", store.TransferFilter{Limit: 2}, []string{"t-b1", "t-b2"}, 5},
		{"states", store.TransferFilter{States: []string{transfer.Succeeded, transfer.Failed}}, []string{"t-b2", "t-a3"}, 2},
		{"running", store.TransferFilter{States: []string{transfer.Running}}, []string{"t-b1", "t-a2", "t-a1"}, 3},
		{"live of an owner", store.TransferFilter{Owner: "alice", States: []string{transfer.Running}, UpdatedSince: base.Add(time.Minute)}, []string{"t-a1"}, 1},
		{"live of an owner but one", store.TransferFilter{Owner: "alice", States: []string{transfer.Running}, Except: "t-a1"}, []string{"t-a2"}, 1},
		{"none", store.TransferFilter{Owner: "carol"}, []string{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := s.ListTransfers(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := transferIDs(ts); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("list %+v: %v, want %v", tc.f, got, tc.want)
			}
			if n, err := s.CountTransfers(ctx, tc.f); err != nil || n != tc.count {
				t.Errorf("count %+v: %d, %v; want %d", tc.f, n, err, tc.count)
			}
		})
	}
}

func sampleAlert(at time.Time, rule string, labels map[string]string) store.AlertRecord {
	return store.AlertRecord{At: at, Rule: rule, Severity: "warning", Series: "lightpath_link_utilisation_ratio",
		Labels: labels, From: "pending", To: "firing", Resolved: false, Value: 0.97, Threshold: 0.9,
		Reason: "above 0.9 for 30s: 0.97 ('quoted', ünï)"}
}

func sameAlert(t *testing.T, got, want store.AlertRecord) {
	t.Helper()
	want.At = want.At.UTC()
	// NaN is not equal to itself: compare it apart.
	if math.IsNaN(got.Value) && math.IsNaN(want.Value) {
		got.Value, want.Value = 0, 0
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("alert record %d:\n got %+v\nwant %+v", want.ID, got, want)
	}
}

func testAlertRoundTrip(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	recs := []store.AlertRecord{
		sampleAlert(base, "hot", map[string]string{"link": "r1-r2", "from": "r1"}),
		sampleAlert(base.Add(time.Second), "hot", nil),
		sampleAlert(base.Add(2*time.Second), "cold", map[string]string{"node": "h1"}),
		sampleAlert(base.Add(3*time.Second), "inf", map[string]string{"node": "h1"}),
	}
	recs[1].Value, recs[1].Resolved, recs[1].To = math.NaN(), true, "ok"
	recs[2].Actions = []store.AlertAction{{Kind: "log", OK: true}, {Kind: "webhook", OK: false, Detail: "503 Service Unavailable"}}
	recs[3].Value, recs[3].Threshold = math.Inf(1), math.Inf(-1)
	var last int64
	for i := range recs {
		id, err := s.AppendAlert(ctx, recs[i])
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Errorf("record %d got id %d after %d: want increasing ids", i, id, last)
		}
		recs[i].ID, last = id, id
	}
	got, err := s.ListAlerts(ctx, store.AlertFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("%d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		sameAlert(t, got[len(recs)-1-i], recs[i]) // newest first
	}
	acts := []store.AlertAction{{Kind: "reroute", OK: true, Detail: "r7 moved"}}
	if err := s.SetAlertActions(ctx, recs[0].ID, acts); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAlertActions(ctx, last+100, acts); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("set the actions of a missing record: %v, want ErrNotFound", err)
	}
	got, err = s.ListAlerts(ctx, store.AlertFilter{Rule: "hot", Limit: 1, Until: base})
	if err != nil || len(got) != 1 {
		t.Fatalf("the first record: %v, %v", got, err)
	}
	recs[0].Actions = acts
	sameAlert(t, got[0], recs[0])
	for _, tc := range []struct {
		name string
		r    store.AlertRecord
	}{
		{"a NUL in a label", sampleAlert(base, "r", map[string]string{"link": "a\x00"})},
		{"invalid UTF-8 in the reason", func() store.AlertRecord { r := sampleAlert(base, "r", nil); r.Reason = "\xff"; return r }()},
		{"a time beyond 2262", sampleAlert(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), "r", nil)},
	} {
		if _, err := s.AppendAlert(ctx, tc.r); !errors.Is(err, reserve.ErrInvalid) {
			t.Errorf("append with %s: %v, want ErrInvalid", tc.name, err)
		}
	}
	if got, err := s.ListAlerts(ctx, store.AlertFilter{}); err != nil || len(got) != len(recs) {
		t.Errorf("after refused appends: %d records, %v; want %d", len(got), err, len(recs))
	}
}

func testAlertFilters(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	ids := map[string]int64{}
	for _, r := range []struct {
		name   string
		at     time.Duration
		rule   string
		labels map[string]string
	}{
		{"wan", 0, "hot", map[string]string{"link": "wan", "from": "r1"}},
		{"lan", time.Minute, "hot", map[string]string{"link": "lan", "from": "r2"}},
		{"h1", 2 * time.Minute, "down", map[string]string{"node": "h1"}},
		{"t", 3 * time.Minute, "slow", map[string]string{"transfer": "t-1", "node": "h2"}},
		{"same", 3 * time.Minute, "slow", map[string]string{"transfer": "t-2"}}, // same time as t: by id
	} {
		id, err := s.AppendAlert(ctx, sampleAlert(base.Add(r.at), r.rule, r.labels))
		if err != nil {
			t.Fatal(err)
		}
		ids[r.name] = id
	}
	names := func(rs []store.AlertRecord) []string {
		out := []string{}
		for _, r := range rs {
			for n, id := range ids {
				if id == r.ID {
					out = append(out, n)
				}
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    store.AlertFilter
		want []string
	}{
		{"all, newest first", store.AlertFilter{}, []string{"same", "t", "h1", "lan", "wan"}},
		{"since and until, both included", store.AlertFilter{Since: base.Add(time.Minute), Until: base.Add(2 * time.Minute)}, []string{"h1", "lan"}},
		{"rule", store.AlertFilter{Rule: "hot"}, []string{"lan", "wan"}},
		{"limit", store.AlertFilter{Limit: 3}, []string{"same", "t", "h1"}},
		{"any label", store.AlertFilter{Any: map[string][]string{"link": {"wan"}, "node": {"h1", "h2"}}}, []string{"t", "h1", "wan"}},
		{"any label and a rule", store.AlertFilter{Rule: "down", Any: map[string][]string{"link": {"wan"}, "node": {"h1"}}}, []string{"h1"}},
		{"a label of another name", store.AlertFilter{Any: map[string][]string{"from": {"wan"}}}, []string{}},
		{"labels asked for, none given", store.AlertFilter{Any: map[string][]string{"link": {}}}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListAlerts(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if n := names(got); !reflect.DeepEqual(n, tc.want) {
				t.Errorf("list %+v: %v, want %v", tc.f, n, tc.want)
			}
		})
	}
}

// testTransfersAlertsRestart: what was stored is there after a reopen.
func testTransfersAlertsRestart(t *testing.T, url string) {
	ctx := ctxFor(t)
	s, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tr := sampleTransfer("t-1", "alice", 0)
	rec := sampleAlert(base, "hot", map[string]string{"link": "wan"})
	if err := s.CreateTransfer(ctx, tr); err != nil {
		t.Fatal(err)
	}
	id, err := s.AppendAlert(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.ID = id
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, url)
	if got, err := s.GetTransfer(ctx, "t-1"); err != nil {
		t.Errorf("transfer after restart: %v", err)
	} else {
		sameTransfer(t, got, tr)
	}
	if got, err := s.ListAlerts(ctx, store.AlertFilter{Any: map[string][]string{"link": {"wan"}}}); err != nil || len(got) != 1 {
		t.Errorf("alert records after restart: %v, %v", got, err)
	} else {
		sameAlert(t, got[0], rec)
	}
	// A new record after the restart gets a new, later id.
	if id2, err := s.AppendAlert(ctx, rec); err != nil || id2 <= id {
		t.Errorf("append after restart: id %d, %v; want after %d", id2, err, id)
	}
}
