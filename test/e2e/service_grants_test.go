//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/wire"
)

// A compromised source data node, played by the test: siteA's real data
// nodes are stopped, and the test registers as a1 through the REST API,
// claims the tasks of alice's jobs with a token bound to a1 (what a data
// node holds), and pushes to siteB's real data nodes with the grants the
// claims hand out, frame by frame (craftedPush), as an attacker who took
// the node would.

// fakeSource is the test's a1: its heartbeats (renewing the tasks it
// holds, or paused to let their leases lapse) and its client.
type fakeSource struct {
	t     *testing.T
	s     *svc
	c     *client.Client // the token bound to a1
	admin *client.Client

	mu     sync.Mutex
	held   map[string]int // task -> attempt, named in the heartbeats
	paused bool
	beat   func() error
}

const fakeLease = 3 * time.Second

// startFakeSource stops siteA's data nodes and registers the test as a1.
// Its heartbeats go with the admin's token (an admin may register a data
// node for an endpoint), its claims, listings and reports with a token
// bound to a1.
func startFakeSource(t *testing.T, s *svc) *fakeSource {
	t.Helper()
	for _, n := range []string{"a1", "a2"} {
		if p := s.nodes[n]; p != nil {
			p.Signal(syscall.SIGTERM)
			p.Wait()
		}
	}
	f := &fakeSource{t: t, s: s, held: map[string]int{}}
	f.c = s.apiClient(s.tokenFor("dn", "a1"))
	f.admin = s.apiClient(readTok(t, s.admin))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	beat := func() error {
		f.mu.Lock()
		if f.paused {
			f.mu.Unlock()
			return nil
		}
		var tasks []apiv1.TaskProgress
		for id, a := range f.held {
			tasks = append(tasks, apiv1.TaskProgress{Task: id, Attempt: a})
		}
		f.mu.Unlock()
		_, err := f.admin.DataNodeHeartbeat(ctx, "a1", apiv1.DataNodeHeartbeat{Endpoint: "siteA", Address: "127.0.0.11:9",
			Lease: fakeLease.String(), Tasks: tasks})
		return err
	}
	f.beat = beat
	if err := beat(); err != nil {
		t.Fatalf("register the test as a1: %v", err)
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(fakeLease / 6)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				beat()
			}
		}
	}()
	return f
}

// pause stops a1's heartbeats; resume sends one at once and goes on.
func (f *fakeSource) pause() {
	f.mu.Lock()
	f.paused = true
	f.mu.Unlock()
}

func (f *fakeSource) resume(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	f.paused = false
	f.mu.Unlock()
	if err := f.beat(); err != nil {
		t.Fatalf("a1's heartbeat: %v", err)
	}
}

// claim claims until it gets a task of kind.
func (f *fakeSource) claim(t *testing.T, kind string) apiv1.TaskWork {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		cl, err := f.c.Claim(context.Background(), "a1", apiv1.ClaimRequest{Max: 1, Wait: "5s"})
		if err != nil {
			t.Fatalf("claim as a1: %v", err)
		}
		for _, w := range cl.Tasks {
			f.mu.Lock()
			f.held[w.Task.ID] = w.Task.Attempt
			f.mu.Unlock()
			if w.Task.Kind != kind {
				t.Fatalf("claimed a %s task, want %s: %+v", w.Task.Kind, kind, w.Task)
			}
			return w
		}
	}
	t.Fatalf("no %s task to claim", kind)
	return apiv1.TaskWork{}
}

// job submits a job of one file, data/NAME of content, from siteA to
// siteB:in, lists it as a1 and claims its copy task: the task's work,
// with its grant.
func (f *fakeSource) job(t *testing.T, name string, content []byte) (string, apiv1.TaskWork) {
	t.Helper()
	id := f.s.submit("siteA:data", "siteB:in").Job.ID
	l := f.claim(t, transfer.TaskList)
	if l.Task.Job != id {
		t.Fatalf("listing of job %s, want %s", l.Task.Job, id)
	}
	if _, err := f.c.ReportListing(context.Background(), l.Task.ID, apiv1.Listing{Attempt: l.Task.Attempt,
		Files: []apiv1.ListedFile{{Path: "data/" + name, Source: "data", Size: int64(len(content)), MTime: time.Now().UTC()}}}); err != nil {
		t.Fatalf("report the listing: %v", err)
	}
	f.forget(l.Task.ID)
	w := f.claim(t, transfer.TaskCopy)
	if w.Task.Job != id || w.Grant == "" || len(w.Files) != 1 || w.Files[0].Dest != "in/data/"+name {
		t.Fatalf("copy task: %+v", w)
	}
	return id, w
}

