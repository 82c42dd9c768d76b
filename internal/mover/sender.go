package mover

import (
	"context"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/checksum"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/wire"
)

// Source is what a sender reads: top-level items, each beneath a root that
// no path may leave.
type Source struct {
	Items []SourceItem
	// Exclude lists manifest paths not to send (files an earlier attempt of
	// the same command already delivered).
	Exclude map[string]bool
}

// SourceItem is one top-level source.
type SourceItem struct {
	Root *os.Root
	Path string // within Root
	Name string // its name in the manifest (the first path component)
}

// partSuffix and journalSuffix name a receiver's work files; a sender never
// sends them (they are half-received files, not data).
const (
	partSuffix    = ".lightpath-part"
	journalSuffix = ".lightpath-journal"
)

func isWorkFile(name string) bool {
	return strings.HasSuffix(name, partSuffix) || strings.HasSuffix(name, journalSuffix)
}

// maxResends bounds how often one block is sent again before its file is
// given up.
const maxResends = 5

// sfile is a file on the sender's side.
type sfile struct {
	e       wire.Entry
	root    *os.Root
	src     string // path within the source root
	nblocks int
	// lo and hi bound the blocks to send: all of them, or a part's.
	lo, hi uint32

	mu       sync.Mutex
	f        *os.File
	refs     int
	crcs     []uint32
	adlers   []uint32
	left     int // blocks still to send before the file end can go
	resends  map[uint32]int
	resolved bool
	ended    bool
	failed   string
	// fault is the class of failed: the sender gave the file up.
	fault retry.Fault
}

// job is one block to send.
type job struct {
	f     *sfile
	index uint32
}

// queue hands blocks to the streams: resends first, then files in the order
// the receiver asked for them.
type queue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	resend  []job
	ranges  []blockRange
	closed  bool
	stopped bool
}

type blockRange struct {
	f       *sfile
	next    uint32
	end     uint32
	indexes []uint32 // explicit list (resumed files); nil for a plain range
}

func newQueue() *queue {
	q := &queue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *queue) push(r blockRange) {
	q.mu.Lock()
	q.ranges = append(q.ranges, r)
	q.mu.Unlock()
	q.cond.Broadcast() // a range holds work for every stream
}

func (q *queue) pushResend(j job) {
	q.mu.Lock()
	q.resend = append(q.resend, j)
	q.mu.Unlock()
	q.cond.Signal()
}

// close says no more work will come once what is queued is done.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// stop abandons the queue.
func (q *queue) stop() {
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// next returns the next block, or false when the queue is closed and empty
// or stopped.
func (q *queue) next() (job, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.stopped {
			return job{}, false
		}
		if len(q.resend) > 0 {
			j := q.resend[0]
			q.resend = q.resend[1:]
			return j, true
		}
		for len(q.ranges) > 0 {
			r := &q.ranges[0]
			if r.indexes != nil {
				if len(r.indexes) > 0 {
					j := job{f: r.f, index: r.indexes[0]}
					r.indexes = r.indexes[1:]
					return j, true
				}
			} else if r.next < r.end {
				j := job{f: r.f, index: r.next}
				r.next++
				return j, true
			}
			q.ranges = q.ranges[1:]
		}
		if q.closed {
			return job{}, false
		}
		q.cond.Wait()
	}
}

// sender runs the sending end of a session.
type sender struct {
	l   *link
	src Source

	mu       sync.Mutex
	files    []*sfile
	manifest bool // the whole manifest has been sent
	open     int  // files without a verdict yet
	srcErrs  []string
	unread   []SourceError
	allDone  chan struct{}
	doneOnce sync.Once

	// receipts are the receiver's receipts of files not yet given their
	// verdict, by file id.
	receipts map[uint32][]byte
	// faults are the receiver's classes of the failures of files not yet
	// given their verdict, by file id.
	faults map[uint32]retry.Fault

	dirs    []fs.FileInfo // the directories being walked, outermost first (--symlinks follow meets no cycle)
	q       *queue
	ioWait  atomic.Int64
	netWait atomic.Int64
	start   time.Time
}

