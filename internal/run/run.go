// Package run runs any command with its flows booked and steered: the
// command runs in a cgroup of its own, a reservation is booked (through
// package booking, as `lightpath cp --reserve` books) with a flow spec
// naming that cgroup, and a BPF program on the cgroup gives every socket
// created inside it the reservation's firewall mark (topology.MarkBase +
// DSCP), so the sending host's policy routing matches the socket's own
// route lookup. When the command ends, the reservation is released and the
// cgroup removed. `lightpath run` is its command line.
//
// The kernel parts (cgroup2, the BPF program, sock_diag) are in
// run_linux.go; on other systems they return platform.ErrUnsupported.
package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/booking"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/topology"
)

// ErrNoCgroup2 is a host without a cgroup2 hierarchy this process may
// create cgroups in.
var ErrNoCgroup2 = errors.New("no writable cgroup2 hierarchy")

// Parent is the cgroup, under the cgroup2 mount, that holds each run's
// own cgroup (Parent/run-<random>).
const Parent = "lightpath"

// Config is one command to run with its flows reserved.
type Config struct {
	// From and To are the topology's nodes, in the direction the data
	// flows.
	From, To string
	// Bandwidth to guarantee, bits per second; 0 books the widest free.
	Bandwidth uint64
	// Duration is the window booked (default booking.PullWindow): the
	// reservation is released when the command ends.
	Duration time.Duration
	Project  string
	// Path is the links to reserve (nil: the controller's choice).
	Path []string
	// Argv is the command and its arguments.
	Argv           []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Controller     booking.Booker
	// Note is told what happens (booked, each change of the reservation,
	// flows learnt); optional.
	Note func(Event)
	// PollInterval is how often the command's connections are read when
	// data flows to this node (default 200 ms).
	PollInterval time.Duration
}

// Event is a change worth telling the user of.
type Event struct {
	Reservation reserve.Reservation
	At          time.Duration // since the booking
	// Flows, when set, are connections of the command added to the
	// reservation's flow spec.
	Flows []reserve.Flow
	// Err, when set, is a problem that does not stop the command.
	Err error
}

// Summary is what became of a run.
type Summary struct {
	Cgroup      string // relative to the cgroup2 mount
	Reservation reserve.Reservation
	Mark        uint32
	// Status is the command's exit status: 128+N when signal N ended it.
	Status int
	// Released is false when the release failed (ReleaseErr says why).
	Released   bool
	ReleaseErr error
	// Removed says whether the cgroup was removed.
	Removed bool
	// Learnt is how many connections were added to the flow spec.
	Learnt  int
	Seconds float64
}

// Mark is the firewall mark of a reservation's sockets: the value policy
// routing and the agents match (topology.MarkBase + DSCP).
func Mark(dscp uint8) uint32 { return uint32(topology.MarkBase) + uint32(dscp) }

// addrsOf is every address the topology lists for node (a prefix counts
// as its address), each once.
func addrsOf(t apiv1.Topology, name string) ([]netip.Addr, error) {
	for _, n := range t.Nodes {
		if n.Name != name {
			continue
		}
		var out []netip.Addr
		for _, s := range n.Addresses {
			a, err := netip.ParseAddr(s)
			if err != nil {
				p, perr := netip.ParsePrefix(s)
				if perr != nil {
					continue
				}
				a = p.Addr()
			}
			if a = a.Unmap(); !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("node %s has no address in the controller's topology", name)
		}
		return out, nil
	}
	return nil, fmt.Errorf("the controller's topology has no node %q", name)
}

// nodePair is the addresses of a run's two nodes, which must differ.
func nodePair(t apiv1.Topology, from, to string) (fa, ta []netip.Addr, err error) {
	if from == to {
		return nil, nil, fmt.Errorf("--from and --to are both %s: no link to reserve", from)
	}
	if fa, err = addrsOf(t, from); err != nil {
		return nil, nil, err
	}
	if ta, err = addrsOf(t, to); err != nil {
		return nil, nil, err
	}
	return fa, ta, nil
}

