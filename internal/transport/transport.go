// Package transport opens the mover's TCP connections and tunes them: the
// congestion control per socket, buffer sizes, DSCP marking, pacing, the
// unsent-bytes low-water mark; it reads TCP_INFO back and moves file bytes to
// a socket without copying them through user space where the kernel allows.
// Kernel specifics live in sockopt_linux.go; elsewhere the tuning calls say
// they need Linux.
package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// ErrNotSupported is returned for kernel features this platform lacks.
var ErrNotSupported = errors.New("not supported on this platform")

// Options tune a connection. Zero values leave the kernel's defaults.
type Options struct {
	// CC names the congestion control ("bbr", "cubic", "reno"); empty means
	// BBR where the kernel has it and its default otherwise, except to a
	// loopback peer: there is no bottleneck queue there for BBR to model,
	// and its pacing only costs (on a 2-core machine, 2 GiB tmpfs to tmpfs
	// at 10.8 Gbit/s against 13.3 with cubic, memory to memory over four
	// streams 48 against 66), so cubic is used where the kernel has it.
	CC string
	// Window sets SO_SNDBUF and SO_RCVBUF in bytes. It turns the kernel's
	// buffer autotuning off, so it is left at 0 unless a user asks.
	Window int
	// DSCP is the differentiated-services code point (0..63) written into
	// every packet; negative leaves it unset.
	DSCP int
	// PacingRate caps the socket's rate in bytes per second
	// (SO_MAX_PACING_RATE): the kernel spaces packets out instead of sending
	// bursts. 0 means no cap.
	PacingRate uint64
	// NotSentLowat bounds the bytes queued but not yet sent
	// (TCP_NOTSENT_LOWAT), keeping the send queue short and latency low
	// without starving the pipe. 0 means the kernel's default.
	NotSentLowat int
}

// DefaultNotSentLowat is what the mover asks for: large enough to keep a
// fast path full, small enough that a block header is not stuck behind
// megabytes of queued data.
const DefaultNotSentLowat = 1 << 20

// Dial connects to addr and applies o to the socket before the handshake, so
// the congestion control and buffers hold from the first packet.
func Dial(ctx context.Context, addr string, o Options) (*net.TCPConn, error) {
	d := net.Dialer{
		Timeout:   15 * time.Second,
		KeepAlive: 15 * time.Second,
		Control: func(network, address string, c syscall.RawConn) error {
			return control(c, network, address, o)
		},
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := c.(*net.TCPConn)
	if err := applyAfterConnect(tc, o); err != nil {
		tc.Close()
		return nil, err
	}
	return tc, nil
}

// Listen opens a TCP listener; accepted connections inherit its buffer sizes
// and are tuned further with Apply.
func Listen(ctx context.Context, addr string, o Options) (net.Listener, error) {
	lc := net.ListenConfig{
		KeepAlive: 15 * time.Second,
		Control: func(network, address string, c syscall.RawConn) error {
			return control(c, network, "", o)
		},
	}
	return lc.Listen(ctx, "tcp", addr)
}

// Apply tunes an established connection (the server side of a session,
// once the client has said what it wants).
func Apply(c *net.TCPConn, o Options) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	network := "tcp4"
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok && a.IP.To4() == nil {
		network = "tcp6"
	}
	if err := control(rc, network, c.RemoteAddr().String(), o); err != nil {
		return err
	}
	return applyAfterConnect(c, o)
}

// Info is the part of the kernel's TCP_INFO the mover reports.
type Info struct {
	RTT           time.Duration
	RTTVar        time.Duration
	MinRTT        time.Duration
	Cwnd          uint32 // segments
	MSS           uint32
	TotalRetrans  uint32 // segments retransmitted over the connection's life
	BytesSent     uint64
	BytesRetrans  uint64
	BytesAcked    uint64
	BytesReceived uint64
	PacingRate    uint64 // bytes/s
	DeliveryRate  uint64 // bytes/s
	BusyTime      time.Duration
	RwndLimited   time.Duration // time the peer's receive window held the sender back
	SndbufLimited time.Duration // time the local send buffer held it back
	NotSent       uint32
}

// GetInfo reads TCP_INFO from a connection.
func GetInfo(c syscall.Conn) (Info, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return Info{}, err
	}
	var info Info
	var ierr error
	if err := rc.Control(func(fd uintptr) { info, ierr = getInfo(int(fd)) }); err != nil {
		return Info{}, err
	}
	return info, ierr
}

// defaultCC picks the congestion control for a peer when none is named.
func defaultCC(peer string) string {
	if peer == "" {
		return ""
	}
	host, _, err := net.SplitHostPort(peer)
	if err != nil {
		host = peer
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		if HasCC("cubic") {
			return "cubic"
		}
		return ""
	}
	if HasCC("bbr") {
		return "bbr"
	}
	return ""
}

func wrapOpt(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("set %s: %w", name, err)
}
