package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/reserve"
)

func TestReserveFlagsCheck(t *testing.T) {
	for _, c := range []struct {
		f    reserveFlags
		want string
	}{
		{reserveFlags{}, ""},
		{reserveFlags{rate: "300M"}, ""},
		{reserveFlags{rate: "AUTO"}, ""},
		{reserveFlags{rate: "0"}, "--reserve must be above zero"},
		{reserveFlags{rate: "fast"}, "--reserve: "},
		{reserveFlags{rate: "300MB"}, "--reserve: "},
		{reserveFlags{required: true}, "--reserve-required needs --reserve"},
		{reserveFlags{path: []string{"wan"}}, "--reserve-path needs --reserve"},
		{reserveFlags{duration: time.Hour}, "--reserve-duration needs --reserve"},
		{reserveFlags{rate: "1G", duration: -time.Second}, "--reserve-duration must be above zero"},
	} {
		err := c.f.check()
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.f, err, c.want)
		}
	}
}

// cpController is a fake controller for cp --reserve: a topology where
// 127.0.0.1 is node a1 and 127.0.0.2 node b1, a create answered with
// created (or refused with refusal), an event stream that stays open, and
// a cancel.
type cpController struct {
	mu        sync.Mutex
	created   reserve.Reservation
	refusal   string
	bodies    []map[string]any
	paths     []string
	cancelled atomic.Bool
}

