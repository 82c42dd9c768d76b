package mover

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/wire"
)

// grantServer is a data node's server on loopback that takes pushes only
// with grants signed by key for node "dst1".
type grantServer struct {
	addr string
	root string
	key  ed25519.PrivateKey
	v    *grant.Verifier
}

func serveGranted(t *testing.T, token []byte) *grantServer {
	t.Helper()
	key, err := grant.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	v := grant.NewVerifier("dst1", nil)
	v.SetKey(key.Public().(ed25519.PublicKey))
	root := t.TempDir()
	addr := serveConfig(t, ServerConfig{Root: root, Grants: v, Token: token})
	return &grantServer{addr: addr, root: root, key: key, v: v}
}

// writeGrant is a write grant for task t-1, attempt 1, on dst1, covering
// in/, valid for an hour.
func writeGrant() grant.Grant {
	return grant.Grant{User: "alice", Job: "j-1", Task: "t-1", Attempt: 1, Node: "dst1", Mode: grant.Write,
		Paths: []string{"in"}, Expires: time.Now().Add(time.Hour)}
}

func (gs *grantServer) sign(t *testing.T, mod func(*grant.Grant)) string {
	t.Helper()
	g := writeGrant()
	if mod != nil {
		mod(&g)
	}
	tok, err := grant.Sign(gs.key, g)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// makeTree writes files (name -> size, random content) under dir.
func makeTree(t *testing.T, dir string, files map[string]int) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, size := range files {
		data := make([]byte, size)
		rand.Read(data)
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out[name] = data
	}
	return out
}

// sourceOf opens local as the one item of a copy's source; the test
// closes it.
func sourceOf(t *testing.T, local string, recursive bool) Source {
	t.Helper()
	it, err := OpenSource(local, recursive)
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Items: []SourceItem{it}}
	t.Cleanup(func() { src.Close() })
	return src
}

// pushTree copies the tree at local into remote with cfg.
func pushTree(ctx context.Context, t *testing.T, cfg ClientConfig, local, remote string, retries int) (Summary, error) {
	t.Helper()
	src := sourceOf(t, local, true)
	return Copy(ctx, Job{Config: cfg, Options: Options{Recursive: true}, Direction: Push, Source: src, Remote: remote, Retries: retries})
}

