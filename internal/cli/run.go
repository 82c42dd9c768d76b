package cli

// lightpath run: flags and printing over package run.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/run"
	"github.com/lightpath/lightpath/internal/textsafe"
)

type runFlags struct {
	ctl      ctlFlags
	rate     string
	from, to string
	duration time.Duration
	project  string
	path     []string
}

// runEvent is run --json's line for each change of the reservation, and
// for connections added to its flow spec.
type runEvent struct {
	Type      string        `json:"type"` // "reservation", "flows", "warning"
	ID        string        `json:"id,omitempty"`
	State     reserve.State `json:"state,omitempty"`
	Degraded  bool          `json:"degraded,omitempty"`
	Reason    string        `json:"reason,omitempty"`
	Bandwidth uint64        `json:"bandwidth_bps,omitempty"`
	Path      string        `json:"path,omitempty"`
	FlowSpec  string        `json:"flow_spec,omitempty"`
	DSCP      uint8         `json:"dscp,omitempty"`
	Flows     []string      `json:"flows,omitempty"`
	Message   string        `json:"message,omitempty"`
	Seconds   float64       `json:"seconds"`
}

// runSummary is run --json's last line.
type runSummary struct {
	Type             string  `json:"type"` // "summary"
	ExitStatus       int     `json:"exit_status"`
	Cgroup           string  `json:"cgroup"`
	CgroupRemoved    bool    `json:"cgroup_removed"`
	Reservation      string  `json:"reservation"`
	ReservedBps      uint64  `json:"reserved_bps"`
	ReservationPath  string  `json:"reservation_path"`
	ReservationState string  `json:"reservation_state"`
	ReservationError string  `json:"reservation_error,omitempty"`
	DSCP             uint8   `json:"dscp"`
	Mark             uint32  `json:"mark"`
	FlowSpec         string  `json:"flow_spec"`
	FlowsAdded       int     `json:"flows_added"`
	Seconds          float64 `json:"seconds"`
}

