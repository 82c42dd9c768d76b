package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/units"
)

// lightpath ticket: Lambda Station's tickets, on the controller's
// reservations. A ticket is a reservation that names the flows it steers
// (a flow spec): the controller gives it a DSCP value and a path, and the
// agents on the path mark, classify and route its packets from its start.
// The commands are reserve's, seen from the flows' side: open books one
// and waits until the path is in place, status shows how far it got,
// extend moves its end, close releases it.

// defaultTicketWait is how long ticket open waits for ACTIVE by default.
const defaultTicketWait = 30 * time.Second

// ticketHistory is how many of the last transitions ticket status shows.
const ticketHistory = 5

func newTicketCmd() *cobra.Command {
	var o ctlFlags
	cmd := &cobra.Command{
		Use:   "ticket",
		Short: "Steer flows onto a reserved path: open, status, extend, close and list tickets",
		Long: `Ask for flows to be steered onto a guaranteed path, as Lambda Station's
tickets did. A ticket is a reservation with a flow spec: the controller
books BANDWIDTH from --from to --to along a path and gives the ticket a
DSCP value of its own; from its start, the agents on the path (lightpath
agent) mark the flows' packets with that DSCP, give them the reserved rate
and route them onto the path, and the controller makes the ticket ACTIVE
once every managed node reports its part in place. A controller with no
agents makes it ACTIVE at its start, with nothing set up in the network.

A flow spec is 'PROTO SRC[:PORTS] > DST[:PORTS]', several joined by ','
(tcp 198.18.1.2 > 198.18.2.2:7070); its sources must be addresses of
--from and its destinations addresses of --to. Times are RFC 3339, now, or
+DURATION; rates are bits per second (500M, 10G); sizes bytes (2GB).

Every verb takes --controller URL, your token from --controller-token-file
F or $LIGHTPATH_CONTROLLER_TOKEN, and --json for NDJSON. See docs/ticket.md.`,
		Example: `  export LIGHTPATH_CONTROLLER=http://127.0.0.1:8080 LIGHTPATH_CONTROLLER_TOKEN=$(cat alice.token)
  lightpath ticket open --from a1 --to b1 --flows 'tcp 198.18.1.1 > 198.18.2.1:7070' --bandwidth 500M --duration 1h
  lightpath ticket status r-7c1e
  lightpath ticket extend r-7c1e --by 30m
  lightpath ticket close r-7c1e
  lightpath ticket list`,
	}
	o.register(cmd.PersistentFlags())
	verbGroup(cmd)
	cmd.AddCommand(newTicketOpenCmd(&o), newTicketStatusCmd(&o), newTicketExtendCmd(&o), newTicketCloseCmd(&o), newTicketListCmd(&o))
	return cmd
}

// ---------------------------------------------------------------------------
// What a ticket looks like.

// ticketLine is a ticket's --json line: the reservation as the API sends
// it, with what the commands read from it. Ready says it is ACTIVE (every
// managed node has its part in place); WaitingFor lists the managed nodes
// that have not reported theirs yet. Created and Algorithm come with open,
// as with reserve create, and WaitedSeconds is how long open waited.
type ticketLine struct {
	reserve.Reservation
	DSCPName      string   `json:"dscp_name,omitempty"`
	Ready         bool     `json:"ready"`
	WaitingFor    []string `json:"waiting_for,omitempty"`
	Created       *bool    `json:"created,omitempty"`
	Algorithm     string   `json:"algorithm,omitempty"`
	WaitedSeconds *float64 `json:"waited_seconds,omitempty"`
}

func newTicketLine(r reserve.Reservation) ticketLine {
	l := ticketLine{Reservation: r, Ready: r.State == reserve.StateActive}
	if r.DSCP != 0 {
		l.DSCPName = reserve.DSCPName(r.DSCP)
	}
	if r.State.Live() {
		l.WaitingFor = r.Pending()
	}
	return l
}

