package mover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/wire"
)

// TestFaultOf: the mover's errors and the grant's refusals as the transfer
// service's classes.
func TestFaultOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want retry.Fault
	}{
		{"fenced", fmt.Errorf("%w: attempt 1 of task t is no longer current", grant.ErrStale), retry.FaultGrant},
		{"attempt over", grant.ErrOver, retry.FaultGrant},
		{"grant expired", fmt.Errorf("%w at 2026-01-01T00:00:00Z", grant.ErrExpired), retry.FaultGrant},
		{"path not covered", &os.PathError{Op: "open", Path: "x", Err: fmt.Errorf("%w: %q is outside in", grant.ErrPath, "x")}, retry.FaultPermission},
		{"another node's grant", grant.ErrWrongNode, retry.FaultPermission},
		{"no key yet", grant.ErrNoKey, retry.FaultNetwork},
		{"wrong token", fmt.Errorf("%w: wrong token", ErrAuth), retry.FaultPermission},
		{"refusal without a class", fmt.Errorf("%w: no", ErrRefused), retry.FaultInternal},
		{"peer's class", peerError(&wire.Error{Code: wire.CodeRefused, Msg: "the server is read-only", Fault: wire.FaultPermission}), retry.FaultPermission},
		{"older peer busy", peerError(&wire.Error{Code: wire.CodeBusy, Msg: "too many sessions"}), retry.FaultNetwork},
		{"older peer refusing", peerError(&wire.Error{Code: wire.CodeRefused, Msg: "grant: fenced"}), retry.FaultInternal},
		{"full disk", fmt.Errorf("write: %w", syscall.ENOSPC), retry.FaultNoSpace},
		{"no room promised", fmt.Errorf("%w: 1 B free", errNoSpace), retry.FaultNoSpace},
		{"over the size limit", Dest{MaxFileSize: 10}.checkSize(11, 1<<20), retry.FaultNoSpace},
		{"invalid path", func() error { _, err := (Dest{}).target("../x"); return err }(), retry.FaultPermission},
		{"outside the served directory", cleanPathError(&os.PathError{Op: "open", Path: "x", Err: errors.New("path escapes from parent")}), retry.FaultPermission},
		{"missing source", cleanPathError(&os.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}), retry.FaultNotFound},
		{"nil", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FaultOf(tc.err); got != tc.want {
				t.Errorf("FaultOf(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
	// A refusal keeps its retry class under its fault.
	if err := peerError(&wire.Error{Code: wire.CodeRefused, Msg: "x", Fault: wire.FaultGrant}); !retry.IsPermanent(err) || !errors.Is(err, ErrRefused) {
		t.Errorf("a classed refusal: permanent %v, ErrRefused %v", retry.IsPermanent(err), errors.Is(err, ErrRefused))
	}
}

// TestCopyFaults pushes to a real server: a file whose destination is a
// directory fails with class permission across the wire (the receiver's
// word), one the sender cannot read with not-found (its own), and the
// others arrive with no class; a peer of version 9 says no class; a file
// over the server's size limit fails with no-space; a read-only server
// refuses the push with class permission.
func TestCopyFaults(t *testing.T) {
	serverRoot, local := t.TempDir(), t.TempDir()
	addr := serveLoopback(t, serverRoot)
	if err := os.MkdirAll(filepath.Join(serverRoot, "in", "a.bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.bin", "b.bin"} {
		if err := os.WriteFile(filepath.Join(local, n), []byte("data of "+n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(local)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	src := Source{Items: []SourceItem{{Root: root, Path: "a.bin", Name: "a.bin"}, {Root: root, Path: "b.bin", Name: "b.bin"}, {Root: root, Path: "gone.bin", Name: "gone.bin"}}}
	push := func(cfg ClientConfig) (map[string]FileResult, Summary, error) {
		var mu sync.Mutex
		got := map[string]FileResult{}
		sum, err := Copy(context.Background(), Job{Config: cfg, Direction: Push, Source: src, Remote: "in/",
			Options: Options{Policy: Update}, OnFile: func(fr FileResult) { mu.Lock(); got[fr.Path] = fr; mu.Unlock() }})
		return got, sum, err
	}
	cfg := ClientConfig{Addr: addr, Streams: 1, Tuning: Tuning{DSCP: -1}}
	got, sum, err := push(cfg)
	var ff *FilesFailedError
	if !errors.As(err, &ff) {
		t.Fatalf("push: %v, want some files failed", err)
	}
	if fr := got["a.bin"]; fr.OK || fr.Fault != retry.FaultPermission {
		t.Errorf("a.bin onto a directory: ok %v, fault %q, want permission (%s)", fr.OK, fr.Fault, fr.Reason)
	}
	if fr := got["b.bin"]; !fr.OK || fr.Fault != "" {
		t.Errorf("b.bin: ok %v, fault %q", fr.OK, fr.Fault)
	}
	if len(sum.Unread) != 1 || sum.Unread[0].Path != "gone.bin" || sum.Unread[0].Fault != retry.FaultNotFound {
		t.Errorf("unread sources: %+v, want gone.bin not-found", sum.Unread)
	}

	old := cfg
	old.maxVersion = wire.VersionFault - 1
	got, _, _ = push(old)
	if fr := got["a.bin"]; fr.OK || fr.Fault != "" {
		t.Errorf("a.bin from a version %d peer: ok %v, fault %q, want none said", old.maxVersion, fr.OK, fr.Fault)
	}

	small := serveConfig(t, ServerConfig{Root: t.TempDir(), MaxFileSize: 4})
	got, _, _ = push(ClientConfig{Addr: small, Streams: 1, Tuning: Tuning{DSCP: -1}})
	if fr := got["b.bin"]; fr.OK || fr.Fault != retry.FaultNoSpace {
		t.Errorf("b.bin over the server's size limit: ok %v, fault %q, want no-space (%s)", fr.OK, fr.Fault, fr.Reason)
	}

	ro := serveConfig(t, ServerConfig{Root: t.TempDir(), ReadOnly: true})
	_, _, err = push(ClientConfig{Addr: ro, Streams: 1, Tuning: Tuning{DSCP: -1}})
	if err == nil || FaultOf(err) != retry.FaultPermission || !retry.IsPermanent(err) {
		t.Errorf("push to a read-only server: %v (fault %q), want a permanent permission refusal", err, FaultOf(err))
	}
}