// SendResult is the sender's account of a session.
type SendResult struct {
	Local  wire.Stats // this end (the streams' transport statistics)
	Remote wire.Stats // the receiver's account
	Errors []string   // sources that could not be read
	// Unread are those sources, each with its reason and class.
	Unread []SourceError
}

// SourceError is a source a sender could not read: its path, why, and the
// class of the failure.
type SourceError struct {
	Path, Reason string
	Fault        retry.Fault
}

// runSender drives a session from the sending end until every file has a
// verdict, then exchanges accounts with the receiver.
func runSender(ctx context.Context, l *link, src Source) (SendResult, error) {
	s := &sender{l: l, src: src, q: newQueue(), allDone: make(chan struct{}), start: time.Now()}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	flushDone := make(chan struct{})
	defer close(flushDone)
	go l.ctrl.flusher(flushDone)
	go l.keepalive(flushDone)

	var wg sync.WaitGroup
	errc := make(chan error, len(l.data)+3)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
		cancel()
	}
	go func() {
		<-ctx.Done()
		s.q.stop()
		l.stop()
	}()

	for i, d := range l.data {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.stream(ctx, d); err != nil {
				fail(fmt.Errorf("data stream %d: %w", i, err))
			}
		}()
	}
	go func() {
		if err := s.walk(ctx); err != nil {
			fail(err)
		}
	}()
	readDone := make(chan wire.Stats, 1)
	go func() {
		st, err := s.readLoop(ctx)
		if err != nil {
			fail(err)
			return
		}
		readDone <- st
	}()

	select {
	case <-s.allDone:
	case err := <-errc:
		return SendResult{}, err
	case <-ctx.Done():
		select {
		case err := <-errc:
			return SendResult{}, err
		default:
		}
		return SendResult{}, ctx.Err()
	}
	// Every file has a verdict: end the streams and exchange accounts.
	s.q.close()
	wg.Wait()
	select {
	case err := <-errc:
		return SendResult{}, err
	default:
	}
	local := s.stats()
	if err := l.ctrl.send(&wire.Done{Stats: local}); err != nil {
		return SendResult{}, fmt.Errorf("send done: %w", err)
	}
	select {
	case remote := <-readDone:
		return SendResult{Local: local, Remote: remote, Errors: s.srcErrs, Unread: s.unread}, nil
	case err := <-errc:
		return SendResult{}, err
	}
}

func (s *sender) stats() wire.Stats {
	st := wire.Stats{
		Elapsed: int64(time.Since(s.start)),
		IOWait:  s.ioWait.Load(),
		NetWait: s.netWait.Load(),
	}
	s.l.accounts(&st)
	return st
}

func (s *sender) checkDone() {
	s.mu.Lock()
	done := s.manifest && s.open == 0
	s.mu.Unlock()
	if done {
		s.doneOnce.Do(func() { close(s.allDone) })
	}
}

