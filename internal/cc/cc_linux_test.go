//go:build linux

package cc_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/lightpath/lightpath/internal/cc"
	"github.com/lightpath/lightpath/internal/cc/cctest"
	"github.com/lightpath/lightpath/internal/cc/fast"
)

func readList(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

const (
	available = "/proc/sys/net/ipv4/tcp_available_congestion_control"
	allowed   = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
)

// TestInstallRemove: install registers and allows fast and pins it; a
// second install is idempotent or only retunes; remove leaves no pinned
// object and the allowed list as it was.
func TestInstallRemove(t *testing.T) {
	cctest.Hold(t, "fast", false, nil)
	allowedBefore := readList(t, allowed)
	if slices.Contains(readList(t, available), "fast") {
		t.Fatal("fast is still offered after remove")
	}

	l, action, err := cc.Install("fast", fast.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	if action != cc.Installed || l.Source != "lightpath" || !l.Allowed || l.Params == nil || *l.Params != fast.DefaultParams || l.Pinned != cc.LinkPin("fast") {
		t.Fatalf("install: %s, %+v", action, l)
	}
	if !slices.Contains(readList(t, available), "fast") || !slices.Contains(readList(t, allowed), "fast") {
		t.Fatalf("after install: available %v, allowed %v", readList(t, available), readList(t, allowed))
	}
	for _, pin := range []string{cc.LinkPin("fast"), cc.ParamsPin("fast"), cc.TracePin("fast")} {
		if _, err := os.Stat(pin); err != nil {
			t.Fatalf("pin: %v", err)
		}
	}

	// A socket may choose it, and ss shows it on the connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := cctest.Dial(ln.Addr().String(), "fast")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	port := conn.LocalAddr().(*net.TCPAddr).Port
	out, err := exec.Command("ss", "-tin", "sport", "=", ":"+strconv.Itoa(port)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), " fast ") {
		t.Fatalf("ss -ti does not show fast on the connection: %v\n%s", err, out)
	}

	// The same again changes nothing; other parameters retune in place.
	if _, action, err := cc.Install("fast", fast.DefaultParams); err != nil || action != cc.Unchanged {
		t.Fatalf("second install: %s, %v", action, err)
	}
	p := fast.Params{Alpha: 40, Gamma: 256}
	if l, action, err := cc.Install("fast", p); err != nil || action != cc.Retuned || *l.Params != p {
		t.Fatalf("retune: %s, %+v, %v", action, l, err)
	}
	ls, err := cc.List()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ls, func(l cc.Loaded) bool { return l.Name == "fast" })
	if i < 0 || ls[i].Params == nil || *ls[i].Params != p {
		t.Fatalf("list after retune: %+v", ls)
	}
	// A registration by another build of the program is replaced.
	m, err := ebpf.LoadPinnedMap(cc.ParamsPin("fast"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var v [4]uint32 // struct fast_params: alpha, gamma, trace, build
	if err := m.Lookup(uint32(0), &v); err != nil {
		t.Fatal(err)
	}
	v[3] ^= 1
	if err := m.Put(uint32(0), v); err != nil {
		t.Fatal(err)
	}
	m.Close()
	if l, action, err := cc.Install("fast", p); err != nil || action != cc.Replaced || *l.Params != p {
		t.Fatalf("another build's registration: %s, %+v, %v", action, l, err)
	}
	if _, action, err := cc.Install("fast", p); err != nil || action != cc.Unchanged {
		t.Fatalf("install after the replacement: %s, %v", action, err)
	}
	// A connection opened before the retune kept working throughout.
	if _, err := conn.Write([]byte("still here")); err != nil {
		t.Fatal(err)
	}

	removed, err := cc.Remove("fast")
	if err != nil || !removed {
		t.Fatalf("remove: %v, %v", removed, err)
	}
	for _, pin := range []string{cc.LinkPin("fast"), cc.ParamsPin("fast"), cc.TracePin("fast")} {
		if _, err := os.Stat(pin); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s after remove: %v", pin, err)
		}
	}
	if got := readList(t, allowed); !slices.Equal(got, allowedBefore) {
		t.Fatalf("allowed list after remove %v, before install %v", got, allowedBefore)
	}
	if slices.Contains(readList(t, available), "fast") {
		t.Fatal("fast still offered after remove")
	}
	if removed, err := cc.Remove("fast"); err != nil || removed {
		t.Fatalf("second remove: %v, %v", removed, err)
	}
	if _, _, err := cc.Install("vegas", fast.DefaultParams); err == nil || !strings.Contains(err.Error(), "lightpath can install fast") {
		t.Fatalf("unknown name: %v", err)
	}
	if _, _, err := cc.Install("fast", fast.Params{Alpha: 0, Gamma: 512}); err == nil || !strings.Contains(err.Error(), "alpha 0") {
		t.Fatalf("bad alpha: %v", err)
	}
}

// TestTraceLoopback: every decision the program traces on a real
// connection is the model's.
func TestTraceLoopback(t *testing.T) {
	cctest.Hold(t, "fast", true, nil)
	tr, err := cc.OpenTrace("fast")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cctest.Sink(ln)
	conn, err := cctest.Dial(ln.Addr().String(), "fast")
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(conn.LocalAddr().(*net.TCPAddr).Port)
	// The connection sends until the trace has shown what the test is
	// about (a minute bounds a hang), not for a set time a busy machine
	// may spend on other things.
	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		defer conn.Close()
		buf := make([]byte, 1<<20)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := conn.Write(buf); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-sent }()
	rounds, phases := 0, map[fast.Phase]int{}
	for deadline := time.Now().Add(time.Minute); rounds < 100 || phases[fast.PhaseFAST] == 0 || phases[fast.PhaseSlowStartEnds] == 0; {
		r, err := tr.Read(deadline)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%d rounds traced in a minute (%v): want slow start to end and FAST to take over", rounds, phases)
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.LocalPort != port {
			continue
		}
		rounds++
		phases[r.Phase]++
		if err := r.Check(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d rounds, all as the model decides: %v", rounds, phases)
}
