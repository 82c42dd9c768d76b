package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/progress"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/transfer/report"
	"github.com/lightpath/lightpath/internal/units"
)

type cpFlags struct {
	tuningFlags
	recursive, overwrite, skipExisting, update, jsonOut, adler, quiet bool
	retries                                                           int
	blockSize                                                         string
	stall                                                             time.Duration
	reserve                                                           reserveFlags
	rules                                                             []mover.Rule // --include and --exclude in the order given
	symlinks                                                          string
	dryRun                                                            bool
}

// ruleFlag is --include or --exclude: each use appends a rule to one list,
// so that the order across both flags is the order given.
type ruleFlag struct {
	rules   *[]mover.Rule
	include bool
}

func (f ruleFlag) String() string { return "" }
func (f ruleFlag) Type() string   { return "PATTERN" }
func (f ruleFlag) Set(v string) error {
	if err := mover.CheckRule(v); err != nil {
		return err
	}
	if len(*f.rules) >= mover.MaxRules {
		return fmt.Errorf("at most %d --include and --exclude patterns", mover.MaxRules)
	}
	*f.rules = append(*f.rules, mover.Rule{Include: f.include, Pattern: v})
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

--cc NAME sets the congestion control of every stream, at both ends (the
server runs it for what it sends in a pull): any the kernel offers, such as
bbr, cubic, reno, or fast (FAST TCP, once lightpath cc install fast has
loaded it, as root). Default: bbr where the kernel has it, cubic to
loopback peers (the server's serve --cc, when it has one, for what it
sends). The summary names what each stream really ran (cc).

--transport udp sends the data over Lightpath's reliable UDP transport
(the control connection stays TCP; the data streams go to the server's same
port number over UDP, every datagram authenticated with a key of the
session). --cc is then its rate control: fixed (steady at --rate, or at the
reservation's rate with --reserve), fast (FAST's equation on the queueing
delay) or aimd; default fixed at the reserved rate when --reserve books
one, fast otherwise. The summary adds the sending rate, the goodput, the
loss repaired, the bytes sent again and the datagrams per batch.

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
  lightpath cp -r --transport udp --cc fixed --rate 5G ./run42 lp://dtn2:7070/runs/
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
	Type          string  `json:"type"`
	Direction     string  `json:"direction"`
	Bytes         int64   `json:"bytes"`
	Files         int     `json:"files"`
	FilesFailed   int     `json:"files_failed"`
	FilesSkipped  int     `json:"files_skipped"`
	Seconds       float64 `json:"seconds"`
	ThroughputBps float64 `json:"throughput_bps"`
	Streams       int     `json:"streams"`
	Verified      bool    `json:"verified"`
	Checksum      string  `json:"checksum"`
	BytesSent     int64   `json:"bytes_sent"`
	BytesSkipped  int64   `json:"bytes_skipped"`
	BytesSparse   int64   `json:"bytes_sparse"`
	Attempts      int     `json:"attempts"`
	Retransmits   uint32  `json:"retransmits"`
	// Transport carried the data: tcp or udp. GoodputBps is the last
	// session's payload per second of its sender's time, which its sending
	// rate (with the bytes on the wire and sent again, where its sender
	// could say) compares with; over UDP, the loss repaired (bytes that
	// arrived only thanks to a retransmission) and the datagrams sent per
	// system call.
	Transport         string         `json:"transport"`
	GoodputBps        float64        `json:"goodput_bps"`
	SendingRateBps    *float64       `json:"sending_rate_bps,omitempty"`
	WireBytes         *uint64        `json:"wire_bytes,omitempty"`
	BytesResent       *uint64        `json:"bytes_resent,omitempty"`
	LossRepaired      *uint64        `json:"loss_repaired_bytes,omitempty"`
	Datagrams         *uint64        `json:"datagrams,omitempty"`
	DatagramsPerBatch *float64       `json:"datagrams_per_batch,omitempty"`
	PerStream         []streamReport `json:"per_stream"`
	// CC names the congestion controls the streams ran (mover.Summary.CC):
	// "fast", or "fast,cubic" when they differ.
	CC             string   `json:"cc"`
	Bottleneck     string   `json:"bottleneck"`
	BottleneckWhy  string   `json:"bottleneck_reason"`
	SenderIOWait   float64  `json:"sender_io_wait_seconds"`
	ReceiverIOWait float64  `json:"receiver_io_wait_seconds"`
	Errors         []string `json:"errors,omitempty"`
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
	CC             string  `json:"cc,omitempty"` // the congestion control it ran
	Bytes          int64   `json:"bytes"`
	RTTMs          float64 `json:"rtt_ms"`
	RTTVarMs       float64 `json:"rttvar_ms"`
	Cwnd           uint32  `json:"cwnd"`
	Retransmits    uint32  `json:"retransmits"`
	DeliveryBps    float64 `json:"delivery_rate_bps"`
	RwndLimitedS   float64 `json:"rwnd_limited_seconds"`
	SndbufLimitedS float64 `json:"sndbuf_limited_seconds"`
	// Over UDP: the payload this stream repaired, and its sender's
	// datagrams per system call.
	LossRepaired      uint64  `json:"loss_repaired_bytes,omitempty"`
	DatagramsPerBatch float64 `json:"datagrams_per_batch,omitempty"`
}

