package udp

import (
	"time"

	"github.com/lightpath/lightpath/internal/cc/fast"
	"github.com/lightpath/lightpath/internal/transport"
)

// LossTold says how many datagrams, in how many rounds, a stream's rate
// control was told were lost (what it may slow down for).
func LossTold(c transport.Conn) (datagrams, rounds uint64) {
	s := c.(*conn)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.lossTold, s.stats.lossRounds
}

// FASTParams are the parameters of a stream's fast rate control (ok false:
// it runs another).
func FASTParams(c transport.Conn) (p fast.Params, ok bool) {
	s := c.(*conn)
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.ctl.(*fastCtl)
	if !ok {
		return p, false
	}
	return f.p, true
}

// Timeouts says how many timeouts a stream's sender had (episodes: one
// until what it sent again is acknowledged) and how many proved spurious.
func Timeouts(c transport.Conn) (fired, undone uint64) {
	s := c.(*conn)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.timeouts, s.stats.undone
}

// SetMinRTO raises a stream's least retransmission timeout to d (at most
// maxRTO applies still), so that a test about loss detection is not
// muddled by timeouts a busy machine's stalls would fire.
func SetMinRTO(c transport.Conn, d time.Duration) {
	s := c.(*conn)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rtoFloor = d
}

// RTO is a stream's retransmission timeout now.
func RTO(c transport.Conn) time.Duration {
	s := c.(*conn)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rto()
}
