package rules

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const validFile = `# example
defaults: &hook
  timeout: 5s
rules:
  - name: wan-saturated
    expr:
      series: link_utilisation
      labels: {link: wan}
      fn: avg
      window: 30s
    op: ">"
    threshold: 90%
    for: 30s
    severity: critical
    actions:
      - log: {}
      - webhook: {url: "https://ops.example/hook", timeout: 5s}
      - command: {argv: [/usr/bin/logger, -t, lightpath], timeout: 1m}
      - reroute:
  - name: slow
    expr: {series: transfer_rate_bits_per_second, fn: rate, window: 1m}
    op: "<"
    threshold: 500M
  - name: loss
    expr: {series: probe_loss, window: 10s}
    op: ">="
    threshold: 0.01
`

func TestParseValid(t *testing.T) {
	// The top-level "defaults" key is unknown, so drop it for this test.
	data := strings.Replace(validFile, "defaults: &hook\n  timeout: 5s\n", "", 1)
	f, err := Parse("rules.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rules) != 3 {
		t.Fatalf("got %d rules, want 3", len(f.Rules))
	}
	r := f.Rules[0]
	if r.Name != "wan-saturated" || r.Line != 3 || r.Op != OpGT || r.Threshold != 0.9 || r.Unit != "%" ||
		r.For != 30*time.Second || r.Severity != SeverityCritical {
		t.Errorf("rule 0 = %+v", r)
	}
	if r.Expr.Series != "link_utilisation" || r.Expr.Labels["link"] != "wan" || r.Expr.Fn != FnAvg || r.Expr.Window != 30*time.Second {
		t.Errorf("expr = %+v", r.Expr)
	}
	if len(r.Actions) != 4 {
		t.Fatalf("actions = %+v", r.Actions)
	}
	if a := r.Actions[1]; a.Kind != ActionWebhook || a.URL != "https://ops.example/hook" || a.Timeout != 5*time.Second {
		t.Errorf("webhook = %+v", a)
	}
	if a := r.Actions[2]; a.Kind != ActionCommand || strings.Join(a.Argv, " ") != "/usr/bin/logger -t lightpath" || a.Timeout != time.Minute {
		t.Errorf("command = %+v", a)
	}
	if a := r.Actions[3]; a.Kind != ActionReroute || a.Line != 17 {
		t.Errorf("reroute = %+v", a)
	}
	s := f.Rules[1]
	if s.Threshold != 500e6 || s.Unit != "M" || s.Expr.Fn != FnRate || s.Severity != SeverityWarning || s.For != 0 {
		t.Errorf("rule 1 = %+v", s)
	}
	if len(s.Actions) != 1 || s.Actions[0].Kind != ActionLog {
		t.Errorf("default actions = %+v", s.Actions)
	}
	if l := f.Rules[2]; l.Expr.Fn != FnLast || l.Threshold != 0.01 || l.Op != OpGE {
		t.Errorf("rule 2 = %+v", l)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, in := range []string{"", "# nothing\n", "rules:\n", "rules: []\n"} {
		f, err := Parse("r.yaml", []byte(in))
		if err != nil || f == nil || len(f.Rules) != 0 {
			t.Errorf("Parse(%q) = %v, %v; want no rules", in, f, err)
		}
	}
}

func TestParseMerge(t *testing.T) {
	in := `rules:
  - &base
    name: a
    expr: {series: x, window: 30s}
    op: ">"
    threshold: 1
  - <<: *base
    name: b
    threshold: 2
`
	f, err := Parse("r.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rules) != 2 || f.Rules[1].Name != "b" || f.Rules[1].Threshold != 2 || f.Rules[1].Expr.Series != "x" {
		t.Errorf("rules = %+v", f.Rules)
	}
}

// rule wraps the lines of one rule's body after a valid name, expr, op and
// threshold (lines 2 to 5), so that the line of the first line of body is 6.
func rule(body string) string {
	return "rules:\n  - name: r\n    expr: {series: x, window: 30s}\n    op: \">\"\n    threshold: 1\n" + body
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want string // FILE:LINE: and a part of the message
	}{
		{"yaml syntax", "rules:\n  - name: [\n", "f.yaml:2: YAML syntax"},
		{"second document", "rules: []\n---\nrules: []\n", "f.yaml:2: a second YAML document"},
		{"top not mapping", "- a\n", "f.yaml:1: rules file: want a mapping"},
		{"unknown top key", "rule: []\n", `f.yaml:1: rules file: unknown key "rule" (allowed: rules); did you mean "rules"?`},
		{"rules not list", "rules: {}\n", "f.yaml:1: rules: want a list"},
		{"unknown rule key", rule("    thresold: 2\n"), `f.yaml:6: rule "r": unknown key "thresold"`},
		{"duplicate key", rule("    op: \"<\"\n"), `f.yaml:6: rule #1: duplicate key "op" (first at line 4)`},
		{"empty name", "rules:\n  - name: \"\"\n    expr: {series: x, window: 30s}\n    op: \">\"\n    threshold: 1\n", "f.yaml:2: rule #1: name is empty"},
		{"bad name", "rules:\n  - name: a b\n    expr: {series: x, window: 30s}\n    op: \">\"\n    threshold: 1\n", `f.yaml:2: rule #1: name "a b"`},
		{"missing name", "rules:\n  - expr: {series: x, window: 30s}\n    op: \">\"\n    threshold: 1\n", `f.yaml:2: rule #1: missing key "name"`},
		{"duplicate name", rule("  - name: r\n    expr: {series: x, window: 30s}\n    op: \">\"\n    threshold: 1\n"), `f.yaml:6: rule "r": duplicate rule name (first at line 2)`},
		{"missing expr", "rules:\n  - name: r\n    op: \">\"\n    threshold: 1\n", `f.yaml:2: rule "r": missing key "expr"`},
		{"bad op", "rules:\n  - name: r\n    expr: {series: x, window: 30s}\n    op: \"=>\"\n    threshold: 1\n", `f.yaml:4: rule "r": op "=>": want one of`},
		{"bad threshold", "rules:\n  - name: r\n    expr: {series: x, window: 30s}\n    op: \">\"\n    threshold: lots\n", `f.yaml:5: rule "r": threshold "lots": want a number`},
		{"bad threshold unit", "rules:\n  - name: r\n    expr: {series: x, window: 30s}\n    op: \">\"\n    threshold: 5Q\n", `f.yaml:5: rule "r": threshold "5Q": unknown unit "Q"`},
		{"bad for", rule("    for: soon\n"), `f.yaml:6: rule "r": for "soon": want a duration like 30s`},
		{"negative for", rule("    for: -5s\n"), `f.yaml:6: rule "r": for -5s is negative`},
		{"bad severity", rule("    severity: high\n"), `f.yaml:6: rule "r": severity "high": want one of info, warning, critical`},
		{"bad window", "rules:\n  - name: r\n    expr: {series: x, window: 3 s}\n    op: \">\"\n    threshold: 1\n", `f.yaml:3: rule "r": expr: window "3 s": want a duration`},
		{"zero window", "rules:\n  - name: r\n    expr: {series: x, window: 0s}\n    op: \">\"\n    threshold: 1\n", `f.yaml:3: rule "r": expr: window is 0`},
		{"missing window", "rules:\n  - name: r\n    expr: {series: x}\n    op: \">\"\n    threshold: 1\n", `f.yaml:3: rule "r": expr: missing key "window"`},
		{"bad fn", "rules:\n  - name: r\n    expr: {series: x, fn: mean, window: 1s}\n    op: \">\"\n    threshold: 1\n", `f.yaml:3: rule "r": expr: fn "mean": want one of avg, max, min, last, rate`},
		{"bad series", "rules:\n  - name: r\n    expr: {series: 9x, window: 1s}\n    op: \">\"\n    threshold: 1\n", `f.yaml:3: rule "r": expr: series "9x"`},
		{"unknown expr key", "rules:\n  - name: r\n    expr:\n      series: x\n      window: 1s\n      label: {a: b}\n    op: \">\"\n    threshold: 1\n", `f.yaml:6: rule "r": expr: unknown key "label"`},
		{"bad label name", "rules:\n  - name: r\n    expr:\n      series: x\n      window: 1s\n      labels: {a-b: c}\n    op: \">\"\n    threshold: 1\n", `f.yaml:6: rule "r": expr: label name "a-b"`},
		{"unknown action", rule("    actions:\n      - email: {}\n"), `f.yaml:7: rule "r": action #1: unknown key "email"`},
		{"two actions in one", rule("    actions:\n      - {log: {}, reroute: {}}\n"), `f.yaml:7: rule "r": action #1: want exactly one of`},
		{"log with keys", rule("    actions:\n      - log: {level: debug}\n"), `f.yaml:7: rule "r": action #1: log: unknown key "level"`},
		{"webhook no url", rule("    actions:\n      - webhook: {timeout: 1s}\n"), `f.yaml:7: rule "r": action #1: webhook: missing key "url"`},
		{"webhook bad scheme", rule("    actions:\n      - webhook:\n          url: ftp://x/y\n"), `f.yaml:8: rule "r": action #1: webhook: url "ftp://x/y": want an http:// or https:// URL`},
		{"webhook no host", rule("    actions:\n      - webhook: {url: \"http:///path\"}\n"), `f.yaml:7: rule "r": action #1: webhook: url "http:///path"`},
		{"webhook timeout too long", rule("    actions:\n      - webhook:\n          url: http://h/\n          timeout: 61s\n"), `f.yaml:9: rule "r": action #1: webhook: timeout 1m1s is more than 1m0s`},
		{"webhook bad timeout", rule("    actions:\n      - webhook:\n          url: http://h/\n          timeout: forever\n"), `f.yaml:9: rule "r": action #1: webhook: timeout "forever": want a duration`},
		{"command no argv", rule("    actions:\n      - command: {timeout: 1s}\n"), `f.yaml:7: rule "r": action #1: command: missing key "argv"`},
		{"command empty argv", rule("    actions:\n      - command: {argv: []}\n"), `f.yaml:7: rule "r": action #1: command: argv is empty`},
		{"command argv not list", rule("    actions:\n      - command: {argv: /bin/true}\n"), `f.yaml:7: rule "r": action #1: command: argv: want a list`},
		{"command timeout too long", rule("    actions:\n      - command:\n          argv: [/bin/true]\n          timeout: 2m\n"), `f.yaml:9: rule "r": action #1: command: timeout 2m0s is more than 1m0s`},
		{"command timeout zero", rule("    actions:\n      - command:\n          argv: [/bin/true]\n          timeout: 0s\n"), `f.yaml:9: rule "r": action #1: command: timeout is 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("f.yaml", []byte(tc.in))
			if err == nil {
				t.Fatalf("no error; got %+v", f)
			}
			if f != nil {
				t.Errorf("got a file with the error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error %T is not an *Error", err)
			}
		})
	}
}

func TestParseReportsTogether(t *testing.T) {
	in := "rules:\n" +
		"  - name: a\n    expr: {series: x, window: bad}\n    op: \"!\"\n    threshold: 1\n" +
		"  - name: a\n    expr: {series: x, window: 1s}\n    op: \">\"\n    threshold: 1\n    for: -1s\n"
	_, err := Parse("f.yaml", []byte(in))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"f.yaml:3:", "f.yaml:4:", "f.yaml:6:", "f.yaml:10:"}
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d = %q, want it to start with %q", i, lines[i], w)
		}
	}
}

func TestParseErrorLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("rules:\n")
	for range 30 {
		b.WriteString("  - name: \"\"\n")
	}
	_, err := Parse("f.yaml", []byte(b.String()))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxErrors+1 || !strings.Contains(lines[maxErrors], "more problems not shown") {
		t.Errorf("got %d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func TestParseThreshold(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		unit string
		bad  bool
	}{
		{"0.9", 0.9, "", false},
		{"90%", 0.9, "%", false},
		{"0.5%", 0.005, "%", false},
		{"500M", 500e6, "M", false},
		{"1.5G", 1.5e9, "G", false},
		{"10k", 10e3, "k", false},
		{"-3", -3, "", false},
		{".5", 0.5, "", false},
		{"", 0, "", true},
		{"1..2", 0, "", true},
		{"5Mb", 0, "", true},
		{"%", 0, "", true},
	} {
		v, unit, err := parseThreshold(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("parseThreshold(%q) error %v, want bad=%v", tc.in, err, tc.bad)
			continue
		}
		if !tc.bad && (v != tc.want || unit != tc.unit) {
			t.Errorf("parseThreshold(%q) = %v %q, want %v %q", tc.in, v, unit, tc.want, tc.unit)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(validFile))
	f.Add([]byte(rule("    actions:\n      - command: {argv: [a], timeout: 1s}\n")))
	f.Add([]byte("rules:\n  - &a {name: x, <<: *a}\n"))
	f.Add([]byte("rules: [{name: a, expr: {series: x, labels: {k: v}, fn: rate, window: 1m}, op: '<', threshold: 1%}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.yaml", data)
		if err == nil {
			if file == nil {
				t.Fatal("nil file without an error")
			}
			for _, r := range file.Rules {
				if r.Name == "" || r.Expr.Window <= 0 || len(r.Actions) == 0 {
					t.Fatalf("accepted an invalid rule %+v", r)
				}
			}
			return
		}
		if !strings.HasPrefix(err.Error(), "fuzz.yaml:") {
			t.Fatalf("error without the file name: %v", err)
		}
	})
}
