package repo

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/chunk"
)

// cpBatch is how many series one checkpoint transaction writes: series are
// independent, so a checkpoint need not be one transaction, and smaller
// ones keep the copies of their chunks small.
const cpBatch = 5000

type cpChunk struct {
	tier int
	sc   sealedChunk
}

type cpSeries struct {
	s      *series
	insert bool // the series row is new
	chunks []cpChunk
	sealed []int // per tier, how many sealed chunks were taken
}

// checkpoint writes every series changed since the last one to SQLite,
// then deletes the log segments that it covers, then applies retention and
// the budget.
func (r *Repo) checkpoint(ctx context.Context) error {
	r.cpMu.Lock()
	defer r.cpMu.Unlock()
	start := time.Now()

	// Both locks: every batch in the segments before the new one is
	// applied to memory.
	r.ingestMu.Lock()
	r.applyMu.Lock()
	if r.w == nil || r.w.f == nil {
		r.applyMu.Unlock()
		r.ingestMu.Unlock()
		return nil
	}
	newSeg, err := r.w.rotate()
	if err != nil {
		r.broken = err
		r.applyMu.Unlock()
		r.ingestMu.Unlock()
		return fmt.Errorf("checkpoint: %w", err)
	}
	dirty := r.dirty
	r.dirty = nil
	for _, s := range dirty {
		s.inDirty = false
	}
	r.applyMu.Unlock()
	r.ingestMu.Unlock()
	// Series in id order: each batch's chunks go in key order, and the
	// index chunks_key grows more at its right edge.
	slices.SortFunc(dirty, func(a, b *series) int { return cmp64(a.id, b.id) })

	// Everything in segments before newSeg is in memory now. (1) The sealed
	// chunks go to SQLite, after the generation is raised; (2) the heads
	// file (every series' open chunks and state) is written; (3) the log
	// segments before newSeg go. See heads.go for a crash between 1 and 2.
	var failed []*series
	var firstErr error
	chunks := 0
	if len(dirty) > 0 {
		r.needHeads = true
		if err := r.setting(ctx, "heads_gen", fmt.Sprint(r.gen+1)); err != nil {
			failed, firstErr = dirty, err
		} else {
			r.gen++
		}
	}
	for i := 0; i < len(dirty) && firstErr == nil; i += cpBatch {
		part := dirty[i:min(i+cpBatch, len(dirty))]
		n, err := r.writeSeries(ctx, part)
		chunks += n
		if err != nil {
			failed = append(failed, dirty[i:]...)
			firstErr = err
		}
	}
	if err := r.writeMeta(ctx); err != nil && firstErr == nil {
		firstErr = err
		failed = append(failed, nil) // keep the segments
	}
	if firstErr != nil {
		r.applyMu.Lock()
		for _, s := range failed {
			if s != nil && !s.inDirty {
				s.inDirty = true
				r.dirty = append(r.dirty, s)
			}
		}
		r.applyMu.Unlock()
		return fmt.Errorf("checkpoint: %w", firstErr)
	}
	if r.headsRetention() {
		r.needHeads = true
	}
	if r.needHeads {
		if testHookBeforeHeads != nil {
			testHookBeforeHeads(chunks)
		}
		size, err := r.writeHeads(r.gen)
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		r.headsSize.Store(size)
		r.needHeads = false
		if !r.headsMarked {
			if err := r.setting(ctx, "heads_file", "1"); err != nil {
				return fmt.Errorf("checkpoint: %w", err)
			}
			r.headsMarked = true
		}
		if r.legacyHeads {
			r.dbw.Lock()
			_, err := r.db.ExecContext(ctx, `DROP TABLE IF EXISTS heads`)
			r.dbw.Unlock()
			if err != nil {
				return fmt.Errorf("checkpoint: drop the old heads table: %w", err)
			}
			r.legacyHeads = false
			r.log.Info("moved the open chunks from the old heads table to the heads file", "file", headsPath(r.o.Path))
		}
	}
	if err := r.w.removeBefore(newSeg); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := r.enforce(ctx); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	r.statMu.Lock()
	r.stats.Checkpoints++
	r.stats.LastCheckpoint = time.Since(start)
	r.statMu.Unlock()
	if len(dirty) > 0 {
		r.log.Debug("checkpoint", "series", len(dirty), "took", time.Since(start))
	}
	return nil
}

