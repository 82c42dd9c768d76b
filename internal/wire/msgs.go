package wire

import (
	"encoding/binary"
	"io"
	"math"

	"github.com/lightpath/lightpath/internal/retry"
)

// Kind says what a new connection is for.
type Kind uint8

// Connection kinds.
const (
	KindControl Kind = 1
	KindData    Kind = 2
)

// NonceSize is the length of handshake nonces.
const NonceSize = 32

// Hello is the fixed-size opening a client sends before any frame.
type Hello struct {
	MinVersion, MaxVersion uint16
	Kind                   Kind
	Nonce                  [NonceSize]byte
}

// HelloSize is the encoded size of a Hello.
const HelloSize = 4 + 2 + 2 + 1 + NonceSize

// AppendHello encodes h.
func AppendHello(b []byte, h Hello) []byte {
	b = append(b, Magic[:]...)
	b = binary.BigEndian.AppendUint16(b, h.MinVersion)
	b = binary.BigEndian.AppendUint16(b, h.MaxVersion)
	b = append(b, byte(h.Kind))
	return append(b, h.Nonce[:]...)
}

// ReadHello reads and checks a client's opening.
func ReadHello(r io.Reader) (Hello, error) {
	var b [HelloSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return Hello{}, err
	}
	return ParseHello(b[:])
}

// ParseHello decodes a client's opening.
func ParseHello(b []byte) (Hello, error) {
	var h Hello
	if len(b) != HelloSize {
		return h, malformed("hello of %d bytes, want %d", len(b), HelloSize)
	}
	if [4]byte(b[:4]) != Magic {
		return h, malformed("not a Lightpath peer (opening bytes %q)", b[:4])
	}
	h.MinVersion = binary.BigEndian.Uint16(b[4:])
	h.MaxVersion = binary.BigEndian.Uint16(b[6:])
	h.Kind = Kind(b[8])
	copy(h.Nonce[:], b[9:])
	if h.MinVersion > h.MaxVersion {
		return h, malformed("version range %d..%d is empty", h.MinVersion, h.MaxVersion)
	}
	if h.Kind != KindControl && h.Kind != KindData {
		return h, malformed("unknown connection kind %d", h.Kind)
	}
	return h, nil
}

// Error codes.
const (
	CodeProtocol = 1 // the peer broke the protocol
	CodeVersion  = 2 // no common version
	CodeAuth     = 3 // authentication failed or missing
	CodeRefused  = 4 // request refused (read-only, bad path...)
	CodeInternal = 5 // the server failed
	CodeBusy     = 6 // too many sessions
)

// Error ends a conversation with a reason.
type Error struct {
	Code uint8
	Msg  string
	// Fault, when not zero (version VersionFault and later: a tail an
	// older peer would refuse, so it is set only when the version agreed
	// allows), is the class of the refusal (FaultNotFound...).
	Fault uint8
}

func (m *Error) Type() Type { return TError }
func (m *Error) appendTo(e *enc) {
	e.u8(m.Code)
	e.str(m.Msg)
	if m.Fault != 0 {
		e.u8(m.Fault)
	}
}
func (m *Error) decode(d *dec) {
	m.Code = d.u8("code")
	m.Msg = d.str("message")
	if d.err != nil || len(d.b) == 0 {
		return
	}
	m.Fault = d.u8("fault")
	if d.err == nil && m.Fault == 0 {
		d.err = malformed("error with a fault of 0: the field is left out instead")
	}
}
func (m *Error) Error() string { return m.Msg }

// Fault codes: the class of a failure on the wire (Fault, Error.Fault),
// from version VersionFault on. retry.Fault is how the rest of the code
// spells them; a code this version does not know reads as internal.
const (
	FaultNotFound   uint8 = 1
	FaultPermission uint8 = 2
	FaultNoSpace    uint8 = 3
	FaultGrant      uint8 = 4
	FaultNetwork    uint8 = 5
	FaultChecksum   uint8 = 6
	FaultInternal   uint8 = 7
)

var faultCodes = map[retry.Fault]uint8{
	retry.FaultNotFound: FaultNotFound, retry.FaultPermission: FaultPermission, retry.FaultNoSpace: FaultNoSpace,
	retry.FaultGrant: FaultGrant, retry.FaultNetwork: FaultNetwork, retry.FaultChecksum: FaultChecksum,
	retry.FaultInternal: FaultInternal,
}

// FaultCode is f's code on the wire; 0 for none ("").
func FaultCode(f retry.Fault) uint8 {
	if f == "" {
		return 0
	}
	if c, ok := faultCodes[f]; ok {
		return c
	}
	return FaultInternal
}

// FaultOfCode is the fault code c says: "" for 0 (none sent), internal for
// a code this version does not know.
func FaultOfCode(c uint8) retry.Fault {
	if c == 0 {
		return ""
	}
	for f, k := range faultCodes {
		if k == c {
			return f
		}
	}
	return retry.FaultInternal
}

