package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lightpath/lightpath/bench/rusage"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/store"
)

// The heartbeat row (issue 14): every node of the generated topology gets
// an agent, each with a token bound to its node, and each agent sends
// POST /api/v1/agents/{node}/heartbeat every heartbeatEvery, as
// lightpath agent does, against the 100,000 live reservations, for
// -heartbeat-rounds rounds. Each agent is one goroutine with its own
// keep-alive connection; an agent whose heartbeat takes longer than the
// interval sends the next one at once (it falls behind, as a real one
// would). Latency is the round trip; CPU per heartbeat is the process's
// CPU time (getrusage: the controller, its HTTP server, and the agents'
// HTTP clients, which run in the same process) over the row, divided by
// the heartbeats answered.
//
// The agents are alive from the start, as when a controller restarts among
// running agents: their leases (an hour, to outlast the finds and creates
// before this row) are in the store before controller.Open (storeAgents),
// so the row measures renewals, what agents send all day, and not 1,000
// registrations in a row.

// benchAgent is the agent user whose node-bound tokens the agents use.
const benchAgent = "bench-agent"

// heartbeatEvery is how often each agent heartbeats (lightpath agent's
// interval) and heartbeatLease the lease it asks for (the default).
const (
	heartbeatEvery = 2 * time.Second
	heartbeatLease = "15s"
)

// agentClients creates, as the admin, the agent user and one token bound
// to each node, and returns a client per node.
func agentClients(ctx context.Context, admin *client, nodes []string) ([]*client, error) {
	if err := admin.do(ctx, "POST", "/api/v1/users", apiv1.UserRequest{Name: benchAgent, Role: string(reserve.RoleAgent)}, nil); err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConns: len(nodes), MaxIdleConnsPerHost: len(nodes), IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	// Generous: when the controller cannot keep up, every agent waits.
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Minute}
	out := make([]*client, len(nodes))
	for i, n := range nodes {
		var tok apiv1.Token
		if err := admin.do(ctx, "POST", "/api/v1/users/"+benchAgent+"/tokens", apiv1.TokenRequest{Node: n}, &tok); err != nil {
			return nil, err
		}
		if tok.Node != n {
			return nil, fmt.Errorf("the token for node %s is bound to %q", n, tok.Node)
		}
		out[i] = &client{base: admin.base, token: tok.Secret, hc: hc}
	}
	return out, nil
}

// storeAgents registers an agent on every node in the store, alive for an
// hour from now.
func storeAgents(ctx context.Context, st store.Store, nodes []string) error {
	logf("heartbeats: %d agents alive in the store", len(nodes))
	now := time.Now()
	return st.Tx(ctx, func(tx store.Store) error {
		for _, n := range nodes {
			if err := tx.PutAgent(ctx, store.Agent{Node: n, RegisteredAt: now, LeaseExpires: now.Add(time.Hour)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// heartbeat sends one heartbeat of node, checks its answer is the node's
// work and returns how many reservations it holds. It does not decode the
// answer (the agents run in the benchmark's process, and decoding hundreds
// of reservations per heartbeat would be counted as the controller's CPU);
// it checks the answer's head and counts the reservations' "id" keys.
func heartbeat(ctx context.Context, c *client, node string, body []byte) (int, error) {
	a, err := c.call(ctx, "POST", "/api/v1/agents/"+node+"/heartbeat", body)
	if err != nil {
		return 0, err
	}
	if a.status != http.StatusOK {
		return 0, fmt.Errorf("heartbeat of %s: %d %s: %s", node, a.status, a.code, a.msg)
	}
	if head := `{"node":"` + node + `","lease_expires":"`; !bytes.HasPrefix(a.body, []byte(head)) {
		return 0, fmt.Errorf("heartbeat of %s: the answer does not begin %s: %.80s", node, head, a.body)
	}
	return bytes.Count(a.body, []byte(`{"id":"`)), nil
}

// timeHeartbeats gives the agent of every node a token bound to it, then
// runs rounds rounds of heartbeats from all of them at once.
func timeHeartbeats(ctx context.Context, admin *client, nodes []string, rounds int) (row, error) {
	logf("heartbeats: creating %d agent tokens, one bound to each node", len(nodes))
	agents, err := agentClients(ctx, admin, nodes)
	if err != nil {
		return row{}, fmt.Errorf("agent tokens: %w", err)
	}
	body, err := json.Marshal(apiv1.HeartbeatRequest{Lease: heartbeatLease})
	if err != nil {
		return row{}, err
	}
	logf("heartbeats: %d agents every %s for %d rounds", len(nodes), heartbeatEvery, rounds)

	var (
		mu       sync.Mutex
		lat      []time.Duration
		returned atomic.Int64
		firstErr error
		failed   atomic.Bool
		wg       sync.WaitGroup
	)
	cpu0, wall0 := rusage.CPU(), time.Now()
	for i, n := range nodes {
		// Spread the agents over the interval, as agents started at
		// different times are.
		offset := heartbeatEvery * time.Duration(i) / time.Duration(len(nodes))
		wg.Go(func() {
			mine := make([]time.Duration, 0, rounds)
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			next := wall0.Add(offset)
			for range rounds {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				if failed.Load() {
					return
				}
				t := time.Now()
				k, err := heartbeat(ctx, agents[i], n, body)
				mine = append(mine, time.Since(t))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					failed.Store(true)
					return
				}
				returned.Add(int64(k))
				next = next.Add(heartbeatEvery)
			}
		})
	}
	wg.Wait()
	wall, cpu := time.Since(wall0), rusage.CPU()-cpu0
	if firstErr != nil {
		return row{}, firstErr
	}
	slices.Sort(lat)
	n := len(lat)
	return row{Row: "api-heartbeat", N: n, Workers: len(nodes),
		PerSecond: ptr(float64(n) / wall.Seconds()), Seconds: ptr(wall.Seconds()),
		P50ms: ptr(ms(pct(lat, 0.50))), P99ms: ptr(ms(pct(lat, 0.99))), Maxms: ptr(ms(lat[n-1])),
		CPUms: ptr(ms(cpu) / float64(n)),
		Note: fmt.Sprintf("%d agents, one heartbeat each every %s (%.0f/s asked), %.0f reservations returned per heartbeat on average",
			len(nodes), heartbeatEvery, float64(len(nodes))/heartbeatEvery.Seconds(), float64(returned.Load())/float64(n))}, nil
}
