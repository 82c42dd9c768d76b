package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
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
		Short: "Submit datasets to the transfer service and follow them; list and show recorded transfers",
		Long: `The transfer service moves datasets between endpoints (one site's storage,
served by its data nodes: lightpath serve --controller) with nobody's shell
on either site. "submit" hands over sources and a destination as
ENDPOINT:PATH, and a deadline if there is one; the controller lists the
dataset on a source data node, books the network for a deadline, spreads
the files over every live node pair and retries what fails. Jobs have ids
j-…; "status", "wait" and "cancel" take them. Every job says in one line
what it waits for or why it failed. See docs/service.md.

Transfers (ids t-…) are what lightpath cp registers with the controller
when it has one (--controller, or --reserve): their progress, bytes per
path, each stream's TCP state, their outcome and bottleneck. "show"
answers "why is my transfer slow": besides the transfer it lists its
reservation and path and every alert state change on the links and nodes
of that path (or on the transfer itself) while it ran, with its reason and
what its actions did. "show" of a job id shows the job as "status" does;
"list" lists jobs and transfers together, with their kind.

Every verb takes --controller, --controller-token-file and --json as
lightpath reserve does. Users see their own jobs and transfers; operators
and admins see everyone's.`,
		Example: `  lightpath transfer submit cern:run1 fnal:incoming/ --deadline +6h
  lightpath transfer wait j-7c1e4f0a92b3
  lightpath transfer status j-7c1e4f0a92b3 --optimizer
  lightpath transfer list
  lightpath transfer show t-3fa2c81b9e07
  lightpath transfer show t-3fa2c81b9e07 --json | jq .alerts`,
	}
	o.register(cmd.PersistentFlags())
	verbGroup(cmd)
	cmd.AddCommand(newTransferSubmitCmd(&o), newTransferStatusCmd(&o), newTransferWaitCmd(&o),
		newTransferCancelCmd(&o), newTransferListCmd(&o), newTransferShowCmd(&o))
	return cmd
}

// listed is one row of transfer list: a job or a recorded transfer.
type listed struct {
	kind string
	job  *transfer.Job
	tr   *transfer.Transfer
	at   time.Time
}

func newTransferListCmd(o *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the jobs and the recorded transfers, newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var (
				jobs []transfer.Job
				ts   []transfer.Transfer
			)
			err := o.request("transfer list", func(c *client.Client) error {
				var err error
				if ts, err = c.Transfers(cmd.Context()); err != nil {
					return err
				}
				jobs, err = c.Jobs(cmd.Context(), client.JobOptions{})
				var ae *client.APIError
				if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
					jobs, err = nil, nil // a controller without the transfer service
				}
				return err
			})
			if err != nil {
				return err
			}
			var rows []listed
			for i := range jobs {
				rows = append(rows, listed{kind: "job", job: &jobs[i], at: jobs[i].CreatedAt})
			}
			for i := range ts {
				rows = append(rows, listed{kind: "cp", tr: &ts[i], at: ts[i].StartedAt})
			}
			slices.SortStableFunc(rows, func(a, b listed) int { return b.at.Compare(a.at) })
			w := cmd.OutOrStdout()
			if o.json {
				// Each job and each transfer as the API has it (a job's
				// id starts j-, a transfer's t-), then the summary.
				nd := &ndjson{w: w}
				for _, r := range rows {
					if r.job != nil {
						nd.write(r.job)
					} else {
						nd.write(r.tr)
					}
				}
				nd.write(transferListSummary{Summary: true, Count: len(rows), Jobs: len(jobs), Transfers: len(ts)})
				return nil
			}
			if len(rows) == 0 {
				fmt.Fprintln(w, "no jobs or transfers recorded")
				return nil
			}
			printTable(w, []string{"KIND", "ID", "STATE", "FROM", "TO", "DONE", "RATE", "STARTED", "SOURCE", "DESTINATION"}, rows, func(r listed) []string {
				if j := r.job; j != nil {
					return []string{"job", j.ID, j.State, pairEnds(j.Pairs, true), pairEnds(j.Pairs, false), jobProgress(*j),
						units.FormatRate(j.ThroughputBps), fmtTime(j.StartedAt), strings.Join(j.Sources, " "), j.Destination}
				}
				t := r.tr
				return []string{"cp", t.ID, t.State, orDash(t.From), orDash(t.To), progressOf(*t), units.FormatRate(t.ThroughputBps),
					fmtTime(t.StartedAt), t.Source, t.Destination}
			})
			return nil
		},
	}
}

