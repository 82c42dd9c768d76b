package mover

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCheckLink(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"dst/tree/sub", "outside"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"tree/L": "..", "tree/up": "sub/../..", "tree/loop": "loop"} {
		if err := os.Symlink(target, filepath.Join(dir, "dst", name)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(filepath.Join(dir, "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, tc := range []struct {
		name, target, bound string
		ok                  bool
	}{
		{"tree/a", "sub", ".", true},
		{"tree/sub/a", "../../tree/sub", ".", true},
		{"tree/a", "..", ".", true},
		{"tree/a", "..", "tree", false},
		{"tree/a", "../..", ".", false},
		{"tree/x", "L/../../outside/secret.txt", ".", false}, // L is .., so L/.. is above dst
		{"tree/x", "L/tree/sub", ".", true},
		{"tree/x", "up/x", ".", true},
		{"tree/x", "up/..", ".", false},
		{"tree/x", "missing/../../outside", ".", false}, // missing may become a link later
		{"tree/x", "missing/f", ".", true},
		{"tree/x", "/etc/passwd", ".", false},
		{"tree/x", "", ".", false},
		{"tree/x", "loop/f", ".", false},
	} {
		err := checkLink(root, tc.name, tc.target, tc.bound)
		if (err == nil) != tc.ok {
			t.Errorf("%s -> %s within %s: err %v, want ok %v", tc.name, tc.target, tc.bound, err, tc.ok)
		}
	}
}

func TestBlockSet(t *testing.T) {
	b := newBlockSet(true)
	for _, i := range []uint32{math.MaxUint32, 0, 5000, 1023, 5000} {
		b.set(i, i+1, i+2)
	}
	b.setHole(7)
	b.setHole(1023) // a hole replaces data sent before
	if b.count() != 5 || len(b.pages) != 3 {
		t.Fatalf("count %d pages %d, want 5 and 3", b.count(), len(b.pages))
	}
	var got []uint32
	b.each(func(i, crc, ad uint32, hole bool) {
		if hole != (i == 7 || i == 1023) || !hole && (crc != i+1 || ad != i+2) {
			t.Errorf("block %d: sums %d %d, hole %v", i, crc, ad, hole)
		}
		got = append(got, i)
	})
	if len(got) != 5 || got[0] != 0 || got[1] != 7 || got[2] != 1023 || got[3] != 5000 || got[4] != math.MaxUint32 {
		t.Errorf("order %v", got)
	}
	// Holes alone take no sums.
	h := newBlockSet(true)
	for i := range uint32(4096) {
		h.setHole(i)
	}
	for _, p := range h.pages {
		if p.crcs != nil || p.adlers != nil {
			t.Errorf("a page of holes holds sums")
		}
	}
	if !b.has(5000) || b.has(5001) || b.has(77777) {
		t.Errorf("has is wrong")
	}
	b.reset()
	if b.count() != 0 || b.has(0) {
		t.Errorf("reset kept blocks")
	}
}

func TestCheckSize(t *testing.T) {
	d := Dest{}
	if err := d.checkSize(DefaultMaxFileSize, 4096); err != nil {
		t.Errorf("the limit itself: %v", err)
	}
	if err := d.checkSize(DefaultMaxFileSize+1, 4096); err == nil {
		t.Errorf("over the limit: accepted")
	}
	if err := d.checkSize(math.MaxInt64, 1<<20); err == nil {
		t.Errorf("2^63-1: accepted")
	}
	d.MaxFileSize = math.MaxInt64
	if err := d.checkSize(1<<45, 4096); err == nil {
		t.Errorf("more blocks than the protocol indexes: accepted")
	}
}

func TestSweepPartials(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * time.Hour)
	files := map[string]bool{ // name: expected to remain
		"a/.f.lightpath-part":    false,
		"a/.f.lightpath-journal": false,
		"a/.busy.lightpath-part": true, // a session holds a/busy
		"a/.new.lightpath-part":  true, // young
		"a/old.txt":              true, // not a work file
	}
	for name := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if name != "a/.new.lightpath-part" {
			os.Chtimes(p, old, old)
		}
	}
	s, err := NewServer(ServerConfig{Root: dir, PartialTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.locks.lock("a/busy")
	if n := s.SweepPartials(time.Now()); n != 2 {
		t.Errorf("removed %d, want 2", n)
	}
	for name, stays := range files {
		_, err := os.Lstat(filepath.Join(dir, name))
		if stays != (err == nil) {
			t.Errorf("%s: stays %v, err %v", name, stays, err)
		}
	}
}
