// Package storetest is the conformance suite of store.Store: every
// implementation runs Run, so the controller can rely on the contract
// written on the interface whichever database it is given.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// Run runs the suite. newURL returns the URL of a fresh, empty database for
// one test (each subtest calls it once) and cleans it up when the test ends.
func Run(t *testing.T, newURL func(t *testing.T) string) {
	tests := []struct {
		name string
		fn   func(t *testing.T, url string)
	}{
		{"Migrate", testMigrate},
		{"RoundTrip", testRoundTrip},
		{"Idempotency", testIdempotency},
		{"CompareAndSwap", testCAS},
		{"ListFilters", testListFilters},
		{"UsersAndTokens", testTokens},
		{"Audit", testAudit},
		{"Agents", testAgents},
		{"Settings", testSettings},
		{"ExclusiveRoundTrip", testExclusiveRoundTrip},
		{"ExclusiveCompareAndSwap", testExclusiveCAS},
		{"ExclusiveFilters", testExclusiveFilters},
		{"TxRollback", testTxRollback},
		{"TxSeesOwnWrites", testTxOwnWrites},
		{"NoOverbooking", testNoOverbooking},
		{"Restart", testRestart},
		{"LeaderLock", testLeaderLock},
		{"Fencing", testFencing},
		{"TransferRoundTrip", testTransferRoundTrip},
		{"TransferFilters", testTransferFilters},
		{"AlertRoundTrip", testAlertRoundTrip},
		{"AlertFilters", testAlertFilters},
		{"TransfersAlertsRestart", testTransfersAlertsRestart},
		{"JobRoundTrip", testJobRoundTrip},
		{"JobInvalid", testJobInvalid},
		{"JobIdempotency", testJobIdempotency},
		{"JobCompareAndSwap", testJobCAS},
		{"JobFilters", testJobFilters},
		{"JobDelete", testJobDelete},
		{"JobSweeps", testJobSweeps},
		{"JobFiles", testJobFiles},
		{"JobFilesAtomic", testJobFilesAtomic},
		{"JobFilesPaging", testJobFilesPaging},
		{"JobFilesBatches", testJobFilesBatches},
		{"FileParts", testFileParts},
		{"Tasks", testTasks},
		{"EndpointsAndDataNodes", testEndpoints},
		{"Decisions", testDecisions},
		{"JobsTxAndRestart", testJobsTxRestart},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newURL(t)) })
	}
}

func ctxFor(t *testing.T) context.Context {
	// Only bounds a hang: a store test under the race detector on a busy
	// machine can take tens of seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, url string) store.Store {
	t.Helper()
	s, err := store.Open(ctxFor(t), url)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// base is a fixed instant in a zone other than UTC, with nanoseconds, so
// the suite sees times come back as the same instant in UTC.
var base = time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.FixedZone("CET", 3600))

// sample returns a valid reservation with every field set.
func sample(t *testing.T, id, owner string) reserve.Reservation {
	t.Helper()
	fs, err := reserve.ParseFlowSpec("tcp 198.18.1.2 > 198.18.2.2:7070, udp 198.18.1.0/24:1000-2000 > 198.18.2.2")
	if err != nil {
		t.Fatal(err)
	}
	start := base.Add(time.Hour)
	return reserve.Reservation{
		ID: id, Owner: owner, Project: "atlas", From: "h1", To: "h2",
		Bandwidth: 10_000_000_000, Start: start, End: start.Add(2 * time.Hour),
		FlowSpec: fs, DSCP: 46,
		Path: []reserve.PathHop{
			{Link: "h1-r1", From: "h1", To: "r1"},
			{Link: "r1-r2", From: "r1", To: "r2"},
			{Link: "r2-h2", From: "r2", To: "h2"},
		},
		State: reserve.StateReserved, Degraded: true, DegradedReason: "agent r1 lease lapsed",
		FailureReason: "", Version: 2, IdempotencyKey: "key-" + id,
		HoldExpires: base.Add(5 * time.Minute), CreatedAt: base,
		ManagedNodes: []string{"r1", "r2"}, Provisioned: []string{"r1"},
		History: []reserve.Transition{
			{To: reserve.StateHeld, Event: reserve.EventCreate, At: base, By: owner, Why: "created", Version: 1},
			{From: reserve.StateHeld, To: reserve.StateReserved, Event: reserve.EventCommit, At: base.Add(time.Minute), By: owner, Why: "committed", Version: 2},
		},
	}
}

