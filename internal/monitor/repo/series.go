package repo

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/chunk"
)

// series is one series' in-memory state.
type series struct {
	id     int64
	name   string
	labels monitor.Labels

	ingT    int64 // under Repo.ingestMu: last raw timestamp accepted
	inDirty bool  // under Repo.applyMu: on Repo.dirty

	mu        sync.Mutex
	persisted bool // its row is in SQLite
	lastT     int64
	lastV     float64
	tiers     []tierState
}

type tierState struct {
	head      *chunk.Chunk
	headWin   int64
	headStart int64
	headEnd   int64
	// stored is the head as the last checkpoint stored it (heads file), not
	// yet decoded (Open loads it so; decoding every head would make Open
	// take tens of seconds): the next append to the tier decodes it, or
	// seals it as it is if the sample belongs in a new chunk. At most one
	// of head and stored is set.
	stored  []byte
	storedN int
	sealed  []sealedChunk // sealed since the last checkpoint, not yet in SQLite
	lastT   int64         // last timestamp in this tier, memory or SQLite
	// The bucket being averaged (downsampled tiers): it ends at bucket.
	bucket int64
	sum    float64
	n      int64
}

type sealedChunk struct {
	win, start, end int64
	n               int
	data            []byte
}

const none = math.MinInt64

func newSeries(id int64, name string, ls monitor.Labels, tiers int) *series {
	s := &series{id: id, name: name, labels: ls, ingT: none, lastT: none, tiers: make([]tierState, tiers)}
	for i := range s.tiers {
		s.tiers[i].lastT = none
	}
	return s
}

// nameIndex finds the series of one name, and by label value.
type nameIndex struct {
	all      []*series
	postings map[string]map[string][]*series // label name → value → series
}

// seriesKey is an injective encoding of a series' name and labels with
// node=<node> in place of any node label: length-prefixed strings.
func seriesKey(b []byte, name string, ls monitor.Labels, node string) []byte {
	b = appendString(b[:0], name)
	put := func(n, v string) {
		b = appendString(b, n)
		b = appendString(b, v)
	}
	done := false
	for _, l := range ls {
		if l.Name == "node" {
			continue
		}
		if !done && l.Name > "node" {
			put("node", node)
			done = true
		}
		put(l.Name, l.Value)
	}
	if !done {
		put("node", node)
	}
	return b
}

// withNode returns the labels with node set (sorted, as seriesKey orders).
func withNode(ls monitor.Labels, node string) monitor.Labels {
	out := make(monitor.Labels, 0, len(ls)+1)
	done := false
	for _, l := range ls {
		if l.Name == "node" {
			continue
		}
		if !done && l.Name > "node" {
			out = append(out, monitor.Label{Name: "node", Value: node})
			done = true
		}
		out = append(out, l)
	}
	if !done {
		out = append(out, monitor.Label{Name: "node", Value: node})
	}
	return out
}

// addIndex puts s in the index; the caller holds r.idx.
func (r *Repo) addIndex(key string, s *series) {
	r.byKey[key] = s
	r.byID[s.id] = s
	ni := r.byName[s.name]
	if ni == nil {
		ni = &nameIndex{postings: map[string]map[string][]*series{}}
		r.byName[s.name] = ni
	}
	ni.all = append(ni.all, s)
	for _, l := range s.labels {
		m := ni.postings[l.Name]
		if m == nil {
			m = map[string][]*series{}
			ni.postings[l.Name] = m
		}
		m[l.Value] = append(m[l.Value], s)
	}
	if s.id >= r.nextID {
		r.nextID = s.id + 1
	}
}

// AppendResult says what Append did with a batch's samples.
type AppendResult struct {
	Stored, Duplicate int
}

