package udp

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lightpath/lightpath/internal/cc/fast"
	"github.com/lightpath/lightpath/internal/transport"
)

// Sizes and times of a stream.
const (
	defaultBuffer = 4 << 20   // send buffer and receive window, each, to start with
	maxAutoBuffer = 128 << 20 // what they may grow to when no Window is set
	minRTO        = 50 * time.Millisecond
	maxRTO        = 2 * time.Second
	ackEvery      = 4                    // data datagrams per ack at least...
	ackBytes      = 64 << 10             // ...or this many bytes' worth, whichever is more
	ackDelay      = 5 * time.Millisecond // an ack is never held longer
	// Fast streams: acks at most every ackGap unless maxAckBytes came
	// (256 KiB: 4 MiB windows still get 16 acks). At 10 Gbit/s an ack per
	// 64 KiB is 20,000 a second, a tenth of both ends' CPU on a veth pair;
	// at the rates of long paths (64 KiB takes longer than ackGap to come)
	// nothing changes.
	ackGap           = 200 * time.Microsecond
	maxAckBytes      = 256 << 10
	giveUp           = 30 * time.Second // no progress this long ends the stream
	handshakeTimeout = 15 * time.Second
	keepalive        = 15 * time.Second // an idle stream pings this often
	linger           = 10 * time.Second // a closed stream waits this long for the peer's FIN
	maxBatch         = 64               // datagrams built per round of the sender
	maxRegions       = 128              // send-ring slots a writer fills per call
)

// endpoint sends a stream's datagrams.
type endpoint interface {
	send(b []byte) error
	// sendMany sends datagrams each on its own, in as few system calls as
	// it can (sendmmsg); it returns how many went before the first that
	// failed, and why that one failed.
	sendMany(bs [][]byte) (int, error)
	// sendSegments sends b as datagrams of size bytes each, the last
	// possibly shorter, in one system call (UDP GSO); it fails when GSO
	// cannot be used (gsoRefused) and the caller sends them one by one.
	sendSegments(b []byte, size int) error
	// gso says whether segmented sends are worth trying; noGSO stops them.
	gso() bool
	noGSO()
	// mtu is the path's MTU now, 0 if unknown.
	mtu() int
	setTOS(tos int) error
	// release gives up the stream's hold on the socket.
	release()
}

// seg is a piece of the send buffer that went out in one datagram.
type seg struct {
	off   uint64
	n     uint32
	fin   bool
	state uint8
	xmits uint8
	sent  int64 // ns since the stream's epoch, of the last send
}

const (
	segNew      uint8 = iota // cut but never sent
	segInFlight              // sent, not yet heard of
	segLost                  // judged lost, queued to be sent again
	segSacked                // the receiver has it (above its cumulative ack)
)

// rng is a received range above the cumulative point; since is when the
// hole before it opened, naked when that hole was last NAKed (0: never).
type rng struct {
	start, end uint64
	since      int64
	naked      int64
}

// conn is one stream.
type conn struct {
	ep      endpoint
	laddr   net.Addr
	raddr   net.Addr
	session [16]byte
	stream  uint32
	dialler bool
	keys    streamKeys
	epoch   time.Time
	v6      bool

	pn atomic.Uint64 // next packet number to send

	mu  sync.Mutex
	wmu sync.Mutex // writers take turns filling the send buffer

	// rtoFloor raises minRTO for this stream when set (tests: a busy
	// machine's stalls would otherwise fire timeouts a test is not about).
	rtoFloor time.Duration

	// authentication of what arrives
	replay replayWindow

	// handshake
	established bool
	estab       chan struct{} // closed once established
	random      [16]byte

	// sending
	sring      sendRing
	wregions   [][]byte // a writer's room in the send ring: its slots' payloads
	wbusy      bool     // a writer is filling wregions (without mu)
	sAcked     uint64   // every byte below it is acknowledged
	sWrite     uint64   // bytes the application has written
	sNext      uint64   // first byte never cut into a segment
	segs       []seg    // segments in offset order, from segHead
	segHead    int
	lostQ      []uint64 // offsets of lost segments to send again
	inflight   int
	peerLimit  uint64 // flow control: the peer takes bytes below it
	finQueued  bool   // CloseWrite: the stream ends at finOff
	finOff     uint64
	finAcked   bool
	mss        int
	maxDgram   int
	ctl        controller
	target     uint64 // the rate cap (MaxPacingRate)
	pace       pacer
	lastProbe  int64
	rtoBackoff int
	lastProg   int64 // when the peer last acknowledged something new
	lastHeard  int64 // when the peer's last good datagram came
	lastPing   int64
	mtuChecked int64
	sentTimes  []sentAt // by packet number modulo its length; grows to cover what is in flight
	echoed     uint64   // the highest packet number an ack echoed
	round      roundState
	lastCE     uint32

	// receiving
	rbuf     []byte
	bufSize  int    // rbuf's and sring's size to start with: a listener's stream gets them when it joins
	autoBuf  bool   // no Window was set: sbuf and rbuf grow as the path needs
	rRead    uint64 // bytes the application has read
	rCum     uint64 // every byte below it arrived
	rHigh    uint64 // the highest byte that arrived, +1
	rRanges  []rng
	rFin     bool
	rFinOff  uint64
	ackCount int
	ackDue   int64 // when a held ack must go (0: none held)
	ackAt    int64 // when the last ack was built
	ackNow   bool
	advLimit uint64 // the limit last advertised
	echo     uint64 // the highest packet number received
	echoAt   int64
	ceCount  uint32
	lowat    int
	// a reader waiting: it wakes once rWant bytes are readable (its low
	// mark, at most its buffer). While nothing is queued, its buffer is
	// posted: in-order data goes straight into post (postN bytes so far),
	// a copy fewer than through rbuf.
	rWant    int
	post     []byte
	postN    int
	synPN    uint64 // the dialler's last SYN
	synAckAt int64  // the listener's last SYNACK
	nextScan int64  // when to look for timed-out segments
	tun      Tuning
	rxAck    ack            // the last ack received, parsed
	peer     netip.AddrPort // a listener's stream: the dialler's address as the listener sees it
	repairs  uint32         // retransmissions that brought bytes missing here
	nakDue   int64          // when a hole not yet NAKed becomes old enough (0: none)
	// reordering seen on the way in: the longest a hole lasted before
	// the original filled it (reoMax, ns), when a delay near it was last
	// seen (reoAt), and whether any was (reoSeen)
	reoMax, reoAt int64
	reoSeen       bool
	lastRepairs   uint32 // the peer's repair count, last heard
	// a timeout under judgement: the rate control before it, the peer's
	// repair count then, and the end (+1) of what it sent again
	undoCtl     controller
	undoRepairs uint32
	undoEnd     uint64

	// RTT
	srtt, rttvar, minRTT time.Duration
	lowRound             time.Duration // the lowest round's mean round trip

	// life
	closed   bool  // Close was called
	dead     bool  // the stream is over, its goroutine gone
	err      error // what ended it (reset, timeout); nil while alive
	rdl, wdl time.Time
	rwake    chan struct{}
	wwake    chan struct{}
	rwait    bool
	wwait    bool
	// sendPin is the lowest stream offset whose send-ring slot a batch
	// being sent (outside mu) reads in place, while pinned: an ack may
	// free that slot meanwhile, but the writer may not refill it until
	// the send is over.
	sendPin   uint64
	pinned    bool
	kick      chan struct{}
	done      chan struct{}
	closeAt   int64
	onDead    func()
	tos       int
	dscp      int
	stats     counters
	busySince int64
	limit     limitKind
}

type sentAt struct {
	pn uint64
	t  int64
}

type roundState struct {
	end        uint64 // the round ends when this byte is acknowledged
	sum        time.Duration
	n          int
	pkts, lost int
	ce         int
}

type counters struct {
	bytesSent, bytesRetrans, bytesAcked, bytesRecv uint64
	retrans                                        uint32
	datagrams, sendCalls, repaired, dropped        uint64
	lossTold, lossRounds                           uint64 // datagrams and rounds of loss the rate control was told of
	timeouts, undone                               uint64 // timeouts (episodes) and those found spurious
	busy, rwndLimited, sndLimited                  time.Duration
	delivered                                      uint64
	deliveredAt                                    int64
	deliveryRate                                   uint64
}

type limitKind uint8

const (
	limNone limitKind = iota
	limNetwork
	limReceiver
	limSender
)

