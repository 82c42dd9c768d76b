package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/testbed"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/topology"
	"github.com/lightpath/lightpath/internal/units"
)

func newTestbedCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "testbed",
		Short: "Emulate wide-area sites on this host (network namespaces, shaped links)",
		Long: `Build emulated wide-area sites on this Linux host from a topology file.

Every node (host or router) becomes a network namespace, lp-<testbed>-<node>;
every link a pair of TUN devices with an htb tree for its rate on each
egress, and a user-space emulator daemon for its delay, jitter and loss
(this kernel needs no netem). Addresses are deterministic: 198.18.<site>.<n>
and 2001:2:0:<site>::<n> for the nodes. Needs root.

See docs/testbed.md for the topology file, and examples/ for two-site.yaml
and triangle.yaml.`,
		Example: `  lightpath testbed up examples/two-site.yaml
  lightpath testbed status
  lightpath testbed exec a1 -- ping -c 3 198.18.2.2
  lightpath testbed link set wan --delay 50ms --loss 0.1%
  lightpath testbed link set dedicated --down
  lightpath testbed link set dedicated --blackhole
  lightpath testbed down`,
	}
	cmd.AddCommand(newTestbedUpCmd(), newTestbedDownCmd(), newTestbedStatusCmd(),
		newTestbedExecCmd(), newTestbedLinkCmd(), newTestbedEmulatorCmd())
	return cmd
}

// testbedName picks the testbed a verb acts on: --name, else the base name
// of a topology file given, else the only testbed that is up.
func testbedName(name string, args []string) (string, error) {
	if name != "" {
		return name, testbed.CheckName(name)
	}
	if len(args) > 0 {
		return testbed.DefaultName(args[0]), nil
	}
	names, err := testbed.List()
	if err != nil {
		return "", err
	}
	switch len(names) {
	case 0:
		return "", errors.New("no testbed is up (lightpath testbed up FILE)")
	case 1:
		return names[0], nil
	}
	return "", fmt.Errorf("several testbeds are up (%s): say which with --name", strings.Join(names, ", "))
}

