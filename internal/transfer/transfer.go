// Package transfer is what a data transfer is, as the controller records
// it and the API carries it: a `lightpath cp` that talks to a controller
// registers its transfer, reports its progress every second (bytes, bytes
// per path, the TCP state of each stream) and its outcome. It links
// nothing but the standard library, so clients can speak it; package
// registry keeps the records on the controller, in its store.
package transfer

import "time"

// States of a transfer.
const (
	Running   = "running"
	Succeeded = "succeeded"
	Failed    = "failed"
	// Interrupted is a transfer its user stopped (Ctrl-C): not a failure;
	// the same command again resumes it as a new transfer.
	Interrupted = "interrupted"
	// Stalled is how a running transfer that has not reported for
	// StallAfter is shown: its cp was killed, or hangs.
	Stalled = "stalled"
)

// StallAfter is how long a running transfer may go without a report
// before it is shown stalled.
const StallAfter = 30 * time.Second

// Transfer is one transfer's record.
type Transfer struct {
	ID            string           `json:"id"`
	Owner         string           `json:"owner"`
	State         string           `json:"state"`
	Direction     string           `json:"direction"` // push or pull
	Source        string           `json:"source"`
	Destination   string           `json:"destination"`
	From          string           `json:"from,omitempty"` // the node the data leaves
	To            string           `json:"to,omitempty"`   // the node it reaches
	Flow          string           `json:"flow,omitempty"` // its flow spec
	Reservation   string           `json:"reservation,omitempty"`
	Streams       int              `json:"streams"`
	BytesTotal    int64            `json:"bytes_total"`
	BytesDone     int64            `json:"bytes_done"`
	BytesByPath   map[string]int64 `json:"bytes_by_path,omitempty"`
	ThroughputBps float64          `json:"throughput_bps"`
	StartedAt     time.Time        `json:"started_at"`
	UpdatedAt     time.Time        `json:"updated_at"`
	EndedAt       time.Time        `json:"ended_at,omitzero"`
	Verified      bool             `json:"verified"`
	Bottleneck    string           `json:"bottleneck,omitempty"`
	BottleneckWhy string           `json:"bottleneck_why,omitempty"`
	Error         string           `json:"error,omitempty"`
}

// Filter selects transfers as the controller's store lists and counts
// them; zero fields match everything.
type Filter struct {
	Owner string
	// States, when not empty, keeps those in one of them.
	States []string
	// Since keeps those started at or after it.
	Since time.Time
	// UpdatedSince keeps those updated (reported) at or after it.
	UpdatedSince time.Time
	// Except leaves out the transfer of that ID.
	Except string
	// Limit, when positive, keeps the first Limit matches.
	Limit int
}

// Registration is what cp says of a transfer as it starts.
type Registration struct {
	Direction   string `json:"direction"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	From        string `json:"from,omitempty"`
	To          string `json:"to,omitempty"`
	Flow        string `json:"flow,omitempty"`
	Reservation string `json:"reservation,omitempty"`
	BytesTotal  int64  `json:"bytes_total,omitempty"`
}

// Stream is one data connection's TCP state.
type Stream struct {
	RTTSeconds    float64 `json:"rtt_s"`
	MinRTTSeconds float64 `json:"min_rtt_s,omitempty"`
	Cwnd          uint32  `json:"cwnd"`
	Retransmits   uint32  `json:"retransmits"`
	PacingBps     float64 `json:"pacing_bps,omitempty"`
	DeliveryBps   float64 `json:"delivery_bps,omitempty"`
	BytesAcked    uint64  `json:"bytes_acked,omitempty"`
}

// Report is one progress report; State other than running ends the
// transfer.
type Report struct {
	State         string           `json:"state,omitempty"`
	BytesDone     int64            `json:"bytes_done"`
	BytesTotal    int64            `json:"bytes_total,omitempty"`
	BytesByPath   map[string]int64 `json:"bytes_by_path,omitempty"`
	Streams       []Stream         `json:"streams,omitempty"`
	Reservation   string           `json:"reservation,omitempty"`
	Verified      bool             `json:"verified,omitempty"`
	Bottleneck    string           `json:"bottleneck,omitempty"`
	BottleneckWhy string           `json:"bottleneck_why,omitempty"`
	Error         string           `json:"error,omitempty"`
	// ThroughputBps, when given with a final report, is cp's own figure
	// for the whole run.
	ThroughputBps float64 `json:"throughput_bps,omitempty"`
}
