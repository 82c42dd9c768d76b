package udp_test

import (
	"encoding/binary"
	"net"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/transport/udp"
)

func recvTOS(c *net.UDPConn) {
	rc, _ := c.SyscallConn()
	rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1) })
}

func tosIn(oob []byte) (byte, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TOS && len(m.Data) >= 1 {
			return m.Data[0], true
		}
	}
	return 0, false
}

// ceOOB marks a datagram sent with it Congestion Experienced (ECN bits 11),
// as a router's AQM would.
func ceOOB() []byte {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.IPPROTO_IP, unix.IP_TOS
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(b[unix.CmsgLen(0):], 0b11)
	return b
}

// TestECN: datagrams leave ECN-capable (ECT(0)) with the DSCP asked for in
// the upper bits; the receiver reads the TOS byte of each, counts CE marks
// and reports them, and the sender takes them for congestion: fixed slows
// below its set rate although nothing is lost.
func TestECN(t *testing.T) {
	const rate = 40 << 20
	// Only CE may slow the stream here: no delay on loopback is taken for
	// a queue, however slow the test runs.
	c, s, _, r := viaRelay(t, transport.Options{DSCP: 10, CC: "fixed", PacingRate: rate}, 3, udp.Tuning{DelayThreshold: time.Hour, LossTolerance: 1})

	exchange(t, c, s, random(1<<20), random(1000))
	seen := r.tosSeen()
	if seen[10<<2|0b10] == 0 || len(seen) != 1 {
		t.Fatalf("TOS bytes of the dialler's datagrams: %v, want only %#x (DSCP 10, ECT(0))", seen, 10<<2|0b10)
	}
	if st, _ := c.Stats(); st.PacingRate != rate {
		t.Fatalf("without marks the rate is %d, want %d", st.PacingRate, rate)
	}
	r.set(0, 0, 0)
	r.mu.Lock()
	r.ce = 0.05
	r.mu.Unlock()
	// rounds with marks: the rate comes down
	deadline := time.Now().Add(20 * time.Second)
	for {
		exchange(t, c, s, random(1<<20), random(100))
		st, err := c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.PacingRate < rate {
			t.Logf("after CE marks the rate is %d of %d; retransmitted %d bytes", st.PacingRate, rate, st.BytesRetrans)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CE marks did not slow the stream: %+v", st)
		}
	}
}