// Fault is a receiver's class of its failure of file ID, for the transfer
// service's retry decisions: sent from version VersionFault on, before the
// verdict that fails the file (its result, or the need that fails it), so
// the sender gives the verdict its class without reading its reason.
type Fault struct {
	ID   uint32
	Code uint8
}

func (m *Fault) Type() Type      { return TFault }
func (m *Fault) appendTo(e *enc) { e.uv(uint64(m.ID)); e.u8(m.Code) }
func (m *Fault) decode(d *dec) {
	m.ID = uint32(d.un("id", math.MaxUint32))
	m.Code = d.u8("code")
	if d.err == nil && m.Code == 0 {
		d.err = malformed("fault of file %d with code 0", m.ID)
	}
}

// HelloOK is the server's answer to a Hello.
type HelloOK struct {
	Version      uint16
	Nonce        [NonceSize]byte
	AuthRequired bool
}

func (m *HelloOK) Type() Type { return THelloOK }
func (m *HelloOK) appendTo(e *enc) {
	e.uv(uint64(m.Version))
	e.b = append(e.b, m.Nonce[:]...)
	e.boolean(m.AuthRequired)
}
func (m *HelloOK) decode(d *dec) {
	v := d.uv("version")
	if v > math.MaxUint16 {
		d.err = malformed("version %d", v)
	}
	m.Version = uint16(v)
	if d.err == nil && len(d.b) < NonceSize {
		d.fail("nonce")
	}
	if d.err == nil {
		copy(m.Nonce[:], d.b)
		d.b = d.b[NonceSize:]
	}
	m.AuthRequired = d.boolean("auth-required")
}

// Auth carries the client's proof that it holds the token.
type Auth struct{ MAC []byte }

func (m *Auth) Type() Type      { return TAuth }
func (m *Auth) appendTo(e *enc) { e.bytes(m.MAC) }
func (m *Auth) decode(d *dec)   { m.MAC = d.raw("mac") }

// AuthOK carries the server's proof that it holds the token too.
type AuthOK struct{ MAC []byte }

func (m *AuthOK) Type() Type      { return TAuthOK }
func (m *AuthOK) appendTo(e *enc) { e.bytes(m.MAC) }
func (m *AuthOK) decode(d *dec)   { m.MAC = d.raw("mac") }

// MaxGrant bounds the token a Grant carries.
const MaxGrant = 16 << 10

// Grant carries a capability the controller signed for this session (the
// transfer service's grant, opaque here), sent by the client after the
// hello and token exchange and before its request, from version
// VersionGrant on. A server that checks grants refuses a request without
// one.
type Grant struct{ Token string }

func (m *Grant) Type() Type      { return TGrant }
func (m *Grant) appendTo(e *enc) { e.str(m.Token) }
func (m *Grant) decode(d *dec) {
	m.Token = d.str("token")
	if d.err == nil && (m.Token == "" || len(m.Token) > MaxGrant) {
		d.err = malformed("grant token of %d bytes: want 1..%d", len(m.Token), MaxGrant)
	}
}

// Transport names the transport of a session's data connections when it
// is not TCP ("udp"), sent by the client after the hello and token
// exchange (and the grant) and before its request, from version
// VersionUDP on. A server that cannot carry it refuses the request.
// FASTAlpha and FASTGamma, when either is set (version VersionFAST and
// later: a tail an older server would refuse, so a client sends it only
// when the version agreed allows), are the fast rate control's alpha
// (packets) and gamma (1/1024ths) for the streams the server sends on;
// zero takes the server's own.
type Transport struct {
	Name                 string
	FASTAlpha, FASTGamma uint32
}

// maxTransportName bounds a transport's name.
const maxTransportName = 16

// Bounds of a Transport's FAST parameters: the server checks them
// further (internal/cc/fast).
const (
	maxFASTAlpha = 1 << 20
	maxFASTGamma = 1024
)

func (m *Transport) Type() Type { return TTransport }
func (m *Transport) appendTo(e *enc) {
	e.str(m.Name)
	if m.FASTAlpha != 0 || m.FASTGamma != 0 {
		e.uv(uint64(m.FASTAlpha))
		e.uv(uint64(m.FASTGamma))
	}
}
func (m *Transport) decode(d *dec) {
	m.Name = d.str("transport")
	if d.err == nil && (m.Name == "" || len(m.Name) > maxTransportName) {
		d.err = malformed("transport name of %d bytes: want 1..%d", len(m.Name), maxTransportName)
	}
	if d.err != nil || len(d.b) == 0 {
		return
	}
	a, g := d.uv("fast alpha"), d.uv("fast gamma")
	switch {
	case d.err != nil:
	case a > maxFASTAlpha || g > maxFASTGamma || a == 0 && g == 0:
		d.err = malformed("fast alpha %d, gamma %d: want at most %d and %d, one of them set", a, g, maxFASTAlpha, maxFASTGamma)
	default:
		m.FASTAlpha, m.FASTGamma = uint32(a), uint32(g)
	}
}

// Existing-destination policies.
const (
	PolicyRefuse    = 0
	PolicyOverwrite = 1
	PolicySkip      = 2
	PolicyUpdate    = 3
)

