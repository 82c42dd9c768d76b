package repo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/lightpath/lightpath/internal/monitor"
)

// The repository's write-ahead log: a directory of numbered segment files,
// each a run of records [length uint32 LE][crc32c uint32 LE][payload]. A
// checkpoint starts a new segment, writes every series' state to SQLite
// and then deletes the segments before it, so the log holds what came after
// the last completed checkpoint. A torn record (a crash in mid-write) ends
// its segment's replay; later segments were started after a restart or a
// checkpoint and are read in full.

var crcTable = crc32.MakeTable(crc32.Castagnoli)

const (
	recSeries = 'S' // id, name, labels: a series created since the last checkpoint
	recMeta   = 'M' // name, type, help
	recData   = 'D' // count, then (id, t delta, value bits) per sample
)

type wal struct {
	dir string
	seq uint64 // current segment number
	f   *os.File
}

func segName(dir string, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%016d.seg", seq))
}

// segments lists the segment numbers in dir, in order.
func segments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".seg")
		if !ok {
			continue
		}
		s, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			continue
		}
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs, nil
}

// openSegment starts segment seq for writing.
func (w *wal) openSegment(seq uint64) error {
	f, err := os.OpenFile(segName(w.dir, seq), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("open wal segment: %w", err)
	}
	// The new file's directory entry must survive a crash too.
	if d, err := os.Open(w.dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	w.f, w.seq = f, seq
	return nil
}

// rotate closes the current segment and starts the next; it returns the
// number of the new one (segments before it may be deleted once their
// contents are checkpointed).
func (w *wal) rotate() (uint64, error) {
	if err := w.f.Sync(); err != nil {
		return 0, fmt.Errorf("sync wal segment: %w", err)
	}
	if err := w.f.Close(); err != nil {
		return 0, fmt.Errorf("close wal segment: %w", err)
	}
	if err := w.openSegment(w.seq + 1); err != nil {
		return 0, err
	}
	return w.seq, nil
}

// removeBefore deletes the segments numbered below seq.
func (w *wal) removeBefore(seq uint64) error {
	seqs, err := segments(w.dir)
	if err != nil {
		return fmt.Errorf("list wal: %w", err)
	}
	for _, s := range seqs {
		if s < seq {
			if err := os.Remove(segName(w.dir, s)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove wal segment: %w", err)
			}
		}
	}
	return nil
}

// bytes is the size of the segments on disk.
func (w *wal) bytes() int64 {
	seqs, _ := segments(w.dir)
	var n int64
	for _, s := range seqs {
		if fi, err := os.Stat(segName(w.dir, s)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// frame appends the header of a record whose payload is b[start+8:].
func frame(b []byte, start int) {
	p := b[start+8:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(p, crcTable))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func encSeries(b []byte, id int64, name string, ls monitor.Labels) []byte {
	start := len(b)
	b = append(b, make([]byte, 8)...)
	b = append(b, recSeries)
	b = binary.AppendUvarint(b, uint64(id))
	b = appendString(b, name)
	b = binary.AppendUvarint(b, uint64(len(ls)))
	for _, l := range ls {
		b = appendString(b, l.Name)
		b = appendString(b, l.Value)
	}
	frame(b, start)
	return b
}

func encMeta(b []byte, name string, m monitor.Meta) []byte {
	start := len(b)
	b = append(b, make([]byte, 8)...)
	b = append(b, recMeta)
	b = appendString(b, name)
	b = appendString(b, string(m.Type))
	b = appendString(b, m.Help)
	frame(b, start)
	return b
}

type walSample struct {
	id int64
	t  int64
	v  float64
}

func encData(b []byte, ss []walSample) []byte {
	start := len(b)
	b = append(b, make([]byte, 8)...)
	b = append(b, recData)
	b = binary.AppendUvarint(b, uint64(len(ss)))
	var prev int64
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(s.id))
		b = binary.AppendVarint(b, s.t-prev)
		prev = s.t
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.v))
	}
	frame(b, start)
	return b
}

// decoder reads one record's payload.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorruptRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCorruptRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errCorruptRecord
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) u64() uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.err = errCorruptRecord
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

var errCorruptRecord = errors.New("corrupt wal record")

// walVisitor receives the records of a replay.
type walVisitor struct {
	series func(id int64, name string, ls monitor.Labels)
	meta   func(name string, m monitor.Meta)
	data   func(ss []walSample)
}

// replaySegment reads one segment; it stops quietly at a torn or corrupt
// tail and says so in torn.
func replaySegment(path string, v walVisitor) (torn bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("read wal segment: %w", err)
	}
	if err := parseRecords(b, v); err != nil {
		if errors.Is(err, errCorruptRecord) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// parseRecords hands the records of one segment's bytes to v, in order.
// The first record that is torn, fails its checksum or does not decode
// exactly ends the parse with an error wrapping errCorruptRecord; the
// records before it have been handed over.
func parseRecords(b []byte, v walVisitor) error {
	var ss []walSample
	for off := 0; len(b) > 0; {
		if len(b) < 8 {
			return fmt.Errorf("%w: %d bytes of a header at offset %d", errCorruptRecord, len(b), off)
		}
		n := binary.LittleEndian.Uint32(b)
		sum := binary.LittleEndian.Uint32(b[4:])
		if uint64(n) > uint64(len(b)-8) {
			return fmt.Errorf("%w: record of %d bytes at offset %d, %d left", errCorruptRecord, n, off, len(b)-8)
		}
		p := b[8 : 8+n]
		if len(p) == 0 || crc32.Checksum(p, crcTable) != sum {
			return fmt.Errorf("%w: bad checksum at offset %d", errCorruptRecord, off)
		}
		b = b[8+n:]
		if err := parseRecord(p, v, &ss); err != nil {
			return fmt.Errorf("%w at offset %d", err, off)
		}
		off += 8 + int(n)
	}
	return nil
}

// parseRecord decodes one checksummed payload; ss is scratch space.
func parseRecord(p []byte, v walVisitor, ss *[]walSample) error {
	d := &decoder{b: p[1:]}
	switch p[0] {
	case recSeries:
		u := d.uvarint()
		name := d.str()
		nl := d.uvarint()
		if d.err != nil || u > math.MaxInt64 || nl > monitor.MaxLabels+1 {
			return errCorruptRecord
		}
		ls := make(monitor.Labels, 0, nl)
		for range nl {
			ln := d.str()
			lv := d.str()
			ls = append(ls, monitor.Label{Name: ln, Value: lv})
		}
		if d.err != nil || len(d.b) != 0 {
			return errCorruptRecord
		}
		v.series(int64(u), name, ls)
	case recMeta:
		name, typ, help := d.str(), d.str(), d.str()
		if d.err != nil || len(d.b) != 0 {
			return errCorruptRecord
		}
		v.meta(name, monitor.Meta{Type: monitor.Type(typ), Help: help})
	case recData:
		cnt := d.uvarint()
		// A sample takes at least 10 bytes (id, delta, 8 of value).
		if d.err != nil || cnt > uint64(len(d.b)/10) {
			return errCorruptRecord
		}
		*ss = (*ss)[:0]
		var prev int64
		for range cnt {
			u := d.uvarint()
			t := prev + d.varint()
			prev = t
			val := math.Float64frombits(d.u64())
			if u > math.MaxInt64 {
				return errCorruptRecord
			}
			*ss = append(*ss, walSample{int64(u), t, val})
		}
		if d.err != nil || len(d.b) != 0 {
			return errCorruptRecord
		}
		v.data(*ss)
	default:
		return fmt.Errorf("%w: unknown record type %q", errCorruptRecord, p[0])
	}
	return nil
}
