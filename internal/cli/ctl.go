package cli

// What every client of the controller shares (reserve, ticket, user and
// agent): the flags that reach it, one request helper that words failures
// as one error line, the times, rates and sizes users type, the printers
// of lists, objects and tables, the wording of argument errors, and the
// following of the event stream.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/units"
)

// defaultController is where the clients look for the controller when
// neither --controller nor LIGHTPATH_CONTROLLER says.
const defaultController = "http://127.0.0.1:8080"

// ctlFlags are the flags every client of the controller takes.
type ctlFlags struct {
	url, tokenFile, caFile string
	timeout                time.Duration
	json                   bool
}

func (o *ctlFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.url, "controller", "", "the controller: http://HOST:PORT, https://HOST:PORT or unix:PATH, or several comma-separated (a leader and its standbys; requests follow the leader) (default: $LIGHTPATH_CONTROLLER, else "+defaultController+")")
	fs.StringVar(&o.tokenFile, "controller-token-file", "", "file holding your controller token (default: $LIGHTPATH_CONTROLLER_TOKEN)")
	fs.StringVar(&o.caFile, "controller-ca", "", "CA certificate (PEM) to verify an https controller with")
	fs.DurationVar(&o.timeout, "controller-timeout", client.DefaultTimeout, "give up on a request the controller has not answered in this long")
	fs.BoolVar(&o.json, "json", false, "print NDJSON: the API's objects, one per line; lists end with a summary line")
}

// client connects to the controller the flags name, with the token from
// --controller-token-file or LIGHTPATH_CONTROLLER_TOKEN.
func (o *ctlFlags) client() (*client.Client, error) {
	token := ""
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("read --controller-token-file: %w", unwrapPath(err))
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, fmt.Errorf("read --controller-token-file: %s is empty", o.tokenFile)
		}
	} else {
		token = strings.TrimSpace(os.Getenv("LIGHTPATH_CONTROLLER_TOKEN"))
	}
	url := o.url
	if url == "" {
		url = strings.TrimSpace(os.Getenv("LIGHTPATH_CONTROLLER"))
	}
	if url == "" {
		url = defaultController
	}
	var opts []client.Option
	if o.caFile != "" {
		opts = append(opts, client.WithCAFile(o.caFile))
	}
	opts = append(opts, client.WithTimeout(o.timeout), client.WithUserAgent("lightpath-cli"))
	return client.New(url, token, opts...)
}

// request connects to the controller and runs fn, the command's request,
// with the client: a failure of either is the command's one error line
// ("<what>: <why>", worded by client.Explain when the request failed).
func (o *ctlFlags) request(what string, fn func(*client.Client) error) error {
	c, err := o.client()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := fn(c); err != nil {
		return c.Explain(what, err)
	}
	return nil
}

// fetch is o.request for a call that answers with a value.
func fetch[T any](o *ctlFlags, what string, fn func(*client.Client) (T, error)) (T, error) {
	var v T
	err := o.request(what, func(c *client.Client) (err error) {
		v, err = fn(c)
		return err
	})
	return v, err
}

// writeRefusal puts the controller's error object on stdout with --json
// (besides the error line on stderr), so that a script reading stdout
// learns why nothing was booked or found, alternatives included.
func (o *ctlFlags) writeRefusal(w io.Writer, err error) {
	var ae *client.APIError
	if o.json && errors.As(err, &ae) {
		(&ndjson{w: w}).write(apiv1.ErrorBody{Error: ae.Detail})
	}
}

// ---------------------------------------------------------------------------
// Times, durations and the other values users type.

// localLayouts are the times without a zone the clients take, read in
// local time (displayZone): what people type.
var localLayouts = []string{
	"2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05",
}

