package mover

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/wire"
)

// benchBuffer is what a memory-to-memory sender sends, over and over.
const benchBuffer = 16 << 20

// benchSource is an in-memory file of random bytes: sendfile moves its
// pages to the sockets without a copy, as the file path of cp does.
var benchSource = sync.OnceValues(func() (*os.File, error) {
	f, err := memFile("lightpath-bench")
	if err != nil {
		return nil, err
	}
	buf := make([]byte, benchBuffer)
	rand.Read(buf)
	if _, err := f.WriteAt(buf, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
})

// benchSend fills one stream until the deadline, then closes its sending
// side so the receiver sees the end.
func benchSend(d *dataConn, until time.Time) error {
	var src *os.File
	var buf []byte
	if d.files != nil {
		src, _ = benchSource()
	}
	if src == nil {
		buf = make([]byte, 1<<20)
		rand.Read(buf)
	}
	d.conn.SetWriteDeadline(until.Add(30 * time.Second))
	for time.Now().Before(until) {
		var n int64
		var err error
		if buf == nil {
			n, err = d.files.SendFile(src, 0, benchBuffer)
		} else {
			var k int
			k, err = d.conn.Write(buf)
			n = int64(k)
		}
		d.sent.Add(n)
		if err != nil {
			return err
		}
	}
	if cw, ok := d.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// benchRecv drains one stream into memory until the sender closes it.
func benchRecv(d *dataConn, stall time.Duration) error {
	buf := make([]byte, 1<<20)
	// Wake only for a full buffer (or the end): far fewer wakeups.
	d.setLowat(len(buf))
	for {
		if stall > 0 {
			d.conn.SetReadDeadline(time.Now().Add(stall))
		}
		n, err := d.r.Read(buf)
		d.sent.Add(int64(n))
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// benchRun moves data on every stream, sending or receiving, and returns
// this side's account.
func benchRun(l *link, send bool, dur time.Duration) (wire.Stats, error) {
	start := time.Now()
	until := start.Add(dur)
	errs := make([]error, len(l.data))
	var wg sync.WaitGroup
	for i, d := range l.data {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if send {
				errs[i] = benchSend(d, until)
			} else {
				errs[i] = benchRecv(d, dur+30*time.Second)
			}
		}()
	}
	wg.Wait()
	st := wire.Stats{Elapsed: int64(time.Since(start)), HasCC: l.ctrl.version >= wire.VersionCC}
	for i, d := range l.data {
		if errs[i] != nil {
			return st, fmt.Errorf("stream %d: %w", i, errs[i])
		}
		ss := d.stats()
		st.Bytes += ss.Bytes
		st.Streams = append(st.Streams, ss)
	}
	return st, nil
}

// serveBench runs the server's side of a memory-to-memory test.
func serveBench(ctx context.Context, l *link, m *wire.Bench) (int64, error) {
	go func() {
		<-ctx.Done()
		l.close()
	}()
	st, err := benchRun(l, m.Reverse, time.Duration(m.Duration))
	if err != nil {
		return st.Bytes, err
	}
	peer, err := l.ctrl.read()
	if err != nil {
		return st.Bytes, fmt.Errorf("control: %w", err)
	}
	if _, ok := peer.(*wire.BenchDone); !ok {
		return st.Bytes, fmt.Errorf("%w: unexpected %s", wire.ErrMalformed, peer.Type())
	}
	return st.Bytes, l.ctrl.send(&wire.BenchDone{Stats: st})
}

// BenchResult is a memory-to-memory test's outcome: what the receiver
// took in and how long it took, and each stream's account (its bytes as
// the receiver counted them).
type BenchResult struct {
	Bytes       int64
	Elapsed     time.Duration
	Streams     int
	PerStream   []StreamSummary
	Retransmits uint32
}

// Bench runs a memory-to-memory test against a server: the client sends,
// or with reverse the server does. tick, if set, is called about once a
// second with the bytes this side has moved so far.
func Bench(ctx context.Context, cfg ClientConfig, dur time.Duration, reverse bool, tick func(int64)) (BenchResult, error) {
	l, err := cfg.connect(ctx, func(streams int) wire.Msg {
		return &wire.Bench{Tuning: cfg.Tuning.wire(), Streams: uint16(streams), Duration: int64(dur), Reverse: reverse}
	})
	if err != nil {
		return BenchResult{}, err
	}
	defer l.close()
	stop := context.AfterFunc(ctx, l.close)
	defer stop()
	if tick != nil {
		// The ticker is stopped and waited for before Bench returns: a
		// tick must not land after the caller has printed its summary.
		done, ticked := make(chan struct{}), make(chan struct{})
		defer func() { close(done); <-ticked }()
		go func() {
			defer close(ticked)
			every(time.Second, done, func() bool {
				var n int64
				for _, d := range l.data {
					n += d.sent.Load()
				}
				tick(n)
				return true
			})
		}()
	}
	mine, err := benchRun(l, !reverse, dur)
	if err != nil {
		return BenchResult{}, err
	}
	if err := l.ctrl.send(&wire.BenchDone{Stats: mine}); err != nil {
		return BenchResult{}, fmt.Errorf("control: %w", err)
	}
	m, err := l.ctrl.read()
	if err != nil {
		return BenchResult{}, fmt.Errorf("control: %w", err)
	}
	bd, ok := m.(*wire.BenchDone)
	if !ok {
		return BenchResult{}, fmt.Errorf("%w: unexpected %s", wire.ErrMalformed, m.Type())
	}
	snd, rcv := mine, bd.Stats
	if reverse {
		snd, rcv = bd.Stats, mine
	}
	res := BenchResult{Streams: len(l.data), Bytes: rcv.Bytes, Elapsed: time.Duration(rcv.Elapsed)}
	res.PerStream, res.Retransmits = streamSummaries(snd, rcv)
	for i := range res.PerStream {
		if i < len(rcv.Streams) {
			res.PerStream[i].Bytes = rcv.Streams[i].Bytes
		}
	}
	return res, nil
}