// Append stores a batch durably: when it returns nil, a crash of the
// process loses none of its samples. Every series gets node=<b.Node>.
// Samples at or before a series' last stored timestamp are skipped and
// counted as duplicates. An invalid series makes the whole batch an error
// wrapping monitor.ErrInvalid, and nothing is stored. After a failed log
// write the repository refuses appends until it is reopened (memory and
// log could disagree).
func (r *Repo) Append(ctx context.Context, b *monitor.Batch) (AppendResult, error) {
	var res AppendResult
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if b.Node == "" {
		return res, fmt.Errorf("%w: batch has no node", monitor.ErrInvalid)
	}
	if len(b.Node) > monitor.MaxLabelValLen {
		return res, fmt.Errorf("%w: node name is longer than %d bytes", monitor.ErrInvalid, monitor.MaxLabelValLen)
	}
	for name, m := range b.Meta {
		if !monitor.ValidName(name) {
			return res, fmt.Errorf("%w: meta for %q: not a valid metric name", monitor.ErrInvalid, name)
		}
		if m.Type != monitor.Counter && m.Type != monitor.Gauge && m.Type != "" {
			return res, fmt.Errorf("%w: meta for %s: type %q is neither counter nor gauge", monitor.ErrInvalid, name, m.Type)
		}
	}
	r.ingestMu.Lock()
	if r.broken != nil {
		err := r.broken
		r.ingestMu.Unlock()
		return res, fmt.Errorf("append: %w", err)
	}
	// Resolve every point's series first; new ones are validated and only
	// created once the whole batch is known to be valid.
	type newS struct {
		key string
		s   *series
	}
	var created []newS
	var pending map[string]*series
	refs := make([][]*series, len(b.Groups))
	// A node pushes the same series in the same order push after push: the
	// previous push's keys, compared in order, find the series without a
	// probe of byKey for each (a cache miss or two in a large map).
	var pc *pushCache
	var pcKey string
	if len(b.Groups) > 0 && len(b.Groups[0].Points) > 0 {
		p0 := b.Groups[0].Points[0]
		r.keyBuf = seriesKey(r.keyBuf, p0.Name, p0.Labels, b.Node)
		pcKey = string(r.keyBuf)
		pc = r.pushes[pcKey]
	}
	pcHits := 0
	keys, ends := r.pcKeys[:0], r.pcEnds[:0]
	r.idx.RLock()
	for gi, g := range b.Groups {
		refs[gi] = make([]*series, len(g.Points))
		for pi, p := range g.Points {
			r.keyBuf = seriesKey(r.keyBuf, p.Name, p.Labels, b.Node)
			i := len(ends)
			keys = append(keys, r.keyBuf...)
			ends = append(ends, len(keys))
			var s *series
			if pc != nil && i < len(pc.ss) && string(pc.key(i)) == string(r.keyBuf) {
				s = pc.ss[i]
				pcHits++
			} else {
				s = r.byKey[string(r.keyBuf)]
			}
			if s == nil {
				s = pending[string(r.keyBuf)]
			}
			if s == nil {
				ls := withNode(p.Labels, b.Node)
				if err := monitor.CheckSeries(p.Name, p.Labels); err != nil {
					r.idx.RUnlock()
					r.ingestMu.Unlock()
					return res, fmt.Errorf("%w: %w", monitor.ErrInvalid, err)
				}
				if err := monitor.CheckSeries(p.Name, ls); err != nil {
					r.idx.RUnlock()
					r.ingestMu.Unlock()
					return res, fmt.Errorf("%w: %w", monitor.ErrInvalid, err)
				}
				s = newSeries(r.nextID+int64(len(created)), p.Name, ls, len(r.tiers))
				if pending == nil {
					pending = map[string]*series{}
				}
				key := string(r.keyBuf)
				pending[key] = s
				created = append(created, newS{key, s})
			}
			refs[gi][pi] = s
		}
	}
	r.idx.RUnlock()
	r.pcKeys, r.pcEnds = keys, ends

	// The log record: new series, changed meta, accepted samples.
	buf := r.walBuf[:0]
	for _, c := range created {
		buf = encSeries(buf, c.s.id, c.s.name, c.s.labels)
	}
	var metaNew map[string]monitor.Meta
	r.metaMu.RLock()
	for name, m := range b.Meta {
		if old, ok := r.meta[name]; !ok || old != m {
			if metaNew == nil {
				metaNew = map[string]monitor.Meta{}
			}
			metaNew[name] = m
			buf = encMeta(buf, name, m)
		}
	}
	r.metaMu.RUnlock()
	// ss and sp are the apply stage's, after ingestMu is let go: per
	// Append, not reused.
	npts := 0
	for _, g := range b.Groups {
		npts += len(g.Points)
	}
	ss := make([]walSample, 0, npts)
	sp := make([]*series, 0, npts)
	for gi, g := range b.Groups {
		for pi, p := range g.Points {
			s := refs[gi][pi]
			if g.T <= s.ingT {
				res.Duplicate++
				continue
			}
			s.ingT = g.T
			ss = append(ss, walSample{s.id, g.T, p.V})
			sp = append(sp, s)
		}
	}
	if len(ss) > 0 {
		buf = encData(buf, ss)
	}
	res.Stored = len(ss)
	if len(buf) > 0 {
		if _, err := r.w.f.Write(buf); err != nil {
			r.broken = fmt.Errorf("write log: %w", err)
			r.ingestMu.Unlock()
			return AppendResult{}, fmt.Errorf("append: %w", r.broken)
		}
	}
	r.walBuf = buf
	// Now memory: the index, the meta, the samples.
	if len(created) > 0 {
		r.idx.Lock()
		for _, c := range created {
			r.addIndex(c.key, c.s)
		}
		r.idx.Unlock()
	}
	if pcKey != "" && (pc == nil || pcHits != len(ends) || len(pc.ss) != len(ends)) {
		r.cachePush(pcKey, keys, ends, refs)
	}
	if len(metaNew) > 0 {
		r.metaMu.Lock()
		for name, m := range metaNew {
			r.meta[name] = m
			r.metaDB[name] = false
		}
		r.metaMu.Unlock()
	}
	f := r.w.f
	// The apply stage: applyMu is taken before ingestMu goes, so batches
	// reach memory in the order they reached the log.
	r.applyMu.Lock()
	r.ingestMu.Unlock()
	r.applyLocked(ss, sp)
	r.applyMu.Unlock()

	if len(buf) > 0 {
		if err := f.Sync(); err != nil {
			// A rotated (closed) segment was synced by the rotation.
			if !isClosed(err) {
				r.ingestMu.Lock()
				r.broken = fmt.Errorf("sync log: %w", err)
				r.ingestMu.Unlock()
				return AppendResult{}, fmt.Errorf("append: %w", err)
			}
		}
	}
	r.statMu.Lock()
	r.stats.Stored += int64(res.Stored)
	r.stats.Duplicates += int64(res.Duplicate)
	r.statMu.Unlock()
	return res, nil
}