func newTestbedUpCmd() *cobra.Command {
	var name, controller, tokenFile string
	var asJSON, agents bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "up FILE [--name N]",
		Short: "Build a testbed from a topology file",
		Long: `Build a testbed from a topology file: namespaces, links, addresses, routes,
htb trees, and the emulator daemon (its pid, log and control socket go
under /run/lightpath/<name>/).

--name defaults to the file's base name (examples/two-site.yaml gives
two-site); several testbeds may be up at once under different names. A
malformed file is refused with the line named, and nothing is made. If
building fails half-way, what was made is removed again.

The host-wide net.core.rmem_max and wmem_max are raised (never lowered) to
what the longest path's bandwidth-delay product needs; down leaves them.

With --agents, an agent (lightpath agent) starts in every node, talking to
--controller with the token in --controller-token-file (role agent). The
agents run inside the namespaces, so they reach a controller on this host
through its unix socket: start the controller first with --listen
unix:/run/lightpath/<name>/controller.sock (up works beside it, and down
leaves it). up checks the controller answers before it builds anything,
and waits (--agents-wait) until every agent has registered; otherwise it
fails naming the nodes and each agent's last log line.`,
		Example: `  lightpath testbed up examples/two-site.yaml
  lightpath testbed up examples/triangle.yaml --name ring
  lightpath controller --listen 127.0.0.1:8080 --listen unix:/run/lightpath/two-site/controller.sock \
      --topology examples/two-site.yaml --admin-token-file admin.token &
  lightpath testbed up examples/two-site.yaml --agents \
      --controller unix:/run/lightpath/two-site/controller.sock --controller-token-file agent.token`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			if name == "" {
				name = testbed.DefaultName(file)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("testbed up: %w", err)
			}
			out := cmd.OutOrStdout()
			logf := func(format string, a ...any) {
				if !asJSON {
					fmt.Fprintf(cmd.ErrOrStderr(), "testbed %s: %s\n", name, fmt.Sprintf(format, a...))
				}
			}
			if agents && (controller == "" || tokenFile == "") {
				return errors.New("testbed up: --agents needs --controller URL and --controller-token-file F (a token of role agent)")
			}
			if !agents && (controller != "" || tokenFile != "" || cmd.Flags().Changed("agents-wait")) {
				return errors.New("testbed up: --controller, --controller-token-file and --agents-wait go with --agents")
			}
			if err := testbed.CheckName(name); err != nil {
				return fmt.Errorf("testbed up: %w", err)
			}
			if wait <= 0 {
				return errors.New("testbed up: --agents-wait must be above zero")
			}
			var ctl *client.Client
			if agents {
				if ctl, err = checkAgentsController(cmd.Context(), name, controller, tokenFile); err != nil {
					return fmt.Errorf("testbed up: %w (nothing was built)", err)
				}
			}
			// LIGHTPATH_TESTBED_EMULATOR names another lightpath binary to
			// run the emulator daemon: the tests run this binary under the
			// race detector, and the emulator, their harness, at full speed.
			exe := strings.TrimSpace(os.Getenv("LIGHTPATH_TESTBED_EMULATOR"))
			res, err := testbed.Up(cmd.Context(), testbed.UpOptions{Name: name, File: file, Data: data, Exe: exe, Logf: logf})
			if err != nil {
				return fmt.Errorf("testbed up: %w", err)
			}
			if agents {
				since := time.Now()
				started, err := startAgents(name, controller, tokenFile)
				if err == nil {
					logf("agents started on %d nodes; waiting for them to register (logs: %s)", len(started), testbed.AgentLogPath(name, "NODE"))
					err = waitAgents(cmd.Context(), ctl, name, started, since, wait)
				}
				if err != nil {
					return fmt.Errorf("testbed up: %w (the testbed is up; lightpath testbed down --name %s removes it)", err, name)
				}
				logf("agents registered on %d nodes", len(started))
			}
			if asJSON {
				(&ndjson{w: out}).write(struct {
					Type string `json:"type"`
					*testbed.UpResult
				}{"summary", res})
				return nil
			}
			fmt.Fprintf(out, "testbed %s is up: %d nodes, %d links in %.2f s (lightpath testbed status --name %s)\n",
				res.Name, res.Nodes, res.Links, res.Seconds, res.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "testbed name (default: the file's base name)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().BoolVar(&agents, "agents", false, "start a node agent (lightpath agent) in every node, talking to --controller")
	cmd.Flags().StringVar(&controller, "controller", "", "with --agents: the controller the agents talk to (unix:PATH reaches it from inside the namespaces)")
	cmd.Flags().StringVar(&tokenFile, "controller-token-file", "", "with --agents: a token of role agent")
	cmd.Flags().DurationVar(&wait, "agents-wait", agentsWait, "with --agents: how long to wait for every agent to register")
	return cmd
}

func newTestbedDownCmd() *cobra.Command {
	var name string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "down [FILE] [--name N]",
		Short: "Remove a testbed: its processes, devices, namespaces and state",
		Long: `Remove a testbed: the emulator daemon, every process running inside its
namespaces (servers and agents started with exec), its devices, its
namespaces and what up made in /run/lightpath/<name>/ (anything else there,
such as a controller's socket, is left with the directory). It is safe to
run twice, and it also cleans up after an up that crashed half-way.`,
		Example: `  lightpath testbed down
  lightpath testbed down --name ring`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := testbedName(name, args)
			if err != nil {
				return fmt.Errorf("testbed down: %w", err)
			}
			res, err := testbed.Down(n, nil)
			if err != nil {
				return fmt.Errorf("testbed down: %w", err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				(&ndjson{w: out}).write(struct {
					Type string `json:"type"`
					*testbed.DownResult
				}{"summary", res})
				return nil
			}
			if !res.Existed {
				fmt.Fprintf(out, "testbed %s: nothing to remove\n", n)
				return nil
			}
			fmt.Fprintf(out, "testbed %s removed: %d namespaces, %d devices, %d processes\n",
				n, res.Namespaces, res.Devices, res.Processes)
			if len(res.Kept) > 0 {
				fmt.Fprintf(out, "left in %s, not made by up: %s\n", testbed.Dir(n), textsafe.Sanitize(strings.Join(res.Kept, ", ")))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "testbed name (default: the only one up)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newTestbedStatusCmd() *cobra.Command {
	var name string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [FILE] [--name N] [--json]",
		Short: "Show a testbed's nodes, links and live counters",
		Long: `Show a testbed's nodes (namespace, addresses) and links: for each
direction its egress device (where its htb tree is), its rate, delay, jitter,
loss and duplicates now, and its counters: packets and bytes delivered,
drops by the loss model, while down and by the egress queue, what is queued
now, and the copies the duplicates made. Packets are counted as the segments
a wire would carry.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := testbedName(name, args)
			if err != nil {
				return fmt.Errorf("testbed status: %w", err)
			}
			r, err := testbed.Status(n)
			if err != nil {
				return fmt.Errorf("testbed status: %w", err)
			}
			if asJSON {
				(&ndjson{w: cmd.OutOrStdout()}).write(r)
				return nil
			}
			printStatus(cmd.OutOrStdout(), r)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "testbed name (default: the only one up)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func printStatus(w io.Writer, r *testbed.StatusReport) {
	emu := "running"
	if !r.Emulator.Running {
		emu = "NOT RUNNING: " + r.Emulator.Error
	}
	fmt.Fprintf(w, "testbed %s (%s), %s; emulator %s\n\n", r.Testbed, r.File, r.Phase, emu)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSITE\tROLE\tNAMESPACE\tIPV4\tIPV6")
	for _, n := range r.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Site, n.Role, n.Namespace, n.IPv4, n.IPv6)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LINK\tDIRECTION\tDEVICE\tRATE\tDELAY\tJITTER\tLOSS\tDUP\tMTU\tSTATE\tPACKETS\tBYTES\tDROPS loss/down/blackhole/queue\tQUEUED\tDUPLICATED\tLARGEST seg/pkt")
	for _, l := range r.Links {
		for _, d := range l.Directions {
			state := "up"
			switch {
			case d.Down:
				state = "DOWN"
			case d.Blackhole:
				state = "blackhole"
			}
			if d.Error != "" {
				state = "error: " + d.Error
			}
			fmt.Fprintf(tw, "%s (%s)\t%s>%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%d/%d/%d/%d\t%s\t%d\t%d/%d\n",
				l.Name, l.Role, d.From, d.To, d.Device, units.FormatRate(float64(d.RateBPS)),
				time.Duration(d.DelayNS).String(), time.Duration(d.JitterNS).String(),
				lossString(d), percent(d.Duplicate), l.MTU, state, d.Packets, units.FormatSize(int64(d.Bytes)),
				d.DropsLoss, d.DropsDown, d.DropsBlackhole, d.DropsQueue, units.FormatSize(int64(d.QueueBytes+d.DelayBytes)), d.Duplicated,
				d.MaxSegmentBytes, d.MaxPacketBytes)
		}
	}
	tw.Flush()
}

// percent shows a probability as a percentage, "0" for none.
func percent(p float64) string {
	if p == 0 {
		return "0"
	}
	return fmt.Sprintf("%.4g%%", p*100)
}

func lossString(d testbed.DirStatus) string {
	if d.LossModel == "" || d.Loss == 0 {
		return "0"
	}
	s := fmt.Sprintf("%.4g%%", d.Loss*100)
	if d.LossModel == topology.LossGilbertElliott {
		s += " (bursty)"
	}
	return s
}

func newTestbedExecCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "exec [--name N] NODE -- CMD [ARG...]",
		Short: "Run a command inside a node's namespace",
		Long: `Run a command inside a node's network namespace, as that node. The
command replaces this process, so its exit status is the command's.
LIGHTPATH_TESTBED and LIGHTPATH_NODE are set in its environment.`,
		Example: `  lightpath testbed exec a1 -- ping -c 3 198.18.2.2
  lightpath testbed exec b1 -- lightpath serve --listen 198.18.2.2:7070 --root /srv
  lightpath testbed exec --name ring geneva-h1 -- ip route`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Flags stop at the node's name, so the "--" after it arrives
			// as an argument; it is optional.
			argv := args[1:]
			if argv[0] == "--" {
				argv = argv[1:]
			}
			if len(argv) == 0 {
				return errors.New("testbed exec: no command given (lightpath testbed exec NODE -- CMD...)")
			}
			n, err := testbedName(name, nil)
			if err != nil {
				return fmt.Errorf("testbed exec: %w", err)
			}
			if err := testbed.Exec(n, args[0], argv); err != nil {
				return fmt.Errorf("testbed exec: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "testbed name (default: the only one up)")
	cmd.Flags().SetInterspersed(false)
	return cmd
}

func newTestbedLinkCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "link",
		Short: "Change a link while traffic flows",
	}
	var (
		name, from, rate, loss string
		duplicate              string
		delay, jitter          time.Duration
		burst                  float64
		up, down, blackhole    bool
	)
	set := &cobra.Command{
		Use:   "set LINK [--rate R] [--delay D] [--jitter D] [--loss P] [--duplicate P] [--up|--down|--blackhole]",
		Short: "Change a link's rate, delay, jitter, loss or duplicates, or cut, blackhole and restore it",
		Long: `Change a link while traffic flows; it takes effect within 100 ms. Both
directions change unless --from names the node whose outgoing direction to
change.

--rate rescales the htb classes 1:1 and 1:2 and leaves reservations'
classes alone. --delay and --jitter apply to packets sent from then on
(jitter never reorders unless the link allows it). --loss takes a
percentage (0.1%) or a fraction (0.001); with --loss-burst B the losses come
in bursts of B packets on average (Gilbert-Elliott). --duplicate takes a
percentage or a fraction too: each packet (a TCP segment or a UDP
datagram) that survives the loss arrives twice with that probability; 0
turns it off. --down drops every packet and takes the carrier off both
devices; --blackhole drops every packet and leaves the carrier up (a path
that is up but broken: nothing watching the devices sees it); --up
restores the link from either.`,
		Example: `  lightpath testbed link set wan --delay 50ms --loss 0.1%
  lightpath testbed link set wan --rate 500M
  lightpath testbed link set wan --loss 1% --loss-burst 4 --from ra
  lightpath testbed link set wan --duplicate 0.5%
  lightpath testbed link set dedicated --down
  lightpath testbed link set dedicated --blackhole
  lightpath testbed link set dedicated --up`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := testbedName(name, nil)
			if err != nil {
				return fmt.Errorf("testbed link set: %w", err)
			}
			c := testbed.LinkChange{From: from}
			fs := cmd.Flags()
			if n := btoi(up) + btoi(down) + btoi(blackhole); n > 1 {
				return errors.New("testbed link set: --up, --down and --blackhole exclude each other")
			}
			if rate != "" {
				r, err := units.ParseRate(rate)
				if err != nil {
					return fmt.Errorf("testbed link set: --rate: %w", err)
				}
				c.Rate = &r
			}
			if fs.Changed("delay") {
				if delay < 0 {
					return errors.New("testbed link set: --delay must not be negative")
				}
				c.Delay = &delay
			}
			if fs.Changed("jitter") {
				if jitter < 0 {
					return errors.New("testbed link set: --jitter must not be negative")
				}
				c.Jitter = &jitter
			}
			if fs.Changed("loss-burst") && loss == "" {
				return errors.New("testbed link set: --loss-burst goes with --loss")
			}
			if loss != "" {
				p, err := units.ParseFraction(loss)
				if err != nil {
					return fmt.Errorf("testbed link set: --loss: %w", err)
				}
				if p >= 1 {
					return errors.New("testbed link set: --loss must be below 100% (use --down to cut the link)")
				}
				l := topology.Loss{Model: topology.LossRandom, Rate: p}
				if p == 0 {
					l = topology.Loss{}
				} else if fs.Changed("loss-burst") {
					if burst < 1 {
						return errors.New("testbed link set: --loss-burst must be at least 1 (packets)")
					}
					if l, err = topology.GilbertElliott(p, burst); err != nil {
						return fmt.Errorf("testbed link set: %w", err)
					}
				}
				c.Loss = &l
			}
			if fs.Changed("duplicate") {
				p, err := units.ParseFraction(duplicate)
				if err != nil {
					return fmt.Errorf("testbed link set: --duplicate: %w", err)
				}
				c.Duplicate = &p
			}
			if up || down {
				c.Down = &down // either ends a blackhole
			}
			if blackhole {
				c.Blackhole = &blackhole // ends a down
			}
			if c.Rate == nil && c.Delay == nil && c.Jitter == nil && c.Loss == nil && c.Duplicate == nil && c.Down == nil && c.Blackhole == nil {
				return errors.New("testbed link set: nothing to change (give --rate, --delay, --jitter, --loss, --duplicate, --up, --down or --blackhole)")
			}
			if err := testbed.LinkSet(n, args[0], c); err != nil {
				return fmt.Errorf("testbed link set: %w", err)
			}
			return nil
		},
	}
	f := set.Flags()
	f.StringVar(&name, "name", "", "testbed name (default: the only one up)")
	f.StringVar(&from, "from", "", "change only the direction leaving this node")
	f.StringVar(&rate, "rate", "", "link rate, bits per second (1G, 500M)")
	f.DurationVar(&delay, "delay", 0, "one-way delay (25ms)")
	f.DurationVar(&jitter, "jitter", 0, "jitter around the delay (2ms)")
	f.StringVar(&loss, "loss", "", "loss, a percentage (0.1%) or a fraction (0.001)")
	f.Float64Var(&burst, "loss-burst", 0, "mean length of loss bursts, in packets (Gilbert-Elliott)")
	f.StringVar(&duplicate, "duplicate", "", "duplicated packets, a percentage (0.5%) or a fraction (0.005)")
	f.BoolVar(&up, "up", false, "restore the link")
	f.BoolVar(&down, "down", false, "cut the link: drop everything, carrier off")
	f.BoolVar(&blackhole, "blackhole", false, "drop everything, carrier left up")
	cmd.AddCommand(set)
	return cmd
}

func newTestbedEmulatorCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:    "emulator --name N",
		Short:  "The emulator daemon of a testbed (started by testbed up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)).With("component", "emulator")
			if err := testbed.RunEmulator(cmd.Context(), name, log); err != nil {
				return fmt.Errorf("testbed emulator: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "testbed name")
	cmd.MarkFlagRequired("name")
	return cmd
}
