//go:build linux

package mover

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/cc/fast"
	"github.com/lightpath/lightpath/internal/testcert"
	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/wire"
)

// serveUDP runs a server of cfg on a loopback port, TCP and UDP, until
// the test ends, and returns it and its address.
func serveUDP(t *testing.T, cfg ServerConfig) (*Server, string) {
	t.Helper()
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := transport.TCP.Listen(ctx, "127.0.0.1:0", transport.Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	uln, err := srv.ListenUDP(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln, uln); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return srv, ln.Addr().String()
}

// TestUDPSession pushes a tree over UDP data streams and pulls it back,
// with and without a token: every file verified, the summary's UDP
// account filled in (datagrams, send calls), and the server forgets each
// session's key once it ends.
func TestUDPSession(t *testing.T) {
	for _, token := range []string{"", "s3cret"} {
		t.Run("token="+token, func(t *testing.T) {
			root, local := t.TempDir(), t.TempDir()
			srv, addr := serveUDP(t, ServerConfig{Root: root, Token: []byte(token)})
			tree := filepath.Join(local, "tree")
			files := map[string][]byte{"a.bin": make([]byte, 3<<20+5), "sub/b.bin": make([]byte, 200<<10), "sub/c": []byte("c")}
			for name, data := range files {
				rand.Read(data)
				p := filepath.Join(tree, name)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg := ClientConfig{Addr: addr, Token: []byte(token), Streams: 2, BlockSize: 1 << 20,
				Tuning: Tuning{Transport: TransportUDP, DSCP: -1}}
			it, err := OpenSource(tree, true)
			if err != nil {
				t.Fatal(err)
			}
			src := Source{Items: []SourceItem{it}}
			defer src.Close()
			sum, err := Copy(context.Background(), Job{Config: cfg, Options: Options{Recursive: true}, Direction: Push, Source: src, Remote: "in/"})
			if err != nil {
				t.Fatal(err)
			}
			checkUDPSummary(t, "push", sum, len(files))
			for name, data := range files {
				got, err := os.ReadFile(filepath.Join(root, "in", "tree", name))
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%s on the server: %v (%d bytes, want %d)", name, err, len(got), len(data))
				}
			}
			dst, err := OpenDest(filepath.Join(local, "back"), true, false)
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Root.Close()
			sum, err = Copy(context.Background(), Job{Config: cfg, Options: Options{Recursive: true}, Direction: Pull, Paths: []string{"in/tree"}, Local: dst})
			if err != nil {
				t.Fatal(err)
			}
			checkUDPSummary(t, "pull", sum, len(files))
			for name, data := range files {
				got, err := os.ReadFile(filepath.Join(local, "back", "tree", name))
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%s pulled: %v", name, err)
				}
			}
			// Every session has ended: no key is left to answer with.
			deadline := time.Now().Add(time.Minute)
			for {
				srv.mu.Lock()
				n := len(srv.udpKeys) + len(srv.udpStreams)
				srv.mu.Unlock()
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d UDP session keys and stream counts left after the sessions ended", n)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func checkUDPSummary(t *testing.T, what string, sum Summary, files int) {
	t.Helper()
	if !sum.Verified || sum.Files != files || sum.Transport != TransportUDP {
		t.Fatalf("%s: verified %v, %d files, transport %q; want verified, %d, udp", what, sum.Verified, sum.Files, sum.Transport, files)
	}
	if !sum.HasUDP || !sum.HasWire || sum.Datagrams == 0 || sum.SendCalls == 0 || sum.Datagrams < sum.SendCalls {
		t.Fatalf("%s: UDP account %v/%v: %d datagrams in %d calls", what, sum.HasUDP, sum.HasWire, sum.Datagrams, sum.SendCalls)
	}
	if sum.WireBytes < uint64(sum.BytesSent) {
		t.Errorf("%s: %d bytes on the wire for %d sent", what, sum.WireBytes, sum.BytesSent)
	}
	for i, st := range sum.Streams {
		if st.CC != "fast" {
			t.Errorf("%s: stream %d ran %q, want fast (the UDP default without a rate)", what, i, st.CC)
		}
	}
}

// TestUDPBench runs the bench's modes over UDP: each direction's account
// has its datagrams.
func TestUDPBench(t *testing.T) {
	root := t.TempDir()
	_, addr := serveUDP(t, ServerConfig{Root: root})
	b := make([]byte, 3<<20)
	rand.Read(b)
	if err := os.WriteFile(filepath.Join(root, "f.bin"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := ClientConfig{Addr: addr, Streams: 2, Tuning: Tuning{Transport: TransportUDP, CC: "fixed", Rate: 400e6, DSCP: -1}}
	for _, tc := range []struct {
		name  string
		o     BenchOptions
		sends []bool
	}{
		{"memory, client sends", BenchOptions{Duration: 300 * time.Millisecond}, []bool{true}},
		{"the server's file", BenchOptions{Duration: time.Minute, Reverse: true, ServerFile: "f.bin"}, []bool{false}},
		{"both ways", BenchOptions{Duration: 300 * time.Millisecond, Bidir: true}, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Bench(context.Background(), cfg, tc.o, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Directions) != len(tc.sends) {
				t.Fatalf("%d directions", len(res.Directions))
			}
			for i, d := range res.Directions {
				checkDirection(t, tc.name, d, tc.sends[i], 2)
				if !d.HasUDP || d.Datagrams == 0 || d.DatagramsPerBatch() < 1 {
					t.Errorf("direction %d: UDP account %v, %d datagrams, %.1f per batch", i, d.HasUDP, d.Datagrams, d.DatagramsPerBatch())
				}
				for j, s := range d.PerStream {
					if s.CC != "fixed" {
						t.Errorf("direction %d stream %d ran %q, want fixed", i, j, s.CC)
					}
				}
			}
		})
	}
}

// TestUDPRefusals: a client asking for UDP from a server that does not
// listen for it, or speaks an older protocol, or with a rate control the
// UDP transport lacks, is refused in words, permanently.
func TestUDPRefusals(t *testing.T) {
	root := t.TempDir()
	tcpOnly := serveConfig(t, ServerConfig{Root: root})
	_, both := serveUDP(t, ServerConfig{Root: root})
	for _, tc := range []struct {
		name string
		cfg  ClientConfig
		want string
	}{
		{"no UDP listener", ClientConfig{Addr: tcpOnly, Streams: 1, Tuning: Tuning{Transport: TransportUDP, DSCP: -1}}, "does not listen for UDP"},
		{"older server", ClientConfig{Addr: both, Streams: 1, Tuning: Tuning{Transport: TransportUDP, DSCP: -1}, maxVersion: 6}, "speaks protocol version 6, and --transport udp needs 7"},
		{"a kernel congestion control", ClientConfig{Addr: both, Streams: 1, Tuning: Tuning{Transport: TransportUDP, CC: "cubic", DSCP: -1}}, "the UDP transport takes fixed, fast, aimd"},
		{"unknown transport", ClientConfig{Addr: both, Streams: 1, Tuning: Tuning{Transport: "sctp", DSCP: -1}}, `unknown transport "sctp"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Bench(context.Background(), tc.cfg, BenchOptions{Duration: 100 * time.Millisecond}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrRefused) {
				t.Fatalf("err = %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

// TestTCPOlderPeers: TCP sessions work with clients of versions 5 to 7
// alike; the wire account travels from version 6, the UDP one never.
func TestTCPOlderPeers(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	_, addr := serveUDP(t, ServerConfig{Root: root})
	data := make([]byte, 2<<20+3)
	rand.Read(data)
	src := filepath.Join(local, "f")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint16{5, 6, 7} {
		it, err := OpenSource(src, false)
		if err != nil {
			t.Fatal(err)
		}
		cfg := ClientConfig{Addr: addr, Streams: 2, Tuning: Tuning{DSCP: -1}, maxVersion: v}
		sum, err := Copy(context.Background(), Job{Config: cfg, Options: Options{Policy: Overwrite}, Direction: Push,
			Source: Source{Items: []SourceItem{it}}, Remote: "f"})
		it.Root.Close()
		if err != nil || !sum.Verified || sum.Transport != TransportTCP {
			t.Fatalf("version %d: %v, %+v", v, err, sum)
		}
		if sum.HasWire != (v >= 6) || sum.HasUDP {
			t.Errorf("version %d: wire account %v, UDP account %v", v, sum.HasWire, sum.HasUDP)
		}
	}
}

// TestUDPOverTLS: with TLS, every connection of a UDP session runs TLS,
// the data connections over their UDP streams.
func TestUDPOverTLS(t *testing.T) {
	ca := testcert.NewCA(t, "udp-tls")
	certPEM, keyPEM := ca.Server(t, "127.0.0.1")
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	root, local := t.TempDir(), t.TempDir()
	_, addr := serveUDP(t, ServerConfig{Root: root, TLS: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}})
	data := make([]byte, 3<<20+1)
	rand.Read(data)
	src := filepath.Join(local, "f")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	it, err := OpenSource(src, false)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Root.Close()
	cfg := ClientConfig{Addr: addr, Streams: 2, TLS: &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13},
		Tuning: Tuning{Transport: TransportUDP, DSCP: -1}}
	sum, err := Copy(context.Background(), Job{Config: cfg, Direction: Push, Source: Source{Items: []SourceItem{it}}, Remote: "f"})
	if err != nil || !sum.Verified || sum.Transport != TransportUDP || !sum.HasUDP {
		t.Fatalf("%v, %+v", err, sum)
	}
	if got, err := os.ReadFile(filepath.Join(root, "f")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file on the server: %v", err)
	}
}

// TestUDPFASTParams: a session's own FAST alpha and gamma go into the
// options of the UDP data streams the client dials (not into its TCP
// control connection's, nor a TCP session's), and a push under them
// arrives verified.
func TestUDPFASTParams(t *testing.T) {
	tu := Tuning{Transport: TransportUDP, CC: "fast", DSCP: -1, FASTAlpha: 20, FASTGamma: 256}
	cfg := ClientConfig{Tuning: tu}
	if o := cfg.options(2); o.FASTAlpha != 20 || o.FASTGamma != 256 || o.CC != "fast" {
		t.Errorf("data stream options %+v: want fast with alpha 20, gamma 256", o)
	}
	if o := cfg.ctrlOptions(2); o.FASTAlpha != 0 || o.FASTGamma != 0 || o.CC != "" {
		t.Errorf("control connection options %+v: want no rate control of UDP's", o)
	}
	tcp := ClientConfig{Tuning: Tuning{CC: "cubic", DSCP: -1, FASTAlpha: 20, FASTGamma: 256}}
	if o := tcp.options(2); o.FASTAlpha != 0 || o.FASTGamma != 0 {
		t.Errorf("a TCP session's options %+v carry UDP's FAST parameters", o)
	}

	root, local := t.TempDir(), t.TempDir()
	_, addr := serveUDP(t, ServerConfig{Root: root})
	data := make([]byte, 2<<20+3)
	rand.Read(data)
	p := filepath.Join(local, "a.bin")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	it, err := OpenSource(p, false)
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Items: []SourceItem{it}}
	defer src.Close()
	cfg = ClientConfig{Addr: addr, Streams: 2, BlockSize: 1 << 20, Tuning: tu}
	sum, err := Copy(context.Background(), Job{Config: cfg, Direction: Push, Source: src, Remote: "in/"})
	if err != nil {
		t.Fatal(err)
	}
	checkUDPSummary(t, "push", sum, 1)
	if got, err := os.ReadFile(filepath.Join(root, "in", "a.bin")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("on the server: %v (%d bytes, want %d)", err, len(got), len(data))
	}
}

// TestUDPFASTParamsServer: the client's FAST parameters cross the wire
// (protocol 8) into the options of the streams the server sends on, so a
// pull runs under them; with a server of protocol 7 a pull refuses them
// and a push sends under them all the same; out of range, the server
// refuses the session.
func TestUDPFASTParamsServer(t *testing.T) {
	ss := &session{streams: 2, udp: true, tuning: wire.Tuning{CC: "fast", DSCP: -1}, fast: fast.Params{Alpha: 20, Gamma: 256}}
	if o := ss.dataOptions(); o.FASTAlpha != 20 || o.FASTGamma != 256 || o.CC != "fast" {
		t.Errorf("the server's data stream options %+v: want fast with alpha 20, gamma 256", o)
	}
	ss.udp = false
	if o := ss.dataOptions(); o.FASTAlpha != 0 || o.FASTGamma != 0 {
		t.Errorf("a TCP session's data options %+v carry FAST parameters", o)
	}
	for _, p := range []fast.Params{{}, {Alpha: 20}, {Gamma: 256}, {Alpha: 20, Gamma: 1024}} {
		if err := checkFASTParams(p); err != nil {
			t.Errorf("%+v refused: %v", p, err)
		}
	}
	if err := checkFASTParams(fast.Params{Alpha: fast.MaxAlpha + 1}); err == nil {
		t.Error("alpha above the maximum taken")
	}

	root, local := t.TempDir(), t.TempDir()
	_, addr := serveUDP(t, ServerConfig{Root: root})
	data := make([]byte, 1<<20+7)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(root, "a.bin"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	tu := Tuning{Transport: TransportUDP, CC: "fast", DSCP: -1, FASTAlpha: 20, FASTGamma: 256}
	pull := func(cfg ClientConfig, name string) (Summary, error) {
		dst, err := OpenDest(filepath.Join(local, name), false, false)
		if err != nil {
			t.Fatal(err)
		}
		defer dst.Root.Close()
		return Copy(context.Background(), Job{Config: cfg, Direction: Pull, Paths: []string{"a.bin"}, Local: dst})
	}
	sum, err := pull(ClientConfig{Addr: addr, Streams: 2, BlockSize: 1 << 20, Tuning: tu}, "back.bin")
	if err != nil {
		t.Fatal(err)
	}
	checkUDPSummary(t, "pull", sum, 1)
	if got, err := os.ReadFile(filepath.Join(local, "back.bin")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("pulled: %v", err)
	}

	old := ClientConfig{Addr: addr, Streams: 2, BlockSize: 1 << 20, Tuning: tu, maxVersion: wire.VersionUDP}
	if _, err := pull(old, "old.bin"); err == nil || !strings.Contains(err.Error(), "protocol version 7") {
		t.Errorf("a pull under FAST parameters from a protocol 7 server: %v, want a refusal naming the version", err)
	}
	it, err := OpenSource(filepath.Join(root, "a.bin"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Root.Close()
	if sum, err := Copy(context.Background(), Job{Config: old, Direction: Push, Source: Source{Items: []SourceItem{it}}, Remote: "pushed.bin"}); err != nil || !sum.Verified {
		t.Errorf("a push under FAST parameters to a protocol 7 server: %v", err)
	}

	bad := tu
	bad.FASTAlpha = fast.MaxAlpha + 1
	if _, err := pull(ClientConfig{Addr: addr, Streams: 1, BlockSize: 1 << 20, Tuning: bad}, "bad.bin"); err == nil || !strings.Contains(err.Error(), "alpha") {
		t.Errorf("alpha out of range: %v, want the server's refusal", err)
	}
}
