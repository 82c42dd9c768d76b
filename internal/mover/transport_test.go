package mover

import (
	"bytes"
	"context"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/wire"
)

// wrapped is a transport over TCP whose streams the mover sees only
// through the interface: without the optional capabilities (plain), or
// with zero copy and a peer address that is not loopback (far), so the
// mover takes its sendfile path on loopback too.
type wrapped struct {
	far       bool
	sendFiles atomic.Int64 // SendFile calls
}

func (w *wrapped) Name() string { return "wrapped-tcp" }

func (w *wrapped) Dial(ctx context.Context, addr string, o transport.Options) (transport.Conn, error) {
	c, err := transport.TCP.Dial(ctx, addr, o)
	if err != nil || !w.far {
		return plainConn{c}, err
	}
	return &farConn{plainConn{c}, w}, nil
}

func (w *wrapped) Listen(ctx context.Context, addr string, o transport.Options) (net.Listener, error) {
	return transport.TCP.Listen(ctx, addr, o)
}

// plainConn hides every optional capability of the stream it wraps.
type plainConn struct{ transport.Conn }

type farConn struct {
	plainConn
	w *wrapped
}

func (c *farConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.ParseIP("198.18.0.1"), Port: 7070}
}

func (c *farConn) SendFile(f *os.File, off, n int64) (int64, error) {
	c.w.sendFiles.Add(1)
	return c.Conn.(transport.FileSender).SendFile(f, off, n)
}

// TestMoverOverTransportInterface pushes and pulls a file through a
// transport the mover knows only by its interface: whether a stream can send
// files without a copy decides the path taken, and the per-stream statistics
// come from the stream's Stats.
func TestMoverOverTransportInterface(t *testing.T) {
	serverRoot, localRoot := t.TempDir(), t.TempDir()
	addr := serveLoopback(t, serverRoot)
	ctx := context.Background()

	data := make([]byte, 9<<20+12345) // blocks above smallBlock, and a short last one
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(localRoot, "f"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		far  bool
	}{{"plain streams", false}, {"zero copy", true}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &wrapped{far: tc.far}
			cfg := ClientConfig{Addr: addr, Streams: 2, BlockSize: 1 << 20, Transport: tr}
			root, err := os.OpenRoot(localRoot)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			name := "pushed-" + map[bool]string{false: "plain", true: "far"}[tc.far]
			src := Source{Items: []SourceItem{{Root: root, Path: "f", Name: name}}}
			ts, err := pushOnce(ctx, cfg, src, "", true, wire.Transfer{}, nil, &Progress{}, nil)
			if err != nil {
				t.Fatalf("push: %v", err)
			}
			if got, _ := os.ReadFile(filepath.Join(serverRoot, name)); !bytes.Equal(got, data) {
				t.Fatal("the pushed file differs from the source")
			}
			if n := tr.sendFiles.Load(); tc.far && n == 0 {
				t.Error("a stream that can send files without a copy was not asked to")
			}
			if len(ts.Sender.Streams) != 2 {
				t.Fatalf("sender accounts for %d streams, want 2", len(ts.Sender.Streams))
			}
			var bytesSent int64
			for i, s := range ts.Sender.Streams {
				bytesSent += s.Bytes
				if s.RTT <= 0 || s.Cwnd == 0 {
					t.Errorf("stream %d has no statistics from its transport: %+v", i, s)
				}
			}
			if bytesSent != int64(len(data)) {
				t.Errorf("streams carried %d bytes, want %d", bytesSent, len(data))
			}

			out := t.TempDir()
			droot, err := os.OpenRoot(out)
			if err != nil {
				t.Fatal(err)
			}
			defer droot.Close()
			if _, err := pullOnce(ctx, cfg, []string{name}, Dest{Root: droot, Base: "."}, wire.Transfer{}, &Progress{}, nil); err != nil {
				t.Fatalf("pull: %v", err)
			}
			if got, _ := os.ReadFile(filepath.Join(out, name)); !bytes.Equal(got, data) {
				t.Fatal("the pulled file differs from the source")
			}
		})
	}
}
