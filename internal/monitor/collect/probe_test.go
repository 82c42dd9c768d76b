package collect

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// TestProbeLoopback runs the responder, a probe and a throughput test in
// the test's own namespace (NetNS ""), over loopback: no root needed.
func TestProbeLoopback(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	port := 20000 + rand.IntN(20000)
	r, err := StartResponder("", []netip.Addr{lo}, port, nil)
	if err != nil {
		t.Skipf("cannot listen on loopback: %v", err)
	}
	defer r.Close()
	// Every answer is expected: a late one on a busy machine is not loss.
	c := &probeCollector{port: port, count: ProbeCount, wait: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rtts, err := c.probe(ctx, neighbour{link: "lo", peer: "me", local: lo, addr: lo})
	if err != nil {
		t.Fatal(err)
	}
	rtt, loss := Summarize(rtts, c.count)
	if loss != 0 || rtt <= 0 {
		t.Errorf("loopback: rtt %v loss %v", rtt, loss)
	}
	bps, err := Throughput(ctx, netip.AddrPortFrom(lo, uint16(port)).String(), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if bps <= 0 {
		t.Errorf("throughput %v", bps)
	}
	t.Logf("loopback rtt %v, throughput %.3g bit/s", rtt, bps)

	// No responder: every probe is lost, and that is not an error.
	c.port, c.wait = port+1, 0
	rtts, err = c.probe(ctx, neighbour{link: "lo", peer: "me", local: lo, addr: lo})
	if err != nil {
		t.Fatal(err)
	}
	if _, loss := Summarize(rtts, c.count); loss != 1 {
		t.Errorf("no responder: loss %v", loss)
	}
}
