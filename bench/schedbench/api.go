package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// settingTopology is the settings key under which the controller keeps its
// topology (internal/controller's settingTopology).
const settingTopology = "topology"

// benchUser is the user the finds and creates run as (role user, project
// bench); the loaded reservations belong to it too.
const benchUser = "bench"

// apiHorizon is the booking horizon the benchmark's policy sets: the
// workload lies in 2030 (reserve.WorkloadEpoch), past the default six
// months.
const apiHorizon = 10 * 365 * 24 * time.Hour

// client is a plain HTTP client of the API: one keep-alive transport,
// JSON bodies, a bearer token.
type client struct {
	base  string
	token string
	hc    *http.Client
}

// answer is an HTTP answer: its status, the error code of a non-2xx one,
// and its body.
type answer struct {
	status int
	code   string
	msg    string
	body   []byte
}

func (a answer) ok() bool { return a.status >= 200 && a.status < 300 }

// call sends one request and reads the whole answer (so the connection
// goes back to the pool). A transport failure is an error; an HTTP error
// status is not, the caller judges it.
func (c *client) call(ctx context.Context, method, path string, body []byte) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	a := answer{status: resp.StatusCode, body: b}
	if !a.ok() {
		var eb apiv1.ErrorBody
		if json.Unmarshal(b, &eb) == nil {
			a.code, a.msg = eb.Error.Code, eb.Error.Message
		} else {
			a.msg = strings.TrimSpace(string(b))
		}
	}
	return a, nil
}

