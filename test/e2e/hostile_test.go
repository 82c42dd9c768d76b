//go:build linux

package e2e

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/wire"
)

// rawPeer is one end of a hand-driven mover connection: the tests below
// speak the protocol frame by frame, as a hostile client or server would.
type rawPeer struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
	r  *wire.Reader
	w  *wire.Writer
	cn [wire.NonceSize]byte // the client's nonce
	sn [wire.NonceSize]byte // the server's nonce
}

func newRawPeer(t *testing.T, c net.Conn) *rawPeer {
	br := bufio.NewReader(c)
	return &rawPeer{t: t, c: c, br: br, r: wire.NewReader(br), w: wire.NewWriter(c)}
}

func (p *rawPeer) send(m wire.Msg) {
	p.t.Helper()
	p.c.SetWriteDeadline(time.Now().Add(time.Minute))
	if err := p.w.Send(m); err != nil {
		p.t.Fatalf("send %s: %v", m.Type(), err)
	}
}

// read returns the next frame that is not a ping or pong.
func (p *rawPeer) read() wire.Msg {
	p.t.Helper()
	for {
		p.c.SetReadDeadline(time.Now().Add(time.Minute))
		m, err := p.r.Read()
		if err != nil {
			p.t.Fatalf("read: %v", err)
		}
		switch m.(type) {
		case *wire.Ping, *wire.Pong:
			continue
		}
		return m
	}
}

// dialRaw opens a connection of kind to addr from local (nil: any) and runs
// the client's side of the handshake (no token), offering versions 1..maxV.
func dialRaw(t *testing.T, addr string, local net.Addr, kind wire.Kind, maxV uint16) *rawPeer {
	t.Helper()
	d := net.Dialer{Timeout: time.Minute, LocalAddr: local}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	p := newRawPeer(t, c)
	rand.Read(p.cn[:])
	if _, err := c.Write(wire.AppendHello(nil, wire.Hello{MinVersion: 1, MaxVersion: maxV, Kind: kind, Nonce: p.cn})); err != nil {
		t.Fatal(err)
	}
	ok, isOK := p.read().(*wire.HelloOK)
	if !isOK {
		t.Fatalf("no hello-ok")
	}
	p.sn = ok.Nonce
	return p
}

func joinMAC(key []byte, session [16]byte, stream uint16, cn, sn [wire.NonceSize]byte) []byte {
	h := hmac.New(sha256.New, key)
	for _, b := range [][]byte{[]byte("lightpath v1 join"), session[:], {byte(stream >> 8), byte(stream)}, cn[:], sn[:]} {
		h.Write(b)
	}
	return h.Sum(nil)
}

// openPush opens a push session with one data stream of 4 KiB blocks, as a
// client of protocol version maxV, and returns the control and data ends.
func openPush(t *testing.T, addr string, maxV uint16) (ctrl, data *rawPeer) {
	t.Helper()
	ctrl = dialRaw(t, addr, nil, wire.KindControl, maxV)
	ctrl.send(&wire.Put{Transfer: wire.Transfer{Tuning: wire.Tuning{DSCP: -1}, Streams: 1, BlockSize: 4096}, Dest: "in/", Sources: 1, DirSlash: true})
	acc, ok := ctrl.read().(*wire.Accept)
	if !ok {
		t.Fatalf("the push was not accepted")
	}
	data = dialRaw(t, addr, nil, wire.KindData, maxV)
	data.send(&wire.Join{Session: acc.Session, Stream: 0, MAC: joinMAC(acc.Secret, acc.Session, 0, data.cn, data.sn)})
	if _, ok := data.read().(*wire.Joined); !ok {
		t.Fatalf("the data connection was not joined")
	}
	return ctrl, data
}

// rssBytes is a process's resident memory.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// needs reads need frames until it has an answer for each of ids.
func needs(p *rawPeer, ids ...uint32) map[uint32]wire.NeedItem {
	p.t.Helper()
	got, _ := needsFaults(p, ids...)
	return got
}

// needsFaults is needs with the classes the receiver gave the files it
// failed (fault frames, protocol 10), by id.
func needsFaults(p *rawPeer, ids ...uint32) (map[uint32]wire.NeedItem, map[uint32]uint8) {
	p.t.Helper()
	got, faults := map[uint32]wire.NeedItem{}, map[uint32]uint8{}
	for len(got) < len(ids) {
		switch m := p.read().(type) {
		case *wire.Need:
			for _, it := range m.Items {
				got[it.ID] = it
			}
		case *wire.Fault:
			faults[m.ID] = m.Code
		case *wire.Result:
		default:
			p.t.Fatalf("unexpected %s while waiting for need", m.Type())
		}
	}
	return got, faults
}

