package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/units"
)

type benchSummary struct {
	Type          string         `json:"type"`
	Direction     string         `json:"direction"`
	Bytes         int64          `json:"bytes"`
	Seconds       float64        `json:"seconds"`
	ThroughputBps float64        `json:"throughput_bps"`
	Streams       int            `json:"streams"`
	Retransmits   uint32         `json:"retransmits"`
	PerStream     []streamReport `json:"per_stream"`
	CC            string         `json:"cc"` // the congestion controls the streams ran, as cp's summary
}

type intervalEvent struct {
	Type    string  `json:"type"`
	Seconds float64 `json:"seconds"`
	Bytes   int64   `json:"bytes"`
	RateBps float64 `json:"rate_bps"`
}

func newBenchCmd() *cobra.Command {
	var (
		t       tuningFlags
		dur     time.Duration
		reverse bool
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "bench lp://HOST:PORT",
		Short: "Measure memory-to-memory throughput to a Lightpath server, like iperf3",
		Long: `Send (or with --reverse receive) data memory to memory for a while over
-P parallel streams to a server started with lightpath serve, and report the
throughput with each stream's RTT, congestion window and retransmits (from
TCP_INFO on the sending side) and the congestion control each ran. Nothing
touches a disk. --cc NAME is any congestion control the kernel offers (bbr,
cubic, reno, or fast, FAST TCP, once lightpath cc install fast has loaded
it, as root).`,
		Example: `  lightpath bench lp://dtn2:7070
  lightpath bench lp://dtn2:7070 -P 4 -t 30s --cc cubic
  lightpath bench lp://dtn2:7070 -P 4 --cc fast
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
			if t.streams < 1 {
				return errors.New("bench: -P must be at least 1")
			}
			if dur <= 0 || dur > 24*time.Hour {
				return errors.New("bench: -t must be within (0, 24h]")
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
			tick := func(n int64) {
				now := time.Now()
				rate := float64(n-prev) * 8 / now.Sub(prevT).Seconds()
				if jsonOut {
					out.write(intervalEvent{Type: "interval", Seconds: now.Sub(start).Seconds(), Bytes: n, RateBps: rate})
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "%6.1fs  %10s  %s\n", now.Sub(start).Seconds(), units.FormatSize(n), units.FormatRate(rate))
				}
				prev, prevT = n, now
			}
			cfg := mover.ClientConfig{Addr: r.Addr, Token: token, TLS: tlsCfg, Tuning: tuning, Streams: t.streams}
			res, err := mover.Bench(cmd.Context(), cfg, dur, reverse, tick)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			s := benchSummary{Type: "summary", Direction: "send", Streams: res.Streams,
				Bytes: res.Bytes, Seconds: res.Elapsed.Seconds()}
			if reverse {
				s.Direction = "receive"
			}
			if s.Seconds > 0 {
				s.ThroughputBps = float64(s.Bytes) * 8 / s.Seconds
			}
			s.PerStream, s.Retransmits = streamReports(res.PerStream), res.Retransmits
			s.CC = mover.StreamsCC(res.PerStream)
			if jsonOut {
				out.write(s)
				return nil
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s in %.1fs: %s over %d streams, %d retransmits\n",
				units.FormatSize(s.Bytes), s.Seconds, units.FormatRate(s.ThroughputBps), s.Streams, s.Retransmits)
			if cc := ccLine(s.PerStream); cc != "" {
				fmt.Fprintf(w, "  congestion control: %s\n", cc)
			}
			for i, p := range s.PerStream {
				fmt.Fprintf(w, "  stream %d: %s, %s, rtt %.3f ms (var %.3f), cwnd %d, retransmits %d\n",
					i, orWord(textsafe.Sanitize(p.CC), "cc unknown"), units.FormatSize(p.Bytes), p.RTTMs, p.RTTVarMs, p.Cwnd, p.Retransmits)
			}
			return nil
		},
	}
	f := cmd.Flags()
	t.register(f, 1, "parallel streams")
	dur = 10 * time.Second
	f.VarP(durationFlag{&dur}, "time", "t", "how long to send: 10s, 1m, or plain seconds")
	f.BoolVarP(&reverse, "reverse", "R", false, "the server sends, the client receives")
	f.BoolVar(&jsonOut, "json", false, "print NDJSON: an interval event every second, then the summary")
	return cmd
}
