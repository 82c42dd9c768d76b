package mover

import (
	"bytes"
	"context"
	"io"
	"math"
	"net"
	"os"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/checksum"
	"github.com/lightpath/lightpath/internal/wire"
)

// frames encodes msgs back to back, as a sender would write them.
func frames(msgs ...wire.Msg) []byte {
	var b bytes.Buffer
	for _, m := range msgs {
		f, err := wire.Encode(m)
		if err != nil {
			panic(err)
		}
		b.Write(f)
	}
	return b.Bytes()
}

func blockFrame(kind uint8, file, index, length, crc uint32, payload []byte) []byte {
	var h [wire.BlockHeaderSize]byte
	wire.BlockHeader{Kind: kind, File: file, Index: index, Length: length, CRC: crc}.Put(h[:])
	return append(h[:], payload...)
}

// runFuzzReceiver runs a receiver into a fresh directory, fed ctrl as its
// control connection and data as its one data stream, and fails if it
// panics (the test binary dies) or does not return.
func runFuzzReceiver(t *testing.T, opts byte, ctrlIn, dataIn []byte) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	cs, cc := net.Pipe()
	ds, dc := net.Pipe()
	defer cc.Close()
	defer dc.Close()
	go io.Copy(io.Discard, cc) // the receiver's answers
	go func() {
		cc.Write(ctrlIn)
		cc.Close()
	}()
	go func() {
		dc.Write(dataIn)
		dc.Close()
	}()
	l := &link{ctrl: newCtrl(cs, nil), data: []*dataConn{newDataConn(ds, nil)}, blockSize: 4096,
		stall: 5 * time.Second, prog: &Progress{}, opts: wire.Transfer{Policy: opts % 4, Adler32: opts&4 != 0}}
	if opts&8 != 0 {
		// A part push: blocks (opts>>4)&3 on, 1 to 4 of them.
		l.part = &wire.Part{Offset: int64(opts>>4&3) * 4096, Length: 4096 * int64(1+opts>>6)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runReceiver(ctx, l, Dest{Root: root, Base: ".", Locks: NewPathLocks()})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // its context ends at 3 s: this only bounds a hang
		t.Fatalf("the receiver did not return")
	}
}

// FuzzReceiver feeds whole manifests and data streams, not single frames,
// into the receiving engine: whatever a peer sends (sizes up to 2^63-1,
// blocks out of range, plans and file ends out of order), the receiver
// answers or fails the session; it never panics, hangs or allocates by
// announced size.
func FuzzReceiver(f *testing.F) {
	file := func(id uint32, path string, size int64) wire.Entry {
		return wire.Entry{ID: id, Kind: wire.EntryFile, Path: path, Size: size, Mode: 0o644}
	}
	payload := bytes.Repeat([]byte("x"), 4096)
	crc := checksum.CRC32C(payload)
	f.Add(byte(0), frames(&wire.Files{Entries: []wire.Entry{file(1, "huge", math.MaxInt64)}}, &wire.ManifestEnd{Count: 1}), []byte{})
	f.Add(byte(1), frames(&wire.Files{Entries: []wire.Entry{file(1, "a", 1<<40), file(2, "b", 1<<40), file(3, "c", 1<<40), file(4, "d", 1<<40)}, HasAlloc: true}), []byte{})
	f.Add(byte(4), frames(&wire.Files{Entries: []wire.Entry{file(1, "f", 4096)}}, &wire.ManifestEnd{Count: 1},
		&wire.FileEnd{Items: []wire.FileEndItem{{ID: 1, CRC: crc}}}, &wire.Done{}),
		append(blockFrame(wire.DataBlock, 1, 0, 4096, crc, payload), blockFrame(wire.DataEnd, 0, 0, 0, 0, nil)...))
	f.Add(byte(2), frames(&wire.Files{Entries: []wire.Entry{
		{ID: 1, Kind: wire.EntryDir, Path: "t", Mode: 0o755},
		{ID: 2, Kind: wire.EntrySymlink, Path: "t/L", Target: ".."},
		{ID: 3, Kind: wire.EntrySymlink, Path: "t/x", Target: "L/../../outside"},
		file(4, "t/L/y", 10),
	}}, &wire.Plan{ID: 4, Fresh: true}, &wire.FileEnd{Items: []wire.FileEndItem{{ID: 4, Abort: "gone"}}}, &wire.Done{}),
		blockFrame(wire.DataBlock, 4, 7, 4096, 0, payload))
	f.Add(byte(3), frames(&wire.Files{Entries: []wire.Entry{file(1, "f", 1<<33)}}, &wire.Plan{ID: 1}, &wire.Resend{ID: 1}),
		blockFrame(wire.DataHole, 1, math.MaxUint32, 4096, 0, nil))
	// Part pushes (opts&8): block 1 of a three-block file, sent right, then
	// blocks outside the part and a second file.
	f.Add(byte(8|1<<4), frames(&wire.Files{Entries: []wire.Entry{file(1, "p", 3*4096)}}, &wire.ManifestEnd{Count: 1},
		&wire.FileEnd{Items: []wire.FileEndItem{{ID: 1, CRC: crc}}}, &wire.Done{}),
		append(blockFrame(wire.DataBlock, 1, 1, 4096, crc, payload), blockFrame(wire.DataEnd, 0, 0, 0, 0, nil)...))
	f.Add(byte(8|4|1<<4|1<<6), frames(&wire.Files{Entries: []wire.Entry{file(1, "p", 3*4096+1), file(2, "q", 4096),
		{ID: 3, Kind: wire.EntryDir, Path: "d"}}}, &wire.Plan{ID: 1}, &wire.FileEnd{Items: []wire.FileEndItem{{ID: 1, CRC: crc}}}),
		append(blockFrame(wire.DataBlock, 1, 0, 4096, crc, payload), blockFrame(wire.DataHole, 1, 2, 4096, 0, nil)...))
	f.Fuzz(func(t *testing.T, opts byte, ctrlIn, dataIn []byte) {
		runFuzzReceiver(t, opts, ctrlIn, dataIn)
	})
}
