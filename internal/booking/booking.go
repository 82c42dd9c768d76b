// Package booking books a reservation for a copy's own flows, follows it
// while the copy runs, splits the bytes the copy carried between the
// reserved and the routed path, and releases it at the end. The copy
// never waits for it: it starts on the routed path, the node agents steer
// its packets onto the reserved path when the reservation is ACTIVE (by
// address and port, so the connections notice nothing), and back when it
// ends.
//
// It is the one place that books: everything goes through a Booker,
// which *client.Client satisfies over HTTP and the controller in process
// (internal/api's LocalBooker); `lightpath cp --reserve`, `lightpath
// run` and the transfer service use it, and HoldAll books a plan of
// several reservations all or nothing.
package booking

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/units"
)

// Booker is how everything books: the topology, the scheduler's answers
// (Find for one path, Plan for every path between two sets of nodes at
// once), a create (HELD when its request gives a hold; resent when its
// answer is lost), commit, cancel (a release), modify (an extension, new
// flows), and a reservation's changes as they happen (Watch). Errors are
// worded by Explain as "<what>: <why>". *client.Client implements it over
// HTTP; the controller implements it in process (internal/api's
// LocalBooker), for the transfer service.
type Booker interface {
	Topology(ctx context.Context) (apiv1.Topology, error)
	Find(ctx context.Context, req apiv1.FindRequest) (apiv1.Slot, error)
	Plan(ctx context.Context, req apiv1.PlanRequest) (apiv1.Plan, error)
	CreateReservationRetrying(ctx context.Context, req apiv1.ReservationRequest, fromNow bool) (apiv1.ReservationResponse, error)
	CommitReservation(ctx context.Context, id string, req apiv1.ActionRequest) (reserve.Reservation, error)
	Reservation(ctx context.Context, id string) (reserve.Reservation, error)
	CancelReservation(ctx context.Context, id string, req apiv1.ActionRequest) (reserve.Reservation, error)
	ModifyReservation(ctx context.Context, id string, req apiv1.ModifyRequest) (reserve.Reservation, error)
	Watch(ctx context.Context, what, id string, lost func(error),
		current func(reserve.Reservation) (bool, error), event func(apiv1.Event) (bool, error)) (bool, error)
	Explain(what string, err error) error
}

// The window booked for a copy: the time the data takes at the reserved
// rate, half as long again, and half a minute for the start and a slow
// end; at least a minute. A pull does not know its size before it starts
// and books PullWindow unless told. Since the copy releases the
// reservation when it ends, a window longer than needed only costs
// admission; one too short ends the guarantee early and the copy finishes
// on the routed path.
const (
	Slack      = 1.5
	Margin     = 30 * time.Second
	MinWindow  = time.Minute
	PullWindow = time.Hour
	// ReleaseTimeout bounds the cancel at the end, also after an interrupt.
	ReleaseTimeout = 10 * time.Second
)

// Window is the window booked for size bytes at bps, in whole seconds.
func Window(size int64, bps uint64) time.Duration {
	if bps == 0 {
		return MinWindow
	}
	const most = 24 * 365 * time.Hour
	secs := float64(max(size, 0))*8/float64(bps)*Slack + Margin.Seconds()
	if secs >= most.Seconds() {
		return most
	}
	d := (time.Duration(secs*float64(time.Second)) + time.Second - 1).Truncate(time.Second)
	return max(d, MinWindow)
}

// Route is the address the kernel would send from toward addr
// (HOST:PORT), and addr's IP and port: a UDP socket is connected, which
// picks the route and the source address without sending anything.
func Route(addr string) (netip.Addr, netip.AddrPort, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return netip.Addr{}, netip.AddrPort{}, fmt.Errorf("find this host's address toward %s: %w", addr, err)
	}
	defer c.Close()
	local := c.LocalAddr().(*net.UDPAddr).AddrPort()
	remote := c.RemoteAddr().(*net.UDPAddr).AddrPort()
	return local.Addr().Unmap(), netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port()), nil
}