// do sends in as JSON and decodes a 2xx answer into out; any other answer
// is an error.
func (c *client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	a, err := c.call(ctx, method, path, body)
	if err != nil {
		return err
	}
	if !a.ok() {
		return fmt.Errorf("%s %s: %d %s: %s", method, path, a.status, a.code, a.msg)
	}
	if out != nil {
		if err := json.Unmarshal(a.body, out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return nil
}

// runAPI loads the workload's bookings into the store, opens the real
// controller on it, serves its API on a loopback port and measures finds
// and creates through it.
func runAPI(w *reserve.Workload, cfg config, sum *summary, prof *os.File) ([]row, error) {
	var rows []row
	ctx := context.Background()
	// The controller builds its own schedule from the stored reservations:
	// the workload's copy would only give the collector a second one to
	// scan, which a real controller does not have.
	w.Schedule = nil
	kind := storeKind(cfg.dbURL)
	sum.DB = kind
	st, err := store.Open(ctx, cfg.dbURL)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if _, err := st.GetSetting(ctx, settingTopology); !errors.Is(err, reserve.ErrNotFound) {
		return nil, fmt.Errorf("%s: the API mode wants an empty database (it has a topology already, or: %v)", kind, err)
	}

	logf("api %s: loading the %d existing bookings as RESERVED reservations, %d per transaction", kind, len(w.Bookings), loadBatch)
	t0 := time.Now()
	if err := load(ctx, st, w.Bookings); err != nil {
		return nil, err
	}
	secs := time.Since(t0).Seconds()
	sum.LoadSeconds = ptr(secs)
	rows = append(rows, row{Row: "api-load", DB: kind, N: len(w.Bookings), Seconds: ptr(secs), PerSecond: ptr(float64(len(w.Bookings)) / secs)})
	logf("api %s: loaded in %.1f s", kind, secs)

	if cfg.heartbeats > 0 {
		// The agents were alive when this controller started (heartbeat.go).
		if err := storeAgents(ctx, st, w.Graph.Nodes()); err != nil {
			return nil, err
		}
	}
	logf("api %s: opening the controller on them", kind)
	t0 = time.Now()
	c, err := controller.Open(ctx, controller.Config{Store: st, StoreKind: kind, Topology: controller.NewTopo("generated", w.Graph)})
	if err != nil {
		return nil, fmt.Errorf("open the controller: %w", err)
	}
	secs = time.Since(t0).Seconds()
	defer c.Close()
	if n := c.LiveCount(); n != len(w.Bookings) {
		return nil, fmt.Errorf("the controller restored %d live reservations, want %d", n, len(w.Bookings))
	}
	sum.StartupSeconds = ptr(secs)
	rows = append(rows, row{Row: "api-startup", DB: kind, N: len(w.Bookings), Seconds: ptr(secs), PerSecond: ptr(float64(len(w.Bookings)) / secs)})
	logf("api %s: controller open in %.1f s, %d live reservations", kind, secs, len(w.Bookings))

	dir, err := os.MkdirTemp("", "schedbench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tokenFile := filepath.Join(dir, "admin.token")
	if _, err := c.BootstrapAdmin(ctx, tokenFile); err != nil {
		return nil, err
	}
	adminToken, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: api.NewServer(c, nil, "bench", nil), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { c.Run(runCtx); close(ran) }()
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
		stopRun()
		<-ran
	}()

	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	base := "http://" + ln.Addr().String()
	admin := &client{base: base, token: strings.TrimSpace(string(adminToken)), hc: hc}
	user, err := setup(ctx, admin, len(w.Bookings))
	if err != nil {
		return nil, fmt.Errorf("set up through the API: %w", err)
	}

	stopProfile, err := startProfile(prof)
	if err != nil {
		return nil, err
	}
	defer stopProfile()
	b := newBench(w, cfg.seed)
	if cfg.queries > 0 {
		for _, k := range findKinds() {
			logf("api %s: POST /api/v1/find %s: %d runs", kind, k.name, cfg.queries)
			r, err := timeFind(ctx, user, b, k, cfg.queries)
			if err != nil {
				return nil, err
			}
			r.DB = kind
			rows = append(rows, r)
			switch k.name {
			case "fixed":
				sum.FixedSlotP99ms = r.P99ms
			case "earliest-path":
				sum.EarliestStartPathP99ms = r.P99ms
			case "earliest-any":
				sum.EarliestStartAnyP99ms = r.P99ms
			}
		}
	}
	if cfg.creates > 0 {
		logf("api %s: %d POST /api/v1/reservations from %d clients", kind, cfg.creates, cfg.workers)
		r, err := apiCreates(ctx, user, b, cfg.creates, cfg.workers)
		if err != nil {
			return nil, err
		}
		r.DB = kind
		rows = append(rows, r)
		sum.CreatesPerSecond, sum.CreateP50ms, sum.CreateP99ms = r.PerSecond, r.P50ms, r.P99ms
		if n := c.LiveCount(); n != len(w.Bookings)+*r.Accepted {
			return nil, fmt.Errorf("after the creates the controller has %d live reservations, want %d + %d accepted", n, len(w.Bookings), *r.Accepted)
		}
	}
	if cfg.heartbeats > 0 {
		r, err := timeHeartbeats(ctx, admin, w.Graph.Nodes(), cfg.heartbeats)
		if err != nil {
			return nil, err
		}
		r.DB = kind
		rows = append(rows, r)
		sum.HeartbeatP50ms, sum.HeartbeatP99ms, sum.HeartbeatCPUms, sum.HeartbeatsPerSecond = r.P50ms, r.P99ms, r.CPUms, r.PerSecond
	}
	stopProfile()
	if err := writeHeapProfile(cfg.memprofile); err != nil {
		return nil, err
	}
	return rows, nil
}

// setup, as the admin, checks the controller's health, sets a policy whose
// horizon reaches the workload, and adds the user the benchmark runs as;
// it returns that user's client.
func setup(ctx context.Context, admin *client, live int) (*client, error) {
	var h apiv1.Health
	if err := admin.do(ctx, "GET", "/api/v1/health", nil, &h); err != nil {
		return nil, err
	}
	if h.Reservations != live {
		return nil, fmt.Errorf("health reports %d live reservations, want %d", h.Reservations, live)
	}
	pol := apiv1.Policy{Default: apiv1.Limits{Horizon: apiHorizon.String()}}
	if err := admin.do(ctx, "PUT", "/api/v1/policy", pol, nil); err != nil {
		return nil, err
	}
	if err := admin.do(ctx, "POST", "/api/v1/users", apiv1.UserRequest{Name: benchUser, Role: string(reserve.RoleUser), Projects: []string{"bench"}}, nil); err != nil {
		return nil, err
	}
	var tok apiv1.Token
	if err := admin.do(ctx, "POST", "/api/v1/users/"+benchUser+"/tokens", apiv1.TokenRequest{}, &tok); err != nil {
		return nil, err
	}
	if tok.Secret == "" {
		return nil, errors.New("the new token's answer holds no secret")
	}
	u := &client{base: admin.base, token: tok.Secret, hc: admin.hc}
	var who apiv1.Whoami
	if err := u.do(ctx, "GET", "/api/v1/whoami", nil, &who); err != nil {
		return nil, err
	}
	if who.User != benchUser {
		return nil, fmt.Errorf("whoami says %q, want %q", who.User, benchUser)
	}
	return u, nil
}

// findKind is one find mode with the request it sends for a drawn query.
type findKind struct {
	name string
	req  func(q query) apiv1.FindRequest
}

func linkNames(hs []reserve.Hop) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Link
	}
	return out
}

