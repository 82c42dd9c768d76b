package rules

// The parser walks yaml.Node trees instead of decoding into structs so that
// every message can name its line, and so that unknown keys, duplicate keys
// and values of the wrong kind are errors rather than silently ignored. The
// node helpers follow internal/testbed/topology.go; they are copied, not
// shared, because both are small and the two formats may diverge.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Error is one problem in a rules file. It prints as "FILE:LINE: what is
// wrong", the form editors and terminals turn into a link to the line.
type Error struct {
	File string
	Line int
	Err  error
}

// Error formats the problem as FILE:LINE: message.
func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the problem without its location.
func (e *Error) Unwrap() error { return e.Err }

var (
	ruleNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
	seriesNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	thresholdRE  = regexp.MustCompile(`^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))\s*([a-zA-Z%]*)$`)
	yamlLineRE   = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

var siPrefix = map[string]float64{"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15, "e": 1e18}

// Load reads and parses the rules file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read rules: %w", err)
	}
	return Parse(path, data)
}

// Parse parses and validates a rules file; name is what messages call the
// file. On failure the error lists the problems found, each an *Error
// (joined with errors.Join when there are several), in file order, at most
// 20 of them. A file with no rules is valid: it turns alerting off.
func Parse(name string, data []byte) (*File, error) {
	p := &parser{f: &File{Name: name}, names: map[string]int{}}
	root, ok := p.document(data)
	if ok {
		p.top(root)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	if p.f.Rules == nil {
		p.f.Rules = []Rule{}
	}
	return p.f, nil
}

type parser struct {
	f     *File
	errs  []error
	names map[string]int // rule name to the line of its first use
}

func (p *parser) errorf(line int, format string, args ...any) {
	if line < 1 {
		line = 1
	}
	p.errs = append(p.errs, &Error{File: p.f.Name, Line: line, Err: fmt.Errorf(format, args...)})
}

func (p *parser) err() error {
	slices.SortStableFunc(p.errs, func(a, b error) int {
		return a.(*Error).Line - b.(*Error).Line
	})
	switch n := len(p.errs); {
	case n == 0:
		return nil
	case n == 1:
		return p.errs[0]
	case n > maxErrors:
		errs := append(p.errs[:maxErrors:maxErrors], fmt.Errorf("%s: %d more problems not shown", p.f.Name, n-maxErrors))
		return errors.Join(errs...)
	default:
		return errors.Join(p.errs...)
	}
}

func (p *parser) document(data []byte) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, false // an empty file: no rules
		}
		p.yamlError(err)
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errorf(extra.Line, "a second YAML document: a rules file holds one")
		return nil, false
	} else if !errors.Is(err, io.EOF) {
		p.yamlError(err)
		return nil, false
	}
	if len(doc.Content) != 1 || isNull(doc.Content[0]) {
		return nil, false
	}
	return doc.Content[0], true
}

func (p *parser) yamlError(err error) {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		p.errorf(n, "YAML syntax: %s", m[2])
		return
	}
	p.errorf(1, "YAML syntax: %s", strings.TrimPrefix(msg, "yaml: "))
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// fields is one YAML mapping by key, with the line of every key.
type fields struct {
	line  int
	keys  []string
	vals  map[string]*yaml.Node
	lines map[string]int
}

func (f fields) has(k string) bool { return f.vals[k] != nil }

func (f fields) lineOf(k string) int {
	if v := f.vals[k]; v != nil {
		return v.Line
	}
	return f.line
}

// fields reads mapping n; a null value reads as an empty mapping when
// nullOK ("log:" with nothing after it).
func (p *parser) fields(n *yaml.Node, what string, nullOK bool) (fields, bool) {
	n = deref(n)
	f := fields{line: n.Line, vals: map[string]*yaml.Node{}, lines: map[string]int{}}
	if nullOK && isNull(n) {
		return f, true
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, "%s: want a mapping of keys to values, not %s", what, describe(n))
		return f, false
	}
	ok := p.collect(&f, n, what, 0, true, map[*yaml.Node]bool{n: true})
	return f, ok
}

