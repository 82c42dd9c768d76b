package udp_test

import (
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// relay stands between a dialler and a listener on loopback, forwarding
// datagrams both ways and misbehaving on demand: it drops, duplicates and
// delays (so reorders) them at random, and keeps a copy of what the
// dialler sent for a test to replay or mangle.
type relay struct {
	front *net.UDPConn // the dialler talks to it
	back  *net.UDPConn // connected to the listener
	mu    sync.Mutex
	rnd   *rand.Rand
	// probabilities, per datagram and direction
	loss, dup, reorder float64
	// a path's delay, each way: every datagram is held delay plus a
	// uniform draw from [0, jitter), so jitter reorders them
	delay, jitter time.Duration
	// fifo: datagrams of a direction leave in the order they came, each
	// after its delay at least (a delay that grows holds the ones behind)
	fifo   bool
	line   [2]chan timed
	ce     float64      // marks Congestion Experienced on datagrams to the listener
	tos    map[byte]int // TOS bytes of the dialler's datagrams, counted
	client *net.UDPAddr
	// a bottleneck on the way to the listener: datagrams queue (up to
	// queueLimit bytes, dropped beyond) and leave at rate bytes/s
	rate       float64
	queueLimit int
	queue      chan []byte
	queued     int
	captured   [][]byte
	fromServer int // datagrams the listener sent
	// payload bytes of the dialler's DATA datagrams dropped that were not
	// retransmissions: what the listener must repair
	droppedOriginal uint64
	// the most a delayed datagram left after its time, and the dialler's
	// original DATA datagrams (count, payload bytes) that left more than
	// maxLate after theirs: a busy machine runs this process's timers
	// late, which reorders them beyond the path's jitter, as far as a
	// loss to the receiver's reorder window
	late                time.Duration
	lateOrig, lateBytes uint64
	wg                  sync.WaitGroup
}

// forwardAt forwards p, due at due, and notes how late it left.
func (r *relay) forwardAt(up bool, p []byte, due time.Time) {
	r.forward(up, p)
	late := time.Since(due)
	r.mu.Lock()
	r.late = max(r.late, late)
	if late > maxLate && up && isOriginalData(p) {
		r.lateOrig++
		r.lateBytes += uint64(len(p) - dataOverhead)
	}
	r.mu.Unlock()
}

// lateness is the most a delayed datagram left after its time so far, and
// the dialler's original DATA datagrams (and their payload bytes) that
// left more than maxLate after theirs.
func (r *relay) lateness() (most time.Duration, originals, bytes uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.late, r.lateOrig, r.lateBytes
}

func newRelay(t testing.TB, server net.Addr, seed uint64) *relay {
	t.Helper()
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.DialUDP("udp", nil, server.(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	relayBuffers(front)
	relayBuffers(back)
	recvTOS(front)
	r := &relay{front: front, back: back, rnd: rand.New(rand.NewPCG(seed, seed^0x5eed)), tos: map[byte]int{}}
	r.wg.Add(2)
	go r.pump(true)
	go r.pump(false)
	t.Cleanup(func() {
		front.Close()
		back.Close()
		r.mu.Lock()
		if r.queue != nil {
			close(r.queue)
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

func (r *relay) Addr() string { return r.front.LocalAddr().String() }

func (r *relay) set(loss, dup, reorder float64) {
	r.mu.Lock()
	r.loss, r.dup, r.reorder = loss, dup, reorder
	r.mu.Unlock()
}

// path gives both directions a delay and a jitter.
func (r *relay) path(delay, jitter time.Duration) {
	r.mu.Lock()
	r.delay, r.jitter = delay, jitter
	r.mu.Unlock()
}

// timed is a datagram in a delay line and when it may leave.
type timed struct {
	at time.Time
	p  []byte
}

// inOrder makes the relay a delay line that keeps each direction's order
// (before the path is given a delay).
func (r *relay) inOrder(t testing.TB) {
	r.mu.Lock()
	r.fifo = true
	for dir := range r.line {
		r.line[dir] = make(chan timed, 1<<16)
	}
	lines := r.line
	r.mu.Unlock()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	for dir, ch := range lines {
		go func() {
			for {
				select {
				case <-stop:
					return
				case d := <-ch:
					time.Sleep(time.Until(d.at))
					r.forwardAt(dir == 1, d.p, d.at)
				}
			}
		}()
	}
}

// pump forwards one direction: up (dialler to listener) or down.
func (r *relay) pump(up bool) {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	oob := make([]byte, 128)
	for {
		var n int
		var err error
		if up {
			var from *net.UDPAddr
			var oobn int
			n, oobn, _, from, err = r.front.ReadMsgUDP(buf, oob)
			if err == nil {
				r.mu.Lock()
				if tos, ok := tosIn(oob[:oobn]); ok {
					r.tos[tos]++
				}
				r.client = from
				if len(r.captured) < 20000 {
					r.captured = append(r.captured, append([]byte(nil), buf[:n]...))
				}
				r.mu.Unlock()
			}
		} else {
			n, err = r.back.Read(buf)
			if err == nil {
				r.mu.Lock()
				r.fromServer++
				r.mu.Unlock()
			}
		}
		if err != nil {
			if ne, ok := err.(net.Error); ok && !ne.Timeout() && isClosed(err) {
				return
			}
			continue
		}
		p := append([]byte(nil), buf[:n]...)
		r.mu.Lock()
		drop := r.rnd.Float64() < r.loss
		copies := 1
		if r.rnd.Float64() < r.dup {
			copies = 2
		}
		ce := up && r.rnd.Float64() < r.ce
		delay, fifo := r.delay, r.fifo
		if r.jitter > 0 {
			delay += time.Duration(r.rnd.Int64N(int64(r.jitter)))
		}
		if r.rnd.Float64() < r.reorder {
			delay += time.Duration(1+r.rnd.IntN(5)) * time.Millisecond
		}
		r.mu.Unlock()
		if drop {
			if up && isOriginalData(p) {
				r.mu.Lock()
				r.droppedOriginal += uint64(len(p) - dataOverhead)
				r.mu.Unlock()
			}
			continue
		}
		for range copies {
			switch {
			case ce:
				r.back.WriteMsgUDP(p, ceOOB(), nil)
			case delay > 0 && fifo:
				dir := 0
				if up {
					dir = 1
				}
				r.line[dir] <- timed{time.Now().Add(delay), p}
			case delay > 0:
				due := time.Now().Add(delay)
				time.AfterFunc(delay, func() { r.forwardAt(up, p, due) })
			default:
				r.forward(up, p)
			}
		}
	}
}

// bottleneck makes the way to the listener a link of rate bytes/s with a
// drop-tail queue of limit bytes.
func (r *relay) bottleneck(rate float64, limit int) {
	r.mu.Lock()
	r.rate, r.queueLimit = rate, limit
	r.queue = make(chan []byte, 1<<16)
	q := r.queue
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		next := time.Now() // when the link is free again
		for p := range q {
			r.mu.Lock()
			r.queued -= len(p)
			r.mu.Unlock()
			next = next.Add(time.Duration(float64(len(p)) / rate * 1e9))
			if now := time.Now(); next.Before(now.Add(-2 * time.Millisecond)) {
				// an idle link saves nothing up; 2 ms make up for the
				// sleeps' overshoot
				next = now.Add(-2 * time.Millisecond)
			}
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			if _, err := r.back.Write(p); err != nil && isClosed(err) {
				return
			}
		}
	}()
}

func (r *relay) forward(up bool, p []byte) {
	if up {
		r.mu.Lock()
		q := r.queue
		if q != nil {
			if r.queued+len(p) > r.queueLimit {
				r.mu.Unlock()
				return // tail drop
			}
			r.queued += len(p)
		}
		r.mu.Unlock()
		if q != nil {
			q <- p
			return
		}
		r.back.Write(p)
		return
	}
	r.mu.Lock()
	to := r.client
	r.mu.Unlock()
	if to != nil {
		r.front.WriteToUDP(p, to)
	}
}

// inject sends p to the listener as if the dialler had sent it.
func (r *relay) inject(p []byte) { r.back.Write(p) }

func (r *relay) tosSeen() map[byte]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[byte]int{}
	for k, v := range r.tos {
		m[k] = v
	}
	return m
}

func (r *relay) serverDatagrams() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fromServer
}

func (r *relay) capturedCopy() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.captured...)
}

func isClosed(err error) bool {
	return err != nil && (errorsIs(err, net.ErrClosed))
}

// dataOverhead is a DATA datagram's bytes besides its payload: the header
// (32), the offset (8) and the MAC (16).
const dataOverhead = 32 + 8 + 16

// isOriginalData says whether p is a DATA datagram sent for the first time
// (type 3 without the retransmission flag, 4).
func isOriginalData(p []byte) bool {
	return len(p) >= dataOverhead && p[1] == 3 && p[3]&4 == 0
}

func (r *relay) droppedOriginalBytes() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.droppedOriginal
}
