package udp_test

import (
	"net"

	"golang.org/x/sys/unix"
)

// relayBuffers gives a relay's socket 16 MiB buffers, forced past
// net.core.rmem_max and wmem_max where the process may (as root): the
// relay runs in the test's own process, whose pauses on a busy machine
// would otherwise overflow the default buffers, a loss the test did not
// ask for.
func relayBuffers(c *net.UDPConn) {
	const size = 16 << 20
	c.SetReadBuffer(size)
	c.SetWriteBuffer(size)
	if rc, err := c.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size)
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size)
		})
	}
}
