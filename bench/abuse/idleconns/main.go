// Command idleconns measures what idle connections cost other clients of
// the controller (issue 28, finding 9): it starts `lightpath controller`,
// holds -conns connections from -attacker (each asks GET /api/v1/health
// once and then sits idle; one the controller closes or refuses is opened
// again at once), and meanwhile a client at -client asks GET
// /api/v1/health on a fresh connection every 100 ms for -for. It prints
// the client's success rate and how many of the attacker's connections
// the controller held, one line of key=value.
//
//	go run ./bench/abuse/idleconns -lightpath ./lightpath -topology examples/two-site.yaml
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	bin := flag.String("lightpath", "lightpath", "the lightpath binary to run `controller` of")
	topo := flag.String("topology", "examples/two-site.yaml", "the controller's topology file")
	conns := flag.Int("conns", 1000, "idle connections the attacker holds")
	attacker := flag.String("attacker", "127.0.0.1", "the attacker's address")
	client := flag.String("client", "127.0.0.2", "the other client's address")
	dur := flag.Duration("for", 20*time.Second, "how long the client asks while the connections are held")
	flag.Parse()
	if err := run(*bin, *topo, *conns, *attacker, *client, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "idleconns:", err)
		os.Exit(1)
	}
}

func run(bin, topo string, conns int, attacker, client string, dur time.Duration) error {
	dir, err := os.MkdirTemp("", "idleconns")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctl := exec.Command(bin, "controller", "--listen", "127.0.0.1:0", "--db", "sqlite:"+filepath.Join(dir, "db"),
		"--topology", topo, "--admin-token-file", filepath.Join(dir, "admin.token"), "--metrics-db", "none")
	stderr, err := ctl.StderrPipe()
	if err != nil {
		return err
	}
	if err := ctl.Start(); err != nil {
		return err
	}
	defer func() { ctl.Process.Kill(); ctl.Wait() }()
	addr := ""
	sc := bufio.NewScanner(stderr)
	for addr == "" && sc.Scan() {
		if !strings.Contains(sc.Text(), "listening") {
			continue
		}
		for _, f := range strings.Fields(sc.Text()) {
			if a, ok := strings.CutPrefix(f, "addr="); ok {
				addr = strings.Trim(a, `"`)
			}
		}
	}
	if addr == "" {
		return fmt.Errorf("the controller logged no address")
	}
	go func() {
		for sc.Scan() {
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	var held, opened atomic.Int64
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() { hold(ctx, addr, attacker, &held, &opened) })
	}
	// Let the attacker's connections open before the client starts.
	for deadline := time.Now().Add(30 * time.Second); opened.Load() < int64(conns) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(client)}, Timeout: 5 * time.Second}
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}}
	ok, total := 0, 0
	var heldMin, heldMax int64 = 1 << 62, 0
	for end := time.Now().Add(dur); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		h := held.Load()
		heldMin, heldMax = min(heldMin, h), max(heldMax, h)
		total++
		resp, err := cl.Get("http://" + addr + "/api/v1/health")
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			ok++
		}
	}
	cancel()
	wg.Wait()
	fmt.Printf("attacker_conns=%d attacker_opens=%d attacker_held_min=%d attacker_held_max=%d client_requests=%d client_ok=%d client_success=%.3f\n",
		conns, opened.Load(), heldMin, heldMax, total, ok, float64(ok)/float64(max(total, 1)))
	return nil
}

// hold keeps one idle connection from the attacker's address open: it
// asks the health once, then waits for the controller to close it, and
// opens another, until ctx ends. held counts those answered 200 and still
// open.
func hold(ctx context.Context, addr, from string, held, opened *atomic.Int64) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		opened.Add(1)
		stop := context.AfterFunc(ctx, func() { c.Close() })
		io.WriteString(c, "GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && !resp.Close {
				held.Add(1)
				br.ReadByte() // idle until the controller closes it
				held.Add(-1)
			}
		}
		stop()
		c.Close()
		if err != nil || resp.StatusCode != 200 {
			time.Sleep(100 * time.Millisecond) // refused: try again shortly, as the probe did
		}
	}
}
