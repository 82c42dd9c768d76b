package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/transport"
)

// --cc takes any congestion control the kernel offers now and refuses the
// rest before anything connects, in one line naming what the kernel
// offers; fast, not loaded, names the command that loads it. The same
// check runs for cp, bench and serve.
func TestCCFlag(t *testing.T) {
	avail := transport.AvailableCC()
	if len(avail) == 0 {
		t.Skip("this system lists no congestion controls (/proc/sys/net/ipv4/tcp_available_congestion_control)")
	}
	for _, cc := range append([]string{""}, avail...) {
		tf := tuningFlags{cc: cc, dscp: -1, streams: 1}
		if tu, err := tf.tuning(); err != nil || tu.CC != cc {
			t.Errorf("--cc %q: %+v, %v; want it taken", cc, tu, err)
		}
	}
	refused := map[string]string{"nosuchcc": "not offered: this kernel offers " + avail[0]}
	if !slices.Contains(avail, transport.FastCC) {
		refused[transport.FastCC] = "not loaded: load it with lightpath cc install fast, as root"
	}
	for cc, want := range refused {
		tf := tuningFlags{cc: cc, dscp: -1, streams: 1}
		if _, err := tf.tuning(); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--cc %s: %v, want one line with %q", cc, err, want)
		}
		for _, args := range [][]string{
			{"cp", "--cc", cc, "/nonexistent-source", "lp://127.0.0.1:1/x"},
			{"bench", "--cc", cc, "lp://127.0.0.1:1"},
			{"serve", "--cc", cc, "--listen", "127.0.0.1:0", "--root", t.TempDir()},
		} {
			root := newRoot(io.Discard, io.Discard)
			root.SetArgs(args)
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), "--cc: ") || !strings.Contains(err.Error(), want) {
				t.Errorf("lightpath %s: %v, want the --cc refusal %q", strings.Join(args, " "), err, want)
			}
		}
	}
	// The help of each says fast and how to load it.
	for _, verb := range []string{"cp", "bench", "serve"} {
		var out bytes.Buffer
		root := newRoot(&out, io.Discard)
		root.SetArgs([]string{verb, "--help"})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "lightpath cc install fast") {
			t.Errorf("lightpath %s --help does not say how to load fast:\n%s", verb, out.String())
		}
	}
}

// The summary names the congestion controls the streams ran: cc in the
// JSON ("fast", or "fast,cubic" in the streams' order), per stream, and a
// line with how many streams ran each.
func TestSummaryCC(t *testing.T) {
	for _, tc := range []struct {
		name     string
		streams  []string
		wantJSON string
		wantLine string
	}{
		{"one", []string{"fast", "fast", "fast", "fast"}, "fast", "  congestion control: fast (4 streams)\n"},
		{"a mix", []string{"fast", "cubic", "fast"}, "fast,cubic", "  congestion control: fast (2 streams), cubic (1 stream)\n"},
		{"unknown (an older server)", []string{"", ""}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r mover.Summary
			r.Direction, r.Elapsed, r.Verified = mover.Push, time.Second, true
			for _, cc := range tc.streams {
				r.Streams = append(r.Streams, mover.StreamSummary{CC: cc, Bytes: 1})
			}
			s := cpFlags{}.summary(r)
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				CC        string `json:"cc"`
				PerStream []struct {
					CC string `json:"cc"`
				} `json:"per_stream"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.CC != tc.wantJSON || !bytes.Contains(b, []byte(`"cc":`)) {
				t.Errorf("JSON cc = %q, want %q: %s", got.CC, tc.wantJSON, b)
			}
			for i, st := range got.PerStream {
				if st.CC != tc.streams[i] {
					t.Errorf("per_stream[%d].cc = %q, want %q", i, st.CC, tc.streams[i])
				}
			}
			var out bytes.Buffer
			printSummary(&out, s)
			line := ""
			for l := range strings.Lines(out.String()) {
				if strings.Contains(l, "congestion control") {
					line = l
				}
			}
			if line != tc.wantLine {
				t.Errorf("summary line %q, want %q, in:\n%s", line, tc.wantLine, out.String())
			}
		})
	}
}