// TestGrantPush: a push to a server with a controller needs a grant the
// verifier accepts; every refusal is permanent (Copy tries once, though it
// may retry three times), says why, and writes nothing.
func TestGrantPush(t *testing.T) {
	gs := serveGranted(t, nil)
	local := filepath.Join(t.TempDir(), "run42")
	files := makeTree(t, local, map[string]int{"a.bin": 3<<20 + 5, "sub/b.txt": 100})
	other, _ := grant.NewKey()
	tampered := func() string {
		tok := gs.sign(t, func(g *grant.Grant) { g.Paths = []string{"elsewhere"} })
		body, sig, _ := strings.Cut(tok, ".")
		enc := base64.RawURLEncoding
		b, _ := enc.DecodeString(body)
		b = bytes.Replace(b, []byte(`"elsewhere"`), []byte(`"out"`), 1)
		return enc.EncodeToString(b) + "." + sig
	}()
	for _, tc := range []struct {
		name   string
		grant  string
		remote string
		want   string // "" for success; otherwise in the error
	}{
		{name: "no grant", remote: "out/", want: "refused: the server takes pushes only with a grant from the controller"},
		{name: "expired", grant: gs.sign(t, func(g *grant.Grant) { g.Paths = []string{"out"}; g.Expires = time.Now().Add(-time.Minute) }), remote: "out/", want: "refused: grant: expired at "},
		{name: "wrong node", grant: gs.sign(t, func(g *grant.Grant) { g.Paths = []string{"out"}; g.Node = "dst2" }), remote: "out/", want: "refused: grant: issued for another node: dst2, this is dst1"},
		{name: "tampered", grant: tampered, remote: "out/", want: "refused: grant: bad signature"},
		{name: "wrong key", grant: func() string {
			g := writeGrant()
			g.Paths = []string{"out"}
			tok, _ := grant.Sign(other, g)
			return tok
		}(), remote: "out/", want: "refused: grant: bad signature"},
		{name: "read grant", grant: gs.sign(t, func(g *grant.Grant) { g.Paths = []string{"out"}; g.Mode = grant.Read }), remote: "out/", want: "refused: grant: mode not granted: write, the grant gives read"},
		{name: "outside the grant", grant: gs.sign(t, nil), remote: "out/", want: `refused: grant: path not covered: "out" is outside in`},
		{name: "malformed", grant: "not-a-grant", remote: "out/", want: "refused: grant: malformed: no signature"},
		{name: "valid", grant: gs.sign(t, nil), remote: "in/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ClientConfig{Addr: gs.addr, Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}, Grant: tc.grant}
			sum, err := pushTree(context.Background(), t, cfg, local, tc.remote, 3)
			if tc.want == "" {
				if err != nil || !sum.Verified {
					t.Fatalf("push: %v, %+v", err, sum)
				}
				for name, data := range files {
					if got, _ := os.ReadFile(filepath.Join(gs.root, "in", "run42", name)); !bytes.Equal(got, data) {
						t.Errorf("%s differs at the server", name)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("push: %v, want %q", err, tc.want)
			}
			if !retry.IsPermanent(err) || !errors.Is(err, ErrRefused) || sum.Attempts != 1 {
				t.Errorf("%v: permanent %v, attempts %d: want a permanent refusal, tried once", err, retry.IsPermanent(err), sum.Attempts)
			}
			if _, err := os.Stat(filepath.Join(gs.root, "out")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused push wrote at the destination: %v", err)
			}
		})
	}

	// A stale attempt: attempt 2 was verified (the fence rose), so
	// attempt 1 is refused, though its grant is otherwise good.
	gs.v.Fence("t-1", 2)
	cfg := ClientConfig{Addr: gs.addr, Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}, Grant: gs.sign(t, func(g *grant.Grant) { g.Paths = []string{"out"} })}
	sum, err := pushTree(context.Background(), t, cfg, local, "out/", 3)
	const stale = "refused: grant: fenced: attempt 1 of task t-1 is no longer current (the fence is at attempt 2)"
	if err == nil || !strings.Contains(err.Error(), stale) || !retry.IsPermanent(err) || sum.Attempts != 1 {
		t.Fatalf("stale attempt: %v (attempts %d), want %q", err, sum.Attempts, stale)
	}
	if _, err := os.Stat(filepath.Join(gs.root, "out")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a stale attempt wrote at the destination: %v", err)
	}
}

// TestGrantPerFile: a tree pushed into a directory above what the grant
// covers: the covered file arrives, the directories on the way are
// created, and every other file and link fails with the reason (a
// directory outside is not created, and has no verdict of its own);
// nothing of them is written.
func TestGrantPerFile(t *testing.T) {
	gs := serveGranted(t, nil)
	local := filepath.Join(t.TempDir(), "run42")
	files := makeTree(t, local, map[string]int{"a.bin": 2<<20 + 1, "sub/b.txt": 100, "c.txt": 10})
	os.Symlink("sub/b.txt", filepath.Join(local, "link"))
	tok := gs.sign(t, func(g *grant.Grant) { g.Paths = []string{"in/run42/a.bin", "in/run42/link"} })
	cfg := ClientConfig{Addr: gs.addr, Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}, Grant: tok}
	sum, err := pushTree(context.Background(), t, cfg, local, "in/", 3)
	var ff *FilesFailedError
	if !errors.As(err, &ff) || sum.Attempts != 1 {
		t.Fatalf("push: %v, attempts %d: want some files failed", err, sum.Attempts)
	}
	if got, _ := os.ReadFile(filepath.Join(gs.root, "in", "run42", "a.bin")); !bytes.Equal(got, files["a.bin"]) {
		t.Error("the covered file did not arrive")
	}
	failed := strings.Join(sum.Failures, "\n")
	for _, want := range []string{
		`run42/c.txt: grant: path not covered: "in/run42/c.txt" is outside in/run42/a.bin, in/run42/link`,
		`run42/sub/b.txt: grant: path not covered`,
		// The link's own path is covered, what it points to is not.
		`run42/link: symlink run42/link -> sub/b.txt: grant: path not covered: it resolves outside in/run42/a.bin, in/run42/link: not recreated`,
	} {
		if !strings.Contains(failed, want) {
			t.Errorf("failures:\n%s\nwant %q", failed, want)
		}
	}
	for _, p := range []string{"in/run42/c.txt", "in/run42/sub", "in/run42/link"} {
		if _, err := os.Lstat(filepath.Join(gs.root, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s written outside the grant: %v", p, err)
		}
	}
}

