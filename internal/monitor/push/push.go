// Package push carries an agent's samples to the controller's repository:
// each collected group is first written to a spool directory on disk, then
// sent in batches; a group leaves the spool only once the controller has
// acknowledged it. While the controller is unreachable the spool grows, up
// to a byte bound past which the oldest groups are dropped (and counted),
// so an agent never fills its disk; when the controller is back the
// backlog goes out oldest first. A restart of the agent resumes from the
// spool. The repository skips samples it already holds, so a batch sent
// twice (its acknowledgement lost) is stored once.
package push

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/retry"
)

// Sender delivers one batch; a nil error is the controller's
// acknowledgement that every sample in it is stored.
type Sender interface {
	Push(ctx context.Context, b *monitor.Batch) error
}

// A Sender's error that retry.IsPermanent is one the controller will give
// again however often the batch is sent (a malformed series): such a
// batch is dropped rather than retried forever. Any other error keeps it.

// Options configure a Pusher.
type Options struct {
	// Node is the node the samples belong to.
	Node string
	// Dir is the spool directory (created if missing). Empty keeps the
	// spool in memory: bounded the same way, but lost with the process.
	Dir string
	// MaxBytes bounds the spool; default 64 MiB.
	MaxBytes int64
	// MaxSamples bounds one batch; default 50,000.
	MaxSamples int
	Log        *slog.Logger
}

// Defaults.
const (
	DefaultMaxBytes   = 64 << 20
	DefaultMaxSamples = 50_000
)

// Pusher spools groups and sends them. Add and Flush may be called from
// different goroutines.
type Pusher struct {
	o     Options
	send  Sender
	agent string

	mu      sync.Mutex
	queue   []entry // oldest first
	bytes   int64
	next    uint64 // next spool file number
	seq     uint64
	meta    map[string]monitor.Meta
	dropped int // samples dropped by the bound or refused for good
	flushMu sync.Mutex
}

type entry struct {
	n       uint64
	size    int64
	samples int
	data    []byte // the group's JSON when the spool is in memory
}

// New opens (or creates) the spool and returns a Pusher that sends with s.
func New(o Options, s Sender) (*Pusher, error) {
	if o.Node == "" {
		return nil, errors.New("push: a node is required")
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = DefaultMaxSamples
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	p := &Pusher{o: o, send: s, agent: hex.EncodeToString(id[:]), meta: map[string]monitor.Meta{}}
	if o.Dir == "" {
		return p, nil
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("push: spool: %w", err)
	}
	ents, err := os.ReadDir(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("push: spool: %w", err)
	}
	for _, de := range ents {
		name := de.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(filepath.Join(o.Dir, name)) // a write cut short
			continue
		}
		if name == "meta.json" {
			if b, err := os.ReadFile(filepath.Join(o.Dir, name)); err == nil {
				_ = json.Unmarshal(b, &p.meta)
			}
			continue
		}
		num, ok := strings.CutSuffix(name, ".json")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		p.queue = append(p.queue, entry{n: n, size: info.Size(), samples: -1})
		p.bytes += info.Size()
		p.next = max(p.next, n+1)
	}
	slices.SortFunc(p.queue, func(a, b entry) int { return cmp.Compare(a.n, b.n) })
	if len(p.queue) > 0 {
		o.Log.Info("spool resumed", "groups", len(p.queue), "bytes", p.bytes)
	}
	return p, nil
}

func (p *Pusher) path(n uint64) string {
	return filepath.Join(p.o.Dir, fmt.Sprintf("%016d.json", n))
}

