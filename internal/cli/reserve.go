package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/units"
)

// parseCompletion reads the flags of an earliest completion, which create
// and find take alike: --size, --bandwidth (the highest rate wanted, any
// when not given) and --start (the earliest, default now).
func parseCompletion(size, bandwidth string, w window, now time.Time) (sizeBytes, bps uint64, start time.Time, err error) {
	if sizeBytes, err = parseSizeFlag("--size", size); err != nil {
		return 0, 0, start, err
	}
	if bps, err = parseBandwidth("--bandwidth", bandwidth, false); err != nil {
		return 0, 0, start, err
	}
	start, _, _, err = w.resolve(now, false)
	return sizeBytes, bps, start, err
}

// printReservations writes the table of list.
func printReservations(w io.Writer, rs []reserve.Reservation) {
	printTable(w, []string{"ID", "STATE", "FROM", "TO", "BANDWIDTH", "START", "END", "PATH", "OWNER", "PROJECT"}, rs,
		func(r reserve.Reservation) []string {
			return []string{r.ID, fmtState(r), r.From, r.To, fmtRate(r.Bandwidth),
				fmtTime(r.Start), fmtTime(r.End), orDash(client.PathString(r.Path)), r.Owner, orDash(r.Project)}
		})
}

// describeReservation is one line about a reservation, for create, modify
// and the actions.
func describeReservation(r reserve.Reservation) string {
	s := fmt.Sprintf("%s %s: %s → %s at %s, %s → %s (%s)", r.ID, fmtState(r), r.From, r.To, fmtRate(r.Bandwidth),
		fmtTime(r.Start), fmtTime(r.End), units.FormatDuration(r.End.Sub(r.Start)))
	if len(r.Path) > 0 {
		s += " via " + client.PathString(r.Path)
	}
	return s
}

// printReservation writes one reservation in full, with its history.
func printReservation(w io.Writer, r reserve.Reservation) {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, textsafe.Sanitize(v)) }
	row("id", fmt.Sprintf("%s (version %d)", r.ID, r.Version))
	row("state", fmtState(r))
	if r.DegradedReason != "" {
		row("degraded", r.DegradedReason)
	}
	if r.FailureReason != "" {
		row("failed", r.FailureReason)
	}
	owner := r.Owner
	if r.Project != "" {
		owner += " (project " + r.Project + ")"
	}
	row("owner", owner)
	row("from → to", r.From+" → "+r.To)
	row("bandwidth", fmtRate(r.Bandwidth))
	row("window", fmt.Sprintf("%s → %s (%s)", fmtTime(r.Start), fmtTime(r.End), units.FormatDuration(r.End.Sub(r.Start))))
	if len(r.Path) > 0 {
		row("path", pathHops(r.Path))
	}
	if !r.HoldExpires.IsZero() {
		row("hold expires", fmtTime(r.HoldExpires)+" (commit before then: lightpath reserve commit "+r.ID+")")
	}
	if !r.FlowSpec.IsZero() {
		row("flows", r.FlowSpec.String())
	}
	if r.DSCP != 0 {
		row("dscp", strconv.Itoa(int(r.DSCP)))
	}
	if len(r.ManagedNodes) > 0 {
		m := strings.Join(r.ManagedNodes, ", ")
		if p := r.Pending(); len(p) > 0 {
			m += " (waiting for " + strings.Join(p, ", ") + ")"
		}
		row("managed nodes", m)
	}
	row("created", fmtTime(r.CreatedAt))
	tw.Flush()
	if len(r.History) == 0 {
		return
	}
	fmt.Fprintln(w, "\nhistory:")
	printHistory(w, r.History)
}

// pathHops writes a path hop by hop: "a1 -a1-ra-> ra -wan-> rb".
func pathHops(p []reserve.PathHop) string {
	if len(p) == 0 {
		return ""
	}
	hops := p[0].From
	for _, h := range p {
		hops += " -" + h.Link + "-> " + h.To
	}
	return hops
}

// printHistory writes transitions as an indented table.
func printHistory(w io.Writer, ts []reserve.Transition) {
	printTable(w, []string{"  AT", "EVENT", "STATE", "BY", "VERSION", "WHY"}, ts, func(t reserve.Transition) []string {
		st := string(t.To)
		if t.From != "" && t.From != t.To {
			st = string(t.From) + " → " + string(t.To)
		}
		return []string{"  " + fmtTime(t.At), string(t.Event), st, t.By, strconv.FormatUint(t.Version, 10), t.Why}
	})
}

func describeSlot(s apiv1.Slot) string {
	var b strings.Builder
	if s.Bandwidth > 0 {
		b.WriteString(fmtRate(s.Bandwidth))
	}
	if !s.Start.IsZero() {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s → %s", fmtTime(s.Start), fmtTime(s.End))
		if !s.End.IsZero() {
			fmt.Fprintf(&b, " (%s)", units.FormatDuration(s.End.Sub(s.Start)))
		}
	}
	if len(s.Path) > 0 {
		b.WriteString(" via " + client.PathString(s.Path))
	}
	if s.Algorithm != "" {
		b.WriteString(" [" + s.Algorithm + "]")
	}
	return b.String()
}

func printExclusives(w io.Writer, xs []reserve.Exclusive) {
	printTable(w, []string{"ID", "STATE", "HOLDS", "NODES", "START", "END", "OWNER", "PROJECT"}, xs, func(x reserve.Exclusive) []string {
		return []string{x.ID, string(x.State), exclusiveWhat(x), orDash(strings.Join(x.Nodes, ",")),
			fmtTime(x.Start), fmtTime(x.End), x.Owner, orDash(x.Project)}
	})
}