// TestHostileManifest sends a real server, frame by frame, manifest entries
// whose announced sizes once crashed it (2^63-1: makeslice panic) or took
// it from 17 MB to 1 GB (four times 1 TiB): each is answered with a reason,
// the server's memory stays where it was, and other clients are served
// meanwhile.
func TestHostileManifest(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)
	small := filepath.Join(dir, "small.txt")
	writeFile(t, small, "served meanwhile\n", 0o644)
	pid := srv.cmd.Process.Pid
	before := rssBytes(t, pid)

	t.Run("size 2^63-1", func(t *testing.T) {
		ctrl, _ := openPush(t, srv.addr, wire.MaxVersion)
		ctrl.send(&wire.Files{Entries: []wire.Entry{{ID: 1, Kind: wire.EntryFile, Path: "huge", Size: math.MaxInt64, Mode: 0o644}}})
		got, faults := needsFaults(ctrl, 1)
		it := got[1]
		if it.Action != wire.NeedFail || !strings.Contains(it.Reason, "exceeds") || !strings.Contains(it.Reason, "--max-file-size") {
			t.Errorf("answer %+v, want a refusal naming the limit", it)
		}
		if faults[1] != wire.FaultNoSpace {
			t.Errorf("the refusal's class: %d, want no-space (%d)", faults[1], wire.FaultNoSpace)
		}
		t.Logf("answer: %s", it.Reason)
	})
	t.Run("4 x 1 TiB, no room", func(t *testing.T) {
		// A version 1 client announces no allocation: the size counts.
		ctrl, _ := openPush(t, srv.addr, 1)
		var es []wire.Entry
		for i := range 4 {
			es = append(es, wire.Entry{ID: uint32(i + 1), Kind: wire.EntryFile, Path: "tib" + strconv.Itoa(i), Size: 1 << 40, Mode: 0o644})
		}
		ctrl.send(&wire.Files{Entries: es})
		got, faults := needsFaults(ctrl, 1, 2, 3, 4)
		for id, it := range got {
			if it.Action != wire.NeedFail || !strings.Contains(it.Reason, "not enough space") || !strings.Contains(it.Reason, "needs 1.00 TiB") {
				t.Errorf("file %d: answer %+v, want a refusal for lack of space", id, it)
			}
		}
		if len(faults) != 0 {
			t.Errorf("a version 1 client was sent fault frames: %v", faults)
		}
	})
	t.Run("4 x 1 TiB, sparse", func(t *testing.T) {
		// Announced as holes only, they fit: accepted, and the server's
		// memory must not grow with the announced size.
		ctrl, _ := openPush(t, srv.addr, wire.MaxVersion)
		var es []wire.Entry
		for i := range 4 {
			es = append(es, wire.Entry{ID: uint32(i + 1), Kind: wire.EntryFile, Path: "sparse" + strconv.Itoa(i), Size: 1 << 40, Mode: 0o644})
		}
		ctrl.send(&wire.Files{Entries: es, HasAlloc: true})
		for id, it := range needs(ctrl, 1, 2, 3, 4) {
			if it.Action != wire.NeedAll {
				t.Errorf("file %d: answer %+v, want all blocks", id, it)
			}
		}
		// Another client is served while this session holds its files.
		cpOK(t, small, srv.URL("other/small.txt"))
		sameFile(t, small, filepath.Join(root, "other", "small.txt"))
		if after := rssBytes(t, pid); after > before+64<<20 {
			t.Errorf("server memory grew from %d to %d bytes for announced sizes", before, after)
		} else {
			t.Logf("server memory %d -> %d bytes", before, after)
		}
	})
	if !srv.Running() {
		t.Fatalf("the server exited")
	}
	cpOK(t, small, srv.URL("after.txt"))
}

// fakeServer accepts one pull session on a loopback port and, once the
// client has joined, hands both ends to serve.
func fakeServer(t *testing.T, serve func(ctrl *rawPeer, data []*rawPeer)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accept := func() *rawPeer {
		c, err := ln.Accept()
		if err != nil {
			return nil
		}
		t.Cleanup(func() { c.Close() })
		p := newRawPeer(t, c)
		var hb [wire.HelloSize]byte
		c.SetReadDeadline(time.Now().Add(time.Minute))
		if _, err := p.br.Read(hb[:1]); err != nil {
			return nil
		}
		if _, err := readFull(p.br, hb[1:]); err != nil {
			return nil
		}
		h, err := wire.ParseHello(hb[:])
		if err != nil {
			return nil
		}
		p.cn = h.Nonce
		rand.Read(p.sn[:])
		p.w.Send(&wire.HelloOK{Version: min(h.MaxVersion, wire.MaxVersion), Nonce: p.sn})
		return p
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		ctrl := accept()
		if ctrl == nil {
			return
		}
		m, err := ctrl.r.Read()
		if err != nil {
			return
		}
		g, ok := m.(*wire.Get)
		if !ok {
			return
		}
		var id [16]byte
		secret := make([]byte, 32)
		rand.Read(id[:])
		rand.Read(secret)
		ctrl.w.Send(&wire.Accept{Session: id, Secret: secret, Streams: g.Streams})
		var data []*rawPeer
		for range g.Streams {
			d := accept()
			if d == nil {
				return
			}
			if _, err := d.r.Read(); err != nil {
				return
			}
			d.w.Send(&wire.Joined{})
			data = append(data, d)
		}
		serve(ctrl, data)
	}()
	return ln.Addr().String()
}

func readFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestHostileServerPull pulls from a server that announces files of 2^63-1
// bytes and 1 TiB: cp refuses them with a reason and exits cleanly, without
// a panic.
func TestHostileServerPull(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	local := mkdir(t, dir, "local")
	answers := make(chan map[uint32]wire.NeedItem, 1)
	addr := fakeServer(t, func(ctrl *rawPeer, data []*rawPeer) {
		ctrl.w.Send(&wire.Files{Entries: []wire.Entry{
			{ID: 1, Kind: wire.EntryFile, Path: "huge", Size: math.MaxInt64, Mode: 0o644},
			{ID: 2, Kind: wire.EntryFile, Path: "tib", Size: 1 << 40, Mode: 0o644},
		}})
		ctrl.w.Send(&wire.ManifestEnd{Count: 2})
		got := map[uint32]wire.NeedItem{}
		for len(got) < 2 {
			ctrl.c.SetReadDeadline(time.Now().Add(time.Minute))
			m, err := ctrl.r.Read()
			if err != nil {
				break
			}
			if n, ok := m.(*wire.Need); ok {
				for _, it := range n.Items {
					got[it.ID] = it
				}
			}
		}
		answers <- got
		var end [wire.BlockHeaderSize]byte
		wire.BlockHeader{Kind: wire.DataEnd}.Put(end[:])
		for _, d := range data {
			d.c.Write(end[:])
		}
		ctrl.w.Send(&wire.Done{})
		ctrl.c.SetReadDeadline(time.Now().Add(time.Minute))
		ctrl.r.Read()
	})
	r := runLP(t, runOpts{}, "cp", "--json", "-r", "-P", "2", "lp://"+addr+"/tree", filepath.Join(local, "tree"))
	t.Logf("exit %d\nstderr: %s", r.code, r.stderr)
	if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("cp panicked:\n%s", r.stderr)
	}
	if r.code == 0 {
		t.Errorf("cp succeeded though every file was refused")
	}
	select {
	case got := <-answers:
		if it := got[1]; it.Action != wire.NeedFail || !strings.Contains(it.Reason, "exceeds") {
			t.Errorf("2^63-1 bytes: answer %+v, want a refusal", it)
		}
		if it := got[2]; it.Action != wire.NeedFail {
			t.Errorf("1 TiB: answer %+v, want a refusal (no room for it here)", it)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the fake server got no answers")
	}
	if !strings.Contains(r.stdout, "exceeds") {
		t.Errorf("cp's report does not say why the file was refused:\n%s", r.stdout)
	}
}

// TestSessionsPerClient fills a server with idle sessions from one client
// address: past --max-sessions-per-client (16 by default) it is refused with
// a reason, and another client is still served at once.
func TestSessionsPerClient(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root, "--max-sessions", "20", "--idle-timeout", "60s")
	small := filepath.Join(dir, "small.txt")
	writeFile(t, small, "served while another client idles\n", 0o644)

	greedy := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}
	var accepted, refused int
	for i := range 20 {
		c := dialRaw(t, srv.addr, greedy, wire.KindControl, wire.MaxVersion)
		c.send(&wire.Put{Transfer: wire.Transfer{Tuning: wire.Tuning{DSCP: -1}, Streams: 1, BlockSize: 4096}, Dest: "idle" + strconv.Itoa(i)})
		switch m := c.read().(type) {
		case *wire.Accept:
			accepted++ // and then idle: no data connection joins
		case *wire.Error:
			refused++
			if m.Code != wire.CodeBusy || !strings.Contains(m.Msg, "too many sessions from 127.0.0.3") {
				t.Errorf("session %d refused with %d %q, want busy naming the client", i, m.Code, m.Msg)
			}
			if refused == 1 {
				t.Logf("refusal: %s", m.Msg)
			}
		default:
			t.Fatalf("unexpected %s", m.Type())
		}
	}
	if accepted != 16 || refused != 4 {
		t.Errorf("one client got %d sessions and %d refusals, want 16 and 4", accepted, refused)
	}
	// Another client (127.0.0.1) is served while those sessions idle.
	cpOK(t, small, srv.URL("other.txt"))
	sameFile(t, small, filepath.Join(root, "other.txt"))
}

