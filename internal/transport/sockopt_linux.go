//go:build linux

package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// control runs before connect or bind, on the raw socket.
func control(c syscall.RawConn, network, peer string, o Options) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		s := int(fd)
		if o.Window > 0 {
			if serr = wrapOpt("SO_SNDBUF", unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF, o.Window)); serr != nil {
				return
			}
			if serr = wrapOpt("SO_RCVBUF", unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, o.Window)); serr != nil {
				return
			}
		}
		if o.DSCP >= 0 {
			if o.DSCP > 63 {
				serr = fmt.Errorf("DSCP %d out of range 0..63", o.DSCP)
				return
			}
			tos := o.DSCP << 2
			if strings.HasSuffix(network, "6") {
				serr = wrapOpt("IPV6_TCLASS", unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, tos))
			} else {
				serr = wrapOpt("IP_TOS", unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_TOS, tos))
			}
			if serr != nil {
				return
			}
		}
		if o.CC != "" {
			if err := unix.SetsockoptString(s, unix.IPPROTO_TCP, unix.TCP_CONGESTION, o.CC); err != nil {
				why := ccMissing(o.CC, AvailableCC())
				if errors.Is(err, unix.EPERM) {
					why = "an unprivileged process may only use those in net.ipv4.tcp_allowed_congestion_control"
				}
				serr = fmt.Errorf("set congestion control %q: %w (%s)", o.CC, err, why)
				return
			}
		} else if cc := defaultCC(peer); cc != "" {
			// A default the process may not use (an unprivileged process is
			// held to net.ipv4.tcp_allowed_congestion_control) leaves the
			// kernel's own.
			unix.SetsockoptString(s, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
		}
		if o.NotSentLowat > 0 {
			if serr = wrapOpt("TCP_NOTSENT_LOWAT", unix.SetsockoptInt(s, unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, o.NotSentLowat)); serr != nil {
				return
			}
		}
		if o.PacingRate > 0 {
			serr = setPacingRate(s, o.PacingRate)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// AvailableCC lists the congestion controls this kernel offers now. It
// reads the list afresh each time: a BPF congestion control (lightpath cc
// install fast) comes and goes while a process runs.
func AvailableCC() []string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// CheckCC checks, before a socket is opened, that the kernel offers the
// named congestion control now; "" (the transport's choice) always passes.
// Its error names what the kernel offers and, for fast, how to load it. A
// list that cannot be read leaves the verdict to the socket.
func CheckCC(name string) error { return checkCC(name, AvailableCC()) }

// checkCC is CheckCC against the list avail.
func checkCC(name string, avail []string) error {
	if name == "" || avail == nil || slices.Contains(avail, name) {
		return nil
	}
	what := "not offered"
	if name == FastCC {
		what = "not loaded"
	}
	return fmt.Errorf("congestion control %q is %s: %s", name, what, ccMissing(name, avail))
}

// ccMissing says what can be had instead of a congestion control the
// kernel lacks (avail) and, for Lightpath's FAST TCP, the command that
// loads it.
func ccMissing(name string, avail []string) string {
	why := "this kernel offers " + strings.Join(avail, ", ")
	if name == FastCC {
		why = "load it with lightpath cc install fast, as root; " + why
	}
	return why
}

// HasCC reports whether the kernel offers the named congestion control.
func HasCC(name string) bool {
	for _, n := range AvailableCC() {
		if n == name {
			return true
		}
	}
	return false
}

// CurrentCC reads the congestion control a connection runs.
func CurrentCC(c syscall.Conn) (string, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	var name string
	var gerr error
	err = rc.Control(func(fd uintptr) {
		name, gerr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	if err != nil {
		return "", err
	}
	return strings.TrimRight(name, "\x00"), gerr
}

// noPacingCap is SO_MAX_PACING_RATE's "unlimited" (the kernel's ~0UL).
const noPacingCap = ^uint64(0)

// setPacingRate caps a socket's pacing at bps bytes/s; 0 lifts the cap.
func setPacingRate(fd int, bps uint64) error {
	if bps == 0 {
		bps = noPacingCap
	}
	return wrapOpt("SO_MAX_PACING_RATE", unix.SetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, bps))
}

// tcpInfo reads a socket's TCP_INFO as a stream's statistics, with the
// pacing cap it runs under.
func tcpInfo(fd int) (Stats, error) {
	ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return Stats{}, fmt.Errorf("read TCP_INFO: %w", err)
	}
	maxPacing, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE)
	if err != nil {
		return Stats{}, fmt.Errorf("read SO_MAX_PACING_RATE: %w", err)
	}
	if maxPacing == noPacingCap || maxPacing == uint64(^uint32(0)) {
		maxPacing = 0
	}
	cc, err := unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	if err != nil {
		return Stats{}, fmt.Errorf("read TCP_CONGESTION: %w", err)
	}
	us := func(v uint64) time.Duration { return time.Duration(v) * time.Microsecond }
	return Stats{
		CC:              strings.TrimRight(cc, "\x00"),
		RTT:             us(uint64(ti.Rtt)),
		RTTVar:          us(uint64(ti.Rttvar)),
		MinRTT:          us(uint64(ti.Min_rtt)),
		Cwnd:            ti.Snd_cwnd,
		MSS:             ti.Snd_mss,
		Retransmits:     ti.Total_retrans,
		BytesSent:       ti.Bytes_sent,
		BytesRetrans:    ti.Bytes_retrans,
		BytesAcked:      ti.Bytes_acked,
		BytesReceived:   ti.Bytes_received,
		PacingRate:      ti.Pacing_rate,
		MaxPacingRate:   maxPacing,
		DeliveryRate:    ti.Delivery_rate,
		NotSent:         ti.Notsent_bytes,
		BusyTime:        us(ti.Busy_time),
		ReceiverLimited: us(ti.Rwnd_limited),
		SenderLimited:   us(ti.Sndbuf_limited),
	}, nil
}

// linuxTCP is a TCP stream with Linux's capabilities: sendfile(2) and
// SO_RCVLOWAT.
type linuxTCP struct{ tcpConn }

func wrapTCP(c *net.TCPConn) Conn { return &linuxTCP{tcpConn{c}} }

func (c *linuxTCP) SendFile(f *os.File, off, n int64) (int64, error) {
	return sendFile(c.TCPConn, f, off, n)
}

func (c *linuxTCP) SetReadLowat(n int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = wrapOpt("SO_RCVLOWAT", unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, n))
	}); err != nil {
		return err
	}
	return serr
}

// sendFile writes n bytes of f starting at off to c with sendfile(2): the
// pages go from the page cache to the socket without a copy through user
// space. It blocks (through the runtime's poller) until all n are written
// or an error occurs, and honours c's write deadline.
func sendFile(c *net.TCPConn, f *os.File, off, n int64) (int64, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	src := int(f.Fd())
	var done int64
	var serr error
	for done < n && serr == nil {
		werr := rc.Write(func(fd uintptr) bool {
			chunk := n - done
			if chunk > 1<<30 {
				chunk = 1 << 30
			}
			o := off + done
			w, err := unix.Sendfile(int(fd), src, &o, int(chunk))
			if w > 0 {
				done += int64(w)
			}
			switch {
			case errors.Is(err, unix.EAGAIN):
				return false // wait until writable
			case errors.Is(err, unix.EINTR):
				return true
			case err != nil:
				serr = err
			case w == 0:
				serr = io.ErrUnexpectedEOF // the file is shorter than promised
			}
			return true
		})
		if werr != nil {
			return done, werr
		}
	}
	if serr != nil {
		return done, fmt.Errorf("sendfile: %w", serr)
	}
	return done, nil
}
