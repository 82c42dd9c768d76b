// Package mover moves files between a client and a server over one control
// connection and N parallel data connections: the manifest, resume and
// verification travel on the control connection, the blocks on the data
// connections. The same sender and receiver engines run on either end, so a
// push and a pull are the same code with the roles swapped.
package mover

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/wire"
)

// DefaultBlockSize is the unit in which files are cut, checksummed, spread
// over streams and journaled for resume.
const DefaultBlockSize = 4 << 20

// dataConn is one data stream.
type dataConn struct {
	conn   net.Conn       // what to read and write (TLS or the stream itself)
	stream transport.Conn // the stream under it, for statistics; nil if none
	r      io.Reader      // buffered reader holding anything read past the join
	// files sends large blocks without a copy (sendfile(2) on TCP); nil
	// where the stream cannot, under TLS, and to a loopback peer: there the
	// receiver's copy out of the sender's page-cache pages costs more than
	// the sender's copy it saves (measured: 2 GiB tmpfs to tmpfs at 11
	// against 12.5 Gbit/s, and memory to memory at 14 against 31 Gbit/s
	// with BBR).
	files transport.FileSender
	sent  atomic.Int64 // payload bytes written
	lowat int          // the read low-water mark in force
	// lowater sets the read low-water mark (SO_RCVLOWAT on TCP); nil where
	// the stream cannot or must not: only where the round trip is short.
	// Setting the mark while the receive buffer is still small makes the
	// kernel clamp the advertised window to the mark (tcp_set_rcvlowat sets
	// window_clamp), and over a long path a 256 KiB window is a few MB/s:
	// measured over 50 ms, copies crawled at 4 MiB/s for up to 10 s before
	// autotuning grew out of it.
	lowater transport.ReadLowater
}

func newDataConn(c net.Conn, r io.Reader) *dataConn {
	d := &dataConn{conn: c, r: r, stream: transport.StreamOf(c)}
	if d.r == nil {
		d.r = c
	}
	// A layer above the stream (TLS) must see every byte: no zero copy, and
	// no low-water mark on bytes it reads in records of its own.
	_, layered := c.(interface{ NetConn() net.Conn })
	if d.stream == nil || layered {
		return d
	}
	if fs, ok := d.stream.(transport.FileSender); ok && !isLoopback(c.RemoteAddr()) {
		d.files = fs
	}
	if lw, ok := d.stream.(transport.ReadLowater); ok {
		// The handshake has given the transport a first RTT sample.
		st, err := d.stream.Stats()
		if err == nil && st.RTT > 0 && st.RTT < lowatMaxRTT {
			d.lowater = lw
		}
	}
	return d
}

// lowatMaxRTT is the longest round trip over which a stream uses a read
// low-water mark: there even a window clamped to one chunk (256 KiB) carries
// 2 GB/s.
const lowatMaxRTT = time.Millisecond

// setLowat asks the transport not to wake this stream's reader until n
// bytes are queued (SO_RCVLOWAT). The reader only ever asks for bytes the
// sender is bound to send (the rest of a header or of a block), so it never
// waits for bytes that will not come; and where it waits it wakes once per
// chunk instead of once per segment: memory to memory, 33 became 50 Gbit/s.
func (d *dataConn) setLowat(n int) {
	if d.lowater == nil || n == d.lowat {
		return
	}
	d.lowater.SetReadLowat(n)
	d.lowat = n
}

// expect sets the low-water mark for a read of n bytes, less what the
// reader's buffer already holds: the kernel must not wait for bytes that
// were read ahead.
func (d *dataConn) expect(n int) {
	if b, ok := d.r.(interface{ Buffered() int }); ok {
		n -= b.Buffered()
	}
	d.setLowat(max(n, 1))
}

func isLoopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// stats is the stream's account; ok says the transport could give it (the
// wire and datagram figures are then filled in).
func (d *dataConn) stats() (s wire.StreamStats, ok bool) {
	s = wire.StreamStats{Bytes: d.sent.Load()}
	if d.stream == nil {
		return s, false
	}
	info, err := d.stream.Stats()
	if err != nil {
		return s, false
	}
	s.RTT = int64(info.RTT)
	s.RTTVar = int64(info.RTTVar)
	s.Cwnd = info.Cwnd
	s.Retrans = info.Retransmits
	s.BusyTime = int64(info.BusyTime)
	s.RwndLimited = int64(info.ReceiverLimited)
	s.SndbufLimited = int64(info.SenderLimited)
	s.PacingRate = info.PacingRate
	s.DeliveryRate = info.DeliveryRate
	s.CC = info.CC
	s.WireBytes, s.ResentBytes = info.BytesSent, info.BytesRetrans
	s.Datagrams, s.SendCalls, s.LossRepaired = info.Datagrams, info.SendCalls, info.LossRepaired
	return s, true
}