// Plan is where a copy's reservation goes: its nodes, in the direction
// the data flows, and the flow of the copy's connections.
type Plan struct {
	From, To string
	Flow     reserve.FlowSpec
}

// nodeOwning is the node of the topology that owns addr, or "".
func nodeOwning(t apiv1.Topology, addr netip.Addr) string {
	for _, n := range t.Nodes {
		for _, s := range n.Addresses {
			a, err := netip.ParseAddr(s)
			if err != nil {
				if p, perr := netip.ParsePrefix(s); perr == nil {
					a, err = p.Addr(), nil
				}
			}
			if err == nil && a.Unmap() == addr.Unmap() {
				return n.Name
			}
		}
	}
	return ""
}

// CopyFlow is the flow of a copy's connections: every one of them goes to
// the server's port from some port of the client, so one flow covers the
// session; it is written in the direction the data flows.
func CopyFlow(push bool, client netip.Addr, server netip.AddrPort) reserve.FlowSpec {
	c := reserve.FlowEndpoint{Prefix: netip.PrefixFrom(client, client.BitLen())}
	s := reserve.FlowEndpoint{Prefix: netip.PrefixFrom(server.Addr(), server.Addr().BitLen()),
		Ports: reserve.PortRange{Lo: server.Port(), Hi: server.Port()}}
	f := reserve.Flow{Proto: reserve.ProtoTCP, Src: c, Dst: s}
	if !push {
		f.Src, f.Dst = s, c
	}
	return reserve.FlowSpec{Flows: []reserve.Flow{f}}
}

// WithUDP is a copy's flow with each of its tcp flows carried over udp as
// well: a session whose data streams are UDP to the server's one port
// (its control connection stays TCP).
func WithUDP(f reserve.FlowSpec) reserve.FlowSpec {
	out := reserve.FlowSpec{Flows: slices.Clone(f.Flows)}
	for _, fl := range f.Flows {
		if fl.Proto == reserve.ProtoTCP {
			fl.Proto = reserve.ProtoUDP
			out.Flows = append(out.Flows, fl)
		}
	}
	return out
}

// PlanCopy finds the nodes and the flow of a copy between this host's
// address client and the server's address.
func PlanCopy(t apiv1.Topology, push bool, client netip.Addr, server netip.AddrPort) (Plan, error) {
	name := t.Name
	if name == "" {
		name = "the controller's topology"
	} else {
		name = "topology " + name
	}
	cn, sn := nodeOwning(t, client), nodeOwning(t, server.Addr())
	switch {
	case cn == "" && sn == "":
		return Plan{}, fmt.Errorf("neither this host's address %s nor the server's %s belongs to a node of %s: the controller reserves between its nodes only", client, server.Addr(), name)
	case cn == "":
		return Plan{}, fmt.Errorf("this host's address toward the server, %s, belongs to no node of %s: the controller reserves between its nodes only", client, name)
	case sn == "":
		return Plan{}, fmt.Errorf("the server's address %s belongs to no node of %s: the controller reserves between its nodes only", server.Addr(), name)
	case cn == sn:
		return Plan{}, fmt.Errorf("this host and the server are both node %s: no link to reserve", cn)
	}
	p := Plan{From: cn, To: sn, Flow: CopyFlow(push, client, server)}
	if !push {
		p.From, p.To = sn, cn
	}
	return p, nil
}

// Request is the reservation a copy asks for.
type Request struct {
	Push   bool
	Client netip.Addr     // this host's address toward the server (Route)
	Server netip.AddrPort // the server's
	// Bandwidth to guarantee, bits per second; 0 asks for the widest
	// free over the window (at most Cap when Cap is set).
	Bandwidth, Cap uint64
	// Size is what a push sends, to size the window; Duration, when
	// set, is the window instead.
	Size     int64
	Duration time.Duration
	Path     []string // the links to take; nil: the controller's choice
	Project  string
	// UDP: the copy's data goes over UDP to the same port (cp --transport
	// udp), so the flow covers udp as well as tcp.
	UDP bool
	// KeyPrefix starts the create's idempotency key, naming what booked
	// it ("run-" for lightpath run); default KeyCp. The rest is random.
	KeyPrefix string
}

