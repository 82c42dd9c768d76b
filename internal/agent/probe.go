package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/topology"
)

// Path probes: a path can be up, every carrier on it present, and still
// drop everything (a blackhole). So the agents probe each ACTIVE
// reservation's path in band: the agent at one end sends a small UDP
// datagram to the agent at the other end every ProbePeriod, marked like the
// reservation's flows (its DSCP in the IP header, the firewall mark
// MarkBase+DSCP on the socket) so that it takes the reserved path, and the
// far agent sends it back the same way. ProbeLosses probes in a row without
// an echo within their timeout (at least the period plus the path's round
// trip on the topology, probeTimeout; longer on a path whose echoes have
// been slow), and no late echo meanwhile, mean the path is down (Detector):
// the agent withdraws its steering of the reservation (WithoutBroken) and
// reports a link of the path down to the controller; ProbeUps echoes in a
// row bring it back.
// docs/agent.md describes it.
const (
	// ProbePort is the UDP port each agent answers probes on, in its
	// node's namespace (IPv4 and IPv6).
	ProbePort = 7471
	// ProbePeriod is how often a path is probed.
	ProbePeriod = 200 * time.Millisecond
	// ProbeLosses probes lost in a row take a path down; ProbeUps echoes
	// in a row bring it back.
	ProbeLosses = 5
	ProbeUps    = 3
	// ProbeRate is the rate (bits/s) of the probes' htb class, 1:ff,
	// guaranteed and at most, on every egress of a reserved path.
	ProbeRate = 1_000_000
)

// A probe on the wire (the UDP payload, big-endian): "LPPB", the kind
// (probeAsk, or probeEcho on the way back), the reservation's DSCP, two
// zero bytes, the prober's token and the probe's sequence number.
const (
	probeMagic = "LPPB"
	probeLen   = 24
	probeAsk   = 1
	probeEcho  = 2
)

type probeMsg struct {
	Kind  byte
	DSCP  uint8
	Token uint64
	Seq   uint64
}

func (m probeMsg) marshal() []byte {
	b := make([]byte, probeLen)
	copy(b, probeMagic)
	b[4], b[5] = m.Kind, m.DSCP
	binary.BigEndian.PutUint64(b[8:], m.Token)
	binary.BigEndian.PutUint64(b[16:], m.Seq)
	return b
}

var errNotProbe = errors.New("not a lightpath probe")

func parseProbe(b []byte) (probeMsg, error) {
	if len(b) != probeLen || string(b[:4]) != probeMagic || b[6] != 0 || b[7] != 0 {
		return probeMsg{}, errNotProbe
	}
	m := probeMsg{Kind: b[4], DSCP: b[5], Token: binary.BigEndian.Uint64(b[8:]), Seq: binary.BigEndian.Uint64(b[16:])}
	if m.Kind != probeAsk && m.Kind != probeEcho || m.DSCP == 0 || m.DSCP > topology.MaxDSCP {
		return probeMsg{}, errNotProbe
	}
	return m, nil
}

// Transition is what an event did to a path's state.
type Transition int

// Transitions.
const (
	Unchanged Transition = iota
	WentDown
	WentUp
)

func (t Transition) String() string {
	return [...]string{"unchanged", "down", "up"}[t]
}

