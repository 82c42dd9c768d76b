// Package registry keeps the controller's record of data transfers
// (package transfer) in SQLite beside the monitoring repository; the
// progress becomes series in the repository (labelled by transfer), so a
// transfer's page can chart it and its alerts can be found by the links
// and nodes of its path.
package registry

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/sqlitefile"
	"github.com/lightpath/lightpath/internal/transfer"
)

// ErrNotFound is a transfer that does not exist (or is not the caller's).
var ErrNotFound = errors.New("no such transfer")

// ErrInvalid is a registration or report that is wrong in itself.
var ErrInvalid = errors.New("invalid")

// ErrLimit is a registration (or the resumed report of a stalled
// transfer) refused because its owner has the most live transfers allowed.
var ErrLimit = errors.New("limit reached")

// Limits bound what one owner may keep and report, so that no user can
// grow the repository without end: each live transfer's report makes
// series per stream and per path. A zero field takes its default.
type Limits struct {
	// MaxLive bounds an owner's live transfers: running and reported
	// within StallAfter (a stalled one counts again when it reports).
	MaxLive int
	// MaxStreams and MaxPaths bound one report's streams and paths.
	MaxStreams, MaxPaths int
}

// The defaults of Limits, which are those of the controller's flags.
const (
	DefaultMaxLive    = 32
	DefaultMaxStreams = 256 // cp's largest -P
	DefaultMaxPaths   = 8
)

func (l Limits) withDefaults() Limits {
	if l.MaxLive <= 0 {
		l.MaxLive = DefaultMaxLive
	}
	if l.MaxStreams <= 0 {
		l.MaxStreams = DefaultMaxStreams
	}
	if l.MaxPaths <= 0 {
		l.MaxPaths = DefaultMaxPaths
	}
	return l
}

// Registry keeps transfers.
type Registry struct {
	db     *sql.DB
	now    func() time.Time
	limits Limits
	// liveMu makes counting an owner's live transfers and adding one a
	// single step.
	liveMu sync.Mutex

	mu   sync.Mutex
	last map[string]mark // the previous report of each running transfer
}

type mark struct {
	t     time.Time
	bytes int64
}

// Open opens (or creates) the registry in the SQLite file at path.
func Open(ctx context.Context, path string, now func() time.Time) (*Registry, error) {
	if now == nil {
		now = time.Now
	}
	db, err := sqlitefile.Open(ctx, path, `CREATE TABLE IF NOT EXISTS transfers (
		id TEXT PRIMARY KEY,
		owner TEXT NOT NULL,
		started_ms INTEGER NOT NULL,
		state TEXT NOT NULL,
		doc TEXT NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS transfers_started ON transfers(started_ms)`,
		`CREATE INDEX IF NOT EXISTS transfers_owner_state ON transfers(owner, state)`)
	if err != nil {
		return nil, fmt.Errorf("open transfers: %w", err)
	}
	return &Registry{db: db, now: now, limits: Limits{}.withDefaults(), last: map[string]mark{}}, nil
}

// SetLimits sets the per-owner limits (zero fields: the defaults).
func (r *Registry) SetLimits(l Limits) { r.limits = l.withDefaults() }

// checkLive refuses one more live transfer of owner (besides except)
// when it has MaxLive already. The caller holds liveMu.
func (r *Registry) checkLive(ctx context.Context, owner, except string) error {
	rows, err := r.db.QueryContext(ctx, `SELECT doc FROM transfers WHERE owner = ? AND state = ?`, owner, transfer.Running)
	if err != nil {
		return fmt.Errorf("count transfers: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return fmt.Errorf("count transfers: %w", err)
		}
		var t transfer.Transfer
		if json.Unmarshal([]byte(doc), &t) == nil && t.ID != except && r.shown(t).State == transfer.Running {
			n++
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count transfers: %w", err)
	}
	if max := r.limits.MaxLive; n >= max {
		return fmt.Errorf("%w: %s has %d live transfers, the most allowed (the controller's --max-live-transfers-per-user %d): wait for one to end (a transfer that has not reported for %s stops counting)",
			ErrLimit, owner, n, max, transfer.StallAfter)
	}
	return nil
}

// Close closes the registry.
func (r *Registry) Close() error { return r.db.Close() }

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t-" + hex.EncodeToString(b[:])
}

