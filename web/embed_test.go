package web

import (
	"io/fs"
	"path"
	"regexp"
	"strings"
	"testing"
)

// Every file the page or a module names is embedded: a missing one would
// only show as a 404 in a browser.
func TestReferencesResolve(t *testing.T) {
	page, err := fs.ReadFile(FS, "index.html")
	if err != nil {
		t.Fatalf("index.html: %v", err)
	}
	attr := regexp.MustCompile(`(?:src|href)="([^"]+)"`)
	for _, m := range attr.FindAllStringSubmatch(string(page), -1) {
		ref := m[1]
		if strings.HasPrefix(ref, "api/") || strings.Contains(ref, "://") {
			continue // served by the controller, not a file
		}
		if _, err := fs.Stat(FS, ref); err != nil {
			t.Errorf("index.html names %s: %v", ref, err)
		}
	}
	imp := regexp.MustCompile(`(?:\bfrom|\bimport\() *'(\.[^']+)'`)
	imports := 0
	mods, err := fs.Glob(FS, "js/*.js")
	if err != nil || len(mods) == 0 {
		t.Fatalf("no modules in js/: %v", err)
	}
	for _, mod := range mods {
		src, err := fs.ReadFile(FS, mod)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range imp.FindAllStringSubmatch(string(src), -1) {
			imports++
			ref := path.Join(path.Dir(mod), m[1])
			if _, err := fs.Stat(FS, ref); err != nil {
				t.Errorf("%s imports %s: %v", mod, m[1], err)
			}
		}
	}
	if imports < len(mods)-1 {
		t.Errorf("found only %d imports in %d modules: is the pattern still right?", imports, len(mods))
	}
	if _, err := fs.Stat(FS, "vendor/uplot/LICENSE"); err != nil {
		t.Errorf("the vendored chart library's licence: %v", err)
	}
}