// Detector judges one path from its probes, a pure state machine: feed it
// every probe sent (Sent), every echo received (Echo) and the clock (Tick).
// A probe is lost when no echo came within its timeout of sending it;
// Losses lost in a row take the path down, and then Ups answered in a row
// bring it back. Probes are judged in the order they were sent: one
// answered as soon as its echo comes and those before it are judged, one
// lost at the first event at or after its deadline.
//
// A blackhole is a path where nothing comes back; a path whose echoes come
// late still carries packets, and that is what a busy host looks like (the
// echoing agent, or a software data plane, starved of CPU for a while,
// then answering a burst at once). So:
//
//   - the echo of a probe already judged lost (a late echo, up to
//     LateLimit after its probe) ends the run of losses while the path is
//     up: the path goes down only when Losses probes in a row are lost and
//     no echo at all came back in the meantime. It does not count towards
//     coming back up: that takes Ups echoes in time.
//   - the timeout adapts like TCP's retransmission timeout (RFC 6298):
//     the smoothed round trip of every echo, in time or late, plus four
//     times its mean deviation, never under Timeout (the floor: a quiet
//     path is judged as promptly as before) nor over MaxTimeout. A path
//     whose echoes have been slow gets the time they took.
type Detector struct {
	// Timeout is the least time an echo may take: the probe period, or
	// on a path whose round trip is longer, that plus the round trip
	// (probeTimeout). MaxTimeout caps the adaptive timeout.
	Timeout, MaxTimeout time.Duration
	// LateLimit is how long after its probe a late echo still shows
	// the path alive.
	LateLimit   time.Duration
	Losses, Ups int

	out  []sent // the probes not judged yet, oldest first
	lost []sent // the probes judged lost in the last LateLimit, oldest first
	run  int    // lost in a row
	got  int    // answered in a row
	down bool

	srtt, rttvar time.Duration // 0, 0 until the first echo
	late         int           // late echoes seen, for the agent's log
	lateRTT      time.Duration // and the last one's round trip
}

type sent struct {
	seq      uint64
	at       time.Time
	answered bool
}

// The adaptive timeout's cap and the late echoes' limit (Detector): a
// blackhole is found within (ProbeLosses-1)·ProbePeriod + probeMaxTimeout
// of its first lost probe however slow the path has been.
const (
	probeMaxTimeout = 2 * time.Second
	probeLateLimit  = 5 * time.Second
)

// NewDetector is a Detector with the agents' numbers and a least echo
// timeout.
func NewDetector(timeout time.Duration) *Detector {
	return &Detector{Timeout: timeout, MaxTimeout: max(timeout, probeMaxTimeout), LateLimit: max(timeout, probeLateLimit), Losses: ProbeLosses, Ups: ProbeUps}
}

// Down reports whether the path is down.
func (d *Detector) Down() bool { return d.down }

// Answered reports whether the last probe judged was answered.
func (d *Detector) Answered() bool { return d.got > 0 }

// Healthy reports whether the path is up with its last Ups probes
// answered.
func (d *Detector) Healthy() bool { return !d.down && d.got >= d.Ups }

// Lost is the number of probes lost in a row.
func (d *Detector) Lost() int { return d.run }

// CurrentTimeout is the timeout probes are judged with now: Timeout until
// the echoes' round trips call for more, at most MaxTimeout.
func (d *Detector) CurrentTimeout() time.Duration {
	return min(max(d.srtt+4*d.rttvar, d.Timeout), max(d.MaxTimeout, d.Timeout))
}

// Sent records probe seq sent at at, and judges the probes whose deadline
// has passed.
func (d *Detector) Sent(seq uint64, at time.Time) Transition {
	tr := d.judge(at)
	d.out = append(d.out, sent{seq: seq, at: at})
	if len(d.out) > 1024 { // never, with a deadline; but bounded
		d.out = d.out[1:]
	}
	return tr
}

// Echo records the echo of probe seq received at at. The echo of a probe
// not judged yet, within the timeout, answers it; the echo of a probe
// judged lost (or past its deadline) is late: it feeds the round trip
// estimate and, while the path is up, ends the run of losses. The echo of
// a probe it never sent or forgot, or a second echo, is ignored.
func (d *Detector) Echo(seq uint64, at time.Time) Transition {
	tr := d.judge(at) // with the timeout as it was: an echo does not stretch its own deadline
	for i := range d.out {
		if x := &d.out[i]; x.seq == seq && !x.answered {
			x.answered = true
			d.sample(at.Sub(x.at))
			if t := d.judge(at); t != Unchanged {
				tr = t
			}
			return tr
		}
	}
	for i, x := range d.lost {
		if x.seq != seq {
			continue
		}
		d.lost = slices.Delete(d.lost, i, i+1)
		d.late, d.lateRTT = d.late+1, at.Sub(x.at)
		d.sample(d.lateRTT)
		if !d.down {
			d.run = 0
		}
		break
	}
	return tr
}