func newConn(ep endpoint, laddr, raddr net.Addr, session [16]byte, stream uint32, dialler bool, keys streamKeys, o transport.Options, t Tuning, mtu int) (*conn, error) {
	if o.DSCP > 63 {
		return nil, fmt.Errorf("DSCP %d out of range 0..63", o.DSCP)
	}
	t = withFAST(t, o)
	ctl, err := newController(o.CC, o.PacingRate, t)
	if err != nil {
		return nil, err
	}
	size := defaultBuffer
	c0auto := o.Window <= 0
	if o.Window > 0 {
		size = max(o.Window, 64<<10)
	}
	c := &conn{
		ep: ep, laddr: laddr, raddr: raddr, session: session, stream: stream,
		dialler: dialler, keys: keys, epoch: time.Now(),
		estab:     make(chan struct{}),
		bufSize:   size,
		sentTimes: make([]sentAt, minSentTimes),
		autoBuf:   c0auto,
		ctl:       ctl,
		target:    o.PacingRate,
		rwake:     make(chan struct{}),
		wwake:     make(chan struct{}),
		kick:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		dscp:      o.DSCP,
		srtt:      100 * time.Millisecond, rttvar: 50 * time.Millisecond,
	}
	if a, ok := laddr.(*net.UDPAddr); ok {
		c.v6 = a.IP.To4() == nil
	}
	c.tun = t
	c.tos = tosFor(o.DSCP)
	c.setMTU(mtu)
	c.advLimit = uint64(size)
	// A listener's stream takes its buffers only when its handshake
	// completes (establish): a SYN, which anyone holding the session's
	// key can send for any stream id, costs no megabytes.
	if dialler {
		c.allocBuffers()
	}
	return c, nil
}

// allocBuffers gives the stream its receive buffer and send ring.
func (c *conn) allocBuffers() {
	if c.rbuf == nil {
		c.rbuf = make([]byte, c.bufSize)
		c.sring = newSendRing(c.bufSize, c.mss)
	}
}

// rwin is the receive buffer's size, which the stream advertises: what
// it will be for a listener's stream not yet joined.
func (c *conn) rwin() uint64 {
	if c.rbuf == nil {
		return uint64(c.bufSize)
	}
	return uint64(len(c.rbuf))
}

// tosFor is the TOS byte for a DSCP (negative: none): the DSCP in the top
// six bits, ECT(0) in the bottom two.
func tosFor(dscp int) int {
	tos := ecnECT0
	if dscp >= 0 {
		tos |= dscp << 2
	}
	return tos
}

const (
	ecnECT0 = 0b10
	ecnCE   = 0b11
)

// The largest datagram: what a 9000-byte path carries. A larger MTU (the
// loopback's 65536) is not used: a datagram that big is IP-fragmented on
// any real path, and no NIC segments it.
const maxMTU = 9000

// setMTU sizes datagrams for a path MTU (0: unknown, assume 1500).
func (c *conn) setMTU(mtu int) {
	if mtu <= 0 {
		mtu = 1500
	}
	mtu = max(min(mtu, maxMTU), minMTU)
	c.maxDgram = mtu - c.ipudp()
	c.mss = c.maxDgram - hdrLen - dataHdr - tagLen
	// The send ring's slots follow the datagrams while they hold nothing
	// (the path's MTU learnt after the handshake); otherwise when it grows.
	if c.sring.buf != nil && c.sring.per != c.mss && c.sWrite == c.sAcked && !c.wbusy {
		c.sring = newSendRing(c.sring.size(), c.mss)
	}
}

// minMTU: IPv4's minimum datagram every host takes (IPv6's is 1280).
const minMTU = 576

func (c *conn) ipudp() int {
	if c.v6 {
		return 48
	}
	return 28
}

// pathMTU is the MTU the stream's datagrams are sized for.
func (c *conn) pathMTU() int { return c.maxDgram + c.ipudp() }

// mtuPlateaus are the MTUs a stream steps down through when a send is too
// big and the kernel cannot say the path's MTU (a listener's stream): the
// common ones of jumbo, Ethernet, PPPoE, tunnels and IPv6's minimum.
var mtuPlateaus = []int{9000, 8000, 4000, 1500, 1492, 1480, 1460, 1420, 1400, 1380, 1280, 1200, 1006, minMTU}

// shrinkMTU sizes datagrams down after a send was too big for the path:
// to what the kernel now says, or to the next plateau below.
func (c *conn) shrinkMTU() {
	cur := c.pathMTU()
	m := c.ep.mtu()
	if m <= 0 || m >= cur {
		m = minMTU
		for _, p := range mtuPlateaus {
			if p < cur {
				m = p
				break
			}
		}
	}
	c.setMTU(m)
}

func (c *conn) now() int64 { return int64(time.Since(c.epoch)) }

// --- sending datagrams ---

func (c *conn) nextPN() uint64 { return c.pn.Add(1) - 1 }

// packet starts a datagram of type t in b.
func (c *conn) packet(b []byte, t ptype, flags uint16) ([]byte, uint64) {
	pn := c.nextPN()
	b = b[:hdrLen]
	putHeader(b, header{typ: t, flags: flags, stream: c.stream, session: c.session, pn: pn})
	return b, pn
}

func (c *conn) sendRaw(b []byte) error {
	b = seal(c.keys.send, b)
	err := c.ep.send(b)
	atomic.AddUint64(&c.stats.datagrams, 1)
	atomic.AddUint64(&c.stats.sendCalls, 1)
	return err
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, maxMTU); return &b }}

// sendCtl sends a datagram with no data (SYN, SYNACK, ACK, PING, RST).
func (c *conn) sendCtl(t ptype, flags uint16, body func([]byte) []byte) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	b, pn := c.packet((*bp)[:0], t, flags)
	if body != nil {
		b = body(b)
	}
	if t == tSYN || t == tSYNACK || t == tPING {
		c.mu.Lock()
		c.noteSent(pn, c.now())
		c.mu.Unlock()
	}
	return c.sendRaw(b)
}

// noteSent records when packet pn left, for the round trip its echo
// measures. The ring covers the packets in flight: at a few thousand
// datagrams a round trip, a ring shorter than that kept no packet's time
// until its echo came, and the stream measured no round trip at all (FAST
// saw no queue; nothing left slow start on delay).
func (c *conn) noteSent(pn uint64, now int64) {
	n := uint64(len(c.sentTimes))
	if pn-min(c.echoed, pn) >= n/2 && n < maxSentTimes {
		c.sentTimes = growSentTimes(c.sentTimes, max(2*int(n), minSentTimes))
		n = uint64(len(c.sentTimes))
	}
	c.sentTimes[pn%n] = sentAt{pn, now}
}

const (
	minSentTimes = 1024
	maxSentTimes = 1 << 20
)

// growSentTimes moves the send times into a ring of size entries.
func growSentTimes(old []sentAt, size int) []sentAt {
	nb := make([]sentAt, size)
	for _, s := range old {
		if s.t != 0 {
			nb[s.pn%uint64(size)] = s
		}
	}
	return nb
}

// buildAck fills a with the receive state. Under mu.
func (c *conn) buildAck(a *ack) (flags uint16) {
	a.cum, a.limit = c.rCum, c.rRead+c.rwin()
	a.echo = c.echo
	if c.echoAt > 0 {
		a.delay = uint32(min((c.now()-c.echoAt)/1000, 1<<31))
	}
	a.ce = c.ceCount
	a.repairs = c.repairs
	a.sack, a.nak = a.sack[:0], a.nak[:0]
	now := c.now()
	wnd := c.reorderWindow(now)
	c.nakDue = 0
	prev := c.rCum
	// The newest ranges are the ones to report: what arrived since the
	// last ack is at the top, and the sender learnt of the older ones from
	// earlier acks. Reporting from the bottom, a path with more holes open
	// than an ack has spans (1% loss at a few thousand datagrams a round
	// trip) kept everything above them unacknowledged, in flight for the
	// sender's window, until the repairs reached it.
	for i := len(c.rRanges) - 1; i >= 0 && len(a.sack) < maxSpans; i-- {
		a.sack = append(a.sack, span{c.rRanges[i].start, c.rRanges[i].end})
	}
	// A hole NAKed is not NAKed again until its repair had a round trip to
	// arrive, so that each ack's spans name holes the sender has not yet
	// heard of: NAKing the lowest holes over and over repaired no more
	// than maxSpans holes a round trip, fewer than 1% loss opens at a few
	// thousand datagrams a round trip, and the holes piled up.
	renak := int64(c.srtt + 2*c.rttvar)
	for i := range c.rRanges {
		r := &c.rRanges[i]
		// The hole before r is judged lost once it is older than the
		// reorder window; until this stream has seen reordering, also
		// once three datagrams' worth arrived past it.
		if len(a.nak) < maxSpans {
			if now-r.since >= wnd || (!c.reoSeen && c.rHigh-r.start >= 3*uint64(c.mss)) {
				if r.naked == 0 || now-r.naked >= renak {
					a.nak = append(a.nak, span{prev, r.start})
					r.naked = now
				} else if due := r.naked + renak; c.nakDue == 0 || due < c.nakDue {
					c.nakDue = due
				}
			} else if due := r.since + wnd; c.nakDue == 0 || due < c.nakDue {
				c.nakDue = due
			}
		}
		prev = r.end
	}
	c.advLimit = a.limit
	c.ackCount, c.ackDue, c.ackNow = 0, 0, false
	c.ackAt = c.now()
	if c.rFin && c.rCum == c.rFinOff {
		flags |= fFINACK
	}
	return flags
}

