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
	return ln.Addr().String()
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