// TestGrantWithToken: the token and the grant are both checked.
func TestGrantWithToken(t *testing.T) {
	gs := serveGranted(t, []byte("secret"))
	local := filepath.Join(t.TempDir(), "run42")
	makeTree(t, local, map[string]int{"a.bin": 1 << 20})
	for _, tc := range []struct {
		name  string
		token string
		grant bool
		want  string
	}{
		{"both", "secret", true, ""},
		{"wrong token", "guess", true, "authentication failed: wrong token"},
		{"token without grant", "secret", false, "refused: the server takes pushes only with a grant from the controller"},
		{"grant without token", "", true, "the server requires a token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ClientConfig{Addr: gs.addr, Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}, Token: []byte(tc.token)}
			if tc.grant {
				cfg.Grant = gs.sign(t, nil)
			}
			sum, err := pushTree(context.Background(), t, cfg, local, "in/"+strings.ReplaceAll(tc.name, " ", "-")+"/", 2)
			if tc.want == "" {
				if err != nil || !sum.Verified {
					t.Fatalf("push: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !retry.IsPermanent(err) || sum.Attempts != 1 {
				t.Fatalf("push: %v (attempts %d), want a permanent %q", err, sum.Attempts, tc.want)
			}
		})
	}
}

// TestGrantFence: a running push of attempt 1 is cut when the controller
// raises the fence (a heartbeat's Fence) or attempt 2 verifies; its client
// gets the permanent reason, nothing is under the final name, and attempt 2
// resumes the partial file and delivers it whole.
func TestGrantFence(t *testing.T) {
	for _, how := range []string{"fence", "newer attempt"} {
		t.Run(how, func(t *testing.T) {
			gs := serveGranted(t, nil)
			local := filepath.Join(t.TempDir(), "run42")
			const size = 24 << 20
			files := makeTree(t, local, map[string]int{"big.bin": size})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// Attempt 1, paced to 40 Mbit/s so that it is still running
			// when it is fenced.
			cfg1 := ClientConfig{Addr: gs.addr, Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1, Rate: 40e6}, Grant: gs.sign(t, nil)}
			type outcome struct {
				sum Summary
				err error
			}
			first := make(chan outcome, 1)
			go func() {
				sum, err := pushTree(ctx, t, cfg1, local, "in/", 3)
				first <- outcome{sum, err}
			}()
			// Wait until some blocks are journaled at the server.
			journal := filepath.Join(gs.root, "in", "run42", ".big.bin"+journalSuffix)
			for {
				if fi, err := os.Stat(journal); err == nil && fi.Size() > 64 {
					break
				}
				select {
				case o := <-first:
					t.Fatalf("attempt 1 ended before it was fenced: %v", o.err)
				case <-ctx.Done():
					t.Fatal("no block of attempt 1 arrived")
				case <-time.After(20 * time.Millisecond):
				}
			}
			cfg2 := ClientConfig{Addr: gs.addr, Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}, Grant: gs.sign(t, func(g *grant.Grant) { g.Attempt = 2 })}
			second := make(chan outcome, 1)
			fenced := time.Now()
			if how == "fence" {
				gs.v.Fence("t-1", 2)
			} else {
				go func() {
					sum, err := pushTree(ctx, t, cfg2, local, "in/", 3)
					second <- outcome{sum, err}
				}()
			}
			o := <-first
			t.Logf("attempt 1 ended %v after the fence: %v", time.Since(fenced).Round(time.Millisecond), o.err)
			const reason = "refused: attempt 1 of task t-1 is no longer current"
			if o.err == nil || !strings.Contains(o.err.Error(), reason) || !retry.IsPermanent(o.err) || o.sum.Attempts != 1 {
				t.Fatalf("attempt 1: %v (attempts %d), want a permanent %q", o.err, o.sum.Attempts, reason)
			}
			if how == "fence" {
				if _, err := os.Stat(filepath.Join(gs.root, "in", "run42", "big.bin")); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("the fenced attempt's file is under its final name: %v", err)
				}
				if _, err := os.Stat(filepath.Join(gs.root, "in", "run42", ".big.bin"+partSuffix)); err != nil {
					t.Fatalf("the partial file is gone: %v", err)
				}
				go func() {
					sum, err := pushTree(ctx, t, cfg2, local, "in/", 3)
					second <- outcome{sum, err}
				}()
			}
			o = <-second
			if o.err != nil || !o.sum.Verified {
				t.Fatalf("attempt 2: %v, %+v", o.err, o.sum)
			}
			if o.sum.BytesSent >= size || o.sum.BytesSkipped == 0 {
				t.Errorf("attempt 2 sent %d bytes and found %d there: it did not resume attempt 1's partial file", o.sum.BytesSent, o.sum.BytesSkipped)
			}
			if got, _ := os.ReadFile(filepath.Join(gs.root, "in", "run42", "big.bin")); !bytes.Equal(got, files["big.bin"]) {
				t.Error("big.bin differs at the server")
			}
			// Attempt 1 cannot come back.
			sum, err := pushTree(ctx, t, cfg1, local, "in/", 3)
			if err == nil || !errors.Is(err, ErrRefused) || sum.Attempts != 1 {
				t.Errorf("attempt 1 again: %v", err)
			}
			// A fenced session is not a broken one: its node lives.
			if b := gs.v.TakeBroken(); len(b) != 0 {
				t.Errorf("the fenced session is named broken: %+v", b)
			}
		})
	}
}

