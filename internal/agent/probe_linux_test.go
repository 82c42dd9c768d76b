//go:build linux

package agent

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/roottest"
	"github.com/lightpath/lightpath/internal/testbed"
	"github.com/lightpath/lightpath/internal/topology"
)

// TestProbeKernel runs the probers of a1 and b1 for real, on a testbed
// with a reservation over the dedicated link: the probes and their echoes
// cross dedicated in the class 1:ff and are answered; the link blackholed,
// both ends find the path down and signal it; with their steering
// withdrawn (WithoutBroken) the probes still take dedicated, and the link
// restored, both find it up again.
func TestProbeKernel(t *testing.T) {
	roottest.Require(t, "builds a testbed of network namespaces and probes across it")
	b := upTestbed(t, "../../examples/two-site.yaml")
	now := time.Now()
	r := resv("r1", "a1", "b1", 10, 100e6, "tcp 198.18.1.1 > 198.18.2.1:7070", "a1-ra:a1>ra", "dedicated:ra>rb", "b1-rb:rb>b1")
	r.Start, r.End = now.Add(-time.Minute), now.Add(time.Hour)
	r.ManagedNodes = []string{"a1", "b1", "ra", "rb"}
	rs := []reserve.Reservation{r}
	b.reconcile(t, rs, now)

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	type end struct {
		p       *prober
		changed chan struct{}
	}
	ends := map[string]end{}
	for _, n := range []string{"a1", "b1"} {
		ch := make(chan struct{}, 1)
		p, err := startProber(ctx, b.ns(n), n, slog.New(slog.DiscardHandler), ch)
		if err != nil {
			t.Fatal(err)
		}
		ts := probeTargets(b.topo, n, rs, now)
		if len(ts) != 1 {
			t.Fatalf("%s probes %+v, want r1's path", n, ts)
		}
		p.set(ts)
		ends[n] = end{p, ch}
	}
	state := func(n string) pathState {
		s := ends[n].p.states()
		if len(s) != 1 {
			t.Fatalf("%s: states %+v", n, s)
		}
		return s[0]
	}
	// The deadline only bounds a hang: how soon a path is found down is
	// logged, not checked (bench/steering.sh times it).
	waitAll := func(what string, ok func(pathState) bool) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < time.Minute {
			if ok(state("a1")) && ok(state("b1")) {
				return time.Since(start)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s: not within a minute: a1 %+v, b1 %+v", what, state("a1"), state("b1"))
		return 0
	}
	waitAll("answered", func(s pathState) bool { return s.Answered && !s.Down })
	probeBytes := func() (ra, rb uint64) {
		return classBytes(t, b.fd["ra"], "dedicated", topology.ProbeMinor), classBytes(t, b.fd["rb"], "dedicated", topology.ProbeMinor)
	}
	ra0, rb0 := probeBytes()
	if ra0 == 0 || rb0 == 0 {
		t.Fatalf("the probes' class on dedicated carried %d bytes ra>rb and %d rb>ra: the probes do not take the reserved path in their class", ra0, rb0)
	}
	for _, n := range []string{"a1", "b1"} {
		select {
		case <-ends[n].changed:
			t.Fatalf("%s signalled a change with the path answered", n)
		default:
		}
	}

	yes, no := true, false
	if err := testbed.LinkSet(b.name, "dedicated", testbed.LinkChange{Blackhole: &yes}); err != nil {
		t.Fatal(err)
	}
	took := waitAll("down after the blackhole", func(s pathState) bool { return s.Down })
	t.Logf("both ends found the path down %d ms after the blackhole", took.Milliseconds())
	for _, n := range []string{"a1", "b1"} {
		select {
		case <-ends[n].changed:
		default:
			t.Errorf("%s did not signal the path down", n)
		}
	}
	// Withdrawn, as the agent does: the probes still go over dedicated.
	for _, n := range []string{"a1", "b1"} {
		want, err := Desired(b.topo, n, rs, now)
		if err != nil {
			t.Fatal(err)
		}
		want = WithoutBroken(want, []uint8{r.DSCP})
		if err := Apply(b.fd[n], Diff(b.fetch(t, n), want)); err != nil {
			t.Fatal(err)
		}
	}
	// The probes go on every ProbePeriod: their class on dedicated keeps
	// counting in both directions.
	ra1, rb1 := probeBytes()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(ProbePeriod / 4) {
		ra2, rb2 := probeBytes()
		if ra2 > ra1 && rb2 > rb1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with the steering withdrawn the probes left dedicated: its probe class carried %d bytes ra>rb and %d rb>ra in a minute", ra2-ra1, rb2-rb1)
		}
	}

	if err := testbed.LinkSet(b.name, "dedicated", testbed.LinkChange{Blackhole: &no}); err != nil {
		t.Fatal(err)
	}
	took = waitAll("up after the link came back", func(s pathState) bool { return !s.Down && s.Answered })
	t.Logf("both ends found the path up %d ms after the link came back", took.Milliseconds())
}

// TestReceivedTime: an echo read late is judged at the time the kernel
// received it, not when the agent got round to reading it.
func TestReceivedTime(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rc, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) })
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The kernel turns receive timestamps on for the whole host a little
	// after the first socket asks (a static key, switched by a work
	// queue): before, a datagram is stamped when read. So a few tries.
	var read time.Time
	for try := 1; ; try++ {
		before := time.Now()
		if _, err := c.Write([]byte("echo")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the agent busy elsewhere
		buf, oob := make([]byte, 16), make([]byte, 128)
		_, oobn, _, _, err := srv.ReadMsgUDP(buf, oob)
		if err != nil {
			t.Fatal(err)
		}
		read = time.Now()
		at := received(oob[:oobn])
		if !at.Before(before.Add(-time.Second)) && at.Before(read.Add(-250*time.Millisecond)) {
			break
		}
		if try == 3 {
			t.Fatalf("received at %v: sent at %v, read at %v; want the kernel's time, about when it was sent", at, before, read)
		}
	}
	if got := received(nil); got.Before(read) {
		t.Errorf("no timestamp: %v, want now", got)
	}
}
