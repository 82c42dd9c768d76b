package booking

import (
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
)

func TestCopyFlow(t *testing.T) {
	for _, c := range []struct {
		push     bool
		cl, srv  string
		want     string
		from, to string
	}{
		{true, "198.18.1.1", "198.18.2.1:7070", "tcp 198.18.1.1 > 198.18.2.1:7070", "a1", "b1"},
		{false, "198.18.1.1", "198.18.2.1:7070", "tcp 198.18.2.1:7070 > 198.18.1.1", "b1", "a1"},
		{true, "2001:2:0:1::1", "[2001:2:0:2::1]:7070", "tcp 2001:2:0:1::1 > [2001:2:0:2::1]:7070", "a1", "b1"},
		{false, "2001:2:0:1::1", "[2001:2:0:2::1]:7070", "tcp [2001:2:0:2::1]:7070 > 2001:2:0:1::1", "b1", "a1"},
	} {
		topo := apiv1.Topology{Name: "two-site", Nodes: []apiv1.TopoNode{
			{Name: "a1", Addresses: []string{"198.18.1.1", "2001:2:0:1::1"}},
			{Name: "b1", Addresses: []string{"198.18.2.1", "2001:2:0:2::1"}},
		}}
		b, err := PlanCopy(topo, c.push, netip.MustParseAddr(c.cl), netip.MustParseAddrPort(c.srv))
		if err != nil {
			t.Fatal(err)
		}
		if b.Flow.String() != c.want || b.From != c.from || b.To != c.to {
			t.Errorf("push %v %s → %s: flow %q from %s to %s; want %q from %s to %s", c.push, c.cl, c.srv, b.Flow, b.From, b.To, c.want, c.from, c.to)
		}
		// The controller parses the spec cp sends to the same value.
		fs, err := reserve.ParseFlowSpec(b.Flow.String())
		if err != nil || !fs.Equal(b.Flow) {
			t.Errorf("flow %q does not parse back to itself: %v %q", b.Flow, err, fs)
		}
		// Over UDP the data's flow is added, to the same port.
		u := WithUDP(b.Flow)
		if want := c.want + ", udp " + strings.TrimPrefix(c.want, "tcp "); u.String() != want {
			t.Errorf("with UDP: %q, want %q", u, want)
		}
		if fs, err := reserve.ParseFlowSpec(u.String()); err != nil || !fs.Equal(u) {
			t.Errorf("flow %q does not parse back to itself: %v %q", u, err, fs)
		}
	}
}

func TestPlanCopyRefuses(t *testing.T) {
	topo := apiv1.Topology{Name: "two-site", Nodes: []apiv1.TopoNode{
		{Name: "a1", Addresses: []string{"198.18.1.1"}},
		{Name: "b1", Addresses: []string{"198.18.2.1", "198.18.2.9"}},
	}}
	for _, c := range []struct{ cl, srv, want string }{
		{"127.0.0.1", "198.18.2.1:7070", "this host's address toward the server, 127.0.0.1, belongs to no node of topology two-site"},
		{"198.18.1.1", "10.0.0.1:7070", "the server's address 10.0.0.1 belongs to no node of topology two-site"},
		{"127.0.0.1", "10.0.0.1:7070", "neither this host's address 127.0.0.1 nor the server's 10.0.0.1"},
		{"198.18.2.1", "198.18.2.9:7070", "both node b1"},
	} {
		_, err := PlanCopy(topo, true, netip.MustParseAddr(c.cl), netip.MustParseAddrPort(c.srv))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: %v; want %q", c.cl, c.srv, err, c.want)
		}
	}
}