// TestGrantBroken: a session under a grant whose pushing client goes
// away mid-push is named broken by the verifier (the data node's
// heartbeat tells the controller at once); a push that ends well, or one
// cut by a fence (TestGrantFence), is not.
func TestGrantBroken(t *testing.T) {
	gs := serveGranted(t, nil)
	local := filepath.Join(t.TempDir(), "run42")
	makeTree(t, local, map[string]int{"small.bin": 64 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := ClientConfig{Addr: gs.addr, Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}, Grant: gs.sign(t, nil)}
	if _, err := pushTree(ctx, t, cfg, local, "in/", 0); err != nil {
		t.Fatal(err)
	}
	if b := gs.v.TakeBroken(); len(b) != 0 {
		t.Fatalf("a push that ended well is named broken: %+v", b)
	}
	// A slow push of attempt 2, whose client is stopped mid-push.
	big := filepath.Join(t.TempDir(), "run43")
	makeTree(t, big, map[string]int{"big.bin": 24 << 20})
	cfg.Grant = gs.sign(t, func(g *grant.Grant) { g.Attempt = 2 })
	cfg.Tuning.Rate = 40e6
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := pushTree(pctx, t, cfg, big, "in/", 0)
		done <- err
	}()
	journal := filepath.Join(gs.root, "in", "run43", ".big.bin"+journalSuffix)
	for {
		if fi, err := os.Stat(journal); err == nil && fi.Size() > 64 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the push ended before it was stopped: %v", err)
		case <-ctx.Done():
			t.Fatal("no block arrived")
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	<-done
	select {
	case <-gs.v.Broken():
	case <-ctx.Done():
		t.Fatal("the server did not name the broken session")
	}
	if b := gs.v.TakeBroken(); len(b) != 1 || b[0] != (grant.Held{Task: "t-1", Attempt: 2}) {
		t.Fatalf("broken: %+v", b)
	}
	if b := gs.v.TakeBroken(); len(b) != 0 {
		t.Fatalf("named twice: %+v", b)
	}
}

// TestGrantVersions: a client too old to send a grant is told so by a
// server that needs one; a client with a grant leaves it out for a server
// too old to read it (version 2), and a server without grants ignores one.
func TestGrantVersions(t *testing.T) {
	gs := serveGranted(t, nil)
	c, err := net.Dial("tcp", gs.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(wire.AppendHello(nil, wire.Hello{MinVersion: 1, MaxVersion: 2, Kind: wire.KindControl})); err != nil {
		t.Fatal(err)
	}
	r, w := wire.NewReader(c), wire.NewWriter(c)
	if m, err := r.Read(); err != nil || m.(*wire.HelloOK).Version != 2 {
		t.Fatalf("hello: %v, %v", m, err)
	}
	put := &wire.Put{Transfer: wire.Transfer{Tuning: wire.Tuning{DSCP: -1}, Streams: 1, BlockSize: 1 << 20}, Dest: "in/", Sources: 1, DirSlash: true}
	if err := w.Send(put); err != nil {
		t.Fatal(err)
	}
	const old = "the server takes pushes only with a grant from the controller, and this client (protocol version 2) cannot send one"
	if m, err := r.Read(); err != nil || m.(*wire.Error).Msg != old {
		t.Fatalf("a version 2 client: %v, %v; want %q", m, err, old)
	}

	// A version 2 server: the client's first frame after the hello is its
	// request.
	addr, firstFrame := oldServer(t, 2)
	cfg := ClientConfig{Addr: addr, Streams: 1, Tuning: Tuning{DSCP: -1}, Grant: gs.sign(t, nil)}
	local := filepath.Join(t.TempDir(), "run42")
	makeTree(t, local, map[string]int{"a": 1})
	if _, err := pushTree(context.Background(), t, cfg, local, "in/", 0); err == nil || !strings.Contains(err.Error(), "old server") {
		t.Fatalf("push to the old server: %v", err)
	}
	if m := <-firstFrame; m.err != nil || m.m.Type() != wire.TPut {
		t.Fatalf("a version 2 server got %v (%v) first, want put", m.m, m.err)
	}

	// A server without grants takes a push that carries one.
	plain := t.TempDir()
	cfg.Addr = serveLoopback(t, plain)
	if sum, err := pushTree(context.Background(), t, cfg, local, "in/", 0); err != nil || !sum.Verified {
		t.Fatalf("push with a grant to a server without grants: %v", err)
	}
}

// frameOrErr is what an old server read first after its hello.
type frameOrErr struct {
	m   wire.Msg
	err error
}

// oldServer answers one session's hello as a server of protocol version,
// reads the client's first frame after it (waiting up to 30 s), hands it
// on, and refuses it: an older peer, for the tests of what a client sends
// one.
func oldServer(t *testing.T, version uint16) (addr string, first <-chan frameOrErr) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan frameOrErr, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := wire.ReadHello(c); err != nil {
			return
		}
		w := wire.NewWriter(c)
		w.Send(&wire.HelloOK{Version: version})
		c.SetDeadline(time.Now().Add(30 * time.Second))
		m, err := wire.NewReader(c).Read()
		ch <- frameOrErr{m, err}
		w.Send(&wire.Error{Code: wire.CodeRefused, Msg: "old server"})
	}()
	return ln.Addr().String(), ch
}

