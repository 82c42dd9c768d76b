package udp

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"testing"

	"github.com/lightpath/lightpath/internal/transport"
)

// TestWithoutGSO: a stream whose sends go one datagram at a time (as where
// the kernel refuses UDP_SEGMENT) carries the same bytes, and says one
// datagram per send; with GSO on loopback, runs of datagrams share sends.
// The accepted stream reads its datagrams from a socket of its own, not
// through the listener's.
func TestWithoutGSO(t *testing.T) {
	for _, gso := range []bool{false, true} {
		a := &transport.Auth{Key: []byte("the session's secret, 32 bytes.")}
		rand.Read(a.Session[:])
		tr := &Transport{Auth: a, Keys: func([16]byte) ([]byte, bool) { return a.Key, true }}
		ln, err := tr.Listen(context.Background(), "127.0.0.1:0", transport.Options{DSCP: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		acc := make(chan net.Conn, 1)
		go func() { s, _ := ln.Accept(); acc <- s }()
		c, err := tr.Dial(context.Background(), ln.Addr().String(), transport.Options{DSCP: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s := <-acc
		defer s.Close()
		if !gso {
			c.(*conn).ep.noGSO()
			s.(*conn).ep.noGSO()
		}
		want := make([]byte, 4<<20)
		rand.Read(want)
		go func() {
			c.Write(want)
			c.CloseWrite()
		}()
		got, err := io.ReadAll(s)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("gso %v: %d bytes read of %d, %v", gso, len(got), len(want), err)
		}
		if _, own := s.(*conn).ep.(*dialEndpoint); !own {
			t.Errorf("the accepted stream has no socket of its own")
		}
		if n := ln.(*Listener).relayed.Load(); n > 4 {
			t.Errorf("%d datagrams came through the listener's socket, not the stream's", n)
		}
		st, _ := c.Stats()
		perSend := float64(st.Datagrams) / float64(st.SendCalls)
		if !gso && st.Datagrams != st.SendCalls {
			t.Errorf("without GSO: %d datagrams in %d sends", st.Datagrams, st.SendCalls)
		}
		if gso && perSend <= 1 {
			t.Errorf("with GSO on loopback: %.2f datagrams per send", perSend)
		}
	}
}
