package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/lightpath/lightpath/internal/apiv1"
)

// EventStream is an open GET /api/v1/events: C delivers the events in
// order and is closed when the stream ends; Err then says why (nil after
// Close or when the context was cancelled).
type EventStream struct {
	C <-chan apiv1.Event

	cancel context.CancelFunc
	mu     sync.Mutex
	err    error
	lastID string
}

// Err is why the stream ended: nil while it runs, after Close, or when the
// context passed to Events was cancelled.
func (s *EventStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LastEventID is the id: of the last event read, to resume from with
// EventsAfter; empty when the controller sends none.
func (s *EventStream) LastEventID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastID
}

// Close ends the stream; C is closed soon after.
func (s *EventStream) Close() { s.cancel() }

// Events opens the event stream: every change of the reservations (and
// exclusive holds) the caller may see, or of reservation id alone when id
// is not empty. Errors connecting (an unknown token, no controller) are
// returned here; errors later end the stream (see EventStream.Err).
func (c *Client) Events(ctx context.Context, id string) (*EventStream, error) {
	return c.EventsAfter(ctx, id, "")
}

// EventsAfter is Events resuming after the event whose id: was lastID
// (sent as Last-Event-ID), so that a client that lost its connection
// misses nothing the controller still remembers.
func (c *Client) EventsAfter(ctx context.Context, id, lastID string) (*EventStream, error) {
	q := url.Values{}
	setString(q, "id", id)
	sctx, cancel := context.WithCancel(ctx)
	resp, at, err := c.roundTrip(sctx, http.MethodGet, true, func(base string) (*http.Request, error) {
		req, err := c.newRequest(sctx, base, http.MethodGet, "/events", q, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Cache-Control", "no-cache")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		return req, nil
	})
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		cancel()
		return nil, decodeError(resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("event stream: the controller answered %q, not text/event-stream", ct)
	}
	ch := make(chan apiv1.Event)
	s := &EventStream{C: ch, cancel: cancel, lastID: lastID}
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		err := readSSE(resp.Body, func(f sseFrame) error {
			if f.id != "" {
				s.mu.Lock()
				s.lastID = f.id
				s.mu.Unlock()
			}
			if f.data == "" {
				return nil // a comment or keep-alive
			}
			if f.event == "end" {
				// The token the stream was opened with stopped working.
				var e apiv1.StreamEnd
				json.Unmarshal([]byte(f.data), &e)
				return &StreamEndedError{Reason: e.Reason}
			}
			var ev apiv1.Event
			if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
				return fmt.Errorf("event stream: decode %s event: %w", f.event, err)
			}
			if ev.Kind == "" {
				ev.Kind = f.event
			}
			select {
			case ch <- ev:
				return nil
			case <-sctx.Done():
				return sctx.Err()
			}
		})
		var se *StreamEndedError
		if sctx.Err() != nil {
			err = nil // closed or cancelled by the caller
		} else if errors.As(err, &se) {
			err = se
		} else if err == nil {
			err = &UnreachableError{URL: at, Err: errors.New("the controller closed the event stream")}
		} else if !strings.HasPrefix(err.Error(), "event stream:") {
			err = &UnreachableError{URL: at, Err: fmt.Errorf("event stream: %w", err)}
		}
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}()
	return s, nil
}

// StreamEndedError is a stream the controller ended because the token it
// was opened with stopped working (revoked, expired): opening it again
// with that token cannot succeed, so it is not to be resumed.
type StreamEndedError struct{ Reason string }

func (e *StreamEndedError) Error() string {
	return "the controller ended the event stream: " + e.Reason
}

// sseFrame is one dispatched server-sent event.
type sseFrame struct {
	event, data, id string
}

// readSSE reads server-sent events (the text/event-stream format of the
// HTML standard) and calls fn for each one dispatched: "event:", "data:"
// (joined with newlines when repeated), "id:" and "retry:" fields, comments
// starting with ":", a blank line ending each event. It returns nil at the
// end of the input.
func readSSE(r io.Reader, fn func(sseFrame) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var f sseFrame
	var data []string
	hasData := false
	for {
		line, err := br.ReadString('\n')
		if err != nil && !(errors.Is(err, io.EOF) && line != "") {
			if errors.Is(err, io.EOF) {
				return nil // an event not ended by a blank line is dropped, as the standard says
			}
			return err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if hasData {
				f.data = strings.Join(data, "\n")
				if f.event == "" {
					f.event = "message"
				}
				if err := fn(f); err != nil {
					return err
				}
			}
			f.event, f.data, data, hasData = "", "", nil, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			f.event = value
		case "data":
			data = append(data, value)
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				f.id = value
			}
		case "retry":
			_, _ = strconv.Atoi(value) // reconnection is the caller's choice
		}
	}
}
