package mover

// Copy is the mover's one entry point for a copy to or from a server:
// `lightpath cp` and the transfer service call it. It owns what a copy is
// beyond one session: retries that resume, the tally of every file's last
// verdict, the bottleneck judgement and the one running byte count.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/transport/udp"
	"github.com/lightpath/lightpath/internal/wire"
)

// The transports of a session's data connections (Tuning.Transport).
const (
	TransportTCP = "tcp"
	TransportUDP = "udp"
)

// UDPRateControls are the rate controls a UDP session's --cc takes (the
// UDP transport's own list; not to be changed).
var UDPRateControls = udp.Names

// Tuning is the socket options of a session's streams.
type Tuning struct {
	// Transport carries the session's data connections: "" or "tcp", or
	// "udp" (the control connection stays TCP; protocol version 7).
	Transport string
	// CC is the congestion control: for TCP any the kernel offers (bbr,
	// cubic, reno, fast); for UDP fixed, fast or aimd; "" for the default
	// (for UDP: fixed with a Rate, fast without).
	CC     string
	Rate   uint64 // bits per second for the whole session, paced; 0 for no cap
	Window uint32 // socket buffer bytes per stream; 0 for autotuning
	DSCP   int8   // the DSCP every packet is marked with; -1 for none
	// FASTAlpha and FASTGamma are UDP's fast rate control's alpha (packets
	// queued) and gamma (in 1/1024) for the data streams this end dials
	// (transport.Options.FASTAlpha, FASTGamma); 0 takes the transport's.
	// They drive what the client sends: they do not cross the wire, so
	// the server's streams (a pull, bench --reverse, the server's half of
	// --bidir) run the server's.
	FASTAlpha, FASTGamma uint32
}

func (t Tuning) wire() wire.Tuning {
	return wire.Tuning{CC: t.CC, Rate: t.Rate, Window: t.Window, DSCP: t.DSCP}
}

// Policy is what becomes of a destination file that exists already.
type Policy uint8

// The policies.
const (
	Refuse    Policy = wire.PolicyRefuse    // fail that file, unless an earlier run delivered it
	Overwrite Policy = wire.PolicyOverwrite // replace it
	Skip      Policy = wire.PolicySkip      // leave it alone
	Update    Policy = wire.PolicyUpdate    // leave it when size, time and checksum match; replace it otherwise
)

// Links is what becomes of a symbolic link in a tree.
type Links uint8

// The ways of treating links.
const (
	LinksCopy   = Links(wire.LinksCopy)   // recreated as links (those leading outside the tree are skipped)
	LinksSkip   = Links(wire.LinksSkip)   // left out
	LinksFollow = Links(wire.LinksFollow) // the target's content is copied
)

// Rule is one include or exclude pattern (see CheckRule).
type Rule struct {
	Include bool
	Pattern string
}

// MaxRules bounds how many rules one copy may carry.
const MaxRules = wire.MaxRules

// Options say what a copy takes and what it does at the destination.
type Options struct {
	Policy    Policy
	Recursive bool
	Adler32   bool   // also compute each file's adler32 end to end
	Rules     []Rule // the first matching decides; none matching keeps the entry
	Symlinks  Links
	DryRun    bool // say what would be sent, compared or skipped; change nothing
}

func (o Options) wire() wire.Transfer {
	rules := make([]wire.Rule, len(o.Rules))
	for i, r := range o.Rules {
		rules[i] = wire.Rule{Include: r.Include, Pattern: r.Pattern}
	}
	if len(rules) == 0 {
		rules = nil
	}
	return wire.Transfer{Policy: uint8(o.Policy), Recursive: o.Recursive, Adler32: o.Adler32,
		Select: wire.Select{Rules: rules, Symlinks: uint8(o.Symlinks), DryRun: o.DryRun}}
}

// Direction is which way a copy moves data.
type Direction string

// The directions.
const (
	Push Direction = "push" // local sources to the server
	Pull Direction = "pull" // the server's paths to a local destination
)

