package datanode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/transport"
)

// push is one session's worth of a copy task: files that land under one
// destination directory, each named in the manifest by its path relative
// to that directory.
type push struct {
	// Remote is the destination directory with a trailing slash, or ""
	// for the destination root.
	Remote string
	Items  []pushItem
}

// pushItem is one file of a push: its source path under the root and its
// name in the manifest (relative to Remote; several components).
type pushItem struct {
	Path, Name string
}

// groupPushes splits a copy task's files into pushes: a file's Dest is
// cut into a directory and a name, the name being the longest tail of
// path components Dest shares with the source path (at least its last),
// so a tree lands with one push ("run1/a/b.dat" → "in/run1/a/b.dat":
// Remote "in/", name "run1/a/b.dat"). Pushes come in the order of their
// first file.
func groupPushes(files []transfer.JobFile) ([]push, error) {
	var out []push
	at := map[string]int{}
	for _, f := range files {
		src, err := cleanRel(f.Path)
		if err != nil || src == "." {
			return nil, fmt.Errorf("source %q: not a file path under the root", f.Path)
		}
		dst, err := cleanRel(f.Dest)
		if err != nil || dst == "." {
			return nil, fmt.Errorf("destination %q: not a file path under the root", f.Dest)
		}
		sp, dp := strings.Split(src, "/"), strings.Split(dst, "/")
		k := 0
		for k < len(sp) && k < len(dp) && sp[len(sp)-1-k] == dp[len(dp)-1-k] {
			k++
		}
		k = max(k, 1)
		remote := strings.Join(dp[:len(dp)-k], "/")
		if remote != "" {
			remote += "/"
		}
		i, ok := at[remote]
		if !ok {
			i = len(out)
			at[remote] = i
			out = append(out, push{Remote: remote})
		}
		out[i].Items = append(out[i].Items, pushItem{Path: src, Name: strings.Join(dp[len(dp)-k:], "/")})
	}
	return out, nil
}

// policyOf maps a job's policy to the mover's (update when unset).
func policyOf(p string) (mover.Policy, error) {
	switch p {
	case "", transfer.PolicyUpdate:
		return mover.Update, nil
	case transfer.PolicyOverwrite:
		return mover.Overwrite, nil
	case transfer.PolicySkip:
		return mover.Skip, nil
	}
	return 0, fmt.Errorf("unknown policy %q", p)
}

// checksumHex is a file's checksum in the job's algorithm, in hex, or ""
// when the verdict carries none (a file left alone without a comparison):
// spelled as the destination's receipt spells it (mover.SumHex).
func checksumHex(algo string, fr mover.FileResult) string {
	return mover.SumHex(algo == transfer.ChecksumAdler32, fr)
}

// fileChecksumHex is the whole file's checksum a part push that completed
// the file reports, in the job's algorithm, or "" when it has none (a
// skip that left the file unread).
func fileChecksumHex(algo string, fr mover.FileResult) string {
	return mover.FileSumHex(algo == transfer.ChecksumAdler32, fr)
}

// partJob is the mover's part of a part task (nil for a task of whole
// files), checked against the task's one file.
func partJob(w apiv1.TaskWork) (*mover.Part, error) {
	p := w.Task.Part
	if p == nil {
		return nil, nil
	}
	if len(w.Files) != 1 {
		return nil, fmt.Errorf("part %d of a task of %d files: want one", p.Index, len(w.Files))
	}
	return &mover.Part{Offset: p.Offset, Length: p.Length}, nil
}

// classOf is the class a report gives a failure of class f, as the mover
// found it where the error was made: internal where it did not say (a
// destination server older than protocol version 10).
func classOf(f retry.Fault) string {
	if f == "" {
		return apiv1.ClassInternal
	}
	return string(f)
}

// permanentClass says whether a failure of class c is final for the file
// (not-found, permission, no-space), for the Permanent of a report, which
// controllers older than the class decide by.
func permanentClass(c string) bool {
	return c == apiv1.ClassNotFound || c == apiv1.ClassPermission || c == apiv1.ClassNoSpace
}

