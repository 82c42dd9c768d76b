// Package cli defines Lightpath's command line: one cobra command per role,
// each a thin layer over the package that does the work.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries an exit status for errors already reported.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Main runs the command line and returns the process's exit status. Errors
// print as one line, "lightpath: <what failed>: <why>", on stderr.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root := newRoot(os.Stdout, os.Stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	code := 1
	var se statusError
	if errors.As(err, &se) {
		code = se.code
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command") && len(args) > 0 && !strings.Contains(msg, "(see '") {
		// cobra's own wording for the root spreads its suggestions over
		// several lines; say it in one, as every other level does.
		msg = unknownCommand(root, args[0]).Error()
	}
	fmt.Fprintf(os.Stderr, "lightpath: %s\n", msg)
	return code
}

// unknownCommand words a verb that cmd does not have, with the nearest
// verbs it does have: `unknown command "upp" for "lightpath testbed"; did
// you mean "up"?`.
func unknownCommand(cmd *cobra.Command, verb string) error {
	msg := fmt.Sprintf("unknown command %q for %q", verb, cmd.CommandPath())
	if s := cmd.SuggestionsFor(verb); len(s) > 0 {
		q := make([]string, len(s))
		for i, v := range s {
			q[i] = strconv.Quote(v)
		}
		msg += "; did you mean " + strings.Join(q, " or ") + "?"
	}
	// The "what" of the error line: the group, or the verb itself at the
	// top.
	what := verb
	if cmd.HasParent() {
		what = strings.TrimPrefix(cmd.CommandPath(), "lightpath ")
	}
	msg = what + ": " + msg
	return fmt.Errorf("%s (see '%s --help')", msg, cmd.CommandPath())
}

// groupRunE is what a command that only groups verbs does: print its help
// when run alone, refuse anything else as an unknown verb (cobra itself
// would print the help and exit 0).
func groupRunE(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return c.Help()
	}
	return unknownCommand(c, args[0])
}

// flagError words a flag that does not parse with the full path of the
// command it was given to. On a command that groups verbs, an unknown flag
// usually follows a misspelt verb ("testbed link sett wan --delay 1ms"):
// the verb is named then, not the flag.
func flagError(c *cobra.Command, err error) error {
	if c.HasAvailableSubCommands() {
		if a := c.Flags().Args(); len(a) > 0 {
			return unknownCommand(c, a[0])
		}
	}
	what := strings.TrimPrefix(c.CommandPath(), "lightpath ")
	return fmt.Errorf("%s: %w (see '%s --help')", what, err, c.CommandPath())
}

// groupAll gives every command that groups verbs (and has no run of its
// own) groupRunE, and every command suggestions for misspelt verbs.
func groupAll(c *cobra.Command) {
	c.SuggestionsMinimumDistance = 2
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.RunE = groupRunE
	}
	for _, sub := range c.Commands() {
		groupAll(sub)
	}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "lightpath",
		Short: "Move scientific datasets between sites at the speed of the network",
		Long: `Lightpath moves datasets between sites over parallel tuned TCP streams,
verifying every byte and resuming where it stopped.

Start a server on one end and copy with cp from the other:

  lightpath serve --listen 0.0.0.0:7070 --root /data
  lightpath cp -r ./run42 lp://dtn.example.org:7070/incoming/
  lightpath bench lp://dtn.example.org:7070 -P 4 -t 10s`,
		Version:       Version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("lightpath {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newServeCmd(), newCpCmd(), newBenchCmd(), newTestbedCmd(), newControllerCmd())
	root.AddCommand(newReserveCmd(), newTicketCmd(), newUserCmd(), newAgentCmd(), newTransferCmd(), newEndpointCmd(), newCcCmd(), newRunCmd(), newVersionCmd())
	groupAll(root)
	return root
}