// walk enumerates the sources and sends the manifest in batches.
func (s *sender) walk(ctx context.Context) error {
	var batch []wire.Entry
	batchBytes := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := s.l.ctrl.queue(&wire.Files{Entries: batch, HasAlloc: s.l.ctrl.version >= wire.VersionAlloc})
		batch, batchBytes = nil, 0
		return err
	}
	srcError := func(p string, err error) error {
		s.mu.Lock()
		s.srcErrs = append(s.srcErrs, fmt.Sprintf("%s: %v", p, err))
		s.unread = append(s.unread, SourceError{Path: p, Reason: err.Error(), Fault: faultOrInternal(FaultOf(err))})
		s.mu.Unlock()
		return s.l.ctrl.queue(&wire.SrcError{Path: p, Reason: err.Error()})
	}
	add := func(root *os.Root, e wire.Entry, src string) error {
		if e.Kind != wire.EntryDir && s.src.Exclude[e.Path] {
			return nil
		}
		s.mu.Lock()
		e.ID = uint32(len(s.files))
		f := &sfile{e: e, root: root, src: src}
		total := e.Size
		if e.Kind == wire.EntryFile {
			f.nblocks = int((e.Size + s.l.blockSize - 1) / s.l.blockSize)
			f.lo, f.hi = 0, uint32(f.nblocks)
			if p := s.l.part; p != nil {
				lo, hi, err := partBlocks(p, e.Size, s.l.blockSize)
				if err != nil {
					s.mu.Unlock()
					return srcError(src, err)
				}
				f.lo, f.hi, total = lo, hi, p.Length
			}
			f.crcs = make([]uint32, f.nblocks)
			if s.l.opts.Adler32 {
				f.adlers = make([]uint32, f.nblocks)
			}
		} else if s.l.part != nil {
			s.mu.Unlock()
			return srcError(src, errors.New("a part push carries one regular file"))
		}
		s.files = append(s.files, f)
		if e.Kind != wire.EntryDir {
			s.open++
		}
		s.mu.Unlock()
		if e.Kind != wire.EntryDir {
			s.l.prog.FilesTotal.Add(1)
			s.l.prog.BytesTotal.Add(total)
		}
		batch = append(batch, e)
		batchBytes += len(e.Path) + len(e.Target) + 32
		if batchBytes > 256<<10 || len(batch) >= 1024 {
			return flush()
		}
		return nil
	}

	for _, it := range s.src.Items {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A top-level source that is a symlink is followed, as cp does.
		fi, err := it.Root.Stat(it.Path)
		if err != nil {
			if err := srcError(it.Path, cleanPathError(err)); err != nil {
				return err
			}
			continue
		}
		if fi.IsDir() && !s.l.opts.Recursive {
			if err := srcError(it.Path, errors.New("is a directory (use -r to copy trees)")); err != nil {
				return err
			}
			continue
		}
		if Excluded(s.l.opts.Select.Rules, it.Name, fi.IsDir()) {
			continue
		}
		err = s.walkItem(ctx, it.Root, it.Path, it.Name, fi, true, add, srcError)
		if err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	s.mu.Lock()
	n := len(s.files)
	s.mu.Unlock()
	if err := s.l.ctrl.queue(&wire.ManifestEnd{Count: uint32(n)}); err != nil {
		return err
	}
	s.mu.Lock()
	s.manifest = true
	s.mu.Unlock()
	s.checkDone()
	return nil
}

func (s *sender) walkItem(ctx context.Context, root *os.Root, src, name string, fi fs.FileInfo, top bool,
	add func(*os.Root, wire.Entry, string) error, srcError func(string, error) error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e := wire.Entry{Path: name, Mode: uint32(fi.Mode().Perm()), MTime: fi.ModTime().UnixNano()}
	switch {
	case fi.Mode().IsRegular():
		e.Kind = wire.EntryFile
		e.Size, e.Alloc = fi.Size(), allocated(fi)
		return add(root, e, src)
	case fi.Mode()&fs.ModeSymlink != 0:
		switch s.l.opts.Select.Symlinks {
		case wire.LinksSkip:
			return nil
		case wire.LinksFollow:
			// The target as if it were here, when it can be reached within
			// the root (os.Root keeps a server's walk inside what it serves);
			// otherwise the link goes as under copy, whose rules then apply.
			if tfi, err := root.Stat(src); err == nil && (tfi.Mode().IsRegular() || tfi.IsDir() && !s.walking(tfi)) {
				return s.walkItem(ctx, root, src, name, tfi, top, add, srcError)
			}
		}
		t, err := root.Readlink(src)
		if err != nil {
			return srcError(src, cleanPathError(err))
		}
		e.Kind = wire.EntrySymlink
		e.Target = t
		return add(root, e, src)
	case fi.IsDir():
		e.Kind = wire.EntryDir
		if err := add(root, e, src); err != nil {
			return err
		}
		s.dirs = append(s.dirs, fi)
		defer func() { s.dirs = s.dirs[:len(s.dirs)-1] }()
		d, err := root.Open(src)
		if err != nil {
			return srcError(src, cleanPathError(err))
		}
		ents, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			return srcError(src, cleanPathError(err))
		}
		slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, de := range ents {
			if isWorkFile(de.Name()) {
				continue
			}
			if Excluded(s.l.opts.Select.Rules, name+"/"+de.Name(), de.IsDir()) {
				continue // an excluded directory is not entered
			}
			child := path.Join(src, de.Name())
			cfi, err := root.Lstat(child)
			if err != nil {
				if err := srcError(child, cleanPathError(err)); err != nil {
					return err
				}
				continue
			}
			if err := s.walkItem(ctx, root, child, name+"/"+de.Name(), cfi, false, add, srcError); err != nil {
				return err
			}
		}
		return nil
	default:
		if top {
			return srcError(src, fmt.Errorf("not a regular file, directory or symlink (%s)", fi.Mode().Type()))
		}
		return nil // sockets, devices and pipes inside a tree are not data
	}
}