// Tuning asks the server to tune its own sockets of the session as the
// client tunes its ones: the side that sends data needs the congestion
// control, pacing and marking, whichever end it is.
type Tuning struct {
	CC     string // congestion control; empty for the default
	Window uint32 // socket buffer bytes; 0 for autotuning
	DSCP   int8   // -1 for none
	Rate   uint64 // bits/s for the whole session; 0 for no cap
}

func (t *Tuning) appendTo(e *enc) {
	e.str(t.CC)
	e.uv(uint64(t.Window))
	e.iv(int64(t.DSCP))
	e.uv(t.Rate)
}

func (t *Tuning) decode(d *dec) {
	t.CC = d.str("cc")
	w := d.uv("window")
	dscp := d.iv("dscp")
	t.Rate = d.uv("rate")
	if d.err == nil && (len(t.CC) > maxCCName || w > 1<<31 || dscp < -1 || dscp > 63) {
		d.err = malformed("tuning out of range (cc %q, window %d, dscp %d)", t.CC, w, dscp)
	}
	t.Window, t.DSCP = uint32(w), int8(dscp)
}

// Transfer options shared by Put and Get.
type Transfer struct {
	Tuning
	Streams   uint16
	BlockSize uint32
	Policy    uint8
	Recursive bool
	Adler32   bool // also compute adler32 per file
	// Select travels as the optional tail of a Put or a Get, not here.
	Select Select
}

// Select is what a copy takes of its sources and how: include and exclude
// rules, what becomes of symbolic links, and a dry run. It is the optional
// tail of a Put or a Get, sent only when it is not the zero value, so that
// peers from before it still read every message that does not use it.
type Select struct {
	Rules    []Rule
	Symlinks uint8 // LinksCopy, LinksSkip or LinksFollow
	DryRun   bool  // the receiver answers every file with a skip and writes nothing
}

// Rule is one --include or --exclude pattern.
type Rule struct {
	Include bool
	Pattern string
}

// What becomes of a symbolic link in a tree.
const (
	LinksCopy   uint8 = iota // recreated as a link (those leading outside the tree are skipped)
	LinksSkip                // left out
	LinksFollow              // the target's content is copied
)

// Bounds on a Select a peer may send.
const (
	MaxRules       = 256
	MaxRulePattern = 4096
)

func (s *Select) appendTail(e *enc, force bool) {
	if !force && len(s.Rules) == 0 && s.Symlinks == LinksCopy && !s.DryRun {
		return
	}
	e.uv(uint64(len(s.Rules)))
	for _, r := range s.Rules {
		e.boolean(r.Include)
		e.str(r.Pattern)
	}
	e.u8(s.Symlinks)
	e.boolean(s.DryRun)
}

func (s *Select) decodeTail(d *dec) {
	if d.err != nil || len(d.b) == 0 {
		return
	}
	n := d.count("rules", 2)
	if d.err == nil && n > MaxRules {
		d.err = malformed("%d rules exceed the limit of %d", n, MaxRules)
	}
	for i := 0; i < n && d.err == nil; i++ {
		r := Rule{Include: d.boolean("rule kind"), Pattern: d.str("rule pattern")}
		if d.err == nil && (r.Pattern == "" || len(r.Pattern) > MaxRulePattern) {
			d.err = malformed("rule pattern of %d bytes: want 1..%d", len(r.Pattern), MaxRulePattern)
		}
		s.Rules = append(s.Rules, r)
	}
	s.Symlinks = d.u8("symlinks")
	s.DryRun = d.boolean("dry run")
	if d.err == nil && s.Symlinks > LinksFollow {
		d.err = malformed("unknown symlink treatment %d", s.Symlinks)
	}
}

func (t *Transfer) appendTo(e *enc) {
	t.Tuning.appendTo(e)
	e.uv(uint64(t.Streams))
	e.uv(uint64(t.BlockSize))
	e.u8(t.Policy)
	e.boolean(t.Recursive)
	e.boolean(t.Adler32)
}

func (t *Transfer) decode(d *dec) {
	t.Tuning.decode(d)
	s := d.uv("streams")
	b := d.uv("block size")
	t.Policy = d.u8("policy")
	t.Recursive = d.boolean("recursive")
	t.Adler32 = d.boolean("adler32")
	if d.err == nil && (s == 0 || s > 256) {
		d.err = malformed("streams %d out of range 1..256", s)
	}
	if d.err == nil && (b < 4096 || b > 1<<30) {
		d.err = malformed("block size %d out of range 4096..1GiB", b)
	}
	if d.err == nil && t.Policy > PolicyUpdate {
		d.err = malformed("unknown policy %d", t.Policy)
	}
	t.Streams, t.BlockSize = uint16(s), uint32(b)
}

