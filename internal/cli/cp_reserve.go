package cli

// cp --reserve: book a reservation for the copy's own flows, follow it
// while the copy runs, account the bytes each path carried, release it at
// the end. The copy never waits for it: it starts on the routed path, the
// node agents steer its packets onto the reserved path when the
// reservation is ACTIVE (nftables marks them by address and port on the
// hosts, so the connections notice nothing), and back when it ends.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/textsafe"
	"github.com/lightpath/lightpath/internal/units"
)

// The window cp books: the time the data takes at the reserved rate,
// half as long again, and half a minute for the start and a slow end; at
// least a minute. A pull does not know its size before it starts and
// books defaultPullWindow unless --reserve-duration says. Since cp
// releases the reservation when it ends, a window longer than needed only
// costs admission; one too short ends the guarantee early and the copy
// finishes on the routed path.
const (
	reserveSlack      = 1.5
	reserveMargin     = 30 * time.Second
	minReserveWindow  = time.Minute
	defaultPullWindow = time.Hour
	// cpCtlTimeout bounds each request to the controller: a controller
	// that does not answer delays the copy by at most this much.
	cpCtlTimeout = 10 * time.Second
	// releaseTimeout bounds the cancel at the end, also after Ctrl-C.
	releaseTimeout = 10 * time.Second
)

// reserveFlags are cp's reservation flags.
type reserveFlags struct {
	ctl      ctlFlags // without --json, which is cp's own
	rate     string   // "" (no reservation), a rate, or "auto"
	required bool
	path     []string
	duration time.Duration
	project  string
}

func (f *reserveFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.rate, "reserve", "", "book guaranteed bandwidth for this copy's flows: a rate (300M, 2G) or auto (the widest free); see above")
	fs.BoolVar(&f.required, "reserve-required", false, "fail, copying nothing, when the reservation cannot be booked (default: copy on the routed path with a warning)")
	fs.StringSliceVar(&f.path, "reserve-path", nil, "the links to reserve, in the direction the data flows (default: the controller's choice)")
	fs.DurationVar(&f.duration, "reserve-duration", 0, "the window to book (default: from the size at the reserved rate for a push, 1h for a pull)")
	fs.StringVar(&f.project, "reserve-project", "", "the project to book under (its quota and policy apply)")
	fs.StringVar(&f.ctl.url, "controller", "", "the controller to book with (--reserve) and to record the transfer at: http://HOST:PORT, https://HOST:PORT or unix:PATH (default: $LIGHTPATH_CONTROLLER, else "+defaultController+")")
	fs.StringVar(&f.ctl.tokenFile, "controller-token-file", "", "with --reserve: file holding your controller token (default: $LIGHTPATH_CONTROLLER_TOKEN)")
	fs.StringVar(&f.ctl.caFile, "controller-ca", "", "with --reserve: CA certificate (PEM) to verify an https controller with")
	fs.DurationVar(&f.ctl.timeout, "controller-timeout", cpCtlTimeout, "with --reserve: give up on a request the controller has not answered in this long")
}

// check refuses reservation flags without --reserve, and a bad rate.
func (f *reserveFlags) check() error {
	if f.rate == "" {
		switch {
		case f.required:
			return errors.New("--reserve-required needs --reserve RATE|auto")
		case len(f.path) > 0:
			return errors.New("--reserve-path needs --reserve RATE|auto")
		case f.duration != 0:
			return errors.New("--reserve-duration needs --reserve RATE|auto")
		case f.project != "":
			return errors.New("--reserve-project needs --reserve RATE|auto")
		}
		return nil
	}
	if f.duration < 0 {
		return errors.New("--reserve-duration must be above zero")
	}
	if f.auto() {
		return nil
	}
	if _, err := parseBandwidth("--reserve", f.rate, true); err != nil {
		return fmt.Errorf("%w (or --reserve auto)", err)
	}
	return nil
}

func (f *reserveFlags) auto() bool { return strings.EqualFold(strings.TrimSpace(f.rate), "auto") }

// cpBooking is what cp asks the controller for.
type cpBooking struct {
	from, to string // node names, in the direction the data flows
	flow     string // the flow spec
	client   netip.Addr
	server   netip.AddrPort
}

