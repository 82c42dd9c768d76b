//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The transfer service on the testbed, as root: the two-site testbed with
// an agent in every node, a data node in each of a1, a2 (endpoint site-a)
// and b1, b2 (endpoint site-b), and deadline jobs that book the network
// before they are accepted, run on both node pairs over their booked
// paths, and finish before their deadline; an infeasible deadline is
// refused with the earliest completion and books nothing.

// tbJob is what this test reads of transfer status --json.
type tbJob struct {
	Job struct {
		ID        string    `json:"id"`
		State     string    `json:"state"`
		Reason    string    `json:"reason"`
		Deadline  time.Time `json:"deadline"`
		StartedAt time.Time `json:"started_at"`
		EndedAt   time.Time `json:"ended_at"`
		Files     int       `json:"files_total"`
		FilesDone int       `json:"files_done"`
		Bytes     int64     `json:"bytes_total"`
		BytesDone int64     `json:"bytes_done"`
		Algorithm string    `json:"algorithm"`
		Pairs     []struct {
			From        string    `json:"from"`
			To          string    `json:"to"`
			Reservation string    `json:"reservation"`
			RateBps     uint64    `json:"rate_bps"`
			Start       time.Time `json:"start"`
			End         time.Time `json:"end"`
			ShareBytes  int64     `json:"share_bytes"`
			BytesDone   int64     `json:"bytes_done"`
			Routed      string    `json:"routed"`
		} `json:"pairs"`
	} `json:"job"`
	Files []struct {
		Path     string `json:"path"`
		State    string `json:"state"`
		Checksum string `json:"checksum"`
		From     string `json:"from"`
		To       string `json:"to"`
	} `json:"files"`
}