func TestWindow(t *testing.T) {
	for _, c := range []struct {
		size int64
		bps  uint64
		want time.Duration
	}{
		{200 << 20, 300e6, time.Minute},                     // 5.6 s × 1.5 + 30 s = 38.4 s: the minimum
		{10e9, 1e9, 150 * time.Second},                      // 80 s × 1.5 + 30 s
		{1e12, 10e9, 1230 * time.Second},                    // 800 s × 1.5 + 30 s
		{1e9, 3e9, time.Minute},                             // tiny
		{0, 1e9, time.Minute},                               // nothing to send
		{1 << 62, 1, 24 * 365 * time.Hour},                  // bounded
		{7e9, 1e9, time.Duration(7*8*1.5+30) * time.Second}, // 114 s
	} {
		if got := Window(c.size, c.bps); got != c.want {
			t.Errorf("Window(%d, %d) = %s, want %s", c.size, c.bps, got, c.want)
		}
	}
}

// TestTrackerSplitsBytes checks the accounting: bytes carried while the
// reservation was ACTIVE and not degraded count as reserved.
func TestTrackerSplitsBytes(t *testing.T) {
	var n atomic.Int64
	var notes []string
	tr := newTracker(n.Load, func(r reserve.Reservation, at int64, _ time.Duration) {
		notes = append(notes, fmt.Sprintf("%s/%v@%d", r.State, r.Degraded, at))
	})
	r := reserve.Reservation{ID: "r-1", State: reserve.StateReserved, Version: 1}
	step := func(add int64, st reserve.State, degraded bool) bool {
		n.Add(add)
		r.State, r.Degraded = st, degraded
		r.Version++
		return tr.observe(r)
	}
	step(0, reserve.StateReserved, false)
	step(10, reserve.StateActive, false)          // 10 routed
	step(100, reserve.StateActive, false)         // no change
	step(5, reserve.StateActive, true)            // 105 reserved
	step(7, reserve.StateActive, false)           // 7 routed (degraded)
	if !step(20, reserve.StateCancelled, false) { // 20 reserved
		t.Error("CANCELLED is not the end")
	}
	stale := r
	stale.Version, stale.State = 2, reserve.StateActive
	tr.observe(stale) // older than what was seen: ignored
	n.Add(3)          // after the end: routed
	reserved, _, last := tr.finish()
	if reserved != 125 || last.State != reserve.StateCancelled {
		t.Errorf("reserved %d, last %s; want 125, CANCELLED", reserved, last.State)
	}
	want := "RESERVED/false@0 ACTIVE/false@10 ACTIVE/true@115 ACTIVE/false@122 CANCELLED/false@142"
	if got := strings.Join(notes, " "); got != want {
		t.Errorf("notes %s\nwant  %s", got, want)
	}

	// Still ACTIVE when the copy ends: counted up to the end.
	n.Store(0)
	tr = newTracker(n.Load, nil)
	tr.observe(reserve.Reservation{ID: "r-2", State: reserve.StateActive, Version: 1})
	n.Store(1000)
	if reserved, _, _ := tr.finish(); reserved != 1000 {
		t.Errorf("reserved %d, want 1000", reserved)
	}
	n.Store(2000)
	tr.observe(reserve.Reservation{ID: "r-2", State: reserve.StateFinished, Version: 2})
	if reserved, _, _ := tr.finish(); reserved != 1000 {
		t.Errorf("after finish: reserved %d, want 1000", reserved)
	}
}

// TestNewKey: each booking's idempotency key names what booked it (cp's
// by default, run's with its prefix) and is random after that, so a key
// of one command is never another's, nor a second booking's.
func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for _, prefix := range []string{"", KeyCp, "run-"} {
		want := prefix
		if want == "" {
			want = KeyCp
		}
		for range 100 {
			k := NewKey(prefix)
			rest, ok := strings.CutPrefix(k, want)
			if !ok || len(rest) != 32 || strings.Trim(rest, "0123456789abcdef") != "" || len(k) > 128 {
				t.Fatalf("NewKey(%q) = %q: want %s and 32 hex digits, at most 128 characters (the controller's limit)", prefix, k, want)
			}
			if seen[k] {
				t.Fatalf("NewKey(%q) repeated %q", prefix, k)
			}
			seen[k] = true
		}
	}
}
