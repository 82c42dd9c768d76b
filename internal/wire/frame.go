package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Magic opens every connection, sent by the client before anything else, so
// a server can tell a Lightpath peer from a stray one at once.
var Magic = [4]byte{'L', 'P', 'T', 'H'}

// Protocol versions this code speaks. A client offers [MinVersion,
// MaxVersion]; the server answers with the highest version both speak.
const (
	MinVersion uint16 = 1
	MaxVersion uint16 = 10
)

// VersionAlloc is the first version whose files frames may carry each
// entry's allocated size (Files.HasAlloc).
const VersionAlloc uint16 = 2

// VersionGrant is the first version in which a client may send a Grant
// before its request. An older peer never sees one: a client sends it only
// when the version agreed is this or later.
const VersionGrant uint16 = 3

// VersionPart is the first version in which a Put may carry a Part (a byte
// range of its one file) and a Result the whole file's state (see
// Result.HasPart).
const VersionPart uint16 = 4

// VersionCC is the first version in which a side's account (Stats, in
// done and bench-done) may name the congestion control each stream ran
// (Stats.HasCC).
const VersionCC uint16 = 5

// VersionBench is the first version in which a side's account (Stats) may
// carry what each stream put on the wire and sent again (Stats.HasWire),
// and a Bench may ask for both directions at once or name a file of the
// server's to send (Bench.Bidir, Bench.File).
const VersionBench uint16 = 6

// VersionUDP is the first version in which a client may send a Transport
// frame before its request (the session's data connections are UDP
// streams), and a side's account may carry each stream's datagrams, send
// calls and loss repaired (Stats.HasUDP).
const VersionUDP uint16 = 7

// VersionFAST is the first version in which a Transport may carry the fast
// rate control's parameters for the streams the server sends on.
const VersionFAST uint16 = 8

// VersionReceipt is the first version in which a receiver may send a
// Receipt for a file it wrote under a grant (before the file's verdict).
// An older peer never sees one: a receiver sends it only when the version
// agreed is this or later.
const VersionReceipt uint16 = 9

// VersionFault is the first version in which a receiver may send a Fault
// (the class of a file's failure, before the verdict that fails it) and
// an Error may carry the class of the refusal (Error.Fault). An older
// peer never sees either: both are sent only when the version agreed is
// this or later.
const VersionFault uint16 = 10

// MaxFrame bounds a control frame's payload. Senders split long lists (the
// manifest of a large tree) across frames well below it.
const MaxFrame = 1 << 20

// Type identifies a control frame.
type Type uint8

// Control frame types. The numbers are part of the protocol.
const (
	TError     Type = 1
	THelloOK   Type = 2
	TAuth      Type = 3
	TAuthOK    Type = 4
	TPut       Type = 5
	TGet       Type = 6
	TBench     Type = 7
	TAccept    Type = 8
	TJoin      Type = 9
	TJoined    Type = 10
	TFiles     Type = 11
	TManifest  Type = 12 // end of manifest
	TNeed      Type = 13
	TPlan      Type = 14
	TFileEnd   Type = 15
	TResult    Type = 16
	TResend    Type = 17
	TDone      Type = 18
	TSrcError  Type = 19
	TPing      Type = 20
	TPong      Type = 21
	TBenchDone Type = 22
	TGrant     Type = 23
	TTransport Type = 24
	TReceipt   Type = 25
	TFault     Type = 26
)

var typeNames = map[Type]string{
	TError: "error", THelloOK: "hello-ok", TAuth: "auth", TAuthOK: "auth-ok",
	TPut: "put", TGet: "get", TBench: "bench", TAccept: "accept", TJoin: "join",
	TJoined: "joined", TFiles: "files", TManifest: "manifest-end", TNeed: "need",
	TPlan: "plan", TFileEnd: "file-end", TResult: "result", TResend: "resend",
	TDone: "done", TSrcError: "source-error", TPing: "ping", TPong: "pong",
	TBenchDone: "bench-done", TGrant: "grant", TTransport: "transport",
	TReceipt: "receipt", TFault: "fault",
}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type-%d", uint8(t))
}

