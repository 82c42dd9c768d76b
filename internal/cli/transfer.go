package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/monitor/alert"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/units"
)

func newTransferCmd() *cobra.Command {
	var o ctlFlags
	cmd := &cobra.Command{
		Use:   "transfer",
		Short: "List the transfers the controller recorded, and show one with the alerts on its path",
		Long: `Transfers are what lightpath cp registers with the controller when it has
one (--controller, or --reserve): their progress, bytes per path, each
stream's TCP state, their outcome and bottleneck. "show" answers "why is my
transfer slow": besides the transfer it lists its reservation and path and
every alert state change on the links and nodes of that path (or on the
transfer itself) while it ran, with its reason and what its actions did.

Every verb takes --controller, --controller-token-file and --json as
lightpath reserve does. Users see their own transfers; operators and
admins see everyone's.`,
		Example: `  lightpath transfer list
  lightpath transfer show t-3fa2c81b9e07
  lightpath transfer show t-3fa2c81b9e07 --json | jq .alerts`,
	}
	o.register(cmd.PersistentFlags())
	verbGroup(cmd)
	cmd.AddCommand(newTransferListCmd(&o), newTransferShowCmd(&o))
	return cmd
}

func newTransferListCmd(o *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the recorded transfers, newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := fetch(o, "transfer list", func(c *client.Client) ([]transfer.Transfer, error) { return c.Transfers(cmd.Context()) })
			if err != nil {
				return err
			}
			printList(cmd.OutOrStdout(), o.json, ts, "no transfers recorded", func(w io.Writer, ts []transfer.Transfer) {
				printTable(w, []string{"ID", "STATE", "FROM", "TO", "DONE", "RATE", "STARTED", "SOURCE", "DESTINATION"}, ts, func(t transfer.Transfer) []string {
					return []string{t.ID, t.State, orDash(t.From), orDash(t.To), progressOf(t), units.FormatRate(t.ThroughputBps),
						fmtTime(t.StartedAt), t.Source, t.Destination}
				})
			})
			return nil
		},
	}
}

func progressOf(t transfer.Transfer) string {
	if t.BytesTotal > 0 {
		return fmt.Sprintf("%s/%s", units.FormatSize(t.BytesDone), units.FormatSize(t.BytesTotal))
	}
	return units.FormatSize(t.BytesDone)
}

func newTransferShowCmd(o *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a transfer: progress, path, bottleneck and the alerts on its path",
		Args:  exactArgs("transfer show", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := fetch(o, "transfer show", func(c *client.Client) (apiv1.TransferPage, error) { return c.Transfer(cmd.Context(), args[0]) })
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if o.json {
				(&ndjson{w: w}).write(p)
				return nil
			}
			printTransferPage(w, p)
			return nil
		},
	}
}

func printTransferPage(w io.Writer, p apiv1.TransferPage) {
	t := p.Transfer
	tw := newTable(w)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, textsafe.Sanitize(v))
		}
	}
	row("transfer", t.ID+" ("+t.Direction+", "+t.Owner+")")
	row("state", t.State)
	row("from → to", orDash(t.From)+" → "+orDash(t.To))
	row("source", t.Source)
	row("destination", t.Destination)
	row("done", progressOf(t))
	row("throughput", units.FormatRate(t.ThroughputBps))
	if len(t.BytesByPath) > 0 {
		var parts []string
		for k, v := range t.BytesByPath {
			parts = append(parts, k+" "+units.FormatSize(v))
		}
		row("by path", strings.Join(parts, ", "))
	}
	row("streams", fmt.Sprint(t.Streams))
	row("started", fmtTime(t.StartedAt))
	if !t.EndedAt.IsZero() {
		row("ended", fmtTime(t.EndedAt)+" ("+units.FormatDuration(t.EndedAt.Sub(t.StartedAt))+")")
		row("verified", fmt.Sprint(t.Verified))
	}
	if t.Bottleneck != "" {
		row("bottleneck", t.Bottleneck+": "+t.BottleneckWhy)
	}
	row("error", t.Error)
	if r := p.Reservation; r != nil {
		row("reservation", fmt.Sprintf("%s %s %s via %s", r.ID, fmtState(*r), fmtRate(r.Bandwidth), client.PathString(r.Path)))
	}
	tw.Flush()
	if len(p.Alerts) == 0 {
		fmt.Fprintln(w, "alerts: none on its path while it ran")
		return
	}
	fmt.Fprintln(w, "alerts on its path while it ran (newest first):")
	for _, raw := range p.Alerts {
		var a struct {
			At      time.Time
			Rule    string
			To      string
			Reason  string
			Actions []alert.ActionResult
		}
		if json.Unmarshal(raw, &a) != nil {
			continue
		}
		fmt.Fprintf(w, "  %s  %s %s: %s\n", safeArgs([]any{fmtTime(a.At), a.Rule, a.To, a.Reason})...)
		for _, ac := range a.Actions {
			ok := "ok"
			if !ac.OK {
				ok = "FAILED"
			}
			fmt.Fprintf(w, "      %s %s: %s\n", safeArgs([]any{ac.Kind, ok, ac.Detail})...)
		}
	}
}