func TestServiceOnTestbed(t *testing.T) {
	c, b := agentTestbed(t)
	dnTok := filepath.Join(c.dir, "datanode.token")
	aliceTok := filepath.Join(c.dir, "alice.token")
	// Data nodes have a user of their own: an agent's enrolment retires
	// its user's earlier tokens for its node.
	c.ok(c.adminTok, "user", "add", "datanodes", "--role", "agent")
	c.ok(c.adminTok, "user", "token", "create", "datanodes", "--out", dnTok)
	c.ok(c.adminTok, "user", "add", "alice", "--role", "user")
	c.ok(c.adminTok, "user", "token", "create", "alice", "--out", aliceTok)

	siteA, siteB := scratchDir(t), scratchDir(t)
	for _, n := range []struct{ node, addr, endpoint, root string }{
		{"a1", "198.18.1.1:7070", "site-a", siteA}, {"a2", "198.18.1.2:7070", "site-a", siteA},
		{"b1", "198.18.2.1:7070", "site-b", siteB}, {"b2", "198.18.2.2:7070", "site-b", siteB},
	} {
		// Each node sends at most 150 Mbit/s, so the dataset takes seconds
		// and the planner has a rate to plan with.
		b.serveIn(n.node, n.addr, n.root, "--controller", c.sock, "--controller-token-file", dnTok, "--node", n.node,
			"--endpoint", n.endpoint, "--max-rate", "150M", "--lease", "5s", "--transfer-log", "/dev/null")
	}
	if !waitFor(30*time.Second, func() bool {
		r := c.lp(c.adminTok, "endpoint", "list", "--json")
		return r.code == 0 && strings.Count(r.stdout, `"alive":true`) == 4
	}) {
		t.Fatalf("the four data nodes are not alive: %s", c.lp(c.adminTok, "endpoint", "list").stdout)
	}
	c.ok(c.adminTok, "endpoint", "allow", "site-a", "--user", "alice")
	c.ok(c.adminTok, "endpoint", "allow", "site-b", "--user", "alice")

	// The dataset: 24 small files and two of 40 MiB, 89 MiB in all.
	var files []string
	for i := range 24 {
		rel := fmt.Sprintf("ds/small/f%02d.dat", i)
		writeRandom(t, filepath.Join(siteA, rel), int64(1000+i*40000), uint64(i+1))
		files = append(files, rel)
	}
	for i := range 2 {
		rel := fmt.Sprintf("ds/big%d.bin", i)
		writeRandom(t, filepath.Join(siteA, rel), 40<<20, uint64(100+i))
		files = append(files, rel)
	}

	reservations := func() int {
		r := c.ok(c.adminTok, "reserve", "list", "--json")
		return strings.Count(r.stdout, `"id":"r-`)
	}
	status := func(id string) tbJob {
		t.Helper()
		r := c.ok(aliceTok, "transfer", "status", id, "--json")
		var j tbJob
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &j); err != nil {
			t.Fatalf("transfer status --json: %v\n%s", err, r.stdout)
		}
		return j
	}

	t.Run("infeasible deadline", func(t *testing.T) {
		before := reservations()
		// 89 MiB at 2 × 150 Mbit/s take 2.5 s at best.
		r := c.lp(aliceTok, "transfer", "submit", "site-a:ds", "site-b:late", "--deadline", "+2s")
		checkFailure(t, "submit with a deadline that cannot be met", r, "cannot be met", "earliest completion")
		if got := reservations(); got != before {
			t.Errorf("an infeasible job left reservations: %d before, %d after", before, got)
		}
		if r := c.ok(aliceTok, "transfer", "list", "--json"); strings.Contains(r.stdout, "site-b:late") {
			t.Errorf("an infeasible job was kept:\n%s", r.stdout)
		}
	})

	t.Run("deadline job", func(t *testing.T) {
		s0 := b.status()
		submitted := time.Now()
		r := c.ok(aliceTok, "transfer", "submit", "site-a:ds", "site-b:in", "--deadline", "+2m", "--json")
		var resp struct {
			Job struct {
				ID    string `json:"id"`
				State string `json:"state"`
				Pairs []struct {
					Reservation string `json:"reservation"`
				} `json:"pairs"`
			} `json:"job"`
		}
		if err := json.Unmarshal([]byte(lastLine(r.stdout)), &resp); err != nil {
			t.Fatalf("submit --json: %v\n%s", err, r.stdout)
		}
		// Booked before it was accepted: the answer names its reservations.
		if len(resp.Job.Pairs) != 2 || resp.Job.Pairs[0].Reservation == "" || resp.Job.Pairs[1].Reservation == "" {
			t.Fatalf("the accepted deadline job is not booked on two pairs: %s", r.stdout)
		}
		w := runLP(t, runOpts{timeout: 3 * time.Minute}, "transfer", "wait", resp.Job.ID, "--controller", c.sock,
			"--controller-token-file", aliceTok)
		mustSucceed(t, "transfer wait", w)
		s1 := b.status()
		j := status(resp.Job.ID)
		if os.Getenv("LP_DEBUG_TASKS") != "" {
			r := c.ok(aliceTok, "transfer", "status", resp.Job.ID, "--json")
			var raw struct {
				Tasks []map[string]any `json:"tasks"`
			}
			json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &raw)
			for _, tk := range raw.Tasks {
				t.Logf("task %v %v %v>%v attempt %v files %d bytes %v claimed %v ended %v rate %v streams %v", tk["id"], tk["kind"], tk["from"], tk["to"], tk["attempt"], len(fmt.Sprint(tk["files"])), tk["bytes"], tk["claimed_at"], tk["ended_at"], tk["rate_bps"], tk["streams"])
			}
		}
		t.Logf("job %s: %s in %v (ACTIVE %v), algorithm %q, pairs %+v", j.Job.ID, j.Job.State, time.Since(submitted).Round(time.Millisecond),
			j.Job.EndedAt.Sub(j.Job.StartedAt).Round(time.Millisecond), j.Job.Algorithm, j.Job.Pairs)
		if j.Job.State != "SUCCEEDED" || j.Job.FilesDone != len(files) {
			t.Fatalf("job %+v", j.Job)
		}
		if !j.Job.EndedAt.Before(j.Job.Deadline) {
			t.Errorf("ended at %v, after its deadline %v", j.Job.EndedAt, j.Job.Deadline)
		}
		if j.Job.Algorithm == "" {
			t.Errorf("the job does not say which algorithm booked it")
		}
		pairs := map[string]bool{}
		var reservedLinks []string
		for _, p := range j.Job.Pairs {
			if p.RateBps == 0 || p.RateBps > 150e6 || p.ShareBytes <= 0 {
				t.Errorf("pair %s → %s booked %d bit/s for %d bytes: want a share at up to the nodes' 150 Mbit/s", p.From, p.To, p.RateBps, p.ShareBytes)
			}
			res := c.reservation(c.adminTok, p.Reservation)
			if res.Owner != "alice" || res.From != p.From || res.To != p.To {
				t.Errorf("pair %s → %s: reservation %+v", p.From, p.To, res)
			}
			for _, h := range res.Path {
				if h.Link == "wan" || h.Link == "dedicated" {
					reservedLinks = append(reservedLinks, h.Link)
				}
			}
		}
		for _, f := range j.Files {
			if f.State != "SUCCEEDED" || f.Checksum == "" {
				t.Errorf("file %s: %s, checksum %q", f.Path, f.State, f.Checksum)
			}
			pairs[f.From+">"+f.To] = true
		}
		if len(pairs) != 2 {
			t.Errorf("the files went over %v: want both node pairs", pairs)
		}
		for _, rel := range files {
			sameFile(t, filepath.Join(siteA, rel), filepath.Join(siteB, "in", rel))
		}
		var onReserved int64
		for _, l := range uniq(reservedLinks) {
			onReserved += int64(s1.bytesOn(l, "ra") - s0.bytesOn(l, "ra"))
		}
		var total int64
		for _, f := range files {
			fi, err := os.Stat(filepath.Join(siteA, f))
			if err != nil {
				t.Fatal(err)
			}
			total += fi.Size()
		}
		t.Logf("bytes on the reserved links %v: %d of %d", uniq(reservedLinks), onReserved, total)
		if onReserved < total*3/4 {
			t.Errorf("the reserved links %v carried %d bytes of %d", uniq(reservedLinks), onReserved, total)
		}
	})
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
