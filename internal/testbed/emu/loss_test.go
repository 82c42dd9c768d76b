package emu

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/topology"
)

func TestLossModels(t *testing.T) {
	const n = 2_000_000
	for _, tc := range []struct {
		name string
		loss topology.Loss
		mean float64
		// burst: P(loss | previous lost) for Gilbert-Elliott, whose losses
		// come in bursts; for random loss it is the mean again.
		burst float64
	}{
		{"none", topology.Loss{}, 0, 0},
		{"random 1%", topology.Loss{Model: topology.LossRandom, Rate: 0.01}, 0.01, 0.01},
		{"random 50%", topology.Loss{Model: topology.LossRandom, Rate: 0.5}, 0.5, 0.5},
		{"random all", topology.Loss{Model: topology.LossRandom, Rate: 1}, 1, 1},
		// π_bad = P/(P+R) = 1/11; mean = (P·H + R·K)/(P+R).
		{"gilbert-elliott", topology.Loss{Model: topology.LossGilbertElliott, P: 0.01, R: 0.1, H: 0.5, K: 0.001}, (0.01*0.5 + 0.1*0.001) / 0.11, 0},
		// Gilbert: K=0, H=1. A loss means bad; the next is lost if it stays bad.
		{"gilbert", topology.Loss{Model: topology.LossGilbertElliott, P: 0.002, R: 0.25, H: 1}, 0.002 / 0.252, 0.75},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newLossState(1, 2)
			lost, pairs, afterLoss := 0, 0, 0
			prev := false
			for range n {
				l := s.lose(&tc.loss)
				if l {
					lost++
				}
				if prev {
					afterLoss++
					if l {
						pairs++
					}
				}
				prev = l
			}
			mean := float64(lost) / n
			if math.Abs(mean-tc.mean) > 0.05*tc.mean+1e-4 {
				t.Errorf("mean loss %.5f, want %.5f", mean, tc.mean)
			}
			if tc.burst > 0 {
				if b := float64(pairs) / float64(afterLoss); math.Abs(b-tc.burst) > 0.05*tc.burst {
					t.Errorf("P(loss | loss) %.4f, want %.4f", b, tc.burst)
				}
			}
			if got := lossy(&tc.loss); got != (tc.mean > 0) {
				t.Errorf("lossy %v, want %v", got, tc.mean > 0)
			}
		})
	}
}

func TestLossModelChangeStartsGood(t *testing.T) {
	s := newLossState(3, 4)
	stuck := topology.Loss{Model: topology.LossGilbertElliott, P: 1, R: 0, H: 1}
	if !s.lose(&stuck) || !s.bad {
		t.Fatal("P=1 H=1 did not lose")
	}
	s.lose(&topology.Loss{Model: topology.LossRandom, Rate: 0})
	if s.lose(&topology.Loss{Model: topology.LossGilbertElliott, P: 0, R: 0, H: 1}) {
		t.Error("a new Gilbert-Elliott model started in the bad state")
	}
}

