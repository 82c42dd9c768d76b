//go:build !linux

package agent

import (
	"context"
	"log/slog"
)

// prober needs Linux (firewall marks on sockets).
type prober struct{}

func startProber(context.Context, string, string, *slog.Logger, chan<- struct{}) (*prober, error) {
	return nil, errLinux
}

func (*prober) set([]probeTarget) {}

func (*prober) states() []pathState { return nil }