// utc returns r as the store gives it back: every time in UTC.
func utc(r reserve.Reservation) reserve.Reservation {
	u := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return t.UTC()
	}
	r.Start, r.End, r.HoldExpires, r.CreatedAt = u(r.Start), u(r.End), u(r.HoldExpires), u(r.CreatedAt)
	h := make([]reserve.Transition, len(r.History))
	for i, tr := range r.History {
		tr.At = u(tr.At)
		h[i] = tr
	}
	if len(h) == 0 {
		h = nil
	}
	r.History = h
	return r
}

func sameResv(t *testing.T, got, want reserve.Reservation) {
	t.Helper()
	want = utc(want)
	if !got.FlowSpec.Equal(want.FlowSpec) {
		t.Errorf("reservation %s: flow spec %q, want %q", want.ID, got.FlowSpec, want.FlowSpec)
	}
	got.FlowSpec, want.FlowSpec = reserve.FlowSpec{}, reserve.FlowSpec{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reservation %s:\n got %+v\nwant %+v", want.ID, got, want)
	}
}

func testMigrate(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	v, err := s.SchemaVersion(ctx)
	if err != nil || v != store.CodeSchemaVersion() {
		t.Fatalf("schema version %d, %v; want %d", v, err, store.CodeSchemaVersion())
	}
	if err := s.CreateUser(ctx, store.User{Name: "alice", Role: reserve.RoleUser}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("migrate again: %v", err)
		}
	}
	if v2, err := s.SchemaVersion(ctx); err != nil || v2 != v {
		t.Fatalf("schema version after migrating again: %d, %v; want %d", v2, err, v)
	}
	if _, err := s.GetUser(ctx, "alice"); err != nil {
		t.Fatalf("migrating again lost data: %v", err)
	}
}

