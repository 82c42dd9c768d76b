package cli

// cp --reserve: its flags, and what cp says of the reservation that
// package booking books for the copy, follows and releases.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lightpath/lightpath/internal/booking"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/units"
)

// cpCtlTimeout bounds each request to the controller: a controller that
// does not answer delays the copy by at most this much.
const cpCtlTimeout = 10 * time.Second

// reserveFlags are cp's reservation flags.
type reserveFlags struct {
	ctl      ctlFlags // without --json, which is cp's own
	rate     string   // "" (no reservation), a rate, or "auto"
	required bool
	path     []string
	duration time.Duration
	project  string
}

func (f *reserveFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.rate, "reserve", "", "book guaranteed bandwidth for this copy's flows: a rate (300M, 2G) or auto (the widest free); see above")
	fs.BoolVar(&f.required, "reserve-required", false, "fail, copying nothing, when the reservation cannot be booked (default: copy on the routed path with a warning)")
	fs.StringSliceVar(&f.path, "reserve-path", nil, "the links to reserve, in the direction the data flows (default: the controller's choice)")
	fs.DurationVar(&f.duration, "reserve-duration", 0, "the window to book (default: from the size at the reserved rate for a push, 1h for a pull)")
	fs.StringVar(&f.project, "reserve-project", "", "the project to book under (its quota and policy apply)")
	fs.StringVar(&f.ctl.url, "controller", "", "the controller to book with (--reserve) and to record the transfer at: http://HOST:PORT, https://HOST:PORT or unix:PATH, or several comma-separated (default: $LIGHTPATH_CONTROLLER, else "+defaultController+")")
	fs.StringVar(&f.ctl.tokenFile, "controller-token-file", "", "with --reserve: file holding your controller token (default: $LIGHTPATH_CONTROLLER_TOKEN)")
	fs.StringVar(&f.ctl.caFile, "controller-ca", "", "with --reserve: CA certificate (PEM) to verify an https controller with")
	fs.DurationVar(&f.ctl.timeout, "controller-timeout", cpCtlTimeout, "with --reserve: give up on a request the controller has not answered in this long")
}

// check refuses reservation flags without --reserve, and a bad rate.
func (f *reserveFlags) check() error {
	if f.rate == "" {
		switch {
		case f.required:
			return errors.New("--reserve-required needs --reserve RATE|auto")
		case len(f.path) > 0:
			return errors.New("--reserve-path needs --reserve RATE|auto")
		case f.duration != 0:
			return errors.New("--reserve-duration needs --reserve RATE|auto")
		case f.project != "":
			return errors.New("--reserve-project needs --reserve RATE|auto")
		}
		return nil
	}
	if f.duration < 0 {
		return errors.New("--reserve-duration must be above zero")
	}
	if f.auto() {
		return nil
	}
	if _, err := parseBandwidth("--reserve", f.rate, true); err != nil {
		return fmt.Errorf("%w (or --reserve auto)", err)
	}
	return nil
}

func (f *reserveFlags) auto() bool { return strings.EqualFold(strings.TrimSpace(f.rate), "auto") }

// reservationEvent is cp --json's line for each change of the reservation
// seen while copying: its state, and how many bytes the copy had carried.
type reservationEvent struct {
	Type      string        `json:"type"` // "reservation"
	ID        string        `json:"id"`
	State     reserve.State `json:"state"`
	Degraded  bool          `json:"degraded"`
	Reason    string        `json:"reason,omitempty"`
	Bandwidth uint64        `json:"bandwidth_bps"`
	Path      string        `json:"path,omitempty"`
	FlowSpec  string        `json:"flow_spec,omitempty"`
	Seconds   float64       `json:"seconds"`
	BytesSent int64         `json:"bytes_sent"`
}

// cpReserve is cp's side of --reserve: booked before the copy (package
// booking), its changes said while it runs, released after.
type cpReserve struct {
	f       *reserveFlags
	c       *client.Client
	b       *booking.Booking
	failure string // why there is no reservation
	jsonOut bool
	quiet   bool
	out     *ndjson
	stderr  io.Writer
}

// start books the reservation and starts following it; bytes is the
// copy's running count. Without --reserve-required a failure is a warning
// and the copy goes on.
func (x *cpReserve) start(ctx context.Context, job *cpJob, bytes func() int64) error {
	cl, srv, err := booking.Route(job.addr)
	if err == nil {
		x.c, err = x.f.ctl.client()
	}
	if err == nil {
		req := booking.Request{Push: job.Direction == mover.Push, Client: cl, Server: srv, Cap: job.Config.Tuning.Rate,
			Duration: x.f.duration, Path: x.f.path, Project: x.f.project, UDP: job.Config.Tuning.Transport == mover.TransportUDP}
		if req.Push {
			req.Size = job.Source.Size()
		}
		if !x.f.auto() {
			req.Bandwidth, _ = parseBandwidth("--reserve", x.f.rate, true)
		}
		x.b, err = booking.Book(ctx, x.c, req, booking.Watcher{Bytes: bytes, Changed: x.note,
			Lost: func(err error) {
				fmt.Fprintf(x.stderr, "lightpath: cp: %s; resuming\n", textsafe.Sanitize(textsafe.OneLine(err.Error())))
			},
			Failed: func(err error) {
				fmt.Fprintf(x.stderr, "lightpath: cp: %s; the copy goes on, its bytes per path are counted up to here\n", textsafe.Sanitize(textsafe.OneLine(err.Error())))
			}})
	}
	if err != nil {
		if x.f.required {
			return fmt.Errorf("--reserve-required: %w", err)
		}
		x.failure = textsafe.OneLine(err.Error())
		fmt.Fprintf(x.stderr, "lightpath: cp: no reservation: %s; copying on the routed path\n", textsafe.Sanitize(x.failure))
	}
	return nil
}

