package monitor

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestPointJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Point
		want string
	}{
		{"plain", Point{Name: "lightpath_x_total", Labels: L("b", "2", "a", "1"), V: 1.5}, `["lightpath_x_total",{"a":"1","b":"2"},1.5]`},
		{"no labels", Point{Name: "x", V: 0}, `["x",{},0]`},
		{"NaN", Point{Name: "x", V: math.NaN()}, `["x",{},"NaN"]`},
		{"+Inf", Point{Name: "x", V: math.Inf(1)}, `["x",{},"+Inf"]`},
		{"-Inf", Point{Name: "x", V: math.Inf(-1)}, `["x",{},"-Inf"]`},
		{"quotes", Point{Name: "x", Labels: L("l", `a"b\`), V: 1e21}, `["x",{"l":"a\"b\\"},1e+21]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.p)
			if err != nil || string(b) != tc.want {
				t.Fatalf("marshal: %s %v, want %s", b, err, tc.want)
			}
			var back Point
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.Name != tc.p.Name || back.Labels.String() != tc.p.Labels.String() ||
				math.Float64bits(back.V) != math.Float64bits(tc.p.V) && !(math.IsNaN(back.V) && math.IsNaN(tc.p.V)) {
				t.Errorf("round trip %+v, want %+v", back, tc.p)
			}
		})
	}
	for _, bad := range []string{`[]`, `["x",{}]`, `["x",{},1,2]`, `[1,{},1]`, `["x",[],1]`, `["x",{"a":1},1]`, `["x",{},"many"]`, `["x",{},true]`, `{}`} {
		var p Point
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("%s decoded to %+v, want an error", bad, p)
		}
	}
	// A repeated label key is refused by both decoders, naming the key,
	// whether its values differ, are empty, or are written with escapes.
	for _, dup := range []string{`["x",{"a":"1","a":"2"},1]`, `["0",{"0":"0","0":""},0]`, `["x",{"a":"","a":""},1]`,
		`["x",{"a":"1","\u0061":"1"},1]`, `["x",{"b":"1","a":"1","b":"1"},"NaN"]`} {
		var p Point
		err := json.Unmarshal([]byte(dup), &p)
		if err == nil || !strings.Contains(err.Error(), "is given twice") {
			t.Errorf("%s: %v, want a repeated label refused", dup, err)
		}
	}
}

func TestCheckSeries(t *testing.T) {
	for _, tc := range []struct {
		name string
		ls   Labels
		ok   bool
	}{
		{"lightpath_ok", L("a", "1"), true},
		{"9bad", nil, false},
		{"bad-dash", nil, false},
		{"ok", Labels{{"__reserved", "x"}}, false},
		{"ok", Labels{{"b", "1"}, {"a", "2"}}, false},
		{"ok", Labels{{"a", "1"}, {"a", "2"}}, false},
	} {
		if err := CheckSeries(tc.name, tc.ls); (err == nil) != tc.ok {
			t.Errorf("CheckSeries(%s, %v) = %v, want ok %v", tc.name, tc.ls, err, tc.ok)
		}
	}
}

// FuzzBatch decodes what an agent might push: never a panic, and what
// decodes encodes and decodes again to the same thing.
func FuzzBatch(f *testing.F) {
	f.Add([]byte(`{"node":"ra","seq":1,"groups":[{"t":1,"points":[["x",{"a":"1"},1],["y",{},"NaN"]]}]}`))
	f.Add([]byte(`{"node":"","groups":[{"t":-1,"points":[["",{},"+Inf"]]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Batch
		if json.Unmarshal(data, &b) != nil {
			return
		}
		out, err := json.Marshal(&b)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var again Batch
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("decode of own encoding %s: %v", out, err)
		}
		if again.Samples() != b.Samples() {
			t.Fatalf("samples %d then %d", b.Samples(), again.Samples())
		}
	})
}

// FuzzPointDecode: the hand-written path reads what encoding/json reads,
// the same way, or leaves the point to it.
func FuzzPointDecode(f *testing.F) {
	for _, s := range []string{`["x",{"a":"1","b":""},1.5]`, ` [ "x" , { } , -0 ] `, `["x",{"b":"2","a":"1"},1e-7]`,
		`["x",{"a":"1","a":"2"},1]`, `["x\u00e9",{},1]`, `["x",{},"NaN"]`, `["x",{},1e400]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // the outer decoder never hands over invalid JSON
		}
		var fast Point
		if !fast.fastDecode(data) {
			return
		}
		var slow Point
		if err := slow.slowDecode(data); err != nil {
			t.Fatalf("%s: the fast path took it, encoding/json says %v", data, err)
		}
		if fast.Name != slow.Name || fast.Labels.String() != slow.Labels.String() || math.Float64bits(fast.V) != math.Float64bits(slow.V) {
			t.Fatalf("%s: fast %+v, slow %+v", data, fast, slow)
		}
	})
}
