//go:build linux

package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/testcert"
)

// benchFigures is one direction of a bench summary, or the whole.
type benchFigures struct {
	Direction      string   `json:"direction"`
	Bytes          int64    `json:"bytes"`
	Seconds        float64  `json:"seconds"`
	ThroughputBps  float64  `json:"throughput_bps"`
	GoodputBps     float64  `json:"goodput_bps"`
	SendingRateBps *float64 `json:"sending_rate_bps"`
	WireBytes      *int64   `json:"wire_bytes"`
	BytesResent    *int64   `json:"bytes_resent"`
	Retransmits    *uint32  `json:"retransmits"`
	PerStream      []struct {
		Bytes       int64  `json:"bytes"`
		WireBytes   *int64 `json:"wire_bytes"`
		BytesResent *int64 `json:"bytes_resent"`
	} `json:"per_stream"`
}

type benchSummary struct {
	benchFigures
	Streams    int            `json:"streams"`
	File       string         `json:"file"`
	Direct     bool           `json:"direct"`
	Directions []benchFigures `json:"directions"`
}

// parseBenchSummary checks bench --json printed NDJSON ending in a
// summary and decodes that summary.
func parseBenchSummary(t *testing.T, what string, r result) (benchSummary, []map[string]any) {
	t.Helper()
	mustSucceed(t, what, r)
	_, lines := parseNDJSON(t, r.stdout, "direction", "bytes", "seconds", "throughput_bps", "goodput_bps",
		"sending_rate_bps", "wire_bytes", "retransmits", "bytes_resent", "streams", "cc")
	var s benchSummary
	if err := json.Unmarshal([]byte(lastLine(r.stdout)), &s); err != nil {
		t.Fatalf("%s: summary: %v", what, err)
	}
	return s, lines
}

// checkFigures checks a direction's figures are there and hang together:
// payload delivered, at least as much put on the wire, the sending rate
// at least the goodput, and each stream's wire account.
func checkFigures(t *testing.T, what string, f benchFigures, direction string, streams int) {
	t.Helper()
	if f.Direction != direction || f.Bytes <= 0 || f.Seconds <= 0 || f.GoodputBps <= 0 || f.ThroughputBps != f.GoodputBps {
		t.Errorf("%s: direction %q, %d bytes in %vs, goodput %v (throughput %v); want %s and all positive",
			what, f.Direction, f.Bytes, f.Seconds, f.GoodputBps, f.ThroughputBps, direction)
	}
	if f.SendingRateBps == nil || f.WireBytes == nil || f.BytesResent == nil || f.Retransmits == nil {
		t.Fatalf("%s: sending rate, wire bytes, bytes resent or retransmits missing", what)
	}
	if *f.SendingRateBps < f.GoodputBps || *f.WireBytes < f.Bytes || *f.BytesResent > *f.WireBytes {
		t.Errorf("%s: sending %v bit/s for a goodput of %v; %d bytes on the wire, %d again, for %d delivered",
			what, *f.SendingRateBps, f.GoodputBps, *f.WireBytes, *f.BytesResent, f.Bytes)
	}
	if streams > 0 && len(f.PerStream) != streams {
		t.Errorf("%s: %d streams reported, want %d", what, len(f.PerStream), streams)
	}
	for i, s := range f.PerStream {
		if s.WireBytes == nil || s.BytesResent == nil || *s.WireBytes < s.Bytes {
			t.Errorf("%s: stream %d: %d bytes, wire account %v/%v", what, i, s.Bytes, s.WireBytes, s.BytesResent)
		}
	}
}