// parseWhen reads a time as the clients take it: RFC 3339, a date and
// time without a zone read in local time ("2026-11-26 09:00" or
// "2026-11-26T09:00"), "now", or "+DURATION" after now (a duration as
// parseSpan reads it).
func parseWhen(s string, now time.Time) (time.Time, error) {
	t := strings.TrimSpace(s)
	switch {
	case strings.EqualFold(t, "now"):
		return now, nil
	case strings.HasPrefix(t, "+"):
		d, err := parseSpan(t[1:])
		if err == nil {
			return now.Add(d), nil
		}
	default:
		if v, err := time.Parse(time.RFC3339Nano, t); err == nil {
			return v, nil
		}
		for _, l := range localLayouts {
			if v, err := time.ParseInLocation(l, t, displayZone); err == nil {
				return v, nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("invalid time %q: want a local date and time (2026-05-01 14:00), RFC 3339 (2026-05-01T14:00:00Z), now, or +DURATION (+2h, +1d)", s)
}

// parseSpan reads a positive duration: Go style ("90m", "2h30m") with
// whole days allowed in front ("1d", "2d12h"), since reservations are
// booked days ahead.
func parseSpan(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	var days time.Duration
	if i := strings.IndexByte(t, 'd'); i > 0 {
		n, err := strconv.Atoi(t[:i])
		if err != nil || n < 0 || n > 100000 {
			return 0, fmt.Errorf("invalid duration %q: want a duration like 90m, 2h or 1d", s)
		}
		days, t = time.Duration(n)*24*time.Hour, t[i+1:]
	}
	var d time.Duration
	if t != "" {
		var err error
		if d, err = time.ParseDuration(t); err != nil || strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+") {
			return 0, fmt.Errorf("invalid duration %q: want a duration like 90m, 2h or 1d", s)
		}
	}
	if d+days <= 0 {
		return 0, fmt.Errorf("invalid duration %q: want a duration above zero", s)
	}
	return d + days, nil
}

// resolveNow is the instant a command takes as "now": whole seconds, so
// the same request sent twice (a retry with the same idempotency key)
// carries the same times whatever precision the controller stores.
func resolveNow() time.Time { return time.Now().UTC().Truncate(time.Second) }

// window reads --start and --duration or --end: the start (now when not
// given), and the end or the duration (exactly one, unless optional).
type window struct {
	start, end, duration string
}

func (w *window) register(fs *pflag.FlagSet, startHelp string) {
	fs.StringVar(&w.start, "start", "", startHelp)
	fs.StringVar(&w.duration, "duration", "", "how long, e.g. 2h, 90m or 1d")
	fs.StringVar(&w.end, "end", "", "when it ends instead of --duration: RFC 3339, a local date and time, now or +DURATION")
}

// resolve returns the start, the end and the duration given (zero when
// absent). need says whether one of --duration and --end is required.
func (w window) resolve(now time.Time, need bool) (start, end time.Time, d time.Duration, err error) {
	start = now
	if w.start != "" {
		if start, err = parseWhen(w.start, now); err != nil {
			return start, end, d, fmt.Errorf("--start: %w", err)
		}
	}
	switch {
	case w.end != "" && w.duration != "":
		return start, end, d, errors.New("--end and --duration exclude each other: give one")
	case w.end != "":
		if end, err = parseWhen(w.end, now); err != nil {
			return start, end, d, fmt.Errorf("--end: %w", err)
		}
		if !end.After(start) {
			return start, end, d, fmt.Errorf("--end %s is not after --start %s", fmtTime(end), fmtTime(start))
		}
	case w.duration != "":
		if d, err = parseSpan(w.duration); err != nil {
			return start, end, d, fmt.Errorf("--duration: %w", err)
		}
	case need:
		return start, end, d, errors.New("say how long: --duration D or --end TIME")
	}
	return start, end, d, nil
}

// parseBandwidth reads a rate flag; zero is refused when required.
func parseBandwidth(flag, s string, required bool) (uint64, error) {
	if s == "" {
		if required {
			return 0, fmt.Errorf("%s is required, e.g. %s 500M or %s 10G", flag, flag, flag)
		}
		return 0, nil
	}
	r, err := units.ParseRate(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", flag, err)
	}
	if r == 0 {
		return 0, fmt.Errorf("%s must be above zero", flag)
	}
	return r, nil
}

func parseSizeFlag(flag, s string) (uint64, error) {
	v, err := units.ParseSize(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", flag, err)
	}
	if v == 0 {
		return 0, fmt.Errorf("%s must be above zero", flag)
	}
	return uint64(v), nil
}

// newIdempotencyKey makes the key that lets a create be sent twice and
// booked once.
func newIdempotencyKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

// ---------------------------------------------------------------------------
// Output.

// displayZone is the zone times are printed in on a terminal, and times
// typed without a zone are read in (tests fix it).
var displayZone = time.Local

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(displayZone).Format(time.RFC3339)
}

func fmtRate(bps uint64) string { return units.FormatRate(float64(bps)) }

func fmtState(r reserve.Reservation) string {
	s := string(r.State)
	if r.Degraded {
		s += " (degraded)"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listSummary ends the NDJSON of every list.
type listSummary struct {
	Summary bool `json:"summary"`
	Count   int  `json:"count"`
}

// printOne writes the answer of a command about one object: v as one
// NDJSON line with --json (asJSON), else the line format and args make.
func printOne(w io.Writer, asJSON bool, v any, format string, args ...any) {
	if asJSON {
		(&ndjson{w: w}).write(v)
		return
	}
	fmt.Fprintf(w, format, safeArgs(args)...)
}

// safeArgs returns args with every string made safe for a terminal: what
// the controller stores came from users, and a control character or an
// escape sequence in it must not act on the screen of whoever reads it.
func safeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(string); ok {
			a = textsafe.Sanitize(s)
		}
		out[i] = a
	}
	return out
}

// printList writes the answer of a list command: with --json (asJSON) each
// item as a line and then the summary counting them; else the table, or
// the line none alone when the list is empty and none is not "".
func printList[T any](w io.Writer, asJSON bool, items []T, none string, table func(io.Writer, []T)) {
	if asJSON {
		nd := &ndjson{w: w}
		for _, it := range items {
			nd.write(it)
		}
		nd.write(listSummary{Summary: true, Count: len(items)})
		return
	}
	if len(items) == 0 && none != "" {
		fmt.Fprintln(w, none)
		return
	}
	table(w, items)
}

// newTable is the tabwriter every table of the clients is aligned with.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// printTable writes a table: the header's columns, then the cells row
// makes of each item.
func printTable[T any](w io.Writer, header []string, items []T, row func(T) []string) {
	tw := newTable(w)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, it := range items {
		cells := row(it)
		for i, c := range cells {
			cells[i] = textsafe.Sanitize(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// ---------------------------------------------------------------------------
// Arguments and verbs.

// noArgs refuses positional arguments with the project's error wording
// (cobra's "unknown command" would read as a missing verb).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		what := strings.TrimPrefix(cmd.CommandPath(), "lightpath ")
		return fmt.Errorf("%s: unexpected argument %q: it takes flags only (see 'lightpath %s --help')", what, args[0], what)
	}
	return nil
}

// verbGroup makes cmd, a command that only groups verbs, print its help
// when run alone and refuse an unknown verb with the nearest ones it has,
// and words its children's flag errors with their full path ("reserve
// create: unknown flag").
func verbGroup(cmd *cobra.Command) *cobra.Command {
	cmd.RunE = groupRunE
	cmd.SetFlagErrorFunc(flagError)
	return cmd
}

// exactArgs is cobra.ExactArgs with the project's error wording.
func exactArgs(what string, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return fmt.Errorf("%s: want %s, got %d argument(s) (see 'lightpath %s --help')", what, strings.Join(names, " "), len(args), what)
		}
		for i, a := range args {
			if strings.TrimSpace(a) == "" {
				return fmt.Errorf("%s: %s is empty", what, names[i])
			}
		}
		return nil
	}
}

// ---------------------------------------------------------------------------
// Following the event stream.

// lostLine says on w that the event stream was lost, as a line
// "lightpath: <what>: <why>; resuming".
func lostLine(w io.Writer, what string) func(error) {
	return func(err error) {
		fmt.Fprintf(w, "lightpath: %s: %s; resuming\n", what, textsafe.OneLine(fmt.Sprint(err)))
	}
}
