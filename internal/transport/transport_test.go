package transport_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/transport/transporttest"
)

func TestTCPConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transport.Transport { return transport.TCP })
}

// TestStreamOf: the mover finds the stream under TLS and under a plain
// listener's connection.
func TestStreamOf(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); acc <- c }()
	c, err := transport.TCP.Dial(context.Background(), ln.Addr().String(), transport.Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	plain := <-acc
	defer plain.Close()
	if got := transport.StreamOf(c); got != c {
		t.Errorf("StreamOf(a stream) = %v, want the stream itself", got)
	}
	if got := transport.StreamOf(tls.Client(c, &tls.Config{})); got != c {
		t.Errorf("StreamOf(TLS over a stream) = %v, want the stream", got)
	}
	s := transport.StreamOf(plain)
	if s == nil {
		t.Fatal("StreamOf(a plain TCP connection) = nil")
	}
	if _, err := s.Stats(); err != nil {
		t.Errorf("Stats of an adopted connection: %v", err)
	}
	if transport.StreamOf(&net.UnixConn{}) != nil {
		t.Error("StreamOf(a Unix connection) is a stream")
	}
}
