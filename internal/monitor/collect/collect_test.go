package collect

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/lightpath/lightpath/internal/monitor"
)

const procStat = `cpu  10132153 290696 3084719 46828483 16683 0 25195 0 175628 0
cpu0 1393280 32966 572056 13343292 6130 0 17875 0 23933 0
cpu1 1335530 20180 574290 13418185 2856 0 4035 0 13291 0
intr 199292311 57 0 0
ctxt 17282936
btime 1419269744
`

const procStatOld = `cpu  100 200 300 400
cpu0 100 200 300 400
`

const meminfo = `MemTotal:       15666184 kB
MemFree:          440324 kB
MemAvailable:    5283372 kB
Buffers:         1020128 kB
Cached:          8779876 kB
HugePages_Total:       0
`

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    map[string]float64
		cpus    int
		wantErr bool
	}{
		{"modern", procStat, map[string]float64{"user": 101321.53, "nice": 2906.96, "system": 30847.19, "idle": 468284.83, "iowait": 166.83, "irq": 0, "softirq": 251.95, "steal": 0}, 2, false},
		{"old kernel", procStatOld, map[string]float64{"user": 1, "nice": 2, "system": 3, "idle": 4}, 1, false},
		{"no cpu line", "intr 1 2 3\n", nil, 0, true},
		{"garbage", "cpu  1 2 x 4\n", nil, 0, true},
		{"short", "cpu 1 2\n", nil, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ParseProcStat([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if st.CPUs != tc.cpus {
				t.Errorf("cpus %d, want %d", st.CPUs, tc.cpus)
			}
			if len(st.Seconds) != len(tc.want) {
				t.Errorf("modes %v, want %v", st.Seconds, tc.want)
			}
			for k, v := range tc.want {
				if math.Abs(st.Seconds[k]-v) > 1e-6 {
					t.Errorf("%s = %v, want %v", k, st.Seconds[k], v)
				}
			}
		})
	}
}

func TestParseMeminfo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    map[string]float64
		wantErr bool
	}{
		{"ok", meminfo, map[string]float64{"MemTotal": 15666184 * 1024, "MemAvailable": 5283372 * 1024, "HugePages_Total": 0}, false},
		{"no total", "MemFree: 1 kB\n", nil, true},
		{"bad number", "MemTotal: x kB\n", nil, true},
		{"no value", "MemTotal:\n", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMeminfo([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			for k, v := range tc.want {
				if m[k] != v {
					t.Errorf("%s = %v, want %v", k, m[k], v)
				}
			}
		})
	}
}