func (f *fakeSource) forget(task string) {
	f.mu.Lock()
	delete(f.held, task)
	f.mu.Unlock()
}

// tokenFor makes a token of user (made an agent if new) bound to node.
func (s *svc) tokenFor(user, node string) string {
	s.t.Helper()
	if r := s.lp(s.admin, "user", "add", user, "--role", "agent"); r.code != 0 && !strings.Contains(r.stderr, "already exists") {
		mustSucceed(s.t, "user add "+user, r)
	}
	out := filepath.Join(s.dir, user+"-"+node+".token")
	s.ok(s.admin, "user", "token", "create", user, "--node", node, "--out", out)
	return readTok(s.t, out)
}

func (s *svc) apiClient(token string) *client.Client {
	s.t.Helper()
	c, err := client.New(s.url, token, client.WithTimeout(time.Minute))
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// nodeAddr is a data node's address as its endpoint lists it, once it is
// alive at an address other than not.
func (s *svc) nodeAddr(endpoint, node, not string) string {
	s.t.Helper()
	var addr string
	if !waitFor(2*time.Minute, func() bool {
		for _, d := range s.endpoints()[endpoint].Nodes {
			if d.Node == node && d.Alive && d.Address != not {
				addr = d.Address
				return true
			}
		}
		return false
	}) {
		s.t.Fatalf("data node %s is not alive at a new address", node)
	}
	return addr
}

// crafted is a push session opened by hand under a grant.
type crafted struct {
	ctrl, data *rawPeer
	content    []byte
	// receipt is the destination's receipt of the file, once it said the
	// file arrived (protocol version 9).
	receipt []byte
}

// errRefused is a session the server would not open, with its reason.
type errRefused struct {
	code uint8
	msg  string
}

func (e *errRefused) Error() string { return fmt.Sprintf("refused (code %d): %s", e.code, e.msg) }

// openCrafted opens a push session to addr under grant, into dir (a
// directory under the server's root), and announces the file name of
// content. It returns the server's refusal, if it refuses the session.
func openCrafted(t *testing.T, addr, grant, dir, name string, content []byte) (*crafted, error) {
	t.Helper()
	ctrl := dialRaw(t, addr, nil, wire.KindControl, wire.MaxVersion)
	ctrl.send(&wire.Grant{Token: grant})
	ctrl.send(&wire.Put{Transfer: wire.Transfer{Tuning: wire.Tuning{DSCP: -1}, Streams: 1, BlockSize: 1 << 20}, Dest: dir + "/", Sources: 1, DirSlash: true})
	var acc *wire.Accept
	switch m := ctrl.read().(type) {
	case *wire.Error:
		return nil, &errRefused{m.Code, m.Msg}
	case *wire.Accept:
		acc = m
	default:
		t.Fatalf("the server answered a push with %s", m.Type())
	}
	data := dialRaw(t, addr, nil, wire.KindData, wire.MaxVersion)
	data.send(&wire.Join{Session: acc.Session, Stream: 0, MAC: joinMAC(acc.Secret, acc.Session, 0, data.cn, data.sn)})
	if _, ok := data.read().(*wire.Joined); !ok {
		t.Fatalf("the data connection was not joined")
	}
	ctrl.send(&wire.Files{Entries: []wire.Entry{{ID: 1, Kind: wire.EntryFile, Path: name, Size: int64(len(content)), Mode: 0o644,
		MTime: time.Now().UnixNano(), Alloc: int64(len(content))}}, HasAlloc: true})
	ctrl.send(&wire.ManifestEnd{Count: 1})
	if it := needs(ctrl, 1)[1]; it.Action != wire.NeedAll {
		t.Fatalf("the server answered the file with %+v", it)
	}
	return &crafted{ctrl: ctrl, data: data, content: content}, nil
}

// finish sends the file's block and end and the session's end: nil once
// the server says the file arrived, else what it said.
func (c *crafted) finish() error {
	crc := crc32.Checksum(c.content, crc32.MakeTable(crc32.Castagnoli))
	h := make([]byte, wire.BlockHeaderSize)
	wire.BlockHeader{Kind: wire.DataBlock, File: 1, Index: 0, Length: uint32(len(c.content)), CRC: crc}.Put(h)
	c.data.c.SetWriteDeadline(time.Now().Add(time.Minute))
	if _, err := c.data.c.Write(append(h, c.content...)); err != nil {
		return err
	}
	if err := c.ctrl.w.Send(&wire.FileEnd{Items: []wire.FileEndItem{{ID: 1, CRC: crc}}}); err != nil {
		return err
	}
	for {
		c.ctrl.c.SetReadDeadline(time.Now().Add(time.Minute))
		m, err := c.ctrl.r.Read()
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *wire.Error:
			return &errRefused{m.Code, m.Msg}
		case *wire.Receipt:
			c.receipt = m.MAC
		case *wire.Result:
			if len(m.Items) != 1 || !m.Items[0].OK {
				return fmt.Errorf("result %+v", m.Items)
			}
			end := make([]byte, wire.BlockHeaderSize)
			wire.BlockHeader{Kind: wire.DataEnd}.Put(end)
			c.data.c.Write(end)
			c.ctrl.w.Send(&wire.Done{})
			c.ctrl.c.SetReadDeadline(time.Now().Add(time.Minute))
			if _, ok := c.ctrl.read().(*wire.Done); !ok {
				return errors.New("no done")
			}
			return nil
		}
	}
}

