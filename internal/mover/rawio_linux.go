//go:build linux

package mover

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// errStalled is a data stream that made no progress for the stall timeout.
var errStalled = errors.New("stalled: no progress within the stall timeout")

// beginIO prepares a data stream for blocking I/O on a thread of its own, as
// iperf2 runs a thread per stream: the kernel then wakes the reader on the
// CPU that just handled its packets, with the data still in cache, instead
// of through the runtime's poller on whichever thread is free. Measured on
// loopback with 256 KiB reads and writes over two streams: 95-109 against
// 46-64 Gbit/s through the poller. It returns the function that ends it;
// TLS streams keep the poller.
func (d *dataConn) beginIO(stall time.Duration) func() {
	if d.tcp == nil || d.tls {
		return func() {}
	}
	rc, err := d.tcp.SyscallConn()
	if err != nil {
		return func() {}
	}
	var serr error
	rc.Control(func(fd uintptr) {
		if serr = unix.SetNonblock(int(fd), false); serr != nil {
			return
		}
		if stall > 0 {
			tv := unix.NsecToTimeval(int64(stall))
			serr = unix.SetsockoptTimeval(int(fd), unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
		}
	})
	if serr != nil {
		rc.Control(func(fd uintptr) { unix.SetNonblock(int(fd), true) })
		return func() {}
	}
	runtime.LockOSThread()
	d.rc, d.raw, d.stall = rc, true, stall
	return runtime.UnlockOSThread
}

// rawRead reads once with a blocking system call. idle says the stream may
// wait without limit (between blocks); otherwise the stall timeout applies.
func (d *dataConn) rawRead(p []byte, idle bool) (int, error) {
	timeout := d.stall
	if idle {
		timeout = 0
	}
	if timeout != d.rcvTimeout {
		tv := unix.NsecToTimeval(int64(timeout))
		d.rc.Control(func(fd uintptr) { unix.SetsockoptTimeval(int(fd), unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv) })
		d.rcvTimeout = timeout
	}
	for {
		var n int
		var err error
		if cerr := d.rc.Control(func(fd uintptr) { n, err = unix.Read(int(fd), p) }); cerr != nil {
			return 0, cerr
		}
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return 0, errStalled
		case err != nil:
			return 0, fmt.Errorf("read: %w", err)
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// rawWrite writes all of p with blocking system calls.
func (d *dataConn) rawWrite(p []byte) error {
	for len(p) > 0 {
		var n int
		var err error
		if cerr := d.rc.Control(func(fd uintptr) { n, err = unix.Write(int(fd), p) }); cerr != nil {
			return cerr
		}
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return errStalled
		case err != nil:
			return fmt.Errorf("write: %w", err)
		}
		p = p[n:]
	}
	return nil
}

// shutdown wakes any thread blocked on the socket: close alone does not.
func (d *dataConn) shutdown(how int) {
	if d.tcp == nil {
		return
	}
	if rc, err := d.tcp.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.Shutdown(int(fd), how) })
	}
}

// punchHole deallocates a range of a file, keeping its size.
func punchHole(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}

// memFile makes an anonymous in-memory file.
func memFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

const (
	shutWrite = unix.SHUT_WR
	shutBoth  = unix.SHUT_RDWR
)