// Create registers a transfer for owner.
func (r *Registry) Create(ctx context.Context, owner string, in transfer.Registration) (transfer.Transfer, error) {
	if in.Direction != "push" && in.Direction != "pull" {
		return transfer.Transfer{}, fmt.Errorf("%w: direction %q: want push or pull", ErrInvalid, in.Direction)
	}
	if in.Source == "" || in.Destination == "" {
		return transfer.Transfer{}, fmt.Errorf("%w: source and destination are required", ErrInvalid)
	}
	if in.BytesTotal < 0 {
		return transfer.Transfer{}, fmt.Errorf("%w: bytes_total must not be negative", ErrInvalid)
	}
	r.liveMu.Lock()
	defer r.liveMu.Unlock()
	if err := r.checkLive(ctx, owner, ""); err != nil {
		return transfer.Transfer{}, err
	}
	now := r.now().UTC()
	t := transfer.Transfer{ID: newID(), Owner: owner, State: transfer.Running, Direction: in.Direction, Source: in.Source, Destination: in.Destination,
		From: in.From, To: in.To, Flow: in.Flow, Reservation: in.Reservation, BytesTotal: in.BytesTotal, StartedAt: now, UpdatedAt: now}
	if err := r.put(ctx, t, true); err != nil {
		return transfer.Transfer{}, err
	}
	r.mu.Lock()
	r.last[t.ID] = mark{now, 0}
	r.mu.Unlock()
	return t, nil
}

func (r *Registry) put(ctx context.Context, t transfer.Transfer, insert bool) error {
	doc, _ := json.Marshal(t)
	q := `UPDATE transfers SET state = ?, doc = ? WHERE id = ?`
	args := []any{t.State, string(doc), t.ID}
	if insert {
		q = `INSERT INTO transfers (state, doc, id, owner, started_ms) VALUES (?, ?, ?, ?, ?)`
		args = append(args, t.Owner, t.StartedAt.UnixMilli())
	}
	if _, err := r.db.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("store transfer: %w", err)
	}
	return nil
}

// Get returns a transfer; sees says whether the caller may see a
// transfer of that owner.
func (r *Registry) Get(ctx context.Context, id string, sees func(owner string) bool) (transfer.Transfer, error) {
	var doc string
	err := r.db.QueryRowContext(ctx, `SELECT doc FROM transfers WHERE id = ?`, id).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return transfer.Transfer{}, fmt.Errorf("%w %s", ErrNotFound, id)
	}
	if err != nil {
		return transfer.Transfer{}, fmt.Errorf("read transfer: %w", err)
	}
	var t transfer.Transfer
	if err := json.Unmarshal([]byte(doc), &t); err != nil {
		return transfer.Transfer{}, fmt.Errorf("read transfer %s: %w", id, err)
	}
	if sees != nil && !sees(t.Owner) {
		return transfer.Transfer{}, fmt.Errorf("%w %s", ErrNotFound, id)
	}
	return r.shown(t), nil
}

// shown marks a running transfer that stopped reporting as stalled.
func (r *Registry) shown(t transfer.Transfer) transfer.Transfer {
	if t.State == transfer.Running && r.now().Sub(t.UpdatedAt) > transfer.StallAfter {
		t.State = transfer.Stalled
		t.ThroughputBps = 0
	}
	return t
}

// List returns the transfers the caller may see, newest first: those
// started since since (zero: all), at most limit (default 100, at most
// 1,000).
func (r *Registry) List(ctx context.Context, since time.Time, limit int, sees func(owner string) bool) ([]transfer.Transfer, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	rows, err := r.db.QueryContext(ctx, `SELECT doc FROM transfers WHERE started_ms >= ? ORDER BY started_ms DESC, id`, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("list transfers: %w", err)
	}
	defer rows.Close()
	out := []transfer.Transfer{}
	for rows.Next() && len(out) < limit {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("list transfers: %w", err)
		}
		var t transfer.Transfer
		if err := json.Unmarshal([]byte(doc), &t); err != nil {
			continue
		}
		if sees == nil || sees(t.Owner) {
			out = append(out, r.shown(t))
		}
	}
	return out, rows.Err()
}

