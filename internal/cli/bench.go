package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/units"
)

// benchFigures is one direction's account, or with --bidir the sum of
// both (direction "both"). The sending rate and the bytes on the wire and
// sent again are absent where the sender could not say.
type benchFigures struct {
	Direction      string   `json:"direction"` // send (client to server), receive, or both
	Bytes          int64    `json:"bytes"`     // payload delivered
	Seconds        float64  `json:"seconds"`
	ThroughputBps  float64  `json:"throughput_bps"` // the goodput, under the name cp's summary uses
	GoodputBps     float64  `json:"goodput_bps"`
	SendingRateBps *float64 `json:"sending_rate_bps,omitempty"`
	WireBytes      *uint64  `json:"wire_bytes,omitempty"`
	BytesResent    *uint64  `json:"bytes_resent,omitempty"`
	Retransmits    uint32   `json:"retransmits"`
	// Over UDP, where both sides could say: the payload the receiver got
	// only from a retransmission, and the sender's datagrams and their
	// number per system call.
	LossRepaired      *uint64       `json:"loss_repaired_bytes,omitempty"`
	Datagrams         *uint64       `json:"datagrams,omitempty"`
	DatagramsPerBatch *float64      `json:"datagrams_per_batch,omitempty"`
	CC                string        `json:"cc"` // the congestion controls the streams ran, as cp's summary
	PerStream         []benchStream `json:"per_stream,omitempty"`
}

// benchStream is a stream's account in one direction: cp's, and what it
// put on the wire and sent again.
type benchStream struct {
	streamReport
	WireBytes   *uint64 `json:"wire_bytes,omitempty"`
	BytesResent *uint64 `json:"bytes_resent,omitempty"`
}

type benchSummary struct {
	Type string `json:"type"`
	benchFigures
	Transport  string         `json:"transport"` // tcp or udp
	Streams    int            `json:"streams"`
	File       string         `json:"file,omitempty"`
	Direct     bool           `json:"direct,omitempty"`
	Directions []benchFigures `json:"directions,omitempty"`
}

type intervalEvent struct {
	Type    string  `json:"type"`
	Seconds float64 `json:"seconds"`
	Bytes   int64   `json:"bytes"`
	RateBps float64 `json:"rate_bps"`
	// With --bidir, the two directions of bytes (this side's counts).
	SentBytes     *int64 `json:"sent_bytes,omitempty"`
	ReceivedBytes *int64 `json:"received_bytes,omitempty"`
}

// directionFigures turns a direction's outcome into its summary.
func directionFigures(d mover.BenchDirection) benchFigures {
	f := benchFigures{Direction: "receive", Bytes: d.Bytes, Seconds: d.Elapsed.Seconds(),
		GoodputBps: d.GoodputBps(), Retransmits: d.Retransmits, CC: mover.StreamsCC(d.PerStream)}
	if d.Send {
		f.Direction = "send"
	}
	f.ThroughputBps = f.GoodputBps
	if d.HasWire {
		rate, wire, resent := d.SendingRateBps(), d.WireBytes, d.ResentBytes
		f.SendingRateBps, f.WireBytes, f.BytesResent = &rate, &wire, &resent
	}
	if d.HasUDP {
		repaired, dgrams, batch := d.LossRepaired, d.Datagrams, d.DatagramsPerBatch()
		f.LossRepaired, f.Datagrams, f.DatagramsPerBatch = &repaired, &dgrams, &batch
	}
	reports := streamReports(d.PerStream)
	for i, r := range reports {
		s := benchStream{streamReport: r}
		if d.HasWire {
			wire, resent := d.PerStream[i].WireBytes, d.PerStream[i].ResentBytes
			s.WireBytes, s.BytesResent = &wire, &resent
		}
		f.PerStream = append(f.PerStream, s)
	}
	return f
}

