//go:build !linux

package emu

import (
	"errors"
	"fmt"
	"time"

	"github.com/lightpath/lightpath/internal/platform"
)

// CreateTun needs Linux TUN devices.
func CreateTun(nsPath, name string, mtu int) error {
	return fmt.Errorf("create tun %s: %w", name, platform.ErrUnsupported)
}

// DeleteTun needs Linux TUN devices.
func DeleteTun(nsPath, name string) error {
	return fmt.Errorf("delete tun %s: %w", name, platform.ErrUnsupported)
}

// device is never opened outside Linux; the type exists so that the
// portable code builds (and its control plane can be tested).
type device struct {
	name    string
	uso     bool
	reader  *pipe
	users   int
	carrier bool
}

func openDevice(ns, name string) (*device, error) {
	return nil, fmt.Errorf("open tun %s: %w", name, platform.ErrUnsupported)
}

func (d *device) close() error             { return nil }
func (d *device) setCarrier(on bool) error { return platform.ErrUnsupported }

type devReader struct {
	bufs []*buffer
	lens []int
}

func (d *device) newReader(batch int) *devReader { return &devReader{} }
func (r *devReader) read() (int, error)          { return 0, platform.ErrUnsupported }
func (r *devReader) refill()                     {}

type devWriter struct{}

func (d *device) newWriter() *devWriter { return &devWriter{} }
func (w *devWriter) write(pkts []packet) (segs, wire int64, err error) {
	for _, pk := range pkts {
		segs += int64(pk.segs)
		wire += int64(pk.wire)
	}
	return segs, wire, platform.ErrUnsupported
}

// waker is a Go timer outside Linux: coarser, but this code only runs in
// tests of the control plane there.
type waker struct {
	t    *time.Timer
	ch   chan struct{}
	done chan struct{}
}

func newWaker() (*waker, error) {
	w := &waker{ch: make(chan struct{}, 1), done: make(chan struct{})}
	w.t = time.AfterFunc(time.Hour, w.wake)
	w.t.Stop()
	return w, nil
}

func (w *waker) arm(until int64) error {
	w.t.Stop()
	if until != 0 {
		w.t.Reset(time.Duration(max(1, until-mono())))
	}
	return nil
}

func (w *waker) wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

func (w *waker) wait() error {
	select {
	case <-w.ch:
		return nil
	case <-w.done:
		return errors.New("waker closed")
	}
}

func (w *waker) close() error {
	w.t.Stop()
	close(w.done)
	return nil
}