// sendAck sends the receive state now.
func (c *conn) sendAck() error {
	var a ack
	c.mu.Lock()
	flags := c.buildAck(&a)
	c.mu.Unlock()
	return c.sendCtl(tACK, flags, a.put)
}

// --- receiving datagrams ---

// input takes a datagram the socket read for this stream: b whole, h and
// body parsed from it. It reports whether the datagram was accepted
// (false: dropped, counted) and whether it asks for an ACK at once, which
// the reader sends (sendAck) once it has taken in all it read in one go.
func (c *conn) input(b []byte, h header, body []byte, tos byte) (ok, ackNow bool) {
	if !verify(c.keys.recv, b) {
		atomic.AddUint64(&c.stats.dropped, 1)
		return false, false
	}
	c.mu.Lock()
	if !c.replay.fresh(h.pn) || c.dead {
		c.mu.Unlock()
		atomic.AddUint64(&c.stats.dropped, 1)
		return false, false
	}
	c.replay.mark(h.pn)
	now := c.now()
	c.lastHeard = now
	if tos&0b11 == ecnCE {
		c.ceCount++
	}
	var reply func() error
	switch h.typ {
	case tSYN:
		// the dialler's SYN again, with a new packet number: our SYNACK
		// was lost. Only a listener's stream not yet established answers.
		if !c.dialler && !c.established {
			reply = c.sendSynAck
		}
	case tSYNACK:
		if c.dialler {
			if len(body) == 8 {
				c.peerLimit = max(c.peerLimit, binary.BigEndian.Uint64(body))
				c.noteEcho(h.pn, now)
				if !c.established {
					c.rttSample(c.synPN, 0, true)
				}
				c.establish()
				reply = c.sendAck // completes the listener's handshake
			}
		}
	case tDATA:
		off, payload, err := parseData(body)
		if err != nil {
			break
		}
		c.noteEcho(h.pn, now)
		c.establish()
		ackNow = c.data(off, payload, h.flags&fFIN != 0, h.flags&fRETX != 0, now)
	case tACK:
		a := &c.rxAck // its span slices are reused
		if parseAck(body, a) != nil {
			break
		}
		c.establish()
		c.onAck(a, h.flags&fFINACK != 0)
	case tPING:
		c.noteEcho(h.pn, now)
		ackNow = true
	case tRST:
		if _, err := parseRst(body); err == nil {
			c.fail(syscall.ECONNRESET)
		}
	}
	c.mu.Unlock()
	if reply != nil {
		reply()
	}
	return true, ackNow
}

func (c *conn) noteEcho(pn uint64, now int64) {
	if pn >= c.echo {
		c.echo, c.echoAt = pn, now
	}
}

func (c *conn) establish() {
	if !c.established {
		c.allocBuffers()
		c.established = true
		c.lastProg = c.now()
		close(c.estab)
	}
}

// sendSynAck sends the listener's SYNACK. Not under mu.
func (c *conn) sendSynAck() error {
	c.mu.Lock()
	w := c.rwin()
	c.mu.Unlock()
	return c.sendCtl(tSYNACK, 0, func(b []byte) []byte {
		return binary.BigEndian.AppendUint64(b, w)
	})
}

// data stores a DATA datagram's payload (retx: the sender sent it before).
// It says whether to ack at once. Under mu.
func (c *conn) data(off uint64, p []byte, fin, retx bool, now int64) bool {
	end := off + uint64(len(p))
	if fin {
		if (c.rFin && c.rFinOff != end) || end < c.rHigh {
			return false // a FIN at another place, or before data: not believed
		}
		c.rFin, c.rFinOff = true, end
	}
	if c.closed && end > c.rCum && len(p) > 0 {
		// Data for a stream this end closed: nobody will read it.
		go c.reset()
		return false
	}
	limit := c.rRead + uint64(len(c.rbuf))
	if end > limit {
		// the sender overran the window: keep what fits
		atomic.AddUint64(&c.stats.dropped, 1)
		if off >= limit {
			return true
		}
		end = limit
	}
	prevCum := c.rCum
	immediate := fin || off > c.rCum || len(c.rRanges) > 0
	if end <= c.rCum {
		immediate = true // old data: our ack was lost
	} else {
		s := max(off, c.rCum)
		if fresh := c.missing(s, end); fresh > 0 {
			switch {
			case retx:
				// a retransmission brought bytes missing here: they
				// arrived only thanks to it (a late original that
				// filled the hole first leaves the copy nothing to do)
				c.stats.repaired += fresh
				c.repairs++
			case s < c.rHigh:
				// an original behind data sent after it: reordering
				c.noteReorder(s, now)
			}
		}
		q := p[s-off : end-off]
		if c.post != nil && s == c.rCum && c.rRead == c.rCum && len(c.rRanges) == 0 {
			// the next bytes for a reader waiting with nothing queued:
			// into its buffer, read as they arrive
			k := copy(c.post[c.postN:], q)
			c.postN += k
			c.rRead += uint64(k)
			q = q[k:]
			c.noteRoom()
		}
		c.copyIn(end-uint64(len(q)), q)
		c.insertRange(s, end, now)
		c.rHigh = max(c.rHigh, end)
		c.growWindow()
	}
	if ended := c.rFin && c.rCum == c.rFinOff; c.rCum > prevCum || ended {
		c.stats.bytesRecv += c.rCum - prevCum
		// wake the reader for what it waits for, not for every datagram
		if ready := c.postN + int(c.rCum-c.rRead); ended || ready >= c.rWant || c.post != nil && c.postN == len(c.post) {
			c.wakeReader()
		}
	}
	c.ackCount++
	if immediate || c.ackCount >= max(ackEvery, maxAckBytes/c.mss) {
		return true
	}
	due := now + int64(ackDelay)
	if c.ackCount >= max(ackEvery, ackBytes/c.mss) {
		if now-c.ackAt >= int64(ackGap) {
			return true
		}
		due = c.ackAt + int64(ackGap) // soon, but not yet: the last went ackGap ago
	}
	if c.ackDue == 0 || due < c.ackDue {
		c.ackDue = due
		c.kickSender()
	}
	return false
}

// missing is how many bytes of [s, e) have not arrived (s >= rCum). Under mu.
func (c *conn) missing(s, e uint64) uint64 {
	n := e - s
	i := sort.Search(len(c.rRanges), func(i int) bool { return c.rRanges[i].end > s })
	for ; i < len(c.rRanges) && c.rRanges[i].start < e; i++ {
		n -= min(e, c.rRanges[i].end) - max(s, c.rRanges[i].start)
	}
	return n
}

// noteReorder records an original datagram at s that arrived after data
// beyond it: how long the hole it fills had been open. Under mu.
func (c *conn) noteReorder(s uint64, now int64) {
	i := sort.Search(len(c.rRanges), func(i int) bool { return c.rRanges[i].start > s })
	if i == len(c.rRanges) {
		return
	}
	d := now - c.rRanges[i].since
	if d >= c.reoMax/2 {
		c.reoAt = now
	}
	c.reoMax = max(c.reoMax, d)
	c.reoSeen = true
}

