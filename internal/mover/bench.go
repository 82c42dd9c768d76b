package mover

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/wire"
)

// benchBuffer is what a memory-to-memory sender sends, over and over.
const benchBuffer = 16 << 20

// benchChunk is how much of a file a stream takes at a time: small enough
// that the streams finish the file together and stop soon after the
// duration, large enough that the shared cursor is rarely touched.
const benchChunk = 1 << 20

// benchSource is an in-memory file of random bytes: sendfile moves its
// pages to the sockets without a copy, as the file path of cp does.
var benchSource = sync.OnceValues(func() (*os.File, error) {
	f, err := memFile("lightpath-bench")
	if err != nil {
		return nil, err
	}
	buf := make([]byte, benchBuffer)
	rand.Read(buf)
	if _, err := f.WriteAt(buf, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
})

// benchFile is a file the sending streams share: each takes the next
// chunk, so the file is read once, front to back, by all of them.
type benchFile struct {
	f    *os.File
	size int64
	// direct: f was opened O_DIRECT, so it is read in aligned chunks
	// into aligned buffers, never with sendfile, through fd.
	direct bool
	fd     int
	next   atomic.Int64
	// ioWait is the time spent reading it (where the streams read it
	// themselves; sendfile reads and sends in one call).
	ioWait atomic.Int64
}

// directAlign is the alignment of O_DIRECT reads: offsets, lengths and
// buffers in multiples of it (the logical block size is at most 4 KiB on
// the disks a data node has).
const directAlign = 4096

// benchOpenFlags are the flags a bench's file opens with: without
// blocking should it be a FIFO (it is refused once open), and with direct
// around the page cache.
func benchOpenFlags(direct bool) (int, error) {
	flags := os.O_RDONLY | unix.O_NONBLOCK
	if direct {
		d, err := directFlag()
		if err != nil {
			return 0, err
		}
		flags |= d
	}
	return flags, nil
}

// OpenBenchFile opens a file for a bench to send: a regular file, not
// empty, read through the page cache as any reader would, or with direct
// straight from the disk (O_DIRECT), which the file's file system must
// offer (tmpfs before Linux 6.6 does not).
func OpenBenchFile(name string, direct bool) (*os.File, error) {
	flags, err := benchOpenFlags(direct)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, flags, 0)
	if err != nil {
		return nil, directOpenError(err, direct)
	}
	if err := checkBenchFile(f, name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// directOpenError says why a file did not open: EINVAL from an O_DIRECT
// open is a file system that cannot read around its cache.
func directOpenError(err error, direct bool) error {
	if direct && errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w: its file system cannot read around the page cache (O_DIRECT): drop --direct", err)
	}
	return err
}

func checkBenchFile(f *os.File, name string) error {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory: a bench sends one regular file", name)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", name)
	case fi.Size() == 0:
		return fmt.Errorf("%s is empty: nothing to send", name)
	}
	return nil
}