// fmtDSCP is a codepoint by name and number: "af11 (10)".
func fmtDSCP(v uint8) string {
	if v == 0 {
		return "-"
	}
	name, num := reserve.DSCPName(v), fmt.Sprint(v)
	if name == num {
		return num
	}
	return name + " (" + num + ")"
}

// managedNodes says which managed nodes have their part of r in place.
func managedNodes(r reserve.Reservation) string {
	switch {
	case len(r.ManagedNodes) == 0 && r.State.Live():
		return "none: no agent runs on its path, so nothing in the network steers its flows"
	case !r.State.Live():
		return orDash(strings.Join(r.ManagedNodes, ", "))
	}
	pending := r.Pending()
	if len(pending) == 0 {
		return strings.Join(r.ManagedNodes, ", ") + " (all in place)"
	}
	var in []string
	for _, n := range r.ManagedNodes {
		if !slices.Contains(pending, n) {
			in = append(in, n)
		}
	}
	s := "waiting for " + strings.Join(pending, ", ")
	if len(in) > 0 {
		s = "in place: " + strings.Join(in, ", ") + "; " + s
	}
	return s
}

// printTicket writes what a ticket has set up: its state, ends, rate,
// window, path, DSCP, flows and managed nodes. full (status) adds the
// owner, when it was opened and the last transitions of its history.
func printTicket(w io.Writer, r reserve.Reservation, full bool) {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, textsafe.Sanitize(v)) }
	row("ticket", fmt.Sprintf("%s (version %d)", r.ID, r.Version))
	row("state", fmtState(r))
	if r.DegradedReason != "" {
		row("degraded", r.DegradedReason)
	}
	if r.FailureReason != "" {
		row("failed", r.FailureReason)
	}
	if full {
		owner := r.Owner
		if r.Project != "" {
			owner += " (project " + r.Project + ")"
		}
		row("owner", owner)
	}
	row("from → to", fmt.Sprintf("%s → %s at %s", r.From, r.To, fmtRate(r.Bandwidth)))
	row("window", fmt.Sprintf("%s → %s (%s)", fmtTime(r.Start), fmtTime(r.End), units.FormatDuration(r.End.Sub(r.Start))))
	row("path", orDash(pathHops(r.Path)))
	row("dscp", fmtDSCP(r.DSCP))
	for i, f := range r.FlowSpec.Flows {
		k := ""
		if i == 0 {
			k = "flows"
		}
		row(k, f.String())
	}
	if r.FlowSpec.IsZero() {
		row("flows", "-")
	}
	row("managed nodes", managedNodes(r))
	if full {
		row("opened", fmtTime(r.CreatedAt))
	}
	tw.Flush()
	if !full || len(r.History) == 0 {
		return
	}
	h := r.History
	head := "\nhistory:"
	if len(h) > ticketHistory {
		head = fmt.Sprintf("\nlast %d changes (all %d: lightpath reserve show %s):", ticketHistory, len(h), r.ID)
		h = h[len(h)-ticketHistory:]
	}
	fmt.Fprintln(w, head)
	printHistory(w, h)
}

// printTickets writes the table of ticket list.
func printTickets(w io.Writer, ls []ticketLine) {
	printTable(w, []string{"ID", "STATE", "FROM", "TO", "BANDWIDTH", "DSCP", "START", "END", "FLOWS"}, ls, func(l ticketLine) []string {
		return []string{l.ID, fmtState(l.Reservation), l.From, l.To, fmtRate(l.Bandwidth), fmtDSCP(l.DSCP),
			fmtTime(l.Start), fmtTime(l.End), orDash(l.FlowSpec.String())}
	})
}

// writeTicket prints a ticket: its --json line, or the headline and the
// view.
func writeTicket(w io.Writer, asJSON bool, l ticketLine, full bool, headline string, args ...any) {
	if asJSON {
		(&ndjson{w: w}).write(l)
		return
	}
	if headline != "" {
		fmt.Fprintf(w, headline+"\n", safeArgs(args)...)
	}
	printTicket(w, l.Reservation, full)
}

