// Package yamlfile reads YAML configuration files as gopkg.in/yaml.v3 node
// trees rather than decoding them into structs, so that every problem can
// name the place it is about as FILE:LINE, the form editors and terminals
// turn into a link to the line.
//
// A Reader walks the nodes of one file and records problems instead of
// stopping at the first: unknown keys (with a suggestion when one looks
// misspelt), duplicate keys, missing keys and values of the wrong kind are
// all errors, not silently ignored or zeroed. Aliases and merge keys (<<)
// are followed, so that a file can share settings between entries.
//
// The formats themselves (which keys there are, what values mean) belong
// to the packages that use it: internal/testbed for topology files and
// internal/monitor/rules for rules files.
package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Error is one problem in a file. It prints as "FILE:LINE: what is wrong".
type Error struct {
	File string
	Line int
	Err  error
}

// Error formats the problem as FILE:LINE: message.
func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the problem without its location, so that callers can
// match the errors it wraps with errors.Is.
func (e *Error) Unwrap() error { return e.Err }

// MaxErrors is how many problems Err reports when Reader.Max is 0: past
// this many the rest are most likely consequences of the first ones.
const MaxErrors = 20

// Reader reads the nodes of one file and records the problems it finds.
// The messages of its methods start with what, the caller's name for the
// value they are about ("rule #2: expr", "link \"wan\"").
type Reader struct {
	// File is what messages call the file.
	File string
	// Max is how many problems Err reports at most; 0 means MaxErrors.
	Max int
	// Errs is where the problems are recorded, each an *Error, in the
	// order found; nil means a slice of the Reader's own. A caller that
	// looks at them itself can point it at a slice of its own.
	Errs *[]error
}

// Errorf records a problem at line (1 when line is not positive). The
// format may use %w.
func (r *Reader) Errorf(line int, format string, args ...any) {
	if line < 1 {
		line = 1
	}
	if r.Errs == nil {
		r.Errs = new([]error)
	}
	*r.Errs = append(*r.Errs, &Error{File: r.File, Line: line, Err: fmt.Errorf(format, args...)})
}

// Err returns the problems recorded so far, or nil: the one *Error, or
// several joined with errors.Join in line order (stable, so that problems
// on one line keep the order found). Past Max problems the rest are
// counted in a last line, "FILE: N more problems not shown".
func (r *Reader) Err() error {
	if r.Errs == nil {
		return nil
	}
	errs := *r.Errs
	slices.SortStableFunc(errs, func(a, b error) int {
		return a.(*Error).Line - b.(*Error).Line
	})
	limit := r.Max
	if limit <= 0 {
		limit = MaxErrors
	}
	switch n := len(errs); {
	case n == 0:
		return nil
	case n == 1:
		return errs[0]
	case n > limit:
		shown := append(errs[:limit:limit], fmt.Errorf("%s: %d more problems not shown", r.File, n-limit))
		return errors.Join(shown...)
	default:
		return errors.Join(errs...)
	}
}

// Document decodes data, which may hold one YAML document at most, and
// returns its root node, or nil when there is none. kind names the file
// in the message about a second document ("a second YAML document: a
// rules file holds one"). An empty file, or a document that is only null,
// is no problem when empty is "", and else is recorded as the problem
// empty says.
func (r *Reader) Document(data []byte, kind, empty string) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if !errors.Is(err, io.EOF) {
			r.yamlError(err)
		} else if empty != "" {
			r.Errorf(1, "%s", empty)
		}
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		r.Errorf(extra.Line, "a second YAML document: a %s holds one", kind)
		return nil
	} else if !errors.Is(err, io.EOF) {
		r.yamlError(err)
		return nil
	}
	if len(doc.Content) != 1 || IsNull(doc.Content[0]) {
		if empty != "" {
			r.Errorf(doc.Line, "%s", empty)
		}
		return nil
	}
	return doc.Content[0]
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a syntax error from the YAML package, "yaml: line N:
// problem", into a problem at line N. The YAML package leaves the line out
// for problems on the first line.
func (r *Reader) yamlError(err error) {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		r.Errorf(n, "YAML syntax: %s", m[2])
		return
	}
	r.Errorf(1, "YAML syntax: %s", strings.TrimPrefix(msg, "yaml: "))
}