// walking reports whether dir is one of the directories being walked: a
// followed link to it would walk it again and again.
func (s *sender) walking(dir fs.FileInfo) bool {
	for _, d := range s.dirs {
		if os.SameFile(d, dir) {
			return true
		}
	}
	return false
}

// readLoop handles the receiver's messages until its Done.
func (s *sender) readLoop(ctx context.Context) (wire.Stats, error) {
	for {
		m, err := s.l.readCtrl()
		if err != nil {
			return wire.Stats{}, fmt.Errorf("control: %w", err)
		}
		switch m := m.(type) {
		case *wire.Need:
			for _, it := range m.Items {
				if err := s.need(ctx, it); err != nil {
					return wire.Stats{}, err
				}
			}
		case *wire.Result:
			for _, it := range m.Items {
				if err := s.result(it); err != nil {
					return wire.Stats{}, err
				}
			}
		case *wire.Receipt:
			if err := s.receipt(m); err != nil {
				return wire.Stats{}, err
			}
		case *wire.Fault:
			if err := s.fault(m); err != nil {
				return wire.Stats{}, err
			}
		case *wire.Resend:
			if err := s.resend(m); err != nil {
				return wire.Stats{}, err
			}
		case *wire.Ping:
			if err := s.l.ctrl.queue(&wire.Pong{Stamp: m.Stamp}); err != nil {
				return wire.Stats{}, err
			}
		case *wire.Pong:
		case *wire.Done:
			return m.Stats, nil
		default:
			return wire.Stats{}, fmt.Errorf("%w: unexpected %s from the receiver", wire.ErrMalformed, m.Type())
		}
	}
}

func (s *sender) file(id uint32) (*sfile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(id) >= len(s.files) {
		return nil, fmt.Errorf("%w: unknown file id %d", wire.ErrMalformed, id)
	}
	return s.files[id], nil
}

func (s *sender) resolve(f *sfile) {
	f.mu.Lock()
	already := f.resolved
	f.resolved = true
	f.mu.Unlock()
	if already {
		return
	}
	s.mu.Lock()
	s.open--
	s.mu.Unlock()
	s.checkDone()
}