// collect adds the keys of mapping n to f, expanding merge keys: keys in
// the mapping win over merged ones, earlier merged mappings over later
// ones. Each mapping is merged at most once (seen), which keeps nested
// merges of aliases from blowing up.
func (p *parser) collect(f *fields, n *yaml.Node, what string, depth int, own bool, seen map[*yaml.Node]bool) bool {
	if depth > 10 {
		p.errorf(n.Line, "%s: merge keys nested too deeply", what)
		return false
	}
	ok := true
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			line := n.Line
			if k != nil {
				line = k.Line
			}
			p.errorf(line, "%s: a key must be a plain word, not %s", what, describe(k))
			ok = false
			continue
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if prev, dup := f.lines[k.Value]; dup {
			if own {
				p.errorf(k.Line, "%s: duplicate key %q (first at line %d)", what, k.Value, prev)
				ok = false
			}
			continue
		}
		f.keys = append(f.keys, k.Value)
		f.vals[k.Value] = v
		f.lines[k.Value] = k.Line
	}
	for _, m := range merges {
		m = deref(m)
		var srcs []*yaml.Node
		if m != nil {
			switch m.Kind {
			case yaml.MappingNode:
				srcs = []*yaml.Node{m}
			case yaml.SequenceNode:
				srcs = m.Content
			}
		}
		if len(srcs) == 0 {
			line := n.Line
			if m != nil {
				line = m.Line
			}
			p.errorf(line, "%s: a merge key (<<) takes a mapping or a list of mappings, not %s", what, describe(m))
			ok = false
		}
		for _, s := range srcs {
			s = deref(s)
			if s == nil || seen[s] {
				continue
			}
			seen[s] = true
			if s.Kind != yaml.MappingNode {
				p.errorf(s.Line, "%s: a merge key (<<) takes a mapping or a list of mappings, not %s", what, describe(s))
				ok = false
				continue
			}
			ok = p.collect(f, s, what, depth+1, false, seen) && ok
		}
	}
	return ok
}

func (p *parser) allow(f fields, what string, allowed ...string) bool {
	ok := true
	for _, k := range f.keys {
		if slices.Contains(allowed, k) {
			continue
		}
		msg := fmt.Sprintf("%s: unknown key %q (allowed: %s)", what, k, strings.Join(allowed, ", "))
		if s := suggest(k, allowed); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		p.errorf(f.lines[k], "%s", msg)
		ok = false
	}
	return ok
}

func (p *parser) require(f fields, what string, keys ...string) bool {
	ok := true
	for _, k := range keys {
		if !f.has(k) {
			p.errorf(f.line, "%s: missing key %q", what, k)
			ok = false
		}
	}
	return ok
}

func describe(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "that"
}

func (p *parser) scalar(n *yaml.Node, what string) (string, bool) {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || isNull(n) {
		line := 1
		if n != nil {
			line = n.Line
		}
		p.errorf(line, "%s: want a single value, not %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) sequence(n *yaml.Node, what string) ([]*yaml.Node, bool) {
	n = deref(n)
	if n == nil || isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n.Line, "%s: want a list, not %s", what, describe(n))
		return nil, false
	}
	return n.Content, true
}

func (p *parser) top(root *yaml.Node) {
	f, ok := p.fields(root, "rules file", false)
	if !ok {
		return
	}
	p.allow(f, "rules file", "rules")
	items, _ := p.sequence(f.vals["rules"], "rules")
	for i, it := range items {
		p.rule(i, it)
	}
}

