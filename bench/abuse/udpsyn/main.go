// Command udpsyn measures what a UDP SYN flood costs a mover server
// (issue 28, finding 8): it starts `lightpath serve` without a token,
// opens one UDP session asking for one stream (as any client may, and
// so learns the session's secret), then sends authenticated SYNs with
// distinct stream ids, each from a UDP port of its own kept open, within
// the session's wait for its streams. It prints the server's descriptors
// and memory before and at their peak after, one line of key=value.
//
//	go run ./bench/abuse/udpsyn -lightpath ./lightpath -syns 20000
package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lightpath/lightpath/bench/abuse/forge"
)

func main() {
	bin := flag.String("lightpath", "lightpath", "the lightpath binary to run `serve` of")
	syns := flag.Int("syns", 20000, "SYNs to send, each with a stream id and a port of its own")
	child := flag.String("child", "", "(internal) send SYNs for SESSION:KEY:ADDR:FIRST:COUNT, holding the ports until stdin closes")
	flag.Parse()
	var err error
	if *child != "" {
		err = sendChild(*child)
	} else {
		err = run(*bin, *syns)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "udpsyn:", err)
		os.Exit(1)
	}
}

// perChild is how many ports one sender process holds: under the usual
// descriptor limits.
const perChild = 8000

func run(bin string, syns int) error {
	// The server inherits the limit: as high as it goes.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	root, err := os.MkdirTemp("", "udpsyn")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	srv := exec.Command(bin, "serve", "--listen", addr, "--root", root)
	stderr, err := srv.StderrPipe()
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "serving") {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	pid := srv.Process.Pid
	before := sample(pid)

	ctrl, session, key, err := forge.OpenUDPSession(addr)
	if err != nil {
		return err
	}
	defer ctrl.Close()
	// Senders in processes of their own, each holding its ports (a
	// process's descriptors are limited).
	self, err := os.Executable()
	if err != nil {
		return err
	}
	start := time.Now()
	for first := 0; first < syns; first += perChild {
		n := min(perChild, syns-first)
		arg := fmt.Sprintf("%x:%x:%s:%d:%d", session, key, addr, first, n)
		cmd := exec.Command(self, "-child", arg)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		defer func() { in.Close(); cmd.Wait() }()
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "sent" {
			return fmt.Errorf("sender of SYNs %d..%d: %q %v", first, first+n, line, err)
		}
	}
	sent := time.Since(start)
	// The peak within the next 3 s (the server's wait for the session's
	// streams is 10 s; half-open streams live 15 s).
	peak := before
	for range 30 {
		time.Sleep(100 * time.Millisecond)
		peak = peak.max(sample(pid))
	}
	fmt.Printf("fd_limit=%d syns=%d send_seconds=%.2f fds_before=%d fds_peak=%d vmsize_mb_before=%d vmsize_mb_peak=%d rss_mb_before=%d rss_mb_peak=%d\n",
		lim.Cur, syns, sent.Seconds(), before.fds, peak.fds, before.vmSize>>10, peak.vmSize>>10, before.rss>>10, peak.rss>>10)
	return nil
}

// sendChild sends the SYNs arg names, each from a port of its own, says
// "sent", and holds the ports until stdin closes.
func sendChild(arg string) error {
	f := strings.Split(arg, ":")
	if len(f) != 6 {
		return fmt.Errorf("-child %q: want SESSION:KEY:HOST:PORT:FIRST:COUNT", arg)
	}
	var session [16]byte
	sb, err1 := hex.DecodeString(f[0])
	key, err2 := hex.DecodeString(f[1])
	port, err3 := strconv.Atoi(f[3])
	first, err4 := strconv.Atoi(f[4])
	n, err5 := strconv.Atoi(f[5])
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil || len(sb) != 16 {
		return fmt.Errorf("-child %q: %v", arg, err)
	}
	copy(session[:], sb)
	uaddr := &net.UDPAddr{IP: net.ParseIP(f[2]), Port: port}
	socks := make([]*net.UDPConn, 0, n)
	for i := range n {
		s, err := net.DialUDP("udp", nil, uaddr)
		if err != nil {
			return fmt.Errorf("socket %d: %w", first+i, err)
		}
		socks = append(socks, s)
		if _, err := s.Write(forge.UDPSyn(key, session, uint32(1000+first+i))); err != nil {
			return fmt.Errorf("SYN %d: %w", first+i, err)
		}
	}
	fmt.Println("sent")
	io.Copy(io.Discard, os.Stdin)
	for _, s := range socks {
		s.Close()
	}
	return nil
}

type usage struct{ fds, vmSize, rss int64 } // kB for the sizes

func (u usage) max(v usage) usage {
	return usage{max(u.fds, v.fds), max(u.vmSize, v.vmSize), max(u.rss, v.rss)}
}

func sample(pid int) usage {
	var u usage
	if es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		u.fds = int64(len(es))
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmSize:":
			u.vmSize = v
		case "VmRSS:":
			u.rss = v
		}
	}
	return u
}

func freePort() (int, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			pc.Close()
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port")
}