// KeyCp is the idempotency key prefix of the copies' bookings (cp
// --reserve). A key is unique per owner at the controller; a prefix of
// its own per command keeps one command's key from ever being read as
// another's retry.
const KeyCp = "cp-"

// Watcher is told what becomes of a booked reservation while the copy
// runs. Every field is optional.
type Watcher struct {
	// Bytes is the copy's running count of payload bytes, which the
	// bytes per path are split from.
	Bytes func() int64
	// Changed is each change of state or degradation seen, with the
	// bytes carried then and the time since the booking.
	Changed func(r reserve.Reservation, sent int64, at time.Duration)
	// Lost is a lost event stream, about to be resumed ("reservation
	// ID: why").
	Lost func(error)
	// Failed is a stream that could not be resumed ("reservation ID:
	// why"): the bytes per path are counted up to there.
	Failed func(error)
}

// Booking is a booked reservation being followed.
type Booking struct {
	c       Booker
	booked  reserve.Reservation
	mu      sync.Mutex // flow, changed by SetFlows
	flow    reserve.FlowSpec
	tracker *tracker
	stop    context.CancelFunc
	done    chan struct{}
}

// Book books the copy's reservation (the nodes from the controller's
// topology, the bandwidth given or the widest free over the window, the
// window from the size) and follows it until Release. A failure is worded
// as the "<what>: <why>" of one line, the controller's alternatives
// included.
func Book(ctx context.Context, c Booker, req Request, w Watcher) (*Booking, error) {
	topo, err := c.Topology(ctx)
	if err != nil {
		return nil, c.Explain("read the controller's topology", err)
	}
	p, err := PlanCopy(topo, req.Push, req.Client, req.Server)
	if err != nil {
		return nil, err
	}
	if req.UDP {
		p.Flow = WithUDP(p.Flow)
	}
	return BookPlan(ctx, c, p, req, w)
}

// BookPlan books and follows the reservation of a plan made by the
// caller (its nodes and flow), as Book does for a copy: req's bandwidth,
// cap, window and path apply; its addresses and UDP are not read. A
// command run under `lightpath run` books its cgroup's flow this way.
func BookPlan(ctx context.Context, c Booker, p Plan, req Request, w Watcher) (*Booking, error) {
	window := func(bps uint64) time.Duration {
		switch {
		case req.Duration > 0:
			return req.Duration
		case !req.Push:
			return PullWindow
		}
		return Window(req.Size, bps)
	}
	path, bw := req.Path, req.Bandwidth
	if bw == 0 {
		// The widest bandwidth free from now over the window it takes:
		// the window depends on the bandwidth, so search again over the
		// longer window until the bandwidth found fits the window searched.
		d := window(0)
		if req.Duration == 0 && req.Push {
			d = MinWindow
		}
		for range 6 {
			slot, err := c.Find(ctx, apiv1.FindRequest{Mode: apiv1.FindWidest, From: p.From, To: p.To, Duration: d.String(), Path: req.Path, Project: req.Project})
			if err != nil {
				return nil, c.Explain(fmt.Sprintf("find the widest bandwidth free from %s to %s", p.From, p.To), err)
			}
			if slot.Bandwidth == 0 {
				return nil, fmt.Errorf("no bandwidth is free from %s to %s over the next %s", p.From, p.To, units.FormatDuration(d))
			}
			bw = slot.Bandwidth
			if req.Cap > 0 {
				bw = min(bw, req.Cap)
			}
			if len(req.Path) == 0 {
				path = nil
				for _, h := range slot.Path {
					path = append(path, h.Link)
				}
			}
			need := window(bw)
			if need <= d {
				break
			}
			d = need
		}
	}
	areq := apiv1.ReservationRequest{
		From: p.From, To: p.To, Bandwidth: bw, Duration: window(bw).String(),
		FlowSpec: p.Flow.String(), Path: path, Project: req.Project, IdempotencyKey: NewKey(req.KeyPrefix),
	}
	resp, err := c.CreateReservationRetrying(ctx, areq, true)
	if err != nil {
		return nil, c.Explain(fmt.Sprintf("reserve %s from %s to %s for %s", units.FormatRate(float64(bw)), p.From, p.To, p.Flow), err)
	}
	b := &Booking{c: c, booked: resp.Reservation, flow: p.Flow, tracker: newTracker(w.Bytes, w.Changed)}
	b.tracker.observe(b.booked)
	b.follow(ctx, w)
	return b, nil
}