// localAddrToward is the address the kernel would send from toward addr
// (HOST:PORT), and addr's IP and port: a UDP socket is connected, which
// picks the route and the source address without sending anything.
func localAddrToward(addr string) (netip.Addr, netip.AddrPort, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return netip.Addr{}, netip.AddrPort{}, fmt.Errorf("find this host's address toward %s: %w", addr, err)
	}
	defer c.Close()
	local := c.LocalAddr().(*net.UDPAddr).AddrPort()
	remote := c.RemoteAddr().(*net.UDPAddr).AddrPort()
	return local.Addr().Unmap(), netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port()), nil
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

// flowSpec is the flow spec of a copy's connections: every one of them goes
// to the server's port from some port of the client, so one flow covers
// the session; it is written in the direction the data flows.
func flowSpec(push bool, cl netip.Addr, srv netip.AddrPort) string {
	host := srv.Addr().String()
	if srv.Addr().Is6() {
		host = "[" + host + "]"
	}
	server := host + ":" + strconv.Itoa(int(srv.Port()))
	if push {
		return "tcp " + cl.String() + " > " + server
	}
	return "tcp " + server + " > " + cl.String()
}

// planBooking finds the nodes and the flow of a copy to or from addr.
func planBooking(t apiv1.Topology, push bool, cl netip.Addr, srv netip.AddrPort) (cpBooking, error) {
	name := t.Name
	if name == "" {
		name = "the controller's topology"
	} else {
		name = "topology " + name
	}
	cn, sn := nodeOwning(t, cl), nodeOwning(t, srv.Addr())
	switch {
	case cn == "" && sn == "":
		return cpBooking{}, fmt.Errorf("neither this host's address %s nor the server's %s belongs to a node of %s: the controller reserves between its nodes only", cl, srv.Addr(), name)
	case cn == "":
		return cpBooking{}, fmt.Errorf("this host's address toward the server, %s, belongs to no node of %s: the controller reserves between its nodes only", cl, name)
	case sn == "":
		return cpBooking{}, fmt.Errorf("the server's address %s belongs to no node of %s: the controller reserves between its nodes only", srv.Addr(), name)
	case cn == sn:
		return cpBooking{}, fmt.Errorf("this host and the server are both node %s: no link to reserve", cn)
	}
	b := cpBooking{from: cn, to: sn, flow: flowSpec(push, cl, srv), client: cl, server: srv}
	if !push {
		b.from, b.to = sn, cn
	}
	return b, nil
}

// reserveWindow is the window booked for size bytes at bps (see the
// constants above), in whole seconds.
func reserveWindow(size int64, bps uint64) time.Duration {
	if bps == 0 {
		return minReserveWindow
	}
	const most = 24 * 365 * time.Hour
	secs := float64(max(size, 0))*8/float64(bps)*reserveSlack + reserveMargin.Seconds()
	if secs >= most.Seconds() {
		return most
	}
	d := (time.Duration(secs*float64(time.Second)) + time.Second - 1).Truncate(time.Second)
	return max(d, minReserveWindow)
}

// localSize sums the sizes of what a push sends (regular files; links
// and directories count nothing), to size the reservation's window.
func localSize(items []mover.SourceItem) int64 {
	var n int64
	for _, it := range items {
		fs.WalkDir(it.Root.FS(), it.Path, func(_ string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
			return nil
		})
	}
	return n
}

func newCpKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "cp-" + hex.EncodeToString(b)
}

// cpReservation is a booked reservation being followed.
type cpReservation struct {
	c       *client.Client
	booked  reserve.Reservation
	tracker *cpTracker
	stop    context.CancelFunc
	done    chan struct{}
}