func (p *parser) rule(i int, n *yaml.Node) {
	label := fmt.Sprintf("rule #%d", i+1)
	f, ok := p.fields(n, label, false)
	if !ok {
		return
	}
	r := Rule{Line: deref(n).Line, Severity: SeverityWarning}
	if p.require(f, label, "name") {
		if s, ok := p.scalar(f.vals["name"], label+": name"); ok {
			switch {
			case s == "":
				p.errorf(f.lineOf("name"), "%s: name is empty: want a word of letters, digits, \"_\", \"-\", \".\" or \":\"", label)
			case len(s) > maxNameLen:
				p.errorf(f.lineOf("name"), "%s: name %q is %d characters long: at most %d", label, s, len(s), maxNameLen)
			case !ruleNameRE.MatchString(s):
				p.errorf(f.lineOf("name"), "%s: name %q: use letters, digits, \"_\", \"-\", \".\" and \":\", starting with a letter or digit", label, s)
			default:
				label = fmt.Sprintf("rule %q", s)
				if prev, dup := p.names[s]; dup {
					p.errorf(f.lineOf("name"), "%s: duplicate rule name (first at line %d)", label, prev)
				} else {
					p.names[s] = f.lineOf("name")
				}
			}
			r.Name = s
		}
	}
	p.allow(f, label, "name", "expr", "op", "threshold", "for", "actions", "severity")
	p.require(f, label, "expr", "op", "threshold")
	if f.has("expr") {
		r.Expr = p.expr(f.vals["expr"], label+": expr")
	}
	if f.has("op") {
		if s, ok := p.scalar(f.vals["op"], label+": op"); ok {
			if slices.Contains(ops, s) {
				r.Op = Op(s)
			} else {
				p.errorf(f.lineOf("op"), "%s: op %q: want one of \">\", \"<\", \">=\", \"<=\" (quoted)", label, s)
			}
		}
	}
	if f.has("threshold") {
		if s, ok := p.scalar(f.vals["threshold"], label+": threshold"); ok {
			v, unit, err := parseThreshold(s)
			if err != nil {
				p.errorf(f.lineOf("threshold"), "%s: threshold %q: %w", label, s, err)
			}
			r.Threshold, r.Unit = v, unit
		}
	}
	if f.has("for") {
		if d, ok := p.duration(f, "for", label); ok {
			r.For = d
		}
	}
	if f.has("severity") {
		if s, ok := p.scalar(f.vals["severity"], label+": severity"); ok {
			if slices.Contains(severities, s) {
				r.Severity = Severity(s)
			} else {
				p.errorf(f.lineOf("severity"), "%s: severity %q: want one of %s", label, s, strings.Join(severities, ", "))
			}
		}
	}
	items, _ := p.sequence(f.vals["actions"], label+": actions")
	for j, it := range items {
		if a, ok := p.action(it, fmt.Sprintf("%s: action #%d", label, j+1)); ok {
			r.Actions = append(r.Actions, a)
		}
	}
	if len(items) == 0 {
		r.Actions = []Action{{Kind: ActionLog, Line: f.lineOf("actions")}}
	}
	p.f.Rules = append(p.f.Rules, r)
}

func (p *parser) expr(n *yaml.Node, label string) Expr {
	e := Expr{Fn: FnLast}
	f, ok := p.fields(n, label, false)
	if !ok {
		return e
	}
	p.allow(f, label, "series", "labels", "fn", "window")
	p.require(f, label, "series", "window")
	if f.has("series") {
		if s, ok := p.scalar(f.vals["series"], label+": series"); ok {
			if seriesNameRE.MatchString(s) {
				e.Series = s
			} else {
				p.errorf(f.lineOf("series"), "%s: series %q: want a metric name of letters, digits, \"_\" and \":\", not starting with a digit", label, s)
			}
		}
	}
	if f.has("labels") {
		lf, ok := p.fields(f.vals["labels"], label+": labels", true)
		if ok {
			e.Labels = map[string]string{}
			for _, k := range lf.keys {
				if !labelNameRE.MatchString(k) {
					p.errorf(lf.lines[k], "%s: label name %q: want letters, digits and \"_\", not starting with a digit", label, k)
					continue
				}
				if v, ok := p.scalar(lf.vals[k], label+": labels: "+k); ok {
					e.Labels[k] = v
				}
			}
		}
	}
	if f.has("fn") {
		if s, ok := p.scalar(f.vals["fn"], label+": fn"); ok {
			if slices.Contains(fns, s) {
				e.Fn = Fn(s)
			} else {
				p.errorf(f.lineOf("fn"), "%s: fn %q: want one of %s", label, s, strings.Join(fns, ", "))
			}
		}
	}
	if f.has("window") {
		if d, ok := p.duration(f, "window", label); ok {
			switch {
			case d == 0:
				p.errorf(f.lineOf("window"), "%s: window is 0: want a positive duration like 30s", label)
			case d > MaxWindow:
				p.errorf(f.lineOf("window"), "%s: window %v is more than %v", label, d, MaxWindow)
			default:
				e.Window = d
			}
		}
	}
	return e
}