// findKinds are the find modes timed, with the same questions as the
// direct queries of the same names: 2 Gbit/s for 4 hours at a given
// start; the widest path over 4 hours; the earliest 4 hours of 5 Gbit/s
// within 30 days, on the path of a random existing booking or on any
// path; the earliest completion of 2 TB at up to 10 Gbit/s within 30 days.
func findKinds() []findKind {
	startQ := func(q query, fixed bool) apiv1.FindRequest {
		r := apiv1.FindRequest{Mode: apiv1.FindEarliest, From: q.from, To: q.to, Bandwidth: 5 * gbps, Start: q.start,
			Duration: (4 * time.Hour).String(), Horizon: q.start.Add(month)}
		if fixed {
			r.From, r.To, r.Path = q.path[0].From, q.path[len(q.path)-1].To, linkNames(q.path)
		}
		return r
	}
	return []findKind{
		{"fixed", func(q query) apiv1.FindRequest {
			return apiv1.FindRequest{Mode: apiv1.FindFixed, From: q.from, To: q.to, Bandwidth: 2 * gbps, Start: q.start, End: q.start.Add(4 * time.Hour)}
		}},
		{"widest", func(q query) apiv1.FindRequest {
			return apiv1.FindRequest{Mode: apiv1.FindWidest, From: q.from, To: q.to, Start: q.start, End: q.start.Add(4 * time.Hour)}
		}},
		{"earliest-path", func(q query) apiv1.FindRequest { return startQ(q, true) }},
		{"earliest-any", func(q query) apiv1.FindRequest { return startQ(q, false) }},
		{"completion", func(q query) apiv1.FindRequest {
			return apiv1.FindRequest{Mode: apiv1.FindCompletion, From: q.from, To: q.to, SizeBytes: 2_000_000_000_000, Bandwidth: 10 * gbps,
				Start: q.start, Horizon: q.start.Add(month)}
		}},
	}
}

