//go:build linux

package e2e

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/netns"
)

// udpTopology is two hosts on one link, with duplicates from the file.
const udpTopology = `sites:
  - name: a
  - name: b
nodes:
  - {name: h1, site: a}
  - {name: h2, site: b}
links:
  - name: l1
    ends: [h1, h2]
    rate: 2G
    delay: 1ms
    duplicate: 2%
`

// udpDir is the counters of one direction that TestTestbedUDP reads.
type udpDir struct {
	From           string  `json:"from"`
	Loss           float64 `json:"loss"`
	Duplicate      float64 `json:"duplicate"`
	PacketsIn      uint64  `json:"packets_in"`
	Packets        uint64  `json:"packets"`
	SuperPacketsIn uint64  `json:"super_packets_in"`
	DropsLoss      uint64  `json:"drops_loss"`
	DropsQueue     uint64  `json:"drops_queue"`
	Duplicated     uint64  `json:"duplicated"`
}

func (b *tb) udpDir(t *testing.T, link, from string) udpDir {
	t.Helper()
	r := runLP(t, runOpts{}, "testbed", "status", "--name", b.name, "--json")
	mustSucceed(t, "testbed status --json", r)
	var s struct {
		Links []struct {
			Name       string   `json:"name"`
			Directions []udpDir `json:"directions"`
		} `json:"links"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	for _, l := range s.Links {
		for _, d := range l.Directions {
			if l.Name == link && d.From == from {
				return d
			}
		}
	}
	t.Fatalf("status --json has no direction of %s from %s:\n%s", link, from, r.stdout)
	return udpDir{}
}

// TestTestbedUDP sends numbered UDP datagrams in GSO batches (UDP_SEGMENT,
// from a socket in h1's namespace), over IPv4 and IPv6, across a testbed
// link that loses 5% and duplicates 10%, and checks what h2 received
// against what testbed status --json says the link carried: loss and
// duplicates per datagram, the batches crossing the emulator whole. Other traffic (IPv6 neighbour
// discovery) may cross the link too, hence a few packets of slack.
func TestTestbedUDP(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	file := filepath.Join(t.TempDir(), "udp.yaml")
	if err := os.WriteFile(file, []byte(udpTopology), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &tb{t: t, name: fmt.Sprintf("e2e%04x", rand.IntN(1<<16))}
	r := runLP(t, runOpts{timeout: 60 * time.Second}, "testbed", "up", file, "--name", b.name)
	t.Cleanup(func() { b.down() })
	mustSucceed(t, "testbed up", r)

	if d := b.udpDir(t, "l1", "h1"); d.Duplicate != 0.02 || d.Loss != 0 {
		t.Errorf("from the file: duplicate %v loss %v, want 0.02 and 0", d.Duplicate, d.Loss)
	}
	b.linkSet("l1", "--from", "h1", "--loss", "5%", "--duplicate", "10%")
	r = runLP(t, runOpts{}, "testbed", "status", "--name", b.name)
	mustSucceed(t, "testbed status", r)
	if !strings.Contains(r.stdout, "DUP") || !strings.Contains(r.stdout, " 10% ") || !strings.Contains(r.stdout, " 2% ") {
		t.Errorf("status table without the duplicates (10%% from h1, 2%% from h2):\n%s", r.stdout)
	}
	for _, bad := range [][]string{{"--duplicate", "often"}, {"--duplicate", "150%"}} {
		r := runLP(t, runOpts{}, append([]string{"testbed", "link", "set", "--name", b.name, "l1"}, bad...)...)
		if r.code == 0 || !strings.Contains(r.stderr, "lightpath: testbed link set: --duplicate:") {
			t.Errorf("link set %v: exit %d, stderr %q", bad, r.code, r.stderr)
		}
	}

	s := b.status()
	h2v4, h2v6 := s.node("h2")
	// IPv4, then IPv6 (TUN_F_USO4 and TUN_F_USO6 are two offloads); the
	// IPv6 payload is 20 bytes shorter, for its longer header.
	t.Run("ipv4", func(t *testing.T) { b.udpAcross(t, "udp4", h2v4, 1400) })
	t.Run("ipv6", func(t *testing.T) { b.udpAcross(t, "udp6", h2v6, 1380) })
}

// udpAcross sends 10000 numbered datagrams of size bytes from h1 to h2's
// address on l1 in GSO batches of 20, and checks what h2 received against
// the counters of testbed status --json.
func (b *tb) udpAcross(t *testing.T, network, h2 string, size int) {
	nsH1, nsH2 := "/run/netns/lp-"+b.name+"-h1", "/run/netns/lp-"+b.name+"-h2"
	var sink *net.UDPConn
	if err := netns.Do(nsH2, func() (err error) {
		sink, err = net.ListenUDP(network, &net.UDPAddr{IP: net.ParseIP(h2), Port: 9000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sink.SetReadBuffer(8 << 20)
	var mu sync.Mutex
	seen := map[uint64]int{}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := sink.Read(buf)
			if err != nil {
				return
			}
			if n >= 8 {
				mu.Lock()
				seen[binary.BigEndian.Uint64(buf)]++
				mu.Unlock()
			}
		}
	}()
	var conn *net.UDPConn
	if err := netns.Do(nsH1, func() (err error) {
		conn, err = net.DialUDP(network, nil, &net.UDPAddr{IP: net.ParseIP(h2), Port: 9000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const n, batch = 10000, 20
	rc, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, size) })
	if serr != nil {
		t.Fatalf("setsockopt UDP_SEGMENT: %v", serr)
	}

	before := b.udpDir(t, "l1", "h1")
	buf := make([]byte, batch*size)
	for seq := uint64(0); seq < n; {
		for i := range batch {
			binary.BigEndian.PutUint64(buf[i*size:], seq)
			seq++
		}
		if _, err := conn.Write(buf); err != nil {
			t.Fatalf("send a batch with UDP_SEGMENT: %v", err)
		}
		time.Sleep(time.Millisecond) // 20 datagrams a millisecond: 224 Mbit/s, well below the link
	}
	// The link delivered what it will once the emulator has read every
	// datagram, passed, dropped or copied each, and the sink has what it
	// passed (on a busy host the emulator may lag the sender).
	var after udpDir
	var distinct, copies int
	tally := func() {
		mu.Lock()
		defer mu.Unlock()
		distinct, copies = 0, 0
		for q, c := range seen {
			if q < n {
				distinct++
				copies += c - 1
			}
		}
	}
	waitFor(time.Minute, func() bool {
		after = b.udpDir(t, "l1", "h1")
		tally()
		in, out := after.PacketsIn-before.PacketsIn, after.Packets-before.Packets
		gone := out + after.DropsLoss - before.DropsLoss + after.DropsQueue - before.DropsQueue
		return in+5 >= n && gone+5 >= in+after.Duplicated-before.Duplicated && uint64(distinct+copies) >= out-min(out, 5)
	})
	in, lost, dup := after.PacketsIn-before.PacketsIn, after.DropsLoss-before.DropsLoss, after.Duplicated-before.Duplicated
	t.Logf("%s: status: %d packets in (%d GSO batches read whole), %d out, %d lost, %d duplicated; h2 received %d distinct datagrams and %d copies",
		network, in, after.SuperPacketsIn-before.SuperPacketsIn, after.Packets-before.Packets, lost, dup, distinct, copies)
	near := func(what string, got, want int) {
		if d := got - want; d < -5 || d > 5 {
			t.Errorf("%s: %d, want %d (± 5)", what, got, want)
		}
	}
	near("packets into the emulator", int(in), n)
	near("datagrams h2 is missing", n-distinct, int(lost))
	near("copies h2 received", copies, int(dup))
	if f := float64(n-distinct) / n; f < 0.03 || f > 0.07 {
		t.Errorf("h2 is missing %.4f of the datagrams, want 0.05 ± 0.02", f)
	}
	if f := float64(copies) / float64(distinct); f < 0.07 || f > 0.13 {
		t.Errorf("h2 received %.4f copies per datagram, want 0.1 ± 0.03", f)
	}
	if after.SuperPacketsIn-before.SuperPacketsIn < n/batch/2 {
		t.Errorf("%d of %d batches crossed the emulator whole: USO is not at work", after.SuperPacketsIn-before.SuperPacketsIn, n/batch)
	}
	if after.DropsQueue != before.DropsQueue {
		t.Errorf("the egress queue dropped %d packets", after.DropsQueue-before.DropsQueue)
	}
}