// ccLine says which congestion control the streams ran, with how many
// streams ran each, in the order they first appear: "fast (4 streams)", or
// "fast (3 streams), cubic (1 stream)"; "" when no stream could say.
func ccLine(streams []streamReport) string {
	var names []string
	count := map[string]int{}
	for _, s := range streams {
		if s.CC == "" {
			continue
		}
		if count[s.CC] == 0 {
			names = append(names, s.CC)
		}
		count[s.CC]++
	}
	parts := make([]string, len(names))
	for i, n := range names {
		word := "streams"
		if count[n] == 1 {
			word = "stream"
		}
		parts[i] = fmt.Sprintf("%s (%d %s)", textsafe.Sanitize(n), count[n], word)
	}
	return strings.Join(parts, ", ")
}

// perBatch is datagrams per system call, 0 when none were counted.
func perBatch(datagrams, calls uint64) float64 {
	if calls == 0 {
		return 0
	}
	return float64(datagrams) / float64(calls)
}

// streamReports is each stream's account as cp and bench print it.
func streamReports(streams []mover.StreamSummary) []streamReport {
	var out []streamReport
	for _, s := range streams {
		out = append(out, streamReport{
			CC: s.CC, Bytes: s.Bytes, RTTMs: float64(s.RTT) / 1e6, RTTVarMs: float64(s.RTTVar) / 1e6,
			Cwnd: s.Cwnd, Retransmits: s.Retransmits, DeliveryBps: s.DeliveryBps,
			RwndLimitedS: s.RwndLimited.Seconds(), SndbufLimitedS: s.SndbufLimited.Seconds(),
			LossRepaired: s.LossRepaired, DatagramsPerBatch: perBatch(s.Datagrams, s.SendCalls),
		})
	}
	return out
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
	job, err := o.job(args)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	defer job.close()
	out := &ndjson{w: stdout}
	var meter mover.Meter
	job.Meter, job.OnFile, job.OnRetry = &meter, o.fileEvents(out), o.retryNotice(out, stderr)

	// Book the reservation; the copy starts at once, without waiting for it.
	bk := &cpReserve{f: &o.reserve, jsonOut: o.jsonOut, quiet: o.quiet, out: out, stderr: stderr}
	if o.reserve.rate != "" {
		if err := bk.start(ctx, job, meter.Sent); err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		if err := udpReserved(&job.Config.Tuning, bk.bandwidth(), bk.failure); err != nil {
			bk.finish(&cpSummary{}, false)
			return fmt.Errorf("cp: %w", err)
		}
	}
	// With a controller (--controller, or implied by --reserve) the copy
	// is registered there and reports its progress every second.
	var rec *report.Reporter
	if o.reserve.rate != "" || o.reserve.ctl.url != "" {
		rec = o.record(ctx, job, bk, &meter, stderr)
	}

	stop := startReporter(o, &meter, stderr, out)
	res, err := mover.Copy(ctx, job.Job)
	stop()
	sum := o.summary(res)
	if o.reserve.rate != "" {
		bk.finish(&sum, res.Interrupted)
	}
	rec.Finish(report.Outcome(copyResult(res), sum.BytesByPath, sum.Reservation, "interrupted by the user: run the same command again to resume"))
	if !o.jsonOut {
		for _, w := range res.Warnings {
			fmt.Fprintf(stderr, "lightpath: cp: warning: %s\n", textsafe.Sanitize(w))
		}
	}
	switch {
	case o.jsonOut:
		out.write(sum) // the last line is always the summary
	case o.dryRun:
		printDryRun(stdout, res.Planned, sum)
	case err == nil || res.BytesSent > 0 || len(res.Failures) > 0 || sum.Files > 0:
		printSummary(stdout, sum)
	}
	switch {
	case res.Interrupted && err != nil:
		return statusError{code: 130, err: errors.New("cp: interrupted: run the same command again to resume")}
	case err != nil:
		// The error's text may come from the server: printed sanitised.
		return fmt.Errorf("cp: %s", textsafe.Sanitize(err.Error()))
	}
	return nil
}