func (s *sender) need(ctx context.Context, it wire.NeedItem) error {
	f, err := s.file(it.ID)
	if err != nil {
		return err
	}
	if f.e.Kind == wire.EntryDir {
		return nil
	}
	switch it.Action {
	case wire.NeedFail:
		s.l.fileResult(FileResult{Path: f.e.Path, Size: f.e.Size, Reason: it.Reason, Fault: s.takeFault(it.ID)})
		s.resolve(f)
	case wire.NeedSkip:
		s.l.prog.BytesSkipped.Add(s.partBytes(f))
		// A part's file, left alone under the policy, is in place.
		s.l.fileResult(FileResult{Path: f.e.Path, Size: f.e.Size, Skipped: true, OK: true, Reason: it.Reason, Complete: true, Receipt: s.takeReceipt(it.ID)})
		s.resolve(f)
	case wire.NeedAll:
		if f.e.Kind != wire.EntryFile {
			return nil // symlinks need nothing more; their verdict follows
		}
		s.schedule(f, nil)
	case wire.NeedSome:
		if f.e.Kind != wire.EntryFile {
			return fmt.Errorf("%w: partial need for a non-file", wire.ErrMalformed)
		}
		// Check the receiver's blocks against the source off the control
		// path: it reads them from disk.
		go func() {
			fresh, err := s.verifyHave(f, it.Have)
			if err != nil {
				s.abort(f, err)
				return
			}
			if err := s.l.ctrl.queue(&wire.Plan{ID: f.e.ID, Fresh: fresh}); err != nil {
				return
			}
			if fresh {
				s.schedule(f, nil)
				return
			}
			have := make(map[uint32]bool, len(it.Have))
			var held int64
			for _, h := range it.Have {
				have[h.Index] = true
				held += s.blockLen(f, h.Index)
			}
			s.l.prog.BytesSkipped.Add(held)
			missing := []uint32{} // non-nil: an empty list means nothing to send
			for i := f.lo; i < f.hi; i++ {
				if !have[i] {
					missing = append(missing, i)
				}
			}
			s.schedule(f, missing)
		}()
	}
	return nil
}

// partBytes is what a file's verdict covers: its size, or its part's.
func (s *sender) partBytes(f *sfile) int64 {
	if s.l.part != nil {
		return s.l.part.Length
	}
	return f.e.Size
}

// partBlocks turns a part into the blocks [lo, hi) of a file of size bytes,
// refusing one that is not on block boundaries or not within the file.
func partBlocks(p *wire.Part, size, blockSize int64) (lo, hi uint32, err error) {
	end := p.Offset + p.Length
	switch {
	case p.Offset < 0 || p.Length <= 0 || p.Offset > size-p.Length:
		return 0, 0, fmt.Errorf("part %d+%d lies outside the file's %d bytes", p.Offset, p.Length, size)
	case p.Offset%blockSize != 0 || end%blockSize != 0 && end != size:
		return 0, 0, fmt.Errorf("part %d+%d is not on blocks of %d bytes", p.Offset, p.Length, blockSize)
	}
	return uint32(p.Offset / blockSize), uint32((end + blockSize - 1) / blockSize), nil
}

func (s *sender) blockLen(f *sfile, index uint32) int64 {
	off := int64(index) * s.l.blockSize
	return min(s.l.blockSize, f.e.Size-off)
}

// schedule queues a file's blocks: all of them (missing nil) or the listed
// ones. A file with nothing left to send gets its end at once.
func (s *sender) schedule(f *sfile, missing []uint32) {
	f.mu.Lock()
	if missing == nil {
		f.left = int(f.hi - f.lo)
	} else {
		f.left = len(missing)
	}
	left := f.left
	f.mu.Unlock()
	if left == 0 {
		s.fileEnd(f)
		return
	}
	if missing == nil {
		s.q.push(blockRange{f: f, next: f.lo, end: f.hi})
	} else {
		s.q.push(blockRange{f: f, indexes: missing})
	}
}

