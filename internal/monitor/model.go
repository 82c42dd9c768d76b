// Package monitor holds Lightpath's metric model, shared by the agents'
// collectors, the pushes they send, the controller's repository, the rules
// and the dashboard: a series is a metric name and a sorted set of labels;
// a sample is a series' value at an instant in milliseconds since the Unix
// epoch. The subpackages do the work: chunk (the compressed encoding),
// repo (the repository), rules (the rules file and state machine), collect
// (the agents' collectors) and push (batching and the on-disk buffer).
package monitor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Label is one name=value pair of a series.
type Label struct {
	Name, Value string
}

// Labels is a set of labels sorted by name, without duplicates or empty
// values (an empty value is the same as no label, as in Prometheus).
type Labels []Label

// FromMap builds sorted Labels from a map, dropping empty values.
func FromMap(m map[string]string) Labels {
	ls := make(Labels, 0, len(m))
	for k, v := range m {
		if v != "" {
			ls = append(ls, Label{k, v})
		}
	}
	slices.SortFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	return ls
}

// L builds Labels from name, value pairs (a convenience for collectors).
func L(pairs ...string) Labels {
	m := make(map[string]string, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return FromMap(m)
}

// Map returns the labels as a map.
func (ls Labels) Map() map[string]string {
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.Name] = l.Value
	}
	return m
}

// Get returns a label's value, or "".
func (ls Labels) Get(name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// With returns a copy with one label set (or removed when value is "").
func (ls Labels) With(name, value string) Labels {
	m := ls.Map()
	m[name] = value
	return FromMap(m)
}

// String renders the labels as Prometheus does: {a="1",b="2"}.
func (ls Labels) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.Name)
		b.WriteString("=")
		b.WriteString(strconv.Quote(l.Value))
	}
	b.WriteByte('}')
	return b.String()
}

// Key is a series' identity as one string: name{labels}. Equal series have
// equal keys.
func Key(name string, ls Labels) string { return name + ls.String() }

// Type is a metric's kind, as in the Prometheus exposition format.
type Type string

// The metric types a push may declare.
const (
	Counter Type = "counter"
	Gauge   Type = "gauge"
)

// Meta describes a metric name: its type and help text.
type Meta struct {
	Type Type   `json:"type"`
	Help string `json:"help,omitempty"`
}

// Point is a sample inside a Group, which carries its timestamp. It is
// encoded in JSON as ["name", {"label": "value"}, value] where a value that
// JSON cannot hold (NaN, ±Inf) is the string "NaN", "+Inf" or "-Inf".
type Point struct {
	Name   string
	Labels Labels
	V      float64
}

// Group is the samples of one collection: one timestamp shared by all.
type Group struct {
	T      int64   `json:"t"`
	Points []Point `json:"points"`
}

// Batch is what an agent pushes to the controller's repository: the groups
// collected since its last push (or buffered while the controller was
// away), and the metadata of the names they use. Seq numbers an agent's
// batches so a batch sent twice (its acknowledgement lost) is stored once.
type Batch struct {
	Node   string          `json:"node"`
	Agent  string          `json:"agent,omitempty"` // the agent's instance: a new one restarts Seq
	Seq    uint64          `json:"seq"`
	Meta   map[string]Meta `json:"meta,omitempty"`
	Groups []Group         `json:"groups"`
}

// Samples counts the samples in a batch.
func (b *Batch) Samples() int {
	n := 0
	for _, g := range b.Groups {
		n += len(g.Points)
	}
	return n
}

// MarshalJSON encodes a point as ["name", {labels}, value].
func (p Point) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 64)
	b = append(b, '[')
	b = strconv.AppendQuote(b, p.Name)
	b = append(b, ",{"...)
	for i, l := range p.Labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, l.Name)
		b = append(b, ':')
		b = appendJSONString(b, l.Value)
	}
	b = append(b, "},"...)
	switch {
	case math.IsNaN(p.V):
		b = append(b, `"NaN"`...)
	case math.IsInf(p.V, 1):
		b = append(b, `"+Inf"`...)
	case math.IsInf(p.V, -1):
		b = append(b, `"-Inf"`...)
	default:
		b = strconv.AppendFloat(b, p.V, 'g', -1, 64)
	}
	return append(b, ']'), nil
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // never fails for a string
	return append(b, q...)
}

// UnmarshalJSON decodes ["name", {labels}, value]. Agents send hundreds of
// thousands of points a push, so the common shape (strings without escapes,
// a plain number) is read by hand; anything else goes through
// encoding/json, which says what is wrong.
func (p *Point) UnmarshalJSON(data []byte) error {
	if p.fastDecode(data) {
		return nil
	}
	return p.slowDecode(data)
}