// batcher gathers a copy task's file verdicts between reports.
type batcher struct {
	mu      sync.Mutex
	pending []apiv1.FileReport
	done    int64 // bytes of the files reported OK
}

func (b *batcher) add(fr apiv1.FileReport) {
	b.mu.Lock()
	b.pending = append(b.pending, fr)
	if fr.OK {
		b.done += fr.Bytes
	}
	b.mu.Unlock()
}

// take empties the batch.
func (b *batcher) take() []apiv1.FileReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pending
	b.pending = nil
	return p
}

// putBack returns a batch that could not be sent, ahead of what came
// since.
func (b *batcher) putBack(p []apiv1.FileReport) {
	if len(p) == 0 {
		return
	}
	b.mu.Lock()
	b.pending = append(p, b.pending...)
	b.mu.Unlock()
}

// runCopy pushes a copy task's files to its destination node and reports
// each file's verdict, in a report about every ReportEvery and a last one
// with Done.
func (n *node) runCopy(ctx context.Context, t *running) {
	w := t.work
	id := w.Task.ID
	b := &batcher{}
	var (
		meterMu sync.Mutex
		meter   *mover.Meter
		sentBy  int64 // bytes sent by the pushes done
	)
	sent := func() int64 {
		meterMu.Lock()
		defer meterMu.Unlock()
		s := sentBy
		if meter != nil {
			s += meter.Sent()
		}
		return s
	}
	report := func(c context.Context, r apiv1.TaskReport) (apiv1.TaskAnswer, error) {
		r.Attempt = w.Task.Attempt
		r.BytesDone = sent()
		if el := time.Since(t.prog.start).Seconds(); el > 0 {
			r.ThroughputBps = float64(r.BytesDone) * 8 / el
		}
		t.prog.set(r.BytesDone)
		return n.cfg.Client.ReportTask(c, id, r)
	}
	// The reports while the pushes run.
	stopReports := make(chan struct{})
	reportsDone := make(chan struct{})
	go func() {
		defer close(reportsDone)
		tick := time.NewTicker(n.cfg.ReportEvery)
		defer tick.Stop()
		for {
			select {
			case <-stopReports:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			batch := b.take()
			since := n.claimsSoFar()
			ans, err := report(ctx, apiv1.TaskReport{Files: batch})
			if err != nil && refusal(err) {
				// The controller will not hear this node on the task
				// (another node holds it now, or it is gone): no later
				// report would be heard either.
				n.stopAttempt(id, w.Task.Attempt, fmt.Errorf("%w: %v", errCancelled, err))
				continue
			}
			if err != nil {
				b.putBack(batch)
				continue
			}
			if ans.Cancel {
				n.stopAttempt(id, w.Task.Attempt, fmt.Errorf("%w: %s", errCancelled, orWord(ans.Reason, "no reason given")))
				continue
			}
			if ans.Task.ID == id && ans.Task.Attempt == w.Task.Attempt && ans.Task.State == transfer.TaskActive {
				// The task's pace now (the job's idle bookings lent to
				// it, or taken back), unless a claim's rates came since.
				n.takeRates([]apiv1.TaskRate{{Task: id, Attempt: w.Task.Attempt, RateBps: ans.Task.RateBps}}, false, since)
			}
		}
	}()

	runErr := n.pushAll(ctx, w, b, func(m *mover.Meter, doneSent int64) {
		meterMu.Lock()
		meter = m
		sentBy += doneSent
		meterMu.Unlock()
		t.setMeter(m)
	})
	close(stopReports)
	<-reportsDone

	last := apiv1.TaskReport{Done: true}
	if runErr != nil {
		last.Error = runErr.Error()
		last.Class = classOf(mover.FaultOf(runErr))
		last.Permanent = retry.IsPermanent(runErr) || permanentClass(last.Class)
		if ctx.Err() != nil {
			last.Error = "stopped: " + context.Cause(ctx).Error()
			last.Permanent, last.Class = false, apiv1.ClassInternal
		}
	}
	n.log.Info("copy task ended", "task", id, "job", w.Task.Job, "attempt", w.Task.Attempt, "bytes", sent(), "err", last.Error)
	n.deliver(ctx, t, func(c context.Context) (apiv1.TaskAnswer, error) {
		last.Files = b.take()
		ans, err := report(c, last)
		if err != nil {
			b.putBack(last.Files)
		}
		return ans, err
	})
}

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// pushAll runs the task's pushes one after the other; each file's verdict
// goes to b. meterOf is told the meter of each push as it starts and the
// bytes the one before it sent.
func (n *node) pushAll(ctx context.Context, w apiv1.TaskWork, b *batcher, meterOf func(*mover.Meter, int64)) error {
	pushes, err := groupPushes(w.Files)
	if err != nil {
		return retry.Permanent(err)
	}
	pol, err := policyOf(w.Policy)
	if err != nil {
		return retry.Permanent(err)
	}
	part, err := partJob(w)
	if err != nil {
		return retry.Permanent(err)
	}
	if part != nil && pol == mover.Overwrite {
		// Overwrite would start the file anew at each part; Update
		// replaces a file that differs all the same.
		pol = mover.Update
	}
	if w.Address == "" {
		return retry.Permanent(errors.New("the task names no destination server"))
	}
	if err := transfer.CheckTransport(w.Transport, w.CC); err != nil {
		return retry.Permanent(fmt.Errorf("the job's %w", err))
	}
	if w.Transport != transfer.TransportUDP {
		if err := transport.CheckCC(w.CC); err != nil {
			// The job asks for a congestion control this host lacks: no
			// attempt here would do better until someone loads it.
			return retry.Permanent(fmt.Errorf("the job's %w", err))
		}
	} else if w.CC == "fixed" && n.clientConfig(w).Tuning.Rate == 0 {
		return retry.Permanent(errors.New("the job's rate control fixed sends at a set rate: the task has no booked rate and the data node no --max-rate to share"))
	}
	algo := w.Checksum
	var firstErr error
	var prevSent int64
	for _, p := range pushes {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		items := make([]mover.SourceItem, len(p.Items))
		srcOf := make(map[string]string, len(p.Items))
		for i, it := range p.Items {
			items[i] = mover.SourceItem{Root: n.root, Path: it.Path, Name: it.Name}
			srcOf[it.Name] = it.Path
		}
		var seenMu sync.Mutex
		seen := map[string]bool{}
		m := &mover.Meter{}
		meterOf(m, prevSent)
		job := mover.Job{
			Config:    n.clientConfig(w),
			Options:   mover.Options{Policy: pol, Adler32: algo == transfer.ChecksumAdler32},
			Direction: mover.Push,
			Source:    mover.Source{Items: items},
			Remote:    p.Remote,
			Part:      part,
			Retries:   n.cfg.Retries,
			Meter:     m,
			OnFile: func(fr mover.FileResult) {
				src, ok := srcOf[fr.Path]
				if !ok {
					return // not one of ours (a directory's name)
				}
				seenMu.Lock()
				seen[fr.Path] = true
				seenMu.Unlock()
				r := apiv1.FileReport{Path: src, OK: fr.OK, Bytes: fr.Size}
				if part != nil {
					r.Part = w.Task.Part
				}
				if fr.OK {
					// The destination's receipt: without it the
					// controller counts no file as arrived.
					if fr.Receipt != nil {
						r.Receipt = grant.Spell(fr.Receipt)
					}
					r.Checksum = checksumHex(algo, fr)
					if part != nil {
						r.Complete, r.FileChecksum = fr.Complete, fileChecksumHex(algo, fr)
					}
				} else {
					r.Error, r.Class = fr.Reason, classOf(fr.Fault)
					r.Permanent = permanentClass(r.Class)
				}
				b.add(r)
			},
			OnRetry: func(attempt int, err error, wait time.Duration) {
				n.log.Info("push failed; resuming", "task", w.Task.ID, "attempt", attempt, "err", err, "wait", wait)
			},
		}
		sum, err := mover.Copy(ctx, job)
		prevSent = m.Sent()
		if ctx.Err() == nil {
			reportUnread(p, sum.Unread, seen, b)
		}
		var ff *mover.FilesFailedError
		switch {
		case err == nil:
		case errors.As(err, &ff):
			// The files' verdicts say it; the task goes on.
			if firstErr == nil {
				firstErr = err
			}
		default:
			return err
		}
	}
	meterOf(nil, prevSent)
	return firstErr
}

// taskRate is the pace of a task's pushes. A booked task runs at its
// current share of its pair's booking, as the controller last said (it
// planned the booking within the nodes' --max-rate). An unbooked one gets
// an equal share of --max-rate among the tasks running now (itself
// included), so the node stays within MaxRateBps (0: no pace). Both are
// set again as tasks start and end (node.repace).
func taskRate(booked, nodeMax uint64, running int) uint64 {
	if booked > 0 || nodeMax == 0 {
		return booked
	}
	return nodeMax / uint64(max(running, 1))
}

// clientConfig is the mover client's configuration of a task's pushes.
//
// A UDP job's pushes run its rate control; without one, fixed at the
// task's booked rate where the job booked one, and fast otherwise (never
// serve --cc, a kernel's congestion control).
func (n *node) clientConfig(w apiv1.TaskWork) mover.ClientConfig {
	tu := mover.Tuning{CC: orWord(w.CC, n.cfg.CC), Rate: taskRate(w.Task.RateBps, n.cfg.MaxRateBps, n.running()), DSCP: -1}
	if w.Transport == transfer.TransportUDP {
		tu.Transport, tu.CC = mover.TransportUDP, w.CC
		switch {
		case tu.CC == "" && w.Task.RateBps > 0:
			tu.CC = "fixed"
		case tu.CC == "":
			tu.CC = "fast"
		}
	}
	return mover.ClientConfig{
		Addr:      w.Address,
		Grant:     w.Grant,
		Token:     n.cfg.Token,
		TLS:       pushTLS(n.cfg.TLS, w.Address),
		Tuning:    tu,
		Streams:   w.Task.Streams,
		Transport: n.cfg.Transport,
		LocalAddr: n.sourceAddr(w),
	}
}

// sourceAddr is the address the task's pushes leave from: the one the
// controller gives (its pair's flow spec's source) when this host has it.
// Otherwise the kernel chooses, and the node says so: a booked pair's
// packets may then miss their reservation.
func (n *node) sourceAddr(w apiv1.TaskWork) string {
	if w.SourceAddr == "" {
		return ""
	}
	if !hostHas(w.SourceAddr) {
		n.log.Warn("the controller asks pushes to leave from an address this host does not have; the kernel chooses",
			"task", w.Task.ID, "source_addr", w.SourceAddr)
		return ""
	}
	return w.SourceAddr
}

// hostHas reports whether addr is one of this host's (this network
// namespace's) interface addresses.
func hostHas(addr string) bool {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	as, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == ip.Unmap() {
			return true
		}
	}
	return false
}

// pushTLS is the TLS configuration of a push to addr: cfg with the
// destination's host as the name its certificate must carry, unless cfg
// names one itself. nil (plain TCP) stays nil.
func pushTLS(cfg *tls.Config, addr string) *tls.Config {
	if cfg == nil || cfg.ServerName != "" {
		return cfg
	}
	c := cfg.Clone()
	c.ServerName, _, _ = net.SplitHostPort(addr)
	return c
}

// reportUnread reports the files of a push that got no verdict because
// the sender could not read them (the copy's unread sources, by source
// path): such a file failed, with the class of why (gone: not-found).
func reportUnread(p push, unread []mover.SourceError, seen map[string]bool, b *batcher) {
	for _, it := range p.Items {
		if seen[it.Name] {
			continue
		}
		for _, u := range unread {
			if u.Path == it.Path {
				c := classOf(u.Fault)
				b.add(apiv1.FileReport{Path: it.Path, Error: u.Reason, Class: c, Permanent: permanentClass(c)})
				break
			}
		}
	}
}
