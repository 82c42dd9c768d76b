package rules

import (
	"path/filepath"
	"testing"
)

// The rules files shipped in examples/ parse.
func TestExampleRules(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "examples", "*rules*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example rules files: %v", err)
	}
	for _, f := range files {
		if r, err := Load(f); err != nil || len(r.Rules) == 0 {
			t.Errorf("%s: %v (%d rules)", f, err, len(r.Rules))
		}
	}
}
