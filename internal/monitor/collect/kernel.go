package collect

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/topology"
)

// ---- interfaces ----

// DevStats is one device as the interfaces collector reads it.
type DevStats struct {
	Name                                    string
	MTU                                     int
	Up                                      bool // operationally up (or unknown with a carrier, as lo)
	Carrier                                 bool
	RxBytes, RxPackets, RxErrors, RxDropped uint64
	TxBytes, TxPackets, TxErrors, TxDropped uint64
}

type interfacesCollector struct{ env Env }

func newInterfaces(env Env) Definition {
	return Definition{
		Collector: &interfacesCollector{env},
		Help:      "byte, packet, error and drop counters, state and MTU of every device in the namespace (netlink)",
		Enabled:   true,
		Meta: map[string]monitor.Meta{
			"lightpath_interface_receive_bytes_total":    counter("Bytes received by the device."),
			"lightpath_interface_receive_packets_total":  counter("Packets received by the device."),
			"lightpath_interface_receive_errors_total":   counter("Receive errors of the device."),
			"lightpath_interface_receive_drops_total":    counter("Received packets the device dropped."),
			"lightpath_interface_transmit_bytes_total":   counter("Bytes transmitted by the device."),
			"lightpath_interface_transmit_packets_total": counter("Packets transmitted by the device."),
			"lightpath_interface_transmit_errors_total":  counter("Transmit errors of the device."),
			"lightpath_interface_transmit_drops_total":   counter("Packets the device dropped on transmit."),
			"lightpath_interface_up":                     gauge("1 if the device is operationally up, else 0."),
			"lightpath_interface_carrier":                gauge("1 if the device has a carrier (IFF_LOWER_UP), else 0."),
			"lightpath_interface_mtu_bytes":              gauge("MTU of the device."),
		},
	}
}

func (*interfacesCollector) Name() string { return "interfaces" }