// TestGrantPull: a pull needs a read grant covering every path asked for.
func TestGrantPull(t *testing.T) {
	gs := serveGranted(t, nil)
	files := makeTree(t, filepath.Join(gs.root, "in", "run42"), map[string]int{"a.bin": 1<<20 + 3, "sub/b": 10})
	makeTree(t, filepath.Join(gs.root, "private"), map[string]int{"x": 10})
	read := func(g *grant.Grant) { g.Mode = grant.Read; g.Paths = []string{"in/run42"} }
	for _, tc := range []struct {
		name  string
		grant string
		paths []string
		want  string
	}{
		{"covered", gs.sign(t, read), []string{"in/run42"}, ""},
		{"not covered", gs.sign(t, read), []string{"in/run42", "private"}, `refused: grant: path not covered: "private" is outside in/run42`},
		{"write grant", gs.sign(t, func(g *grant.Grant) { g.Paths = []string{"in/run42"} }), []string{"in/run42"}, "refused: grant: mode not granted: read, the grant gives write"},
		{"no grant", "", []string{"in/run42"}, "refused: the server takes pulls only with a grant from the controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			back := filepath.Join(t.TempDir(), "back")
			dst, err := OpenDest(back, true, false)
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Root.Close()
			cfg := ClientConfig{Addr: gs.addr, Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}, Grant: tc.grant}
			sum, err := Copy(context.Background(), Job{Config: cfg, Options: Options{Recursive: true}, Direction: Pull, Paths: tc.paths, Local: dst, Retries: 2})
			if tc.want == "" {
				if err != nil || !sum.Verified {
					t.Fatalf("pull: %v", err)
				}
				for name, data := range files {
					if got, _ := os.ReadFile(filepath.Join(back, "run42", name)); !bytes.Equal(got, data) {
						t.Errorf("%s differs after the pull", name)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !retry.IsPermanent(err) || sum.Attempts != 1 {
				t.Fatalf("pull: %v (attempts %d), want a permanent %q", err, sum.Attempts, tc.want)
			}
		})
	}
}

// TestGrantNoKey: a server that has not yet heard the controller's key
// answers busy, which is worth a retry (the key comes with the next
// heartbeat), not a permanent refusal.
func TestGrantNoKey(t *testing.T) {
	key, _ := grant.NewKey()
	addr := serveConfig(t, ServerConfig{Root: t.TempDir(), Grants: grant.NewVerifier("dst1", nil)})
	tok, _ := grant.Sign(key, writeGrant())
	local := filepath.Join(t.TempDir(), "run42")
	makeTree(t, local, map[string]int{"a": 1})
	cfg := ClientConfig{Addr: addr, Streams: 1, Tuning: Tuning{DSCP: -1}, Grant: tok}
	_, err := pushTree(context.Background(), t, cfg, local, "in/", 0)
	if err == nil || !strings.Contains(err.Error(), "grant: this server has no controller key yet") || retry.IsPermanent(err) {
		t.Fatalf("push before the key: %v (permanent %v)", err, retry.IsPermanent(err))
	}
}

// TestGrantBenchFile: a server that checks grants sends a file in a
// reverse bench only under a read grant covering it; a bench from memory
// touches no path and needs a grant of either mode.
func TestGrantBenchFile(t *testing.T) {
	gs := serveGranted(t, nil)
	makeTree(t, filepath.Join(gs.root, "in", "run42"), map[string]int{"a.bin": 1<<20 + 3})
	makeTree(t, filepath.Join(gs.root, "private"), map[string]int{"x": 10})
	read := func(g *grant.Grant) { g.Mode = grant.Read; g.Paths = []string{"in/run42"} }
	for _, tc := range []struct {
		name  string
		grant string
		file  string
		want  string
	}{
		{"covered", gs.sign(t, read), "in/run42/a.bin", ""},
		{"from memory, a write grant", gs.sign(t, nil), "", ""},
		{"not covered", gs.sign(t, read), "private/x", `refused: grant: path not covered: "private/x" is outside in/run42`},
		{"write grant", gs.sign(t, func(g *grant.Grant) { g.Paths = []string{"in/run42"} }), "in/run42/a.bin", "refused: grant: mode not granted: read, the grant gives write"},
		{"no grant", "", "in/run42/a.bin", "refused: the server takes benches from a file only with a grant from the controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ClientConfig{Addr: gs.addr, Streams: 1, Tuning: Tuning{DSCP: -1}, Grant: tc.grant}
			dur := time.Minute // a file ends the test when it is all sent
			if tc.file == "" {
				dur = 200 * time.Millisecond
			}
			res, err := Bench(context.Background(), cfg, BenchOptions{Duration: dur, Reverse: true, ServerFile: tc.file}, nil)
			if tc.want == "" {
				if err != nil || (tc.file != "" && res.Directions[0].Bytes != 1<<20+3) {
					t.Fatalf("bench: %+v, %v", res, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !retry.IsPermanent(err) {
				t.Fatalf("bench: %v, want a permanent %q", err, tc.want)
			}
		})
	}
}

// TestGrantConfirm: a server whose verifier asks the controller takes a
// push only when the controller says its attempt is current: an attempt
// that is over is refused for good (and fenced: not asked again), a
// controller that cannot be asked makes the push wait (busy), and while a
// session runs its attempt is listed as held.
func TestGrantConfirm(t *testing.T) {
	local := filepath.Join(t.TempDir(), "run42")
	makeTree(t, local, map[string]int{"a.bin": 1 << 20})
	for _, tc := range []struct {
		name      string
		answer    error
		want      string // "" for success
		permanent bool
		asks      int // the questions the push led to
	}{
		{name: "current", asks: 1},
		{name: "over", answer: fmt.Errorf("%w: attempt 1 of task t-1 is no longer current: job j-1 has ended (SUCCEEDED)", grant.ErrOver),
			want: "refused: grant: its task's attempt is over: attempt 1 of task t-1 is no longer current: job j-1 has ended (SUCCEEDED)", permanent: true, asks: 1},
		{name: "controller away", answer: errors.New("dial tcp: connection refused"),
			want: "ask the controller whether attempt 1 of task t-1 is current: dial tcp: connection refused", asks: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs := serveGranted(t, nil)
			var mu sync.Mutex
			var asked []grant.Held
			gs.v.SetConfirm(func(_ context.Context, task string, attempt int) error {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, grant.Held{Task: task, Attempt: attempt})
				// While the session is being admitted nothing is held:
				// the hold begins once it is.
				if h := gs.v.Held(); len(h) != 0 {
					t.Errorf("held before admission: %v", h)
				}
				return tc.answer
			})
			cfg := ClientConfig{Addr: gs.addr, Streams: 1, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}, Grant: gs.sign(t, nil)}
			src := sourceOf(t, local, true)
			var heldDuring []grant.Held
			job := Job{Config: cfg, Options: Options{Recursive: true}, Direction: Push, Source: src, Remote: "in/", Retries: 1,
				OnFile: func(FileResult) { heldDuring = gs.v.Held() }}
			sum, err := Copy(context.Background(), job)
			mu.Lock()
			n := len(asked)
			mu.Unlock()
			if n != tc.asks {
				t.Errorf("asked %d times, want %d", n, tc.asks)
			}
			if tc.want == "" {
				if err != nil || !sum.Verified {
					t.Fatalf("push: %v", err)
				}
				if len(heldDuring) != 1 || heldDuring[0] != (grant.Held{Task: "t-1", Attempt: 1}) {
					t.Errorf("held during the session: %v", heldDuring)
				}
				// The server lets go of the session just after the client
				// sees its end.
				for deadline := time.Now().Add(30 * time.Second); len(gs.v.Held()) != 0; time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("still held after the session: %v", gs.v.Held())
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || retry.IsPermanent(err) != tc.permanent {
				t.Fatalf("push: %v (permanent %v), want %q (permanent %v)", err, retry.IsPermanent(err), tc.want, tc.permanent)
			}
			if _, err := os.Stat(filepath.Join(gs.root, "in")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused push wrote at the destination: %v", err)
			}
			if tc.permanent && gs.v.Current("t-1", 1) {
				t.Error("an attempt the controller says is over is not fenced")
			}
		})
	}
}

// countHandler counts the log records whose message and reason hold the
// given words, and signals each.
type countHandler struct {
	mu    sync.Mutex
	n     int
	hit   chan struct{}
	words string
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countHandler) WithGroup(string) slog.Handler            { return h }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	text := r.Message
	r.Attrs(func(a slog.Attr) bool { text += " " + a.Value.String(); return true })
	if strings.Contains(text, h.words) {
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
		select {
		case h.hit <- struct{}{}:
		default:
		}
	}
	return nil
}

