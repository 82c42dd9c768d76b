//go:build linux

// Package cctest lets tests that depend on whether a BPF congestion control
// is installed (the kernel's registration is global to the host) run one at
// a time across test binaries, and puts the host back as it found it.
package cctest

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/cc"
	"github.com/lightpath/lightpath/internal/cc/fast"
	"github.com/lightpath/lightpath/internal/roottest"
)

// lockPath is shared by every test binary on the host.
const lockPath = "/run/lock/lightpath-cc-test.lock"

// Hold takes the host-wide test lock until t ends and leaves name installed
// with p (want true, p nil for the defaults) or not installed (want false).
// At the end it restores what was there before (see Lock). It needs root.
func Hold(t testing.TB, name string, want bool, p *fast.Params) {
	t.Helper()
	Lock(t, name)
	if !want {
		if _, err := cc.Remove(name); err != nil {
			t.Fatal(err)
		}
		return
	}
	params := fast.DefaultParams
	if p != nil {
		params = *p
	}
	if _, _, err := cc.Install(name, params); err != nil {
		t.Fatal(err)
	}
}

// Lock takes the host-wide test lock until t ends, for a test that changes
// name's installation itself (through the binary, say). At the end it
// restores what was there before: installed with the parameters it had, or
// not installed. It needs root.
func Lock(t testing.TB, name string) {
	t.Helper()
	roottest.Require(t, "installs or removes a BPF congestion control")
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	before := installed(t, name)
	t.Cleanup(func() {
		defer f.Close()
		now := installed(t, name)
		switch {
		case before == nil && now != nil:
			if _, err := cc.Remove(name); err != nil {
				t.Errorf("cctest: put the host back (remove %s): %v", name, err)
			}
		case before != nil && (now == nil || *now != *before):
			if _, _, err := cc.Install(name, *before); err != nil {
				t.Errorf("cctest: put the host back (install %s): %v", name, err)
			}
		}
	})
}

// installed returns the parameters of name when lightpath installed it.
func installed(t testing.TB, name string) *fast.Params {
	ls, err := cc.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Name == name && l.Params != nil {
			return l.Params
		}
	}
	return nil
}

// Available reports whether the kernel offers name now.
func Available(name string) bool {
	b, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	return slices.Contains(strings.Fields(string(b)), name)
}

// Dial opens a TCP connection to addr that runs the congestion control
// name from its first packet (call it inside netns.Do to dial from a
// namespace).
func Dial(addr, name string) (*net.TCPConn, error) {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, name)
		})
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// Sink accepts one connection on ln and reads it to its end, in the
// background.
func Sink(ln net.Listener) {
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c)
	}()
}
