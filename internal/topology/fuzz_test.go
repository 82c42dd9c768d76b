package topology

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics, and that what it accepts is
// whole: every link end is a known node and every node has its addresses.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"two-site.yaml", "triangle.yaml"} {
		if data, err := os.ReadFile(filepath.Join("..", "..", "examples", name)); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		base,
		base + "    loss: {rate: 1%, burst: 4}\n    queue: 100\n    delay: 5ms\n",
		base + "    loss: {model: gilbert-elliott, p: 0.001, r: 0.2, h: 1, k: 0}\n",
		"sites: [{name: a}]\nnodes: [{name: h, site: a}]\n",
		"sites: [{name: a}, {name: b}]\nnodes: [{name: r, site: a, role: router}, {name: h, site: b}, {name: g, site: b}]\n" +
			"links: [{name: l1, ends: [r, h]}, {name: l2, ends: [r, g]}, {name: l3, ends: [r, g], role: dedicated}]\n" +
			"routes: [{node: r, to: b, via: l3}, {node: r, to: h, via: l1}]\n",
		"x: &a {b: *a}\n",
		"links:\n  - &l {name: x, ends: [a, b]}\n  - {<<: [*l, *l], name: y}\n",
		"",
		"- [",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		topo, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		for _, l := range topo.Links {
			if _, ok := topo.Node(l.A.Node); !ok {
				t.Fatalf("link %s: end %q is not a node", l.Name, l.A.Node)
			}
			if _, ok := topo.Node(l.B.Node); !ok {
				t.Fatalf("link %s: end %q is not a node", l.Name, l.B.Node)
			}
			if l.A.Dev == "" || len(l.A.Dev) > 15 {
				t.Fatalf("link %s: device %q", l.Name, l.A.Dev)
			}
		}
		for _, n := range topo.Nodes {
			if !n.IPv4.IsValid() || !n.IPv6.IsValid() {
				t.Fatalf("node %s has no address", n.Name)
			}
			topo.TCPBufferMax(n.Name)
		}
	})
}
