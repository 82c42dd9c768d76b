package yamlfile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// root decodes one document for a test, failing on any problem.
func root(t *testing.T, src string) (*Reader, *yaml.Node) {
	t.Helper()
	r := &Reader{File: "t.yaml"}
	n := r.Document([]byte(src), "test file", "")
	if err := r.Err(); err != nil {
		t.Fatalf("document: %v", err)
	}
	return r, n
}

// wantErr checks that err names t.yaml:line and says phrase, or that err
// is nil when phrase is "".
func wantErr(t *testing.T, err error, line int, phrase string) {
	t.Helper()
	if phrase == "" {
		if err != nil {
			t.Fatalf("want no error, got %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want an error with %q, got none", phrase)
	}
	loc := fmt.Sprintf("t.yaml:%d: ", line)
	if msg := err.Error(); !strings.Contains(msg, loc) || !strings.Contains(msg, phrase) {
		t.Errorf("error %q\nwant %s and %q", msg, loc, phrase)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Errorf("error %T is not an *Error", err)
	}
}

func TestFields(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string // the top-level mapping
		nullOK bool
		keys   []string // in order, when no error
		vals   string   // "k=v,..." of the scalar values
		line   int
		phrase string
	}{
		{name: "plain", in: "a: 1\nb: 2\n", keys: []string{"a", "b"}, vals: "a=1,b=2"},
		{name: "duplicate key", in: "a: 1\nb: 2\na: 3\n", line: 3, phrase: `top: duplicate key "a" (first at line 1)`},
		{name: "list key", in: "[a]: 1\n", line: 1, phrase: "top: a key must be a plain word, not a list"},
		{name: "not a mapping", in: "- a\n", line: 1, phrase: "top: want a mapping of keys to values, not a list"},
		{name: "scalar", in: "word\n", line: 1, phrase: `top: want a mapping of keys to values, not "word"`},

		// Merge keys: written keys win over merged ones, earlier merged
		// mappings over later ones.
		{name: "merge", in: "d: &d {x: 1, y: 2}\ntop:\n  <<: *d\n  y: 3\n", keys: []string{"y", "x"}, vals: "x=1,y=3"},
		{name: "merge list order", in: "a: &a {x: 1}\nb: &b {x: 2, z: 2}\ntop: {<<: [*a, *b]}\n", keys: []string{"x", "z"}, vals: "x=1,z=2"},
		{name: "merge nested", in: "a: &a {x: 1}\nb: &b {<<: *a, y: 2}\ntop: {<<: *b, z: 3}\n", keys: []string{"z", "y", "x"}, vals: "x=1,y=2,z=3"},
		{name: "merge twice", in: "a: &a {x: 1}\ntop: {<<: [*a, *a]}\n", keys: []string{"x"}, vals: "x=1"},
		{name: "merge duplicates are no problem", in: "a: &a {x: 1}\ntop: {<<: *a, x: 2}\n", keys: []string{"x"}, vals: "x=2"},
		{name: "merge scalar", in: "top:\n  <<: 1\n", line: 2, phrase: `top: a merge key (<<) takes a mapping or a list of mappings, not "1"`},
		{name: "merge list of scalars", in: "top:\n  <<: [\n    1]\n", line: 3, phrase: `a merge key (<<) takes a mapping or a list of mappings, not "1"`},
		{name: "merge empty list", in: "top:\n  <<: []\n", line: 2, phrase: "a merge key (<<) takes a mapping or a list of mappings, not a list"},
		{name: "merge null", in: "top:\n  <<:\n", line: 2, phrase: "a merge key (<<) takes a mapping or a list of mappings, not nothing"},

		// Aliases are followed, to the mapping itself and to keys.
		{name: "alias to mapping", in: "d: &d {x: 1}\ntop: *d\n", keys: []string{"x"}, vals: "x=1"},
		{name: "alias key", in: "k: &k x\ntop: {*k : 1}\n", keys: []string{"x"}, vals: "x=1"},
		{name: "self merge", in: "top: &a {x: 1, <<: *a}\n", keys: []string{"x"}, vals: "x=1"},

		// Null: "key:" with nothing after it.
		{name: "null", in: "top:\n", line: 1, phrase: "top: want a mapping of keys to values, not nothing"},
		{name: "null allowed", in: "top:\n", nullOK: true, keys: nil, vals: ""},
		{name: "tilde allowed", in: "top: ~\n", nullOK: true, keys: nil, vals: ""},
		{name: "empty mapping", in: "top: {}\n", keys: nil, vals: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, n := root(t, tc.in)
			top, _ := r.Fields(n, "root", false)
			v := n
			if top.Has("top") {
				v = top.Vals["top"]
			}
			f, ok := r.Fields(v, "top", tc.nullOK)
			err := r.Err()
			wantErr(t, err, tc.line, tc.phrase)
			if ok != (err == nil) {
				t.Errorf("ok = %v with error %v", ok, err)
			}
			if tc.phrase != "" {
				return
			}
			if !slices.Equal(f.Keys, tc.keys) {
				t.Errorf("keys = %q, want %q", f.Keys, tc.keys)
			}
			var vals []string
			for _, k := range slices.Sorted(slices.Values(f.Keys)) {
				s, _ := r.Scalar(f.Vals[k], k)
				vals = append(vals, k+"="+s)
			}
			if got := strings.Join(vals, ","); got != tc.vals {
				t.Errorf("values = %q, want %q", got, tc.vals)
			}
			for _, k := range f.Keys {
				if f.Lines[k] < 1 || f.LineOf(k) < 1 {
					t.Errorf("key %q: line %d, value line %d", k, f.Lines[k], f.LineOf(k))
				}
			}
		})
	}
}

