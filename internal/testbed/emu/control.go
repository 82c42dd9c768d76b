package emu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Request is one line a client sends.
type Request struct {
	Op     string  `json:"op"` // "ping", "status" or "set"
	Link   string  `json:"link,omitempty"`
	From   string  `json:"from,omitempty"`
	Params *Params `json:"params,omitempty"`
}

// Response is one line the emulator answers.
type Response struct {
	OK    bool        `json:"ok"`
	Error string      `json:"error,omitempty"`
	Pipes []PipeStats `json:"pipes,omitempty"`
}

// maxLine bounds a request line: a set with its parameters is well under
// a kilobyte.
const maxLine = 64 << 10

// Serve answers control requests on l (a unix socket: a file, so the
// CLI reaches it from any namespace) until ctx is done, then closes l and every connection and returns nil; it
// returns an error if l fails otherwise.
//
// The protocol is JSON lines: one request per line and one response per
// line, in order, so that `nc -U` is a client:
//
//	{"op":"ping"}                                          → {"ok":true}
//	{"op":"status"}                                        → {"ok":true,"pipes":[PipeStats...]}
//	{"op":"set","link":"wan","from":"ra","params":{...}}   → {"ok":true}
//	anything that fails                                    → {"ok":false,"error":"unknown link \"wan\""}
//
// A "from" of "" (or none) sets both directions. Params are written as by
// Params.MarshalJSON: {"delay":"20ms","jitter":"1ms","reorder":false,
// "loss":{"model":"random","rate":0.01},"down":false}; delays may also be
// integer nanoseconds. A set replaces all parameters of the direction: to
// change one, read them with status first.
func (e *Emulator) Serve(ctx context.Context, l net.Listener) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	stop := context.AfterFunc(ctx, func() {
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept control connection: %w", err)
		}
		mu.Lock()
		if ctx.Err() != nil {
			mu.Unlock()
			c.Close()
			return nil
		}
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.serveConn(c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		}()
	}
}

func (e *Emulator) serveConn(c net.Conn) {
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), maxLine)
	enc := json.NewEncoder(c)
	for sc.Scan() {
		if err := enc.Encode(e.handle(sc.Bytes())); err != nil {
			return
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, net.ErrClosed) {
		e.log.Debug("control connection", "err", err)
	}
}

func (e *Emulator) handle(line []byte) Response {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return Response{Error: fmt.Sprintf("bad request: %v", err)}
	}
	switch req.Op {
	case "ping":
		return Response{OK: true}
	case "status":
		return Response{OK: true, Pipes: e.Stats()}
	case "set":
		if req.Params == nil {
			return Response{Error: "set: no params"}
		}
		if err := e.Set(req.Link, req.From, *req.Params); err != nil {
			return Response{Error: err.Error()}
		}
		e.log.Info("link set", "link", req.Link, "from", req.From, "params", *req.Params)
		return Response{OK: true}
	default:
		return Response{Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
}

// Client talks to an emulator's control socket. Its methods are safe for
// concurrent use (requests are serialised on one connection).
type Client struct {
	mu   sync.Mutex
	conn net.Conn
	rd   *bufio.Reader
}

// clientTimeout bounds one request: the emulator answers at once, so a
// silent socket means a wedged daemon, and the CLI should say so.
const clientTimeout = 10 * time.Second

// Dial connects to the control socket at sockPath.
func Dial(sockPath string) (*Client, error) {
	c, err := net.DialTimeout("unix", sockPath, clientTimeout)
	if err != nil {
		return nil, fmt.Errorf("dial emulator %s: %w", sockPath, err)
	}
	return &Client{conn: c, rd: bufio.NewReader(c)}, nil
}

func (c *Client) do(req Request) (Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := json.Marshal(req)
	if err != nil {
		return Response{}, err
	}
	if err := c.conn.SetDeadline(time.Now().Add(clientTimeout)); err != nil {
		return Response{}, fmt.Errorf("emulator %s: %w", req.Op, err)
	}
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		return Response{}, fmt.Errorf("emulator %s: %w", req.Op, err)
	}
	line, err := c.rd.ReadBytes('\n')
	if err != nil {
		return Response{}, fmt.Errorf("emulator %s: %w", req.Op, err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return Response{}, fmt.Errorf("emulator %s: bad response: %w", req.Op, err)
	}
	if !resp.OK {
		return resp, fmt.Errorf("emulator %s: %s", req.Op, resp.Error)
	}
	return resp, nil
}

// Ping checks that the emulator answers.
func (c *Client) Ping() error {
	_, err := c.do(Request{Op: "ping"})
	return err
}

// Status returns the counters and parameters of every pipe.
func (c *Client) Status() ([]PipeStats, error) {
	resp, err := c.do(Request{Op: "status"})
	return resp.Pipes, err
}

// Set replaces the parameters of the direction of link from node from,
// or of both directions when from is "".
func (c *Client) Set(link, from string, p Params) error {
	_, err := c.do(Request{Op: "set", Link: link, From: from, Params: &p})
	return err
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