// fastDecode reads the common shape; it reports false, leaving p to be
// overwritten, when the input is anything else.
func (p *Point) fastDecode(data []byte) bool {
	d := scan{b: data}
	if !d.byte('[') {
		return false
	}
	name, ok := d.str()
	if !ok || !d.byte(',') || !d.byte('{') {
		return false
	}
	var ls Labels // empty values too, until the check for repeated keys
	if !d.peek('}') {
		for {
			k, ok := d.str()
			if !ok || !d.byte(':') {
				return false
			}
			v, ok := d.str()
			if !ok {
				return false
			}
			ls = append(ls, Label{k, v})
			if d.byte(',') {
				continue
			}
			break
		}
	}
	if !d.byte('}') || !d.byte(',') {
		return false
	}
	start := d.i
	for d.i < len(d.b) && strings.IndexByte("+-.0123456789eE", d.b[d.i]) >= 0 {
		d.i++
	}
	if d.i == start {
		return false
	}
	v, err := strconv.ParseFloat(string(d.b[start:d.i]), 64)
	if err != nil || !d.byte(']') {
		return false
	}
	d.space()
	if d.i != len(d.b) {
		return false
	}
	if !slices.IsSortedFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) }) {
		slices.SortFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	}
	for i := 1; i < len(ls); i++ {
		if ls[i].Name == ls[i-1].Name {
			return false // a repeated key: slowDecode refuses it, naming the key
		}
	}
	ls = slices.DeleteFunc(ls, func(l Label) bool { return l.Value == "" })
	p.Name, p.Labels, p.V = name, ls, v
	return true
}

// scan walks JSON the outer decoder has already checked.
type scan struct {
	b []byte
	i int
}

func (s *scan) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\n' || s.b[s.i] == '\t' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scan) peek(c byte) bool {
	s.space()
	return s.i < len(s.b) && s.b[s.i] == c
}

func (s *scan) byte(c byte) bool {
	if s.peek(c) {
		s.i++
		return true
	}
	return false
}

// str reads a string without escapes.
func (s *scan) str() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	end := bytes.IndexByte(s.b[s.i:], '"')
	if end < 0 {
		return "", false
	}
	raw := s.b[s.i : s.i+end]
	if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return "", false
	}
	s.i += end + 1
	return string(raw), true
}

func (p *Point) slowDecode(data []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("a point is [name, {labels}, value]: %w", err)
	}
	if len(raw) != 3 {
		return fmt.Errorf("a point is [name, {labels}, value], not %d elements", len(raw))
	}
	if err := json.Unmarshal(raw[0], &p.Name); err != nil {
		return fmt.Errorf("a point's name must be a string")
	}
	m, err := decodeLabels(raw[1])
	if err != nil {
		return fmt.Errorf("point %s: %w", p.Name, err)
	}
	p.Labels = FromMap(m)
	if len(raw[2]) > 0 && raw[2][0] == '"' {
		var s string
		_ = json.Unmarshal(raw[2], &s)
		switch s {
		case "NaN":
			p.V = math.NaN()
		case "+Inf", "Inf":
			p.V = math.Inf(1)
		case "-Inf":
			p.V = math.Inf(-1)
		default:
			return fmt.Errorf("point %s: value %q is not a number", p.Name, s)
		}
		return nil
	}
	if err := json.Unmarshal(raw[2], &p.V); err != nil {
		return fmt.Errorf("point %s: value must be a number", p.Name)
	}
	return nil
}

// decodeLabels reads a JSON object of strings, refusing a repeated key:
// encoding/json would keep the last silently, and which of two values an
// agent meant is not ours to guess.
func decodeLabels(data []byte) (map[string]string, error) {
	const shape = "labels must be an object of strings"
	d := json.NewDecoder(bytes.NewReader(data))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New(shape)
	}
	m := map[string]string{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, errors.New(shape)
		}
		k := tok.(string) // object keys are always strings
		var v string
		if err := d.Decode(&v); err != nil {
			return nil, errors.New(shape)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("label %q is given twice", k)
		}
		m[k] = v
	}
	return m, nil
}

var (
	nameRE  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// Limits on what one series may carry, so a bad push cannot blow up the
// repository's index.
const (
	MaxLabels      = 16
	MaxNameLen     = 200
	MaxLabelValLen = 200
)

// ValidName reports whether s is a valid metric name.
func ValidName(s string) bool { return len(s) <= MaxNameLen && nameRE.MatchString(s) }

// ValidLabelName reports whether s is a valid label name. Names starting
// with "__" are reserved, as in Prometheus.
func ValidLabelName(s string) bool {
	return len(s) <= MaxNameLen && labelRE.MatchString(s) && !strings.HasPrefix(s, "__")
}

// CheckSeries says what is wrong with a series' name and labels, or nil.
func CheckSeries(name string, ls Labels) error {
	if !ValidName(name) {
		return fmt.Errorf("metric name %q is not a valid Prometheus name", name)
	}
	if len(ls) > MaxLabels {
		return fmt.Errorf("series %s has %d labels; at most %d", name, len(ls), MaxLabels)
	}
	for i, l := range ls {
		if !ValidLabelName(l.Name) {
			return fmt.Errorf("series %s: label name %q is not valid", name, l.Name)
		}
		if len(l.Value) > MaxLabelValLen {
			return fmt.Errorf("series %s: label %s is longer than %d bytes", name, l.Name, MaxLabelValLen)
		}
		if i > 0 && ls[i-1].Name >= l.Name {
			return fmt.Errorf("series %s: labels are not sorted or repeat %q", name, l.Name)
		}
	}
	return nil
}

// ErrInvalid marks a push or query that is wrong in itself (a 4xx).
var ErrInvalid = errors.New("invalid")
