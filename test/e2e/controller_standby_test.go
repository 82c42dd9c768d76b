//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/store/pgtest"
)

// TestControllerStandbyTakeover starts two controllers on one database:
// the second is a standby (health says so, writes get 503 "standby", it
// does not bind the shared unix socket). Eight clients given both URLs
// create reservations; the leader is SIGKILLed among them. The standby,
// still a standby up to the kill, leads after it, has every create the
// old leader acknowledged,
// overbooks nothing (checked by brute force over the stored
// reservations), and the clients carry on against it.
func TestControllerStandbyTakeover(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]func(t *testing.T, dir string) string{
		"sqlite":   func(_ *testing.T, dir string) string { return "sqlite:" + filepath.Join(dir, "db") },
		"postgres": func(t *testing.T, _ string) string { return pgtest.URL(t) },
	} {
		t.Run(name, func(t *testing.T) { standbyTakeover(t, db) })
	}
}

func health(t *testing.T, url string) (apiv1.Health, error) {
	t.Helper()
	cl := &http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get(url + "/api/v1/health")
	if err != nil {
		return apiv1.Health{}, err
	}
	defer resp.Body.Close()
	var h apiv1.Health
	if resp.StatusCode != 200 {
		return h, fmt.Errorf("health: %s", resp.Status)
	}
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

func unixHealth(sock string) (apiv1.Health, error) {
	cl := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	var h apiv1.Health
	resp, err := cl.Get("http://unix/api/v1/health")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

func standbyTakeover(t *testing.T, dbOf func(t *testing.T, dir string) string) {
	dir := t.TempDir()
	db := dbOf(t, dir)
	sock := filepath.Join(dir, "ctl.sock")
	a := startKillCtl(t, dir, db, freePort(t, "127.0.0.1"), "--listen", "unix:"+sock)
	b := startKillCtl(t, dir, db, freePort(t, "127.0.0.1"), "--listen", "unix:"+sock)

	// A leads, B stands by.
	if h, err := health(t, a.url); err != nil || h.Role != apiv1.RoleLeader {
		t.Fatalf("first controller: %+v %v", h, err)
	}
	if h, err := health(t, b.url); err != nil || h.Role != apiv1.RoleStandby {
		t.Fatalf("second controller: %+v %v\n%s", h, err, b.log)
	}
	if !strings.Contains(b.log.String(), "standby: another controller leads on this database; waiting") {
		t.Errorf("the standby did not say so:\n%s", b.log)
	}
	if h, err := unixHealth(sock); err != nil || h.Role != apiv1.RoleLeader {
		t.Errorf("the shared socket answers %+v %v, want the leader", h, err)
	}
	base := time.Now().UTC().Add(time.Hour).Truncate(time.Minute)
	mk := func(i int) apiv1.ReservationRequest {
		return apiv1.ReservationRequest{From: "h1", To: "h2", Bandwidth: uint64(1+i%7) * 10_000_000, Start: base.Add(time.Duration(i%500) * time.Minute),
			Duration: fmt.Sprintf("%dm", 5+i%40), IdempotencyKey: fmt.Sprintf("k%d", i)}
	}
	for _, m := range []string{"POST", "GET"} {
		var eb apiv1.ErrorBody
		req, _ := http.NewRequest(m, b.url+"/api/v1/reservations", strings.NewReader(`{"from":"h1","to":"h2","bandwidth_bps":1000,"duration":"1m"}`))
		req.Header.Set("Authorization", "Bearer "+a.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != 503 || eb.Error.Code != apiv1.CodeStandby || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s on the standby: %d %+v (Retry-After %q), want 503 standby", m, resp.StatusCode, eb, resp.Header.Get("Retry-After"))
		}
	}

	var (
		mu        sync.Mutex
		answered  = map[int]string{} // request → reservation ID
		after     atomic.Int64       // creates answered once B leads
		failures  []string
		next      atomic.Int64
		stop      atomic.Bool
		takenOver atomic.Bool
		wg        sync.WaitGroup
	)
	// ctx only bounds a hang of the load.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for range 8 {
		cl, err := client.New(a.url+","+b.url, a.token, client.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for !stop.Load() {
				i := int(next.Add(1))
				if i > 5000 {
					return
				}
				resp, err := cl.CreateReservationRetrying(ctx, mk(i), false)
				mu.Lock()
				switch {
				case err == nil:
					answered[i] = resp.Reservation.ID
					if takenOver.Load() {
						after.Add(1)
					}
				case client.Code(err) == apiv1.CodeCapacity:
				default:
					failures = append(failures, fmt.Sprintf("request %d: %v", i, err))
				}
				mu.Unlock()
			}
		})
	}
	// Up to the kill the standby stands by: the lock is held, whatever
	// the load.
	waitFor(2*time.Minute, func() bool { return takeoverReady(&mu, answered, 150) })
	if h, err := health(t, b.url); err != nil || h.Role != apiv1.RoleStandby {
		t.Errorf("the second controller before the kill: %+v %v, want standby", h, err)
	}
	a.killWhenAnswered(t, &mu, answered, 150, 2*time.Minute)
	killed := time.Now()
	// Then it leads: the order is what is checked, not how soon (the
	// deadline only bounds a hang).
	var role string
	for deadline := time.Now().Add(2 * time.Minute); role != apiv1.RoleLeader; time.Sleep(50 * time.Millisecond) {
		if h, err := health(t, b.url); err == nil {
			role = h.Role
		}
		if role != apiv1.RoleLeader && time.Now().After(deadline) {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("the standby did not lead after the leader's death (last role %q):\n%s", role, b.log)
		}
	}
	takenOver.Store(true)
	t.Logf("the standby leads %v after the kill", time.Since(killed).Round(time.Millisecond))
	// The clients carry on against the new leader.
	waitFor(3*time.Minute, func() bool { return after.Load() >= 50 || ctx.Err() != nil })
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, f := range failures {
		t.Error(f)
	}
	if after.Load() < 50 {
		t.Fatalf("only %d creates answered after the takeover:\n%s", after.Load(), b.log)
	}

	if h, err := unixHealth(sock); err != nil || h.Role != apiv1.RoleLeader {
		t.Errorf("the shared socket after the takeover: %+v %v, want the new leader", h, err)
	}
	for i, id := range answered {
		var got struct {
			Reservation killResv `json:"reservation"`
		}
		if st, err := b.call("GET", "/api/v1/reservations/"+id, nil, &got); err != nil || st != 200 {
			t.Fatalf("request %d's reservation %s on the new leader: %d %v", i, id, st, err)
		}
	}
	var list struct {
		Reservations []killResv `json:"reservations"`
	}
	if st, err := b.call("GET", "/api/v1/reservations", nil, &list); err != nil || st != 200 {
		t.Fatalf("list: %d %v", st, err)
	}
	checkStoredCreates(t, list.Reservations, len(answered), 900_000_000)
	// The command line, given both URLs, reaches the new leader.
	cmd := exec.Command(lpBin, "reserve", "list", "--controller", a.url+","+b.url)
	cmd.Env = append(cmd.Environ(), "LIGHTPATH_CONTROLLER_TOKEN="+a.token)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("reserve list with both URLs: %v\n%s", err, out)
	}
	t.Logf("%d acknowledged (%d after the takeover), %d stored", len(answered), after.Load(), len(list.Reservations))
}

// TestControllerPostgresLostLead: when the connection holding a PostgreSQL
// leader's lock is cut (here the server terminates it), the controller
// steps down: it exits non-zero saying why, so that a supervisor restarts
// it as a standby, instead of serving on while another may lead.
func TestControllerPostgresLostLead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := pgtest.URL(t)
	c := startKillCtl(t, dir, db, freePort(t, "127.0.0.1"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var n int64
	err = admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 2 AND classid = $1::bigint::oid
		AND objid = (hashtext(current_schema())::bigint & 4294967295)::oid`, int64(0x6c706c64)).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("terminate the leader lock's connection: %d terminated, %v", n, err)
	}
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the controller exited 0 after losing its lead:\n%s", c.log)
		}
		if !strings.Contains(c.log.String(), "lightpath: controller: lost the lead on the database") {
			t.Errorf("the controller did not say why it stopped:\n%s", c.log)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the controller still runs 2 min after its lock's connection was cut:\n%s", c.log)
	}
}

// takeoverReady says whether n of a load's creates were answered.
func takeoverReady(mu *sync.Mutex, answered map[int]string, n int) bool {
	mu.Lock()
	defer mu.Unlock()
	return len(answered) >= n
}