// reorderWindow is how old a hole must be before it is NAKed: a quarter
// round trip (1 ms at least) until reordering is seen; then an eighth of
// a round trip plus the longest reordering seen, if that is more; at most
// a retransmission timeout (the sender's timer repairs anything later).
// A reordering not seen again for 16 round trips (a second at least)
// counts half. Under mu.
func (c *conn) reorderWindow(now int64) int64 {
	w := int64(max(c.srtt/4, time.Millisecond))
	if !c.reoSeen {
		return w
	}
	if now-c.reoAt > max(16*int64(c.srtt), int64(time.Second)) {
		c.reoMax /= 2
		c.reoAt = now
	}
	w = max(w, int64(c.srtt/8)+c.reoMax)
	return min(w, int64(c.rto()))
}

// growRing copies the bytes at offsets [from, to) of a ring buffer (a byte
// at offset o sits at o mod its length) into a new ring of size bytes.
func growRing(old []byte, from, to uint64, size int) []byte {
	nb := make([]byte, size)
	n, m := uint64(len(old)), uint64(size)
	for off := from; off < to; {
		i, j := off%n, off%m
		k := min(to-off, n-i, m-j)
		copy(nb[j:j+k], old[i:i+k])
		off += k
	}
	return nb
}

// growWindow quadruples the receive buffer (up to maxAutoBuffer) when data
// arrives past half of the window while the application keeps up with
// what is in order (less than a quarter of it unread): the window, which
// must hold a round trip's data and what waits behind holes for a repair,
// not the reader, then holds the sender back. Each step costs the sender
// up to a round trip before it hears of the new limit, so the window grows
// early and in large steps: doubling from within a quarter of its end took
// three round trips to reach 450 Mbit/s over 100 ms, a few percent of a
// ten-second transfer. Only with no Window set. Under mu.
func (c *conn) growWindow() {
	n := uint64(len(c.rbuf))
	if !c.autoBuf || n >= maxAutoBuffer || c.rHigh < c.rRead+n/2 || c.rCum-c.rRead >= n/4 {
		return
	}
	c.rbuf = growRing(c.rbuf, c.rRead, c.rRead+n, int(min(4*n, maxAutoBuffer)))
}

func (c *conn) copyIn(off uint64, p []byte) {
	n := uint64(len(c.rbuf))
	i := int(off % n)
	k := copy(c.rbuf[i:], p)
	copy(c.rbuf, p[k:])
}

// insertRange records [s, e) as arrived and moves the cumulative point.
func (c *conn) insertRange(s, e uint64, now int64) {
	if s <= c.rCum {
		c.rCum = max(c.rCum, e)
	} else {
		i := sort.Search(len(c.rRanges), func(i int) bool { return c.rRanges[i].end >= s })
		if i == len(c.rRanges) || c.rRanges[i].start > e {
			// a new range; the hole before it opened now, or, within a
			// hole that was open already, when that one did
			since, naked := now, int64(0)
			if i < len(c.rRanges) {
				since, naked = c.rRanges[i].since, c.rRanges[i].naked
			}
			c.rRanges = append(c.rRanges, rng{})
			copy(c.rRanges[i+1:], c.rRanges[i:])
			c.rRanges[i] = rng{s, e, since, naked}
		} else {
			r := &c.rRanges[i]
			r.start, r.end = min(r.start, s), max(r.end, e)
			// swallow the ranges it now reaches
			j := i + 1
			for j < len(c.rRanges) && c.rRanges[j].start <= r.end {
				r.end = max(r.end, c.rRanges[j].end)
				j++
			}
			c.rRanges = append(c.rRanges[:i+1], c.rRanges[j:]...)
		}
	}
	// ranges the cumulative point reached
	k := 0
	for k < len(c.rRanges) && c.rRanges[k].start <= c.rCum {
		c.rCum = max(c.rCum, c.rRanges[k].end)
		k++
	}
	if k > 0 {
		c.rRanges = append(c.rRanges[:0], c.rRanges[k:]...)
	}
	if c.rCum > c.rHigh {
		c.rHigh = c.rCum
	}
}

// rttSample measures a round trip from the packet number an ack echoes.
func (c *conn) rttSample(pn uint64, delay time.Duration, first bool) {
	c.echoed = max(c.echoed, pn)
	if len(c.sentTimes) == 0 {
		return
	}
	s := c.sentTimes[pn%uint64(len(c.sentTimes))]
	if s.pn != pn || s.t == 0 {
		return
	}
	r := time.Duration(c.now()-s.t) - delay
	if r <= 0 {
		r = time.Duration(c.now() - s.t)
	}
	if r <= 0 {
		r = time.Microsecond
	}
	if first || c.minRTT == 0 {
		c.srtt, c.rttvar = r, r/2
		c.minRTT = r
	} else {
		d := c.srtt - r
		if d < 0 {
			d = -d
		}
		c.rttvar = (3*c.rttvar + d) / 4
		c.srtt = (7*c.srtt + r) / 8
		c.minRTT = min(c.minRTT, r)
	}
	c.round.sum += r
	c.round.n++
}

func (c *conn) rto() time.Duration {
	r := max(c.srtt+4*c.rttvar, minRTO, c.rtoFloor)
	for range c.rtoBackoff {
		r *= 2
		if r >= maxRTO {
			return maxRTO
		}
	}
	return min(r, maxRTO)
}

// onAck applies an ack. Under mu.
func (c *conn) onAck(a *ack, finAck bool) {
	c.rttSample(a.echo, time.Duration(a.delay)*time.Microsecond, false)
	c.peerLimit = max(c.peerLimit, a.limit)
	now := c.now()
	acked := 0
	if a.cum > c.sAcked && a.cum <= c.sNext {
		acked += int(a.cum - c.sAcked)
		for c.segHead < len(c.segs) {
			s := &c.segs[c.segHead]
			if s.off+uint64(s.n) > a.cum || (s.fin && !finAck) {
				break
			}
			if s.state == segInFlight {
				c.inflight -= int(s.n)
			}
			if s.state != segSacked {
				c.round.pkts++
			}
			c.segHead++
		}
		c.sAcked = a.cum
		c.stats.bytesAcked = c.sAcked
		c.lastProg, c.rtoBackoff = now, 0
		c.compact()
		c.wakeWriter()
	}
	if finAck && c.finQueued && c.sAcked == c.finOff && !c.finAcked {
		c.finAcked = true
		c.lastProg = now
		for c.segHead < len(c.segs) { // the FIN segment
			c.segHead++
		}
		c.compact()
		c.wakeWriter()
	}
	for _, sp := range a.sack {
		c.eachSeg(sp, func(s *seg) {
			if s.off+uint64(s.n) <= sp.end && s.state != segSacked && s.state != segNew {
				if s.state == segInFlight {
					c.inflight -= int(s.n)
				}
				s.state = segSacked
				acked += int(s.n)
				c.round.pkts++
				c.lastProg = now
			}
		})
	}
	// A segment sent again is not sent a third time on NAKs that left the
	// receiver before the second copy could arrive.
	guard := int64(c.srtt) + 2*int64(c.rttvar)
	for _, sp := range a.nak {
		c.eachSeg(sp, func(s *seg) {
			if s.state == segInFlight && (s.xmits <= 1 || now-s.sent >= guard) {
				s.state = segLost
				c.inflight -= int(s.n)
				c.lostQ = append(c.lostQ, s.off)
			}
		})
	}
	if a.ce > c.lastCE {
		c.round.ce += int(a.ce - c.lastCE)
		c.lastCE = a.ce
	}
	// Loss, for the rate control, is what the receiver says retransmissions
	// repaired: a NAK or a timeout only suspects loss, and a segment whose
	// original arrives after all (reordering) was never lost.
	if d := int32(a.repairs - c.lastRepairs); d > 0 {
		c.round.lost += int(d)
		c.lastRepairs = a.repairs
	}
	c.checkUndo()
	if acked > 0 {
		c.ctl.onAck(acked, c.mss, c.srtt, c.minRTT)
		c.delivered(now)
	}
	if c.sAcked >= c.round.end {
		c.endRound()
	}
	c.kickSender()
}

// checkUndo judges a timeout once everything it sent again is
// acknowledged: if no retransmission repaired anything since, the
// originals arrived after all (a delay, not loss), and the rate control
// gets back the state the timeout cut, unless it has grown past it since
// (Eifel's undo). Under mu.
func (c *conn) checkUndo() {
	if c.undoCtl == nil || c.sAcked < c.undoEnd-1 {
		return
	}
	if c.lastRepairs == c.undoRepairs {
		if c.undoCtl.window(c.mss) > c.ctl.window(c.mss) {
			c.ctl = c.undoCtl
		}
		c.stats.undone++
	}
	c.undoCtl, c.undoEnd = nil, 0
}