// TestLinksLeadingOut copies a tree whose links lead out: L -> .. and
// x -> L/../../outside/secret.txt (and the same pair in the other order,
// a -> z/../../outside/secret.txt before z -> ..), which the sender's check
// of targets as text already skips with a warning, and d/e/up -> ../..
// with m -> d/e/up/../../outside/secret.txt, which stay inside the tree as
// text and lead out only when resolved: the receiver refuses m. Neither a
// pull nor a push may leave a link that resolves outside the destination.
func TestLinksLeadingOut(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	mkTree := func(top string) string {
		tree := mkdir(t, top, "tree")
		writeFile(t, filepath.Join(tree, "f.txt"), "inside\n", 0o644)
		for _, l := range [][2]string{
			{"L", ".."}, {"x", "L/../../outside/secret.txt"},
			{"a", "z/../../outside/secret.txt"}, {"z", ".."},
			{"ok", "f.txt"},
			{"d/e/up", "../.."}, {"m", "d/e/up/../../outside/secret.txt"},
		} {
			if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(l[0])), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(l[1], filepath.Join(tree, l[0])); err != nil {
				t.Fatal(err)
			}
		}
		return tree
	}
	// Every link under dst must resolve inside dst.
	checkInside := func(t *testing.T, dst string) {
		t.Helper()
		real, err := filepath.EvalSymlinks(dst)
		if err != nil {
			t.Fatal(err)
		}
		filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.Mode()&os.ModeSymlink == 0 {
				return nil
			}
			target, _ := os.Readlink(p)
			got, err := filepath.EvalSymlinks(p)
			if err != nil {
				// Dangling: resolve what it would be by text of its parent.
				got = filepath.Join(filepath.Dir(p), target)
			}
			if rel, err := filepath.Rel(real, got); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Errorf("%s -> %s resolves to %s, outside %s", p, target, got, real)
			}
			return nil
		})
	}
	// dst is where the tree landed, bound the directory its links must
	// stay in.
	check := func(t *testing.T, r result, dst, bound string) {
		t.Helper()
		t.Logf("exit %d: %s\n%s", r.code, strings.TrimSpace(r.stderr), r.stdout)
		checkInside(t, bound)
		sameFile(t, filepath.Join(dir, "src", "tree", "f.txt"), filepath.Join(dst, "f.txt"))
		if got, err := os.Readlink(filepath.Join(dst, "ok")); err != nil || got != "f.txt" {
			t.Errorf("the link inside the tree was not recreated: %q, %v", got, err)
		}
		for _, name := range []string{"x", "a", "m"} {
			if _, err := os.Lstat(filepath.Join(dst, name)); err == nil {
				t.Errorf("%s was recreated", name)
			}
		}
		for _, name := range []string{"tree/x", "tree/a"} {
			if !strings.Contains(r.stdout+r.stderr, "symlink leads outside the tree, skipped: "+name+" -") {
				t.Errorf("the sender did not skip %s with a warning", name)
			}
		}
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "leads outside the destination: not recreated") || !strings.Contains(r.stdout, `"path":"tree/m","size":0,"status":"failed"`) {
			t.Errorf("cp did not report the link the receiver refused")
		}
	}
	mkTree(mkdir(t, dir, "src"))
	root := mkdir(t, dir, "root")
	writeFile(t, filepath.Join(dir, "outside", "secret.txt"), "secret\n", 0o644)
	srv := startServer(t, root)

	t.Run("push", func(t *testing.T) {
		into := mkdir(t, root, "in")
		r := runLP(t, runOpts{}, "cp", "--json", "-r", filepath.Join(dir, "src", "tree"), srv.URL("in/"))
		check(t, r, filepath.Join(into, "tree"), into)
	})
	t.Run("pull", func(t *testing.T) {
		mkTree(mkdir(t, root, "served"))
		writeFile(t, filepath.Join(root, "served", "tree", "f.txt"), "inside\n", 0o644)
		local := mkdir(t, dir, "local", "dl")
		r := runLP(t, runOpts{}, "cp", "--json", "-r", srv.URL("served/tree"), local+"/")
		check(t, r, filepath.Join(local, "tree"), local)
	})
	t.Run("pull under a new name", func(t *testing.T) {
		// The tree becomes dl2/renamed: its links must stay in renamed,
		// so L -> .. (dl2) is refused as well.
		local := mkdir(t, dir, "local", "dl2")
		dst := filepath.Join(local, "renamed")
		r := runLP(t, runOpts{}, "cp", "--json", "-r", srv.URL("served/tree"), dst)
		check(t, r, dst, dst)
		if _, err := os.Lstat(filepath.Join(dst, "L")); err == nil {
			t.Errorf("L -> .. was recreated though it leads out of renamed")
		}
	})
}
