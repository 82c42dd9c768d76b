package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
)

// Leadership: one controller writes a database at a time.
//
// Two controllers on one database would each admit against their own
// in-memory schedule and overbook, so a controller first takes the
// database's leader lock (Lead) and only then loads its state; a second
// one waits for the lock as a standby. The lock is the backend's:
//
//   - SQLite: an exclusive flock on the database file itself, held by a
//     descriptor of its own for the leader's life; the kernel drops it
//     when the process dies. A lock on the file, not on a name, follows
//     the database however it is reached (a symlink, another path to its
//     directory, a hard link): two controllers given two paths to one
//     database still contend for one lock. (A flock belongs to the open
//     file, so it does not vanish when the SQLite driver closes another
//     descriptor of the database, as a POSIX lock would, and SQLite's own
//     POSIX locks do not meet it.) The leader takes an flock on PATH.lock
//     beside the path it was given first, the lock controllers before
//     this one took, so that one of those and this one never lead
//     together on the same path.
//   - PostgreSQL: a session advisory lock held on a dedicated connection
//     (not one of the pool's) with short TCP keepalives on both sides. The
//     server drops the lock when that connection ends; the leader checks
//     the connection every second and, when it fails, its Lost channel
//     closes: it must stop writing, since a standby may lead already.
//
// A leader that finds it no longer leads says so at once: its Lost
// closes when its lock may be gone (PostgreSQL), when a write finds the
// epoch overtaken, or when its check of the epoch (every second) does.
//
// A lock alone does not stop a deposed leader's late write (a leader
// whose connection was cut may still have a transaction on its way).
// Fencing does: each new leader raises the leader epoch, kept in the
// settings table under EpochKey, and every write transaction of a leader's
// Store first checks, under the writers' lock, that the stored epoch is
// still its own. A leader whose epoch was overtaken gets ErrDeposed and
// writes nothing.

// EpochKey is the setting holding the current leader's epoch.
const EpochKey = "leader.epoch"

// ErrDeposed is a write by a controller that no longer leads: another one
// took the database over since (its epoch is newer).
var ErrDeposed = errors.New("this controller no longer leads: another took the database over")

// leadPoll is how often a standby tries the leader lock.
const leadPoll = 500 * time.Millisecond

// heldLock is a backend's leader lock, held.
type heldLock interface {
	// lost is closed when the lock may no longer be held.
	lost() <-chan struct{}
	release() error
}

// epochPoll is how often a leader checks that the stored epoch is still
// its own.
const epochPoll = time.Second

// errLockLost is why a PostgreSQL leader's lead ended.
var errLockLost = errors.New("its lock's connection failed")

// Leadership is this process's lead on a database: the lock, the epoch it
// was granted and the Store fenced with it.
type Leadership struct {
	held  heldLock
	epoch int64
	store Store

	lost     chan struct{} // closed once the lead is lost
	lostOnce sync.Once
	why      error
	stop     chan struct{} // closed by Release: the watch ends
	stopOnce sync.Once
}

// Lead blocks until this process holds the leader lock of the database
// named by url (as Open takes it), then opens and migrates the database,
// raises the leader epoch and returns the Leadership. Until then it tries
// the lock every half second; standby, when not nil, is called once when
// the first try finds another leader. A private in-memory SQLite database
// has nobody to share it with: its lock is granted at once.
//
// The caller uses Store (and closes it) and calls Release when done.
func Lead(ctx context.Context, url string, standby func()) (*Leadership, error) {
	lk, err := newLocker(url)
	if err != nil {
		return nil, fmt.Errorf("take the leader lock: %w", err)
	}
	defer lk.close()
	told := false
	var h heldLock
	for {
		h, err = lk.try(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("take the leader lock: %w", err)
		}
		if h != nil {
			break
		}
		if !told && standby != nil {
			standby()
			told = true
		}
		t := time.NewTimer(leadPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	s, err := Open(ctx, url)
	if err != nil {
		h.release()
		return nil, err
	}
	epoch, err := raiseEpoch(ctx, s)
	if err != nil {
		s.Close()
		h.release()
		return nil, fmt.Errorf("take the lead: %w", err)
	}
	ss := s.(*sqlStore)
	l := &Leadership{held: h, epoch: epoch, lost: make(chan struct{}), stop: make(chan struct{})}
	l.store = &sqlStore{b: ss.b, q: ss.q, epoch: epoch, deposed: l.depose}
	go l.watch(ss.q)
	return l, nil
}

// depose ends the lead for why (the first reason stays).
func (l *Leadership) depose(why error) {
	l.lostOnce.Do(func() {
		l.why = why
		close(l.lost)
	})
}

// watch ends the lead when the lock is lost or the stored epoch is
// another's, until Release.
func (l *Leadership) watch(q querier) {
	t := time.NewTicker(epochPoll)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.held.lost():
			l.depose(errLockLost)
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := checkEpoch(ctx, q, l.epoch)
			cancel()
			// Only an epoch read and found another's ends the lead: a read
			// that failed (a busy or closed database) says nothing.
			if errors.Is(err, ErrDeposed) {
				l.depose(err)
				return
			}
		}
	}
}

