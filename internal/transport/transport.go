// Package transport carries the mover's streams. A Transport dials and
// listens; each connection it makes is a Conn: a reliable, ordered byte
// stream (a net.Conn) that also reports transport-neutral statistics and
// takes tuning options. What a transport can do beyond that (send a file
// without copying it through user space, wake a reader only once enough
// bytes are queued) it offers as optional interfaces, which the caller
// checks with a type assertion.
//
// TCP is the transport today: it sets the congestion control per socket,
// buffer sizes, DSCP marking, pacing and the unsent-bytes low-water mark,
// reads TCP_INFO back and sends files with sendfile(2). Kernel specifics
// live in sockopt_linux.go; elsewhere the tuning calls say they need Linux.
// The package transporttest is the conformance suite every transport runs.
package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// ErrNotSupported is returned for a feature a transport lacks. A feature
// the operating system lacks is platform.ErrUnsupported instead. Both
// match errors.ErrUnsupported, which is what callers test for.
var ErrNotSupported = fmt.Errorf("not supported by this transport: %w", errors.ErrUnsupported)

// Transport opens streams. Its methods are safe for concurrent use.
type Transport interface {
	// Name is the transport's short name, as a user would give it ("tcp").
	Name() string
	// Dial opens a stream to addr (HOST:PORT) with o in force from the
	// first packet. It returns an error, and no stream, if addr cannot be
	// reached before ctx ends or if an option cannot be applied (an unknown
	// congestion control, an out-of-range DSCP, an option this platform
	// lacks); such errors say which option failed and why.
	Dial(ctx context.Context, addr string, o Options) (Conn, error)
	// Listen accepts streams on addr. o is set on the listener: accepted
	// streams start with what of it the transport carries over (TCP: the
	// buffer sizes and the kernel's inherited socket options) and are tuned
	// further with Tune. Every net.Conn the listener's Accept returns is a
	// Conn. Closing the listener makes a blocked Accept return an error and
	// leaves accepted streams open.
	Listen(ctx context.Context, addr string, o Options) (net.Listener, error)
}

// Conn is one stream: a reliable, ordered byte stream in both directions.
// Bytes written on one end are read on the other in order, without loss,
// duplication or corruption, or the stream fails with an error on both
// ends; a Write returns only once all of p is accepted or an error ends it.
//
// As for any net.Conn, one goroutine may read while another writes, and
// Close, the deadlines, Stats, Tune and SetPacingRate may be called from any goroutine at
// any time. Close unblocks pending reads and writes, which return errors
// (net.ErrClosed on this end); a deadline that passes makes a blocked call
// return an error for which os.ErrDeadlineExceeded is true, and a later
// deadline lets the stream continue.
type Conn interface {
	net.Conn
	// CloseWrite ends the sending direction: the peer reads every byte
	// written before it, then io.EOF, while this end can still read.
	CloseWrite() error
	// Stats reads the stream's statistics as they are now. It fails
	// (errors.ErrUnsupported) where the transport or the platform cannot say, and with an error
	// once the stream is closed.
	Stats() (Stats, error)
	// Tune applies o to the established stream (an accepted stream, once
	// its peer has said what it wants). Zero fields leave the setting as
	// it is; an option that cannot be applied returns an error that names
	// it, and the stream stays usable.
	Tune(o Options) error
	// SetPacingRate caps the stream's sending rate at bps bytes per
	// second from now on (SO_MAX_PACING_RATE for TCP), raising or lowering
	// the cap it had; 0 lifts the cap. It lets a running copy be re-paced
	// without reconnecting. It fails (errors.ErrUnsupported) where the
	// transport or the platform cannot pace, and once the stream is closed.
	SetPacingRate(bps uint64) error
}

// FileSender is the zero-copy capability: a transport whose streams can
// move a file's pages to the network without copying them through user
// space implements it on its Conn. Callers check for it with a type
// assertion and copy through a buffer otherwise.
type FileSender interface {
	// SendFile writes n bytes of f, starting at off, to the stream. It
	// blocks until all n are written or an error occurs (a file shorter
	// than off+n gives an error, not a hang), honours the write deadline,
	// and does not move f's offset. It returns how many bytes it wrote.
	SendFile(f *os.File, off, n int64) (int64, error)
}

// FileCopier is implemented by a FileSender whose SendFile copies the
// file's bytes through user space (the UDP transport reads them straight
// into its send buffer: a copy fewer than a read and a Write, but not the
// kernel's zero copy). For such a stream, bytes already in memory are
// cheaper written than read back from a file.
type FileCopier interface {
	FileSender
	// SendFileCopies says SendFile copies through user space.
	SendFileCopies() bool
}

// ReadLowater is an optional capability: a stream that can be told not to
// wake its reader until n bytes are queued (or the stream ends) cuts the
// reader's wakeups on a fast path. A reader must ask only for bytes the
// peer is bound to send, or a read waits for them. A read still returns
// what is queued when it is called, which may be less than n; a reader that
// then waits for the rest must lower the mark to the rest first, or it
// waits for bytes that never come (the mover re-sets it before every read).
// Setting it is a hint; errors are reported but harmless.
type ReadLowater interface {
	SetReadLowat(n int) error
}

