//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/cc/cctest"
	"github.com/lightpath/lightpath/internal/roottest"
)

// TestCCCommands: cc install, list, a second install, a retune and remove
// through the binary, leaving the host as they found it.
func TestCCCommands(t *testing.T) {
	roottest.Require(t, "loads a BPF congestion control")
	cctest.Hold(t, "fast", false, nil)
	allowedBefore, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")

	note := func(args ...string) map[string]any {
		t.Helper()
		r := runLP(t, runOpts{}, append([]string{"cc"}, args...)...)
		mustSucceed(t, "cc "+strings.Join(args, " "), r)
		var m map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &m); err != nil {
			t.Fatalf("cc %s --json: %v\n%s", strings.Join(args, " "), err, r.stdout)
		}
		return m
	}
	if m := note("install", "fast", "--json"); m["action"] != "installed" || m["pinned"] != "/sys/fs/bpf/lightpath/cc-fast" || m["allowed"] != true {
		t.Fatalf("install: %v", m)
	}
	if m := note("install", "fast", "--json"); m["action"] != "unchanged" {
		t.Fatalf("second install: %v", m)
	}
	m := note("install", "fast", "--alpha", "40", "--gamma", "0.25", "--json")
	if p, _ := m["params"].(map[string]any); m["action"] != "retuned" || p["alpha"] != 40.0 || p["gamma"] != 0.25 {
		t.Fatalf("retune: %v", m)
	}
	r := runLP(t, runOpts{}, "cc", "list")
	mustSucceed(t, "cc list", r)
	if !strings.Contains(r.stdout, "alpha=40 gamma=0.25 (/sys/fs/bpf/lightpath/cc-fast)") || !strings.Contains(r.stdout, "cubic") {
		t.Fatalf("cc list:\n%s", r.stdout)
	}
	checkFailure(t, "install an unknown name", runLP(t, runOpts{}, "cc", "install", "vegas"), "lightpath can install fast")
	checkFailure(t, "a bad gamma", runLP(t, runOpts{}, "cc", "install", "fast", "--gamma", "1.5"), "want a fraction in (0, 1]")
	if m := note("remove", "fast", "--json"); m["action"] != "removed" {
		t.Fatalf("remove: %v", m)
	}
	if m := note("remove", "fast", "--json"); m["action"] != "absent" {
		t.Fatalf("second remove: %v", m)
	}
	if left, _ := filepath.Glob("/sys/fs/bpf/lightpath/cc-fast*"); len(left) > 0 {
		t.Fatalf("pinned after remove: %v", left)
	}
	if after, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control"); string(after) != string(allowedBefore) {
		t.Fatalf("allowed list %q after remove, %q before install", after, allowedBefore)
	}
}