func newRunCmd() *cobra.Command {
	var o runFlags
	cmd := &cobra.Command{
		Use:   "run --reserve RATE|auto --from NODE --to NODE [flags] -- CMD [ARGS...]",
		Short: "Run any command with its flows booked and steered onto a reserved path",
		Long: `Run CMD in a cgroup of its own (under the cgroup2 hierarchy) with a
reservation from --from to --to (topology nodes, in the direction the data
flows). Run it on one of the two nodes.

A push (--from is this node) is booked for every flow between the two
nodes' addresses from that cgroup, "any FROM > TO cgroup PATH". A BPF
program on the cgroup gives each socket the command creates the
reservation's firewall mark, so this host's policy routing and the agents
steer the command's traffic, and only its traffic, onto the reserved path.

A pull (--to is this node) is sent by the far node, which has no such
cgroup: it is booked for a placeholder flow that matches nothing (udp to a
port run holds), and the command's connections, read with sock_diag every
200 ms, replace it in the flow spec as the far end's 5-tuples, so the far
end's agent steers what it sends.

CMD gets run's standard input, output and error; SIGINT and SIGTERM are
passed on to it. When it ends, the reservation is released and the cgroup
removed (processes CMD left in it are killed), and run exits with CMD's
status (128+N when signal N ended it). What run says goes to standard
error (NDJSON with --json), so that standard output stays the command's.

Needs root (or a delegated cgroup2 subtree and CAP_BPF/CAP_NET_ADMIN).`,
		Example: `  lightpath run --reserve 500M --from a1 --to b1 -- iperf3 -c 198.18.2.1
  lightpath run --reserve auto --from b1 --to a1 -- xrdcp root://198.18.2.1//data/f /tmp/f`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("run: no command given (lightpath run --reserve RATE --from NODE --to NODE -- CMD ARGS...)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd.Context(), o, args, cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.SetInterspersed(false)
	fs.StringVar(&o.rate, "reserve", "", "guaranteed bandwidth for the command's flows: a rate (300M, 2G) or auto (the widest free); required")
	fs.StringVar(&o.from, "from", "", "the node the data leaves from (a node of the controller's topology); required")
	fs.StringVar(&o.to, "to", "", "the node the data goes to; required")
	fs.DurationVar(&o.duration, "reserve-duration", 0, "the window to book (default 1h); the reservation is released when the command ends")
	fs.StringSliceVar(&o.path, "reserve-path", nil, "the links to reserve, in the direction the data flows (default: the controller's choice)")
	fs.StringVar(&o.project, "reserve-project", "", "the project to book under (its quota and policy apply)")
	fs.StringVar(&o.ctl.url, "controller", "", "the controller to book with: http://HOST:PORT, https://HOST:PORT or unix:PATH, or several comma-separated (default: $LIGHTPATH_CONTROLLER, else "+defaultController+")")
	fs.StringVar(&o.ctl.tokenFile, "controller-token-file", "", "file holding your controller token (default: $LIGHTPATH_CONTROLLER_TOKEN)")
	fs.StringVar(&o.ctl.caFile, "controller-ca", "", "CA certificate (PEM) to verify an https controller with")
	fs.DurationVar(&o.ctl.timeout, "controller-timeout", cpCtlTimeout, "give up on a request the controller has not answered in this long")
	fs.BoolVar(&o.ctl.json, "json", false, "say what happens as NDJSON on standard error; the last line is the summary")
	return cmd
}

// check refuses missing or bad flags before anything is made.
func (o runFlags) check() (uint64, error) {
	switch {
	case o.rate == "":
		return 0, errors.New("--reserve RATE|auto is required")
	case o.from == "":
		return 0, errors.New("--from NODE is required")
	case o.to == "":
		return 0, errors.New("--to NODE is required")
	case o.duration < 0:
		return 0, errors.New("--reserve-duration must be above zero")
	}
	if strings.EqualFold(strings.TrimSpace(o.rate), "auto") {
		return 0, nil
	}
	bw, err := parseBandwidth("--reserve", o.rate, true)
	if err != nil {
		return 0, fmt.Errorf("%w (or --reserve auto)", err)
	}
	return bw, nil
}

func runRun(ctx context.Context, o runFlags, argv []string, stderr io.Writer) error {
	bw, err := o.check()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	c, err := o.ctl.client()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	out := &ndjson{w: stderr}
	t0 := time.Now()
	say := func(msg string) { fmt.Fprintf(stderr, "run: %s\n", textsafe.Sanitize(msg)) }
	note := func(e run.Event) {
		switch {
		case e.Err != nil:
			msg := textsafe.OneLine(e.Err.Error())
			if o.ctl.json {
				out.write(runEvent{Type: "warning", Message: msg, Seconds: time.Since(t0).Seconds()})
				return
			}
			say("warning: " + msg)
		case len(e.Flows) > 0:
			var fl []string
			for _, f := range e.Flows {
				fl = append(fl, f.String())
			}
			if o.ctl.json {
				out.write(runEvent{Type: "flows", ID: e.Reservation.ID, Flows: fl, FlowSpec: e.Reservation.FlowSpec.String(), Seconds: time.Since(t0).Seconds()})
				return
			}
			say(fmt.Sprintf("reservation %s now also steers %s", e.Reservation.ID, strings.Join(fl, ", ")))
		default:
			r := e.Reservation
			reason := r.FailureReason
			if r.Degraded {
				reason = r.DegradedReason
			}
			if o.ctl.json {
				out.write(runEvent{Type: "reservation", ID: r.ID, State: r.State, Degraded: r.Degraded, Reason: reason, Bandwidth: r.Bandwidth,
					Path: client.PathString(r.Path), FlowSpec: r.FlowSpec.String(), DSCP: r.DSCP, Seconds: time.Since(t0).Seconds()})
				return
			}
			switch {
			case r.State == reserve.StateActive && r.Degraded:
				say(fmt.Sprintf("reservation %s is degraded (%s): the flows may be on the routed path", r.ID, reason))
			case r.State == reserve.StateActive:
				say(fmt.Sprintf("reservation %s is ACTIVE: the command's flows move onto %s", r.ID, client.PathString(r.Path)))
			case r.State.Terminal():
				msg := fmt.Sprintf("reservation %s is %s", r.ID, r.State)
				if reason != "" {
					msg += " (" + reason + ")"
				}
				say(msg)
			default:
				say(fmt.Sprintf("reserved %s: %s → %s at %s via %s for %s, %s", r.ID, r.From, r.To, fmtRate(r.Bandwidth),
					client.PathString(r.Path), r.FlowSpec, r.State))
			}
		}
	}
	sum, err := run.Run(ctx, run.Config{From: o.from, To: o.to, Bandwidth: bw, Duration: o.duration, Project: o.project, Path: o.path,
		Argv: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Controller: c, Note: note})
	r := sum.Reservation
	relErr := ""
	if sum.ReleaseErr != nil {
		relErr = textsafe.OneLine(sum.ReleaseErr.Error())
		fmt.Fprintf(stderr, "lightpath: run: %s; cancel it with lightpath reserve cancel %s\n", textsafe.Sanitize(relErr), r.ID)
	}
	if sum.Cgroup != "" && !sum.Removed {
		fmt.Fprintf(stderr, "lightpath: run: cgroup %s was not removed\n", sum.Cgroup)
	}
	if r.ID != "" || err == nil {
		if o.ctl.json {
			out.write(runSummary{Type: "summary", ExitStatus: sum.Status, Cgroup: sum.Cgroup, CgroupRemoved: sum.Removed,
				Reservation: r.ID, ReservedBps: r.Bandwidth, ReservationPath: client.PathString(r.Path), ReservationState: string(r.State),
				ReservationError: relErr, DSCP: r.DSCP, Mark: sum.Mark, FlowSpec: r.FlowSpec.String(), FlowsAdded: sum.Learnt, Seconds: sum.Seconds})
		} else if err == nil {
			word := "released"
			if relErr != "" {
				word = "NOT released"
			} else if r.State != reserve.StateCancelled {
				word = "it ended " + string(r.State)
			}
			say(fmt.Sprintf("%s exited with status %d after %.1f s; reservation %s %s", argv[0], sum.Status, sum.Seconds, r.ID, word))
		}
	}
	if err != nil {
		if errors.Is(err, run.ErrNoCgroup2) {
			return fmt.Errorf("run: %w", err)
		}
		if sum.Status != 0 && r.ID != "" {
			// The command could not be started: 127 or 126, as a shell.
			return statusError{code: sum.Status, err: fmt.Errorf("run: %w", err)}
		}
		return fmt.Errorf("run: %w", err)
	}
	if sum.Status != 0 {
		return exitError{code: sum.Status}
	}
	return nil
}
