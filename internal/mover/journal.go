package mover

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/lightpath/lightpath/internal/wire"
)

// A journal sits beside a partial file and records each block that has been
// written and checked, so a later run asks only for the rest. Its header
// names the source version (size, modification time, block size); a journal
// for another version is discarded with its partial file. Records are
// appended without fsync: a killed process loses nothing the page cache
// holds, and on resume the receiver re-checks the blocks it claims against
// their recorded CRCs before offering them, so a crash of the machine itself
// costs a re-send, never a wrong byte.
type journal struct {
	f *os.File
}

var journalMagic = [4]byte{'L', 'P', 'J', '1'}

const journalHeader = 4 + 8 + 8 + 4

func journalHeaderBytes(e wire.Entry, blockSize int64) []byte {
	b := make([]byte, 0, journalHeader)
	b = append(b, journalMagic[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Size))
	b = binary.BigEndian.AppendUint64(b, uint64(e.MTime))
	return binary.BigEndian.AppendUint32(b, uint32(blockSize))
}

// createJournal starts a journal for a fresh partial file.
func createJournal(root opener, name string, e wire.Entry, blockSize int64) (*journal, error) {
	f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create journal: %w", err)
	}
	if _, err := f.Write(journalHeaderBytes(e, blockSize)); err != nil {
		f.Close()
		return nil, fmt.Errorf("write journal: %w", err)
	}
	return &journal{f: f}, nil
}

// openJournal reads an existing journal. It returns the blocks it records
// (the last record for an index wins) and the journal ready for appending,
// or ok false when there is none or it belongs to another source version.
func openJournal(root opener, name string, e wire.Entry, blockSize int64, nblocks int) (*journal, map[uint32]uint32, bool) {
	f, err := root.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, journalHeader+int64(nblocks)*8*4+8))
	if err != nil || len(b) < journalHeader || string(b[:journalHeader]) != string(journalHeaderBytes(e, blockSize)) {
		f.Close()
		return nil, nil, false
	}
	have := map[uint32]uint32{}
	recs := b[journalHeader:]
	whole := len(recs) / 8 * 8
	for i := 0; i < whole; i += 8 {
		idx := binary.BigEndian.Uint32(recs[i:])
		if int(idx) < nblocks {
			have[idx] = binary.BigEndian.Uint32(recs[i+4:])
		}
	}
	// Drop a torn last record so appends stay aligned.
	if err := f.Truncate(int64(journalHeader + whole)); err != nil {
		f.Close()
		return nil, nil, false
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, nil, false
	}
	return &journal{f: f}, have, true
}

// record appends one completed block.
func (j *journal) record(index, crc uint32) error {
	var b [8]byte
	binary.BigEndian.PutUint32(b[:], index)
	binary.BigEndian.PutUint32(b[4:], crc)
	_, err := j.f.Write(b[:])
	return err
}

func (j *journal) close() error { return j.f.Close() }