// Put asks the server to receive: the client sends files into Dest.
type Put struct {
	Transfer
	Dest string
	// Sources is how many top-level sources follow; with one source and a
	// destination that is not an existing directory, the source takes the
	// destination's name (as cp does).
	Sources  uint32
	DirSlash bool // the destination was written with a trailing slash
	// Part, when set, asks for only this byte range of the one file the
	// manifest carries (version VersionPart and later): the receiver writes
	// it into the file's shared partial file and puts the file in place
	// once every block of it is there. It travels after the select section,
	// which is then written even when empty.
	Part *Part
}

// Part is a byte range of one file: Offset a multiple of the block size,
// Offset+Length a multiple of it or the file's size.
type Part struct {
	Offset, Length int64
}

func (m *Put) Type() Type { return TPut }
func (m *Put) appendTo(e *enc) {
	m.Transfer.appendTo(e)
	e.str(m.Dest)
	e.uv(uint64(m.Sources))
	e.boolean(m.DirSlash)
	m.Select.appendTail(e, m.Part != nil)
	if m.Part != nil {
		e.iv(m.Part.Offset)
		e.iv(m.Part.Length)
	}
}
func (m *Put) decode(d *dec) {
	m.Transfer.decode(d)
	m.Dest = d.str("dest")
	m.Sources = uint32(d.un("sources", math.MaxUint32))
	m.DirSlash = d.boolean("dir-slash")
	m.Select.decodeTail(d)
	if d.err != nil || len(d.b) == 0 {
		return
	}
	// Version 4: the part, after a select section written even when empty.
	p := &Part{Offset: d.int("part offset", maxInt64), Length: d.int("part length", maxInt64)}
	if d.err == nil && (p.Length <= 0 || p.Offset > maxInt64-p.Length) {
		d.err = malformed("part of %d bytes at %d", p.Length, p.Offset)
	}
	m.Part = p
}

// Get asks the server to send the named paths (relative to its root).
type Get struct {
	Transfer
	Paths []string
}

func (m *Get) Type() Type { return TGet }
func (m *Get) appendTo(e *enc) {
	m.Transfer.appendTo(e)
	e.uv(uint64(len(m.Paths)))
	for _, p := range m.Paths {
		e.str(p)
	}
	m.Select.appendTail(e, false)
}
func (m *Get) decode(d *dec) {
	m.Transfer.decode(d)
	n := d.count("paths", 1)
	for i := 0; i < n && d.err == nil; i++ {
		m.Paths = append(m.Paths, d.str("path"))
	}
	m.Select.decodeTail(d)
}

// Bench asks for a throughput test.
type Bench struct {
	Tuning
	Streams  uint16
	Duration int64 // nanoseconds
	Reverse  bool  // the server sends
	// Bidir asks both sides to send at once, each stream carrying data
	// both ways (version VersionBench and later; it excludes Reverse).
	Bidir bool
	// File, with Reverse, names a regular file under the server's root
	// that the server sends (once, or until the duration ends) instead of
	// memory (version VersionBench and later).
	File string
	// Direct, with File, asks the server to read it around its page cache
	// (O_DIRECT; version VersionBench and later).
	Direct bool
}

// MaxBenchFile bounds the path a Bench may name.
const MaxBenchFile = 4096

func (m *Bench) Type() Type { return TBench }
func (m *Bench) appendTo(e *enc) {
	m.Tuning.appendTo(e)
	e.uv(uint64(m.Streams))
	e.iv(m.Duration)
	e.boolean(m.Reverse)
	// Version 6: the mode, a tail sent only when it says something, so a
	// plain bench still reaches an older server.
	if m.Bidir || m.File != "" || m.Direct {
		e.boolean(m.Bidir)
		e.str(m.File)
		e.boolean(m.Direct)
	}
}
func (m *Bench) decode(d *dec) {
	m.Tuning.decode(d)
	s := d.uv("streams")
	m.Duration = d.int("duration", int64(24*3600)*1e9)
	m.Reverse = d.boolean("reverse")
	if d.err == nil && (s == 0 || s > 256) {
		d.err = malformed("streams %d out of range 1..256", s)
	}
	m.Streams = uint16(s)
	if d.err != nil || len(d.b) == 0 {
		return
	}
	m.Bidir = d.boolean("bidir")
	m.File = d.str("file")
	m.Direct = d.boolean("direct")
	switch {
	case d.err != nil:
	case len(m.File) > MaxBenchFile:
		d.err = malformed("bench file name of %d bytes, at most %d", len(m.File), MaxBenchFile)
	case m.Bidir && m.Reverse:
		d.err = malformed("a bench both ways has no reverse")
	case m.File != "" && !m.Reverse:
		d.err = malformed("a bench names a file only for the server to send (reverse)")
	case m.Direct && m.File == "":
		d.err = malformed("a bench reads directly only a file")
	}
}

// Accept opens a session: data connections join it by ID.
type Accept struct {
	Session [16]byte
	// Secret is the key data connections prove they hold; empty when both
	// ends derive it from the token.
	Secret  []byte
	Streams uint16
}