func exclusiveWhat(x reserve.Exclusive) string {
	if x.Site != "" {
		return "site " + x.Site
	}
	return "node " + x.Node
}

// ---------------------------------------------------------------------------
// The commands.

func newReserveCmd() *cobra.Command {
	var o ctlFlags
	cmd := &cobra.Command{
		Use:   "reserve",
		Short: "Book guaranteed bandwidth between two nodes ahead of time, through the controller",
		Long: `Book, find, list, change and cancel reservations of bandwidth on the
controller (lightpath controller), and hold nodes or sites exclusively.

A reservation guarantees BANDWIDTH from --from to --to (directed: the
reverse direction is routed without a guarantee) over [start, end), along a
path of links the controller picks or you name. Times are RFC 3339
(2026-05-01T14:00:00Z), now, or +DURATION from now (+2h, +1d); rates are
bits per second (500M, 10G); sizes are bytes (2GB, 1TiB).

Every verb takes --controller URL (http://HOST:PORT, https://HOST:PORT or
unix:PATH; default $LIGHTPATH_CONTROLLER, else http://127.0.0.1:8080), your
token from --controller-token-file F or $LIGHTPATH_CONTROLLER_TOKEN, and
--json for NDJSON output. See docs/reserve.md.`,
		Example: `  export LIGHTPATH_CONTROLLER=http://127.0.0.1:8080 LIGHTPATH_CONTROLLER_TOKEN=$(cat alice.token)
  lightpath reserve find --from a1 --to b1 --bandwidth 500M --duration 2h --earliest
  lightpath reserve create --from a1 --to b1 --bandwidth 500M --start +1h --duration 2h
  lightpath reserve list --state RESERVED
  lightpath reserve watch r-7c1e --until ACTIVE
  lightpath reserve cancel r-7c1e --reason "run postponed"`,
	}
	o.register(cmd.PersistentFlags())
	verbGroup(cmd)
	cmd.AddCommand(newReserveCreateCmd(&o), newReserveFindCmd(&o), newReserveListCmd(&o), newReserveShowCmd(&o),
		newReserveModifyCmd(&o), newReserveCancelCmd(&o), newReserveCommitCmd(&o), newReserveWatchCmd(&o),
		newReserveExclusiveCmd(&o))
	return cmd
}

type createFlags struct {
	window
	from, to, bandwidth, size, deadline, project, flow, hold, key, owner string
	path                                                                 []string
}

// holdDefault is what --hold without a value sends: the longest hold the
// controller allows by default (its --hold-timeout).
const holdDefault = "15m"

func newReserveCreateCmd(o *ctlFlags) *cobra.Command {
	var f createFlags
	cmd := &cobra.Command{
		Use:   "create --from NODE --to NODE --bandwidth RATE [--start TIME] (--duration D | --end TIME) | --size S [--deadline TIME]",
		Short: "Book a reservation: a fixed slot, or the earliest completion of a transfer",
		Long: `Book BANDWIDTH from --from to --to over a window: --start (default now) and
--duration or --end. The controller picks the path unless --path names its
links. With --hold the reservation is HELD: it is released unless
committed (lightpath reserve commit ID) before the hold expires; --hold
alone asks for 15m, --hold=D for D.

With --size instead of a window, the controller books the earliest
completion of that much data: --bandwidth is then the highest rate wanted
(default: whatever the network can give) and --deadline, when given, is
when the data must have arrived.

When the bandwidth does not fit, nothing is booked and the error names the
alternatives: the earliest slot at that bandwidth, and the widest
bandwidth in that slot (with --json, stdout gets the error object).

Each create carries an idempotency key (random unless --idempotency-key
gives one): a request that timed out is sent once more with the same key,
and the controller books it once.`,
		Example: `  lightpath reserve create --from a1 --to b1 --bandwidth 500M --start +1h --duration 2h
  lightpath reserve create --from a1 --to b1 --bandwidth 1G --start 2026-05-01T14:00:00Z --end 2026-05-01T18:00:00Z \
      --project cms --flow 'tcp 198.18.1.2 > 198.18.2.2:7070' --path l1,wan,l2
  lightpath reserve create --from a1 --to b1 --bandwidth 2G --duration 30m --hold
  lightpath reserve create --from a1 --to b1 --size 2TB --deadline +12h --bandwidth 5G
  lightpath reserve create --from a1 --to b1 --bandwidth 500M --duration 1h --json | jq -r .id`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			hold := f.hold
			if hold == "default" {
				hold = holdDefault
			}
			return runReserveCreate(cmd, o, f, hold)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.from, "from", "", "the node the data leaves from (the guarantee runs from here)")
	fs.StringVar(&f.to, "to", "", "the node the data goes to")
	fs.StringVar(&f.bandwidth, "bandwidth", "", "the rate to guarantee, e.g. 500M or 10G; with --size, the highest rate wanted")
	f.window.register(fs, "when it starts: RFC 3339, a local date and time, now or +DURATION (default now)")
	fs.StringVar(&f.size, "size", "", "book the earliest completion of this much data instead of a window, e.g. 2GB or 1TiB")
	fs.StringVar(&f.deadline, "deadline", "", "with --size: when the data must have arrived")
	fs.StringVar(&f.project, "project", "", "the project to book under (its quota and policy apply)")
	fs.StringVar(&f.flow, "flow", "", "the flows to steer onto the path: 'PROTO SRC[:PORTS] > DST[:PORTS]', several joined by ','")
	fs.StringSliceVar(&f.path, "path", nil, "the links to take, in order from --from (default: the controller picks)")
	fs.StringVar(&f.hold, "hold", "", "book it HELD, released unless committed within 15m (or --hold=D)")
	fs.Lookup("hold").NoOptDefVal = "default"
	fs.StringVar(&f.key, "idempotency-key", "", "the create's idempotency key (default: a random one)")
	fs.StringVar(&f.owner, "owner", "", "book on someone else's behalf (operators and admins)")
	return cmd
}