// PlanRun is a push's reservation (the command runs on the from node):
// from → to, a flow between every address of one node and every address
// of the other of the same family (the node's own and its link ends': a
// socket may be given any of them as its source, by the route it takes or
// by binding), restricted on the sending host, this one, to the run's
// cgroup (`any FROMADDR > TOADDR cgroup PATH`).
func PlanRun(t apiv1.Topology, from, to, cgroup string) (booking.Plan, error) {
	fa, ta, err := nodePair(t, from, to)
	if err != nil {
		return booking.Plan{}, err
	}
	var fs reserve.FlowSpec
	for _, a := range fa {
		for _, b := range ta {
			if a.Is4() != b.Is4() {
				continue
			}
			fs.Flows = append(fs.Flows, reserve.Flow{Proto: reserve.ProtoAny,
				Src:    reserve.FlowEndpoint{Prefix: netip.PrefixFrom(a, a.BitLen())},
				Dst:    reserve.FlowEndpoint{Prefix: netip.PrefixFrom(b, b.BitLen())},
				Cgroup: cgroup})
		}
	}
	if len(fs.Flows) == 0 {
		return booking.Plan{}, fmt.Errorf("nodes %s and %s have no addresses of one family", from, to)
	}
	if len(fs.Flows) > reserve.MaxFlows {
		fs.Flows = fs.Flows[:reserve.MaxFlows]
	}
	return booking.Plan{From: from, To: to, Flow: fs}, nil
}

// PullEnds is where a pull's placeholder flow runs (the command runs on
// the to node, data comes from the from node): near, an address of to
// that this host has (one of local), and far, the first address of from
// of near's family.
func PullEnds(t apiv1.Topology, from, to string, local []netip.Addr) (far, near netip.Addr, err error) {
	fa, ta, err := nodePair(t, from, to)
	if err != nil {
		return far, near, err
	}
	for _, n := range ta {
		if !slices.Contains(local, n) {
			continue
		}
		for _, f := range fa {
			if f.Is4() == n.Is4() {
				return f, n, nil
			}
		}
	}
	return far, near, fmt.Errorf("node %s has no address of the family of this host's addresses of %s", from, to)
}

// Placeholder is the one flow a pull is booked with before any of the
// command's connections is known: `udp FAR > NEAR:PORT`, where NEAR:PORT
// is a UDP socket run holds open, and reads nothing from, for the whole
// run. A reservation that steers flows needs at least one (the
// controller gives it its DSCP then, and a modify cannot add the first);
// this one can only ever match packets sent to run's own socket, so it
// steers nobody's traffic, and it names no cgroup, which the far node
// does not have. The first connections learnt replace it.
func Placeholder(far netip.Addr, near netip.AddrPort) reserve.Flow {
	n := near.Addr().Unmap()
	return reserve.Flow{Proto: reserve.ProtoUDP,
		Src: reserve.FlowEndpoint{Prefix: netip.PrefixFrom(far, far.BitLen())},
		Dst: reserve.FlowEndpoint{Prefix: netip.PrefixFrom(n, n.BitLen()), Ports: reserve.PortRange{Lo: near.Port(), Hi: near.Port()}}}
}

// Without is spec without the flows of drop.
func Without(spec reserve.FlowSpec, drop []reserve.Flow) reserve.FlowSpec {
	var out reserve.FlowSpec
	for _, f := range spec.Flows {
		if !slices.Contains(drop, f) {
			out.Flows = append(out.Flows, f)
		}
	}
	return out
}

// Owns says whether node owns one of the local addresses: the node this
// process runs on.
func Owns(t apiv1.Topology, node string, local []netip.Addr) bool {
	for _, n := range t.Nodes {
		if n.Name != node {
			continue
		}
		for _, s := range n.Addresses {
			a, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			if slices.Contains(local, a.Unmap()) {
				return true
			}
		}
	}
	return false
}