// NewKey is an idempotency key: prefix (KeyCp when empty) and 128
// random bits in hex.
func NewKey(prefix string) string {
	if prefix == "" {
		prefix = KeyCp
	}
	b := make([]byte, 16)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Booked is the reservation as it was booked.
func (b *Booking) Booked() reserve.Reservation { return b.booked }

// Flow is the flow the reservation steers.
func (b *Booking) Flow() reserve.FlowSpec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flow
}

// SetFlows makes spec the reservation's flow spec through the
// controller's modify (read again and resent once when the reservation
// changed meanwhile), so the agents steer what it now lists; it returns
// the reservation as modified.
func (b *Booking) SetFlows(ctx context.Context, spec reserve.FlowSpec) (reserve.Reservation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if spec.IsZero() {
		// An empty flow spec in a modify means "unchanged".
		return reserve.Reservation{}, fmt.Errorf("change the flows of reservation %s: it would steer none (a reservation booked with flows keeps one)", b.booked.ID)
	}
	version := b.tracker.version()
	if version == 0 {
		version = b.booked.Version
	}
	var err error
	for try := 0; try < 2; try++ {
		var r reserve.Reservation
		r, err = b.c.ModifyReservation(ctx, b.booked.ID, apiv1.ModifyRequest{Version: version, FlowSpec: spec.String()})
		if err == nil {
			b.flow = r.FlowSpec
			b.tracker.observe(r)
			return r, nil
		}
		cur, gerr := b.c.Reservation(ctx, b.booked.ID)
		if gerr != nil || cur.Version == version {
			break
		}
		version = cur.Version
	}
	return reserve.Reservation{}, b.c.Explain("change the flows of reservation "+b.booked.ID, err)
}

// Reserved is the bytes carried while the reservation steered the copy,
// so far.
func (b *Booking) Reserved() int64 {
	if b == nil {
		return 0
	}
	return b.tracker.split()
}

// follow watches the reservation in the background until it is over or
// Release is called.
func (b *Booking) follow(ctx context.Context, w Watcher) {
	fctx, stop := context.WithCancel(ctx)
	b.stop, b.done = stop, make(chan struct{})
	go func() {
		defer close(b.done)
		what := "reservation " + b.booked.ID
		var lost func(error)
		if w.Lost != nil {
			lost = func(err error) { w.Lost(fmt.Errorf("%s: %w", what, err)) }
		}
		see := func(cur reserve.Reservation) (bool, error) { return b.tracker.observe(cur), nil }
		_, err := b.c.Watch(fctx, what, b.booked.ID, lost, see, func(ev apiv1.Event) (bool, error) {
			if ev.Reservation == nil {
				return false, nil
			}
			return see(*ev.Reservation)
		})
		if err != nil && fctx.Err() == nil && w.Failed != nil {
			w.Failed(err)
		}
	}()
}

// Outcome is what became of a released reservation.
type Outcome struct {
	// Final is the reservation after the release: CANCELLED, or the
	// state it had reached by itself (ended, failed).
	Final reserve.Reservation
	// Reserved is the bytes carried while it steered the copy (at most
	// sent), and For how long it did.
	Reserved int64
	For      time.Duration
}

