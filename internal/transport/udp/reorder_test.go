package udp_test

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/transport/udp"
)

// maxLate is how late the relay may forward a delayed datagram and still
// be the path a test asks for: with 3 ms of jitter, 10 ms each way, the
// receiver's reorder window (a quarter of the 20 ms round trip) keeps
// 2 ms for lateness.
const maxLate = 2 * time.Millisecond

// TestReordering: a path that loses nothing but reorders (10 ms each way,
// every datagram held up to 3 ms more at random, as the testbed's jitter
// with reorder: true does). Nothing is lost, so nothing may be counted as
// repaired and the rate control must never be told of loss (it would slow
// down for it). How much is sent again is logged, not checked: the share
// grows with how late a busy machine runs the relay (bench/transports.sh
// reports it for real paths).
// (Before the reorder window and the count of repairs, the same path had
// 3 to 11% of the bytes sent again, all counted as loss and as repaired.)
func TestReordering(t *testing.T) {
	for _, tc := range []struct {
		cc   string
		rate uint64
	}{
		// capped at 25 MiB/s (210 Mbit/s), which the relay forwards on a
		// busy machine without its socket's buffer overflowing (that
		// would be loss)
		{"fast", 25 << 20},
		{"fixed", 25 << 20},
		{"aimd", 25 << 20},
	} {
		t.Run(tc.cc, func(t *testing.T) {
			c, s, _, r := viaRelayWith(t, transport.Options{DSCP: -1, CC: tc.cc, PacingRate: tc.rate}, 11, func(r *relay) {
				r.path(10*time.Millisecond, 3*time.Millisecond)
			})
			// A stall of the relay (this busy process) longer than the
			// usual 50 ms floor would fire timeouts whose copies the
			// jitter lets overtake their originals: loss this test is not
			// about. A second's floor leaves loss detection to the acks.
			udp.SetMinRTO(c, time.Second)
			udp.SetMinRTO(s, time.Second)
			const n = 24 << 20
			start := time.Now()
			exchange(t, c, s, random(n), random(1000))
			took := time.Since(start)
			cs, ss := endStats(t, c, s)
			lost, rounds := udp.LossTold(c)
			fired, undone := udp.Timeouts(c)
			t.Logf("%s: %.0f Mbit/s, sent %d B, again %d B (%.2f%%), repaired %d B, loss told %d datagrams in %d rounds, timeouts %d (undone %d), pacing at %d B/s, rtt %v min %v",
				tc.cc, float64(n)*8/took.Seconds()/1e6, cs.BytesSent, cs.BytesRetrans,
				100*float64(cs.BytesRetrans)/float64(cs.BytesSent), ss.LossRepaired, lost, rounds, fired, undone, cs.PacingRate, cs.RTT, cs.MinRTT)
			if k := kernelDrops(c, s, r); k != 0 {
				// A receive buffer overflowed on a busy machine: the path
				// was not lossless after all, and the loss is repaired;
				// but only what the kernel dropped may be told as lost.
				t.Logf("the kernel dropped %d datagrams of the exchange for full receive buffers", k)
				if lost > uint64(max(k, 0)) {
					t.Errorf("the rate control was told of %d datagrams lost; the path lost none and the kernel dropped %d", lost, k)
				}
				return
			}
			// The relay (this process) runs its timers late on a busy
			// machine: an original it held more than maxLate past its
			// time arrives behind later ones by more than the path's
			// jitter, as late as a loss to the receiver's reorder window.
			// Only those may be repaired and told as lost; on a machine
			// that runs the relay on time, none.
			most, lateN, lateB := r.lateness()
			t.Logf("the relay forwarded %d originals (%d B) more than %v after their time, the latest %v after", lateN, lateB, maxLate, most)
			if ss.LossRepaired > lateB {
				t.Errorf("the receiver counts %d bytes repaired on a path that lost nothing and delayed %d bytes of originals past their time", ss.LossRepaired, lateB)
			}
			if lost > lateN {
				t.Errorf("the rate control was told of %d datagrams lost (in %d rounds) on a path that lost nothing and delayed %d originals past their time", lost, rounds, lateN)
			}
		})
	}
}

