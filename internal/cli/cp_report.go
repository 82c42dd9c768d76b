package cli

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/transfer"
)

// cpReport is cp's side of a controller's transfer record: registered as
// the copy starts, told its progress every second (bytes, bytes per path,
// each stream's TCP state) and its outcome at the end. The controller
// being away never stops the copy: a failed report is said once on stderr
// and the copy goes on.
type cpReport struct {
	c      *client.Client
	id     string
	stderr io.Writer

	mu     sync.Mutex
	warned bool
	stop   func()
}

// reportEvery is how often cp reports while it copies.
const reportEvery = time.Second

// registerTransfer registers the copy. It returns nil (and says why on
// stderr) when the controller cannot take it.
func registerTransfer(ctx context.Context, c *client.Client, reg transfer.Registration, stderr io.Writer) *cpReport {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	t, err := c.CreateTransfer(rctx, reg)
	if err != nil {
		fmt.Fprintf(stderr, "lightpath: cp: the controller does not record this transfer: %s\n", textsafe.Sanitize(oneLine(err.Error())))
		return nil
	}
	return &cpReport{c: c, id: t.ID, stderr: stderr}
}

// run reports every second until stopped; state reads what to report.
func (x *cpReport) run(ctx context.Context, state func() transfer.Report) {
	if x == nil {
		return
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	x.stop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		t := time.NewTicker(reportEvery)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			x.send(rctx, state())
		}
	}()
}

func (x *cpReport) send(ctx context.Context, rep transfer.Report) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := x.c.ReportTransfer(sctx, x.id, rep)
	x.mu.Lock()
	defer x.mu.Unlock()
	if err != nil && !x.warned && ctx.Err() == nil {
		x.warned = true
		fmt.Fprintf(x.stderr, "lightpath: cp: report to the controller: %s; the copy goes on\n", textsafe.Sanitize(oneLine(err.Error())))
	}
}

// finish stops the reports and sends the outcome: succeeded, failed, or
// interrupted when the user stopped the copy.
func (x *cpReport) finish(sum cpSummary, interrupted bool) {
	if x == nil {
		return
	}
	if x.stop != nil {
		x.stop()
	}
	rep := transfer.Report{State: transfer.Succeeded, BytesDone: sum.BytesSent, BytesByPath: sum.BytesByPath, Reservation: sum.Reservation,
		Verified: sum.Verified, Bottleneck: sum.Bottleneck, BottleneckWhy: sum.BottleneckWhy, ThroughputBps: sum.ThroughputBps}
	switch {
	case interrupted && !sum.Verified:
		rep.State, rep.Error = transfer.Interrupted, "interrupted by the user: run the same command again to resume"
	case !sum.Verified || len(sum.Errors) > 0:
		rep.State = transfer.Failed
		if len(sum.Errors) > 0 {
			rep.Error = sum.Errors[0]
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	x.send(ctx, rep)
}

// streamStates reads the running attempt's TCP state per stream.
func streamStates(p *mover.Progress) []transfer.Stream {
	if p == nil {
		return nil
	}
	var out []transfer.Stream
	for _, in := range p.Streams() {
		out = append(out, transfer.Stream{RTTSeconds: in.RTT.Seconds(), MinRTTSeconds: in.MinRTT.Seconds(), Cwnd: in.Cwnd,
			Retransmits: in.Retransmits, PacingBps: float64(in.PacingRate) * 8, DeliveryBps: float64(in.DeliveryRate) * 8, BytesAcked: in.BytesAcked})
	}
	return out
}
