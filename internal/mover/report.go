package mover

import (
	"fmt"

	"github.com/lightpath/lightpath/internal/units"
	"github.com/lightpath/lightpath/internal/wire"
)

// Bottleneck names what limited a transfer.
type Bottleneck struct {
	What string `json:"what"` // sender, sender-disk, receiver, receiver-disk, receive-window, send-buffer, network, rate-limit
	Why  string `json:"why"`  // the evidence, in words
}

// Judge tells what limited a transfer from both sides' accounts: the
// sender's streams' limited times (how long the receiver's window and the
// sender's own buffer held each back, as the transport measures them),
// and how long each side waited on its disk and on the network. rate is the
// requested cap (0 for none) and achieved the measured throughput, in bits/s.
func Judge(snd, rcv wire.Stats, rate, achieved float64) Bottleneck {
	n := float64(max(len(snd.Streams), 1))
	frac := func(ns int64, elapsed int64) float64 {
		if elapsed <= 0 {
			return 0
		}
		return float64(ns) / (float64(elapsed) * n)
	}
	var rwnd, sndbuf int64
	for _, s := range snd.Streams {
		rwnd += s.RwndLimited
		sndbuf += s.SndbufLimited
	}
	sRead := frac(snd.IOWait, snd.Elapsed)
	sNet := frac(snd.NetWait, snd.Elapsed)
	rWrite := frac(rcv.IOWait, rcv.Elapsed)
	rNet := frac(rcv.NetWait, rcv.Elapsed)
	fRwnd := frac(rwnd, snd.Elapsed)
	fSnd := frac(sndbuf, snd.Elapsed)
	pct := func(f float64) string { return fmt.Sprintf("%.0f%%", 100*min(f, 1)) }
	switch {
	case rate > 0 && achieved >= 0.9*rate:
		return Bottleneck{"rate-limit", "the transfer ran at the requested cap of " + units.FormatRate(rate)}
	case rWrite > 0.5:
		return Bottleneck{"receiver-disk", "the receiver spent " + pct(rWrite) + " of its time writing to disk"}
	case sRead > 0.5:
		return Bottleneck{"sender-disk", "the sender spent " + pct(sRead) + " of its time reading from disk"}
	case fRwnd > 0.3:
		return Bottleneck{"receive-window", "the receiver's window held the sender back " + pct(fRwnd) + " of the time"}
	case fSnd > 0.3:
		return Bottleneck{"send-buffer", "the send buffer held the sender back " + pct(fSnd) + " of the time (raise --window or net.core.wmem_max)"}
	case sNet > 0.5:
		return Bottleneck{"network", "the sender waited on the network " + pct(sNet) + " of the time with neither window nor buffer full (congestion window)"}
	case rNet > 0.5:
		return Bottleneck{"sender", "the receiver waited for data " + pct(rNet) + " of the time while the sender was never blocked (sender CPU)"}
	default:
		return Bottleneck{"receiver", "neither side waited long on disk or network: CPU-bound, receiver " + pct(1-rNet-rWrite) + " busy"}
	}
}
