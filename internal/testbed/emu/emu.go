// Package emu is the testbed's link emulator: a user-space daemon that
// carries packets between the two TUN devices of every emulated link,
// adding delay, jitter, loss and duplicates, because the kernel here has
// no netem.
//
// Each direction of a link is a pipe: it reads packets from one TUN
// device, decides their fate, holds the survivors in a delay line and
// writes them into the other TUN device when they are due. The devices use
// IFF_VNET_HDR with TSO and USO offloads, so the kernel hands the emulator
// 64 KiB TCP super-packets and the UDP GSO batches of senders that use
// UDP_SEGMENT (USO needs Linux 6.2; where the kernel refuses it, UDP
// arrives one datagram at a time) instead of MTU-sized packets: a pipe
// costs two syscalls per super-packet rather than per wire packet, which
// is what lets a user-space emulator keep up with the kernel's own veth
// pairs. Loss and duplication stay per wire segment (a TCP segment or a
// UDP datagram): a super-packet that loses a segment is cut into segments
// in user space and only the survivors go on, and a duplicated segment
// follows its super-packet as a copy of its own.
//
// The rate of a link is not the emulator's business: htb on each TUN's
// egress shapes it before the emulator ever sees a packet. The emulator
// must therefore stay faster than the link (on a 2-core host it carries
// ~9 Gbit/s of one TCP stream): where it is the bottleneck, packets wait
// in the TUN device's ring (tx_queue_len packets, 64 KiB each under GSO,
// and TCP Small Queues does not bound it because TUN orphans its skbs),
// and round-trip times grow by tens of milliseconds.
//
// The loss models are package topology's (topology.Loss); Params mirrors
// topology.Params without Rate. This package does not import package
// testbed, which imports it to run the daemon.
package emu

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/lightpath/lightpath/internal/topology"
)

// MaxDelay bounds Delay+Jitter: a longer delay line only buys memory
// (the emulator holds every packet in flight) and is surely a typo.
const MaxDelay = time.Minute

// Params are what the emulator applies to one direction of a link; they
// mirror topology.Params without Rate, which htb enforces.
//
// In JSON, Delay and Jitter are Go duration strings ("20ms", "1.5ms");
// numbers are accepted on input and mean nanoseconds. JSON field names
// are lower case: delay, jitter, reorder, loss, duplicate, down,
// blackhole.
type Params struct {
	Delay time.Duration // one way
	// Jitter spreads each packet's delay uniformly over
	// [Delay-Jitter, Delay+Jitter], floored at 0.
	Jitter time.Duration
	// Reorder lets jitter reorder packets. Without it a packet is never
	// released before one that arrived earlier (its due time is raised to
	// the previous packet's), as on a real path whose jitter comes from
	// queues rather than from packets overtaking each other.
	Reorder bool
	Loss    topology.Loss
	// Duplicate is the probability that a segment that survived the loss
	// model is delivered twice; the copy gets a delay of its own (the
	// same one without jitter) and is counted in Duplicated.
	Duplicate float64
	// Down drops every packet (counted in DropsDown) and turns the carrier
	// of both TUN devices of the link off.
	Down bool
	// Blackhole drops every packet (counted in DropsBlackhole) and leaves
	// the carrier alone: a path that is up but broken, which nothing
	// watching the device's state can see. A direction is down or
	// blackholed, not both.
	Blackhole bool
}

// Validate says whether the parameters make sense.
func (p Params) Validate() error {
	if p.Delay < 0 || p.Jitter < 0 {
		return fmt.Errorf("negative delay %v or jitter %v", p.Delay, p.Jitter)
	}
	if p.Delay+p.Jitter > MaxDelay {
		return fmt.Errorf("delay %v + jitter %v: more than %v", p.Delay, p.Jitter, MaxDelay)
	}
	if err := p.Loss.Validate(); err != nil {
		return err
	}
	if math.IsNaN(p.Duplicate) || p.Duplicate < 0 || p.Duplicate > 1 {
		return fmt.Errorf("duplicate %v: not a probability", p.Duplicate)
	}
	if p.Down && p.Blackhole {
		return errors.New("down and blackhole at once: a direction is one or the other")
	}
	return nil
}

// paramsJSON is Params on the wire.
type paramsJSON struct {
	Delay     jsonDuration  `json:"delay"`
	Jitter    jsonDuration  `json:"jitter"`
	Reorder   bool          `json:"reorder,omitempty"`
	Loss      topology.Loss `json:"loss"`
	Duplicate float64       `json:"duplicate,omitempty"`
	Down      bool          `json:"down,omitempty"`
	Blackhole bool          `json:"blackhole,omitempty"`
}

