package cli

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/mover"
)

// bench refuses what cannot run before it connects (the server here is
// a closed port): a --file that is missing, a directory or empty, and
// --bidir with --reverse. A --file with --reverse is the server's, so it
// is not looked for here: the run gets as far as connecting.
func TestBenchFlags(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.bin")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nope.bin")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"--file", missing}, "bench: --file: open " + missing + ": no such file or directory"},
		{"a directory", []string{"--file", dir}, "bench: --file: " + dir + " is a directory: a bench sends one regular file"},
		{"an empty file", []string{"--file", empty}, "is empty: nothing to send"},
		{"a FIFO", []string{"--file", fifo}, "bench: --file: " + fifo + " is not a regular file"},
		{"both ways reversed", []string{"--bidir", "--reverse"}, "bench: --bidir sends both ways already: drop --reverse"},
		{"both ways reversed, short flag", []string{"--bidir", "-R"}, "drop --reverse"},
		{"direct without a file", []string{"--direct"}, "bench: --direct reads a --file around the page cache: give --file"},
		{"the server's file", []string{"--reverse", "--file", missing}, "connect to 127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(io.Discard, io.Discard)
			root.SetArgs(append([]string{"bench", "-t", "1s", "lp://127.0.0.1:1"}, tc.args...))
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("bench %s: %v, want one line with %q", strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
}

// A direction's figures carry the sending rate and the bytes on the wire
// and sent again only where the sender could say; a bench both ways sums
// its directions' bytes and takes the longer time for its rates.
func TestBenchFigures(t *testing.T) {
	up := mover.BenchDirection{Send: true, Bytes: 1000, Elapsed: 2 * time.Second, HasWire: true,
		WireBytes: 1250, ResentBytes: 250, Retransmits: 3,
		PerStream: []mover.StreamSummary{{CC: "cubic", Bytes: 1000, Retransmits: 3, WireBytes: 1250, ResentBytes: 250}}}
	down := mover.BenchDirection{Bytes: 500, Elapsed: time.Second, HasWire: true, WireBytes: 500,
		PerStream: []mover.StreamSummary{{CC: "bbr", Bytes: 500, WireBytes: 500}}}
	old := mover.BenchDirection{Bytes: 500, Elapsed: time.Second, PerStream: []mover.StreamSummary{{Bytes: 500}}}

	f := directionFigures(up)
	if f.Direction != "send" || f.GoodputBps != 4000 || f.ThroughputBps != 4000 || *f.SendingRateBps != 5000 ||
		*f.WireBytes != 1250 || *f.BytesResent != 250 || f.Retransmits != 3 || f.CC != "cubic" ||
		len(f.PerStream) != 1 || *f.PerStream[0].BytesResent != 250 {
		t.Errorf("send direction: %+v", f)
	}
	b, _ := json.Marshal(directionFigures(old))
	for _, k := range []string{"sending_rate_bps", "wire_bytes", "bytes_resent"} {
		if strings.Contains(string(b), k) {
			t.Errorf("a sender that could not say still reports %s: %s", k, b)
		}
	}
	if !strings.Contains(string(b), `"direction":"receive"`) || !strings.Contains(string(b), `"goodput_bps":4000`) {
		t.Errorf("receive direction: %s", b)
	}

	for _, tc := range []struct {
		name     string
		dirs     []mover.BenchDirection
		wantRate float64 // sending rate; 0: absent
		wantCC   string
	}{
		// 1500 bytes in 2 s, 1750 on the wire: what the two carried over
		// the whole test, not the sum of their rates (4000 + 4000).
		{"both said", []mover.BenchDirection{up, down}, 7000, "cubic,bbr"},
		{"one could not say", []mover.BenchDirection{up, old}, 0, "cubic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dirs []benchFigures
			for _, d := range tc.dirs {
				dirs = append(dirs, directionFigures(d))
			}
			tot := benchTotal(dirs)
			if tot.Direction != "both" || tot.Bytes != 1500 || tot.Seconds != 2 || tot.GoodputBps != 6000 ||
				tot.Retransmits != 3 || tot.CC != tc.wantCC {
				t.Errorf("total: %+v", tot)
			}
			switch {
			case tc.wantRate == 0 && tot.SendingRateBps != nil:
				t.Errorf("total sending rate %v, want none", *tot.SendingRateBps)
			case tc.wantRate != 0 && (tot.SendingRateBps == nil || *tot.SendingRateBps != tc.wantRate || *tot.BytesResent != 250):
				t.Errorf("total: sending rate %v, resent %v; want %v, 250", tot.SendingRateBps, tot.BytesResent, tc.wantRate)
			}
		})
	}
}