func (m *Accept) Type() Type { return TAccept }
func (m *Accept) appendTo(e *enc) {
	e.b = append(e.b, m.Session[:]...)
	e.bytes(m.Secret)
	e.uv(uint64(m.Streams))
}
func (m *Accept) decode(d *dec) {
	if len(d.b) < 16 {
		d.fail("session")
		return
	}
	copy(m.Session[:], d.b)
	d.b = d.b[16:]
	m.Secret = d.raw("secret")
	m.Streams = uint16(d.un("streams", 256))
}

// Join attaches a data connection to a session.
type Join struct {
	Session [16]byte
	Stream  uint16
	MAC     []byte
}

func (m *Join) Type() Type { return TJoin }
func (m *Join) appendTo(e *enc) {
	e.b = append(e.b, m.Session[:]...)
	e.uv(uint64(m.Stream))
	e.bytes(m.MAC)
}
func (m *Join) decode(d *dec) {
	if len(d.b) < 16 {
		d.fail("session")
		return
	}
	copy(m.Session[:], d.b)
	d.b = d.b[16:]
	m.Stream = uint16(d.un("stream", 255))
	m.MAC = d.raw("mac")
}

// Joined confirms a Join.
type Joined struct{}

func (m *Joined) Type() Type      { return TJoined }
func (m *Joined) appendTo(e *enc) {}
func (m *Joined) decode(d *dec)   {}

// Entry kinds.
const (
	EntryFile    = 1
	EntryDir     = 2
	EntrySymlink = 3
)

// Entry describes one item of the manifest. Path is slash-separated and
// relative to the transfer's top; the receiver validates it.
type Entry struct {
	ID     uint32
	Kind   uint8
	Path   string
	Size   int64
	Mode   uint32 // permission bits
	MTime  int64  // nanoseconds since the epoch
	Target string // symlink target
	// Alloc is the space a file's data takes at the source (its size less
	// its holes), so the receiver can tell whether it has room before any
	// block travels. Version 2 and later; see Files.HasAlloc.
	Alloc int64
}

// Files is a batch of manifest entries.
type Files struct {
	Entries []Entry
	// HasAlloc says the entries carry Alloc: a section after the entries,
	// which only a peer of version 2 or later understands (a version 1
	// decoder refuses trailing bytes). Without it, receivers take Alloc to
	// be the size.
	HasAlloc bool
}

func (m *Files) Type() Type { return TFiles }
func (m *Files) appendTo(e *enc) {
	e.uv(uint64(len(m.Entries)))
	for _, x := range m.Entries {
		e.uv(uint64(x.ID))
		e.u8(x.Kind)
		e.str(x.Path)
		e.iv(x.Size)
		e.uv(uint64(x.Mode))
		e.iv(x.MTime)
		e.str(x.Target)
	}
	if m.HasAlloc {
		e.uv(uint64(len(m.Entries)))
		for _, x := range m.Entries {
			e.iv(x.Alloc)
		}
	}
}
func (m *Files) decode(d *dec) {
	n := d.count("entries", 7)
	m.Entries = make([]Entry, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		var x Entry
		x.ID = uint32(d.un("id", math.MaxUint32))
		x.Kind = d.u8("kind")
		x.Path = d.str("path")
		x.Size = d.int("size", maxInt64)
		x.Mode = uint32(d.un("mode", 0o7777))
		x.MTime = d.iv("mtime")
		x.Target = d.str("target")
		if d.err == nil && (x.Kind < EntryFile || x.Kind > EntrySymlink) {
			d.err = malformed("entry %d: unknown kind %d", x.ID, x.Kind)
		}
		m.Entries = append(m.Entries, x)
	}
	if d.err != nil || len(d.b) == 0 {
		return
	}
	// Version 2: the space each entry's data takes.
	n = d.count("allocs", 1)
	if d.err == nil && n != len(m.Entries) {
		d.err = malformed("%d allocations for %d entries", n, len(m.Entries))
		return
	}
	for i := 0; i < n && d.err == nil; i++ {
		m.Entries[i].Alloc = d.int("alloc", maxInt64)
	}
	m.HasAlloc = d.err == nil
}

// ManifestEnd says no more entries follow.
type ManifestEnd struct{ Count uint32 }

func (m *ManifestEnd) Type() Type      { return TManifest }
func (m *ManifestEnd) appendTo(e *enc) { e.uv(uint64(m.Count)) }
func (m *ManifestEnd) decode(d *dec)   { m.Count = uint32(d.un("count", math.MaxUint32)) }

// Need actions.
const (
	NeedAll  = 1 // send every block
	NeedSome = 2 // the receiver holds the blocks listed in Have
	NeedSkip = 3 // nothing to send (already there); Reason says why
	NeedFail = 4 // refused; Reason says why
)

// BlockSum is a block's index and CRC32C.
type BlockSum struct {
	Index uint32
	CRC   uint32
}

// NeedItem is the receiver's answer for one file.
type NeedItem struct {
	ID     uint32
	Action uint8
	Reason string
	Have   []BlockSum
}

// Need is a batch of answers.
type Need struct{ Items []NeedItem }

