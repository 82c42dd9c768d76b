package cc

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// TestObjectFromSource: the committed object was built from the committed
// source (`make bpf` records the source's digest beside the object).
func TestObjectFromSource(t *testing.T) {
	src, err := os.ReadFile("bpf/fast.c")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("fast_bpfel.o.sha256")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	if got := hex.EncodeToString(sum[:]); got != strings.TrimSpace(string(want)) {
		t.Fatalf("internal/cc/fast_bpfel.o was built from another bpf/fast.c (digest %s, recorded %s): run make bpf", got, strings.TrimSpace(string(want)))
	}
}
