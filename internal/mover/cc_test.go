//go:build linux

package mover

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/transport"
)

func TestStreamsCC(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{"none", nil, ""},
		{"unknown", []string{"", ""}, ""},
		{"one", []string{"fast", "fast", "fast", "fast"}, "fast"},
		{"a mix, in the streams' order", []string{"fast", "cubic", "fast", "reno"}, "fast,cubic,reno"},
		{"some unknown", []string{"", "bbr"}, "bbr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var streams []StreamSummary
			for _, cc := range tc.in {
				streams = append(streams, StreamSummary{CC: cc})
			}
			if got := (Summary{Streams: streams}).CC(); got != tc.want {
				t.Errorf("CC() = %q, want %q", got, tc.want)
			}
		})
	}
}

// The summary names the congestion control each stream really ran, read
// from the sending sockets: the client's own in a push, the server's (over
// the wire, protocol version 5) in a pull and a reverse bench. The
// client's --cc wins; the server's ServerConfig.CC is the default of a
// session whose client names none.
func TestCopyNamesCC(t *testing.T) {
	if !transport.HasCC("reno") {
		t.Skip("the kernel offers no reno")
	}
	if _, err := NewServer(ServerConfig{Root: t.TempDir(), CC: "nosuchcc"}); err == nil || !strings.Contains(err.Error(), "nosuchcc") {
		t.Errorf("a server with congestion control nosuchcc: %v, want an error naming it", err)
	}
	serverRoot, local := t.TempDir(), t.TempDir()
	addr := serveConfig(t, ServerConfig{Root: serverRoot, CC: "reno"})
	data := make([]byte, 3<<20)
	rand.Read(data)
	src := filepath.Join(local, "f.bin")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	other := "reno"
	for _, cc := range transport.AvailableCC() {
		if cc != "reno" && cc != transport.FastCC {
			other = cc
			break
		}
	}
	cfg := func(cc string) ClientConfig {
		return ClientConfig{Addr: addr, Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{CC: cc, DSCP: -1}}
	}
	check := func(what string, sum Summary, want string) {
		t.Helper()
		if got := sum.CC(); got != want || len(sum.Streams) != 2 {
			t.Errorf("%s: summary cc %q over %d streams, want %q over 2", what, got, len(sum.Streams), want)
		}
		for i, st := range sum.Streams {
			if st.CC != want {
				t.Errorf("%s: stream %d ran %q, want %q", what, i, st.CC, want)
			}
		}
	}

	it, err := OpenSource(src, false)
	if err != nil {
		t.Fatal(err)
	}
	push := Source{Items: []SourceItem{it}}
	defer push.Close()
	sum, err := Copy(context.Background(), Job{Config: cfg(other), Direction: Push, Source: push, Remote: "f.bin"})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	check("push with "+other, sum, other)

	pull := func(cc string) Summary {
		t.Helper()
		dst, err := OpenDest(filepath.Join(t.TempDir(), "back.bin"), false, false)
		if err != nil {
			t.Fatal(err)
		}
		defer dst.Root.Close()
		sum, err := Copy(context.Background(), Job{Config: cfg(cc), Direction: Pull, Paths: []string{"f.bin"}, Local: dst})
		if err != nil {
			t.Fatalf("pull with %q: %v", cc, err)
		}
		return sum
	}
	check("pull, the server's default", pull(""), "reno")
	check("pull with "+other, pull(other), other)

	res, err := Bench(context.Background(), cfg(""), BenchOptions{Duration: 300 * time.Millisecond, Reverse: true}, nil)
	if err != nil {
		t.Fatalf("reverse bench: %v", err)
	}
	if got := StreamsCC(res.Directions[0].PerStream); got != "reno" {
		t.Errorf("reverse bench: streams ran %q, want the server's reno", got)
	}
}
