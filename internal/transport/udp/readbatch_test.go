package udp

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"
)

// TestReadBatch: datagrams queued on a socket come in several to a system
// call (recvmmsg where the platform has it), each whole and in order, the
// control messages' room given back for every read.
func TestReadBatch(t *testing.T) {
	if !batchedReads {
		t.Skip("reads are one datagram a call on this platform")
	}
	rx, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	rx.SetReadBuffer(1 << 20)
	tx, err := net.DialUDP("udp", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	const n = 3 * readBatchSize
	for i := range n {
		if _, err := tx.Write([]byte(fmt.Sprintf("datagram %03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	rb := newReadBatch(rx, false)
	rx.SetReadDeadline(time.Now().Add(10 * time.Second))
	calls, got := 0, 0
	for got < n {
		msgs, err := rb.read()
		if err != nil {
			t.Fatalf("after %d datagrams: %v", got, err)
		}
		calls++
		for _, m := range msgs {
			if want := fmt.Sprintf("datagram %03d", got); !bytes.Equal(m.Buffers[0][:m.N], []byte(want)) {
				t.Fatalf("read %q, want %q", m.Buffers[0][:m.N], want)
			}
			if cap(m.OOB) < oobSize {
				t.Fatalf("a read left %d bytes for control messages, want %d", cap(m.OOB), oobSize)
			}
			got++
		}
	}
	if calls >= n {
		t.Errorf("%d datagrams queued took %d reads: none batched", n, calls)
	}
	t.Logf("%d datagrams in %d reads", n, calls)
}