// verifyHave reads the source blocks the receiver says it holds and reports
// whether the file must start afresh (any block differs: the source changed).
func (s *sender) verifyHave(f *sfile, have []wire.BlockSum) (fresh bool, err error) {
	fd, err := f.root.Open(f.src)
	if err != nil {
		return false, cleanPathError(err)
	}
	defer fd.Close()
	if err := sameFile(fd, f.e); err != nil {
		return false, err
	}
	buf := make([]byte, s.l.blockSize)
	for _, h := range have {
		if h.Index < f.lo || h.Index >= f.hi {
			return true, nil
		}
		n := s.blockLen(f, h.Index)
		b := buf[:n]
		if _, err := fd.ReadAt(b, int64(h.Index)*s.l.blockSize); err != nil {
			return false, fmt.Errorf("read %s: %w", f.e.Path, err)
		}
		c := checksum.CRC32C(b)
		if c != h.CRC {
			return true, nil
		}
		f.mu.Lock()
		f.crcs[h.Index] = c
		if f.adlers != nil {
			f.adlers[h.Index] = adler32.Checksum(b)
		}
		f.mu.Unlock()
	}
	return false, nil
}

// sameFile checks that an open source still matches its manifest entry.
func sameFile(fd *os.File, e wire.Entry) error {
	fi, err := fd.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != e.Size || fi.ModTime().UnixNano() != e.MTime {
		return errors.New("source changed during the transfer")
	}
	return nil
}

// abort gives a file up. It is sent even after the file's end went out (a
// block that keeps arriving damaged is found only then), so the receiver
// always reaches a verdict.
func (s *sender) abort(f *sfile, err error) {
	reason := err.Error()
	f.mu.Lock()
	if f.failed != "" {
		f.mu.Unlock()
		return
	}
	f.ended = true
	f.failed, f.fault = reason, faultOrInternal(FaultOf(err))
	f.mu.Unlock()
	s.l.ctrl.queue(&wire.FileEnd{Items: []wire.FileEndItem{{ID: f.e.ID, Abort: reason}}})
}

// fileEnd sends the whole-file checksum, joined from the block sums.
func (s *sender) fileEnd(f *sfile) {
	f.mu.Lock()
	if f.ended {
		f.mu.Unlock()
		return
	}
	f.ended = true
	var crc, ad uint32
	ad = 1
	for i := f.lo; i < f.hi; i++ {
		n := s.blockLen(f, i)
		crc = checksum.CombineCRC32C(crc, f.crcs[i], n)
		if f.adlers != nil {
			ad = checksum.CombineAdler32(ad, f.adlers[i], n)
		}
	}
	f.mu.Unlock()
	s.l.ctrl.queue(&wire.FileEnd{Items: []wire.FileEndItem{{ID: f.e.ID, CRC: crc, Adler32: ad}}})
}

func (s *sender) result(it wire.ResultItem) error {
	f, err := s.file(it.ID)
	if err != nil {
		return err
	}
	fault := s.takeFault(it.ID)
	f.mu.Lock()
	reason := it.Reason
	if !it.OK && f.failed != "" {
		// Given up here: this end's reason, and class.
		reason, fault = f.failed, f.fault
	}
	f.mu.Unlock()
	if it.OK {
		fault = ""
	}
	s.l.fileResult(FileResult{Path: f.e.Path, Size: f.e.Size, OK: it.OK, Skipped: it.Skipped, Reason: reason,
		CRC32C: it.CRC, Adler32: it.Adler32, HasAdler: s.l.opts.Adler32,
		Complete: it.Complete, FileCRC32C: it.FileCRC, FileAdler32: it.FileAdler32, Receipt: s.takeReceipt(it.ID), Fault: fault})
	s.resolve(f)
	return nil
}

// receipt keeps the receiver's receipt of a file for its verdict.
func (s *sender) receipt(m *wire.Receipt) error {
	if _, err := s.file(m.ID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.receipts == nil {
		s.receipts = map[uint32][]byte{}
	}
	s.receipts[m.ID] = m.MAC
	return nil
}

// fault keeps the receiver's class of a file's failure for its verdict.
func (s *sender) fault(m *wire.Fault) error {
	if _, err := s.file(m.ID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults == nil {
		s.faults = map[uint32]retry.Fault{}
	}
	s.faults[m.ID] = wire.FaultOfCode(m.Code)
	return nil
}

// takeFault returns, and forgets, the class of file id's failure ("": the
// receiver did not say).
func (s *sender) takeFault(id uint32) retry.Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults[id]
	delete(s.faults, id)
	return f
}

// takeReceipt returns, and forgets, the receipt of file id (nil: none).
func (s *sender) takeReceipt(id uint32) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.receipts[id]
	delete(s.receipts, id)
	return r
}