// bandwidth is the booked reservation's rate in bits per second; 0 when
// none was booked.
func (x *cpReserve) bandwidth() uint64 {
	if x.b == nil {
		return 0
	}
	return x.b.Booked().Bandwidth
}

// note says what became of the reservation: an NDJSON line with --json,
// a line on stderr otherwise (not with --quiet).
func (x *cpReserve) note(r reserve.Reservation, sent int64, at time.Duration) {
	reason := r.FailureReason
	if r.Degraded {
		reason = r.DegradedReason
	}
	if x.jsonOut {
		x.out.write(reservationEvent{Type: "reservation", ID: r.ID, State: r.State, Degraded: r.Degraded, Reason: reason,
			Bandwidth: r.Bandwidth, Path: client.PathString(r.Path), FlowSpec: r.FlowSpec.String(), Seconds: at.Seconds(), BytesSent: sent})
		return
	}
	if x.quiet {
		return
	}
	var msg string
	switch {
	case r.State == reserve.StateActive && r.Degraded:
		msg = fmt.Sprintf("reservation %s is degraded (%s): the flows may be on the routed path", r.ID, reason)
	case r.State == reserve.StateActive:
		msg = fmt.Sprintf("reservation %s is ACTIVE: the flows move onto %s (%s carried before)", r.ID, client.PathString(r.Path), units.FormatSize(sent))
	case r.State.Terminal():
		msg = fmt.Sprintf("reservation %s is %s", r.ID, r.State)
		if reason != "" {
			msg += " (" + reason + ")"
		}
		msg += ": the flows go back to the routed path"
	default:
		msg = fmt.Sprintf("reserved %s: %s → %s at %s via %s for %s, %s; copying on the routed path until it is ACTIVE",
			r.ID, r.From, r.To, fmtRate(r.Bandwidth), client.PathString(r.Path), r.FlowSpec, r.State)
	}
	x.line(msg)
}

// line writes an informational line on stderr, over the progress bar when
// there is one.
func (x *cpReserve) line(msg string) {
	prefix := ""
	if f, ok := x.stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			prefix = "\r\x1b[K"
		}
	}
	fmt.Fprintf(x.stderr, "%scp: %s\n", prefix, textsafe.Sanitize(msg)) // reasons come from the controller
}

// finish releases the reservation and fills the summary's fields: which
// path carried how many of the sent bytes.
func (x *cpReserve) finish(sum *cpSummary, interrupted bool) {
	if x.b == nil {
		sum.ReservationError = x.failure
		sum.BytesByPath = booking.ByPath(sum.BytesSent, 0)
		return
	}
	why := "lightpath cp finished"
	if interrupted {
		why = "lightpath cp interrupted"
	}
	out, err := x.b.Release(why, sum.BytesSent)
	booked := x.b.Booked()
	sum.Reservation = booked.ID
	sum.ReservedBps = booked.Bandwidth
	sum.ReservationPath = client.PathString(booked.Path)
	sum.ReservationState = string(out.Final.State)
	sum.ReservedSeconds = out.For.Seconds()
	sum.BytesByPath = booking.ByPath(sum.BytesSent, out.Reserved)
	if err != nil {
		sum.ReservationError = textsafe.OneLine(err.Error())
		fmt.Fprintf(x.stderr, "lightpath: cp: %s; cancel it with lightpath reserve cancel %s\n", textsafe.Sanitize(sum.ReservationError), booked.ID)
	}
}

// printReservationSummary is the summary's line about --reserve.
func printReservationSummary(w io.Writer, s cpSummary) {
	if s.BytesByPath == nil {
		return
	}
	if s.Reservation == "" {
		fmt.Fprintf(w, "  no reservation (see the warning above): routed %s\n", units.FormatSize(s.BytesByPath["routed"]))
		return
	}
	fmt.Fprintf(w, "  reservation %s, %s via %s: reserved path %s, routed %s; %s\n", s.Reservation, fmtRate(s.ReservedBps),
		orDash(s.ReservationPath), units.FormatSize(s.BytesByPath["reserved"]), units.FormatSize(s.BytesByPath["routed"]), releasedWord(s))
}

func releasedWord(s cpSummary) string {
	switch {
	case s.ReservationState == string(reserve.StateCancelled) && s.ReservationError == "":
		return "released"
	case s.ReservationError != "":
		return s.ReservationState + ", NOT released: " + s.ReservationError
	}
	return "it ended " + s.ReservationState
}
