package transport

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// TCP is the TCP transport: one socket per stream, tuned with socket
// options. Its streams are FileSenders (sendfile(2) on Linux), ReadLowaters
// (SO_RCVLOWAT on Linux) and io.ReaderFroms (the runtime's splice and
// sendfile paths).
var TCP Transport = tcpTransport{}

type tcpTransport struct{}

func (tcpTransport) Name() string { return "tcp" }

// Dial applies o to the socket before the handshake, so the congestion
// control and buffers hold from the first packet.
func (tcpTransport) Dial(ctx context.Context, addr string, o Options) (Conn, error) {
	d := net.Dialer{
		Timeout:   15 * time.Second,
		KeepAlive: 15 * time.Second,
		Control: func(network, address string, c syscall.RawConn) error {
			return control(c, network, address, o)
		},
	}
	if o.LocalAddr != "" {
		ip, err := netip.ParseAddr(o.LocalAddr)
		if err != nil {
			return nil, fmt.Errorf("local address %q: %w", o.LocalAddr, err)
		}
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 0))
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return wrapTCP(c.(*net.TCPConn)), nil
}

// Listen sets o on the listening socket; accepted streams inherit its
// buffer sizes and are tuned further with Tune.
func (tcpTransport) Listen(ctx context.Context, addr string, o Options) (net.Listener, error) {
	lc := net.ListenConfig{
		KeepAlive: 15 * time.Second,
		Control: func(network, address string, c syscall.RawConn) error {
			return control(c, network, "", o)
		},
	}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return tcpListener{ln.(*net.TCPListener)}, nil
}

type tcpListener struct{ *net.TCPListener }

func (l tcpListener) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	return wrapTCP(c), nil
}

// tcpConn is a TCP stream. Embedding the socket keeps its methods (Read,
// Write, ReadFrom, WriteTo, CloseWrite, SyscallConn) direct: a write in the
// mover's hot loop costs no more than on the bare socket. wrapTCP adds the
// capabilities the platform has.
type tcpConn struct{ *net.TCPConn }

func adoptTCP(c net.Conn) Conn {
	if t, ok := c.(*net.TCPConn); ok {
		return wrapTCP(t)
	}
	return nil
}

func (c *tcpConn) Tune(o Options) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	network := "tcp4"
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok && a.IP.To4() == nil {
		network = "tcp6"
	}
	return control(rc, network, c.RemoteAddr().String(), o)
}

func (c *tcpConn) SetPacingRate(bps uint64) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = setPacingRate(int(fd), bps) }); err != nil {
		return err
	}
	return serr
}

func (c *tcpConn) Stats() (Stats, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	var ierr error
	if err := rc.Control(func(fd uintptr) { st, ierr = tcpInfo(int(fd)) }); err != nil {
		return Stats{}, err
	}
	return st, ierr
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