func (s *sender) resend(m *wire.Resend) error {
	f, err := s.file(m.ID)
	if err != nil {
		return err
	}
	if m.Index < f.lo || m.Index >= f.hi {
		return fmt.Errorf("%w: resend of block %d of a file sent as blocks %d..%d", wire.ErrMalformed, m.Index, f.lo, f.hi)
	}
	f.mu.Lock()
	if f.resends == nil {
		f.resends = map[uint32]int{}
	}
	f.resends[m.Index]++
	n := f.resends[m.Index]
	f.mu.Unlock()
	if n > maxResends {
		s.abort(f, classed(retry.FaultChecksum, fmt.Errorf("block %d arrived damaged %d times", m.Index, n)))
		return nil
	}
	s.q.pushResend(job{f: f, index: m.Index})
	return nil
}

// acquire opens a file for a stream (shared by all streams while any uses it).
func (s *sender) acquire(f *sfile) (*os.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.f == nil {
		fd, err := f.root.Open(f.src)
		if err != nil {
			return nil, cleanPathError(err)
		}
		if err := sameFile(fd, f.e); err != nil {
			fd.Close()
			return nil, err
		}
		f.f = fd
	}
	f.refs++
	return f.f, nil
}

func (f *sfile) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refs--
	if f.refs == 0 && f.f != nil {
		f.f.Close()
		f.f = nil
	}
}

// smallBlock is the size up to which a block is read into memory and sent
// with its header in one write; larger ones go by sendfile.
const smallBlock = 256 << 10

// stream sends blocks on one data connection until the queue closes.
func (s *sender) stream(ctx context.Context, d *dataConn) error {
	buf := make([]byte, wire.BlockHeaderSize+int(max(s.l.blockSize, smallBlock)))
	for {
		j, ok := s.q.next()
		if !ok {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var h [wire.BlockHeaderSize]byte
			wire.BlockHeader{Kind: wire.DataEnd}.Put(h[:])
			s.l.deadline(d.conn, true)
			_, err := d.conn.Write(h[:])
			return err
		}
		if err := s.sendBlock(d, j, buf); err != nil {
			if errors.Is(err, errSourceChanged) {
				continue
			}
			return err
		}
	}
}

var errSourceChanged = errors.New("source changed")

