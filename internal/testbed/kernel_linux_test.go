//go:build linux

package testbed

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/roottest"
	"github.com/lightpath/lightpath/internal/testbed/emu"
	"github.com/lightpath/lightpath/internal/topology"
)

// testDevice makes a namespace of its own with a device in it, and
// returns a handle bound to the namespace, the namespace's path and the
// device's index.
func testDevice(t *testing.T) (*netlink.Handle, string, int) {
	t.Helper()
	roottest.Require(t, "creates a network namespace and builds htb trees in it")
	var rnd [4]byte
	rand.Read(rnd[:])
	name := "lp-tbtest-" + hex.EncodeToString(rnd[:])
	if err := netns.Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(name); err != nil {
			t.Error(err)
		}
	})
	h, err := netns.Handle(netns.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	// A TUN device, as the testbed's (this kernel has no dummy devices).
	if err := emu.CreateTun(netns.Path(name), "tb0", 1500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := emu.DeleteTun(netns.Path(name), "tb0"); err != nil {
			t.Error(err)
		}
	})
	dev, err := h.LinkByName("tb0")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(dev); err != nil {
		t.Fatal(err)
	}
	return h, netns.Path(name), dev.Attrs().Index
}

// htbClasses reads the htb classes of a device back from the kernel.
func htbClasses(t *testing.T, h *netlink.Handle, ifindex int) map[uint32]*netlink.HtbClass {
	t.Helper()
	dev, err := h.LinkByIndex(ifindex)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := h.ClassList(dev, topology.HTBRoot)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32]*netlink.HtbClass{}
	for _, c := range cs {
		if hc, ok := c.(*netlink.HtbClass); ok {
			out[hc.Handle] = hc
		}
	}
	return out
}

// TestHTBDefaultPrio builds a direction's htb tree and reads class 1:2
// back: htb priority 0, the highest, after the build and, set explicitly,
// after a change of rate (over a priority changed by hand), so that spare
// capacity goes to unreserved traffic before reservations (priority 1)
// borrow beyond their rate.
func TestHTBDefaultPrio(t *testing.T) {
	h, nsPath, ifindex := testDevice(t)
	l := &topology.Link{Name: "wan", MTU: 1500, Reservable: 0.9, Queue: 1 << 20,
		A: topology.End{Node: "ra", Dev: "tb0"}, B: topology.End{Node: "rb", Dev: "wan"}}
	p, err := PlanHTB(l, "ra", 1_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if p.Prio != DefaultPrio || DefaultPrio != 0 {
		t.Fatalf("plan %+v: want prio 0", p)
	}
	if err := applyHTB(h, nsPath, ifindex, p); err != nil {
		t.Fatal(err)
	}
	cs := htbClasses(t, h, ifindex)
	c := cs[topology.HTBDefault]
	if c == nil || c.Prio != 0 || c.Parent != topology.HTBLink {
		t.Fatalf("class 1:2: %+v, want htb priority 0 under 1:1", c)
	}
	if got, want := c.Ceil*8, p.Rate; got < want*99/100 || got > want*101/100 {
		t.Errorf("class 1:2 ceil %d bit/s, want %d", got, want)
	}
	if cs[topology.HTBLink] == nil {
		t.Error("no class 1:1")
	}

	// A reservation's class at priority 1 beside it, as an agent adds
	// one, 1:2 moved to priority 3 behind the testbed's back, and a change
	// of rate: 1:2 is back at priority 0, the agent's class keeps its own.
	if err := h.ClassReplace(htbClass(ifindex, topology.HTBLink, topology.HTBFirstRes+12, 300_000_000, p.Rate, p.Quantum, 1)); err != nil {
		t.Fatal(err)
	}
	if err := h.ClassChange(htbClass(ifindex, topology.HTBLink, topology.HTBDefault, p.Floor, p.Rate, p.Quantum, 3)); err != nil {
		t.Fatal(err)
	}
	if c := htbClasses(t, h, ifindex)[topology.HTBDefault]; c == nil || c.Prio != 3 {
		t.Fatalf("class 1:2 changed to priority 3: %+v", c)
	}
	p2, err := PlanHTB(l, "ra", 500_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if err := setRate(h, ifindex, p2); err != nil {
		t.Fatal(err)
	}
	cs = htbClasses(t, h, ifindex)
	if c := cs[topology.HTBDefault]; c == nil || c.Prio != 0 {
		t.Errorf("class 1:2 after a change of rate: %+v, want htb priority 0", c)
	}
	if c := cs[topology.HTBFirstRes+12]; c == nil || c.Prio != 1 {
		t.Errorf("the reservation's class after a change of rate: %+v, want htb priority 1", c)
	}
}