func runReserveCreate(cmd *cobra.Command, o *ctlFlags, f createFlags, hold string) error {
	const what = "reserve create"
	now := resolveNow()
	req := apiv1.ReservationRequest{From: f.from, To: f.to, Project: f.project, Path: f.path, Owner: f.owner, IdempotencyKey: f.key}
	if f.from == "" || f.to == "" {
		return fmt.Errorf("%s: --from and --to are required", what)
	}
	if f.flow != "" {
		if _, err := reserve.ParseFlowSpec(f.flow); err != nil {
			return fmt.Errorf("%s: --flow: %w", what, err)
		}
		req.FlowSpec = f.flow
	}
	if hold != "" {
		d, err := parseSpan(hold)
		if err != nil {
			return fmt.Errorf("%s: --hold: %w", what, err)
		}
		req.Hold = d.String()
	}
	if err := f.when(&req, now); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = newIdempotencyKey()
	}
	resp, err := fetch(o, what, func(c *client.Client) (apiv1.ReservationResponse, error) {
		return c.CreateReservationRetrying(cmd.Context(), req, startsNow(f.start))
	})
	out := cmd.OutOrStdout()
	if err != nil {
		o.writeRefusal(out, err)
		return err
	}
	if o.json {
		(&ndjson{w: out}).write(createdLine{Reservation: resp.Reservation, Created: resp.Created, Algorithm: resp.Algorithm})
		return nil
	}
	r := resp.Reservation
	verb := "reserved"
	if r.State == reserve.StateHeld {
		verb = "held"
	}
	fmt.Fprintf(out, "%s %s\n", verb, textsafe.Sanitize(describeReservation(r)))
	if !resp.Created {
		fmt.Fprintf(out, "  (booked by an earlier try with idempotency key %s: nothing new was booked)\n", req.IdempotencyKey)
	}
	if r.State == reserve.StateHeld && !r.HoldExpires.IsZero() {
		fmt.Fprintf(out, "  commit before %s, or it is released: lightpath reserve commit %s\n", fmtTime(r.HoldExpires), r.ID)
	}
	return nil
}

// when fills in req's rate and time from the flags create and ticket open
// share: --bandwidth over --start (default now) with --duration or --end,
// or with --size the earliest completion at up to --bandwidth, by
// --deadline when given. Its errors name the flag at fault.
func (f createFlags) when(req *apiv1.ReservationRequest, now time.Time) error {
	var err error
	if f.size != "" {
		if f.duration != "" || f.end != "" {
			return errors.New("--size books the earliest completion: give --deadline, not --duration or --end")
		}
		if req.SizeBytes, req.Bandwidth, req.Start, err = parseCompletion(f.size, f.bandwidth, f.window, now); err != nil {
			return err
		}
		if f.deadline != "" {
			if req.Deadline, err = parseWhen(f.deadline, now); err != nil {
				return fmt.Errorf("--deadline: %w", err)
			}
		}
		return nil
	}
	if f.deadline != "" {
		return errors.New("--deadline goes with --size (the earliest completion of a transfer)")
	}
	if req.Bandwidth, err = parseBandwidth("--bandwidth", f.bandwidth, true); err != nil {
		return err
	}
	var d time.Duration
	if req.Start, req.End, d, err = f.window.resolve(now, true); err != nil {
		return err
	}
	if d > 0 {
		req.Duration = d.String()
	}
	return nil
}

// startsNow reports whether a --start means the moment the command runs.
func startsNow(s string) bool {
	return strings.TrimSpace(s) == "" || strings.EqualFold(strings.TrimSpace(s), "now")
}

// createdLine is create's --json line: the reservation object, plus
// whether this request booked it and the algorithm that placed it.
type createdLine struct {
	reserve.Reservation
	Created   bool   `json:"created"`
	Algorithm string `json:"algorithm,omitempty"`
}

type findFlags struct {
	window
	from, to, bandwidth, size, horizon, deadline, project string
	path                                                  []string
	earliest, all, widest                                 bool
}

