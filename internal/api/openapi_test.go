package api_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/api"
)

// TestOpenAPIMatchesRoutes checks that the document served at
// /api/v1/openapi.json describes every route the server has and no other,
// that every operation documents its answers, and that every schema it
// refers to exists.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	raw := api.OpenAPI()
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
			if _, ok := op["responses"]; !ok {
				t.Errorf("%s %s documents no responses", method, path)
			}
			if _, ok := op["summary"]; !ok {
				t.Errorf("%s %s has no summary", method, path)
			}
		}
	}
	var served []string
	for _, r := range api.NewServer(nil, nil, "", nil).Routes() {
		served = append(served, r.Method+" "+r.Path)
	}
	slices.Sort(documented)
	slices.Sort(served)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in the OpenAPI document", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(served, d) {
			t.Errorf("the OpenAPI document describes %s, which the server does not serve", d)
		}
	}
	for _, m := range regexp.MustCompile(`"#/components/schemas/([A-Za-z]+)"`).FindAllStringSubmatch(string(raw), -1) {
		if _, ok := doc.Components.Schemas[m[1]]; !ok {
			t.Errorf("schema %s is referred to but not defined", m[1])
		}
	}
}
