package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
)

// The suite's part for settings and exclusive holds (schema version 3).

// sampleExclusive returns a hold of a site with every field set, the
// cancellation's included, in base's zone and with nanoseconds.
func sampleExclusive(id, owner string) reserve.Exclusive {
	start := base.Add(time.Hour)
	return reserve.Exclusive{
		ID: id, Owner: owner, Project: "atlas", Site: "cern", Nodes: []string{"h1", "h3", "r1"},
		Start: start, End: start.Add(2 * time.Hour), State: reserve.StateCancelled, Version: 2,
		CreatedAt: base, CancelledAt: base.Add(time.Minute + time.Nanosecond), CancelledBy: "op", Why: "maintenance, ünïcode",
	}
}

// utcExclusive returns x as the store gives it back: every time in UTC.
func utcExclusive(x reserve.Exclusive) reserve.Exclusive {
	for _, t := range []*time.Time{&x.Start, &x.End, &x.CreatedAt, &x.CancelledAt} {
		if !t.IsZero() {
			*t = t.UTC()
		}
	}
	return x
}

func sameExclusive(t *testing.T, got, want reserve.Exclusive) {
	t.Helper()
	if want = utcExclusive(want); !reflect.DeepEqual(got, want) {
		t.Errorf("exclusive %s:\n got %+v\nwant %+v", want.ID, got, want)
	}
}