// Conn is one of the command's connections as sock_diag reports it:
// Local is this host's end.
type Conn struct {
	Proto         reserve.Protocol
	Local, Remote netip.AddrPort
}

// PullFlows is the flows to add for connections of the command that
// receive from the far node: each as the 5-tuple the far end sends
// (FAR:sport > LOCAL:dport), for the connections whose far end is one of
// far's addresses and that spec does not list yet; at most as many as
// keep spec within reserve.MaxFlows.
func PullFlows(spec reserve.FlowSpec, conns []Conn, far []netip.Addr) []reserve.Flow {
	var out []reserve.Flow
	have := func(f reserve.Flow) bool {
		return slices.Contains(spec.Flows, f) || slices.Contains(out, f)
	}
	for _, c := range conns {
		if c.Proto != reserve.ProtoTCP && c.Proto != reserve.ProtoUDP {
			continue
		}
		r, l := c.Remote.Addr().Unmap(), c.Local.Addr().Unmap()
		if !slices.Contains(far, r) || c.Remote.Port() == 0 || c.Local.Port() == 0 {
			continue
		}
		f := reserve.Flow{Proto: c.Proto,
			Src: reserve.FlowEndpoint{Prefix: netip.PrefixFrom(r, r.BitLen()), Ports: reserve.PortRange{Lo: c.Remote.Port(), Hi: c.Remote.Port()}},
			Dst: reserve.FlowEndpoint{Prefix: netip.PrefixFrom(l, l.BitLen()), Ports: reserve.PortRange{Lo: c.Local.Port(), Hi: c.Local.Port()}}}
		if have(f) {
			continue
		}
		if len(spec.Flows)+len(out) >= reserve.MaxFlows {
			break
		}
		out = append(out, f)
	}
	return out
}