// pushCache is the series of one node's last push (the one whose first
// series' key it is filed under), in the push's order: point i's key is
// keys[ends[i-1]:ends[i]], its series ss[i]. A key names the same series
// for good (byKey only grows), so an entry never goes stale.
type pushCache struct {
	keys []byte
	ends []int
	ss   []*series
}

func (pc *pushCache) key(i int) []byte {
	start := 0
	if i > 0 {
		start = pc.ends[i-1]
	}
	return pc.keys[start:pc.ends[i]]
}

func (pc *pushCache) size() int { return len(pc.keys) + 16*len(pc.ss) }

// maxPushCache bounds the push caches' memory; past it they start over.
const maxPushCache = 64 << 20

// cachePush files a push's keys and series; the caller holds ingestMu and
// every series in refs is in the index.
func (r *Repo) cachePush(pcKey string, keys []byte, ends []int, refs [][]*series) {
	pc := &pushCache{keys: slices.Clone(keys), ends: slices.Clone(ends), ss: make([]*series, 0, len(ends))}
	for _, g := range refs {
		pc.ss = append(pc.ss, g...)
	}
	if old := r.pushes[pcKey]; old != nil {
		r.pushBytes -= old.size()
	}
	if r.pushes == nil || r.pushBytes+pc.size() > maxPushCache {
		r.pushes, r.pushBytes = map[string]*pushCache{}, 0
	}
	r.pushes[pcKey] = pc
	r.pushBytes += pc.size()
}

func isClosed(err error) bool {
	pe, ok := err.(*os.PathError)
	return ok && pe.Err == os.ErrClosed
}

// applyLocked adds accepted samples to their series' chunks (sp[i] is
// ss[i]'s series); the caller holds applyMu.
func (r *Repo) applyLocked(ss []walSample, sp []*series) {
	var cur *series
	for i, x := range ss {
		if cur != sp[i] {
			if cur != nil {
				cur.mu.Unlock()
			}
			cur = sp[i]
			cur.mu.Lock()
			if !cur.inDirty {
				cur.inDirty = true
				r.dirty = append(r.dirty, cur)
			}
		}
		r.addRaw(cur, x.t, x.v)
	}
	if cur != nil {
		cur.mu.Unlock()
	}
}