func testRoundTrip(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	r := sample(t, "r1", "alice")
	if err := s.CreateReservation(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetReservation(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	sameResv(t, got, r)
	if got.Start.Location() != time.UTC {
		t.Errorf("start comes back in %v, want UTC", got.Start.Location())
	}
	// A minimal reservation: zero and empty fields stay so.
	m := reserve.Reservation{ID: "r2", Owner: "bob", From: "a", To: "b", Bandwidth: 1,
		Start: base, End: base.Add(time.Second), Path: []reserve.PathHop{{Link: "ab", From: "a", To: "b"}},
		State: reserve.StateHeld, Version: 1, CreatedAt: base}
	if err := s.CreateReservation(ctx, m); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetReservation(ctx, "r2")
	if err != nil {
		t.Fatal(err)
	}
	sameResv(t, got, m)
	if _, err := s.GetReservation(ctx, "nope"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("get unknown: %v, want ErrNotFound", err)
	}
	// Values the store cannot hold are refused, not wrapped around.
	bad := sample(t, "r3", "alice")
	bad.Bandwidth = 1 << 63
	if err := s.CreateReservation(ctx, bad); !errors.Is(err, reserve.ErrInvalid) {
		t.Errorf("create with bandwidth 2^63: %v, want ErrInvalid", err)
	}
}

func testIdempotency(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	r := sample(t, "r1", "alice")
	r.IdempotencyKey = "k"
	if err := s.CreateReservation(ctx, r); err != nil {
		t.Fatal(err)
	}
	retry := sample(t, "r2", "alice")
	retry.IdempotencyKey = "k"
	err := s.CreateReservation(ctx, retry)
	var dup *store.DuplicateKeyError
	if !errors.As(err, &dup) || !errors.Is(err, store.ErrDuplicateKey) {
		t.Fatalf("second create under the same key: %v, want a *DuplicateKeyError", err)
	}
	sameResv(t, dup.Existing, r)
	if _, err := s.GetReservation(ctx, "r2"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("the duplicate was stored: %v", err)
	}
	// The key is per owner.
	other := sample(t, "r3", "bob")
	other.IdempotencyKey = "k"
	if err := s.CreateReservation(ctx, other); err != nil {
		t.Errorf("another owner's create under the same key: %v", err)
	}
	got, err := s.GetReservationByKey(ctx, "bob", "k")
	if err != nil || got.ID != "r3" {
		t.Errorf("by key: %v, %v; want r3", got.ID, err)
	}
	// Reservations without a key never collide.
	for _, id := range []string{"n1", "n2"} {
		n := sample(t, id, "alice")
		n.IdempotencyKey = ""
		if err := s.CreateReservation(ctx, n); err != nil {
			t.Errorf("create %s without a key: %v", id, err)
		}
	}
	again := sample(t, "r1", "carol")
	if err := s.CreateReservation(ctx, again); !errors.Is(err, reserve.ErrConflict) {
		t.Errorf("create with a taken id: %v, want ErrConflict", err)
	}
}

func testCAS(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	r := sample(t, "r1", "alice")
	if err := s.CreateReservation(ctx, r); err != nil {
		t.Fatal(err)
	}
	u := r
	u.History = append(append([]reserve.Transition(nil), r.History...), reserve.Transition{
		From: reserve.StateReserved, To: reserve.StateReserved, Event: reserve.EventModify,
		At: base.Add(2 * time.Minute), By: "alice", Why: "modified: bandwidth", Version: 3})
	u.Version, u.Bandwidth, u.Path = 3, 5_000_000_000, u.Path[:1:1]
	u.To = "r1"
	if err := s.UpdateReservation(ctx, u, 2); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetReservation(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	sameResv(t, got, u)
	if l, _ := s.ListReservations(ctx, store.Filter{Node: "h2"}); len(l) != 0 {
		t.Errorf("node h2 left the path but still finds %d reservations", len(l))
	}

	stale := u
	stale.Version = 3
	err = s.UpdateReservation(ctx, stale, 2)
	var sv *reserve.StaleVersionError
	if !errors.As(err, &sv) || !errors.Is(err, reserve.ErrConflict) || sv.Current != 3 || sv.Given != 2 {
		t.Fatalf("update from a stale version: %v, want a StaleVersionError at 3", err)
	}
	short := u
	short.Version, short.History = 4, u.History[:1]
	if err := s.UpdateReservation(ctx, short, 3); !errors.Is(err, reserve.ErrInvalid) {
		t.Errorf("update shortening the history: %v, want ErrInvalid", err)
	}
	if got, _ := s.GetReservation(ctx, "r1"); got.Version != 3 || len(got.History) != 3 {
		t.Errorf("a refused update changed the reservation: version %d, %d transitions", got.Version, len(got.History))
	}
	missing := u
	missing.ID, missing.Version = "nope", 4
	if err := s.UpdateReservation(ctx, missing, 3); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("update unknown: %v, want ErrNotFound", err)
	}
	same := u
	if err := s.UpdateReservation(ctx, same, 3); !errors.Is(err, reserve.ErrInvalid) {
		t.Errorf("update keeping the version: %v, want ErrInvalid", err)
	}
}

func testListFilters(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	mk := func(id, owner, project string, st reserve.State, startH, endH int, via string) {
		r := sample(t, id, owner)
		r.Project, r.State = project, st
		r.Start, r.End = base.Add(time.Duration(startH)*time.Hour), base.Add(time.Duration(endH)*time.Hour)
		r.Path = []reserve.PathHop{{Link: "h1-" + via, From: "h1", To: via}, {Link: via + "-h2", From: via, To: "h2"}}
		r.ManagedNodes, r.Provisioned = nil, nil
		if err := s.CreateReservation(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	mk("a", "alice", "atlas", reserve.StateReserved, 0, 2, "r1")
	mk("b", "alice", "cms", reserve.StateHeld, 2, 4, "r2")
	mk("c", "bob", "atlas", reserve.StateActive, 1, 3, "r1")
	mk("d", "bob", "cms", reserve.StateFinished, 0, 1, "r2")
	mk("e", "carol", "atlas", reserve.StateCancelled, 5, 6, "r1")
	at := func(h int) time.Time { return base.Add(time.Duration(h) * time.Hour) }
	for _, tc := range []struct {
		name string
		f    store.Filter
		want []string
	}{
		{"all", store.Filter{}, []string{"a", "d", "c", "b", "e"}},
		{"owner", store.Filter{Owner: "alice"}, []string{"a", "b"}},
		{"project", store.Filter{Project: "atlas"}, []string{"a", "c", "e"}},
		{"states", store.Filter{States: []reserve.State{reserve.StateHeld, reserve.StateFinished}}, []string{"d", "b"}},
		{"window", store.Filter{From: at(1), To: at(2)}, []string{"a", "c"}},
		{"window touching ends", store.Filter{From: at(4), To: at(5)}, nil},
		{"open end", store.Filter{From: at(3)}, []string{"b", "e"}},
		{"open start", store.Filter{To: at(1)}, []string{"a", "d"}},
		{"node on the path", store.Filter{Node: "r2"}, []string{"d", "b"}},
		{"node at an end", store.Filter{Node: "h1"}, []string{"a", "d", "c", "b", "e"}},
		{"combined", store.Filter{Owner: "bob", Node: "r1", From: at(0), To: at(9)}, []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListReservations(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range got {
				ids = append(ids, r.ID)
				if len(r.History) != 2 {
					t.Errorf("%s listed with %d transitions, want 2", r.ID, len(r.History))
				}
			}
			if !reflect.DeepEqual(ids, tc.want) {
				t.Errorf("got %v, want %v", ids, tc.want)
			}
		})
	}
	live, err := s.ListLive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range live {
		ids = append(ids, r.ID)
	}
	if want := []string{"a", "c", "b"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("live: %v, want %v", ids, want)
	}
}

func testTokens(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	u := store.User{Name: "alice", Role: reserve.RoleOperator, Projects: []string{"atlas", "cms"}, CreatedAt: base}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateUser(ctx, u); !errors.Is(err, reserve.ErrConflict) {
		t.Errorf("create a taken user name: %v, want ErrConflict", err)
	}
	got, err := s.GetUser(ctx, "alice")
	u.CreatedAt = u.CreatedAt.UTC()
	if err != nil || !reflect.DeepEqual(got, u) {
		t.Errorf("get user: %+v, %v; want %+v", got, err, u)
	}
	if _, err := s.GetUser(ctx, "nobody"); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("get unknown user: %v, want ErrNotFound", err)
	}

	token, hash, err := store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if hash != store.HashToken(token) || hash.String() == token {
		t.Fatal("NewToken's hash is not the SHA-256 of its token")
	}
	expires := base.Add(time.Hour)
	if err := s.CreateToken(ctx, store.Token{ID: "t1", User: "alice", Hash: hash, CreatedAt: base, ExpiresAt: expires}); err != nil {
		t.Fatal(err)
	}
	_, h2, _ := store.NewToken()
	if err := s.CreateToken(ctx, store.Token{ID: "t2", User: "nobody", Hash: h2, CreatedAt: base}); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("token for an unknown user: %v, want ErrNotFound", err)
	}
	if err := s.CreateToken(ctx, store.Token{ID: "t3", User: "alice", Hash: hash, CreatedAt: base}); !errors.Is(err, reserve.ErrConflict) {
		t.Errorf("token with a taken hash: %v, want ErrConflict", err)
	}
	tok, err := s.TokenByHash(ctx, store.HashToken(token))
	if err != nil {
		t.Fatal(err)
	}
	if tok.ID != "t1" || tok.User != "alice" || tok.Hash != hash || !tok.ExpiresAt.Equal(expires) || !tok.RevokedAt.IsZero() {
		t.Errorf("token by hash: %+v", tok)
	}
	if !tok.Active(base) || tok.Active(expires) || tok.Active(expires.Add(time.Second)) {
		t.Error("an unrevoked token must be active before its expiry and only then")
	}
	if _, err := s.TokenByHash(ctx, store.HashToken(token+"x")); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("unknown token: %v, want ErrNotFound", err)
	}
	revoked := base.Add(time.Minute)
	if err := s.RevokeToken(ctx, "t1", revoked); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, "t1", revoked.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, "nope", revoked); !errors.Is(err, reserve.ErrNotFound) {
		t.Errorf("revoke unknown: %v, want ErrNotFound", err)
	}
	tok, err = s.TokenByHash(ctx, hash)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.RevokedAt.Equal(revoked) || tok.Active(base) {
		t.Errorf("revoked token: revoked at %v (want the first revocation, %v), active %v", tok.RevokedAt, revoked, tok.Active(base))
	}
	list, err := s.ListTokens(ctx, "alice")
	if err != nil || len(list) != 1 || list[0].ID != "t1" {
		t.Errorf("list tokens: %+v, %v", list, err)
	}
}