func (h *countHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// TestEarlyDataDials: a session's data connections are dialled beside its
// control connection; when the request's answer comes after the server
// has dropped them (its handshake timeout, here while the controller is
// asked about the grant), each is dialled again, and the push succeeds.
func TestEarlyDataDials(t *testing.T) {
	key, err := grant.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	v := grant.NewVerifier("dst1", nil)
	v.SetKey(key.Public().(ed25519.PublicKey))
	const streams = 3
	h := &countHandler{hit: make(chan struct{}, 1), words: "read join"}
	root := t.TempDir()
	addr := serveConfig(t, ServerConfig{Root: root, Grants: v, HandshakeTimeout: time.Second, Logger: slog.New(h)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The controller answers once the server has dropped every data
	// connection dialled early.
	v.SetConfirm(func(cctx context.Context, _ string, _ int) error {
		for h.count() < streams {
			select {
			case <-h.hit:
			case <-cctx.Done():
				return cctx.Err()
			}
		}
		return nil
	})
	gs := &grantServer{addr: addr, root: root, key: key, v: v}
	local := filepath.Join(t.TempDir(), "run42")
	files := makeTree(t, local, map[string]int{"a.bin": 2<<20 + 3})
	cfg := ClientConfig{Addr: addr, Streams: streams, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}, Grant: gs.sign(t, nil)}
	sum, err := pushTree(ctx, t, cfg, local, "in/", 0)
	if err != nil || !sum.Verified {
		t.Fatalf("push: %v %+v", err, sum)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "in", "run42", "a.bin")); !bytes.Equal(got, files["a.bin"]) {
		t.Fatal("a.bin differs")
	}
}