// TestLossRepaired: through a path that loses 3% of the datagrams and
// reorders them (jitter), the bytes the receiver counts as repaired are
// exactly the payload of the original datagrams the path dropped: a late
// original that fills a hole already NAKed is not a repair, and the
// retransmission that arrives after it repairs nothing.
func TestLossRepaired(t *testing.T) {
	for _, cc := range []string{"fast", "fixed"} {
		t.Run(cc, func(t *testing.T) {
			c, s, _, r := viaRelayWith(t, transport.Options{DSCP: -1, CC: cc, PacingRate: 25 << 20}, 5, func(r *relay) {
				r.path(10*time.Millisecond, 3*time.Millisecond)
			})
			r.set(0.03, 0, 0)
			// As in TestReordering: no spurious timeouts from stalls.
			udp.SetMinRTO(c, time.Second)
			udp.SetMinRTO(s, time.Second)
			exchange(t, c, s, random(12<<20), random(1000))
			cs, ss := endStats(t, c, s)
			dropped := r.droppedOriginalBytes()
			t.Logf("%s: dropped %d B of originals, repaired %d B, sent again %d B", cc, dropped, ss.LossRepaired, cs.BytesRetrans)
			if dropped == 0 {
				t.Fatal("the relay dropped nothing")
			}
			// Every byte dropped is repaired once; more only if the kernel
			// dropped datagrams too (a receive buffer full on a busy
			// machine), which the relay cannot count, or if the relay held
			// originals so far past their time (its timers late on a busy
			// machine) that their copies came first (see TestReordering).
			_, _, lateB := r.lateness()
			switch k := kernelDrops(c, s, r); {
			case ss.LossRepaired < dropped:
				t.Errorf("repaired %d bytes; the path dropped %d bytes of original data", ss.LossRepaired, dropped)
			case ss.LossRepaired > dropped+lateB && k == 0:
				t.Errorf("repaired %d bytes; the path dropped %d bytes of original data and delayed %d past their time, the kernel none", ss.LossRepaired, dropped, lateB)
			case ss.LossRepaired > dropped:
				t.Logf("the kernel dropped %d datagrams for full receive buffers; the relay delayed %d bytes of originals past their time", k, lateB)
			}
			if cs.BytesRetrans < ss.LossRepaired {
				t.Errorf("repaired %d bytes with %d sent again", ss.LossRepaired, cs.BytesRetrans)
			}
		})
	}
}

// kernelDrops is what the kernel dropped (a receive buffer full on a busy
// machine, mostly) on the UDP sockets of one test's exchange: those bound
// to the local ports of c, s and the relay, read from this network
// namespace's /proc/net/udp and udp6 (their drops column), so that the
// sockets of tests running beside it do not count. -1 where unknown.
func kernelDrops(c, s transport.Conn, r *relay) int64 {
	ports := map[string]bool{}
	for _, a := range []net.Addr{c.LocalAddr(), s.LocalAddr(), r.front.LocalAddr(), r.back.LocalAddr()} {
		if u, ok := a.(*net.UDPAddr); ok {
			ports[fmt.Sprintf("%04X", u.Port)] = true
		}
	}
	var drops int64 = -1
	for _, f := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		drops = max(drops, 0)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 13 {
				continue
			}
			_, port, _ := strings.Cut(f[1], ":")
			if ports[port] {
				n, _ := strconv.ParseInt(f[12], 10, 64)
				drops += n
			}
		}
	}
	return drops
}

// TestSpuriousTimeout: a path whose delay jumps from 10 ms to 250 ms (or
// more: past the sender's timeout) each way until a timeout fires, keeping the datagrams' order and losing none: the
// sender's timeouts fire and send again, the originals arrive first, the
// copies repair nothing, and the rate control gets back what the timeout
// cut (each timeout is found spurious) and is never told of loss.
func TestSpuriousTimeout(t *testing.T) {
	for _, cc := range []string{"fast", "aimd"} {
		t.Run(cc, func(t *testing.T) {
			c, s, _, r := viaRelayWith(t, transport.Options{DSCP: -1, CC: cc, PacingRate: 25 << 20}, 3, func(r *relay) {
				r.inOrder(t)
				r.path(10*time.Millisecond, 0)
			})
			// The delay jumps once 4 MiB have arrived, so that the stream
			// is in full flow however slowly a busy machine got it going.
			// It jumps past the sender's timeout (at least 250 ms each way:
			// on a busy machine the RTT's variance can put the timeout
			// above that) and falls back once a timeout has fired.
			done, over := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				wait := func(cond func() bool) bool {
					for !cond() {
						select {
						case <-over:
							return false
						case <-time.After(time.Millisecond):
						}
					}
					return true
				}
				if !wait(func() bool { st, _ := s.Stats(); return st.BytesReceived >= 4<<20 }) {
					return
				}
				r.path(max(250*time.Millisecond, udp.RTO(c)+50*time.Millisecond), 0)
				wait(func() bool { fired, _ := udp.Timeouts(c); return fired > 0 })
				r.path(10*time.Millisecond, 0)
			}()
			exchange(t, c, s, random(24<<20), random(1000))
			close(over)
			<-done
			cs, err := c.Stats()
			if err != nil {
				t.Fatal(err)
			}
			ss, err := s.Stats()
			if err != nil {
				t.Fatal(err)
			}
			fired, undone := udp.Timeouts(c)
			lost, _ := udp.LossTold(c)
			t.Logf("%s: timeouts %d, undone %d; sent again %d B, repaired %d B, loss told %d", cc, fired, undone, cs.BytesRetrans, ss.LossRepaired, lost)
			if k := kernelDrops(c, s, r); k != 0 {
				// Real loss, which this test is not about: what it may
				// be told is bounded by what the kernel dropped.
				t.Logf("the kernel dropped %d datagrams of the exchange for full receive buffers", k)
				if lost > uint64(max(k, 0)) {
					t.Errorf("the rate control was told of %d datagrams lost; the path lost none and the kernel dropped %d", lost, k)
				}
				return
			}
			if fired == 0 {
				t.Fatal("no timeout fired while the path held everything for 250 ms")
			}
			if undone != fired || lost != 0 || ss.LossRepaired != 0 {
				t.Errorf("of %d timeouts %d undone, loss told %d, repaired %d bytes: want every timeout undone, no loss", fired, undone, lost, ss.LossRepaired)
			}
		})
	}
}
