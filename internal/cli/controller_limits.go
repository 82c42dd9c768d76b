package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/transfer/registry"
)

// limitFlags are the controller's per-user limits and the guard of its
// /metrics: what keeps one ordinary account from growing the controller
// without end (docs/controller.md, "Limits").
type limitFlags struct {
	tokens, reservations int
	transfers, streams   int
	metricsToken         bool
}

func (l *limitFlags) register(f *pflag.FlagSet) {
	f.IntVar(&l.tokens, "max-tokens-per-user", controller.DefaultMaxTokensPerUser, "usable tokens a user may have (0: no limit; admins are not limited)")
	f.IntVar(&l.reservations, "max-reservations-per-user", controller.DefaultMaxReservationsPerUser, "live reservations a user may own (0: no limit; admins are not limited)")
	f.IntVar(&l.transfers, "max-live-transfers-per-user", registry.DefaultMaxLive, "transfers a user may have reporting at once")
	f.IntVar(&l.streams, "max-streams-per-report", registry.DefaultMaxStreams, "streams one transfer progress report may describe")
	f.BoolVar(&l.metricsToken, "metrics-require-token", false, "answer /metrics only with a valid token (Authorization: Bearer), as Prometheus sends with credentials_file")
}

func (l *limitFlags) check() error {
	switch {
	case l.tokens < 0:
		return fmt.Errorf("--max-tokens-per-user %d: want 0 (no limit) or more", l.tokens)
	case l.reservations < 0:
		return fmt.Errorf("--max-reservations-per-user %d: want 0 (no limit) or more", l.reservations)
	case l.transfers < 1:
		return fmt.Errorf("--max-live-transfers-per-user %d: want 1 or more", l.transfers)
	case l.streams < 1:
		return fmt.Errorf("--max-streams-per-report %d: want 1 or more", l.streams)
	}
	return nil
}

func (l *limitFlags) controller() controller.Limits {
	return controller.Limits{MaxTokensPerUser: l.tokens, MaxReservationsPerUser: l.reservations}
}

func (l *limitFlags) transfer() registry.Limits {
	return registry.Limits{MaxLive: l.transfers, MaxStreams: l.streams}
}
