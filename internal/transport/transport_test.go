//go:build linux

package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func pair(t *testing.T, o Options) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := Listen(context.Background(), "127.0.0.1:0", Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := Dial(context.Background(), ln.Addr().String(), o)
	if err != nil {
		t.Fatal(err)
	}
	s := (<-acc).(*net.TCPConn)
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

func TestOptions(t *testing.T) {
	for _, cc := range AvailableCC() {
		t.Run(cc, func(t *testing.T) {
			c, s := pair(t, Options{CC: cc, DSCP: 46, PacingRate: 1 << 20, NotSentLowat: 1 << 16})
			got, err := CurrentCC(c)
			if err != nil || got != cc {
				t.Fatalf("cc = %q, %v; want %q", got, err, cc)
			}
			rc, _ := c.SyscallConn()
			var tos int
			rc.Control(func(fd uintptr) { tos, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS) })
			if tos != 46<<2 {
				t.Fatalf("IP_TOS = %#x, want %#x", tos, 46<<2)
			}
			if err := Apply(s, Options{CC: cc, DSCP: 10}); err != nil {
				t.Fatal(err)
			}
		})
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

func TestUnknownCC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Dial(context.Background(), ln.Addr().String(), Options{CC: "nosuch", DSCP: -1}); err == nil {
		t.Fatal("dial with an unknown congestion control succeeded")
	}
}

func TestSendFileAndInfo(t *testing.T) {
	c, s := pair(t, Options{DSCP: -1})
	data := make([]byte, 3<<20+17)
	rand.Read(data)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(s, int64(len(data)-1000)))
		got <- b
	}()
	n, err := SendFile(c, f, 1000, int64(len(data)-1000))
	if err != nil || n != int64(len(data)-1000) {
		t.Fatalf("SendFile = %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, data[1000:]) {
		t.Fatal("received bytes differ from the file's")
	}
	info, err := GetInfo(c)
	if err != nil {
		t.Fatal(err)
	}
	if info.BytesAcked == 0 || info.MSS == 0 {
		t.Fatalf("TCP_INFO looks empty: %+v", info)
	}
	// Past the end of the file: an error, not a hang.
	if _, err := SendFile(c, f, int64(len(data)), 10); err == nil {
		t.Fatal("sendfile past EOF succeeded")
	}
}