// udpReserved sets a UDP copy's rate control once its reservation is
// booked (reserved bits per second, 0 when none could be, for the reason
// failure): without --cc, fixed at the reserved rate (or at --rate, when
// given), or fast with no reservation; --cc fixed without --rate takes the
// reserved rate, and fails without one.
func udpReserved(t *mover.Tuning, reserved uint64, failure string) error {
	if t.Transport != mover.TransportUDP {
		return nil
	}
	switch {
	case t.CC == "" && reserved > 0:
		t.CC = "fixed"
	case t.CC == "":
		t.CC = "fast"
		return nil
	case t.CC != "fixed":
		return nil
	}
	if t.Rate == 0 {
		if reserved == 0 {
			return fmt.Errorf("--cc fixed sends at a set rate and no reservation gave one (%s): give --rate", failure)
		}
		t.Rate = reserved
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

// cpJob is the copy the command line asks for, its local side open.
type cpJob struct {
	mover.Job
	addr     string // the server's HOST:PORT
	src, dst string // as given, for the controller's record
}

func (j *cpJob) close() {
	j.Source.Close()
	if j.Local.Root != nil {
		j.Local.Root.Close()
	}
}

// job checks the flags and the arguments and opens the local side, before
// anything connects, so that a typo fails at once.
func (o cpFlags) job(args []string) (*cpJob, error) {
	srcArgs, dstArg := args[:len(args)-1], args[len(args)-1]
	pol, set := mover.Refuse, 0
	for _, b := range []struct {
		on bool
		p  mover.Policy
	}{{o.overwrite, mover.Overwrite}, {o.skipExisting, mover.Skip}, {o.update, mover.Update}} {
		if b.on {
			set++
			pol = b.p
		}
	}
	if set > 1 {
		return nil, errors.New("--overwrite, --skip-existing and --update exclude each other")
	}
	o.reserving = o.reserve.rate != ""
	tuning, err := o.tuning()
	if err != nil {
		return nil, err
	}
	bs, err := units.ParseSize(o.blockSize)
	if err != nil {
		return nil, fmt.Errorf("--block-size: %w", err)
	}
	if bs < 64<<10 || bs > 256<<20 {
		return nil, fmt.Errorf("--block-size %s out of range 64KiB..256MiB", o.blockSize)
	}
	if o.retries < 0 {
		return nil, errors.New("--retries must not be negative")
	}
	if err := o.reserve.check(); err != nil {
		return nil, err
	}
	links, ok := map[string]mover.Links{"copy": mover.LinksCopy, "skip": mover.LinksSkip, "follow": mover.LinksFollow}[o.symlinks]
	if !ok {
		return nil, fmt.Errorf("--symlinks %q: want copy, skip or follow", o.symlinks)
	}
	if o.dryRun && (o.reserve.rate != "" || o.reserve.ctl.url != "") {
		return nil, errors.New("--dry-run copies nothing: it takes no --reserve or --controller")
	}

	dstRemote, dstIsRemote, err := parseRemote(dstArg)
	if err != nil {
		return nil, err
	}
	var srcRemotes []remote
	for _, a := range srcArgs {
		r, ok, err := parseRemote(a)
		if err != nil {
			return nil, err
		}
		if ok {
			srcRemotes = append(srcRemotes, r)
		}
	}
	switch {
	case dstIsRemote && len(srcRemotes) > 0:
		return nil, errors.New("copying from one server to another is not supported: run cp on one of them")
	case !dstIsRemote && len(srcRemotes) == 0:
		return nil, errors.New("neither the sources nor the destination is remote (lp://HOST:PORT/PATH)")
	case !dstIsRemote && len(srcRemotes) != len(srcArgs):
		return nil, errors.New("mixing local and remote sources is not supported")
	}
	j := &cpJob{addr: dstRemote.Addr, src: strings.Join(srcArgs, " "), dst: dstArg}
	j.Direction = mover.Push
	if !dstIsRemote {
		j.Direction, j.addr = mover.Pull, srcRemotes[0].Addr
		for _, r := range srcRemotes {
			if r.Addr != j.addr {
				return nil, errors.New("all remote sources must be on the same server")
			}
		}
	}
	token, err := readToken(o.tokenFile)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := clientTLS(o.tlsCA, j.addr)
	if err != nil {
		return nil, err
	}
	j.Config = mover.ClientConfig{Addr: j.addr, Token: token, TLS: tlsCfg, Tuning: tuning, Streams: o.streams, BlockSize: bs, Stall: o.stall}
	j.Options = mover.Options{Policy: pol, Recursive: o.recursive, Adler32: o.adler, Rules: o.rules, Symlinks: links, DryRun: o.dryRun}
	j.Retries = o.retries

	if j.Direction == mover.Push {
		j.Remote = dstRemote.Path
		for _, a := range srcArgs {
			it, err := mover.OpenSource(a, o.recursive)
			if err != nil {
				j.close()
				return nil, err
			}
			j.Source.Items = append(j.Source.Items, it)
		}
		return j, nil
	}
	wholeRoot := false
	for _, r := range srcRemotes {
		j.Paths = append(j.Paths, r.Path)
		if strings.Trim(r.Path, "/") == "" {
			wholeRoot = true
		}
	}
	if j.Local, err = mover.OpenDest(dstArg, len(srcArgs) > 1 || wholeRoot, o.dryRun); err != nil {
		return nil, err
	}
	return j, nil
}

// fileEvents writes, with --json, one line per file verdict.
func (o cpFlags) fileEvents(out *ndjson) func(mover.FileResult) {
	if !o.jsonOut {
		return nil
	}
	return func(fr mover.FileResult) {
		ev := fileEvent{Type: "file", Path: fr.Path, Size: fr.Size, Reason: fr.Reason}
		switch {
		case o.dryRun && fr.Skipped && !mover.IsLinkSkip(fr.Reason):
			ev.Status = mover.DryRunStatus(fr.Reason)
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

// retryNotice says that an attempt failed and when the next one starts:
// a line of --json, or on stderr.
func (o cpFlags) retryNotice(out *ndjson, stderr io.Writer) func(int, error, time.Duration) {
	return func(attempt int, err error, wait time.Duration) {
		if o.jsonOut {
			out.write(retryEvent{Type: "retry", Attempt: attempt, Error: err.Error(), WaitS: wait.Seconds()})
			return
		}
		fmt.Fprintf(stderr, "lightpath: cp: attempt %d failed: %s; resuming in %s\n", attempt, textsafe.Sanitize(err.Error()), wait)
	}
}

// summary is the copy's account as cp prints it.
func (o cpFlags) summary(r mover.Summary) cpSummary {
	s := cpSummary{Type: "summary", Direction: string(r.Direction), Bytes: r.Bytes, Files: r.Files,
		FilesFailed: r.FilesFailed, FilesSkipped: r.FilesSkipped, Seconds: r.Elapsed.Seconds(),
		ThroughputBps: r.ThroughputBps(), Streams: len(r.Streams), Verified: r.Verified, Checksum: "crc32c",
		BytesSent: r.BytesSent, BytesSkipped: r.BytesSkipped, BytesSparse: r.BytesSparse, Attempts: r.Attempts,
		Retransmits: r.Retransmits, PerStream: streamReports(r.Streams), CC: r.CC(),
		Bottleneck: r.Bottleneck.What, BottleneckWhy: r.Bottleneck.Why,
		SenderIOWait: r.SenderIOWait.Seconds(), ReceiverIOWait: r.ReceiverIOWait.Seconds(),
		Errors: r.Errors, DryRun: o.dryRun, Transport: r.Transport, GoodputBps: r.GoodputBps()}
	if r.HasWire {
		rate, wire, resent := r.SendingRateBps(), r.WireBytes, r.ResentBytes
		s.SendingRateBps, s.WireBytes, s.BytesResent = &rate, &wire, &resent
	}
	if r.HasUDP {
		repaired, dgrams, batch := r.LossRepaired, r.Datagrams, r.DatagramsPerBatch()
		s.LossRepaired, s.Datagrams, s.DatagramsPerBatch = &repaired, &dgrams, &batch
	}
	if o.adler {
		s.Checksum = "crc32c+adler32"
	}
	return s
}

// printDryRun lists what a copy would do, one line per file or link, then
// a line of totals.
func printDryRun(w io.Writer, planned []mover.FileResult, s cpSummary) {
	sort.Slice(planned, func(i, j int) bool { return planned[i].Path < planned[j].Path })
	for _, fr := range planned {
		st := mover.DryRunStatus(fr.Reason)
		line := fmt.Sprintf("%-11s %s (%s)", st, textsafe.Sanitize(fr.Path), units.FormatSize(fr.Size))
		if st != "would-send" {
			line += ": " + textsafe.Sanitize(strings.TrimPrefix(fr.Reason, "dry run: "))
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "dry run: %d files, %s would be sent or compared, %d skipped; nothing was sent\n",
		s.Files, units.FormatSize(s.Bytes), s.FilesSkipped)
}

// udpLine is a UDP session's account for people: goodput, sending rate,
// loss repaired, bytes sent again and datagrams per batch (what is known).
func udpLine(goodput float64, sending *float64, resent, repaired *uint64, batch *float64) string {
	line := "over udp: goodput " + units.FormatRate(goodput)
	if sending != nil {
		line += ", sending " + units.FormatRate(*sending)
	}
	if repaired != nil {
		line += "; loss repaired " + units.FormatSize(int64(*repaired))
	}
	if resent != nil {
		line += ", " + units.FormatSize(int64(*resent)) + " sent again"
	}
	if batch != nil {
		line += fmt.Sprintf("; %.1f datagrams per batch", *batch)
	}
	return line
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
	if cc := ccLine(s.PerStream); cc != "" {
		what := "congestion control"
		if s.Transport == mover.TransportUDP {
			what = "udp rate control"
		}
		fmt.Fprintf(w, "  %s: %s\n", what, cc)
	}
	if s.Transport == mover.TransportUDP {
		fmt.Fprintln(w, "  "+udpLine(s.GoodputBps, s.SendingRateBps, s.BytesResent, s.LossRepaired, s.DatagramsPerBatch))
	}
	if s.Bottleneck != "" {
		fmt.Fprintf(w, "  bottleneck: %s: %s\n", s.Bottleneck, s.BottleneckWhy)
	}
	printReservationSummary(w, s)
}

// startReporter shows the copy's progress from its meter until the
// returned function is called: a bar on a terminal, NDJSON events with
// --json, nothing otherwise.
func startReporter(o cpFlags, m *mover.Meter, stderr io.Writer, out *ndjson) func() {
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
		var rate progress.RateMeter
		period := time.Second
		if bar != nil {
			period = 200 * time.Millisecond
		}
		t := time.NewTicker(period)
		defer t.Stop()
		state := func() (progress.State, int64) {
			n := m.Now()
			return progress.State{FilesDone: n.FilesDone, FilesTotal: n.FilesTotal, Bytes: n.Done, BytesTotal: n.Total,
				Rate: rate.Observe(time.Now(), n.Sent), Elapsed: n.Elapsed}, n.Sent
		}
		for {
			select {
			case <-done:
				if bar != nil {
					s, sent := state()
					if s.Elapsed > 0 {
						s.Rate = float64(sent) * 8 / s.Elapsed.Seconds()
					}
					bar.Finish(s)
				}
				return
			case <-t.C:
				s, sent := state()
				if bar != nil {
					bar.Update(s)
				} else {
					out.write(progressEvent{Type: "progress", Seconds: s.Elapsed.Seconds(), Bytes: s.Bytes, BytesTotal: s.BytesTotal,
						BytesSent: sent, FilesDone: int64(s.FilesDone), FilesTotal: int64(s.FilesTotal), RateBps: s.Rate})
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