func (c *conn) delivered(now int64) {
	if c.stats.deliveredAt == 0 {
		c.stats.deliveredAt, c.stats.delivered = now, c.sAcked
		return
	}
	if dt := now - c.stats.deliveredAt; dt >= int64(max(c.srtt, 10*time.Millisecond)) {
		c.stats.deliveryRate = (c.sAcked - c.stats.delivered) * uint64(time.Second) / uint64(dt)
		c.stats.deliveredAt, c.stats.delivered = now, c.sAcked
	}
}

func (c *conn) endRound() {
	r := round{base: c.minRTT, avg: c.srtt, pkts: c.round.pkts, lost: c.round.lost, ce: c.round.ce, mss: c.mss}
	if c.round.n > 0 {
		r.avg = c.round.sum / time.Duration(c.round.n)
		if c.lowRound == 0 || r.avg < c.lowRound {
			c.lowRound = r.avg
		}
		r.low = c.lowRound
	}
	if r.base > 0 && r.avg > 0 {
		c.ctl.onRound(r)
		if r.lost > 0 {
			c.stats.lossTold += uint64(r.lost)
			c.stats.lossRounds++
		}
	}
	c.round = roundState{end: max(c.sNext, c.sAcked+1)}
}

// eachSeg calls f for the segments that start within sp.
func (c *conn) eachSeg(sp span, f func(*seg)) {
	live := c.segs[c.segHead:]
	i := sort.Search(len(live), func(i int) bool { return live[i].off >= sp.start })
	for ; i < len(live) && live[i].off < sp.end; i++ {
		f(&live[i])
	}
}

func (c *conn) findSeg(off uint64) *seg {
	live := c.segs[c.segHead:]
	i := sort.Search(len(live), func(i int) bool { return live[i].off >= off })
	if i < len(live) && live[i].off == off {
		return &live[i]
	}
	return nil
}

func (c *conn) compact() {
	if c.segHead > 1024 && c.segHead*2 > len(c.segs) {
		n := copy(c.segs, c.segs[c.segHead:])
		c.segs = c.segs[:n]
		c.segHead = 0
	}
}

// --- the sender goroutine ---

