// Package registry keeps the controller's record of data transfers
// (package transfer) in the controller's store (store.Store, SQLite or
// PostgreSQL, through this package's own Store interface, so that it
// imports no store), so they survive a restart and a controller on
// PostgreSQL keeps none on its own disk; the progress becomes series in the
// monitoring repository (labelled by transfer), so a transfer's page can
// chart it and its alerts can be found by the links and nodes of its path.
package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/reserve"
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

// Records is what the registry reads and writes of the controller's
// store: the transfer records, with the store's contract (store.Store's
// methods of the same names). Errors wrapping reserve.ErrNotFound and
// reserve.ErrInvalid are the store's classes.
type Records interface {
	CreateTransfer(ctx context.Context, t transfer.Transfer) error
	UpdateTransfer(ctx context.Context, t transfer.Transfer) error
	GetTransfer(ctx context.Context, id string) (transfer.Transfer, error)
	ListTransfers(ctx context.Context, f transfer.Filter) ([]transfer.Transfer, error)
	CountTransfers(ctx context.Context, f transfer.Filter) (int, error)
}

// Store is the store a registry keeps its transfers in: the records, and
// Tx, one write transaction whose fn sees its own writes and whose checks
// still hold when they commit (store.Store.Tx). Tx hands fn the store of
// the transaction as the store's own type S (store.Store's hands a
// store.Store): Go has no covariant function parameters, and with S the
// store satisfies Store as it is, with no adapter and no import of it
// here.
type Store[S Records] interface {
	Records
	Tx(ctx context.Context, fn func(S) error) error
}

// Registry keeps transfers in a store. It holds no state of its own: two
// registries on one store (two controllers, one after the other) see the
// same transfers, and every read-change-write is one store transaction.
type Registry struct {
	st     Records
	tx     func(ctx context.Context, fn func(Records) error) error
	now    func() time.Time
	limits Limits
}

// New returns a registry keeping its transfers in st (a store.Store),
// which stays the caller's to close; now is the clock (nil: time.Now).
func New[S Records](st Store[S], now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	tx := func(ctx context.Context, fn func(Records) error) error {
		return st.Tx(ctx, func(s S) error { return fn(s) })
	}
	return &Registry{st: st, tx: tx, now: now, limits: Limits{}.withDefaults()}
}

// SetLimits sets the per-owner limits (zero fields: the defaults).
func (r *Registry) SetLimits(l Limits) { r.limits = l.withDefaults() }

// storeErr maps the store's error classes to the registry's.
func storeErr(err error, id string) error {
	switch {
	case errors.Is(err, reserve.ErrNotFound):
		return fmt.Errorf("%w %s", ErrNotFound, id)
	case errors.Is(err, reserve.ErrInvalid):
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return err
}

// live returns the filter of owner's live transfers at now: running and
// reported within StallAfter (what shown leaves running).
func live(owner string, now time.Time) transfer.Filter {
	return transfer.Filter{Owner: owner, States: []string{transfer.Running}, UpdatedSince: now.Add(-transfer.StallAfter)}
}

// checkLive refuses one more live transfer of owner (besides except) when
// it has MaxLive already. The caller runs it in the transaction that adds
// or revives the transfer, so two requests cannot both take the last place.
func (r *Registry) checkLive(ctx context.Context, tx Records, owner, except string, now time.Time) error {
	f := live(owner, now)
	f.Except = except
	n, err := tx.CountTransfers(ctx, f)
	if err != nil {
		return err
	}
	if max := r.limits.MaxLive; n >= max {
		return fmt.Errorf("%w: %s has %d live transfers, the most allowed (the controller's --max-live-transfers-per-user %d): wait for one to end (a transfer that has not reported for %s stops counting)",
			ErrLimit, owner, n, max, transfer.StallAfter)
	}
	return nil
}

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
	now := r.now().UTC()
	t := transfer.Transfer{ID: newID(), Owner: owner, State: transfer.Running, Direction: in.Direction, Source: in.Source, Destination: in.Destination,
		From: in.From, To: in.To, Flow: in.Flow, Reservation: in.Reservation, BytesTotal: in.BytesTotal, StartedAt: now, UpdatedAt: now}
	err := r.tx(ctx, func(tx Records) error {
		if err := r.checkLive(ctx, tx, owner, "", now); err != nil {
			return err
		}
		return tx.CreateTransfer(ctx, t)
	})
	if errors.Is(err, ErrLimit) {
		return transfer.Transfer{}, err
	}
	if err != nil {
		return transfer.Transfer{}, fmt.Errorf("store transfer: %w", storeErr(err, t.ID))
	}
	return t, nil
}

