package rules

// The parser walks yaml.Node trees with internal/yamlfile instead of
// decoding into structs so that every message can name its line, and so
// that unknown keys, duplicate keys and values of the wrong kind are errors
// rather than silently ignored.

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/lightpath/lightpath/internal/yamlfile"
)

// Error is one problem in a rules file. It prints as "FILE:LINE: what is
// wrong", the form editors and terminals turn into a link to the line;
// Unwrap returns the problem without its location.
type Error = yamlfile.Error

var (
	ruleNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
	seriesNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	thresholdRE  = regexp.MustCompile(`^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))\s*([a-zA-Z%]*)$`)
)

// durationExamples ends the message about a value that is no duration.
const durationExamples = "30s, 5m or 500ms"

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
	p := &parser{Reader: yamlfile.Reader{File: name, Max: maxErrors}, f: &File{Name: name}, names: map[string]int{}}
	if root := p.Document(data, "rules file", ""); root != nil {
		p.top(root)
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	if p.f.Rules == nil {
		p.f.Rules = []Rule{}
	}
	return p.f, nil
}

type parser struct {
	yamlfile.Reader
	f     *File
	names map[string]int // rule name to the line of its first use
}

func (p *parser) top(root *yaml.Node) {
	f, ok := p.Fields(root, "rules file", false)
	if !ok {
		return
	}
	p.Allow(f, "rules file", "rules")
	items, _ := p.Sequence(f.Vals["rules"], "rules")
	for i, it := range items {
		p.rule(i, it)
	}
}

func (p *parser) rule(i int, n *yaml.Node) {
	label := fmt.Sprintf("rule #%d", i+1)
	f, ok := p.Fields(n, label, false)
	if !ok {
		return
	}
	r := Rule{Line: yamlfile.Deref(n).Line, Severity: SeverityWarning}
	if p.Require(f, label, "name") {
		if s, ok := p.Scalar(f.Vals["name"], label+": name"); ok {
			switch {
			case s == "":
				p.Errorf(f.LineOf("name"), "%s: name is empty: want a word of letters, digits, \"_\", \"-\", \".\" or \":\"", label)
			case len(s) > maxNameLen:
				p.Errorf(f.LineOf("name"), "%s: name %q is %d characters long: at most %d", label, s, len(s), maxNameLen)
			case !ruleNameRE.MatchString(s):
				p.Errorf(f.LineOf("name"), "%s: name %q: use letters, digits, \"_\", \"-\", \".\" and \":\", starting with a letter or digit", label, s)
			default:
				label = fmt.Sprintf("rule %q", s)
				if prev, dup := p.names[s]; dup {
					p.Errorf(f.LineOf("name"), "%s: duplicate rule name (first at line %d)", label, prev)
				} else {
					p.names[s] = f.LineOf("name")
				}
			}
			r.Name = s
		}
	}
	p.Allow(f, label, "name", "expr", "op", "threshold", "for", "actions", "severity")
	p.Require(f, label, "expr", "op", "threshold")
	if f.Has("expr") {
		r.Expr = p.expr(f.Vals["expr"], label+": expr")
	}
	if f.Has("op") {
		if s, ok := p.Scalar(f.Vals["op"], label+": op"); ok {
			if slices.Contains(ops, s) {
				r.Op = Op(s)
			} else {
				p.Errorf(f.LineOf("op"), "%s: op %q: want one of \">\", \"<\", \">=\", \"<=\" (quoted)", label, s)
			}
		}
	}
	if f.Has("threshold") {
		if s, ok := p.Scalar(f.Vals["threshold"], label+": threshold"); ok {
			v, unit, err := parseThreshold(s)
			if err != nil {
				p.Errorf(f.LineOf("threshold"), "%s: threshold %q: %w", label, s, err)
			}
			r.Threshold, r.Unit = v, unit
		}
	}
	if f.Has("for") {
		if d, ok := p.Duration(f, "for", label, durationExamples, 0); ok {
			r.For = d
		}
	}
	if f.Has("severity") {
		if s, ok := p.Scalar(f.Vals["severity"], label+": severity"); ok {
			if slices.Contains(severities, s) {
				r.Severity = Severity(s)
			} else {
				p.Errorf(f.LineOf("severity"), "%s: severity %q: want one of %s", label, s, strings.Join(severities, ", "))
			}
		}
	}
	items, _ := p.Sequence(f.Vals["actions"], label+": actions")
	for j, it := range items {
		if a, ok := p.action(it, fmt.Sprintf("%s: action #%d", label, j+1)); ok {
			r.Actions = append(r.Actions, a)
		}
	}
	if len(items) == 0 {
		r.Actions = []Action{{Kind: ActionLog, Line: f.LineOf("actions")}}
	}
	p.f.Rules = append(p.f.Rules, r)
}