func newReserveFindCmd(o *ctlFlags) *cobra.Command {
	var f findFlags
	cmd := &cobra.Command{
		Use:   "find --from NODE --to NODE [--bandwidth RATE] [--start TIME] (--duration D | --end TIME) [--earliest | --all | --widest | --size S]",
		Short: "Ask the scheduler when and where a reservation would fit, without booking",
		Long: `Ask the controller's scheduler, booking nothing:

  (default)    does --bandwidth fit from --start for --duration (or to --end)?
               On which path?
  --widest     the widest bandwidth free over that window, and its path
  --earliest   the earliest start at or after --start for --bandwidth and
               --duration
  --all        every window of feasible starts for --bandwidth and --duration
  --size S     the earliest completion of S bytes at up to --bandwidth,
               arriving by --deadline when given (as create takes it)

--horizon bounds how late the answer may end (default: your policy's
booking horizon); --path fixes the links. When nothing fits, the command
fails and names the alternatives. Times are RFC 3339, a local date and
time (2026-11-26 09:00), now, or +DURATION.`,
		Example: `  lightpath reserve find --from a1 --to b1 --bandwidth 500M --start +1h --duration 2h
  lightpath reserve find --from a1 --to b1 --bandwidth 500M --duration 2h --earliest
  lightpath reserve find --from a1 --to b1 --bandwidth 500M --duration 2h --all --horizon +2d
  lightpath reserve find --from a1 --to b1 --start +1h --duration 2h --widest
  lightpath reserve find --from a1 --to b1 --size 2TB --bandwidth 5G
  lightpath reserve find --from a1 --to b1 --size 500GB --deadline "2026-11-26 09:00"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runReserveFind(cmd, o, f) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.from, "from", "", "the node the data leaves from")
	fs.StringVar(&f.to, "to", "", "the node the data goes to")
	fs.StringVar(&f.bandwidth, "bandwidth", "", "the rate wanted, e.g. 500M; with --size, the highest rate")
	f.window.register(fs, "the earliest start to consider: RFC 3339, a local date and time, now or +DURATION (default now)")
	fs.BoolVar(&f.earliest, "earliest", false, "find the earliest start for --bandwidth and --duration")
	fs.BoolVar(&f.all, "all", false, "list every window of feasible starts for --bandwidth and --duration")
	fs.BoolVar(&f.widest, "widest", false, "find the widest bandwidth free over the window")
	fs.StringVar(&f.size, "size", "", "find the earliest completion of this much data, e.g. 2GB")
	fs.StringVar(&f.horizon, "horizon", "", "the latest end to consider: RFC 3339, a local date and time, or +DURATION")
	fs.StringVar(&f.deadline, "deadline", "", "with --size: when the data must have arrived (the latest end to consider)")
	fs.StringVar(&f.project, "project", "", "the project whose policy applies")
	fs.StringSliceVar(&f.path, "path", nil, "the links to take, in order from --from (default: any path)")
	return cmd
}

func runReserveFind(cmd *cobra.Command, o *ctlFlags, f findFlags) error {
	const what = "reserve find"
	now := resolveNow()
	if f.from == "" || f.to == "" {
		return fmt.Errorf("%s: --from and --to are required", what)
	}
	req := apiv1.FindRequest{Mode: apiv1.FindFixed, From: f.from, To: f.to, Path: f.path, Project: f.project}
	n := 0
	for _, m := range []struct {
		on   bool
		mode string
	}{{f.earliest, apiv1.FindEarliest}, {f.all, apiv1.FindAll}, {f.widest, apiv1.FindWidest}, {f.size != "", apiv1.FindCompletion}} {
		if m.on {
			n++
			req.Mode = m.mode
		}
	}
	if n > 1 {
		return fmt.Errorf("%s: --earliest, --all, --widest and --size exclude each other", what)
	}
	var err error
	if f.horizon != "" {
		if req.Horizon, err = parseWhen(f.horizon, now); err != nil {
			return fmt.Errorf("%s: --horizon: %w", what, err)
		}
	}
	if f.deadline != "" {
		switch {
		case req.Mode != apiv1.FindCompletion:
			return fmt.Errorf("%s: --deadline goes with --size (the earliest completion of a transfer)", what)
		case f.horizon != "":
			return fmt.Errorf("%s: --deadline and --horizon exclude each other: give one", what)
		}
		if req.Horizon, err = parseWhen(f.deadline, now); err != nil {
			return fmt.Errorf("%s: --deadline: %w", what, err)
		}
	}
	var d time.Duration
	switch req.Mode {
	case apiv1.FindFixed, apiv1.FindWidest:
		if req.Bandwidth, err = parseBandwidth("--bandwidth", f.bandwidth, req.Mode == apiv1.FindFixed); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if req.Start, req.End, d, err = f.window.resolve(now, true); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	case apiv1.FindEarliest, apiv1.FindAll:
		if req.Bandwidth, err = parseBandwidth("--bandwidth", f.bandwidth, true); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if f.end != "" {
			return fmt.Errorf("%s: --%s looks for a start: give --duration (and --horizon to bound the search), not --end", what, req.Mode)
		}
		if req.Start, _, d, err = f.window.resolve(now, true); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	case apiv1.FindCompletion:
		if f.duration != "" || f.end != "" {
			return fmt.Errorf("%s: --size finds the earliest completion: give --deadline, not --duration or --end", what)
		}
		if req.SizeBytes, req.Bandwidth, req.Start, err = parseCompletion(f.size, f.bandwidth, f.window, now); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if d > 0 {
		req.Duration = d.String()
	}
	slot, err := fetch(o, what, func(c *client.Client) (apiv1.Slot, error) { return c.Find(cmd.Context(), req) })
	out := cmd.OutOrStdout()
	if err != nil {
		o.writeRefusal(out, err)
		return err
	}
	if o.json {
		(&ndjson{w: out}).write(slot)
		return nil
	}
	printSlot(out, req, slot)
	return nil
}

func printSlot(w io.Writer, req apiv1.FindRequest, s apiv1.Slot) {
	switch req.Mode {
	case apiv1.FindFixed:
		fmt.Fprintf(w, "fits: %s → %s at %s\n", req.From, req.To, describeSlot(s))
	case apiv1.FindWidest:
		fmt.Fprintf(w, "widest: %s → %s at %s\n", req.From, req.To, describeSlot(s))
	case apiv1.FindEarliest:
		fmt.Fprintf(w, "earliest: %s → %s at %s\n", req.From, req.To, describeSlot(s))
	case apiv1.FindCompletion:
		fmt.Fprintf(w, "%s from %s to %s: earliest completion at %s\n", units.FormatSize(int64(req.SizeBytes)), req.From, req.To, describeSlot(s))
	case apiv1.FindAll:
		desc := fmtRate(req.Bandwidth)
		if d, err := time.ParseDuration(req.Duration); err == nil {
			desc += " for " + units.FormatDuration(d)
		}
		if len(s.Path) > 0 {
			desc += " via " + client.PathString(s.Path)
		}
		if len(s.Windows) == 0 {
			fmt.Fprintf(w, "no start fits %s → %s at %s\n", req.From, req.To, desc)
			return
		}
		fmt.Fprintf(w, "starts that fit %s → %s at %s:\n", req.From, req.To, desc)
		printTable(w, []string{"  FIRST START", "LAST START"}, s.Windows, func(win apiv1.Window) []string {
			return []string{"  " + fmtTime(win.First), fmtTime(win.Last)}
		})
	}
}

type listFlags struct {
	owner, project, node, after, before string
	states                              []string
}

func newReserveListCmd(o *ctlFlags) *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:     "list [--owner U] [--state S,...] [--project P] [--node N] [--after TIME] [--before TIME]",
		Aliases: []string{"ls"},
		Short:   "List reservations: your own, or everyone's for an operator",
		Long: `List reservations, oldest start first as the controller orders them: yours,
or everyone's when your role is operator or admin. The filters combine;
--after and --before keep the reservations whose window overlaps
[--after, --before).`,
		Example: `  lightpath reserve list
  lightpath reserve list --state HELD,RESERVED --node ra
  lightpath reserve list --owner alice --project cms --after now --before +1d
  lightpath reserve list --json | jq -r 'select(.id) | .id'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			const what = "reserve list"
			now := resolveNow()
			lo := client.ListOptions{Owner: f.owner, Project: f.project, Node: f.node}
			for _, v := range f.states {
				st, err := reserve.ParseState(strings.ToUpper(strings.TrimSpace(v)))
				if err != nil {
					return fmt.Errorf("%s: --state: %w", what, err)
				}
				lo.States = append(lo.States, string(st))
			}
			var err error
			if f.after != "" {
				if lo.From, err = parseWhen(f.after, now); err != nil {
					return fmt.Errorf("%s: --after: %w", what, err)
				}
			}
			if f.before != "" {
				if lo.To, err = parseWhen(f.before, now); err != nil {
					return fmt.Errorf("%s: --before: %w", what, err)
				}
			}
			rs, err := fetch(o, what, func(c *client.Client) ([]reserve.Reservation, error) { return c.ListReservations(cmd.Context(), lo) })
			if err != nil {
				return err
			}
			printList(cmd.OutOrStdout(), o.json, rs, "no reservations", printReservations)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.owner, "owner", "", "only this user's")
	fs.StringSliceVar(&f.states, "state", nil, "only in these states (repeatable or comma-separated): HELD, RESERVED, ACTIVE, FINISHED, CANCELLED, FAILED")
	fs.StringVar(&f.project, "project", "", "only this project's")
	fs.StringVar(&f.node, "node", "", "only those touching this node")
	fs.StringVar(&f.after, "after", "", "only those ending after this time: RFC 3339, a local date and time, now or +DURATION")
	fs.StringVar(&f.before, "before", "", "only those starting before this time")
	return cmd
}