// snapshot copies what a checkpoint writes of s to SQLite: its sealed
// chunks (the open ones go to the heads file).
func (r *Repo) snapshot(s *series) cpSeries {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := cpSeries{s: s, insert: !s.persisted, sealed: make([]int, len(s.tiers))}
	for i := range s.tiers {
		ts := &s.tiers[i]
		for _, sc := range ts.sealed {
			c.chunks = append(c.chunks, cpChunk{tier: i, sc: sc}) // sealed data is never changed again
		}
		c.sealed[i] = len(ts.sealed)
	}
	return c
}

// testHookBeforeHeads, if set, runs in a checkpoint between the commit of
// its sealed chunks (how many) and the heads file (a crash test).
var testHookBeforeHeads func(chunks int)

// setting writes one row of settings.
func (r *Repo) setting(ctx context.Context, k, v string) error {
	r.dbw.Lock()
	defer r.dbw.Unlock()
	_, err := r.db.ExecContext(ctx, `INSERT INTO settings(k, v) VALUES(?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v`, k, v)
	if err != nil {
		return fmt.Errorf("settings %s: %w", k, err)
	}
	return nil
}

// headsRetention drops the open chunks of series that stopped in a window
// now past their tier's retention; it reports whether it dropped any.
func (r *Repo) headsRetention() bool {
	now := r.o.Now().UnixMilli()
	lastWin := make([]int64, len(r.tiers))
	for i, t := range r.tiers {
		lastWin[i] = floorDiv(now-t.Retention.Milliseconds(), t.window) - 1
	}
	var chunks, samples int64
	r.idx.RLock()
	for _, s := range r.byID {
		s.mu.Lock()
		for i := range s.tiers {
			ts := &s.tiers[i]
			if (ts.head != nil || ts.stored != nil) && ts.headWin <= lastWin[i] {
				chunks++
				if ts.head != nil {
					samples += int64(ts.head.Len())
				} else {
					samples += int64(ts.storedN)
				}
				ts.head, ts.stored = nil, nil
			}
		}
		s.mu.Unlock()
	}
	r.idx.RUnlock()
	if chunks > 0 {
		r.statMu.Lock()
		r.stats.RetentionChunks += chunks
		r.stats.RetentionSamples += samples
		r.statMu.Unlock()
	}
	return chunks > 0
}

