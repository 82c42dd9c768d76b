package repo

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/lightpath/lightpath/internal/monitor"
)

// walRec is one decoded log record, for comparing parses.
type walRec struct {
	kind   byte
	id     int64
	name   string
	labels monitor.Labels
	meta   monitor.Meta
	ss     []walSample
}

func parseAll(b []byte) ([]walRec, error) {
	var out []walRec
	err := parseRecords(b, walVisitor{
		series: func(id int64, name string, ls monitor.Labels) {
			out = append(out, walRec{kind: recSeries, id: id, name: name, labels: ls})
		},
		meta: func(name string, m monitor.Meta) { out = append(out, walRec{kind: recMeta, name: name, meta: m}) },
		data: func(ss []walSample) { out = append(out, walRec{kind: recData, ss: append([]walSample(nil), ss...)}) },
	})
	return out, err
}

func encodeAll(rs []walRec) []byte {
	var b []byte
	for _, r := range rs {
		switch r.kind {
		case recSeries:
			b = encSeries(b, r.id, r.name, r.labels)
		case recMeta:
			b = encMeta(b, r.name, r.meta)
		case recData:
			b = encData(b, r.ss)
		}
	}
	return b
}

// FuzzParseRecords feeds arbitrary bytes to the log's replay parser: it
// must never panic, anything it does not accept is an error wrapping
// errCorruptRecord, and what it accepts encodes back to records that parse
// to the same thing.
func FuzzParseRecords(f *testing.F) {
	valid := encodeAll([]walRec{
		{kind: recSeries, id: 1, name: "m", labels: monitor.L("if", "eth0", "node", "n1")},
		{kind: recMeta, name: "m", meta: monitor.Meta{Type: monitor.Counter, Help: "bytes"}},
		{kind: recData, ss: []walSample{{1, 1000, 1.5}, {1, 2000, math.NaN()}, {2, -5, math.Inf(1)}}},
	})
	f.Add(valid)
	f.Add(valid[:len(valid)-3])                // torn
	f.Add(append(valid[:8:8], valid[9:20]...)) // bad checksum
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 'X'})
	f.Add(valid[8:]) // a payload (checksummed by the target)
	f.Fuzz(func(t *testing.T, b []byte) {
		// The bytes as one record's payload too: the checksum would keep
		// most mutations from reaching the decoder.
		if len(b) > 0 {
			framed := append(make([]byte, 8), b...)
			frame(framed, 0)
			if rs, err := parseAll(framed); err == nil && len(rs) != 1 {
				t.Fatalf("one payload gave %d records", len(rs))
			} else if err != nil && !errors.Is(err, errCorruptRecord) {
				t.Fatalf("error not wrapping errCorruptRecord: %v", err)
			}
		}
		rs, err := parseAll(b)
		if err != nil {
			if !errors.Is(err, errCorruptRecord) {
				t.Fatalf("error not wrapping errCorruptRecord: %v", err)
			}
			return
		}
		again, err := parseAll(encodeAll(rs))
		if err != nil {
			t.Fatalf("re-encoded records do not parse: %v", err)
		}
		// Printed, NaN values compare equal (the encoding keeps their bits).
		if fmt.Sprintf("%#v", rs) != fmt.Sprintf("%#v", again) {
			t.Fatalf("round trip changed the records:\n%+v\n%+v", rs, again)
		}
	})
}

func TestParseRecordsCorrupt(t *testing.T) {
	valid := encodeAll([]walRec{{kind: recSeries, id: 1, name: "m", labels: monitor.L("node", "n1")}})
	for _, tc := range []struct {
		name string
		in   []byte
		want int // records handed over before the error
	}{
		{"torn header", append(append([]byte{}, valid...), 1, 2, 3), 1},
		{"torn payload", valid[:len(valid)-1], 0},
		{"flipped bit", func() []byte { b := append([]byte{}, valid...); b[10] ^= 4; return b }(), 0},
		{"unknown type", func() []byte { b := []byte{0, 0, 0, 0, 0, 0, 0, 0, 'X'}; frame(b, 0); return b }(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := parseAll(tc.in)
			if !errors.Is(err, errCorruptRecord) || len(rs) != tc.want {
				t.Fatalf("got %d records, err %v; want %d and a corrupt-record error", len(rs), err, tc.want)
			}
		})
	}
}