// benchSend fills one stream until the deadline (or, from a file, until
// the file is all sent), counting into n, then closes its sending side so
// the receiver sees the end.
func benchSend(d *dataConn, file *benchFile, until time.Time, n *atomic.Int64) error {
	d.conn.SetWriteDeadline(until.Add(30 * time.Second))
	var err error
	if file != nil {
		err = benchSendFile(d, file, until, n)
	} else {
		err = benchSendMemory(d, until, n)
	}
	if err != nil {
		return err
	}
	if cw, ok := d.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func benchSendMemory(d *dataConn, until time.Time, n *atomic.Int64) error {
	var src *os.File
	var buf []byte
	// A file in memory only where the stream sends files without a copy
	// (sendfile(2) on TCP); a stream that copies them (UDP) reads a
	// memory-backed file's pages one by one, dearer than writing a buffer.
	if fc, ok := d.files.(transport.FileCopier); d.files != nil && !(ok && fc.SendFileCopies()) {
		src, _ = benchSource()
	}
	if src == nil {
		buf = make([]byte, 1<<20)
		rand.Read(buf)
	}
	for time.Now().Before(until) {
		var k int64
		var err error
		if buf == nil {
			k, err = d.files.SendFile(src, 0, benchBuffer)
		} else {
			var w int
			w, err = d.conn.Write(buf)
			k = int64(w)
		}
		n.Add(k)
		if err != nil {
			return err
		}
	}
	return nil
}

func benchSendFile(d *dataConn, file *benchFile, until time.Time, n *atomic.Int64) error {
	var buf []byte
	switch {
	case file.direct:
		// A chunk and an alignment's room to start it on a boundary.
		raw := make([]byte, benchChunk+directAlign)
		skip := (directAlign - int(uintptr(unsafe.Pointer(&raw[0]))%directAlign)) % directAlign
		buf = raw[skip : skip+benchChunk]
	case d.files == nil:
		buf = make([]byte, benchChunk)
	}
	for time.Now().Before(until) {
		off := file.next.Add(benchChunk) - benchChunk
		if off >= file.size {
			return nil
		}
		k := min(benchChunk, file.size-off)
		if buf == nil {
			w, err := d.files.SendFile(file.f, off, k)
			n.Add(w)
			if err != nil {
				return err
			}
			continue
		}
		t0 := time.Now()
		r, err := file.read(buf, off, k)
		file.ioWait.Add(int64(time.Since(t0)))
		if err != nil {
			return fmt.Errorf("read the file: %w", err)
		}
		w, err := d.conn.Write(buf[:r])
		n.Add(int64(w))
		if err != nil {
			return err
		}
	}
	return nil
}

// read reads the k bytes at off (a multiple of benchChunk) into buf. An
// O_DIRECT file is read in one pread of whole aligned blocks (the last
// one past the end: the read stops there), so no read starts off a
// boundary.
func (b *benchFile) read(buf []byte, off, k int64) (int, error) {
	if !b.direct {
		r, err := b.f.ReadAt(buf[:k], off)
		if errors.Is(err, io.EOF) && int64(r) == k {
			err = nil
		}
		return r, err
	}
	want := (k + directAlign - 1) / directAlign * directAlign
	// pread(2) itself: the streams read at once, as a disk's queue wants,
	// where os.File's read lock would take them one at a time. f stays
	// open while the test runs.
	r, err := unix.Pread(b.fd, buf[:want], off)
	for err == unix.EINTR {
		r, err = unix.Pread(b.fd, buf[:want], off)
	}
	switch {
	case err != nil:
		return 0, err
	case int64(r) < k:
		return r, io.ErrUnexpectedEOF // the file shrank under the test
	}
	return int(k), nil
}

// benchRecv drains one stream into memory until the sender closes it,
// counting into n.
func benchRecv(d *dataConn, stall time.Duration, n *atomic.Int64) error {
	buf := make([]byte, 1<<20)
	// Wake only for a full buffer (or the end): far fewer wakeups.
	d.setLowat(len(buf))
	for {
		if stall > 0 {
			d.conn.SetReadDeadline(time.Now().Add(stall))
		}
		k, err := d.r.Read(buf)
		n.Add(int64(k))
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// benchSide is one end's part of a bench: the directions it runs on every
// stream (sending, receiving, or both at once), what it has moved each
// way, and its streams' statistics at the start, so that what it reports
// is this test's and not the connections' handshakes'.
type benchSide struct {
	l                  *link
	file               *benchFile
	start              time.Time
	base               []transport.Stats
	baseOK             []bool
	sent, recvd        []atomic.Int64
	sendTook, recvTook time.Duration
	sendErrs, recvErrs []error
	sendDone, recvDone sync.WaitGroup
}

// startBench sets every stream sending, receiving or both for dur.
func startBench(l *link, send, recv bool, dur time.Duration, file *os.File, direct bool) (*benchSide, error) {
	n := len(l.data)
	b := &benchSide{l: l, base: make([]transport.Stats, n), baseOK: make([]bool, n),
		sent: make([]atomic.Int64, n), recvd: make([]atomic.Int64, n),
		sendErrs: make([]error, n), recvErrs: make([]error, n)}
	if file != nil {
		fi, err := file.Stat()
		if err != nil {
			return nil, err
		}
		b.file = &benchFile{f: file, size: fi.Size(), direct: direct}
		if direct {
			b.file.fd = int(file.Fd())
		}
	}
	for i, d := range l.data {
		if d.stream != nil {
			st, err := d.stream.Stats()
			b.base[i], b.baseOK[i] = st, err == nil
		}
	}
	b.start = time.Now()
	until := b.start.Add(dur)
	for i, d := range l.data {
		if send {
			b.sendDone.Add(1)
			go func() {
				defer b.sendDone.Done()
				b.sendErrs[i] = benchSend(d, b.file, until, &b.sent[i])
			}()
		}
		if recv {
			b.recvDone.Add(1)
			go func() {
				defer b.recvDone.Done()
				b.recvErrs[i] = benchRecv(d, dur+30*time.Second, &b.recvd[i])
			}()
		}
	}
	return b, nil
}

// wait waits for every stream's directions to end and returns the first
// stream's failure.
func (b *benchSide) wait() error {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { b.sendDone.Wait(); b.sendTook = time.Since(b.start); wg.Done() }()
	go func() { b.recvDone.Wait(); b.recvTook = time.Since(b.start); wg.Done() }()
	wg.Wait()
	for i := range b.l.data {
		for _, err := range []error{b.sendErrs[i], b.recvErrs[i]} {
			if err != nil {
				return fmt.Errorf("stream %d: %w", i, err)
			}
		}
	}
	return nil
}

// moved is what this side has sent and received so far.
func (b *benchSide) moved() (sent, recvd int64) {
	for i := range b.l.data {
		sent += b.sent[i].Load()
		recvd += b.recvd[i].Load()
	}
	return sent, recvd
}

// account is this side's account of one direction, with its streams'
// statistics as they are now, less what they were at the start. A
// sending account says what each stream put on the wire (HasWire) where
// every stream could say.
func (b *benchSide) account(sending bool) wire.Stats {
	st := wire.Stats{HasCC: true, HasWire: sending, HasUDP: b.l.udp}
	st.Elapsed = int64(b.recvTook)
	if sending {
		st.Elapsed = int64(b.sendTook)
		if b.file != nil {
			st.IOWait = b.file.ioWait.Load()
		}
	}
	for i, d := range b.l.data {
		ss, _ := d.stats()
		ss.Bytes = b.recvd[i].Load()
		if sending {
			ss.Bytes = b.sent[i].Load()
		}
		var info transport.Stats
		var err error = transport.ErrNotSupported
		if d.stream != nil && b.baseOK[i] {
			info, err = d.stream.Stats()
		}
		if err == nil {
			base := b.base[i]
			ss.Retrans = info.Retransmits - min(base.Retransmits, info.Retransmits)
			ss.WireBytes = info.BytesSent - min(base.BytesSent, info.BytesSent)
			ss.ResentBytes = info.BytesRetrans - min(base.BytesRetrans, info.BytesRetrans)
			ss.Datagrams = info.Datagrams - min(base.Datagrams, info.Datagrams)
			ss.SendCalls = info.SendCalls - min(base.SendCalls, info.SendCalls)
			ss.LossRepaired = info.LossRepaired - min(base.LossRepaired, info.LossRepaired)
		} else {
			st.HasWire, st.HasUDP = false, false
		}
		st.Bytes += ss.Bytes
		st.Streams = append(st.Streams, ss)
	}
	return st
}

// onWire is an account as the peer may read it: the sections the version
// agreed carries.
func onWire(st wire.Stats, version uint16) wire.Stats {
	st.HasCC = st.HasCC && version >= wire.VersionCC
	st.HasWire = st.HasWire && version >= wire.VersionBench
	st.HasUDP = st.HasUDP && version >= wire.VersionUDP
	return st
}

// serveBench runs the server's side of a bench: it sends with m.Reverse
// (from file, if not nil), receives otherwise, and both with m.Bidir. It
// returns the payload it moved.
func serveBench(ctx context.Context, l *link, m *wire.Bench, file *os.File) (int64, error) {
	go func() {
		<-ctx.Done()
		l.close()
	}()
	send, recv := m.Reverse || m.Bidir, !m.Reverse || m.Bidir
	b, err := startBench(l, send, recv, time.Duration(m.Duration), file, m.Direct)
	if err != nil {
		return 0, err
	}
	err = b.wait()
	sent, recvd := b.moved()
	if err != nil {
		return sent + recvd, err
	}
	// The peer's accounts first: once it has reported, it has read every
	// byte this side sent, and this side's streams can say all they put on
	// the wire.
	for range benchAccounts(m.Bidir) {
		peer, err := l.ctrl.read()
		if err != nil {
			return sent + recvd, fmt.Errorf("control: %w", err)
		}
		if _, ok := peer.(*wire.BenchDone); !ok {
			return sent + recvd, fmt.Errorf("%w: unexpected %s", wire.ErrMalformed, peer.Type())
		}
	}
	// A side sends its accounts in the order send, receive.
	for _, sending := range []bool{true, false} {
		if sending && !send || !sending && !recv {
			continue
		}
		if err := l.ctrl.send(&wire.BenchDone{Stats: onWire(b.account(sending), l.ctrl.version)}); err != nil {
			return sent + recvd, err
		}
	}
	return sent + recvd, nil
}

// benchAccounts is how many accounts each side sends at the end: one per
// direction it ran.
func benchAccounts(bidir bool) int {
	if bidir {
		return 2
	}
	return 1
}

// BenchOptions says what a bench runs.
type BenchOptions struct {
	Duration time.Duration
	// Reverse: the server sends and the client receives.
	Reverse bool
	// Bidir: both send at once, every stream carrying data both ways
	// (protocol version 6; not with Reverse).
	Bidir bool
	// LocalFile is a file the client sends instead of memory (not with
	// Reverse): read once, front to back, by all the streams together,
	// ending early when Duration does. OpenBenchFile opens it (with
	// Direct, as Direct says).
	LocalFile *os.File
	// ServerFile is a path under the server's root that the server sends
	// instead of memory, in the same way (with Reverse only; protocol
	// version 6).
	ServerFile string
	// Direct: the file is read around the page cache (O_DIRECT), so each
	// read is a disk's, never sent with sendfile (protocol version 6 for
	// the server's file).
	Direct bool
}

// BenchTick is what a running bench has moved so far, this side's count.
type BenchTick struct {
	Sent, Received int64
}

// BenchDirection is one direction's outcome: what the receiver took in
// and how long it took from its start to the last byte, and what the
// sender put on the wire to deliver it.
type BenchDirection struct {
	// Send is client to server; otherwise server to client.
	Send bool
	// Bytes is the payload delivered, Elapsed the receiver's time.
	Bytes   int64
	Elapsed time.Duration
	// HasWire says the sender could tell what it put on the wire: false
	// for a server older than protocol version 6 sending, or a transport
	// or platform without statistics. WireBytes and ResentBytes are then
	// zero.
	HasWire bool
	// WireBytes is the payload the sender put on the wire,
	// retransmissions included; ResentBytes what of it was sent again.
	WireBytes, ResentBytes uint64
	// Retransmits counts the segments (packets) sent again.
	Retransmits uint32
	// HasUDP says the direction ran over UDP and both sides could give
	// their datagram accounts: Datagrams and SendCalls the sender's (their
	// ratio is the datagrams per batch), LossRepaired the payload bytes the
	// receiver got only from a retransmission.
	HasUDP                             bool
	Datagrams, SendCalls, LossRepaired uint64
	PerStream                          []StreamSummary
}

// DatagramsPerBatch is the datagrams the sender sent per system call; 0
// without HasUDP.
func (d BenchDirection) DatagramsPerBatch() float64 {
	return perBatch(d.Datagrams, d.SendCalls)
}

func perBatch(datagrams, calls uint64) float64 {
	if calls == 0 {
		return 0
	}
	return float64(datagrams) / float64(calls)
}

// GoodputBps is the payload delivered per second, in bits.
func (d BenchDirection) GoodputBps() float64 {
	if d.Elapsed <= 0 {
		return 0
	}
	return float64(d.Bytes) * 8 / d.Elapsed.Seconds()
}

// SendingRateBps is what the sender put on the wire per second, in bits,
// retransmissions included, over the same time as the goodput (the
// sender's bytes all left within it), so that the two compare: their
// ratio is what repair cost. 0 without HasWire.
func (d BenchDirection) SendingRateBps() float64 {
	if d.Elapsed <= 0 || !d.HasWire {
		return 0
	}
	return float64(d.WireBytes) * 8 / d.Elapsed.Seconds()
}

// BenchResult is a bench's outcome: one direction, or two with Bidir
// (client to server first).
type BenchResult struct {
	Streams    int
	Directions []BenchDirection
}

// benchDirection joins the sender's and the receiver's accounts of one
// direction.
func benchDirection(send bool, snd, rcv wire.Stats) BenchDirection {
	d := BenchDirection{Send: send, Bytes: rcv.Bytes, Elapsed: time.Duration(rcv.Elapsed), HasWire: snd.HasWire,
		HasUDP: snd.HasUDP && rcv.HasUDP}
	d.PerStream, d.Retransmits = streamSummaries(snd, rcv)
	for i := range d.PerStream {
		if i < len(rcv.Streams) {
			d.PerStream[i].Bytes = rcv.Streams[i].Bytes
		}
		if d.HasUDP {
			d.Datagrams += d.PerStream[i].Datagrams
			d.SendCalls += d.PerStream[i].SendCalls
			d.LossRepaired += d.PerStream[i].LossRepaired
		}
		if d.HasWire {
			d.PerStream[i].WireBytes = snd.Streams[i].WireBytes
			d.PerStream[i].ResentBytes = snd.Streams[i].ResentBytes
			d.WireBytes += snd.Streams[i].WireBytes
			d.ResentBytes += snd.Streams[i].ResentBytes
		}
	}
	return d
}

// Bench runs a throughput test against a server: the client sends, or
// with Reverse the server does, or with Bidir both at once; from memory,
// or from a file. tick, if set, is called about once a second with what
// this side has moved so far.
func Bench(ctx context.Context, cfg ClientConfig, o BenchOptions, tick func(BenchTick)) (BenchResult, error) {
	switch {
	case o.Bidir && o.Reverse:
		return BenchResult{}, refusal("a bench both ways (--bidir) has no --reverse")
	case o.LocalFile != nil && o.Reverse:
		return BenchResult{}, refusal("in a reverse bench the server sends: name its file, not a local one")
	case o.ServerFile != "" && !o.Reverse:
		return BenchResult{}, refusal("a server's file is sent only in a reverse bench")
	}
	var need uint16
	var what string
	switch {
	case o.Bidir:
		need, what = wire.VersionBench, "a bench both ways"
	case o.ServerFile != "":
		need, what = wire.VersionBench, "a reverse bench from a file"
	}
	l, err := cfg.connectVersion(ctx, need, what, func(streams int) wire.Msg {
		return &wire.Bench{Tuning: cfg.Tuning.wire(), Streams: uint16(streams), Duration: int64(o.Duration),
			Reverse: o.Reverse, Bidir: o.Bidir, File: o.ServerFile, Direct: o.Direct && o.ServerFile != ""}
	})
	if err != nil {
		return BenchResult{}, err
	}
	defer l.close()
	stop := context.AfterFunc(ctx, l.close)
	defer stop()
	send, recv := !o.Reverse || o.Bidir, o.Reverse || o.Bidir
	b, err := startBench(l, send, recv, o.Duration, o.LocalFile, o.Direct)
	if err != nil {
		return BenchResult{}, err
	}
	if tick != nil {
		// The ticker is stopped and waited for before Bench returns: a
		// tick must not land after the caller has printed its summary.
		done, ticked := make(chan struct{}), make(chan struct{})
		defer func() { close(done); <-ticked }()
		go func() {
			defer close(ticked)
			every(time.Second, done, func() bool {
				s, r := b.moved()
				tick(BenchTick{Sent: s, Received: r})
				return true
			})
		}()
	}
	if err := b.wait(); err != nil {
		return BenchResult{}, err
	}
	for _, sending := range []bool{true, false} {
		if sending && !send || !sending && !recv {
			continue
		}
		if err := l.ctrl.send(&wire.BenchDone{Stats: onWire(b.account(sending), l.ctrl.version)}); err != nil {
			return BenchResult{}, fmt.Errorf("control: %w", err)
		}
	}
	var peer []wire.Stats
	for range benchAccounts(o.Bidir) {
		m, err := l.ctrl.read()
		if err != nil {
			return BenchResult{}, fmt.Errorf("control: %w", err)
		}
		bd, ok := m.(*wire.BenchDone)
		if !ok {
			return BenchResult{}, fmt.Errorf("%w: unexpected %s", wire.ErrMalformed, m.Type())
		}
		peer = append(peer, bd.Stats)
	}
	// The server has read every byte this side sent: this side's sending
	// account is complete now.
	res := BenchResult{Streams: len(l.data)}
	switch {
	case o.Bidir:
		res.Directions = []BenchDirection{
			benchDirection(true, b.account(true), peer[1]),
			benchDirection(false, peer[0], b.account(false)),
		}
	case o.Reverse:
		res.Directions = []BenchDirection{benchDirection(false, peer[0], b.account(false))}
	default:
		res.Directions = []BenchDirection{benchDirection(true, b.account(true), peer[0])}
	}
	return res, nil
}