func (m *Need) Type() Type { return TNeed }
func (m *Need) appendTo(e *enc) {
	e.uv(uint64(len(m.Items)))
	for _, x := range m.Items {
		e.uv(uint64(x.ID))
		e.u8(x.Action)
		e.str(x.Reason)
		e.uv(uint64(len(x.Have)))
		for _, h := range x.Have {
			e.uv(uint64(h.Index))
			e.u32(h.CRC)
		}
	}
}
func (m *Need) decode(d *dec) {
	n := d.count("items", 4)
	for i := 0; i < n && d.err == nil; i++ {
		var x NeedItem
		x.ID = uint32(d.un("id", math.MaxUint32))
		x.Action = d.u8("action")
		x.Reason = d.str("reason")
		h := d.count("have", 5)
		for j := 0; j < h && d.err == nil; j++ {
			x.Have = append(x.Have, BlockSum{Index: uint32(d.un("index", math.MaxUint32)), CRC: d.u32("crc")})
		}
		if d.err == nil && (x.Action < NeedAll || x.Action > NeedFail) {
			d.err = malformed("need %d: unknown action %d", x.ID, x.Action)
		}
		m.Items = append(m.Items, x)
	}
}

// Plan tells the receiver, for a file it holds part of, whether those parts
// still match the source (Fresh false) or must be discarded (Fresh true).
type Plan struct {
	ID    uint32
	Fresh bool
}

func (m *Plan) Type() Type      { return TPlan }
func (m *Plan) appendTo(e *enc) { e.uv(uint64(m.ID)); e.boolean(m.Fresh) }
func (m *Plan) decode(d *dec) {
	m.ID = uint32(d.un("id", math.MaxUint32))
	m.Fresh = d.boolean("fresh")
}

// FileEndItem closes one file from the sender's side: its whole-file CRC32C
// (combined from the block CRCs) and, when asked, its adler32. A non-empty
// Abort means the sender gave the file up (the source changed under it).
type FileEndItem struct {
	ID      uint32
	CRC     uint32
	Adler32 uint32
	Abort   string
}

// FileEnd is a batch of file ends.
type FileEnd struct{ Items []FileEndItem }

func (m *FileEnd) Type() Type { return TFileEnd }
func (m *FileEnd) appendTo(e *enc) {
	e.uv(uint64(len(m.Items)))
	for _, x := range m.Items {
		e.uv(uint64(x.ID))
		e.u32(x.CRC)
		e.u32(x.Adler32)
		e.str(x.Abort)
	}
}
func (m *FileEnd) decode(d *dec) {
	n := d.count("items", 10)
	for i := 0; i < n && d.err == nil; i++ {
		m.Items = append(m.Items, FileEndItem{
			ID: uint32(d.un("id", math.MaxUint32)), CRC: d.u32("crc"),
			Adler32: d.u32("adler32"), Abort: d.str("abort"),
		})
	}
}

// ResultItem is the receiver's verdict on one file.
type ResultItem struct {
	ID      uint32
	OK      bool
	Skipped bool // OK, and left as it was (already up to date)
	Reason  string
	CRC     uint32 // the receiver's whole-file CRC32C (the part's, in a part push)
	Adler32 uint32
	// A part push's file (version VersionPart and later, see
	// Result.HasPart): Complete says the whole file is in place under its
	// final name, verified; FileCRC and FileAdler32 are then its checksums.
	Complete    bool
	FileCRC     uint32
	FileAdler32 uint32
}

// Result is a batch of verdicts.
type Result struct {
	Items []ResultItem
	// HasPart says the items carry Complete, FileCRC and FileAdler32: a
	// section after the items, sent only in a part push (version 4 and
	// later; an older decoder refuses trailing bytes).
	HasPart bool
}

func (m *Result) Type() Type { return TResult }
func (m *Result) appendTo(e *enc) {
	e.uv(uint64(len(m.Items)))
	for _, x := range m.Items {
		e.uv(uint64(x.ID))
		e.boolean(x.OK)
		e.boolean(x.Skipped)
		e.str(x.Reason)
		e.u32(x.CRC)
		e.u32(x.Adler32)
	}
	if m.HasPart {
		e.uv(uint64(len(m.Items)))
		for _, x := range m.Items {
			e.boolean(x.Complete)
			e.u32(x.FileCRC)
			e.u32(x.FileAdler32)
		}
	}
}
func (m *Result) decode(d *dec) {
	n := d.count("items", 12)
	for i := 0; i < n && d.err == nil; i++ {
		m.Items = append(m.Items, ResultItem{
			ID: uint32(d.un("id", math.MaxUint32)), OK: d.boolean("ok"), Skipped: d.boolean("skipped"),
			Reason: d.str("reason"), CRC: d.u32("crc"), Adler32: d.u32("adler32"),
		})
	}
	if d.err != nil || len(d.b) == 0 {
		return
	}
	// Version 4: the whole file's state, per item.
	n = d.count("file states", 9)
	if d.err == nil && n != len(m.Items) {
		d.err = malformed("%d file states for %d verdicts", n, len(m.Items))
		return
	}
	for i := 0; i < n && d.err == nil; i++ {
		x := &m.Items[i]
		x.Complete, x.FileCRC, x.FileAdler32 = d.boolean("complete"), d.u32("file crc"), d.u32("file adler32")
	}
	m.HasPart = d.err == nil
}