// sample feeds a round trip to the estimate (RFC 6298's gains).
func (d *Detector) sample(rtt time.Duration) {
	if rtt < 0 {
		rtt = 0
	}
	if d.srtt == 0 && d.rttvar == 0 {
		d.srtt, d.rttvar = rtt, rtt/2
		return
	}
	dev := d.srtt - rtt
	if dev < 0 {
		dev = -dev
	}
	d.rttvar += (dev - d.rttvar) / 4
	d.srtt += (rtt - d.srtt) / 8
}

// Tick judges the probes whose deadline has passed at now.
func (d *Detector) Tick(now time.Time) Transition { return d.judge(now) }

// judge judges the probes from the oldest on: answered ones, and lost
// ones whose deadline is past now, up to the first still waiting. It
// returns the last transition.
func (d *Detector) judge(now time.Time) Transition {
	for len(d.lost) > 0 && now.Sub(d.lost[0].at) > d.LateLimit {
		d.lost = d.lost[1:]
	}
	timeout := d.CurrentTimeout()
	tr := Unchanged
	for len(d.out) > 0 {
		x := d.out[0]
		if !x.answered && now.Sub(x.at) < timeout {
			break
		}
		d.out = d.out[1:]
		if !x.answered {
			d.lost = append(d.lost, x)
			if len(d.lost) > 1024 {
				d.lost = d.lost[1:]
			}
		}
		if t := d.judged(x.answered); t != Unchanged {
			tr = t
		}
	}
	return tr
}

func (d *Detector) judged(answered bool) Transition {
	if answered {
		d.run = 0
		d.got++
		if d.down && d.got >= d.Ups {
			d.down = false
			return WentUp
		}
		return Unchanged
	}
	d.got = 0
	d.run++
	if !d.down && d.run >= d.Losses {
		d.down = true
		return WentDown
	}
	return Unchanged
}

// probeTimeout is how long the echo of a probe over path may take: the
// probe period, plus the path's round trip on the topology (twice its
// links' delay and jitter), so a long path is not taken for a broken one.
func probeTimeout(t *topology.Topology, path []reserve.PathHop) time.Duration {
	var oneWay time.Duration
	for _, h := range path {
		if l, ok := t.Link(h.Link); ok {
			oneWay += l.Params.Delay + l.Params.Jitter
		}
	}
	return ProbePeriod + 2*oneWay
}

// probeTarget is a path this node probes: the path of reservation ID,
// towards node Far at Addr.
type probeTarget struct {
	// Key names the reservation, its DSCP and its path: a reservation
	// moved to another path is probed afresh.
	Key  string
	ID   string
	DSCP uint8
	Path []reserve.PathHop
	Far  string
	Addr netip.Addr
	// Timeout is how long an echo may take (probeTimeout).
	Timeout time.Duration
}

// pathState is what the agent reads of a probed path: down or not, and
// whether its last probe judged was answered.
type pathState struct {
	probeTarget
	Down     bool
	Answered bool
	Healthy  bool
	Since    time.Time
}

// probeTargets lists the paths node probes among rs at now: those of the
// ACTIVE reservations in their window with a DSCP. The first node of the
// path that has an agent (the from node, as a rule) probes the to node,
// and the to node probes it back, so each end learns of a blackhole in
// either direction and withdraws its own steering; both ends need agents
// (the far agent answers).
func probeTargets(t *topology.Topology, node string, rs []reserve.Reservation, now time.Time) []probeTarget {
	var out []probeTarget
	for _, r := range rs {
		if r.State != reserve.StateActive || now.Before(r.Start) || !now.Before(r.End) || r.DSCP == 0 || len(r.Path) == 0 {
			continue
		}
		managed := func(n string) bool { return slices.Contains(r.ManagedNodes, n) }
		first := ""
		for _, n := range append([]string{r.From}, pathNodes(r.Path)...) {
			if managed(n) {
				first = n
				break
			}
		}
		if first == "" || first == r.To || !managed(r.To) {
			continue
		}
		far := ""
		switch node {
		case first:
			far = r.To
		case r.To:
			if first == r.From {
				far = r.From
			}
		}
		if far == "" {
			continue
		}
		addr, ok := probeAddr(t, node, far)
		if !ok {
			continue
		}
		out = append(out, probeTarget{Key: fmt.Sprintf("%s %d %s", r.ID, r.DSCP, pathString(r.Path)), ID: r.ID, DSCP: r.DSCP, Path: r.Path, Far: far, Addr: addr, Timeout: probeTimeout(t, r.Path)})
	}
	return out
}

