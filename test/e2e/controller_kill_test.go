//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/store/pgtest"
)

// killCtl is a controller process started from the real binary.
type killCtl struct {
	t     *testing.T
	cmd   *exec.Cmd
	url   string
	token string
	log   *lockedBuffer
}

const killTopology = `
sites: [{name: s1}, {name: s2}]
nodes:
  - {name: h1, site: s1}
  - {name: h2, site: s2}
links:
  - {name: l, ends: [h1, h2], rate: 1G, delay: 5ms}
`

// startKillCtl starts a controller on killTopology listening on port (and
// extra's further flags) and waits for its health to answer 200, as a
// leader or a standby.
func startKillCtl(t *testing.T, dir, db string, port int, extra ...string) *killCtl {
	t.Helper()
	topo := filepath.Join(dir, "topo.yaml")
	if err := os.WriteFile(topo, []byte(killTopology), 0o644); err != nil {
		t.Fatal(err)
	}
	return startCtlProc(t, dir, db, topo, port, extra...)
}

// startCtlProc starts a controller on database db and topology file topo,
// in directory dir (where its admin token goes, admin.token), listening
// on 127.0.0.1:port (and extra's further flags), and waits for its health
// to answer 200, as a leader or a standby.
func startCtlProc(t *testing.T, dir, db, topo string, port int, extra ...string) *killCtl {
	t.Helper()
	c := &killCtl{t: t, url: fmt.Sprintf("http://127.0.0.1:%d", port), log: &lockedBuffer{}}
	args := []string{"controller", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--db", db, "--topology", topo, "--admin-token-file", filepath.Join(dir, "admin.token")}
	c.cmd = exec.Command(lpBin, append(args, extra...)...)
	c.cmd.Env = cleanEnv()
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd.Stderr = c.log
	c.cmd.Dir = dir // with PostgreSQL, the metrics repository defaults to the working directory
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	deadline := time.Now().Add(2 * time.Minute) // bounds a hang only
	for {
		resp, err := http.Get(c.url + "/api/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("controller did not come up: %v\n%s", err, c.log)
		}
		time.Sleep(50 * time.Millisecond) // polling the health: no event to wait on
	}
	b, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	c.token = strings.TrimSpace(string(b))
	return c
}

func (c *killCtl) call(method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}

type killResv struct {
	ID             string    `json:"id"`
	Bandwidth      uint64    `json:"bandwidth_bps"`
	Start          time.Time `json:"start"`
	End            time.Time `json:"end"`
	State          string    `json:"state"`
	IdempotencyKey string    `json:"idempotency_key"`
}

// TestControllerSIGKILLMidLoad kills the controller with SIGKILL while
// clients are creating reservations, restarts it on the same database, and
// checks that the database is consistent: every create that was answered
// is there, none overbooks, and a client's retry of a request the kill cut
// off (same idempotency key) books at most once.
func TestControllerSIGKILLMidLoad(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]func(t *testing.T, dir string) string{
		"sqlite":   func(_ *testing.T, dir string) string { return "sqlite:" + filepath.Join(dir, "db") },
		"postgres": func(t *testing.T, _ string) string { return pgtest.URL(t) },
	} {
		t.Run(name, func(t *testing.T) { killMidLoad(t, db) })
	}
}