// craftedPush pushes one file of content to dir/name on addr under grant,
// trying again while the server says it is busy (as a data node's client
// would: a server just started has no controller key until its first
// heartbeat's answer, which it applies just after the controller lists it
// alive).
func craftedPush(t *testing.T, addr, grant, dir, name string, content []byte) error {
	t.Helper()
	_, err := craftedPushReceipt(t, addr, grant, dir, name, content)
	return err
}

// craftedPushReceipt is craftedPush, with the destination's receipt of
// the file (spelled as a report carries it).
func craftedPushReceipt(t *testing.T, addr, grant, dir, name string, content []byte) (string, error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := openCrafted(t, addr, grant, dir, name, content)
		var r *errRefused
		if errors.As(err, &r) && r.code == wire.CodeBusy && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			return "", err
		}
		defer c.ctrl.c.Close()
		defer c.data.c.Close()
		if err := c.finish(); err != nil {
			return "", err
		}
		if len(c.receipt) == 0 {
			return "", errors.New("the destination said the file arrived, without a receipt")
		}
		return base64.RawURLEncoding.EncodeToString(c.receipt), nil
	}
}

// refusedUnwritten asserts that a push under a dead grant is refused with
// want in its reason, and that nothing of it is at the destination.
func refusedUnwritten(t *testing.T, s *svc, err error, name, want string) {
	t.Helper()
	var r *errRefused
	if !errors.As(err, &r) || r.code != wire.CodeRefused || !strings.Contains(r.msg, want) {
		t.Errorf("push of %s under a dead grant: %v, want a refusal saying %q", name, err, want)
	} else {
		t.Logf("push of %s: %v", name, err)
	}
	unwritten(t, s, name)
}

