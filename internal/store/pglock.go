package store

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The PostgreSQL leader lock: a session advisory lock on a connection of
// its own. Its key is two int4s, pgLeaderClass and a hash of the schema,
// so controllers on different schemas of one database (as the tests run)
// each have their own leader, and it cannot collide with the writers'
// bigint lock.
const pgLeaderClass int32 = 0x6c706c64 // "lpld"

const (
	// pgLockCheck is how often the leader checks its lock's connection,
	// and pgLockTimeout how long a check may take before the lead is
	// taken as lost.
	pgLockCheck   = time.Second
	pgLockTimeout = 3 * time.Second
	// The TCP keepalives of the lock's connection, on both ends, so a
	// silent peer (a cut cable, not a closed socket) is noticed within
	// about 10 s: the server then drops the lock, the leader steps down.
	pgKeepIdle     = 4 * time.Second
	pgKeepInterval = 2 * time.Second
	pgKeepCount    = 3
)

type pgLock struct {
	conn  *pgx.Conn
	gone  chan struct{} // closed when the lock may be lost
	stop  chan struct{}
	done  chan struct{} // closed when watch has returned
	once  sync.Once
	relMu sync.Mutex
}

// pgLocker tries the lock on one connection, kept between tries (a
// standby tries twice a second) and made anew when it breaks.
type pgLocker struct {
	url  string
	conn *pgx.Conn
}

func (p *pgLocker) try(ctx context.Context) (heldLock, error) {
	if p.conn == nil || p.conn.IsClosed() {
		conn, err := connectLock(ctx, p.url)
		if err != nil {
			return nil, err
		}
		p.conn = conn
	}
	var got bool
	err := p.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext(current_schema()))`, pgLeaderClass).Scan(&got)
	if err != nil {
		p.close()
		return nil, fmt.Errorf("postgres %s: try the leader lock: %w", redact(p.url), err)
	}
	if !got {
		return nil, nil
	}
	l := &pgLock{conn: p.conn, gone: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	p.conn = nil // the lock's now
	go l.watch()
	return l, nil
}

func (p *pgLocker) close() {
	if p.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		p.conn.Close(ctx)
		cancel()
		p.conn = nil
	}
}

// connectLock opens the lock's own connection, with short keepalives.
func connectLock(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", redact(url), err)
	}
	d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: pgKeepIdle, Interval: pgKeepInterval, Count: pgKeepCount}}
	cfg.DialFunc = d.DialContext
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	// The server's side of the keepalives (ignored on a unix socket).
	cfg.RuntimeParams["tcp_keepalives_idle"] = fmt.Sprint(int(pgKeepIdle.Seconds()))
	cfg.RuntimeParams["tcp_keepalives_interval"] = fmt.Sprint(int(pgKeepInterval.Seconds()))
	cfg.RuntimeParams["tcp_keepalives_count"] = fmt.Sprint(pgKeepCount)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", redact(url), err)
	}
	return conn, nil
}

// watch checks the connection every pgLockCheck until release or a
// failure, which closes gone: the server drops a session's locks with
// its connection, so a leader that cannot reach it must assume a standby
// leads.
func (l *pgLock) watch() {
	defer close(l.done)
	t := time.NewTicker(pgLockCheck)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), pgLockTimeout)
		_, err := l.conn.Exec(ctx, `SELECT 1`)
		cancel()
		if err != nil {
			l.once.Do(func() { close(l.gone) })
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			l.conn.Close(ctx)
			cancel()
			return
		}
	}
}

func (l *pgLock) lost() <-chan struct{} { return l.gone }

func (l *pgLock) release() error {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	select {
	case <-l.stop:
		return nil // released already
	default:
	}
	close(l.stop)
	<-l.done
	l.once.Do(func() { close(l.gone) })
	// Closing the session drops its locks; unlock first so a pooled
	// server-side connection (pgbouncer in session mode) cannot keep it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if l.conn.IsClosed() {
		return nil
	}
	_, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, pgLeaderClass)
	if cerr := l.conn.Close(ctx); err == nil {
		err = cerr
	}
	return err
}
