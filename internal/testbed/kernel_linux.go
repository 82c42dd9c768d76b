//go:build linux

package testbed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/topology"
)

// writeSysctls sets a node's settings from inside its namespace: /proc/sys/net
// shows the namespace of the thread that opens it.
func writeSysctls(nsPath string, ss []Sysctl) error {
	return netns.Do(nsPath, func() error {
		for _, s := range ss {
			if err := os.WriteFile(s.Path(), []byte(s.Value), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", s.Key, s.Value, err)
			}
		}
		return nil
	})
}

// raiseHostMax raises a host-wide sysctl to at least v, never lowering it,
// and says whether it changed.
func raiseHostMax(key string, v int64) (bool, error) {
	p := Sysctl{Key: key}.Path()
	b, err := os.ReadFile(p)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", key, err)
	}
	cur, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", key, err)
	}
	if cur >= v {
		return false, nil
	}
	if err := os.WriteFile(p, []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
		return false, fmt.Errorf("raise %s to %d: %w", key, v, err)
	}
	return true, nil
}

// setupNode brings up a node's loopback with its own addresses and its
// settings.
func setupNode(t *topology.Topology, n *topology.Node, nsPath string) error {
	h, err := netns.Handle(nsPath)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("%s: loopback: %w", n.Name, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("%s: loopback up: %w", n.Name, err)
	}
	if err := writeSysctls(nsPath, NodeSysctls(t, n)); err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	for _, a := range []netip.Addr{n.IPv4, n.IPv6} {
		if !a.IsValid() {
			continue
		}
		if err := h.AddrAdd(lo, nlAddr(netip.PrefixFrom(a, a.BitLen()))); err != nil {
			return fmt.Errorf("%s: address %s on lo: %w", n.Name, a, err)
		}
	}
	return nil
}

func nlAddr(p netip.Prefix) *netlink.Addr {
	a := &netlink.Addr{IPNet: prefixNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	return a
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// setupEnd gives a link end's TUN device its addresses, brings it up and
// installs the htb tree of the direction that leaves by it.
func setupEnd(l *topology.Link, e *topology.End, nsPath string) error {
	h, err := netns.Handle(nsPath)
	if err != nil {
		return err
	}
	defer h.Close()
	dev, err := h.LinkByName(e.Dev)
	if err != nil {
		return fmt.Errorf("%s: device %s: %w", e.Node, e.Dev, err)
	}
	if err := h.LinkSetMTU(dev, l.MTU); err != nil {
		return fmt.Errorf("%s: mtu %d on %s: %w", e.Node, l.MTU, e.Dev, err)
	}
	for _, p := range []netip.Prefix{e.IPv4, e.IPv6} {
		if !p.IsValid() {
			continue
		}
		if err := h.AddrAdd(dev, nlAddr(p)); err != nil {
			return fmt.Errorf("%s: address %s on %s: %w", e.Node, p, e.Dev, err)
		}
	}
	if err := h.LinkSetUp(dev); err != nil {
		return fmt.Errorf("%s: %s up: %w", e.Node, e.Dev, err)
	}
	plan, err := PlanHTB(l, e.Node, l.Params.Rate)
	if err != nil {
		return err
	}
	if err := applyHTB(h, nsPath, dev.Attrs().Index, plan); err != nil {
		return fmt.Errorf("%s: htb on %s: %w", e.Node, e.Dev, err)
	}
	return nil
}

// applyHTB installs root 1: → 1:1 → 1:2 with a byte FIFO under 1:2.
func applyHTB(h *netlink.Handle, nsPath string, ifindex int, p HTB) error {
	q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: ifindex, Handle: topology.HTBRoot, Parent: netlink.HANDLE_ROOT})
	q.Defcls = topology.HTBDefault & 0xffff
	if err := h.QdiscReplace(q); err != nil {
		return fmt.Errorf("root qdisc: %w", err)
	}
	if err := h.ClassReplace(htbClass(ifindex, topology.HTBRoot, topology.HTBLink, p.Rate, p.Rate, p.Quantum, 0)); err != nil {
		return fmt.Errorf("class 1:1: %w", err)
	}
	if err := h.ClassReplace(htbClass(ifindex, topology.HTBLink, topology.HTBDefault, p.Floor, p.Rate, p.Quantum, p.Prio)); err != nil {
		return fmt.Errorf("class 1:2: %w", err)
	}
	return addBfifo(nsPath, ifindex, topology.HTBDefault, topology.HTBLeaf, p.Limit)
}

// setRate rescales classes 1:1 and 1:2 of one direction and leaves every
// other class (the agents') alone.
func setRate(h *netlink.Handle, ifindex int, p HTB) error {
	if err := h.ClassChange(htbClass(ifindex, topology.HTBRoot, topology.HTBLink, p.Rate, p.Rate, p.Quantum, 0)); err != nil {
		return fmt.Errorf("class 1:1: %w", err)
	}
	if err := h.ClassChange(htbClass(ifindex, topology.HTBLink, topology.HTBDefault, p.Floor, p.Rate, p.Quantum, p.Prio)); err != nil {
		return fmt.Errorf("class 1:2: %w", err)
	}
	return nil
}

