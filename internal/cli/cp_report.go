package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lightpath/lightpath/internal/booking"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/report"
)

// record registers the copy with the controller (package report): its
// ends as the topology's nodes and its flow, and its reservation when it
// booked one; then it reports the meter every second. It returns nil,
// said on stderr, when the controller cannot take it: the copy goes on.
func (o cpFlags) record(ctx context.Context, job *cpJob, bk *cpReserve, m *mover.Meter, stderr io.Writer) *report.Reporter {
	reg := transfer.Registration{Direction: string(job.Direction), Source: job.src, Destination: job.dst}
	if job.Direction == mover.Push {
		reg.BytesTotal = job.Source.Size()
	}
	var reserved func() int64
	c := bk.c
	if bk.b != nil {
		r := bk.b.Booked()
		reg.From, reg.To, reg.Flow, reg.Reservation = r.From, r.To, bk.b.Flow().String(), r.ID
		reserved = bk.b.Reserved
	} else {
		var err error
		if c, err = o.reserve.ctl.client(); err != nil {
			fmt.Fprintf(stderr, "lightpath: cp: the controller does not record this transfer: %v\n", err)
			return nil
		}
		reg.From, reg.To, reg.Flow = copyEnds(ctx, c, job)
	}
	rep, err := report.Start(ctx, c, reg, func() transfer.Report { return report.Running(meterProgress(m), reserved) }, func(err error) {
		fmt.Fprintf(stderr, "lightpath: cp: report to the controller: %s; the copy goes on\n", textsafe.Sanitize(textsafe.OneLine(err.Error())))
	})
	if err != nil {
		fmt.Fprintf(stderr, "lightpath: cp: the controller does not record this transfer: %s\n", textsafe.Sanitize(textsafe.OneLine(err.Error())))
		return nil
	}
	return rep
}

// meterProgress reads the copy's meter as its report takes it.
func meterProgress(m *mover.Meter) report.Progress {
	s := m.Now()
	p := report.Progress{Sent: s.Sent, Total: s.Total}
	for _, st := range m.Streams() {
		p.Streams = append(p.Streams, report.Stream{RTT: st.RTT, MinRTT: st.MinRTT, Cwnd: st.Cwnd, Retransmits: st.Retransmits,
			PacingRate: st.PacingRate, DeliveryRate: st.DeliveryRate, BytesAcked: st.BytesAcked})
	}
	return p
}

// copyResult is the copy's summary as its last report takes it.
func copyResult(s mover.Summary) report.Result {
	return report.Result{BytesSent: s.BytesSent, Verified: s.Verified, Interrupted: s.Interrupted, Bottleneck: s.Bottleneck.What,
		BottleneckWhy: s.Bottleneck.Why, ThroughputBps: s.ThroughputBps(), Errors: s.Errors}
}

// copyEnds are the copy's ends as the topology's nodes and its flow, when
// they are in it.
func copyEnds(ctx context.Context, c *client.Client, job *cpJob) (from, to, flow string) {
	cl, srv, err := booking.Route(job.addr)
	if err != nil {
		return "", "", ""
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	topo, err := c.Topology(tctx)
	if err != nil {
		return "", "", ""
	}
	p, err := booking.PlanCopy(topo, job.Direction == mover.Push, cl, srv)
	if err != nil {
		return "", "", ""
	}
	return p.From, p.To, p.Flow.String()
}