func (fc *cpController) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if b, _ := io.ReadAll(r.Body); len(b) > 0 {
		json.Unmarshal(b, &body)
	}
	fc.mu.Lock()
	fc.bodies = append(fc.bodies, body)
	fc.paths = append(fc.paths, r.Method+" "+r.URL.Path)
	cur := fc.created
	fc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.Method + " " + r.URL.Path {
	case "GET /api/v1/topology":
		json.NewEncoder(w).Encode(apiv1.Topology{Name: "lo", Nodes: []apiv1.TopoNode{
			{Name: "a1", Addresses: []string{"127.0.0.1"}}, {Name: "b1", Addresses: []string{"127.0.0.2"}}}})
	case "POST /api/v1/find":
		json.NewEncoder(w).Encode(apiv1.Slot{Algorithm: "widest", Bandwidth: 1.8e9,
			Path: []reserve.PathHop{{Link: "dedicated", From: body["from"].(string), To: body["to"].(string)}}})
	case "POST /api/v1/reservations":
		if fc.refusal != "" {
			w.WriteHeader(409)
			io.WriteString(w, fc.refusal)
			return
		}
		cur.From, cur.To, cur.Bandwidth = body["from"].(string), body["to"].(string), uint64(body["bandwidth_bps"].(float64))
		fc.mu.Lock()
		fc.created = cur
		fc.mu.Unlock()
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(apiv1.ReservationResponse{Reservation: cur, Created: true})
	case "GET /api/v1/reservations/" + cur.ID:
		json.NewEncoder(w).Encode(cur)
	case "POST /api/v1/reservations/" + cur.ID + "/cancel":
		fc.cancelled.Store(true)
		cur.State, cur.Version = reserve.StateCancelled, cur.Version+1
		json.NewEncoder(w).Encode(cur)
	case "GET /api/v1/events":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"code":"not_found","message":"no such thing"}}`)
	}
}

func (fc *cpController) seen() ([]string, []map[string]any) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return append([]string(nil), fc.paths...), append([]map[string]any(nil), fc.bodies...)
}

// startMover serves root on 127.0.0.2 until the test ends.
func startMover(t *testing.T, root string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 to listen on: %v", err)
	}
	srv, err := mover.NewServer(mover.ServerConfig{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return ln.Addr().String()
}

// startMoverUDP is startMover with the server's UDP port open too.
func startMoverUDP(t *testing.T, root string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 to listen on: %v", err)
	}
	srv, err := mover.NewServer(mover.ServerConfig{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	uln, err := srv.ListenUDP(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln, uln); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return ln.Addr().String()
}

// TestCpReserveUDP: a UDP copy with --reserve books its udp flow as well
// and runs fixed at the reserved rate; with no reservation booked it runs
// fast, and --cc fixed without --rate then fails, saying why.
func TestCpReserveUDP(t *testing.T) {
	srvRoot, local := t.TempDir(), t.TempDir()
	addr := startMoverUDP(t, srvRoot)
	port := addr[strings.LastIndex(addr, ":")+1:]
	if err := os.WriteFile(filepath.Join(local, "f"), bytes.Repeat([]byte("udp "), 100000), 0o644); err != nil {
		t.Fatal(err)
	}
	fc := &cpController{created: reserve.Reservation{ID: "r-8", State: reserve.StateActive, Version: 2,
		Path: []reserve.PathHop{{Link: "dedicated", From: "a1", To: "b1"}}}}
	ctl := httptest.NewServer(fc)
	t.Cleanup(ctl.Close)
	summary := func(out string) map[string]any {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var sum map[string]any
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
			t.Fatalf("summary: %v\n%s", err, out)
		}
		return sum
	}
	out, stderr, err := runCpCLI(t, "--json", "--transport", "udp", "--reserve", "300M", "--controller", ctl.URL, filepath.Join(local, "f"), "lp://"+addr+"/f")
	if err != nil {
		t.Fatalf("push: %v\n%s", err, stderr)
	}
	if sum := summary(out); sum["transport"] != "udp" || sum["cc"] != "fixed" || sum["verified"] != true {
		t.Errorf("summary: %v", sum)
	}
	paths, bodies := fc.seen()
	for i, p := range paths {
		if p == "POST /api/v1/reservations" {
			if want := "tcp 127.0.0.1 > 127.0.0.2:" + port + ", udp 127.0.0.1 > 127.0.0.2:" + port; bodies[i]["flow_spec"] != want {
				t.Errorf("flow spec %v, want %q", bodies[i]["flow_spec"], want)
			}
		}
	}

	refusing := httptest.NewServer(&cpController{refusal: `{"error":{"code":"capacity","message":"not enough reservable capacity"}}`})
	t.Cleanup(refusing.Close)
	out, stderr, err = runCpCLI(t, "--json", "--overwrite", "--transport", "udp", "--reserve", "3G", "--controller", refusing.URL, filepath.Join(local, "f"), "lp://"+addr+"/f")
	if err != nil {
		t.Fatalf("push without a reservation: %v\n%s", err, stderr)
	}
	if sum := summary(out); sum["cc"] != "fast" || sum["reservation_error"] == nil {
		t.Errorf("without a reservation: %v", sum)
	}
	_, _, err = runCpCLI(t, "--overwrite", "--transport", "udp", "--cc", "fixed", "--reserve", "3G", "--controller", refusing.URL, filepath.Join(local, "f"), "lp://"+addr+"/f")
	if err == nil || !strings.Contains(err.Error(), "--cc fixed sends at a set rate and no reservation gave one") {
		t.Errorf("--cc fixed without a reservation: %v", err)
	}
}

// runCpCLI runs cp with args and returns stdout, stderr and the error.
func runCpCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	t.Setenv("LIGHTPATH_CONTROLLER_TOKEN", "tok")
	var out, errb bytes.Buffer
	root := newRoot(&out, &errb)
	root.SetArgs(append([]string{"cp"}, args...))
	err := root.Execute()
	return out.String(), errb.String(), err
}

// TestCpReserve copies over loopback with a fake controller: the create
// carries the copy's flow in the direction its data flows, the copy's
// bytes count as reserved (the reservation is ACTIVE from its creation),
// and the reservation is cancelled at the end.
func TestCpReserve(t *testing.T) {
	srvRoot, local := t.TempDir(), t.TempDir()
	addr := startMover(t, srvRoot)
	port := addr[strings.LastIndex(addr, ":")+1:]
	data := bytes.Repeat([]byte("lightpath "), 300000)
	if err := os.WriteFile(filepath.Join(local, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	fc := &cpController{created: reserve.Reservation{ID: "r-7", State: reserve.StateActive, Version: 2,
		Path: []reserve.PathHop{{Link: "dedicated", From: "a1", To: "b1"}}}}
	ctl := httptest.NewServer(fc)
	t.Cleanup(ctl.Close)

	check := func(what, out string, wantFrom, wantFlow, wantDur string, wantBps float64) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var sum map[string]any
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
			t.Fatalf("%s: summary: %v\n%s", what, err, out)
		}
		byPath, _ := sum["bytes_by_path"].(map[string]any)
		if sum["reservation"] != "r-7" || sum["reserved_bps"] != wantBps || sum["reservation_state"] != "CANCELLED" ||
			sum["reservation_path"] != "dedicated" || byPath == nil || byPath["reserved"] != float64(len(data)) || byPath["routed"] != 0.0 {
			t.Errorf("%s: summary %s", what, lines[len(lines)-1])
		}
		if !strings.Contains(out, `{"type":"reservation","id":"r-7","state":"ACTIVE"`) {
			t.Errorf("%s: no reservation event:\n%s", what, out)
		}
		paths, bodies := fc.seen()
		var create map[string]any
		for i, p := range paths {
			if p == "POST /api/v1/reservations" {
				create = bodies[i]
			}
		}
		if create["from"] != wantFrom || create["flow_spec"] != wantFlow || create["duration"] != wantDur ||
			create["bandwidth_bps"] != wantBps || !strings.HasPrefix(fmt.Sprint(create["idempotency_key"]), "cp-") {
			t.Errorf("%s: create %v", what, create)
		}
		if !fc.cancelled.Load() {
			t.Errorf("%s: not cancelled; requests %v", what, paths)
		}
		fc.cancelled.Store(false)
	}

	out, stderr, err := runCpCLI(t, "--json", "--reserve", "300M", "--controller", ctl.URL, filepath.Join(local, "f"), "lp://"+addr+"/f")
	if err != nil {
		t.Fatalf("push: %v\n%s", err, stderr)
	}
	check("push", out, "a1", "tcp 127.0.0.1 > 127.0.0.2:"+port, "1m0s", 3e8)

	out, stderr, err = runCpCLI(t, "--json", "--reserve", "auto", "--controller", ctl.URL, "lp://"+addr+"/f", filepath.Join(local, "g"))
	if err != nil {
		t.Fatalf("pull: %v\n%s", err, stderr)
	}
	check("pull", out, "b1", "tcp 127.0.0.2:"+port+" > 127.0.0.1", "1h0m0s", 1.8e9)
	if got, _ := os.ReadFile(filepath.Join(local, "g")); !bytes.Equal(got, data) {
		t.Error("pulled file differs")
	}

	// Human output: the lines about the reservation, and the summary's.
	out, stderr, err = runCpCLI(t, "--overwrite", "--reserve", "300M", "--controller", ctl.URL, filepath.Join(local, "f"), "lp://"+addr+"/f")
	if err != nil {
		t.Fatalf("push: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "cp: reservation r-7 is ACTIVE: the flows move onto dedicated") ||
		!strings.Contains(out, "  reservation r-7, 300 Mbit/s via dedicated: reserved path 2.86 MiB, routed 0 B; released\n") {
		t.Errorf("human output:\nstdout:\n%s\nstderr:\n%s", out, stderr)
	}
}

// TestCpReserveRefused checks a refusal: a warning with the controller's
// message and alternatives and the copy goes on; with --reserve-required,
// an error and nothing copied.
func TestCpReserveRefused(t *testing.T) {
	srvRoot, local := t.TempDir(), t.TempDir()
	addr := startMover(t, srvRoot)
	if err := os.WriteFile(filepath.Join(local, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	fc := &cpController{refusal: `{"error":{"code":"capacity","message":"not enough reservable capacity: no path carries 3 Gbit/s from a1 to b1",` +
		`"alternatives":{"widest":{"algorithm":"widest","bandwidth_bps":1800000000,"path":[{"link":"dedicated","from":"a1","to":"b1"}]}}}}`}
	ctl := httptest.NewServer(fc)
	t.Cleanup(ctl.Close)

	_, stderr, err := runCpCLI(t, "--reserve", "3G", "--reserve-required", "--controller", ctl.URL, filepath.Join(local, "f"), "lp://"+addr+"/f")
	if err == nil || !strings.Contains(err.Error(), "--reserve-required: reserve 3.00 Gbit/s from a1 to b1") ||
		!strings.Contains(err.Error(), "no path carries 3 Gbit/s from a1 to b1; widest in that slot: 1.80 Gbit/s via dedicated") {
		t.Errorf("--reserve-required: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(srvRoot, "f")); err == nil {
		t.Error("--reserve-required copied all the same")
	}

	out, stderr, err := runCpCLI(t, "--json", "--reserve", "3G", "--controller", ctl.URL, filepath.Join(local, "f"), "lp://"+addr+"/f")
	if err != nil {
		t.Fatalf("without --reserve-required: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(stderr, "lightpath: cp: no reservation: reserve 3.00 Gbit/s from a1 to b1") ||
		!strings.Contains(stderr, "widest in that slot: 1.80 Gbit/s via dedicated; copying on the routed path\n") {
		t.Errorf("warning: %q", stderr)
	}
	if !strings.Contains(out, `"reservation_error":"reserve 3.00 Gbit/s`) || !strings.Contains(out, `"bytes_by_path":{"reserved":0,"routed":4}`) {
		t.Errorf("summary: %s", out)
	}

	// No controller there at all.
	out, stderr, err = runCpCLI(t, "--json", "--overwrite", "--reserve", "3G", "--controller", "unix:"+filepath.Join(t.TempDir(), "none.sock"),
		filepath.Join(local, "f"), "lp://"+addr+"/f")
	if err != nil || !strings.Contains(stderr, "lightpath: cp: no reservation: read the controller's topology: controller unix:") ||
		!strings.Contains(out, `"bytes_by_path":{"reserved":0,"routed":4}`) {
		t.Errorf("no controller: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
}
