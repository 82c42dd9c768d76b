package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/cc"
	"github.com/lightpath/lightpath/internal/cc/fast"
)

func newCcCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cc",
		Short: "Install FAST TCP into the kernel as a congestion control any socket can choose",
		Long: `The kernel offers reno, cubic and bbr. "cc install fast" adds FAST TCP, the
delay-based congestion control of UltraLight, as a BPF program (struct_ops
tcp_congestion_ops): once per round trip it moves the window towards the
point where the flow keeps --alpha packets queued in the path, so it fills
long fat pipes without filling their buffers and keeps its rate under random
loss. The registration is pinned at /sys/fs/bpf/lightpath/cc-fast, so it
outlives the command, and "fast" is added to
net.ipv4.tcp_allowed_congestion_control so that unprivileged sockets may
choose it: lightpath cp --cc fast, iperf3 -C fast, or setsockopt
TCP_CONGESTION. It is offered in every network namespace of the host.

install, remove and trace need root. See docs/cc.md.`,
		Example: `  sudo lightpath cc install fast
  sudo lightpath cc install fast --alpha 200 --gamma 0.5
  lightpath cc list
  sudo lightpath cc trace fast --check
  sudo lightpath cc remove fast`,
	}
	verbGroup(cmd)
	cmd.AddCommand(newCcInstallCmd(), newCcRemoveCmd(), newCcListCmd(), newCcTraceCmd())
	return cmd
}

// ccNote is the JSON line of install and remove.
type ccNote struct {
	Name    string       `json:"name"`
	Action  string       `json:"action"` // installed, retuned, unchanged, removed, absent
	Params  *fast.Params `json:"params,omitempty"`
	Pinned  string       `json:"pinned,omitempty"`
	Allowed bool         `json:"allowed"`
}

