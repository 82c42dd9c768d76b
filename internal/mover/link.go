// Package mover moves files between a client and a server over one control
// connection and N parallel data connections: the manifest, resume and
// verification travel on the control connection, the blocks on the data
// connections. The same sender and receiver engines run on either end, so a
// push and a pull are the same code with the roles swapped.
package mover

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/wire"
)

// DefaultBlockSize is the unit in which files are cut, checksummed, spread
// over streams and journaled for resume.
const DefaultBlockSize = 4 << 20

// dataConn is one data stream.
type dataConn struct {
	conn net.Conn     // what to read and write (TLS or TCP)
	tcp  *net.TCPConn // the socket under it, for TCP_INFO and sendfile
	r    io.Reader    // buffered reader holding anything read past the join
	tls  bool
	// sendfile says whether large blocks go by sendfile(2). Not under TLS,
	// and not to a loopback peer: there the receiver's copy out of the
	// sender's page-cache pages costs more than the sender's copy it saves
	// (measured: 2 GiB tmpfs to tmpfs at 11 against 12.5 Gbit/s, and
	// memory to memory at 14 against 31 Gbit/s with BBR).
	sendfile bool
	sent     atomic.Int64 // payload bytes written
	lowat    int          // the SO_RCVLOWAT in force
	// useLowat says whether SO_RCVLOWAT may be used: only where the round
	// trip is short. Setting the mark while the receive buffer is still
	// small makes the kernel clamp the advertised window to the mark
	// (tcp_set_rcvlowat sets window_clamp), and over a long path a
	// 256 KiB window is a few MB/s: measured over 50 ms, copies crawled at
	// 4 MiB/s for up to 10 s before autotuning grew out of it.
	useLowat bool
}

func newDataConn(c net.Conn, r io.Reader) *dataConn {
	d := &dataConn{conn: c, r: r}
	switch t := c.(type) {
	case *net.TCPConn:
		d.tcp = t
	case *tls.Conn:
		d.tls = true
		if tc, ok := t.NetConn().(*net.TCPConn); ok {
			d.tcp = tc
		}
	}
	if d.r == nil {
		d.r = c
	}
	d.sendfile = d.tcp != nil && !d.tls && !isLoopback(c.RemoteAddr())
	if d.tcp != nil && !d.tls {
		// The handshake has given the kernel a first RTT sample.
		info, err := transport.GetInfo(d.tcp)
		d.useLowat = err == nil && info.RTT > 0 && info.RTT < lowatMaxRTT
	}
	return d
}

// lowatMaxRTT is the longest round trip over which a stream uses
// SO_RCVLOWAT: there even a window clamped to one chunk (256 KiB) carries
// 2 GB/s.
const lowatMaxRTT = time.Millisecond

// setLowat asks the kernel not to wake this stream's reader until n bytes
// are queued (SO_RCVLOWAT). The reader only ever asks for bytes the sender
// is bound to send (the rest of a header or of a block), so it never waits
// for bytes that will not come; and where it waits it wakes once per chunk
// instead of once per segment: memory to memory, 33 became 50 Gbit/s.
func (d *dataConn) setLowat(n int) {
	if !d.useLowat || n == d.lowat {
		return
	}
	if rc, err := d.tcp.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { setRcvLowat(int(fd), n) })
	}
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
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

func (d *dataConn) stats() wire.StreamStats {
	s := wire.StreamStats{Bytes: d.sent.Load()}
	if d.tcp == nil {
		return s
	}
	info, err := transport.GetInfo(d.tcp)
	if err != nil {
		return s
	}
	s.RTT = int64(info.RTT)
	s.RTTVar = int64(info.RTTVar)
	s.Cwnd = info.Cwnd
	s.Retrans = info.TotalRetrans
	s.BusyTime = int64(info.BusyTime)
	s.RwndLimited = int64(info.RwndLimited)
	s.SndbufLimited = int64(info.SndbufLimited)
	s.PacingRate = info.PacingRate
	s.DeliveryRate = info.DeliveryRate
	return s
}

// link is an established session seen from one end.
type link struct {
	ctrl      *ctrl
	data      []*dataConn
	blockSize int64
	opts      wire.Transfer
	// stall bounds how long any read or write may make no progress.
	stall  time.Duration
	prog   *Progress
	onFile func(FileResult) // may be nil; called from several goroutines

	closeOnce sync.Once
}

// close tears the whole session down: every blocked read or write returns.
func (l *link) close() {
	l.closeOnce.Do(func() {
		l.ctrl.conn.Close()
		for _, d := range l.data {
			d.conn.Close()
		}
	})
}

func (l *link) fileResult(r FileResult) {
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

	// tcps are the session's data sockets, for Streams.
	tcps atomic.Pointer[[]*net.TCPConn]
}

// setStreams records the session's data sockets.
func (p *Progress) setStreams(l *link) {
	if p == nil {
		return
	}
	var tcps []*net.TCPConn
	for _, d := range l.data {
		if d.tcp != nil {
			tcps = append(tcps, d.tcp)
		}
	}
	p.tcps.Store(&tcps)
}

// Streams reads the TCP state (TCP_INFO) of each data connection of the
// session under way: nil before it connects, or where the kernel cannot
// say. A connection already closed is left out.
func (p *Progress) Streams() []transport.Info {
	tcps := p.tcps.Load()
	if tcps == nil {
		return nil
	}
	out := make([]transport.Info, 0, len(*tcps))
	for _, c := range *tcps {
		if in, err := transport.GetInfo(c); err == nil {
			out = append(out, in)
		}
	}
	return out
}

// FileResult reports one file's outcome.
type FileResult struct {
	Path     string
	Size     int64
	OK       bool
	Skipped  bool
	Reason   string
	CRC32C   uint32
	Adler32  uint32
	HasAdler bool
}
