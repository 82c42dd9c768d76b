//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/roottest"
	"github.com/lightpath/lightpath/internal/transfer"
)

// TestServiceReadOnlyDestination: a job into a destination directory on a
// read-only filesystem fails every file at once, with class permission,
// tried once each (no attempt is spent on a refusal a retry cannot mend),
// and the job ends FAILED naming it. The data nodes report their roots'
// free space, which endpoint list shows.
func TestServiceReadOnlyDestination(t *testing.T) {
	t.Parallel()
	roottest.Require(t, "mounts a read-only tmpfs (root writes through file modes)")
	s := startSvc(t, svcOpts{})
	ro := mkdir(t, s.dstRoot, "ro")
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", ro).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", ro).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", ro, err, out)
			exec.Command("umount", "-l", ro).Run()
		}
	})
	var files []string
	for _, n := range []string{"a.dat", "b.dat", "sub/c.dat"} {
		writeRandom(t, filepath.Join(s.srcRoot, "run1", n), 100_000, uint64(len(files)+1))
		files = append(files, "run1/"+n)
	}

	id := s.submit("siteA:run1", "siteB:ro/").Job.ID
	var p apiv1.JobPage
	if !waitFor(2*time.Minute, func() bool {
		p = s.job(s.alice, id)
		return transfer.JobEnded(p.Job.State)
	}) {
		t.Fatalf("the job did not end: %s %q", p.Job.State, p.Job.Reason)
	}
	if p.Job.State != transfer.JobFailed || p.Job.FilesFailed != len(files) || !strings.Contains(p.Job.Reason, "read-only file system") {
		t.Errorf("job %s, %d of %d failed: %q", p.Job.State, p.Job.FilesFailed, len(files), p.Job.Reason)
	}
	if len(p.Files) != len(files) {
		t.Fatalf("job page lists %d files, want %d", len(p.Files), len(files))
	}
	for _, f := range p.Files {
		if f.State != transfer.FileFailed || f.Class != apiv1.ClassPermission || f.Attempts != 1 {
			t.Errorf("%s: %s, class %q, %d attempts (%s); want FAILED, permission, 1", f.Path, f.State, f.Class, f.Attempts, f.Error)
		}
	}
	copies := 0
	for _, k := range p.Tasks {
		if k.Kind == transfer.TaskCopy {
			copies++
		}
	}
	if copies == 0 || copies > len(files) {
		t.Errorf("%d copy tasks for %d files refused for good", copies, len(files))
	}
	if entries, err := os.ReadDir(ro); err != nil || len(entries) != 0 {
		t.Errorf("the read-only destination holds %v (%v)", entries, err)
	}
	r := s.ok(s.alice, "transfer", "status", id)
	if !strings.Contains(r.stdout, ": permission: ") {
		t.Errorf("transfer status does not name the class of the failed files:\n%s", r.stdout)
	}

	// The heartbeats' free space, kept with each node.
	for _, ep := range s.endpoints() {
		for _, n := range ep.Nodes {
			if n.Alive && (n.FreeBytesAt.IsZero() || n.FreeBytes <= 0) {
				t.Errorf("data node %s lists %d bytes free at %v", n.Node, n.FreeBytes, n.FreeBytesAt)
			}
		}
	}
	r = s.ok(s.admin, "endpoint", "list")
	if !strings.Contains(r.stdout, "FREE") || !strings.Contains(r.stdout, "iB ") {
		t.Errorf("endpoint list does not show the free space:\n%s", r.stdout)
	}
}
