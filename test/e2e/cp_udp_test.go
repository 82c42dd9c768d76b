//go:build linux

package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/testbed"
)

// udpSummary is what a UDP copy's or bench's summary adds.
type udpSummary struct {
	Transport         string   `json:"transport"`
	GoodputBps        float64  `json:"goodput_bps"`
	SendingRateBps    *float64 `json:"sending_rate_bps"`
	BytesResent       *uint64  `json:"bytes_resent"`
	LossRepaired      *uint64  `json:"loss_repaired_bytes"`
	Datagrams         *uint64  `json:"datagrams"`
	DatagramsPerBatch *float64 `json:"datagrams_per_batch"`
	CC                string   `json:"cc"`
	PerStream         []struct {
		CC string `json:"cc"`
	} `json:"per_stream"`
}

func parseUDPSummary(t *testing.T, stdout string) udpSummary {
	t.Helper()
	var s udpSummary
	if err := json.Unmarshal([]byte(lastLine(stdout)), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout)
	}
	return s
}

// checkUDP checks a summary says the data went over UDP under rate
// control cc on every stream, with its UDP account.
func checkUDP(t *testing.T, what string, s udpSummary, cc string) {
	t.Helper()
	if s.Transport != "udp" || s.CC != cc {
		t.Errorf("%s: transport %q, cc %q; want udp, %s", what, s.Transport, s.CC, cc)
	}
	if s.SendingRateBps == nil || s.BytesResent == nil || s.LossRepaired == nil || s.Datagrams == nil ||
		s.DatagramsPerBatch == nil || *s.Datagrams == 0 || *s.DatagramsPerBatch < 1 || s.GoodputBps <= 0 {
		t.Errorf("%s: UDP account incomplete: %+v", what, s)
	}
	for i, st := range s.PerStream {
		if st.CC != cc {
			t.Errorf("%s: stream %d ran %q, want %s", what, i, st.CC, cc)
		}
	}
}

// TestCpUDP copies a mixed tree over UDP data streams on loopback, both
// ways, and checks it arrives identical and verified, with the summary's
// UDP account; bench runs each of its modes over UDP; wrong rate controls
// are refused before connecting.
func TestCpUDP(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root, src, back := mkdir(t, dir, "root"), mkdir(t, dir, "src"), mkdir(t, dir, "back")
	tree := filepath.Join(src, "tree")
	makeMixedTree(t, tree)
	srv := startServer(t, root, "--token-file", writeToken(t, dir))
	env := runOpts{env: []string{"LIGHTPATH_TOKEN=e2e-udp-token"}}

	r := runLP(t, env, "cp", "--json", "-r", "--transport", "udp", tree, srv.URL("in/"))
	mustSucceed(t, "cp --transport udp (push)", r)
	if s := parseSummary(t, r.stdout); !s.Verified || s.FilesFailed != 0 {
		t.Fatalf("push not verified: %+v", s)
	}
	checkUDP(t, "push", parseUDPSummary(t, r.stdout), "fast")
	compareTrees(t, tree, filepath.Join(root, "in", "tree"))

	r = runLP(t, env, "cp", "--json", "-r", "--transport", "udp", "--cc", "fixed", "--rate", "2G", "-P", "3", srv.URL("in/tree"), back+"/")
	mustSucceed(t, "cp --transport udp --cc fixed (pull)", r)
	if s := parseSummary(t, r.stdout); !s.Verified || s.Streams != 3 {
		t.Fatalf("pull: %+v", s)
	}
	checkUDP(t, "pull", parseUDPSummary(t, r.stdout), "fixed")
	compareTrees(t, tree, filepath.Join(back, "tree"))

	// The human summary says it too.
	r = runLP(t, env, "cp", "--transport", "udp", "--overwrite", filepath.Join(tree, "big.bin"), srv.URL("again.bin"))
	mustSucceed(t, "cp --transport udp, human summary", r)
	for _, want := range []string{"udp rate control: fast", "over udp: goodput", "datagrams per batch", "loss repaired"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("human summary lacks %q:\n%s", want, r.stdout)
		}
	}

	// bench: memory, a file, the server's file, both ways.
	writeRandom(t, filepath.Join(root, "srv.bin"), 3<<20, 5)
	for _, args := range [][]string{
		{"-t", "0.3"},
		{"--file", filepath.Join(tree, "big.bin"), "-t", "30"},
		{"--reverse", "--file", "srv.bin", "-t", "30", "--cc", "aimd"},
		{"--bidir", "-P", "2", "-t", "0.3", "--cc", "fixed", "--rate", "500M"},
		{"-t", "0.3", "--cc", "fast", "--fast-alpha", "50", "--fast-gamma", "0.25"},
		// the server sends under the client's FAST parameters (protocol 8)
		{"--reverse", "-t", "0.3", "--fast-alpha", "50", "--fast-gamma", "0.25"},
	} {
		r := runLP(t, env, append([]string{"bench", "--json", "--transport", "udp", "lp://" + srv.addr}, args...)...)
		mustSucceed(t, "bench --transport udp "+strings.Join(args, " "), r)
		cc := "fast"
		for i, a := range args {
			if a == "--cc" {
				cc = args[i+1]
			}
		}
		checkUDP(t, "bench "+strings.Join(args, " "), parseUDPSummary(t, r.stdout), cc)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"cp", "--transport", "udp", "--cc", "cubic", tree, srv.URL("x")}, []string{"--cc", "cubic", "fixed, fast or aimd"}},
		{[]string{"cp", "--transport", "udp", "--cc", "fixed", tree, srv.URL("x")}, []string{"--cc fixed", "--rate"}},
		{[]string{"bench", "--transport", "udp", "--cc", "fixed", "lp://" + srv.addr}, []string{"--cc fixed", "--rate"}},
		{[]string{"cp", "--cc", "aimd", tree, srv.URL("x")}, []string{"--transport udp"}},
		{[]string{"cp", "--transport", "quic", tree, srv.URL("x")}, []string{"--transport", "tcp or udp"}},
		{[]string{"cp", "--transport", "udp", "--cc", "aimd", "--fast-alpha", "50", tree, srv.URL("x")}, []string{"--fast-alpha", "--cc fast, not aimd"}},
		{[]string{"cp", "--fast-gamma", "0.5", tree, srv.URL("x")}, []string{"--fast-gamma", "--transport udp --cc fast"}},
		{[]string{"cp", "--transport", "udp", "--fast-alpha", "0", tree, srv.URL("x")}, []string{"alpha 0", "1 to 100000"}},
	} {
		checkFailure(t, strings.Join(tc.args, " "), runLP(t, env, tc.args...), tc.want...)
	}
}

