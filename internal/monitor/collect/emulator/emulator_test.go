package emulator

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/collect"
	"github.com/lightpath/lightpath/internal/testbed/emu"
	"github.com/lightpath/lightpath/internal/topology"
)

// TestMaker: the emulator's collector joins an agent's registry as a
// Maker, on by default in a testbed and off outside one, with its flag
// and its series described.
func TestMaker(t *testing.T) {
	for _, tc := range []struct {
		testbed string
		on      bool
	}{{"x", true}, {"", false}} {
		r := collect.NewRegistry(collect.Env{Node: "ra", Testbed: tc.testbed}, New)
		if got := slices.Contains(r.Enabled(), "emulator"); got != tc.on {
			t.Errorf("testbed %q: emulator enabled %v, want %v (%v)", tc.testbed, got, tc.on, r.Enabled())
		}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		r.Flags(fs)
		if f := fs.Lookup("collector.emulator"); f == nil || f.Usage == "" {
			t.Errorf("testbed %q: no --collector.emulator", tc.testbed)
		}
		n := 0
		for name, m := range r.Meta() {
			if !strings.HasPrefix(name, "lightpath_emulator_") {
				continue
			}
			n++
			if err := monitor.CheckSeries(name, nil); err != nil || m.Help == "" || (m.Type == monitor.Counter) != strings.HasSuffix(name, "_total") {
				t.Errorf("%s: %v, %s, help %q", name, err, m.Type, m.Help)
			}
		}
		if n != 12 {
			t.Errorf("testbed %q: %d emulator series described, want 12", tc.testbed, n)
		}
		r.Close()
	}
}

func TestPipePoints(t *testing.T) {
	pipes := []emu.PipeStats{
		{Link: "wan", From: "ra", To: "rb", BytesIn: 100, PacketsIn: 2, DropsLoss: 3, DropsDown: 4, QueuedBytes: 50,
			Params: emu.Params{Delay: 20 * time.Millisecond, Loss: topology.Loss{Model: topology.LossRandom, Rate: 0.01}, Down: true}},
		{Link: "wan", From: "rb", To: "ra", BytesIn: 999},
		{Link: "ded", From: "ra", To: "rb", DropsBlackhole: 7, Params: emu.Params{Blackhole: true}},
	}
	got := map[string]float64{}
	pipePoints("ra", pipes, func(p monitor.Point) { got[monitor.Key(p.Name, p.Labels)] = p.V })
	for k, v := range map[string]float64{
		`lightpath_emulator_in_bytes_total{link="wan",to="rb"}`:                100,
		`lightpath_emulator_drops_total{cause="loss",link="wan",to="rb"}`:      3,
		`lightpath_emulator_drops_total{cause="down",link="wan",to="rb"}`:      4,
		`lightpath_emulator_drops_total{cause="queue",link="wan",to="rb"}`:     0,
		`lightpath_emulator_queued_bytes{link="wan",to="rb"}`:                  50,
		`lightpath_emulator_delay_seconds{link="wan",to="rb"}`:                 0.02,
		`lightpath_emulator_loss_ratio{link="wan",to="rb"}`:                    0.01,
		`lightpath_emulator_down{link="wan",to="rb"}`:                          1,
		`lightpath_emulator_blackhole{link="wan",to="rb"}`:                     0,
		`lightpath_emulator_blackhole{link="ded",to="rb"}`:                     1,
		`lightpath_emulator_down{link="ded",to="rb"}`:                          0,
		`lightpath_emulator_drops_total{cause="blackhole",link="ded",to="rb"}`: 7,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if strings.Contains(k, `to="ra"`) {
			t.Errorf("pipe from another node reported: %s", k)
		}
	}
}

// fakeEmulator answers the emulator's JSON line protocol on a unix socket
// with canned pipes, as the daemon would (the real one needs TUN devices,
// and root, to hold pipes).
func fakeEmulator(t *testing.T, pipes []emu.PipeStats) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "emulator.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				sc := bufio.NewScanner(c)
				enc := json.NewEncoder(c)
				for sc.Scan() {
					var req emu.Request
					if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
						enc.Encode(emu.Response{Error: err.Error()})
						continue
					}
					switch req.Op {
					case "status":
						enc.Encode(emu.Response{OK: true, Pipes: pipes})
					default:
						enc.Encode(emu.Response{Error: "unknown op"})
					}
				}
			}()
		}
	}()
	return sock
}

func TestEmulatorCollector(t *testing.T) {
	sock := fakeEmulator(t, []emu.PipeStats{
		{Link: "wan", From: "ra", To: "rb", BytesIn: 1234, DropsQueue: 7},
		{Link: "wan", From: "rb", To: "ra", BytesIn: 1},
	})
	c := &emulatorCollector{env: collect.Env{Node: "ra", Testbed: "x"}, sock: sock}
	got := map[string]float64{}
	if err := c.Collect(context.Background(), func(p monitor.Point) { got[monitor.Key(p.Name, p.Labels)] = p.V }); err != nil {
		t.Fatal(err)
	}
	if got[`lightpath_emulator_in_bytes_total{link="wan",to="rb"}`] != 1234 || got[`lightpath_emulator_drops_total{cause="queue",link="wan",to="rb"}`] != 7 {
		t.Errorf("got %v", got)
	}
	c.sock = filepath.Join(t.TempDir(), "none.sock")
	if err := c.Collect(context.Background(), func(monitor.Point) {}); err == nil {
		t.Error("no emulator, no error")
	}
}