func testSettings(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	if _, err := s.GetSetting(ctx, "topology"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("get an unset setting: %v, want ErrNotFound", err)
	}
	// A topology is many lines of YAML; it comes back byte for byte.
	topo := "nodes:\n  - {name: h1, site: cern, role: host}\n  - {name: r1, site: cern, role: router}\n# ünïcode, 'quotes', \"double\", ?, $1\n"
	for _, kv := range [][2]string{{"topology", "old"}, {"policy", `{"default":{}}`}, {"topology", topo}, {"empty", ""}} {
		if err := s.PutSetting(ctx, kv[0], kv[1]); err != nil {
			t.Fatalf("put %s: %v", kv[0], err)
		}
	}
	for _, tc := range []struct{ key, want string }{{"topology", topo}, {"policy", `{"default":{}}`}, {"empty", ""}} {
		if got, err := s.GetSetting(ctx, tc.key); err != nil || got != tc.want {
			t.Errorf("get %s: %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
	// What one backend could hold and the other not is refused by both.
	for _, tc := range []struct{ name, key, value string }{
		{"no key", "", "x"},
		{"a NUL", "k", "a\x00b"},
		{"invalid UTF-8", "k", "a\xffb"},
		{"a key with a NUL", "k\x00", "x"},
	} {
		if err := s.PutSetting(ctx, tc.key, tc.value); !errors.Is(err, reserve.ErrInvalid) {
			t.Errorf("put %s: %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := s.GetSetting(ctx, "k"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("a refused put stored something: %v", err)
	}
	if _, err := s.GetSetting(ctx, "k\x00"); !errors.Is(err, reserve.ErrInvalid) {
		t.Errorf("get a key with a NUL: %v, want ErrInvalid", err)
	}
}

func testExclusiveRoundTrip(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	x := sampleExclusive("x1", "alice")
	if err := s.CreateExclusive(ctx, x); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetExclusive(ctx, "x1")
	if err != nil {
		t.Fatal(err)
	}
	sameExclusive(t, got, x)
	if got.Start.Location() != time.UTC || got.CancelledAt.Nanosecond() != x.CancelledAt.Nanosecond() {
		t.Errorf("times come back in %v with %dns, want UTC with %dns", got.Start.Location(), got.CancelledAt.Nanosecond(), x.CancelledAt.Nanosecond())
	}
	// A hold of one node, standing: zero and empty fields stay so.
	m := reserve.Exclusive{ID: "x2", Owner: "bob", Node: "h2", Nodes: []string{"h2"},
		Start: base, End: base.Add(time.Second), State: reserve.StateReserved, Version: 1, CreatedAt: base}
	if err := s.CreateExclusive(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetExclusive(ctx, "x2"); err != nil {
		t.Fatal(err)
	} else {
		sameExclusive(t, got, m)
	}
	// The value returned is a copy.
	got.Nodes[0] = "changed"
	if again, _ := s.GetExclusive(ctx, "x1"); again.Nodes[0] != "h1" {
		t.Errorf("changing a returned hold changed the stored one: %v", again.Nodes)
	}
	if _, err := s.GetExclusive(ctx, "nope"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("get unknown: %v, want ErrNotFound", err)
	}
	taken := sampleExclusive("x1", "carol")
	if err := s.CreateExclusive(ctx, taken); !errors.Is(err, reserve.ErrConflict) {
		t.Errorf("create with a taken id: %v, want ErrConflict", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*reserve.Exclusive)
	}{
		{"no id", func(x *reserve.Exclusive) { x.ID = "" }},
		{"nodes unsorted", func(x *reserve.Exclusive) { x.Nodes = []string{"r1", "h1"} }},
		{"nodes repeated", func(x *reserve.Exclusive) { x.Nodes = []string{"h1", "h1"} }},
		{"an empty node", func(x *reserve.Exclusive) { x.Nodes = []string{"", "h1"} }},
		{"version 2^63", func(x *reserve.Exclusive) { x.Version = 1 << 63 }},
		{"end in 2300", func(x *reserve.Exclusive) { x.End = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"a NUL in the reason", func(x *reserve.Exclusive) { x.Why = "a\x00b" }},
		{"invalid UTF-8 in a node", func(x *reserve.Exclusive) { x.Nodes = []string{"h1", "h\xff"} }},
	} {
		bad := sampleExclusive("bad", "alice")
		tc.change(&bad)
		if err := s.CreateExclusive(ctx, bad); !errors.Is(err, reserve.ErrInvalid) {
			t.Errorf("create with %s: %v, want ErrInvalid", tc.name, err)
		}
	}
	if l, err := s.ListExclusives(ctx, store.Filter{}); err != nil || len(l) != 2 {
		t.Errorf("refused creates stored something: %d holds, %v", len(l), err)
	}
}

func testExclusiveCAS(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	x := sampleExclusive("x1", "alice")
	x.State, x.Version, x.CancelledAt, x.CancelledBy, x.Why = reserve.StateReserved, 1, time.Time{}, "", ""
	if err := s.CreateExclusive(ctx, x); err != nil {
		t.Fatal(err)
	}
	u, err := reserve.CancelExclusive(x, "op", "maintenance", base.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	u.Nodes = []string{"h1", "r2"} // the controller never does, but the store keeps what it is given
	if err := s.UpdateExclusive(ctx, u, 1); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetExclusive(ctx, "x1")
	if err != nil {
		t.Fatal(err)
	}
	sameExclusive(t, got, u)
	for node, want := range map[string]int{"h3": 0, "r2": 1} {
		if l, err := s.ListExclusives(ctx, store.Filter{Node: node}); err != nil || len(l) != want {
			t.Errorf("node %s after the update: %d holds, %v; want %d", node, len(l), err, want)
		}
	}

	stale := u
	stale.Version = 3
	err = s.UpdateExclusive(ctx, stale, 1)
	var sv *reserve.StaleVersionError
	if !errors.As(err, &sv) || !errors.Is(err, reserve.ErrConflict) || sv.Current != 2 || sv.Given != 1 || sv.ID != "x1" {
		t.Fatalf("update from a stale version: %v, want a StaleVersionError at 2", err)
	}
	same := u
	if err := s.UpdateExclusive(ctx, same, 2); !errors.Is(err, reserve.ErrInvalid) {
		t.Errorf("update keeping the version: %v, want ErrInvalid", err)
	}
	unsorted := u
	unsorted.Version, unsorted.Nodes = 3, []string{"r2", "h1"}
	if err := s.UpdateExclusive(ctx, unsorted, 2); !errors.Is(err, reserve.ErrInvalid) {
		t.Errorf("update with unsorted nodes: %v, want ErrInvalid", err)
	}
	if got, _ := s.GetExclusive(ctx, "x1"); got.Version != 2 || !reflect.DeepEqual(got.Nodes, []string{"h1", "r2"}) {
		t.Errorf("a refused update changed the hold: version %d, nodes %v", got.Version, got.Nodes)
	}
	missing := u
	missing.ID, missing.Version = "nope", 3
	if err := s.UpdateExclusive(ctx, missing, 2); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("update unknown: %v, want ErrNotFound", err)
	}
	// The owner is fixed at creation.
	moved := u
	moved.Owner, moved.Version = "mallory", 3
	if err := s.UpdateExclusive(ctx, moved, 2); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetExclusive(ctx, "x1"); got.Owner != "alice" || got.Version != 3 {
		t.Errorf("after an update naming another owner: owner %s, version %d; want alice, 3", got.Owner, got.Version)
	}
}

func testExclusiveFilters(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	at := func(h int) time.Time { return base.Add(time.Duration(h) * time.Hour) }
	mk := func(id, owner, project string, st reserve.State, startH, endH int, nodes ...string) {
		x := reserve.Exclusive{ID: id, Owner: owner, Project: project, Site: "s", Nodes: nodes,
			Start: at(startH), End: at(endH), State: st, Version: 1, CreatedAt: base}
		if err := s.CreateExclusive(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	mk("a", "alice", "atlas", reserve.StateReserved, 0, 2, "h1", "r1")
	mk("b", "alice", "cms", reserve.StateReserved, 2, 4, "h2", "r2")
	mk("c", "bob", "atlas", reserve.StateReserved, 1, 3, "r1")
	mk("d", "bob", "", reserve.StateCancelled, 0, 1, "h2")
	mk("e", "carol", "atlas", reserve.StateCancelled, 5, 6, "h1", "h2", "r1", "r2")
	// A reservation on the same nodes is not a hold.
	if err := s.CreateReservation(ctx, sample(t, "r", "alice")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    store.Filter
		want []string
	}{
		{"all, by start then id", store.Filter{}, []string{"a", "d", "c", "b", "e"}},
		{"owner", store.Filter{Owner: "alice"}, []string{"a", "b"}},
		{"project", store.Filter{Project: "atlas"}, []string{"a", "c", "e"}},
		{"states", store.Filter{States: []reserve.State{reserve.StateCancelled}}, []string{"d", "e"}},
		{"window", store.Filter{From: at(1), To: at(2)}, []string{"a", "c"}},
		{"window touching ends", store.Filter{From: at(4), To: at(5)}, nil},
		{"open end: live at 3h", store.Filter{From: at(3), States: []reserve.State{reserve.StateReserved}}, []string{"b"}},
		{"open start", store.Filter{To: at(1)}, []string{"a", "d"}},
		{"node", store.Filter{Node: "r2"}, []string{"b", "e"}},
		{"node nobody holds", store.Filter{Node: "h9"}, nil},
		{"combined", store.Filter{Owner: "bob", Node: "r1", From: at(0), To: at(9)}, []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListExclusives(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, x := range got {
				ids = append(ids, x.ID)
				if len(x.Nodes) == 0 {
					t.Errorf("%s listed without its nodes", x.ID)
				}
			}
			if !reflect.DeepEqual(ids, tc.want) {
				t.Errorf("got %v, want %v", ids, tc.want)
			}
		})
	}
	// Every node of a listed hold comes with it, not only the one filtered on.
	if l, err := s.ListExclusives(ctx, store.Filter{Node: "r2", Owner: "carol"}); err != nil || len(l) != 1 || !reflect.DeepEqual(l[0].Nodes, []string{"h1", "h2", "r1", "r2"}) {
		t.Errorf("hold e by node r2: %+v, %v", l, err)
	}
}

// exclusivesEmpty is checkEmpty's part for settings and holds.
func exclusivesEmpty(ctx context.Context, t *testing.T, s store.Store) {
	t.Helper()
	if xs, err := s.ListExclusives(ctx, store.Filter{}); err != nil || len(xs) != 0 {
		t.Errorf("exclusive holds after rollback: %d, %v", len(xs), err)
	}
	if v, err := s.GetSetting(ctx, "topology"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("setting after rollback: %q, %v", v, err)
	}
}

// OpenAtFunc opens the database at url migrated to version v and no
// further, as an older controller left it.
type OpenAtFunc func(ctx context.Context, url string, v int) (store.Store, error)

// RunUpgrade checks that a database written by older code keeps every row
// when Open migrates it forward: for each older schema version, it writes
// with the methods that version had, reopens with Open, and reads back.
// It is apart from Run because creating an old database needs openAt,
// which only an implementation's own tests can provide.
func RunUpgrade(t *testing.T, newURL func(t *testing.T) string, openAt OpenAtFunc) {
	for v := 1; v < store.CodeSchemaVersion(); v++ {
		t.Run(fmt.Sprintf("from v%d", v), func(t *testing.T) { testUpgrade(t, newURL(t), openAt, v) })
	}
}

func testUpgrade(t *testing.T, url string, openAt OpenAtFunc, from int) {
	ctx := ctxFor(t)
	old, err := openAt(ctx, url, from)
	if err != nil {
		t.Fatalf("open at version %d: %v", from, err)
	}
	if v, err := old.SchemaVersion(ctx); err != nil || v != from {
		old.Close()
		t.Fatalf("schema version %d, %v; want %d", v, err, from)
	}
	// What every version since the first can store.
	r := sample(t, "r1", "alice")
	u := store.User{Name: "alice", Role: reserve.RoleAdmin, Projects: []string{"atlas"}, CreatedAt: base.UTC()}
	_, hash, _ := store.NewToken()
	// Users and tokens as the versions before 4 wrote them: without the
	// node column, which today's methods write.
	raw, ok := old.(interface {
		ExecRaw(ctx context.Context, q string, args ...any) error
	})
	if !ok {
		old.Close()
		t.Fatalf("%T cannot run raw statements for the upgrade test", old)
	}
	steps := []error{
		old.CreateReservation(ctx, r),
		raw.ExecRaw(ctx, `INSERT INTO users (name, role, projects, created_ns) VALUES (?, ?, ?, ?)`, u.Name, string(u.Role), `["atlas"]`, base.UnixNano()),
		raw.ExecRaw(ctx, `INSERT INTO tokens (id, user_name, hash, created_ns, expires_ns, revoked_ns) VALUES (?, ?, ?, ?, 0, 0)`, "t1", "alice", hash.String(), base.UnixNano()),
		old.AppendAudit(ctx, store.AuditEntry{At: base, Who: "alice", What: "create", Detail: "r1"}),
		old.PutAgent(ctx, store.Agent{Node: "r1", RegisteredAt: base, LeaseExpires: base.Add(time.Minute)}),
	}
	// Version 5: transfers.
	tr := sampleTransfer("t-1", "alice", 0)
	if from >= 5 {
		steps = append(steps, old.CreateTransfer(ctx, tr))
	}
	if err := errors.Join(steps...); err != nil {
		old.Close()
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s := open(t, url)
	if v, err := s.SchemaVersion(ctx); err != nil || v != store.CodeSchemaVersion() {
		t.Fatalf("schema version after open: %d, %v; want %d", v, err, store.CodeSchemaVersion())
	}
	got, err := s.GetReservation(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	sameResv(t, got, r)
	if l, err := s.ListReservations(ctx, store.Filter{Node: "r2"}); err != nil || len(l) != 1 {
		t.Errorf("reservations by node after the upgrade: %d, %v", len(l), err)
	}
	if got, err := s.GetUser(ctx, "alice"); err != nil || !reflect.DeepEqual(got, u) {
		t.Errorf("user after the upgrade: %+v, %v", got, err)
	}
	if tok, err := s.TokenByHash(ctx, hash); err != nil || tok.ID != "t1" {
		t.Errorf("token after the upgrade: %+v, %v", tok, err)
	}
	if a, err := s.ListAudit(ctx, store.AuditFilter{}); err != nil || len(a) != 1 {
		t.Errorf("audit after the upgrade: %v, %v", a, err)
	}
	if a, err := s.ListAgents(ctx); err != nil || len(a) != 1 {
		t.Errorf("agents after the upgrade: %v, %v", a, err)
	}
	// And what the new version added works on the upgraded database.
	x := sampleExclusive("x1", "alice")
	if err := s.CreateExclusive(ctx, x); err != nil {
		t.Fatal(err)
	}
	if l, err := s.ListExclusives(ctx, store.Filter{Node: "h3"}); err != nil || len(l) != 1 {
		t.Errorf("holds after the upgrade: %d, %v", len(l), err)
	} else {
		sameExclusive(t, l[0], x)
	}
	if err := s.PutSetting(ctx, "policy", "{}"); err != nil {
		t.Error(err)
	}
	// Version 4: users and tokens bound to a node; the old ones bind none.
	if tok, err := s.TokenByHash(ctx, hash); err != nil || tok.Node != "" {
		t.Errorf("an old token binds node %q, %v; want none", tok.Node, err)
	}
	ag := store.User{Name: "agent-r1", Role: reserve.RoleAgent, CreatedAt: base.UTC(), Node: "r1"}
	if err := s.CreateUser(ctx, ag); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetUser(ctx, ag.Name); err != nil || got.Node != "r1" {
		t.Errorf("agent user after the upgrade: %+v, %v", got, err)
	}
	_, h2, _ := store.NewToken()
	if err := s.CreateToken(ctx, store.Token{ID: "t2", User: "alice", Hash: h2, CreatedAt: base, Node: "r2"}); err != nil {
		t.Fatal(err)
	}
	if tok, err := s.TokenByHash(ctx, h2); err != nil || tok.Node != "r2" {
		t.Errorf("a node-bound token after the upgrade: %+v, %v", tok, err)
	}
	if from >= 5 {
		if got, err := s.GetTransfer(ctx, "t-1"); err != nil {
			t.Error(err)
		} else {
			sameTransfer(t, got, tr)
		}
	}
	// Version 6: the transfer service's jobs, files, tasks, endpoints,
	// data nodes and decisions.
	j := sampleJob("j-1", "alice", "k1", 0)
	files := []transfer.JobFile{sampleFile("j-1", "b", transfer.FilePending), sampleFile("j-1", "a", transfer.FileActive)}
	if err := errors.Join(
		s.CreateJob(ctx, j),
		s.AddJobFiles(ctx, files),
		s.CreateTask(ctx, sampleTask("k-1", "j-1", transfer.TaskCopy, 0)),
		s.AppendDecision(ctx, transfer.Decision{Job: "j-1", At: base, Reason: "start"}),
		s.PutEndpoint(ctx, transfer.Endpoint{Name: "cern"}),
		s.PutDataNode(ctx, transfer.DataNode{Node: "h1", Endpoint: "cern"}),
	); err != nil {
		t.Fatalf("the transfer service after the upgrade: %v", err)
	}
	if got, err := s.GetJobByKey(ctx, "alice", "k1"); err != nil {
		t.Error(err)
	} else {
		same(t, "job after the upgrade", got, j)
	}
	if fs, err := s.ListJobFiles(ctx, store.JobFileFilter{Job: "j-1", After: "a"}); err != nil || !reflect.DeepEqual(filePaths(fs), []string{"j-1:b"}) {
		t.Errorf("files after the upgrade: %v, %v", filePaths(fs), err)
	}
	if err := s.DeleteJob(ctx, "j-1"); err != nil {
		t.Errorf("delete a job after the upgrade: %v", err)
	}
}
