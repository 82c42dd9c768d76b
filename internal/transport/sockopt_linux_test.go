//go:build linux

package transport

import (
	"context"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func pair(t *testing.T, o Options) (client, server Conn) {
	t.Helper()
	ln, err := TCP.Listen(context.Background(), "127.0.0.1:0", Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := TCP.Dial(context.Background(), ln.Addr().String(), o)
	if err != nil {
		t.Fatal(err)
	}
	s := (<-acc).(Conn)
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

func TestOptions(t *testing.T) {
	for _, cc := range AvailableCC() {
		t.Run(cc, func(t *testing.T) {
			c, s := pair(t, Options{CC: cc, DSCP: 46, PacingRate: 1 << 20, NotSentLowat: 1 << 16})
			got, err := CurrentCC(c.(syscall.Conn))
			if err != nil || got != cc {
				t.Fatalf("cc = %q, %v; want %q", got, err, cc)
			}
			rc, _ := c.(syscall.Conn).SyscallConn()
			var tos, lowat int
			rc.Control(func(fd uintptr) {
				tos, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS)
				lowat, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
			})
			if tos != 46<<2 {
				t.Fatalf("IP_TOS = %#x, want %#x", tos, 46<<2)
			}
			if lowat != 1<<16 {
				t.Fatalf("TCP_NOTSENT_LOWAT = %d, want %d", lowat, 1<<16)
			}
			if err := s.Tune(Options{CC: cc, DSCP: 10}); err != nil {
				t.Fatal(err)
			}
			if got, _ := CurrentCC(s.(syscall.Conn)); got != cc {
				t.Fatalf("tuned cc = %q, want %q", got, cc)
			}
		})
	}
}

func TestReadLowatSetsTheSocket(t *testing.T) {
	_, s := pair(t, Options{DSCP: -1})
	if err := s.(ReadLowater).SetReadLowat(12345); err != nil {
		t.Fatal(err)
	}
	rc, _ := s.(syscall.Conn).SyscallConn()
	var got int
	rc.Control(func(fd uintptr) { got, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT) })
	if got != 12345 {
		t.Fatalf("SO_RCVLOWAT = %d, want 12345", got)
	}
}

func TestDefaultCCOnLoopback(t *testing.T) {
	if !HasCC("bbr") {
		t.Skip("the kernel has no bbr")
	}
	if got := defaultCC("127.0.0.1:1"); HasCC("cubic") && got != "cubic" {
		t.Errorf("loopback default = %q, want cubic", got)
	}
	if got := defaultCC("[::1]:1"); HasCC("cubic") && got != "cubic" {
		t.Errorf("IPv6 loopback default = %q, want cubic", got)
	}
	if got := defaultCC("198.18.0.1:1"); got != "bbr" {
		t.Errorf("remote default = %q, want bbr", got)
	}
}