// Report records one progress report from the transfer's owner and
// returns the transfer after it and the samples to store: bytes, bytes per
// path, throughput since the last report, and each stream's TCP state.
func (r *Registry) Report(ctx context.Context, id, who string, rep transfer.Report) (transfer.Transfer, monitor.Group, error) {
	t, err := r.Get(ctx, id, func(owner string) bool { return owner == who })
	if err != nil {
		return transfer.Transfer{}, monitor.Group{}, err
	}
	if t.State != transfer.Running && t.State != transfer.Stalled {
		return t, monitor.Group{}, fmt.Errorf("%w: transfer %s is %s already", ErrInvalid, id, t.State)
	}
	switch rep.State {
	case "", transfer.Running, transfer.Succeeded, transfer.Failed, transfer.Interrupted:
	default:
		return t, monitor.Group{}, fmt.Errorf("%w: state %q: want running, succeeded, failed or interrupted", ErrInvalid, rep.State)
	}
	if rep.BytesDone < 0 {
		return t, monitor.Group{}, fmt.Errorf("%w: bytes_done must not be negative", ErrInvalid)
	}
	if n, max := len(rep.Streams), r.limits.MaxStreams; n > max {
		return t, monitor.Group{}, fmt.Errorf("%w: the report has %d streams, over the most allowed per report (the controller's --max-streams-per-report %d)", ErrInvalid, n, max)
	}
	if n, max := len(rep.BytesByPath), r.limits.MaxPaths; n > max {
		return t, monitor.Group{}, fmt.Errorf("%w: the report has %d paths, over the most allowed per report (%d)", ErrInvalid, n, max)
	}
	if t.State == transfer.Stalled {
		r.liveMu.Lock()
		err := r.checkLive(ctx, t.Owner, t.ID)
		r.liveMu.Unlock()
		if err != nil {
			return t, monitor.Group{}, err
		}
	}
	now := r.now().UTC()
	r.mu.Lock()
	prev, ok := r.last[id]
	if !ok {
		prev = mark{t.UpdatedAt, t.BytesDone}
	}
	r.last[id] = mark{now, rep.BytesDone}
	r.mu.Unlock()
	if dt := now.Sub(prev.t).Seconds(); dt > 0 && rep.BytesDone >= prev.bytes {
		t.ThroughputBps = float64(rep.BytesDone-prev.bytes) * 8 / dt
	}
	t.State, t.UpdatedAt, t.BytesDone = transfer.Running, now, rep.BytesDone
	if rep.BytesTotal > 0 {
		t.BytesTotal = rep.BytesTotal
	}
	if rep.BytesByPath != nil {
		t.BytesByPath = rep.BytesByPath
	}
	if rep.Reservation != "" {
		t.Reservation = rep.Reservation
	}
	if len(rep.Streams) > 0 {
		t.Streams = len(rep.Streams)
	}
	if rep.State == transfer.Succeeded || rep.State == transfer.Failed || rep.State == transfer.Interrupted {
		t.State, t.EndedAt = rep.State, now
		t.Verified, t.Bottleneck, t.BottleneckWhy, t.Error = rep.Verified, rep.Bottleneck, rep.BottleneckWhy, rep.Error
		if rep.ThroughputBps > 0 {
			t.ThroughputBps = rep.ThroughputBps
		}
		r.mu.Lock()
		delete(r.last, id)
		r.mu.Unlock()
	} else if rep.Bottleneck != "" {
		t.Bottleneck, t.BottleneckWhy = rep.Bottleneck, rep.BottleneckWhy
	}
	if err := r.put(ctx, t, false); err != nil {
		return t, monitor.Group{}, err
	}
	return t, samples(t, rep, now), nil
}

