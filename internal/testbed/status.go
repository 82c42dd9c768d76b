package testbed

import (
	"time"

	"github.com/lightpath/lightpath/internal/topology"
)

// EgressStats are the kernel's numbers for one link end's egress device.
type EgressStats struct {
	Up                 bool   `json:"up"`
	Carrier            bool   `json:"carrier"`
	RateBPS            uint64 `json:"rate_bps"`      // class 1:1, the link rate now
	SentPackets        uint64 `json:"sent_packets"`  // through htb (segmentation-offload packets count once)
	SentBytes          uint64 `json:"sent_bytes"`    // through htb
	QueueDrops         uint64 `json:"queue_drops"`   // dropped by the egress queue (full)
	BacklogBytes       uint64 `json:"backlog_bytes"` // waiting in htb now
	BacklogPackets     uint64 `json:"backlog_packets"`
	ReservationClasses int    `json:"reservation_classes"` // classes 1:100 and up (agents')
}

// StatusReport is `testbed status`: the topology as built, with the live
// numbers of every direction of every link.
type StatusReport struct {
	Testbed  string         `json:"testbed"`
	File     string         `json:"file"`
	Phase    string         `json:"phase"`
	Created  time.Time      `json:"created"`
	Emulator EmulatorStatus `json:"emulator"`
	Nodes    []NodeStatus   `json:"nodes"`
	Links    []LinkStatus   `json:"links"`
}

// EmulatorStatus says whether the daemon answers.
type EmulatorStatus struct {
	Running bool   `json:"running"`
	PID     int    `json:"pid,omitempty"`
	Socket  string `json:"socket"`
	Log     string `json:"log"`
	Error   string `json:"error,omitempty"`
}

// NodeStatus is one node.
type NodeStatus struct {
	Name      string `json:"name"`
	Site      string `json:"site"`
	Role      string `json:"role"`
	Namespace string `json:"namespace"`
	IPv4      string `json:"ipv4"`
	IPv6      string `json:"ipv6"`
}

// LinkStatus is one link, with its two ends and two directions.
type LinkStatus struct {
	Name       string      `json:"name"`
	Role       string      `json:"role"`
	MTU        int         `json:"mtu"`
	Reservable float64     `json:"reservable"`
	Ends       []EndStatus `json:"ends"`
	Directions []DirStatus `json:"directions"`
}

// EndStatus is one end of a link: its node, device and addresses.
type EndStatus struct {
	Node   string `json:"node"`
	Device string `json:"device"`
	IPv4   string `json:"ipv4"`
	IPv6   string `json:"ipv6"`
}

// DirStatus is one direction of a link: its egress device (at From, where
// its htb tree is), its parameters now, and its counters from the emulator
// (packets counted as the segments a wire would carry) and the kernel.
type DirStatus struct {
	From      string  `json:"from"`
	To        string  `json:"to"`
	Device    string  `json:"device"` // egress device, in From's namespace
	RateBPS   uint64  `json:"rate_bps"`
	DelayNS   int64   `json:"delay_ns"`
	JitterNS  int64   `json:"jitter_ns"`
	Reorder   bool    `json:"reorder"`
	LossModel string  `json:"loss_model"`
	Loss      float64 `json:"loss"`      // the model's mean loss fraction
	Duplicate float64 `json:"duplicate"` // probability that a packet arrives twice
	Down      bool    `json:"down"`
	// Blackhole: every packet dropped, the carrier left up.
	Blackhole bool `json:"blackhole"`

	PacketsIn uint64 `json:"packets_in"` // into the emulator
	BytesIn   uint64 `json:"bytes_in"`
	// SuperPacketsIn counts the emulator's reads that carried more than
	// one packet (a TSO or USO super-packet).
	SuperPacketsIn uint64 `json:"super_packets_in"`
	Duplicated     uint64 `json:"duplicated"` // extra copies made (counted in packets too)
	Packets        uint64 `json:"packets"`    // delivered to To
	Bytes          uint64 `json:"bytes"`
	DropsLoss      uint64 `json:"drops_loss"`      // by the loss model
	DropsDown      uint64 `json:"drops_down"`      // while the link was down
	DropsBlackhole uint64 `json:"drops_blackhole"` // while the link was a blackhole
	DropsQueue     uint64 `json:"drops_queue"`     // by the egress queue (htb)
	DelayPackets   uint64 `json:"delay_packets"`   // in flight in the emulator now
	DelayBytes     uint64 `json:"delay_bytes"`
	QueuePackets   uint64 `json:"queue_packets"` // waiting in the egress queue now
	QueueBytes     uint64 `json:"queue_bytes"`
	// MaxSegmentBytes is the largest TCP or UDP payload of one wire
	// segment carried since the testbed came up (the gso_size of an
	// offload packet, which captures on the devices cannot show), and
	// MaxPacketBytes the largest IP packet a wire would carry.
	MaxSegmentBytes uint64       `json:"max_segment_bytes"`
	MaxPacketBytes  uint64       `json:"max_packet_bytes"`
	Egress          *EgressStats `json:"egress,omitempty"`
	Error           string       `json:"error,omitempty"`
}

// LinkChange is what `link set` changes; nil fields stay as they are.
type LinkChange struct {
	From   string // only the direction leaving this node; "" for both
	Rate   *uint64
	Delay  *time.Duration
	Jitter *time.Duration
	Loss   *topology.Loss
	// Duplicate is the probability that a packet arrives twice.
	Duplicate *float64
	// Down cuts the direction (true) or restores it (false); either way
	// it ends a blackhole.
	Down *bool
	// Blackhole drops every packet while the carrier stays up (true), or
	// restores the direction (false); true ends a down. Down and
	// Blackhole both true is refused.
	Blackhole *bool
}

// UpOptions say what to build.
type UpOptions struct {
	Name string // the testbed's name
	File string // the topology file, for messages and the state
	Data []byte // its content
	// Exe is the lightpath binary that runs the emulator daemon
	// (`lightpath testbed emulator --name N`).
	Exe string
	// Logf reports progress, one line per step; nil for silence.
	Logf func(format string, args ...any)
}

// UpResult says what was built.
type UpResult struct {
	Name        string   `json:"testbed"`
	Nodes       int      `json:"nodes"`
	Links       int      `json:"links"`
	RaisedHost  []string `json:"raised_host,omitempty"`
	Seconds     float64  `json:"seconds"`
	EmulatorPID int      `json:"emulator_pid"`
}

// DownResult says what Down removed.
type DownResult struct {
	Name       string `json:"testbed"`
	Namespaces int    `json:"namespaces"`
	Devices    int    `json:"devices"`
	Processes  int    `json:"processes"`
	Existed    bool   `json:"existed"`
	// Kept names what down found in the state directory that up did not
	// make (a controller's socket, say): it is left, with the directory.
	Kept []string `json:"kept,omitempty"`
}
