package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/agent"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/monitor/collect"
	"github.com/lightpath/lightpath/internal/monitor/collect/emulator"
	"github.com/lightpath/lightpath/internal/monitor/push"
	"github.com/lightpath/lightpath/internal/units"
)

func newAgentCmd() *cobra.Command {
	var (
		o               ctlFlags
		node, netns     string
		lease, interval time.Duration
		debug           bool
		collectEvery    time.Duration
		spool, tb       string
		spoolMax        string
		noMetrics       bool
		metricsListen   string
	)
	watched := &agent.Watched{}
	// The collectors' flags must exist before the flags are parsed, the
	// node and testbed they work for only after.
	env := &collect.Env{Topology: watched.Topology, Flows: watched.Flows}
	// This registry only carries the flags; its env turns every default
	// on, as the real one does inside a testbed. The emulator's collector
	// is added here, not in package collect, so the agent links no testbed.
	reg := collect.NewRegistry(collect.Env{Testbed: "-", Topology: watched.Topology}, emulator.New)
	cmd := &cobra.Command{
		Use:   "agent --node NAME --controller URL --controller-token-file F",
		Short: "Provision this node's part of the reservations that cross it into its kernel",
		Long: `Run the node agent of NAME: it registers with the controller and keeps a
lease alive with heartbeats, and makes this node's kernel hold exactly its
part of the live reservations that cross it, from their start to their
end: an htb class per reservation on the egress device of each link it
leaves by, DSCP marking of its flows on the end hosts, policy routing of
that DSCP onto the reserved path on routers, and MSS clamping. It reports
each part in place (or failed, with why) to the controller, which makes a
reservation ACTIVE once every managed node on its path has it.

It touches only what it created (an nftables table named lightpath, htb
classes from 1:100, ip rules in its own priority range), mends drift at
every round, and after a restart takes over or removes what it finds.

Run one per node, inside the node's network namespace (in a testbed:
lightpath testbed exec NODE -- lightpath agent ..., with the controller's
unix socket as --controller). The token must belong to a user of role
agent. The controller takes an agent's word only for the node its token
is bound to (lightpath user add NAME --role agent --node NODE, or lightpath
user token create NAME --node NODE). Given an agent token bound to no node
(one for every node, as testbed up --agents hands out), the agent creates
a token bound to its node with it on its first start and keeps that in
--spool as controller.token (mode 0600), using it from then on.

It also collects metrics every --collect-interval (1s) with the collectors
enabled by their --collector.NAME flags: host, interfaces, htb classes,
TCP state of the reserved flows, the testbed emulator's pipes (with
--testbed), and RTT/loss probes to its neighbours. It pushes them to the
controller's repository in batches; while the controller is unreachable
they wait in --spool on disk (at most --spool-max, oldest dropped first)
and go out when it is back. --metrics-listen HOST:PORT also serves the
latest collection on /metrics, for a Prometheus that scrapes the agents
themselves (the controller's /metrics has every agent's series anyway).`,
		Example: `  lightpath testbed exec ra -- lightpath agent --node ra \
      --controller unix:/run/lightpath/two-site/controller.sock --controller-token-file agent.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node == "" {
				return fmt.Errorf("agent: --node is required")
			}
			c, err := o.client()
			if err != nil {
				return fmt.Errorf("agent: %w", err)
			}
			lvl := slog.LevelInfo
			if debug {
				lvl = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl})).With("component", "agent", "node", node)
			log.Info("starting", "controller", c.URL())
			if spool == "" {
				spool = filepath.Join("/var/lib/lightpath/spool", node)
			}
			// The token enrolment makes for this node is kept in the spool.
			tokFile := filepath.Join(spool, "controller.token")
			kept, _ := os.ReadFile(tokFile)
			c, minted, err := client.Enrol(cmd.Context(), c, node, strings.TrimSpace(string(kept)), log)
			if err != nil {
				return fmt.Errorf("agent %s: %w", node, err)
			}
			if minted != "" {
				err := os.MkdirAll(spool, 0o700)
				if err == nil {
					err = writeSecret(tokFile, minted)
				}
				if err != nil {
					log.Warn("keep this node's token", "file", tokFile, "err", err)
				}
			}
			cfg := agent.Config{Client: c, Node: node, Lease: lease, Interval: interval, NetNS: netns, Log: log}
			if !noMetrics {
				env.Node, env.Testbed, env.NetNS, env.Log = node, tb, netns, log
				full := collect.NewRegistry(*env, emulator.New)
				full.Timeout = min(collect.DefaultTimeout, max(collectEvery, time.Second))
				full.EnableFrom(reg, cmd.Flags())
				defer full.Close()
				max, err := units.ParseSize(spoolMax)
				if err != nil {
					return fmt.Errorf("agent: --spool-max: %w", err)
				}
				p, err := push.New(push.Options{Node: node, Dir: spool, MaxBytes: max, Log: log}, c)
				if err != nil {
					return fmt.Errorf("agent: %w", err)
				}
				cfg.Monitor = &agent.Monitoring{Registry: full, Watched: watched, Pusher: p, Interval: collectEvery, Listen: metricsListen}
				log.Info("collecting", "collectors", strings.Join(full.Enabled(), ","), "every", collectEvery, "spool", spool)
			}
			if err := agent.Run(cmd.Context(), cfg); err != nil {
				return fmt.Errorf("agent %s: %w", node, err)
			}
			return nil
		},
	}
	o.register(cmd.Flags())
	cmd.AddCommand(newAgentListCmd(), newAgentThroughputCmd())
	f := cmd.Flags()
	f.StringVar(&node, "node", "", "the node this agent provisions (its name in the topology)")
	f.StringVar(&netns, "netns", "", "network namespace to manage, as a path (default: the agent's own)")
	f.DurationVar(&lease, "lease", agent.DefaultLease, "how long a heartbeat keeps the agent alive at the controller")
	f.DurationVar(&interval, "interval", agent.DefaultInterval, "how often to reconcile and heartbeat")
	f.BoolVar(&debug, "debug", false, "log every round")
	f.DurationVar(&collectEvery, "collect-interval", agent.DefaultCollectInterval, "how often to collect metrics")
	f.StringVar(&spool, "spool", "", "where metrics wait while the controller is unreachable (default /var/lib/lightpath/spool/NODE)")
	f.StringVar(&spoolMax, "spool-max", "64MiB", "the most the spool may hold; past it the oldest samples are dropped")
	f.StringVar(&tb, "testbed", "", "the testbed this node belongs to, for the emulator collector")
	f.BoolVar(&noMetrics, "no-metrics", false, "provision only: collect and push no metrics")
	f.StringVar(&metricsListen, "metrics-listen", "", "also serve the latest collection at http://HOST:PORT/metrics (for a Prometheus that scrapes agents)")
	reg.Flags(f)
	return cmd
}

func newAgentListCmd() *cobra.Command {
	var o ctlFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the node agents the controller knows: alive (lease held) or gone",
		Long: `List every node agent that registered with the controller: when its
current run of heartbeats began, when its lease runs out, and whether it is
alive. A reservation crossing a node whose agent is gone is flagged
degraded.`,
		Example: `  lightpath agent list --controller http://127.0.0.1:8080 --controller-token-file admin.token`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			as, err := fetch(&o, "agent list", func(c *client.Client) ([]apiv1.Agent, error) { return c.Agents(cmd.Context()) })
			if err != nil {
				return err
			}
			printList(cmd.OutOrStdout(), o.json, as, "no agents have registered", func(w io.Writer, as []apiv1.Agent) {
				printTable(w, []string{"NODE", "STATE", "LEASE EXPIRES", "SINCE"}, as, func(a apiv1.Agent) []string {
					state := "alive"
					if !a.Alive {
						state = "gone"
					}
					return []string{a.Node, state, a.LeaseExpires.Format(time.RFC3339), a.RegisteredAt.Format(time.RFC3339)}
				})
			})
			return nil
		},
	}
	o.register(cmd.Flags())
	return cmd
}