// IsNull reports whether n is a null scalar ("~", "null", or nothing
// after a key).
func IsNull(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// Deref follows aliases to the node they name (nil for nil).
func Deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// lineOf is n's line, or 1 for nil.
func lineOf(n *yaml.Node) int {
	if n == nil {
		return 1
	}
	return n.Line
}

// Fields is one YAML mapping by key, with the line of every key.
type Fields struct {
	Line  int      // the mapping's
	Keys  []string // in file order, for deterministic messages
	Vals  map[string]*yaml.Node
	Lines map[string]int // the line of each key
}

// Has reports whether the mapping has key k.
func (f Fields) Has(k string) bool { return f.Vals[k] != nil }

// LineOf returns the line of key k's value, or of the mapping when k is
// absent (a problem about a missing key belongs to the mapping).
func (f Fields) LineOf(k string) int {
	if v := f.Vals[k]; v != nil {
		return v.Line
	}
	return f.Line
}

// Fields reads mapping n; a null value reads as an empty mapping when
// nullOK ("log:" with nothing after it). Duplicate keys are problems (YAML
// forbids them, but the YAML package keeps them in its node tree). Merge
// keys are expanded: keys written in the mapping win over merged ones, and
// earlier merged mappings over later ones, as the YAML merge key type
// specifies.
func (r *Reader) Fields(n *yaml.Node, what string, nullOK bool) (Fields, bool) {
	n = Deref(n)
	f := Fields{Line: lineOf(n), Vals: map[string]*yaml.Node{}, Lines: map[string]int{}}
	if nullOK && IsNull(n) {
		return f, true
	}
	if n == nil || n.Kind != yaml.MappingNode {
		r.Errorf(f.Line, "%s: want a mapping of keys to values, not %s", what, Describe(n))
		return f, false
	}
	ok := r.collect(&f, n, what, 0, true, map[*yaml.Node]bool{n: true})
	return f, ok
}

// collect adds the keys of mapping n to f; own is false for merged
// mappings, whose keys give way to those already there. Each mapping is
// merged at most once (seen): merging it again adds nothing, and without
// the check nested merge lists of aliases would blow up exponentially,
// like the "billion laughs".
func (r *Reader) collect(f *Fields, n *yaml.Node, what string, depth int, own bool, seen map[*yaml.Node]bool) bool {
	if depth > 10 {
		r.Errorf(n.Line, "%s: merge keys nested too deeply", what)
		return false
	}
	ok := true
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Deref(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			line := n.Line
			if k != nil {
				line = k.Line
			}
			r.Errorf(line, "%s: a key must be a plain word, not %s", what, Describe(k))
			ok = false
			continue
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if prev, dup := f.Lines[k.Value]; dup {
			if own {
				r.Errorf(k.Line, "%s: duplicate key %q (first at line %d)", what, k.Value, prev)
				ok = false
			}
			continue
		}
		f.Keys = append(f.Keys, k.Value)
		f.Vals[k.Value] = v
		f.Lines[k.Value] = k.Line
	}
	for _, m := range merges {
		m = Deref(m)
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
			r.Errorf(line, "%s: a merge key (<<) takes a mapping or a list of mappings, not %s", what, Describe(m))
			ok = false
		}
		for _, s := range srcs {
			s = Deref(s)
			if s == nil || seen[s] {
				continue
			}
			seen[s] = true
			if s.Kind != yaml.MappingNode {
				r.Errorf(s.Line, "%s: a merge key (<<) takes a mapping or a list of mappings, not %s", what, Describe(s))
				ok = false
				continue
			}
			ok = r.collect(f, s, what, depth+1, false, seen) && ok
		}
	}
	return ok
}

// Allow records a problem for every key of f not in allowed, listing the
// allowed ones and suggesting the likeliest when the key looks misspelt.
// It reports whether every key was allowed.
func (r *Reader) Allow(f Fields, what string, allowed ...string) bool {
	ok := true
	for _, k := range f.Keys {
		if slices.Contains(allowed, k) {
			continue
		}
		msg := fmt.Sprintf("%s: unknown key %q (allowed: %s)", what, k, strings.Join(allowed, ", "))
		if s := Suggest(k, allowed); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		r.Errorf(f.Lines[k], "%s", msg)
		ok = false
	}
	return ok
}

// Require records a problem for every key of keys missing from f, and
// reports whether none was.
func (r *Reader) Require(f Fields, what string, keys ...string) bool {
	ok := true
	for _, k := range keys {
		if !f.Has(k) {
			r.Errorf(f.Line, "%s: missing key %q", what, k)
			ok = false
		}
	}
	return ok
}

// Describe names the kind of a node for messages: "a mapping", "a list",
// "nothing" (null or nil), or a scalar's text, quoted.
func Describe(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if IsNull(n) {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "that"
}

// Scalar returns the text of a scalar value as written (so that "1500"
// and "10G" read the same whatever type YAML would give them). Null is a
// problem: a key with nothing after it has no value.
func (r *Reader) Scalar(n *yaml.Node, what string) (string, bool) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || IsNull(n) {
		r.Errorf(lineOf(n), "%s: want a single value, not %s", what, Describe(n))
		return "", false
	}
	return n.Value, true
}

// Sequence returns the items of a list value. Null reads as an empty list
// ("links:" with nothing under it).
func (r *Reader) Sequence(n *yaml.Node, what string) ([]*yaml.Node, bool) {
	n = Deref(n)
	if n == nil || IsNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		r.Errorf(n.Line, "%s: want a list, not %s", what, Describe(n))
		return nil, false
	}
	return n.Content, true
}

// Duration reads key of f as a non-negative Go duration such as 30s, at
// most max unless max is 0. The message for a value that is no duration
// says "want a duration like " and then examples.
func (r *Reader) Duration(f Fields, key, what, examples string, max time.Duration) (time.Duration, bool) {
	s, ok := r.Scalar(f.Vals[key], what+": "+key)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		r.Errorf(f.LineOf(key), "%s: %s %q: want a duration like %s", what, key, s, examples)
	case d < 0:
		r.Errorf(f.LineOf(key), "%s: %s %v is negative", what, key, d)
	case max > 0 && d > max:
		r.Errorf(f.LineOf(key), "%s: %s %v is more than %v", what, key, d, max)
	default:
		return d, true
	}
	return 0, false
}

// Suggest returns the candidate closest to word when it is close enough
// to be a likely typo (fewer than three edits, and fewer than the
// candidate's length), or "".
func Suggest(word string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD && d < len(c) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt32 // names are short; do not spend time on junk
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