// transferListSummary ends transfer list's NDJSON.
type transferListSummary struct {
	Summary   bool `json:"summary"`
	Count     int  `json:"count"`
	Jobs      int  `json:"jobs"`
	Transfers int  `json:"transfers"`
}

// pairEnds is the source (from) or destination nodes of a job's pairs.
func pairEnds(ps []transfer.Pair, from bool) string {
	var out []string
	for _, p := range ps {
		n := p.To
		if from {
			n = p.From
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

// jobProgress is a job's files and bytes done.
func jobProgress(j transfer.Job) string {
	s := fmt.Sprintf("%d/%d files", j.FilesDone, j.FilesTotal)
	if j.BytesTotal > 0 {
		s += fmt.Sprintf(", %s/%s", units.FormatSize(j.BytesDone), units.FormatSize(j.BytesTotal))
	}
	if j.FilesFailed > 0 {
		s += fmt.Sprintf(", %d failed", j.FilesFailed)
	}
	return s
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
		Short: "Show a job (as status does), or a transfer: progress, path, bottleneck and the alerts on its path",
		Args:  exactArgs("transfer show", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if isJobID(args[0]) {
				return runTransferStatus(cmd, o, "transfer show", args[0], false)
			}
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

func isJobID(id string) bool { return strings.HasPrefix(id, "j-") }

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

// ---------------------------------------------------------------------------
// Jobs of the transfer service.

type submitFlags struct {
	deadline, key, checksum, checksumFile, project, cc string
	transport, onConflict                              string
	priority                                           int
	overwrite, skipExisting, update                    bool
	noWait, dryRun                                     bool
}

func newTransferSubmitCmd(o *ctlFlags) *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit SRC... DST",
		Short: "Hand a dataset to the transfer service: sources and a destination as ENDPOINT:PATH",
		Long: `Submit a job: every SRC (files or trees, all on one endpoint) goes into
DST, a directory on another endpoint (or elsewhere on the same one), each
as ENDPOINT:PATH with PATH under the endpoint's root. The service lists
the sources on a source data node, spreads the files over every live pair
of data nodes, verifies each file end to end (crc32c, or adler32 with
--checksum adler32) and retries what fails.

--deadline TIME (2026-11-26 09:00, RFC 3339, or +DURATION after now) books
the network for the job's earliest completion, which must be by then: the
service plans it over every live pair of data nodes and every path
between the two sites at once (circuits first), and books one reservation
per path as your user. A deadline that cannot be met is refused with the
earliest completion that can, nothing booked: the job ends FAILED with
that as its reason. Without a deadline the job starts at once on what is
free, higher --priority first.

The submission is accepted at once (QUEUED). A job with a --deadline is
then followed until it is booked (SCHEDULED) or refused, which takes its
listing and planning; a refused job prints no job line and exits 1. A job
without one returns as soon as it is accepted. --no-wait returns at once
for both (follow with transfer status or transfer wait). --dry-run lists
and plans the job without booking anything: it prints the plan, pair by
pair, with its earliest completion (the job ends CANCELLED).

A file already at the destination is left alone when its size, time and
checksum match and replaced otherwise (--update, the default, so a
resubmission sends only what is missing); --overwrite replaces it,
--skip-existing leaves it alone. --checksum-file F names the checksums the
files must arrive with: lines "HEX  ENDPOINT:PATH", or "HEX  PATH" under
the first source's endpoint, HEX in the job's algorithm.

--cc NAME is the congestion control of the job's data streams (bbr, cubic,
reno, or fast: FAST TCP, which each source data node must have loaded with
lightpath cc install fast, as root); a data node whose kernel lacks it fails
the job's tasks, saying so. Default: each data node's own (serve --cc, or
bbr where the kernel has it).

--transport udp sends the job's data over the reliable UDP transport (the
control connections stay TCP; every data node's serve listens for UDP on
its port). --cc is then its rate control: fixed (at the task's booked
rate, or its share of the data node's --max-rate), fast or aimd; default
fixed for a job with a --deadline (which books the network), fast
otherwise.

Two live jobs never write one destination file: a job listing a file that
another job (yours or anyone's, QUEUED, SCHEDULED or ACTIVE) is writing
fails at its listing, naming that job and the path (--on-conflict refuse,
the default); with --on-conflict wait those files wait until the other
job's file has ended, then go on.

--id KEY makes the submission idempotent: the same KEY again returns the
first job (or is refused when the request differs). It prints the job's
id, its state and what it waits for; follow it with transfer wait.`,
		Example: `  lightpath transfer submit cern:run1 fnal:incoming/
  lightpath transfer submit cern:run1 cern:run2/raw fnal:incoming/ --deadline "2026-11-26 09:00" --id run1-2
  lightpath transfer submit cern:run1 fnal:in --checksum adler32 --checksum-file run1.adler32 --json
  lightpath transfer submit cern:run1 fnal:in --deadline +2h --dry-run`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return fmt.Errorf("transfer submit: want SRC... DST, got %d argument(s) (see 'lightpath transfer submit --help')", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			const what = "transfer submit"
			req, err := f.request(args, resolveNow())
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			var resp apiv1.JobResponse
			err = o.request(what, func(c *client.Client) error {
				var err error
				if resp, err = c.SubmitJob(cmd.Context(), req); err != nil {
					return err
				}
				if f.noWait || (req.Deadline.IsZero() && !req.DryRun) {
					return nil
				}
				// Follow it until it is booked, refused or planned.
				resp.Job, err = followBooking(cmd.Context(), c, resp.Job)
				return err
			})
			if err != nil {
				o.writeRefusal(cmd.OutOrStdout(), errors.Unwrap(err))
				return err
			}
			j := resp.Job
			switch {
			case req.DryRun && j.State == transfer.JobCancelled:
				if o.json {
					printOne(cmd.OutOrStdout(), true, resp, "")
					return nil
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", textsafe.Sanitize(j.Reason))
				printPlan(cmd.OutOrStdout(), j)
				return nil
			case j.State == transfer.JobFailed:
				// Refused: no job line on standard output.
				return fmt.Errorf("%s: job %s refused: %s", what, j.ID, textsafe.Sanitize(j.Reason))
			}
			again := ""
			if !resp.Created {
				again = " (submitted before with this --id)"
			}
			printOne(cmd.OutOrStdout(), o.json, resp, "%s %s%s: %s\n", j.ID, j.State, again, orWord(j.Reason, "accepted"))
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.deadline, "deadline", "", "complete by then: a local date and time, RFC 3339, or +DURATION (the network is booked for it)")
	fs.IntVar(&f.priority, "priority", 0, "order among jobs without a deadline: higher first")
	fs.StringVar(&f.key, "id", "", "idempotency key: the same key again returns the first job")
	fs.StringVar(&f.checksum, "checksum", "", "end-to-end checksum: crc32c (default) or adler32")
	fs.StringVar(&f.checksumFile, "checksum-file", "", `file of expected checksums: lines "HEX  ENDPOINT:PATH" or "HEX  PATH"`)
	fs.StringVar(&f.project, "project", "", "the project the job runs under (its limits apply)")
	fs.StringVar(&f.cc, "cc", "", "congestion control of the job's data streams: bbr, cubic, reno, or fast (loaded on the data nodes with lightpath cc install fast) (default: each data node's own); with --transport udp: fixed, fast or aimd")
	fs.StringVar(&f.transport, "transport", "", "what carries the job's data streams: tcp (default) or udp")
	fs.StringVar(&f.onConflict, "on-conflict", "", "a destination file another live job is writing: refuse (fail this job, the default) or wait (until that job's file has ended)")
	fs.BoolVar(&f.update, "update", false, "leave a destination file whose size, time and checksum match, replace it otherwise (the default)")
	fs.BoolVar(&f.overwrite, "overwrite", false, "replace destination files that exist")
	fs.BoolVar(&f.skipExisting, "skip-existing", false, "leave destination files that exist alone")
	fs.BoolVar(&f.noWait, "no-wait", false, "return as soon as the job is accepted, also with --deadline")
	fs.BoolVar(&f.dryRun, "dry-run", false, "list and plan the job, print the plan and its earliest completion, book nothing")
	return cmd
}

// followBooking polls job j until it leaves QUEUED (booked, refused, a
// dry run planned, or ended otherwise) and returns it as it is then.
func followBooking(ctx context.Context, c *client.Client, j transfer.Job) (transfer.Job, error) {
	for j.State == transfer.JobQueued {
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		p, err := c.Job(ctx, j.ID, client.JobPageOptions{NoFiles: true})
		if err != nil {
			return j, err
		}
		j = p.Job
	}
	return j, nil
}

// printPlan prints a job's pairs as planned: each pair's path, rate and
// window (and its later consecutive windows).
func printPlan(w io.Writer, j transfer.Job) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FROM\tTO\tPATH\tRATE\tSTART\tEND\tSHARE")
	for _, p := range j.Pairs {
		end := p.End
		if n := len(p.Later); n > 0 {
			end = p.Later[n-1].End
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", textsafe.Sanitize(p.From), textsafe.Sanitize(p.To), textsafe.Sanitize(strings.Join(p.Path, ",")),
			units.FormatRate(float64(p.RateBps)), p.Start.In(displayZone).Format(time.RFC3339), end.In(displayZone).Format(time.RFC3339),
			units.FormatSize(p.ShareBytes))
	}
	tw.Flush()
}

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// request builds the job from the arguments and flags, refusing what the
// controller would refuse anyway and the command line can tell: malformed
// locations, sources on several endpoints, a deadline not in the future,
// two policies, a bad checksum file.
func (f submitFlags) request(args []string, now time.Time) (transfer.JobRequest, error) {
	req := transfer.JobRequest{Priority: f.priority, Key: f.key, Project: f.project, CC: f.cc, Transport: f.transport, DryRun: f.dryRun, OnConflict: f.onConflict}
	if err := transfer.CheckOnConflict(f.onConflict); err != nil {
		return req, fmt.Errorf("--%w", err)
	}
	if err := transfer.CheckCC(f.cc); err != nil {
		return req, fmt.Errorf("--cc: %w", err)
	}
	if err := transfer.CheckTransport(f.transport, f.cc); err != nil {
		return req, fmt.Errorf("--transport: %w", err)
	}
	srcs, dst := args[:len(args)-1], args[len(args)-1]
	var first transfer.Location
	for i, a := range srcs {
		l, err := transfer.ParseLocation(a)
		if err != nil {
			return req, fmt.Errorf("source: %w", err)
		}
		if i == 0 {
			first = l
		} else if l.Endpoint != first.Endpoint {
			return req, fmt.Errorf("sources on endpoints %s and %s: a job's sources are all on one endpoint (submit one job per endpoint)", first.Endpoint, l.Endpoint)
		}
		req.Sources = append(req.Sources, l.String())
	}
	d, err := transfer.ParseLocation(dst)
	if err != nil {
		return req, fmt.Errorf("destination: %w", err)
	}
	req.Destination = d.String()
	if f.deadline != "" {
		t, err := parseWhen(f.deadline, now)
		if err != nil {
			return req, fmt.Errorf("--deadline: %w", err)
		}
		if !t.After(now) {
			return req, fmt.Errorf("--deadline %s is in the past", t.In(displayZone).Format(time.RFC3339))
		}
		req.Deadline = t.UTC()
	}
	switch n := btoi(f.update) + btoi(f.overwrite) + btoi(f.skipExisting); {
	case n > 1:
		return req, errors.New("--update, --overwrite and --skip-existing exclude each other: give one")
	case f.overwrite:
		req.Policy = transfer.PolicyOverwrite
	case f.skipExisting:
		req.Policy = transfer.PolicySkip
	case f.update:
		req.Policy = transfer.PolicyUpdate
	}
	switch f.checksum {
	case "", transfer.ChecksumCRC32C, transfer.ChecksumAdler32:
		req.Checksum = f.checksum
	default:
		return req, fmt.Errorf("--checksum %q: want crc32c or adler32", f.checksum)
	}
	if f.checksumFile != "" {
		b, err := os.ReadFile(f.checksumFile)
		if err != nil {
			return req, fmt.Errorf("--checksum-file: %w", unwrapPath(err))
		}
		req.Expected, err = parseChecksumFile(string(b), first.Endpoint)
		if err != nil {
			return req, fmt.Errorf("--checksum-file %s: %w", f.checksumFile, err)
		}
	}
	return req, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parseChecksumFile reads lines "HEX  ENDPOINT:PATH" (or "HEX  PATH",
// under endpoint), as md5sum-style tools write them; blank lines and
// lines starting with # are skipped. HEX is 8 hex digits (crc32c and
// adler32 are 32 bits).
func parseChecksumFile(text, endpoint string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, name, ok := strings.Cut(line, " ")
		name = strings.TrimLeft(strings.TrimSpace(name), "*")
		if !ok || name == "" {
			return nil, fmt.Errorf("line %d: want HEX  ENDPOINT:PATH", i+1)
		}
		sum = strings.ToLower(sum)
		if len(sum) != 8 || strings.Trim(sum, "0123456789abcdef") != "" {
			return nil, fmt.Errorf("line %d: %q is not a 32-bit checksum in hex (8 digits)", i+1, sum)
		}
		if !strings.Contains(name, ":") {
			name = endpoint + ":" + name
		}
		l, err := transfer.ParseLocation(name)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if prev, dup := out[l.String()]; dup && prev != sum {
			return nil, fmt.Errorf("line %d: %s is listed twice with different checksums", i+1, l)
		}
		out[l.String()] = sum
	}
	if len(out) == 0 {
		return nil, errors.New("no checksums in it")
	}
	return out, nil
}

func newTransferStatusCmd(o *ctlFlags) *cobra.Command {
	var optimizer bool
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a job: its state and why, its node pairs and bookings, its files by state and those that failed",
		Long: `Show a job of the transfer service: its state and the one line saying what
it waits for or why it failed, its progress, the node pairs it runs on with
the reservation behind each (or why it runs on the routed path), the count
of its files in each state, and every failed file with its error. With
--optimizer, the optimizer's decisions for its pairs (concurrency and
streams, and why), newest first. --json prints the API's job page.`,
		Example: `  lightpath transfer status j-7c1e4f0a92b3
  lightpath transfer status j-7c1e4f0a92b3 --optimizer`,
		Args: exactArgs("transfer status", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTransferStatus(cmd, o, "transfer status", args[0], optimizer)
		},
	}
	cmd.Flags().BoolVar(&optimizer, "optimizer", false, "also show the optimizer's decisions")
	return cmd
}

func runTransferStatus(cmd *cobra.Command, o *ctlFlags, what, id string, optimizer bool) error {
	var failed []transfer.JobFile
	p, err := fetch(o, what, func(c *client.Client) (apiv1.JobPage, error) {
		p, err := c.Job(cmd.Context(), id, client.JobPageOptions{Optimizer: optimizer})
		if err != nil || o.json {
			return p, err
		}
		// Every failed file, a page at a time; the job's first page of
		// files shows the parted ones.
		if p.FileCounts == nil || p.FileCounts[transfer.FileFailed] == 0 {
			failed = nil
			for _, f := range p.Files {
				if f.State == transfer.FileFailed {
					failed = append(failed, f)
				}
			}
			return p, nil
		}
		failed = nil
		return p, c.JobFiles(cmd.Context(), id, []string{transfer.FileFailed}, func(fs []transfer.JobFile) error {
			failed = append(failed, fs...)
			return nil
		})
	})
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if o.json {
		(&ndjson{w: w}).write(p)
		return nil
	}
	printJobPage(w, p, failed, optimizer)
	return nil
}

// fileStates is the order file states are counted in.
var fileStates = []string{transfer.FilePending, transfer.FileActive, transfer.FileSucceeded, transfer.FileFailed, transfer.FileCancelled}

// printJobPage prints a job's page; failed are its failed files.
func printJobPage(w io.Writer, p apiv1.JobPage, failed []transfer.JobFile, optimizer bool) {
	j := p.Job
	tw := newTable(w)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, textsafe.Sanitize(v))
		}
	}
	owner := j.Owner
	if j.Project != "" {
		owner += ", project " + j.Project
	}
	row("job", j.ID+" ("+owner+")")
	row("state", j.State)
	row("reason", j.Reason)
	row("sources", strings.Join(j.Sources, " "))
	row("destination", j.Destination)
	if !j.Deadline.IsZero() {
		row("deadline", fmtTime(j.Deadline))
	}
	if j.Priority != 0 {
		row("priority", fmt.Sprint(j.Priority))
	}
	row("checksum", orWord(j.Checksum, transfer.ChecksumCRC32C))
	row("policy", orWord(j.Policy, transfer.PolicyUpdate))
	if j.CC != "" {
		row("cc", j.CC)
	}
	if j.Transport != "" {
		row("transport", j.Transport)
	}
	if j.OnConflict == transfer.ConflictWait {
		row("on conflict", j.OnConflict) // refuse, the default, goes without saying
	}
	row("done", jobProgress(j))
	row("throughput", units.FormatRate(j.ThroughputBps))
	row("algorithm", j.Algorithm)
	row("created", fmtTime(j.CreatedAt))
	if !j.StartedAt.IsZero() {
		row("started", fmtTime(j.StartedAt))
	}
	if !j.EndedAt.IsZero() {
		row("ended", fmtTime(j.EndedAt))
	}
	tw.Flush()
	if len(j.Pairs) > 0 {
		fmt.Fprintln(w, "node pairs:")
		printTable(w, []string{"  FROM", "TO", "RESERVATION", "PATH", "RATE", "WINDOW", "SHARE", "DONE", "TASKS", "STREAMS", "ROUTED"}, j.Pairs, func(pr transfer.Pair) []string {
			win := "-"
			if !pr.Start.IsZero() {
				win = fmtTime(pr.Start) + " – " + fmtTime(pr.End)
				if n := len(pr.Later); n > 0 {
					win += fmt.Sprintf(" (+%d reservations to %s)", n, fmtTime(pr.Later[n-1].End))
				}
			}
			share := "-"
			if pr.ShareBytes > 0 {
				share = units.FormatSize(pr.ShareBytes)
			}
			rate := "-"
			if pr.RateBps > 0 {
				rate = fmtRate(pr.RateBps)
			}
			return []string{"  " + pr.From, pr.To, orDash(pr.Reservation), orDash(strings.Join(pr.Path, ",")), rate, win, share, units.FormatSize(pr.BytesDone),
				countOrDash(pr.Concurrency), countOrDash(pr.Streams), orDash(pr.Routed)}
		})
	}
	counts := p.FileCounts
	if counts == nil { // a controller that does not count them
		counts = map[string]int{}
		for _, f := range p.Files {
			counts[f.State]++
		}
	}
	if len(counts) > 0 {
		var parts []string
		for _, s := range fileStates {
			if counts[s] > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", s, counts[s]))
			}
		}
		fmt.Fprintln(w, "files: "+strings.Join(parts, ", "))
	}
	printPartedFiles(w, p.Files)
	printFailedFiles(w, failed)
	if optimizer {
		if len(p.Decisions) == 0 {
			fmt.Fprintln(w, "optimizer: no decisions yet")
		} else {
			fmt.Fprintln(w, "optimizer decisions (newest first):")
			printTable(w, []string{"  AT", "FROM", "TO", "TASKS", "STREAMS", "THROUGHPUT", "SUCCESS", "REASON"}, p.Decisions, func(d transfer.Decision) []string {
				return []string{"  " + fmtTime(d.At), d.From, d.To, fmt.Sprint(d.Concurrency), fmt.Sprint(d.Streams),
					units.FormatRate(d.ThroughputBps), fmt.Sprintf("%.0f%%", 100*d.SuccessRate), d.Reason}
			})
		}
	}
}