// The transfer series.
const (
	SeriesBytes      = "lightpath_transfer_bytes_total"
	SeriesPathBytes  = "lightpath_transfer_path_bytes_total"
	SeriesThroughput = "lightpath_transfer_throughput_bytes_per_second"
	SeriesRTT        = "lightpath_transfer_stream_rtt_seconds"
	SeriesCwnd       = "lightpath_transfer_stream_cwnd_segments"
	SeriesRetrans    = "lightpath_transfer_stream_retransmits_total"
	SeriesPacing     = "lightpath_transfer_stream_pacing_rate_bytes_per_second"
	SeriesDelivery   = "lightpath_transfer_stream_delivery_rate_bytes_per_second"
)

// Meta describes the transfer series. They carry the transfer's ID as a
// label: a transfer's series are its own by nature, and end with it.
var Meta = map[string]monitor.Meta{
	SeriesBytes:      {Type: monitor.Counter, Help: "Payload bytes a transfer has carried."},
	SeriesPathBytes:  {Type: monitor.Counter, Help: "Payload bytes a transfer carried on each path (routed or reserved)."},
	SeriesThroughput: {Type: monitor.Gauge, Help: "A transfer's goodput since its previous report."},
	SeriesRTT:        {Type: monitor.Gauge, Help: "Smoothed RTT of one of a transfer's TCP streams."},
	SeriesCwnd:       {Type: monitor.Gauge, Help: "Congestion window of one of a transfer's TCP streams, in segments."},
	SeriesRetrans:    {Type: monitor.Counter, Help: "Segments one of a transfer's TCP streams retransmitted."},
	SeriesPacing:     {Type: monitor.Gauge, Help: "Pacing rate of one of a transfer's TCP streams."},
	SeriesDelivery:   {Type: monitor.Gauge, Help: "Delivery rate the kernel measured on one of a transfer's TCP streams."},
}

func samples(t transfer.Transfer, rep transfer.Report, now time.Time) monitor.Group {
	g := monitor.Group{T: now.UnixMilli()}
	ls := monitor.L("transfer", t.ID)
	g.Points = append(g.Points,
		monitor.Point{Name: SeriesBytes, Labels: ls, V: float64(t.BytesDone)},
		monitor.Point{Name: SeriesThroughput, Labels: ls, V: t.ThroughputBps / 8})
	for p, n := range rep.BytesByPath {
		if p == "" || len(p) > 64 || strings.ContainsAny(p, "\x00\n") {
			continue
		}
		g.Points = append(g.Points, monitor.Point{Name: SeriesPathBytes, Labels: monitor.L("transfer", t.ID, "path", p), V: float64(n)})
	}
	for i, s := range rep.Streams {
		sl := monitor.L("transfer", t.ID, "stream", fmt.Sprint(i))
		g.Points = append(g.Points,
			monitor.Point{Name: SeriesRTT, Labels: sl, V: s.RTTSeconds},
			monitor.Point{Name: SeriesCwnd, Labels: sl, V: float64(s.Cwnd)},
			monitor.Point{Name: SeriesRetrans, Labels: sl, V: float64(s.Retransmits)},
			monitor.Point{Name: SeriesPacing, Labels: sl, V: s.PacingBps / 8},
			monitor.Point{Name: SeriesDelivery, Labels: sl, V: s.DeliveryBps / 8})
	}
	return g
}

// Running returns the transfers under way (reported within StallAfter).
func (r *Registry) Running(ctx context.Context) ([]transfer.Transfer, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT doc FROM transfers WHERE state = ?`, transfer.Running)
	if err != nil {
		return nil, fmt.Errorf("list transfers: %w", err)
	}
	defer rows.Close()
	var out []transfer.Transfer
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return nil, err
		}
		var t transfer.Transfer
		if json.Unmarshal([]byte(doc), &t) == nil {
			if t = r.shown(t); t.State == transfer.Running {
				out = append(out, t)
			}
		}
	}
	return out, rows.Err()
}