// MaxReceipt bounds a receipt's MAC.
const MaxReceipt = 64

// Receipt is a receiver's signed word that it holds file ID as its verdict
// (the next Result, or a Need that skips it) says: the transfer service's
// destination receipt (internal/transfer/grant), a MAC the sender passes
// on to the controller and cannot make itself. Sent from version
// VersionReceipt on, in sessions under a grant, before the verdict.
type Receipt struct {
	ID  uint32
	MAC []byte
}

func (m *Receipt) Type() Type      { return TReceipt }
func (m *Receipt) appendTo(e *enc) { e.uv(uint64(m.ID)); e.bytes(m.MAC) }
func (m *Receipt) decode(d *dec) {
	m.ID = uint32(d.un("id", math.MaxUint32))
	m.MAC = d.raw("mac")
	if d.err == nil && (len(m.MAC) == 0 || len(m.MAC) > MaxReceipt) {
		d.err = malformed("receipt of %d bytes: want 1..%d", len(m.MAC), MaxReceipt)
	}
}

// Resend asks for a block again (it arrived damaged).
type Resend struct {
	ID    uint32
	Index uint32
}

func (m *Resend) Type() Type      { return TResend }
func (m *Resend) appendTo(e *enc) { e.uv(uint64(m.ID)); e.uv(uint64(m.Index)) }
func (m *Resend) decode(d *dec) {
	m.ID = uint32(d.un("id", math.MaxUint32))
	m.Index = uint32(d.un("index", math.MaxUint32))
}

// SrcError reports a source the sender could not read (pull).
type SrcError struct {
	Path   string
	Reason string
}

func (m *SrcError) Type() Type      { return TSrcError }
func (m *SrcError) appendTo(e *enc) { e.str(m.Path); e.str(m.Reason) }
func (m *SrcError) decode(d *dec)   { m.Path = d.str("path"); m.Reason = d.str("reason") }

// StreamStats is one data stream's account, taken from TCP_INFO on the side
// that sent the data.
type StreamStats struct {
	Bytes         int64
	RTT           int64 // ns
	RTTVar        int64 // ns
	Cwnd          uint32
	Retrans       uint32 // total retransmitted segments
	BusyTime      int64  // ns, TCP_INFO busy time
	RwndLimited   int64  // ns
	SndbufLimited int64  // ns
	PacingRate    uint64 // bytes/s
	DeliveryRate  uint64 // bytes/s
	// CC is the congestion control the stream ran, read from the socket
	// (version VersionCC and later, see Stats.HasCC); "" where unknown.
	CC string
	// WireBytes is what the stream put on the wire (payload bytes sent,
	// retransmissions included) and ResentBytes what of it was sent again
	// (version VersionBench and later, see Stats.HasWire).
	WireBytes, ResentBytes uint64
	// Datagrams and SendCalls count what the stream sent and the system
	// calls that sent it, and LossRepaired the payload bytes it received
	// only thanks to a retransmission: a datagram transport's account
	// (version VersionUDP and later, see Stats.HasUDP).
	Datagrams, SendCalls, LossRepaired uint64
}

// maxCCName bounds a congestion control's name, as the tuning always has
// (the kernel's names are shorter: TCP_CA_NAME_MAX, 16 bytes, holds the
// terminating zero).
const maxCCName = 16

// Stats is one side's account of a session.
type Stats struct {
	Bytes   int64 // payload bytes carried this session
	Elapsed int64 // ns
	IOWait  int64 // ns spent in file reads (sender) or writes (receiver)
	NetWait int64 // ns spent blocked on the network
	Streams []StreamStats
	// HasCC says the streams carry CC: a section after the streams, sent
	// only when the version agreed is VersionCC or later (an older decoder
	// refuses trailing bytes).
	HasCC bool
	// HasWire says the streams carry WireBytes and ResentBytes: a section
	// after the congestion controls, sent only when the version agreed is
	// VersionBench or later (the congestion controls are then written too,
	// and the account decodes with HasCC set).
	HasWire bool
	// HasUDP says the streams carry Datagrams, SendCalls and LossRepaired:
	// a section after the wire accounts, sent only when the version agreed
	// is VersionUDP or later and the session's data went over UDP (the
	// congestion controls and the wire accounts are then written too, and
	// the account decodes with HasCC and HasWire set).
	HasUDP bool
}