// readTicket reads reservation id and makes sure it is a ticket (it names
// flows): the other reservations belong to lightpath reserve.
func readTicket(ctx context.Context, c *client.Client, what, id string) (reserve.Reservation, error) {
	r, err := c.Reservation(ctx, id)
	if err != nil {
		return r, c.Explain(what, err)
	}
	if r.FlowSpec.IsZero() {
		return r, fmt.Errorf("%s: %s is a reservation without flows, not a ticket: see lightpath reserve show %s", what, r.ID, r.ID)
	}
	return r, nil
}

// stillOpen is the advice of an error that leaves a ticket open.
func stillOpen(id string) string {
	return fmt.Sprintf("the ticket stays open: lightpath ticket status %s to look again, lightpath ticket close %s to release it", id, id)
}

// ---------------------------------------------------------------------------
// open

type openFlags struct {
	createFlags
	wait   time.Duration
	noWait bool
}

func newTicketOpenCmd(o *ctlFlags) *cobra.Command {
	var f openFlags
	cmd := &cobra.Command{
		Use:   "open --from NODE --to NODE --flows SPEC --bandwidth RATE [--start TIME] (--duration D | --end TIME) | --size S [--deadline TIME]",
		Short: "Book a ticket for flows and wait until their path is in place",
		Long: `Book a reservation that steers the flows of --flows onto a guaranteed path
of --bandwidth from --from to --to, from --start (default now) for
--duration or to --end; or, with --size, over the earliest completion of
that much data (--bandwidth is then the highest rate wanted, and
--deadline when it must have arrived). The controller picks the path and
gives the ticket a DSCP value of its own.

Then the command follows the controller's event stream until the ticket
is ACTIVE, every managed node on its path having its part in place, and
prints what was set up: the path, the DSCP, the flows, the window and the
nodes. With an immediate start and agents running that takes about a
second; without agents the controller makes it ACTIVE at its start.

If it is not ACTIVE within --wait (default 30s), the command prints the
ticket, says what it is still waiting for (its start, or the managed nodes
that have not reported their part in place) and exits with status 1,
leaving the ticket open. With --no-wait it prints the ticket as booked and
returns at once: for a later --start, use --no-wait, or wait with
lightpath reserve watch ID --until ACTIVE.

A malformed flow spec, or flows whose addresses are not --from's and
--to's, are refused by the controller and nothing is booked.`,
		Example: `  lightpath ticket open --from a1 --to b1 --flows 'tcp 198.18.1.1 > 198.18.2.1:7070' --bandwidth 500M --duration 1h
  lightpath ticket open --from a2 --to b2 --bandwidth 1G --start +2h --end +5h --no-wait \
      --flows 'tcp 198.18.1.2 > 198.18.2.2:7070, udp 198.18.1.2 > 198.18.2.2:9000-9010'
  lightpath ticket open --from a1 --to b1 --flows 'tcp 198.18.1.1 > 198.18.2.1' --size 2TB --bandwidth 5G --wait 1m
  lightpath ticket open --from a1 --to b1 --flows 'tcp 198.18.1.1 > 198.18.2.1:7070' --bandwidth 500M --duration 1h --json | jq -r .id`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.noWait && cmd.Flags().Changed("wait") {
				return errors.New("ticket open: --wait and --no-wait exclude each other")
			}
			return runTicketOpen(cmd, o, f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.from, "from", "", "the node the flows leave from (the guarantee runs from here)")
	fs.StringVar(&f.to, "to", "", "the node the flows go to")
	fs.StringVar(&f.flow, "flows", "", "the flows to steer: 'PROTO SRC[:PORTS] > DST[:PORTS]', several joined by ','")
	fs.StringVar(&f.bandwidth, "bandwidth", "", "the rate to guarantee, e.g. 500M or 10G; with --size, the highest rate wanted")
	f.window.register(fs, "when it starts: RFC 3339, a local date and time, now or +DURATION (default now)")
	fs.StringVar(&f.size, "size", "", "book the earliest completion of this much data instead of a window, e.g. 2GB")
	fs.StringVar(&f.deadline, "deadline", "", "with --size: when the data must have arrived")
	fs.StringVar(&f.project, "project", "", "the project to book under (its quota and policy apply)")
	fs.DurationVar(&f.wait, "wait", defaultTicketWait, "how long to wait for the ticket to be ACTIVE")
	fs.BoolVar(&f.noWait, "no-wait", false, "print the ticket as booked and return without waiting")
	return cmd
}

func runTicketOpen(cmd *cobra.Command, o *ctlFlags, f openFlags) error {
	const what = "ticket open"
	now := resolveNow()
	if f.from == "" || f.to == "" {
		return fmt.Errorf("%s: --from and --to are required", what)
	}
	if strings.TrimSpace(f.flow) == "" {
		return fmt.Errorf("%s: --flows is required: the packets to steer, e.g. --flows 'tcp 198.18.1.1 > 198.18.2.1:7070' (without flows, book with lightpath reserve create)", what)
	}
	if !f.noWait && f.wait <= 0 {
		return fmt.Errorf("%s: --wait must be above zero (or give --no-wait)", what)
	}
	req := apiv1.ReservationRequest{From: f.from, To: f.to, Project: f.project, FlowSpec: f.flow, IdempotencyKey: newIdempotencyKey()}
	if err := f.when(&req, now); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c, err := o.client()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	out := cmd.OutOrStdout()
	resp, err := c.CreateReservationRetrying(cmd.Context(), req, startsNow(f.start))
	if err != nil {
		o.writeRefusal(out, err)
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Detail.Code == apiv1.CodeInvalid &&
			(ae.Detail.Field == "flow_spec" || strings.Contains(ae.Detail.Message, "flow spec")) {
			return c.Explain(what+": --flows", err)
		}
		return c.Explain(what, err)
	}
	r := resp.Reservation
	line := func(r reserve.Reservation, waited time.Duration) ticketLine {
		l := newTicketLine(r)
		l.Created, l.Algorithm = &resp.Created, resp.Algorithm
		if !f.noWait {
			s := waited.Round(time.Millisecond).Seconds()
			l.WaitedSeconds = &s
		}
		return l
	}
	if f.noWait {
		writeTicket(out, o.json, line(r, 0), false, "opened ticket %s: %s (not waiting: lightpath ticket status %s)", r.ID, fmtState(r), r.ID)
		return nil
	}

	// Wait for ACTIVE: follow the ticket's events, having read it after
	// subscribing, until it is ACTIVE, can never be, or --wait runs out.
	began := time.Now()
	ctx, cancel := context.WithTimeout(cmd.Context(), f.wait)
	defer cancel()
	verdict := func(cur reserve.Reservation) (bool, error) {
		r = cur
		done, err := untilVerdict(cur, reserve.StateActive)
		if err != nil {
			return true, fmt.Errorf("%s: %w", what, err)
		}
		return done, nil
	}
	done, err := c.Watch(ctx, what, r.ID, lostLine(cmd.ErrOrStderr(), what), verdict, func(ev apiv1.Event) (bool, error) {
		if ev.Reservation == nil {
			return false, nil
		}
		return verdict(*ev.Reservation)
	})
	waited := time.Since(began)
	switch {
	case done && err == nil:
		writeTicket(out, o.json, line(r, waited), false, "opened ticket %s: %s after %s", r.ID, fmtState(r), fmtWaited(waited))
		return nil
	case done:
		// It can never be ACTIVE (cancelled or failed meanwhile).
		writeTicket(out, o.json, line(r, waited), false, "opened ticket %s, but it is %s", r.ID, fmtState(r))
		return err
	case err != nil:
		// The controller could not be followed; the ticket is booked.
		writeTicket(out, o.json, line(r, waited), false, "opened ticket %s: %s", r.ID, fmtState(r))
		return fmt.Errorf("%s; %s", err, stillOpen(r.ID))
	}
	writeTicket(out, o.json, line(r, waited), false, "opened ticket %s: still %s after %s", r.ID, fmtState(r), fmtWaited(waited))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: ticket %s is still %s after %s, %s; %s", what, r.ID, r.State, f.wait, waitingFor(r, time.Now()), stillOpen(r.ID))
	}
	return fmt.Errorf("%s: interrupted while ticket %s is %s, %s; %s", what, r.ID, r.State, waitingFor(r, time.Now()), stillOpen(r.ID))
}