// Get returns a transfer; sees says whether the caller may see a
// transfer of that owner.
func (r *Registry) Get(ctx context.Context, id string, sees func(owner string) bool) (transfer.Transfer, error) {
	return r.get(ctx, r.st, id, sees)
}

func (r *Registry) get(ctx context.Context, st Records, id string, sees func(owner string) bool) (transfer.Transfer, error) {
	t, err := st.GetTransfer(ctx, id)
	if errors.Is(err, reserve.ErrNotFound) {
		return transfer.Transfer{}, fmt.Errorf("%w %s", ErrNotFound, id)
	}
	if err != nil {
		return transfer.Transfer{}, fmt.Errorf("read transfer: %w", err)
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

// List returns the transfers of owner (empty: every owner's, for a caller
// who sees them all), newest first: those started since since (zero:
// all), at most limit (default 100, at most 1,000).
func (r *Registry) List(ctx context.Context, since time.Time, limit int, owner string) ([]transfer.Transfer, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	ts, err := r.st.ListTransfers(ctx, transfer.Filter{Owner: owner, Since: since, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]transfer.Transfer, 0, len(ts))
	for _, t := range ts {
		out = append(out, r.shown(t))
	}
	return out, nil
}

// Report records one progress report from the transfer's owner and
// returns the transfer after it and the samples to store: bytes, bytes per
// path, throughput since the last report, and each stream's TCP state.
func (r *Registry) Report(ctx context.Context, id, who string, rep transfer.Report) (transfer.Transfer, monitor.Group, error) {
	var (
		t   transfer.Transfer
		now time.Time
	)
	err := r.tx(ctx, func(tx Records) error {
		var err error
		if t, err = r.get(ctx, tx, id, func(owner string) bool { return owner == who }); err != nil {
			return err
		}
		if err := r.check(t, rep); err != nil {
			return err
		}
		now = r.now().UTC()
		if t.State == transfer.Stalled {
			if err := r.checkLive(ctx, tx, t.Owner, t.ID, now); err != nil {
				return err
			}
		}
		r.apply(&t, rep, now)
		return tx.UpdateTransfer(ctx, t)
	})
	if err != nil {
		return t, monitor.Group{}, storeErr(err, id)
	}
	return t, samples(t, rep, now), nil
}

// check refuses a report the transfer t cannot take.
func (r *Registry) check(t transfer.Transfer, rep transfer.Report) error {
	if t.State != transfer.Running && t.State != transfer.Stalled {
		return fmt.Errorf("%w: transfer %s is %s already", ErrInvalid, t.ID, t.State)
	}
	switch rep.State {
	case "", transfer.Running, transfer.Succeeded, transfer.Failed, transfer.Interrupted:
	default:
		return fmt.Errorf("%w: state %q: want running, succeeded, failed or interrupted", ErrInvalid, rep.State)
	}
	if rep.BytesDone < 0 {
		return fmt.Errorf("%w: bytes_done must not be negative", ErrInvalid)
	}
	if n, max := len(rep.Streams), r.limits.MaxStreams; n > max {
		return fmt.Errorf("%w: the report has %d streams, over the most allowed per report (the controller's --max-streams-per-report %d)", ErrInvalid, n, max)
	}
	if n, max := len(rep.BytesByPath), r.limits.MaxPaths; n > max {
		return fmt.Errorf("%w: the report has %d paths, over the most allowed per report (%d)", ErrInvalid, n, max)
	}
	return nil
}

// apply changes t by the report rep received at now. The throughput is
// measured since the stored previous report (its time and bytes).
func (r *Registry) apply(t *transfer.Transfer, rep transfer.Report, now time.Time) {
	if dt := now.Sub(t.UpdatedAt).Seconds(); dt > 0 && rep.BytesDone >= t.BytesDone {
		t.ThroughputBps = float64(rep.BytesDone-t.BytesDone) * 8 / dt
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
	} else if rep.Bottleneck != "" {
		t.Bottleneck, t.BottleneckWhy = rep.Bottleneck, rep.BottleneckWhy
	}
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
	ts, err := r.st.ListTransfers(ctx, live("", r.now()))
	if err != nil {
		return nil, err
	}
	return ts, nil
}
