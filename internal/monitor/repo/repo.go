// Package repo is the controller's monitoring repository: the time series
// that agents push, kept in compressed chunks (package chunk) in a SQLite
// file of their own, with downsampled tiers, retention, a disk budget and a
// write-ahead log that makes every acknowledged push survive a crash.
//
// Layout. In memory, an index maps a series (name and labels) to its state:
// per tier an open head chunk, the chunks sealed since the last checkpoint,
// and for downsampled tiers the bucket being averaged. Append writes the
// accepted samples to the repository's own log (PATH.wal.d/) and fsyncs it
// before returning; a checkpoint (Options.Checkpoint, and at Close) writes
// the sealed chunks and new series to SQLite, then the open chunks and the
// series' state to the heads file, and deletes the log segments they
// cover. Open loads the series and the heads file and replays the log.
//
// Storage. A chunk is written to SQLite's chunks table once, when it is
// sealed (it never crosses a window of its tier: 2 h raw, 240 steps
// otherwise), and never changed after. chunks is a rowid table whose rowid
// grows with every insert, so SQLite appends to the right edge of its tree
// and leaves the pages behind full: a keyed (WITHOUT ROWID) table is an
// index b-tree, whose splits balance the siblings and leave pages about
// three quarters full under any insertion order, which the raw tier's
// 2 bytes a sample cannot afford. The index chunks_key (tier, win,
// series_id, start_ms) finds a series' chunks, one seek per window; its
// rows are about 30 bytes per chunk. The open (head) chunks, which grow
// between checkpoints, and the series' state are not in SQLite but in the
// heads file beside it (PATH.heads, heads.go), rewritten whole and packed
// at each checkpoint after the sealed chunks are committed; Open loads it,
// so a restart goes on appending to the same chunks. (A file of an older
// version kept them in a heads table: Open reads it, and the first
// checkpoint moves it to the heads file and drops the table.) Retention
// and the budget delete whole leading windows.
package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/sqlitefile"
)

// Tier is one resolution the repository keeps: raw samples (Step 0) or the
// average of each Step, for Retention.
type Tier struct {
	Step      time.Duration // 0 = raw
	Retention time.Duration
}

// DefaultTiers: raw for 3 hours, 1-minute averages for 7 days, 10-minute
// averages for 180 days.
func DefaultTiers() []Tier {
	return []Tier{
		{0, 3 * time.Hour},
		{time.Minute, 7 * 24 * time.Hour},
		{10 * time.Minute, 180 * 24 * time.Hour},
	}
}

// ParseTiers reads "raw:3h,1m:7d,10m:180d". Days ("d") are accepted as 24h.
// The first tier must be raw; the others have increasing steps, each a
// multiple of the one before (so buckets nest), and steps of at least 1s.
func ParseTiers(s string) ([]Tier, error) {
	var ts []Tier
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		step, ret, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("tier %q: want STEP:RETENTION, as in raw:3h or 1m:7d", part)
		}
		var t Tier
		if step != "raw" {
			d, err := parseDays(step)
			if err != nil {
				return nil, fmt.Errorf("tier %q: step: %w", part, err)
			}
			t.Step = d
		}
		d, err := parseDays(ret)
		if err != nil {
			return nil, fmt.Errorf("tier %q: retention: %w", part, err)
		}
		t.Retention = d
		if err := checkTier(i, t, ts); err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func checkTier(i int, t Tier, before []Tier) error {
	switch {
	case i == 0 && t.Step != 0:
		return fmt.Errorf("the first tier must be raw, not %v", t.Step)
	case i > 0 && t.Step == 0:
		return fmt.Errorf("tier %d: only the first tier can be raw", i)
	case i > 0 && t.Step < time.Second:
		return fmt.Errorf("tier %d: step %v is under 1s", i, t.Step)
	case i > 0 && t.Step%time.Millisecond != 0:
		return fmt.Errorf("tier %d: step %v is not whole milliseconds", i, t.Step)
	case i > 1 && (t.Step <= before[i-1].Step || t.Step%before[i-1].Step != 0):
		return fmt.Errorf("tier %d: step %v must be a larger multiple of the previous step %v", i, t.Step, before[i-1].Step)
	case t.Retention <= 0:
		return fmt.Errorf("tier %d: retention must be positive", i)
	}
	return nil
}

func parseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok && !strings.ContainsAny(n, "hmsuµn") {
		var days float64
		if _, err := fmt.Sscanf(n, "%g", &days); err != nil || days <= 0 {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(days * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	return d, nil
}

// Options configure Open.
type Options struct {
	Path       string        // SQLite file; created if missing
	Tiers      []Tier        // default DefaultTiers()
	Budget     int64         // bytes on disk the repository may use; 0 = unlimited
	Checkpoint time.Duration // how often head chunks are written to SQLite; default 1m
	Now        func() time.Time
	Log        *slog.Logger
}

// Chunk shapes per tier: a chunk stays inside one window of its tier and
// holds at most maxN samples (so rows stay well under SQLite's in-page
// limit and never spill to overflow pages).
const (
	rawWindow = 2 * time.Hour
	rawMaxN   = 720
	tierSteps = 240 // a downsampled tier's window, in steps
	tierMaxN  = 240
	// maxBytes seals a chunk whatever its count: SQLite keeps a row of up
	// to about 4 KB in its 16 KB page; a larger one spills to overflow pages
	// (a whole page for the remainder).
	maxBytes   = 3072
	pageSize   = 16384
	latestSpan = 5 * time.Minute
)

// Repo is an open repository. Its methods are safe for concurrent use.
type Repo struct {
	o     Options
	log   *slog.Logger
	db    *sql.DB
	tiers []tierInfo

	// ingestMu orders appends: the log and the in-memory state see the
	// samples of one series in the same order, so a replay skips exactly
	// what the first pass skipped. An Append resolves and logs its batch
	// under ingestMu, then takes applyMu before it lets ingestMu go and
	// applies the samples under applyMu alone: the next Append resolves
	// and logs while this one applies (two stages, two cores), and the
	// samples reach memory in the log's order. Whoever needs memory to
	// match the log (checkpoint, WriteHistory) holds both. Lock order:
	// ingestMu, applyMu, idx, series.mu.
	ingestMu  sync.Mutex
	applyMu   sync.Mutex
	w         *wal
	walBuf    []byte
	keyBuf    []byte
	pcKeys    []byte                // Append's scratch: the push's keys
	pcEnds    []int                 // and where each ends
	pushes    map[string]*pushCache // by its first series' key
	pushBytes int
	nextID    int64
	dirty     []*series // under applyMu: series changed since the last checkpoint
	broken    error     // a failed log write: appends are refused

	idx    sync.RWMutex
	byKey  map[string]*series
	byID   map[int64]*series
	byName map[string]*nameIndex

	metaMu sync.RWMutex
	meta   map[string]monitor.Meta
	metaDB map[string]bool // names whose meta is in SQLite as it is

	cpMu         sync.Mutex // one checkpoint at a time
	budgetActive bool       // under cpMu: dropping until under 90% of the budget
	gen          int64      // under cpMu: settings.heads_gen, the last checkpoint's generation
	needHeads    bool       // under cpMu: the heads file must be written even with nothing dirty
	headsMarked  bool       // under cpMu: settings.heads_file is set (a heads file was written)
	legacyHeads  bool       // under cpMu: the file has an old heads table, dropped once the heads file is written
	headsSize    atomic.Int64
	dbw          sync.Mutex // one SQLite writer at a time

	statMu   sync.Mutex
	stats    Stats
	stop     chan struct{}
	done     chan struct{}
	closed   bool
	closeErr error
}

type tierInfo struct {
	Tier
	step   int64 // ms
	window int64 // ms
	maxN   int
}

func (o *Options) defaults() error {
	if o.Path == "" {
		return fmt.Errorf("%w: no path for the repository", monitor.ErrInvalid)
	}
	if strings.ContainsAny(o.Path, "?#") {
		return fmt.Errorf("%w: path %q must not contain ? or #", monitor.ErrInvalid, o.Path)
	}
	if len(o.Tiers) == 0 {
		o.Tiers = DefaultTiers()
	}
	for i, t := range o.Tiers {
		if err := checkTier(i, t, o.Tiers[:i]); err != nil {
			return fmt.Errorf("%w: %w", monitor.ErrInvalid, err)
		}
	}
	if o.Checkpoint <= 0 {
		o.Checkpoint = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

const schema = `
CREATE TABLE IF NOT EXISTS series (
	id     INTEGER PRIMARY KEY,
	name   TEXT NOT NULL,
	labels TEXT NOT NULL,
	state  BLOB
);
CREATE TABLE IF NOT EXISTS chunks (
	id        INTEGER PRIMARY KEY,
	tier      INTEGER NOT NULL,
	win       INTEGER NOT NULL,
	series_id INTEGER NOT NULL,
	start_ms  INTEGER NOT NULL,
	end_ms    INTEGER NOT NULL,
	n         INTEGER NOT NULL,
	data      BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS chunks_key ON chunks(tier, win, series_id, start_ms);
CREATE TABLE IF NOT EXISTS meta (
	name TEXT PRIMARY KEY,
	type TEXT NOT NULL,
	help TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS settings (
	k TEXT PRIMARY KEY,
	v TEXT NOT NULL
) WITHOUT ROWID;
`

// Open opens or creates the repository at o.Path, loads its series and
// replays its log, then checkpoints so that the log starts empty.
func Open(ctx context.Context, o Options) (*Repo, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	// FULL: a checkpoint's commit is on disk before the log segments it
	// covers are deleted (NORMAL could lose it to a power cut).
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "journal_size_limit(67108864)")
	q.Set("_txlock", "immediate")
	if err := sqlitefile.CreatePrivate(o.Path); err != nil {
		return nil, fmt.Errorf("open repository %s: %w", o.Path, err)
	}
	db, err := sql.Open("sqlite", "file:"+o.Path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", o.Path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	// The driver runs _pragma in lexicographic order, journal_mode before
	// page_size, and a new file's page size is fixed by its first write:
	// set both here, in order (WAL mode then persists in the file).
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size = %d; PRAGMA journal_mode = WAL", pageSize)); err != nil {
		db.Close()
		return nil, fmt.Errorf("open repository %s: %w", o.Path, err)
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open repository %s: schema: %w", o.Path, err)
	}
	r := &Repo{
		o: o, log: o.Log.With("component", "monitor-repo"), db: db,
		byKey: map[string]*series{}, byID: map[int64]*series{}, byName: map[string]*nameIndex{},
		meta: map[string]monitor.Meta{}, metaDB: map[string]bool{},
		nextID: 1, stop: make(chan struct{}), done: make(chan struct{}),
	}
	for _, t := range o.Tiers {
		ti := tierInfo{Tier: t, step: t.Step.Milliseconds()}
		if t.Step == 0 {
			ti.window, ti.maxN = rawWindow.Milliseconds(), rawMaxN
		} else {
			ti.window, ti.maxN = ti.step*tierSteps, tierMaxN
		}
		r.tiers = append(r.tiers, ti)
	}
	if err := r.checkSettings(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := r.load(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := r.loadAllHeads(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := r.replay(); err != nil {
		db.Close()
		return nil, err
	}
	if err := r.checkpoint(ctx); err != nil {
		r.w.f.Close()
		db.Close()
		return nil, err
	}
	go r.loop()
	return r, nil
}

// checkSettings refuses to open a repository with tiers of other steps:
// the stored tiers would be read as something they are not.
func (r *Repo) checkSettings(ctx context.Context) error {
	var steps []string
	for _, t := range r.tiers {
		steps = append(steps, fmt.Sprint(t.step))
	}
	want := strings.Join(steps, ",")
	var got string
	err := r.db.QueryRowContext(ctx, `SELECT v FROM settings WHERE k='steps'`).Scan(&got)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = r.db.ExecContext(ctx, `INSERT INTO settings(k, v) VALUES('steps', ?)`, want)
		if err != nil {
			return fmt.Errorf("open repository: settings: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("open repository: settings: %w", err)
	case got != want:
		return fmt.Errorf("%w: repository %s has tier steps %s ms; asked for %s ms", monitor.ErrInvalid, r.o.Path, got, want)
	}
	return nil
}

func (r *Repo) loop() {
	defer close(r.done)
	t := time.NewTicker(r.o.Checkpoint)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if err := r.checkpoint(context.Background()); err != nil {
				r.log.Error("checkpoint failed; the log keeps the samples", "err", err)
			}
		}
	}
}

// Close checkpoints everything, then closes the repository.
func (r *Repo) Close() error {
	r.statMu.Lock()
	if r.closed {
		r.statMu.Unlock()
		return r.closeErr
	}
	r.closed = true
	r.statMu.Unlock()
	close(r.stop)
	<-r.done
	err := r.checkpoint(context.Background())
	r.ingestMu.Lock()
	if r.broken == nil {
		r.broken = errors.New("repository closed")
	}
	if r.w != nil {
		if e := r.w.f.Close(); e != nil && err == nil {
			err = fmt.Errorf("close log: %w", e)
		}
		if err == nil {
			// Everything is in SQLite: the last, empty segment can go.
			_ = r.w.removeBefore(r.w.seq + 1)
		}
	}
	r.ingestMu.Unlock()
	if e := r.db.Close(); e != nil && err == nil {
		err = fmt.Errorf("close repository: %w", e)
	}
	r.statMu.Lock()
	r.closeErr = err
	r.statMu.Unlock()
	return err
}

// diskBytes is what the repository uses on disk: the SQLite file's pages
// in use, its WAL, the heads file and the repository's own log.
func (r *Repo) diskBytes(ctx context.Context) int64 {
	var pages, free, size int64
	_ = r.db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages)
	_ = r.db.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free)
	_ = r.db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size)
	n := (pages - free) * size
	if fi, err := os.Stat(r.o.Path + "-wal"); err == nil {
		n += fi.Size()
	}
	if fi, err := os.Stat(headsPath(r.o.Path)); err == nil {
		n += fi.Size()
	}
	w := &wal{dir: r.o.Path + ".wal.d"}
	return n + w.bytes()
}
