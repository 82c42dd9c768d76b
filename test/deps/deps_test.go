// Package deps checks which way imports point (STYLE 16): the client and
// the agent know the API's contract (package apiv1), never the server;
// the scheduler knows the topology, never the kernel. It runs go list
// -deps, as a reviewer would, and names the chain of imports that brings
// in each package a role must not link.
package deps

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/lightpath/lightpath/"

// forbidden is a package path, or with a trailing "/..." a path and every
// package under it (as go list patterns read).
type forbidden string

func (f forbidden) matches(pkg string) bool {
	if base, ok := strings.CutSuffix(string(f), "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == string(f)
}

// graph is `go list -deps` of some packages: each package's imports.
type graph map[string][]string

func list(t *testing.T, pkgs ...string) graph {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, pkgs...)...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", strings.Join(pkgs, " "), err, stderr)
	}
	g := graph{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	return g
}

// chain is the shortest import chain from root to pkg.
func (g graph) chain(root, pkg string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == pkg {
			var out []string
			for ; p != ""; p = prev[p] {
				out = append(out, strings.TrimPrefix(p, module))
			}
			slices.Reverse(out)
			return out
		}
		for _, q := range g[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

// check fails naming every rule of the forbidden list that root breaks:
// the package nearest to root that it matches, with the chain of imports
// that links it, and how many more packages it matches.
func check(t *testing.T, root string, not []forbidden) {
	t.Helper()
	g := list(t, root)
	for _, f := range not {
		var nearest []string
		n := 0
		for p := range g {
			if !f.matches(p) {
				continue
			}
			n++
			if c := g.chain(root, p); nearest == nil || len(c) < len(nearest) || len(c) == len(nearest) && c[len(c)-1] < nearest[len(nearest)-1] {
				nearest = c
			}
		}
		if n == 0 {
			continue
		}
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" (and %d more of %s)", n-1, strings.TrimPrefix(string(f), module))
		}
		t.Errorf("%s links %s%s: %s", strings.TrimPrefix(root, module), nearest[len(nearest)-1], more, strings.Join(nearest, " -> "))
	}
}

// The client and the agent link neither the server (the API handlers, the
// controller, the store) nor the databases nor Prometheus' server side;
// the exposition format (prometheus/common/expfmt) is allowed, for the
// agent's own /metrics.
func TestClientAgentDeps(t *testing.T) {
	not := []forbidden{
		module + "internal/api",
		module + "internal/controller/...",
		module + "internal/store/...",
		module + "internal/transfer/registry",
		"modernc.org/sqlite/...",
		"github.com/jackc/pgx/...",
		"github.com/prometheus/client_golang/prometheus",
		"github.com/prometheus/client_golang/prometheus/promhttp/...",
	}
	for _, root := range []string{module + "internal/client", module + "internal/agent",
		module + "internal/booking", module + "internal/transfer/report", module + "internal/datanode", module + "internal/run"} {
		check(t, root, not)
	}
}

// A data node (serve --controller) enrols with client.Enrol and runs the
// mover: it links neither the node agent nor the kernel's netlink and
// nftables.
func TestDataNodeDeps(t *testing.T) {
	check(t, module+"internal/datanode", []forbidden{
		module + "internal/agent",
		module + "internal/testbed/...",
		"github.com/vishvananda/netlink/...",
		"github.com/mdlayher/netlink/...",
		"github.com/google/nftables/...",
	})
}

// The command line parses flags and prints: it hands the mover the
// mover's own option types and never speaks the wire protocol itself; the
// copy's libraries (mover.Copy, booking, transfer/report), which the
// transfer service calls too, never reach back into the command line.
func TestCLIDeps(t *testing.T) {
	g := list(t, module+"internal/cli")
	for _, imp := range g[module+"internal/cli"] {
		if imp == module+"internal/wire" {
			t.Errorf("internal/cli imports internal/wire: build a mover.Job (mover.Options, mover.Tuning) instead")
		}
	}
	for _, root := range []string{module + "internal/mover", module + "internal/booking", module + "internal/transfer/report"} {
		check(t, root, []forbidden{module + "internal/cli"})
	}
}

// The controller (the scheduler) knows the topology, never the kernel: it
// links neither the testbed nor netlink nor nftables.
func TestControllerDeps(t *testing.T) {
	check(t, module+"internal/controller", []forbidden{
		module + "internal/testbed/...",
		"github.com/vishvananda/netlink/...",
		"github.com/mdlayher/netlink/...",
		"github.com/google/nftables/...",
	})
}

// The transfer service is the controller's side of data nodes and jobs:
// it never links the HTTP face or the command line, nor the kernel, nor
// the controller itself: it books through a booking.Booker and is handed
// the rest (store, clock, policy, topology, events) in its Config, so it
// can be tested against a fake Booker (issue 29). Its tests may link the
// controller; go list -deps without -test does not count them.
func TestServiceDeps(t *testing.T) {
	check(t, module+"internal/service", []forbidden{
		module + "internal/controller/...",
		module + "internal/api",
		module + "internal/cli",
		module + "internal/client",
		module + "internal/testbed/...",
		"github.com/vishvananda/netlink/...",
		"github.com/google/nftables/...",
	})
}

// Each folder is one layer (issue 29): no import runs back up. The
// records of transfers and of alerts take the store through interfaces of
// their own (which store.Store satisfies), a copy's report takes the
// mover's figures as its own types, and the agent's collectors reach the
// testbed's emulator only through the collector the command line adds
// (package monitor/collect/emulator). Who a request comes from
// (identity) sits below both the controller and the transfer service.
func TestLayerDeps(t *testing.T) {
	for _, c := range []struct {
		root string
		not  []forbidden
	}{
		{"internal/transfer/registry", []forbidden{module + "internal/store/...", "modernc.org/sqlite/...", "github.com/jackc/pgx/..."}},
		{"internal/monitor/alert", []forbidden{module + "internal/store/...", "github.com/jackc/pgx/..."}},
		{"internal/transfer/report", []forbidden{module + "internal/mover/...", module + "internal/transport/...", module + "internal/wire"}},
		{"internal/agent", []forbidden{module + "internal/testbed/...", module + "internal/monitor/collect/emulator"}},
		{"internal/monitor/collect", []forbidden{module + "internal/testbed/...", module + "internal/monitor/collect/emulator"}},
		{"internal/identity", []forbidden{module + "internal/controller/...", module + "internal/store/...", module + "internal/service"}},
	} {
		check(t, module+c.root, c.not)
	}
}

// Every package of the module is on the package map of
// docs/architecture.md, named by its path in backquotes, so a new package
// cannot arrive without saying what it owns and what it imports.
func TestArchitectureMap(t *testing.T) {
	root := filepath.Join("..", "..")
	page, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		pkg := strings.TrimPrefix(strings.TrimSpace(line), module)
		if pkg != "" && !strings.Contains(string(page), "`"+pkg+"`") {
			t.Errorf("docs/architecture.md does not name package `%s` on its map", pkg)
		}
	}
}