func (p *parser) expr(n *yaml.Node, label string) Expr {
	e := Expr{Fn: FnLast}
	f, ok := p.Fields(n, label, false)
	if !ok {
		return e
	}
	p.Allow(f, label, "series", "labels", "fn", "window")
	p.Require(f, label, "series", "window")
	if f.Has("series") {
		if s, ok := p.Scalar(f.Vals["series"], label+": series"); ok {
			if seriesNameRE.MatchString(s) {
				e.Series = s
			} else {
				p.Errorf(f.LineOf("series"), "%s: series %q: want a metric name of letters, digits, \"_\" and \":\", not starting with a digit", label, s)
			}
		}
	}
	if f.Has("labels") {
		lf, ok := p.Fields(f.Vals["labels"], label+": labels", true)
		if ok {
			e.Labels = map[string]string{}
			for _, k := range lf.Keys {
				if !labelNameRE.MatchString(k) {
					p.Errorf(lf.Lines[k], "%s: label name %q: want letters, digits and \"_\", not starting with a digit", label, k)
					continue
				}
				if v, ok := p.Scalar(lf.Vals[k], label+": labels: "+k); ok {
					e.Labels[k] = v
				}
			}
		}
	}
	if f.Has("fn") {
		if s, ok := p.Scalar(f.Vals["fn"], label+": fn"); ok {
			if slices.Contains(fns, s) {
				e.Fn = Fn(s)
			} else {
				p.Errorf(f.LineOf("fn"), "%s: fn %q: want one of %s", label, s, strings.Join(fns, ", "))
			}
		}
	}
	if f.Has("window") {
		if d, ok := p.Duration(f, "window", label, durationExamples, 0); ok {
			switch {
			case d == 0:
				p.Errorf(f.LineOf("window"), "%s: window is 0: want a positive duration like 30s", label)
			case d > MaxWindow:
				p.Errorf(f.LineOf("window"), "%s: window %v is more than %v", label, d, MaxWindow)
			default:
				e.Window = d
			}
		}
	}
	return e
}

func (p *parser) action(n *yaml.Node, label string) (Action, bool) {
	a := Action{Line: yamlfile.Deref(n).Line}
	f, ok := p.Fields(n, label, false)
	if !ok {
		return a, false
	}
	if len(f.Keys) != 1 {
		p.Errorf(f.Line, "%s: want exactly one of %s, not %d keys", label, strings.Join(actionKinds, ", "), len(f.Keys))
		return a, false
	}
	kind := f.Keys[0]
	if !p.Allow(f, label, actionKinds...) {
		return a, false
	}
	a.Kind = ActionKind(kind)
	a.Line = f.Lines[kind]
	label += ": " + kind
	body, ok := p.Fields(f.Vals[kind], label, true)
	if !ok {
		return a, false
	}
	switch a.Kind {
	case ActionLog, ActionReroute:
		return a, p.Allow(body, label)
	case ActionWebhook:
		ok = p.Allow(body, label, "url", "timeout")
		ok = p.Require(body, label, "url") && ok
		if body.Has("url") {
			s, sok := p.Scalar(body.Vals["url"], label+": url")
			if sok {
				u, err := url.Parse(s)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					p.Errorf(body.LineOf("url"), "%s: url %q: want an http:// or https:// URL with a host", label, s)
					ok = false
				}
				a.URL = s
			}
			ok = ok && sok
		}
	case ActionCommand:
		ok = p.Allow(body, label, "argv", "timeout")
		ok = p.Require(body, label, "argv") && ok
		if body.Has("argv") {
			items, sok := p.Sequence(body.Vals["argv"], label+": argv")
			if sok && len(items) == 0 {
				p.Errorf(body.LineOf("argv"), "%s: argv is empty: want the program and its arguments, like [/usr/bin/logger, alert]", label)
				sok = false
			}
			for j, it := range items {
				s, aok := p.Scalar(it, fmt.Sprintf("%s: argv[%d]", label, j))
				if aok && j == 0 && s == "" {
					p.Errorf(yamlfile.Deref(it).Line, "%s: argv[0] is empty: want a program", label)
					aok = false
				}
				sok = sok && aok
				a.Argv = append(a.Argv, s)
			}
			ok = ok && sok
		}
	}
	a.Timeout = DefaultTimeout
	if body.Has("timeout") {
		d, tok := p.Duration(body, "timeout", label, durationExamples, 0)
		switch {
		case !tok:
			ok = false
		case d == 0:
			p.Errorf(body.LineOf("timeout"), "%s: timeout is 0: want a positive duration up to %v", label, MaxTimeout)
			ok = false
		case d > MaxTimeout:
			p.Errorf(body.LineOf("timeout"), "%s: timeout %v is more than %v", label, d, MaxTimeout)
			ok = false
		default:
			a.Timeout = d
		}
	}
	return a, ok
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
