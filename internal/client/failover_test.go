package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/retry"
)

// standbyAnswer is what a standby controller answers every route but
// health with (api.Gate).
func standbyAnswer(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "2")
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(apiv1.ErrorBody{Error: apiv1.ErrorDetail{Code: apiv1.CodeStandby, Message: "this controller is a standby"}})
}

// switchable serves as a standby until lead is set, then as f.
type switchable struct {
	lead atomic.Bool
	f    *fakeAPI
}

func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.lead.Load() {
		standbyAnswer(w, r)
		return
	}
	s.f.ServeHTTP(w, r)
}

func (f *fakeAPI) count(method, path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.reqs {
		if s.Method == method && s.Path == path {
			n++
		}
	}
	return n
}

// TestFailover: a client given a standby and a leader sends to the
// leader; when the leader dies and the standby takes over, the next
// requests (a create included, since its connection was never made) go
// to the new leader.
func TestFailover(t *testing.T) {
	ctx := context.Background()
	a := &switchable{f: newFake()}
	srvA := httptest.NewServer(a)
	defer srvA.Close()
	fb := newFake()
	srvB := httptest.NewServer(fb)

	c, err := New(srvA.URL+", "+srvB.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Whoami(ctx); err != nil {
		t.Fatalf("whoami with a standby first: %v", err)
	}
	if n := fb.count("GET", "/api/v1/whoami"); n != 1 {
		t.Fatalf("the leader got %d whoami", n)
	}
	if _, err := c.CreateReservation(ctx, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 1, IdempotencyKey: "k1"}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if n := fb.count("POST", "/api/v1/reservations"); n != 1 {
		t.Fatalf("the leader got %d creates", n)
	}

	// B dies; A takes over.
	srvB.Close()
	a.lead.Store(true)
	if _, err := c.CreateReservation(ctx, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 1, IdempotencyKey: "k2"}); err != nil {
		t.Fatalf("create after the takeover: %v", err)
	}
	if n := a.f.count("POST", "/api/v1/reservations"); n != 1 {
		t.Fatalf("the new leader got %d creates", n)
	}
	if _, err := c.Whoami(ctx); err != nil || a.f.count("GET", "/api/v1/whoami") != 1 {
		t.Fatalf("whoami after the takeover: %v", err)
	}

	// One URL: a standby's answer is the error, transient.
	a.lead.Store(false)
	one, _ := New(srvA.URL, "tok")
	_, err = one.Whoami(ctx)
	if Code(err) != apiv1.CodeStandby || !retry.IsTransient(err) {
		t.Errorf("a lone standby: %v (code %q), want code standby, transient", err, Code(err))
	}
}

// TestFailoverBrokenCreate: a request whose connection broke after it was
// sent may have been done, so it is sent to the next controller only when
// doing it twice is harmless: a create with an idempotency key. One
// without is not resent; the next request starts on the next controller.
func TestFailoverBrokenCreate(t *testing.T) {
	ctx := context.Background()
	srvA := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srvA.Close()
	fb := newFake()
	srvB := httptest.NewServer(fb)
	defer srvB.Close()
	c, _ := New(srvA.URL+","+srvB.URL, "tok")
	_, err := c.CreateReservation(ctx, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 1})
	var ue *UnreachableError
	if !asUnreachable(err, &ue) || ue.URL != srvA.URL {
		t.Fatalf("a create without a key whose connection broke: %v, want unreachable at %s", err, srvA.URL)
	}
	if n := fb.count("POST", "/api/v1/reservations"); n != 0 {
		t.Fatalf("the create without a key was sent to the next controller too (%d)", n)
	}
	if _, err := c.Whoami(ctx); err != nil || fb.count("GET", "/api/v1/whoami") != 1 {
		t.Fatalf("the next request did not start on the next controller: %v", err)
	}

	c, _ = New(srvA.URL+","+srvB.URL, "tok")
	if _, err := c.CreateReservation(ctx, apiv1.ReservationRequest{From: "a1", To: "b1", Bandwidth: 1, IdempotencyKey: "k"}); err != nil {
		t.Fatalf("a create with a key whose connection broke: %v", err)
	}
	if n := fb.count("POST", "/api/v1/reservations"); n != 1 {
		t.Fatalf("the next controller got %d creates", n)
	}
	if k := fb.last().Body["idempotency_key"]; k != "k" {
		t.Errorf("resent with key %v", k)
	}
}

func asUnreachable(err error, ue **UnreachableError) bool {
	u, ok := err.(*UnreachableError)
	*ue = u
	return ok
}

// TestFollowEventsFailover: a followed stream whose controller dies is
// resumed on the one that took over, after the last event read.
func TestFollowEventsFailover(t *testing.T) {
	stream := func(seq int, lastID *string, mu *sync.Mutex) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/events" {
				standbyAnswer(w, r)
				return
			}
			mu.Lock()
			*lastID = r.Header.Get("Last-Event-ID")
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: reservation\nid: %d\ndata: {\"seq\":%d,\"kind\":\"reservation\"}\n\n", seq, seq)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}
	var mu sync.Mutex
	var lastA, lastB string
	srvA := httptest.NewServer(stream(1, &lastA, &mu))
	srvB := httptest.NewServer(stream(2, &lastB, &mu))
	defer srvB.Close()
	c, _ := New(srvA.URL+","+srvB.URL, "tok")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []uint64
	done, err := c.FollowEvents(ctx, Follow{Persist: true, Wait: 50 * time.Millisecond, Event: func(ev apiv1.Event) (bool, error) {
		got = append(got, ev.Seq)
		if ev.Seq == 1 {
			// The leader dies.
			go func() { srvA.CloseClientConnections(); srvA.Close() }()
		}
		return ev.Seq == 2, nil
	}})
	if !done || err != nil {
		t.Fatalf("follow: %v %v, events %v", done, err, got)
	}
	mu.Lock()
	defer mu.Unlock()
	if lastB != "1" {
		t.Errorf("resumed on the new leader after %q, want 1", lastB)
	}
}
