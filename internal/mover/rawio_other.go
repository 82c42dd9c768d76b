//go:build !linux

package mover

import (
	"errors"
	"os"
	"time"
)

var errStalled = errors.New("stalled: no progress within the stall timeout")

// beginIO keeps the runtime's poller where blocking threads are not set up.
func (d *dataConn) beginIO(stall time.Duration) func() { return func() {} }

func (d *dataConn) rawRead(p []byte, idle bool) (int, error) { return 0, errors.ErrUnsupported }
func (d *dataConn) rawWrite(p []byte) error                  { return errors.ErrUnsupported }
func (d *dataConn) shutdown(how int)                         {}

func punchHole(f *os.File, off, n int64) error { return errors.ErrUnsupported }

func memFile(name string) (*os.File, error) { return nil, errors.ErrUnsupported }

const (
	shutWrite = 1
	shutBoth  = 2
)
