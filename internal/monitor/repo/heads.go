package repo

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// The heads file (PATH.heads) holds what a checkpoint does not put in
// SQLite: every series' open chunk per tier, the chunks sealed since the
// checkpoint's commit (rare: sealed while it ran), and the series' state
// (last timestamps, the buckets being averaged). A checkpoint rewrites it
// whole: a temporary file, fsync, rename, fsync of the directory. It is
// written sequentially and fully packed, about the chunks' bytes plus some
// tens of bytes per series, where a SQLite table of rows that grow in
// place between checkpoints kept its pages less than half full.
//
// Checkpoint order: (1) the sealed chunks are committed to SQLite, after
// settings.heads_gen is raised to the checkpoint's generation; (2) the
// heads file, stamped with that generation, is renamed into place; (3) the
// log segments it covers are deleted. After a crash between (1) and (2)
// the heads file is the previous one and the log still holds everything
// since it, but SQLite may already hold chunks made of those heads: Open
// sees the generations differ and trims (trimHeads) every tier of every
// series to after the last chunk SQLite has for it before it replays the
// log, so that no sample is stored twice.
//
// Format: "LPHEADS1", uvarint generation, uvarint tiers, per tier uvarint
// window (ms); then per series, in id order: uvarint id delta (> 0),
// varint lastT delta (from the previous series' lastT), lastV (8 bytes LE),
// and per tier: uvarint flags (bit 0 the open chunk follows, bit 1 a
// bucket, the rest the number of sealed chunks before the open one),
// varint tier lastT - series lastT, [varint bucket - tier lastT, uvarint
// count, sum (8 bytes LE) if count > 0], then the chunks, each varint win,
// varint start - win*window, uvarint end - start, uvarint n, uvarint
// length, data. A uvarint 0 ends the series; a crc32c (LE) of all that
// precedes it ends the file. Deltas wrap (math.MinInt64 is "none").

const headsMagic = "LPHEADS1"

func headsPath(db string) string { return db + ".heads" }

// headsTierStat counts one tier's chunks in the heads file.
type headsTierStat struct {
	chunks, samples, data int64
}

// snapChunk is one chunk as the heads file holds it.
type snapChunk struct {
	sealedChunk
	head bool
}

type snapTier struct {
	lastT     int64
	bucket, n int64
	sum       float64
	chunks    []snapChunk // sealed ones first, then at most one head
	hasBucket bool
}

type snapSeries struct {
	id    int64
	lastT int64
	lastV float64
	tiers []snapTier
}

// headsWriter streams a heads file.
type headsWriter struct {
	w      *bufio.Writer
	crc    hash.Hash32
	buf    []byte
	prevID int64
	prevT  int64
	tiers  []tierInfo
	stat   []headsTierStat
}

func newHeadsWriter(w io.Writer, gen int64, tiers []tierInfo) (*headsWriter, error) {
	crc := crc32.New(crcTable)
	hw := &headsWriter{w: bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<20), crc: crc, tiers: tiers,
		stat: make([]headsTierStat, len(tiers))}
	b := []byte(headsMagic)
	b = binary.AppendUvarint(b, uint64(gen))
	b = binary.AppendUvarint(b, uint64(len(tiers)))
	for _, t := range tiers {
		b = binary.AppendUvarint(b, uint64(t.window))
	}
	_, err := hw.w.Write(b)
	return hw, err
}

// series writes s's state and chunks; s.mu held. A series with no sample
// in any tier is left out.
func (hw *headsWriter) series(s *series) error {
	if s.lastT == none && !slices.ContainsFunc(s.tiers, func(ts tierState) bool {
		return ts.lastT != none || ts.head != nil || ts.stored != nil || len(ts.sealed) > 0
	}) {
		return nil
	}
	b := hw.buf[:0]
	b = binary.AppendUvarint(b, uint64(s.id-hw.prevID))
	b = binary.AppendVarint(b, s.lastT-hw.prevT)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.lastV))
	hw.prevID, hw.prevT = s.id, s.lastT
	for i := range s.tiers {
		ts := &s.tiers[i]
		flags := uint64(len(ts.sealed)) << 2
		head := ts.head != nil || ts.stored != nil
		if head {
			flags |= 1
		}
		if ts.bucket != 0 || ts.n != 0 {
			flags |= 2
		}
		b = binary.AppendUvarint(b, flags)
		b = binary.AppendVarint(b, ts.lastT-s.lastT)
		if flags&2 != 0 {
			b = binary.AppendVarint(b, ts.bucket-ts.lastT)
			b = binary.AppendUvarint(b, uint64(ts.n))
			if ts.n > 0 {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(ts.sum))
			}
		}
		win := hw.tiers[i].window
		put := func(c sealedChunk) {
			b = binary.AppendVarint(b, c.win)
			b = binary.AppendVarint(b, c.start-c.win*win)
			b = binary.AppendUvarint(b, uint64(c.end-c.start))
			b = binary.AppendUvarint(b, uint64(c.n))
			b = binary.AppendUvarint(b, uint64(len(c.data)))
			b = append(b, c.data...)
			st := &hw.stat[i]
			st.chunks++
			st.samples += int64(c.n)
			st.data += int64(len(c.data))
		}
		for _, c := range ts.sealed {
			put(c)
		}
		switch {
		case ts.head != nil:
			put(sealedChunk{win: ts.headWin, start: ts.headStart, end: ts.headEnd, n: ts.head.Len(), data: ts.head.Bytes()})
		case ts.stored != nil:
			put(sealedChunk{win: ts.headWin, start: ts.headStart, end: ts.headEnd, n: ts.storedN, data: ts.stored})
		}
	}
	hw.buf = b
	_, err := hw.w.Write(b)
	return err
}

