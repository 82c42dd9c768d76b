package mover

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/transport"
)

// serveLoopback runs a mover server on loopback over root until the test
// ends, and returns its address.
func serveLoopback(t *testing.T, root string) string {
	t.Helper()
	return serveConfig(t, ServerConfig{Root: root})
}

// serveConfig runs a server of cfg on a loopback port until the test
// ends and returns its address.
func serveConfig(t *testing.T, cfg ServerConfig) string {
	t.Helper()
	_, addr := serveServer(t, cfg)
	return addr
}

// serveServer is serveConfig that also returns the server.
func serveServer(t *testing.T, cfg ServerConfig) (*Server, string) {
	t.Helper()
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := transport.TCP.Listen(context.Background(), "127.0.0.1:0", transport.Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return srv, ln.Addr().String()
}

// TestCopy runs copies through the library entry point the command line
// and the transfer service share: a push of a tree, the same push again
// (everything already there), a pull back, a dry run, and a copy some of
// whose files fail. The tally, the one byte count and the verdicts are
// the library's.
func TestCopy(t *testing.T) {
	serverRoot, local := t.TempDir(), t.TempDir()
	addr := serveLoopback(t, serverRoot)
	tree := filepath.Join(local, "run42")
	files := map[string][]byte{"a.bin": make([]byte, 5<<20+7), "sub/b.bin": make([]byte, 300<<10), "sub/c.txt": []byte("c\n")}
	var total int64
	for name, data := range files {
		rand.Read(data)
		total += int64(len(data))
		p := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := ClientConfig{Addr: addr, Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}}
	push := func(opts Options, m *Meter, onFile func(FileResult)) (Summary, error) {
		it, err := OpenSource(tree, true)
		if err != nil {
			t.Fatal(err)
		}
		src := Source{Items: []SourceItem{it}}
		defer src.Close()
		if got := src.Size(); got != total {
			t.Errorf("Source.Size = %d, want %d", got, total)
		}
		opts.Recursive = true
		return Copy(context.Background(), Job{Config: cfg, Options: opts, Direction: Push, Source: src, Remote: "in/", Meter: m, OnFile: onFile})
	}

	var m Meter
	var mu sync.Mutex
	told := map[string]bool{}
	sum, err := push(Options{}, &m, func(fr FileResult) { mu.Lock(); told[fr.Path] = fr.OK; mu.Unlock() })
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	if !sum.Verified || sum.Files != 3 || sum.FilesFailed != 0 || sum.Bytes != total || sum.Attempts != 1 || sum.Direction != Push {
		t.Errorf("push summary: %+v", sum)
	}
	if sum.BytesSent != total || m.Sent() != total || m.Now().Sent != total {
		t.Errorf("bytes sent: summary %d, meter %d, want %d: one count", sum.BytesSent, m.Sent(), total)
	}
	if sum.Bottleneck.What == "" || len(sum.Streams) != 2 {
		t.Errorf("a verified copy is judged and accounts for its streams: %+v, %d streams", sum.Bottleneck, len(sum.Streams))
	}
	if len(told) != 3 {
		t.Errorf("OnFile heard of %v, want the three files", told)
	}
	for name, data := range files {
		if got, _ := os.ReadFile(filepath.Join(serverRoot, "in", "run42", name)); !bytes.Equal(got, data) {
			t.Errorf("%s differs at the server", name)
		}
	}

	// Again, existing files refused by default: they are the ones an
	// earlier run delivered, so they count as there, nothing sent.
	sum, err = push(Options{}, nil, nil)
	if err != nil || !sum.Verified || sum.BytesSent != 0 || sum.Files != 3 {
		t.Errorf("same push again: %v, %+v", err, sum)
	}

	// Pull it back into a new directory.
	back := filepath.Join(t.TempDir(), "back")
	dst, err := OpenDest(back, true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Root.Close()
	sum, err = Copy(context.Background(), Job{Config: cfg, Options: Options{Recursive: true}, Direction: Pull, Paths: []string{"in/run42"}, Local: dst})
	if err != nil || !sum.Verified || sum.BytesSent != total || sum.Direction != Pull {
		t.Fatalf("pull: %v, %+v", err, sum)
	}
	for name, data := range files {
		if got, _ := os.ReadFile(filepath.Join(back, "run42", name)); !bytes.Equal(got, data) {
			t.Errorf("%s differs after the pull", name)
		}
	}

	// A dry run of a push elsewhere: every file would be sent, nothing is.
	sum, err = func() (Summary, error) {
		it, _ := OpenSource(tree, true)
		src := Source{Items: []SourceItem{it}}
		defer src.Close()
		return Copy(context.Background(), Job{Config: cfg, Options: Options{Recursive: true, DryRun: true}, Direction: Push, Source: src, Remote: "elsewhere/"})
	}()
	if err != nil || sum.Verified || sum.Files != 3 || len(sum.Planned) != 3 || sum.BytesSent != 0 {
		t.Errorf("dry run: %v, %+v", err, sum)
	}
	for _, fr := range sum.Planned {
		if DryRunStatus(fr.Reason) != "would-send" {
			t.Errorf("dry run: %s: %s", fr.Path, fr.Reason)
		}
	}
	if _, err := os.Stat(filepath.Join(serverRoot, "elsewhere")); err == nil {
		t.Error("a dry run wrote at the destination")
	}

	// Changed sources over existing files, refused: the files fail, the
	// session does not; the error says how many.
	os.WriteFile(filepath.Join(tree, "sub", "c.txt"), []byte("changed\n"), 0o600)
	total += int64(len("changed\n") - len(files["sub/c.txt"]))
	sum, err = push(Options{}, nil, nil)
	var ff *FilesFailedError
	if !errors.As(err, &ff) || ff.Failed != 1 || ff.Total != 3 || sum.Verified || sum.FilesFailed != 1 || len(sum.Errors) != 1 {
		t.Errorf("a refused file: %v, %+v", err, sum)
	}
}

// TestCopyRepace re-paces a running push through its Meter: every data
// stream's pacing cap, read back from the socket, follows the new session
// rate (shared among the streams as at the start), and a rate set before
// the copy starts is the one its streams open with.
func TestCopyRepace(t *testing.T) {
	serverRoot, local := t.TempDir(), t.TempDir()
	addr := serveLoopback(t, serverRoot)
	data := make([]byte, 6<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(local, "big.bin"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	const streams = 4
	caps := func(m *Meter) []uint64 {
		var out []uint64
		for _, st := range m.Streams() {
			out = append(out, st.MaxPacingRate)
		}
		return out
	}
	push := func(rate uint64, m *Meter) <-chan error {
		it, err := OpenSource(filepath.Join(local, "big.bin"), false)
		if err != nil {
			t.Fatal(err)
		}
		src := Source{Items: []SourceItem{it}}
		cfg := ClientConfig{Addr: addr, Streams: streams, BlockSize: 256 << 10, Tuning: Tuning{DSCP: -1, Rate: rate}}
		done := make(chan error, 1)
		go func() {
			defer src.Close()
			_, err := Copy(context.Background(), Job{Config: cfg, Direction: Push, Source: src, Remote: "in/", Meter: m})
			done <- err
		}()
		return done
	}
	each := func(got []uint64, n int, want uint64) bool {
		ok := len(got) == n
		for _, c := range got {
			ok = ok && c == want
		}
		return ok
	}
	// waitCaps waits until every stream of the running session is capped at
	// want bytes/s; a session that ends first fails the test.
	waitCaps := func(m *Meter, done <-chan error, want uint64) {
		t.Helper()
		for {
			got := caps(m)
			if each(got, streams, want) {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("the copy ended (%v) with its streams capped at %v, want %d on each of %d", err, got, want, streams)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}

	// 8 Mbit/s: the 6 MiB would take six seconds.
	var m Meter
	done := push(8e6, &m)
	waitCaps(&m, done, 8e6/8/streams)
	if err := m.SetRate(48e6); err != nil {
		t.Fatalf("SetRate: %v", err)
	}
	if got := caps(&m); !each(got, streams, 48e6/8/streams) {
		t.Errorf("after SetRate(48 Mbit/s) the streams are capped at %v, want %d each", got, uint64(48e6/8/streams))
	}
	if err := m.SetRate(0); err != nil {
		t.Fatalf("SetRate(0): %v", err)
	}
	if got := caps(&m); !each(got, streams, 0) {
		t.Errorf("after SetRate(0) the streams are capped at %v, want none", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("re-paced push: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(serverRoot, "in", "big.bin")); !bytes.Equal(got, data) {
		t.Fatal("big.bin differs at the server")
	}

	// A rate set before the copy is the one its session opens with.
	var m2 Meter
	if err := m2.SetRate(8e6); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(serverRoot, "in", "big.bin"))
	done = push(0, &m2)
	waitCaps(&m2, done, 8e6/8/streams)
	m2.SetRate(0)
	if err := <-done; err != nil {
		t.Fatalf("push: %v", err)
	}
}