func countOrDash(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// printPartedFiles shows the files cut in parts: their parts done of
// all, and the destination node that owns them.
func printPartedFiles(w io.Writer, files []transfer.JobFile) {
	var parted []transfer.JobFile
	for _, f := range files {
		if f.Parts > 0 {
			parted = append(parted, f)
		}
	}
	if len(parted) == 0 {
		return
	}
	fmt.Fprintln(w, "files in parts:")
	printTable(w, []string{"  PATH", "STATE", "SIZE", "PARTS", "OWNER"}, parted, func(f transfer.JobFile) []string {
		return []string{"  " + f.Path, f.State, units.FormatSize(f.Size), fmt.Sprintf("%d/%d", f.PartsDone, f.Parts), orDash(f.To)}
	})
}

func printFailedFiles(w io.Writer, failed []transfer.JobFile) {
	if len(failed) == 0 {
		return
	}
	fmt.Fprintf(w, "failed files (%d):\n", len(failed))
	for _, f := range failed {
		if f.Class != "" {
			fmt.Fprintf(w, "  %s: %s: %s (%d attempts)\n", safeArgs([]any{f.Path, f.Class, orWord(f.Error, "no error recorded"), f.Attempts})...)
			continue
		}
		fmt.Fprintf(w, "  %s: %s (%d attempts)\n", safeArgs([]any{f.Path, orWord(f.Error, "no error recorded"), f.Attempts})...)
	}
}

// waitSummary ends transfer wait's NDJSON.
type waitSummary struct {
	Summary     bool   `json:"summary"`
	ID          string `json:"id"`
	State       string `json:"state"`
	Reason      string `json:"reason,omitempty"`
	FilesTotal  int    `json:"files_total"`
	FilesDone   int    `json:"files_done"`
	FilesFailed int    `json:"files_failed"`
	BytesDone   int64  `json:"bytes_done"`
	TimedOut    bool   `json:"timed_out,omitempty"`
}

func newTransferWaitCmd(o *ctlFlags) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID",
		Short: "Follow a job until it ends: exit 0 only when every file arrived verified",
		Long: `Follow a job of the transfer service, printing a line whenever its state,
its reason or its progress changes, not its throughput alone (with --json,
the job as one NDJSON line each time and a summary last). It exits 0 when the job SUCCEEDED (every
file arrived verified), 1 when it FAILED (listing the files that failed,
with their errors) or was CANCELLED, and 2 when --timeout runs out first.
While the controller cannot be reached (a restart, a failover) it keeps
asking.`,
		Example: `  lightpath transfer wait j-7c1e4f0a92b3
  lightpath transfer wait j-7c1e4f0a92b3 --timeout 2h --json | tail -1`,
		Args: exactArgs("transfer wait", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTransferWait(cmd, o, args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long, exit status 2 (0: wait for ever)")
	return cmd
}

// waitPoll is how often transfer wait asks. Each request after the first
// waits at the controller up to waitPoll for the job to end, so the end is
// seen as it happens, and progress still comes about every waitPoll.
var waitPoll = time.Second

func runTransferWait(cmd *cobra.Command, o *ctlFlags, id string, timeout time.Duration) error {
	const what = "transfer wait"
	c, err := o.client()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ctx := cmd.Context()
	var deadline <-chan time.Time
	until := time.Now().Add(timeout)
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	nd := &ndjson{w: out}
	sum := waitSummary{Summary: true, ID: id}
	finish := func(err error) error {
		if o.json {
			nd.write(sum)
		}
		return err
	}
	var last string
	lostSaid := ""
	var hold time.Duration // the first answer at once
	for {
		asked := time.Now()
		p, err := c.Job(ctx, id, client.JobPageOptions{NoFiles: true, Wait: hold})
		// The next request comes gap after this one: at once after the
		// first answer, or after one that waited; else (an error, a
		// controller that does not wait) after the rest of waitPoll.
		gap := waitPoll
		if err == nil {
			gap = hold
		}
		hold = waitPoll
		if timeout > 0 {
			hold = max(min(hold, time.Until(until)), 0)
		}
		switch {
		case err == nil:
			lostSaid = ""
			j := p.Job
			sum.State, sum.Reason, sum.FilesTotal, sum.FilesDone, sum.FilesFailed, sum.BytesDone =
				j.State, j.Reason, j.FilesTotal, j.FilesDone, j.FilesFailed, j.BytesDone
			line, key := waitLine(j)
			if key != last {
				last = key
				if o.json {
					nd.write(j)
				} else {
					fmt.Fprintln(out, textsafe.Sanitize(line))
				}
			}
			if transfer.JobEnded(j.State) {
				return finish(waitVerdict(cmd, c, what, j, o.json))
			}
		case ctx.Err() != nil:
			return finish(fmt.Errorf("%s: interrupted while job %s is %s", what, id, orWord(sum.State, "unknown")))
		case retryable(err):
			// The controller restarts or fails over: keep asking.
			if msg := err.Error(); msg != lostSaid {
				fmt.Fprintf(errw, "lightpath: %s: %s; retrying\n", what, textsafe.OneLine(msg))
				lostSaid = msg
			}
		default:
			return finish(c.Explain(what, err))
		}
		t := time.NewTimer(max(gap-time.Since(asked), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return finish(fmt.Errorf("%s: interrupted while job %s is %s", what, id, orWord(sum.State, "unknown")))
		case <-deadline:
			t.Stop()
			sum.TimedOut = true
			return finish(statusError{code: 2, err: fmt.Errorf("%s: job %s is still %s after %s", what, id, orWord(sum.State, "unknown"), timeout)})
		case <-t.C:
		}
	}
}

// waitLine is transfer wait's line for job j, and what must change for
// another line to be printed: the state, the progress or the reason, not
// the throughput alone (which would print a line every second).
func waitLine(j transfer.Job) (line, key string) {
	key = fmt.Sprintf("%s %s: %s", j.ID, j.State, jobProgress(j))
	line = key
	if j.ThroughputBps > 0 && j.State == transfer.JobActive {
		line += ", " + units.FormatRate(j.ThroughputBps)
	}
	if j.Reason != "" {
		line += " (" + j.Reason + ")"
		key += " (" + j.Reason + ")"
	}
	return line, key
}

// retryable reports whether a request's failure may go away by asking
// again: the controller unreachable, restarting, or a standby not yet
// leading.
func retryable(err error) bool {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests
	}
	return true // no answer at all
}

// waitVerdict is the end of transfer wait for a job that ended: nil when
// it succeeded; the failed files listed and status 1 otherwise.
func waitVerdict(cmd *cobra.Command, c *client.Client, what string, j transfer.Job, asJSON bool) error {
	switch j.State {
	case transfer.JobSucceeded:
		return nil
	case transfer.JobFailed:
		if !asJSON {
			var failed []transfer.JobFile
			err := c.JobFiles(cmd.Context(), j.ID, []string{transfer.FileFailed}, func(fs []transfer.JobFile) error {
				failed = append(failed, fs...)
				return nil
			})
			if err == nil {
				printFailedFiles(cmd.OutOrStdout(), failed)
			}
		}
		return fmt.Errorf("%s: job %s FAILED: %s", what, j.ID, orWord(j.Reason, fmt.Sprintf("%d files failed", j.FilesFailed)))
	}
	return fmt.Errorf("%s: job %s was %s: %s", what, j.ID, j.State, orWord(j.Reason, "no reason given"))
}

func newTransferCancelCmd(o *ctlFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a job: its tasks stop, its reservations are released, files that arrived stay",
		Args:  exactArgs("transfer cancel", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := fetch(o, "transfer cancel", func(c *client.Client) (transfer.Job, error) {
				return c.CancelJob(cmd.Context(), args[0], apiv1.ActionRequest{Reason: reason})
			})
			if err != nil {
				return err
			}
			printOne(cmd.OutOrStdout(), o.json, j, "%s %s: %s\n", j.ID, j.State, jobProgress(j))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept with the job")
	return cmd
}