// addRaw appends a raw sample and feeds the downsampled tiers; s.mu held.
func (r *Repo) addRaw(s *series, t int64, v float64) {
	if t <= s.lastT {
		return
	}
	s.lastT, s.lastV = t, v
	r.addTier(s, 0, t, v)
	if len(r.tiers) > 1 {
		r.feed(s, 1, t, v)
	}
}

// feed adds a value to tier i's current bucket; when t falls in a later
// bucket, the finished one is emitted (stamped at its end) into tier i and
// fed on to tier i+1. NaN is left out of averages.
func (r *Repo) feed(s *series, i int, t int64, v float64) {
	ts := &s.tiers[i]
	step := r.tiers[i].step
	end := ceilDiv(t, step) * step
	if end <= ts.lastT {
		return // a bucket already emitted (history written over it)
	}
	if ts.bucket != end {
		if ts.n > 0 && ts.bucket < end {
			avg := ts.sum / float64(ts.n)
			r.addTier(s, i, ts.bucket, avg)
			if i+1 < len(r.tiers) {
				r.feed(s, i+1, ts.bucket, avg)
			}
		}
		ts.bucket, ts.sum, ts.n = end, 0, 0
	}
	if !math.IsNaN(v) {
		ts.sum += v
		ts.n++
	}
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a > 0) == (b > 0) {
		q++
	}
	return q
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// addTier appends to tier i's head, sealing it first when t leaves its
// window or it is full; s.mu held.
func (r *Repo) addTier(s *series, i int, t int64, v float64) {
	ts := &s.tiers[i]
	if t <= ts.lastT {
		return
	}
	ti := &r.tiers[i]
	win := floorDiv(t, ti.window)
	if ts.stored != nil {
		if win != ts.headWin || ts.storedN >= ti.maxN || len(ts.stored) >= maxBytes {
			r.seal(ts)
		} else if c, err := chunk.FromBytes(ts.stored); err != nil {
			r.log.Error("stored head chunk does not decode; kept as it is, a new one started", "series", monitor.Key(s.name, s.labels), "tier", i, "err", err)
			r.seal(ts)
		} else {
			ts.head, ts.stored = c, nil
		}
	}
	if ts.head != nil && (win != ts.headWin || ts.head.Len() >= ti.maxN || len(ts.head.Bytes()) >= maxBytes) {
		r.seal(ts)
	}
	if ts.head == nil {
		ts.head, ts.headWin, ts.headStart = chunk.NewChunk(), win, t
	}
	if err := ts.head.Append(t, v); err != nil {
		// Cannot happen: t > lastT and the head is not full.
		r.log.Error("chunk append", "series", monitor.Key(s.name, s.labels), "err", err)
		return
	}
	ts.headEnd, ts.lastT = t, t
}

func (r *Repo) seal(ts *tierState) {
	if ts.stored != nil {
		ts.sealed = append(ts.sealed, sealedChunk{
			win: ts.headWin, start: ts.headStart, end: ts.headEnd, n: ts.storedN, data: ts.stored,
		})
		ts.stored = nil
		return
	}
	if ts.head == nil {
		return
	}
	ts.sealed = append(ts.sealed, sealedChunk{
		win: ts.headWin, start: ts.headStart, end: ts.headEnd, n: ts.head.Len(),
		// A copy of exactly its length: the head's buffer has grown by
		// doubling and may be twice as large.
		data: slices.Clone(ts.head.Bytes()),
	})
	ts.head = nil
}

// State kept in series.state: per tier lastT, and for downsampled tiers
// the open bucket (end, sum, count).
func encState(s *series) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(s.tiers)))
	b = binary.AppendVarint(b, s.lastT)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.lastV))
	for i := range s.tiers {
		ts := &s.tiers[i]
		b = binary.AppendVarint(b, ts.lastT)
		b = binary.AppendVarint(b, ts.bucket)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(ts.sum))
		b = binary.AppendVarint(b, ts.n)
	}
	return b
}

func decState(s *series, b []byte) error {
	d := &decoder{b: b}
	n := int(d.uvarint())
	s.lastT = d.varint()
	s.lastV = math.Float64frombits(d.u64())
	for i := 0; i < n && i < len(s.tiers); i++ {
		ts := &s.tiers[i]
		ts.lastT = d.varint()
		ts.bucket = d.varint()
		ts.sum = math.Float64frombits(d.u64())
		ts.n = d.varint()
	}
	return d.err
}

func encLabels(ls monitor.Labels) string {
	b, _ := json.Marshal(ls.Map())
	return string(b)
}