func (s *Stats) appendTo(e *enc) {
	e.iv(s.Bytes)
	e.iv(s.Elapsed)
	e.iv(s.IOWait)
	e.iv(s.NetWait)
	e.uv(uint64(len(s.Streams)))
	for _, x := range s.Streams {
		e.iv(x.Bytes)
		e.iv(x.RTT)
		e.iv(x.RTTVar)
		e.uv(uint64(x.Cwnd))
		e.uv(uint64(x.Retrans))
		e.iv(x.BusyTime)
		e.iv(x.RwndLimited)
		e.iv(x.SndbufLimited)
		e.uv(x.PacingRate)
		e.uv(x.DeliveryRate)
	}
	if s.HasCC || s.HasWire || s.HasUDP {
		e.uv(uint64(len(s.Streams)))
		for _, x := range s.Streams {
			e.str(x.CC)
		}
	}
	if s.HasWire || s.HasUDP {
		e.uv(uint64(len(s.Streams)))
		for _, x := range s.Streams {
			e.uv(x.WireBytes)
			e.uv(x.ResentBytes)
		}
	}
	if s.HasUDP {
		e.uv(uint64(len(s.Streams)))
		for _, x := range s.Streams {
			e.uv(x.Datagrams)
			e.uv(x.SendCalls)
			e.uv(x.LossRepaired)
		}
	}
}

func (s *Stats) decode(d *dec) {
	s.Bytes = d.int("bytes", maxInt64)
	s.Elapsed = d.int("elapsed", maxInt64)
	s.IOWait = d.int("io-wait", maxInt64)
	s.NetWait = d.int("net-wait", maxInt64)
	n := d.count("streams", 10)
	for i := 0; i < n && d.err == nil; i++ {
		s.Streams = append(s.Streams, StreamStats{
			Bytes: d.int("bytes", maxInt64), RTT: d.int("rtt", maxInt64), RTTVar: d.int("rttvar", maxInt64),
			Cwnd: uint32(d.un("cwnd", math.MaxUint32)), Retrans: uint32(d.un("retrans", math.MaxUint32)),
			BusyTime: d.int("busy", maxInt64), RwndLimited: d.int("rwnd-limited", maxInt64),
			SndbufLimited: d.int("sndbuf-limited", maxInt64),
			PacingRate:    d.uv("pacing"), DeliveryRate: d.uv("delivery"),
		})
	}
	if d.err != nil || len(d.b) == 0 {
		return
	}
	// Version 5: each stream's congestion control.
	n = d.count("congestion controls", 1)
	if d.err == nil && n != len(s.Streams) {
		d.err = malformed("%d congestion controls for %d streams", n, len(s.Streams))
		return
	}
	for i := 0; i < n && d.err == nil; i++ {
		s.Streams[i].CC = d.str("cc")
		if d.err == nil && len(s.Streams[i].CC) > maxCCName {
			d.err = malformed("congestion control name of %d bytes", len(s.Streams[i].CC))
		}
	}
	s.HasCC = d.err == nil
	if d.err != nil || len(d.b) == 0 {
		return
	}
	// Version 6: what each stream put on the wire and sent again.
	n = d.count("wire accounts", 2)
	if d.err == nil && n != len(s.Streams) {
		d.err = malformed("%d wire accounts for %d streams", n, len(s.Streams))
		return
	}
	for i := 0; i < n && d.err == nil; i++ {
		s.Streams[i].WireBytes = d.uv("wire bytes")
		s.Streams[i].ResentBytes = d.uv("resent bytes")
	}
	s.HasWire = d.err == nil
	if d.err != nil || len(d.b) == 0 {
		return
	}
	// Version 7: a datagram transport's account of each stream.
	n = d.count("datagram accounts", 3)
	if d.err == nil && n != len(s.Streams) {
		d.err = malformed("%d datagram accounts for %d streams", n, len(s.Streams))
		return
	}
	for i := 0; i < n && d.err == nil; i++ {
		s.Streams[i].Datagrams = d.uv("datagrams")
		s.Streams[i].SendCalls = d.uv("send calls")
		s.Streams[i].LossRepaired = d.uv("loss repaired")
	}
	s.HasUDP = d.err == nil
}

// Done closes a session, each side sending its account.
type Done struct{ Stats Stats }

func (m *Done) Type() Type      { return TDone }
func (m *Done) appendTo(e *enc) { m.Stats.appendTo(e) }
func (m *Done) decode(d *dec)   { m.Stats.decode(d) }

// BenchDone ends a memory-to-memory test with the receiving side's account.
type BenchDone struct{ Stats Stats }

func (m *BenchDone) Type() Type      { return TBenchDone }
func (m *BenchDone) appendTo(e *enc) { m.Stats.appendTo(e) }
func (m *BenchDone) decode(d *dec)   { m.Stats.decode(d) }

// Ping and Pong measure the control connection's round-trip time.
type Ping struct{ Stamp int64 }

func (m *Ping) Type() Type      { return TPing }
func (m *Ping) appendTo(e *enc) { e.iv(m.Stamp) }
func (m *Ping) decode(d *dec)   { m.Stamp = d.iv("stamp") }

// Pong echoes a Ping.
type Pong struct{ Stamp int64 }

func (m *Pong) Type() Type      { return TPong }
func (m *Pong) appendTo(e *enc) { e.iv(m.Stamp) }
func (m *Pong) decode(d *dec)   { m.Stamp = d.iv("stamp") }
