//go:build linux

package collect

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// freebind lets a socket bind an address that is not (yet) configured,
// so the responder can start before its links are up.
func freebind(network, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		switch network {
		case "udp6", "tcp6":
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_FREEBIND, 1)
		default:
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
		}
	})
	if err != nil {
		return err
	}
	return serr
}
