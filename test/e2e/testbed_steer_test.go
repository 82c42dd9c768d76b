//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The testbed's parts of issue 18: a link that is up but drops everything
// (blackhole), the largest segment each direction carried, and hosts'
// routes that carry the routed path's MTU.

// dirStatus is one direction in `testbed status --json`, with the fields
// these tests read.
type dirStatus struct {
	From            string `json:"from"`
	To              string `json:"to"`
	Down            bool   `json:"down"`
	Blackhole       bool   `json:"blackhole"`
	Packets         uint64 `json:"packets"`
	DropsDown       uint64 `json:"drops_down"`
	DropsBlackhole  uint64 `json:"drops_blackhole"`
	MaxSegmentBytes uint64 `json:"max_segment_bytes"`
	MaxPacketBytes  uint64 `json:"max_packet_bytes"`
	Egress          *struct {
		Up      bool `json:"up"`
		Carrier bool `json:"carrier"`
	} `json:"egress"`
}

// directions returns the directions of link from `testbed status --json`.
func (b *tb) directions(link string) []dirStatus {
	t := b.t
	t.Helper()
	r := runLP(t, runOpts{}, "testbed", "status", "--name", b.name, "--json")
	mustSucceed(t, "testbed status", r)
	var s struct {
		Links []struct {
			Name       string      `json:"name"`
			Directions []dirStatus `json:"directions"`
		} `json:"links"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	for _, l := range s.Links {
		if l.Name == link {
			return l.Directions
		}
	}
	t.Fatalf("status --json has no link %q", link)
	return nil
}

func (b *tb) nsPath(node string) string { return "/run/netns/lp-" + b.name + "-" + node }

// TestTestbedBlackhole blackholes the routed wan: pings across fail while
// both ends' devices keep their carrier (LOWER_UP), status says blackhole
// and counts the drops apart from a down link's, --up restores it, and
// --down with --blackhole is refused.
func TestTestbedBlackhole(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	b := upTestbed(t, "examples/two-site.yaml")
	s := b.status()
	b1, _ := s.node("b1")
	// One ping answered: a slow emulator may let a single ping's 2 s
	// pass, so it is tried until one comes back.
	if !waitFor(time.Minute, func() bool { ok, _ := b.ping("a1", b1); return ok }) {
		_, out := b.ping("a1", b1)
		t.Fatalf("a1 cannot ping b1 before the blackhole:\n%s", out)
	}

	b.linkSet("wan", "--blackhole")
	if ok, out := b.ping("a1", b1); ok {
		t.Errorf("a1 pinged b1 across a blackholed wan:\n%s", out)
	}
	for _, node := range []string{"ra", "rb"} {
		r := b.exec(node, "ip", "link", "show", "dev", "wan")
		mustSucceed(t, "ip link show in "+node, r)
		if !strings.Contains(r.stdout, "LOWER_UP") || strings.Contains(r.stdout, "NO-CARRIER") {
			t.Errorf("%s's wan while blackholed: want the carrier up (LOWER_UP):\n%s", node, r.stdout)
		}
	}
	ds := b.directions("wan")
	var dropped uint64
	for _, d := range ds {
		if !d.Blackhole || d.Down {
			t.Errorf("wan %s>%s while blackholed: blackhole %v, down %v", d.From, d.To, d.Blackhole, d.Down)
		}
		if d.Egress == nil || !d.Egress.Carrier || !d.Egress.Up {
			t.Errorf("wan %s>%s while blackholed: egress %+v, want up with carrier", d.From, d.To, d.Egress)
		}
		if d.DropsDown != 0 {
			t.Errorf("wan %s>%s: %d drops counted as down", d.From, d.To, d.DropsDown)
		}
		dropped += d.DropsBlackhole
	}
	if dropped == 0 {
		t.Error("the blackhole dropped nothing (the ping's packets should count in drops_blackhole)")
	}
	r := runLP(t, runOpts{}, "testbed", "status", "--name", b.name)
	mustSucceed(t, "testbed status", r)
	if !regexp.MustCompile(`(?m)^wan \(routed\)\s+ra>rb\s.*\sblackhole\s`).MatchString(r.stdout) {
		t.Errorf("status does not show wan ra>rb as blackhole:\n%s", r.stdout)
	}

	r = runLP(t, runOpts{}, "testbed", "link", "set", "--name", b.name, "wan", "--down", "--blackhole")
	if r.code == 0 || !strings.Contains(r.stderr, "exclude each other") {
		t.Errorf("link set --down --blackhole: exit %d, stderr %q; want it refused", r.code, r.stderr)
	}

	// From blackhole to down: the carrier goes, the blackhole with it.
	b.linkSet("wan", "--down")
	for _, d := range b.directions("wan") {
		if d.Blackhole || !d.Down || d.Egress == nil || d.Egress.Carrier {
			t.Errorf("wan %s>%s after --down: blackhole %v, down %v, egress %+v", d.From, d.To, d.Blackhole, d.Down, d.Egress)
		}
	}
	b.linkSet("wan", "--blackhole")
	b.linkSet("wan", "--up")
	for _, d := range b.directions("wan") {
		if d.Blackhole || d.Down {
			t.Errorf("wan %s>%s after --up: blackhole %v, down %v", d.From, d.To, d.Blackhole, d.Down)
		}
	}
	if !waitFor(time.Minute, func() bool { ok, _ := b.ping("a1", b1); return ok }) {
		_, out := b.ping("a1", b1)
		t.Errorf("a1 cannot ping b1 after --up:\n%s", out)
	}
}

// tcpSend sends size bytes over one TCP connection from node from to a
// listener in node to on addr, and waits until the receiver has read them
// all.
func (b *tb) tcpSend(from, to, addr string, size int) {
	t := b.t
	t.Helper()
	var l net.Listener
	if err := inNetns(b.nsPath(to), func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listen in %s on %s: %v", to, addr, err)
	}
	defer l.Close()
	got := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- err
			return
		}
		defer c.Close()
		n, err := io.Copy(io.Discard, c)
		if err == nil && n != int64(size) {
			err = errors.New("short read")
		}
		got <- err
	}()
	var c net.Conn
	if err := inNetns(b.nsPath(from), func() (err error) { c, err = net.DialTimeout("tcp", addr, 10*time.Second); return err }); err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatalf("send to %s from %s: %v", addr, from, err)
	}
	c.Close()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("receive in %s: %v", to, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("receive in %s: no end after 60 s", to)
	}
}

// dirOf picks the direction of a link leaving node from.
func dirOf(ds []dirStatus, from string) dirStatus {
	for _, d := range ds {
		if d.From == from {
			return d
		}
	}
	return dirStatus{}
}

// TestTestbedLargestSegment sends TCP within site-a, over two 9000-byte
// links, and from a1 to b1 across the 1500-byte wan: status reports jumbo
// segments on the LAN links in the first case and none larger than 1500
// bytes anywhere on the way in the second, a1's 9000-byte link included,
// because a1's route to site-b carries the routed path's MTU (ip route get
// says so) and a1 sends no larger packet, with no ICMP needed.
func TestTestbedLargestSegment(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	b := upTestbed(t, "examples/two-site.yaml")
	s := b.status()
	a2, _ := s.node("a2")
	b1, b1v6 := s.node("b1")
	ra, _ := s.node("ra")

	for _, tc := range []struct{ dst, mtu string }{
		{b1, "mtu 1500"}, {b1v6, "mtu 1500"}, {a2, "mtu 9000"}, {ra, "mtu 9000"},
	} {
		r := b.exec("a1", "ip", "route", "get", tc.dst)
		mustSucceed(t, "ip route get "+tc.dst, r)
		if !strings.Contains(r.stdout, tc.mtu) {
			t.Errorf("a1: ip route get %s: want %q:\n%s", tc.dst, tc.mtu, r.stdout)
		}
	}
	r := b.exec("a1", "sysctl", "-n", "net.ipv4.tcp_mtu_probing")
	if mustSucceed(t, "sysctl", r); strings.TrimSpace(r.stdout) != "0" {
		t.Errorf("a1: tcp_mtu_probing %q, want 0", r.stdout)
	}

	b.tcpSend("a1", "b1", net.JoinHostPort(b1, "5301"), 4<<20)
	for _, x := range []struct{ link, from string }{{"a1-ra", "a1"}, {"wan", "ra"}, {"b1-rb", "rb"}} {
		d := dirOf(b.directions(x.link), x.from)
		t.Logf("%s from %s after a1>b1: largest segment %d bytes, packet %d", x.link, x.from, d.MaxSegmentBytes, d.MaxPacketBytes)
		if d.MaxPacketBytes > 1500 || d.MaxSegmentBytes > 1460 || d.MaxSegmentBytes < 1400 {
			t.Errorf("%s from %s after 4 MiB a1>b1: largest segment %d bytes, packet %d; want 1400-1460 and at most 1500", x.link, x.from, d.MaxSegmentBytes, d.MaxPacketBytes)
		}
	}

	b.tcpSend("a1", "a2", net.JoinHostPort(a2, "5302"), 16<<20)
	for _, x := range []struct{ link, from string }{{"a1-ra", "a1"}, {"a2-ra", "ra"}} {
		d := dirOf(b.directions(x.link), x.from)
		t.Logf("%s from %s after a1>a2: largest segment %d bytes, packet %d", x.link, x.from, d.MaxSegmentBytes, d.MaxPacketBytes)
		if d.MaxPacketBytes <= 1500 || d.MaxPacketBytes > 9000 || d.MaxSegmentBytes <= 1460 {
			t.Errorf("%s from %s after 16 MiB a1>a2 over 9000-byte links: largest segment %d bytes, packet %d; want jumbo", x.link, x.from, d.MaxSegmentBytes, d.MaxPacketBytes)
		}
	}
	if d := dirOf(b.directions("wan"), "ra"); d.MaxPacketBytes > 1500 {
		t.Errorf("wan from ra: largest packet %d bytes, more than its MTU", d.MaxPacketBytes)
	}
}