// benchTotal sums the directions of a bench both ways: the bytes add up
// and the time is the longer direction's, so the rates are what the two
// carried together over the whole test (the sum of the directions' rates
// when they ran as long, less when one ended early, a file sent whole).
func benchTotal(dirs []benchFigures) benchFigures {
	t := benchFigures{Direction: "both"}
	var ccs []string
	wire, udp := true, true
	for _, d := range dirs {
		t.Bytes += d.Bytes
		t.Seconds = max(t.Seconds, d.Seconds)
		t.Retransmits += d.Retransmits
		for _, cc := range strings.Split(d.CC, ",") {
			if cc != "" && !slices.Contains(ccs, cc) {
				ccs = append(ccs, cc)
			}
		}
		wire = wire && d.SendingRateBps != nil
		udp = udp && d.Datagrams != nil
	}
	perSecond := func(bytes float64) float64 {
		if t.Seconds <= 0 {
			return 0
		}
		return bytes * 8 / t.Seconds
	}
	t.GoodputBps = perSecond(float64(t.Bytes))
	t.ThroughputBps = t.GoodputBps
	t.CC = strings.Join(ccs, ",")
	if wire {
		var bytes, resent uint64
		for _, d := range dirs {
			bytes += *d.WireBytes
			resent += *d.BytesResent
		}
		rate := perSecond(float64(bytes))
		t.SendingRateBps, t.WireBytes, t.BytesResent = &rate, &bytes, &resent
	}
	if udp && len(dirs) > 0 {
		var repaired, dgrams uint64
		var calls float64
		for _, d := range dirs {
			repaired += *d.LossRepaired
			dgrams += *d.Datagrams
			if *d.DatagramsPerBatch > 0 {
				calls += float64(*d.Datagrams) / *d.DatagramsPerBatch
			}
		}
		batch := 0.0
		if calls > 0 {
			batch = float64(dgrams) / calls
		}
		t.LossRepaired, t.Datagrams, t.DatagramsPerBatch = &repaired, &dgrams, &batch
	}
	return t
}

// benchLine is a direction's (or the total's) summary line; over says
// over what, if anything ("over 4 streams").
func benchLine(f benchFigures, over string) string {
	secs := fmt.Sprintf("%.1f", f.Seconds)
	if f.Seconds < 1 { // a short file's run: three figures, not 0.0
		secs = strconv.FormatFloat(f.Seconds, 'g', 3, 64)
	}
	line := fmt.Sprintf("%s in %ss%s: goodput %s", units.FormatSize(f.Bytes), secs, over, units.FormatRate(f.GoodputBps))
	if f.SendingRateBps != nil {
		line += fmt.Sprintf(", sending %s", units.FormatRate(*f.SendingRateBps))
	}
	line += fmt.Sprintf("; %d retransmits", f.Retransmits)
	if f.BytesResent != nil {
		line += fmt.Sprintf(", %s sent again", units.FormatSize(int64(*f.BytesResent)))
	}
	if f.LossRepaired != nil {
		line += fmt.Sprintf("; loss repaired %s, %.1f datagrams per batch", units.FormatSize(int64(*f.LossRepaired)), *f.DatagramsPerBatch)
	}
	return line
}

// checkBenchFlags refuses combinations of bench's flags that mean nothing.
func checkBenchFlags(reverse, bidir, direct bool, file string) error {
	switch {
	case reverse && bidir:
		return errors.New("bench: --bidir sends both ways already: drop --reverse")
	case direct && file == "":
		return errors.New("bench: --direct reads a --file around the page cache: give --file")
	}
	return nil
}