// pathNodes lists the nodes a path reaches, hop by hop.
func pathNodes(path []reserve.PathHop) []string {
	out := make([]string, len(path))
	for i, h := range path {
		out[i] = h.To
	}
	return out
}

// pathString names a path by its links, as --path takes it.
func pathString(path []reserve.PathHop) string {
	ls := make([]string, len(path))
	for i, h := range path {
		ls[i] = h.Link
	}
	return strings.Join(ls, ",")
}

// probeAddr is the address node probes far at: IPv4 when both have one,
// else IPv6.
func probeAddr(t *topology.Topology, node, far string) (netip.Addr, bool) {
	n, ok1 := t.Node(node)
	f, ok2 := t.Node(far)
	switch {
	case !ok1 || !ok2:
		return netip.Addr{}, false
	case n.IPv4.IsValid() && f.IPv4.IsValid():
		return f.IPv4, true
	case n.IPv6.IsValid() && f.IPv6.IsValid():
		return f.IPv6, true
	}
	return netip.Addr{}, false
}

// blame picks the link of path to report down when its probes are lost: a
// probe cannot tell which link dropped it, so it is the first link between
// two sites (where a dedicated circuit is) that cleared does not hold (the
// links of other paths whose probes are answered), else the first link
// that cleared does not hold, else the first link between two sites, else
// the first link.
func blame(t *topology.Topology, path []reserve.PathHop, cleared map[string]bool) string {
	if len(path) == 0 {
		return ""
	}
	interSite := func(h reserve.PathHop) bool {
		a, ok1 := t.Node(h.From)
		b, ok2 := t.Node(h.To)
		return ok1 && ok2 && a.Site != b.Site
	}
	for _, pick := range []func(reserve.PathHop) bool{
		func(h reserve.PathHop) bool { return interSite(h) && !cleared[h.Link] },
		func(h reserve.PathHop) bool { return !cleared[h.Link] },
		interSite,
	} {
		if i := slices.IndexFunc(path, pick); i >= 0 {
			return path[i].Link
		}
	}
	return path[0].Link
}

// blackholed lists the links of r's path that r is degraded for because
// probes found a blackhole (the controller's reason names each "link L
// down at NODE since ... (blackhole: ...)"): when this node's probes of
// the path are answered again, it reports them up, also if it is not the
// agent that reported them down (the far end did, or this agent before it
// restarted).
func blackholed(r reserve.Reservation) []string {
	if !r.Degraded || !strings.Contains(r.DegradedReason, "(blackhole: ") {
		return nil
	}
	var out []string
	for _, part := range strings.Split(r.DegradedReason, "; ") { // one a link
		if !strings.Contains(part, "(blackhole: ") {
			continue
		}
		for _, h := range r.Path {
			if !slices.Contains(out, h.Link) && strings.HasPrefix(part, "link "+h.Link+" down at ") {
				out = append(out, h.Link)
			}
		}
	}
	return out
}

// blackholeReason is what the agent tells the controller of a path whose
// probes are lost.
func blackholeReason(tg probeTarget, node string) string {
	return fmt.Sprintf("blackhole: %d probes lost on path %s (reservation %s, %s to %s)", ProbeLosses, pathString(tg.Path), tg.ID, node, tg.Far)
}