// Release stops following and cancels the reservation, unless it is over
// already. sent is the copy's final byte count. The error says why the
// cancel failed; the Outcome is filled either way.
func (b *Booking) Release(why string, sent int64) (Outcome, error) {
	if b.stop != nil {
		b.stop()
		<-b.done
	}
	reserved, onFor, last := b.tracker.finish()
	out := Outcome{Reserved: min(max(reserved, 0), sent), For: onFor, Final: last}
	if last.ID == "" {
		out.Final = b.booked
	}
	if out.Final.State.Terminal() {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	defer cancel()
	got, err := b.c.CancelReservation(ctx, b.booked.ID, apiv1.ActionRequest{Reason: why})
	if err == nil {
		out.Final = got
		return out, nil
	}
	// Over meanwhile (it ended, or failed): nothing to release.
	if cur, gerr := b.c.Reservation(ctx, b.booked.ID); gerr == nil && cur.State.Terminal() {
		out.Final = cur
		return out, nil
	}
	return out, b.c.Explain("release reservation "+b.booked.ID, err)
}

// ByPath is the bytes per path of a copy that carried sent bytes, reserved
// of them while its reservation steered it.
func ByPath(sent, reserved int64) map[string]int64 {
	reserved = min(max(reserved, 0), sent)
	return map[string]int64{"routed": sent - reserved, "reserved": reserved}
}

// Steering says whether the reservation steers the flows onto its path.
func Steering(r reserve.Reservation) bool { return r.State == reserve.StateActive && !r.Degraded }

// tracker follows the reservation's states and splits the bytes the copy
// carried between the paths: bytes carried while the reservation was
// ACTIVE and not degraded count as reserved, the rest as routed. The split
// is read from the copy's running byte count at the moments each change
// is learnt.
type tracker struct {
	count func() int64
	t0    time.Time
	note  func(reserve.Reservation, int64, time.Duration) // each change seen

	mu       sync.Mutex
	last     reserve.Reservation
	on       bool
	since    int64
	sinceT   time.Time
	reserved int64
	onFor    time.Duration
	stopped  bool
}

func newTracker(count func() int64, note func(reserve.Reservation, int64, time.Duration)) *tracker {
	if count == nil {
		count = func() int64 { return 0 }
	}
	return &tracker{count: count, note: note, t0: time.Now()}
}

// observe takes the reservation as the controller sent it and says
// whether it is over (terminal).
func (t *tracker) observe(r reserve.Reservation) bool {
	t.mu.Lock()
	if t.last.ID != "" && r.Version != 0 && r.Version < t.last.Version {
		t.mu.Unlock()
		return false // an older copy than one already seen
	}
	changed := t.last.ID == "" || r.State != t.last.State || r.Degraded != t.last.Degraded
	t.last = r
	n := t.count()
	now := time.Now()
	if !t.stopped {
		switch on := Steering(r); {
		case on && !t.on:
			t.on, t.since, t.sinceT = true, n, now
		case !on && t.on:
			t.on = false
			t.reserved += n - t.since
			t.onFor += now.Sub(t.sinceT)
		}
	}
	stopped := t.stopped
	t.mu.Unlock()
	if changed && !stopped && t.note != nil {
		t.note(r, n, now.Sub(t.t0))
	}
	return r.State.Terminal()
}

// version is the newest version of the reservation seen.
func (t *tracker) version() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last.Version
}

// split returns the bytes carried while reserved so far, the copy still
// under way.
func (t *tracker) split() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.reserved
	if t.on && !t.stopped {
		n += t.count() - t.since
	}
	return n
}

// finish ends the accounting at the copy's end: the bytes carried while
// reserved, the time spent reserved, and the last state seen.
func (t *tracker) finish() (int64, time.Duration, reserve.Reservation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		if t.on {
			t.reserved += t.count() - t.since
			t.onFor += time.Since(t.sinceT)
			t.on = false
		}
	}
	return t.reserved, t.onFor, t.last
}