// Part is a byte range of one file, pushed on its own (see Job.Part):
// Offset a multiple of the block size, Offset+Length a multiple of it or
// the file's size.
type Part struct{ Offset, Length int64 }

// checkPart refuses a part push that cannot work, before connecting.
func (j *Job) checkPart() error {
	p := j.Part
	if p == nil {
		return nil
	}
	if j.Direction != Push {
		return refusal("a part is pushed, never pulled")
	}
	if len(j.Source.Items) != 1 {
		return refusal(fmt.Sprintf("a part push takes exactly one source file, not %d", len(j.Source.Items)))
	}
	if j.Options.DryRun {
		return refusal("a part push cannot be a dry run")
	}
	it := j.Source.Items[0]
	fi, err := it.Root.Stat(it.Path)
	if err != nil {
		return refusal(fmt.Sprintf("part of %s: %v", it.Path, cleanPathError(err)))
	}
	if !fi.Mode().IsRegular() {
		return refusal(fmt.Sprintf("part of %s: not a regular file", it.Path))
	}
	bs := j.Config.blockSize()
	size := fi.Size()
	switch {
	case p.Offset < 0 || p.Length <= 0 || p.Offset > size-p.Length:
		return refusal(fmt.Sprintf("part %d+%d of %s: outside its %d bytes", p.Offset, p.Length, it.Path, size))
	case p.Offset%bs != 0:
		return refusal(fmt.Sprintf("part %d+%d of %s: the offset is not a multiple of the block size %d", p.Offset, p.Length, it.Path, bs))
	case (p.Offset+p.Length)%bs != 0 && p.Offset+p.Length != size:
		return refusal(fmt.Sprintf("part %d+%d of %s: it ends neither on a block boundary (%d) nor at the file's end", p.Offset, p.Length, it.Path, bs))
	}
	return nil
}

// Job is one copy.
type Job struct {
	Config  ClientConfig
	Options Options

	Direction Direction
	// Push: Source goes to Remote, a path under the server's root; it
	// lands inside Remote when Remote ends with / or is the root.
	Source Source
	Remote string
	// Part, when set, pushes only this byte range of the one regular file
	// in Source (see Part): the server writes it into the file's partial
	// file, shared with the sessions pushing its other parts, and puts the
	// file in place once every block is there. Anything but a push of
	// exactly one regular file, or a range not on block boundaries, is
	// refused before connecting; a server older than protocol version 4
	// is refused too (permanent errors).
	Part *Part
	// Pull: Paths, under the server's root, come into Local.
	Paths []string
	Local Dest

	// Retries is how many times a failed session is reconnected and
	// resumed (after 1 s, 2 s, 4 s, … at most 30 s), unless its error is
	// permanent (retry.IsPermanent) or ctx ended.
	Retries int
	// Meter, when set, is kept up to date while the copy runs; its
	// SetRate re-paces the copy while it runs.
	Meter *Meter
	// OnFile, when set, is told each file's verdict as it comes; a file
	// sent again by a later attempt is told again.
	OnFile func(FileResult)
	// OnRetry, when set, is told of each failed attempt before the wait.
	OnRetry func(attempt int, err error, wait time.Duration)
}

// StreamSummary is one stream's account at the end of a session.
type StreamSummary struct {
	// CC is the congestion control the stream ran, as its sending socket
	// said (TCP_CONGESTION); "" when the sender could not say (a server
	// older than protocol version 5, in a pull or a reverse bench).
	CC            string
	Bytes         int64
	RTT, RTTVar   time.Duration
	Cwnd          uint32
	Retransmits   uint32
	DeliveryBps   float64 // bits per second
	RwndLimited   time.Duration
	SndbufLimited time.Duration
	// WireBytes is the payload the stream put on the wire, retransmissions
	// included, and ResentBytes what of it was sent again, where the
	// sender could say.
	WireBytes, ResentBytes uint64
	// Over UDP: the datagrams the sender sent and the system calls that
	// sent them, and the payload bytes the receiver got only from a
	// retransmission (zero where a side could not say).
	Datagrams, SendCalls, LossRepaired uint64
}

