//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/store"
)

// TestControllerSQLiteSymlink: two controllers given two paths to one
// SQLite database (the second through a symlinked directory) contend for
// one leader lock: one leads, the other waits as a standby, and leads once
// the first is killed.
func TestControllerSQLiteSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("data", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	a := startKillCtl(t, dir, "sqlite:"+filepath.Join(dir, "data", "db"), freePort(t, "127.0.0.1"))
	b := startKillCtl(t, dir, "sqlite:"+filepath.Join(dir, "alias", "db"), freePort(t, "127.0.0.1"))
	if h, err := health(t, a.url); err != nil || h.Role != apiv1.RoleLeader {
		t.Fatalf("first controller: %+v %v\n%s", h, err, a.log)
	}
	if h, err := health(t, b.url); err != nil || h.Role != apiv1.RoleStandby {
		t.Fatalf("second controller, through the symlink: %+v %v\n%s", h, err, b.log)
	}
	if !strings.Contains(b.log.String(), "standby: another controller leads on this database; waiting") {
		t.Errorf("the standby did not say so:\n%s", b.log)
	}
	a.cmd.Process.Kill()
	a.cmd.Wait()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) { // bounds a hang only
		if h, err := health(t, b.url); err == nil && h.Role == apiv1.RoleLeader {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not lead after the leader was killed:\n%s", b.log)
		}
	}
}

// TestControllerSQLiteDeposed: a controller on SQLite whose leader epoch
// another raised (as a controller that took the database over would)
// says so at once: it exits non-zero saying it lost the lead, instead of
// answering "leader" with every write refused.
func TestControllerSQLiteDeposed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	c := startKillCtl(t, dir, "sqlite:"+path, freePort(t, "127.0.0.1"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // bounds a hang only
	defer cancel()
	other, err := store.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	v, err := other.GetSetting(ctx, store.EpochKey)
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.PutSetting(ctx, store.EpochKey, strconv.FormatInt(epoch+1, 10)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the deposed controller exited 0:\n%s", c.log)
		}
		if !strings.Contains(c.log.String(), "lightpath: controller: lost the lead on the database (this controller no longer leads") {
			t.Errorf("the controller did not say why it stopped:\n%s", c.log)
		}
	case <-ctx.Done():
		t.Fatalf("the deposed controller still runs:\n%s", c.log)
	}
}
