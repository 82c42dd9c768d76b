package grant

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func base() Grant {
	return Grant{User: "alice", Job: "j-1", Task: "t-1", Attempt: 1, Node: "dst1", Mode: Write,
		Paths: []string{"data/run1", "logs/a.txt"}, Expires: t0.Add(time.Hour)}
}

func mustKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustSign(t testing.TB, k ed25519.PrivateKey, g Grant) string {
	t.Helper()
	tok, err := Sign(k, g)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// clock is a hand-moved clock for a Verifier.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestVerify(t *testing.T) {
	key, other := mustKey(t), mustKey(t)
	pub := key.Public().(ed25519.PublicKey)
	enc := base64.RawURLEncoding
	tampered := func() string {
		tok := mustSign(t, key, base())
		body, sig, _ := strings.Cut(tok, ".")
		b, _ := enc.DecodeString(body)
		b = []byte(strings.Replace(string(b), `"data/run1"`, `"data/run2"`, 1))
		return enc.EncodeToString(b) + "." + sig
	}
	with := func(f func(*Grant)) Grant { g := base(); f(&g); return g }
	for _, tc := range []struct {
		name  string
		token string
		// prior is a token verified first (or "" for none), fence a Fence
		// call before Verify (0 for none), late how far the clock moved.
		prior string
		fence int
		late  time.Duration
		want  error
	}{
		{name: "good", token: mustSign(t, key, base())},
		{name: "tampered body", token: tampered(), want: ErrSignature},
		{name: "wrong key", token: mustSign(t, other, base()), want: ErrSignature},
		{name: "expired", token: mustSign(t, key, base()), late: time.Hour, want: ErrExpired},
		{name: "just before expiry", token: mustSign(t, key, base()), late: time.Hour - time.Nanosecond},
		{name: "wrong node", token: mustSign(t, key, with(func(g *Grant) { g.Node = "dst2" })), want: ErrWrongNode},
		{name: "stale after a newer attempt", token: mustSign(t, key, base()),
			prior: mustSign(t, key, with(func(g *Grant) { g.Attempt = 2 })), want: ErrStale},
		{name: "same attempt again", token: mustSign(t, key, base()), prior: mustSign(t, key, base())},
		{name: "newer after older", token: mustSign(t, key, with(func(g *Grant) { g.Attempt = 3 })), prior: mustSign(t, key, base())},
		{name: "other task unaffected", token: mustSign(t, key, base()),
			prior: mustSign(t, key, with(func(g *Grant) { g.Task = "t-2"; g.Attempt = 5 }))},
		{name: "fence refuses older", token: mustSign(t, key, base()), fence: 2, want: ErrStale},
		{name: "fence keeps its own attempt", token: mustSign(t, key, with(func(g *Grant) { g.Attempt = 2 })), fence: 2},
		{name: "no signature", token: "eyJ1c2VyIjoiYSJ9", want: ErrMalformed},
		{name: "not base64", token: "!!!.???", want: ErrMalformed},
		{name: "empty", token: "", want: ErrMalformed},
		{name: "too long", token: strings.Repeat("a", MaxToken+1), want: ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: t0}
			v := NewVerifier("dst1", c.now)
			v.SetKey(pub)
			if tc.prior != "" {
				if _, err := v.Verify(tc.prior); err != nil {
					t.Fatalf("prior: %v", err)
				}
			}
			if tc.fence > 0 {
				v.Fence("t-1", tc.fence)
			}
			c.t = c.t.Add(tc.late)
			g, err := v.Verify(tc.token)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if err == nil && (g.Task == "" || g.User != "alice") {
				t.Fatalf("grant %+v", g)
			}
		})
	}
}