// waitingFor says what a ticket that is not ACTIVE yet waits for: its
// start, then the managed nodes that have not put their part in place
// (the reservation's managed_nodes minus provisioned).
func waitingFor(r reserve.Reservation, now time.Time) string {
	pending := r.Pending()
	nodes := ""
	if len(pending) > 0 {
		nodes = strings.Join(pending, ", ") + " to put their part in place"
		if len(pending) == 1 {
			nodes = pending[0] + " to put its part in place"
		}
	}
	switch {
	case r.State == reserve.StateHeld:
		return "waiting to be committed (lightpath reserve commit " + r.ID + ")"
	case now.Before(r.Start) && nodes != "":
		return "waiting for its start at " + fmtTime(r.Start) + ", then for " + nodes
	case now.Before(r.Start):
		return "waiting for its start at " + fmtTime(r.Start)
	case nodes != "":
		return "waiting for " + nodes
	}
	return "waiting for the controller to activate it"
}

// fmtWaited prints a short wait to the tenth of a second.
func fmtWaited(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return units.FormatDuration(d)
}

// ---------------------------------------------------------------------------
// status, extend, close, list

func newTicketStatusCmd(o *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status ID",
		Short: "Show a ticket: its state, path, DSCP, flows, nodes and last changes",
		Long: `Show what a ticket has set up: its state (and why it is degraded or
failed), its window, its path hop by hop, its DSCP, its flows, which
managed nodes have their part in place and which are still waited for,
and the last changes of its history.`,
		Example: `  lightpath ticket status r-7c1e
  lightpath ticket status r-7c1e --json | jq -r '.state, .waiting_for'`,
		Args: exactArgs("ticket status", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			const what = "ticket status"
			c, err := o.client()
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			r, err := readTicket(cmd.Context(), c, what, args[0])
			if err != nil {
				return err
			}
			writeTicket(cmd.OutOrStdout(), o.json, newTicketLine(r), true, "")
			return nil
		},
	}
}

