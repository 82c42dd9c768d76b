//go:build linux

package netns

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/roottest"
)

// nsID is the inode of the namespace at path (a /proc ns link or a mount).
func nsID(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func newNS(t *testing.T) (name, path string) {
	t.Helper()
	roottest.Require(t, "creates network namespaces")
	var rnd [4]byte
	rand.Read(rnd[:])
	name = "lp-nstest-" + hex.EncodeToString(rnd[:])
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Delete(name); err != nil {
			t.Error(err)
		}
	})
	return name, Path(name)
}

// TestCreateDoHandle: Create makes a namespace without moving the caller's
// thread; Do runs fn inside it on another thread and leaves the caller
// where it was; a Handle bound to it sees its own loopback device.
func TestCreateDoHandle(t *testing.T) {
	runtime.LockOSThread() // so "the caller's thread" is one thread
	defer runtime.UnlockOSThread()
	own := nsID(t, "/proc/thread-self/ns/net")
	_, path := newNS(t)
	target := nsID(t, path)
	if target == own {
		t.Fatal("the new namespace is the caller's")
	}
	if got := nsID(t, "/proc/thread-self/ns/net"); got != own {
		t.Fatalf("Create moved the caller's thread to namespace %d", got)
	}
	var inside uint64
	if err := Do(path, func() error { inside = nsID(t, "/proc/thread-self/ns/net"); return nil }); err != nil {
		t.Fatal(err)
	}
	if inside != target {
		t.Fatalf("fn ran in namespace %d, want %d", inside, target)
	}
	if got := nsID(t, "/proc/thread-self/ns/net"); got != own {
		t.Fatalf("Do moved the caller's thread to namespace %d", got)
	}
	boom := errors.New("boom")
	if err := Do(path, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do returned %v, want fn's error", err)
	}
	if err := Do("", func() error { inside = nsID(t, "/proc/thread-self/ns/net"); return nil }); err != nil || inside != own {
		t.Fatalf(`Do("") ran in %d (%v), want the caller's %d`, inside, err, own)
	}

	h, err := Handle(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 || links[0].Attrs().Name != "lo" {
		t.Fatalf("a fresh namespace's links: %v", links)
	}
}

func TestDoMissingNamespace(t *testing.T) {
	err := Do(t.TempDir()+"/none", func() error { t.Fatal("fn ran"); return nil })
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Do on a missing path: %v", err)
	}
}
