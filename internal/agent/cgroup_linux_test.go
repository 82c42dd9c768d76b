//go:build linux

package agent

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/cgroup2"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/roottest"
)

func TestCgroupLevel(t *testing.T) {
	for path, want := range map[string]int{"lightpath/run-42": 2, "a": 1, "a/b/c": 3, "/a/b/": 2} {
		if got := cgroupLevel(path); got != want {
			t.Errorf("cgroupLevel(%q) = %d, want %d", path, got, want)
		}
	}
}

// TestKernelCgroupMark: a flow naming a cgroup is marked on its from node
// only for sockets of that cgroup (or one below it): a process inside
// sends over the reserved link, one beside it or above it over the routed
// one. A flow whose cgroup does not exist gets no rule, and says why.
func TestKernelCgroupMark(t *testing.T) {
	roottest.Require(t, "builds a testbed of network namespaces and creates cgroups")
	root, err := cgroup2.Mount()
	if err != nil {
		t.Skipf("no cgroup2 hierarchy: %v", err)
	}
	top := fmt.Sprintf("lightpath-test-%04x", rand.IntN(1<<16))
	rel := top + "/app"
	for _, d := range []string{rel + "/sub", top + "/other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Skipf("cannot create a cgroup under %s: %v", root, err)
		}
	}
	t.Cleanup(func() {
		for _, d := range []string{rel + "/sub", rel, top + "/other", top} {
			if err := os.Remove(filepath.Join(root, d)); err != nil {
				t.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})

	b := upTestbed(t, "../../examples/two-site.yaml")
	now := time.Now()
	fs, err := reserve.ParseFlowSpec("any 198.18.1.1 > 198.18.2.1 cgroup " + rel)
	if err != nil {
		t.Fatal(err)
	}
	r := reserve.Reservation{ID: "r1", From: "a1", To: "b1", Bandwidth: 100_000_000, DSCP: 10, FlowSpec: fs,
		State: reserve.StateActive, Start: now.Add(-time.Minute), End: now.Add(time.Hour),
		Path: []reserve.PathHop{{Link: "a1-ra", From: "a1", To: "ra"}, {Link: "dedicated", From: "ra", To: "rb"}, {Link: "b1-rb", From: "rb", To: "b1"}}}

	t.Run("a cgroup that does not exist", func(t *testing.T) {
		missing := r
		missing.FlowSpec.Flows = []reserve.Flow{r.FlowSpec.Flows[0]}
		missing.FlowSpec.Flows[0].Cgroup = top + "/nope"
		p, err := Desired(b.topo, "a1", []reserve.Reservation{missing}, now)
		if err != nil {
			t.Fatal(err)
		}
		got, errs := WithCgroups(p)
		if e := errs[10]; e == nil || !strings.Contains(e.Error(), "cgroup "+top+"/nope: does not exist") {
			t.Errorf("want the reason under DSCP 10, got %v", errs)
		}
		for _, x := range got.Nft {
			if x.Flow.Cgroup != "" {
				t.Errorf("a rule for a cgroup that does not exist: %+v", x)
			}
		}
		if len(got.Rules) != len(p.Rules) || len(got.Routes) != len(p.Routes) {
			t.Errorf("the rest of the plan should stay: %+v", got)
		}
	})

	b.reconcile(t, []reserve.Reservation{r}, now)
	id, err := cgroupID(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range b.fetch(t, "a1").Nft {
		if x.Flow.Cgroup == rel {
			found = true
			if x.CgroupID != id || x.Stale {
				t.Errorf("a1's rule %+v: want cgroup id %d", x, id)
			}
		}
	}
	if !found {
		t.Fatalf("a1 has no rule for cgroup %s: %+v", rel, b.fetch(t, "a1").Nft)
	}

	const n = 200
	for _, tc := range []struct {
		cgroup string // "" for the test's own
		marked bool
	}{
		{rel, true},
		{rel + "/sub", true},
		{"", false},
		{top, false},
		{top + "/other", false},
	} {
		name := tc.cgroup
		if name == "" {
			name = "outside"
		}
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "LP_AGENT_TEST_UDP="+b.ns("a1")+" 198.18.2.1:9 "+fmt.Sprint(n))
			if tc.cgroup != "" {
				d, err := os.Open(filepath.Join(root, tc.cgroup))
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(d.Fd())}
			}
			before := b.counters(t)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("sender: %v\n%s", err, out)
			}
			// The links delay them 25 ms: the counters are read once all
			// have crossed one way or the other.
			var d counters
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
				d = b.counters(t).since(before)
				if d["dedicated ra>rb"]+d["wan ra>rb"] >= n*1000 || time.Now().After(deadline) {
					break
				}
			}
			t.Logf("%d datagrams of 1000 bytes from %s: %v", n, name, d)
			on, off := d["dedicated ra>rb"], d["wan ra>rb"]
			if !tc.marked {
				on, off = off, on
			}
			if on < n*1000 || off > n*100 {
				t.Errorf("marked %v: want the datagrams on %s, got %v", tc.marked, map[bool]string{true: "dedicated", false: "wan"}[tc.marked], d)
			}
		})
	}

	t.Run("a cgroup made again is matched by its new id", func(t *testing.T) {
		for _, d := range []string{rel + "/sub", rel} {
			if err := os.Remove(filepath.Join(root, d)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(root, rel, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		p, err := Desired(b.topo, "a1", []reserve.Reservation{r}, now)
		if err != nil {
			t.Fatal(err)
		}
		p, _ = WithCgroups(p)
		if c := Diff(b.fetch(t, "a1"), p); len(c.Add.Nft) != 1 || len(c.Remove.Nft) != 1 {
			t.Errorf("want the rule replaced, got %s", c)
		}
		b.reconcile(t, []reserve.Reservation{r}, now)
	})
}