func testAudit(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	for i, who := range []string{"alice", "bob", "alice"} {
		if err := s.AppendAudit(ctx, store.AuditEntry{At: base.Add(time.Duration(i) * time.Minute), Who: who, What: fmt.Sprintf("act%d", i), Detail: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListAudit(ctx, store.AuditFilter{})
	if err != nil || len(all) != 3 {
		t.Fatalf("list audit: %d entries, %v", len(all), err)
	}
	for i, e := range all {
		if e.What != fmt.Sprintf("act%d", i) || !e.At.Equal(base.Add(time.Duration(i)*time.Minute)) || e.Detail != "d" {
			t.Errorf("entry %d: %+v", i, e)
		}
		if i > 0 && e.Seq <= all[i-1].Seq {
			t.Errorf("sequence numbers do not increase: %d after %d", e.Seq, all[i-1].Seq)
		}
	}
	for _, tc := range []struct {
		name string
		f    store.AuditFilter
		want []string
	}{
		{"who", store.AuditFilter{Who: "alice"}, []string{"act0", "act2"}},
		{"since", store.AuditFilter{Since: base.Add(time.Minute)}, []string{"act1", "act2"}},
		{"until", store.AuditFilter{Until: base.Add(time.Minute)}, []string{"act0"}},
		{"limit", store.AuditFilter{Limit: 2}, []string{"act0", "act1"}},
	} {
		got, err := s.ListAudit(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var what []string
		for _, e := range got {
			what = append(what, e.What)
		}
		if !reflect.DeepEqual(what, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, what, tc.want)
		}
	}
}

func testAgents(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	for _, a := range []store.Agent{
		{Node: "r2", RegisteredAt: base, LeaseExpires: base.Add(time.Minute)},
		{Node: "r1", RegisteredAt: base, LeaseExpires: base.Add(time.Minute)},
		{Node: "r1", RegisteredAt: base, LeaseExpires: base.Add(2 * time.Minute)},
	} {
		if err := s.PutAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ListAgents(ctx)
	if err != nil || len(got) != 2 || got[0].Node != "r1" || !got[0].LeaseExpires.Equal(base.Add(2*time.Minute)) || got[1].Node != "r2" {
		t.Errorf("agents: %+v, %v", got, err)
	}
}

func testTxRollback(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	boom := errors.New("boom")
	err := s.Tx(ctx, func(tx store.Store) error {
		if err := tx.CreateUser(ctx, store.User{Name: "alice", Role: reserve.RoleUser}); err != nil {
			return err
		}
		if err := tx.CreateReservation(ctx, sample(t, "r1", "alice")); err != nil {
			return err
		}
		if err := tx.AppendAudit(ctx, store.AuditEntry{At: base, Who: "alice", What: "create"}); err != nil {
			return err
		}
		// A nested Tx joins the outer one.
		if err := tx.Tx(ctx, func(in store.Store) error { return in.PutAgent(ctx, store.Agent{Node: "r1", LeaseExpires: base}) }); err != nil {
			return err
		}
		if err := tx.CreateExclusive(ctx, sampleExclusive("x1", "alice")); err != nil {
			return err
		}
		if err := tx.PutSetting(ctx, "topology", "nodes: []"); err != nil {
			return err
		}
		return fmt.Errorf("then: %w", boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Tx returned %v, want fn's error", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a panic in fn did not go on")
			}
		}()
		s.Tx(ctx, func(tx store.Store) error {
			if err := tx.CreateUser(ctx, store.User{Name: "bob", Role: reserve.RoleUser}); err != nil {
				return err
			}
			if err := tx.CreateExclusive(ctx, sampleExclusive("x2", "bob")); err != nil {
				return err
			}
			if err := tx.PutSetting(ctx, "topology", "links: []"); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	checkEmpty(t, s)
}

func checkEmpty(t *testing.T, s store.Store) {
	t.Helper()
	ctx := ctxFor(t)
	if us, err := s.ListUsers(ctx); err != nil || len(us) != 0 {
		t.Errorf("users after rollback: %v, %v", us, err)
	}
	if rs, err := s.ListReservations(ctx, store.Filter{}); err != nil || len(rs) != 0 {
		t.Errorf("reservations after rollback: %d, %v", len(rs), err)
	}
	if as, err := s.ListAudit(ctx, store.AuditFilter{}); err != nil || len(as) != 0 {
		t.Errorf("audit after rollback: %v, %v", as, err)
	}
	if as, err := s.ListAgents(ctx); err != nil || len(as) != 0 {
		t.Errorf("agents after rollback: %v, %v", as, err)
	}
	exclusivesEmpty(ctx, t, s)
	// The store still works.
	if err := s.CreateUser(ctx, store.User{Name: "carol", Role: reserve.RoleUser}); err != nil {
		t.Errorf("create after rollback: %v", err)
	}
}

func testTxOwnWrites(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	err := s.Tx(ctx, func(tx store.Store) error {
		if err := tx.CreateReservation(ctx, sample(t, "r1", "alice")); err != nil {
			return err
		}
		got, err := tx.GetReservation(ctx, "r1")
		if err != nil {
			return err
		}
		if len(got.History) != 2 {
			return fmt.Errorf("history %d", len(got.History))
		}
		if err := tx.CreateExclusive(ctx, sampleExclusive("x1", "alice")); err != nil {
			return err
		}
		if l, err := tx.ListExclusives(ctx, store.Filter{Node: "r1"}); err != nil || len(l) != 1 {
			return fmt.Errorf("holds within the transaction: %d, %v", len(l), err)
		}
		if err := tx.PutSetting(ctx, "policy", "{}"); err != nil {
			return err
		}
		if v, err := tx.GetSetting(ctx, "policy"); err != nil || v != "{}" {
			return fmt.Errorf("setting within the transaction: %q, %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetReservation(ctx, "r1"); err != nil {
		t.Errorf("after commit: %v", err)
	}
	if _, err := s.GetExclusive(ctx, "x1"); err != nil {
		t.Errorf("hold after commit: %v", err)
	}
	if _, err := s.GetSetting(ctx, "policy"); err != nil {
		t.Errorf("setting after commit: %v", err)
	}
}

// testNoOverbooking is the property the controller's admission relies on:
// concurrent transactions that each read the booked total and insert only
// when it stays within capacity never overbook together.
func testNoOverbooking(t *testing.T, url string) {
	ctx := ctxFor(t)
	s := open(t, url)
	const (
		workers  = 200
		bw       = 1_000_000_000
		capacity = 10 * bw
	)
	errFull := errors.New("full")
	live := []reserve.State{reserve.StateHeld, reserve.StateReserved, reserve.StateActive}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
		answered int
	)
	for i := range workers {
		wg.Go(func() {
			r := sample(t, fmt.Sprintf("w%03d", i), fmt.Sprintf("user%d", i))
			r.Bandwidth = bw
			err := s.Tx(ctx, func(tx store.Store) error {
				booked, err := tx.ListReservations(ctx, store.Filter{States: live, From: r.Start, To: r.End, Node: "r1"})
				if err != nil {
					return err
				}
				var sum uint64
				for _, b := range booked {
					sum += b.Bandwidth
				}
				if sum+r.Bandwidth > capacity {
					return errFull
				}
				return tx.CreateReservation(ctx, r)
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
				answered++
			case errors.Is(err, errFull):
				answered++
			default:
				t.Errorf("worker %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	all, err := s.ListReservations(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, r := range all {
		sum += r.Bandwidth
	}
	if sum > capacity {
		t.Errorf("overbooked: %d bps committed on a %d bps link", sum, capacity)
	}
	if answered != workers || accepted != capacity/bw || len(all) != accepted {
		t.Errorf("%d answered of %d, %d accepted (want %d), %d stored", answered, workers, accepted, capacity/bw, len(all))
	}
}

func testRestart(t *testing.T, url string) {
	ctx := ctxFor(t)
	s, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	r := sample(t, "r1", "alice")
	_, hash, _ := store.NewToken()
	steps := []error{
		s.CreateReservation(ctx, r),
		s.CreateUser(ctx, store.User{Name: "alice", Role: reserve.RoleAdmin, CreatedAt: base}),
		s.CreateToken(ctx, store.Token{ID: "t1", User: "alice", Hash: hash, CreatedAt: base}),
		s.AppendAudit(ctx, store.AuditEntry{At: base, Who: "alice", What: "create", Detail: "r1"}),
		s.PutAgent(ctx, store.Agent{Node: "r1", RegisteredAt: base, LeaseExpires: base.Add(time.Minute)}),
		s.CreateExclusive(ctx, sampleExclusive("x1", "alice")),
		s.PutSetting(ctx, "topology", "nodes: []\n"),
	}
	if err := errors.Join(steps...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, url)
	got, err := s.GetReservation(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	sameResv(t, got, r)
	if live, err := s.ListLive(ctx); err != nil || len(live) != 1 {
		t.Errorf("live after restart: %d, %v", len(live), err)
	}
	if _, err := s.GetUser(ctx, "alice"); err != nil {
		t.Error(err)
	}
	if tok, err := s.TokenByHash(ctx, hash); err != nil || tok.ID != "t1" {
		t.Errorf("token after restart: %+v, %v", tok, err)
	}
	if a, err := s.ListAudit(ctx, store.AuditFilter{}); err != nil || len(a) != 1 {
		t.Errorf("audit after restart: %v, %v", a, err)
	}
	if a, err := s.ListAgents(ctx); err != nil || len(a) != 1 {
		t.Errorf("agents after restart: %v, %v", a, err)
	}
	if x, err := s.GetExclusive(ctx, "x1"); err != nil {
		t.Errorf("hold after restart: %v", err)
	} else {
		sameExclusive(t, x, sampleExclusive("x1", "alice"))
	}
	if v, err := s.GetSetting(ctx, "topology"); err != nil || v != "nodes: []\n" {
		t.Errorf("setting after restart: %q, %v", v, err)
	}
}
