package plan

import (
	"reflect"
	"testing"

	"github.com/lightpath/lightpath/internal/transfer"
)

func TestParts(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name                  string
		size, minBytes, bytes int64
		want                  []transfer.Part
	}{
		{"under the minimum", 100 * mib, 128 * mib, 64 * mib, nil},
		{"no minimum: never cut", 1 << 40, 0, 64 * mib, nil},
		{"no part size: never cut", 1 << 40, 1, 0, nil},
		{"one part only", 64 * mib, 1, 64 * mib, nil},
		{"exact parts", 128 * mib, 128 * mib, 64 * mib, []transfer.Part{{Index: 0, Offset: 0, Length: 64 * mib}, {Index: 1, Offset: 64 * mib, Length: 64 * mib}}},
		{"the last takes the remainder", 96*mib + 5, 32 * mib, 32 * mib, []transfer.Part{
			{Index: 0, Offset: 0, Length: 32 * mib}, {Index: 1, Offset: 32 * mib, Length: 32 * mib}, {Index: 2, Offset: 64 * mib, Length: 32 * mib}, {Index: 3, Offset: 96 * mib, Length: 5}}},
		{"part size rounded up to a block", 20 * mib, 1, 5 * mib, []transfer.Part{{Index: 0, Offset: 0, Length: 8 * mib}, {Index: 1, Offset: 8 * mib, Length: 8 * mib}, {Index: 2, Offset: 16 * mib, Length: 4 * mib}}},
		{"part size under a block is a block", 9 * mib, 1, 1, []transfer.Part{{Index: 0, Offset: 0, Length: 4 * mib}, {Index: 1, Offset: 4 * mib, Length: 4 * mib}, {Index: 2, Offset: 8 * mib, Length: mib}}},
		{"empty file", 0, 0, 4 * mib, nil},
	} {
		got := Parts(tc.size, tc.minBytes, tc.bytes)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Parts(%d, %d, %d) = %v, want %v", tc.name, tc.size, tc.minBytes, tc.bytes, got, tc.want)
			continue
		}
		var next int64
		for i, p := range got {
			if p.Index != i || p.Offset != next || p.Offset%BlockAlign != 0 || p.Length <= 0 {
				t.Errorf("%s: part %d %+v not consecutive and aligned", tc.name, i, p)
			}
			next = p.Offset + p.Length
		}
		if len(got) > 0 && next != tc.size {
			t.Errorf("%s: parts end at %d, not %d", tc.name, next, tc.size)
		}
	}
}
