package udp_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/roottest"
	"github.com/lightpath/lightpath/internal/transport"
)

// TestPathMTU: in a namespace of its own whose loopback carries 1400-byte
// packets, streams size their datagrams from the path (the dialler from
// IP_MTU, the listener from the dialler's SYN); when the path's MTU drops
// to 1280 under a running stream, the sends that no longer fit fail with
// EMSGSIZE (the DF bit), both ends size down and cut what was in flight to
// fit, and the bytes arrive whole. The namespace never fragmented a packet.
func TestPathMTU(t *testing.T) {
	roottest.Require(t, "a network namespace whose loopback MTU the test sets")
	path, h, lo := loopbackNS(t)
	var err error
	setMTU := func(mtu int) {
		t.Helper()
		if err := h.LinkSetMTU(lo, mtu); err != nil {
			t.Fatal(err)
		}
	}
	setMTU(1400)
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}

	tr, _ := newSession(t)
	var c, s transport.Conn
	err = netns.Do(path, func() error {
		ln, err := tr.Listen(ctx(t), "127.0.0.1:0", transport.Options{DSCP: -1})
		if err != nil {
			return err
		}
		t.Cleanup(func() { ln.Close() })
		acc := make(chan net.Conn, 1)
		go func() { a, _ := ln.Accept(); acc <- a }()
		if c, err = tr.Dial(ctx(t), ln.Addr().String(), transport.Options{DSCP: -1}); err != nil {
			return err
		}
		a := <-acc
		if a == nil {
			return fmt.Errorf("accept failed")
		}
		s = a.(transport.Conn)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	payload := func(mtu int) uint32 { return uint32(mtu - 28 - 56) }
	exchange(t, c, s, random(2<<20), random(2<<20))
	for _, end := range []transport.Conn{c, s} {
		if st, _ := end.Stats(); st.MSS != payload(1400) {
			t.Errorf("payload %d on a 1400-byte path, want %d", st.MSS, payload(1400))
		}
	}
	setMTU(1280)
	exchange(t, c, s, random(4<<20), random(4<<20))
	for _, end := range []transport.Conn{c, s} {
		st, _ := end.Stats()
		if st.MSS != payload(1280) {
			t.Errorf("payload %d after the path dropped to 1280, want %d", st.MSS, payload(1280))
		}
	}
	frag := snmp(t, path, "FragCreates")
	if frag != 0 {
		t.Errorf("the namespace fragmented %d packets", frag)
	}
}

// snmp reads a counter of the Ip line of the namespace's /proc/net/snmp.
func snmp(t *testing.T, path, field string) int {
	var v int
	err := netns.Do(path, func() error {
		f, err := os.Open("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		var names []string
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) == 0 || fields[0] != "Ip:" {
				continue
			}
			if names == nil {
				names = fields
				continue
			}
			for i, n := range names {
				if n == field && i < len(fields) {
					v, err = strconv.Atoi(fields[i])
					return err
				}
			}
		}
		return fmt.Errorf("no %s in snmp", field)
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWildcardListener: a listener bound to every address answers each
// stream from the address the dialler sent to, whatever the kernel would
// pick as the source for the dialler's address (a multi-homed host: here
// the dialler leaves from 127.0.0.1 and dials 127.0.0.2, so the kernel's
// own choice would be 127.0.0.1, which the dialler's connected socket
// ignores).
func TestWildcardListener(t *testing.T) {
	roottest.Require(t, "a network namespace to listen on every address of")
	path, h, lo := loopbackNS(t)
	var err error
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	for _, network := range []string{"udp4 0.0.0.0", "udp6 [::] (dual stack)"} {
		t.Run(network, func(t *testing.T) {
			tr, _ := newSession(t)
			var c, s transport.Conn
			err = netns.Do(path, func() error {
				addr := "0.0.0.0:0"
				if strings.HasPrefix(network, "udp6") {
					addr = "[::]:0"
				}
				ln, err := tr.Listen(ctx(t), addr, transport.Options{DSCP: -1})
				if err != nil {
					return err
				}
				t.Cleanup(func() { ln.Close() })
				_, port, _ := net.SplitHostPort(ln.Addr().String())
				acc := make(chan net.Conn, 1)
				go func() { a, _ := ln.Accept(); acc <- a }()
				if c, err = tr.Dial(ctx(t), "127.0.0.2:"+port, transport.Options{DSCP: -1, LocalAddr: "127.0.0.1"}); err != nil {
					return err
				}
				a := <-acc
				if a == nil {
					return fmt.Errorf("accept failed")
				}
				s = a.(transport.Conn)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close(); s.Close() })
			exchange(t, c, s, random(1<<20), random(1<<20))
			if got, _, _ := net.SplitHostPort(s.LocalAddr().String()); got != "127.0.0.2" && got != "::ffff:127.0.0.2" {
				t.Errorf("the accepted stream's local address is %s, want 127.0.0.2", s.LocalAddr())
			}
		})
	}
}

// loopbackNS creates a network namespace for the test (deleted when it
// ends) and returns its path, a netlink handle in it (closed when the test
// ends) and its loopback device, still down.
func loopbackNS(t *testing.T) (string, *netlink.Handle, netlink.Link) {
	t.Helper()
	name := fmt.Sprintf("lpudp-%06x", rand.IntN(1<<24))
	if err := netns.Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.Delete(name) })
	path := netns.Path(name)
	h, err := netns.Handle(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	return path, h, lo
}