func killMidLoad(t *testing.T, dbOf func(t *testing.T, dir string) string) {
	dir := t.TempDir()
	db := dbOf(t, dir)
	port := freePort(t, "127.0.0.1")
	c := startKillCtl(t, dir, db, port)
	base := time.Now().UTC().Add(time.Hour).Truncate(time.Minute)
	type req struct {
		From      string    `json:"from"`
		To        string    `json:"to"`
		Bandwidth uint64    `json:"bandwidth_bps"`
		Start     time.Time `json:"start"`
		Duration  string    `json:"duration"`
		Key       string    `json:"idempotency_key"`
	}
	mk := func(i int) req {
		return req{From: "h1", To: "h2", Bandwidth: uint64(1+i%7) * 10_000_000, Start: base.Add(time.Duration(i%500) * time.Minute),
			Duration: fmt.Sprintf("%dm", 5+i%40), Key: fmt.Sprintf("k%d", i)}
	}
	var (
		mu       sync.Mutex
		answered = map[int]string{} // request → reservation ID, for 201s
		cutOff   []int              // requests sent that got no answer
		next     atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	const limit = 5000 // a bound on the load, whatever happens
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				i := int(next.Add(1))
				if i > limit {
					return
				}
				var out struct {
					Reservation killResv `json:"reservation"`
				}
				st, err := c.call("POST", "/api/v1/reservations", mk(i), &out)
				mu.Lock()
				switch {
				case err != nil:
					cutOff = append(cutOff, i)
				case st == 201:
					answered[i] = out.Reservation.ID
				case st != 409:
					t.Errorf("request %d: status %d", i, st)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	// Let the load run, then kill the controller in the middle of it.
	c.killWhenAnswered(t, &mu, answered, 150, 2*time.Minute)
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(answered) == 0 {
		t.Fatalf("no create was answered before the kill:\n%s", c.log)
	}

	c2 := startKillCtl(t, dir, db, port)
	for i, id := range answered {
		var got struct {
			Reservation killResv `json:"reservation"`
		}
		if st, err := c2.call("GET", "/api/v1/reservations/"+id, nil, &got); err != nil || st != 200 {
			t.Fatalf("request %d's reservation %s after the restart: %d %v", i, id, st, err)
		}
	}
	// Retry what the kill cut off, with the same keys.
	for _, i := range cutOff {
		if st, err := c2.call("POST", "/api/v1/reservations", mk(i), nil); err != nil || (st != 200 && st != 201 && st != 409) {
			t.Errorf("retry of request %d: %d %v", i, st, err)
		}
	}
	var list struct {
		Reservations []killResv `json:"reservations"`
	}
	if st, err := c2.call("GET", "/api/v1/reservations", nil, &list); err != nil || st != 200 {
		t.Fatalf("list: %d %v", st, err)
	}
	checkStoredCreates(t, list.Reservations, len(answered), 900_000_000)
	// And it still books.
	if st, err := c2.call("POST", "/api/v1/reservations", req{From: "h1", To: "h2", Bandwidth: 1000, Start: base.Add(-30 * time.Minute), Duration: "10m"}, nil); err != nil || st != 201 {
		t.Errorf("create after the restart: %d %v\n%s", st, err, c2.log)
	}
	t.Logf("%d answered before the kill, %d cut off, %d stored", len(answered), len(cutOff), len(list.Reservations))
}

// lockedBuffer is a bytes.Buffer a child process writes while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// killWhenAnswered SIGKILLs the controller once n of a load's creates were
// answered (or within, a bound on a hang, has passed), and reaps it. The
// 20 ms between looks paces a poll of a count the load goroutines keep.
func (c *killCtl) killWhenAnswered(t *testing.T, mu *sync.Mutex, answered map[int]string, n int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		got := len(answered)
		mu.Unlock()
		if got >= n {
			break
		}
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()
}

// checkStoredCreates checks what a controller holds after a crash or a
// takeover under concurrent creates: no idempotency key booked twice, at
// least every acknowledged create stored, and no instant of the one link
// booked beyond its capacity (by brute force over the stored windows).
func checkStoredCreates(t *testing.T, stored []killResv, acknowledged int, capacity uint64) {
	t.Helper()
	keys := map[string]int{}
	for _, r := range stored {
		if keys[r.IdempotencyKey]++; keys[r.IdempotencyKey] > 1 {
			t.Errorf("key %s booked twice", r.IdempotencyKey)
		}
	}
	if len(stored) < acknowledged {
		t.Errorf("%d reservations stored, %d were acknowledged", len(stored), acknowledged)
	}
	for _, p := range stored {
		var sum uint64
		for _, r := range stored {
			if !p.Start.Before(r.Start) && p.Start.Before(r.End) {
				sum += r.Bandwidth
			}
		}
		if sum > capacity {
			t.Fatalf("overbooked: %d bit/s at %s", sum, p.Start)
		}
	}
}
