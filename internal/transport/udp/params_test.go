package udp_test

import (
	"testing"

	"github.com/lightpath/lightpath/internal/cc/fast"
	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/transport/udp"
)

// TestFASTParamsPerStream: a stream's own alpha and gamma
// (Options.FASTAlpha, FASTGamma) drive its fast control, another stream of
// the same transport keeps the transport's, Tune changes them, and
// parameters out of range are refused at dial and by Tune.
func TestFASTParamsPerStream(t *testing.T) {
	tr, _ := newSession(t)
	tr.Tuning = udp.Tuning{FAST: fast.Params{Alpha: 300, Gamma: 256}}
	l, err := tr.Listen(ctx(t), "127.0.0.1:0", transport.Options{DSCP: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	dial := func(o transport.Options) (transport.Conn, error) {
		o.DSCP = -1
		c, err := tr.Dial(ctx(t), l.Addr().String(), o)
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}
	for _, tc := range []struct {
		name string
		o    transport.Options
		want fast.Params
	}{
		{"the transport's", transport.Options{CC: "fast"}, fast.Params{Alpha: 300, Gamma: 256}},
		{"alpha and gamma", transport.Options{CC: "fast", FASTAlpha: 20, FASTGamma: 1024}, fast.Params{Alpha: 20, Gamma: 1024}},
		{"alpha only", transport.Options{FASTAlpha: 50}, fast.Params{Alpha: 50, Gamma: 256}},
	} {
		c, err := dial(tc.o)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got, ok := udp.FASTParams(c); !ok || got != tc.want {
			t.Errorf("%s: fast runs with %v (%v), want %v", tc.name, got, ok, tc.want)
		}
	}
	if _, err := dial(transport.Options{CC: "fast", FASTAlpha: fast.MaxAlpha + 1}); err == nil {
		t.Error("a dial with alpha out of range succeeded")
	}
	if _, err := dial(transport.Options{CC: "fast", FASTGamma: fast.GammaScale + 1}); err == nil {
		t.Error("a dial with gamma out of range succeeded")
	}
	c, err := dial(transport.Options{CC: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Tune(transport.Options{DSCP: -1, FASTAlpha: 40, FASTGamma: 512}); err != nil {
		t.Fatal(err)
	}
	if got, _ := udp.FASTParams(c); got != (fast.Params{Alpha: 40, Gamma: 512}) {
		t.Errorf("after Tune fast runs with %v, want alpha 40 gamma 0.5", got)
	}
	if err := c.Tune(transport.Options{DSCP: -1, FASTAlpha: fast.MaxAlpha + 1}); err == nil {
		t.Error("Tune took alpha out of range")
	}
	if got, _ := udp.FASTParams(c); got != (fast.Params{Alpha: 40, Gamma: 512}) {
		t.Errorf("a refused Tune changed the parameters to %v", got)
	}
}
