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
	Controller     booking.Controller
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

// PlanRun is a run's reservation: from → to, a flow between every
// address of one node and every address of the other of the same family
// (the node's own and its link ends': a socket may be given any of them
// as its source, by the route it takes or by binding), restricted on the sending host to the
// run's cgroup (`any FROMADDR > TOADDR cgroup PATH`).
func PlanRun(t apiv1.Topology, from, to, cgroup string) (booking.Plan, error) {
	addrs := func(name string) ([]netip.Addr, error) {
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
	if from == to {
		return booking.Plan{}, fmt.Errorf("--from and --to are both %s: no link to reserve", from)
	}
	fa, err := addrs(from)
	if err != nil {
		return booking.Plan{}, err
	}
	ta, err := addrs(to)
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
	plan, err := PlanRun(topo, cfg.From, cfg.To, cg.Path)
	if err != nil {
		return sum, err
	}
	dur := cfg.Duration
	if dur <= 0 {
		dur = booking.PullWindow
	}
	b, err := booking.BookPlan(ctx, c, plan, booking.Request{Bandwidth: cfg.Bandwidth, Duration: dur, Project: cfg.Project, Path: cfg.Path},
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
	if local, lerr := LocalAddrs(); lerr == nil && Owns(topo, cfg.To, local) {
		// A pull: the far end sends on sockets this host cannot mark.
		go func() { learnt <- learn(bg, cfg, b, cg, nodeAddrs(topo, cfg.From), note) }()
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

// nodeAddrs is every address the topology lists for node.
func nodeAddrs(t apiv1.Topology, node string) []netip.Addr {
	var out []netip.Addr
	for _, n := range t.Nodes {
		if n.Name != node {
			continue
		}
		for _, s := range n.Addresses {
			if a, err := netip.ParseAddr(s); err == nil {
				out = append(out, a.Unmap())
			}
		}
	}
	return out
}

// learn is the pull side (data flows to this node): every PollInterval
// it reads the command's connections (sock_diag, the cgroup's sockets)
// and adds those from the far node that the flow spec does not list yet,
// as the 5-tuples the far end sends, through the controller's modify, so
// the far end's agent steers them. It returns how many it added.
func learn(ctx context.Context, cfg Config, b *booking.Booking, cg *Cgroup, far []netip.Addr, note func(Event)) int {
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
		flows := PullFlows(b.Flow(), conns, far)
		if len(flows) == 0 {
			continue
		}
		r, err := b.AddFlows(ctx, flows)
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