// writeSeries commits the rows of new series and the sealed chunks of part
// to SQLite; it returns how many chunks.
func (r *Repo) writeSeries(ctx context.Context, part []*series) (int, error) {
	snaps := make([]cpSeries, len(part))
	for i, s := range part {
		snaps[i] = r.snapshot(s)
	}
	r.dbw.Lock()
	defer r.dbw.Unlock()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	// The series' state is in the heads file: a new row has none.
	insS, err := tx.PrepareContext(ctx, `INSERT INTO series(id, name, labels, state) VALUES(?, ?, ?, NULL)
		ON CONFLICT(id) DO NOTHING`)
	if err != nil {
		return 0, fmt.Errorf("prepare: %w", err)
	}
	defer insS.Close()
	// A chunk is inserted once; the conflict clause only matters if a
	// chunk is written again (after a failure between commit and log
	// cleanup), and then the copies are the same chunk.
	insC, err := tx.PrepareContext(ctx, `INSERT INTO chunks(tier, win, series_id, start_ms, end_ms, n, data) VALUES(?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(tier, win, series_id, start_ms) DO UPDATE SET end_ms = excluded.end_ms, n = excluded.n, data = excluded.data`)
	if err != nil {
		return 0, fmt.Errorf("prepare: %w", err)
	}
	defer insC.Close()
	type ref struct {
		s *cpSeries
		c *cpChunk
	}
	var all []ref
	for i := range snaps {
		c := &snaps[i]
		if c.insert {
			if _, err := insS.ExecContext(ctx, c.s.id, c.s.name, encLabels(c.s.labels)); err != nil {
				return 0, fmt.Errorf("write series: %w", err)
			}
		}
		for j := range c.chunks {
			all = append(all, ref{c, &c.chunks[j]})
		}
	}
	// Key order: chunks_key then grows at its right edge.
	slices.SortFunc(all, func(a, b ref) int {
		if a.c.tier != b.c.tier {
			return a.c.tier - b.c.tier
		}
		if a.c.sc.win != b.c.sc.win {
			return cmp64(a.c.sc.win, b.c.sc.win)
		}
		if a.s.s.id != b.s.s.id {
			return cmp64(a.s.s.id, b.s.s.id)
		}
		return cmp64(a.c.sc.start, b.c.sc.start)
	})
	for _, x := range all {
		sc := x.c.sc
		if _, err := insC.ExecContext(ctx, x.c.tier, sc.win, x.s.s.id, sc.start, sc.end, sc.n, sc.data); err != nil {
			return 0, fmt.Errorf("write chunk: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	// Only now may the sealed chunks leave memory: a query reads memory
	// first and SQLite second, so a chunk is always in one of them.
	for i := range snaps {
		c := &snaps[i]
		s := c.s
		s.mu.Lock()
		s.persisted = true
		for t, n := range c.sealed {
			s.tiers[t].sealed = s.tiers[t].sealed[n:]
			if len(s.tiers[t].sealed) == 0 {
				s.tiers[t].sealed = nil
			}
		}
		s.mu.Unlock()
	}
	return len(all), nil
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (r *Repo) writeMeta(ctx context.Context) error {
	r.metaMu.RLock()
	var names []string
	for n, ok := range r.metaDB {
		if !ok {
			names = append(names, n)
		}
	}
	ms := make([]monitor.Meta, len(names))
	for i, n := range names {
		ms[i] = r.meta[n]
	}
	r.metaMu.RUnlock()
	if len(names) == 0 {
		return nil
	}
	r.dbw.Lock()
	defer r.dbw.Unlock()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write meta: %w", err)
	}
	defer tx.Rollback()
	for i, n := range names {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta(name, type, help) VALUES(?, ?, ?)
			ON CONFLICT(name) DO UPDATE SET type = excluded.type, help = excluded.help`, n, string(ms[i].Type), ms[i].Help); err != nil {
			return fmt.Errorf("write meta: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write meta: %w", err)
	}
	r.metaMu.Lock()
	for i, n := range names {
		if r.meta[n] == ms[i] {
			r.metaDB[n] = true
		}
	}
	r.metaMu.Unlock()
	return nil
}

// enforce applies retention (whole windows older than each tier's
// retention) and then the budget: over it, the oldest chunks by end time,
// any tier, go until the repository is under 90% of it.
func (r *Repo) enforce(ctx context.Context) error {
	now := r.o.Now().UnixMilli()
	r.dbw.Lock()
	defer r.dbw.Unlock()
	for i, t := range r.tiers {
		cutoff := now - t.Retention.Milliseconds()
		// A window is dropped once all of it is past the retention.
		lastWin := floorDiv(cutoff, t.window) - 1
		chunks, samples, err := r.deleteChunks(ctx, `DELETE FROM chunks WHERE tier = ? AND win <= ? RETURNING n`, i, lastWin)
		if err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		if chunks > 0 {
			r.statMu.Lock()
			r.stats.RetentionChunks += chunks
			r.stats.RetentionSamples += samples
			r.statMu.Unlock()
		}
	}
	if r.o.Budget <= 0 {
		return nil
	}
	target := r.o.Budget * 9 / 10
	for range 10000 {
		// Fold SQLite's WAL into the file first, so that deletions show
		// (a reader in the way only delays this to the next checkpoint).
		_, _ = r.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
		used := r.diskBytes(ctx)
		if used <= r.o.Budget && !r.budgetActive {
			return nil
		}
		if used <= target {
			r.budgetActive = false
			return nil
		}
		r.budgetActive = true
		// The oldest window end across tiers.
		bestTier, bestWin, bestEnd := -1, int64(0), int64(0)
		for i, t := range r.tiers {
			var w sql.NullInt64
			if err := r.db.QueryRowContext(ctx, `SELECT min(win) FROM chunks WHERE tier = ?`, i).Scan(&w); err != nil {
				return fmt.Errorf("budget: %w", err)
			}
			if !w.Valid {
				continue
			}
			end := (w.Int64 + 1) * t.window
			if bestTier < 0 || end < bestEnd {
				bestTier, bestWin, bestEnd = i, w.Int64, end
			}
		}
		if bestTier < 0 {
			r.log.Warn("over the disk budget with no chunks left to drop", "used", used, "budget", r.o.Budget)
			r.budgetActive = false
			return nil
		}
		// Within the window, chunks by end time until enough is freed.
		need := used - target
		rows, err := r.db.QueryContext(ctx, `SELECT end_ms, length(data) FROM chunks WHERE tier = ? AND win = ? ORDER BY end_ms`, bestTier, bestWin)
		if err != nil {
			return fmt.Errorf("budget: %w", err)
		}
		var upto, freed int64
		for rows.Next() {
			var e, l int64
			if err := rows.Scan(&e, &l); err != nil {
				rows.Close()
				return fmt.Errorf("budget: %w", err)
			}
			upto = e
			freed += l + 40
			if freed >= need {
				break
			}
		}
		rows.Close()
		chunks, samples, err := r.deleteChunks(ctx, `DELETE FROM chunks WHERE tier = ? AND win = ? AND end_ms <= ? RETURNING n`, bestTier, bestWin, upto)
		if err != nil {
			return fmt.Errorf("budget: %w", err)
		}
		r.statMu.Lock()
		r.stats.BudgetChunks += chunks
		r.stats.BudgetSamples += samples
		r.statMu.Unlock()
		r.log.Info("over the disk budget: dropped the oldest chunks", "tier", bestTier, "chunks", chunks, "samples", samples, "used", used, "budget", r.o.Budget)
		if chunks == 0 {
			return nil
		}
	}
	return nil
}

// deleteChunks runs a DELETE ... RETURNING n; the caller holds dbw.
func (r *Repo) deleteChunks(ctx context.Context, q string, args ...any) (chunks, samples int64, err error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, 0, err
	}
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return 0, 0, err
		}
		chunks++
		samples += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	return chunks, samples, tx.Commit()
}

// TierStats describes one tier's chunks in SQLite.
type TierStats struct {
	Step      time.Duration
	Chunks    int64
	Samples   int64
	DataBytes int64 // bytes of chunk data (encoded samples), without SQLite's own overhead
}

// Stats describes the repository.
type Stats struct {
	Series           int
	Stored           int64 // samples accepted by Append since Open
	Duplicates       int64 // samples Append skipped as already stored, since Open
	DiskBytes        int64 // SQLite pages in use + its WAL + the heads file + the repository's log
	HeadsBytes       int64 // the heads file as the last checkpoint wrote it
	Tiers            []TierStats
	BudgetChunks     int64 // chunks dropped to stay within the budget, since Open
	BudgetSamples    int64
	RetentionChunks  int64 // chunks dropped by retention, since Open
	RetentionSamples int64
	Checkpoints      int64
	LastCheckpoint   time.Duration
}

// Stats reports the repository's figures. The per-tier figures scan the
// chunks table (what checkpoints stored) and add the open chunks in
// memory (not the chunks sealed since the last checkpoint).
func (r *Repo) Stats() Stats {
	ctx := context.Background()
	r.statMu.Lock()
	st := r.stats
	r.statMu.Unlock()
	r.idx.RLock()
	st.Series = len(r.byID)
	r.idx.RUnlock()
	st.DiskBytes = r.diskBytes(ctx)
	st.Tiers = make([]TierStats, len(r.tiers))
	for i, t := range r.tiers {
		st.Tiers[i].Step = t.Step
	}
	rows, err := r.db.QueryContext(ctx, `SELECT tier, count(*), sum(n), sum(length(data)) FROM chunks GROUP BY tier`)
	if err == nil {
		for rows.Next() {
			var tier int
			var c, n, b int64
			if rows.Scan(&tier, &c, &n, &b) == nil && tier >= 0 && tier < len(st.Tiers) {
				st.Tiers[tier].Chunks, st.Tiers[tier].Samples, st.Tiers[tier].DataBytes = c, n, b
			}
		}
		rows.Close()
	}
	// The open chunks, from memory.
	r.idx.RLock()
	for _, s := range r.byID {
		s.mu.Lock()
		for i := range s.tiers {
			ts, x := &s.tiers[i], &st.Tiers[i]
			switch {
			case ts.head != nil:
				x.Chunks, x.Samples, x.DataBytes = x.Chunks+1, x.Samples+int64(ts.head.Len()), x.DataBytes+int64(len(ts.head.Bytes()))
			case ts.stored != nil:
				x.Chunks, x.Samples, x.DataBytes = x.Chunks+1, x.Samples+int64(ts.storedN), x.DataBytes+int64(len(ts.stored))
			}
		}
		s.mu.Unlock()
	}
	r.idx.RUnlock()
	st.HeadsBytes = r.headsSize.Load()
	return st
}

// WriteHistory writes points straight into a tier, in SQLite, for tests
// and for the benchmark's synthetic history. The points must be in
// increasing time order and after anything the tier holds for the series;
// they are not downsampled further. The series is created if needed (its
// labels are taken as given: no node label is added).
func (r *Repo) WriteHistory(ctx context.Context, tier int, name string, ls monitor.Labels, pts []PointTV) error {
	if tier < 0 || tier >= len(r.tiers) {
		return fmt.Errorf("%w: tier %d: the repository has tiers 0 to %d", monitor.ErrInvalid, tier, len(r.tiers)-1)
	}
	if err := monitor.CheckSeries(name, ls); err != nil {
		return fmt.Errorf("%w: %w", monitor.ErrInvalid, err)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].T <= pts[i-1].T {
			return fmt.Errorf("%w: history points must be in increasing time order", monitor.ErrInvalid)
		}
	}
	if len(pts) == 0 {
		return nil
	}
	r.ingestMu.Lock()
	if r.broken != nil {
		err := r.broken
		r.ingestMu.Unlock()
		return fmt.Errorf("write history: %w", err)
	}
	// Every logged batch is applied before the history goes in.
	r.applyMu.Lock()
	r.keyBuf = seriesKeyNoNode(r.keyBuf, name, ls)
	r.idx.Lock()
	s := r.byKey[string(r.keyBuf)]
	if s == nil {
		s = newSeries(r.nextID, name, ls, len(r.tiers))
		r.addIndex(string(r.keyBuf), s)
	}
	r.idx.Unlock()
	s.mu.Lock()
	ts := &s.tiers[tier]
	if pts[0].T <= ts.lastT {
		s.mu.Unlock()
		r.applyMu.Unlock()
		r.ingestMu.Unlock()
		return fmt.Errorf("%w: history for %s starts at %d, not after the tier's last point %d", monitor.ErrInvalid, monitor.Key(name, ls), pts[0].T, ts.lastT)
	}
	// The head stays separate from the history: chunks never overlap.
	r.seal(ts)
	ts.lastT = pts[len(pts)-1].T
	if tier == 0 {
		s.lastT, s.lastV = ts.lastT, pts[len(pts)-1].V
		s.ingT = ts.lastT
	}
	if !s.inDirty {
		s.inDirty = true
		r.dirty = append(r.dirty, s)
	}
	state := encState(s)
	id, persisted := s.id, s.persisted
	s.mu.Unlock()
	r.applyMu.Unlock()
	r.ingestMu.Unlock()

	ti := r.tiers[tier]
	var cs []sealedChunk
	var c *chunk.Chunk
	var cur sealedChunk
	for _, p := range pts {
		win := floorDiv(p.T, ti.window)
		if c != nil && (win != cur.win || c.Len() >= ti.maxN || len(c.Bytes()) >= maxBytes) {
			cur.n, cur.data = c.Len(), c.Bytes()
			cs = append(cs, cur)
			c = nil
		}
		if c == nil {
			c, cur = chunk.NewChunk(), sealedChunk{win: win, start: p.T}
		}
		if err := c.Append(p.T, p.V); err != nil {
			return fmt.Errorf("write history: %w", err)
		}
		cur.end = p.T
	}
	cur.n, cur.data = c.Len(), c.Bytes()
	cs = append(cs, cur)

	r.dbw.Lock()
	defer r.dbw.Unlock()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	defer tx.Rollback()
	if !persisted {
		if _, err := tx.ExecContext(ctx, `INSERT INTO series(id, name, labels, state) VALUES(?, ?, ?, ?)
			ON CONFLICT(id) DO UPDATE SET state = excluded.state`, id, name, encLabels(ls), state); err != nil {
			return fmt.Errorf("write history: %w", err)
		}
	}
	st, err := tx.PrepareContext(ctx, `INSERT INTO chunks(tier, win, series_id, start_ms, end_ms, n, data) VALUES(?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	defer st.Close()
	for _, sc := range cs {
		if _, err := st.ExecContext(ctx, tier, sc.win, id, sc.start, sc.end, sc.n, sc.data); err != nil {
			return fmt.Errorf("write history: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	s.mu.Lock()
	s.persisted = true
	s.mu.Unlock()
	return nil
}

// seriesKeyNoNode is the key of a stored series, its labels as they are:
// for labels with a node label it equals seriesKey.
func seriesKeyNoNode(b []byte, name string, ls monitor.Labels) []byte {
	b = appendString(b[:0], name)
	for _, l := range ls {
		b = appendString(b, l.Name)
		b = appendString(b, l.Value)
	}
	return b
}

var _ = os.Stat