// locker tries a database's leader lock, again and again while a standby
// waits.
type locker interface {
	// try takes the lock if it is free; nil when another holds it.
	try(ctx context.Context) (heldLock, error)
	// close releases what the tries kept (not a lock try returned).
	close()
}

func newLocker(url string) (locker, error) {
	switch {
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(url, "sqlite:")
		if path == ":memory:" {
			return memoryLocker{}, nil
		}
		if path == "" {
			return nil, fmt.Errorf("sqlite: no path (want sqlite:PATH or sqlite::memory:)")
		}
		return dbLocker(path), nil
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return &pgLocker{url: url}, nil
	}
	return nil, fmt.Errorf("%w: database URL %q (want sqlite:PATH or postgres://...)", reserve.ErrInvalid, redact(url))
}

// dbLocker is SQLite's, for the database at that path: flocks on PATH.lock
// and on the database file itself, both or neither.
type dbLocker string

func (f dbLocker) try(context.Context) (heldLock, error) {
	byPath, err := tryFileLock(string(f) + ".lock")
	if err != nil || byPath == nil {
		return nil, err
	}
	byFile, err := tryFileLock(string(f))
	if err != nil || byFile == nil {
		byPath.release()
		return nil, err
	}
	return bothLocks{byPath, byFile}, nil
}

func (dbLocker) close() {}

// bothLocks are two locks held together.
type bothLocks [2]heldLock

func (b bothLocks) lost() <-chan struct{} { return nil }

func (b bothLocks) release() error {
	return errors.Join(b[1].release(), b[0].release())
}

// memoryLocker is a private in-memory database's: nobody shares it.
type memoryLocker struct{}

func (memoryLocker) try(context.Context) (heldLock, error) { return memoryLock{}, nil }
func (memoryLocker) close()                                {}

// raiseEpoch makes the stored leader epoch one more than it was (0 when
// none was stored) and returns it. It runs as a write transaction, so it
// waits for any write of the previous leader still under way, and every
// later one of that leader sees the new epoch and fails.
func raiseEpoch(ctx context.Context, s Store) (int64, error) {
	var epoch int64
	err := s.Tx(ctx, func(tx Store) error {
		v, err := tx.GetSetting(ctx, EpochKey)
		switch {
		case errors.Is(err, reserve.ErrNotFound):
		case err != nil:
			return err
		default:
			if epoch, err = strconv.ParseInt(v, 10, 64); err != nil || epoch < 0 {
				return fmt.Errorf("setting %s: %q is not an epoch", EpochKey, v)
			}
		}
		epoch++
		return tx.PutSetting(ctx, EpochKey, strconv.FormatInt(epoch, 10))
	})
	return epoch, err
}

// checkEpoch fails with ErrDeposed unless the stored epoch is still
// epoch; q is the write transaction it guards.
func checkEpoch(ctx context.Context, q querier, epoch int64) error {
	s := &sqlStore{q: q, tx: true}
	var v string
	found, err := s.queryRow(ctx, `SELECT value FROM settings WHERE key = ?`, []any{EpochKey}, &v)
	if err != nil {
		return fmt.Errorf("check the leader epoch: %w", err)
	}
	if !found {
		return fmt.Errorf("%w (leader epoch %d, none stored)", ErrDeposed, epoch)
	}
	if v != strconv.FormatInt(epoch, 10) {
		return fmt.Errorf("%w (leader epoch %d, the database's is %s)", ErrDeposed, epoch, v)
	}
	return nil
}

// Store returns the database, fenced: each of its write transactions
// fails with ErrDeposed once another controller has taken the lead. Close
// it when done; it is the only handle Lead opened.
func (l *Leadership) Store() Store { return l.store }

// Epoch returns the leader epoch this lead was granted (1 for the first
// leader of a database, then one more at each takeover).
func (l *Leadership) Epoch() int64 { return l.epoch }

// Lost is closed when this process no longer leads, or may not: the
// lock may no longer be held (on PostgreSQL, its connection failed), or
// another controller raised the epoch (a write of Store, or the check
// every second, found it). A standby may lead already, so the holder must
// stop serving. Err says why.
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

// Err says why Lost closed (nil while it has not).
func (l *Leadership) Err() error {
	select {
	case <-l.lost:
		return l.why
	default:
		return nil
	}
}

// Release gives the lock up, so a standby takes over. It does not close
// Store.
func (l *Leadership) Release() error {
	l.stopOnce.Do(func() { close(l.stop) })
	return l.held.release()
}

// memoryLock is the lead on a private in-memory database.
type memoryLock struct{}

func (memoryLock) lost() <-chan struct{} { return nil }
func (memoryLock) release() error        { return nil }