func newBenchCmd() *cobra.Command {
	var (
		t       tuningFlags
		dur     time.Duration
		reverse bool
		bidir   bool
		file    string
		direct  bool
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "bench lp://HOST:PORT",
		Short: "Measure throughput to a Lightpath server, memory or disk to memory, like iperf3",
		Long: `Send (or with --reverse receive, or with --bidir both at once) data for a
while over -P parallel streams to a server started with lightpath serve,
and report for each direction the goodput (payload delivered per second),
the sending rate (what the sender put on the wire per second,
retransmissions included), the retransmits and the bytes sent again, with
each stream's RTT, congestion window and retransmits (from TCP_INFO on the
sending side) and the congestion control each ran. --cc NAME is any
congestion control the kernel offers (bbr, cubic, reno, or fast, FAST TCP,
once lightpath cc install fast has loaded it, as root).

Memory to memory by default: nothing touches a disk. --file F is disk to
memory: the sender reads F instead, once, front to back, all streams
sharing it, and the test ends when F is all sent or when -t does, whichever
comes first (raise -t for a large file); the receiver discards it. F is
read through the page cache, as any reader would: for a true disk read,
start from a cold cache (as root: sync; echo 3 > /proc/sys/vm/drop_caches),
or give --direct to read F around the cache (O_DIRECT, in 1 MiB reads,
where its file system offers it).
With --reverse, F is a file of the server's, a path under its served
directory (as in lp://HOST:PORT/PATH). With --bidir every stream carries
data both ways at once; F, if given, is what the client sends, and the
server sends memory.

--transport udp runs every mode over the reliable UDP transport (control
on TCP), --cc naming its rate control: fixed (needs --rate), fast (the
default) or aimd; each direction then also reports the loss repaired and
the datagrams sent per system call.`,
		Example: `  lightpath bench lp://dtn2:7070
  lightpath bench lp://dtn2:7070 -P 4 -t 30s --cc cubic
  lightpath bench lp://dtn2:7070 -P 4 --cc fast
  lightpath bench lp://dtn2:7070 --file /data/big.bin -t 60s
  lightpath bench lp://dtn2:7070 --file /data/big.bin --direct -P 4
  lightpath bench lp://dtn2:7070 --reverse --file runs/big.bin
  lightpath bench lp://dtn2:7070 --bidir -P 2
  lightpath bench lp://dtn2:7070 --transport udp --cc fixed --rate 9G
  lightpath bench lp://[::1]:7070 --reverse --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("bench: want one server, lp://HOST:PORT (see 'lightpath bench --help')")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			r, ok, err := parseRemote(args[0])
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			if !ok {
				return fmt.Errorf("bench: %q is not a server address: want lp://HOST:PORT", args[0])
			}
			if t.streams < 0 {
				return errors.New("bench: -P must be at least 1")
			}
			if dur <= 0 || dur > 24*time.Hour {
				return errors.New("bench: -t must be within (0, 24h]")
			}
			if err := checkBenchFlags(reverse, bidir, direct, file); err != nil {
				return err
			}
			opts := mover.BenchOptions{Duration: dur, Reverse: reverse, Bidir: bidir, Direct: direct}
			if file != "" && reverse {
				opts.ServerFile = file
			} else if file != "" {
				f, err := mover.OpenBenchFile(file, direct)
				if err != nil {
					return fmt.Errorf("bench: --file: %w", err)
				}
				defer f.Close()
				opts.LocalFile = f
			}
			tuning, err := t.tuning()
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			token, err := readToken(t.tokenFile)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			tlsCfg, err := clientTLS(t.tlsCA, r.Addr)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			out := &ndjson{w: cmd.OutOrStdout()}
			start := time.Now()
			var prev int64
			prevT := start
			tick := func(m mover.BenchTick) {
				now := time.Now()
				n := m.Sent + m.Received
				rate := float64(n-prev) * 8 / now.Sub(prevT).Seconds()
				switch {
				case jsonOut && bidir:
					out.write(intervalEvent{Type: "interval", Seconds: now.Sub(start).Seconds(), Bytes: n, RateBps: rate,
						SentBytes: &m.Sent, ReceivedBytes: &m.Received})
				case jsonOut:
					out.write(intervalEvent{Type: "interval", Seconds: now.Sub(start).Seconds(), Bytes: n, RateBps: rate})
				case bidir:
					fmt.Fprintf(cmd.OutOrStdout(), "%6.1fs  %10s  %s  (sent %s, received %s)\n", now.Sub(start).Seconds(),
						units.FormatSize(n), units.FormatRate(rate), units.FormatSize(m.Sent), units.FormatSize(m.Received))
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "%6.1fs  %10s  %s\n", now.Sub(start).Seconds(), units.FormatSize(n), units.FormatRate(rate))
				}
				prev, prevT = n, now
			}
			streams := t.streams
			if streams == 0 && tuning.Transport != mover.TransportUDP {
				streams = 1 // over TCP one stream unless -P says more; over UDP as cp chooses
			}
			cfg := mover.ClientConfig{Addr: r.Addr, Token: token, TLS: tlsCfg, Tuning: tuning, Streams: streams}
			res, err := mover.Bench(cmd.Context(), cfg, opts, tick)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			s := benchSummary{Type: "summary", Streams: res.Streams, File: file, Direct: direct, Transport: mover.TransportTCP}
			if tuning.Transport == mover.TransportUDP {
				s.Transport = mover.TransportUDP
			}
			for _, d := range res.Directions {
				s.Directions = append(s.Directions, directionFigures(d))
			}
			if bidir {
				s.benchFigures = benchTotal(s.Directions)
			} else {
				s.benchFigures, s.Directions = s.Directions[0], nil
			}
			if jsonOut {
				out.write(s)
				return nil
			}
			w := cmd.OutOrStdout()
			over := " over " + streamsWord(s.Streams)
			if s.Transport == mover.TransportUDP {
				over += " (udp)"
			}
			if !bidir {
				fmt.Fprintln(w, benchLine(s.benchFigures, over))
				printBenchStreams(w, s.benchFigures, "  ", s.Transport)
				return nil
			}
			fmt.Fprintln(w, "both ways, "+benchLine(s.benchFigures, over+" carrying both"))
			for _, d := range s.Directions {
				fmt.Fprintf(w, "  %s: %s\n", benchDirectionName(d.Direction), benchLine(d, ""))
				printBenchStreams(w, d, "    ", s.Transport)
			}
			return nil
		},
	}
	f := cmd.Flags()
	t.register(f, 0, "parallel streams (default: 1 over TCP; over UDP as cp chooses them, from the round trip and the rate)")
	dur = 10 * time.Second
	f.VarP(durationFlag{&dur}, "time", "t", "how long to send: 10s, 1m, or plain seconds")
	f.BoolVarP(&reverse, "reverse", "R", false, "the server sends, the client receives")
	f.BoolVar(&bidir, "bidir", false, "both send at once, every stream carrying data both ways")
	f.StringVar(&file, "file", "", "send this file (read once from disk through the page cache) instead of memory; with --reverse a path under the server's served directory")
	f.BoolVar(&direct, "direct", false, "read the --file around the page cache (O_DIRECT), straight from the disk")
	f.BoolVar(&jsonOut, "json", false, "print NDJSON: an interval event every second, then the summary")
	return cmd
}

// streamsWord is "1 stream" or "N streams".
func streamsWord(n int) string {
	if n == 1 {
		return "1 stream"
	}
	return strconv.Itoa(n) + " streams"
}

// benchDirectionName says which way a direction ran, for people.
func benchDirectionName(dir string) string {
	if dir == "send" {
		return "client to server"
	}
	return "server to client"
}

func printBenchStreams(w io.Writer, f benchFigures, indent, transport string) {
	var reports []streamReport
	for _, p := range f.PerStream {
		reports = append(reports, p.streamReport)
	}
	if cc := ccLine(reports); cc != "" {
		what := "congestion control"
		if transport == mover.TransportUDP {
			what = "udp rate control"
		}
		fmt.Fprintf(w, "%s%s: %s\n", indent, what, cc)
	}
	for i, p := range f.PerStream {
		line := fmt.Sprintf("%sstream %d: %s, %s, rtt %.3f ms (var %.3f), cwnd %d, retransmits %d",
			indent, i, orWord(textsafe.Sanitize(p.CC), "cc unknown"), units.FormatSize(p.Bytes), p.RTTMs, p.RTTVarMs, p.Cwnd, p.Retransmits)
		if p.BytesResent != nil {
			line += fmt.Sprintf(", %s sent again", units.FormatSize(int64(*p.BytesResent)))
		}
		fmt.Fprintln(w, line)
	}
}
