//go:build !linux

package udp_test

import "net"

// relayBuffers gives a relay's socket 16 MiB buffers where the system
// allows them.
func relayBuffers(c *net.UDPConn) {
	c.SetReadBuffer(16 << 20)
	c.SetWriteBuffer(16 << 20)
}
