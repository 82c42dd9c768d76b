package wire

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/lightpath/lightpath/internal/retry"
)

func sampleMsgs() []Msg {
	tun := Tuning{CC: "bbr", Window: 1 << 20, DSCP: 46, Rate: 5e9}
	tr := Transfer{Tuning: tun, Streams: 4, BlockSize: 4 << 20, Policy: PolicyUpdate, Recursive: true, Adler32: true}
	trSel := tr
	trSel.Select = Select{Rules: []Rule{{Include: true, Pattern: "*/"}, {Pattern: "*.tmp"}}, Symlinks: LinksFollow, DryRun: true}
	st := Stats{Bytes: 1 << 40, Elapsed: 3e9, IOWait: 5, NetWait: 7, Streams: []StreamStats{
		{Bytes: 9, RTT: 1000, RTTVar: 20, Cwnd: 10, Retrans: 3, BusyTime: 1, RwndLimited: 2, SndbufLimited: 3, PacingRate: 4, DeliveryRate: 5}}}
	stCC := st
	stCC.Streams = []StreamStats{st.Streams[0], st.Streams[0]}
	stCC.Streams[0].CC, stCC.Streams[1].CC, stCC.HasCC = "fast", "cubic", true
	stWire := stCC
	stWire.Streams = []StreamStats{stCC.Streams[0], stCC.Streams[1]}
	stWire.Streams[0].WireBytes, stWire.Streams[0].ResentBytes = 1<<41, 1<<20
	stWire.Streams[1].WireBytes = 9
	stWire.HasWire = true
	stUDP := stWire
	stUDP.Streams = []StreamStats{stWire.Streams[0], stWire.Streams[1]}
	stUDP.Streams[0].Datagrams, stUDP.Streams[0].SendCalls, stUDP.Streams[0].LossRepaired = 1<<30, 1<<27, 1<<22
	stUDP.Streams[1].LossRepaired = 3
	stUDP.HasUDP = true
	return []Msg{
		&Error{Code: CodeAuth, Msg: "wrong token"},
		&HelloOK{Version: 1, Nonce: [NonceSize]byte{1, 2, 3}, AuthRequired: true},
		&Auth{MAC: []byte{9, 9}},
		&AuthOK{MAC: []byte{8}},
		&Put{Transfer: tr, Dest: "incoming/ä b", Sources: 3, DirSlash: true},
		&Get{Transfer: tr, Paths: []string{"a", "b/c"}},
		&Get{Transfer: trSel, Paths: []string{"a"}},
		&Put{Transfer: trSel, Dest: "d", Sources: 1},
		&Bench{Tuning: tun, Streams: 8, Duration: 10e9, Reverse: true},
		&Accept{Session: [16]byte{7}, Secret: []byte("s"), Streams: 4},
		&Join{Session: [16]byte{7}, Stream: 3, MAC: []byte{1}},
		&Joined{},
		&Files{Entries: []Entry{{ID: 1, Kind: EntryFile, Path: "d/f", Size: 1 << 33, Mode: 0o644, MTime: -5, Target: ""},
			{ID: 2, Kind: EntrySymlink, Path: "d/l", Mode: 0o777, MTime: 1, Target: "f"}}},
		&Files{Entries: []Entry{{ID: 3, Kind: EntryFile, Path: "sparse", Size: 1 << 40, Mode: 0o600, Alloc: 4096},
			{ID: 4, Kind: EntryDir, Path: "d", Mode: 0o755}}, HasAlloc: true},
		&ManifestEnd{Count: 2},
		&Need{Items: []NeedItem{{ID: 1, Action: NeedSome, Have: []BlockSum{{Index: 0, CRC: 0xdeadbeef}}}, {ID: 2, Action: NeedFail, Reason: "exists"}}},
		&Plan{ID: 5, Fresh: true},
		&FileEnd{Items: []FileEndItem{{ID: 1, CRC: 2, Adler32: 3, Abort: "changed"}}},
		&Result{Items: []ResultItem{{ID: 1, OK: true, Skipped: true, Reason: "up to date", CRC: 4, Adler32: 5}}},
		&Resend{ID: 1, Index: 77},
		&Done{Stats: st},
		&SrcError{Path: "x", Reason: "no such file"},
		&Ping{Stamp: 42},
		&Pong{Stamp: 42},
		&BenchDone{Stats: st},
		&Grant{Token: "eyJ1c2VyIjoiYSJ9.c2ln"},
		&Put{Transfer: tr, Dest: "big", Sources: 1, Part: &Part{Offset: 8 << 20, Length: 4 << 20}},
		&Put{Transfer: trSel, Dest: "big", Sources: 1, Part: &Part{Offset: 0, Length: 1}},
		&Result{Items: []ResultItem{{ID: 0, OK: true, CRC: 6, Adler32: 7, Complete: true, FileCRC: 8, FileAdler32: 9},
			{ID: 1, Reason: "checksum mismatch"}}, HasPart: true},
		&Done{Stats: stCC},
		&BenchDone{Stats: stCC},
		&Done{Stats: Stats{Bytes: 1, HasCC: true}},
		&BenchDone{Stats: stWire},
		&Done{Stats: Stats{Bytes: 1, HasCC: true, HasWire: true}},
		&Bench{Tuning: tun, Streams: 2, Duration: 1e9, Bidir: true},
		&Bench{Tuning: tun, Streams: 1, Duration: 1e9, Reverse: true, File: "data/big.bin"},
		&Bench{Tuning: tun, Streams: 1, Duration: 1e9, Reverse: true, File: "f", Direct: true},
		&Transport{Name: "udp"},
		&Transport{Name: "udp", FASTAlpha: 50, FASTGamma: 256},
		&Done{Stats: stUDP},
		&BenchDone{Stats: stUDP},
		&Done{Stats: Stats{Bytes: 1, HasCC: true, HasWire: true, HasUDP: true}},
		&Receipt{ID: 7, MAC: bytes.Repeat([]byte{0xa5}, 32)},
		&Fault{ID: 7, Code: FaultNoSpace},
		&Fault{ID: 1 << 31, Code: 200}, // a code of a later version
		&Error{Code: CodeRefused, Msg: "grant: fenced: attempt 1 of task t-1 is no longer current", Fault: FaultGrant},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range sampleMsgs() {
		t.Run(m.Type().String(), func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf)
			if err := w.Send(m); err != nil {
				t.Fatal(err)
			}
			got, err := NewReader(&buf).Read()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Errorf("got %#v\nwant %#v", got, m)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"huge length", []byte{0x7f, 0xff, 0xff, 0xff, byte(TFiles)}},
		{"unknown type", []byte{0, 0, 0, 0, 200}},
		{"truncated payload", []byte{0, 0, 0, 1, byte(TPing)}},
		{"trailing bytes", []byte{0, 0, 0, 2, byte(TPing), 2, 0}},
		{"forged count", []byte{0, 0, 0, 4, byte(TFiles), 0xff, 0xff, 0xff, 0x0f}},
		{"bad bool", []byte{0, 0, 0, 2, byte(TPlan), 1, 7}},
		// One file entry (id 1, kind 1, path "a", size 1, mode 0, mtime 0,
		// no target), then allocations for two entries, or a negative one.
		{"allocations for other entries", []byte{0, 0, 0, 12, byte(TFiles), 1, 1, 1, 1, 'a', 2, 0, 0, 0, 2, 2, 2}},
		{"empty grant", []byte{0, 0, 0, 1, byte(TGrant), 0}},
		// A done with no streams, then congestion controls for one, or
		// a name longer than the kernel's.
		{"congestion controls for other streams", []byte{0, 0, 0, 8, byte(TDone), 0, 0, 0, 0, 0, 1, 1, 'a'}},
		{"congestion control name too long", append([]byte{0, 0, 0, 0x22, byte(TDone), 0, 0, 0, 0, 1,
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 17}, []byte("abcdefghijklmnopq")...)},
		// A done with no streams, an empty congestion-control section,
		// then wire accounts for one stream.
		{"wire accounts for other streams", []byte{0, 0, 0, 9, byte(TDone), 0, 0, 0, 0, 0, 0, 1, 1, 1}},
		// A done with no streams, empty congestion-control and wire
		// sections, then a datagram account for one stream.
		{"datagram accounts for other streams", []byte{0, 0, 0, 11, byte(TDone), 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1}},
		{"empty transport", []byte{0, 0, 0, 1, byte(TTransport), 0}},
		// A bench (no tuning, 1 stream, 1 ns) both ways and reversed,
		// naming a file without reverse, or direct without a file.
		{"bench both ways reversed", []byte{0, 0, 0, 10, byte(TBench), 0, 0, 0, 0, 1, 2, 1, 1, 0, 0}},
		{"bench file without reverse", []byte{0, 0, 0, 11, byte(TBench), 0, 0, 0, 0, 1, 2, 0, 0, 1, 'f', 0}},
		{"bench direct without a file", []byte{0, 0, 0, 10, byte(TBench), 0, 0, 0, 0, 1, 2, 1, 0, 0, 1}},
		{"empty receipt", []byte{0, 0, 0, 2, byte(TReceipt), 1, 0}},
		{"receipt too long", append([]byte{0, 0, 0, 67, byte(TReceipt), 1, 65}, make([]byte, 65)...)},
		{"fault of code 0", []byte{0, 0, 0, 2, byte(TFault), 1, 0}},
		{"error with a fault of 0", []byte{0, 0, 0, 4, byte(TError), 4, 1, 'x', 0}},
		{"error with two faults", []byte{0, 0, 0, 5, byte(TError), 4, 1, 'x', 2, 2}},
		{"negative allocation", []byte{0, 0, 0, 11, byte(TFiles), 1, 1, 1, 1, 'a', 2, 0, 0, 0, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.in)).Read()
			if tc.name == "truncated payload" {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("err = %v, want unexpected EOF", err)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestHello(t *testing.T) {
	h := Hello{MinVersion: 1, MaxVersion: 3, Kind: KindData, Nonce: [NonceSize]byte{5}}
	got, err := ParseHello(AppendHello(nil, h))
	if err != nil || got != h {
		t.Fatalf("got %+v, %v", got, err)
	}
	bad := AppendHello(nil, h)
	copy(bad, "GET ")
	if _, err := ParseHello(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("HTTP opening accepted: %v", err)
	}
}

func TestBlockHeader(t *testing.T) {
	h := BlockHeader{Kind: DataBlock, File: 7, Index: 9, Length: 4096, CRC: 0xabcdef01}
	var b [BlockHeaderSize]byte
	h.Put(b[:])
	got, err := ParseBlockHeader(b[:])
	if err != nil || got != h {
		t.Fatalf("got %+v, %v", got, err)
	}
	b[9] ^= 1 // a damaged index must not pass
	if _, err := ParseBlockHeader(b[:]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("damaged header accepted: %v", err)
	}
}

// FuzzDecode feeds arbitrary bytes to the frame reader: it must never
// panic, and whatever it accepts must encode back to a frame that decodes
// to the same message.
func FuzzDecode(f *testing.F) {
	for _, m := range sampleMsgs() {
		b, _ := Encode(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		for {
			m, err := r.Read()
			if err != nil {
				return
			}
			b, err := Encode(m)
			if err != nil {
				t.Fatalf("re-encode %s: %v", m.Type(), err)
			}
			m2, err := NewReader(bytes.NewReader(b)).Read()
			if err != nil || !reflect.DeepEqual(m, m2) {
				t.Fatalf("re-decode %s: %v", m.Type(), err)
			}
		}
	})
}

// FuzzBlockHeader: no panic, and accepted headers round-trip.
func FuzzBlockHeader(f *testing.F) {
	var b [BlockHeaderSize]byte
	BlockHeader{Kind: DataBlock, File: 1, Index: 2, Length: 3, CRC: 4}.Put(b[:])
	f.Add(b[:])
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := ParseBlockHeader(in)
		if err != nil {
			return
		}
		var out [BlockHeaderSize]byte
		h.Put(out[:])
		if !bytes.Equal(out[:], in) {
			t.Fatalf("round trip differs")
		}
	})
}

// FuzzHello: no panic on any opening.
func FuzzHello(f *testing.F) {
	f.Add(AppendHello(nil, Hello{MinVersion: 1, MaxVersion: 1, Kind: KindControl}))
	f.Fuzz(func(t *testing.T, in []byte) {
		ParseHello(in)
	})
}

// TestFilesVersions checks the two forms of a files frame: a version 1 peer
// writes no allocations and is read as such; a version 2 frame carries them.
func TestFilesVersions(t *testing.T) {
	e := Entry{ID: 1, Kind: EntryFile, Path: "f", Size: 1 << 30, Alloc: 8192}
	v1, err := Encode(&Files{Entries: []Entry{e}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(TFiles, v1[5:])
	if err != nil {
		t.Fatal(err)
	}
	if f := m.(*Files); f.HasAlloc || f.Entries[0].Alloc != 0 {
		t.Errorf("version 1 frame read as %+v", f)
	}
	v2, err := Encode(&Files{Entries: []Entry{e}, HasAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err = Decode(TFiles, v2[5:])
	if err != nil {
		t.Fatal(err)
	}
	if f := m.(*Files); !f.HasAlloc || f.Entries[0].Alloc != 8192 {
		t.Errorf("version 2 frame read as %+v", f)
	}
}

// TestPartVersions checks the version 4 forms: a put without a part and a
// result without file states encode as version 3 peers wrote them (so
// older peers still read every message a whole push sends), and malformed
// parts and file-state sections are refused.
func TestPartVersions(t *testing.T) {
	tr := Transfer{Streams: 1, BlockSize: 4096}
	whole, err := Encode(&Put{Transfer: tr, Dest: "f", Sources: 1})
	if err != nil {
		t.Fatal(err)
	}
	withPart, err := Encode(&Put{Transfer: tr, Dest: "f", Sources: 1, Part: &Part{Offset: 4096, Length: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(withPart[5:], whole[5:]) || len(withPart) <= len(whole) {
		t.Errorf("a part is not a tail after a version 3 put:\n%x\n%x", whole, withPart)
	}
	m, err := Decode(TPut, whole[5:])
	if err != nil || m.(*Put).Part != nil {
		t.Fatalf("version 3 put read as %+v, %v", m, err)
	}
	res := &Result{Items: []ResultItem{{ID: 1, OK: true, CRC: 2}}}
	v3, err := Encode(res)
	if err != nil {
		t.Fatal(err)
	}
	res.HasPart = true
	v4, err := Encode(res)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(v4[5:], v3[5:]) || len(v4) <= len(v3) {
		t.Errorf("file states are not a tail after a version 3 result")
	}
	if m, err := Decode(TResult, v3[5:]); err != nil || m.(*Result).HasPart {
		t.Fatalf("version 3 result read as %+v, %v", m, err)
	}
	for _, tc := range []struct {
		name string
		typ  Type
		b    []byte
	}{
		{"empty part", TPut, append(withPart[5:len(withPart)-1:len(withPart)-1], 0)},
		{"negative part", TPut, append(withPart[5:len(withPart)-1:len(withPart)-1], 1)},
		{"file states for other items", TResult, append(v3[5:len(v3):len(v3)], 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0)},
	} {
		if _, err := Decode(tc.typ, tc.b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", tc.name, err)
		}
	}
}

// TestFaultCodes: every fault has its own code and reads back as itself;
// a code of a later version reads as internal, none as none.
func TestFaultCodes(t *testing.T) {
	seen := map[uint8]bool{}
	for _, f := range retry.Faults {
		c := FaultCode(f)
		if c == 0 || seen[c] {
			t.Errorf("fault %q: code %d (zero or taken)", f, c)
		}
		seen[c] = true
		if FaultOfCode(c) != f {
			t.Errorf("code %d reads as %q, want %q", c, FaultOfCode(c), f)
		}
	}
	if FaultOfCode(0) != "" || FaultCode("") != 0 {
		t.Error("no fault is not code 0")
	}
	if FaultOfCode(200) != retry.FaultInternal || FaultCode("disk-on-fire") != FaultInternal {
		t.Error("an unknown fault is not internal")
	}
}

// TestErrorWithoutFault: an Error without a fault encodes as before
// version VersionFault (an older peer reads it).
func TestErrorWithoutFault(t *testing.T) {
	b, err := Encode(&Error{Code: CodeRefused, Msg: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0, 3, byte(TError), CodeRefused, 1, 'x'}; !bytes.Equal(b, want) {
		t.Fatalf("encoded % x, want % x", b, want)
	}
}
