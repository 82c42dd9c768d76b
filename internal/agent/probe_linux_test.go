//go:build linux

package agent

import (
	"context"
	"log/slog"
	"testing"
	"time"

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
	waitAll := func(what string, ok func(pathState) bool) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < 5*time.Second {
			if ok(state("a1")) && ok(state("b1")) {
				return time.Since(start)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s: not within 5 s: a1 %+v, b1 %+v", what, state("a1"), state("b1"))
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
	ra1, rb1 := probeBytes()
	time.Sleep(3 * ProbePeriod)
	if ra2, rb2 := probeBytes(); ra2 == ra1 || rb2 == rb1 {
		t.Errorf("with the steering withdrawn the probes left dedicated: its probe class carried %d bytes ra>rb and %d rb>ra since", ra2-ra1, rb2-rb1)
	}

	if err := testbed.LinkSet(b.name, "dedicated", testbed.LinkChange{Blackhole: &no}); err != nil {
		t.Fatal(err)
	}
	took = waitAll("up after the link came back", func(s pathState) bool { return !s.Down && s.Answered })
	t.Logf("both ends found the path up %d ms after the link came back", took.Milliseconds())
}