// Add spools one group with the metadata of its names. It fails only when
// the group cannot be written to the spool.
func (p *Pusher) Add(g monitor.Group, meta map[string]monitor.Meta) error {
	if len(g.Points) == 0 {
		return nil
	}
	data, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("push: encode group: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := false
	for k, m := range meta {
		if p.meta[k] != m {
			p.meta[k] = m
			changed = true
		}
	}
	e := entry{n: p.next, size: int64(len(data)), samples: len(g.Points)}
	if p.o.Dir == "" {
		e.data = data
	} else {
		if changed {
			if err := writeFile(filepath.Join(p.o.Dir, "meta.json"), mustJSON(p.meta)); err != nil {
				return fmt.Errorf("push: spool: %w", err)
			}
		}
		if err := writeFile(p.path(e.n), data); err != nil {
			return fmt.Errorf("push: spool: %w", err)
		}
	}
	p.next++
	p.queue = append(p.queue, e)
	p.bytes += e.size
	for p.bytes > p.o.MaxBytes && len(p.queue) > 1 {
		old := p.queue[0]
		p.queue = p.queue[1:]
		p.bytes -= old.size
		n := old.samples
		if n < 0 {
			n = 0
			if g, err := p.load(old); err == nil {
				n = len(g.Points)
			}
		}
		p.dropped += n
		if p.o.Dir != "" {
			_ = os.Remove(p.path(old.n))
		}
		p.o.Log.Warn("spool full: oldest group dropped", "samples", n, "bound_bytes", p.o.MaxBytes)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// writeFile writes atomically: a crash leaves the old file or the new.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (p *Pusher) load(e entry) (monitor.Group, error) {
	var g monitor.Group
	data := e.data
	if data == nil {
		var err error
		if data, err = os.ReadFile(p.path(e.n)); err != nil {
			return g, err
		}
	}
	err := json.Unmarshal(data, &g)
	return g, err
}

// Flush sends everything spooled, oldest first, in batches. It stops at
// the first batch the controller does not acknowledge and returns that
// error; what was not sent stays spooled for the next Flush.
func (p *Pusher) Flush(ctx context.Context) error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	for {
		p.mu.Lock()
		var take []entry
		var groups []monitor.Group
		samples := 0
		for _, e := range p.queue {
			g, err := p.load(e)
			if err != nil {
				// A spool file that cannot be read is dropped: keeping it
				// would block everything after it.
				p.o.Log.Warn("spool file unreadable: dropped", "n", e.n, "err", err)
				take = append(take, e)
				continue
			}
			if len(groups) > 0 && samples+len(g.Points) > p.o.MaxSamples {
				break
			}
			take = append(take, e)
			groups = append(groups, g)
			samples += len(g.Points)
		}
		meta := make(map[string]monitor.Meta, len(p.meta))
		for _, g := range groups {
			for _, pt := range g.Points {
				if m, ok := p.meta[pt.Name]; ok {
					meta[pt.Name] = m
				}
			}
		}
		p.seq++
		b := &monitor.Batch{Node: p.o.Node, Agent: p.agent, Seq: p.seq, Meta: meta, Groups: groups}
		p.mu.Unlock()
		if len(take) == 0 {
			return nil
		}
		var err error
		if len(groups) > 0 {
			err = p.send.Push(ctx, b)
		}
		if err != nil && !retry.IsPermanent(err) {
			return err
		}
		if err != nil {
			p.o.Log.Warn("batch refused for good: dropped", "samples", samples, "err", err)
		}
		p.mu.Lock()
		// Only the entries still at the head are removed: Add may have
		// dropped some of them meanwhile.
		for _, e := range take {
			if len(p.queue) > 0 && p.queue[0].n == e.n {
				p.queue = p.queue[1:]
				p.bytes -= e.size
				if p.o.Dir != "" {
					_ = os.Remove(p.path(e.n))
				}
			}
		}
		if err != nil {
			p.dropped += samples
		}
		p.mu.Unlock()
	}
}

// Stats reports the spool: groups and bytes waiting, and samples dropped
// (by the bound, or refused by the controller for good).
func (p *Pusher) Stats() (groups int, bytes int64, dropped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue), p.bytes, p.dropped
}