// Summary is the account of a copy: every file's last verdict tallied,
// and the last session's streams.
type Summary struct {
	Direction Direction
	// Files is the files and links delivered, or already there and left
	// alone (FilesSkipped counts those too); Bytes their sizes. In a dry
	// run: what would be sent or compared, and what would be left alone.
	Files, FilesFailed, FilesSkipped int
	Bytes                            int64
	// BytesSent is the payload carried over every attempt (the Meter's
	// count); BytesSkipped what the last attempt found already there;
	// BytesSparse the holes recreated without sending.
	BytesSent, BytesSkipped, BytesSparse int64
	Elapsed                              time.Duration
	Attempts                             int
	Streams                              []StreamSummary
	Retransmits                          uint32
	SenderIOWait, ReceiverIOWait         time.Duration
	// Transport carried the data: "tcp" or "udp".
	Transport string
	// The last session's wire account, where its sender could give it
	// (HasWire): the payload its streams put on the wire, retransmissions
	// included, what of it was sent again, and the sender's time.
	HasWire                bool
	WireBytes, ResentBytes uint64
	SendElapsed            time.Duration
	// SessionBytes is the payload the last session carried.
	SessionBytes int64
	// Over UDP, where both sides could say (HasUDP): the last session's
	// datagrams and the system calls that sent them, and the payload bytes
	// that arrived only thanks to a retransmission.
	HasUDP                             bool
	Datagrams, SendCalls, LossRepaired uint64
	// Bottleneck is judged only for a verified copy.
	Bottleneck Bottleneck
	// Verified: every file is in place and its checksum matched end to end.
	Verified bool
	// Interrupted: ctx ended before the copy did.
	Interrupted bool
	// Failures are "path: reason" of each failed file, sorted, then the
	// source's own errors; Errors the session's error first, then those,
	// at most 20.
	Failures, Errors []string
	// Unread are the sources the last session of a push could not read
	// (among Failures too), each with its reason and class.
	Unread []SourceError
	// Warnings are the links left out of a tree, sorted.
	Warnings []string
	// Planned is a dry run's verdict per entry, sorted by path.
	Planned []FileResult
}

// CC names the congestion controls the streams ran, each once in the
// order the streams first ran it, comma-separated: "fast", or
// "fast,cubic" when they differ; "" when no stream could say.
func (s Summary) CC() string { return StreamsCC(s.Streams) }

// StreamsCC names the congestion controls streams ran, as Summary.CC does.
func StreamsCC(streams []StreamSummary) string {
	var names []string
	for _, st := range streams {
		if st.CC != "" && !slices.Contains(names, st.CC) {
			names = append(names, st.CC)
		}
	}
	return strings.Join(names, ",")
}

// SendingRateBps is what the last session's sender put on the wire per
// second, retransmissions included, in bits; 0 without HasWire.
func (s Summary) SendingRateBps() float64 {
	if !s.HasWire || s.SendElapsed <= 0 {
		return 0
	}
	return float64(s.WireBytes) * 8 / s.SendElapsed.Seconds()
}

// GoodputBps is the payload the last session carried per second of its
// sender's time, in bits: the figure SendingRateBps compares with (their
// ratio is what repair cost), where ThroughputBps counts the whole copy's
// time (connections, retries and verification included). 0 when the
// sender's time is unknown.
func (s Summary) GoodputBps() float64 {
	if s.SendElapsed <= 0 {
		return 0
	}
	return float64(s.SessionBytes) * 8 / s.SendElapsed.Seconds()
}

// DatagramsPerBatch is the datagrams the last session's sender sent per
// system call; 0 without HasUDP.
func (s Summary) DatagramsPerBatch() float64 { return perBatch(s.Datagrams, s.SendCalls) }

// ThroughputBps is the payload carried per second of the copy.
func (s Summary) ThroughputBps() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.BytesSent) * 8 / s.Elapsed.Seconds()
}

// FilesFailedError is a copy whose session ended but some files failed.
type FilesFailedError struct {
	Failed, Total int
	First         string // "path: reason"
}

func (e *FilesFailedError) Error() string {
	return fmt.Sprintf("%d of %d files failed; first: %s", e.Failed, e.Total, e.First)
}