func (c *conn) kickSender() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run sends: new data, data again, delayed acks, probes; it ends the
// stream when it is over.
func (c *conn) run() {
	// datagrams are built back to back in the arena, so that a run of
	// equal-sized ones goes out in one segmented send
	arena := make([]byte, maxBatch*maxMTU)
	ackBuf := make([]byte, 0, maxMTU)
	batch := make([][]byte, 0, maxBatch)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var a ack
	for {
		c.mu.Lock()
		if c.dead {
			c.mu.Unlock()
			return
		}
		now := c.now()
		c.timers(now)
		if c.dead {
			c.mu.Unlock()
			return
		}
		var ackFlags uint16
		sendAck := c.ackNow || (c.ackDue != 0 && now >= c.ackDue) || (c.nakDue != 0 && now >= c.nakDue)
		if sendAck {
			ackFlags = c.buildAck(&a)
		}
		var wait time.Duration
		batch, wait = c.fill(now, arena, batch[:0])
		c.mu.Unlock()
		if sendAck {
			b, _ := c.packet(ackBuf[:0], tACK, ackFlags)
			c.sendRaw(a.put(b))
		}
		if len(batch) > 0 {
			c.sendBatch(batch)
			c.mu.Lock()
			if c.pinned {
				c.pinned = false
				c.wakeWriter()
			}
			c.mu.Unlock()
			continue
		}
		if wait <= 0 {
			wait = time.Hour
		}
		timer.Reset(wait)
		select {
		case <-c.kick:
		case <-timer.C:
		case <-c.done:
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// GSO's limits: the segments of one send, and their bytes (a UDP
// datagram's length field).
const (
	maxSegments = 64
	maxGSOBytes = 65000
)

// sendBatch sends datagrams built back to back: each run of equal-sized
// ones (the last of a run may be shorter) in one segmented send where GSO
// works, one by one otherwise.
func (c *conn) sendBatch(batch [][]byte) {
	if !c.ep.gso() {
		c.sendEach(batch)
		return
	}
	for i := 0; i < len(batch); {
		size := len(batch[i])
		j, total := i+1, size
		for j < len(batch) && j-i < maxSegments && total+len(batch[j]) <= maxGSOBytes && len(batch[j]) <= size && adjacent(batch[j-1], batch[j]) {
			total += len(batch[j])
			j++
			if len(batch[j-1]) < size {
				break
			}
		}
		if j-i == 1 {
			c.sendEach(batch[i:j])
			i = j
			continue
		}
		err := c.ep.sendSegments(batch[i][:total], size)
		switch {
		case err == nil:
			atomic.AddUint64(&c.stats.datagrams, uint64(j-i))
			atomic.AddUint64(&c.stats.sendCalls, 1)
		case !gsoRefused(err):
			c.sendFailed(batch[i:j], err)
		default:
			// The kernel refused the segmented send: because GSO does not
			// work here, or because the segments no longer fit the path
			// (EINVAL too). Sent each on its own, the datagrams tell which.
			if !c.sendEach(batch[i:j]) {
				c.ep.noGSO()
			}
		}
		i = j
	}
}

// sendEach sends datagrams each on its own, as many as it can in one
// system call (sendmmsg), and says whether one was too big for the path.
func (c *conn) sendEach(bs [][]byte) (tooBig bool) {
	for len(bs) > 0 {
		n, err := c.ep.sendMany(bs)
		n = max(n, 0) // sendmmsg failing at the first says -1
		atomic.AddUint64(&c.stats.sendCalls, 1)
		atomic.AddUint64(&c.stats.datagrams, uint64(n))
		if err != nil && n < len(bs) {
			atomic.AddUint64(&c.stats.datagrams, 1)
			tooBig = tooBig || isMsgSize(err)
			c.sendFailed(bs[n:n+1], err)
			n++
		} else if n == 0 {
			return tooBig
		}
		bs = bs[n:]
	}
	return tooBig
}

// sendFailed handles datagrams the socket refused (one send: a datagram
// or a segmented run): too big for the path (size down and send their
// segments again, cut to fit), the peer's port closed (the stream is
// over); anything else is left to the retransmission timer.
func (c *conn) sendFailed(run [][]byte, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case isMsgSize(err):
		// Datagrams of the run's size do not fit the path: size down,
		// unless an earlier send already did.
		if len(run[0]) <= c.maxDgram {
			c.shrinkMTU()
		}
		for _, b := range run {
			h, body, perr := parseHeader(b)
			if perr != nil || h.typ != tDATA {
				continue
			}
			if off, _, derr := parseData(body); derr == nil {
				if s := c.findSeg(off); s != nil && s.state == segInFlight {
					c.inflight -= int(s.n)
					c.splitSeg(s)
				}
			}
		}
		c.kickSender()
	case isRefused(err):
		c.fail(syscall.ECONNREFUSED)
	}
}

// splitSeg cuts a segment too big for the datagram size into pieces that
// fit, all queued to be sent again. Under mu.
func (c *conn) splitSeg(s *seg) {
	if int(s.n) <= c.mss {
		s.state = segLost
		c.lostQ = append(c.lostQ, s.off)
		return
	}
	i := c.segHead + sort.Search(len(c.segs)-c.segHead, func(i int) bool { return c.segs[c.segHead+i].off >= s.off })
	old := *s
	var pieces []seg
	for off, end := old.off, old.off+uint64(old.n); off < end; {
		n := min(uint64(c.mss), end-off)
		pieces = append(pieces, seg{off: off, n: uint32(n), state: segLost, sent: old.sent, xmits: old.xmits})
		c.lostQ = append(c.lostQ, off)
		off += n
	}
	pieces[len(pieces)-1].fin = old.fin
	tail := append([]seg(nil), c.segs[i+1:]...)
	c.segs = append(append(c.segs[:i], pieces...), tail...)
}

// timers: retransmission timeouts, giving up, lingering after Close. Under mu.
func (c *conn) timers(now int64) {
	if !c.established {
		if now > int64(handshakeTimeout) {
			c.fail(syscall.ETIMEDOUT)
			return
		}
		if !c.dialler && now-c.synAckAt >= int64(c.rto()) {
			c.synAckAt = now
			go c.sendSynAck()
		}
		return
	}
	rto := int64(c.rto())
	fired := false
	// As TCP's timer, which each new acknowledgement restarts, the timeout
	// fires only when nothing new was acknowledged for a timeout: while
	// acknowledgements come, the receiver's NAKs find the holes, and a
	// round trip that grows (a queue filling) is not taken for loss.
	if now >= c.nextScan && now-c.lastProg >= rto {
		c.nextScan = now + max(rto/4, int64(time.Millisecond))
		for i := c.segHead; i < len(c.segs); i++ {
			s := &c.segs[i]
			if s.state == segInFlight && now-s.sent >= rto {
				s.state = segLost
				c.inflight -= int(s.n)
				c.lostQ = append(c.lostQ, s.off)
				fired = true
				c.undoEnd = max(c.undoEnd, s.off+uint64(s.n)+1)
			}
		}
	}
	if fired {
		if c.undoCtl == nil {
			// what to go back to if the timeout proves spurious
			c.undoCtl, c.undoRepairs = cloneCtl(c.ctl), c.lastRepairs
			c.stats.timeouts++
		}
		c.ctl.onTimeout(c.mss)
		c.rtoBackoff = min(c.rtoBackoff+1, 10)
	}
	// No progress for long with data outstanding ends the stream, unless
	// the receiver's window is what holds it (a slow reader) and the peer
	// still answers the window probes.
	outstanding := c.sAcked < c.sWrite || (c.finQueued && !c.finAcked)
	shut := c.inflight == 0 && len(c.lostQ) == 0 && c.sNext >= c.peerLimit && c.sNext < c.sWrite
	if outstanding && now-c.lastProg > int64(giveUp) && (!shut || now-c.lastHeard > int64(giveUp)) {
		c.fail(syscall.ETIMEDOUT)
		return
	}
	// The kernel forgets what ICMP taught it of a path after a while
	// (net.ipv4.route.mtu_expires, 10 minutes): a stream with a socket of
	// its own then sizes its datagrams up again.
	if now-c.mtuChecked > int64(time.Minute) {
		c.mtuChecked = now
		if m := c.ep.mtu(); m > c.pathMTU() && c.pathMTU() < maxMTU {
			c.setMTU(m)
		}
	}
	// Keepalive: an idle stream asks for an ACK now and then, and a peer
	// silent for long is gone (its host or process died), as TCP's
	// keepalive would find.
	if silent := now - max(c.lastHeard, c.lastProg); silent > int64(keepalive) && !c.closed {
		if silent > int64(keepalive+giveUp) {
			c.fail(syscall.ETIMEDOUT)
			return
		}
		if now-c.lastPing > int64(keepalive)/4 {
			c.lastPing = now
			go c.sendCtl(tPING, 0, nil)
		}
	}
	if c.closed {
		ourDone := !c.finQueued || c.finAcked
		if ourDone && (c.rFin && c.rCum == c.rFinOff || c.err != nil) {
			c.teardown()
			return
		}
		if ourDone && now-c.closeAt > int64(linger) {
			c.teardown()
		}
	}
}

// fill builds the datagrams the stream may send now, back to back in the
// arena, and returns them, or how long to wait before anything may go.
// Under mu.
func (c *conn) fill(now int64, arena []byte, batch [][]byte) ([][]byte, time.Duration) {
	pos := 0
	if !c.established || c.dead || c.err != nil {
		return batch, c.waitTimers(now)
	}
	rate := c.pacingRate()
	c.pace.refill(now, rate, c.mss)
	win := c.ctl.window(c.mss)
	c.accountBusy(now)
	for len(batch) < maxBatch && pos+maxMTU <= len(arena) {
		if !c.pace.may(rate, c.mss) {
			c.limit = limNetwork
			if len(batch) > 0 {
				return batch, 0
			}
			return batch, c.pace.wait(rate, c.mss)
		}
		if c.inflight >= win {
			c.limit = limNetwork
			break
		}
		var s *seg
		for len(c.lostQ) > 0 && s == nil {
			off := c.lostQ[0]
			c.lostQ = c.lostQ[1:]
			if x := c.findSeg(off); x != nil && x.state == segLost {
				if int(x.n) > c.mss {
					c.splitSeg(x) // cut before the datagrams shrank: cut again
					continue
				}
				s = x
			}
		}
		if s == nil {
			s = c.cut()
			if s == nil {
				break
			}
		}
		b, inPlace := c.dataPacket(arena[pos:pos], s, now)
		if !inPlace {
			pos += len(b)
		} else if !c.pinned || s.off < c.sendPin {
			c.sendPin, c.pinned = s.off, true
		}
		batch = append(batch, b)
		c.pace.spend(rate, int(s.n))
	}
	if len(batch) > 0 {
		return batch, 0
	}
	return batch, c.waitTimers(now)
}

// pacingRate is the rate control's rate under the stream's cap; fixed's
// target is the rate for new data, and its repairs go on top. Under mu.
func (c *conn) pacingRate() uint64 {
	r := c.ctl.rate(c.srtt, c.mss)
	if _, ok := c.ctl.(*fixedCtl); ok {
		return r
	}
	return capRate(r, c.target)
}

// cut makes the next new segment, if the flow window and the data allow.
func (c *conn) cut() *seg {
	if c.sNext < c.sWrite {
		if c.sNext >= c.peerLimit {
			c.limit = limReceiver
			return nil
		}
		// within one slot of the send ring, so that segments stay on its
		// slots (a full one goes in place) whatever the writer's pace
		_, left := c.sring.at(c.sNext)
		n := min(uint64(c.mss), c.sWrite-c.sNext, c.peerLimit-c.sNext, uint64(left))
		s := seg{off: c.sNext, n: uint32(n)}
		c.sNext += n
		s.fin = c.finQueued && c.sNext == c.finOff
		c.segs = append(c.segs, s)
		return &c.segs[len(c.segs)-1]
	}
	if c.finQueued && c.sNext == c.finOff && !c.finSentSeg() {
		c.segs = append(c.segs, seg{off: c.finOff, fin: true})
		return &c.segs[len(c.segs)-1]
	}
	c.limit = limNone
	if c.wwait && c.growSend() {
		c.wakeWriter()
	}
	return nil
}

// growSend doubles the send buffer when it is full, everything in it has
// gone and the rate control would send more: the buffer, holding what
// waits for an acknowledgement (a round trip, and a repair's more behind
// each hole), is then the limit. Only with no Window set, up to
// maxAutoBuffer. Under mu, with no writer inside the buffer (the writer
// itself, or one waiting for room).
func (c *conn) growSend() bool {
	if !c.autoBuf || c.sNext != c.sWrite || c.sring.size() >= maxAutoBuffer ||
		c.sWrite-c.sAcked < uint64(c.sring.size()) || c.inflight >= c.ctl.window(c.mss) {
		return false
	}
	c.sring = c.sring.grow(c.sAcked, c.sWrite, 2*c.sring.size(), c.mss)
	return true
}

// finSentSeg says whether a segment carrying the FIN exists.
func (c *conn) finSentSeg() bool {
	if c.finAcked {
		return true
	}
	if n := len(c.segs); n > c.segHead && c.segs[n-1].fin {
		return true
	}
	return false
}

// dataPacket makes s's datagram: in its send-ring slot when s fills one
// (inPlace), else in b, the arena's room for a datagram at maxMTU.
func (c *conn) dataPacket(b []byte, s *seg, now int64) (dgram []byte, inPlace bool) {
	var flags uint16
	if s.fin {
		flags = fFIN
	}
	if s.state != segNew {
		flags |= fRETX
	}
	inPlace = int(s.n) <= c.mss && c.sring.whole(s.off, int(s.n))
	if inPlace {
		b = c.sring.slot(s.off)[:0]
	}
	b, pn := c.packet(b, tDATA, flags)
	b = binary.BigEndian.AppendUint64(b, s.off)
	b = b[:len(b)+int(s.n)]
	if !inPlace {
		c.sring.copyOut(b[len(b)-int(s.n):], s.off)
	}
	c.noteSent(pn, now)
	if s.state != segNew {
		c.stats.bytesRetrans += uint64(s.n)
		c.stats.retrans++
	}
	c.stats.bytesSent += uint64(s.n)
	s.state, s.sent = segInFlight, now
	if s.xmits < 255 {
		s.xmits++
	}
	c.inflight += int(s.n)
	if c.round.end == 0 {
		c.round.end = s.off + uint64(s.n) + 1
	}
	return seal(c.keys.send, b), inPlace
}

// pacer spaces a stream's datagrams at a rate, in user space: a credit of
// bytes grows with time at the rate, up to a burst (8 datagrams or a
// millisecond's worth, whichever is more); a datagram goes while the credit
// lasts. The rate counts payload: what the stream delivers, as a booked
// rate promises (the headers and the MAC ride on top, 5 to 6% at MTU 1500).
// A sender that slept for the pacer and woke late keeps what it earned
// meanwhile, up to lateCap of the rate: a timer that fires a millisecond
// late on a busy host would otherwise cost the stream its rate, where an
// idle stream must not save up more than the burst.
type pacer struct {
	credit float64
	last   int64 // ns, when the credit was last brought up to date
	slept  bool  // the sender waited for credit since the last refill
}

// lateCap is how much of a late wake-up's credit a paced sender keeps.
const lateCap = 5 * time.Millisecond

// refill brings the credit up to now at rate bytes/s (0: no pacing).
func (p *pacer) refill(now int64, rate uint64, dgram int) {
	if rate > 0 {
		burst := max(float64(8*dgram), float64(rate)/1000)
		if p.slept {
			burst = max(burst, float64(rate)*lateCap.Seconds())
		}
		p.credit = min(p.credit+float64(rate)*float64(now-p.last)/1e9, burst)
	}
	p.last, p.slept = now, false
}

// may says whether a datagram of up to dgram bytes may go now.
func (p *pacer) may(rate uint64, dgram int) bool {
	return rate == 0 || p.credit >= float64(dgram)/2
}

// spend takes a datagram's n bytes of payload from the credit.
func (p *pacer) spend(rate uint64, n int) {
	if rate > 0 {
		p.credit -= float64(n)
	}
}

// wait is how long until a run worth a system call has built up: a
// segmented send's worth at high rates, 200 µs of the rate otherwise, a
// datagram at least (a timer cannot wake a goroutine for every datagram at
// Gbit/s). The sender sleeps that long: its next refill may keep a late
// wake-up's credit.
func (p *pacer) wait(rate uint64, dgram int) time.Duration {
	if rate == 0 {
		return 0
	}
	p.slept = true
	quantum := min(max(float64(rate)*200e-6, float64(dgram)), maxGSOBytes)
	return time.Duration(max(quantum-p.credit, 0) / float64(rate) * 1e9)
}

// waitTimers is how long until a timer is due. Under mu.
func (c *conn) waitTimers(now int64) time.Duration {
	w := time.Duration(0)
	next := func(d time.Duration) {
		if d < time.Millisecond/4 {
			d = time.Millisecond / 4
		}
		if w == 0 || d < w {
			w = d
		}
	}
	if c.ackDue != 0 {
		next(time.Duration(c.ackDue - now))
	}
	if c.nakDue != 0 {
		next(time.Duration(c.nakDue - now))
	}
	if c.inflight > 0 || len(c.lostQ) > 0 {
		next(c.rto() / 4)
	}
	if !c.established && !c.dialler {
		next(c.rto())
	}
	if c.nextScan > now && (c.inflight > 0) {
		next(time.Duration(c.nextScan - now))
	}
	// a window probe: data waits, the peer's window is shut, nothing in
	// flight to bring an ack
	if c.established && c.sNext < c.sWrite && c.sNext >= c.peerLimit && c.inflight == 0 {
		if now-c.lastProbe >= int64(c.rto()) {
			c.lastProbe = now
			go c.sendCtl(tPING, 0, nil)
		}
		next(c.rto())
	}
	if c.closed || c.sAcked < c.sWrite || (c.finQueued && !c.finAcked) {
		next(time.Second)
	}
	if c.established && !c.closed {
		next(keepalive / 4)
	}
	return w
}

func (c *conn) accountBusy(now int64) {
	if c.busySince != 0 {
		d := time.Duration(now - c.busySince)
		c.stats.busy += d
		switch c.limit {
		case limReceiver:
			c.stats.rwndLimited += d
		case limSender:
			c.stats.sndLimited += d
		}
	}
	if c.sAcked < c.sWrite {
		c.busySince = now
	} else {
		c.busySince = 0
	}
}

// --- the application's side ---

func (c *conn) wakeReader() {
	if c.rwait {
		close(c.rwake)
		c.rwake = make(chan struct{})
		c.rwait = false
	}
}

func (c *conn) wakeWriter() {
	if c.wwait {
		close(c.wwake)
		c.wwake = make(chan struct{})
		c.wwait = false
	}
}

// block waits, with mu held on entry and exit, for ch or the deadline.
func (c *conn) block(ch chan struct{}, dl time.Time) {
	c.mu.Unlock()
	defer c.mu.Lock()
	if dl.IsZero() {
		<-ch
		return
	}
	t := time.NewTimer(time.Until(dl))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

func opErr(op string, c *conn, err error) error {
	return &net.OpError{Op: op, Net: "udp", Source: c.laddr, Addr: c.raddr, Err: err}
}

func (c *conn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.closed {
			return 0, opErr("read", c, net.ErrClosed)
		}
		avail := int(c.rCum - c.rRead)
		ended := c.rFin && c.rCum == c.rFinOff
		if avail > 0 && (avail >= min(c.lowat, len(b)) || ended || c.err != nil) {
			n := min(avail, len(b))
			i := int(c.rRead % uint64(len(c.rbuf)))
			k := copy(b[:n], c.rbuf[i:])
			copy(b[k:n], c.rbuf)
			c.rRead += uint64(n)
			c.noteRoom()
			return n, nil
		}
		if ended && avail == 0 {
			return 0, io.EOF
		}
		if c.err != nil {
			return 0, opErr("read", c, c.err)
		}
		if len(b) == 0 {
			return 0, nil
		}
		if !c.rdl.IsZero() && !time.Now().Before(c.rdl) {
			return 0, opErr("read", c, os.ErrDeadlineExceeded)
		}
		c.rwait = true
		c.rWant = min(max(c.lowat, 1), len(b))
		if avail == 0 {
			c.post, c.postN = b, 0
		}
		c.block(c.rwake, c.rdl)
		n := c.postN
		c.post, c.postN = nil, 0
		if n > 0 {
			return n, nil // read while waiting: the bytes are the reader's now
		}
	}
}

// noteRoom asks for an ack when reading made room worth telling the sender
// of. Under mu.
func (c *conn) noteRoom() {
	if lim := c.rRead + uint64(len(c.rbuf)); lim-c.advLimit >= uint64(len(c.rbuf))/4 || c.advLimit-c.rCum < uint64(4*c.mss) {
		c.ackNow = true
		c.kickSender()
	}
}

func (c *conn) Write(b []byte) (int, error) {
	n, err := c.writeFrom("write", int64(len(b)), func(bufs [][]byte) (int, error) {
		k := 0
		for _, p := range bufs {
			w := copy(p, b)
			b, k = b[w:], k+w
		}
		return k, nil
	})
	return int(n), err
}

// SendFileCopies: SendFile reads the file into the send buffer, a copy in
// user space (transport.FileCopier).
func (c *conn) SendFileCopies() bool { return true }

// SendFile writes n bytes of f from off: read straight into the send
// buffer, one copy fewer than a read into a buffer and a Write.
func (c *conn) SendFile(f *os.File, off, n int64) (int64, error) {
	return c.writeFrom("sendfile", n, func(bufs [][]byte) (int, error) {
		want := 0
		for _, p := range bufs {
			want += len(p)
		}
		k, err := readAtv(f, bufs, off)
		off += int64(k)
		if err == io.EOF || err == nil && k < want {
			if k == want {
				err = nil
			} else {
				err = fmt.Errorf("file %s ends at %d: %w", f.Name(), off, io.ErrUnexpectedEOF)
			}
		}
		return k, err
	})
}

// ReadFrom writes what r reads until its end, read straight into the send
// buffer (io.Copy to the stream takes this way).
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	n, err := c.writeFrom("readfrom", -1, func(bufs [][]byte) (int, error) { return r.Read(bufs[0]) })
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// writeFrom fills the send buffer with n bytes (n < 0: until read's
// io.EOF) from read, which is called, without the stream's lock, on the
// free room after the bytes written so far. Writers take turns (wmu).
func (c *conn) writeFrom(op string, n int64, read func([][]byte) (int, error)) (int64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	var done int64
	zeros := 0
	for {
		if c.closed {
			return done, opErr(op, c, net.ErrClosed)
		}
		if c.err != nil {
			return done, opErr(op, c, c.err)
		}
		if c.finQueued {
			return done, opErr(op, c, syscall.EPIPE)
		}
		if done == n {
			return done, nil
		}
		if !c.wdl.IsZero() && !time.Now().Before(c.wdl) {
			return done, opErr(op, c, os.ErrDeadlineExceeded)
		}
		// Acked slots are free, but for those a send under way reads.
		free := c.sAcked
		if c.pinned && c.sendPin < free {
			free = c.sendPin
		}
		room := c.sring.size() - int(c.sWrite-free)
		if room == 0 && c.growSend() {
			continue
		}
		if room == 0 {
			if c.sNext == c.sWrite {
				c.limit = limSender
			}
			c.wwait = true
			c.block(c.wwake, c.wdl)
			continue
		}
		// The room past sWrite is nobody else's: the sender reads below
		// sWrite, and other writers wait for wmu.
		k := room
		if n >= 0 {
			k = int(min(int64(k), n-done))
		}
		regions := c.wregions[:0]
		for off, end := c.sWrite, c.sWrite+uint64(k); off < end && len(regions) < maxRegions; {
			r := c.sring.region(off, int(end-off))
			regions = append(regions, r)
			off += uint64(len(r))
		}
		c.wregions = regions
		c.wbusy = true
		c.mu.Unlock()
		m, err := read(regions)
		c.mu.Lock()
		c.wbusy = false
		if m > 0 && !c.closed {
			c.sWrite += uint64(m)
			done += int64(m)
			if c.busySince == 0 {
				c.busySince = c.now()
			}
			c.kickSender()
		}
		if err != nil {
			return done, err
		}
		if m == 0 {
			if zeros++; zeros > 100 {
				return done, io.ErrNoProgress // a reader that never reads
			}
		} else {
			zeros = 0
		}
	}
}

// CloseWrite queues the end of the stream after what was written.
func (c *conn) CloseWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return opErr("close", c, net.ErrClosed)
	}
	if c.err != nil {
		return opErr("close", c, c.err)
	}
	if !c.finQueued {
		c.finQueued, c.finOff = true, c.sWrite
		c.kickSender()
	}
	return nil
}