func newReserveShowCmd(o *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one reservation in full, with its history",
		Long: `Show one reservation: its state, window, bandwidth, path hop by hop, flows,
DSCP, the managed nodes it waits for, and every change in its history (who
did what, when and why).`,
		Example: `  lightpath reserve show r-7c1e
  lightpath reserve show r-7c1e --json | jq '.history[] | .event'`,
		Args: exactArgs("reserve show", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := fetch(o, "reserve show", func(c *client.Client) (reserve.Reservation, error) { return c.Reservation(cmd.Context(), args[0]) })
			if err != nil {
				return err
			}
			if o.json {
				(&ndjson{w: cmd.OutOrStdout()}).write(r)
				return nil
			}
			printReservation(cmd.OutOrStdout(), r)
			return nil
		},
	}
}

type modifyFlags struct {
	window
	bandwidth string
	flowSpec  string
	path      []string
	reroute   bool
}

func newReserveModifyCmd(o *ctlFlags) *cobra.Command {
	var f modifyFlags
	cmd := &cobra.Command{
		Use:   "modify ID [--start TIME] [--end TIME | --duration D] [--bandwidth RATE] [--path LINK,LINK | --reroute] [--flow-spec SPEC]",
		Short: "Change a reservation's window, bandwidth, path or flows",
		Long: `Change a reservation: move or stretch its window, change its bandwidth,
move it to other links (--path) or to a path the controller picks
(--reroute), or change the flows it steers (--flow-spec). What is not given
stays. --duration sets the end that far after the (new) start.

--flow-spec replaces the whole flow spec, in create's syntax (its --flow):
'PROTO SRC[:PORTS] > DST[:PORTS] [uid N] [cgroup PATH]', several joined by
','; each flow runs from an address of the reservation's from node to one
of its to node. Only a reservation booked with a flow spec has one to
change (the DSCP its flows are marked with is given at booking). The agents
steer the new flows as soon as they see the change.

The command reads the reservation first and sends the version it read, so
a change made by someone else in between is refused rather than
overwritten: read it again and retry. A change that does not fit is
refused with the reservation left as it was. An ACTIVE reservation can no
longer move its start.`,
		Example: `  lightpath reserve modify r-7c1e --bandwidth 1G
  lightpath reserve modify r-7c1e --start +2h --duration 3h
  lightpath reserve modify r-7c1e --end 2026-05-01T20:00:00Z
  lightpath reserve modify r-7c1e --reroute
  lightpath reserve modify r-7c1e --flow-spec 'tcp 198.18.1.2 > 198.18.2.2:7070, udp 198.18.1.2 > 198.18.2.2:7070'`,
		Args: exactArgs("reserve modify", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error { return runReserveModify(cmd, o, f, args[0]) },
	}
	fs := cmd.Flags()
	f.window.register(fs, "the new start: RFC 3339, a local date and time, now or +DURATION")
	fs.StringVar(&f.bandwidth, "bandwidth", "", "the new bandwidth, e.g. 1G")
	fs.StringSliceVar(&f.path, "path", nil, "the new links, in order from the reservation's from node")
	fs.BoolVar(&f.reroute, "reroute", false, "let the controller pick a new path for the (new) window and bandwidth")
	fs.StringVar(&f.flowSpec, "flow-spec", "", "the new flows to steer, replacing the flow spec: 'PROTO SRC[:PORTS] > DST[:PORTS] [uid N] [cgroup PATH]', several joined by ',' (--flow too, as create spells it)")
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "flow" {
			name = "flow-spec"
		}
		return pflag.NormalizedName(name)
	})
	return cmd
}