// TestBenchFile runs bench disk to memory through the binary: the
// client's file, sent once and whole (the duration is long enough), and
// with --reverse the server's, a path under its root; files the server
// must not or cannot send are refused in one line.
func TestBenchFile(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	const localSize, serverSize = 4<<20 + 11, 6<<20 + 5
	local := filepath.Join(dir, "local.bin")
	writeRandom(t, local, localSize, 1)
	writeRandom(t, filepath.Join(root, "runs", "srv.bin"), serverSize, 2)
	writeRandom(t, filepath.Join(dir, "outside.bin"), 1<<20, 3)
	srv := startServer(t, root)
	url := "lp://" + srv.addr

	s, _ := parseBenchSummary(t, "bench --file", runLP(t, runOpts{}, "bench", url, "-P", "2", "-t", "60s", "--file", local, "--json"))
	checkFigures(t, "bench --file", s.benchFigures, "send", 2)
	if s.Bytes != localSize || s.File != local || s.Directions != nil {
		t.Errorf("bench --file: %d bytes of %q (directions %v), want the whole file's %d", s.Bytes, s.File, s.Directions, localSize)
	}

	s, _ = parseBenchSummary(t, "bench --reverse --file", runLP(t, runOpts{}, "bench", url, "-t", "60s", "--reverse", "--file", "runs/srv.bin", "--json"))
	checkFigures(t, "bench --reverse --file", s.benchFigures, "receive", 1)
	if s.Bytes != serverSize {
		t.Errorf("bench --reverse --file: %d bytes, want the server's file's %d", s.Bytes, serverSize)
	}

	// Around the page cache: the whole file from the disk, both ends.
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{[]string{"--file", local}, localSize},
		{[]string{"--reverse", "--file", "runs/srv.bin"}, serverSize},
	} {
		args := append([]string{"bench", url, "-t", "60s", "--direct", "--json"}, tc.args...)
		what := strings.Join(args, " ")
		r := runLP(t, runOpts{}, args...)
		if r.code != 0 && strings.Contains(r.stderr, "O_DIRECT") {
			t.Logf("%s: the scratch file system cannot read around its cache: %s", what, r.stderr)
			continue
		}
		s, _ := parseBenchSummary(t, what, r)
		if s.Bytes != tc.want || !s.Direct {
			t.Errorf("%s: %d bytes (direct %v), want the file's %d read directly", what, s.Bytes, s.Direct, tc.want)
		}
	}

	r := runLP(t, runOpts{}, "bench", url, "-t", "60s", "--file", local)
	mustSucceed(t, "bench --file, for people", r)
	if !strings.Contains(r.stdout, "goodput") || !strings.Contains(r.stdout, "sending") || !strings.Contains(r.stdout, "sent again") {
		t.Errorf("bench --file prints no goodput, sending rate or bytes sent again:\n%s", r.stdout)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--reverse", "--file", "../outside.bin"}, []string{"bench", "outside the served directory"}},
		{[]string{"--reverse", "--file", "runs"}, []string{"runs is a directory"}},
		{[]string{"--reverse", "--file", "nope.bin"}, []string{"nope.bin", "no such file"}},
		{[]string{"--file", filepath.Join(dir, "nope.bin")}, []string{"--file", "no such file"}},
		{[]string{"--file", root}, []string{"--file", "is a directory"}},
	} {
		args := append([]string{"bench", url, "-t", "1s"}, tc.args...)
		checkFailure(t, "lightpath "+strings.Join(args, " "), runLP(t, runOpts{}, args...), tc.want...)
	}
}

