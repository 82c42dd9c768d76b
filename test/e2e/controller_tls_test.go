//go:build linux

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/testcert"
)

// TestControllerTLSAndUnixSocket serves the controller over HTTPS and a
// unix socket at once: HTTPS answers a client that trusts the CA and
// refuses one that does not; the socket serves plain HTTP with the same
// token rules.
func TestControllerTLSAndUnixSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "lightpath controller CA")
	caPEM := ca.PEM
	certPEM, keyPEM := ca.Server(t)
	for name, b := range map[string][]byte{"cert.pem": certPEM, "key.pem": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	topo := filepath.Join(dir, "topo.yaml")
	os.WriteFile(topo, []byte(killTopology), 0o644)
	port := freePort(t, "127.0.0.1")
	sock := filepath.Join(dir, "controller.sock")
	var log lockedBuffer
	cmd := exec.Command(lpBin, "controller", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--listen", "unix:"+sock,
		"--db", "sqlite:"+filepath.Join(dir, "db"), "--topology", topo, "--admin-token-file", filepath.Join(dir, "admin.token"),
		"--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"))
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	trusting := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/api/v1/health", port)
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) { // polls until it serves
		if resp, err = trusting.Get(url); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("https: %v\n%s", err, log.String())
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("https health: %d", resp.StatusCode)
	}
	if !strings.Contains(log.String(), "url=https://127.0.0.1:") || !strings.Contains(log.String(), "url=unix://"+sock) {
		t.Errorf("the log does not say where it listens:\n%s", log.String())
	}
	if _, err := (&http.Client{Timeout: 30 * time.Second}).Get(url); err == nil {
		t.Errorf("a client that does not trust the CA connected")
	}
	if r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/health", port)); err == nil && r.StatusCode == 200 {
		t.Errorf("plain HTTP answered on the TLS port")
	}

	tok, _ := os.ReadFile(filepath.Join(dir, "admin.token"))
	overSock := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	for token, want := range map[string]int{strings.TrimSpace(string(tok)): 200, "wrong": 401} {
		req, _ := http.NewRequest("GET", "http://controller/api/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		r, err := overSock.Do(req)
		if err != nil {
			t.Fatalf("unix socket: %v", err)
		}
		r.Body.Close()
		if r.StatusCode != want {
			t.Errorf("whoami over the socket with token %.6s…: %d, want %d", token, r.StatusCode, want)
		}
	}
}