func runReserveModify(cmd *cobra.Command, o *ctlFlags, f modifyFlags, id string) error {
	const what = "reserve modify"
	now := resolveNow()
	if f.start == "" && f.end == "" && f.duration == "" && f.bandwidth == "" && len(f.path) == 0 && !f.reroute && f.flowSpec == "" {
		return fmt.Errorf("%s: nothing to change: give --start, --end, --duration, --bandwidth, --path, --reroute or --flow-spec", what)
	}
	if len(f.path) > 0 && f.reroute {
		return fmt.Errorf("%s: --path and --reroute exclude each other", what)
	}
	var req apiv1.ModifyRequest
	var err error
	if req.Bandwidth, err = parseBandwidth("--bandwidth", f.bandwidth, false); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if f.flowSpec != "" {
		if _, err := reserve.ParseFlowSpec(f.flowSpec); err != nil {
			return fmt.Errorf("%s: --flow-spec: %w", what, err)
		}
		req.FlowSpec = f.flowSpec
	}
	var start, end time.Time
	var d time.Duration
	if f.start != "" || f.end != "" || f.duration != "" {
		if start, end, d, err = f.window.resolve(now, false); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	c, err := o.client()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ctx := cmd.Context()
	cur, err := c.Reservation(ctx, id)
	if err != nil {
		return c.Explain(what, err)
	}
	req.Version, req.Path, req.Reroute = cur.Version, f.path, f.reroute
	if f.start != "" {
		req.Start = start
	} else {
		start = cur.Start
	}
	switch {
	case d > 0:
		req.End = start.Add(d)
	case f.end != "":
		req.End = end
	}
	if !req.End.IsZero() && !req.End.After(start) {
		return fmt.Errorf("%s: the new end %s is not after the start %s", what, fmtTime(req.End), fmtTime(start))
	}
	r, err := c.ModifyReservation(ctx, id, req)
	if err != nil {
		return c.Explain(what, err)
	}
	printOne(cmd.OutOrStdout(), o.json, r, "modified %s (version %d)\n", describeReservation(r), r.Version)
	return nil
}

func newReserveCancelCmd(o *ctlFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel ID [--reason R]",
		Short: "Cancel a reservation, releasing its bandwidth",
		Long: `Cancel a reservation, HELD, RESERVED or ACTIVE: its bandwidth is released at
once (an ACTIVE one's agents take its part down). --reason is recorded in
its history. Cancelling a cancelled reservation again is harmless.`,
		Example: `  lightpath reserve cancel r-7c1e
  lightpath reserve cancel r-7c1e --reason "detector down"`,
		Args: exactArgs("reserve cancel", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := fetch(o, "reserve cancel", func(c *client.Client) (reserve.Reservation, error) {
				return c.CancelReservation(cmd.Context(), args[0], apiv1.ActionRequest{Reason: reason})
			})
			if err != nil {
				return err
			}
			printOne(cmd.OutOrStdout(), o.json, r, "cancelled %s\n", describeReservation(r))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the history")
	return cmd
}

func newReserveCommitCmd(o *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "commit ID",
		Short: "Commit a HELD reservation before its hold expires",
		Long: `Commit a reservation booked with --hold: it becomes RESERVED and keeps its
bandwidth. After the hold expired it is CANCELLED and cannot be committed.`,
		Example: `  lightpath reserve create --from a1 --to b1 --bandwidth 1G --duration 1h --hold
  lightpath reserve commit r-7c1e`,
		Args: exactArgs("reserve commit", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := fetch(o, "reserve commit", func(c *client.Client) (reserve.Reservation, error) {
				return c.CommitReservation(cmd.Context(), args[0], apiv1.ActionRequest{})
			})
			if err != nil {
				return err
			}
			printOne(cmd.OutOrStdout(), o.json, r, "committed %s\n", describeReservation(r))
			return nil
		},
	}
}

// ---------------------------------------------------------------------------
// watch

// watchSummary ends watch --json.
type watchSummary struct {
	Summary bool          `json:"summary"`
	Events  int           `json:"events"`
	ID      string        `json:"id,omitempty"`
	State   reserve.State `json:"state,omitempty"`
	Reached bool          `json:"reached"`
}

// lifeOrder ranks the states a reservation passes through in order; the
// terminal CANCELLED and FAILED are reached from any of them.
var lifeOrder = map[reserve.State]int{reserve.StateHeld: 0, reserve.StateReserved: 1, reserve.StateActive: 2, reserve.StateFinished: 3}

// untilVerdict says whether watching a reservation in state now for state
// want is over: reached, or never to be reached (an error saying why).
func untilVerdict(r reserve.Reservation, want reserve.State) (bool, error) {
	now := r.State
	if now == want {
		return true, nil
	}
	if now.Terminal() {
		why := ""
		if r.FailureReason != "" {
			why = " (" + r.FailureReason + ")"
		}
		return true, fmt.Errorf("reservation %s is %s%s: it will never be %s", r.ID, now, why, want)
	}
	if a, ok := lifeOrder[now]; ok {
		if b, ok := lifeOrder[want]; ok && a > b {
			return true, fmt.Errorf("reservation %s is already %s, past %s", r.ID, now, want)
		}
	}
	return false, nil
}

func newReserveWatchCmd(o *ctlFlags) *cobra.Command {
	var until string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "watch [ID] [--until STATE] [--timeout D]",
		Short: "Follow reservations' changes as they happen",
		Long: `Print one line per change of the reservations (and exclusive holds) you may
see, or of reservation ID alone, as the controller's event stream delivers
them; with --json, each event as the API sends it.

With --until STATE (and an ID) the command ends as soon as the reservation
is in STATE, printing its current state first if it already is; it fails
if the reservation ends up where it can never reach STATE (CANCELLED or
FAILED, or past STATE), or when --timeout runs out. Without --until it
runs until interrupted. A lost connection is resumed where it stopped.`,
		Example: `  lightpath reserve watch
  lightpath reserve watch r-7c1e --until ACTIVE --timeout 10m && lightpath cp ...
  lightpath reserve watch --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("reserve watch: want at most one ID, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			var want reserve.State
			if until != "" {
				if id == "" {
					return errors.New("reserve watch: --until needs the ID of the reservation to watch")
				}
				st, err := reserve.ParseState(strings.ToUpper(until))
				if err != nil {
					return fmt.Errorf("reserve watch: --until: %w", err)
				}
				want = st
			}
			return runReserveWatch(cmd, o, id, want, timeout)
		},
	}
	cmd.Flags().StringVar(&until, "until", "", "stop once the reservation is in this state (HELD, RESERVED, ACTIVE, FINISHED, CANCELLED, FAILED)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (default: never)")
	return cmd
}

func runReserveWatch(cmd *cobra.Command, o *ctlFlags, id string, want reserve.State, timeout time.Duration) error {
	const what = "reserve watch"
	c, err := o.client()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ctx := cmd.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	out := cmd.OutOrStdout()
	nd := &ndjson{w: out}
	sum := watchSummary{Summary: true, ID: id}
	// finish ends the command: the summary line with --json, then err
	// (nil, or already worded "reserve watch: ...").
	finish := func(err error) error {
		if o.json {
			nd.write(sum)
		}
		return err
	}
	verdict := func(r reserve.Reservation) (bool, error) {
		sum.State = r.State
		if want == "" {
			return false, nil
		}
		done, err := untilVerdict(r, want)
		if err != nil {
			return true, fmt.Errorf("%s: %w", what, err)
		}
		sum.Reached = done
		return done, nil
	}
	done, err := c.Watch(ctx, what, id, lostLine(cmd.ErrOrStderr(), what),
		func(r reserve.Reservation) (bool, error) {
			done, err := verdict(r)
			if done && err == nil && !o.json {
				fmt.Fprintf(out, "%s is %s\n", r.ID, fmtState(r))
			}
			return done, err
		},
		func(ev apiv1.Event) (bool, error) {
			sum.Events++
			if o.json {
				nd.write(ev)
			} else {
				fmt.Fprintln(out, textsafe.Sanitize(describeEvent(ev)))
			}
			if ev.Reservation != nil && id != "" {
				return verdict(*ev.Reservation)
			}
			return false, nil
		})
	if done || err != nil {
		return finish(err)
	}
	// The context ended: interrupted, or --timeout ran out.
	if want != "" {
		st := string(sum.State)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return finish(fmt.Errorf("%s: reservation %s is still %s after %s, not %s", what, id, st, timeout, want))
		}
		return finish(fmt.Errorf("%s: interrupted while reservation %s is %s, not yet %s", what, id, st, want))
	}
	return finish(nil)
}

// describeEvent is one line of watch: when, what, the change and why.
func describeEvent(ev apiv1.Event) string {
	var b strings.Builder
	tr := ev.Transition
	at := time.Time{}
	if tr != nil {
		at = tr.At
	}
	switch {
	case ev.Reservation != nil:
		r := *ev.Reservation
		if at.IsZero() {
			at = r.CreatedAt
		}
		fmt.Fprintf(&b, "%s  %s  ", fmtTime(at), r.ID)
		if tr != nil && tr.From != "" && tr.From != tr.To {
			fmt.Fprintf(&b, "%s → %s", tr.From, tr.To)
		} else {
			b.WriteString(fmtState(r))
		}
		if tr != nil {
			fmt.Fprintf(&b, "  %s by %s", tr.Event, tr.By)
			if tr.Why != "" {
				b.WriteString(": " + tr.Why)
			}
		}
		fmt.Fprintf(&b, "  (%s → %s, %s, %s → %s)", r.From, r.To, fmtRate(r.Bandwidth), fmtTime(r.Start), fmtTime(r.End))
	case ev.Exclusive != nil:
		x := *ev.Exclusive
		if at.IsZero() {
			at = x.CancelledAt
		}
		if at.IsZero() {
			at = x.CreatedAt
		}
		fmt.Fprintf(&b, "%s  %s  %s  exclusive hold of %s by %s, %s → %s", fmtTime(at), x.ID, x.State, exclusiveWhat(x), x.Owner, fmtTime(x.Start), fmtTime(x.End))
		if x.Why != "" {
			b.WriteString(": " + x.Why)
		}
	default:
		fmt.Fprintf(&b, "event %d (%s)", ev.Seq, ev.Kind)
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// Exclusive holds.

func newReserveExclusiveCmd(o *ctlFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "exclusive",
		Aliases: []string{"excl"},
		Short:   "Hold nodes or whole sites exclusively (create, list, cancel)",
		Long: `Hold a node, or every node of a site, for yourself over a window: while the
hold stands, nobody else's reservation may touch those nodes and nobody
else may hold them; your own reservations go on as usual. A hold books no
bandwidth.`,
		Example: `  lightpath reserve exclusive create --site site-a --start +1h --duration 4h
  lightpath reserve exclusive list
  lightpath reserve exclusive cancel x-42aa`,
	}
	cmd.AddCommand(newExclusiveCreateCmd(o), newExclusiveListCmd(o), newExclusiveCancelCmd(o))
	return verbGroup(cmd)
}

func newExclusiveCreateCmd(o *ctlFlags) *cobra.Command {
	var w window
	var node, site, project string
	cmd := &cobra.Command{
		Use:   "create --node N | --site S [--start TIME] (--duration D | --end TIME) [--project P]",
		Short: "Hold a node or a site exclusively over a window",
		Long: `Hold one node (--node) or every node of a site (--site) for yourself from
--start (default now) for --duration or to --end. It is refused when
someone else's reservation or hold already touches those nodes then.`,
		Example: `  lightpath reserve exclusive create --node b1 --start 2026-05-01T08:00:00Z --end 2026-05-01T16:00:00Z
  lightpath reserve exclusive create --site site-b --duration 2h`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			const what = "reserve exclusive create"
			if (node == "") == (site == "") {
				return fmt.Errorf("%s: give one of --node and --site", what)
			}
			req := apiv1.ExclusiveRequest{Node: node, Site: site, Project: project}
			var d time.Duration
			var err error
			if req.Start, req.End, d, err = w.resolve(resolveNow(), true); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if d > 0 {
				req.Duration = d.String()
			}
			x, err := fetch(o, what, func(c *client.Client) (reserve.Exclusive, error) { return c.CreateExclusive(cmd.Context(), req) })
			if err != nil {
				return err
			}
			printOne(cmd.OutOrStdout(), o.json, x, "held %s exclusively as %s: %s (%s), %s → %s\n", exclusiveWhat(x), x.ID,
				strings.Join(x.Nodes, ", "), x.State, fmtTime(x.Start), fmtTime(x.End))
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&node, "node", "", "the node to hold")
	fs.StringVar(&site, "site", "", "the site whose every node to hold")
	w.register(fs, "when the hold starts: RFC 3339, a local date and time, now or +DURATION (default now)")
	fs.StringVar(&project, "project", "", "the project to hold them for")
	return cmd
}