// Msg is a control message.
type Msg interface {
	Type() Type
	appendTo(e *enc)
	decode(d *dec)
}

// Encode returns the frame for m: a 4-byte big-endian payload length, the
// type byte, then the payload.
func Encode(m Msg) ([]byte, error) {
	e := enc{b: make([]byte, 5, 64)}
	m.appendTo(&e)
	n := len(e.b) - 5
	if n > MaxFrame {
		return nil, fmt.Errorf("encode %s: payload of %d bytes exceeds %d", m.Type(), n, MaxFrame)
	}
	binary.BigEndian.PutUint32(e.b, uint32(n))
	e.b[4] = byte(m.Type())
	return e.b, nil
}

// Decode parses one frame's type and payload into a message.
func Decode(t Type, payload []byte) (Msg, error) {
	m := newMsg(t)
	if m == nil {
		return nil, malformed("unknown frame type %d", uint8(t))
	}
	d := dec{b: payload}
	m.decode(&d)
	if err := d.end(t.String()); err != nil {
		return nil, err
	}
	return m, nil
}

func newMsg(t Type) Msg {
	switch t {
	case TError:
		return &Error{}
	case THelloOK:
		return &HelloOK{}
	case TAuth:
		return &Auth{}
	case TAuthOK:
		return &AuthOK{}
	case TPut:
		return &Put{}
	case TGet:
		return &Get{}
	case TBench:
		return &Bench{}
	case TAccept:
		return &Accept{}
	case TJoin:
		return &Join{}
	case TJoined:
		return &Joined{}
	case TFiles:
		return &Files{}
	case TManifest:
		return &ManifestEnd{}
	case TNeed:
		return &Need{}
	case TPlan:
		return &Plan{}
	case TFileEnd:
		return &FileEnd{}
	case TResult:
		return &Result{}
	case TResend:
		return &Resend{}
	case TDone:
		return &Done{}
	case TSrcError:
		return &SrcError{}
	case TPing:
		return &Ping{}
	case TPong:
		return &Pong{}
	case TBenchDone:
		return &BenchDone{}
	case TGrant:
		return &Grant{}
	case TTransport:
		return &Transport{}
	case TReceipt:
		return &Receipt{}
	case TFault:
		return &Fault{}
	}
	return nil
}

// Reader reads control frames.
type Reader struct {
	r   *bufio.Reader
	buf []byte
	// Version is the protocol version agreed on this connection, set by
	// whoever ran its handshake (0 before).
	Version uint16
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Buffered exposes the underlying buffered reader, for the data phase of a
// connection that began with control frames.
func (r *Reader) Buffered() *bufio.Reader { return r.r }

// Read returns the next message. Errors wrapping ErrMalformed mean the peer
// sent something that is not this protocol; others are I/O errors.
func (r *Reader) Read() (Msg, error) {
	var h [5]byte
	if _, err := io.ReadFull(r.r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:4])
	if n > MaxFrame {
		return nil, malformed("frame of %d bytes exceeds the limit of %d", n, MaxFrame)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	p := r.buf[:n]
	if _, err := io.ReadFull(r.r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return Decode(Type(h[4]), p)
}

// Writer writes control frames through a buffer; Flush sends them.
type Writer struct{ w *bufio.Writer }

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriterSize(w, 64<<10)} }

// Write buffers one message.
func (w *Writer) Write(m Msg) error {
	b, err := Encode(m)
	if err != nil {
		return err
	}
	_, err = w.w.Write(b)
	return err
}

// Flush sends what is buffered.
func (w *Writer) Flush() error { return w.w.Flush() }

// Send writes one message and flushes.
func (w *Writer) Send(m Msg) error {
	if err := w.Write(m); err != nil {
		return err
	}
	return w.Flush()
}

// Buffered reports how many bytes wait to be flushed.
func (w *Writer) Buffered() int { return w.w.Buffered() }