// accounts is the streams' accounts as a side's Stats carries them
// (st.Streams, st.Bytes added up), with the sections the version agreed
// and the transport allow: the congestion controls (version 5), what each
// stream put on the wire and sent again (version 6, where every stream
// could say) and, for UDP, datagrams and loss repaired (version 7).
func (l *link) accounts(st *wire.Stats) {
	all := true
	for _, d := range l.data {
		ss, ok := d.stats()
		all = all && ok
		st.Bytes += ss.Bytes
		st.Streams = append(st.Streams, ss)
	}
	v := l.ctrl.version
	st.HasCC = v >= wire.VersionCC
	st.HasWire = all && v >= wire.VersionBench
	st.HasUDP = all && l.udp && v >= wire.VersionUDP
}

// link is an established session seen from one end.
type link struct {
	ctrl      *ctrl
	data      []*dataConn
	blockSize int64
	opts      wire.Transfer
	// part is the range a part push carries of its one file; nil for a
	// whole push (and a pull).
	part *wire.Part
	// stall bounds how long any read or write may make no progress.
	stall  time.Duration
	prog   *Progress
	onFile func(FileResult) // may be nil; called from several goroutines
	// udp: the data connections are UDP streams (their accounts carry
	// datagrams and loss repaired, protocol version 7).
	udp bool

	closeOnce sync.Once

	// dmu orders the connections' deadlines against cut: once the session
	// is cut (cutMsg set), every deadline is in the past and stays there.
	dmu    sync.RWMutex
	cutMsg string
}

// close tears the whole session down: every blocked read or write returns.
// A session that was cut waits first, at most cutGrace, for the peer to
// close its end: closed now, with the peer's blocks still unread here, the
// connections would be reset, and the peer could see a reset on a data
// stream before the reason on the control connection.
func (l *link) close() {
	l.closeOnce.Do(func() {
		if l.cutReason() != "" {
			l.awaitPeerClose()
		}
		l.ctrl.conn.Close()
		for _, d := range l.data {
			d.conn.Close()
		}
	})
}

// stop ends the session's I/O after a failure: it closes the session,
// unless it was cut, whose deadlines have stopped every read and write
// already and whose close waits for the peer.
func (l *link) stop() {
	if l.cutReason() == "" {
		l.close()
	}
}

// cutGrace bounds how long a cut session waits to deliver its reason.
const cutGrace = 2 * time.Second

// cut ends a running session with a reason the peer reads as a permanent
// refusal: the reason goes first on the control connection, then every
// read and write of the session stops at once (a receiver writes no more
// into its partial files, which stay for a resume), while the connections
// stay open until the peer has read the reason (close).
func (l *link) cut(reason string) {
	l.dmu.Lock()
	if l.cutMsg != "" {
		l.dmu.Unlock()
		return
	}
	l.dmu.Unlock()
	l.ctrl.conn.SetWriteDeadline(time.Now().Add(cutGrace))
	l.ctrl.send(&wire.Error{Code: wire.CodeRefused, Msg: reason})
	l.dmu.Lock()
	defer l.dmu.Unlock()
	l.cutMsg = reason
	l.ctrl.conn.SetDeadline(pastDeadline)
	for _, d := range l.data {
		d.conn.SetDeadline(pastDeadline)
	}
}

// pastDeadline makes every blocked and later read or write fail at once.
var pastDeadline = time.Unix(1, 0)

// cutReason is why the session was cut, or "".
func (l *link) cutReason() string {
	l.dmu.RLock()
	defer l.dmu.RUnlock()
	return l.cutMsg
}

// awaitPeerClose reads and drops what the peer still sends on the control
// connection until it closes it, or cutGrace passes. The engine that read
// it has stopped; should a reader still be on its way out, its deadline
// (past, set by cut) may interrupt a read here, which is read again.
func (l *link) awaitPeerClose() {
	end := time.Now().Add(cutGrace)
	buf := make([]byte, 4096)
	for time.Now().Before(end) {
		l.ctrl.conn.SetReadDeadline(end)
		if _, err := l.ctrl.conn.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return
		}
	}
}

func (l *link) fileResult(r FileResult) {
	if l.part == nil {
		r.Complete = r.OK && !l.opts.Select.DryRun
		if r.Complete {
			r.FileCRC32C, r.FileAdler32 = r.CRC32C, r.Adler32
		}
	} else {
		r.Part = &Part{Offset: l.part.Offset, Length: l.part.Length}
		r.Size = l.part.Length
	}
	switch {
	case r.Skipped:
		l.prog.FilesSkipped.Add(1)
	case r.OK:
		l.prog.FilesDone.Add(1)
	default:
		l.prog.FilesFailed.Add(1)
	}
	if l.onFile != nil {
		l.onFile(r)
	}
}

// deadline arms a stall deadline on c for the next operation.
func (l *link) deadline(c net.Conn, write bool) {
	l.dmu.RLock()
	defer l.dmu.RUnlock()
	if l.cutMsg != "" {
		c.SetDeadline(pastDeadline)
		return
	}
	if l.stall <= 0 {
		return
	}
	t := time.Now().Add(l.stall)
	if write {
		c.SetWriteDeadline(t)
	} else {
		c.SetReadDeadline(t)
	}
}

// noReadDeadline lifts c's read deadline (a stream waiting for its next
// block may idle), unless the session was cut.
func (l *link) noReadDeadline(c net.Conn) {
	l.dmu.RLock()
	defer l.dmu.RUnlock()
	if l.cutMsg == "" {
		c.SetReadDeadline(time.Time{})
	}
}

