//go:build linux

package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lightpath/lightpath/bench/abuse/forge"
)

// TestServeUDPSynFlood: a client of a `serve` without a token opens one UDP
// session asking for one stream (and so learns its secret), then sends
// 2,000 authenticated SYNs with distinct stream ids, each from a port of
// its own, kept open. When the server ends the session (its streams never
// joined), it holds at most the one stream the session agreed on: its
// descriptors are as before but for that stream's socket (each SYN held
// one before). A copy over UDP still succeeds.
func TestServeUDPSynFlood(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root)
	srv.mu.Lock()
	pid := srv.cmd.Process.Pid
	srv.mu.Unlock()
	fds := func() int {
		es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	before := fds()

	ctrl, session, key, err := forge.OpenUDPSession(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	uaddr, err := net.ResolveUDPAddr("udp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	const syns = 2000
	for i := range syns {
		s, err := net.DialUDP("udp", nil, uaddr)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Write(forge.UDPSyn(key, session, uint32(1000+i))); err != nil {
			t.Fatal(err)
		}
	}
	// The server ends the session when its streams have not joined within
	// its idle timeout: by then it has judged every SYN.
	ctrl.SetReadDeadline(time.Now().Add(2 * time.Minute)) // bounds a hang only
	if _, err := bufio.NewReader(ctrl).ReadByte(); err == nil {
		for {
			if _, err := ctrl.Read(make([]byte, 4096)); err != nil {
				break
			}
		}
	}
	// The control connection is gone; the session's one stream may still
	// hold its socket (half-open, for the handshake's 15 s).
	if n := fds(); n > before+1 {
		t.Errorf("the server holds %d descriptors after %d SYNs of a one-stream session, %d before: want at most %d", n, syns, before, before+1)
	}

	src := filepath.Join(dir, "f.bin")
	writeRandom(t, src, 1<<20, 1)
	r := runLP(t, runOpts{}, "cp", "--transport", "udp", src, srv.URL("f.bin"))
	mustSucceed(t, "cp --transport udp after the flood", r)
}