// Options tune a stream. Zero values leave the transport's defaults; a
// transport returns an error for an option it cannot honour.
type Options struct {
	// CC names the congestion control: any the kernel offers (bbr, cubic,
	// reno, and fast, Lightpath's FAST TCP, once lightpath cc install fast
	// has loaded it; CheckCC says before dialling); empty means the
	// transport's choice. TCP takes BBR where the kernel has it
	// and its default otherwise, except to a loopback peer: there is no
	// bottleneck queue there for BBR to model, and its pacing only costs
	// (on a 2-core machine, 2 GiB tmpfs to tmpfs at 10.8 Gbit/s against
	// 13.3 with cubic, memory to memory over four streams 48 against 66),
	// so cubic is used where the kernel has it.
	CC string
	// Window sets the send and receive buffers in bytes (SO_SNDBUF and
	// SO_RCVBUF for TCP). It turns the kernel's buffer autotuning off, so
	// it is left at 0 unless a user asks.
	Window int
	// DSCP is the differentiated-services code point (0..63) written into
	// every packet; negative leaves it unset (and 0 sets it to 0).
	DSCP int
	// PacingRate caps the stream's rate in bytes per second
	// (SO_MAX_PACING_RATE): packets are spaced out instead of sent in
	// bursts. 0 means no cap.
	PacingRate uint64
	// NotSentLowat bounds the bytes queued but not yet sent
	// (TCP_NOTSENT_LOWAT), keeping the send queue short and latency low
	// without starving the pipe. 0 means the transport's default.
	NotSentLowat int
	// LocalAddr, when set, is the IP address a dialled stream leaves from
	// (a host's address that a reservation's flow spec names, where the
	// kernel's own choice could be another); "" lets the kernel choose.
	// Dial only.
	LocalAddr string
	// Auth authenticates a dialled stream's datagrams where the transport
	// carries them itself (UDP): the session the control channel agreed on
	// and the secret it handed over, from which the transport derives its
	// keys. TCP ignores it (the mover authenticates its TCP streams with
	// the session bytes it sends first). Dial only.
	Auth *Auth
	// FASTAlpha and FASTGamma, when not zero, are this stream's parameters
	// for the UDP transport's fast rate control: alpha the packets it keeps
	// queued, gamma the step per round in 1/1024 (package cc/fast's Params;
	// zero takes the transport's). TCP ignores them: the kernel's FAST
	// runs with the parameters it was installed with.
	FASTAlpha, FASTGamma uint32
}

// Auth is what a datagram transport needs to authenticate a stream: the
// session id (the mover's Accept.Session), carried in every datagram, and
// the session's secret (the mover's Accept.Secret), which never travels on
// the data path: keys are derived from it per stream and direction.
type Auth struct {
	Session [16]byte
	Key     []byte
}

// FastCC is the name FAST TCP registers under once lightpath cc install
// fast has loaded it into the kernel (a BPF congestion control).
const FastCC = "fast"

// DefaultNotSentLowat is what the mover asks for: large enough to keep a
// fast path full, small enough that a block header is not stuck behind
// megabytes of queued data.
const DefaultNotSentLowat = 1 << 20

// Stats is a stream's account, in terms any reliable transport can give:
// what it carried, the round trip it measures, the rate it achieves, and
// how long each party limited it while it had data to send. The limited
// times are what the mover's bottleneck judgement reads. A field the
// transport cannot measure is zero.
type Stats struct {
	// CC is the congestion control the stream runs (TCP_CONGESTION for
	// TCP), read from the stream itself: what it really ran, whatever was
	// asked for.
	CC     string
	RTT    time.Duration // smoothed round-trip time
	RTTVar time.Duration // its variation
	MinRTT time.Duration // the smallest round trip seen
	Cwnd   uint32        // congestion window, in packets
	MSS    uint32        // largest payload per packet
	// Retransmits counts the packets sent again over the stream's life.
	Retransmits   uint32
	BytesSent     uint64 // payload bytes sent, retransmissions included
	BytesRetrans  uint64
	BytesAcked    uint64 // payload bytes the peer acknowledged
	BytesReceived uint64
	PacingRate    uint64 // bytes/s the sender spaces packets at
	// MaxPacingRate is the cap set on the stream (Options.PacingRate or
	// SetPacingRate), in bytes/s; 0 when there is none.
	MaxPacingRate uint64
	DeliveryRate  uint64 // bytes/s most recently delivered
	NotSent       uint32 // bytes queued but not yet sent
	// BusyTime is how long the stream had data to send (TCP_INFO busy
	// time): the sum of the times the network, the receiver and the
	// sender limited it.
	BusyTime time.Duration
	// ReceiverLimited is how long the receiver held the sender back: its
	// advertised window was full (TCP rwnd-limited).
	ReceiverLimited time.Duration
	// SenderLimited is how long the sender's own buffer held it back
	// (TCP sndbuf-limited).
	SenderLimited time.Duration
	// Datagrams counts the datagrams sent and SendCalls the system calls
	// that sent them: Datagrams/SendCalls is the datagrams per batch
	// (sendmmsg and UDP segmentation offload). Zero for TCP.
	Datagrams uint64
	SendCalls uint64
	// LossRepaired counts the payload bytes that arrived only because
	// they were sent again (holes the receiver filled from retransmissions).
	// Zero for TCP.
	LossRepaired uint64
	// Dropped counts the datagrams this end threw away unread: forged,
	// replayed, truncated or otherwise not the peer's. Zero for TCP.
	Dropped uint64
}

// NetworkLimited is how long the network (the congestion window or the
// rate control) limited the stream: busy time that neither the receiver
// nor the sender accounts for.
func (s Stats) NetworkLimited() time.Duration {
	return max(s.BusyTime-s.ReceiverLimited-s.SenderLimited, 0)
}

// StreamOf returns the stream a connection runs on: c itself if it is a
// Conn; the stream under a TLS connection (anything with NetConn, such as
// *tls.Conn); a TCP stream for a TCP connection made outside this package
// (one accepted by a plain net.Listener); nil otherwise.
func StreamOf(c net.Conn) Conn {
	switch t := c.(type) {
	case Conn:
		return t
	case interface{ NetConn() net.Conn }:
		return StreamOf(t.NetConn())
	}
	return adoptTCP(c)
}