// bookReservation books the copy's reservation: the nodes from the
// controller's topology, the bandwidth given or (auto) the widest free
// over the window, the window from the size. Failures are worded as the
// "<what>: <why>" of one line, the controller's alternatives included.
func bookReservation(ctx context.Context, f *reserveFlags, addr string, push bool, size int64, capRate uint64) (*client.Client, reserve.Reservation, string, error) {
	cl, srv, err := localAddrToward(addr)
	if err != nil {
		return nil, reserve.Reservation{}, "", err
	}
	c, err := f.ctl.client()
	if err != nil {
		return nil, reserve.Reservation{}, "", err
	}
	topo, err := c.Topology(ctx)
	if err != nil {
		return nil, reserve.Reservation{}, "", ctlError("read the controller's topology", c, err)
	}
	b, err := planBooking(topo, push, cl, srv)
	if err != nil {
		return nil, reserve.Reservation{}, "", err
	}
	window := func(bps uint64) time.Duration {
		switch {
		case f.duration > 0:
			return f.duration
		case !push:
			return defaultPullWindow
		}
		return reserveWindow(size, bps)
	}
	path := f.path
	var bw uint64
	if f.auto() {
		// The widest bandwidth free from now over the window it takes:
		// the window depends on the bandwidth, so search again over the
		// longer window until the bandwidth found fits the window searched.
		d := window(0)
		if f.duration == 0 && push {
			d = minReserveWindow
		}
		for i := 0; i < 6; i++ {
			slot, err := c.Find(ctx, apiv1.FindRequest{Mode: apiv1.FindWidest, From: b.from, To: b.to, Duration: d.String(), Path: f.path, Project: f.project})
			if err != nil {
				return c, reserve.Reservation{}, "", ctlError(fmt.Sprintf("find the widest bandwidth free from %s to %s", b.from, b.to), c, err)
			}
			if slot.Bandwidth == 0 {
				return c, reserve.Reservation{}, "", fmt.Errorf("no bandwidth is free from %s to %s over the next %s", b.from, b.to, units.FormatDuration(d))
			}
			bw = slot.Bandwidth
			if capRate > 0 {
				bw = min(bw, capRate)
			}
			if len(f.path) == 0 {
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
	} else {
		bw, _ = parseBandwidth("--reserve", f.rate, true)
	}
	req := apiv1.ReservationRequest{
		From: b.from, To: b.to, Bandwidth: bw, Duration: window(bw).String(),
		FlowSpec: b.flow, Path: path, Project: f.project, IdempotencyKey: newCpKey(),
	}
	resp, err := createRetrying(ctx, c, req, true)
	if err != nil {
		return c, reserve.Reservation{}, b.flow, ctlError(fmt.Sprintf("reserve %s from %s to %s for %s", fmtRate(bw), b.from, b.to, b.flow), c, err)
	}
	return c, resp.Reservation, b.flow, nil
}

// reservationEvent is cp --json's line for each change of the reservation
// seen while copying: its state, and how many bytes the copy had carried.
type reservationEvent struct {
	Type      string        `json:"type"` // "reservation"
	ID        string        `json:"id"`
	State     reserve.State `json:"state"`
	Degraded  bool          `json:"degraded"`
	Reason    string        `json:"reason,omitempty"`
	Bandwidth uint64        `json:"bandwidth_bps"`
	Path      string        `json:"path,omitempty"`
	FlowSpec  string        `json:"flow_spec,omitempty"`
	Seconds   float64       `json:"seconds"`
	BytesSent int64         `json:"bytes_sent"`
}

// cpTracker follows the reservation's states and splits the bytes the
// copy carried between the paths: bytes carried while the reservation was
// ACTIVE and not degraded count as "reserved", the rest as "routed". The
// split is read from the mover's running byte counter at the moments cp
// learns of each change.
type cpTracker struct {
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

func newTracker(count func() int64, note func(reserve.Reservation, int64, time.Duration)) *cpTracker {
	return &cpTracker{count: count, note: note, t0: time.Now()}
}

// reserving says whether the reservation steers the flows onto its path.
func reserving(r reserve.Reservation) bool { return r.State == reserve.StateActive && !r.Degraded }

// observe takes the reservation as the controller sent it and says
// whether it is over (terminal).
func (t *cpTracker) observe(r reserve.Reservation) bool {
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
		switch on := reserving(r); {
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

// finish ends the accounting at the copy's end: the bytes carried while
// reserved, the time spent reserved, and the last state seen.
func (t *cpTracker) finish() (int64, time.Duration, reserve.Reservation) {
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

// follow watches the reservation in the background until it is over or
// stop is called.
func (r *cpReservation) follow(ctx context.Context, errw io.Writer) {
	fctx, stop := context.WithCancel(ctx)
	r.stop, r.done = stop, make(chan struct{})
	go func() {
		defer close(r.done)
		see := func(cur reserve.Reservation) (bool, error) { return r.tracker.observe(cur), nil }
		_, err := follow(fctx, r.c, "cp: reservation "+r.booked.ID, r.booked.ID, errw, see, func(ev apiv1.Event) (bool, error) {
			if ev.Reservation == nil {
				return false, nil
			}
			return see(*ev.Reservation)
		})
		if err != nil && fctx.Err() == nil {
			fmt.Fprintf(errw, "lightpath: %s; the copy goes on, its bytes per path are counted up to here\n", textsafe.Sanitize(oneLine(err.Error())))
		}
	}()
}

// release stops following and cancels the reservation, unless it is over
// already; it returns its state after that.
func (r *cpReservation) release(why string) (reserve.Reservation, error) {
	if r.stop != nil {
		r.stop()
		<-r.done
	}
	_, _, last := r.tracker.finish()
	if last.ID == "" {
		last = r.booked
	}
	if last.State.Terminal() {
		return last, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	got, err := r.c.CancelReservation(ctx, r.booked.ID, apiv1.ActionRequest{Reason: why})
	if err == nil {
		return got, nil
	}
	// Over meanwhile (it ended, or failed): nothing to release.
	if cur, gerr := r.c.Reservation(ctx, r.booked.ID); gerr == nil && cur.State.Terminal() {
		return cur, nil
	}
	return last, ctlError("release reservation "+r.booked.ID, r.c, err)
}

// byteCounter is the copy's running count of payload bytes carried, over
// every attempt: the attempts done plus the running one's progress.
type byteCounter struct {
	mu   sync.Mutex
	base int64
	prog *mover.Progress
}

func (b *byteCounter) load() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.base
	if b.prog != nil {
		n += b.prog.BytesMoved.Load()
	}
	return n
}

func (b *byteCounter) begin(p *mover.Progress) {
	b.mu.Lock()
	b.prog = p
	b.mu.Unlock()
}

func (b *byteCounter) end() {
	b.mu.Lock()
	if b.prog != nil {
		b.base += b.prog.BytesMoved.Load()
		b.prog = nil
	}
	b.mu.Unlock()
}

// cpReserve is cp's side of --reserve: booked before the copy, followed
// during it, released after.
type cpReserve struct {
	f       *reserveFlags
	res     *cpReservation
	flow    string
	failure string // why there is no reservation
	jsonOut bool
	quiet   bool
	out     *ndjson
	stderr  io.Writer
}

// start books the reservation and starts following it. Without
// --reserve-required a failure is a warning and the copy goes on.
func (x *cpReserve) start(ctx context.Context, addr string, push bool, size int64, capRate uint64, count func() int64) error {
	c, r, flow, err := bookReservation(ctx, x.f, addr, push, size, capRate)
	x.flow = flow
	if err != nil {
		if x.f.required {
			return fmt.Errorf("--reserve-required: %w", err)
		}
		x.failure = oneLine(err.Error())
		fmt.Fprintf(x.stderr, "lightpath: cp: no reservation: %s; copying on the routed path\n", textsafe.Sanitize(x.failure))
		return nil
	}
	res := &cpReservation{c: c, booked: r}
	res.tracker = newTracker(count, func(cur reserve.Reservation, n int64, at time.Duration) { x.note(cur, n, at) })
	x.res = res
	res.tracker.observe(r)
	res.follow(ctx, x.stderr)
	return nil
}

// note says what became of the reservation: an NDJSON line with --json,
// a line on stderr otherwise (not with --quiet).
func (x *cpReserve) note(r reserve.Reservation, sent int64, at time.Duration) {
	reason := r.FailureReason
	if r.Degraded {
		reason = r.DegradedReason
	}
	if x.jsonOut {
		x.out.write(reservationEvent{Type: "reservation", ID: r.ID, State: r.State, Degraded: r.Degraded, Reason: reason,
			Bandwidth: r.Bandwidth, Path: client.PathString(r.Path), FlowSpec: x.flow, Seconds: at.Seconds(), BytesSent: sent})
		return
	}
	if x.quiet {
		return
	}
	var msg string
	switch {
	case r.State == reserve.StateActive && r.Degraded:
		msg = fmt.Sprintf("reservation %s is degraded (%s): the flows may be on the routed path", r.ID, reason)
	case r.State == reserve.StateActive:
		msg = fmt.Sprintf("reservation %s is ACTIVE: the flows move onto %s (%s carried before)", r.ID, client.PathString(r.Path), units.FormatSize(sent))
	case r.State.Terminal():
		msg = fmt.Sprintf("reservation %s is %s", r.ID, r.State)
		if reason != "" {
			msg += " (" + reason + ")"
		}
		msg += ": the flows go back to the routed path"
	default:
		msg = fmt.Sprintf("reserved %s: %s → %s at %s via %s for %s, %s; copying on the routed path until it is ACTIVE",
			r.ID, r.From, r.To, fmtRate(r.Bandwidth), client.PathString(r.Path), x.flow, r.State)
	}
	x.line(msg)
}

// line writes an informational line on stderr, over the progress bar when
// there is one.
func (x *cpReserve) line(msg string) {
	prefix := ""
	if f, ok := x.stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			prefix = "\r\x1b[K"
		}
	}
	fmt.Fprintf(x.stderr, "%scp: %s\n", prefix, textsafe.Sanitize(msg)) // reasons come from the controller
}

// finish releases the reservation and fills the summary's fields: which
// path carried how many of the sent bytes.
func (x *cpReserve) finish(sum *cpSummary, sent int64, interrupted bool) {
	if x.res == nil {
		sum.ReservationError = x.failure
		sum.BytesByPath = map[string]int64{"routed": sent, "reserved": 0}
		return
	}
	reserved, onFor, _ := x.res.tracker.finish()
	reserved = min(max(reserved, 0), sent)
	why := "lightpath cp finished"
	if interrupted {
		why = "lightpath cp interrupted"
	}
	r, err := x.res.release(why)
	sum.Reservation = x.res.booked.ID
	sum.ReservedBps = x.res.booked.Bandwidth
	sum.ReservationPath = client.PathString(x.res.booked.Path)
	sum.ReservationState = string(r.State)
	sum.ReservedSeconds = onFor.Seconds()
	sum.BytesByPath = map[string]int64{"routed": sent - reserved, "reserved": reserved}
	if err != nil {
		sum.ReservationError = oneLine(err.Error())
		fmt.Fprintf(x.stderr, "lightpath: cp: %s; cancel it with lightpath reserve cancel %s\n", textsafe.Sanitize(sum.ReservationError), x.res.booked.ID)
	}
}

// printReservationSummary is the summary's line about --reserve.
func printReservationSummary(w io.Writer, s cpSummary) {
	if s.BytesByPath == nil {
		return
	}
	if s.Reservation == "" {
		fmt.Fprintf(w, "  no reservation (see the warning above): routed %s\n", units.FormatSize(s.BytesByPath["routed"]))
		return
	}
	fmt.Fprintf(w, "  reservation %s, %s via %s: reserved path %s, routed %s; %s\n", s.Reservation, fmtRate(s.ReservedBps),
		orDash(s.ReservationPath), units.FormatSize(s.BytesByPath["reserved"]), units.FormatSize(s.BytesByPath["routed"]), releasedWord(s))
}

func releasedWord(s cpSummary) string {
	switch {
	case s.ReservationState == string(reserve.StateCancelled) && s.ReservationError == "":
		return "released"
	case s.ReservationError != "":
		return s.ReservationState + ", NOT released: " + s.ReservationError
	}
	return "it ended " + s.ReservationState
}

// split returns the bytes carried while reserved so far, the copy still
// under way.
func (t *cpTracker) split() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.reserved
	if t.on && !t.stopped {
		n += t.count() - t.since
	}
	return n
}

// current returns the running attempt's progress, or nil between attempts.
func (b *byteCounter) current() *mover.Progress {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.prog
}