func TestMergeBomb(t *testing.T) {
	// Each level merges the one before twice; without the seen set this
	// would take 2^n steps.
	var b strings.Builder
	b.WriteString("l0: &l0 {x: 1}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "l%d: &l%d {<<: [*l%d, *l%d]}\n", i, i, i-1, i-1)
	}
	b.WriteString("top: *l40\n")
	r, n := root(t, b.String())
	top, _ := r.Fields(n, "root", false)
	f, ok := r.Fields(top.Vals["top"], "top", false)
	// Forty levels are more than the nesting allows.
	if ok || !strings.Contains(fmt.Sprint(r.Err()), "merge keys nested too deeply") {
		t.Errorf("ok = %v, err = %v, keys %q", ok, r.Err(), f.Keys)
	}
}

func TestAllowRequire(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		allowed []string
		require []string
		line    int
		phrase  string
	}{
		{"all allowed", "name: a\nrate: 1\n", []string{"name", "rate"}, []string{"name"}, 0, ""},
		{"unknown", "name: a\nextra: 1\n", []string{"name", "rate"}, nil, 2, `x: unknown key "extra" (allowed: name, rate)`},
		{"suggestion", "name: a\nrat: 1\n", []string{"name", "rate"}, nil, 2, `x: unknown key "rat" (allowed: name, rate); did you mean "rate"?`},
		{"suggestion transposed", "naem: a\n", []string{"name", "rate"}, nil, 1, `did you mean "name"?`},
		{"no allowed keys", "a: 1\n", nil, nil, 1, `x: unknown key "a" (allowed: )`},
		{"missing", "\n\nname: a\n", []string{"name", "ends"}, []string{"name", "ends"}, 3, `x: missing key "ends"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, n := root(t, tc.in)
			f, _ := r.Fields(n, "x", false)
			aok := r.Allow(f, "x", tc.allowed...)
			rok := r.Require(f, "x", tc.require...)
			err := r.Err()
			wantErr(t, err, tc.line, tc.phrase)
			if aok && rok != (err == nil) {
				t.Errorf("allow %v, require %v with error %v", aok, rok, err)
			}
		})
	}
	// No suggestion when nothing is close.
	r, n := root(t, "colour: red\n")
	f, _ := r.Fields(n, "x", false)
	r.Allow(f, "x", "name", "rate")
	if err := r.Err(); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("err = %v, want one without a suggestion", err)
	}
}

func TestSuggest(t *testing.T) {
	cands := []string{"name", "rate", "delay", "jitter", "a"}
	for _, tc := range []struct{ word, want string }{
		{"name", "name"},
		{"nme", "name"},
		{"rat", "rate"},
		{"dealy", "delay"},
		{"jiter", "jitter"},
		{"xyz", ""},
		{"b", ""}, // one edit, but as many as the candidate is long
		{"", ""},
		{strings.Repeat("n", 100), ""},
	} {
		if got := Suggest(tc.word, cands); got != tc.want {
			t.Errorf("Suggest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"abc", "abc", 0}, {"ab", "ba", 2}} {
		if d := editDistance(tc.a, tc.b); d != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}

func TestValues(t *testing.T) {
	const src = `s: 10G
n:
t: ~
l: [a, b]
m: {a: 1}
e: []
a: &a word
b: *a
`
	for _, tc := range []struct {
		key    string
		kind   string // scalar, sequence
		want   string // the scalar, or the items joined with ","
		line   int
		phrase string
	}{
		{"s", "scalar", "10G", 0, ""},
		{"b", "scalar", "word", 0, ""},
		{"n", "scalar", "", 2, "v: want a single value, not nothing"},
		{"t", "scalar", "", 3, "v: want a single value, not nothing"},
		{"l", "scalar", "", 4, "v: want a single value, not a list"},
		{"m", "scalar", "", 5, "v: want a single value, not a mapping"},
		{"missing", "scalar", "", 1, "v: want a single value, not nothing"},
		{"l", "sequence", "a,b", 0, ""},
		{"e", "sequence", "", 0, ""},
		{"n", "sequence", "", 0, ""}, // null is an empty list
		{"t", "sequence", "", 0, ""},
		{"missing", "sequence", "", 0, ""},
		{"s", "sequence", "", 1, `v: want a list, not "10G"`},
		{"m", "sequence", "", 5, "v: want a list, not a mapping"},
	} {
		t.Run(tc.kind+" "+tc.key, func(t *testing.T) {
			r, n := root(t, src)
			f, _ := r.Fields(n, "x", false)
			var got string
			switch tc.kind {
			case "scalar":
				s, ok := r.Scalar(f.Vals[tc.key], "v")
				if ok != (tc.phrase == "") {
					t.Errorf("ok = %v", ok)
				}
				got = s
			case "sequence":
				items, ok := r.Sequence(f.Vals[tc.key], "v")
				if ok != (tc.phrase == "") {
					t.Errorf("ok = %v", ok)
				}
				var ss []string
				for _, it := range items {
					ss = append(ss, Deref(it).Value)
				}
				got = strings.Join(ss, ",")
			}
			wantErr(t, r.Err(), tc.line, tc.phrase)
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	_, n := root(t, "m: {}\nl: []\ns: x y\nq: ''\nz: ~\n")
	for i, want := range []string{"a mapping", "a list", `"x y"`, `""`, "nothing"} {
		if got := Describe(n.Content[2*i+1]); got != want {
			t.Errorf("Describe(%s) = %s, want %s", n.Content[2*i].Value, got, want)
		}
	}
	if got := Describe(nil); got != "nothing" {
		t.Errorf("Describe(nil) = %s", got)
	}
	if IsNull(nil) || !IsNull(n.Content[9]) || IsNull(n.Content[7]) {
		t.Error("IsNull")
	}
	if Deref(nil) != nil {
		t.Error("Deref(nil) != nil")
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in     string
		max    time.Duration
		want   time.Duration
		phrase string
	}{
		{"25ms", 0, 25 * time.Millisecond, ""},
		{"0s", 0, 0, ""},
		{"1h", 0, time.Hour, ""},
		{"10s", 10 * time.Second, 10 * time.Second, ""},
		{"11s", 10 * time.Second, 0, "x: delay 11s is more than 10s"},
		{"-5ms", 0, 0, "x: delay -5ms is negative"},
		{"25", 0, 0, `x: delay "25": want a duration like 25ms or 1.5s`},
		{"[1s]", 0, 0, "x: delay: want a single value, not a list"},
	} {
		r, n := root(t, "\ndelay: "+tc.in+"\n")
		f, _ := r.Fields(n, "x", false)
		d, ok := r.Duration(f, "delay", "x", "25ms or 1.5s", tc.max)
		if d != tc.want || ok != (tc.phrase == "") {
			t.Errorf("%s: got %v %v, want %v", tc.in, d, ok, tc.want)
		}
		wantErr(t, r.Err(), 2, tc.phrase)
	}
}

func TestDocument(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		empty  string
		root   bool
		line   int
		phrase string
	}{
		{name: "mapping", in: "a: 1\n", root: true},
		{name: "empty", in: ""},
		{name: "comments", in: "# nothing\n"},
		{name: "null", in: "---\n~\n"},
		{name: "empty reported", in: "", empty: "empty test file", line: 1, phrase: "empty test file"},
		{name: "null reported", in: "---\n", empty: "empty test file", line: 1, phrase: "empty test file"},
		{name: "second document", in: "a: 1\n---\nb: 2\n", line: 2, phrase: "a second YAML document: a test file holds one"},
		{name: "syntax", in: "a: 1\n b: 2\n", line: 2, phrase: "YAML syntax: mapping values are not allowed"},
		{name: "syntax first line", in: "a: [", line: 1, phrase: "YAML syntax: "},
		{name: "syntax in second document", in: "a: 1\n---\n[\n", line: 3, phrase: "YAML syntax: "},
		{name: "unknown anchor", in: "a: *x\n", line: 1, phrase: "YAML syntax: unknown anchor 'x' referenced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reader{File: "t.yaml"}
			n := r.Document([]byte(tc.in), "test file", tc.empty)
			if (n != nil) != tc.root {
				t.Errorf("root = %v", n)
			}
			wantErr(t, r.Err(), tc.line, tc.phrase)
			if err := r.Err(); err != nil && strings.Contains(err.Error(), "yaml: ") {
				t.Errorf("%q keeps the YAML package's prefix", err)
			}
		})
	}
}

func TestErr(t *testing.T) {
	for _, tc := range []struct {
		name  string
		max   int
		lines []int
		want  string // the error's lines, joined with "|"
	}{
		{"none", 0, nil, ""},
		{"one", 0, []int{3}, "t.yaml:3: p0"},
		{"line below 1", 0, []int{0}, "t.yaml:1: p0"},
		{"sorted and stable", 0, []int{5, 2, 5, 1}, "t.yaml:1: p3|t.yaml:2: p1|t.yaml:5: p0|t.yaml:5: p2"},
		{"capped", 2, []int{4, 3, 2, 1}, "t.yaml:1: p3|t.yaml:2: p2|t.yaml: 2 more problems not shown"},
		{"at the cap", 2, []int{2, 1}, "t.yaml:1: p1|t.yaml:2: p0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reader{File: "t.yaml", Max: tc.max}
			for i, l := range tc.lines {
				r.Errorf(l, "p%d", i)
			}
			got := ""
			if err := r.Err(); err != nil {
				got = strings.ReplaceAll(err.Error(), "\n", "|")
			}
			if got != tc.want {
				t.Errorf("Err() = %q, want %q", got, tc.want)
			}
		})
	}

	// The default cap, and problems kept in the caller's slice.
	var mine []error
	r := &Reader{File: "t.yaml", Errs: &mine}
	for i := range MaxErrors + 5 {
		r.Errorf(i+1, "p%d", i)
	}
	if len(mine) != MaxErrors+5 {
		t.Errorf("caller's slice holds %d problems", len(mine))
	}
	lines := strings.Split(r.Err().Error(), "\n")
	if len(lines) != MaxErrors+1 || lines[MaxErrors] != "t.yaml: 5 more problems not shown" {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}

	// Unwrap gives the problem without its place.
	sentinel := errors.New("sentinel")
	r = &Reader{File: "t.yaml"}
	r.Errorf(7, "rate: %w", sentinel)
	var e *Error
	if err := r.Err(); !errors.Is(err, sentinel) || !errors.As(err, &e) || e.Line != 7 || e.File != "t.yaml" || e.Err.Error() != "rate: sentinel" {
		t.Errorf("Err() = %v", err)
	}
}

func FuzzFields(f *testing.F) {
	for _, s := range []string{
		"a: 1\n",
		"x: &a {b: *a}\n",
		"a: &a {x: 1}\nb: {<<: [*a, *a], y: 2}\n",
		"a: &a {<<: *a}\n",
		"? [a]\n: b\n",
		"<<: 1\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &Reader{File: "fuzz.yaml"}
		n := r.Document(data, "fuzz file", "empty")
		if n == nil {
			if r.Err() == nil {
				t.Fatal("no root and no problem")
			}
			return
		}
		var walk func(n *yaml.Node, depth int)
		walk = func(n *yaml.Node, depth int) {
			if depth > 20 {
				return
			}
			n = Deref(n)
			if n == nil {
				return
			}
			switch n.Kind {
			case yaml.MappingNode:
				f, _ := r.Fields(n, "m", true)
				r.Allow(f, "m", "a", "b")
				for _, k := range f.Keys {
					walk(f.Vals[k], depth+1)
				}
			case yaml.SequenceNode:
				items, _ := r.Sequence(n, "s")
				for _, it := range items {
					walk(it, depth+1)
				}
			default:
				r.Scalar(n, "v")
			}
		}
		walk(n, 0)
		if err := r.Err(); err != nil && !strings.HasPrefix(err.Error(), "fuzz.yaml:") {
			t.Fatalf("error without the file name: %v", err)
		}
	})
}
