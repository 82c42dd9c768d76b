//go:build linux

package emu

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// device is an open TUN device shared by the pipe that reads it and the
// pipe that writes into it. Its file is non-blocking and registered with
// the Go runtime's poller, so a reader parks without holding a thread and
// Close wakes it.
type device struct {
	ns, name string
	f        *os.File
	rc       syscall.RawConn
	uso      bool // UDP GSO batches cross whole (TUN_F_USO4/6)

	// Guarded by Emulator.mu.
	reader  *pipe
	users   int
	carrier bool
}

func openDevice(ns, name string) (*device, error) {
	fd, uso, err := openTun(ns, name)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open tun %s in %s: %w", name, ns, err)
	}
	return &device{ns: ns, name: name, f: f, rc: rc, uso: uso}, nil
}

func (d *device) close() error {
	if err := d.f.Close(); err != nil {
		return fmt.Errorf("close tun %s in %s: %w", d.name, d.ns, err)
	}
	return nil
}

// setCarrier turns the device's carrier on or off (TUNSETCARRIER): off,
// the kernel stops queueing to it and routes through it are marked
// linkdown, as when a cable is pulled.
func (d *device) setCarrier(on bool) error {
	v := 0
	if on {
		v = 1
	}
	var ierr error
	err := d.rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetPointerInt(int(fd), unix.TUNSETCARRIER, v)
	})
	if err == nil {
		err = ierr
	}
	if err != nil {
		return fmt.Errorf("set carrier of %s in %s: %w", d.name, d.ns, err)
	}
	return nil
}

// devReader reads packets from a device in batches: as many as the
// kernel has ready, up to len(bufs), before it goes back to the poller.
type devReader struct {
	rc   syscall.RawConn
	bufs []*buffer
	lens []int
	n    int
	err  error
	fn   func(fd uintptr) bool // made once: a closure per read would allocate
}

func (d *device) newReader(batch int) *devReader {
	r := &devReader{rc: d.rc, bufs: make([]*buffer, batch), lens: make([]int, batch)}
	r.refill()
	r.fn = func(fd uintptr) bool {
		for r.n < len(r.bufs) {
			n, err := unix.Read(int(fd), r.bufs[r.n].b)
			switch err {
			case nil:
				r.lens[r.n] = n
				r.n++
			case unix.EINTR:
			case unix.EAGAIN:
				return r.n > 0 // nothing at all: wait in the poller
			default:
				r.err = err
				return true
			}
		}
		return true
	}
	return r
}

// read fills bufs[:n] (lens[:n] their lengths); the caller may take
// buffers out (setting them nil) and calls refill before the next read.
func (r *devReader) read() (int, error) {
	r.n, r.err = 0, nil
	if err := r.rc.Read(r.fn); err != nil {
		return 0, err
	}
	if r.n == 0 && r.err != nil {
		return 0, r.err
	}
	return r.n, nil
}

func (r *devReader) refill() {
	for i, b := range r.bufs {
		if b == nil {
			r.bufs[i] = getBuffer(maxPacket)
		}
	}
}

// devWriter writes packets into a device, a batch under one reference to
// the file. A TUN write hands one packet to the kernel's receive path.
type devWriter struct {
	rc      syscall.RawConn
	pkts    []packet
	i       int
	segs    int64 // segments and wire bytes the kernel refused
	wire    int64
	lastErr error
	fn      func(fd uintptr) bool
}

func (d *device) newWriter() *devWriter {
	w := &devWriter{rc: d.rc}
	w.fn = func(fd uintptr) bool {
		for w.i < len(w.pkts) {
			pk := &w.pkts[w.i]
			_, err := unix.Write(int(fd), pk.data())
			switch err {
			case nil:
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			default:
				w.segs += int64(pk.segs)
				w.wire += int64(pk.wire)
				w.lastErr = err
			}
			w.i++
		}
		return true
	}
	return w
}

// write writes pkts and returns the segments and wire bytes that failed,
// with the last error.
func (w *devWriter) write(pkts []packet) (segs, wire int64, err error) {
	w.pkts, w.i, w.segs, w.wire, w.lastErr = pkts, 0, 0, 0, nil
	if err := w.rc.Write(w.fn); err != nil {
		// The file is closed: whatever was not written is lost.
		for _, pk := range pkts[w.i:] {
			w.segs += int64(pk.segs)
			w.wire += int64(pk.wire)
		}
		w.lastErr = err
	}
	w.pkts = nil
	return w.segs, w.wire, w.lastErr
}

// waker is what a pipe's writer sleeps on: a timerfd in the Go runtime's
// poller. It wakes on an hrtimer (tens of microseconds late, where a Go
// timer is up to a millisecond late: the poller waits in whole
// milliseconds), yet the sleeping goroutine holds no thread and no P
// (a nanosleep would hold a P until sysmon took it back, starving the
// other pipes on a 2-core host). The reader wakes the writer by arming
// the same timer to fire at once.
type waker struct {
	f   *os.File
	rc  syscall.RawConn
	buf [8]byte
	fn  func(fd uintptr) bool

	// arm is the writer's alone; wake is shared but constant. Closures
	// made once, as one per call would allocate.
	armSpec unix.ItimerSpec
	armErr  error
	armFn   func(fd uintptr)
	wakeFn  func(fd uintptr)
}

// wakeSpec fires a relative timer in 1 ns: at once (0 would disarm it).
var wakeSpec = unix.ItimerSpec{Value: unix.Timespec{Nsec: 1}}

func newWaker() (*waker, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create timerfd: %w", err)
	}
	w := &waker{f: os.NewFile(uintptr(fd), "timerfd")}
	if w.rc, err = w.f.SyscallConn(); err != nil {
		w.f.Close()
		return nil, fmt.Errorf("create timerfd: %w", err)
	}
	w.fn = func(fd uintptr) bool {
		_, err := unix.Read(int(fd), w.buf[:])
		return err != unix.EAGAIN // anything else: expired, or an error for wait to return
	}
	w.armFn = func(fd uintptr) { w.armErr = unix.TimerfdSettime(int(fd), 0, &w.armSpec, nil) }
	w.wakeFn = func(fd uintptr) { unix.TimerfdSettime(int(fd), 0, &wakeSpec, nil) }
	return w, nil
}

// arm makes wait return at the mono time until (at once if it is past),
// or never if until is 0. It replaces any earlier arming. Only the writer
// calls it.
func (w *waker) arm(until int64) error {
	w.armSpec = unix.ItimerSpec{}
	if until != 0 {
		// Relative, so no mapping from mono to CLOCK_MONOTONIC is needed;
		// 0 would disarm, so at least 1 ns.
		w.armSpec.Value = unix.NsecToTimespec(max(1, until-mono()))
	}
	w.armErr = nil
	if err := w.rc.Control(w.armFn); err != nil {
		return err
	}
	return w.armErr
}

// wake makes wait return now; any goroutine may call it.
func (w *waker) wake() { w.rc.Control(w.wakeFn) }

// wait waits until the timer fires; it fails once the waker is closed.
func (w *waker) wait() error { return w.rc.Read(w.fn) }

func (w *waker) close() error { return w.f.Close() }
