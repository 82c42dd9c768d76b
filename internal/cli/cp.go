package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/progress"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/units"
	"github.com/lightpath/lightpath/internal/wire"
)

type cpFlags struct {
	tuningFlags
	recursive, overwrite, skipExisting, update, jsonOut, adler, quiet bool
	retries                                                           int
	blockSize                                                         string
	stall                                                             time.Duration
	reserve                                                           reserveFlags
	rules                                                             []wire.Rule // --include and --exclude in the order given
	symlinks                                                          string
	dryRun                                                            bool
}

// ruleFlag is --include or --exclude: each use appends a rule to one list,
// so that the order across both flags is the order given.
type ruleFlag struct {
	rules   *[]wire.Rule
	include bool
}

func (f ruleFlag) String() string { return "" }
func (f ruleFlag) Type() string   { return "PATTERN" }
func (f ruleFlag) Set(v string) error {
	if err := mover.CheckRule(v); err != nil {
		return err
	}
	if len(*f.rules) >= wire.MaxRules {
		return fmt.Errorf("at most %d --include and --exclude patterns", wire.MaxRules)
	}
	*f.rules = append(*f.rules, wire.Rule{Include: f.include, Pattern: v})
	return nil
}

func newCpCmd() *cobra.Command {
	var o cpFlags
	cmd := &cobra.Command{
		Use:   "cp [flags] SRC... DST",
		Short: "Copy files and trees to or from a Lightpath server, verified and resumable",
		Long: `Copy files to (push) or from (pull) a server started with lightpath serve.
A remote is lp://HOST:PORT/PATH, PATH relative to the server's root; IPv6
hosts go in brackets (lp://[::1]:7070/data). Either every SRC is remote
(pull) or DST is (push).

As with cp, SRC lands inside DST when DST is an existing directory, ends
with /, or there are several sources; otherwise SRC takes DST's name.

One control connection and -P data connections go to the server's one port.
Large files are cut into blocks spread over the streams; small files are
pipelined. Each block carries a CRC32C checked on arrival (a damaged block
is sent again), and each file's CRC32C, joined from its blocks, is compared
end to end; a file appears under its final name only when complete,
verified and synced. Run the same command again after an interruption and
only what is missing is sent (a source that changed starts afresh);
--retries does that by itself after a dropped connection.

An existing destination file is refused unless --overwrite, --skip-existing
or --update (skip when size, time and checksum match) says otherwise; one
whose every block matches the source's (an earlier run of the same command
delivered it) counts as already there. Ctrl-C exits with status 130; the
same command again finishes the copy.

--exclude and --include PATTERN (repeatable, one list in the order given;
the first match decides; none matching keeps the entry) match each entry's
path in the copy (tree/a/b.txt) or its name with path.Match; a pattern
ending in / matches directories only; an excluded directory is not entered.
--symlinks copy (default: links as links; one absolute or leading out of
the tree is skipped with a warning), skip, or follow (copy the target).
--dry-run lists what would be sent, compared or skipped and changes nothing.

Output: a progress bar on a terminal; with --json, one JSON object per line:
progress every second, one per file, and a final summary.

Reserved bandwidth (--reserve RATE|auto, with --controller URL and
--controller-token-file F): before the copy, cp books a reservation with the
controller for its own connections: the flow "tcp CLIENT > SERVER:PORT" for
a push, "tcp SERVER:PORT > CLIENT" for a pull (a reservation guarantees the
direction the data flows: a pull books from the server's node to this
one's). The nodes are those of the controller's topology that own this
host's address toward the server and the server's address. RATE is the
bandwidth to guarantee (300M, 2G); auto asks the controller for the widest
bandwidth free from now over the copy's expected duration (POST /find, mode
widest; capped at --rate when given). The window starts now and lasts the
size at the reserved rate, half as long again, plus 30 s (at least a
minute); a pull, which does not know its size before it starts, books 1h;
--reserve-duration sets it. --reserve-path names the links to take.

The copy does not wait: it starts at once on the routed path, and the
controller's node agents steer its packets onto the reserved path when the
reservation is ACTIVE, without the connections noticing; if the reservation
ends, fails or degrades mid-copy, the packets go back to the routed path and
the copy finishes there. When the copy ends (done, failed or interrupted),
cp cancels the reservation to release it. The summary says which path
carried how many bytes (bytes_by_path: routed and reserved, split at the
moments cp learned the reservation became ACTIVE and stopped being so).
When no reservation can be booked (no controller, an address no node owns,
a refusal: its message and alternatives are printed), cp warns and copies
on the routed path; with --reserve-required it fails instead, copying
nothing.

Recorded transfers (--controller URL, implied by --reserve): cp registers
the copy with the controller and reports its progress every second (bytes,
bytes per path, and each stream's RTT, congestion window, retransmits,
pacing and delivery rate), then its outcome. The controller's dashboard
shows it live, and its page (lightpath transfer show ID, or the web UI)
lists the alerts that fired on its path while it ran. A controller that
cannot be reached never stops the copy.`,
		Example: `  lightpath cp big.h5 lp://dtn2:7070/incoming/
  lightpath cp -r -P 8 --rate 5G ./run42 lp://dtn2:7070/runs/run42
  lightpath cp -r lp://dtn2:7070/runs/run42 /scratch/
  lightpath cp --json --retries 5 lp://[2001:db8::2]:7070/d.tar .
  lightpath cp -r --exclude '*.tmp' --dry-run ./run42 lp://dtn2:7070/runs/
  lightpath cp --reserve 2G --controller unix:/run/lightpath/two-site/controller.sock \
      --controller-token-file alice.token big.h5 lp://198.18.2.1:7070/
  lightpath cp --reserve auto --reserve-required big.h5 lp://dtn2:7070/`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return fmt.Errorf("cp: want at least one SRC and a DST, got %d argument(s) (see 'lightpath cp --help')", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCp(cmd.Context(), o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.register(f, 0, "parallel data streams (default: chosen from the measured round-trip time and the rate)")
	f.BoolVarP(&o.recursive, "recursive", "r", false, "copy directories and everything beneath them")
	f.BoolVar(&o.overwrite, "overwrite", false, "replace existing destination files")
	f.BoolVar(&o.skipExisting, "skip-existing", false, "leave existing destination files alone")
	f.BoolVar(&o.update, "update", false, "skip destination files whose size, time and checksum match; replace the others")
	f.IntVar(&o.retries, "retries", 0, "reconnect and resume this many times after a dropped connection, with backoff")
	f.BoolVar(&o.jsonOut, "json", false, "print NDJSON: progress events, one line per file, then the summary")
	f.BoolVar(&o.adler, "adler32", false, "also compute each file's adler32 (what FTS and Rucio compare) end to end")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress bar")
	f.StringVar(&o.blockSize, "block-size", "4MiB", "unit in which files are cut, checked and resumed")
	f.DurationVar(&o.stall, "stall-timeout", 60*time.Second, "give up on a connection that makes no progress for this long")
	f.Var(ruleFlag{&o.rules, false}, "exclude", "leave out entries matching PATTERN (repeatable; the first matching --include/--exclude decides)")
	f.Var(ruleFlag{&o.rules, true}, "include", "take entries matching PATTERN even if a later --exclude matches (repeatable)")
	f.StringVar(&o.symlinks, "symlinks", "copy", "symbolic links in a tree: copy (as links; one leading outside the tree is skipped with a warning), skip, or follow (copy the target's content)")
	f.BoolVar(&o.dryRun, "dry-run", false, "list what would be sent or skipped; send nothing, write nothing at the destination")
	o.reserve.register(f)
	return cmd
}

// cpSummary is the final line of cp --json; the field names are a contract.
type cpSummary struct {
	Type           string         `json:"type"`
	Direction      string         `json:"direction"`
	Bytes          int64          `json:"bytes"`
	Files          int            `json:"files"`
	FilesFailed    int            `json:"files_failed"`
	FilesSkipped   int            `json:"files_skipped"`
	Seconds        float64        `json:"seconds"`
	ThroughputBps  float64        `json:"throughput_bps"`
	Streams        int            `json:"streams"`
	Verified       bool           `json:"verified"`
	Checksum       string         `json:"checksum"`
	BytesSent      int64          `json:"bytes_sent"`
	BytesSkipped   int64          `json:"bytes_skipped"`
	BytesSparse    int64          `json:"bytes_sparse"`
	Attempts       int            `json:"attempts"`
	Retransmits    uint32         `json:"retransmits"`
	PerStream      []streamReport `json:"per_stream"`
	Bottleneck     string         `json:"bottleneck"`
	BottleneckWhy  string         `json:"bottleneck_reason"`
	SenderIOWait   float64        `json:"sender_io_wait_seconds"`
	ReceiverIOWait float64        `json:"receiver_io_wait_seconds"`
	Errors         []string       `json:"errors,omitempty"`
	// DryRun: nothing was sent; Files and Bytes are what would be sent or
	// compared, FilesSkipped what would be left alone.
	DryRun bool `json:"dry_run,omitempty"`
	// With --reserve: the reservation, its rate, path and state after cp
	// released it, how long it steered the copy, and the bytes each path
	// carried (see cp_reserve.go); ReservationError says why there is no
	// reservation, or why it could not be released.
	Reservation      string           `json:"reservation,omitempty"`
	ReservedBps      uint64           `json:"reserved_bps,omitempty"`
	ReservationPath  string           `json:"reservation_path,omitempty"`
	ReservationState string           `json:"reservation_state,omitempty"`
	ReservedSeconds  float64          `json:"reserved_seconds,omitempty"`
	ReservationError string           `json:"reservation_error,omitempty"`
	BytesByPath      map[string]int64 `json:"bytes_by_path,omitempty"`
}

type streamReport struct {
	Bytes          int64   `json:"bytes"`
	RTTMs          float64 `json:"rtt_ms"`
	RTTVarMs       float64 `json:"rttvar_ms"`
	Cwnd           uint32  `json:"cwnd"`
	Retransmits    uint32  `json:"retransmits"`
	DeliveryBps    float64 `json:"delivery_rate_bps"`
	RwndLimitedS   float64 `json:"rwnd_limited_seconds"`
	SndbufLimitedS float64 `json:"sndbuf_limited_seconds"`
}

func streamReports(snd, rcv wire.Stats) ([]streamReport, uint32) {
	var out []streamReport
	var retrans uint32
	for i, s := range snd.Streams {
		r := streamReport{
			Bytes: s.Bytes, RTTMs: float64(s.RTT) / 1e6, RTTVarMs: float64(s.RTTVar) / 1e6,
			Cwnd: s.Cwnd, Retransmits: s.Retrans, DeliveryBps: float64(s.DeliveryRate) * 8,
			RwndLimitedS: float64(s.RwndLimited) / 1e9, SndbufLimitedS: float64(s.SndbufLimited) / 1e9,
		}
		if i < len(rcv.Streams) && r.Bytes == 0 {
			r.Bytes = rcv.Streams[i].Bytes
		}
		retrans += s.Retrans
		out = append(out, r)
	}
	return out, retrans
}

type fileEvent struct {
	Type    string `json:"type"`
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	CRC32C  string `json:"crc32c,omitempty"`
	Adler32 string `json:"adler32,omitempty"`
}

type progressEvent struct {
	Type       string  `json:"type"`
	Seconds    float64 `json:"seconds"`
	Bytes      int64   `json:"bytes"`
	BytesTotal int64   `json:"bytes_total"`
	BytesSent  int64   `json:"bytes_sent"`
	FilesDone  int64   `json:"files_done"`
	FilesTotal int64   `json:"files_total"`
	RateBps    float64 `json:"rate_bps"`
}

type retryEvent struct {
	Type    string  `json:"type"`
	Attempt int     `json:"attempt"`
	Error   string  `json:"error"`
	WaitS   float64 `json:"wait_seconds"`
}

func runCp(ctx context.Context, o cpFlags, args []string, stdout, stderr io.Writer) error {
	srcArgs, dstArg := args[:len(args)-1], args[len(args)-1]
	pol := uint8(wire.PolicyRefuse)
	set := 0
	for _, b := range []struct {
		on bool
		p  uint8
	}{{o.overwrite, wire.PolicyOverwrite}, {o.skipExisting, wire.PolicySkip}, {o.update, wire.PolicyUpdate}} {
		if b.on {
			set++
			pol = b.p
		}
	}
	if set > 1 {
		return errors.New("cp: --overwrite, --skip-existing and --update exclude each other")
	}
	tuning, err := o.tuning()
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	bs, err := units.ParseSize(o.blockSize)
	if err != nil {
		return fmt.Errorf("cp: --block-size: %w", err)
	}
	if bs < 64<<10 || bs > 256<<20 {
		return fmt.Errorf("cp: --block-size %s out of range 64KiB..256MiB", o.blockSize)
	}
	if o.retries < 0 {
		return errors.New("cp: --retries must not be negative")
	}
	if err := o.reserve.check(); err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	links, ok := map[string]uint8{"copy": wire.LinksCopy, "skip": wire.LinksSkip, "follow": wire.LinksFollow}[o.symlinks]
	if !ok {
		return fmt.Errorf("cp: --symlinks %q: want copy, skip or follow", o.symlinks)
	}
	if o.dryRun && (o.reserve.rate != "" || o.reserve.ctl.url != "") {
		return errors.New("cp: --dry-run copies nothing: it takes no --reserve or --controller")
	}

	dstRemote, dstIsRemote, err := parseRemote(dstArg)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	var srcRemotes []remote
	for _, a := range srcArgs {
		r, ok, err := parseRemote(a)
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		if ok {
			srcRemotes = append(srcRemotes, r)
		}
	}
	push := dstIsRemote
	switch {
	case dstIsRemote && len(srcRemotes) > 0:
		return errors.New("cp: copying from one server to another is not supported: run cp on one of them")
	case !dstIsRemote && len(srcRemotes) == 0:
		return errors.New("cp: neither the sources nor the destination is remote (lp://HOST:PORT/PATH)")
	case !dstIsRemote && len(srcRemotes) != len(srcArgs):
		return errors.New("cp: mixing local and remote sources is not supported")
	}
	addr := dstRemote.Addr
	if !push {
		addr = srcRemotes[0].Addr
		for _, r := range srcRemotes {
			if r.Addr != addr {
				return errors.New("cp: all remote sources must be on the same server")
			}
		}
	}
	token, err := readToken(o.tokenFile)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	tlsCfg, err := clientTLS(o.tlsCA, addr)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	cfg := mover.ClientConfig{Addr: addr, Token: token, TLS: tlsCfg, Tuning: tuning, Streams: o.streams, BlockSize: bs, Stall: o.stall}
	opts := wire.Transfer{Policy: pol, Recursive: o.recursive, Adler32: o.adler,
		Select: wire.Select{Rules: o.rules, Symlinks: links, DryRun: o.dryRun}}

	// Prepare the local side before connecting, so a typo fails at once.
	var src mover.Source
	var dst mover.Dest
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	if push {
		for _, a := range srcArgs {
			it, err := localSource(a, o.recursive)
			if err != nil {
				return fmt.Errorf("cp: %w", err)
			}
			closers = append(closers, it.Root)
			src.Items = append(src.Items, it)
		}
	} else {
		wholeRoot := false
		for _, r := range srcRemotes {
			if strings.Trim(r.Path, "/") == "" {
				wholeRoot = true
			}
		}
		dst, err = localDest(dstArg, len(srcArgs) > 1 || wholeRoot, o.dryRun)
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		closers = append(closers, dst.Root)
	}

	out := &ndjson{w: stdout}
	var results sync.Map // manifest path -> mover.FileResult
	onFile := func(fr mover.FileResult) {
		results.Store(fr.Path, fr)
		if o.jsonOut {
			ev := fileEvent{Type: "file", Path: fr.Path, Size: fr.Size, Reason: fr.Reason}
			switch {
			case o.dryRun && fr.Skipped && !mover.IsLinkSkip(fr.Reason):
				ev.Status = dryRunStatus(fr.Reason)
			case fr.Skipped:
				ev.Status = "skipped"
			case fr.OK:
				ev.Status = "ok"
				ev.CRC32C = fmt.Sprintf("%08x", fr.CRC32C)
				if fr.HasAdler {
					ev.Adler32 = fmt.Sprintf("%08x", fr.Adler32)
				}
			default:
				ev.Status = "failed"
			}
			out.write(ev)
		}
	}

	// Book the reservation; the copy starts at once, without waiting for it.
	var counter byteCounter
	var booking *cpReserve
	if o.reserve.rate != "" {
		booking = &cpReserve{f: &o.reserve, jsonOut: o.jsonOut, quiet: o.quiet, out: out, stderr: stderr}
		var size int64
		if push {
			size = localSize(src.Items)
		}
		if err := booking.start(ctx, addr, push, size, tuning.Rate, counter.load); err != nil {
			return fmt.Errorf("cp: %w", err)
		}
	}

	// With a controller (--controller, or implied by --reserve) the copy
	// is registered there and reports its progress every second.
	var report *cpReport
	if o.reserve.rate != "" || o.reserve.ctl.url != "" {
		report = o.registerTransfer(ctx, booking, push, srcArgs, dstArg, addr, src, stderr)
		report.run(ctx, func() transfer.Report {
			n := counter.load()
			rep := transfer.Report{BytesDone: n, BytesByPath: map[string]int64{"routed": n}}
			if p := counter.current(); p != nil {
				rep.BytesTotal = p.BytesTotal.Load()
				rep.Streams = streamStates(p)
			}
			if booking != nil && booking.res != nil {
				r := min(max(booking.res.tracker.split(), 0), n)
				rep.BytesByPath = map[string]int64{"routed": n - r, "reserved": r}
			}
			return rep
		})
	}

	start := time.Now()
	var sent, holes int64
	var last mover.TransferStats
	var lastProg *mover.Progress
	attempts := 0
	var runErr error
	delivered := map[string]bool{}
	for {
		attempts++
		prog := &mover.Progress{}
		lastProg = prog
		counter.begin(prog)
		stopReport := startReporter(o, prog, start, sent, stderr, out)
		var ts mover.TransferStats
		if push {
			src.Exclude = delivered
			ts, runErr = mover.Push(ctx, cfg, src, dstRemote.Path, strings.HasSuffix(dstRemote.Path, "/") || dstRemote.Path == "", opts, prog, onFile)
		} else {
			dst.Done = delivered
			paths := make([]string, len(srcRemotes))
			for i, r := range srcRemotes {
				paths[i] = r.Path
			}
			ts, runErr = mover.Pull(ctx, cfg, paths, dst, opts, prog, onFile)
		}
		stopReport()
		counter.end()
		sent += prog.BytesMoved.Load()
		holes += prog.BytesHoles.Load()
		last = ts
		results.Range(func(k, v any) bool {
			if fr := v.(mover.FileResult); fr.OK {
				delivered[k.(string)] = true
			}
			return true
		})
		if runErr == nil || ctx.Err() != nil || retry.IsPermanent(runErr) || attempts > o.retries {
			break
		}
		wait := min(time.Duration(1<<min(attempts-1, 5))*time.Second, 30*time.Second)
		if o.jsonOut {
			out.write(retryEvent{Type: "retry", Attempt: attempts, Error: runErr.Error(), WaitS: wait.Seconds()})
		} else {
			fmt.Fprintf(stderr, "lightpath: cp: attempt %d failed: %s; resuming in %s\n", attempts, textsafe.Sanitize(runErr.Error()), wait)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	elapsed := time.Since(start)

	// Tally the last verdict of every file.
	var sum cpSummary
	var failures, warnings []string
	var planned []mover.FileResult // --dry-run
	results.Range(func(k, v any) bool {
		fr := v.(mover.FileResult)
		if fr.Skipped && mover.IsLinkSkip(fr.Reason) {
			warnings = append(warnings, fr.Reason)
		}
		switch {
		case o.dryRun && fr.OK:
			planned = append(planned, fr)
			switch dryRunStatus(fr.Reason) {
			case "would-send", "would-check":
				sum.Files++
				sum.Bytes += fr.Size
			default:
				sum.FilesSkipped++
			}
		case fr.Skipped:
			sum.FilesSkipped++
			sum.Files++
			sum.Bytes += fr.Size
		case fr.OK:
			sum.Files++
			sum.Bytes += fr.Size
		default:
			sum.FilesFailed++
			failures = append(failures, fr.Path+": "+fr.Reason)
		}
		return true
	})
	sort.Strings(failures)
	failures = append(failures, last.SourceErrors...)
	sum.Type, sum.Direction = "summary", map[bool]string{true: "push", false: "pull"}[push]
	sum.Seconds = elapsed.Seconds()
	sum.BytesSent, sum.BytesSparse, sum.Attempts = sent, holes, attempts
	sum.BytesSkipped = lastProg.BytesSkipped.Load()
	sort.Strings(warnings)
	if o.dryRun {
		sum.DryRun, sum.BytesSkipped = true, 0
	}
	if sum.Seconds > 0 {
		sum.ThroughputBps = float64(sent) * 8 / sum.Seconds
	}
	sum.Streams = len(last.Sender.Streams)
	sum.Checksum = "crc32c"
	if o.adler {
		sum.Checksum = "crc32c+adler32"
	}
	sum.PerStream, sum.Retransmits = streamReports(last.Sender, last.Receiver)
	sum.SenderIOWait = float64(last.Sender.IOWait) / 1e9
	sum.ReceiverIOWait = float64(last.Receiver.IOWait) / 1e9
	if runErr == nil && len(failures) == 0 && !o.dryRun {
		// Judged only for a copy that worked: a failed one's error says why.
		var achieved float64
		if last.Receiver.Elapsed > 0 {
			achieved = float64(last.Receiver.Bytes) * 8 / (float64(last.Receiver.Elapsed) / 1e9)
		}
		b := mover.Judge(last.Sender, last.Receiver, float64(tuning.Rate), achieved)
		sum.Bottleneck, sum.BottleneckWhy = b.What, b.Why
	}
	sum.Verified = runErr == nil && len(failures) == 0 && !o.dryRun
	if runErr != nil {
		sum.Errors = append([]string{runErr.Error()}, failures...)
	} else {
		sum.Errors = failures
	}
	if len(sum.Errors) > 20 {
		sum.Errors = sum.Errors[:20]
	}
	interrupted := ctx.Err() != nil
	if booking != nil {
		booking.finish(&sum, sent, interrupted)
	}
	report.finish(sum, interrupted)
	if !o.jsonOut {
		for _, w := range warnings {
			fmt.Fprintf(stderr, "lightpath: cp: warning: %s\n", textsafe.Sanitize(w))
		}
	}
	switch {
	case o.jsonOut:
		out.write(sum) // the last line is always the summary
	case o.dryRun:
		printDryRun(stdout, planned, sum)
	case runErr == nil || sent > 0 || len(failures) > 0 || sum.Files > 0:
		printSummary(stdout, sum)
	}
	switch {
	case interrupted && (runErr != nil || len(failures) > 0):
		return statusError{code: 130, err: errors.New("cp: interrupted: run the same command again to resume")}
	case runErr != nil:
		// The error's text may come from the server: printed sanitised.
		return fmt.Errorf("cp: %s", textsafe.Sanitize(runErr.Error()))
	case len(failures) > 0:
		return fmt.Errorf("cp: %d of %d files failed; first: %s", len(failures), sum.Files+len(failures), textsafe.Sanitize(failures[0]))
	}
	return nil
}

// statusError is an error that ends the process with its own exit status
// (130 for a copy interrupted by Ctrl-C, as shells report SIGINT).
type statusError struct {
	code int
	err  error
}

func (e statusError) Error() string { return e.err.Error() }
func (e statusError) Unwrap() error { return e.err }

// registerTransfer registers the copy with the controller: its ends as
// the topology's nodes and its flow, and its reservation when it booked
// one. It returns nil when the controller cannot take it.
func (o cpFlags) registerTransfer(ctx context.Context, booking *cpReserve, push bool, srcArgs []string, dstArg, addr string, src mover.Source, stderr io.Writer) *cpReport {
	reg := transfer.Registration{Direction: map[bool]string{true: "push", false: "pull"}[push],
		Source: strings.Join(srcArgs, " "), Destination: dstArg}
	if push {
		reg.BytesTotal = localSize(src.Items)
	}
	var c *client.Client
	if booking != nil && booking.res != nil {
		c = booking.res.c
		r := booking.res.booked
		reg.From, reg.To, reg.Flow, reg.Reservation = r.From, r.To, booking.flow, r.ID
	} else {
		var err error
		if c, err = o.reserve.ctl.client(); err != nil {
			fmt.Fprintf(stderr, "lightpath: cp: the controller does not record this transfer: %v\n", err)
			return nil
		}
		// The ends as the topology's nodes, when they are in it.
		if cl, srv, err := localAddrToward(addr); err == nil {
			tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if topo, err := c.Topology(tctx); err == nil {
				if b, err := planBooking(topo, push, cl, srv); err == nil {
					reg.From, reg.To, reg.Flow = b.from, b.to, b.flow
				}
			}
			cancel()
		}
	}
	return registerTransfer(ctx, c, reg, stderr)
}

// dryRunStatus is a dry run's verdict on a file, from the receiver's reason.
func dryRunStatus(reason string) string {
	if mover.IsLinkSkip(reason) {
		return "skipped"
	}
	switch reason {
	case mover.DryRunSend, mover.DryRunLink:
		return "would-send"
	case mover.DryRunCheck:
		return "would-check"
	case mover.DryRunSkip:
		return "would-skip"
	}
	return "would-fail"
}

// printDryRun lists what a copy would do, one line per file or link, then
// a line of totals.
func printDryRun(w io.Writer, planned []mover.FileResult, s cpSummary) {
	sort.Slice(planned, func(i, j int) bool { return planned[i].Path < planned[j].Path })
	for _, fr := range planned {
		st := dryRunStatus(fr.Reason)
		line := fmt.Sprintf("%-11s %s (%s)", st, textsafe.Sanitize(fr.Path), units.FormatSize(fr.Size))
		if st != "would-send" {
			line += ": " + textsafe.Sanitize(strings.TrimPrefix(fr.Reason, "dry run: "))
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "dry run: %d files, %s would be sent or compared, %d skipped; nothing was sent\n",
		s.Files, units.FormatSize(s.Bytes), s.FilesSkipped)
}

func printSummary(w io.Writer, s cpSummary) {
	verdict := "verified (" + s.Checksum + ")"
	if !s.Verified {
		verdict = "NOT verified"
	}
	files := "files"
	if s.Files == 1 {
		files = "file"
	}
	fmt.Fprintf(w, "%s %d %s, %s in %s: %s over %d streams; %s\n",
		map[string]string{"push": "pushed", "pull": "pulled"}[s.Direction], s.Files, files, units.FormatSize(s.Bytes),
		units.FormatDuration(time.Duration(s.Seconds*float64(time.Second))),
		units.FormatRate(s.ThroughputBps), s.Streams, verdict)
	fmt.Fprintf(w, "  sent %s, already there %s", units.FormatSize(s.BytesSent), units.FormatSize(s.BytesSkipped))
	if s.BytesSparse > 0 {
		fmt.Fprintf(w, ", holes recreated %s", units.FormatSize(s.BytesSparse))
	}
	if s.FilesSkipped == 1 {
		fmt.Fprint(w, " (1 file skipped)")
	} else if s.FilesSkipped > 1 {
		fmt.Fprintf(w, " (%d files skipped)", s.FilesSkipped)
	}
	if s.Attempts > 1 {
		fmt.Fprintf(w, ", %d attempts", s.Attempts)
	}
	fmt.Fprintf(w, "; retransmits %d\n", s.Retransmits)
	if s.Bottleneck != "" {
		fmt.Fprintf(w, "  bottleneck: %s: %s\n", s.Bottleneck, s.BottleneckWhy)
	}
	printReservationSummary(w, s)
}

// startReporter shows progress until the returned function is called: a
// bar on a terminal, NDJSON events with --json, nothing otherwise.
func startReporter(o cpFlags, p *mover.Progress, start time.Time, sentBefore int64, stderr io.Writer, out *ndjson) func() {
	var bar *progress.Bar
	if !o.jsonOut && !o.quiet {
		if f, ok := stderr.(*os.File); ok {
			if w, ok := progress.TerminalWidth(f); ok {
				bar = progress.NewBar(stderr, w)
			}
		}
	}
	if bar == nil && !o.jsonOut {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var meter progress.RateMeter
		period := time.Second
		if bar != nil {
			period = 200 * time.Millisecond
		}
		t := time.NewTicker(period)
		defer t.Stop()
		state := func() (progress.State, int64) {
			moved := p.BytesMoved.Load()
			rate := meter.Observe(time.Now(), sentBefore+moved)
			done, total := moved+p.BytesSkipped.Load()+p.BytesHoles.Load(), p.BytesTotal.Load()
			if total > 0 && done > total {
				done = total // blocks sent again count once
			}
			return progress.State{
				FilesDone: int(p.FilesDone.Load() + p.FilesSkipped.Load()), FilesTotal: int(p.FilesTotal.Load()),
				Bytes: done, BytesTotal: total, Rate: rate, Elapsed: time.Since(start),
			}, moved
		}
		for {
			select {
			case <-done:
				if bar != nil {
					s, _ := state()
					if s.Elapsed > 0 {
						s.Rate = float64(sentBefore+p.BytesMoved.Load()) * 8 / s.Elapsed.Seconds()
					}
					bar.Finish(s)
				}
				return
			case <-t.C:
				s, moved := state()
				if bar != nil {
					bar.Update(s)
				} else {
					out.write(progressEvent{Type: "progress", Seconds: s.Elapsed.Seconds(), Bytes: s.Bytes, BytesTotal: s.BytesTotal,
						BytesSent: sentBefore + moved, FilesDone: int64(s.FilesDone), FilesTotal: int64(s.FilesTotal), RateBps: s.Rate})
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// localSource opens a local source for sending. A symlink given on the
// command line is followed (as cp does); its own name is kept.
func localSource(arg string, recursive bool) (mover.SourceItem, error) {
	abs, err := filepath.Abs(arg)
	if err != nil {
		return mover.SourceItem{}, fmt.Errorf("%s: %w", arg, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return mover.SourceItem{}, fmt.Errorf("%s: %w", arg, unwrapPath(err))
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return mover.SourceItem{}, fmt.Errorf("%s: %w", arg, unwrapPath(err))
	}
	if fi.IsDir() && !recursive {
		return mover.SourceItem{}, fmt.Errorf("%s: is a directory (use -r to copy trees)", arg)
	}
	if resolved == "/" {
		return mover.SourceItem{}, errors.New("copying / as a whole is not supported: name its directories")
	}
	name := filepath.Base(abs)
	if name == "/" || name == "." {
		name = filepath.Base(resolved)
	}
	root, err := os.OpenRoot(filepath.Dir(resolved))
	if err != nil {
		return mover.SourceItem{}, fmt.Errorf("%s: %w", arg, unwrapPath(err))
	}
	return mover.SourceItem{Root: root, Path: filepath.Base(resolved), Name: name}, nil
}

// localDest resolves a local destination as cp does. A dry run creates
// nothing: it opens the nearest directory that exists instead.
func localDest(arg string, mustBeDir, dryRun bool) (mover.Dest, error) {
	mkdirAll := os.MkdirAll
	openRoot := os.OpenRoot
	if dryRun {
		mkdirAll = func(string, fs.FileMode) error { return nil }
		openRoot = openExistingRoot
	}
	fi, err := os.Stat(arg)
	switch {
	case err == nil && fi.IsDir():
		root, err := openRoot(arg)
		if err != nil {
			return mover.Dest{}, fmt.Errorf("%s: %w", arg, unwrapPath(err))
		}
		return mover.Dest{Root: root, Base: "."}, nil
	case err == nil && (mustBeDir || strings.HasSuffix(arg, "/")):
		return mover.Dest{}, fmt.Errorf("%s: not a directory", arg)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return mover.Dest{}, fmt.Errorf("%s: %w", arg, unwrapPath(err))
	case err != nil && (mustBeDir || strings.HasSuffix(arg, "/")):
		if err := mkdirAll(arg, 0o755); err != nil {
			return mover.Dest{}, fmt.Errorf("%s: %w", arg, unwrapPath(err))
		}
		root, err := openRoot(arg)
		if err != nil {
			return mover.Dest{}, fmt.Errorf("%s: %w", arg, unwrapPath(err))
		}
		return mover.Dest{Root: root, Base: "."}, nil
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return mover.Dest{}, err
	}
	parent := filepath.Dir(abs)
	if err := mkdirAll(parent, 0o755); err != nil {
		return mover.Dest{}, fmt.Errorf("%s: %w", parent, unwrapPath(err))
	}
	root, err := openRoot(parent)
	if err != nil {
		return mover.Dest{}, fmt.Errorf("%s: %w", parent, unwrapPath(err))
	}
	return mover.Dest{Root: root, Base: ".", Rename: filepath.Base(abs)}, nil
}

// openExistingRoot is a dry run's stand-in for os.OpenRoot on a directory
// that may not exist yet: a root at its nearest existing ancestor, which
// shows the same (absent) entries beneath the missing directory.
func openExistingRoot(dir string) (*os.Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for p := abs; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			if p == abs {
				return os.OpenRoot(p)
			}
			// Beneath a missing directory nothing exists: an empty
			// directory of our own says so without touching the destination.
			tmp, err := os.MkdirTemp("", "lightpath-dry-run-")
			if err != nil {
				return nil, err
			}
			defer os.Remove(tmp)
			return os.OpenRoot(tmp)
		}
		if filepath.Dir(p) == p {
			return nil, fmt.Errorf("%s: no existing directory above it", dir)
		}
	}
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