func TestDelayLine(t *testing.T) {
	var d delayLine
	// FIFO: a later packet due earlier waits for the earlier one.
	for i, due := range []int64{10, 30, 20, 20, 5, 40} {
		d.push(packet{due: due, n: int32(i)}, true)
	}
	var order []int32
	var dues []int64
	for d.len() > 0 {
		p := d.pop()
		order = append(order, p.n)
		dues = append(dues, p.due)
	}
	if want := []int32{0, 1, 2, 3, 4, 5}; !equal(order, want) {
		t.Errorf("fifo order %v, want %v", order, want)
	}
	if want := []int64{10, 30, 30, 30, 30, 40}; !equal(dues, want) {
		t.Errorf("fifo due times %v, want %v", dues, want)
	}
	// Reorder: by due time, ties by arrival.
	order = order[:0]
	for i, due := range []int64{50, 45, 60, 45, 41, 70} {
		d.push(packet{due: due, n: int32(i)}, false)
	}
	// Back to FIFO: the floor is the latest due time seen, not the head.
	d.push(packet{due: 0, n: 6}, true)
	for d.len() > 0 {
		order = append(order, d.pop().n)
	}
	if want := []int32{4, 1, 3, 0, 2, 5, 6}; !equal(order, want) {
		t.Errorf("reorder order %v, want %v", order, want)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestProcessSplitsLossySuperPackets runs the reader's decision on a
// super-packet without devices: the survivors of a lossy link are valid
// segments, the counters add up.
func TestProcessSplitsLossySuperPackets(t *testing.T) {
	p := newPipe(PipeSpec{Link: "l", From: "a", To: "b"}, nil, nil, slog.New(slog.DiscardHandler))
	tc := gsoCase{payload: 45*1448 - 100, mss: 1448, tcpOpts: 12, flags: 0x18, seq: 4242}
	pkt := buildGSO(tc)
	params := &Params{Delay: time.Millisecond, Loss: topology.Loss{Model: topology.LossRandom, Rate: 0.3}}
	var out []packet
	var fate []uint8
	segs := 0
	for range 20 {
		b := getBuffer(maxPacket)
		n := copy(b.b, pkt)
		out, fate = p.process(out[:0], fate, params, &b, n, 1000)
		if b == nil {
			t.Fatal("a split super-packet kept its read buffer")
		}
		for _, o := range out {
			got := singles(t, o.data())
			wire := 0
			for _, seg := range got {
				wire += len(seg)
				tcp := seg[20:]
				if c := sum16(tcp, uint32(^sum16(pseudo(seg, false, len(tcp)), 0))); c != 0 {
					t.Errorf("segment checksum off by %#x", c)
				}
				if off := binary.BigEndian.Uint32(tcp[4:]) - tc.seq; off%1448 != 0 {
					t.Errorf("segment at offset %d", off)
				}
			}
			if int(o.segs) != len(got) || int(o.wire) != wire || o.due != 1000+int64(time.Millisecond) {
				t.Errorf("run %+v of %d segments, %d bytes", o, len(got), wire)
			}
			segs += len(got)
			putBuffer(o.buf)
		}
	}
	st := p.stats()
	if st.PacketsIn != 20*45 || st.SuperPacketsIn != 20 || st.DropsLoss+uint64(segs) != st.PacketsIn {
		t.Errorf("in %d (super %d), lost %d, passed %d", st.PacketsIn, st.SuperPacketsIn, st.DropsLoss, segs)
	}
	if f := float64(st.DropsLoss) / float64(st.PacketsIn); f < 0.2 || f > 0.4 {
		t.Errorf("lost %.2f of segments, want about 0.3", f)
	}

	// No loss: the super-packet goes on whole, in its own buffer.
	b := getBuffer(maxPacket)
	n := copy(b.b, pkt)
	out, _ = p.process(out[:0], fate, &Params{}, &b, n, 0)
	if len(out) != 1 || out[0].segs != 45 || b != nil {
		t.Errorf("clean link: %d packets, buffer kept %v", len(out), b == nil)
	}
	// Down: nothing, counted.
	b = getBuffer(maxPacket)
	n = copy(b.b, pkt)
	out, _ = p.process(out[:0], fate, &Params{Down: true}, &b, n, 0)
	if len(out) != 0 || p.stats().DropsDown != 45 {
		t.Errorf("down: %d packets out, %d drops", len(out), p.stats().DropsDown)
	}
	// Blackhole: nothing, counted apart.
	b = getBuffer(maxPacket)
	n = copy(b.b, pkt)
	out, _ = p.process(out[:0], fate, &Params{Blackhole: true}, &b, n, 0)
	if st := p.stats(); len(out) != 0 || st.DropsBlackhole != 45 || st.DropsDown != 45 {
		t.Errorf("blackhole: %d packets out, %d blackhole drops, %d down", len(out), st.DropsBlackhole, st.DropsDown)
	}
	// The largest segment is the MSS and its packet's length, from the
	// packets that went on (the dropped ones carried the same).
	if st := p.stats(); st.MaxSegmentBytes != 1448 || st.MaxPacketBytes != 1500 {
		t.Errorf("largest segment %d, packet %d; want 1448, 1500", st.MaxSegmentBytes, st.MaxPacketBytes)
	}
}

// TestProcessUDPAndDuplicates runs the reader's decision on UDP GSO
// batches: loss and duplication per datagram, copies as valid single
// datagrams, a batch cut per datagram when jitter may reorder, and
// counters that add up (in + duplicated = out + lost).
func TestProcessUDPAndDuplicates(t *testing.T) {
	const segs = 44
	batch := buildUSO(false, segs*1472, 1472, 1)
	single := buildUSO(false, 500, 1472, 1)
	for _, tc := range []struct {
		name   string
		pkt    []byte
		params Params
		// wholeFirst: the batch goes on whole, duplicates after it.
		wholeFirst bool
		perSeg     bool // every datagram its own packet and delay
		lossMin    float64
		lossMax    float64
		dupMin     float64
		dupMax     float64
	}{
		{"clean", batch, Params{Delay: time.Millisecond}, true, false, 0, 0, 0, 0},
		{"loss 10%", batch, Params{Delay: time.Millisecond, Loss: topology.Loss{Model: topology.LossRandom, Rate: 0.1}}, false, false, 0.07, 0.13, 0, 0},
		{"duplicate 10%", batch, Params{Delay: time.Millisecond, Duplicate: 0.1}, true, false, 0, 0, 0.07, 0.13},
		{"duplicate all", batch, Params{Delay: time.Millisecond, Duplicate: 1}, true, false, 0, 0, 1, 1},
		{"loss and duplicate", batch, Params{Delay: time.Millisecond, Duplicate: 0.2, Loss: topology.Loss{Model: topology.LossRandom, Rate: 0.2}}, false, false, 0.16, 0.24, 0.12, 0.2},
		{"reorder jitter", batch, Params{Delay: 5 * time.Millisecond, Jitter: 4 * time.Millisecond, Reorder: true}, false, true, 0, 0, 0, 0},
		{"single duplicated", single, Params{Duplicate: 1}, true, false, 0, 0, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPipe(PipeSpec{Link: "l", From: "a", To: "b"}, nil, nil, slog.New(slog.DiscardHandler))
			info, err := parsePacket(tc.pkt)
			if err != nil {
				t.Fatal(err)
			}
			var out []packet
			var fate []uint8
			delivered := 0
			dues := map[int64]bool{}
			const rounds = 200
			for range rounds {
				b := getBuffer(maxPacket)
				n := copy(b.b, tc.pkt)
				out, fate = p.process(out[:0], fate, &tc.params, &b, n, 1000)
				for j, o := range out {
					whole := j == 0 && int(o.segs) == info.segs && bytes.Equal(o.data(), tc.pkt)
					if tc.wholeFirst && j == 0 && !whole {
						t.Fatalf("the batch did not go on whole first: %d segments", o.segs)
					}
					if whole && (info.segs == 1 || !tc.perSeg) {
						// Whole: every datagram passed (or the only one did).
						delivered += int(o.segs)
						putBuffer(o.buf)
						continue
					}
					if tc.perSeg && o.segs != 1 {
						t.Fatalf("packet %d: %d segments, want a single datagram", j, o.segs)
					}
					if info.segs > 1 {
						wire := 0
						got := singles(t, o.data())
						for _, seg := range got {
							udp := seg[20:]
							if c := sum16(udp, uint32(^sum16(pseudoProto(seg, false, len(udp), protoUDP), 0))); c != 0 {
								t.Errorf("datagram checksum off by %#x", c)
							}
							wire += len(seg)
						}
						if int(o.wire) != wire || int(o.segs) != len(got) {
							t.Errorf("packet of %d segments and %d bytes, its datagrams %d and %d", o.segs, o.wire, len(got), wire)
						}
					}
					if d := o.due - 1000; d < int64(tc.params.Delay-tc.params.Jitter) || d > int64(tc.params.Delay+tc.params.Jitter) {
						t.Errorf("due in %v, want %v ± %v", time.Duration(d), tc.params.Delay, tc.params.Jitter)
					}
					dues[o.due] = true
					delivered += int(o.segs)
					putBuffer(o.buf)
				}
				if b != nil {
					putBuffer(b)
				}
			}
			st := p.stats()
			in := uint64(rounds * info.segs)
			if st.PacketsIn != in || st.PacketsIn+st.Duplicated != uint64(delivered)+st.DropsLoss {
				t.Errorf("in %d, duplicated %d, delivered %d, lost %d: do not add up", st.PacketsIn, st.Duplicated, delivered, st.DropsLoss)
			}
			lost, dup := float64(st.DropsLoss)/float64(in), float64(st.Duplicated)/float64(in)
			if lost < tc.lossMin || lost > tc.lossMax {
				t.Errorf("lost %.3f of datagrams, want [%.2f, %.2f]", lost, tc.lossMin, tc.lossMax)
			}
			if dup < tc.dupMin || dup > tc.dupMax {
				t.Errorf("duplicated %.3f of datagrams, want [%.2f, %.2f]", dup, tc.dupMin, tc.dupMax)
			}
			if tc.perSeg && len(dues) < delivered/2 {
				t.Errorf("%d datagrams share %d due times: jitter is not per datagram", delivered, len(dues))
			}
		})
	}
}