// Close ends the stream on this end at once: reads and writes fail. What
// was written still goes (as TCP's does after close), then the FIN; a
// stream closed with bytes unread, or receiving more after its Close, is
// reset instead.
func (c *conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return opErr("close", c, net.ErrClosed)
	}
	c.closed, c.closeAt = true, c.now()
	c.wakeReader()
	c.wakeWriter()
	c.rwait, c.wwait = false, false
	abort := c.rCum > c.rRead || c.err != nil || !c.established
	if !c.finQueued {
		c.finQueued, c.finOff = true, c.sWrite
	}
	c.mu.Unlock()
	if abort {
		c.reset()
		return nil
	}
	c.kickSender()
	return nil
}

// reset sends RST and ends the stream.
func (c *conn) reset() {
	c.mu.Lock()
	dead, estab := c.dead, c.established
	c.mu.Unlock()
	if dead {
		return
	}
	if estab {
		c.sendCtl(tRST, 0, func(b []byte) []byte { return binary.BigEndian.AppendUint32(b, rstClosed) })
	}
	c.mu.Lock()
	c.fail(syscall.ECONNRESET)
	c.teardown()
	c.mu.Unlock()
}

// fail ends the stream with err (the peer reset it, it timed out, the
// peer's port is closed): what arrived can still be read, then reads and
// writes return err. Under mu.
func (c *conn) fail(err error) {
	if c.err == nil {
		c.err = err
	}
	c.teardown()
}