func (s *sender) sendBlock(d *dataConn, j job, buf []byte) error {
	f := j.f
	f.mu.Lock()
	gone := f.ended && f.failed != "" || f.resolved // a verdict came: nothing more to send
	f.mu.Unlock()
	if gone {
		return nil
	}
	fd, err := s.acquire(f)
	if err != nil {
		s.abort(f, err)
		return errSourceChanged
	}
	defer f.release()
	off := int64(j.index) * s.l.blockSize
	n := s.blockLen(f, j.index)

	h := wire.BlockHeader{Kind: wire.DataBlock, File: f.e.ID, Index: j.index, Length: uint32(n)}
	var crc, ad uint32
	hole := isHole(fd, off, n)
	t0 := time.Now()
	switch {
	case hole:
		h.Kind = wire.DataHole
		crc = checksum.ZerosCRC32C(n)
		if f.adlers != nil {
			ad = adlerZeros(n)
		}
	case n <= smallBlock || d.files == nil:
		p := buf[wire.BlockHeaderSize : wire.BlockHeaderSize+int(n)]
		if _, err := fd.ReadAt(p, off); err != nil {
			s.abort(f, fmt.Errorf("read: %w", err))
			return errSourceChanged
		}
		crc = checksum.CRC32C(p)
		if f.adlers != nil {
			ad = adler32.Checksum(p)
		}
	default:
		// Sum the block through a small buffer that stays in cache, then
		// let sendfile move the pages themselves.
		c := buf[wire.BlockHeaderSize : wire.BlockHeaderSize+smallBlock]
		var a uint32 = 1
		for o := int64(0); o < n; {
			k := min(int64(len(c)), n-o)
			if _, err := fd.ReadAt(c[:k], off+o); err != nil {
				s.abort(f, fmt.Errorf("read: %w", err))
				return errSourceChanged
			}
			crc = checksum.UpdateCRC32C(crc, c[:k])
			if f.adlers != nil {
				a = adler32Update(a, c[:k])
			}
			o += k
		}
		ad = a
	}
	s.ioWait.Add(int64(time.Since(t0)))
	h.CRC = crc
	h.Put(buf[:wire.BlockHeaderSize])

	t1 := time.Now()
	s.l.deadline(d.conn, true)
	switch {
	case hole:
		_, err = d.conn.Write(buf[:wire.BlockHeaderSize])
	case n <= smallBlock || d.files == nil:
		_, err = d.conn.Write(buf[:wire.BlockHeaderSize+int(n)])
	default:
		if _, err = d.conn.Write(buf[:wire.BlockHeaderSize]); err == nil {
			_, err = sendFileDeadline(s.l, d, fd, off, n)
		}
	}
	s.netWait.Add(int64(time.Since(t1)))
	if err != nil {
		return err
	}
	if !hole {
		d.sent.Add(n)
		s.l.prog.BytesMoved.Add(n)
	} else {
		s.l.prog.BytesHoles.Add(n)
	}

	f.mu.Lock()
	f.crcs[j.index] = crc
	if f.adlers != nil {
		f.adlers[j.index] = ad
	}
	isResend := f.resends != nil && f.resends[j.index] > 0
	if !isResend {
		f.left--
	}
	last := f.left == 0 && !isResend
	f.mu.Unlock()
	if last {
		if err := sameFile(fd, f.e); err != nil {
			s.abort(f, err)
			return nil
		}
		s.fileEnd(f)
	}
	return nil
}

// sendFileDeadline sends without a copy (sendfile) in slices, re-arming the stall
// deadline as each slice goes, so a slow but moving link is not cut off.
func sendFileDeadline(l *link, d *dataConn, fd *os.File, off, n int64) (int64, error) {
	const slice = 256 << 10
	var done int64
	for done < n {
		k := min(slice, n-done)
		l.deadline(d.conn, true)
		w, err := d.files.SendFile(fd, off+done, k)
		done += w
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// isHole reports whether [off, off+n) lies wholly in a hole of a sparse file.
func isHole(fd *os.File, off, n int64) bool {
	next, err := unix.Seek(int(fd.Fd()), off, unix.SEEK_DATA)
	if err != nil {
		// ENXIO: no data at or after off. Anything else: assume data.
		return errors.Is(err, unix.ENXIO)
	}
	return next >= off+n
}

func adler32Update(a uint32, p []byte) uint32 {
	return checksum.CombineAdler32(a, adler32.Checksum(p), int64(len(p)))
}

var zeroChunk = make([]byte, 64<<10)

func adlerZeros(n int64) uint32 {
	a := uint32(1)
	for n > 0 {
		k := min(n, int64(len(zeroChunk)))
		a = adler32Update(a, zeroChunk[:k])
		n -= k
	}
	return a
}

// cleanPathError strips the Go operation prefix from a path error so the
// user sees "no such file or directory" with the path they gave.
func cleanPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if strings.Contains(pe.Err.Error(), "path escapes") {
			return classed(retry.FaultPermission, errors.New("path leads outside the served directory"))
		}
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
