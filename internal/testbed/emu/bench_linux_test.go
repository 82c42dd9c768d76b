//go:build linux

package emu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/roottest"
	"github.com/lightpath/lightpath/internal/topology"
)

// Measurements run by hand, not in CI: timed figures do not belong in
// assertions.
//
//	LIGHTPATH_EMU_BENCH=1 go test -run 'TestThroughput|TestDelayPrecision' -v ./internal/testbed/emu/
//
// LIGHTPATH_EMU_BENCH_SECONDS sets the length of each iperf3 run (5).

func skipUnlessBench(t *testing.T) {
	t.Helper()
	if os.Getenv("LIGHTPATH_EMU_BENCH") == "" {
		t.Skip("a measurement: set LIGHTPATH_EMU_BENCH=1 to run it")
	}
	roottest.Require(t, "creates network namespaces and TUN devices")
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("needs iperf3")
	}
}

// bigTCPBuffers lets TCP autotuning grow windows past a long path's
// bandwidth-delay product (tcp_rmem and tcp_wmem are per namespace).
func bigTCPBuffers(t *testing.T, ns string) {
	t.Helper()
	err := netns.Do(ns, func() error {
		for f, v := range map[string]string{"tcp_rmem": "4096 131072 134217728", "tcp_wmem": "4096 16384 134217728"} {
			if err := os.WriteFile("/proc/sys/net/ipv4/"+f, []byte(v), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// iperf3 runs one iperf3 test from namespace a to the server address in
// namespace b and returns the received rate in Gbit/s, with the CPU time
// this process (the emulator) spent meanwhile, as a fraction of a core.
func iperf3(t *testing.T, nameA, nameB, server string, secs int) (gbps, cpu float64) {
	t.Helper()
	gbps, cpu, err := runIperf3(nameA, nameB, server, secs)
	if err != nil {
		t.Fatal(err)
	}
	return gbps, cpu
}

func runIperf3(nameA, nameB, server string, secs int) (gbps, cpu float64, err error) {
	srv := exec.Command("ip", "netns", "exec", nameB, "iperf3", "-s", "-1", "-B", server, "-p", "5201")
	if err := srv.Start(); err != nil {
		return 0, 0, err
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	var out []byte
	var ru0, ru1 syscall.Rusage
	var wall time.Duration
	for range 50 { // until the server listens
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		start := time.Now()
		out, err = exec.Command("ip", "netns", "exec", nameA, "iperf3", "-c", server, "-p", "5201",
			"-t", strconv.Itoa(secs), "-J").Output()
		wall = time.Since(start)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		// iperf3 -J may exit 0 even when it could not connect.
		if !bytes.Contains(out, []byte("unable to connect")) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("iperf3: %w\n%s", err, out)
	}
	var res struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, 0, fmt.Errorf("iperf3 output: %w\n%s", err, out)
	}
	if res.Error != "" {
		return 0, 0, fmt.Errorf("iperf3: %s", res.Error)
	}
	used := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	return res.End.SumReceived.BitsPerSecond / 1e9, used.Seconds() / wall.Seconds(), nil
}

func vethPair(t *testing.T, mtu int) (nameA, nameB string) {
	t.Helper()
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	nameA, nameB = "lp-emutest-v"+suffix+"-a", "lp-emutest-v"+suffix+"-b"
	nsA, nsB := newTestNetns(t, nameA), newTestNetns(t, nameB)
	bigTCPBuffers(t, nsA)
	bigTCPBuffers(t, nsB)
	run(t, "ip", "link", "add", "veth-a", "netns", nameA, "mtu", strconv.Itoa(mtu), "type", "veth", "peer", "name", "veth-b", "netns", nameB, "mtu", strconv.Itoa(mtu))
	run(t, "ip", "-n", nameA, "addr", "add", "198.18.253.1/30", "dev", "veth-a")
	run(t, "ip", "-n", nameB, "addr", "add", "198.18.253.2/30", "dev", "veth-b")
	run(t, "ip", "-n", nameA, "link", "set", "veth-a", "up")
	run(t, "ip", "-n", nameB, "link", "set", "veth-b", "up")
	return nameA, nameB
}

func TestThroughput(t *testing.T) {
	skipUnlessBench(t)
	secs := 5
	if s, err := strconv.Atoi(os.Getenv("LIGHTPATH_EMU_BENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	var report bytes.Buffer
	fmt.Fprintf(&report, "%-34s %8s %8s %10s\n", "path", "Gbit/s", "vs veth", "emu CPU")
	for _, mtu := range []int{1500, 9000} {
		var veth float64
		t.Run(fmt.Sprintf("veth-%d", mtu), func(t *testing.T) {
			a, b := vethPair(t, mtu)
			veth, _ = iperf3(t, a, b, "198.18.253.2", secs)
			fmt.Fprintf(&report, "%-34s %8.2f %8s %10s\n", fmt.Sprintf("veth pair, MTU %d", mtu), veth, "1.00", "-")
		})
		for _, delay := range []time.Duration{0, 25 * time.Millisecond} {
			t.Run(fmt.Sprintf("emu-%d-%v", mtu, delay), func(t *testing.T) {
				l := newTestLink(t, mtu, Params{Delay: delay})
				bigTCPBuffers(t, l.nsA)
				bigTCPBuffers(t, l.nsB)
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				g, cpu := iperf3(t, l.nameA, l.nameB, l.addrB.String(), secs)
				runtime.ReadMemStats(&m1)
				st, back := l.stats(t, "a"), l.stats(t, "b")
				reads := st.SuperPacketsIn + back.PacketsIn // ACKs come one per read
				fmt.Fprintf(&report, "%-34s %8.2f %8.2f %9.0f%%   (%.1f segments per read, %.3f allocations per read)\n",
					fmt.Sprintf("TUN+emulator, MTU %d, delay %v", mtu, delay), g, g/veth, cpu*100,
					float64(st.PacketsIn)/float64(max(1, st.SuperPacketsIn)), float64(m1.Mallocs-m0.Mallocs)/float64(max(1, reads)))
				if st.DropsError+st.DropsQueue != 0 {
					t.Errorf("drops: %+v", st)
				}
			})
		}
	}
	t.Logf("iperf3, one TCP stream, %d s each:\n%s", secs, report.String())
}

// TestDelayPrecision reports how far round-trip times through the
// emulator stray from the configured delay: idle, beside a bulk TCP
// transfer (the emulator is then the bottleneck and packets queue in the
// TUN ring), and beside one shaped to 4 Gbit/s by tbf, as htb does in a
// testbed.
func TestDelayPrecision(t *testing.T) {
	skipUnlessBench(t)
	l := newTestLink(t, 1500, Params{})
	bigTCPBuffers(t, l.nsA)
	bigTCPBuffers(t, l.nsB)
	l.udpEcho(t, 7)
	c := l.dialUDP(t, 7)
	base := rtts(l.probeRTT(t, c, 200, 64, 2*time.Millisecond, 300*time.Millisecond))
	var report bytes.Buffer
	fmt.Fprintf(&report, "no delay: RTT median %v p99 %v\n", quantile(base, .5), quantile(base, .99))
	fmt.Fprintf(&report, "%-10s %-6s %10s %10s %10s %10s %10s   (RTT minus 2×delay)\n", "one-way", "load", "min", "median", "p90", "p99", "max")
	for _, load := range []string{"idle", "iperf3", "shaped"} {
		if load == "shaped" {
			// As in a testbed: a shaper slower than the emulator keeps the
			// queue (and its limit) in the qdisc, not in the TUN ring.
			run(t, "tc", "-n", l.nameA, "qdisc", "replace", "dev", testDev, "root", "tbf", "rate", "4gbit", "burst", "256kb", "limit", "1mb")
		}
		for _, d := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 25 * time.Millisecond, 100 * time.Millisecond} {
			if err := l.e.Set("l", "", Params{Delay: d}); err != nil {
				t.Fatal(err)
			}
			var bulk chan struct{}
			if load != "idle" {
				bulk = make(chan struct{})
				go func() {
					defer close(bulk)
					if _, _, err := runIperf3(l.nameA, l.nameB, l.addrB.String(), 3); err != nil {
						t.Error(err)
					}
				}()
				time.Sleep(time.Second)
			}
			r := rtts(l.probeRTT(t, c, 400, 64, 2*time.Millisecond, time.Second))
			if bulk != nil {
				<-bulk
			}
			off := func(q float64) time.Duration { return quantile(r, q) - 2*d }
			fmt.Fprintf(&report, "%-10v %-6s %10v %10v %10v %10v %10v   (%d of 400 back)\n", d, load, off(0), off(.5), off(.9), off(.99), off(1), len(r))
		}
	}
	t.Logf("UDP probes every 2 ms:\n%s", report.String())
}

// TestUDPThroughput measures how fast UDP crosses the emulator, one
// datagram per write and in GSO batches (UDP_SEGMENT, 64 KiB per write),
// beside a bare veth pair: a Go sender at increasing rates (paced per
// 200 µs), then as fast as it can, for a few seconds each; a receiver
// with UDP_GRO (so batches that cross whole are read whole). It reports
// what arrived; the rate where loss starts is what the emulator carries.
// The sender, the receiver and the emulator share this process (CPU).
//
//	LIGHTPATH_EMU_BENCH=1 go test -run TestUDPThroughput -v ./internal/testbed/emu/
func TestUDPThroughput(t *testing.T) {
	skipUnlessBench(t)
	secs := 3
	if s, err := strconv.Atoi(os.Getenv("LIGHTPATH_EMU_BENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	type run struct {
		path string // veth, emulator, lossy (emulator with 1% loss)
		mtu  int
		gso  bool
		rate float64 // offered, Gbit/s; 0: as fast as the sender goes
	}
	var runs []run
	for _, mtu := range []int{1500, 9000} {
		for _, gso := range []bool{false, true} {
			runs = append(runs, run{"veth", mtu, gso, 0})
			rates := []float64{1, 2, 4, 8, 0}
			if mtu == 9000 {
				rates = []float64{0}
			}
			for _, r := range rates {
				runs = append(runs, run{"emulator", mtu, gso, r})
			}
			runs = append(runs, run{"lossy", mtu, gso, 0})
		}
	}
	var report bytes.Buffer
	fmt.Fprintf(&report, "%-26s %-22s %8s %8s %9s %7s %6s  %s\n", "path", "sender", "offered", "sent", "received", "lost", "CPU", "emulator reads")
	for _, r := range runs {
		t.Run(fmt.Sprintf("%s-%d-gso-%v-%g", r.path, r.mtu, r.gso, r.rate), func(t *testing.T) {
			var nsA, nsB, dst string
			var l *testLink
			switch r.path {
			case "veth":
				a, b := vethPair(t, r.mtu)
				nsA, nsB, dst = "/run/netns/"+a, "/run/netns/"+b, "198.18.253.2"
			default:
				var params Params
				if r.path == "lossy" {
					params.Loss = topology.Loss{Model: topology.LossRandom, Rate: 0.01}
				}
				l = newTestLink(t, r.mtu, params)
				nsA, nsB, dst = l.nsA, l.nsB, l.addrB.String()
			}
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			sent, got, wall := udpBlast(t, nsA, nsB, dst, r.mtu-28, r.gso, r.rate*1e9, time.Duration(secs)*time.Second)
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			used := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
			reads := "-"
			if l != nil {
				st := l.stats(t, "a")
				reads = fmt.Sprintf("%d datagrams, %d reads of more than one", st.PacketsIn, st.SuperPacketsIn)
			}
			path := fmt.Sprintf("%s, MTU %d", r.path, r.mtu)
			if r.path == "lossy" {
				path = fmt.Sprintf("emulator 1%% loss, MTU %d", r.mtu)
			}
			sender := "1 datagram per write"
			if r.gso {
				sender = "UDP_SEGMENT, 64 KiB"
			}
			offered := "max"
			if r.rate > 0 {
				offered = fmt.Sprintf("%g", r.rate)
			}
			gbps := func(b uint64) float64 { return float64(b) * 8 / wall.Seconds() / 1e9 }
			fmt.Fprintf(&report, "%-26s %-22s %8s %8.2f %9.2f %6.1f%% %5.0f%%  %s\n", path, sender, offered,
				gbps(sent), gbps(got), 100*float64(sent-min(sent, got))/float64(max(1, sent)), used.Seconds()/wall.Seconds()*100, reads)
		})
	}
	t.Logf("UDP payload, Gbit/s, %d s each:\n%s", secs, report.String())
}

// udpBlast sends datagrams of payload bytes from nsA to dst:9100 in nsB
// for d, at rate bits per second of payload (0: as fast as it can), and
// returns the payload bytes sent and received and the time it sent for.
func udpBlast(t *testing.T, nsA, nsB, dst string, payload int, gso bool, rate float64, d time.Duration) (sent, got uint64, wall time.Duration) {
	t.Helper()
	var rx, tx *net.UDPConn
	if err := netns.Do(nsB, func() (err error) {
		rx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(dst), Port: 9100})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	rx.SetReadBuffer(32 << 20)
	if rc, err := rx.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1) })
	}
	if err := netns.Do(nsA, func() (err error) {
		tx, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(dst), Port: 9100})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	tx.SetWriteBuffer(32 << 20)
	n := payload
	if gso {
		if err := setUDPSegment(tx, payload); err != nil {
			t.Fatal(err)
		}
		n = (65535 - 8 - 20) / payload * payload
	}
	var recvd atomic.Uint64
	var sending atomic.Bool
	sending.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1<<16)
		for {
			// Quiet for 300 ms once the sender is done: all is in.
			rx.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			m, err := rx.Read(buf)
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) && sending.Load() {
					continue
				}
				return
			}
			recvd.Add(uint64(m))
		}
	}()
	buf := make([]byte, n)
	start := time.Now()
	for written := uint64(0); ; {
		el := time.Since(start)
		if el >= d {
			break
		}
		if rate > 0 && float64(written+uint64(n))*8 > rate*el.Seconds() {
			time.Sleep(200 * time.Microsecond)
			continue
		}
		for range 8 {
			written += uint64(n)
			if _, err := tx.Write(buf); err == nil {
				sent += uint64(n)
			}
		}
	}
	sendTime := time.Since(start)
	sending.Store(false)
	<-done
	return sent, recvd.Load(), sendTime
}
