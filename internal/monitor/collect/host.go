package collect

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/lightpath/lightpath/internal/monitor"
)

// userHZ is the unit of /proc/stat's CPU times: USER_HZ is 100 on every
// Linux architecture Go supports (node_exporter assumes the same).
const userHZ = 100

// cpuModes are the columns of the cpu lines of /proc/stat, in order.
// guest and guest_nice are left out: the kernel counts them in user and
// nice already.
var cpuModes = []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}

// CPUStat is what the host collector takes from /proc/stat.
type CPUStat struct {
	Seconds map[string]float64 // by mode, summed over CPUs
	CPUs    int
}

// ParseProcStat reads the aggregate "cpu" line and counts the per-CPU
// lines of /proc/stat.
func ParseProcStat(data []byte) (CPUStat, error) {
	st := CPUStat{Seconds: map[string]float64{}}
	found := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			if _, err := strconv.Atoi(f[0][3:]); err == nil {
				st.CPUs++
			}
			continue
		}
		if len(f) < 5 {
			return CPUStat{}, fmt.Errorf("cpu line has %d fields, want at least 5", len(f))
		}
		for i, mode := range cpuModes {
			if i+1 >= len(f) {
				break // an old kernel without iowait, irq, ... columns
			}
			v, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return CPUStat{}, fmt.Errorf("cpu %s: %w", mode, err)
			}
			st.Seconds[mode] = float64(v) / userHZ
		}
		found = true
	}
	if err := sc.Err(); err != nil {
		return CPUStat{}, err
	}
	if !found {
		return CPUStat{}, fmt.Errorf("no cpu line")
	}
	return st, nil
}

// ParseMeminfo returns the fields of /proc/meminfo in bytes (those given
// in kB are multiplied by 1024; unit-less ones, such as HugePages_Total,
// are counts and kept as they are).
func ParseMeminfo(data []byte) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		k, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("meminfo %s: no value", k)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("meminfo %s: %w", k, err)
		}
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
		}
		m[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if _, ok := m["MemTotal"]; !ok {
		return nil, fmt.Errorf("meminfo has no MemTotal")
	}
	return m, nil
}

// ParseLoadavg returns the 1, 5 and 15 minute load averages.
func ParseLoadavg(data []byte) ([3]float64, error) {
	var out [3]float64
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return out, fmt.Errorf("loadavg: %d fields, want at least 3", len(f))
	}
	for i := range out {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return out, fmt.Errorf("loadavg: %w", err)
		}
		out[i] = v
	}
	return out, nil
}

// memKinds maps the kind label to the meminfo field.
var memKinds = []struct{ kind, field string }{
	{"total", "MemTotal"},
	{"available", "MemAvailable"},
	{"free", "MemFree"},
	{"buffers", "Buffers"},
	{"cached", "Cached"},
}

// hostWide is said in every host series' help: a network namespace does
// not scope /proc/stat, /proc/meminfo or /proc/loadavg.
const hostWide = " Host-wide: the same on every node of a testbed, since namespaces do not scope it."

type hostCollector struct {
	proc string // the /proc mount, a field so tests can point it elsewhere
}

func newHost(Env) Definition {
	return Definition{
		Collector: &hostCollector{proc: "/proc"},
		Help:      "CPU, memory and load of the host, from /proc",
		Enabled:   true,
		Meta: map[string]monitor.Meta{
			"lightpath_node_cpu_seconds_total": counter("Seconds all CPUs spent in each mode, from /proc/stat." + hostWide),
			"lightpath_node_cpus":              gauge("Number of CPUs, from /proc/stat." + hostWide),
			"lightpath_node_memory_bytes":      gauge("Memory by kind (total, available, free, buffers, cached), from /proc/meminfo." + hostWide),
			"lightpath_node_load1":             gauge("1-minute load average, from /proc/loadavg." + hostWide),
			"lightpath_node_load5":             gauge("5-minute load average, from /proc/loadavg." + hostWide),
			"lightpath_node_load15":            gauge("15-minute load average, from /proc/loadavg." + hostWide),
		},
	}
}

func (*hostCollector) Name() string { return "host" }

func (h *hostCollector) Collect(_ context.Context, emit func(monitor.Point)) error {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(h.proc + "/" + name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		return b, nil
	}
	b, err := read("stat")
	if err != nil {
		return err
	}
	st, err := ParseProcStat(b)
	if err != nil {
		return fmt.Errorf("parse /proc/stat: %w", err)
	}
	for _, mode := range cpuModes {
		if v, ok := st.Seconds[mode]; ok {
			emit(monitor.Point{Name: "lightpath_node_cpu_seconds_total", Labels: monitor.L("mode", mode), V: v})
		}
	}
	emit(monitor.Point{Name: "lightpath_node_cpus", V: float64(st.CPUs)})

	if b, err = read("meminfo"); err != nil {
		return err
	}
	mem, err := ParseMeminfo(b)
	if err != nil {
		return fmt.Errorf("parse /proc/meminfo: %w", err)
	}
	for _, k := range memKinds {
		if v, ok := mem[k.field]; ok {
			emit(monitor.Point{Name: "lightpath_node_memory_bytes", Labels: monitor.L("kind", k.kind), V: v})
		}
	}

	if b, err = read("loadavg"); err != nil {
		return err
	}
	load, err := ParseLoadavg(b)
	if err != nil {
		return fmt.Errorf("parse /proc/loadavg: %w", err)
	}
	for i, name := range []string{"lightpath_node_load1", "lightpath_node_load5", "lightpath_node_load15"} {
		emit(monitor.Point{Name: name, V: load[i]})
	}
	return nil
}