// writeToken writes the mover token the UDP tests serve with.
func writeToken(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "token")
	writeFile(t, p, "e2e-udp-token\n", 0o600)
	return p
}

// TestServeUDPPortTaken: a serve whose port number is taken for UDP
// fails at start, saying so.
func TestServeUDPPortTaken(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	port := freePort(t, "127.0.0.1")
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Skipf("the free TCP port %d is taken for UDP: %v", port, err)
	}
	defer uc.Close()
	r := runLP(t, runOpts{}, "serve", "--listen", "127.0.0.1:"+strconv.Itoa(port), "--root", dir)
	checkFailure(t, "serve on a port taken for UDP", r, "listen for UDP", strconv.Itoa(port), "address already in use")
}

// TestCpUDPResume interrupts a UDP copy (the client, as Ctrl-C, and
// killed) and runs it again: only what is missing is sent.
func TestCpUDPResume(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := scratchDir(t)
			root, local := mkdir(t, dir, "root"), mkdir(t, dir, "local")
			srv := startServer(t, root)
			const size = 24 << 20
			src := filepath.Join(local, "big.bin")
			writeRandom(t, src, size, 17)
			args := []string{"cp", "--json", "--transport", "udp", "-P", "2", "--block-size", "64KiB", "--rate", "40M", src, srv.URL("big.bin")}
			p := startLP(t, runOpts{}, args...)
			// Interrupted once the journal records a few blocks: at
			// 40 Mbit/s the rest takes seconds, so the copy is still
			// running.
			journal := filepath.Join(root, ".big.bin.lightpath-journal")
			if !waitFor(time.Minute, func() bool { return journalBlocks(journal) >= 4 || p.Exited() }) || p.Exited() {
				t.Fatalf("cp journalled no blocks, or finished before it could be interrupted: %+v", p.Wait())
			}
			p.Signal(sig)
			r := p.Wait()
			if r.code == 0 {
				t.Fatalf("interrupted cp exited 0")
			}
			if _, err := os.Lstat(filepath.Join(root, ".big.bin.lightpath-journal")); err != nil {
				t.Fatalf("no journal left for a resume: %v", err)
			}
			// The same copy again, at full speed.
			r = runLP(t, runOpts{}, "cp", "--json", "--transport", "udp", "-P", "2", "--block-size", "64KiB", src, srv.URL("big.bin"))
			mustSucceed(t, "the same cp again", r)
			checkResumed(t, parseSummary(t, r.stdout), size)
			sameFile(t, src, filepath.Join(root, "big.bin"))
			checkNoWorkFiles(t, root)
		})
	}
}

