package collect

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The htb collector's DSCP labels follow the agent's class numbering.
// Package agent will import this one, so the test reads agent.ClassBase
// from the agent's source rather than importing it (which would also tie
// this package's tests to everything the agent imports).
func TestClassBaseIsTheAgents(t *testing.T) {
	dir := filepath.Join("..", "..", "agent")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Skipf("agent source not here: %v", err)
	}
	fset := token.NewFileSet()
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name != "ClassBase" || i >= len(vs.Values) {
						continue
					}
					tv, err := types.Eval(fset, nil, token.NoPos, types.ExprString(vs.Values[i]))
					if err != nil {
						t.Fatalf("agent.ClassBase = %s: %v", types.ExprString(vs.Values[i]), err)
					}
					if v, _ := constant.Int64Val(tv.Value); v != dscpClassBase {
						t.Errorf("collect numbers reservation classes from %#x, the agent from %#x", dscpClassBase, v)
					}
					return
				}
			}
		}
	}
	t.Error("agent.ClassBase not found")
}
