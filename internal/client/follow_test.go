package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
)

// sseServer serves the event stream in rounds: round n (from 0) checks the
// Last-Event-ID the client resumed after, sends one event about
// reservation "r1" and one about "other" (ids 2n+1, 2n+2), then hangs up;
// status, when set for a round, answers that round with it instead.
type sseServer struct {
	mu      sync.Mutex
	round   int
	lastIDs []string
	status  map[int]int
}

func (s *sseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := s.round
	s.round++
	s.lastIDs = append(s.lastIDs, r.Header.Get("Last-Event-ID"))
	st := s.status[n]
	s.mu.Unlock()
	if st != 0 {
		http.Error(w, `{"error":{"code":"x","message":"status `+fmt.Sprint(st)+`"}}`, st)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "id: %d\nevent: reservation\ndata: {\"seq\":%d,\"reservation\":{\"id\":\"other\"}}\n\n", 2*n+1, 2*n+1)
	fmt.Fprintf(w, "id: %d\nevent: reservation\ndata: {\"seq\":%d,\"reservation\":{\"id\":\"r1\"}}\n\n", 2*n+2, 2*n+2)
	io.WriteString(w, ": bye\n\n")
}

// TestFollowEventsResumes: a lost stream is resumed after the last event
// read, Opened runs again (resumed), the loss is told to Lost, and only
// the followed reservation's events reach Event; a 503 on reopening is
// retried, stop ends the following with the callback's error.
func TestFollowEventsResumes(t *testing.T) {
	s := &sseServer{status: map[int]int{1: http.StatusServiceUnavailable}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, _ := New(srv.URL, "tok")
	var opened []bool
	var seqs []uint64
	lost := 0
	done := errors.New("done")
	stopped, err := c.FollowEvents(context.Background(), Follow{
		ID:     "r1",
		Wait:   time.Millisecond,
		Opened: func(resumed bool) (bool, error) { opened = append(opened, resumed); return false, nil },
		Event: func(ev apiv1.Event) (bool, error) {
			seqs = append(seqs, ev.Seq)
			return len(seqs) == 2, done
		},
		Lost: func(error) { lost++ },
	})
	if !stopped || err != done {
		t.Fatalf("FollowEvents = %v, %v", stopped, err)
	}
	if fmt.Sprint(seqs) != "[2 6]" || fmt.Sprint(opened) != "[false true]" || lost != 1 {
		t.Fatalf("events %v, opened %v, lost %d", seqs, opened, lost)
	}
	if fmt.Sprint(s.lastIDs) != "[ 2 2]" {
		t.Fatalf("Last-Event-IDs sent: %q", s.lastIDs)
	}
}

// TestFollowEventsFails: without Persist a refused first opening, or a
// reopening refused for good, ends the following with the error; with
// Persist they are retried until ctx ends.
func TestFollowEventsFails(t *testing.T) {
	s := &sseServer{status: map[int]int{0: http.StatusUnauthorized}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, _ := New(srv.URL, "tok")
	stopped, err := c.FollowEvents(context.Background(), Follow{Wait: time.Millisecond})
	var ae *APIError
	if stopped || !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("refused at first: %v, %v", stopped, err)
	}

	s = &sseServer{status: map[int]int{1: http.StatusForbidden}}
	srv2 := httptest.NewServer(s)
	defer srv2.Close()
	c, _ = New(srv2.URL, "tok")
	stopped, err = c.FollowEvents(context.Background(), Follow{Wait: time.Millisecond})
	if stopped || !errors.As(err, &ae) || ae.Status != 403 {
		t.Fatalf("refused on resuming: %v, %v", stopped, err)
	}

	s = &sseServer{status: map[int]int{0: 401, 1: 403}}
	srv3 := httptest.NewServer(s)
	defer srv3.Close()
	c, _ = New(srv3.URL, "tok")
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	stopped, err = c.FollowEvents(ctx, Follow{Persist: true, Wait: time.Millisecond, Event: func(apiv1.Event) (bool, error) {
		if n++; n == 4 {
			cancel()
		}
		return false, nil
	}})
	if stopped || err != nil || n != 4 {
		t.Fatalf("persisting: %v, %v after %d events", stopped, err, n)
	}
}