func newCcInstallCmd() *cobra.Command {
	var (
		asJSON bool
		alpha  uint32
		gamma  string
	)
	cmd := &cobra.Command{
		Use:   "install NAME",
		Short: "Load a congestion control (fast) into the kernel, or set its parameters",
		Long: `Loads NAME (today: fast) into the kernel and registers it, mounting the BPF
file system at /sys/fs/bpf if it is not there. Installing what is installed
changes nothing, or only the parameters: connections already using it take
the new ones at their next round.

--alpha is the number of packets each flow keeps queued in the path once
settled (queueing delay = alpha x segment size / rate: 100 packets are
11.6 ms at 100 Mbit/s, 1.2 ms at 1 Gbit/s). --gamma is the fraction of the
way to the target window taken per round trip.`,
		Example: `  sudo lightpath cc install fast
  sudo lightpath cc install fast --alpha 50`,
		Args: exactArgs("cc install", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := fast.DefaultParams
			p.Alpha = alpha
			if cmd.Flags().Changed("gamma") {
				g, err := fast.ParseGamma(gamma)
				if err != nil {
					return fmt.Errorf("cc install: %w", err)
				}
				p.Gamma = g
			}
			l, action, err := cc.Install(args[0], p)
			if err != nil {
				return fmt.Errorf("cc install %s: %w", args[0], err)
			}
			n := ccNote{Name: l.Name, Action: string(action), Params: l.Params, Pinned: l.Pinned, Allowed: l.Allowed}
			printOne(cmd.OutOrStdout(), asJSON, n, "%s %s: %s, pinned at %s, allowed for every user\n", l.Name, action, l.Params, l.Pinned)
			return nil
		},
	}
	cmd.Flags().Uint32Var(&alpha, "alpha", fast.DefaultParams.Alpha, "packets each flow keeps queued in the path")
	cmd.Flags().StringVar(&gamma, "gamma", fast.GammaString(fast.DefaultParams.Gamma), "fraction of the way to the target window per round trip, in (0, 1]")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func newCcRemoveCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Unregister a congestion control lightpath installed",
		Long: `Unpins NAME's registration and its maps and takes it out of
net.ipv4.tcp_allowed_congestion_control, leaving the list as it was before
the install. Connections using it keep it until they close; new ones can no
longer choose it. Removing what is not installed is not an error.`,
		Example: `  sudo lightpath cc remove fast`,
		Args:    exactArgs("cc remove", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			removed, err := cc.Remove(args[0])
			if err != nil {
				return fmt.Errorf("cc remove %s: %w", args[0], err)
			}
			n := ccNote{Name: args[0], Action: "removed"}
			format := "%s removed\n"
			if !removed {
				n.Action, format = "absent", "%s was not installed: nothing to remove\n"
			}
			printOne(cmd.OutOrStdout(), asJSON, n, format, args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func newCcListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the congestion controls the kernel offers, and the parameters of those lightpath installed",
		Long: `Lists every congestion control the kernel offers (its own, such as reno,
cubic and bbr, and those lightpath installed, with their parameters and
pin), whether unprivileged sockets may choose it
(net.ipv4.tcp_allowed_congestion_control), and which one is this network
namespace's default.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ls, err := cc.List()
			if err != nil {
				return fmt.Errorf("cc list: %w", err)
			}
			printList(cmd.OutOrStdout(), asJSON, ls, "", func(w io.Writer, ls []cc.Loaded) {
				printTable(w, []string{"NAME", "SOURCE", "ALLOWED", "DEFAULT", "PARAMETERS"}, ls, func(l cc.Loaded) []string {
					params := "-"
					if l.Params != nil {
						params = l.Params.String() + " (" + l.Pinned + ")"
					}
					return []string{l.Name, l.Source, yesNo(l.Allowed), yesNo(l.Default), params}
				})
			})
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print NDJSON: one line per congestion control, then a summary")
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func newCcTraceCmd() *cobra.Command {
	var (
		asJSON bool
		check  bool
		port   uint16
		dur    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "trace NAME",
		Short: "Print an installed congestion control's decision at each round trip of its connections",
		Long: `Prints one line per round trip of every connection using NAME (or only
those with --port as their local or remote port): the window before, the
base and the round's mean RTT, the backlog it implies, the window after,
and the phase (slow start, the round that ends it, or FAST's update); and
a line per loss: kept (the queue was short: random loss) or halved
(congestion), with the threshold it set under NEXT. With
--check each decision is recomputed by lightpath's own model of the
program's arithmetic and a difference is reported; the exit status is then
1. Runs until interrupted or for --duration. One trace at a time.`,
		Example: `  sudo lightpath cc trace fast --port 7070 --check`,
		Args:    exactArgs("cc trace", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := cc.OpenTrace(args[0])
			if err != nil {
				return fmt.Errorf("cc trace: %w", err)
			}
			defer t.Close()
			stop := make(chan os.Signal, 1)
			signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(stop)
			var end time.Time
			if dur > 0 {
				end = time.Now().Add(dur)
			}
			w := cmd.OutOrStdout()
			nd := &ndjson{w: w}
			if !asJSON {
				fmt.Fprintf(w, "%-6s %-6s %8s %9s %9s %8s %8s  %s\n", "LOCAL", "REMOTE", "CWND", "BASE(us)", "AVG(us)", "BACKLOG", "NEXT", "PHASE")
			}
			rounds, bad := 0, 0
			for {
				select {
				case <-stop:
					return ccTraceEnd(w, asJSON, check, rounds, bad)
				default:
				}
				deadline := time.Now().Add(200 * time.Millisecond)
				if !end.IsZero() && end.Before(deadline) {
					deadline = end
				}
				r, err := t.Read(deadline)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					if !end.IsZero() && !time.Now().Before(end) {
						return ccTraceEnd(w, asJSON, check, rounds, bad)
					}
					continue
				}
				if err != nil {
					return fmt.Errorf("cc trace: %w", err)
				}
				if port != 0 && r.LocalPort != port && r.RemotePort != port {
					continue
				}
				rounds++
				var cerr error
				if check {
					if cerr = r.Check(); cerr != nil {
						bad++
					}
				}
				if asJSON {
					line := struct {
						fast.Round
						Phase string `json:"phase"`
						Diff  string `json:"model_differs,omitempty"`
					}{Round: r, Phase: r.Phase.String()}
					if cerr != nil {
						line.Diff = cerr.Error()
					}
					nd.write(line)
					continue
				}
				fmt.Fprintf(w, "%-6d %-6d %8d %9d %9d %8d %8d  %s\n", r.LocalPort, r.RemotePort, r.Cwnd, r.BaseRTT, r.AvgRTT,
					r.Backlog, r.NextCwnd, r.Phase)
				if cerr != nil {
					fmt.Fprintf(w, "  model differs: %v\n", cerr)
				}
			}
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print NDJSON: one line per round, then a summary")
	cmd.Flags().BoolVar(&check, "check", false, "recompute each decision with lightpath's model and report differences")
	cmd.Flags().Uint16Var(&port, "port", 0, "only connections with this local or remote port")
	cmd.Flags().DurationVarP(&dur, "duration", "t", 0, "stop after this long (default: until interrupted)")
	return cmd
}

func ccTraceEnd(w io.Writer, asJSON, check bool, rounds, bad int) error {
	if asJSON {
		(&ndjson{w: w}).write(struct {
			Summary bool `json:"summary"`
			Rounds  int  `json:"rounds"`
			Differ  *int `json:"model_differs,omitempty"`
		}{true, rounds, map[bool]*int{true: &bad}[check]})
	} else {
		msg := strconv.Itoa(rounds) + " rounds"
		if check {
			msg += fmt.Sprintf(", %d differ from the model", bad)
		}
		fmt.Fprintln(w, msg)
	}
	if bad > 0 {
		return exitError{code: 1}
	}
	return nil
}