// finish ends the series, flushes, and appends the crc of all that
// precedes it to f (past the hash).
func (hw *headsWriter) finish(f io.Writer) error {
	if err := hw.w.WriteByte(0); err != nil {
		return err
	}
	if err := hw.w.Flush(); err != nil {
		return err
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], hw.crc.Sum32())
	_, err := f.Write(sum[:])
	return err
}

// writeHeads writes the heads file of every series (in id order) with
// generation gen: tmp, fsync, rename, fsync of the directory. It returns
// the file's size.
func (r *Repo) writeHeads(gen int64) (size int64, err error) {
	path := headsPath(r.o.Path)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("write heads: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	hw, err := newHeadsWriter(f, gen, r.tiers)
	if err != nil {
		return 0, fmt.Errorf("write heads: %w", err)
	}
	r.idx.RLock()
	all := make([]*series, 0, len(r.byID))
	for _, s := range r.byID {
		all = append(all, s)
	}
	r.idx.RUnlock()
	slices.SortFunc(all, func(a, b *series) int { return cmp64(a.id, b.id) })
	for _, s := range all {
		s.mu.Lock()
		// A series whose row is not in SQLite yet was created after the
		// log rotation: the log kept holds all of it.
		if !s.persisted {
			s.mu.Unlock()
			continue
		}
		err = hw.series(s)
		s.mu.Unlock()
		if err != nil {
			return 0, fmt.Errorf("write heads: %w", err)
		}
	}
	if err = hw.finish(f); err != nil {
		return 0, fmt.Errorf("write heads: %w", err)
	}
	if err = f.Sync(); err != nil {
		return 0, fmt.Errorf("write heads: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("write heads: %w", err)
	}
	if err = f.Close(); err != nil {
		return 0, fmt.Errorf("write heads: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("write heads: %w", err)
	}
	if d, e := os.Open(filepath.Dir(path)); e == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return 0, fmt.Errorf("write heads: sync directory: %w", err)
		}
	}
	return fi.Size(), nil
}

var errHeadsCorrupt = errors.New("heads file is corrupt")

// readHeads parses a heads file, checking its tiers against tiers unless
// nil; fn (if not nil) gets every series, reused for the next: its chunks'
// data are copies, not slices of b.
func readHeads(b []byte, tiers []tierInfo, fn func(*snapSeries)) (gen int64, stat []headsTierStat, err error) {
	if len(b) < len(headsMagic)+4 || string(b[:len(headsMagic)]) != headsMagic {
		return 0, nil, fmt.Errorf("%w: no %s header", errHeadsCorrupt, headsMagic)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return 0, nil, fmt.Errorf("%w: checksum mismatch", errHeadsCorrupt)
	}
	d := &decoder{b: body[len(headsMagic):]}
	gen = int64(d.uvarint())
	nt := d.uvarint()
	if d.err != nil || nt == 0 || nt > 64 {
		return 0, nil, fmt.Errorf("%w: bad header", errHeadsCorrupt)
	}
	if tiers != nil && nt != uint64(len(tiers)) {
		return 0, nil, fmt.Errorf("%w: %d tiers, the repository has %d", errHeadsCorrupt, nt, len(tiers))
	}
	windows := make([]int64, nt)
	for i := range windows {
		windows[i] = int64(d.uvarint())
		if tiers != nil && d.err == nil && windows[i] != tiers[i].window {
			return 0, nil, fmt.Errorf("%w: tier %d has windows of %d ms, the repository %d", errHeadsCorrupt, i, windows[i], tiers[i].window)
		}
	}
	stat = make([]headsTierStat, nt)
	var id, prevT int64
	ss := &snapSeries{tiers: make([]snapTier, nt)}
	for d.err == nil {
		delta := d.uvarint()
		if delta == 0 {
			break
		}
		id += int64(delta)
		ss.id = id
		ss.lastT = prevT + d.varint()
		prevT = ss.lastT
		ss.lastV = math.Float64frombits(d.u64())
		for i := range ss.tiers {
			st := &ss.tiers[i]
			*st = snapTier{chunks: st.chunks[:0]}
			flags := d.uvarint()
			st.lastT = ss.lastT + d.varint()
			if flags&2 != 0 {
				st.hasBucket = true
				st.bucket = st.lastT + d.varint()
				st.n = int64(d.uvarint())
				if st.n > 0 {
					st.sum = math.Float64frombits(d.u64())
				}
			}
			nc := flags>>2 + flags&1
			if nc > uint64(len(d.b)) {
				d.err = errCorruptRecord
				break
			}
			for j := uint64(0); j < nc && d.err == nil; j++ {
				var c snapChunk
				c.head = flags&1 != 0 && j == nc-1
				c.win = d.varint()
				c.start = c.win*windows[i] + d.varint()
				c.end = c.start + int64(d.uvarint())
				c.n = int(d.uvarint())
				l := d.uvarint()
				if d.err != nil || l > uint64(len(d.b)) {
					d.err = errCorruptRecord
					break
				}
				c.data = slices.Clone(d.b[:l])
				d.b = d.b[l:]
				st.chunks = append(st.chunks, c)
				stat[i].chunks++
				stat[i].samples += int64(c.n)
				stat[i].data += int64(l)
			}
		}
		if d.err == nil && fn != nil {
			fn(ss)
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return 0, nil, fmt.Errorf("%w: bad record near series %d", errHeadsCorrupt, id)
	}
	return gen, stat, nil
}

// HeadsTier is one tier's open chunks in a heads file.
type HeadsTier struct {
	Chunks, Samples int64
	DataBytes       int64 // chunk data, without the file's own bytes
}

// HeadsFile describes the heads file of a repository (its open chunks and
// series state; see the package documentation).
type HeadsFile struct {
	Path  string
	Bytes int64 // the file's size
	Tiers []HeadsTier
}

// ReadHeadsFile reads and checks the heads file of the repository whose
// SQLite file is dbPath (for the benchmark: best done on a closed
// repository).
func ReadHeadsFile(dbPath string) (HeadsFile, error) {
	hf := HeadsFile{Path: headsPath(dbPath)}
	b, err := os.ReadFile(hf.Path)
	if err != nil {
		return hf, err
	}
	hf.Bytes = int64(len(b))
	_, stat, err := readHeads(b, nil, nil)
	if err != nil {
		return hf, fmt.Errorf("%s: %w", hf.Path, err)
	}
	for _, t := range stat {
		hf.Tiers = append(hf.Tiers, HeadsTier{t.chunks, t.samples, t.data})
	}
	return hf, nil
}

// loadHeadsFile makes the heads file's chunks and state the series' own:
// the open chunks undecoded (tierState.stored), the sealed ones to be
// committed by the next checkpoint. It returns the file's generation, or
// -1 if there is no file.
func (r *Repo) loadHeadsFile() (int64, error) {
	b, err := os.ReadFile(headsPath(r.o.Path))
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("load heads: %w", err)
	}
	r.headsSize.Store(int64(len(b)))
	gen, _, err := readHeads(b, r.tiers, func(ss *snapSeries) {
		s := r.byID[ss.id]
		if s == nil {
			return // cannot be: the file holds series whose row was committed
		}
		s.lastT, s.lastV, s.ingT = ss.lastT, ss.lastV, ss.lastT
		for i := range s.tiers {
			st, ts := &ss.tiers[i], &s.tiers[i]
			ts.lastT, ts.bucket, ts.n, ts.sum = st.lastT, st.bucket, st.n, st.sum
			ts.head, ts.stored, ts.sealed = nil, nil, nil
			for _, c := range st.chunks {
				if c.head {
					ts.stored, ts.storedN, ts.headWin, ts.headStart, ts.headEnd = c.data, c.n, c.win, c.start, c.end
				} else {
					ts.sealed = append(ts.sealed, c.sealedChunk)
				}
			}
			if len(ts.sealed) > 0 && !s.inDirty {
				s.inDirty = true
				r.dirty = append(r.dirty, s)
			}
		}
	})
	if err != nil {
		return 0, fmt.Errorf("load heads: %w (the open chunks of every series are in it: move it away to open the repository without them)", err)
	}
	return gen, nil
}

// loadAllHeads loads the open chunks and the series' state: from the heads
// file or, in a file of an older version, from its heads table. If the
// last checkpoint committed chunks but did not write its heads file (a
// crash between the two), it trims the heads to what SQLite holds.
func (r *Repo) loadAllHeads(ctx context.Context) error {
	var v string
	switch err := r.db.QueryRowContext(ctx, `SELECT v FROM settings WHERE k = 'heads_gen'`).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("open repository: settings: %w", err)
	default:
		if _, err := fmt.Sscan(v, &r.gen); err != nil {
			return fmt.Errorf("open repository: settings: heads_gen %q: %w", v, err)
		}
	}
	switch err := r.db.QueryRowContext(ctx, `SELECT v FROM settings WHERE k = 'heads_file'`).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("open repository: settings: %w", err)
	default:
		r.headsMarked = true
	}
	var legacy int
	if err := r.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'heads'`).Scan(&legacy); err != nil {
		return fmt.Errorf("open repository: %w", err)
	}
	r.legacyHeads = legacy > 0
	fileGen, err := r.loadHeadsFile()
	if err != nil {
		return fmt.Errorf("open repository %s: %w", r.o.Path, err)
	}
	if fileGen < 0 && r.headsMarked {
		return fmt.Errorf("open repository %s: its heads file %s is missing (it holds the open chunks of every series; the repository wrote one): put it back, or delete the repository", r.o.Path, headsPath(r.o.Path))
	}
	if fileGen < 0 && r.legacyHeads {
		if err := r.loadHeadsTable(ctx); err != nil {
			return err
		}
		r.log.Info("read the heads table of an older version; the first checkpoint moves it to the heads file", "file", headsPath(r.o.Path))
	}
	// Open's checkpoint writes the file whatever is dirty: it then matches
	// SQLite's generation, and an older heads table is moved to it.
	r.needHeads = true
	if r.gen > fileGen && (fileGen >= 0 || r.gen > 0) {
		return r.trimHeads(ctx, fileGen)
	}
	if fileGen > r.gen {
		r.log.Warn("the heads file is newer than the SQLite file (a restored backup?)", "heads_gen", fileGen, "sqlite_gen", r.gen)
	}
	return nil
}

// trimHeads: the last checkpoint (generation r.gen) committed chunks to
// SQLite but its heads file was not written (a crash), so the heads and
// state loaded (generation fileGen, or none) are older than SQLite's
// chunks, and the log from then on is still there. Per series and tier,
// whatever SQLite already holds (up to its last chunk's end E) is taken
// out of memory: sealed chunks and the open chunk ending at or before E go
// (SQLite has them: a chunk is sealed from the open chunk it grew from),
// and the tier's last timestamp becomes E, so that the log's replay adds
// to the tier only what came after E, in new chunks. The samples are
// neither lost (the log has all since the heads file) nor stored twice.
func (r *Repo) trimHeads(ctx context.Context, fileGen int64) error {
	now := r.o.Now().UnixMilli()
	var heads, sealed, series int
	for i, t := range r.tiers {
		// The windows where the chunks made of the heads can be: from the
		// oldest head's, or the retention's start.
		minWin := floorDiv(now-t.Retention.Milliseconds(), t.window) - 1
		for _, s := range r.byID {
			ts := &s.tiers[i]
			if ts.head != nil || ts.stored != nil {
				minWin = min(minWin, ts.headWin)
			}
			for _, c := range ts.sealed {
				minWin = min(minWin, c.win)
			}
		}
		rows, err := r.db.QueryContext(ctx, `SELECT series_id, max(end_ms) FROM chunks WHERE tier = ? AND win >= ? GROUP BY series_id`, i, minWin)
		if err != nil {
			return fmt.Errorf("open repository: trim heads: %w", err)
		}
		for rows.Next() {
			var id, e int64
			if err := rows.Scan(&id, &e); err != nil {
				rows.Close()
				return fmt.Errorf("open repository: trim heads: %w", err)
			}
			s := r.byID[id]
			if s == nil {
				continue
			}
			ts := &s.tiers[i]
			n := len(ts.sealed)
			ts.sealed = slices.DeleteFunc(ts.sealed, func(c sealedChunk) bool { return c.end <= e })
			sealed += n - len(ts.sealed)
			if len(ts.sealed) == 0 {
				ts.sealed = nil
			}
			if (ts.stored != nil || ts.head != nil) && ts.headEnd <= e {
				ts.stored, ts.head = nil, nil
				heads++
			}
			if ts.lastT == none || e > ts.lastT {
				ts.lastT = e
				series++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("open repository: trim heads: %w", err)
		}
	}
	r.log.Warn("the last checkpoint stopped between its commit and its heads file (a crash): open chunks trimmed to the chunks SQLite holds, the log replays the rest",
		"sqlite_gen", r.gen, "heads_gen", fileGen, "heads_dropped", heads, "sealed_dropped", sealed, "tiers_moved_on", series)
	return nil
}