func newAgentThroughputCmd() *cobra.Command {
	var (
		d       time.Duration
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "throughput PEER",
		Short: "Measure the throughput to a neighbour's agent (its probe sink), on demand",
		Long: fmt.Sprintf(`Send to the throughput sink of the agent at PEER (an address of one of its
link ends, port %d unless given) for -t and print the rate the sink received.
It runs in the caller's network namespace: in a testbed, run it inside a node
with lightpath testbed exec NODE -- lightpath agent throughput PEER. The
agents' probe collector serves the sink (and answers the RTT probes).`, collect.ProbePort),
		Example: `  lightpath testbed exec ra -- lightpath agent throughput 198.19.0.18 -t 5s   # rb, across wan in two-site.yaml`,
		Args:    exactArgs("agent throughput", "PEER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if d <= 0 || d > 5*time.Minute {
				return fmt.Errorf("agent throughput: -t %v: want 1s to 5m", d)
			}
			bps, err := collect.Throughput(cmd.Context(), args[0], d)
			if err != nil {
				return fmt.Errorf("agent throughput: %w", err)
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				(&ndjson{w: out}).write(struct {
					Type          string  `json:"type"`
					Peer          string  `json:"peer"`
					Seconds       float64 `json:"seconds"`
					ThroughputBps float64 `json:"throughput_bps"`
				}{"summary", args[0], d.Seconds(), bps})
				return nil
			}
			fmt.Fprintf(out, "%s to %s over %s\n", units.FormatRate(bps), args[0], units.FormatDuration(d))
			return nil
		},
	}
	cmd.Flags().DurationVarP(&d, "time", "t", 5*time.Second, "how long to send")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON summary line")
	return cmd
}