// devPoints emits one device's series; link is "" when the topology does
// not name the device.
func devPoints(d DevStats, link string, emit func(monitor.Point)) {
	ls := monitor.L("device", d.Name, "link", link)
	for _, s := range []struct {
		name string
		v    uint64
	}{
		{"lightpath_interface_receive_bytes_total", d.RxBytes},
		{"lightpath_interface_receive_packets_total", d.RxPackets},
		{"lightpath_interface_receive_errors_total", d.RxErrors},
		{"lightpath_interface_receive_drops_total", d.RxDropped},
		{"lightpath_interface_transmit_bytes_total", d.TxBytes},
		{"lightpath_interface_transmit_packets_total", d.TxPackets},
		{"lightpath_interface_transmit_errors_total", d.TxErrors},
		{"lightpath_interface_transmit_drops_total", d.TxDropped},
	} {
		emit(monitor.Point{Name: s.name, Labels: ls, V: float64(s.v)})
	}
	emit(monitor.Point{Name: "lightpath_interface_up", Labels: ls, V: b2f(d.Up)})
	emit(monitor.Point{Name: "lightpath_interface_carrier", Labels: ls, V: b2f(d.Carrier)})
	emit(monitor.Point{Name: "lightpath_interface_mtu_bytes", Labels: ls, V: float64(d.MTU)})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ---- htb ----

// The classes the htb collector names, by their minor under 1: (package
// topology numbers them for the testbed and the agent alike).
const (
	htbRootMajor    = topology.HTBRoot >> 16
	classLink       = topology.HTBLink & 0xffff
	classUnreserved = topology.HTBDefault & 0xffff
)

const (
	htbKindLink     = "link"
	htbKindDefault  = "unreserved"
	htbKindReserved = "reservation"
	htbKindOther    = "other"
)

// ClassStats is one htb class as the htb collector reads it.
type ClassStats struct {
	Major, Minor       uint16
	Rate, Ceil         uint64 // bits per second, as configured
	Bytes, Packets     uint64 // sent
	Drops, Overlimits  uint64
	BacklogBytes, Qlen uint64
}

type htbCollector struct{ env Env }

func newHTB(env Env) Definition {
	return Definition{
		Collector: &htbCollector{env},
		Help:      "counters, backlog and configured rates of the htb classes on every device (netlink)",
		Enabled:   true,
		Meta: map[string]monitor.Meta{
			"lightpath_htb_sent_bytes_total":      counter("Bytes the htb class sent."),
			"lightpath_htb_sent_packets_total":    counter("Packets the htb class sent."),
			"lightpath_htb_drops_total":           counter("Packets the htb class (its leaf queue) dropped."),
			"lightpath_htb_overlimits_total":      counter("Times the htb class was over its rate and had to wait or borrow."),
			"lightpath_htb_backlog_bytes":         gauge("Bytes queued in the htb class."),
			"lightpath_htb_backlog_packets":       gauge("Packets queued in the htb class."),
			"lightpath_htb_rate_bytes_per_second": gauge("Guaranteed rate of the htb class, as configured (bytes per second, as promtool wants; ×8 for bit/s)."),
			"lightpath_htb_ceil_bytes_per_second": gauge("Ceiling rate of the htb class, as configured (bytes per second)."),
		},
	}
}

func (*htbCollector) Name() string { return "htb" }

// classLabels names a class: "1:105" as tc prints it (hexadecimal), its
// kind (link for 1:1, unreserved for 1:2, reservation for 1:100 + DSCP)
// and, for a reservation's class, its DSCP.
func classLabels(dev, link string, c ClassStats) monitor.Labels {
	kind, dscp := htbKindOther, ""
	if c.Major == htbRootMajor {
		switch {
		case c.Minor == classLink:
			kind = htbKindLink
		case c.Minor == classUnreserved:
			kind = htbKindDefault
		case c.Minor >= topology.ClassBase && c.Minor <= topology.ClassBase+topology.MaxDSCP:
			kind = htbKindReserved
			dscp = strconv.Itoa(int(c.Minor - topology.ClassBase))
		}
	}
	return monitor.L("device", dev, "link", link, "class", fmt.Sprintf("%x:%x", c.Major, c.Minor), "kind", kind, "dscp", dscp)
}

func classPoints(dev, link string, c ClassStats, emit func(monitor.Point)) {
	ls := classLabels(dev, link, c)
	for _, s := range []struct {
		name string
		v    uint64
	}{
		{"lightpath_htb_sent_bytes_total", c.Bytes},
		{"lightpath_htb_sent_packets_total", c.Packets},
		{"lightpath_htb_drops_total", c.Drops},
		{"lightpath_htb_overlimits_total", c.Overlimits},
		{"lightpath_htb_backlog_bytes", c.BacklogBytes},
		{"lightpath_htb_backlog_packets", c.Qlen},
		{"lightpath_htb_rate_bytes_per_second", c.Rate / 8},
		{"lightpath_htb_ceil_bytes_per_second", c.Ceil / 8},
	} {
		emit(monitor.Point{Name: s.name, Labels: ls, V: float64(s.v)})
	}
}

// ---- tcp ----

// TCPSock is one TCP socket as the tcp collector reads it (inet_diag).
type TCPSock struct {
	Local, Remote netip.AddrPort
	RTT           float64 // seconds, smoothed
	MinRTT        float64 // seconds
	Cwnd          uint32  // segments
	TotalRetrans  uint32  // segments retransmitted over the connection's life
	PacingRate    uint64  // bytes per second (as the kernel keeps it)
	DeliveryRate  uint64  // bytes per second
	BytesAcked    uint64
	BytesReceived uint64
}

type tcpCollector struct{ env Env }

func newTCP(env Env) Definition {
	return Definition{
		Collector: &tcpCollector{env},
		Help:      "RTT, window, retransmits and rates of the TCP connections of live reservations' flows (inet_diag)",
		Enabled:   true,
		Meta: map[string]monitor.Meta{
			"lightpath_tcp_rtt_seconds":                    gauge("Smoothed round-trip time of the connection (per flow)."),
			"lightpath_tcp_min_rtt_seconds":                gauge("Least round-trip time the connection has seen (per flow)."),
			"lightpath_tcp_cwnd_segments":                  gauge("Congestion window of the connection, in segments (per flow)."),
			"lightpath_tcp_retransmits_total":              counter("Segments the connection retransmitted over its life (per flow)."),
			"lightpath_tcp_pacing_rate_bytes_per_second":   gauge("Pacing rate of the connection (per flow)."),
			"lightpath_tcp_delivery_rate_bytes_per_second": gauge("Most recent delivery rate the connection measured (per flow)."),
			"lightpath_tcp_acked_bytes_total":              counter("Bytes the peer acknowledged on the connection (per flow)."),
			"lightpath_tcp_received_bytes_total":           counter("Bytes the connection received (per flow)."),
		},
	}
}

func (*tcpCollector) Name() string { return "tcp" }

// matchFlow finds the flow whose server port is the socket's local or
// remote port, and says which end the socket is (server when its local
// port is the flow's).
func matchFlow(flows []FlowMatch, s TCPSock) (f FlowMatch, server, ok bool) {
	for _, f := range flows {
		if slices.Contains(f.Ports, int(s.Local.Port())) {
			return f, true, true
		}
		if slices.Contains(f.Ports, int(s.Remote.Port())) {
			return f, false, true
		}
	}
	return FlowMatch{}, false, false
}

// flowLabel names a connection client>server, the same at both ends:
// "198.18.1.2:40000>198.18.2.2:7070".
func flowLabel(s TCPSock, server bool) string {
	if server {
		return s.Remote.String() + ">" + s.Local.String()
	}
	return s.Local.String() + ">" + s.Remote.String()
}

// tcpPoints emits the series of the sockets that belong to flows.
func tcpPoints(flows []FlowMatch, socks []TCPSock, emit func(monitor.Point)) {
	for _, s := range socks {
		f, server, ok := matchFlow(flows, s)
		if !ok {
			continue
		}
		side := "client"
		if server {
			side = "server"
		}
		ls := monitor.L("flow", flowLabel(s, server), "side", side, "dscp", strconv.Itoa(f.DSCP))
		pacing := float64(s.PacingRate)
		if s.PacingRate == ^uint64(0) {
			pacing = math.Inf(1) // the kernel's "no pacing"
		}
		for _, p := range []struct {
			name string
			v    float64
		}{
			{"lightpath_tcp_rtt_seconds", s.RTT},
			{"lightpath_tcp_min_rtt_seconds", s.MinRTT},
			{"lightpath_tcp_cwnd_segments", float64(s.Cwnd)},
			{"lightpath_tcp_retransmits_total", float64(s.TotalRetrans)},
			{"lightpath_tcp_pacing_rate_bytes_per_second", pacing},
			{"lightpath_tcp_delivery_rate_bytes_per_second", float64(s.DeliveryRate)},
			{"lightpath_tcp_acked_bytes_total", float64(s.BytesAcked)},
			{"lightpath_tcp_received_bytes_total", float64(s.BytesReceived)},
		} {
			emit(monitor.Point{Name: p.name, Labels: ls, V: p.v})
		}
	}
}

// flowPorts is every server port the flows name.
func flowPorts(flows []FlowMatch) map[uint16]bool {
	m := map[uint16]bool{}
	for _, f := range flows {
		for _, p := range f.Ports {
			if p > 0 && p < 1<<16 {
				m[uint16(p)] = true
			}
		}
	}
	return m
}