// Run runs cfg's command in a cgroup of its own with its flows booked
// and steered, and returns its summary; the error is set when the
// command could not be run (no cgroup, no reservation, no start). The
// reservation is released and the cgroup removed before Run returns.
func Run(ctx context.Context, cfg Config) (sum Summary, err error) {
	t0 := time.Now()
	note := func(e Event) {
		if cfg.Note != nil {
			cfg.Note(e)
		}
	}
	cg, err := NewCgroup()
	if err != nil {
		return sum, err
	}
	sum.Cgroup = cg.Path
	defer func() {
		sum.Removed = cg.Remove() == nil
	}()

	c := cfg.Controller
	topo, err := c.Topology(ctx)
	if err != nil {
		return sum, c.Explain("read the controller's topology", err)
	}
	local, err := LocalAddrs()
	if err != nil {
		return sum, err
	}
	// A push (--from is this node) is booked for the cgroup's flows, which
	// this host's agent marks. A pull (--to is this node) is sent by the
	// far node, which has no such cgroup: it is booked for a placeholder
	// that matches nothing, replaced by the command's connections as they
	// are learnt.
	var plan booking.Plan
	var placeholder []reserve.Flow
	switch {
	case Owns(topo, cfg.To, local):
		far, near, err := PullEnds(topo, cfg.From, cfg.To, local)
		if err != nil {
			return sum, err
		}
		held, err := net.ListenUDP("udp", &net.UDPAddr{IP: near.AsSlice()})
		if err != nil {
			return sum, fmt.Errorf("hold a UDP port on %s for the placeholder flow: %w", near, err)
		}
		defer held.Close()
		placeholder = []reserve.Flow{Placeholder(far, netip.AddrPortFrom(near, uint16(held.LocalAddr().(*net.UDPAddr).Port)))}
		plan = booking.Plan{From: cfg.From, To: cfg.To, Flow: reserve.FlowSpec{Flows: placeholder}}
	case Owns(topo, cfg.From, local):
		if plan, err = PlanRun(topo, cfg.From, cfg.To, cg.Path); err != nil {
			return sum, err
		}
	default:
		if _, _, err := nodePair(topo, cfg.From, cfg.To); err != nil {
			return sum, err
		}
		return sum, fmt.Errorf("this host is neither --from %s nor --to %s (none of its addresses is theirs in the controller's topology): run the command on one of them", cfg.From, cfg.To)
	}
	dur := cfg.Duration
	if dur <= 0 {
		dur = booking.PullWindow
	}
	b, err := booking.BookPlan(ctx, c, plan, booking.Request{Bandwidth: cfg.Bandwidth, Duration: dur, Project: cfg.Project, Path: cfg.Path, KeyPrefix: KeyPrefix},
		booking.Watcher{
			Changed: func(r reserve.Reservation, _ int64, at time.Duration) { note(Event{Reservation: r, At: at}) },
			Lost:    func(err error) { note(Event{Err: err}) },
			Failed:  func(err error) { note(Event{Err: err}) },
		})
	if err != nil {
		return sum, err
	}
	sum.Reservation = b.Booked()
	release := func(why string) {
		out, err := b.Release(why, 0)
		sum.Reservation = out.Final
		sum.Released, sum.ReleaseErr = err == nil, err
	}
	if b.Booked().DSCP == 0 {
		release("lightpath run: no DSCP")
		return sum, fmt.Errorf("reservation %s has no DSCP value: the controller steers no flows of it", b.Booked().ID)
	}
	sum.Mark = Mark(b.Booked().DSCP)
	if err := cg.MarkSockets(sum.Mark); err != nil {
		release("lightpath run: could not mark the command's sockets")
		return sum, err
	}

	// From here the command runs to its end whatever happens to ctx
	// (an interrupt is forwarded to it), and the reservation is released
	// after it.
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	learnt := make(chan int, 1)
	if placeholder != nil {
		// A pull: the far end sends on sockets this host cannot mark.
		far, _ := addrsOf(topo, cfg.From)
		go func() { learnt <- learn(bg, cfg, b, cg, far, placeholder, note) }()
	} else {
		learnt <- 0
	}
	status, err := cg.Exec(cfg.Argv, cfg.Stdin, cfg.Stdout, cfg.Stderr)
	stop()
	sum.Learnt = <-learnt
	sum.Status = status
	why := "lightpath run: the command ended"
	if ctx.Err() != nil {
		why = "lightpath run interrupted"
	}
	release(why)
	sum.Seconds = time.Since(t0).Seconds()
	return sum, err
}

// KeyPrefix starts the idempotency keys of run's bookings (cp's are
// booking.KeyCp).
const KeyPrefix = "run-"

// learn is the pull side (data flows to this node): every PollInterval
// it reads the command's connections (sock_diag, the cgroup's sockets)
// and adds those from the far node that the flow spec does not list yet,
// as the 5-tuples the far end sends, through the controller's modify, so
// the far end's agent steers them; the first ones replace the
// placeholder. It returns how many it added.
func learn(ctx context.Context, cfg Config, b *booking.Booking, cg *Cgroup, far []netip.Addr, placeholder []reserve.Flow, note func(Event)) int {
	every := cfg.PollInterval
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	added := 0
	var lastErr string
	warn := func(err error) {
		// Said once per distinct problem: a poll every 200 ms would
		// repeat it.
		if err.Error() != lastErr {
			lastErr = err.Error()
			note(Event{Err: err})
		}
	}
	for {
		select {
		case <-ctx.Done():
			return added
		case <-tick.C:
		}
		conns, err := cg.Conns()
		if err != nil {
			warn(fmt.Errorf("read the command's connections: %w", err))
			continue
		}
		spec := Without(b.Flow(), placeholder)
		flows := PullFlows(spec, conns, far)
		if len(flows) == 0 {
			continue
		}
		spec.Flows = append(spec.Flows, flows...)
		r, err := b.SetFlows(ctx, spec)
		if err != nil {
			if ctx.Err() == nil {
				warn(err)
			}
			continue
		}
		added += len(flows)
		note(Event{Reservation: r, Flows: flows})
	}
}
