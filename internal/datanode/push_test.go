package datanode

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/testcert"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transport"
)

// TestPushTLS pushes a copy task's file to a destination that serves TLS:
// with the CA that signed its certificate the file arrives (the server
// name taken from the destination's address); with another CA, or without
// TLS, the push fails and nothing lands.
func TestPushTLS(t *testing.T) {
	ca := testcert.NewCA(t, "data nodes")
	certPEM, keyPEM := ca.Server(t)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	data := randomBytes(2<<20+7, 9)
	write(t, src, "run/a.dat", data)
	root, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, tc := range []struct {
		name string
		tls  *tls.Config
		want string // "" to arrive, else a word of the error
	}{
		{"same CA", &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS13}, ""},
		{"other CA", &tls.Config{RootCAs: testcert.NewCA(t, "other").Pool(), MinVersion: tls.VersionTLS13}, "certificate"},
		{"plain", nil, "TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := t.TempDir()
			addr := serve(t, mover.ServerConfig{Root: dst, TLS: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}})
			n := &node{cfg: Config{Retries: -1, TLS: tc.tls}, root: root, log: slog.New(slog.DiscardHandler)}
			w := apiv1.TaskWork{Task: transfer.Task{ID: "k-1", Attempt: 1}, Address: addr,
				Files: []transfer.JobFile{{Path: "run/a.dat", Dest: "in/run/a.dat", Size: int64(len(data))}}}
			err := n.pushAll(context.Background(), w, &batcher{}, func(*mover.Meter, int64) {})
			have, rerr := os.ReadFile(filepath.Join(dst, "in/run/a.dat"))
			switch {
			case tc.want == "" && (err != nil || rerr != nil || !bytes.Equal(have, data)):
				t.Fatalf("push: %v; file: %v", err, rerr)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("push: %v, want an error about %s", err, tc.want)
			case tc.want != "" && rerr == nil:
				t.Fatal("the file landed")
			}
		})
	}
}

// TestSourceAddr: a push leaves from the address the controller names
// when this host has it, and the kernel chooses otherwise (that the
// stream then leaves from it is the transport conformance suite's
// LocalAddr test).
func TestSourceAddr(t *testing.T) {
	n := &node{cfg: Config{}, log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct{ given, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"192.0.2.1", ""}, // TEST-NET-1: not this host's
		{"", ""},
		{"not-an-address", ""},
	} {
		w := apiv1.TaskWork{Task: transfer.Task{ID: "k-1"}, Address: "127.0.0.1:7000", SourceAddr: tc.given}
		if got := n.clientConfig(w).LocalAddr; got != tc.want {
			t.Errorf("source %q: leaves from %q, want %q", tc.given, got, tc.want)
		}
	}
}

// A task's pushes run the job's congestion control, or the node's own
// (serve --cc) when the job names none; one this host's kernel lacks fails
// the task at once, permanently, saying so (for fast, how to load it).
func TestTaskCC(t *testing.T) {
	for _, tc := range []struct{ job, node, want string }{
		{"reno", "", "reno"},
		{"reno", "cubic", "reno"},
		{"", "cubic", "cubic"},
		{"", "", ""},
	} {
		n := &node{cfg: Config{CC: tc.node}, log: slog.New(slog.DiscardHandler)}
		w := apiv1.TaskWork{Task: transfer.Task{ID: "k-1"}, Address: "127.0.0.1:7000", CC: tc.job}
		if got := n.clientConfig(w).Tuning.CC; got != tc.want {
			t.Errorf("job %q, node %q: pushes run %q, want %q", tc.job, tc.node, got, tc.want)
		}
	}
	if len(transport.AvailableCC()) == 0 {
		t.Skip("this system lists no congestion controls")
	}
	src, dst := t.TempDir(), t.TempDir()
	addr := serve(t, mover.ServerConfig{Root: dst})
	write(t, src, "a.dat", randomBytes(1000, 5))
	root, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	n := &node{cfg: Config{Retries: 3}, root: root, log: slog.New(slog.DiscardHandler)}
	refused := map[string]string{"nosuchcc": `congestion control "nosuchcc" is not offered`}
	if !transport.HasCC(transport.FastCC) {
		refused[transport.FastCC] = "lightpath cc install fast"
	}
	for cc, want := range refused {
		w := apiv1.TaskWork{Task: transfer.Task{ID: "k-3", Attempt: 1}, CC: cc,
			Files: []transfer.JobFile{{Path: "a.dat", Dest: "in/a.dat"}}, Address: addr}
		err := n.pushAll(context.Background(), w, &batcher{}, func(*mover.Meter, int64) {})
		if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("a task with cc %s: %v, want a permanent error with %q", cc, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "in/a.dat")); err == nil {
		t.Error("a task refused for its congestion control pushed its file")
	}
}