// DryRunStatus is a dry run's verdict on a file, from the receiver's
// reason: would-send, would-check, would-skip, would-fail or skipped.
func DryRunStatus(reason string) string {
	if IsLinkSkip(reason) {
		return "skipped"
	}
	switch reason {
	case DryRunSend, DryRunLink:
		return "would-send"
	case DryRunCheck:
		return "would-check"
	case DryRunSkip:
		return "would-skip"
	}
	return "would-fail"
}

// Copy runs job: a session, and while it fails with an error that is not
// permanent, up to job.Retries more, each resuming where the last one
// stopped (files delivered are not sent again; partial files resume at
// their verified blocks). It returns the tally and nil when every file was
// verified (or, in a dry run, judged), the session's error when it
// failed, or a *FilesFailedError when some files did.
func Copy(ctx context.Context, job Job) (Summary, error) {
	if err := job.checkPart(); err != nil {
		return Summary{Direction: job.Direction, Errors: []string{err.Error()}}, err
	}
	m := job.Meter
	if m == nil {
		m = &Meter{}
	}
	start := time.Now()
	m.started(start)
	var results sync.Map // manifest path -> FileResult
	onFile := func(fr FileResult) {
		results.Store(fr.Path, fr)
		if job.OnFile != nil {
			job.OnFile(fr)
		}
	}
	delivered := map[string]bool{}
	opts := job.Options.wire()
	var last TransferStats
	var runErr error
	attempts := 0
	for {
		attempts++
		prog := &Progress{}
		m.begin(prog)
		var ts TransferStats
		cfg := job.Config
		if r, ok := m.rate(); ok {
			cfg.Tuning.Rate = r // re-paced since the copy began
		}
		if job.Direction == Push {
			src := job.Source
			src.Exclude = delivered
			ts, runErr = pushOnce(ctx, cfg, src, job.Remote, strings.HasSuffix(job.Remote, "/") || job.Remote == "", opts, job.Part, prog, onFile)
		} else {
			dst := job.Local
			dst.Done = delivered
			ts, runErr = pullOnce(ctx, cfg, job.Paths, dst, opts, prog, onFile)
		}
		m.end()
		last = ts
		results.Range(func(k, v any) bool {
			if v.(FileResult).OK {
				delivered[k.(string)] = true
			}
			return true
		})
		if runErr == nil || ctx.Err() != nil || retry.IsPermanent(runErr) || attempts > job.Retries {
			break
		}
		wait := min(time.Duration(1<<min(attempts-1, 5))*time.Second, 30*time.Second)
		if job.OnRetry != nil {
			job.OnRetry(attempts, runErr, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			break
		}
	}
	sum := tally(&results, job.Options.DryRun)
	sum.Direction, sum.Attempts, sum.Elapsed = job.Direction, attempts, time.Since(start)
	sum.BytesSent, sum.BytesSparse, sum.BytesSkipped = m.totals()
	if job.Options.DryRun {
		sum.BytesSkipped = 0
	}
	sum.Failures = append(sum.Failures, last.SourceErrors...)
	sum.Unread = last.Unread
	sum.Streams, sum.Retransmits = streamSummaries(last.Sender, last.Receiver)
	sum.Transport = TransportTCP
	if job.Config.udpData() {
		sum.Transport = TransportUDP
	}
	sum.HasWire, sum.SendElapsed = last.Sender.HasWire, time.Duration(last.Sender.Elapsed)
	sum.SessionBytes = last.Sender.Bytes
	sum.HasUDP = last.Sender.HasUDP && last.Receiver.HasUDP
	for _, st := range sum.Streams {
		sum.WireBytes += st.WireBytes
		sum.ResentBytes += st.ResentBytes
		if sum.HasUDP {
			sum.Datagrams += st.Datagrams
			sum.SendCalls += st.SendCalls
			sum.LossRepaired += st.LossRepaired
		}
	}
	sum.SenderIOWait = time.Duration(last.Sender.IOWait)
	sum.ReceiverIOWait = time.Duration(last.Receiver.IOWait)
	sum.Verified = runErr == nil && len(sum.Failures) == 0 && !job.Options.DryRun
	if sum.Verified {
		// Judged only for a copy that worked: a failed one's error says why.
		var achieved float64
		if last.Receiver.Elapsed > 0 {
			achieved = float64(last.Receiver.Bytes) * 8 / (float64(last.Receiver.Elapsed) / 1e9)
		}
		rate := job.Config.Tuning.Rate
		if r, ok := m.rate(); ok {
			rate = r
		}
		sum.Bottleneck = Judge(last.Sender, last.Receiver, float64(rate), achieved)
	}
	if runErr != nil {
		sum.Errors = append([]string{runErr.Error()}, sum.Failures...)
	} else {
		sum.Errors = sum.Failures
	}
	sum.Errors = sum.Errors[:min(len(sum.Errors), 20):min(len(sum.Errors), 20)]
	sum.Interrupted = ctx.Err() != nil
	switch {
	case runErr != nil:
		return sum, runErr
	case len(sum.Failures) > 0:
		return sum, &FilesFailedError{Failed: len(sum.Failures), Total: sum.Files + len(sum.Failures), First: sum.Failures[0]}
	}
	return sum, nil
}

// tally counts the last verdict of every file.
func tally(results *sync.Map, dryRun bool) Summary {
	var sum Summary
	results.Range(func(_, v any) bool {
		fr := v.(FileResult)
		if fr.Skipped && IsLinkSkip(fr.Reason) {
			sum.Warnings = append(sum.Warnings, fr.Reason)
		}
		switch {
		case dryRun && fr.OK:
			sum.Planned = append(sum.Planned, fr)
			switch DryRunStatus(fr.Reason) {
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
			sum.Failures = append(sum.Failures, fr.Path+": "+fr.Reason)
		}
		return true
	})
	sort.Strings(sum.Failures)
	sort.Strings(sum.Warnings)
	sort.Slice(sum.Planned, func(i, j int) bool { return sum.Planned[i].Path < sum.Planned[j].Path })
	return sum
}

// streamSummaries reads each stream's account from the sender's side (the
// receiver's byte count where the sender's is missing), and the total of
// retransmits.
func streamSummaries(snd, rcv wire.Stats) ([]StreamSummary, uint32) {
	var out []StreamSummary
	var retrans uint32
	for i, s := range snd.Streams {
		r := StreamSummary{
			CC: s.CC, Bytes: s.Bytes, RTT: time.Duration(s.RTT), RTTVar: time.Duration(s.RTTVar),
			Cwnd: s.Cwnd, Retransmits: s.Retrans, DeliveryBps: float64(s.DeliveryRate) * 8,
			RwndLimited: time.Duration(s.RwndLimited), SndbufLimited: time.Duration(s.SndbufLimited),
		}
		if i < len(rcv.Streams) && r.Bytes == 0 {
			r.Bytes = rcv.Streams[i].Bytes
		}
		if snd.HasWire {
			r.WireBytes, r.ResentBytes = s.WireBytes, s.ResentBytes
		}
		if snd.HasUDP {
			r.Datagrams, r.SendCalls = s.Datagrams, s.SendCalls
		}
		if rcv.HasUDP && i < len(rcv.Streams) {
			r.LossRepaired = rcv.Streams[i].LossRepaired
		}
		retrans += s.Retrans
		out = append(out, r)
	}
	return out, retrans
}

// Meter is a copy's running count, read while it runs by whoever shows or
// reports its progress: the one count of payload bytes carried over every
// attempt, and the running attempt's progress. Safe for concurrent use.
type Meter struct {
	mu    sync.Mutex
	start time.Time
	sent  int64     // payload carried by the attempts done
	holes int64     // holes recreated by the attempts done
	cur   *Progress // the running attempt's; nil between attempts
	last  *Progress // the latest attempt's

	// pace orders re-pacing (SetRate) against a new attempt's streams
	// coming up, so whichever comes last leaves the latest rate on every
	// stream. It is taken before mu, never inside it.
	pace      sync.Mutex
	paceRate  uint64 // bits per second for the whole session; 0: no cap
	paceIsSet bool   // SetRate was called: paceRate overrides the job's Tuning.Rate
}

// Snapshot is a Meter read at one moment.
type Snapshot struct {
	Elapsed time.Duration
	// Sent is the payload carried so far, over every attempt.
	Sent int64
	// Done of Total bytes are in place in the latest attempt: sent,
	// already there, or holes (a block sent again counts once).
	Done, Total           int64
	FilesDone, FilesTotal int
}

func (m *Meter) started(t time.Time) {
	m.mu.Lock()
	m.start = t
	m.mu.Unlock()
}

func (m *Meter) begin(p *Progress) {
	p.meter = m
	m.mu.Lock()
	m.cur, m.last = p, p
	m.mu.Unlock()
}

// SetRate re-paces the copy while it runs: the session's rate becomes bps
// bits per second (0: no cap), shared evenly among its data streams as a
// session's Tuning.Rate is at its start. It applies at once to every data
// stream of the running attempt (SO_MAX_PACING_RATE on a TCP stream) and
// to the streams of every later attempt (a retry reconnects at this rate).
// Between attempts it only records the rate. The pace binds where this end
// sends, so in a push: a pull's running session keeps the pace the
// server's streams opened with, and its next attempt asks for the new one.
// It fails where the platform
// cannot pace (the rate still holds for later attempts' Tuning) or when a
// stream has closed meanwhile.
func (m *Meter) SetRate(bps uint64) error {
	m.pace.Lock()
	defer m.pace.Unlock()
	m.paceRate, m.paceIsSet = bps, true
	m.mu.Lock()
	p := m.cur
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.pace(bps)
}

// rate is the rate SetRate last set, if it was called.
func (m *Meter) rate() (uint64, bool) {
	m.pace.Lock()
	defer m.pace.Unlock()
	return m.paceRate, m.paceIsSet
}

// repace applies the rate SetRate set, if any, to p's streams: an attempt
// whose streams came up while SetRate ran might have been dialled at the
// older rate.
func (m *Meter) repace(p *Progress) {
	m.pace.Lock()
	defer m.pace.Unlock()
	if m.paceIsSet {
		p.pace(m.paceRate)
	}
}

func (m *Meter) end() {
	m.mu.Lock()
	if m.cur != nil {
		m.sent += m.cur.BytesMoved.Load()
		m.holes += m.cur.BytesHoles.Load()
		m.cur = nil
	}
	m.mu.Unlock()
}

// totals are the bytes sent and the holes recreated over every attempt,
// and the bytes the latest attempt found already there.
func (m *Meter) totals() (sent, holes, skipped int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sent, holes = m.sent, m.holes
	if m.cur != nil {
		sent += m.cur.BytesMoved.Load()
		holes += m.cur.BytesHoles.Load()
	}
	if m.last != nil {
		skipped = m.last.BytesSkipped.Load()
	}
	return sent, holes, skipped
}

// Sent is the payload carried so far, over every attempt.
func (m *Meter) Sent() int64 {
	sent, _, _ := m.totals()
	return sent
}

// Now reads the meter.
func (m *Meter) Now() Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s Snapshot
	if !m.start.IsZero() {
		s.Elapsed = time.Since(m.start)
	}
	s.Sent = m.sent
	if m.cur != nil {
		s.Sent += m.cur.BytesMoved.Load()
	}
	if p := m.last; p != nil {
		s.Done = p.BytesMoved.Load() + p.BytesSkipped.Load() + p.BytesHoles.Load()
		s.Total = p.BytesTotal.Load()
		if s.Total > 0 && s.Done > s.Total {
			s.Done = s.Total // blocks sent again count once
		}
		s.FilesDone = int(p.FilesDone.Load() + p.FilesSkipped.Load())
		s.FilesTotal = int(p.FilesTotal.Load())
	}
	return s
}

// Streams reads the running attempt's streams' transport state; none
// between attempts.
func (m *Meter) Streams() []transport.Stats {
	m.mu.Lock()
	p := m.cur
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Streams()
}
