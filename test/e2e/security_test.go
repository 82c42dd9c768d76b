//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/roottest"
	"github.com/lightpath/lightpath/internal/testcert"
)

func TestPathTraversal(t *testing.T) {
	t.Parallel()
	// parent/
	//   sentinel.txt        must never be read or written
	//   outside/inside.txt  likewise
	//   root/               served
	//     etc/passwd        a decoy: //etc/passwd must resolve here
	//     escape     -> ../outside           (relative, leads out)
	//     escape-abs -> <parent>/outside     (absolute, leads out)
	//     passwd-link -> ../sentinel.txt
	parent := scratchDir(t)
	secret := []byte("SENTINEL-9f1c2e: nothing outside the root may be read")
	outsideSecret := []byte("OUTSIDE-77ab: nothing outside the root may be read")
	sentinel := filepath.Join(parent, "sentinel.txt")
	writeFile(t, sentinel, string(secret), 0o644)
	writeFile(t, filepath.Join(parent, "outside", "inside.txt"), string(outsideSecret), 0o644)
	root := mkdir(t, parent, "root")
	writeFile(t, filepath.Join(root, "etc", "passwd"), "decoy passwd inside the root\n", 0o644)
	writeFile(t, filepath.Join(root, "ok.txt"), "inside\n", 0o644)
	for name, target := range map[string]string{
		"escape": "../outside", "escape-abs": filepath.Join(parent, "outside"), "passwd-link": "../sentinel.txt",
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	sentinelBefore := stateOf(t, sentinel)
	insideBefore := stateOf(t, filepath.Join(parent, "outside", "inside.txt"))
	listing := func() []string {
		var names []string
		for _, d := range []string{parent, filepath.Join(parent, "outside")} {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				names = append(names, filepath.Join(d, e.Name()))
			}
		}
		return names
	}
	before := strings.Join(listing(), "\n")
	srv := startServer(t, root)
	local := mkdir(t, scratchDir(t), "local")
	payload := filepath.Join(local, "payload.txt")
	writeFile(t, payload, "pushed by the traversal test\n", 0o644)

	refused := []struct {
		name string
		args []string
	}{
		{"pull ../", []string{srv.URL("../sentinel.txt"), filepath.Join(local, "p1")}},
		{"pull a/../../", []string{srv.URL("a/../../sentinel.txt"), filepath.Join(local, "p2")}},
		{"pull .. alone", []string{"-r", srv.URL(".."), filepath.Join(local, "p3")}},
		{"pull through a dir symlink leading out", []string{srv.URL("escape/inside.txt"), filepath.Join(local, "p4")}},
		{"pull through an absolute dir symlink", []string{srv.URL("escape-abs/inside.txt"), filepath.Join(local, "p5")}},
		{"push ../", []string{payload, srv.URL("../evil.txt")}},
		{"push a/../../", []string{payload, srv.URL("a/../../evil.txt")}},
		{"push through a dir symlink leading out", []string{payload, srv.URL("escape/evil.txt")}},
		{"push into a dir symlink leading out", []string{payload, srv.URL("escape/")}},
		{"push through an absolute dir symlink", []string{payload, srv.URL("escape-abs/evil.txt")}},
		{"push a tree into a dir symlink leading out", []string{"-r", local, srv.URL("escape")}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCp(t, tc.args...)
			checkFailure(t, "cp "+strings.Join(tc.args, " "), result{out, errs, code})
		})
	}

	// A symlink leading out, named as a source, is sent as a symlink or
	// refused; never followed.
	for _, name := range []string{"passwd-link", "escape", "escape-abs"} {
		t.Run("pull the symlink "+name, func(t *testing.T) {
			dst := filepath.Join(local, "link-"+name)
			out, errs, code := runCp(t, "-r", srv.URL(name), dst)
			t.Logf("exit %d: %s%s", code, errs, lastLine(out))
			if fi, err := os.Lstat(dst); err == nil && fi.Mode().IsRegular() {
				t.Errorf("pulling %s made a regular file: the link was followed out of the root", name)
			}
		})
	}
	t.Run("pull the whole root", func(t *testing.T) {
		// Links leading out are not followed (and not recreated either:
		// they lead out of the transferred tree).
		out, errs, code := runCp(t, "-r", srv.URL(""), filepath.Join(local, "all"))
		t.Logf("exit %d: %s%s", code, errs, lastLine(out))
		sameFile(t, filepath.Join(root, "ok.txt"), filepath.Join(local, "all", "ok.txt"))
	})

	// Absolute-looking paths are taken relative to the root.
	t.Run("pull //etc/passwd", func(t *testing.T) {
		dst := filepath.Join(local, "passwd")
		cpOK(t, srv.URL("/etc/passwd"), dst)
		sameFile(t, filepath.Join(root, "etc", "passwd"), dst)
	})
	t.Run("push to //<parent>/sentinel.txt", func(t *testing.T) {
		// The absolute path of the real sentinel, given as a remote path:
		// it must land inside the root, or be refused.
		out, errs, code := runCp(t, "--overwrite", payload, srv.URL(sentinel))
		if code == 0 {
			sameFile(t, payload, filepath.Join(root, sentinel))
		} else {
			t.Logf("refused: %s%s", out, errs)
		}
	})
	t.Run("push to //etc/<new name>", func(t *testing.T) {
		probe := fmt.Sprintf("/etc/lightpath-e2e-probe-%d", os.Getpid())
		out, errs, code := runCp(t, payload, srv.URL(probe))
		if _, err := os.Lstat(probe); err == nil {
			os.Remove(probe)
			t.Errorf("cp %s %s wrote %s outside the root", payload, srv.URL(probe), probe)
		}
		if code == 0 {
			sameFile(t, payload, filepath.Join(root, probe))
		} else {
			t.Logf("refused: %s%s", out, errs)
		}
	})

	checkUntouched(t, sentinel, sentinelBefore)
	checkUntouched(t, filepath.Join(parent, "outside", "inside.txt"), insideBefore)
	if after := strings.Join(listing(), "\n"); after != before {
		t.Errorf("entries outside the root changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	noFileContaining(t, local, secret)
	noFileContaining(t, local, outsideSecret)
	noFileContaining(t, root, secret)
	noFileContaining(t, root, outsideSecret)
}

func TestToken(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	token := fmt.Sprintf("e2e-token-%x", time.Now().UnixNano())
	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, token+"\n", 0o600)
	root := mkdir(t, dir, "root")
	srv := startServer(t, root, "--token-file", tokenFile)
	p := startProxy(t, srv.addr, true, nil)
	src := filepath.Join(dir, "data.bin")
	writeRandom(t, src, 512<<10, 41)

	t.Run("wrong token", func(t *testing.T) {
		r := runLP(t, runOpts{env: []string{"LIGHTPATH_TOKEN=not-the-" + token}}, "cp", src, p.URL("wrong.bin"))
		checkFailure(t, "cp with a wrong token", r, "token")
		if _, err := os.Stat(filepath.Join(root, "wrong.bin")); err == nil {
			t.Errorf("a push with a wrong token wrote its file")
		}
	})
	t.Run("no token", func(t *testing.T) {
		r := runLP(t, runOpts{}, "cp", src, p.URL("none.bin"))
		checkFailure(t, "cp without a token", r, "token")
	})
	t.Run("no token, bench", func(t *testing.T) {
		r := runLP(t, runOpts{}, "bench", p.URL(""), "-t", "200ms")
		checkFailure(t, "bench without a token", r, "token")
	})
	t.Run("right token from the environment", func(t *testing.T) {
		r := runLP(t, runOpts{env: []string{"LIGHTPATH_TOKEN=" + token}}, "cp", "--json", "-P", "2", src, p.URL("env.bin"))
		mustSucceed(t, "cp with the token", r)
		sameFile(t, src, filepath.Join(root, "env.bin"))
		r = runLP(t, runOpts{env: []string{"LIGHTPATH_TOKEN=" + token}}, "cp", p.URL("env.bin"), filepath.Join(dir, "back.bin"))
		mustSucceed(t, "pull with the token", r)
		sameFile(t, src, filepath.Join(dir, "back.bin"))
	})
	t.Run("right token from a file", func(t *testing.T) {
		r := runLP(t, runOpts{}, "cp", "--token-file", tokenFile, src, p.URL("file.bin"))
		mustSucceed(t, "cp --token-file", r)
		sameFile(t, src, filepath.Join(root, "file.bin"))
		r = runLP(t, runOpts{}, "bench", "--token-file", tokenFile, p.URL(""), "-t", "200ms")
		mustSucceed(t, "bench --token-file", r)
	})

	rec := p.Recording()
	if len(rec) < 512<<10 {
		t.Fatalf("the proxy recorded only %d bytes: the clients did not go through it", len(rec))
	}
	if bytes.Contains(rec, []byte(token)) {
		t.Errorf("the token crossed the network in clear")
	}
	if bytes.Contains(rec, []byte("not-the-"+token)) {
		t.Errorf("a wrong token crossed the network in clear")
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	ca := testcert.NewCA(t, "lightpath e2e CA")
	caPEM, otherPEM := ca.PEM, testcert.NewCA(t, "some other CA").PEM
	certPEM, keyPEM := ca.Server(t)
	for name, b := range map[string][]byte{"ca.pem": caPEM, "other.pem": otherPEM, "cert.pem": certPEM, "key.pem": keyPEM} {
		writeFile(t, filepath.Join(dir, name), string(b), 0o600)
	}
	root := mkdir(t, dir, "root")
	srv := startServer(t, root, "--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"))
	p := startProxy(t, srv.addr, true, nil)
	src := filepath.Join(dir, "data.bin")
	writeRandom(t, src, 3<<20, 51)

	t.Run("with the CA", func(t *testing.T) {
		cpOK(t, "--tls-ca", filepath.Join(dir, "ca.pem"), "-P", "2", src, p.URL("tls.bin"))
		sameFile(t, src, filepath.Join(root, "tls.bin"))
		cpOK(t, "--tls-ca", filepath.Join(dir, "ca.pem"), "-P", "2", srv.URL("tls.bin"), filepath.Join(dir, "back.bin"))
		sameFile(t, src, filepath.Join(dir, "back.bin"))
		r := runLP(t, runOpts{}, "bench", "--tls-ca", filepath.Join(dir, "ca.pem"), srv.URL(""), "-t", "300ms", "--json")
		mustSucceed(t, "bench over TLS", r)
	})
	t.Run("the data is encrypted", func(t *testing.T) {
		b, _ := os.ReadFile(src)
		rec := p.Recording()
		if len(rec) < 3<<20 {
			t.Fatalf("the proxy recorded only %d bytes", len(rec))
		}
		for _, off := range []int{0, 1 << 20, 3<<20 - 64} {
			if bytes.Contains(rec, b[off:off+64]) {
				t.Errorf("file bytes at offset %d crossed the network in clear", off)
			}
		}
	})
	t.Run("without the CA", func(t *testing.T) {
		out, errs, code := runCp(t, src, srv.URL("plain.bin"))
		checkFailure(t, "cp to a TLS server without --tls-ca", result{out, errs, code}, "tls")
	})
	t.Run("with another CA", func(t *testing.T) {
		out, errs, code := runCp(t, "--tls-ca", filepath.Join(dir, "other.pem"), src, srv.URL("other.bin"))
		checkFailure(t, "cp with the wrong CA", result{out, errs, code}, "certificate")
	})
	t.Run("TLS client against a plain server", func(t *testing.T) {
		plain := startServer(t, mkdir(t, dir, "plainroot"))
		out, errs, code := runCp(t, "--tls-ca", filepath.Join(dir, "ca.pem"), src, plain.URL("x.bin"))
		checkFailure(t, "cp --tls-ca to a plain server", result{out, errs, code}, "tls")
	})
	for _, name := range []string{"plain.bin", "other.bin"} {
		if _, err := os.Stat(filepath.Join(root, name)); err == nil {
			t.Errorf("%s was written by a client that failed TLS", name)
		}
	}
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	writeRandom(t, filepath.Join(root, "pub", "data.bin"), 1<<20, 61)
	srv := startServer(t, root, "--read-only")
	src := filepath.Join(dir, "up.bin")
	writeRandom(t, src, 1000, 62)

	out, errs, code := runCp(t, src, srv.URL("up.bin"))
	checkFailure(t, "push to a read-only server", result{out, errs, code}, "read-only")
	out, errs, code = runCp(t, "-r", mkdir(t, dir, "tree"), srv.URL("newdir/"))
	checkFailure(t, "push a tree to a read-only server", result{out, errs, code}, "read-only")
	for _, p := range []string{"up.bin", "newdir"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("a read-only server created %s", p)
		}
	}
	cpOK(t, "-r", srv.URL("pub"), filepath.Join(dir, "pulled"))
	sameFile(t, filepath.Join(root, "pub", "data.bin"), filepath.Join(dir, "pulled", "data.bin"))
}

