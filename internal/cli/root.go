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
	if strings.HasPrefix(msg, "unknown command") {
		// cobra's own wording has no "what: why" shape; give it one.
		name := ""
		if len(args) > 0 {
			name = args[0]
		}
		msg = fmt.Sprintf("%s: unknown command (run 'lightpath --help' for the list)", name)
	}
	fmt.Fprintf(os.Stderr, "lightpath: %s\n", msg)
	return code
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
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%s: %w (see 'lightpath %s --help')", c.Name(), err, c.Name())
	})
	root.AddCommand(newServeCmd(), newCpCmd(), newBenchCmd(), newTestbedCmd(), newControllerCmd())
	root.AddCommand(newReserveCmd(), newTicketCmd(), newUserCmd(), newAgentCmd(), newTransferCmd())
	return root
}
