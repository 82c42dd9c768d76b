//go:build !linux

package transport

import (
	"net"
	"os"
	"syscall"
)

func control(c syscall.RawConn, network, peer string, o Options) error {
	if o.CC != "" || o.Window > 0 || o.DSCP >= 0 || o.PacingRate > 0 || o.NotSentLowat > 0 {
		return ErrNotSupported
	}
	return nil
}

func applyAfterConnect(c *net.TCPConn, o Options) error { return nil }

// AvailableCC lists the congestion controls this kernel offers.
func AvailableCC() []string { return nil }

// HasCC reports whether the kernel offers the named congestion control.
func HasCC(name string) bool { return false }

// CurrentCC reads the congestion control a connection runs.
func CurrentCC(c syscall.Conn) (string, error) { return "", ErrNotSupported }

func getInfo(fd int) (Info, error) { return Info{}, ErrNotSupported }

// SendFile is not available here; callers copy instead.
func SendFile(c *net.TCPConn, f *os.File, off, n int64) (int64, error) {
	return 0, ErrNotSupported
}
