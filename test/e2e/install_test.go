//go:build linux

package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMakeInstallAndVersion runs make install with PREFIX and DESTDIR (the
// binary built into the test's directory), checks the installed binary
// says the version the Makefile gave it, by `version` and by --version,
// and that a controller reports the same in GET /api/v1/health.
func TestMakeInstallAndVersion(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	dir := t.TempDir()
	root, _ := filepath.Abs(repoFile(""))
	cmd := exec.Command("make", "-C", root, "install", "PREFIX=/opt/lp", "DESTDIR="+filepath.Join(dir, "dest"),
		"BIN="+filepath.Join(dir, "build", "lightpath"), "VERSION=v9.8.7-test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "dest", "opt", "lp", "bin", "lightpath")
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatalf("make install did not install to DESTDIR/PREFIX/bin: %v", err)
	}
	if st.Mode().Perm() != 0o755 {
		t.Errorf("installed with mode %v, want 0755", st.Mode().Perm())
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil || strings.TrimSpace(string(out)) != "lightpath v9.8.7-test" {
			t.Errorf("lightpath %s: %q, %v; want \"lightpath v9.8.7-test\"", args[0], out, err)
		}
	}

	// The controller says the same.
	port := freePort(t, "127.0.0.1")
	ctl := exec.Command(bin, "controller", "--listen", "127.0.0.1:"+strconv.Itoa(port), "--db", "sqlite:"+filepath.Join(dir, "db", "sub", "ctl.db"),
		"--admin-token-file", filepath.Join(dir, "admin.token"))
	ctl.Env = cleanEnv()
	var log strings.Builder
	ctl.Stderr = &log
	if err := ctl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Process.Kill(); ctl.Wait() })
	var h struct {
		Version string `json:"version"`
	}
	ok := waitFor(2*time.Minute, func() bool {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/api/v1/health")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&h) == nil
	})
	if !ok {
		t.Fatalf("the controller did not answer /api/v1/health (its --db in a directory that did not exist):\n%s", log.String())
	}
	if h.Version != "v9.8.7-test" {
		t.Errorf("health says version %q, want v9.8.7-test", h.Version)
	}
}