func newExclusiveListCmd(o *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List exclusive holds of nodes and sites",
		Example: `  lightpath reserve exclusive list
  lightpath reserve exclusive list --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			xs, err := fetch(o, "reserve exclusive list", func(c *client.Client) ([]reserve.Exclusive, error) {
				return c.Exclusives(cmd.Context(), client.ListOptions{})
			})
			if err != nil {
				return err
			}
			printList(cmd.OutOrStdout(), o.json, xs, "no exclusive holds", printExclusives)
			return nil
		},
	}
}

func newExclusiveCancelCmd(o *ctlFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:     "cancel ID [--reason R]",
		Aliases: []string{"release"},
		Short:   "Release an exclusive hold",
		Example: `  lightpath reserve exclusive cancel x-42aa --reason "experiment done"`,
		Args:    exactArgs("reserve exclusive cancel", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			x, err := fetch(o, "reserve exclusive cancel", func(c *client.Client) (reserve.Exclusive, error) {
				return c.CancelExclusive(cmd.Context(), args[0], apiv1.ActionRequest{Reason: reason})
			})
			if err != nil {
				return err
			}
			printOne(cmd.OutOrStdout(), o.json, x, "released %s: %s of %s (%s)\n", x.ID, exclusiveWhat(x), strings.Join(x.Nodes, ", "), x.State)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the hold")
	return cmd
}