func TestPermissionDenied(t *testing.T) {
	t.Parallel()
	roottest.Require(t, "mounts a tmpfs or runs the server as another user")
	const nobody = 65534
	dir := scratchDir(t)
	root := mkdir(t, dir, "root")
	writeFile(t, filepath.Join(root, "public.txt"), "anyone may read this\n", 0o644)
	writeFile(t, filepath.Join(root, "private.txt"), "only root may read this\n", 0o600)
	mkdir(t, root, "ro-dir")
	rw := mkdir(t, root, "rw-dir")
	if err := os.Chown(rw, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	srv := startServerOpts(t, serverOpts{cred: &syscall.Credential{Uid: nobody, Gid: nobody}}, root)
	local := mkdir(t, dir, "local")
	src := filepath.Join(local, "up.txt")
	writeFile(t, src, "pushed\n", 0o644)

	t.Run("pull an unreadable file", func(t *testing.T) {
		out, errs, code := runCp(t, srv.URL("private.txt"), filepath.Join(local, "private.txt"))
		checkFailure(t, "pull of a 0600 root file", result{out, errs, code}, "private.txt", "permission denied")
		if _, err := os.Lstat(filepath.Join(local, "private.txt")); err == nil {
			t.Errorf("the unreadable file was created locally")
		}
	})
	t.Run("push into an unwritable dir", func(t *testing.T) {
		out, errs, code := runCp(t, src, srv.URL("ro-dir/"))
		checkFailure(t, "push into a root-owned 0755 dir", result{out, errs, code}, "permission denied")
	})
	t.Run("push a new dir under an unwritable one", func(t *testing.T) {
		out, errs, code := runCp(t, "-r", local, srv.URL("ro-dir/sub/"))
		checkFailure(t, "push creating a dir in a root-owned 0755 dir", result{out, errs, code}, "permission denied")
	})
	t.Run("what the user may do still works", func(t *testing.T) {
		cpOK(t, srv.URL("public.txt"), filepath.Join(local, "public.txt"))
		sameFile(t, filepath.Join(root, "public.txt"), filepath.Join(local, "public.txt"))
		cpOK(t, src, srv.URL("rw-dir/"))
		sameFile(t, src, filepath.Join(rw, "up.txt"))
	})
	ents, _ := os.ReadDir(filepath.Join(root, "ro-dir"))
	if len(ents) != 0 {
		t.Errorf("ro-dir holds %d entries, want none", len(ents))
	}
}