// load reads the series, their state and the meta from SQLite.
func (r *Repo) load(ctx context.Context) error {
	rows, err := r.db.QueryContext(ctx, `SELECT name, type, help FROM meta`)
	if err != nil {
		return fmt.Errorf("load meta: %w", err)
	}
	for rows.Next() {
		var name, typ, help string
		if err := rows.Scan(&name, &typ, &help); err != nil {
			rows.Close()
			return fmt.Errorf("load meta: %w", err)
		}
		r.meta[name] = monitor.Meta{Type: monitor.Type(typ), Help: help}
		r.metaDB[name] = true
	}
	rows.Close()
	rows, err = r.db.QueryContext(ctx, `SELECT id, name, labels, state FROM series`)
	if err != nil {
		return fmt.Errorf("load series: %w", err)
	}
	defer rows.Close()
	kb := []byte(nil)
	for rows.Next() {
		var id int64
		var name, lj string
		var st []byte
		if err := rows.Scan(&id, &name, &lj, &st); err != nil {
			return fmt.Errorf("load series: %w", err)
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(lj), &m); err != nil {
			return fmt.Errorf("load series %d: labels: %w", id, err)
		}
		ls := monitor.FromMap(m)
		s := newSeries(id, name, ls, len(r.tiers))
		s.persisted = true
		if st != nil {
			if err := decState(s, st); err != nil {
				return fmt.Errorf("load series %d: state: %w", id, err)
			}
		}
		s.ingT = s.lastT
		kb = seriesKeyNoNode(kb, name, ls)
		r.addIndex(string(kb), s)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load series: %w", err)
	}
	rows.Close()
	return nil
}

// loadHeadsTable reads the heads table of a file of an older version (the
// open chunks as its last checkpoint stored them, with the series' state
// in the series table) into the series' open chunks, undecoded
// (tierState.stored).
func (r *Repo) loadHeadsTable(ctx context.Context) error {
	rows, err := r.db.QueryContext(ctx, `SELECT tier, series_id, win, start_ms, end_ms, n, data FROM heads`)
	if err != nil {
		return fmt.Errorf("load heads: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var tier, n int
		var id, win, start, end int64
		var data []byte
		if err := rows.Scan(&tier, &id, &win, &start, &end, &n, &data); err != nil {
			return fmt.Errorf("load heads: %w", err)
		}
		s := r.byID[id]
		if s == nil || tier < 0 || tier >= len(s.tiers) || len(data) == 0 {
			continue // a series or tier the repository no longer has
		}
		ts := &s.tiers[tier]
		ts.stored, ts.storedN, ts.headWin, ts.headStart, ts.headEnd = data, n, win, start, end
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load heads: %w", err)
	}
	return nil
}

// replay re-applies the log's segments, then starts a new segment.
func (r *Repo) replay() error {
	dir := r.o.Path + ".wal.d"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	seqs, err := segments(dir)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	kb := []byte(nil)
	var replayed int
	v := walVisitor{
		series: func(id int64, name string, ls monitor.Labels) {
			if r.byID[id] != nil {
				return
			}
			s := newSeries(id, name, ls, len(r.tiers))
			kb = seriesKeyNoNode(kb, name, ls)
			r.addIndex(string(kb), s)
		},
		meta: func(name string, m monitor.Meta) {
			r.meta[name] = m
			r.metaDB[name] = false
		},
		data: func(ss []walSample) {
			for _, x := range ss {
				s := r.byID[x.id]
				if s == nil || x.t <= s.ingT {
					continue
				}
				s.ingT = x.t
				if !s.inDirty {
					s.inDirty = true
					r.dirty = append(r.dirty, s)
				}
				r.addRaw(s, x.t, x.v)
				replayed++
			}
		},
	}
	for _, seq := range seqs {
		torn, err := replaySegment(segName(dir, seq), v)
		if err != nil {
			return err
		}
		if torn {
			r.log.Warn("log segment ends in a torn record (a crash mid-write); the rest is ignored", "segment", seq)
		}
	}
	if replayed > 0 {
		r.log.Info("replayed the log", "samples", replayed, "segments", len(seqs))
	}
	next := uint64(1)
	if len(seqs) > 0 {
		next = seqs[len(seqs)-1] + 1
	}
	r.w = &wal{dir: dir}
	return r.w.openSegment(next)
}
