//go:build linux

package collect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/netns"
)

// eachDevice calls fn for every device in env's namespace but lo, with a
// netlink handle bound there and the topology's link of the device ("" when
// it names none).
func eachDevice(env Env, fn func(h *netlink.Handle, l netlink.Link, link string) error) error {
	h, err := netns.Handle(env.NetNS, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return fmt.Errorf("list devices: %w", err)
	}
	devLink := linkOfDev(env.topo(), env.Node)
	for _, l := range links {
		if l.Attrs().Name == "lo" {
			continue
		}
		if err := fn(h, l, devLink[l.Attrs().Name]); err != nil {
			return err
		}
	}
	return nil
}

func (c *interfacesCollector) Collect(_ context.Context, emit func(monitor.Point)) error {
	return eachDevice(c.env, func(_ *netlink.Handle, l netlink.Link, link string) error {
		a := l.Attrs()
		d := DevStats{
			Name:    a.Name,
			MTU:     a.MTU,
			Carrier: a.RawFlags&unix.IFF_LOWER_UP != 0,
		}
		d.Up = a.OperState == netlink.OperUp || a.OperState == netlink.OperUnknown && a.Flags&net.FlagUp != 0 && d.Carrier
		if s := a.Statistics; s != nil {
			d.RxBytes, d.RxPackets, d.RxErrors, d.RxDropped = s.RxBytes, s.RxPackets, s.RxErrors, s.RxDropped
			d.TxBytes, d.TxPackets, d.TxErrors, d.TxDropped = s.TxBytes, s.TxPackets, s.TxErrors, s.TxDropped
		}
		devPoints(d, link, emit)
		return nil
	})
}

func (c *htbCollector) Collect(_ context.Context, emit func(monitor.Point)) error {
	return eachDevice(c.env, func(h *netlink.Handle, l netlink.Link, link string) error {
		a := l.Attrs()
		cs, err := h.ClassList(l, 0)
		var gone netlink.LinkNotFoundError
		if errors.As(err, &gone) || errors.Is(err, unix.ENODEV) {
			return nil // removed since the listing
		} else if err != nil {
			return fmt.Errorf("classes of %s: %w", a.Name, err)
		}
		for _, cl := range cs {
			hc, ok := cl.(*netlink.HtbClass)
			if !ok {
				continue
			}
			maj, minor := netlink.MajorMinor(hc.Handle)
			s := ClassStats{Major: maj, Minor: minor, Rate: hc.Rate * 8, Ceil: hc.Ceil * 8}
			if st := hc.Statistics; st != nil {
				if st.Basic != nil {
					s.Bytes, s.Packets = st.Basic.Bytes, uint64(st.Basic.Packets)
				}
				if st.Queue != nil {
					s.Drops, s.Overlimits = uint64(st.Queue.Drops), uint64(st.Queue.Overlimits)
					s.BacklogBytes, s.Qlen = uint64(st.Queue.Backlog), uint64(st.Queue.Qlen)
				}
			}
			classPoints(a.Name, link, s, emit)
		}
		return nil
	})
}

func (c *tcpCollector) Collect(_ context.Context, emit func(monitor.Point)) error {
	if c.env.Flows == nil {
		return nil
	}
	flows := c.env.Flows()
	ports := flowPorts(flows)
	if len(ports) == 0 {
		return nil
	}
	h, err := netns.Handle(c.env.NetNS, unix.NETLINK_INET_DIAG)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	var socks []TCPSock
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		rs, err := h.SocketDiagTCPInfo(fam)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return fmt.Errorf("inet_diag: %w", err)
		}
		for _, r := range rs {
			if r.InetDiagMsg == nil || r.TCPInfo == nil {
				continue
			}
			id := r.InetDiagMsg.ID
			if !ports[id.SourcePort] && !ports[id.DestinationPort] {
				continue
			}
			if r.InetDiagMsg.State == netlink.TCP_LISTEN {
				continue
			}
			src, _ := netip.AddrFromSlice(id.Source)
			dst, _ := netip.AddrFromSlice(id.Destination)
			ti := r.TCPInfo
			socks = append(socks, TCPSock{
				Local:         netip.AddrPortFrom(src.Unmap(), id.SourcePort),
				Remote:        netip.AddrPortFrom(dst.Unmap(), id.DestinationPort),
				RTT:           float64(ti.Rtt) / 1e6,
				MinRTT:        float64(ti.Min_rtt) / 1e6,
				Cwnd:          ti.Snd_cwnd,
				TotalRetrans:  ti.Total_retrans,
				PacingRate:    ti.Pacing_rate,
				DeliveryRate:  ti.Delivery_rate,
				BytesAcked:    ti.Bytes_acked,
				BytesReceived: ti.Bytes_received,
			})
		}
	}
	tcpPoints(flows, socks, emit)
	return nil
}
