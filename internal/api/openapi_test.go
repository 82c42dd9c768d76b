package api_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
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

// schemaDoc is the OpenAPI document, parsed once, for checkResponse.
var schemaDoc = func() map[string]any {
	var d map[string]any
	if err := json.Unmarshal(api.OpenAPI(), &d); err != nil {
		panic(err)
	}
	return d
}()

var pathParam = regexp.MustCompile(`\{[a-z]+\}`)

// checkResponse checks a JSON answer against the schema the document
// gives for its route and status: every field it sends is documented,
// every required field is there, and types match. The API tests call it on
// every answer, so the document cannot drift from what the server does.
func checkResponse(t *testing.T, method, path string, status int, body []byte) {
	t.Helper()
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	var op map[string]any
	for p, ops := range schemaDoc["paths"].(map[string]any) {
		re := regexp.MustCompile("^" + pathParam.ReplaceAllString(p, "[^/]+") + "$")
		if re.MatchString(path) {
			if o, ok := ops.(map[string]any)[strings.ToLower(method)]; ok {
				op = o.(map[string]any)
			}
		}
	}
	if op == nil && status == 405 {
		op = map[string]any{"responses": map[string]any{"405": map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}}}
	}
	if op == nil {
		t.Errorf("%s %s: no operation in the document", method, path)
		return
	}
	resps := op["responses"].(map[string]any)
	r, ok := resps[fmt.Sprint(status)]
	if !ok {
		if status < 500 {
			t.Errorf("%s %s: status %d is not documented", method, path, status)
			return
		}
		r = resps["default"]
	}
	content, ok := r.(map[string]any)["content"].(map[string]any)
	if !ok {
		if len(body) > 0 {
			t.Errorf("%s %s %d: documented without a body, sent %s", method, path, status, body)
		}
		return
	}
	mt, ok := content["application/json"].(map[string]any)
	if !ok {
		return
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s %s %d: not JSON: %s", method, path, status, body)
		return
	}
	if err := validate(mt["schema"].(map[string]any), v, "$"); err != nil {
		t.Errorf("%s %s %d: %v\n%s", method, path, status, err, body)
	}
}

func validate(s map[string]any, v any, at string) error {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		return validate(schemaDoc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any), v, at)
	}
	if types, ok := s["type"].([]any); ok {
		// One of several types ("number" or "null"): the first that fits.
		var first error
		for _, ty := range types {
			if ty == "null" && v == nil {
				return nil
			}
			one := maps.Clone(s)
			one["type"] = ty
			err := validate(one, v, at)
			if err == nil {
				return nil
			}
			if first == nil {
				first = err
			}
		}
		return first
	}
	switch s["type"] {
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %T", at, v)
		}
		props, _ := s["properties"].(map[string]any)
		for k, fv := range o {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if ap, ok := s["additionalProperties"].(map[string]any); ok {
					ps = ap
				} else {
					return fmt.Errorf("%s: field %q is not in the document", at, k)
				}
			}
			if err := validate(ps, fv, at+"."+k); err != nil {
				return err
			}
		}
		if req, ok := s["required"].([]any); ok {
			for _, k := range req {
				if _, ok := o[k.(string)]; !ok {
					return fmt.Errorf("%s: required field %q is missing", at, k)
				}
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: want an array, got %T", at, v)
		}
		prefix, _ := s["prefixItems"].([]any)
		for i, e := range a {
			item, _ := s["items"].(map[string]any)
			if i < len(prefix) {
				item = prefix[i].(map[string]any)
			}
			if item == nil {
				continue
			}
			if err := validate(item, e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: want a string, got %T", at, v)
		}
		if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
			return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok {
			return fmt.Errorf("%s: want a number, got %T", at, v)
		}
		if s["type"] == "integer" && f != float64(int64(f)) && f < 1e18 {
			return fmt.Errorf("%s: want an integer, got %v", at, f)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: want a boolean, got %T", at, v)
		}
	}
	return nil
}

// TestFindModesMatchController checks that the find modes of the contract
// are the scheduler's own: package apiv1 spells them out so that clients
// need not link the controller.
func TestFindModesMatchController(t *testing.T) {
	for _, tc := range []struct{ contract, controller string }{
		{apiv1.FindFixed, controller.FindFixed},
		{apiv1.FindWidest, controller.FindWidest},
		{apiv1.FindEarliest, controller.FindEarliest},
		{apiv1.FindAll, controller.FindAll},
		{apiv1.FindCompletion, controller.FindCompletion},
	} {
		if tc.contract != tc.controller {
			t.Errorf("apiv1 find mode %q, the controller's %q", tc.contract, tc.controller)
		}
	}
}