// MarshalJSON writes durations as Go strings, readable by people who talk
// to the control socket with nc.
func (p Params) MarshalJSON() ([]byte, error) {
	return json.Marshal(paramsJSON{jsonDuration(p.Delay), jsonDuration(p.Jitter), p.Reorder, p.Loss, p.Duplicate, p.Down, p.Blackhole})
}

// UnmarshalJSON reads durations as Go strings or as nanoseconds.
func (p *Params) UnmarshalJSON(b []byte) error {
	var j paramsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Params{Delay: time.Duration(j.Delay), Jitter: time.Duration(j.Jitter), Reorder: j.Reorder, Loss: j.Loss, Duplicate: j.Duplicate, Down: j.Down, Blackhole: j.Blackhole}
	return nil
}

type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, time.Duration(d).String()), nil
}

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = jsonDuration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("duration: want a string such as \"20ms\" or integer nanoseconds")
	}
	*d = jsonDuration(n)
	return nil
}

// PipeSpec describes one direction of a link. The emulator reads packets
// from FromDev (in the namespace at path FromNS) and writes them into ToDev
// (in ToNS). Each TUN device takes part in two pipes, reading for one and
// writing for the other; the emulator opens it once and shares it.
type PipeSpec struct {
	Link     string // link name, unique in the testbed
	From, To string // node names: the direction
	FromNS   string // e.g. /run/netns/lp-two-site-ra
	FromDev  string
	ToNS     string
	ToDev    string
	Params   Params
}

// PipeStats are the counters of one pipe. Packet counts are wire segments
// (a 64 KiB super-packet at MTU 1500 counts as its 45 segments, a UDP GSO
// batch as its datagrams), byte counts are IP bytes on the wire (each
// segment with its headers), so the numbers compare with what a real
// interface would count. Once the delay line is empty, PacketsIn +
// Duplicated = PacketsOut + the drops.
type PipeStats struct {
	Link string `json:"link"`
	From string `json:"from"`
	To   string `json:"to"`

	PacketsIn  uint64 `json:"packets_in"` // read from FromDev
	BytesIn    uint64 `json:"bytes_in"`
	PacketsOut uint64 `json:"packets_out"` // written into ToDev
	BytesOut   uint64 `json:"bytes_out"`
	DropsLoss  uint64 `json:"drops_loss"` // lost by the loss model
	DropsDown  uint64 `json:"drops_down"` // dropped because the direction was down
	// DropsBlackhole counts packets dropped because the direction was a
	// blackhole (carrier up, nothing through).
	DropsBlackhole uint64 `json:"drops_blackhole"`
	// DropsQueue counts packets dropped because the delay line held
	// MaxQueuedBytes already: the emulator's memory is not a wire.
	DropsQueue uint64 `json:"drops_queue"`
	// DropsError counts packets the kernel refused (write errors), which
	// are logged at most once a second.
	DropsError uint64 `json:"drops_error"`
	// QueuedPackets and QueuedBytes are in the delay line now.
	QueuedPackets uint64 `json:"queued_packets"`
	QueuedBytes   uint64 `json:"queued_bytes"`
	// SuperPacketsIn counts reads that carried more than one segment:
	// PacketsIn/SuperPacketsIn near 1 under bulk TCP (or UDP sent with
	// UDP_SEGMENT) means GSO offload is not at work.
	SuperPacketsIn uint64 `json:"super_packets_in"`
	// Duplicated counts the extra copies the Duplicate parameter made
	// (segments); they are counted again in PacketsOut when written.
	Duplicated uint64 `json:"duplicated"`
	// MaxSegmentBytes is the largest TCP or UDP payload of one wire
	// segment carried since the pipe started: the gso_size of an offload
	// super-packet (the MSS, or the UDP_SEGMENT size), the payload of any
	// other packet. MaxPacketBytes is the largest IP packet a wire would
	// carry: a super-packet's segments with their headers, any other
	// packet whole. Packets dropped for down or blackhole do not count;
	// packets the loss model drops do (they reached the link).
	MaxSegmentBytes uint64 `json:"max_segment_bytes"`
	MaxPacketBytes  uint64 `json:"max_packet_bytes"`

	Params Params `json:"params"`
}