// teardown ends the stream's life: the sender goroutine stops, the socket
// is released. Under mu.
func (c *conn) teardown() {
	if c.dead {
		return
	}
	c.dead = true
	if c.err == nil {
		c.err = net.ErrClosed
	}
	close(c.done)
	c.wakeReader()
	c.wakeWriter()
	if c.onDead != nil {
		go c.onDead()
	}
	go c.ep.release()
}

func (c *conn) LocalAddr() net.Addr  { return c.laddr }
func (c *conn) RemoteAddr() net.Addr { return c.raddr }

func (c *conn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rdl = t
	c.wakeReader()
	return nil
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wdl = t
	c.wakeWriter()
	return nil
}

// SetReadLowat makes a read wait for n bytes (or the end).
func (c *conn) SetReadLowat(n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lowat = max(n, 0)
	return nil
}

func (c *conn) Stats() (transport.Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return transport.Stats{}, opErr("stats", c, net.ErrClosed)
	}
	rate := c.pacingRate()
	return transport.Stats{
		CC:              c.ctl.name(),
		RTT:             c.srtt,
		RTTVar:          c.rttvar,
		MinRTT:          c.minRTT,
		Cwnd:            uint32(min(c.ctl.window(c.mss)/max(c.mss, 1), 1<<31)),
		MSS:             uint32(c.mss),
		Retransmits:     c.stats.retrans,
		BytesSent:       c.stats.bytesSent,
		BytesRetrans:    c.stats.bytesRetrans,
		BytesAcked:      c.stats.bytesAcked,
		BytesReceived:   c.stats.bytesRecv,
		PacingRate:      rate,
		MaxPacingRate:   c.target,
		DeliveryRate:    c.stats.deliveryRate,
		NotSent:         uint32(min(c.sWrite-c.sNext, 1<<31)),
		BusyTime:        c.stats.busy,
		ReceiverLimited: c.stats.rwndLimited,
		SenderLimited:   c.stats.sndLimited,
		Datagrams:       atomic.LoadUint64(&c.stats.datagrams),
		SendCalls:       atomic.LoadUint64(&c.stats.sendCalls),
		LossRepaired:    c.stats.repaired,
		Dropped:         atomic.LoadUint64(&c.stats.dropped),
	}, nil
}

// Tune applies the congestion control, the DSCP and the rate cap.
func (c *conn) Tune(o transport.Options) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return opErr("tune", c, net.ErrClosed)
	}
	if o.DSCP > 63 {
		return fmt.Errorf("DSCP %d out of range 0..63", o.DSCP)
	}
	t := withFAST(c.tun, o)
	if (o.CC != "" && o.CC != c.ctl.name()) || t.FAST != c.tun.FAST {
		name := o.CC
		if name == "" {
			name = c.ctl.name()
		}
		ctl, err := newController(name, c.target, t)
		if err != nil {
			return err
		}
		c.ctl, c.tun = ctl, t
		c.undoCtl, c.undoEnd = nil, 0
	}
	if o.DSCP >= 0 && o.DSCP != c.dscp {
		if err := c.ep.setTOS(tosFor(o.DSCP)); err != nil {
			return fmt.Errorf("set DSCP %d: %w", o.DSCP, err)
		}
		c.dscp, c.tos = o.DSCP, tosFor(o.DSCP)
	}
	if o.PacingRate > 0 {
		c.target = o.PacingRate
		c.ctl.setTarget(o.PacingRate)
		c.undoCtl, c.undoEnd = nil, 0
	}
	return nil
}

// withFAST is t with the stream's own FAST parameters, where its options
// set them.
func withFAST(t Tuning, o transport.Options) Tuning {
	if o.FASTAlpha == 0 && o.FASTGamma == 0 {
		return t
	}
	p := t.FAST
	if p == (fast.Params{}) {
		p = fast.DefaultParams
	}
	if o.FASTAlpha != 0 {
		p.Alpha = o.FASTAlpha
	}
	if o.FASTGamma != 0 {
		p.Gamma = o.FASTGamma
	}
	t.FAST = p
	return t
}

// SetPacingRate sets the rate cap (fixed's rate); 0 lifts it.
func (c *conn) SetPacingRate(bps uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return opErr("set pacing rate", c, net.ErrClosed)
	}
	c.target = bps
	c.ctl.setTarget(bps)
	c.undoCtl, c.undoEnd = nil, 0
	c.kickSender()
	return nil
}

// randomBytes fills a dialler's random.
func randomBytes() [16]byte {
	var r [16]byte
	rand.Read(r[:])
	return r
}