// htbClass is an htb class; prio matters only to leaves (1:1 is inner:
// the kernel ignores it there).
func htbClass(ifindex int, parent, handle uint32, rate, ceil uint64, quantum, prio uint32) *netlink.HtbClass {
	// Bursts of 5 ms at the rate: enough for htb to keep up at gigabits
	// with a timer of a few hundred hertz, and for 64 KiB
	// segmentation-offload packets. (NewHtbClass takes bits per second and
	// bursts in bytes, and converts both for the kernel.)
	burst := func(r uint64) uint32 {
		return uint32(min(max(r/8/200, 128<<10), 64<<20))
	}
	return netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: ifindex, Parent: parent, Handle: handle},
		netlink.HtbClassAttrs{Rate: rate, Ceil: ceil, Quantum: quantum, Prio: prio, Buffer: burst(rate), Cbuffer: burst(ceil)})
}

// addBfifo adds a byte-limited FIFO: the netlink package has no bfifo type,
// so the request is built here (its options are a bare struct
// tc_fifo_qopt { __u32 limit; }).
func addBfifo(nsPath string, ifindex int, parent, handle, limit uint32) error {
	return netns.Do(nsPath, func() error {
		req := nl.NewNetlinkRequest(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE|unix.NLM_F_ACK)
		msg := &nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifindex), Handle: handle, Parent: parent}
		req.AddData(msg)
		req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated("bfifo")))
		opt := make([]byte, 4)
		binary.NativeEndian.PutUint32(opt, limit)
		req.AddData(nl.NewRtAttr(nl.TCA_OPTIONS, opt))
		if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
			return fmt.Errorf("bfifo: %w", err)
		}
		return nil
	})
}

// addRoutes installs a node's static routes, each with the MTU of the
// path it leads along (topology.Route.MTU): a host then sends no larger
// packet to another site than the routed path carries, and needs no ICMP
// to learn it.
func addRoutes(t *topology.Topology, node, nsPath string) error {
	h, err := netns.Handle(nsPath)
	if err != nil {
		return err
	}
	defer h.Close()
	for _, r := range t.Routes {
		if r.Node != node {
			continue
		}
		dev, err := h.LinkByName(r.Dev)
		if err != nil {
			return fmt.Errorf("%s: route to %s: device %s: %w", node, r.Dst, r.Dev, err)
		}
		rt := &netlink.Route{LinkIndex: dev.Attrs().Index, Dst: prefixNet(r.Dst), Gw: r.Via.AsSlice(), MTU: r.MTU}
		rt.AdvMSS = advMSS(r, dev.Attrs().MTU)
		if r.Src.IsValid() {
			rt.Src = r.Src.AsSlice()
		}
		if err := h.RouteReplace(rt); err != nil {
			return fmt.Errorf("%s: route to %s via %s dev %s mtu %d: %w", node, r.Dst, r.Via, r.Dev, r.MTU, err)
		}
	}
	return nil
}

// advMSS is the MSS a route's TCP connections advertise: what the device
// takes (its MTU less the IP and TCP headers) where the path's MTU is
// smaller, 0 (the route's MTU's) otherwise. Advertising what the host can
// take, not what the routed path carries, lets a connection made on the
// routed path send jumbo segments once it is steered onto a reserved path
// of a larger MTU: the sender's own route still holds it to the path it
// is on (TCP takes the smaller of the two), and the peer's SYN fixed the
// most it may ever send.
func advMSS(r topology.Route, devMTU int) int {
	if r.MTU <= 0 || devMTU <= r.MTU {
		return 0
	}
	if r.Dst.Addr().Is4() {
		return devMTU - 40
	}
	return devMTU - 60
}

// namespaceInode identifies a namespace, to find the processes inside it.
func namespaceInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// killInNamespaces ends every process (but this one) whose network
// namespace is one of inodes: a namespace deleted by name lives on while a
// process is inside it.
func killInNamespaces(inodes map[uint64]bool) []int {
	var killed []int
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		ino, err := namespaceInode(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil || !inodes[ino] {
			continue
		}
		if syscall.Kill(pid, syscall.SIGTERM) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// deleteTuns removes the TUN devices in a namespace: they are persistent,
// so nothing else frees them.
func deleteTuns(nsPath string) (int, error) {
	h, err := netns.Handle(nsPath)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range links {
		if l.Type() != "tuntap" {
			continue
		}
		if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
			return n, fmt.Errorf("delete %s: %w", l.Attrs().Name, err)
		}
		n++
	}
	return n, nil
}

// execIn replaces this process with argv inside a node's namespace. The
// thread that calls execve is the one whose namespace the new program
// gets, so execve runs inside netns.Do: should it fail, the thread goes
// back to its namespace (or is retired) and the caller's never moved.
func execIn(nsPath string, argv []string, env []string) error {
	path, err := lookPath(argv[0])
	if err != nil {
		return err
	}
	return netns.Do(nsPath, func() error {
		return fmt.Errorf("exec %s: %w", argv[0], syscall.Exec(path, argv, env))
	})
}
