//go:build !linux

package transport

import (
	"net"
	"syscall"
)

func control(c syscall.RawConn, network, peer string, o Options) error {
	if o.CC != "" || o.Window > 0 || o.DSCP >= 0 || o.PacingRate > 0 || o.NotSentLowat > 0 {
		return ErrNotSupported
	}
	return nil
}

// AvailableCC lists the congestion controls this kernel offers.
func AvailableCC() []string { return nil }

// HasCC reports whether the kernel offers the named congestion control.
func HasCC(name string) bool { return false }

// CurrentCC reads the congestion control a connection runs.
func CurrentCC(c syscall.Conn) (string, error) { return "", ErrNotSupported }

func tcpInfo(fd int) (Stats, error) { return Stats{}, ErrNotSupported }

// wrapTCP makes a plain TCP stream: neither sendfile nor SO_RCVLOWAT here,
// so its Conn is neither a FileSender nor a ReadLowater.
func wrapTCP(c *net.TCPConn) Conn { return &tcpConn{c} }
