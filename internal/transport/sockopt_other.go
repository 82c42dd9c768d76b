//go:build !linux

package transport

import (
	"fmt"
	"net"
	"syscall"

	"github.com/lightpath/lightpath/internal/platform"
)

func control(c syscall.RawConn, network, peer string, o Options) error {
	if o.CC != "" || o.Window > 0 || o.DSCP >= 0 || o.PacingRate > 0 || o.NotSentLowat > 0 {
		return fmt.Errorf("socket options (congestion control, buffers, DSCP, pacing): %w", platform.ErrUnsupported)
	}
	return nil
}

// AvailableCC lists the congestion controls this kernel offers.
func AvailableCC() []string { return nil }

// CheckCC checks that a stream may be given the named congestion control:
// here none, but "" (the transport's choice).
func CheckCC(name string) error {
	if name == "" {
		return nil
	}
	return fmt.Errorf("congestion control %q: choosing one needs Linux: %w", name, platform.ErrUnsupported)
}

// HasCC reports whether the kernel offers the named congestion control.
func HasCC(name string) bool { return false }

// CurrentCC reads the congestion control a connection runs.
func CurrentCC(c syscall.Conn) (string, error) {
	return "", fmt.Errorf("read the congestion control: %w", platform.ErrUnsupported)
}

func setPacingRate(fd int, bps uint64) error {
	return fmt.Errorf("set the pacing rate (SO_MAX_PACING_RATE needs Linux): %w", platform.ErrUnsupported)
}

func tcpInfo(fd int) (Stats, error) {
	return Stats{}, fmt.Errorf("TCP_INFO: %w", platform.ErrUnsupported)
}

// wrapTCP makes a plain TCP stream: neither sendfile nor SO_RCVLOWAT here,
// so its Conn is neither a FileSender nor a ReadLowater.
func wrapTCP(c *net.TCPConn) Conn { return &tcpConn{c} }