func TestParseLoadavg(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    [3]float64
		wantErr bool
	}{
		{"ok", "0.21 0.37 0.39 1/719 19737\n", [3]float64{0.21, 0.37, 0.39}, false},
		{"short", "0.21 0.37\n", [3]float64{}, true},
		{"bad", "a b c\n", [3]float64{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLoadavg([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		rtts     []time.Duration
		sent     int
		wantRTT  time.Duration
		wantLoss float64
	}{
		{"all back, odd", []time.Duration{3 * ms, 1 * ms, 2 * ms, 9 * ms, 2 * ms}, 5, 2 * ms, 0},
		{"even", []time.Duration{4 * ms, 2 * ms}, 5, 3 * ms, 0.6},
		{"none", nil, 5, 0, 1},
		{"nothing sent", nil, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rtt, loss := Summarize(tc.rtts, tc.sent)
			if rtt != tc.wantRTT || math.Abs(loss-tc.wantLoss) > 1e-9 {
				t.Errorf("got %v %v, want %v %v", rtt, loss, tc.wantRTT, tc.wantLoss)
			}
		})
	}
}

func TestClassLabels(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    ClassStats
		want string
	}{
		{"link", ClassStats{Major: 1, Minor: 1}, `{class="1:1",device="ra-wan",kind="link",link="wan"}`},
		{"unreserved", ClassStats{Major: 1, Minor: 2}, `{class="1:2",device="ra-wan",kind="unreserved",link="wan"}`},
		{"dscp 5", ClassStats{Major: 1, Minor: 0x105}, `{class="1:105",device="ra-wan",dscp="5",kind="reservation",link="wan"}`},
		{"dscp 63", ClassStats{Major: 1, Minor: 0x13f}, `{class="1:13f",device="ra-wan",dscp="63",kind="reservation",link="wan"}`},
		{"beyond the pool", ClassStats{Major: 1, Minor: 0x140}, `{class="1:140",device="ra-wan",kind="other",link="wan"}`},
		{"another root", ClassStats{Major: 2, Minor: 0x105}, `{class="2:105",device="ra-wan",kind="other",link="wan"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classLabels("ra-wan", "wan", tc.c).String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTCPPoints(t *testing.T) {
	flows := []FlowMatch{{Reservation: "r1", DSCP: 12, Spec: "tcp 198.18.1.2 > 198.18.2.2:7070", Ports: []int{7070}}}
	ap := netip.MustParseAddrPort
	socks := []TCPSock{
		{Local: ap("198.18.1.2:40000"), Remote: ap("198.18.2.2:7070"), RTT: 0.02, Cwnd: 10, PacingRate: 1000, DeliveryRate: 500},
		{Local: ap("198.18.2.2:7070"), Remote: ap("198.18.1.2:40000"), RTT: 0.03, Cwnd: 20, PacingRate: math.MaxUint64},
		{Local: ap("198.18.1.2:40001"), Remote: ap("198.18.2.2:22"), RTT: 0.01},
	}
	got := map[string]float64{}
	tcpPoints(flows, socks, func(p monitor.Point) { got[monitor.Key(p.Name, p.Labels)] = p.V })
	for k, v := range map[string]float64{
		`lightpath_tcp_rtt_seconds{dscp="12",flow="198.18.1.2:40000>198.18.2.2:7070",side="client"}`:                    0.02,
		`lightpath_tcp_rtt_seconds{dscp="12",flow="198.18.1.2:40000>198.18.2.2:7070",side="server"}`:                    0.03,
		`lightpath_tcp_cwnd_segments{dscp="12",flow="198.18.1.2:40000>198.18.2.2:7070",side="server"}`:                  20,
		`lightpath_tcp_pacing_rate_bytes_per_second{dscp="12",flow="198.18.1.2:40000>198.18.2.2:7070",side="client"}`:   1000,
		`lightpath_tcp_pacing_rate_bytes_per_second{dscp="12",flow="198.18.1.2:40000>198.18.2.2:7070",side="server"}`:   math.Inf(1),
		`lightpath_tcp_delivery_rate_bytes_per_second{dscp="12",flow="198.18.1.2:40000>198.18.2.2:7070",side="client"}`: 500,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != 16 {
		t.Errorf("%d series, want 16 (two sockets of the flow, eight each; the ssh one left out)", len(got))
	}
}

// fake is a collector a test controls.
type fake struct {
	name string
	err  error
	ran  bool
	hang bool
}

func (f *fake) Name() string { return f.name }
func (f *fake) Collect(ctx context.Context, emit func(monitor.Point)) error {
	f.ran = true
	if f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	emit(monitor.Point{Name: "lightpath_fake_" + f.name, V: 1})
	return f.err
}

func fakeDef(f *fake, on bool) Definition {
	return Definition{Collector: f, Help: "a fake", Enabled: on, Meta: map[string]monitor.Meta{"lightpath_fake_" + f.name: gauge("fake")}}
}

// logCounter counts log records at warn and above.
type logCounter struct {
	mu    sync.Mutex
	warns int
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		l.mu.Lock()
		l.warns++
		l.mu.Unlock()
	}
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

func TestRegistry(t *testing.T) {
	lc := &logCounter{}
	ok, bad, off, slow := &fake{name: "ok"}, &fake{name: "bad", err: errors.New("broken")}, &fake{name: "off"}, &fake{name: "slow", hang: true}
	// The timeout cuts the hanging collector; it is long enough that the
	// others, which return at once, never meet it on a busy machine.
	r := &Registry{log: slog.New(lc), Timeout: time.Second}
	for _, d := range []Definition{fakeDef(ok, true), fakeDef(bad, true), fakeDef(off, false), fakeDef(slow, true)} {
		r.add(d)
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	r.Flags(fs)
	if err := fs.Parse([]string{"--collector.off=false"}); err != nil {
		t.Fatal(err)
	}
	if got := r.Enabled(); !slices.Equal(got, []string{"ok", "bad", "slow"}) {
		t.Errorf("enabled %v", got)
	}
	now := time.UnixMilli(1_700_000_000_123)
	var g monitor.Group
	for range 3 {
		g = r.Collect(context.Background(), now)
	}
	if off.ran {
		t.Error("a disabled collector ran")
	}
	if g.T != now.UnixMilli() {
		t.Errorf("group stamped %d", g.T)
	}
	got := map[string]float64{}
	for _, p := range g.Points {
		got[monitor.Key(p.Name, p.Labels)] = p.V
	}
	for k, v := range map[string]float64{
		`lightpath_agent_collector_success{collector="ok"}`:   1,
		`lightpath_agent_collector_success{collector="bad"}`:  0,
		`lightpath_agent_collector_success{collector="slow"}`: 0,
		`lightpath_fake_ok{}`:                                 1,
		`lightpath_fake_bad{}`:                                1, // emitted before the error: kept
	} {
		if g, present := got[k]; !present || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, present, v)
		}
	}
	for _, c := range []string{"ok", "bad", "slow"} {
		if _, present := got[`lightpath_agent_collector_duration_seconds{collector="`+c+`"}`]; !present {
			t.Errorf("no duration for %s", c)
		}
	}
	if _, present := got[`lightpath_agent_collector_success{collector="off"}`]; present {
		t.Error("a disabled collector reported")
	}
	if lc.warns != 2 {
		t.Errorf("%d warnings over 3 rounds of 2 failing collectors, want 2 (once per change)", lc.warns)
	}
	bad.err = nil
	slow.hang = false // recovers (logged at info): the rounds below need not wait
	r.Collect(context.Background(), now)
	bad.err = errors.New("again")
	r.Collect(context.Background(), now)
	if lc.warns != 3 {
		t.Errorf("%d warnings, want 3 after recovering and failing again", lc.warns)
	}
	checkGroup(t, r, g)
}

// checkGroup checks every point of g: a valid series, described by
// Meta, and no series twice.
func checkGroup(t *testing.T, r *Registry, g monitor.Group) {
	t.Helper()
	meta := r.Meta()
	seen := map[string]bool{}
	for _, p := range g.Points {
		if err := monitor.CheckSeries(p.Name, p.Labels); err != nil {
			t.Error(err)
		}
		m, ok := meta[p.Name]
		if !ok {
			t.Errorf("%s is not in Meta", p.Name)
		}
		if (m.Type == monitor.Counter) != strings.HasSuffix(p.Name, "_total") {
			t.Errorf("%s is a %s", p.Name, m.Type)
		}
		if p.Labels.Get("node") != "" {
			t.Errorf("%s has a node label", monitor.Key(p.Name, p.Labels))
		}
		k := monitor.Key(p.Name, p.Labels)
		if seen[k] {
			t.Errorf("%s twice", k)
		}
		seen[k] = true
	}
}

func TestBuiltinRegistry(t *testing.T) {
	r := NewRegistry(Env{Node: "ra"})
	defer r.Close()
	if got := r.names(); !slices.Equal(got, []string{"host", "interfaces", "htb", "tcp", "probe"}) {
		t.Errorf("collectors %v", got)
	}
	if got := r.Enabled(); !slices.Equal(got, []string{"host", "interfaces", "htb", "tcp"}) {
		t.Errorf("enabled outside a testbed without a topology: %v", got)
	}
	// A collector kept outside the package (the emulator's) joins through
	// a Maker, after the built-ins, made for the registry's Env, with its
	// own default, flag and series.
	var made Env
	extra := func(env Env) Definition { made = env; return fakeDef(&fake{name: "extra"}, env.Testbed != "") }
	r2 := NewRegistry(Env{Node: "ra", Testbed: "x"}, extra)
	defer r2.Close()
	if got := r2.Enabled(); !slices.Equal(got, []string{"host", "interfaces", "htb", "tcp", "extra"}) || made.Node != "ra" || made.Testbed != "x" {
		t.Errorf("enabled with a maker in a testbed: %v (made for %+v)", got, made)
	}
	if _, ok := r2.Meta()["lightpath_fake_extra"]; !ok {
		t.Error("the maker's series are not in Meta")
	}
	fs2 := pflag.NewFlagSet("t2", pflag.ContinueOnError)
	r2.Flags(fs2)
	if fs2.Lookup("collector.extra") == nil {
		t.Error("no flag for the maker's collector")
	}
	for name, m := range r.Meta() {
		if err := monitor.CheckSeries(name, nil); err != nil || !strings.HasPrefix(name, "lightpath_") || m.Help == "" {
			t.Errorf("%s: %v, help %q", name, err, m.Help)
		}
		if (m.Type == monitor.Counter) != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is a %s", name, m.Type)
		}
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	r.Flags(fs)
	for _, n := range r.names() {
		if f := fs.Lookup("collector." + n); f == nil || f.Usage == "" {
			t.Errorf("no flag for %s", n)
		}
	}
	// host reads the real /proc (where there is one); tcp without flows
	// reports nothing and succeeds.
	g := r.Collect(context.Background(), time.Now())
	checkGroup(t, r, g)
	if runtime.GOOS == "linux" {
		got := map[string]float64{}
		for _, p := range g.Points {
			got[monitor.Key(p.Name, p.Labels)] = p.V
		}
		for _, c := range []string{"host", "tcp"} {
			if got[`lightpath_agent_collector_success{collector="`+c+`"}`] != 1 {
				t.Errorf("%s failed", c)
			}
		}
		if got[`lightpath_node_cpus{}`] < 1 || got[`lightpath_node_memory_bytes{kind="total"}`] <= 0 {
			t.Errorf("host: %v", got)
		}
	}
}
