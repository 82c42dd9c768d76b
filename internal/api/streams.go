package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/reserve"
)

// DefaultMaxStreams is how many streams (event and live) one identity may
// hold open at once: a few browser tabs and a `watch` or two.
const DefaultMaxStreams = 8

// tokenRecheck is how often an open stream checks its token again, which
// catches its expiry and a revocation made by another process; a
// revocation in this controller ends it at once.
const tokenRecheck = time.Second

// streamTokenPaths are the routes that take the token from the query too:
// EventSource cannot send headers.
var streamTokenPaths = map[string]bool{"/api/v1/events": true, "/api/v1/metrics/live": true}

// requestToken is the token a request for the route at path came with.
func requestToken(r *http.Request, path string) string {
	tok := bearer(r)
	if tok == "" && streamTokenPaths[path] {
		tok = r.URL.Query().Get("access_token")
	}
	return tok
}

// streamSlots counts the open streams of each identity.
type streamSlots struct {
	mu   sync.Mutex
	max  int
	open map[string]int
}

func (sl *streamSlots) take(who string) error {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	max := sl.max
	if max <= 0 {
		max = DefaultMaxStreams
	}
	if sl.open[who] >= max {
		return &httpError{status: http.StatusTooManyRequests, code: apiv1.CodeTooMany,
			msg: fmt.Sprintf("%s already holds %d open streams (events and live), the most one user may: close one (a browser tab, a watch) and try again", who, max)}
	}
	if sl.open == nil {
		sl.open = map[string]int{}
	}
	sl.open[who]++
	return nil
}

func (sl *streamSlots) give(who string) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.open[who]--; sl.open[who] <= 0 {
		delete(sl.open, who)
	}
}

// stream is one open server-sent event stream. Its context ends when the
// client goes away or when the token it was opened with stops working
// (revoked, expired, its user gone); each write gets its own deadline so
// that the server's write timeout does not cut a long stream, and a
// client that stops reading is dropped.
type stream struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	w      http.ResponseWriter
	rc     *http.ResponseController
	write  time.Duration
	done   func()
}

// errTokenEnded is the cause of a stream's end when its token stopped
// working; it wraps the reason Authenticate gave.
type errTokenEnded struct{ err error }

func (e errTokenEnded) Error() string { return e.err.Error() }
func (e errTokenEnded) Unwrap() error { return e.err }

// openStream takes one of a's stream slots and starts watching the
// request's token; the caller defers close. Nothing is written yet.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request, a controller.Actor, path string) (*stream, error) {
	// Agents are exempt: an admin makes their tokens, and the agents of a
	// testbed may share one (one stream per node); --max-conns bounds them.
	counted := a.Role != reserve.RoleAgent
	if counted {
		if err := s.slots.take(a.Name); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	st := &stream{ctx: ctx, cancel: cancel, w: w, rc: http.NewResponseController(w), write: s.writeTimeout}
	// A stream reads nothing more: no read deadline may end it (the
	// server's read timeout would otherwise cancel it once it passed).
	st.rc.SetReadDeadline(time.Time{})
	tok := requestToken(r, path)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(tokenRecheck)
		defer tick.Stop()
		for {
			changed := s.c.TokensChanged()
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-tick.C:
			}
			if _, err := s.c.Authenticate(ctx, tok); err != nil {
				if ctx.Err() == nil && errors.Is(err, controller.ErrUnauthorized) {
					cancel(errTokenEnded{err})
					return
				}
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("check a stream's token", "user", a.Name, "err", err)
			}
		}
	}()
	st.done = func() {
		cancel(nil)
		<-watched
		if counted {
			s.slots.give(a.Name)
		}
	}
	return st, nil
}

// send writes one frame and flushes it, within the write timeout.
func (st *stream) send(format string, args ...any) error {
	if st.write > 0 {
		st.rc.SetWriteDeadline(time.Now().Add(st.write))
	}
	if _, err := fmt.Fprintf(st.w, format, args...); err != nil {
		return err
	}
	return st.rc.Flush()
}

// close ends the stream: when its token ended it, the last frame says so
// ("event: end" with the reason) before the response ends.
func (st *stream) close() {
	var te errTokenEnded
	if errors.As(context.Cause(st.ctx), &te) {
		b, _ := json.Marshal(apiv1.StreamEnd{Reason: te.Error()})
		st.send("event: end\ndata: %s\n\n", b)
	}
	st.done()
}