// keepalive pings the peer on the control connection until done closes, so
// each side's control reader, which allows the stall timeout between
// messages, hears from a live peer even while no file event is due.
func (l *link) keepalive(done <-chan struct{}) {
	if l.stall <= 0 {
		return
	}
	every(l.stall/3, done, func() bool {
		return l.ctrl.queue(&wire.Ping{Stamp: time.Now().UnixNano()}) == nil
	})
}

// every calls fn each period until done closes or fn returns false.
func every(period time.Duration, done <-chan struct{}, fn func() bool) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if !fn() {
				return
			}
		}
	}
}

// readCtrl reads the next control message, allowing the stall timeout.
func (l *link) readCtrl() (wire.Msg, error) {
	l.deadline(l.ctrl.conn, false)
	return l.ctrl.read()
}

// readFull fills p from a data stream, re-arming the stall deadline on every
// read that makes progress, so a slow but moving stream is never cut off.
func (l *link) readFull(d *dataConn, p []byte) error {
	for n := 0; n < len(p); {
		l.deadline(d.conn, false)
		d.expect(len(p) - n)
		k, err := d.r.Read(p[n:])
		n += k
		if err != nil {
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			if n == len(p) {
				return nil
			}
			return err
		}
	}
	return nil
}

// Progress counts a transfer's advance; the engines update it as they go and
// a reporter reads it at any time.
type Progress struct {
	FilesTotal   atomic.Int64 // entries announced (files and symlinks)
	FilesDone    atomic.Int64 // verified and in place
	FilesSkipped atomic.Int64 // left alone (already there, up to date)
	FilesFailed  atomic.Int64
	BytesTotal   atomic.Int64 // sizes announced
	BytesMoved   atomic.Int64 // payload bytes carried by this run
	BytesSkipped atomic.Int64 // bytes already at the destination (resumed or skipped)
	BytesHoles   atomic.Int64 // holes of sparse files, recreated without sending

	// streams are the session's data streams, for Streams.
	streams atomic.Pointer[[]transport.Conn]
	// meter is the copy's Meter, which may re-pace the streams; nil for a
	// server's session.
	meter *Meter
}

// setStreams records the session's data streams.
func (p *Progress) setStreams(l *link) {
	if p == nil {
		return
	}
	var streams []transport.Conn
	for _, d := range l.data {
		if d.stream != nil {
			streams = append(streams, d.stream)
		}
	}
	p.streams.Store(&streams)
	if p.meter != nil {
		p.meter.repace(p)
	}
}

// pace shares bps bits per second (0: no cap) evenly among the session's
// data streams, as tuningOptions does at its start.
func (p *Progress) pace(bps uint64) error {
	streams := p.streams.Load()
	if streams == nil || len(*streams) == 0 {
		return nil
	}
	var per uint64
	if bps > 0 {
		per = max(bps/8/uint64(len(*streams)), 1)
	}
	var errs []error
	for _, c := range *streams {
		if err := c.SetPacingRate(per); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("re-pace the session's streams: %w", errors.Join(errs...))
	}
	return nil
}

// Streams reads the statistics of each data stream of the session under
// way: nil before it connects, or where the transport cannot say. A
// stream already closed is left out.
func (p *Progress) Streams() []transport.Stats {
	streams := p.streams.Load()
	if streams == nil {
		return nil
	}
	out := make([]transport.Stats, 0, len(*streams))
	for _, c := range *streams {
		if in, err := c.Stats(); err == nil {
			out = append(out, in)
		}
	}
	return out
}

// FileResult reports one file's outcome.
type FileResult struct {
	Path string
	// Size is the file's size; for a part push, the part's length.
	Size    int64
	OK      bool
	Skipped bool
	Reason  string
	// CRC32C and Adler32 are the checksums of the file, or of the part's
	// bytes for a part push (both ends agreed on them).
	CRC32C   uint32
	Adler32  uint32
	HasAdler bool
	// Part is set for a part push: the range this verdict is about.
	Part *Part
	// Complete says the whole file is in place under its final name,
	// verified: for a whole push, OK (outside a dry run); for a part push,
	// this session put the file in place, or found it there already and
	// equal under the policy.
	Complete bool
	// FileCRC32C and FileAdler32 are the whole file's checksums when
	// Complete: for a part push, as the destination combined them from
	// every block it verified (zero when a skip left the file unread, as
	// under Skip).
	FileCRC32C, FileAdler32 uint32
	// Receipt is the destination's receipt of the verdict (a push under
	// a grant to a data node of protocol version 9 or later; nil
	// otherwise): a MAC the transfer service's controller checks with
	// the destination node's secret (grant.Receipt, over the checksums
	// as SumHex and FileSumHex spell them).
	Receipt []byte
	// Fault is the class of a failed file's failure, as the end that
	// failed it found it (the receiver's word across the wire from
	// protocol version 10 on; "" from an older receiver, which does not
	// say); "" for a file that did not fail.
	Fault retry.Fault
}