func newTicketExtendCmd(o *ctlFlags) *cobra.Command {
	var by, end string
	cmd := &cobra.Command{
		Use:   "extend ID (--by D | --end TIME)",
		Short: "Move a ticket's end later",
		Long: `Move a ticket's end later: by --by, or to --end. The command reads the
ticket and sends the version it read, so a change made in between is
refused rather than overwritten (run it again). When the longer window
does not fit, the controller refuses it, says why and what would fit, and
the ticket stays as it was. An ACTIVE ticket stays ACTIVE.`,
		Example: `  lightpath ticket extend r-7c1e --by 30m
  lightpath ticket extend r-7c1e --end 2026-05-01T20:00:00Z`,
		Args: exactArgs("ticket extend", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			const what = "ticket extend"
			if (by == "") == (end == "") {
				return fmt.Errorf("%s: give one of --by D and --end TIME", what)
			}
			now := resolveNow()
			var d time.Duration
			var newEnd time.Time
			var err error
			if by != "" {
				if d, err = parseSpan(by); err != nil {
					return fmt.Errorf("%s: --by: %w", what, err)
				}
			} else if newEnd, err = parseWhen(end, now); err != nil {
				return fmt.Errorf("%s: --end: %w", what, err)
			}
			c, err := o.client()
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			ctx := cmd.Context()
			cur, err := readTicket(ctx, c, what, args[0])
			if err != nil {
				return err
			}
			if d > 0 {
				newEnd = cur.End.Add(d)
			}
			if !newEnd.After(cur.End) {
				return fmt.Errorf("%s: --end %s is not after the ticket's end %s (to end it now: lightpath ticket close %s)", what, fmtTime(newEnd), fmtTime(cur.End), cur.ID)
			}
			r, err := c.ModifyReservation(ctx, cur.ID, apiv1.ModifyRequest{Version: cur.Version, End: newEnd})
			if err != nil {
				return c.Explain(what, err)
			}
			writeTicket(cmd.OutOrStdout(), o.json, newTicketLine(r), false, "extended ticket %s to %s (was %s)", r.ID, fmtTime(r.End), fmtTime(cur.End))
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "how much later it ends, e.g. 30m or 2h")
	cmd.Flags().StringVar(&end, "end", "", "its new end: RFC 3339 or +DURATION from now")
	return cmd
}

func newTicketCloseCmd(o *ctlFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "close ID [--reason R]",
		Short: "Close a ticket: release its bandwidth and stop steering its flows",
		Long: `Close a ticket (cancel its reservation): its bandwidth is released at once
and the agents take its part down, so its flows go back to the routed
path. --reason is kept in its history. Closing a closed ticket again is
harmless.`,
		Example: `  lightpath ticket close r-7c1e
  lightpath ticket close r-7c1e --reason "transfer done"`,
		Args: exactArgs("ticket close", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			const what = "ticket close"
			c, err := o.client()
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			ctx := cmd.Context()
			cur, err := readTicket(ctx, c, what, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cur.State.Terminal() {
				printOne(out, o.json, newTicketLine(cur), "ticket %s was closed already: %s\n", cur.ID, describeReservation(cur))
				return nil
			}
			r, err := c.CancelReservation(ctx, cur.ID, apiv1.ActionRequest{Reason: reason})
			if err != nil {
				return c.Explain(what, err)
			}
			printOne(out, o.json, newTicketLine(r), "closed ticket %s\n", describeReservation(r))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept in the history")
	return cmd
}

func newTicketListCmd(o *ctlFlags) *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:     "list [--state S,...]",
		Aliases: []string{"ls"},
		Short:   "List your tickets (your reservations that steer flows)",
		Long: `List your tickets: your reservations that name flows, whatever your role
(lightpath reserve list shows every reservation). --state keeps those in
the states given.`,
		Example: `  lightpath ticket list
  lightpath ticket list --state ACTIVE,RESERVED
  lightpath ticket list --json | jq -r 'select(.id) | "\(.id) \(.dscp_name) \(.flow_spec)"'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			const what = "ticket list"
			var lo client.ListOptions
			for _, v := range states {
				st, err := reserve.ParseState(strings.ToUpper(strings.TrimSpace(v)))
				if err != nil {
					return fmt.Errorf("%s: --state: %w", what, err)
				}
				lo.States = append(lo.States, string(st))
			}
			rs, err := fetch(o, what, func(c *client.Client) ([]reserve.Reservation, error) {
				me, err := c.Whoami(cmd.Context())
				if err != nil {
					return nil, err
				}
				lo.Owner = me.User
				return c.ListReservations(cmd.Context(), lo)
			})
			if err != nil {
				return err
			}
			var ls []ticketLine
			for _, r := range rs {
				if !r.FlowSpec.IsZero() {
					ls = append(ls, newTicketLine(r))
				}
			}
			printList(cmd.OutOrStdout(), o.json, ls, "no tickets", printTickets)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only in these states (repeatable or comma-separated): HELD, RESERVED, ACTIVE, FINISHED, CANCELLED, FAILED")
	return cmd
}
