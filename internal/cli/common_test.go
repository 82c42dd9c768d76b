package cli

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/cc/fast"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/transfer"
)

func TestParseRemote(t *testing.T) {
	for _, tc := range []struct {
		in       string
		isRemote bool
		addr     string
		path     string
		err      bool
	}{
		{"/local/file", false, "", "", false},
		{"lp://host:7000/a/b c", true, "host:7000", "a/b c", false},
		{"lp://host/a", true, "host:7070", "a", false},
		{"lp://host:7000", true, "host:7000", "", false},
		{"lp://[::1]:7000/x%20y", true, "[::1]:7000", "x%20y", false},
		{"lp://[::1]/x", true, "[::1]:7070", "x", false},
		{"lp://::1:7000/x", true, "", "", true},
		{"lp://[::1/x", true, "", "", true},
		{"lp://host:0/x", true, "", "", true},
		{"lp://host:99999/x", true, "", "", true},
		{"lp://host:port/x", true, "", "", true},
		{"lp://:7000/x", true, "", "", true},
	} {
		r, ok, err := parseRemote(tc.in)
		if ok != tc.isRemote || (err != nil) != tc.err || (err == nil && (r.Addr != tc.addr || r.Path != tc.path)) {
			t.Errorf("parseRemote(%q) = %+v, %v, %v", tc.in, r, ok, err)
		}
	}
}

func TestDurationFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"10", 10 * time.Second, false},
		{"2.5", 2500 * time.Millisecond, false},
		{"1m30s", 90 * time.Second, false},
		{"5s", 5 * time.Second, false},
		{"ten", 0, true},
	} {
		var d time.Duration
		err := durationFlag{&d}.Set(tc.in)
		if (err != nil) != tc.err || d != tc.want {
			t.Errorf("Set(%q) = %v, %v; want %v, error %v", tc.in, d, err, tc.want, tc.err)
		}
	}
}

// TestTuningTransport: --transport and --cc together, checked before
// anything connects.
func TestTuningTransport(t *testing.T) {
	for _, tc := range []struct {
		name              string
		f                 tuningFlags
		wantCC, wantTrans string
		wantErr           string
	}{
		{"tcp by default", tuningFlags{}, "", "", ""},
		{"udp defaults to fast", tuningFlags{transport: "udp"}, "fast", "udp", ""},
		{"udp fast with a cap", tuningFlags{transport: "udp", rate: "1G"}, "fast", "udp", ""},
		{"udp fixed at a rate", tuningFlags{transport: "udp", cc: "fixed", rate: "1G"}, "fixed", "udp", ""},
		{"udp aimd", tuningFlags{transport: "udp", cc: "aimd"}, "aimd", "udp", ""},
		{"udp fixed without a rate", tuningFlags{transport: "udp", cc: "fixed"}, "", "", "--cc fixed sends at a set rate"},
		{"udp fixed waiting for a reservation", tuningFlags{transport: "udp", cc: "fixed", reserving: true}, "fixed", "udp", ""},
		{"udp default waiting for a reservation", tuningFlags{transport: "udp", reserving: true}, "", "udp", ""},
		{"udp with a kernel's name", tuningFlags{transport: "udp", cc: "cubic"}, "", "", `--cc "cubic" with --transport udp: want fixed, fast or aimd`},
		{"tcp with a UDP rate control", tuningFlags{cc: "fixed"}, "", "", "--cc fixed is a rate control of the UDP transport: add --transport udp"},
		{"unknown transport", tuningFlags{transport: "sctp"}, "", "", `--transport "sctp": want tcp or udp`},
		{"fast's alpha and gamma", tuningFlags{transport: "udp", cc: "fast", fastAlpha: "200", fastGamma: "0.25"}, "fast", "udp", ""},
		{"fast's alpha by default fast", tuningFlags{transport: "udp", fastAlpha: "50"}, "fast", "udp", ""},
		{"fast's alpha over TCP", tuningFlags{cc: "cubic", fastAlpha: "50"}, "", "", "--fast-alpha and --fast-gamma are for --transport udp --cc fast"},
		{"fast's gamma with fixed", tuningFlags{transport: "udp", cc: "fixed", rate: "1G", fastGamma: "0.5"}, "", "", "are for --cc fast, not fixed"},
		{"fast's alpha waiting for a reservation", tuningFlags{transport: "udp", reserving: true, fastAlpha: "50"}, "", "", "are for --cc fast, not the reservation's fixed"},
		{"fast's alpha zero", tuningFlags{transport: "udp", fastAlpha: "0"}, "", "", "alpha 0: want 1 to 100000 packets"},
		{"fast's alpha not a number", tuningFlags{transport: "udp", fastAlpha: "lots"}, "", "", `--fast-alpha "lots": want a number of packets`},
		{"fast's gamma above 1", tuningFlags{transport: "udp", fastGamma: "2"}, "", "", "--fast-gamma: gamma \"2\": want a fraction in (0, 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.dscp = -1
			tu, err := tc.f.tuning()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || tu.CC != tc.wantCC || tu.Transport != tc.wantTrans {
				t.Fatalf("tuning %+v, %v; want cc %q transport %q", tu, err, tc.wantCC, tc.wantTrans)
			}
			if tc.f.fastAlpha != "" && fmt.Sprint(tu.FASTAlpha) != tc.f.fastAlpha {
				t.Errorf("alpha %d, want %s", tu.FASTAlpha, tc.f.fastAlpha)
			}
			if tc.f.fastGamma != "" && fast.GammaString(tu.FASTGamma) != tc.f.fastGamma {
				t.Errorf("gamma %s, want %s", fast.GammaString(tu.FASTGamma), tc.f.fastGamma)
			}
		})
	}
}

// TestUDPReserved: a UDP copy's rate control once its reservation is
// booked, or not.
func TestUDPReserved(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       mover.Tuning
		reserved uint64
		wantCC   string
		wantRate uint64
		wantErr  bool
	}{
		{"default on a reservation", mover.Tuning{Transport: "udp"}, 3e8, "fixed", 3e8, false},
		{"default with --rate on a reservation", mover.Tuning{Transport: "udp", Rate: 2e8}, 3e8, "fixed", 2e8, false},
		{"default without a reservation", mover.Tuning{Transport: "udp"}, 0, "fast", 0, false},
		{"fixed takes the reserved rate", mover.Tuning{Transport: "udp", CC: "fixed"}, 5e8, "fixed", 5e8, false},
		{"fixed without a rate or a reservation", mover.Tuning{Transport: "udp", CC: "fixed"}, 0, "", 0, true},
		{"aimd stays", mover.Tuning{Transport: "udp", CC: "aimd"}, 5e8, "aimd", 0, false},
		{"tcp untouched", mover.Tuning{CC: "cubic"}, 5e8, "cubic", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tu := tc.in
			err := udpReserved(&tu, tc.reserved, "refused")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err == nil && (tu.CC != tc.wantCC || tu.Rate != tc.wantRate) {
				t.Errorf("cc %q rate %d, want %q %d", tu.CC, tu.Rate, tc.wantCC, tc.wantRate)
			}
		})
	}
}

// TestUDPRateControlLists: the transfer service's list of UDP rate
// controls (checked at submission, where the transport is not linked) is
// the transport's own.
func TestUDPRateControlLists(t *testing.T) {
	if !slices.Equal(transfer.UDPRateControls, mover.UDPRateControls) {
		t.Errorf("transfer.UDPRateControls %v, the UDP transport's %v", transfer.UDPRateControls, mover.UDPRateControls)
	}
}
