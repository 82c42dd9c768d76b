//go:build linux

package transport

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
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
			for _, end := range []Conn{c, s} {
				if st, err := end.Stats(); err != nil || st.CC != cc {
					t.Fatalf("Stats().CC = %q, %v; want %q", st.CC, err, cc)
				}
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

// checkCC against a kernel of reno, bbr and cubic: what it offers and the
// default pass; anything else is refused naming what it offers, and fast,
// not loaded, with the command that loads it.
func TestCheckCCList(t *testing.T) {
	avail := []string{"reno", "bbr", "cubic"}
	for _, tc := range []struct {
		name  string
		avail []string
		want  string // "" passes
	}{
		{"", avail, ""},
		{"reno", avail, ""},
		{"cubic", avail, ""},
		{"fast", append(avail, "fast"), ""},
		{"vegas", nil, ""}, // no list: the socket decides
		{"vegas", avail, `congestion control "vegas" is not offered: this kernel offers reno, bbr, cubic`},
		{"fast", avail, `congestion control "fast" is not loaded: load it with lightpath cc install fast, as root; this kernel offers reno, bbr, cubic`},
	} {
		err := checkCC(tc.name, tc.avail)
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("checkCC(%q, %v) = %v, want %q", tc.name, tc.avail, err, tc.want)
		}
	}
}

// CheckCC passes what the kernel offers and the default, and refuses
// anything else with a line naming what it offers; for fast, not loaded, the
// line names the command that loads it.
func TestCheckCC(t *testing.T) {
	avail := AvailableCC()
	if len(avail) == 0 {
		t.Skip("no /proc/sys/net/ipv4/tcp_available_congestion_control")
	}
	for _, name := range append([]string{""}, avail...) {
		if err := CheckCC(name); err != nil {
			t.Errorf("CheckCC(%q) = %v, want nil (offered)", name, err)
		}
	}
	err := CheckCC("nosuchcc")
	if err == nil || !strings.Contains(err.Error(), `"nosuchcc"`) || !strings.Contains(err.Error(), avail[0]) {
		t.Errorf("CheckCC(nosuchcc) = %v, want an error naming it and what the kernel offers", err)
	}
	if slices.Contains(avail, FastCC) {
		t.Log("fast is loaded: its missing-module message is not checked")
		return
	}
	err = CheckCC(FastCC)
	if err == nil || !strings.Contains(err.Error(), "lightpath cc install fast") {
		t.Errorf("CheckCC(fast) without it loaded = %v, want the command that loads it", err)
	}
	// The socket's own refusal says the same.
	ln, lerr := TCP.Listen(context.Background(), "127.0.0.1:0", Options{DSCP: -1})
	if lerr != nil {
		t.Fatal(lerr)
	}
	defer ln.Close()
	if c, err := TCP.Dial(context.Background(), ln.Addr().String(), Options{DSCP: -1, CC: FastCC}); err == nil {
		c.Close()
		t.Error("dial with fast not loaded succeeded")
	} else if !strings.Contains(err.Error(), "lightpath cc install fast") {
		t.Errorf("dial with fast not loaded: %v, want the command that loads it", err)
	}
}
