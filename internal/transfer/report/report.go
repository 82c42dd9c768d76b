// Package report records a copy with the controller: registered as it
// starts, its progress reported every second (bytes, bytes per path, each
// stream's transport state) and its outcome at the end. The controller
// being away never stops the copy: a failed report is said once and the
// copy goes on. `lightpath cp --controller` and the transfer service use
// it; *client.Client is a Recorder. It takes the copy's figures as its own
// types (Progress, Result), which the caller reads from the mover, so that
// it links no mover.
package report

import (
	"context"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/transfer"
)

// Recorder is where transfers are recorded.
type Recorder interface {
	CreateTransfer(ctx context.Context, r transfer.Registration) (transfer.Transfer, error)
	ReportTransfer(ctx context.Context, id string, r transfer.Report) (transfer.Transfer, error)
}

// Every is how often a running copy is reported.
const Every = time.Second

// Reporter reports one transfer.
type Reporter struct {
	r    Recorder
	id   string
	warn func(error)

	mu     sync.Mutex
	warned bool
	stop   func()
}

// Start registers the transfer and reports state() every Every until
// Finish. warn, when set, is told the first report that fails. The error
// says why the recorder did not take the transfer.
func Start(ctx context.Context, r Recorder, reg transfer.Registration, state func() transfer.Report, warn func(error)) (*Reporter, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	t, err := r.CreateTransfer(rctx, reg)
	cancel()
	if err != nil {
		return nil, err
	}
	x := &Reporter{r: r, id: t.ID, warn: warn}
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	x.stop = func() { stop(); <-done }
	go func() {
		defer close(done)
		tk := time.NewTicker(Every)
		defer tk.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-tk.C:
			}
			x.send(lctx, state())
		}
	}()
	return x, nil
}

// ID is the transfer's ID at the recorder.
func (x *Reporter) ID() string { return x.id }

func (x *Reporter) send(ctx context.Context, rep transfer.Report) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := x.r.ReportTransfer(sctx, x.id, rep)
	x.mu.Lock()
	defer x.mu.Unlock()
	if err != nil && !x.warned && ctx.Err() == nil {
		x.warned = true
		if x.warn != nil {
			x.warn(err)
		}
	}
}

// Finish stops the reports and sends the outcome. A nil Reporter does
// nothing.
func (x *Reporter) Finish(final transfer.Report) {
	if x == nil {
		return
	}
	x.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	x.send(ctx, final)
}

// Progress is a running copy as its meter reads it (cp reads
// mover.Meter): the payload carried so far over every attempt, the bytes
// the copy expects (0: not known) and its data streams' transport state.
type Progress struct {
	Sent, Total int64
	Streams     []Stream
}

// Stream is one data stream's transport state, the figures of
// transport.Stats that a report carries.
type Stream struct {
	RTT, MinRTT       time.Duration
	Cwnd, Retransmits uint32
	// PacingRate and DeliveryRate are in bytes per second, as the kernel
	// gives them.
	PacingRate, DeliveryRate uint64
	BytesAcked               uint64
}

// Running is a copy's report while it runs, from its progress p;
// reserved, when set, is the bytes carried on the reserved path so far.
func Running(p Progress, reserved func() int64) transfer.Report {
	rep := transfer.Report{BytesDone: p.Sent, BytesTotal: p.Total, BytesByPath: map[string]int64{"routed": p.Sent}}
	for _, in := range p.Streams {
		rep.Streams = append(rep.Streams, transfer.Stream{RTTSeconds: in.RTT.Seconds(), MinRTTSeconds: in.MinRTT.Seconds(), Cwnd: in.Cwnd,
			Retransmits: in.Retransmits, PacingBps: float64(in.PacingRate) * 8, DeliveryBps: float64(in.DeliveryRate) * 8, BytesAcked: in.BytesAcked})
	}
	if reserved != nil {
		r := min(max(reserved(), 0), p.Sent)
		rep.BytesByPath = map[string]int64{"routed": p.Sent - r, "reserved": r}
	}
	return rep
}

// Result is a finished copy as its last report tells it (cp reads
// mover.Summary).
type Result struct {
	BytesSent int64
	// Verified: every file arrived and was verified.
	Verified bool
	// Interrupted: the copy was stopped (by its user) before it ended.
	Interrupted               bool
	Bottleneck, BottleneckWhy string
	ThroughputBps             float64
	// Errors are what failed; a failed copy's report gives the first.
	Errors []string
}

// Outcome is a finished copy's last report: succeeded, failed, or
// interrupted (with interruptedWhy) when it was stopped before it was
// verified. byPath and reservation are the bytes per path and the
// reservation that carried it, if any.
func Outcome(res Result, byPath map[string]int64, reservation, interruptedWhy string) transfer.Report {
	rep := transfer.Report{State: transfer.Succeeded, BytesDone: res.BytesSent, BytesByPath: byPath, Reservation: reservation,
		Verified: res.Verified, Bottleneck: res.Bottleneck, BottleneckWhy: res.BottleneckWhy, ThroughputBps: res.ThroughputBps}
	switch {
	case res.Interrupted && !res.Verified:
		rep.State, rep.Error = transfer.Interrupted, interruptedWhy
	case !res.Verified || len(res.Errors) > 0:
		rep.State = transfer.Failed
		if len(res.Errors) > 0 {
			rep.Error = res.Errors[0]
		}
	}
	return rep
}
