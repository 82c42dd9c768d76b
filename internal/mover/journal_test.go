package mover

import (
	"os"
	"testing"

	"github.com/lightpath/lightpath/internal/wire"
)

func TestJournal(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	e := wire.Entry{Size: 10 << 20, MTime: 12345}
	const bs = 4 << 20
	j, err := createJournal(root, "j", e, bs)
	if err != nil {
		t.Fatal(err)
	}
	j.record(0, 0xaaaa)
	j.record(2, 0xbbbb)
	j.record(0, 0xcccc) // the last record for an index wins
	j.close()
	// A torn record at the end (a crash mid-append) is dropped.
	f, _ := root.OpenFile("j", os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{0, 0, 0})
	f.Close()

	for _, tc := range []struct {
		name  string
		entry wire.Entry
		bs    int64
		ok    bool
	}{
		{"same source", e, bs, true},
		{"size changed", wire.Entry{Size: e.Size + 1, MTime: e.MTime}, bs, false},
		{"mtime changed", wire.Entry{Size: e.Size, MTime: e.MTime + 1}, bs, false},
		{"block size changed", e, bs / 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, have, ok := openJournal(root, "j", tc.entry, tc.bs, 3)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if len(have) != 2 || have[0] != 0xcccc || have[2] != 0xbbbb {
				t.Fatalf("have = %v", have)
			}
			// Appends after reopening stay aligned.
			j.record(1, 0xdddd)
			j.close()
			j2, have2, ok := openJournal(root, "j", tc.entry, tc.bs, 3)
			if !ok || len(have2) != 3 || have2[1] != 0xdddd {
				t.Fatalf("after append: %v %v", have2, ok)
			}
			j2.close()
		})
	}
	if _, _, ok := openJournal(root, "missing", e, bs, 3); ok {
		t.Fatal("a missing journal opened")
	}
}