// timeFind sends n finds of one kind, one after the other, each on a
// freshly drawn query, and times each round trip (request written to
// answer read). 409 is "no answer"; any other non-2xx fails the run.
func timeFind(ctx context.Context, u *client, b *bench, k findKind, n int) (row, error) {
	lat := make([]time.Duration, 0, n)
	none := 0
	algs := map[string]bool{}
	for range n {
		body, err := json.Marshal(k.req(b.draw()))
		if err != nil {
			return row{}, err
		}
		t := time.Now()
		a, err := u.call(ctx, "POST", "/api/v1/find", body)
		lat = append(lat, time.Since(t))
		if err != nil {
			return row{}, err
		}
		switch {
		case a.ok():
			var s apiv1.Slot
			if err := json.Unmarshal(a.body, &s); err != nil {
				return row{}, fmt.Errorf("find %s: decode the answer: %w", k.name, err)
			}
			algs[s.Algorithm] = true
		case a.status == http.StatusConflict:
			none++
		default:
			return row{}, fmt.Errorf("find %s: %d %s: %s (request %s)", k.name, a.status, a.code, a.msg, body)
		}
	}
	slices.Sort(lat)
	return row{Row: "api-find", Kind: k.name, Algorithm: strings.Join(slices.Sorted(maps.Keys(algs)), ","), N: n,
		P50ms: ptr(ms(pct(lat, 0.50))), P99ms: ptr(ms(pct(lat, 0.99))), Maxms: ptr(ms(lat[len(lat)-1])),
		NonePct: ptr(100 * float64(none) / float64(n))}, nil
}

// apiCreates sends n creates from workers concurrent clients sharing one
// keep-alive transport: the same mix as the direct creates (half on any
// path, half on the path of an existing booking; 100 Mbit/s to 2 Gbit/s
// for 30 minutes to 4 hours), each with its own idempotency key. 201 is
// accepted, 409 refused; anything else fails the run.
func apiCreates(ctx context.Context, u *client, b *bench, n, workers int) (row, error) {
	bodies := make([][]byte, n)
	for i, r := range b.createReqs(n) {
		req := apiv1.ReservationRequest{From: r.from, To: r.to, Bandwidth: r.bw, Start: r.start, End: r.end,
			IdempotencyKey: fmt.Sprintf("schedbench-%d-%s", b.seed, r.id)}
		if r.path != nil {
			req.Path = linkNames(r.path)
		}
		var err error
		if bodies[i], err = json.Marshal(req); err != nil {
			return row{}, err
		}
	}
	var (
		next              atomic.Int64
		accepted, refused atomic.Int64
		replayed          atomic.Int64
		lat               = make([]time.Duration, n)
		wg                sync.WaitGroup
		mu                sync.Mutex // guards codes and firstErr
		codes             = map[string]int{}
		firstErr          error
		failed            atomic.Bool
		fail              = func(err error) {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
			failed.Store(true)
		}
	)
	t0 := time.Now()
	for range workers {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t := time.Now()
				a, err := u.call(ctx, "POST", "/api/v1/reservations", bodies[i])
				lat[i] = time.Since(t)
				switch {
				case err != nil:
					fail(err)
				case a.status == http.StatusCreated:
					accepted.Add(1)
				case a.ok():
					replayed.Add(1) // a key seen before: never, as each is new
				case a.status == http.StatusConflict:
					refused.Add(1)
					mu.Lock()
					codes[a.code]++
					mu.Unlock()
				default:
					fail(fmt.Errorf("create %d: %d %s: %s (request %s)", i+1, a.status, a.code, a.msg, bodies[i]))
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	if firstErr != nil {
		return row{}, firstErr
	}
	slices.Sort(lat)
	acc, ref := int(accepted.Load()), int(refused.Load())
	var note []string
	for _, c := range slices.Sorted(maps.Keys(codes)) {
		note = append(note, fmt.Sprintf("%s: %d", c, codes[c]))
	}
	if rp := replayed.Load(); rp > 0 {
		note = append(note, fmt.Sprintf("200 (replayed key): %d", rp))
		acc += int(rp)
	}
	return row{Row: "api-creates", N: n, Accepted: &acc, Rejected: &ref, Workers: workers,
		PerSecond: ptr(float64(n) / wall.Seconds()), Seconds: ptr(wall.Seconds()),
		P50ms: ptr(ms(pct(lat, 0.50))), P99ms: ptr(ms(pct(lat, 0.99))), Maxms: ptr(ms(lat[len(lat)-1])),
		Note: strings.Join(note, ", ")}, nil
}
