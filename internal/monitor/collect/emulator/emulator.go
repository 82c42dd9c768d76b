// Package emulator is the agents' collector of the testbed emulator's
// pipes (docs/collectors.md, emulator), asked over the emulator's control
// socket. It is kept out of package collect, which knows it only as a
// collect.Maker that the command line adds to the agent's registry, so
// that neither collect nor the agent links the testbed.
package emulator

import (
	"context"
	"fmt"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/collect"
	"github.com/lightpath/lightpath/internal/testbed"
	"github.com/lightpath/lightpath/internal/testbed/emu"
)

type emulatorCollector struct {
	env  collect.Env
	sock string // the control socket
}

// New is the emulator's collector for env (a collect.Maker): on by default
// when env.Testbed names the testbed whose emulator it asks.
func New(env collect.Env) collect.Definition {
	sock := ""
	if env.Testbed != "" {
		sock = testbed.SocketPath(env.Testbed)
	}
	return collect.Definition{
		Collector: &emulatorCollector{env: env, sock: sock},
		Help:      "counters, queues and parameters of the testbed emulator's pipes leaving this node (its control socket)",
		Enabled:   env.Testbed != "",
		Meta: map[string]monitor.Meta{
			"lightpath_emulator_in_bytes_total":    counter("Bytes the emulator read from this node's end of the link (IP bytes on the wire)."),
			"lightpath_emulator_in_packets_total":  counter("Packets (wire segments) the emulator read from this node's end of the link."),
			"lightpath_emulator_out_bytes_total":   counter("Bytes the emulator delivered to the far end of the link."),
			"lightpath_emulator_out_packets_total": counter("Packets (wire segments) the emulator delivered to the far end of the link."),
			"lightpath_emulator_drops_total":       counter("Packets the emulator dropped, by cause: loss (the loss model), down (the direction was down), blackhole (the direction was a blackhole), queue (delay line full), error (the kernel refused the write)."),
			"lightpath_emulator_queued_packets":    gauge("Packets in the emulator's delay line now."),
			"lightpath_emulator_queued_bytes":      gauge("Bytes in the emulator's delay line now."),
			"lightpath_emulator_delay_seconds":     gauge("One-way delay the emulator adds, as set."),
			"lightpath_emulator_jitter_seconds":    gauge("Jitter the emulator adds around the delay, as set."),
			"lightpath_emulator_loss_ratio":        gauge("Long-run loss fraction of the direction's loss model, as set."),
			"lightpath_emulator_down":              gauge("1 if the direction is set down, else 0."),
			"lightpath_emulator_blackhole":         gauge("1 if the direction is a blackhole (drops everything, carrier up), else 0."),
		},
	}
}

func (*emulatorCollector) Name() string { return "emulator" }

func (c *emulatorCollector) Collect(ctx context.Context, emit func(monitor.Point)) error {
	if c.sock == "" {
		return fmt.Errorf("not in a testbed: no emulator to ask")
	}
	cl, err := emu.Dial(c.sock)
	if err != nil {
		return err
	}
	defer cl.Close()
	stop := context.AfterFunc(ctx, func() { cl.Close() })
	defer stop()
	pipes, err := cl.Status()
	if err != nil {
		return err
	}
	pipePoints(c.env.Node, pipes, emit)
	return nil
}

// pipePoints emits the series of the pipes whose from end is node.
func pipePoints(node string, pipes []emu.PipeStats, emit func(monitor.Point)) {
	for _, p := range pipes {
		if p.From != node {
			continue
		}
		ls := monitor.L("link", p.Link, "to", p.To)
		for _, s := range []struct {
			name string
			v    float64
		}{
			{"lightpath_emulator_in_bytes_total", float64(p.BytesIn)},
			{"lightpath_emulator_in_packets_total", float64(p.PacketsIn)},
			{"lightpath_emulator_out_bytes_total", float64(p.BytesOut)},
			{"lightpath_emulator_out_packets_total", float64(p.PacketsOut)},
			{"lightpath_emulator_queued_packets", float64(p.QueuedPackets)},
			{"lightpath_emulator_queued_bytes", float64(p.QueuedBytes)},
			{"lightpath_emulator_delay_seconds", p.Params.Delay.Seconds()},
			{"lightpath_emulator_jitter_seconds", p.Params.Jitter.Seconds()},
			{"lightpath_emulator_loss_ratio", p.Params.Loss.MeanLoss()},
			{"lightpath_emulator_down", b2f(p.Params.Down)},
			{"lightpath_emulator_blackhole", b2f(p.Params.Blackhole)},
		} {
			emit(monitor.Point{Name: s.name, Labels: ls, V: s.v})
		}
		for _, d := range []struct {
			cause string
			v     uint64
		}{{"loss", p.DropsLoss}, {"down", p.DropsDown}, {"blackhole", p.DropsBlackhole}, {"queue", p.DropsQueue}, {"error", p.DropsError}} {
			emit(monitor.Point{Name: "lightpath_emulator_drops_total", Labels: ls.With("cause", d.cause), V: float64(d.v)})
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func counter(help string) monitor.Meta { return monitor.Meta{Type: monitor.Counter, Help: help} }
func gauge(help string) monitor.Meta   { return monitor.Meta{Type: monitor.Gauge, Help: help} }