// The signed body must be a valid grant: a correctly signed token of a
// grant that is not is refused as malformed.
func TestParseSignedButInvalid(t *testing.T) {
	key := mustKey(t)
	pub := key.Public().(ed25519.PublicKey)
	enc := base64.RawURLEncoding
	for _, tc := range []struct {
		name string
		body string
	}{
		{"not json", "hello"},
		{"no task", `{"user":"a","node":"n","attempt":1,"mode":"write","paths":["x"],"expires":"2030-01-01T00:00:00Z"}`},
		{"attempt 0", `{"user":"a","task":"t","node":"n","attempt":0,"mode":"write","paths":["x"],"expires":"2030-01-01T00:00:00Z"}`},
		{"unknown mode", `{"user":"a","task":"t","node":"n","attempt":1,"mode":"delete","paths":["x"],"expires":"2030-01-01T00:00:00Z"}`},
		{"no paths", `{"user":"a","task":"t","node":"n","attempt":1,"mode":"write","paths":[],"expires":"2030-01-01T00:00:00Z"}`},
		{"no expiry", `{"user":"a","task":"t","node":"n","attempt":1,"mode":"write","paths":["x"]}`},
		{"dotdot path", `{"user":"a","task":"t","node":"n","attempt":1,"mode":"write","paths":["../x"],"expires":"2030-01-01T00:00:00Z"}`},
		{"absolute path", `{"user":"a","task":"t","node":"n","attempt":1,"mode":"write","paths":["/x"],"expires":"2030-01-01T00:00:00Z"}`},
		{"unclean path", `{"user":"a","task":"t","node":"n","attempt":1,"mode":"write","paths":["a//b"],"expires":"2030-01-01T00:00:00Z"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			tok := enc.EncodeToString(body) + "." + enc.EncodeToString(ed25519.Sign(key, body))
			if _, err := Parse(pub, tok); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse = %v, want ErrMalformed", err)
			}
		})
	}
	// Sign refuses to make such grants in the first place.
	g := base()
	g.Paths = []string{"../etc"}
	if _, err := Sign(key, g); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Sign of a grant with ../etc = %v", err)
	}
}

func TestNoKey(t *testing.T) {
	key := mustKey(t)
	v := NewVerifier("dst1", nil)
	if _, err := v.Verify(mustSign(t, key, base())); !errors.Is(err, ErrNoKey) {
		t.Fatalf("Verify without a key = %v", err)
	}
	s := EncodeKey(key.Public().(ed25519.PublicKey))
	pub, err := DecodeKey(s)
	if err != nil || !pub.Equal(key.Public()) {
		t.Fatalf("DecodeKey(EncodeKey) = %v, %v", pub, err)
	}
	for _, bad := range []string{"", "AAAA", "not base64!"} {
		if _, err := DecodeKey(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeKey(%q) = %v", bad, err)
		}
	}
}

func TestCovers(t *testing.T) {
	g := base() // data/run1 and logs/a.txt, write
	root := base()
	root.Paths = []string{"."}
	for _, tc := range []struct {
		name string
		g    Grant
		mode string
		path string
		want error
	}{
		{"the path itself", g, Write, "data/run1", nil},
		{"under it", g, Write, "data/run1/x/y.bin", nil},
		{"leading slashes", g, Write, "//data/run1/f", nil},
		{"a file path", g, Write, "logs/a.txt", nil},
		{"sibling with a common prefix", g, Write, "data/run10/f", ErrPath},
		{"parent", g, Write, "data", ErrPath},
		{"root", g, Write, "/", ErrPath},
		{"elsewhere", g, Write, "other/f", ErrPath},
		{"dotdot out", g, Write, "data/run1/../../etc/passwd", ErrPath},
		{"dotdot alone", g, Write, "..", ErrPath},
		{"dotdot inside", g, Write, "data/run1/x/../y", ErrPath},
		{"unclean", g, Write, "data/run1//f", ErrPath},
		{"dot prefix", g, Write, "./data/run1/f", ErrPath},
		{"mode mismatch", g, Read, "data/run1/f", ErrMode},
		{"root grant covers all", root, Write, "any/where", nil},
		{"root grant covers the root", root, Write, "", nil},
		{"root grant still refuses dotdot", root, Write, "../x", ErrPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.g.Covers(tc.mode, tc.path)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Covers(%s, %q) = %v, want %v", tc.mode, tc.path, err, tc.want)
			}
		})
	}
}

func TestLeads(t *testing.T) {
	g := base() // data/run1 and logs/a.txt
	root := base()
	root.Paths = []string{"."}
	for _, tc := range []struct {
		g    Grant
		path string
		want bool
	}{
		{g, "data", true},
		{g, "/data", true},
		{g, "logs", true},
		{g, ".", true},
		{g, "", true},
		{g, "data/run1", false}, // covered, not on the way
		{g, "data/run1/x", false},
		{g, "dat", false},
		{g, "other", false},
		{g, "..", false},
		{g, "data/../data", false},
		{root, ".", false},
		{root, "x", false},
	} {
		if got := tc.g.Leads(tc.path); got != tc.want {
			t.Errorf("Leads(%q) with %v = %v, want %v", tc.path, tc.g.Paths, got, tc.want)
		}
	}
}

func TestCurrentAndChanged(t *testing.T) {
	key := mustKey(t)
	c := &clock{t: t0}
	v := NewVerifier("dst1", c.now)
	v.SetKey(key.Public().(ed25519.PublicKey))
	if _, err := v.Verify(mustSign(t, key, base())); err != nil {
		t.Fatal(err)
	}
	if !v.Current("t-1", 1) || !v.Current("t-9", 1) {
		t.Fatal("attempt 1 not current")
	}
	ch := v.Changed()
	v.Fence("t-1", 1) // not a rise
	select {
	case <-ch:
		t.Fatal("Changed fired without a rise")
	default:
	}
	g2 := base()
	g2.Attempt = 2
	if _, err := v.Verify(mustSign(t, key, g2)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed did not fire when attempt 2 verified")
	}
	if v.Current("t-1", 1) || !v.Current("t-1", 2) {
		t.Fatal("attempt 1 still current after attempt 2")
	}
	ch = v.Changed()
	v.Fence("t-1", 3)
	select {
	case <-ch:
	default:
		t.Fatal("Changed did not fire on Fence")
	}
	if v.Current("t-1", 2) {
		t.Fatal("attempt 2 still current after Fence(3)")
	}
}

// A fence is kept as long as an older attempt's grant may live, even when
// many tasks crowd the table and the clock moves past the newer grant.
func TestFenceOutlivesOlderGrants(t *testing.T) {
	key := mustKey(t)
	c := &clock{t: t0}
	v := NewVerifier("dst1", c.now)
	v.SetKey(key.Public().(ed25519.PublicKey))
	long := base()
	long.Expires = t0.Add(48 * time.Hour)
	tok1 := mustSign(t, key, long)
	if _, err := v.Verify(tok1); err != nil {
		t.Fatal(err)
	}
	v.Fence("t-1", 2) // from a heartbeat
	c.t = t0.Add(2 * time.Hour)
	for i := range 1100 { // crowd the table so old fences are swept
		g := base()
		g.Task = fmt.Sprintf("crowd-%d", i)
		g.Expires = c.t.Add(time.Hour)
		if _, err := v.Verify(mustSign(t, key, g)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Verify(tok1); !errors.Is(err, ErrStale) {
		t.Fatalf("attempt 1 (valid 48 h) after Fence(2) and 2 h: %v", err)
	}
}

func TestSignParseRoundTrip(t *testing.T) {
	key := mustKey(t)
	g := base()
	tok := mustSign(t, key, g)
	got, err := Parse(key.Public().(ed25519.PublicKey), tok)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(g)
	if string(a) != string(b) {
		t.Fatalf("round trip: %s, want %s", a, b)
	}
}

// FuzzParse: no token panics Parse; and a body signed with the right key
// (what only the controller can make, here made from fuzzed bytes) is
// accepted only as a valid grant, which covers its own paths.
func FuzzParse(f *testing.F) {
	key := mustKey(f)
	pub := key.Public().(ed25519.PublicKey)
	good, _ := json.Marshal(base())
	f.Add(mustSign(f, key, base()), good)
	f.Add("", []byte("{}"))
	f.Add(".", []byte(`{"user":"a","task":"t","node":"n","attempt":1,"mode":"read","paths":["."],"expires":"2030-01-01T00:00:00Z"}`))
	f.Add("e30.AAAA", []byte(`{"paths":["a/../b"]}`))
	enc := base64.RawURLEncoding
	f.Fuzz(func(t *testing.T, tok string, body []byte) {
		Parse(pub, tok)
		g, err := Parse(pub, enc.EncodeToString(body)+"."+enc.EncodeToString(ed25519.Sign(key, body)))
		if err != nil {
			return
		}
		if err := g.check(); err != nil {
			t.Fatalf("accepted an invalid grant: %v", err)
		}
		for _, p := range g.Paths {
			if err := g.Covers(g.Mode, p); err != nil {
				t.Fatalf("a grant does not cover its own path %q: %v", p, err)
			}
		}
		if _, err := Parse(pub, mustSign(t, key, g)); err != nil {
			t.Fatalf("re-signed grant refused: %v", err)
		}
	})
}

// Confirm asks the hook, and an attempt the controller says is over is
// fenced: the same grant is refused afterwards without asking, and a
// session under it is no longer current.
func TestConfirm(t *testing.T) {
	key := mustKey(t)
	errDown := errors.New("controller unreachable")
	for _, tc := range []struct {
		name   string
		hook   func(ctx context.Context, task string, attempt int) error
		want   error // from Confirm
		fenced bool  // the attempt is no longer current after
	}{
		{name: "no hook accepts"},
		{name: "current", hook: func(context.Context, string, int) error { return nil }},
		{name: "over", hook: func(_ context.Context, task string, _ int) error {
			return fmt.Errorf("%w: task %s has ended (SUCCEEDED)", ErrOver, task)
		}, want: ErrOver, fenced: true},
		{name: "re-attempted", hook: func(context.Context, string, int) error {
			return fmt.Errorf("%w: attempt 2 is current", ErrStale)
		}, want: ErrStale, fenced: true},
		{name: "cannot ask", hook: func(context.Context, string, int) error { return errDown }, want: errDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: t0}
			v := NewVerifier("dst1", c.now)
			v.SetKey(key.Public().(ed25519.PublicKey))
			if tc.hook != nil {
				var asked []Held
				hook := tc.hook
				v.SetConfirm(func(ctx context.Context, task string, attempt int) error {
					asked = append(asked, Held{task, attempt})
					return hook(ctx, task, attempt)
				})
				defer func() {
					if len(asked) != 1 || asked[0] != (Held{"t-1", 1}) {
						t.Errorf("asked %v, want [{t-1 1}]", asked)
					}
				}()
			}
			tok := mustSign(t, key, base())
			g, err := v.Verify(tok)
			if err != nil {
				t.Fatal(err)
			}
			ch := v.Changed()
			err = v.Confirm(context.Background(), g)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Confirm: %v, want %v", err, tc.want)
			}
			if got := !v.Current("t-1", 1); got != tc.fenced {
				t.Fatalf("fenced %v, want %v", got, tc.fenced)
			}
			if !tc.fenced {
				return
			}
			select {
			case <-ch:
			default:
				t.Error("Changed did not fire: running sessions of the attempt are not cut")
			}
			if _, err := v.Verify(tok); !errors.Is(err, ErrStale) {
				t.Errorf("the same grant verified again: %v, want ErrStale", err)
			}
		})
	}
}

func TestHeld(t *testing.T) {
	v := NewVerifier("dst1", nil)
	r1 := v.Hold("t-2", 1)
	r2 := v.Hold("t-1", 3)
	r3 := v.Hold("t-1", 3)
	r4 := v.Hold("t-1", 2)
	if got, want := v.Held(), []Held{{"t-1", 2}, {"t-1", 3}, {"t-2", 1}}; !slices.Equal(got, want) {
		t.Fatalf("Held %v, want %v", got, want)
	}
	r2()
	r2() // a second release is a no-op
	r4()
	if got, want := v.Held(), []Held{{"t-1", 3}, {"t-2", 1}}; !slices.Equal(got, want) {
		t.Fatalf("after releases: Held %v, want %v", got, want)
	}
	r3()
	r1()
	if got := v.Held(); len(got) != 0 {
		t.Fatalf("all released: Held %v", got)
	}
}

// TestBroken: Broke signals and records an attempt; TakeBroken names it
// once, leaves out an attempt under which a session runs again (its
// node came back), and sorts by task then attempt.
func TestBroken(t *testing.T) {
	v := NewVerifier("dst1", nil)
	v.Broke("t-2", 1)
	select {
	case <-v.Broken():
	default:
		t.Fatal("Broke did not signal")
	}
	v.Broke("t-1", 3)
	v.Broke("t-1", 2)
	release := v.Hold("t-1", 3)
	got := v.TakeBroken()
	want := []Held{{"t-1", 2}, {"t-2", 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("TakeBroken: %+v, want %+v", got, want)
	}
	release()
	if got := v.TakeBroken(); len(got) != 0 {
		t.Fatalf("named twice: %+v", got)
	}
}