// TestBenchBidir runs bench both ways at once through the binary: each
// direction carries data and reports its own figures, and the summary's
// are their sum.
func TestBenchBidir(t *testing.T) {
	t.Parallel()
	srv := startServer(t, mkdir(t, scratchDir(t), "root"))
	url := "lp://" + srv.addr
	s, lines := parseBenchSummary(t, "bench --bidir", runLP(t, runOpts{}, "bench", url, "-P", "2", "-t", "1500ms", "--bidir", "--json"))
	if s.Direction != "both" || len(s.Directions) != 2 || s.Streams != 2 {
		t.Fatalf("bench --bidir: direction %q over %d streams with %d directions, want both, 2 and 2", s.Direction, s.Streams, len(s.Directions))
	}
	checkFigures(t, "bench --bidir, client to server", s.Directions[0], "send", 2)
	checkFigures(t, "bench --bidir, server to client", s.Directions[1], "receive", 2)
	checkFigures(t, "bench --bidir, both", s.benchFigures, "both", 0)
	d0, d1 := s.Directions[0], s.Directions[1]
	if s.Bytes != d0.Bytes+d1.Bytes || *s.WireBytes != *d0.WireBytes+*d1.WireBytes || *s.BytesResent != *d0.BytesResent+*d1.BytesResent {
		t.Errorf("bench --bidir: total %d bytes (%d on the wire, %d again), want the directions' sums %d+%d (%d+%d, %d+%d)",
			s.Bytes, *s.WireBytes, *s.BytesResent, d0.Bytes, d1.Bytes, *d0.WireBytes, *d1.WireBytes, *d0.BytesResent, *d1.BytesResent)
	}
	for _, l := range lines {
		if l["type"] != "interval" {
			continue
		}
		sent, ok1 := l["sent_bytes"].(float64)
		recvd, ok2 := l["received_bytes"].(float64)
		if !ok1 || !ok2 || l["bytes"].(float64) != sent+recvd {
			t.Errorf("bench --bidir interval without the two directions: %v", l)
		}
	}

	r := runLP(t, runOpts{timeout: 60 * time.Second}, "bench", url, "-t", "500ms", "--bidir")
	mustSucceed(t, "bench --bidir, for people", r)
	for _, w := range []string{"both ways", "client to server:", "server to client:", "goodput", "sending"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("bench --bidir prints no %q:\n%s", w, r.stdout)
		}
	}
	checkFailure(t, "bench --bidir --reverse", runLP(t, runOpts{}, "bench", url, "--bidir", "--reverse"), "--bidir", "--reverse")
}

// Over TLS every mode runs as well: the figures are those of the streams
// under TLS, so the wire carries more than the payload (the records'
// overhead).
func TestBenchTLS(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	ca := testcert.NewCA(t, "lightpath e2e CA")
	certPEM, keyPEM := ca.Server(t)
	for name, b := range map[string][]byte{"ca.pem": ca.PEM, "cert.pem": certPEM, "key.pem": keyPEM} {
		writeFile(t, filepath.Join(dir, name), string(b), 0o600)
	}
	root := mkdir(t, dir, "root")
	writeRandom(t, filepath.Join(root, "srv.bin"), 3<<20, 4)
	srv := startServer(t, root, "--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"))
	url, caFile := "lp://"+srv.addr, filepath.Join(dir, "ca.pem")

	s, _ := parseBenchSummary(t, "bench --bidir over TLS", runLP(t, runOpts{}, "bench", url, "--tls-ca", caFile, "-P", "2", "-t", "500ms", "--bidir", "--json"))
	if len(s.Directions) != 2 {
		t.Fatalf("bench --bidir over TLS: %d directions", len(s.Directions))
	}
	checkFigures(t, "bench --bidir over TLS, client to server", s.Directions[0], "send", 2)
	checkFigures(t, "bench --bidir over TLS, server to client", s.Directions[1], "receive", 2)
	s, _ = parseBenchSummary(t, "bench --reverse --file over TLS", runLP(t, runOpts{}, "bench", url, "--tls-ca", caFile, "-t", "60s", "--reverse", "--file", "srv.bin", "--json"))
	checkFigures(t, "bench --reverse --file over TLS", s.benchFigures, "receive", 1)
	if s.Bytes != 3<<20 || *s.WireBytes <= s.Bytes {
		t.Errorf("bench --reverse --file over TLS: %d bytes (%d on the wire), want the file's %d and more on the wire", s.Bytes, *s.WireBytes, 3<<20)
	}
}
