package emu

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/topology"
)

// newControlEmulator returns an emulator whose pipes have no devices (so
// no root is needed) and a client talking to it over a real unix socket.
func newControlEmulator(t *testing.T) (*Emulator, *Client, string) {
	t.Helper()
	e := New(slog.New(slog.DiscardHandler))
	t.Cleanup(func() { e.Close() })
	e.mu.Lock()
	for _, s := range []PipeSpec{
		{Link: "wan", From: "ra", To: "rb", Params: Params{Delay: 10 * time.Millisecond}},
		{Link: "wan", From: "rb", To: "ra", Params: Params{Delay: 10 * time.Millisecond}},
		{Link: "lan", From: "h1", To: "ra"},
	} {
		if err := e.addPipe(s, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.addPipe(PipeSpec{Link: "wan", From: "ra", To: "rb"}, nil, nil); err == nil {
		t.Error("a second pipe for the same direction was accepted")
	}
	e.mu.Unlock()

	sock := filepath.Join(t.TempDir(), "emu.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return e, c, sock
}

func TestControl(t *testing.T) {
	_, c, _ := newControlEmulator(t)
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 3 || st[0].Link != "lan" || st[1].From != "ra" || st[2].From != "rb" || st[1].Params.Delay != 10*time.Millisecond {
		t.Fatalf("status %+v", st)
	}

	p := Params{Delay: 25 * time.Millisecond, Jitter: time.Millisecond, Loss: topology.Loss{Model: topology.LossGilbertElliott, P: 0.01, R: 0.2, H: 0.5}}
	if err := c.Set("wan", "rb", p); err != nil {
		t.Fatal(err)
	}
	st, _ = c.Status()
	if st[2].Params != p || st[1].Params.Delay != 10*time.Millisecond {
		t.Errorf("after set of wan from rb: %+v", st)
	}
	if err := c.Set("wan", "", Params{Down: true}); err != nil {
		t.Fatal(err)
	}
	st, _ = c.Status()
	if !st[1].Params.Down || !st[2].Params.Down || st[0].Params.Down {
		t.Errorf("after set of both directions of wan: %+v", st)
	}
	if err := c.Set("wan", "", Params{Blackhole: true}); err != nil {
		t.Fatal(err)
	}
	st, _ = c.Status()
	if !st[1].Params.Blackhole || !st[2].Params.Blackhole || st[1].Params.Down || st[0].Params.Blackhole {
		t.Errorf("after blackhole of both directions of wan: %+v", st)
	}

	for _, tc := range []struct {
		link, from string
		p          Params
		want       string
	}{
		{"nope", "", Params{}, `unknown link "nope"`},
		{"wan", "h1", Params{}, `link "wan" has no direction from "h1"`},
		{"wan", "", Params{Delay: -1}, "negative delay"},
		{"wan", "", Params{Loss: topology.Loss{Model: topology.LossRandom, Rate: 1.5}}, "not a probability"},
		{"wan", "", Params{Loss: topology.Loss{Model: "netem"}}, `unknown loss model "netem"`},
		{"wan", "", Params{Delay: time.Hour}, "more than"},
		{"wan", "", Params{Down: true, Blackhole: true}, "down and blackhole at once"},
	} {
		if err := c.Set(tc.link, tc.from, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("set %s from %q %+v: %v, want an error containing %q", tc.link, tc.from, tc.p, err, tc.want)
		}
	}
}

// TestControlWire speaks the protocol by hand, as nc -U would.
func TestControlWire(t *testing.T) {
	e, _, sock := newControlEmulator(t)
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	ask := func(line string) map[string]any {
		t.Helper()
		if _, err := conn.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := rd.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(resp, &m); err != nil {
			t.Fatalf("%s: %v", resp, err)
		}
		return m
	}
	if m := ask(`{"op":"ping"}`); m["ok"] != true {
		t.Errorf("ping: %v", m)
	}
	if m := ask(`{"op":"set","link":"lan","params":{"delay":"1.5ms","jitter":250000,"loss":{"model":"random","rate":0.001}}}`); m["ok"] != true {
		t.Errorf("set: %v", m)
	}
	st := e.Stats()
	if p := st[0].Params; p.Delay != 1500*time.Microsecond || p.Jitter != 250*time.Microsecond || p.Loss.Rate != 0.001 {
		t.Errorf("params after set: %+v", p)
	}
	if m := ask(`{"op":"set","link":"lan","params":{"delay":"1.5ms","blackhole":true}}`); m["ok"] != true {
		t.Errorf("set blackhole: %v", m)
	}
	if p := e.Stats()[0].Params; !p.Blackhole || p.Down || p.Delay != 1500*time.Microsecond {
		t.Errorf("params after set of blackhole: %+v", p)
	}
	if m := ask(`{"op":"status"}`); !strings.Contains(fmt.Sprint(m), "blackhole:true") || !strings.Contains(fmt.Sprint(m), "drops_blackhole:0") {
		t.Errorf("status after blackhole: %v", m)
	}
	if m := ask(`{"op":"set","link":"lan","params":{"delay":"1.5ms","jitter":250000,"loss":{"model":"random","rate":0.001}}}`); m["ok"] != true {
		t.Errorf("set: %v", m)
	}
	for _, bad := range []string{`{"op":"frob"}`, `{"op":"set","link":"lan","params":{"down":true,"blackhole":true}}`, `not json`, `{"op":"set","link":"lan"}`, `{"op":"set","link":"lan","params":{"delay":"soon"}}`} {
		if m := ask(bad); m["ok"] != false || m["error"] == "" {
			t.Errorf("%s: %v", bad, m)
		}
	}
	m := ask(`{"op":"status"}`)
	pipes, _ := m["pipes"].([]any)
	if len(pipes) != 3 {
		t.Fatalf("status: %v", m)
	}
	lan := pipes[0].(map[string]any)
	if lan["link"] != "lan" || lan["params"].(map[string]any)["delay"] != "1.5ms" {
		t.Errorf("status of lan: %v", lan)
	}
}

func TestParamsJSON(t *testing.T) {
	p := Params{Delay: 20 * time.Millisecond, Jitter: 1500 * time.Microsecond, Reorder: true, Loss: topology.Loss{Model: topology.LossRandom, Rate: 0.01}, Duplicate: 0.005, Down: true}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"delay":"20ms","jitter":"1.5ms","reorder":true,"loss":{"model":"random","rate":0.01},"duplicate":0.005,"down":true}`; string(b) != want {
		t.Errorf("marshal: %s, want %s", b, want)
	}
	var q Params
	if err := json.Unmarshal(b, &q); err != nil || q != p {
		t.Errorf("round trip: %+v, %v", q, err)
	}
	bh := Params{Delay: 5 * time.Millisecond, Blackhole: true}
	if b, err = json.Marshal(bh); err != nil {
		t.Fatal(err)
	}
	if want := `{"delay":"5ms","jitter":"0s","loss":{},"blackhole":true}`; string(b) != want {
		t.Errorf("marshal: %s, want %s", b, want)
	}
	q = Params{}
	if err := json.Unmarshal(b, &q); err != nil || q != bh {
		t.Errorf("round trip of a blackhole: %+v, %v", q, err)
	}
	if err := json.Unmarshal([]byte(`{"delay":20000000}`), &q); err != nil || q.Delay != 20*time.Millisecond || q.Down || q.Duplicate != 0 {
		t.Errorf("nanoseconds: %+v, %v", q, err)
	}
	for _, d := range []float64{-0.1, 1.5, math.NaN()} {
		if err := (Params{Duplicate: d}).Validate(); err == nil {
			t.Errorf("duplicate %v: valid", d)
		}
	}
	if err := (Params{Duplicate: 1}).Validate(); err != nil {
		t.Errorf("duplicate 1: %v", err)
	}
}

func TestServeStops(t *testing.T) {
	e := New(nil)
	defer e.Close()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, l) }()
	c, err := Dial(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(time.Minute): // bounds a hang
		t.Fatal("Serve did not return after its context ended (an idle connection kept it)")
	}
	if err := c.Ping(); err == nil {
		t.Error("a connection outlived Serve")
	}
}