// drops is what a testbed dropped, by where: the emulator's counters of
// every link and direction (loss and full queues), and per node the
// kernel's (devices' receive and transmit drops, qdisc drops, UDP's
// receive and send buffer errors).
type drops map[string]uint64

func (d drops) minus(before drops) drops {
	out := drops{}
	for k, v := range d {
		if v != before[k] {
			out[k] = v - before[k]
		}
	}
	return out
}

func (d drops) packets() uint64 {
	var n uint64
	for _, v := range d {
		n += v
	}
	return n
}

// pathDrops reads every drop counter of the testbed.
func (b *tb) pathDrops(t *testing.T) drops {
	t.Helper()
	r := runLP(t, runOpts{}, "testbed", "status", "--name", b.name, "--json")
	mustSucceed(t, "testbed status --json", r)
	var st struct {
		Nodes []struct {
			Name string `json:"name"`
		} `json:"nodes"`
		Links []struct {
			Name       string   `json:"name"`
			Directions []udpDir `json:"directions"`
		} `json:"links"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	d := drops{}
	for _, l := range st.Links {
		for _, dir := range l.Directions {
			d["emulator "+l.Name+" from "+dir.From] = dir.DropsLoss + dir.DropsQueue
		}
	}
	// Every node's counters in one script run from the host (ip netns
	// exec, which also mounts the namespace's own /sys).
	var script strings.Builder
	for _, n := range st.Nodes {
		fmt.Fprintf(&script, "echo '#node %s'; ip netns exec %s sh -c \"cat /proc/net/dev; echo '#snmp'; cat /proc/net/snmp; echo '#tc'; "+
			"for i in \\$(ls /sys/class/net); do tc -s qdisc show dev \\$i; done\"\n", n.Name, testbed.NamespaceName(b.name, n.Name))
	}
	out, err := exec.Command("sh", "-c", script.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("drop counters: %v\n%s", err, out)
	}
	node, section := "", ""
	var udpHead []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "#node "):
			node, section, udpHead = strings.TrimPrefix(line, "#node "), "dev", nil
		case line == "#snmp" || line == "#tc":
			section = line[1:]
		case section == "dev" && len(f) == 17 && strings.HasSuffix(f[0], ":"):
			// face: rx bytes packets errs drop ... tx bytes packets errs drop
			rxDrop, _ := strconv.ParseUint(f[4], 10, 64)
			txDrop, _ := strconv.ParseUint(f[12], 10, 64)
			d[node+" "+strings.TrimSuffix(f[0], ":")+" drops"] = rxDrop + txDrop
		case section == "snmp" && len(f) > 1 && f[0] == "Udp:":
			if udpHead == nil {
				udpHead = f
				continue
			}
			for i, name := range udpHead {
				if (name == "RcvbufErrors" || name == "SndbufErrors") && i < len(f) {
					v, _ := strconv.ParseUint(f[i], 10, 64)
					d[node+" udp "+name] = v
				}
			}
		case section == "tc" && len(f) > 6 && f[0] == "Sent" && f[5] == "(dropped":
			v, _ := strconv.ParseUint(strings.TrimSuffix(f[6], ","), 10, 64)
			d[node+" qdiscs"] += v
		}
	}
	return d
}

// journalBlocks is how many blocks a resume journal records (a 24-byte
// header, then 8 bytes a block: internal/mover/journal.go), or 0 when
// there is none yet.
func journalBlocks(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() < 24 {
		return 0
	}
	return (fi.Size() - 24) / 8
}

// udpRelay forwards datagrams between clients and a server's UDP port,
// one upstream socket per client address (so the server sees the relay's
// socket as the stream's peer), keeping every datagram that passed for
// replay.
type udpRelay struct {
	ln     *net.UDPConn
	target *net.UDPAddr
	mu     sync.Mutex
	up     map[string]*net.UDPConn
	seen   [][]byte // datagrams client to server, as they passed
	ups    []*net.UDPConn
	n      atomic.Int64
}

func startUDPRelay(t *testing.T, port int, target string) *udpRelay {
	t.Helper()
	ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	ta, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		t.Fatal(err)
	}
	r := &udpRelay{ln: ln, target: ta, up: map[string]*net.UDPConn{}}
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		for _, u := range r.up {
			u.Close()
		}
		r.mu.Unlock()
	})
	go r.run()
	return r
}

func (r *udpRelay) run() {
	buf := make([]byte, 65536)
	for {
		n, from, err := r.ln.ReadFromUDP(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		u := r.up[from.String()]
		if u == nil {
			u, err = net.DialUDP("udp", nil, r.target)
			if err != nil {
				r.mu.Unlock()
				continue
			}
			r.up[from.String()] = u
			r.ups = append(r.ups, u)
			go func() {
				b := make([]byte, 65536)
				for {
					n, err := u.Read(b)
					if err != nil {
						return
					}
					r.ln.WriteToUDP(b[:n], from)
				}
			}()
		}
		if len(r.seen) < 20000 {
			r.seen = append(r.seen, append([]byte(nil), buf[:n]...))
		}
		r.mu.Unlock()
		u.Write(buf[:n])
		r.n.Add(1)
	}
}

// attack sends the server, from the relay's upstream sockets (the
// streams' own peer address), every datagram seen so far again (replays),
// each of them with a byte changed (forgeries), and random bytes; and from
// a socket of its own, random bytes and the seen datagrams again. It
// returns how many it sent.
func (r *udpRelay) attack(t *testing.T) int {
	r.mu.Lock()
	seen := append([][]byte(nil), r.seen...)
	ups := append([]*net.UDPConn(nil), r.ups...)
	r.mu.Unlock()
	stranger, err := net.DialUDP("udp", nil, r.target)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	sent := 0
	for i, d := range seen {
		for _, u := range append(ups, stranger) {
			u.Write(d) // replayed
			f := append([]byte(nil), d...)
			f[(i*7)%len(f)] ^= 0x40
			u.Write(f) // forged: one bit changed
			g := make([]byte, 1+i%1500)
			rand.Read(g)
			u.Write(g) // garbage
			sent += 3
		}
		if i%64 == 0 {
			time.Sleep(time.Millisecond) // not all in one burst: they overlap the copy
		}
	}
	return sent
}

// TestCpUDPHostile: while a copy's UDP streams run through a relay,
// every datagram that passed is sent to the server's UDP port again,
// altered, and mixed with garbage, from the streams' peer address and from
// elsewhere: the copy completes, verified and identical, and the server
// goes on serving.
func TestCpUDPHostile(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root, local := mkdir(t, dir, "root"), mkdir(t, dir, "local")
	srv := startServer(t, root)
	// A TCP proxy for the control connections and a UDP relay on its
	// port number for the data.
	px := startProxy(t, srv.addr, false, nil)
	_, port, _ := net.SplitHostPort(px.Addr())
	pn, _ := strconv.Atoi(port)
	relay := startUDPRelay(t, pn, srv.addr)
	const size = 16 << 20
	src := filepath.Join(local, "data.bin")
	writeRandom(t, src, size, 23)
	p := startLP(t, runOpts{}, "cp", "--json", "--transport", "udp", "-P", "2", "--block-size", "256KiB", "--rate", "48M", src, px.URL("data.bin"))
	if !waitFor(10*time.Second, func() bool { return relay.n.Load() > 500 }) {
		t.Fatalf("no datagrams through the relay: %+v", p.Wait())
	}
	sent := 0
	for i := 0; i < 3 && !p.Exited(); i++ {
		sent += relay.attack(t)
		time.Sleep(200 * time.Millisecond)
	}
	r := p.Wait()
	mustSucceed(t, "cp under attack", r)
	if s := parseSummary(t, r.stdout); !s.Verified {
		t.Fatalf("not verified: %+v", s)
	}
	sameFile(t, src, filepath.Join(root, "data.bin"))
	t.Logf("%d hostile datagrams sent during the copy", sent)
	if sent == 0 {
		t.Error("the copy ended before any hostile datagram was sent")
	}
	// The server is alive and serves the next copy, over UDP directly.
	cpOK(t, "--transport", "udp", src, srv.URL("again.bin"))
	sameFile(t, src, filepath.Join(root, "again.bin"))
	if !srv.Running() {
		t.Fatal("the server died")
	}
}

// TestCpUDPTestbed copies trees over UDP between two hosts of a testbed,
// through two routers and a 20 ms (one way) wide-area link that loses 1%
// of the packets at random, then in bursts, then jitters them (reordering)
// and duplicates 2%: each copy arrives identical and verified, the loss
// repaired, under each rate control; where the path only reorders, nothing
// was repaired: a retransmission can only bring bytes that never arrived,
// and on a path that drops nothing the originals all arrive. (How much is
// sent again there, a NAK or a timer misjudging a late datagram, is a
// figure of the machine's load, not a fault; it is logged.)
func TestCpUDPTestbed(t *testing.T) {
	t.Parallel()
	skipUnlessNetRoot(t)
	b := upTestbed(t, "test/e2e/testdata/udp-wan.yaml")
	h2, _ := b.status().node("h2")
	srcDir, dstDir := scratchDir(t), scratchDir(t)
	for i, name := range []string{"a.bin", "sub/b.bin", "sub/c.bin"} {
		writeRandom(t, filepath.Join(srcDir, "tree", name), []int64{4<<20 + 17, 1 << 20, 777}[i], uint64(40+i))
	}
	b.serveIn("h2", h2+":7070", dstDir)
	before := map[string]udpDir{}
	for _, from := range []string{"r1", "r2"} {
		before[from] = b.udpDir(t, "wan", from)
	}
	for _, ph := range []struct {
		name    string
		link    []string
		cp      []string
		cc      string
		lossy   bool
		dupFrom bool
	}{
		{"random loss", []string{"--loss", "1%"}, nil, "fast", true, false},
		{"bursty loss", []string{"--loss", "1%", "--loss-burst", "4"}, []string{"--cc", "fixed", "--rate", "300M"}, "fixed", true, false},
		{"reordering and duplicates", []string{"--loss", "0", "--jitter", "3ms", "--duplicate", "2%"}, nil, "fast", false, true},
		{"reordering, fixed", []string{"--duplicate", "0"}, []string{"--cc", "fixed", "--rate", "300M"}, "fixed", false, false},
		{"reordering, aimd", []string{"--jitter", "3ms"}, []string{"--cc", "aimd"}, "aimd", false, false},
	} {
		t.Run(ph.name, func(t *testing.T) {
			b.linkSet(append([]string{"wan"}, ph.link...)...)
			dest := strings.ReplaceAll(ph.name, " ", "-")
			args := append([]string{lpBin, "cp", "--json", "-r", "--transport", "udp", "-P", "2"}, ph.cp...)
			// What the path dropped is read only where it is checked: each
			// read takes about a second.
			var drops0 drops
			if !ph.lossy {
				drops0 = b.pathDrops(t)
			}
			r := b.exec("h1", append(args, filepath.Join(srcDir, "tree"), "lp://"+h2+":7070/"+dest+"/")...)
			mustSucceed(t, "cp over the testbed, "+ph.name, r)
			s := parseSummary(t, r.stdout)
			if !s.Verified || s.FilesFailed != 0 {
				t.Fatalf("not verified: %+v", s)
			}
			u := parseUDPSummary(t, r.stdout)
			checkUDP(t, ph.name, u, ph.cc)
			// Reordering is not loss: a retransmission repairs only what
			// was dropped, by the emulator or by a kernel on the way (a
			// busy machine's full queue or receive buffer), each drop at
			// most one 64 KiB packet.
			if !ph.lossy {
				drops := b.pathDrops(t).minus(drops0)
				if *u.LossRepaired > drops.packets()*64<<10 {
					t.Errorf("%s: %d bytes repaired on a path that reorders, where %v dropped: the originals arrived, a retransmission cannot have brought them",
						ph.name, *u.LossRepaired, drops)
				}
				t.Logf("%s: dropped on the way: %v", ph.name, drops)
			}
			if ph.lossy && (u.LossRepaired == nil || *u.LossRepaired == 0 || *u.BytesResent == 0) {
				t.Errorf("%s: nothing repaired or sent again: %+v", ph.name, u)
			}
			compareTrees(t, filepath.Join(srcDir, "tree"), filepath.Join(dstDir, dest, "tree"))
			t.Logf("%s: goodput %.0f Mbit/s, sending %.0f Mbit/s, repaired %d B, sent again %d B, %.1f datagrams per batch",
				ph.name, u.GoodputBps/1e6, *u.SendingRateBps/1e6, *u.LossRepaired, *u.BytesResent, *u.DatagramsPerBatch)
		})
	}
	var lost, dups uint64
	for _, from := range []string{"r1", "r2"} {
		d := b.udpDir(t, "wan", from)
		lost += d.DropsLoss - before[from].DropsLoss
		dups += d.Duplicated - before[from].Duplicated
	}
	if lost == 0 || dups == 0 {
		t.Errorf("the link lost %d and duplicated %d packets during the copies; want some of each", lost, dups)
	}
}