func (p *parser) action(n *yaml.Node, label string) (Action, bool) {
	a := Action{Line: deref(n).Line}
	f, ok := p.fields(n, label, false)
	if !ok {
		return a, false
	}
	if len(f.keys) != 1 {
		p.errorf(f.line, "%s: want exactly one of %s, not %d keys", label, strings.Join(actionKinds, ", "), len(f.keys))
		return a, false
	}
	kind := f.keys[0]
	if !p.allow(f, label, actionKinds...) {
		return a, false
	}
	a.Kind = ActionKind(kind)
	a.Line = f.lines[kind]
	label += ": " + kind
	body, ok := p.fields(f.vals[kind], label, true)
	if !ok {
		return a, false
	}
	switch a.Kind {
	case ActionLog, ActionReroute:
		return a, p.allow(body, label)
	case ActionWebhook:
		ok = p.allow(body, label, "url", "timeout")
		ok = p.require(body, label, "url") && ok
		if body.has("url") {
			s, sok := p.scalar(body.vals["url"], label+": url")
			if sok {
				u, err := url.Parse(s)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					p.errorf(body.lineOf("url"), "%s: url %q: want an http:// or https:// URL with a host", label, s)
					ok = false
				}
				a.URL = s
			}
			ok = ok && sok
		}
	case ActionCommand:
		ok = p.allow(body, label, "argv", "timeout")
		ok = p.require(body, label, "argv") && ok
		if body.has("argv") {
			items, sok := p.sequence(body.vals["argv"], label+": argv")
			if sok && len(items) == 0 {
				p.errorf(body.lineOf("argv"), "%s: argv is empty: want the program and its arguments, like [/usr/bin/logger, alert]", label)
				sok = false
			}
			for j, it := range items {
				s, aok := p.scalar(it, fmt.Sprintf("%s: argv[%d]", label, j))
				if aok && j == 0 && s == "" {
					p.errorf(deref(it).Line, "%s: argv[0] is empty: want a program", label)
					aok = false
				}
				sok = sok && aok
				a.Argv = append(a.Argv, s)
			}
			ok = ok && sok
		}
	}
	a.Timeout = DefaultTimeout
	if body.has("timeout") {
		d, tok := p.duration(body, "timeout", label)
		switch {
		case !tok:
			ok = false
		case d == 0:
			p.errorf(body.lineOf("timeout"), "%s: timeout is 0: want a positive duration up to %v", label, MaxTimeout)
			ok = false
		case d > MaxTimeout:
			p.errorf(body.lineOf("timeout"), "%s: timeout %v is more than %v", label, d, MaxTimeout)
			ok = false
		default:
			a.Timeout = d
		}
	}
	return a, ok
}

// duration reads a non-negative Go duration such as 30s.
func (p *parser) duration(f fields, key, label string) (time.Duration, bool) {
	s, ok := p.scalar(f.vals[key], label+": "+key)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.errorf(f.lineOf(key), "%s: %s %q: want a duration like 30s, 5m or 500ms", label, key, s)
	case d < 0:
		p.errorf(f.lineOf(key), "%s: %s %v is negative", label, key, d)
	default:
		return d, true
	}
	return 0, false
}

// parseThreshold reads a number with an optional "%" or SI prefix and
// returns its value and the unit as written ("", "%", or the prefix).
func parseThreshold(s string) (float64, string, error) {
	m := thresholdRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, "", errors.New("want a number like 0.9, 1% or 500M")
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, "", errors.New("want a number like 0.9, 1% or 500M")
	}
	unit := m[2]
	switch {
	case unit == "":
	case unit == "%":
		v /= 100
	case len(unit) == 1 && siPrefix[strings.ToLower(unit)] != 0:
		v *= siPrefix[strings.ToLower(unit)]
	default:
		return 0, "", fmt.Errorf("unknown unit %q: want %% or one of the prefixes k, M, G, T, P, E", unit)
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, "", errors.New("out of range")
	}
	return v, unit, nil
}

// suggest returns the candidate closest to word when it is close enough to
// be a likely typo, or "".
func suggest(word string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD && d < len(c) {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt32
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