// unwritten asserts that nothing of a file name is under the
// destination's in/ (neither the file nor a partial file or journal).
func unwritten(t *testing.T, s *svc, name string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(s.dstRoot, "in", name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a push under a dead grant wrote in/%s: %v", name, err)
	}
	matches, _ := filepath.Glob(filepath.Join(s.dstRoot, "in", "*"+name+"*"))
	if len(matches) > 0 {
		t.Errorf("a push under a dead grant left %v", matches)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestServiceGrantDiesWithTask (issue 28, finding 2): a grant taken from a
// task writes while its attempt runs, and stops working when the task
// succeeds, when its job is cancelled (a session opened before is cut),
// when the task is re-attempted, and after the destination data node
// restarts (which keeps no fences): each push is refused with the reason,
// and nothing of it is written.
func TestServiceGrantDiesWithTask(t *testing.T) {
	t.Parallel()
	s := startSvc(t, svcOpts{})
	f := startFakeSource(t, s)
	addrOf := func(w apiv1.TaskWork) string { return w.Address }

	t.Run("succeeded", func(t *testing.T) {
		content := randomBytes(3000)
		id, w := f.job(t, "f1.dat", content)
		// The task's own push, under its grant: it arrives, with the
		// destination's receipt.
		receipt, err := craftedPushReceipt(t, addrOf(w), w.Grant, "in/data", "f1.dat", content)
		if err != nil {
			t.Fatalf("the task's push: %v", err)
		}
		if got, _ := os.ReadFile(filepath.Join(s.dstRoot, "in", "data", "f1.dat")); !bytes.Equal(got, content) {
			t.Fatal("the task's file did not arrive")
		}
		sum := fmt.Sprintf("%08x", crc32.Checksum(content, crc32.MakeTable(crc32.Castagnoli)))
		if _, err := f.c.ReportTask(context.Background(), w.Task.ID, apiv1.TaskReport{Attempt: w.Task.Attempt, Done: true, BytesDone: int64(len(content)),
			Files: []apiv1.FileReport{{Path: w.Files[0].Path, OK: true, Checksum: sum, Bytes: int64(len(content)), Receipt: receipt}}}); err != nil {
			t.Fatal(err)
		}
		f.forget(w.Task.ID)
		if j := s.job(s.alice, id); j.Job.State != transfer.JobSucceeded {
			t.Fatalf("job %s %q", j.Job.State, j.Job.Reason)
		}
		err = craftedPush(t, addrOf(w), w.Grant, "in", "pwned-succeeded.txt", []byte("pwned\n"))
		refusedUnwritten(t, s, err, "pwned-succeeded.txt", "has ended (SUCCEEDED)")

		// The destination restarts: it has kept no fence, and refuses
		// the grant all the same.
		to := w.Task.To
		s.nodes[to].Signal(syscall.SIGTERM)
		s.nodes[to].Wait()
		s.startNode(to)
		addr := s.nodeAddr("siteB", to, addrOf(w))
		err = craftedPush(t, addr, w.Grant, "in", "pwned-restart.txt", []byte("pwned\n"))
		refusedUnwritten(t, s, err, "pwned-restart.txt", "has ended (SUCCEEDED)")
	})

	t.Run("cancelled", func(t *testing.T) {
		id, w := f.job(t, "f2.dat", randomBytes(3000))
		addr := s.nodeAddr("siteB", w.Task.To, "")
		// A session opened while the task runs is taken, then cut by the
		// cancel: its file never lands.
		open, err := openCrafted(t, addr, w.Grant, "in", "cut-cancelled.txt", []byte("cut\n"))
		if err != nil {
			t.Fatalf("a session under a running task's grant: %v", err)
		}
		s.ok(s.alice, "transfer", "cancel", id)
		f.forget(w.Task.ID)
		open.ctrl.c.SetReadDeadline(time.Now().Add(time.Minute))
		cut := false
		for !cut {
			m, err := open.ctrl.r.Read()
			if err != nil {
				t.Fatalf("the session opened before the cancel was not told it is over: %v", err)
			}
			if e, ok := m.(*wire.Error); ok {
				if !strings.Contains(e.Msg, "is no longer current") {
					t.Fatalf("the cut session: %q", e.Msg)
				}
				cut = true
			}
		}
		if err := open.finish(); err == nil {
			t.Error("the session cut by the cancel still took its file")
		}
		open.ctrl.c.Close()
		open.data.c.Close()
		unwritten(t, s, "cut-cancelled.txt")
		err = craftedPush(t, addr, w.Grant, "in", "pwned-cancelled.txt", []byte("pwned\n"))
		// The cut fenced the attempt at the destination: refused there
		// without asking.
		refusedUnwritten(t, s, err, "pwned-cancelled.txt", fmt.Sprintf("attempt %d of task %s is no longer current", w.Task.Attempt, w.Task.ID))
	})

	t.Run("re-attempted", func(t *testing.T) {
		content := randomBytes(3000)
		id, w1 := f.job(t, "f3.dat", content)
		addr := s.nodeAddr("siteB", w1.Task.To, "")
		// a1 goes silent: the task's lease lapses and it is queued again;
		// a1, back, claims its next attempt.
		f.pause()
		if !waitFor(2*time.Minute, func() bool {
			for _, tk := range s.job(s.alice, id).Tasks {
				if tk.ID == w1.Task.ID && tk.State == transfer.TaskQueued {
					return true
				}
			}
			return false
		}) {
			t.Fatal("the task was not queued again after a1's lease lapsed")
		}
		err := craftedPush(t, addr, w1.Grant, "in", "pwned-lapsed.txt", []byte("pwned\n"))
		refusedUnwritten(t, s, err, "pwned-lapsed.txt", "the task is QUEUED")
		f.forget(w1.Task.ID)
		f.resume(t)
		w2 := f.claim(t, transfer.TaskCopy)
		if w2.Task.ID != w1.Task.ID || w2.Task.Attempt != w1.Task.Attempt+1 {
			t.Fatalf("the next attempt: %+v", w2.Task)
		}
		err = craftedPush(t, s.nodeAddr("siteB", w1.Task.To, ""), w1.Grant, "in", "pwned-reattempted.txt", []byte("pwned\n"))
		refusedUnwritten(t, s, err, "pwned-reattempted.txt", fmt.Sprintf("attempt %d", w1.Task.Attempt))
		// The new attempt's grant writes.
		if err := craftedPush(t, w2.Address, w2.Grant, "in/data", "f3.dat", content); err != nil {
			t.Fatalf("the new attempt's push: %v", err)
		}
	})
}

// TestServiceTaskBelongsToNode (issue 28, finding 12): a report or a
// listing on a task, from a node's agent token or another data node's
// token, is refused with 403 and says nothing of the task (its job, its
// files, its nodes); the task is left as it was. Its holder is heard.
func TestServiceTaskBelongsToNode(t *testing.T) {
	t.Parallel()
	s := startSvc(t, svcOpts{})
	f := startFakeSource(t, s)
	id, w := f.job(t, "g1.dat", randomBytes(100))
	secrets := []string{id, w.Task.Job, "g1.dat", "data/", w.Task.To, "a1", "siteA", "siteB", w.Address, w.Grant[:16]}
	for _, who := range []struct{ user, node string }{{"ag", "rb"}, {"dn2", "b2"}} {
		tok := s.tokenFor(who.user, who.node)
		for _, r := range []struct{ path, body string }{
			{"/api/v1/tasks/" + w.Task.ID + "/report", fmt.Sprintf(`{"attempt": %d, "done": true, "files": [{"path": "data/g1.dat", "ok": true, "checksum": "00000000"}]}`, w.Task.Attempt)},
			{"/api/v1/tasks/" + w.Task.ID + "/report", `{"attempt": 99}`},
			{"/api/v1/tasks/" + w.Task.ID + "/listing", `{"attempt": 1}`},
		} {
			req, _ := http.NewRequest("POST", s.url+r.path, strings.NewReader(r.body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// The refusal may name the task the caller named, and
			// nothing else of it.
			body := strings.ReplaceAll(string(raw), w.Task.ID, "TASK")
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s (node %s) POST %s: %d %s, want 403", who.user, who.node, r.path, resp.StatusCode, body)
			}
			for _, sec := range secrets {
				if strings.Contains(body, sec) {
					t.Errorf("%s (node %s) POST %s: the refusal tells %q: %s", who.user, who.node, r.path, sec, body)
				}
			}
		}
	}
	j := s.job(s.alice, id)
	if j.Job.State != transfer.JobActive || j.Job.FilesDone != 0 {
		t.Fatalf("the refused reports changed the job: %s, %d files done", j.Job.State, j.Job.FilesDone)
	}
	for _, tk := range j.Tasks {
		if tk.ID == w.Task.ID && (tk.State != transfer.TaskActive || tk.From != "a1") {
			t.Fatalf("the refused reports changed the task: %+v", tk)
		}
	}
	// The holder is heard.
	if ans, err := f.c.ReportTask(context.Background(), w.Task.ID, apiv1.TaskReport{Attempt: w.Task.Attempt}); err != nil || ans.Cancel {
		t.Fatalf("the holder's report: %v %+v", err, ans)
	}
}
